/* Starting a child without copying the caller.
 *
 * fork() from a large, many-threaded harness copies its page tables and then makes every one
 * of its threads take copy-on-write faults and TLB shootdowns. Here the child shares the
 * caller's memory until it execs (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does) and
 * runs on a stack of its own; the calling thread sleeps meanwhile. All signals are blocked
 * across the clone so none of the caller's handlers can run in the child; the child function
 * resets them before it unblocks.
 *
 * On cgroup v2 the child is born in its cgroup (clone3 with CLONE_INTO_CGROUP): moving a
 * running process by writing cgroup.procs takes the kernel's threadgroup rwsem for writing,
 * which waits for an RCU grace period and costs milliseconds on a busy machine. glibc has no
 * clone3 wrapper that runs a function on a new stack, so that entry is a few lines of
 * assembly (x86-64 only; elsewhere, and on kernels without clone3, the child is cloned with
 * clone() and joins its cgroup itself).
 *
 * Until it execs, a child holds a copy of every descriptor the process had when it was cloned,
 * other calls' pipe ends included (it closes them first thing, but a busy machine may not run
 * it for a while). Each spawn holds `spawning` for reading across the clone, which returns
 * once the child has execed (CLONE_VFORK); local_spawn_fence takes it for writing, so it
 * returns once no child is in that window. Nothing on an exec's path forks: the subreaper
 * helper and the sink are a program of their own (helper/main.c), started here like a
 * command.
 *
 * The pidfd a caller waits on comes from the clone itself (CLONE_PIDFD), not from a
 * pidfd_open after it: in between, a harness that reaps every child (waitpid(-1)) could reap
 * a command that already ended, and its pid could go to some other process, which a timeout
 * would then kill. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "child.h"
#include "spawn.h"

#define CHILD_STACK (256 * 1024)

#if defined(__x86_64__) && defined(CLONE_INTO_CGROUP)
#define HAVE_CLONE3_ENTRY 1
/* long clone3_entry(struct clone_args *args, size_t size, int (*fn)(void *), void *arg):
 * the raw clone3 system call (435); in the child, fn(arg) on the new stack, then exit. The
 * syscall instruction keeps rdx and r8, so fn and arg reach the child in them. Returns the
 * pid or -errno in the parent. */
long local_clone3_entry(struct clone_args *args, size_t size, int (*fn)(void *), void *arg);
__asm__(".pushsection .text\n"
	".globl local_clone3_entry\n"
	".hidden local_clone3_entry\n"
	".type local_clone3_entry, @function\n"
	"local_clone3_entry:\n"
	"	mov %rcx, %r8\n"
	"	mov $435, %eax\n"
	"	syscall\n"
	"	test %rax, %rax\n"
	"	jz 1f\n"
	"	ret\n"
	"1:	xor %ebp, %ebp\n"
	"	mov %r8, %rdi\n"
	"	call *%rdx\n"
	"	mov %eax, %edi\n"
	"	mov $60, %eax\n"
	"	syscall\n"
	"	hlt\n"
	".size local_clone3_entry, .-local_clone3_entry\n"
	".popsection\n");
#endif

/* Child stacks are kept for the next spawn: an mmap and a munmap per command cost a TLB
 * shootdown across every CPU the caller's threads run on. A stack is free again once clone
 * returns (the child has execed or exited). At most STACKS_KEPT wait here; the module's
 * destructor unmaps them. */
#define STACKS_KEPT 32

/* A child's frames are never popped (it execs or exits), so under AddressSanitizer a kept
 * stack still carries their redzones' poison, which the next child's frames, laid out
 * otherwise, would trip over. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define STACK_CLEAN(s) ASAN_UNPOISON_MEMORY_REGION((s), CHILD_STACK)
#else
#define STACK_CLEAN(s) ((void)(s))
#endif
static pthread_mutex_t stacks_lock = PTHREAD_MUTEX_INITIALIZER;
static void *stacks[STACKS_KEPT];
static size_t n_stacks;

static void *stack_take(void)
{
	void *s = NULL;
	pthread_mutex_lock(&stacks_lock);
	if (n_stacks)
		s = stacks[--n_stacks];
	pthread_mutex_unlock(&stacks_lock);
	if (s) {
		STACK_CLEAN(s);
		return s;
	}
	s = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
	return s == MAP_FAILED ? NULL : s;
}

static void stack_give(void *s)
{
	pthread_mutex_lock(&stacks_lock);
	int kept = n_stacks < STACKS_KEPT;
	if (kept)
		stacks[n_stacks++] = s;
	pthread_mutex_unlock(&stacks_lock);
	if (!kept)
		munmap(s, CHILD_STACK);
}

__attribute__((destructor)) static void stacks_unmap(void)
{
	pthread_mutex_lock(&stacks_lock);
	while (n_stacks)
		munmap(stacks[--n_stacks], CHILD_STACK);
	pthread_mutex_unlock(&stacks_lock);
}

/* 1 until clone3 with CLONE_INTO_CGROUP has been refused once by this kernel. */
static atomic_int clone3_works = 1;

/* Writers first: a fence must not wait behind a stream of new spawns. */
static pthread_rwlock_t spawning = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

/* In a forked child: the spawns in flight are the parent's threads', and so are the stacks
 * they took. The list of kept stacks may have been mid-change; the child starts it anew (the
 * copies of those stacks stay mapped, unused). */
void local_spawn_fork_child(void)
{
	pthread_rwlock_t fresh = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
	spawning = fresh;
	pthread_mutex_init(&stacks_lock, NULL);
	n_stacks = 0;
}

void local_spawn_fence(void)
{
	pthread_rwlock_wrlock(&spawning);
	pthread_rwlock_unlock(&spawning);
}

pid_t local_spawn(int (*fn)(void *), void *arg, int cgroup_fd, int *placed, int *pidfd)
{
	*placed = 0;
	if (pidfd)
		*pidfd = -1;
	void *stack = stack_take();
	if (!stack)
		return -1;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_rwlock_rdlock(&spawning);
	pid_t pid = -1;
	int saved = 0;
#ifdef HAVE_CLONE3_ENTRY
	if (cgroup_fd >= 0 && atomic_load(&clone3_works)) {
		struct clone_args ca;
		memset(&ca, 0, sizeof(ca));
		ca.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP | (pidfd ? CLONE_PIDFD : 0);
		ca.pidfd = (uint64_t)(uintptr_t)pidfd;
		ca.exit_signal = SIGCHLD;
		ca.stack = (uint64_t)(uintptr_t)stack;
		ca.stack_size = CHILD_STACK;
		ca.cgroup = (uint64_t)cgroup_fd;
		*placed = 1; /* read by the child before it would join by itself */
		long r = local_clone3_entry(&ca, sizeof(ca), fn, arg);
		if (r > 0) {
			pid = (pid_t)r;
		} else {
			*placed = 0;
			saved = (int)-r;
			/* Old kernel, or a cgroup v1 fd: use clone and cgroup.procs from now on. */
			if (saved == ENOSYS || saved == E2BIG || saved == EINVAL || saved == EBADF)
				atomic_store(&clone3_works, 0);
			else
				goto done;
		}
	}
#endif
	if (pid < 0) {
		/* A kernel before 5.2 ignores CLONE_PIDFD here, and *pidfd stays -1. */
		int flags = CLONE_VM | CLONE_VFORK | SIGCHLD | (pidfd ? CLONE_PIDFD : 0);
		pid = clone(fn, (char *)stack + CHILD_STACK, flags, arg, pidfd);
		saved = errno;
	}
#ifdef HAVE_CLONE3_ENTRY
done:
#endif
	pthread_rwlock_unlock(&spawning);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	stack_give(stack);
	errno = saved;
	return pid;
}

/* In the child: the descriptors into place, then the exec. The ones given move above the
 * layout first, since any of them may sit on a number of it. */
static int program_entry(void *arg)
{
	const local_program *pr = arg;
	local_child_reset_signals();
	if (pr->pdeathsig)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	int report = pr->report >= 0 ? pr->fds[pr->report] : -1;
	int hi[LOCAL_PROGRAM_FDS];
	for (int i = 0; i < pr->n_fds; i++) {
		hi[i] = -1;
		if (pr->fds[i] >= 0 && (hi[i] = fcntl(pr->fds[i], F_DUPFD, LOCAL_PROGRAM_FDS)) < 0)
			goto fail;
	}
	if (pr->report >= 0)
		report = hi[pr->report];
	for (int i = 0; i < pr->n_fds; i++) {
		if (hi[i] < 0)
			close(i);
		else if (dup2(hi[i], i) < 0)
			goto fail;
	}
	report = pr->report;
	syscall(SYS_close_range, (unsigned)pr->n_fds, ~0u, 0);
	local_child_restore_nofile();
	execve(pr->exe, pr->argv, pr->envp);
fail:
	if (report >= 0 && pr->failed)
		pr->failed(report, errno);
	_exit(127);
}

pid_t local_spawn_program(const local_program *prog, int *pidfd)
{
	int placed;
	return local_spawn(program_entry, (void *)prog, -1, &placed, pidfd);
}

/* sbx-local-init: builds an isolated sandbox and stays its PID 1 (ns.c).
 *
 * The plugin starts it the way it starts a command (a child that borrows the host's memory
 * until it execs), so no copy of the host ever exists: a fork of a harness of gigabytes
 * copies its page tables and leaves every page it writes afterwards to fault once. Static:
 * it pivots into an image's root, which may have no C library, or another one.
 *
 * It gets its descriptors at fixed numbers (the ones absent are closed) and no environment:
 *   0 1 2   /dev/null
 *   3       report pipe: init_msg records (init_proto.h)
 *   4       the plan: an init_spec and its mount ops
 *   5       the sandbox's v2 kill cgroup folder, to be born in
 *   6       that cgroup's cgroup.procs (v1, or where clone3 cannot place the init)
 *   7 8 9   the limit cgroups' cgroup.procs
 * As the helper it unshares the namespaces, maps the user ids (with a user namespace), forks
 * the init (born in the new PID namespace) and reports its pid. The init joins the cgroups,
 * builds the mount table, pivots into it, reports ready and waits: SIGCHLD ignored, so the
 * kernel reaps every orphan. Killing it ends the sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../init_proto.h"
#include "../mounts.h"

#define FD_REPORT 3
#define FD_PLAN   4
#define FD_CG     5
#define FD_PROCS  6
#define N_PROCS   4

static void send_msg(int kind, int stage, int e, int pid, size_t op)
{
	init_msg m = {kind, stage, e, pid, op};
	ssize_t w = write(FD_REPORT, &m, sizeof(m));
	(void)w;
}

static void fail(int stage, int e, size_t op)
{
	send_msg(MSG_FAIL, stage, e, 0, op);
	_exit(1);
}

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		fail(STAGE_NET, errno, 0);
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		fail(STAGE_NET, errno, 0);
	close(s);
}

static int write_proc_self(const char *name, const char *text)
{
	char path[64] = "/proc/self/";
	size_t k = strlen(path), n = strlen(name), len = strlen(text);
	memcpy(path + k, name, n + 1);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int e = write(fd, text, len) == (ssize_t)len ? 0 : errno;
	close(fd);
	return e;
}

/* Right after unsharing the user namespace: uid and gid 0 inside are sbx's. */
static int map_ids(const init_spec *sp)
{
	int e = write_proc_self("setgroups", "deny");
	if (e == 0)
		e = write_proc_self("uid_map", sp->uid_map);
	if (e == 0)
		e = write_proc_self("gid_map", sp->gid_map);
	return e;
}

/* PID 1 of the sandbox. Never returns. */
static void run_init(const init_spec *sp, const local_mounts *m, int placed)
{
	close(FD_CG);
	for (int i = 0; i < N_PROCS; i++) {
		if (!is_open(FD_PROCS + i))
			continue;
		if (!(placed && i == 0) && write(FD_PROCS + i, "0", 1) != 1)
			fail(STAGE_CGROUP, errno, 0);
		close(FD_PROCS + i);
	}
	/* The hostname is cosmetic: a sandbox runs without it (the result is read only so that
	 * _FORTIFY_SOURCE builds accept the call). */
	int hostname_set = sethostname(sp->hostname, strlen(sp->hostname));
	(void)hostname_set;
	if (sp->unshare_flags & CLONE_NEWNET)
		loopback_up();
	size_t op = 0;
	int held = -1;
	int e = local_mounts_apply(m, &op, &held);
	if (e != 0)
		fail(STAGE_MOUNT, e, op);
	if (held >= 0 && held != LOCAL_RW_FD) {
		dup2(held, LOCAL_RW_FD);
		close(held);
	}
	close(FD_PLAN);
	/* Ignored SIGCHLD: the kernel reaps every orphan reparented to us. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGCHLD, &sa, NULL);
	send_msg(MSG_READY, 0, 0, 0, 0);
	close(FD_REPORT);
	for (;;)
		pause();
}

int main(void)
{
	prctl(PR_SET_NAME, "sbx-init", 0, 0, 0);
	struct stat sb;
	if (fstat(FD_PLAN, &sb) != 0 || (size_t)sb.st_size < sizeof(init_spec))
		fail(STAGE_PLAN, fstat(FD_PLAN, &sb) != 0 ? errno : EINVAL, 0);
	const unsigned char *base =
	    mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, FD_PLAN, 0);
	if (base == MAP_FAILED)
		fail(STAGE_PLAN, errno, 0);
	const init_spec *sp = (const init_spec *)base;
	if (sp->n_ops > ((size_t)sb.st_size - sizeof(init_spec)) / sizeof(local_mount_op))
		fail(STAGE_PLAN, EINVAL, 0);
	local_mounts m;
	memset(&m, 0, sizeof(m));
	m.ops = (local_mount_op *)(uintptr_t)(base + sizeof(init_spec));
	m.n = m.cap = sp->n_ops;
	memcpy(m.newroot, sp->newroot, sizeof(m.newroot));
	setsid();
	if (unshare(sp->unshare_flags) != 0)
		fail(STAGE_UNSHARE, errno, 0);
	int me = sp->uid_map[0] ? map_ids(sp) : 0;
	if (me != 0)
		fail(STAGE_USERNS, me, 0);
	pid_t init = -1;
	if (is_open(FD_CG)) {
		/* Born in the kill cgroup: moving a running process there by cgroup.procs waits
		 * for an RCU grace period, 5-40 ms on a busy machine. */
		struct clone_args ca;
		memset(&ca, 0, sizeof(ca));
		ca.flags = CLONE_INTO_CGROUP;
		ca.exit_signal = SIGCHLD;
		ca.cgroup = (uint64_t)FD_CG;
		long r = syscall(SYS_clone3, &ca, sizeof(ca));
		if (r == 0)
			run_init(sp, &m, 1);
		init = (pid_t)r;
	}
	if (init < 0)
		init = fork();
	if (init < 0)
		fail(STAGE_FORK, errno, 0);
	if (init == 0)
		run_init(sp, &m, 0);
	send_msg(MSG_PID, 0, 0, (int)init, 0);
	return 0;
}

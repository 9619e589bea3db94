/* spawn.c: a child that shares the caller's memory until it execs. */
#ifndef SBX_LOCAL_SPAWN_H
#define SBX_LOCAL_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

/* Runs fn(arg) in a child that shares the caller's memory until it execs or exits (vfork
 * semantics, own stack, signals blocked), born in the cgroup v2 folder open at cgroup_fd when
 * that is not -1 and the kernel can; *placed says whether it was (set before the child runs).
 * With pidfd not NULL, *pidfd gets a pidfd of the child made by the clone itself, so it is
 * the child's even if someone else reaps it first, or -1 where the kernel has none (before
 * 5.2; the caller may then pidfd_open). Returns the child's pid, or -1 with errno. */
pid_t local_spawn(int (*fn)(void *), void *arg, int cgroup_fd, int *placed, int *pidfd);

/* Returns once every child local_spawn started before the call has execed or exited, and so
 * has closed the copies of this process's descriptors it was born with. A command's output
 * pipes still open after it exited are then held by its own leftovers only, not by a child
 * another thread was starting at that moment. */
void local_spawn_fence(void);

/* For pthread_atfork (local.c): resets the spawn lock and the kept stacks in a forked child,
 * where the threads that held them are not. */
void local_spawn_fork_child(void);

/* A program of this plugin's (sbx-local-exec, sbx-local-init) started like a command: the
 * child borrows the caller's memory until it execs, with the descriptors given at fixed
 * numbers and everything else closed. */
#define LOCAL_PROGRAM_FDS 12
typedef struct local_program {
	const char *exe;
	char *const *argv;
	char *const *envp;
	int fds[LOCAL_PROGRAM_FDS]; /* what it gets as 0, 1, 2, ... (-1: that number closed) */
	int n_fds;  /* how many of fds are given; the numbers above them are closed */
	int report; /* which of those reports a failed exec (-1: none) */
	void (*failed)(int fd, int err); /* writes that report: system calls only */
	int pdeathsig;                   /* SIGKILLed when the calling thread ends */
} local_program;
/* Returns the program's pid once it has execed (or exited), or -1 with errno; pidfd as for
 * local_spawn. */
pid_t local_spawn_program(const local_program *prog, int *pidfd);

#endif

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
 * Returns the child's pid, or -1 with errno. */
pid_t local_spawn(int (*fn)(void *), void *arg, int cgroup_fd, int *placed);

/* Returns once every child local_spawn started before the call has execed or exited, and so
 * has closed the copies of this process's descriptors it was born with. A command's output
 * pipes still open after it exited are then held by its own leftovers only, not by a child
 * another thread was starting at that moment. */
void local_spawn_fence(void);

#endif

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

#endif

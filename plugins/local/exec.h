/* exec.c: one command in a sandbox. */
#ifndef SBX_LOCAL_EXEC_H
#define SBX_LOCAL_EXEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

int local_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		  sbx_error *err);
/* Kills processes whose environment names this sandbox (the tracking used when no cgroup). */
void local_kill_tagged(const char *id);
/* 1 when no exec under the subreaper can have left a process in the sandbox at folder dir:
 * its running/ folder is there and empty (and is removed). 0: search by its tag. */
int local_exec_none_left(const char *dir);
/* Waits for the subreaper helpers whose exit was left to reap later (fini). */
void local_exec_reap_all(void);
/* For pthread_atfork (local.c): in a forked child, forgets the parent's helpers and resets
 * the locks another thread of the parent may have held. */
void local_exec_fork_child(void);

#endif

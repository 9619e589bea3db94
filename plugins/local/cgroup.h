/* cgroup.c: per-sandbox and per-exec cgroups, the kill mechanism. */
#ifndef SBX_LOCAL_CGROUP_H
#define SBX_LOCAL_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

/* Creates (if missing) the sandbox cgroup, SBX_OK when the mechanism has none. */
int local_cg_sandbox(const local_state *st, const char *id, sbx_error *err);
/* A per-exec cgroup below the sandbox's, one this process kept (with reuse) or a new one;
 * its path goes into buf. */
int local_cg_exec_new(const local_state *st, const char *id, int reuse, char *buf, size_t cap,
		      sbx_error *err);
/* The exec whose cgroup is at path has ended: keeps the cgroup for this process's next exec
 * in the sandbox when it is empty and clean (cgroup v2) and was not killed, removes it
 * otherwise. */
void local_cg_exec_done(const local_state *st, const char *path, int killed);
/* For pthread_atfork (local.c): a forked child forgets the kept cgroups, the parent's. */
void local_cg_fork_child(void);
/* Removes the kept exec cgroups of sandbox id (NULL: of every sandbox of this root). */
void local_cg_spares_drop(const local_state *st, const char *id);
/* Kills every process in the cgroup at `path` (and below) and waits briefly until it is
 * empty. Returns 0 when the cgroup is empty afterwards. */
int local_cg_kill(const local_state *st, const char *path);
/* Removes the cgroup at path and everything below (after local_cg_kill). */
void local_cg_remove(const char *path);
/* Freezes (frozen=1) or thaws the sandbox cgroup. */
int local_cg_freeze(const local_state *st, const char *id, int frozen, sbx_error *err);
/* 1 frozen, 0 not, -1 no cgroup. */
int local_cg_frozen(const local_state *st, const char *id);
/* Path of the sandbox cgroup into buf; SBX_E_UNSUPPORTED for the subreaper. */
int local_cg_sandbox_path(const local_state *st, const char *id, char *buf, size_t cap);
/* Picks the mechanism: `wanted` is "auto" or a mechanism name. */
/* gc's sweep: this root's cgroups whose sandbox folder is gone, namespaces of roots that no
 * longer exist, and empty cgroups of the layout before namespaces are removed. */
void local_cg_sweep(const local_state *st);
/* At unload: removes this root's cgroup folder if no sandbox cgroup is left in it, and its
 * record in the namespace registry with it; a root used once leaves nothing behind. */
void local_cg_release(const local_state *st);
int local_cg_detect(local_state *st, const char *wanted, sbx_error *err);

/* "cgroup-v2", "cgroup-v1-freezer" or "subreaper". */
const char *local_mechanism_name(int mechanism);

#endif

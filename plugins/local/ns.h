/* ns.c: the isolated level: namespaces held by a per-sandbox init. */
#ifndef SBX_LOCAL_NS_H
#define SBX_LOCAL_NS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "child.h"
#include "state.h"

/* Reads the isolation keys; probes what the machine supports. */
int local_iso_init(local_state *st, const sbx_config *cfg, sbx_error *err);
void local_iso_fini(local_state *st);
/* Starts the sandbox's init (called by create once the folder is in place). */
int local_iso_create(const local_state *st, const char *id, const sbx_create_spec *spec,
		     sbx_error *err);
/* The pid of the live init of the sandbox in dir, 0 when none runs. */
long local_iso_init_pid(const char *dir);
/* Kills the init and removes the limit cgroups. */
void local_iso_destroy(const local_state *st, const char *id);
/* JSON members for info: "isolation":..., "levels":{...} (no braces around). */
int local_iso_info(const local_state *st, char *buf, size_t cap);

/* Fills out with the path of the program `name` beside this plugin's shared object (its
 * helpers: sbx-local-init, sbx-local-exec). Returns 0, or -1 with out "" when it is not there
 * or not executable. */
int local_beside_plugin(const char *name, char *out, size_t cap);
/* Parent, before fork: makes sure the init runs (restarting it after a reboot) and opens
 * what the child needs. */
int local_join_prepare(const local_state *st, const char *id, local_join *j, sbx_error *err);
/* Parent, around fork: children of this thread are born in the sandbox's PID namespace. */
int local_join_fork_begin(const local_join *j);
void local_join_fork_end(const local_join *j);
/* The image's environment saved at create (NUL-separated "K=V", from malloc), NULL with
 * *len 0 when the sandbox has none. */
char *local_join_image_env(const local_join *j, size_t *len);
/* Parent, after the command ended: 1 when the sandbox's memory cgroup OOM-killed during it. */
int local_join_oom(const local_join *j);
void local_join_close(local_join *j);

#endif

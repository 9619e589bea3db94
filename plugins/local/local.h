/* Private interfaces between the files of the `local` plugin. Nothing here is exported: the
 * version script keeps sbx_plugin_register the only visible symbol. */
#ifndef SBX_LOCAL_H
#define SBX_LOCAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#define LOCAL_ID_LEN 16 /* hex digits of a backend id */

/* How a command's whole process tree is killed. */
#define LOCAL_KILL_CGROUP_V2 1
#define LOCAL_KILL_FREEZER   2
#define LOCAL_KILL_SUBREAPER 3

typedef struct local_state {
	char root[1024];      /* folder holding <id>/work and <id>/meta.json */
	char cg_root[512];    /* <mount>/sbx/<root hash>, holding <id>/... ("" for the subreaper) */
	int kill_mechanism;   /* LOCAL_KILL_* */
	int inherit_env;      /* start each exec from the host process environment */
	int drain_ms;         /* grace for a background child holding the output after exit */
	char share_dir[1024]; /* "" or a host folder every sandbox's work dir links to */
	int use_openat2;      /* 0 after openat2 reported ENOSYS (or when forced off) */
} local_state;

/* The services table, set by sbx_plugin_register. */
extern const sbx_host_api *sbx__local_host;

const char *sbx__local_mechanism_name(int mechanism);

/* Checks `id` and writes <root>/<id>[/suffix] into buf. SBX_E_BAD_ID for a malformed id. */
int sbx__local_path(const local_state *st, const char *id, const char *suffix, char *buf,
		    size_t cap, sbx_error *err);

/* ---- cgroup.c: per-sandbox and per-exec cgroups */
/* Creates (if missing) the sandbox cgroup, SBX_OK when the mechanism has none. */
int sbx__local_cg_sandbox(const local_state *st, const char *id, sbx_error *err);
/* Creates a per-exec cgroup below the sandbox's; its path goes into buf. */
int sbx__local_cg_exec_new(const local_state *st, const char *id, char *buf, size_t cap,
			   sbx_error *err);
/* Kills every process in the cgroup at `path` (and below) and waits briefly until it is
 * empty. Returns 0 when the cgroup is empty afterwards. */
int sbx__local_cg_kill(const local_state *st, const char *path);
/* Removes the cgroup at path and everything below (after sbx__local_cg_kill). */
void sbx__local_cg_remove(const char *path);
/* Freezes (frozen=1) or thaws the sandbox cgroup. */
int sbx__local_cg_freeze(const local_state *st, const char *id, int frozen, sbx_error *err);
/* 1 frozen, 0 not, -1 no cgroup. */
int sbx__local_cg_frozen(const local_state *st, const char *id);
/* Path of the sandbox cgroup into buf; SBX_E_UNSUPPORTED for the subreaper. */
int sbx__local_cg_sandbox_path(const local_state *st, const char *id, char *buf, size_t cap);
/* Picks the mechanism: `wanted` is "auto" or a mechanism name. */
/* gc's sweep: this root's cgroups whose sandbox folder is gone, namespaces of roots that no
 * longer exist, and empty cgroups of the layout before namespaces are removed. */
void sbx__local_cg_sweep(const local_state *st);
int sbx__local_cg_detect(local_state *st, const char *wanted, sbx_error *err);

/* ---- exec.c */
int sbx__local_execute(void *state, const char *id, const sbx_exec_request *req,
		       sbx_exec_outcome *out, sbx_error *err);
/* Kills processes whose environment names this sandbox (the tracking used when no cgroup). */
void sbx__local_kill_tagged(const char *id);

/* ---- spawn.c */
/* Runs fn(arg) in a child that shares the caller's memory until it execs or exits (vfork
 * semantics, own stack, signals blocked), born in the cgroup v2 folder open at cgroup_fd when
 * that is not -1 and the kernel can; *placed says whether it was (set before the child runs).
 * Returns the child's pid, or -1 with errno. */
pid_t sbx__local_spawn(int (*fn)(void *), void *arg, int cgroup_fd, int *placed);

/* ---- files.c */
int sbx__local_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
			 sbx_error *err);
int sbx__local_write_file(void *state, const char *id, const char *path, const void *data,
			  size_t len, uint32_t mode, sbx_error *err);
int sbx__local_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
			 sbx_error *err);
int sbx__local_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
			size_t *n, sbx_error *err);
int sbx__local_make_dir(void *state, const char *id, const char *path, uint32_t parents,
			sbx_error *err);
int sbx__local_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
			   sbx_error *err);
/* Removes the folder at `path` and all below it without following symlinks. */
int sbx__local_rmtree(const char *path);

/* ---- meta.c: <root>/<id>/meta.json */
/* Writes created time, labels and env. */
/* Writes DIR/meta.json (labels, env, created time) atomically. */
int sbx__local_meta_write(const char *dir, const sbx_create_spec *spec, sbx_error *err);
/* Environment saved at create: a NULL-terminated array of "K=V" strings from malloc (free
 * with sbx__local_strv_free); *out NULL when there is none. */
int sbx__local_meta_env(const local_state *st, const char *id, char ***out, sbx_error *err);
/* 1 when the sandbox carries label key=value. */
int sbx__local_meta_has_label(const local_state *st, const char *id, const char *key,
			      const char *value);
void sbx__local_strv_free(char **v);

#endif

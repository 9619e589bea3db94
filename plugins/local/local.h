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

/* Isolation levels. */
#define LOCAL_ISO_PLAIN      0
#define LOCAL_ISO_NAMESPACES 1

/* Root filesystem sources of the isolated level. */
#define LOCAL_ROOTFS_HOST  1
#define LOCAL_ROOTFS_DIR   2
#define LOCAL_ROOTFS_IMAGE 3

typedef struct local_iso {
	int level;              /* LOCAL_ISO_* */
	int userns;             /* sandboxes get a user namespace (sbx is not root) */
	int via_helper;         /* execs enter through a helper process (no cgroup to kill by, or
				  a user namespace the host's threads cannot join) */
	int rootfs;             /* LOCAL_ROOTFS_* */
	char rootfs_dir[1024];  /* rootfs: DIR */
	char image[512];        /* image: NAME (the config's default; a create may name another) */
	char image_dir[1024];   /* image_archives: folder of archives NAME is looked up in */
	char image_cache[1024]; /* image_cache: where archives are unpacked (image.c) */
	int network_host;       /* network: host (else a network namespace with loopback only) */
	int64_t memory;         /* bytes, 0 none */
	int64_t pids;           /* 0 none */
	int64_t cpu_quota_us;   /* per 100 ms period, 0 none */
	int64_t disk;           /* cap on the overlay's upper dir in bytes, 0 none */
	int cap_last;           /* highest capability number of this kernel */
	int self_pidns;         /* this process's pid namespace, to return to after a fork */
	char why_not[256];      /* why the isolated level cannot run here ("" when it can) */
	char mem_cg[512];       /* cgroup folders holding the limit cgroups ("" none) */
	char pids_cg[512];
	char cpu_cg[512];
	int limits_v2; /* the limits live in the kill cgroup itself (v2) */
} local_iso;

typedef struct local_state {
	char root[1024];      /* folder holding <id>/work and <id>/meta.json */
	char cg_root[512];    /* <mount>/sbx/<root hash>, holding <id>/... ("" for the subreaper) */
	int kill_mechanism;   /* LOCAL_KILL_* */
	int inherit_env;      /* start each exec from the host process environment */
	int drain_ms;         /* grace for a background child holding the output after exit */
	char share_dir[1024]; /* "" or a host folder every sandbox's work dir links to */
	int use_openat2;      /* 0 after openat2 reported ENOSYS (or when forced off) */
	local_iso iso;        /* the isolated level's settings (ns.c) */
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
/* The same for `name` in the folder open at dfd; 0 or an errno (ENOENT when absent). */
int sbx__local_rmtree_at(int dfd, const char *name);

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

/* ---- ns.c: the isolated level (namespaces held by a per-sandbox init) */
/* Reads the isolation keys; probes what the machine supports. */
int sbx__local_iso_init(local_state *st, const sbx_config *cfg, sbx_error *err);
void sbx__local_iso_fini(local_state *st);
/* Starts the sandbox's init (called by create once the folder is in place). */
int sbx__local_iso_create(const local_state *st, const char *id, const sbx_create_spec *spec,
			  sbx_error *err);
/* The pid of the live init of the sandbox in dir, 0 when none runs. */
long sbx__local_iso_init_pid(const char *dir);
/* Kills the init and removes the limit cgroups. */
void sbx__local_iso_destroy(const local_state *st, const char *id);
/* JSON members for info: "isolation":..., "levels":{...} (no braces around). */
int sbx__local_iso_info(const local_state *st, char *buf, size_t cap);

/* What an exec needs to join a sandbox: prepared by the parent, used by the child. */
#define LOCAL_JOIN_PROCS 3
typedef struct local_join {
	int active;                  /* 0: the plain level, nothing to join */
	int via_helper;              /* the exec's helper enters (sbx__local_join_helper) */
	int pidfd;                   /* the sandbox's init */
	int ns_flags;                /* namespaces the child enters through pidfd */
	int helper_flags;            /* namespaces the helper enters, its children's PID one too */
	int procs[LOCAL_JOIN_PROCS]; /* limit cgroups' cgroup.procs to join (-1 none) */
	int cap_last;
	int self_pidns;
	int64_t oom_before; /* the memory cgroup's OOM kill count before the exec */
	char oom_file[600];
	char dir[1200];  /* the sandbox's folder */
	char root[1100]; /* its lower tree (rootfs: DIR, image), "" for rootfs: host */
} local_join;
/* Parent, before fork: makes sure the init runs (restarting it after a reboot) and opens
 * what the child needs. */
int sbx__local_join_prepare(const local_state *st, const char *id, local_join *j, sbx_error *err);
/* Parent, around fork: children of this thread are born in the sandbox's PID namespace. */
int sbx__local_join_fork_begin(const local_join *j);
void sbx__local_join_fork_end(const local_join *j);
/* The exec's helper (async-signal-safe, a single-threaded process): enters the sandbox's
 * namespaces, its user namespace first where there is one, so the helper's children are born
 * in its PID namespace. Returns 0 or an errno. */
int sbx__local_join_helper(const local_join *j);
/* Child (async-signal-safe): enters the namespaces (unless its helper did) and the limit
 * cgroups and drops every capability. Returns 0 or an errno. */
int sbx__local_join_child(const local_join *j);
/* A process the sandbox can see (its init, an exec's helper), forked from the host: blanks
 * its copies of the host's command line and environment (which may hold secrets; fields 48
 * to 51 of /proc/self/stat bound them) and takes `name`. System calls only. */
void sbx__local_blank_cmdline(const char *name);
/* The image's environment saved at create (NUL-separated "K=V", from malloc), NULL with
 * *len 0 when the sandbox has none. */
char *sbx__local_join_image_env(const local_join *j, size_t *len);
/* Parent, after the command ended: 1 when the sandbox's memory cgroup OOM-killed during it. */
int sbx__local_join_oom(const local_join *j);
void sbx__local_join_close(local_join *j);

/* ---- rootfs.c: the sandbox's mount table, built by its init before pivot_root */
typedef struct local_mount_op local_mount_op;
typedef struct local_mounts {
	local_mount_op *ops;
	size_t n, cap;
	char newroot[1300];
} local_mounts;
/* Plans the mounts for the sandbox in dir (<root>/<id>); lower is the image or DIR rootfs
 * ("" for rootfs: host), cap the size of a tmpfs for the writable layer (0: on disk). */
int sbx__local_mounts_plan(const char *dir, const char *lower, int64_t cap, local_mounts *m,
			   sbx_error *err);
/* The sandbox's disk cap recorded at create (<dir>/disk), 0 for none. */
int64_t sbx__local_disk_cap(const char *dir);
/* Child (async-signal-safe): performs the plan and pivots into it. 0 or an errno; *failed
 * is the index of the op that failed (m->n for the first step); *held an fd of the capped
 * writable layer (-1 without a cap). */
int sbx__local_mounts_apply(const local_mounts *m, size_t *failed, int *held);
/* The fd at which a sandbox's init keeps its capped writable layer open. */
#define LOCAL_RW_FD 100
/* The path an op works on, for the message about a failed one. */
const char *sbx__local_mounts_path(const local_mounts *m, size_t i);
void sbx__local_mounts_free(local_mounts *m);

/* ---- disk.c: what a sandbox's writable layer uses */
/* Bytes used by the sandbox's writable layer (overlay upper dir, or the private folders of
 * rootfs: host) and its cap (0 none). */
int sbx__local_disk_usage(const local_state *st, const char *id, int64_t *used, int64_t *cap,
			  sbx_error *err);

/* ---- limits.c: memory, pids and cpu cgroups of the isolated level */
int sbx__local_limits_detect(local_state *st);
/* Where limits would go on this machine: "cgroup-v2", "cgroup-v1" or "none". */
const char *sbx__local_limits_kind(const local_state *st);
/* Creates the sandbox's limit cgroups with their limits. */
int sbx__local_limits_create(const local_state *st, const char *id, sbx_error *err);
/* Opens the cgroup.procs files of the sandbox's limit cgroups into procs (-1 for none). */
int sbx__local_limits_open(const local_state *st, const char *id, int *procs, size_t n,
			   sbx_error *err);
/* The memory cgroup's OOM kill count (-1 when unknown) and the file it came from. */
int64_t sbx__local_limits_oom_count(const char *file);
int sbx__local_limits_oom_file(const local_state *st, const char *id, char *buf, size_t cap);
void sbx__local_limits_remove(const local_state *st, const char *id);

/* ---- image.c: image archives unpacked into a content-addressed cache */
/* Resolves `image` to an unpacked root filesystem folder (importing it on first use). */
int sbx__local_image_rootfs(const local_state *st, const char *image, char *buf, size_t cap,
			    sbx_error *err);
/* 1 when this build reads image archives. */
int sbx__local_image_supported(void);
/* Copies the Env of the image whose tree is `rootfs` into the sandbox folder as env.image. */
int sbx__local_image_env_copy(const char *rootfs, const char *sandbox_dir, sbx_error *err);

#endif

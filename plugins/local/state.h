/* The `local` plugin's state and settings, shared by its files. Nothing here is
 * exported: the version script keeps sbx_plugin_register the only visible symbol. */
#ifndef SBX_LOCAL_STATE_H
#define SBX_LOCAL_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>
#include <sbx/support/host.h>

#define LOCAL_ID_LEN 16 /* hex digits of a backend id */

/* <id>/running under the subreaper: a mark per exec that may have left a process (exec.c). */
#define LOCAL_RUNNING_DIR "running"

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
	char init_exe[1024];    /* sbx-local-init: builds each sandbox, stays its init */
	int self_pidns;         /* this process's pid namespace, to return to after a fork */
	char why_not[256];      /* why the isolated level cannot run here ("" when it can) */
	char mem_cg[512];       /* cgroup folders holding the limit cgroups ("" none) */
	char pids_cg[512];
	char cpu_cg[512];
	int limits_v2; /* the limits live in the kill cgroup itself (v2) */
} local_iso;

typedef struct local_state {
	char root[1024];      /* folder holding <id>/work, <id>/meta.json (and <id>/running) */
	char cg_root[512];    /* <mount>/sbx/<root hash>, holding <id>/... ("" for the subreaper) */
	int kill_mechanism;   /* LOCAL_KILL_* */
	int inherit_env;      /* start each exec from the host process environment */
	char **passthrough;   /* env_passthrough: host variables given to commands (or NULL) */
	int drain_ms;         /* grace for a background child holding the output after exit */
	char share_dir[1024]; /* "" or a host folder every sandbox's work dir links to */
	int use_openat2;      /* 0 after openat2 reported ENOSYS (or when forced off) */
	int64_t max_file_bytes; /* the host's cap on a file read */
	char exec_exe[1024];    /* sbx-local-exec: the subreaper helper and the sink ("" none) */
	local_iso iso;          /* the isolated level's settings (ns.c) */
} local_state;

#endif

/* rootfs.c: the sandbox's mount table, built by its init before pivot_root. */
#ifndef SBX_LOCAL_ROOTFS_H
#define SBX_LOCAL_ROOTFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

typedef struct local_mount_op local_mount_op;
typedef struct local_mounts {
	local_mount_op *ops;
	size_t n, cap;
	char newroot[1300];
} local_mounts;
/* Plans the mounts for the sandbox in dir (<root>/<id>); lower is the image or DIR rootfs
 * ("" for rootfs: host), cap the size of a tmpfs for the writable layer (0: on disk). */
int local_mounts_plan(const char *dir, const char *lower, int64_t cap, local_mounts *m,
		      sbx_error *err);
/* The sandbox's disk cap recorded at create (<dir>/disk), 0 for none. */
int64_t local_disk_cap(const char *dir);
/* Child (async-signal-safe): performs the plan and pivots into it. 0 or an errno; *failed
 * is the index of the op that failed (m->n for the first step); *held an fd of the capped
 * writable layer (-1 without a cap). */
int local_mounts_apply(const local_mounts *m, size_t *failed, int *held);
/* The fd at which a sandbox's init keeps its capped writable layer open. */
#define LOCAL_RW_FD 100
/* The path an op works on, for the message about a failed one. */
const char *local_mounts_path(const local_mounts *m, size_t i);
void local_mounts_free(local_mounts *m);

#endif

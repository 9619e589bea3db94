/* The sandbox's mount table, built by its init before pivot_root. */
#ifndef SBX_LOCAL_ROOTFS_H
#define SBX_LOCAL_ROOTFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

typedef struct local_mount_op local_mount_op;
typedef struct local_mounts {
	local_mount_op *ops;
	size_t n, cap;
	char newroot[1300];
} local_mounts;
/* Plans the mounts for the sandbox in dir (<root>/<id>); lower is the image or DIR rootfs
 * ("" for rootfs: host). */
int local_mounts_plan(const local_state *st, const char *dir, const char *lower, local_mounts *m,
		      sbx_error *err);
/* Child (async-signal-safe): performs the plan and pivots into it. 0 or an errno; *failed
 * is the index of the op that failed (m->n for the first step). */
int local_mounts_apply(const local_mounts *m, size_t *failed);
/* The path an op works on, for the message about a failed one. */
const char *local_mounts_path(const local_mounts *m, size_t i);
void local_mounts_free(local_mounts *m);

#endif

/* rootfs.c: the sandbox's mount table, built by its init before pivot_root. */
#ifndef SBX_LOCAL_ROOTFS_H
#define SBX_LOCAL_ROOTFS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "mounts.h"

/* Plans the mounts for the sandbox in dir (<root>/<id>); lower is the image or DIR rootfs
 * ("" for rootfs: host), cap the size of a tmpfs for the writable layer (0: on disk). */
int local_mounts_plan(const char *dir, const char *lower, int64_t cap, local_mounts *m,
		      sbx_error *err);
/* The sandbox's disk cap recorded at create (<dir>/disk), 0 for none. */
int64_t local_disk_cap(const char *dir);
/* The path an op works on, for the message about a failed one. */
const char *local_mounts_path(const local_mounts *m, size_t i);
void local_mounts_free(local_mounts *m);

#endif

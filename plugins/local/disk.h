/* disk.c: what a sandbox's writable layer uses. */
#ifndef SBX_LOCAL_DISK_H
#define SBX_LOCAL_DISK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

/* Bytes used by the sandbox's writable layer (overlay upper dir, or the private folders of
 * rootfs: host) and its cap (0 none). */
int local_disk_usage(const local_state *st, const char *id, int64_t *used, int64_t *cap,
		     sbx_error *err);

#endif

/* Image archives unpacked into a content-addressed cache. */
#ifndef SBX_LOCAL_IMAGE_H
#define SBX_LOCAL_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

/* Resolves `image` to an unpacked root filesystem folder (importing it on first use). */
int local_image_rootfs(const local_state *st, const char *image, char *buf, size_t cap,
		       sbx_error *err);

#endif

/* image.c: image archives unpacked into a content-addressed cache. */
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
/* 1 when this build reads image archives. */
int local_image_supported(void);
/* Copies the Env of the image whose tree is `rootfs` into the sandbox folder as env.image. */
int local_image_env_copy(const char *rootfs, const char *sandbox_dir, sbx_error *err);

#endif

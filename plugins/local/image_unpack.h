/* Applying an image's layers to a folder (image_unpack.c). */
#ifndef SBX_LOCAL_IMAGE_UNPACK_H
#define SBX_LOCAL_IMAGE_UNPACK_H

#include <sbx/plugin.h>

#include "image_read.h"

/* Applies the image's layers, bottom first, to the empty folder `root`, reading them from the
 * archive at path: whiteouts remove what lower layers made, member names that are absolute,
 * hold "..", or go through a symlink refuse the import. */
int local_img_unpack(const char *path, const img_plan *img, const char *root, sbx_error *err);

#endif

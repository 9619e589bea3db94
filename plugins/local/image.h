/* Image archives of the isolated level, between the files that handle them: image.c resolves a
 * name to a cached root filesystem, image_read.c reads what an archive holds, image_unpack.c
 * applies an image's layers to a folder. */
#ifndef SBX_LOCAL_IMAGE_H
#define SBX_LOCAL_IMAGE_H

#include <stddef.h>

#include "local.h"

#define IMG_HEX 64 /* hex digits of a SHA-256 */

/* One image of an archive (`docker save` may hold several). */
typedef struct img_plan {
	char digest[IMG_HEX + 1]; /* SHA-256 of its config: the cache's address */
	char *config;             /* the config JSON */
	size_t config_len;
	char **layers; /* archive member of each layer, bottom first */
	/* Expected SHA-256 (hex) of each layer member's bytes, "" where the archive names none
	 * (a docker save layer is checked against its diff id when it is not compressed). */
	char (*layer_sha)[IMG_HEX + 1];
	char (*diff_id)[IMG_HEX + 1];
	size_t n_layers;
	char **names; /* normalised references ("busybox:latest") */
	size_t n_names;
} img_plan;

typedef struct img_archive {
	img_plan *images;
	size_t n;
} img_archive;

/* Reads the manifests of the docker-archive or OCI archive at path (one pass over its members,
 * the layers' bytes skipped). */
int sbx__img_read(const char *path, img_archive *out, sbx_error *err);
void sbx__img_archive_free(img_archive *a);

/* "docker.io/library/busybox" -> "busybox:latest", "localhost/x:1" -> "x:1", into buf. */
void sbx__img_normalise(const char *ref, char *buf, size_t cap);

/* SHA-256 of data as 64 hex digits. */
void sbx__img_sha256_hex(const void *data, size_t len, char out[IMG_HEX + 1]);

/* Applies the image's layers, bottom first, to the empty folder `root`, reading them from the
 * archive at path: whiteouts remove what lower layers made, member names that are absolute,
 * hold "..", or go through a symlink refuse the import. */
int sbx__img_unpack(const char *path, const img_plan *img, const char *root, sbx_error *err);

#endif

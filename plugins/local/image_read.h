/* What an image archive holds (image_read.c): its images, their configs and layers.
 * image.c resolves a name to a cached root filesystem with them, image_unpack.c applies
 * the layers. */
#ifndef SBX_LOCAL_IMAGE_READ_H
#define SBX_LOCAL_IMAGE_READ_H

#include <stddef.h>

#include <sbx/plugin.h>

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
int local_img_read(const char *path, img_archive *out, sbx_error *err);
void local_img_archive_free(img_archive *a);

/* "docker.io/library/busybox" -> "busybox:latest", "localhost/x:1" -> "x:1", into buf. */
void local_img_normalise(const char *ref, char *buf, size_t cap);

/* SHA-256 of data as 64 hex digits. */
void local_img_sha256_hex(const void *data, size_t len, char out[IMG_HEX + 1]);

#endif

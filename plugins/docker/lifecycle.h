/* Container lifecycle ops of the docker plugin: create (pull, create, start, wait until a
 * command runs), destroy, pause, resume, status, list by label. */
#ifndef SBX_DOCKER_LIFECYCLE_H
#define SBX_DOCKER_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

int docker_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		  sbx_error *err);
int docker_destroy(void *state, const char *id, sbx_error *err);
int docker_pause(void *state, const char *id, sbx_error *err);
int docker_resume(void *state, const char *id, sbx_error *err);
int docker_status(void *state, const char *id, uint32_t *out, sbx_error *err);
int docker_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
			 sbx_error *err);

#endif

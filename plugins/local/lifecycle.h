/* Sandbox lifecycle ops of the local plugin. */
#ifndef SBX_LOCAL_LIFECYCLE_H
#define SBX_LOCAL_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

int local_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		 sbx_error *err);
int local_destroy(void *state, const char *id, sbx_error *err);
int local_status(void *state, const char *id, uint32_t *out, sbx_error *err);
int local_pause(void *state, const char *id, sbx_error *err);
int local_resume(void *state, const char *id, sbx_error *err);
int local_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
			sbx_error *err);

#endif

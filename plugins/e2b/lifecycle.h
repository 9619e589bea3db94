/* Sandbox lifecycle ops of the e2b plugin through the control plane: create (with the
 * adoption of an ambiguous one by its create token), destroy, pause, resume, status, list. */
#ifndef SBX_E2B_LIFECYCLE_H
#define SBX_E2B_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

int e2b_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
	       sbx_error *err);
int e2b_destroy(void *state, const char *id, sbx_error *err);
int e2b_pause(void *state, const char *id, sbx_error *err);
int e2b_resume(void *state, const char *id, sbx_error *err);
int e2b_status(void *state, const char *id, uint32_t *out, sbx_error *err);
int e2b_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
		      sbx_error *err);

#endif

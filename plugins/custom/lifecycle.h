/* Sandboxes of the custom plugin: scratch directories named by 16 hex digits. */
#ifndef SBX_CUSTOM_LIFECYCLE_H
#define SBX_CUSTOM_LIFECYCLE_H

#include <stddef.h>

#include <sbx/plugin.h>

#include "state.h"

/* <root>/<id> into buf; SBX_E_BAD_ID for an id that cannot be one of ours. */
int custom_sandbox_dir(const custom_state *st, const char *id, char *buf, size_t cap,
		       sbx_error *err);

int custom_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		  sbx_error *err);
int custom_destroy(void *state, const char *id, sbx_error *err);

#endif

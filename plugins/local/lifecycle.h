/* lifecycle.c: create, destroy, status, pause, resume, list by label. */
#ifndef SBX_LOCAL_LIFECYCLE_H
#define SBX_LOCAL_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

int local_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		 sbx_error *err);
int local_destroy(void *state, const char *id, sbx_error *err);
int local_status(void *state, const char *id, uint32_t *out, sbx_error *err);
int local_pause(void *state, const char *id, sbx_error *err);
int local_resume(void *state, const char *id, sbx_error *err);
int local_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
			sbx_error *err);
/* SBX_OK when sandbox id exists, SBX_E_NOT_FOUND naming op otherwise. */
int local_exists(local_state *st, const char *id, const char *op, sbx_error *err);

#endif

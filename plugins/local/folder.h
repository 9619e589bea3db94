/* Where a sandbox lives: <root>/<id>, and the ids that may name one. */
#ifndef SBX_LOCAL_FOLDER_H
#define SBX_LOCAL_FOLDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

/* Whether id can name a sandbox: LOCAL_ID_LEN lowercase hex digits. */
int local_id_ok(const char *id);

/* Checks `id` and writes <root>/<id>[/suffix] into buf. SBX_E_BAD_ID for a malformed id. */
int local_path(const local_state *st, const char *id, const char *suffix, char *buf, size_t cap,
	       sbx_error *err);

#endif

/* meta.c: the sandbox's folder: its id, path and meta.json. */
#ifndef SBX_LOCAL_META_H
#define SBX_LOCAL_META_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

/* 1 when id is a backend id ([0-9a-f], LOCAL_ID_LEN long). */
int local_id_ok(const char *id);
/* Checks `id` and writes <root>/<id>[/suffix] into buf. SBX_E_BAD_ID for a malformed id. */
int local_path(const local_state *st, const char *id, const char *suffix, char *buf, size_t cap,
	       sbx_error *err);
/* Writes all of len bytes to fd, going on after a short write or EINTR; 0 or an errno. */
int local_write_all(int fd, const char *p, size_t len);
/* Writes DIR/meta.json (labels, env, created time); DIR is a create's staging folder, made
 * visible whole by its rename. */
int local_meta_write(const char *dir, const sbx_create_spec *spec, sbx_error *err);
/* Environment saved at create: a NULL-terminated array of "K=V" strings from malloc (free
 * with local_strv_free); *out NULL when there is none. */
int local_meta_env(const local_state *st, const char *id, char ***out, sbx_error *err);
/* 1 when the sandbox carries label key=value. */
int local_meta_has_label(const local_state *st, const char *id, const char *key, const char *value);
void local_strv_free(char **v);

#endif

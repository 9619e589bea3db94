/* sbx-support: JSON helpers over jansson.
 *
 * jansson allocates with its own functions (malloc unless the process changed them), so what
 * it returns is released with json_decref; the text these helpers give back comes from
 * host->alloc instead, like everything else a plugin allocates. Thread-safe. */
#ifndef SBX_SUPPORT_JSON_H
#define SBX_SUPPORT_JSON_H

#include <stddef.h>

#include <jansson.h>

#include <sbx/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one-line message of an error answer, for a message of our own: the "message" member of
 * a JSON object body (Docker, E2B, Kubernetes Status and Connect errors all use it), else the
 * first 200 bytes of the body, else "(empty body)". Line breaks become spaces and trailing
 * spaces go. Always NUL-terminated in buf[cap] (cap > 0); returns buf. */
const char *sbxs_json_message(const char *body, size_t len, char *buf, size_t cap);

/* Compact JSON text of j, NUL-terminated, from host->alloc; NULL when out of memory. */
char *sbxs_json_dump(const json_t *j);

/* For the `info` op: *out = sbxs_json_dump(j). SBX_OK, or SBX_E_NOMEM with err filled
 * ("<alias>: info: out of memory"), also when j is NULL (a failed json_pack). */
int sbxs_json_info(const json_t *j, const char *alias, char **out, sbx_error *err);

#ifdef __cplusplus
}
#endif
#endif

/* A sandbox's envd: how to reach it (cached per sandbox), the headers every envd request
 * carries, Connect unary calls (JSON codec), /files transfers, and the set-up of the
 * server-stream calls process.c performs. */
#ifndef SBX_E2B_ENVD_H
#define SBX_E2B_ENVD_H

#include <stddef.h>

#include <jansson.h>

#include <sbx/plugin.h>
#include <sbx/support/http.h>

#include "state.h"

/* How to reach sandbox id's envd: cached, else from GET /sandboxes/{id} (SBX_E_NOT_FOUND,
 * SBX_E_PAUSED for a paused one, SBX_E_BAD_ID for an id that is not [a-z0-9]+). */
int e2b_target_get(e2b_state *st, const char *id, e2b_target *out, sbx_error *err);
/* Drops the cached target of id (after destroy, pause, resume, or envd saying it is gone). */
void e2b_forget(e2b_state *st, const char *id);

/* A Connect unary call (method like "filesystem.Filesystem/Stat"). SBX_OK with *resp (an
 * object); on an RPC error, code[32] receives its Connect code and the status is
 * SBX_E_BACKEND with err filled (SBX_E_NOT_FOUND when envd is unreachable: a 502). */
int e2b_unary(e2b_state *st, const char *id, const char *method, const json_t *req, json_t **resp,
	      char code[32], const char *what, sbx_error *err);

/* GET (data NULL) or multipart POST of /files?path=PATH. SBX_OK with the answer in r when
 * envd answered 200; a status naming `what` and the path otherwise (404 SBX_E_NO_FILE, 400
 * SBX_E_PATH, 502 SBX_E_NOT_FOUND, 401 SBX_E_CONFIG, else SBX_E_IO). */
int e2b_files(e2b_state *st, const char *id, const char *path, const void *data, size_t len,
	      sbxs_http_resp *r, const char *what, sbx_error *err);

/* Envd set-up of a stream call: what a request to t carries (user: basic auth, may be NULL;
 * extra: more header lines, NULL-terminated, may be NULL). The request keeps pointers into
 * call, which must outlive it. */
typedef struct e2b_envd_call {
	const e2b_target *t;
	const char *user;
	const char *content_type;
	const char *const *extra;
} e2b_envd_call;
void e2b_envd_req(e2b_envd_call *call, const char *method, const char *url, const char *what,
		  sbxs_http_req *req);

#endif

/* E2B's control plane: REST calls with the API key, under the configured retry policy. */
#ifndef SBX_E2B_API_H
#define SBX_E2B_API_H

#include <sbx/plugin.h>
#include <sbx/support/http.h>

#include "state.h"

/* One control-plane call (path after api_url; body JSON or NULL). SBX_OK whenever an HTTP
 * answer arrived, whatever its status, after the retries the policy allows (idempotent:
 * sending it twice does no harm); a transport failure otherwise, naming api_url. */
int e2b_api(e2b_state *st, const char *method, const char *path, const char *body, int idempotent,
	    sbxs_http_resp *resp, sbx_error *err);

/* The one-line message of an error answer into buf; returns buf. */
const char *e2b_message(const sbxs_http_resp *r, char *buf, size_t cap);

/* Sandbox ids are [a-z0-9]+, under 64 bytes. */
int e2b_id_ok(const char *id);

/* Options every request of the plugin carries (user agent, compression). */
void e2b_curl_common(CURL *easy);

#endif

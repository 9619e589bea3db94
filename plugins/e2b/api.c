/* The control plane (see api.h): sbx-support's HTTP with E2B's key header. */
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>
#include <sbx/support/json.h>

#include "api.h"

void e2b_curl_common(CURL *easy)
{
	curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(easy, CURLOPT_USERAGENT, "sbx-e2b/0.1.0");
}

const char *e2b_message(const sbxs_http_resp *r, char *buf, size_t cap)
{
	return sbxs_json_message(r->body.data, r->body.len, buf, cap);
}

int e2b_id_ok(const char *id)
{
	if (!id || !*id || strlen(id) >= 64)
		return 0;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return 0;
	return 1;
}

/* The key goes in through the header list, which sbx-support wipes after each attempt. */
static int setup(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	const e2b_state *st = ctx;
	char key[1024];
	int n = snprintf(key, sizeof(key), "X-API-Key: %s", st->set.api_key);
	if (n < 0 || (size_t)n >= sizeof(key))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "e2b: api_key is too long");
	struct curl_slist *l = curl_slist_append(*headers, key);
	explicit_bzero(key, sizeof(key));
	if (!l)
		return sbxs_nomem(err, E2B_ALIAS, "request");
	*headers = l;
	e2b_curl_common(easy);
	return SBX_OK;
}

int e2b_api(e2b_state *st, const char *method, const char *path, const char *body, int idempotent,
	    sbxs_http_resp *resp, sbx_error *err)
{
	static const char *const headers[] = {"Content-Type: application/json", NULL};
	char url[2048], what[160];
	memset(resp, 0, sizeof(*resp));
	int n = snprintf(url, sizeof(url), "%s%s", st->api_url, path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbxs_host->set_error(err, SBX_E_INVAL, "e2b: %s %.100s: URL too long",
					    method, path);
	snprintf(what, sizeof(what), "%s %.120s", method, path);
	sbxs_http_req req = {.alias = E2B_ALIAS,
			     .method = method,
			     .url = url,
			     .what = what,
			     .headers = headers,
			     .body = body,
			     .body_len = body ? strlen(body) : 0,
			     .idempotent = idempotent,
			     .timeout_ms = (int64_t)(st->set.request_timeout * 1000),
			     .retry = &st->retry,
			     .setup = setup,
			     .ctx = st};
	int rc = sbxs_http_do(&req, resp, err);
	if (rc != SBX_OK && rc != SBX_E_NOMEM && resp->curl_code != CURLE_OK)
		rc = sbxs_host->set_error(err, rc, "e2b: %s: %s (api_url %s)", what,
					  curl_easy_strerror(resp->curl_code), st->api_url);
	return rc;
}

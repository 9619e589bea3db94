/* Reaching a sandbox's envd (see envd.h). */
#include <stdio.h>
#include <string.h>

#include <sbx/support/base64.h>
#include <sbx/support/host.h>
#include <sbx/support/json.h>

#include "api.h"
#include "envd.h"

static int known_e2b_domain(const char *d)
{
	return strcmp(d, "e2b.app") == 0 || strcmp(d, "e2b.dev") == 0 ||
	       strcmp(d, "e2b.pro") == 0 || strcmp(d, "e2b-staging.dev") == 0;
}

static int cached(e2b_state *st, const char *id, e2b_target *out)
{
	int hit = 0;
	pthread_mutex_lock(&st->lock);
	for (e2b_target *t = st->targets; t && !hit; t = t->next)
		if (strcmp(t->id, id) == 0) {
			*out = *t;
			hit = 1;
		}
	pthread_mutex_unlock(&st->lock);
	return hit;
}

/* The target described by a GET /sandboxes/{id} answer. */
static int target_of(e2b_state *st, const char *id, json_t *j, e2b_target *t, sbx_error *err)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->id, sizeof(t->id), "%s", id);
	const char *tok = json_string_value(json_object_get(j, "envdAccessToken"));
	int n = snprintf(t->token, sizeof(t->token), "%s", tok ? tok : "");
	const char *dom = json_string_value(json_object_get(j, "domain"));
	if (!dom || !*dom)
		dom = st->set.domain;
	int m;
	if (st->sandbox_url)
		m = snprintf(t->base, sizeof(t->base), "%s", st->sandbox_url);
	else if (known_e2b_domain(dom))
		m = snprintf(t->base, sizeof(t->base), "https://sandbox.%s", dom);
	else
		m = snprintf(t->base, sizeof(t->base), "https://%s-%s.%s", E2B_ENVD_PORT, id, dom);
	if (n < 0 || (size_t)n >= sizeof(t->token) || m < 0 || (size_t)m >= sizeof(t->base))
		return sbxs_host->set_error(err, SBX_E_BACKEND,
					    "e2b: sandbox '%s': token or URL too long", id);
	return SBX_OK;
}

int e2b_target_get(e2b_state *st, const char *id, e2b_target *out, sbx_error *err)
{
	char path[128], msg[300];
	sbxs_http_resp resp;
	json_t *j = NULL;
	if (!e2b_id_ok(id))
		return sbxs_host->set_error(err, SBX_E_BAD_ID, "e2b: id '%.64s' is not [a-z0-9]+",
					    id ? id : "");
	if (cached(st, id, out))
		return SBX_OK;
	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	int rc = e2b_api(st, "GET", path, NULL, 1, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		rc = sbxs_host->set_error(err, SBX_E_NOT_FOUND, "e2b: sandbox '%s' not found", id);
		goto out;
	}
	if (resp.status != 200) {
		rc = sbxs_host->set_error(err, resp.status == 401 ? SBX_E_CONFIG : SBX_E_BACKEND,
					  "e2b: get sandbox '%s': API answered %ld: %s", id,
					  resp.status, e2b_message(&resp, msg, sizeof(msg)));
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	const char *state = json_string_value(json_object_get(j, "state"));
	if (state && strcmp(state, "paused") == 0) {
		rc = sbxs_host->set_error(err, SBX_E_PAUSED, "e2b: sandbox '%s' is paused", id);
		goto out;
	}
	e2b_target *t = sbxs_host->alloc(sizeof(*t));
	if (!t) {
		rc = sbxs_nomem(err, E2B_ALIAS, "target");
		goto out;
	}
	if ((rc = target_of(st, id, j, t, err)) != SBX_OK) {
		sbxs_host->free(t);
		goto out;
	}
	*out = *t;
	pthread_mutex_lock(&st->lock);
	t->next = st->targets;
	st->targets = t;
	pthread_mutex_unlock(&st->lock);
out:
	json_decref(j);
	sbxs_http_resp_free(&resp);
	return rc;
}

void e2b_forget(e2b_state *st, const char *id)
{
	pthread_mutex_lock(&st->lock);
	for (e2b_target **p = &st->targets; *p; p = &(*p)->next)
		if (strcmp((*p)->id, id) == 0) {
			e2b_target *t = *p;
			*p = t->next;
			sbxs_host->free(t);
			break;
		}
	pthread_mutex_unlock(&st->lock);
}

static int add(struct curl_slist **l, const char *fmt, const char *a, const char *b)
{
	char buf[700];
	snprintf(buf, sizeof(buf), fmt, a, b);
	struct curl_slist *n = curl_slist_append(*l, buf);
	explicit_bzero(buf, sizeof(buf));
	if (!n)
		return SBX_E_NOMEM;
	*l = n;
	return SBX_OK;
}

/* E2B's routing headers, the access token, the user as basic auth with an empty password. */
static int setup(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	const e2b_envd_call *c = ctx;
	int rc = add(headers, "E2b-Sandbox-Id: %s%s", c->t->id, "");
	if (rc == SBX_OK)
		rc = add(headers, "E2b-Sandbox-Port: %s%s", E2B_ENVD_PORT, "");
	if (rc == SBX_OK && c->t->token[0])
		rc = add(headers, "X-Access-Token: %s%s", c->t->token, "");
	if (rc == SBX_OK && c->content_type) {
		rc = add(headers, "Content-Type: %s%s", c->content_type, "");
		if (rc == SBX_OK)
			rc = add(headers, "Connect-Protocol-Version: 1%s%s", "", "");
	}
	if (rc == SBX_OK && c->user && *c->user && strlen(c->user) < 200) {
		char in[256], enc[SBXS_BASE64_ENCODED_LEN(256) + 1];
		int n = snprintf(in, sizeof(in), "%s:", c->user);
		sbxs_base64_encode(in, (size_t)n, enc, sizeof(enc));
		rc = add(headers, "Authorization: Basic %s%s", enc, "");
	}
	for (size_t i = 0; rc == SBX_OK && c->extra && c->extra[i]; i++)
		rc = add(headers, "%s%s", c->extra[i], "");
	if (rc != SBX_OK)
		return sbxs_nomem(err, E2B_ALIAS, "envd");
	e2b_curl_common(easy);
	return SBX_OK;
}

void e2b_envd_req(e2b_envd_call *call, const char *method, const char *url, const char *what,
		  sbxs_http_req *req)
{
	*req = (sbxs_http_req){.alias = E2B_ALIAS,
			       .method = method,
			       .url = url,
			       .what = what,
			       .setup = setup,
			       .ctx = call};
}

int e2b_unary(e2b_state *st, const char *id, const char *method, const json_t *req, json_t **resp,
	      char code[32], const char *what, sbx_error *err)
{
	e2b_target t;
	sbxs_http_resp r = {0};
	char url[800], msg[300];
	char *body = NULL;
	json_t *j = NULL;
	code[0] = '\0';
	*resp = NULL;
	int rc = e2b_target_get(st, id, &t, err);
	if (rc != SBX_OK)
		return rc;
	int n = snprintf(url, sizeof(url), "%s/%s", t.base, method);
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbxs_host->set_error(err, SBX_E_INVAL, "e2b: %s: envd URL too long", what);
	if (!(body = sbxs_json_dump(req)))
		return sbxs_nomem(err, E2B_ALIAS, what);
	e2b_envd_call call = {.t = &t, .content_type = "application/json"};
	sbxs_http_req hr;
	e2b_envd_req(&call, "POST", url, what, &hr);
	hr.body = body;
	hr.body_len = strlen(body);
	hr.idempotent = 1;
	hr.timeout_ms = (int64_t)(st->set.request_timeout * 1000);
	hr.retry = &st->retry;
	rc = sbxs_http_do(&hr, &r, err);
	if (rc != SBX_OK) {
		if (rc != SBX_E_NOMEM && r.curl_code != CURLE_OK)
			rc = sbxs_host->set_error(err, SBX_E_UNREACHABLE, "e2b: %s: envd: %s", what,
						  curl_easy_strerror(r.curl_code));
		goto out;
	}
	j = json_loadb(r.body.data ? r.body.data : "", r.body.len, 0, NULL);
	if (r.status == 200) {
		*resp = j ? j : json_object();
		j = NULL;
		if (!*resp)
			rc = sbxs_nomem(err, E2B_ALIAS, what);
		goto out;
	}
	const char *cv = json_string_value(json_object_get(j, "code"));
	snprintf(code, 32, "%s", cv ? cv : (r.status == 502 ? "unavailable" : "unknown"));
	e2b_message(&r, msg, sizeof(msg));
	if (r.status == 502)
		rc = sbxs_host->set_error(err, SBX_E_NOT_FOUND,
					  "e2b: %s: sandbox '%s' unreachable: %s", what, id, msg);
	else
		rc = sbxs_host->set_error(err, SBX_E_BACKEND, "e2b: %s: envd answered %s: %s", what,
					  code, msg);
out:
	json_decref(j);
	sbxs_host->free(body);
	sbxs_http_resp_free(&r);
	return rc;
}

/* The multipart body of a write, made on each attempt's handle. */
typedef struct upload {
	e2b_envd_call call;
	const char *path;
	const void *data;
	size_t len;
	curl_mime *mime;
} upload;

static int setup_upload(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	upload *u = ctx;
	int rc = setup(&u->call, easy, headers, err);
	if (rc != SBX_OK || !u->data)
		return rc;
	curl_mime_free(u->mime);
	u->mime = curl_mime_init(easy);
	curl_mimepart *part = u->mime ? curl_mime_addpart(u->mime) : NULL;
	if (!part || curl_mime_name(part, "file") != CURLE_OK ||
	    curl_mime_filename(part, u->path) != CURLE_OK ||
	    curl_mime_type(part, "application/octet-stream") != CURLE_OK ||
	    curl_mime_data(part, u->data, u->len) != CURLE_OK)
		return sbxs_nomem(err, E2B_ALIAS, "write");
	curl_easy_setopt(easy, CURLOPT_MIMEPOST, u->mime);
	return SBX_OK;
}

static int files_error(const sbxs_http_resp *r, const char *what, const char *path, sbx_error *err)
{
	char msg[300];
	int code = r->status == 404   ? SBX_E_NO_FILE
		   : r->status == 400 ? SBX_E_PATH
		   : r->status == 502 ? SBX_E_NOT_FOUND
		   : r->status == 401 ? SBX_E_CONFIG
				      : SBX_E_IO;
	return sbxs_host->set_error(err, code, "e2b: %s '%.200s': envd answered %ld: %s", what,
				    path, r->status, e2b_message(r, msg, sizeof(msg)));
}

int e2b_files(e2b_state *st, const char *id, const char *path, const void *data, size_t len,
	      sbxs_http_resp *r, const char *what, sbx_error *err)
{
	e2b_target t;
	char url[2048];
	memset(r, 0, sizeof(*r));
	int rc = e2b_target_get(st, id, &t, err);
	if (rc != SBX_OK)
		return rc;
	char *esc = curl_easy_escape(NULL, path, 0);
	if (!esc)
		return sbxs_nomem(err, E2B_ALIAS, what);
	int n = snprintf(url, sizeof(url), "%s/files?path=%s", t.base, esc);
	curl_free(esc);
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbxs_host->set_error(err, SBX_E_PATH, "e2b: %s '%.200s': path refused", what,
					    path);
	upload u = {.call = {.t = &t}, .path = path, .data = data, .len = len};
	sbxs_http_req hr;
	e2b_envd_req(&u.call, data ? "POST" : "GET", url, what, &hr);
	hr.setup = setup_upload;
	hr.ctx = &u;
	hr.idempotent = 1;
	hr.timeout_ms = (int64_t)(st->set.request_timeout * 1000);
	hr.retry = &st->retry;
	/* A read stops one byte past max_file_bytes: that file is refused, never held whole. */
	hr.max_body = data ? 0 : st->max_file_bytes;
	rc = sbxs_http_do(&hr, r, err);
	curl_mime_free(u.mime);
	if (r->too_long)
		return sbxs_host->set_error(err, SBX_E_LIMIT,
					    "e2b: %s: '%.300s' is larger than max_file_bytes (%llu "
					    "bytes)",
					    what, path, (unsigned long long)st->max_file_bytes);
	if (rc != SBX_OK && rc != SBX_E_NOMEM && r->curl_code != CURLE_OK)
		return sbxs_host->set_error(err, SBX_E_UNREACHABLE, "e2b: %s '%.200s': envd: %s",
					    what, path, curl_easy_strerror(r->curl_code));
	if (rc == SBX_OK && r->status != 200)
		rc = files_error(r, what, path, err);
	return rc;
}

/* REST calls to the apiserver (see http.h). */
#include <stdio.h>
#include <string.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/http.h>
#include <sbx/support/json.h>

#include "credential.h"
#include "http.h"

/* 200 ms doubled to 5 s, a Retry-After up to 30 s, up to half again at random. */
static const sbxs_retry policy_base = {.base_ms = 200,
				       .cap_ms = 5000,
				       .retry_after_cap = 30000,
				       .jitter = 0.5,
				       .flags = SBXS_RETRY_ANY_5XX};

const char *k8s_status_message(const sbxs_buf *body, char *tmp, size_t cap)
{
	return sbxs_json_message(body ? body->data : NULL, body ? body->len : 0, tmp, cap);
}

int k8s_api_error(const char *what, long http, const sbxs_buf *body, sbx_error *err)
{
	char tmp[300];
	int code = http == 404   ? SBX_E_NOT_FOUND
		   : http == 401 ? SBX_E_CONFIG
		   : http == 403 ? SBX_E_CONFIG
		   : http == 429 ? SBX_E_RATE_LIMITED
				 : SBX_E_BACKEND;
	return sbxs_host->set_error(err, code, "k8s: %s: HTTP %ld: %s", what, http,
				    k8s_status_message(body, tmp, sizeof(tmp)));
}

void k8s_bucket_take(k8s_state *st)
{
	if (st->set.qps <= 0)
		return;
	for (;;) {
		pthread_mutex_lock(&st->bucket_lock);
		int64_t now = sbxs_now_us();
		st->tokens += (double)(now - st->bucket_last_us) / 1e6 * st->set.qps;
		if (st->tokens > (double)st->set.burst)
			st->tokens = (double)st->set.burst;
		st->bucket_last_us = now;
		double wait_s = 0;
		if (st->tokens >= 1.0)
			st->tokens -= 1.0;
		else
			wait_s = (1.0 - st->tokens) / st->set.qps;
		pthread_mutex_unlock(&st->bucket_lock);
		if (wait_s <= 0)
			return;
		sbxs_sleep_us((int64_t)(wait_s * 1e6) + 1);
	}
}

/* The token of a tokenFile, read afresh (it rotates), in host memory. */
static char *read_token_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char buf[16384];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	char *tok = n ? sbxs_strndup(buf, n) : NULL;
	explicit_bzero(buf, sizeof(buf));
	return tok;
}

static void wipe(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		sbxs_host->free(s);
	}
}

/* Appends "Authorization: Bearer <tok>" to *headers. */
static int add_bearer(const char *tok, struct curl_slist **headers, sbx_error *err)
{
	sbxs_buf h = {0};
	int rc = sbxs_buf_addf(&h, "Authorization: Bearer %s", tok);
	struct curl_slist *l = rc == SBX_OK ? curl_slist_append(*headers, h.data) : NULL;
	sbxs_buf_wipe(&h);
	if (!l)
		return sbxs_nomem(err, K8S_ALIAS, "request");
	*headers = l;
	return SBX_OK;
}

/* The exec credential plugin's token or client certificate. */
static int exec_credential(const k8s_conn *conn, CURL *easy, struct curl_slist **headers,
			   sbx_error *err)
{
	char *tok = NULL, *cert = NULL, *key = NULL;
	int rc = k8s_cred_get(conn->cred, &tok, &cert, &key, err);
	if (rc == SBX_OK && cert && key) {
		struct curl_blob cb = {.data = cert, .len = strlen(cert), .flags = CURL_BLOB_COPY};
		struct curl_blob kb = {.data = key, .len = strlen(key), .flags = CURL_BLOB_COPY};
		curl_easy_setopt(easy, CURLOPT_SSLCERT_BLOB, &cb);
		curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(easy, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (rc == SBX_OK && tok)
		rc = add_bearer(tok, headers, err);
	wipe(tok);
	wipe(cert);
	wipe(key);
	return rc;
}

int k8s_conn_setup(const k8s_conn *conn, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	int https = strncmp(conn->server, "https://", 8) == 0;
	if (conn->ca_pem) {
		struct curl_blob blob = {
		    .data = conn->ca_pem, .len = conn->ca_len, .flags = CURL_BLOB_COPY};
		curl_easy_setopt(easy, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (conn->cert_pem && conn->key_pem) {
		struct curl_blob cb = {
		    .data = conn->cert_pem, .len = conn->cert_len, .flags = CURL_BLOB_COPY};
		struct curl_blob kb = {
		    .data = conn->key_pem, .len = conn->key_len, .flags = CURL_BLOB_COPY};
		curl_easy_setopt(easy, CURLOPT_SSLCERT_BLOB, &cb);
		curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(easy, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (conn->insecure) {
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	/* HTTP/1.1 everywhere: exec needs it for the Upgrade, and REST handles are one-shot, so h2
	 * would buy nothing. */
	curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	/* Credentials only travel over TLS, as clientcmd does. */
	if (!https)
		return SBX_OK;
	if (conn->cred)
		return exec_credential(conn, easy, headers, err);
	char *tok = conn->token_file ? read_token_file(conn->token_file) : NULL;
	if (!tok && conn->token)
		tok = sbxs_strdup(conn->token);
	if (!tok)
		return SBX_OK;
	int rc = add_bearer(tok, headers, err);
	wipe(tok);
	return rc;
}

/* Every attempt takes a token of the bucket and gets the connection's TLS and credentials. */
static int setup(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	k8s_state *st = ctx;
	k8s_bucket_take(st);
	return k8s_conn_setup(&st->conn, easy, headers, err);
}

/* One REST call's attempts, and the generation of the exec credential the last one carried
 * (a concurrent refresh can only make a later expire drop a newer one: one extra run, never
 * a stale credential). */
typedef struct attempt {
	k8s_state *st;
	unsigned gen;
} attempt;

static int setup_counted(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	attempt *a = ctx;
	int rc = setup(a->st, easy, headers, err);
	if (a->st->conn.cred)
		a->gen = k8s_cred_generation(a->st->conn.cred);
	return rc;
}

static void request_of(k8s_state *st, const char *method, const char *url, const char *what,
		       sbxs_http_req *req)
{
	*req = (sbxs_http_req){.alias = K8S_ALIAS,
			       .method = method,
			       .url = url,
			       .what = what,
			       .setup = setup,
			       .ctx = st};
}

int k8s_request(k8s_state *st, const char *method, const char *path, const char *body,
		int64_t deadline_us, long *http, sbxs_buf *resp, sbx_error *err)
{
	static const char *const plain[] = {"Accept: application/json", NULL};
	static const char *const json[] = {"Accept: application/json",
					   "Content-Type: application/json", NULL};
	char url[4096], what[160];
	int n = snprintf(url, sizeof(url), "%s%s", st->conn.server, path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbxs_host->set_error(err, SBX_E_INVAL, "k8s: request path too long");
	snprintf(what, sizeof(what), "%s %.100s", method, path);
	sbxs_retry policy = policy_base;
	policy.max_retries = (int)st->set.max_retries;
	attempt a = {.st = st};
	sbxs_http_req req;
	request_of(st, method, url, what, &req);
	req.setup = setup_counted;
	req.ctx = &a;
	req.headers = body ? json : plain;
	req.body = body;
	req.body_len = body ? strlen(body) : 0;
	req.idempotent = 1; /* a create names its pod: sent again, it is a 409 */
	req.deadline_us = deadline_us;
	req.retry = &policy;
	sbxs_http_resp r;
	int rc = sbxs_http_do(&req, &r, err);
	if (rc == SBX_OK && r.status == 401 && st->conn.cred) {
		/* The exec plugin's credential was refused: run it again, once, as client-go
		 * refreshes it after a 401. */
		k8s_cred_expire(st->conn.cred, a.gen);
		sbxs_http_resp_free(&r);
		rc = sbxs_http_do(&req, &r, err);
	}
	sbxs_buf_free(resp);
	*resp = r.body;
	if (rc != SBX_OK) {
		if (rc != SBX_E_NOMEM && r.curl_code != CURLE_OK)
			rc = sbxs_host->set_error(err, rc, "k8s: %s %s: %s", method,
						  st->conn.server, curl_easy_strerror(r.curl_code));
		return rc;
	}
	*http = r.status;
	if (r.status == 429 || (r.status >= 500 && (r.status != 501 || r.retry_after >= 0))) {
		char tmp[300];
		return sbxs_host->set_error(
		    err, r.status == 429 ? SBX_E_RATE_LIMITED : SBX_E_BACKEND,
		    "k8s: %s %s: HTTP %ld after %d attempts: %s", method, path, r.status,
		    r.attempts, k8s_status_message(resp, tmp, sizeof(tmp)));
	}
	return SBX_OK;
}

typedef struct stream_ctx {
	sbxs_buf line;
	sbxs_buf *errbody;
	k8s_line_fn fn;
	void *ctx;
	long code;
	CURL *c;
	int stopped;
	int nomem;
} stream_ctx;

static size_t on_stream(char *p, size_t size, size_t n, void *ud)
{
	stream_ctx *s = ud;
	size_t len = size * n;
	if (s->code == 0)
		curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &s->code);
	if (s->code != 200) {
		if (s->errbody->len < 65536 && sbxs_buf_add(s->errbody, p, len) != SBX_OK)
			s->nomem = 1;
		return s->nomem ? 0 : len;
	}
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(p + i, '\n', len - i);
		size_t take = nl ? (size_t)(nl - (p + i)) : len - i;
		if (sbxs_buf_add(&s->line, p + i, take) != SBX_OK) {
			s->nomem = 1;
			return 0;
		}
		i += take;
		if (!nl)
			break;
		i++;
		if (s->line.len && s->fn(s->ctx, s->line.data, s->line.len)) {
			s->stopped = 1;
			return 0;
		}
		sbxs_buf_clear(&s->line);
	}
	return len;
}

int k8s_stream(k8s_state *st, const char *path, int64_t deadline_us, k8s_line_fn fn, void *ctx,
	       long *http, sbxs_buf *errbody, sbx_error *err)
{
	char url[4096];
	struct curl_slist *hdrs = NULL;
	int n = snprintf(url, sizeof(url), "%s%s", st->conn.server, path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbxs_host->set_error(err, SBX_E_INVAL, "k8s: watch path too long");
	CURL *c = curl_easy_init();
	if (!c)
		return sbxs_nomem(err, K8S_ALIAS, "watch");
	sbxs_http_req req;
	request_of(st, "GET", url, "watch", &req);
	int64_t left = deadline_us - sbxs_now_us();
	req.timeout_ms = left > 1000 ? left / 1000 : 1;
	int rc = sbxs_http_prepare(&req, c, &hdrs, err);
	if (rc != SBX_OK) {
		curl_easy_cleanup(c);
		return rc;
	}
	stream_ctx s = {.errbody = errbody, .fn = fn, .ctx = ctx, .c = c};
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	CURLcode cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s.code);
	*http = s.code;
	sbxs_http_headers_free(hdrs);
	curl_easy_cleanup(c);
	sbxs_buf_free(&s.line);
	if (s.nomem)
		return sbxs_nomem(err, K8S_ALIAS, "watch");
	if (s.stopped || cc == CURLE_OK)
		return SBX_OK;
	if (cc == CURLE_OPERATION_TIMEDOUT)
		return sbxs_host->set_error(err, SBX_E_TIMEOUT, "k8s: watch %s timed out", path);
	return sbxs_host->set_error(err, SBX_E_UNREACHABLE, "k8s: watch %s: %s", st->conn.server,
				    curl_easy_strerror(cc));
}

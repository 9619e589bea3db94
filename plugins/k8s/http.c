/* REST calls to the apiserver: TLS and auth set-up, the client-side token bucket, retries on
 * 429/5xx honouring Retry-After, and streaming GETs for watches. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "k8s.h"

int64_t k8s__now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void k8s__sleep_us(int64_t us)
{
	if (us <= 0)
		return;
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) != 0)
		;
}

int k8s__buf_add(k8s_buf *b, const void *data, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (!p)
			return SBX_E_NOMEM;
		b->data = p;
		b->cap = cap;
	}
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return SBX_OK;
}

void k8s__buf_free(k8s_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

const char *k8s__status_message(const k8s_buf *body, char *tmp, size_t cap)
{
	if (!body || !body->data || body->len == 0)
		return "(empty body)";
	json_t *j = json_loadb(body->data, body->len, 0, NULL);
	const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (msg)
		snprintf(tmp, cap, "%s", msg);
	else
		snprintf(tmp, cap, "%.*s", (int)(body->len > 200 ? 200 : body->len), body->data);
	json_decref(j);
	/* One line: fold newlines. */
	for (char *p = tmp; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	size_t n = strlen(tmp);
	while (n && tmp[n - 1] == ' ')
		tmp[--n] = '\0';
	return tmp;
}

void k8s__bucket_take(k8s_state *st)
{
	if (st->qps <= 0)
		return;
	for (;;) {
		pthread_mutex_lock(&st->bucket_lock);
		int64_t now = k8s__now_us();
		st->tokens += (double)(now - st->bucket_last_us) / 1e6 * st->qps;
		if (st->tokens > st->burst)
			st->tokens = st->burst;
		st->bucket_last_us = now;
		double wait_s = 0;
		if (st->tokens >= 1.0)
			st->tokens -= 1.0;
		else
			wait_s = (1.0 - st->tokens) / st->qps;
		pthread_mutex_unlock(&st->bucket_lock);
		if (wait_s <= 0)
			return;
		k8s__sleep_us((int64_t)(wait_s * 1e6) + 1);
	}
}

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
	return n ? strdup(buf) : NULL;
}

static void wipe(char *s)
{
	if (s) {
		memset(s, 0, strlen(s));
		free(s);
	}
}

static int add_bearer(char *tok, struct curl_slist **headers, sbx_error *err)
{
	size_t n = strlen(tok) + 32;
	char *h = malloc(n);
	if (!h)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	snprintf(h, n, "Authorization: Bearer %s", tok);
	struct curl_slist *l = curl_slist_append(*headers, h);
	memset(h, 0, n);
	free(h);
	if (!l)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	*headers = l;
	return SBX_OK;
}

/* The exec credential plugin's token or client certificate. */
static int exec_credential(const k8s_conn *conn, CURL *c, struct curl_slist **headers,
			   sbx_error *err)
{
	char *tok = NULL, *cert = NULL, *key = NULL;
	int rc = k8s__cred_get(conn->cred, &tok, &cert, &key, err);
	if (rc == SBX_OK && cert && key) {
		struct curl_blob cb = {.data = cert, .len = strlen(cert), .flags = CURL_BLOB_COPY};
		struct curl_blob kb = {.data = key, .len = strlen(key), .flags = CURL_BLOB_COPY};
		curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cb);
		curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (rc == SBX_OK && tok)
		rc = add_bearer(tok, headers, err);
	wipe(tok);
	wipe(cert);
	wipe(key);
	return rc;
}

int k8s__conn_setup(const k8s_conn *conn, void *curl, struct curl_slist **headers, sbx_error *err)
{
	CURL *c = curl;
	int https = strncmp(conn->server, "https://", 8) == 0;
	if (conn->ca_pem) {
		struct curl_blob blob = {
		    .data = conn->ca_pem, .len = conn->ca_len, .flags = CURL_BLOB_COPY};
		curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
	}
	if (conn->cert_pem && conn->key_pem) {
		struct curl_blob cb = {
		    .data = conn->cert_pem, .len = conn->cert_len, .flags = CURL_BLOB_COPY};
		struct curl_blob kb = {
		    .data = conn->key_pem, .len = conn->key_len, .flags = CURL_BLOB_COPY};
		curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cb);
		curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (conn->insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	/* HTTP/1.1 everywhere: exec needs it for the Upgrade, and REST handles are one-shot, so h2
	 * would buy nothing. */
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	/* Credentials only travel over TLS, as clientcmd does. */
	if (!https)
		return SBX_OK;
	if (conn->cred)
		return exec_credential(conn, c, headers, err);
	char *tok = NULL;
	if (conn->token_file)
		tok = read_token_file(conn->token_file);
	if (!tok && conn->token)
		tok = strdup(conn->token);
	if (!tok)
		return SBX_OK;
	int rc = add_bearer(tok, headers, err);
	wipe(tok);
	return rc;
}

typedef struct hdr_ctx {
	long retry_after; /* seconds, -1 if absent */
} hdr_ctx;

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	hdr_ctx *h = ud;
	size_t len = size * n;
	if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
		char tmp[32];
		size_t m = len - 12 < sizeof(tmp) - 1 ? len - 12 : sizeof(tmp) - 1;
		memcpy(tmp, p + 12, m);
		tmp[m] = '\0';
		char *end = NULL;
		long v = strtol(tmp, &end, 10);
		if (end != tmp && v >= 0)
			h->retry_after = v;
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	k8s_buf *b = ud;
	return k8s__buf_add(b, p, size * n) == SBX_OK ? size * n : 0;
}

/* Backoff before retry number `attempt` (0-based): max(Retry-After, 200 ms * 2^n capped at
 * 5 s), plus up to 50% jitter. */
static int64_t backoff_us(int attempt, long retry_after)
{
	int64_t base = 200000;
	for (int i = 0; i < attempt && base < 5000000; i++)
		base *= 2;
	if (base > 5000000)
		base = 5000000;
	if (retry_after >= 0) {
		int64_t ra = (retry_after > 30 ? 30 : retry_after) * 1000000;
		base = ra > 0 ? ra : base;
	}
	return base + (int64_t)(rand() % 1000) * (base / 2000);
}

int k8s__request(k8s_state *st, const char *method, const char *path, const char *body,
		 int64_t deadline_us, long *http, k8s_buf *resp, sbx_error *err)
{
	int rc = SBX_OK;
	char url[4096];
	int n = snprintf(url, sizeof(url), "%s%s", st->conn.server, path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return k8s__host->set_error(err, SBX_E_INVAL, "k8s: request path too long");
	int refreshed = 0;
	for (int attempt = 0;; attempt++) {
		k8s__bucket_take(st);
		CURL *c = curl_easy_init();
		struct curl_slist *hdrs = NULL;
		if (!c)
			return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		rc = k8s__conn_setup(&st->conn, c, &hdrs, err);
		/* The credential this request carries (a concurrent refresh can only make the
		 * later expire drop a newer one: one extra run, never a stale credential). */
		unsigned gen = st->conn.cred ? k8s__cred_generation(st->conn.cred) : 0;
		struct curl_slist *l =
		    rc == SBX_OK ? curl_slist_append(hdrs, "Accept: application/json") : NULL;
		if (l)
			hdrs = l;
		if (l && body) {
			l = curl_slist_append(hdrs, "Content-Type: application/json");
			if (l)
				hdrs = l;
		}
		if (rc == SBX_OK && !l)
			rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		if (rc != SBX_OK) {
			curl_slist_free_all(hdrs);
			curl_easy_cleanup(c);
			return rc;
		}
		hdr_ctx hc = {.retry_after = -1};
		resp->len = 0;
		if (resp->data)
			resp->data[0] = '\0';
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
		if (body)
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, &hc);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
		int64_t left = deadline_us - k8s__now_us();
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(left > 1000 ? left / 1000 : 1));
		CURLcode cc = curl_easy_perform(c);
		long code = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		curl_slist_free_all(hdrs);
		curl_easy_cleanup(c);
		int retry = 0;
		if (cc != CURLE_OK) {
			retry = cc != CURLE_OPERATION_TIMEDOUT;
			if (!retry || attempt >= st->max_retries ||
			    k8s__now_us() + backoff_us(attempt, -1) >= deadline_us)
				return k8s__host->set_error(
				    err,
				    cc == CURLE_OPERATION_TIMEDOUT ? SBX_E_TIMEOUT
								   : SBX_E_UNREACHABLE,
				    "k8s: %s %s: %s", method, st->conn.server,
				    curl_easy_strerror(cc));
		} else if (code == 429 || (code >= 500 && (hc.retry_after >= 0 || code != 501))) {
			retry = 1;
			if (attempt >= st->max_retries ||
			    k8s__now_us() + backoff_us(attempt, hc.retry_after) >= deadline_us) {
				char tmp[300];
				return k8s__host->set_error(
				    err, code == 429 ? SBX_E_RATE_LIMITED : SBX_E_BACKEND,
				    "k8s: %s %s: HTTP %ld after %d attempts: %s", method, path,
				    code, attempt + 1, k8s__status_message(resp, tmp, sizeof(tmp)));
			}
			if (code == 429)
				k8s__host->log(SBX_LOG_INFO, "k8s",
					       "%s %s: 429 from the apiserver, retrying after %lds",
					       method, path, hc.retry_after);
		}
		if (cc == CURLE_OK && code == 401 && st->conn.cred && !refreshed) {
			/* The exec plugin's credential was refused: run it again, once, as
			 * client-go refreshes it after a 401. */
			k8s__cred_expire(st->conn.cred, gen);
			refreshed = 1;
			attempt--;
			continue;
		}
		if (!retry) {
			*http = code;
			return SBX_OK;
		}
		k8s__sleep_us(backoff_us(attempt, cc == CURLE_OK ? hc.retry_after : -1));
	}
}

typedef struct stream_ctx {
	k8s_buf line;
	k8s_buf *errbody;
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
		if (s->errbody->len < 65536 && k8s__buf_add(s->errbody, p, len) != SBX_OK)
			s->nomem = 1;
		return s->nomem ? 0 : len;
	}
	for (size_t i = 0; i < len; i++) {
		if (p[i] != '\n') {
			if (k8s__buf_add(&s->line, p + i, 1) != SBX_OK) {
				s->nomem = 1;
				return 0;
			}
			continue;
		}
		if (s->line.len && s->fn(s->ctx, s->line.data, s->line.len)) {
			s->stopped = 1;
			return 0;
		}
		s->line.len = 0;
	}
	return len;
}

int k8s__stream(k8s_state *st, const char *path, int64_t deadline_us, k8s_line_fn fn, void *ctx,
		long *http, k8s_buf *errbody, sbx_error *err)
{
	char url[4096];
	int n = snprintf(url, sizeof(url), "%s%s", st->conn.server, path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return k8s__host->set_error(err, SBX_E_INVAL, "k8s: watch path too long");
	k8s__bucket_take(st);
	CURL *c = curl_easy_init();
	if (!c)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	struct curl_slist *hdrs = NULL;
	int rc = k8s__conn_setup(&st->conn, c, &hdrs, err);
	if (rc != SBX_OK) {
		curl_easy_cleanup(c);
		return rc;
	}
	stream_ctx s = {.errbody = errbody, .fn = fn, .ctx = ctx, .c = c};
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	int64_t left = deadline_us - k8s__now_us();
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(left > 1000 ? left / 1000 : 1));
	CURLcode cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &s.code);
	*http = s.code;
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	k8s__buf_free(&s.line);
	if (s.nomem)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	if (s.stopped || cc == CURLE_OK)
		return SBX_OK;
	if (cc == CURLE_OPERATION_TIMEDOUT)
		return k8s__host->set_error(err, SBX_E_TIMEOUT, "k8s: watch %s timed out", path);
	return k8s__host->set_error(err, SBX_E_UNREACHABLE, "k8s: watch %s: %s", st->conn.server,
				    curl_easy_strerror(cc));
}

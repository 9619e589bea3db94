/* HTTP for both planes: control-plane REST calls with retries, the per-sandbox envd target
 * cache, and Connect unary calls. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "e2b.h"

void sbx__e2_resp_free(e2_resp *r)
{
	sbx__e2_host->free(r->body);
	memset(r, 0, sizeof(*r));
}

size_t sbx__e2_collect(char *data, size_t size, size_t n, void *ctx)
{
	e2_resp *r = ctx;
	size_t add = size * n;
	if (r->len + add + 1 > r->cap) {
		size_t cap = r->cap ? r->cap : 1024;
		while (cap < r->len + add + 1)
			cap *= 2;
		char *b = sbx__e2_host->realloc(r->body, cap);
		if (!b) {
			r->oom = 1;
			return 0;
		}
		r->body = b;
		r->cap = cap;
	}
	memcpy(r->body + r->len, data, add);
	r->len += add;
	r->body[r->len] = '\0';
	return add;
}

void sbx__e2_message(const e2_resp *r, char *buf, size_t cap)
{
	json_t *j = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(j, "message"));
	if (m)
		snprintf(buf, cap, "%s", m);
	else if (r->body && r->len)
		snprintf(buf, cap, "%.*s", (int)(r->len > 200 ? 200 : r->len), r->body);
	else
		snprintf(buf, cap, "(no body)");
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	json_decref(j);
}

static size_t header_cb(char *data, size_t size, size_t n, void *ctx)
{
	e2_resp *r = ctx;
	size_t len = size * n;
	static const char name[] = "retry-after:";
	if (len > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		char buf[32];
		size_t off = sizeof(name) - 1;
		while (off < len && data[off] == ' ')
			off++;
		snprintf(buf, sizeof(buf), "%.*s", (int)(len - off), data + off);
		char *end = NULL;
		errno = 0;
		double v = strtod(buf, &end);
		if (errno == 0 && end != buf && v >= 0)
			r->retry_after = v;
	}
	return len;
}

void sbx__e2_curl_common(CURL *c, e2_state *st)
{
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(c, CURLOPT_USERAGENT, "sbx-e2b/0.1.0");
	(void)st;
}

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = {.tv_sec = (time_t)s,
			      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double backoff(e2_state *st, int attempt, double retry_after)
{
	double d = st->retry_delay;
	for (int i = 0; i < attempt && d < st->retry_cap; i++)
		d *= 2;
	if (retry_after >= 0)
		d = retry_after;
	return d > st->retry_cap ? st->retry_cap : d;
}

int sbx__e2_api(e2_state *st, const char *method, const char *path, const char *body,
		int idempotent, e2_resp *resp, sbx_error *err)
{
	const sbx_host_api *h = sbx__e2_host;
	char url[2048], key[1024];
	struct curl_slist *hd = NULL;
	CURL *c = NULL;
	int rc = SBX_OK;
	int n = snprintf(url, sizeof(url), "%s%s", st->api_url, path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return h->set_error(err, SBX_E_INVAL, "e2b: %s %.100s: URL too long", method, path);
	n = snprintf(key, sizeof(key), "X-API-Key: %s", st->api_key);
	if (n < 0 || (size_t)n >= sizeof(key))
		return h->set_error(err, SBX_E_CONFIG, "e2b: api_key is too long");
	struct curl_slist *t = curl_slist_append(NULL, key);
	hd = t ? curl_slist_append(t, "Content-Type: application/json") : NULL;
	if (!hd) {
		curl_slist_free_all(t);
		return h->set_error(err, SBX_E_NOMEM, "e2b: out of memory");
	}
	explicit_bzero(key, sizeof(key));
	for (int attempt = 0;; attempt++) {
		sbx__e2_resp_free(resp);
		resp->retry_after = -1;
		c = curl_easy_init();
		if (!c) {
			rc = h->set_error(err, SBX_E_NOMEM, "e2b: out of memory");
			goto out;
		}
		sbx__e2_curl_common(c, st);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sbx__e2_collect);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(st->request_timeout * 1000));
		if (body)
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		CURLcode cc = curl_easy_perform(c);
		long status = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(c);
		c = NULL;
		if (resp->oom) {
			rc = h->set_error(err, SBX_E_NOMEM, "e2b: %s %s: out of memory", method,
					  path);
			goto out;
		}
		int retryable;
		if (cc != CURLE_OK) {
			/* Nothing was sent when the connection was refused, so even a create may
			 * try again then. */
			retryable = idempotent || cc == CURLE_COULDNT_CONNECT;
			if (!retryable || attempt >= st->retries) {
				rc =
				    h->set_error(err,
						 cc == CURLE_OPERATION_TIMEDOUT ? SBX_E_TIMEOUT
										: SBX_E_UNREACHABLE,
						 "e2b: %s %s: %s (api_url %s)", method, path,
						 curl_easy_strerror(cc), st->api_url);
				goto out;
			}
		} else {
			resp->status = status;
			retryable = status == 429 || (idempotent && status >= 500);
			if (!retryable || attempt >= st->retries)
				goto out;
		}
		double d = backoff(st, attempt, resp->retry_after);
		h->log(SBX_LOG_INFO, E2_ALIAS, "%s %s: %s, retrying in %.2fs (%d of %lld)", method,
		       path, cc != CURLE_OK ? curl_easy_strerror(cc) : "transient answer", d,
		       attempt + 1, (long long)st->retries);
		sleep_s(d);
	}
out:
	curl_slist_free_all(hd);
	return rc;
}

static int valid_id(const char *id)
{
	if (!id || !*id || strlen(id) >= 64)
		return 0;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return 0;
	return 1;
}

static int known_e2b_domain(const char *d)
{
	return strcmp(d, "e2b.app") == 0 || strcmp(d, "e2b.dev") == 0 ||
	       strcmp(d, "e2b.pro") == 0 || strcmp(d, "e2b-staging.dev") == 0;
}

int sbx__e2_target(e2_state *st, const char *id, e2_target *out, sbx_error *err)
{
	const sbx_host_api *h = sbx__e2_host;
	char path[128], msg[300];
	e2_resp resp = {0};
	json_t *j = NULL;
	int rc = SBX_OK;
	if (!valid_id(id))
		return h->set_error(err, SBX_E_BAD_ID, "e2b: id '%.64s' is not [a-z0-9]+", id);
	pthread_mutex_lock(&st->lock);
	for (e2_target *t = st->targets; t; t = t->next)
		if (strcmp(t->id, id) == 0) {
			*out = *t;
			pthread_mutex_unlock(&st->lock);
			return SBX_OK;
		}
	pthread_mutex_unlock(&st->lock);
	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	rc = sbx__e2_api(st, "GET", path, NULL, 1, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		rc = h->set_error(err, SBX_E_NOT_FOUND, "e2b: sandbox '%s' not found", id);
		goto out;
	}
	if (resp.status != 200) {
		sbx__e2_message(&resp, msg, sizeof(msg));
		rc = h->set_error(err, resp.status == 401 ? SBX_E_CONFIG : SBX_E_BACKEND,
				  "e2b: get sandbox '%s': API answered %ld: %s", id, resp.status,
				  msg);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
	const char *state = json_string_value(json_object_get(j, "state"));
	if (state && strcmp(state, "paused") == 0) {
		rc = h->set_error(err, SBX_E_PAUSED, "e2b: sandbox '%s' is paused", id);
		goto out;
	}
	e2_target *t = h->alloc(sizeof(*t));
	if (!t) {
		rc = h->set_error(err, SBX_E_NOMEM, "e2b: out of memory");
		goto out;
	}
	memset(t, 0, sizeof(*t));
	snprintf(t->id, sizeof(t->id), "%s", id);
	const char *tok = json_string_value(json_object_get(j, "envdAccessToken"));
	int n = snprintf(t->token, sizeof(t->token), "%s", tok ? tok : "");
	const char *dom = json_string_value(json_object_get(j, "domain"));
	if (!dom || !*dom)
		dom = st->domain;
	int m;
	if (st->sandbox_url)
		m = snprintf(t->base, sizeof(t->base), "%s", st->sandbox_url);
	else if (known_e2b_domain(dom))
		m = snprintf(t->base, sizeof(t->base), "https://sandbox.%s", dom);
	else
		m = snprintf(t->base, sizeof(t->base), "https://%s-%s.%s", E2_ENVD_PORT, id, dom);
	if (n < 0 || (size_t)n >= sizeof(t->token) || m < 0 || (size_t)m >= sizeof(t->base)) {
		h->free(t);
		rc = h->set_error(err, SBX_E_BACKEND, "e2b: sandbox '%s': token or URL too long",
				  id);
		goto out;
	}
	*out = *t;
	pthread_mutex_lock(&st->lock);
	t->next = st->targets;
	st->targets = t;
	pthread_mutex_unlock(&st->lock);
out:
	json_decref(j);
	sbx__e2_resp_free(&resp);
	return rc;
}

void sbx__e2_forget(e2_state *st, const char *id)
{
	pthread_mutex_lock(&st->lock);
	for (e2_target **p = &st->targets; *p; p = &(*p)->next)
		if (strcmp((*p)->id, id) == 0) {
			e2_target *t = *p;
			*p = t->next;
			sbx__e2_host->free(t);
			break;
		}
	pthread_mutex_unlock(&st->lock);
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

struct curl_slist *sbx__e2_envd_headers(const e2_target *t, const char *content_type,
					const char *user)
{
	char buf[600];
	struct curl_slist *l = NULL, *n;
#define ADD(...)                                         \
	do {                                             \
		snprintf(buf, sizeof(buf), __VA_ARGS__); \
		n = curl_slist_append(l, buf);           \
		if (!n) {                                \
			curl_slist_free_all(l);          \
			return NULL;                     \
		}                                        \
		l = n;                                   \
	} while (0)
	ADD("E2b-Sandbox-Id: %s", t->id);
	ADD("E2b-Sandbox-Port: %s", E2_ENVD_PORT);
	if (t->token[0])
		ADD("X-Access-Token: %s", t->token);
	if (content_type) {
		ADD("Content-Type: %s", content_type);
		ADD("Connect-Protocol-Version: 1");
	}
	if (user && *user && strlen(user) < 200) {
		/* Basic auth, user with an empty password. */
		char in[256], enc[400];
		size_t il = (size_t)snprintf(in, sizeof(in), "%s:", user), o = 0;
		for (size_t i = 0; i < il; i += 3) {
			uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
			if (i + 1 < il)
				v |= (uint32_t)(unsigned char)in[i + 1] << 8;
			if (i + 2 < il)
				v |= (unsigned char)in[i + 2];
			enc[o++] = b64[(v >> 18) & 63];
			enc[o++] = b64[(v >> 12) & 63];
			enc[o++] = i + 1 < il ? b64[(v >> 6) & 63] : '=';
			enc[o++] = i + 2 < il ? b64[v & 63] : '=';
		}
		enc[o] = '\0';
		ADD("Authorization: Basic %s", enc);
	}
#undef ADD
	return l;
}

int sbx__e2_unary(e2_state *st, const char *id, const char *method, json_t *req, json_t **resp,
		  char code[32], const char *what, sbx_error *err)
{
	const sbx_host_api *h = sbx__e2_host;
	e2_target t;
	e2_resp r = {0};
	char url[800], msg[300];
	char *body = NULL;
	struct curl_slist *hd = NULL;
	CURL *c = NULL;
	json_t *j = NULL;
	code[0] = '\0';
	*resp = NULL;
	int rc = sbx__e2_target(st, id, &t, err);
	if (rc != SBX_OK)
		return rc;
	int n = snprintf(url, sizeof(url), "%s/%s", t.base, method);
	body = json_dumps(req, JSON_COMPACT);
	hd = sbx__e2_envd_headers(&t, "application/json", NULL);
	c = curl_easy_init();
	if (n < 0 || (size_t)n >= sizeof(url) || !body || !hd || !c) {
		rc = h->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
		goto out;
	}
	for (int attempt = 0;; attempt++) {
		sbx__e2_resp_free(&r);
		curl_easy_reset(c);
		sbx__e2_curl_common(c, st);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sbx__e2_collect);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(st->request_timeout * 1000));
		CURLcode cc = curl_easy_perform(c);
		if (r.oom) {
			rc = h->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
			goto out;
		}
		if (cc != CURLE_OK) {
			if (attempt < st->retries) {
				sleep_s(backoff(st, attempt, -1));
				continue;
			}
			rc = h->set_error(err, SBX_E_UNREACHABLE, "e2b: %s: envd: %s", what,
					  curl_easy_strerror(cc));
			goto out;
		}
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
		if ((r.status == 429 || r.status == 503) && attempt < st->retries) {
			sleep_s(backoff(st, attempt, -1));
			continue;
		}
		break;
	}
	j = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
	if (r.status == 200) {
		*resp = j ? j : json_object();
		j = NULL;
		if (!*resp)
			rc = h->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
		goto out;
	}
	const char *cv = json_string_value(json_object_get(j, "code"));
	snprintf(code, 32, "%s", cv ? cv : (r.status == 502 ? "unavailable" : "unknown"));
	sbx__e2_message(&r, msg, sizeof(msg));
	if (r.status == 502) {
		rc = h->set_error(err, SBX_E_NOT_FOUND, "e2b: %s: sandbox '%s' unreachable: %s",
				  what, id, msg);
		goto out;
	}
	rc = h->set_error(err, SBX_E_BACKEND, "e2b: %s: envd answered %s: %s", what, code, msg);
out:
	json_decref(j);
	curl_easy_cleanup(c);
	curl_slist_free_all(hd);
	free(body);
	sbx__e2_resp_free(&r);
	return rc;
}

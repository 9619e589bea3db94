/* HTTP requests over libcurl with the retry policy described in <sbx/support/http.h>. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/http.h>
#include <sbx/support/random.h>

int sbxs_http_init(const char *alias, sbx_error *err)
{
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return sbxs_host->set_error(err, SBX_E_BACKEND, "%s: init: libcurl failed to start",
					    alias);
	return SBX_OK;
}

void sbxs_http_fini(void)
{
	curl_global_cleanup();
}

int sbxs_curl_status(CURLcode code)
{
	switch (code) {
	case CURLE_OK:
		return SBX_OK;
	case CURLE_OPERATION_TIMEDOUT:
		return SBX_E_TIMEOUT;
	case CURLE_OUT_OF_MEMORY:
		return SBX_E_NOMEM;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_BAD_FUNCTION_ARGUMENT:
		return SBX_E_INVAL;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return SBX_E_UNREACHABLE;
	default:
		return SBX_E_BACKEND;
	}
}

int64_t sbxs_retry_pause_ms(const sbxs_retry *p, int attempt, double retry_after)
{
	int64_t ms = p->base_ms > 0 ? p->base_ms : 1;
	for (int i = 0; i < attempt && ms < p->cap_ms; i++)
		ms *= 2;
	if (ms > p->cap_ms)
		ms = p->cap_ms;
	if (retry_after >= 0) {
		double cap = (double)p->retry_after_cap;
		ms = (int64_t)(retry_after * 1000 < cap ? retry_after * 1000 : cap);
	}
	if (p->jitter > 0 && ms > 0)
		ms += (int64_t)((double)ms * p->jitter * sbxs_random_unit());
	return ms;
}

/* ---- the share */

struct sbxs_http_share {
	CURLSH *sh;
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ctx)
{
	(void)h;
	(void)access;
	pthread_mutex_lock(&((sbxs_http_share *)ctx)->locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ctx)
{
	(void)h;
	pthread_mutex_unlock(&((sbxs_http_share *)ctx)->locks[data]);
}

int sbxs_http_share_new(sbxs_http_share **out)
{
	sbxs_http_share *s = sbxs_zalloc(sizeof(*s));
	if (!s)
		return SBX_E_NOMEM;
	s->sh = curl_share_init();
	if (!s->sh) {
		sbxs_host->free(s);
		return SBX_E_NOMEM;
	}
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s->locks[i], NULL);
	curl_share_setopt(s->sh, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(s->sh, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(s->sh, CURLSHOPT_USERDATA, s);
	curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	*out = s;
	return SBX_OK;
}

void sbxs_http_share_free(sbxs_http_share *s)
{
	if (!s)
		return;
	curl_share_cleanup(s->sh);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s->locks[i]);
	sbxs_host->free(s);
}

/* ---- one attempt */

typedef struct transfer {
	const sbxs_http_req *req;
	sbxs_http_resp *resp;
	int oom;
} transfer;

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
	transfer *a = ctx;
	uint64_t max = a->req->max_body;
	if (max && size * n > max - a->resp->body.len) {
		a->resp->too_long = 1;
		return 0; /* libcurl ends the transfer with a write error */
	}
	if (sbxs_buf_add(&a->resp->body, data, size * n) != SBX_OK) {
		a->oom = 1;
		return 0; /* libcurl ends the transfer with a write error */
	}
	return size * n;
}

static double parse_retry_after(const char *v, size_t len)
{
	char tmp[64];
	if (len == 0 || len >= sizeof(tmp))
		return -1;
	memcpy(tmp, v, len);
	tmp[len] = '\0';
	char *end = NULL;
	double s = strtod(tmp, &end);
	if (end != tmp && *end == '\0')
		return s >= 0 ? s : -1;
	int64_t when;
	if (sbxs_http_date(tmp, &when) == SBX_OK) {
		int64_t now = sbxs_wall_s();
		return when > now ? (double)(when - now) : 0;
	}
	return -1;
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
	transfer *a = ctx;
	size_t len = size * n, end = len;
	while (end > 0 && (data[end - 1] == '\r' || data[end - 1] == '\n'))
		end--;
	if (end >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		a->resp->retry_after = -1; /* a new answer (after a 100 or a redirect) begins */
		return len;
	}
	const char *colon = memchr(data, ':', end);
	if (!colon)
		return len;
	size_t nl = (size_t)(colon - data), vo = nl + 1;
	while (vo < end && (data[vo] == ' ' || data[vo] == '\t'))
		vo++;
	while (end > vo && (data[end - 1] == ' ' || data[end - 1] == '\t'))
		end--;
	if (nl == 11 && strncasecmp(data, "Retry-After", 11) == 0)
		a->resp->retry_after = parse_retry_after(data + vo, end - vo);
	if (a->req->on_header)
		a->req->on_header(a->req->ctx, data, nl, data + vo, end - vo);
	return len;
}

void sbxs_http_headers_free(struct curl_slist *headers)
{
	for (struct curl_slist *l = headers; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(headers);
}

static int add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);
	if (!l)
		return SBX_E_NOMEM;
	*list = l;
	return SBX_OK;
}

static int has_body(const char *method)
{
	return strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
	       strcmp(method, "PATCH") == 0;
}

int sbxs_http_prepare(const sbxs_http_req *req, CURL *easy, struct curl_slist **headers,
		      sbx_error *err)
{
	const char *what = req->what ? req->what : req->method;
	*headers = NULL;
	curl_easy_setopt(easy, CURLOPT_URL, req->url);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	if (req->share)
		curl_easy_setopt(easy, CURLOPT_SHARE, req->share->sh);
	if (strcmp(req->method, "GET") == 0)
		curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
	else if (strcmp(req->method, "HEAD") == 0)
		curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, req->method);
	if (req->body || has_body(req->method)) {
		curl_easy_setopt(easy, CURLOPT_POSTFIELDS, req->body ? req->body : "");
		curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(req->body ? req->body_len : 0));
	}
	if (req->timeout_ms > 0)
		curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
	/* No 100-continue round trip before a large body: every server here answers at once. */
	int rc = add_header(headers, "Expect:");
	for (size_t i = 0; rc == SBX_OK && req->headers && req->headers[i]; i++)
		rc = add_header(headers, req->headers[i]);
	if (rc != SBX_OK) {
		sbxs_http_headers_free(*headers);
		*headers = NULL;
		return sbxs_nomem(err, req->alias, what);
	}
	if (req->setup && (rc = req->setup(req->ctx, easy, headers, err)) != SBX_OK) {
		sbxs_http_headers_free(*headers);
		*headers = NULL;
		return rc;
	}
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, *headers);
	return SBX_OK;
}

static int perform(const sbxs_http_req *req, CURL *easy, sbxs_http_resp *resp, sbx_error *err)
{
	struct curl_slist *headers = NULL;
	transfer a = {.req = req, .resp = resp};
	sbxs_buf_clear(&resp->body);
	resp->status = 0;
	resp->retry_after = -1;
	resp->curl_code = CURLE_OK;
	resp->too_long = 0;
	curl_easy_reset(easy);
	int rc = sbxs_http_prepare(req, easy, &headers, err);
	if (rc != SBX_OK)
		return rc;
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, &a);
	curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(easy, CURLOPT_HEADERDATA, &a);
	resp->curl_code = curl_easy_perform(easy);
	resp->attempts++;
	sbxs_http_headers_free(headers);
	if (a.oom)
		return sbxs_nomem(err, req->alias, req->what ? req->what : req->method);
	if (resp->too_long)
		return sbxs_host->set_error(
		    err, SBX_E_LIMIT, "%s: %s: the answer is longer than %llu bytes", req->alias,
		    req->what ? req->what : req->method, (unsigned long long)req->max_body);
	if (resp->curl_code == CURLE_OK) {
		curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &resp->status);
		return SBX_OK;
	}
	return sbxs_host->set_error(err, sbxs_curl_status(resp->curl_code), "%s: %s: %s",
				    req->alias, req->what ? req->what : req->method,
				    curl_easy_strerror(resp->curl_code));
}

/* Whether what happened may be tried again under the policy (see the header). */
static int retryable(const sbxs_http_req *req, int rc, const sbxs_http_resp *resp)
{
	if (rc == SBX_OK) {
		long s = resp->status;
		if (s == 429)
			return 1;
		if (!req->idempotent || s < 500)
			return 0;
		if (s == 503)
			return 1;
		return (req->retry->flags & SBXS_RETRY_ANY_5XX) &&
		       (s != 501 || resp->retry_after >= 0);
	}
	switch (resp->curl_code) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return 1; /* nothing was sent */
	case CURLE_OK:
		return 0; /* out of memory, or the set-up refused */
	default:
		return req->idempotent && rc != SBX_E_INVAL && rc != SBX_E_NOMEM &&
		       rc != SBX_E_LIMIT;
	}
}

int sbxs_http_do(const sbxs_http_req *req, sbxs_http_resp *resp, sbx_error *err)
{
	const char *what = req->what ? req->what : req->method;
	memset(resp, 0, sizeof(*resp));
	resp->retry_after = -1;
	CURL *easy = curl_easy_init();
	if (!easy)
		return sbxs_nomem(err, req->alias, what);
	sbxs_http_req one = *req;
	int rc;
	for (int attempt = 0;; attempt++) {
		if (req->deadline_us) {
			int64_t left_ms = (req->deadline_us - sbxs_now_us()) / 1000;
			if (left_ms < 1)
				left_ms = 1;
			if (!one.timeout_ms || left_ms < req->timeout_ms)
				one.timeout_ms = left_ms;
		}
		rc = perform(&one, easy, resp, err);
		if (!req->retry || attempt >= req->retry->max_retries || !retryable(req, rc, resp))
			break;
		int64_t pause =
		    sbxs_retry_pause_ms(req->retry, attempt, rc == SBX_OK ? resp->retry_after : -1);
		if (req->deadline_us && sbxs_now_us() + pause * 1000 >= req->deadline_us)
			break;
		char why[64];
		if (rc == SBX_OK)
			snprintf(why, sizeof(why), "HTTP %ld", resp->status);
		else
			snprintf(why, sizeof(why), "%s", curl_easy_strerror(resp->curl_code));
		sbxs_host->log(SBX_LOG_INFO, req->alias, "%s: %s, retrying in %.2fs (%d of %d)",
			       what, why, (double)pause / 1000, attempt + 1,
			       req->retry->max_retries);
		sbxs_sleep_ms(pause);
		one.timeout_ms = req->timeout_ms;
	}
	curl_easy_cleanup(easy);
	return rc;
}

void sbxs_http_resp_free(sbxs_http_resp *r)
{
	sbxs_buf_free(&r->body);
	r->status = 0;
	r->retry_after = -1;
}

/* sbx-support: HTTP over libcurl, with one retry policy.
 *
 * sbxs_http_do makes one request and collects its answer into host memory, retrying what the
 * policy allows:
 *   - 429 always: the server refused the request without acting on it;
 *   - a connection that could not be made (refused, name not resolved) always: nothing was
 *     sent;
 *   - for idempotent requests only: 503 (and every other 5xx but 501 with SBXS_RETRY_ANY_5XX;
 *     501 too when it carries Retry-After), and transport failures after the request may
 *     have gone out (reset, timeout, empty answer). A non-idempotent request whose outcome
 *     is unknown is never sent twice: the caller gets the failure and decides.
 * The pause before retry n (0-based) is base * 2^n capped at `cap`, or the server's
 * Retry-After (seconds or an HTTP-date) capped at `retry_after_cap`, plus up to `jitter` of
 * itself at random, so many clients retrying at once spread out. No attempt and no pause
 * starts past the request's deadline.
 *
 * What stays with each backend is its protocol: the `setup` hook applies it to every easy
 * handle (unix socket and API version, E2B headers, kube TLS and credentials, a token
 * bucket). Streaming calls that the backend performs itself (exec streams, watches) prepare
 * their handle with sbxs_http_prepare so they get the same set-up.
 *
 * Thread-safe: a request uses only its own easy handle (and the share it names, which locks).
 * Call sbxs_http_init from the plugin's init and sbxs_http_fini from its fini. */
#ifndef SBX_SUPPORT_HTTP_H
#define SBX_SUPPORT_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include <sbx/plugin.h>
#include <sbx/support/buf.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libcurl's global set-up (reference-counted by libcurl). init never runs concurrently with
 * other calls, so this is the place for it rather than a racy first use. SBX_OK or
 * SBX_E_BACKEND with err filled. */
int sbxs_http_init(const char *alias, sbx_error *err);
void sbxs_http_fini(void);

/* The sbx status for a libcurl result: SBX_OK, SBX_E_TIMEOUT (the transfer timed out),
 * SBX_E_NOMEM, SBX_E_INVAL (a request libcurl cannot express: bad URL, unsupported scheme),
 * SBX_E_UNREACHABLE (connection, name resolution, TLS, send or receive failed, the answer
 * was cut or missing) or SBX_E_BACKEND (anything else). */
int sbxs_curl_status(CURLcode code);

#define SBXS_RETRY_ANY_5XX 1u /* idempotent requests retry every 5xx, not only 503 */

typedef struct sbxs_retry {
	int max_retries;         /* retries after the first attempt; 0: one attempt */
	int64_t base_ms;         /* pause before the first retry */
	int64_t cap_ms;          /* the longest pause the doubling reaches */
	int64_t retry_after_cap; /* ms, the longest Retry-After honoured */
	double jitter;           /* 0..1: up to this fraction of a pause is added at random */
	uint32_t flags;          /* SBXS_RETRY_* */
} sbxs_retry;

/* The pause before retry `attempt` (0-based) in ms, Retry-After (seconds, < 0 when absent)
 * taking the place of the doubling, jitter included. */
int64_t sbxs_retry_pause_ms(const sbxs_retry *p, int attempt, double retry_after);

/* A connection cache (and DNS cache) shared by the handles of one plugin state, with the
 * locks that let many threads use it. */
typedef struct sbxs_http_share sbxs_http_share;
int sbxs_http_share_new(sbxs_http_share **out);
void sbxs_http_share_free(sbxs_http_share *s);

/* Protocol set-up of one attempt's handle. It may append "Name: value" lines to *headers
 * (wiped and freed after the attempt: credentials are welcome there). Returns SBX_OK or a
 * status with err filled, which ends the request. */
typedef int (*sbxs_http_setup_fn)(void *ctx, CURL *easy, struct curl_slist **headers,
				  sbx_error *err);

/* Called for every header line of every answer, name and value trimmed. */
typedef void (*sbxs_http_header_fn)(void *ctx, const char *name, size_t name_len, const char *value,
				    size_t value_len);

typedef struct sbxs_http_req {
	const char *alias;  /* prefix of messages and logs */
	const char *method; /* GET, HEAD, POST, PUT, PATCH, DELETE... */
	const char *url;
	const char *what;           /* names the call in messages (no secrets); NULL: method */
	const char *const *headers; /* "Name: value" lines, NULL-terminated; may be NULL */
	const void *body;           /* NULL: none (POST, PUT and PATCH then send an empty one) */
	size_t body_len;
	int idempotent;                /* sending it twice does no harm */
	int64_t timeout_ms;            /* per attempt, 0: none */
	int64_t deadline_us;           /* sbxs_now_us() clock, 0: none */
	const sbxs_retry *retry;       /* NULL: one attempt */
	sbxs_http_share *share;        /* NULL: none */
	sbxs_http_setup_fn setup;      /* may be NULL */
	sbxs_http_header_fn on_header; /* may be NULL */
	void *ctx;                     /* for setup and on_header */
	/* The longest body taken, 0: no limit. A longer one ends the transfer: SBX_E_LIMIT,
	 * never retried, with resp->too_long set (the peer may be a sandbox's, so a reply
	 * never grows past what the caller can hold). */
	uint64_t max_body;
} sbxs_http_req;

typedef struct sbxs_http_resp {
	long status;        /* HTTP status of the answer, 0 when none arrived */
	sbxs_buf body;      /* its body (NUL-terminated) */
	double retry_after; /* its Retry-After in seconds, -1 when absent */
	int attempts;       /* attempts made */
	CURLcode curl_code; /* the last transfer's result */
	int too_long;       /* the body passed req->max_body */
} sbxs_http_resp;

/* Releases the body; the answer is empty and reusable afterwards. */
void sbxs_http_resp_free(sbxs_http_resp *r);

/* Performs the request with the retry policy. SBX_OK whenever an HTTP answer arrived,
 * whatever its status (after the retries allowed, the last one); otherwise the status of
 * the failure (sbxs_curl_status, SBX_E_NOMEM, or what setup returned) with err filled as
 * "<alias>: <what>: <libcurl's reason>" and resp->curl_code set, for a plugin that words it
 * its own way. resp is overwritten (free it with sbxs_http_resp_free in every case). */
int sbxs_http_do(const sbxs_http_req *req, sbxs_http_resp *resp, sbx_error *err);

/* Prepares `easy` as one attempt of sbxs_http_do would (URL, method, body, headers, timeout,
 * share, setup), for a transfer the caller performs itself (a stream); the caller sets the
 * write callback. *headers receives the header list to free with sbxs_http_headers_free
 * after the transfer. Retry and deadline fields are not used. */
int sbxs_http_prepare(const sbxs_http_req *req, CURL *easy, struct curl_slist **headers,
		      sbx_error *err);

/* Zeroes every line (they may hold credentials) and frees the list. NULL is a no-op. */
void sbxs_http_headers_free(struct curl_slist *headers);

#ifdef __cplusplus
}
#endif
#endif

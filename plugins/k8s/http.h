/* REST calls to the apiserver over sbx-support's HTTP layer. What stays here is Kubernetes':
 * TLS with the kubeconfig's CA and client certificate, the bearer token (re-read from its file
 * on every request), HTTP/1.1, and the client-side token bucket; plus streaming GETs for
 * watches. */
#ifndef SBX_K8S_HTTP_H
#define SBX_K8S_HTTP_H

#include <stdint.h>

#include <curl/curl.h>

#include <sbx/plugin.h>
#include <sbx/support/buf.h>

#include "state.h"

/* Applies TLS, credentials and HTTP/1.1 to a handle; the Authorization line goes to
 * *headers (wiped and freed by the caller with sbxs_http_headers_free). */
int k8s_conn_setup(const k8s_conn *conn, CURL *easy, struct curl_slist **headers, sbx_error *err);

/* Waits for a token of the client-side bucket (qps 0: none). */
void k8s_bucket_take(k8s_state *st);

/* One REST call (body JSON or NULL) under the retry policy (429 and 5xx with Retry-After,
 * transport failures, until max_retries or the deadline). *http gets the final status and
 * resp its body. A 429 or 5xx still there when the retries run out is an error ("HTTP 429
 * after 3 attempts: ..."); other statuses are the caller's. */
int k8s_request(k8s_state *st, const char *method, const char *path, const char *body,
		int64_t deadline_us, long *http, sbxs_buf *resp, sbx_error *err);

/* A streaming GET (a watch): fn gets every newline-terminated line until it returns nonzero,
 * the stream ends or the deadline passes. *http gets the status; a non-200 answer's body
 * goes to errbody (up to 64 KiB). */
typedef int (*k8s_line_fn)(void *ctx, const char *line, size_t len);
int k8s_stream(k8s_state *st, const char *path, int64_t deadline_us, k8s_line_fn fn, void *ctx,
	       long *http, sbxs_buf *errbody, sbx_error *err);

/* The message of a Status body (or the raw body), one line; returns tmp. */
const char *k8s_status_message(const sbxs_buf *body, char *tmp, size_t cap);

/* An error answer of `what`: 404 SBX_E_NOT_FOUND, 401/403 SBX_E_CONFIG, 429
 * SBX_E_RATE_LIMITED, else SBX_E_BACKEND, with the Status message. */
int k8s_api_error(const char *what, long http, const sbxs_buf *body, sbx_error *err);

#endif

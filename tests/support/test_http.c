/* sbxs_http_do against a scripted HTTP server on loopback: what is retried, what is not, and
 * what reaches the server. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sbx/support.h>

#include "testhost.h"

/* One scripted answer: a status with extra header lines and a body, or (drop) a connection
 * closed after the request was read, without an answer. */
typedef struct step {
	int status;
	const char *headers;
	const char *body;
	int drop;
} step;

static struct {
	int fd;
	int port;
	const step *steps;
	size_t n;
	size_t seen;          /* requests read */
	char last_head[4096]; /* head of the last request */
	char last_body[4096]; /* its body */
	pthread_t thread;
} srv;

static void *serve(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < srv.n; i++) {
		int c = accept(srv.fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[8192];
		size_t len = 0;
		char *end = NULL;
		while (!end && len < sizeof(buf) - 1) {
			ssize_t r = read(c, buf + len, sizeof(buf) - 1 - len);
			if (r <= 0)
				break;
			len += (size_t)r;
			buf[len] = '\0';
			end = strstr(buf, "\r\n\r\n");
		}
		size_t head = end ? (size_t)(end - buf) + 4 : len;
		const char *cl = strcasestr(buf, "\r\nContent-Length:");
		size_t want = cl && cl < buf + head ? strtoul(cl + 17, NULL, 10) : 0;
		while (len - head < want && len < sizeof(buf) - 1) {
			ssize_t r = read(c, buf + len, sizeof(buf) - 1 - len);
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		buf[len] = '\0';
		snprintf(srv.last_head, sizeof(srv.last_head), "%.*s", (int)head, buf);
		snprintf(srv.last_body, sizeof(srv.last_body), "%s", buf + head);
		__atomic_add_fetch(&srv.seen, 1, __ATOMIC_SEQ_CST);
		const step *s = &srv.steps[i];
		if (!s->drop) {
			char out[8192];
			const char *body = s->body ? s->body : "";
			int n =
			    snprintf(out, sizeof(out),
				     "HTTP/1.1 %d Scripted\r\nContent-Length: %zu\r\nConnection: "
				     "close\r\n%s\r\n%s",
				     s->status, strlen(body), s->headers ? s->headers : "", body);
			if (write(c, out, (size_t)n) != n)
				break;
		}
		close(c);
	}
	return NULL;
}

static void start(const step *steps, size_t n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	srv.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(srv.fd >= 0);
	cr_assert_eq(bind(srv.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(srv.fd, 16), 0);
	getsockname(srv.fd, (struct sockaddr *)&a, &al);
	srv.port = ntohs(a.sin_port);
	srv.steps = steps;
	srv.n = n;
	srv.seen = 0;
	pthread_create(&srv.thread, NULL, serve, NULL);
}

static void stop(void)
{
	shutdown(srv.fd, SHUT_RDWR);
	close(srv.fd);
	pthread_join(srv.thread, NULL);
}

/* A loopback port nothing listens on. */
static int closed_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bind(fd, (struct sockaddr *)&a, sizeof(a));
	getsockname(fd, (struct sockaddr *)&a, &al);
	close(fd);
	return ntohs(a.sin_port);
}

static const sbxs_retry fast = {
    .max_retries = 3, .base_ms = 1, .cap_ms = 4, .retry_after_cap = 2000, .jitter = 0.5};

static char url[128];

static int run(const char *method, const char *body, int idempotent, const sbxs_retry *retry,
	       sbxs_http_resp *resp, sbx_error *err)
{
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/thing?x=1", srv.port);
	sbxs_http_req req = {.alias = "t",
			     .method = method,
			     .url = url,
			     .what = "call",
			     .body = body,
			     .body_len = body ? strlen(body) : 0,
			     .idempotent = idempotent,
			     .timeout_ms = 10000,
			     .retry = retry};
	return sbxs_http_do(&req, resp, err);
}

static void setup(void)
{
	sbxs_host_set(&test_host);
	test_fail_allocs_after(-1);
	cr_assert_eq(sbxs_http_init("t", NULL), SBX_OK);
}

TestSuite(support_http, .init = setup, .timeout = 60);

static char seen_header[128];

static void on_header(void *ctx, const char *name, size_t nl, const char *value, size_t vl)
{
	(void)ctx;
	if (nl == 7 && strncasecmp(name, "X-Thing", 7) == 0)
		snprintf(seen_header, sizeof(seen_header), "%.*s", (int)vl, value);
}

Test(support_http, an_answer_is_collected_with_its_headers)
{
	static const step s[] = {
	    {.status = 200, .headers = "X-Thing:  v a l \r\n", .body = "hello"}};
	start(s, 1);
	sbxs_http_resp r;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/p", srv.port);
	sbxs_http_req req = {.alias = "t", .method = "GET", .url = url, .on_header = on_header};
	cr_assert_eq(sbxs_http_do(&req, &r, NULL), SBX_OK);
	stop();
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body.data, "hello");
	cr_assert_eq(r.body.len, 5);
	cr_assert_eq(r.attempts, 1);
	cr_assert_eq(r.retry_after, -1);
	cr_assert_str_eq(seen_header, "v a l");
	cr_assert(strncmp(srv.last_head, "GET /p HTTP/1.1\r\n", 17) == 0, "%s", srv.last_head);
	sbxs_http_resp_free(&r);
}

Test(support_http, a_body_and_an_empty_post_carry_their_length)
{
	static const step s[] = {{.status = 201}, {.status = 204}};
	start(s, 2);
	sbxs_http_resp r;
	cr_assert_eq(run("POST", "{\"a\":1}", 0, NULL, &r, NULL), SBX_OK);
	cr_assert_eq(r.status, 201);
	cr_assert_str_eq(srv.last_body, "{\"a\":1}");
	cr_assert(strcasestr(srv.last_head, "Content-Length: 7\r\n"), "%s", srv.last_head);
	cr_assert_null(strcasestr(srv.last_head, "Expect:"));
	cr_assert_eq(run("POST", NULL, 0, NULL, &r, NULL), SBX_OK);
	cr_assert(strcasestr(srv.last_head, "Content-Length: 0\r\n"), "%s", srv.last_head);
	stop();
	sbxs_http_resp_free(&r);
}

Test(support_http, a_429_is_retried_after_retry_after_even_when_not_idempotent)
{
	static const step s[] = {{.status = 429, .headers = "Retry-After: 0\r\n"},
				 {.status = 429, .headers = "Retry-After: 0\r\n"},
				 {.status = 201, .body = "made"}};
	start(s, 3);
	sbxs_http_resp r;
	cr_assert_eq(run("POST", "{}", 0, &fast, &r, NULL), SBX_OK);
	stop();
	cr_assert_eq(r.status, 201);
	cr_assert_eq(r.attempts, 3);
	cr_assert_str_eq(r.body.data, "made", "only the last answer's body is kept");
	cr_assert_str_eq(test_last_log(), "t: call: HTTP 429, retrying in 0.00s (2 of 3)");
	sbxs_http_resp_free(&r);
}

Test(support_http, a_503_is_retried_only_for_an_idempotent_request)
{
	static const step s[] = {{.status = 503}, {.status = 200}, {.status = 503}};
	start(s, 3);
	sbxs_http_resp r;
	cr_assert_eq(run("GET", NULL, 1, &fast, &r, NULL), SBX_OK);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.attempts, 2);
	cr_assert_eq(run("POST", "{}", 0, &fast, &r, NULL), SBX_OK);
	stop();
	cr_assert_eq(r.status, 503, "a non-idempotent request's 503 goes to the caller");
	cr_assert_eq(r.attempts, 1);
	cr_assert_eq(srv.seen, 3);
	sbxs_http_resp_free(&r);
}

Test(support_http, other_5xx_need_the_any_5xx_policy_and_501_needs_retry_after)
{
	sbxs_retry any = fast;
	any.flags = SBXS_RETRY_ANY_5XX;
	static const step s[] = {{.status = 500},
				 {.status = 502},
				 {.status = 200},
				 {.status = 501},
				 {.status = 501, .headers = "Retry-After: 0\r\n"},
				 {.status = 200}};
	start(s, 6);
	sbxs_http_resp r;
	cr_assert_eq(run("GET", NULL, 1, &fast, &r, NULL), SBX_OK);
	cr_assert_eq(r.status, 500, "only 503 without the policy flag");
	cr_assert_eq(run("GET", NULL, 1, &any, &r, NULL), SBX_OK);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.attempts, 2);
	cr_assert_eq(run("GET", NULL, 1, &any, &r, NULL), SBX_OK);
	cr_assert_eq(r.status, 501, "501 is not retried");
	cr_assert_eq(run("GET", NULL, 1, &any, &r, NULL), SBX_OK);
	cr_assert_eq(r.status, 200, "501 with Retry-After is");
	cr_assert_eq(r.attempts, 2);
	stop();
	sbxs_http_resp_free(&r);
}

Test(support_http, a_lost_answer_is_never_sent_again_for_a_non_idempotent_request)
{
	static const step s[] = {{.drop = 1}, {.drop = 1}, {.status = 200}};
	start(s, 3);
	sbxs_http_resp r;
	sbx_error err = {0};
	cr_assert_eq(run("POST", "{}", 0, &fast, &r, &err), SBX_E_UNREACHABLE);
	cr_assert_eq(r.attempts, 1);
	cr_assert_eq(r.curl_code, CURLE_GOT_NOTHING);
	cr_assert_str_eq(err.message, "t: call: Server returned nothing (no headers, no data)");
	cr_assert_eq(run("GET", NULL, 1, &fast, &r, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.attempts, 2);
	stop();
	cr_assert_eq(srv.seen, 3);
	sbxs_http_resp_free(&r);
}

Test(support_http, a_refused_connection_is_retried_because_nothing_was_sent)
{
	srv.port = closed_port();
	sbxs_http_resp r;
	sbx_error err = {0};
	cr_assert_eq(run("POST", "{}", 0, &fast, &r, &err), SBX_E_UNREACHABLE);
	cr_assert_eq(r.attempts, 4);
	cr_assert_eq(r.status, 0);
	cr_assert(strncmp(err.message, "t: call: Could", 14) == 0, "%s", err.message);
	cr_assert_eq(run("POST", "{}", 0, NULL, &r, &err), SBX_E_UNREACHABLE);
	cr_assert_eq(r.attempts, 1, "no policy, one attempt");
	sbxs_http_resp_free(&r);
}

Test(support_http, no_pause_starts_past_the_deadline)
{
	static const step s[] = {{.status = 429, .headers = "Retry-After: 30\r\n"},
				 {.status = 200}};
	start(s, 2);
	sbxs_retry slow = fast;
	slow.retry_after_cap = 60000;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	sbxs_http_req req = {.alias = "t",
			     .method = "GET",
			     .url = url,
			     .idempotent = 1,
			     .retry = &slow,
			     .deadline_us = sbxs_now_us() + 5000000};
	sbxs_http_resp r;
	int64_t t0 = sbxs_now_us();
	cr_assert_eq(sbxs_http_do(&req, &r, NULL), SBX_OK);
	cr_assert_eq(r.status, 429, "a 30 s Retry-After does not fit in 5 s: the 429 is returned");
	cr_assert_eq(r.retry_after, 30);
	cr_assert_lt(sbxs_now_us() - t0, 4000000);
	/* Let the server finish its script. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	req.retry = NULL;
	req.deadline_us = 0;
	sbxs_http_do(&req, &r, NULL);
	stop();
	sbxs_http_resp_free(&r);
}

static int setup_adds(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	(void)easy;
	int *calls = ctx;
	if (++*calls == 3)
		return sbxs_host->set_error(err, SBX_E_CONFIG, "t: no credentials");
	struct curl_slist *l = curl_slist_append(*headers, "Authorization: Bearer s3cret");
	if (!l)
		return SBX_E_NOMEM;
	*headers = l;
	return SBX_OK;
}

Test(support_http, the_setup_hook_runs_on_every_attempt_and_can_end_the_request)
{
	static const step s[] = {{.status = 503}, {.status = 503}};
	start(s, 2);
	int calls = 0;
	const char *const extra[] = {"Accept: application/json", NULL};
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	sbxs_http_req req = {.alias = "t",
			     .method = "GET",
			     .url = url,
			     .headers = extra,
			     .idempotent = 1,
			     .retry = &fast,
			     .setup = setup_adds,
			     .ctx = &calls};
	sbxs_http_resp r;
	sbx_error err = {0};
	cr_assert_eq(sbxs_http_do(&req, &r, &err), SBX_E_CONFIG);
	stop();
	cr_assert_str_eq(err.message, "t: no credentials");
	cr_assert_eq(calls, 3);
	cr_assert_eq(srv.seen, 2);
	cr_assert(strstr(srv.last_head, "Authorization: Bearer s3cret\r\n"), "%s", srv.last_head);
	cr_assert(strstr(srv.last_head, "Accept: application/json\r\n"), "%s", srv.last_head);
	sbxs_http_resp_free(&r);
}

Test(support_http, retry_after_may_be_an_http_date)
{
	char hdr[128], date[64];
	time_t soon = time(NULL) - 5; /* in the past: retry at once */
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime(&soon));
	snprintf(hdr, sizeof(hdr), "Retry-After: %s\r\n", date);
	step s[] = {{.status = 429, .headers = hdr}, {.status = 200}};
	start(s, 2);
	sbxs_http_resp r;
	cr_assert_eq(run("GET", NULL, 1, &fast, &r, NULL), SBX_OK);
	stop();
	cr_assert_eq(r.status, 200);
	cr_assert_eq(r.attempts, 2);
	sbxs_http_resp_free(&r);
}

Test(support_http, out_of_memory_for_the_body_is_nomem)
{
	static const step s[] = {{.status = 200, .body = "a body that needs memory"}};
	start(s, 1);
	sbxs_http_resp r;
	sbx_error err = {0};
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", srv.port);
	sbxs_http_req req = {.alias = "t", .method = "GET", .url = url, .what = "get thing"};
	test_fail_allocs_after(0);
	int rc = sbxs_http_do(&req, &r, &err);
	test_fail_allocs_after(-1);
	stop();
	cr_assert_eq(rc, SBX_E_NOMEM);
	cr_assert_str_eq(err.message, "t: get thing: out of memory");
	sbxs_http_resp_free(&r);
}

Test(support_http, pauses_double_to_the_cap_and_honour_retry_after)
{
	sbxs_retry p = {
	    .max_retries = 10, .base_ms = 250, .cap_ms = 8000, .retry_after_cap = 30000};
	static const int64_t want[] = {250, 500, 1000, 2000, 4000, 8000, 8000};
	for (int i = 0; i < 7; i++)
		cr_assert_eq(sbxs_retry_pause_ms(&p, i, -1), want[i], "attempt %d", i);
	cr_assert_eq(sbxs_retry_pause_ms(&p, 0, 3), 3000);
	cr_assert_eq(sbxs_retry_pause_ms(&p, 0, 100), 30000);
	cr_assert_eq(sbxs_retry_pause_ms(&p, 5, 0), 0);
	p.jitter = 0.5;
	for (int i = 0; i < 200; i++) {
		int64_t ms = sbxs_retry_pause_ms(&p, 2, -1);
		cr_assert(ms >= 1000 && ms <= 1500, "%lld", (long long)ms);
	}
}

Test(support_http, curl_results_map_to_statuses)
{
	cr_assert_eq(sbxs_curl_status(CURLE_OK), SBX_OK);
	cr_assert_eq(sbxs_curl_status(CURLE_OPERATION_TIMEDOUT), SBX_E_TIMEOUT);
	cr_assert_eq(sbxs_curl_status(CURLE_COULDNT_CONNECT), SBX_E_UNREACHABLE);
	cr_assert_eq(sbxs_curl_status(CURLE_RECV_ERROR), SBX_E_UNREACHABLE);
	cr_assert_eq(sbxs_curl_status(CURLE_OUT_OF_MEMORY), SBX_E_NOMEM);
	cr_assert_eq(sbxs_curl_status(CURLE_URL_MALFORMAT), SBX_E_INVAL);
	cr_assert_eq(sbxs_curl_status(CURLE_WEIRD_SERVER_REPLY), SBX_E_BACKEND);
}

/* A peer inside a sandbox chooses how long its answer is: past max_body the transfer ends
 * with SBX_E_LIMIT, the body kept no longer than the limit, and it is not asked again. */
Test(support_http, a_body_past_max_body_is_refused_and_not_retried)
{
	static const step s[] = {{.status = 200, .body = "0123456789abcdef"},
				 {.status = 200, .body = "0123456789abcdef"}};
	start(s, 2);
	sbxs_http_resp r;
	sbx_error err = {0};
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/big", srv.port);
	sbxs_http_req req = {.alias = "t",
			     .method = "GET",
			     .url = url,
			     .what = "read",
			     .idempotent = 1,
			     .retry = &fast,
			     .max_body = 15};
	cr_assert_eq(sbxs_http_do(&req, &r, &err), SBX_E_LIMIT);
	cr_assert_str_eq(err.message, "t: read: the answer is longer than 15 bytes");
	cr_assert_eq(r.too_long, 1);
	cr_assert_eq(r.attempts, 1);
	cr_assert_leq(r.body.len, 15);
	req.max_body = 16; /* exactly as long: taken whole */
	cr_assert_eq(sbxs_http_do(&req, &r, &err), SBX_OK, "%s", err.message);
	stop();
	cr_assert_eq(r.too_long, 0);
	cr_assert_str_eq(r.body.data, "0123456789abcdef");
	sbxs_http_resp_free(&r);
}

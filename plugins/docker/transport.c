/* The Engine API transport: libcurl over a unix socket or tcp, with one CURLSH per plugin
 * state so connections are kept alive and reused across calls and threads, and the API
 * version negotiated once from /version. An exec's stream is the exception: it runs on a
 * connection of its own that libcurl only opens (CURLOPT_CONNECT_ONLY), since sending stdin
 * ends with a half-close (shutdown(SHUT_WR)) that libcurl has no call for. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "docker.h"

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ctx)
{
	(void)h;
	(void)access;
	dk_state *st = ctx;
	pthread_mutex_lock(&st->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ctx)
{
	(void)h;
	dk_state *st = ctx;
	pthread_mutex_unlock(&st->share_locks[data]);
}

static int set_host(dk_state *st, const char *spec, sbx_error *err)
{
	int n;
	if (snprintf(st->host_desc, sizeof(st->host_desc), "%s", spec) >=
	    (int)sizeof(st->host_desc))
		return sbx__dk_host->set_error(err, SBX_E_CONFIG,
					       "docker: host '%.64s...' is too long", spec);
	if (strncmp(spec, "unix://", 7) == 0 || spec[0] == '/') {
		const char *p = spec[0] == '/' ? spec : spec + 7;
		n = snprintf(st->socket_path, sizeof(st->socket_path), "%s", p);
		if (n < 0 || (size_t)n >= sizeof(st->socket_path) || p[0] != '/')
			return sbx__dk_host->set_error(
			    err, SBX_E_CONFIG,
			    "docker: host '%.200s' is not unix:///absolute/path (under 108 bytes)",
			    spec);
		snprintf(st->base_url, sizeof(st->base_url), "http://localhost");
		return SBX_OK;
	}
	if (strncmp(spec, "tcp://", 6) == 0 && spec[6]) {
		st->socket_path[0] = '\0';
		n = snprintf(st->base_url, sizeof(st->base_url), "http://%s", spec + 6);
		if (n < 0 || (size_t)n >= sizeof(st->base_url))
			return sbx__dk_host->set_error(err, SBX_E_CONFIG,
						       "docker: host '%.64s...' is too long", spec);
		size_t l = strlen(st->base_url);
		if (st->base_url[l - 1] == '/')
			st->base_url[l - 1] = '\0';
		return SBX_OK;
	}
	return sbx__dk_host->set_error(
	    err, SBX_E_CONFIG, "docker: host '%.200s' is neither unix://PATH nor tcp://HOST:PORT",
	    spec);
}

int sbx__dk_transport_init(dk_state *st, const char *host_key, sbx_error *err)
{
	const char *spec = host_key;
	struct stat sb;
	if (!spec || !*spec)
		spec = getenv("DOCKER_HOST");
	if (!spec || !*spec)
		spec = stat("/run/podman/podman.sock", &sb) == 0 ? "unix:///run/podman/podman.sock"
								 : "unix:///var/run/docker.sock";
	int rc = set_host(st, spec, err);
	if (rc != SBX_OK)
		return rc;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&st->share_locks[i], NULL);
	pthread_mutex_init(&st->version_lock, NULL);
	st->share = curl_share_init();
	if (!st->share)
		return sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: init: out of memory");
	curl_share_setopt(st->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(st->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(st->share, CURLSHOPT_USERDATA, st);
	curl_share_setopt(st->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(st->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	snprintf(st->api_version, sizeof(st->api_version), "%s", DK_API_VERSION);
	return SBX_OK;
}

void sbx__dk_transport_fini(dk_state *st)
{
	if (st->share) {
		curl_share_cleanup(st->share);
		st->share = NULL;
		for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
			pthread_mutex_destroy(&st->share_locks[i]);
		pthread_mutex_destroy(&st->version_lock);
	}
}

size_t sbx__dk_collect(char *data, size_t size, size_t n, void *ctx)
{
	dk_resp *r = ctx;
	size_t add = size * n;
	if (r->len + add + 1 > r->cap) {
		size_t cap = r->cap ? r->cap : 1024;
		while (cap < r->len + add + 1)
			cap *= 2;
		char *b = sbx__dk_host->realloc(r->body, cap);
		if (!b) {
			r->oom = 1;
			return 0; /* curl reports a write error */
		}
		r->body = b;
		r->cap = cap;
	}
	memcpy(r->body + r->len, data, add);
	r->len += add;
	r->body[r->len] = '\0';
	return add;
}

/* Copies the value of header line `data` into buf when its name is `name` (with colon). */
static void header_value(const char *data, size_t len, const char *name, char *buf, size_t cap)
{
	size_t nl = strlen(name);
	if (len <= nl || strncasecmp(data, name, nl) != 0)
		return;
	size_t off = nl, end = len;
	while (off < len && (data[off] == ' ' || data[off] == '\t'))
		off++;
	while (end > off && (data[end - 1] == '\r' || data[end - 1] == '\n'))
		end--;
	snprintf(buf, cap, "%.*s", (int)(end - off), data + off);
}

static size_t collect_header(char *data, size_t size, size_t n, void *ctx)
{
	dk_resp *r = ctx;
	size_t len = size * n;
	header_value(data, len, "api-version:", r->api_version, sizeof(r->api_version));
	header_value(data, len, "server:", r->server, sizeof(r->server));
	static const char name[] = "x-docker-container-path-stat:";
	if (len > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		size_t off = sizeof(name) - 1;
		while (off < len && (data[off] == ' ' || data[off] == '\t'))
			off++;
		size_t end = len;
		while (end > off && (data[end - 1] == '\r' || data[end - 1] == '\n'))
			end--;
		sbx__dk_host->free(r->path_stat);
		r->path_stat = sbx__dk_host->alloc(end - off + 1);
		if (!r->path_stat) {
			r->oom = 1;
			return 0;
		}
		memcpy(r->path_stat, data + off, end - off);
		r->path_stat[end - off] = '\0';
	}
	return len;
}

int sbx__dk_curl_error(dk_state *st, const char *what, CURLcode code, sbx_error *err)
{
	int status = SBX_E_BACKEND;
	switch (code) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
		status = SBX_E_UNREACHABLE;
		break;
	case CURLE_OPERATION_TIMEDOUT:
		status = SBX_E_TIMEOUT;
		break;
	case CURLE_OUT_OF_MEMORY:
		status = SBX_E_NOMEM;
		break;
	default:
		break;
	}
	if (status == SBX_E_UNREACHABLE)
		return sbx__dk_host->set_error(err, status,
					       "docker: %s: engine at %s unreachable: %s (is it "
					       "running? set `host` or DOCKER_HOST)",
					       what, st->host_desc, curl_easy_strerror(code));
	return sbx__dk_host->set_error(err, status, "docker: %s: engine at %s: %s", what,
				       st->host_desc, curl_easy_strerror(code));
}

static int easy_raw(dk_state *st, const char *method, const char *url_path, CURL **out,
		    sbx_error *err)
{
	char url[1024];
	int n = snprintf(url, sizeof(url), "%s%s", st->base_url, url_path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbx__dk_host->set_error(err, SBX_E_INVAL,
					       "docker: request path is too long");
	CURL *e = curl_easy_init();
	if (!e)
		return sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_SHARE, st->share);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
	if (st->socket_path[0])
		curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, st->socket_path);
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	*out = e;
	return SBX_OK;
}

int sbx__dk_easy(dk_state *st, const char *method, const char *path, CURL **out, sbx_error *err)
{
	char vpath[900];
	int n = snprintf(vpath, sizeof(vpath), "/v%s%s", st->api_version, path);
	if (n < 0 || (size_t)n >= sizeof(vpath))
		return sbx__dk_host->set_error(err, SBX_E_INVAL,
					       "docker: request path is too long");
	return easy_raw(st, method, vpath, out, err);
}

static int perform(dk_state *st, CURL *e, const char *method, const char *path,
		   const char *content_type, const void *body, size_t len, dk_resp *resp,
		   sbx_error *err)
{
	struct curl_slist *hdrs = NULL, *h;
	int rc = SBX_OK;
	memset(resp, 0, sizeof(*resp));
	if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
		char ct[128];
		snprintf(ct, sizeof(ct), "Content-Type: %s",
			 content_type ? content_type : "application/json");
		h = curl_slist_append(hdrs, ct);
		if (!h) {
			rc = sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
			goto out;
		}
		hdrs = h;
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
	}
	h = curl_slist_append(hdrs, "Expect:");
	if (!h) {
		rc = sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
		goto out;
	}
	hdrs = h;
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sbx__dk_collect);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, collect_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, resp);
	if (st->request_timeout_ms > 0)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, st->request_timeout_ms);
	CURLcode c = curl_easy_perform(e);
	if (c != CURLE_OK && resp->oom) {
		rc = sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
		sbx__dk_resp_free(resp);
		goto out;
	}
	if (c != CURLE_OK) {
		char what[160];
		snprintf(what, sizeof(what), "%s %.*s", method, (int)strcspn(path, "?"), path);
		rc = sbx__dk_curl_error(st, what, c, err);
		sbx__dk_resp_free(resp);
		goto out;
	}
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &resp->status);
	if (!resp->body) {
		resp->body = sbx__dk_host->alloc(1);
		if (!resp->body) {
			rc = sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
			goto out;
		}
		resp->body[0] = '\0';
	}
out:
	curl_slist_free_all(hdrs);
	return rc;
}

int sbx__dk_request(dk_state *st, const char *method, const char *path, const char *content_type,
		    const void *body, size_t len, dk_resp *resp, sbx_error *err)
{
	int rc = sbx__dk_negotiate(st, err);
	if (rc != SBX_OK)
		return rc;
	CURL *e = NULL;
	rc = sbx__dk_easy(st, method, path, &e, err);
	if (rc != SBX_OK)
		return rc;
	rc = perform(st, e, method, path, content_type, body, len, resp, err);
	curl_easy_cleanup(e);
	return rc;
}

int sbx__dk_request_json(dk_state *st, const char *method, const char *path, json_t *body,
			 dk_resp *resp, sbx_error *err)
{
	char *text = json_dumps(body, JSON_COMPACT);
	if (!text)
		return sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
	int rc =
	    sbx__dk_request(st, method, path, "application/json", text, strlen(text), resp, err);
	free(text);
	return rc;
}

void sbx__dk_resp_free(dk_resp *resp)
{
	if (!resp)
		return;
	sbx__dk_host->free(resp->body);
	sbx__dk_host->free(resp->path_stat);
	memset(resp, 0, sizeof(*resp));
}

void sbx__dk_resp_message(const dk_resp *resp, char *buf, size_t cap)
{
	const char *msg = NULL;
	json_t *j = NULL;
	if (resp->body && resp->len) {
		j = json_loadb(resp->body, resp->len, 0, NULL);
		msg = json_string_value(json_object_get(j, "message"));
		if (!msg)
			msg = resp->body;
	}
	if (!msg || !*msg)
		msg = "no message";
	size_t i = 0;
	for (; msg[i] && i + 1 < cap; i++)
		buf[i] = (msg[i] == '\n' || msg[i] == '\r') ? ' ' : msg[i];
	buf[i] = '\0';
	while (i > 0 && buf[i - 1] == ' ')
		buf[--i] = '\0';
	json_decref(j);
}

/* "1.41" < "1.9"? Compare major and minor as numbers. */
static int version_cmp(const char *a, const char *b)
{
	char *end;
	long amaj = strtol(a, &end, 10), amin = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
	long bmaj = strtol(b, &end, 10), bmin = *end == '.' ? strtol(end + 1, NULL, 10) : 0;
	if (amaj != bmaj)
		return amaj < bmaj ? -1 : 1;
	return amin < bmin ? -1 : amin > bmin;
}

int sbx__dk_negotiate(dk_state *st, sbx_error *err)
{
	int rc = SBX_OK;
	CURL *e = NULL;
	dk_resp resp = {0};
	json_t *j = NULL;
	pthread_mutex_lock(&st->version_lock);
	if (st->negotiated)
		goto out;
	/* /_ping answers with the version in a header at once; Podman's /version takes half a
	 * second (it asks conmon and the runtime), so it is only the fallback. */
	rc = easy_raw(st, "GET", "/_ping", &e, err);
	if (rc != SBX_OK)
		goto out;
	rc = perform(st, e, "GET", "/_ping", NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	const char *server = NULL;
	char ping_version[16];
	snprintf(ping_version, sizeof(ping_version), "%s", resp.api_version);
	snprintf(st->engine, sizeof(st->engine), "%s", resp.server[0] ? resp.server : "unknown");
	if (resp.status == 200 && ping_version[0]) {
		server = ping_version;
	} else {
		sbx__dk_resp_free(&resp);
		curl_easy_cleanup(e);
		e = NULL;
		if ((rc = easy_raw(st, "GET", "/version", &e, err)) != SBX_OK ||
		    (rc = perform(st, e, "GET", "/version", NULL, NULL, 0, &resp, err)) != SBX_OK)
			goto out;
		if (resp.status != 200) {
			char msg[200];
			sbx__dk_resp_message(&resp, msg, sizeof(msg));
			rc = sbx__dk_host->set_error(
			    err, SBX_E_BACKEND,
			    "docker: engine at %s answered /version with %ld: %s", st->host_desc,
			    resp.status, msg);
			goto out;
		}
		j = json_loadb(resp.body, resp.len, 0, NULL);
		server = json_string_value(json_object_get(j, "ApiVersion"));
		const char *ver = json_string_value(json_object_get(j, "Version"));
		if (ver)
			snprintf(st->engine, sizeof(st->engine), "%.100s", ver);
	}
	if (!server || strlen(server) >= sizeof(st->server_version)) {
		rc = sbx__dk_host->set_error(err, SBX_E_BACKEND,
					     "docker: engine at %s sent no API version in /_ping "
					     "or /version; is it a Docker "
					     "Engine API?",
					     st->host_desc);
		goto out;
	}
	snprintf(st->server_version, sizeof(st->server_version), "%s", server);
	if (version_cmp(server, DK_API_VERSION) < 0)
		snprintf(st->api_version, sizeof(st->api_version), "%s", server);
	else
		snprintf(st->api_version, sizeof(st->api_version), "%s", DK_API_VERSION);
	st->negotiated = 1;
	sbx__dk_host->log(SBX_LOG_DEBUG, DK_ALIAS, "engine %s, API %s (server %s)", st->engine,
			  st->api_version, st->server_version);
out:
	pthread_mutex_unlock(&st->version_lock);
	json_decref(j);
	sbx__dk_resp_free(&resp);
	if (e)
		curl_easy_cleanup(e);
	return rc;
}

/* Waits until fd is ready for `events` or timeout_ms passes; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = events};
	int n;
	do
		n = poll(&p, 1, timeout_ms > INT_MAX ? INT_MAX : (int)timeout_ms);
	while (n < 0 && errno == EINTR);
	return n;
}

static int conn_send_all(dk_state *st, dk_conn *c, const char *data, size_t len, sbx_error *err)
{
	while (len > 0) {
		ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			if (wait_fd(c->fd, POLLOUT, st->request_timeout_ms) == 0)
				return sbx__dk_host->set_error(
				    err, SBX_E_TIMEOUT,
				    "docker: exec: engine at %s took no request", st->host_desc);
			continue;
		}
		if (n <= 0)
			return sbx__dk_host->set_error(err, SBX_E_UNREACHABLE,
						       "docker: exec: engine at %s: send: %s",
						       st->host_desc, strerror(errno));
		data += n;
		len -= (size_t)n;
	}
	return SBX_OK;
}

/* The value of header `name` (with colon) in a head of len bytes, as a number, or -1. */
static long long head_number(const char *head, size_t len, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = head; p && p < head + len;) {
		const char *eol = memchr(p, '\n', (size_t)(head + len - p));
		if ((size_t)(head + len - p) > nl && strncasecmp(p, name, nl) == 0) {
			char *end;
			long long v = strtoll(p + nl, &end, 10);
			return end != p + nl && v >= 0 ? v : -1;
		}
		p = eol ? eol + 1 : NULL;
	}
	return -1;
}

/* Reads an error answer's body after its head: Content-Length bytes, else to the end of a
 * chunked body or of the connection, at most 4 KiB. */
static int conn_error_body(dk_state *st, dk_conn *c, const char *head, size_t head_len,
			   dk_resp *resp, sbx_error *err)
{
	long long want = head_number(head, head_len, "content-length:");
	char buf[4096];
	if (sbx__dk_collect(c->early, 1, c->early_len, resp) != c->early_len)
		return sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
	c->early_len = 0;
	while (resp->len < 4096 && (want < 0 || (long long)resp->len < want) &&
	       !(want < 0 && resp->len >= 5 &&
		 memcmp(resp->body + resp->len - 5, "0\r\n\r\n", 5) == 0)) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			if (wait_fd(c->fd, POLLIN, st->request_timeout_ms) == 0)
				break;
			continue;
		}
		if (n <= 0)
			break;
		if (sbx__dk_collect(buf, 1, (size_t)n, resp) != (size_t)n)
			return sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
	}
	return SBX_OK;
}

/* Reads the answer's head; bytes of the stream that came with it go to c->early. */
static int conn_head(dk_state *st, dk_conn *c, dk_resp *resp, sbx_error *err)
{
	char head[8192];
	size_t len = 0;
	const char *end = NULL;
	while (!end) {
		if (len == sizeof(head))
			return sbx__dk_host->set_error(
			    err, SBX_E_BACKEND,
			    "docker: exec: engine at %s sent a head over "
			    "8 KiB",
			    st->host_desc);
		ssize_t n = recv(c->fd, head + len, sizeof(head) - len, 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			if (wait_fd(c->fd, POLLIN, st->request_timeout_ms) == 0)
				return sbx__dk_host->set_error(
				    err, SBX_E_TIMEOUT,
				    "docker: exec: engine at %s did not answer in %ld ms",
				    st->host_desc, st->request_timeout_ms);
			continue;
		}
		if (n <= 0)
			return sbx__dk_host->set_error(
			    err, SBX_E_UNREACHABLE,
			    "docker: exec: engine at %s closed the connection before answering",
			    st->host_desc);
		len += (size_t)n;
		for (size_t i = 3; i < len && !end; i++)
			if (memcmp(head + i - 3, "\r\n\r\n", 4) == 0)
				end = head + i + 1;
	}
	int major, minor;
	if (sscanf(head, "HTTP/%d.%d %ld", &major, &minor, &resp->status) != 3)
		return sbx__dk_host->set_error(err, SBX_E_BACKEND,
					       "docker: exec: engine at %s answered no HTTP",
					       st->host_desc);
	c->early_len = len - (size_t)(end - head);
	memcpy(c->early, end, c->early_len);
	if (resp->status == 101 || resp->status == 200)
		return SBX_OK;
	return conn_error_body(st, c, head, (size_t)(end - head), resp, err);
}

int sbx__dk_upgrade(dk_state *st, const char *path, const char *body, dk_conn *c, dk_resp *resp,
		    sbx_error *err)
{
	char req[1536];
	curl_socket_t fd = CURL_SOCKET_BAD;
	memset(c, 0, sizeof(*c));
	memset(resp, 0, sizeof(*resp));
	c->fd = -1;
	int n = snprintf(req, sizeof(req),
			 "POST /v%s%s HTTP/1.1\r\nHost: %s\r\nContent-Type: "
			 "application/json\r\nContent-Length: %zu\r\n\r\n",
			 st->api_version, path, st->base_url + strlen("http://"), strlen(body));
	if (n < 0 || (size_t)n >= sizeof(req))
		return sbx__dk_host->set_error(err, SBX_E_INVAL,
					       "docker: request path is too long");
	c->easy = curl_easy_init();
	if (!c->easy)
		return sbx__dk_host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
	curl_easy_setopt(c->easy, CURLOPT_URL, st->base_url);
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c->easy, CURLOPT_CONNECT_ONLY, 1L);
	if (st->socket_path[0])
		curl_easy_setopt(c->easy, CURLOPT_UNIX_SOCKET_PATH, st->socket_path);
	CURLcode cc = curl_easy_perform(c->easy);
	if (cc == CURLE_OK)
		cc = curl_easy_getinfo(c->easy, CURLINFO_ACTIVESOCKET, &fd);
	if (cc != CURLE_OK || fd == CURL_SOCKET_BAD) {
		sbx__dk_conn_close(c);
		return sbx__dk_curl_error(st, "exec", cc != CURLE_OK ? cc : CURLE_COULDNT_CONNECT,
					  err);
	}
	c->fd = (int)fd;
	int rc = conn_send_all(st, c, req, (size_t)n, err);
	if (rc == SBX_OK)
		rc = conn_send_all(st, c, body, strlen(body), err);
	if (rc == SBX_OK)
		rc = conn_head(st, c, resp, err);
	if (rc != SBX_OK || (resp->status != 101 && resp->status != 200))
		sbx__dk_conn_close(c);
	return rc;
}

void sbx__dk_conn_close(dk_conn *c)
{
	if (c->easy)
		curl_easy_cleanup(c->easy); /* closes the socket */
	c->easy = NULL;
	c->fd = -1;
}

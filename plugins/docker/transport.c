/* The Engine API transport: libcurl over a unix socket or tcp through sbx-support's HTTP
 * layer, with one connection cache per plugin state so connections are kept alive and reused
 * across calls and threads, and the API version negotiated once from /_ping. What is the
 * engine's own: the socket, the version in every path, the headers it answers with, and how
 * its failures are worded. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <sbx/support/host.h>
#include <sbx/support/json.h>

#include "transport.h"

static int set_host(docker_engine *e, const char *spec, sbx_error *err)
{
	int n;
	if (snprintf(e->host_desc, sizeof(e->host_desc), "%s", spec) >= (int)sizeof(e->host_desc))
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "docker: host '%.64s...' is too long", spec);
	if (strncmp(spec, "unix://", 7) == 0 || spec[0] == '/') {
		const char *p = spec[0] == '/' ? spec : spec + 7;
		n = snprintf(e->socket_path, sizeof(e->socket_path), "%s", p);
		if (n < 0 || (size_t)n >= sizeof(e->socket_path) || p[0] != '/')
			return sbxs_host->set_error(
			    err, SBX_E_CONFIG,
			    "docker: host '%.200s' is not unix:///absolute/path (under 108 bytes)",
			    spec);
		snprintf(e->base_url, sizeof(e->base_url), "http://localhost");
		return SBX_OK;
	}
	if (strncmp(spec, "tcp://", 6) == 0 && spec[6]) {
		e->socket_path[0] = '\0';
		n = snprintf(e->base_url, sizeof(e->base_url), "http://%s", spec + 6);
		if (n < 0 || (size_t)n >= sizeof(e->base_url))
			return sbxs_host->set_error(err, SBX_E_CONFIG,
						    "docker: host '%.64s...' is too long", spec);
		size_t l = strlen(e->base_url);
		if (e->base_url[l - 1] == '/')
			e->base_url[l - 1] = '\0';
		return SBX_OK;
	}
	return sbxs_host->set_error(
	    err, SBX_E_CONFIG, "docker: host '%.200s' is neither unix://PATH nor tcp://HOST:PORT",
	    spec);
}

int docker_engine_init(docker_engine *e, const char *host, long timeout_ms, sbx_error *err)
{
	struct stat sb;
	if (!host || !*host)
		host = stat("/run/podman/podman.sock", &sb) == 0 ? "unix:///run/podman/podman.sock"
								 : "unix:///var/run/docker.sock";
	int rc = set_host(e, host, err);
	if (rc != SBX_OK)
		return rc;
	if (sbxs_http_share_new(&e->share) != SBX_OK)
		return sbxs_nomem(err, DOCKER_ALIAS, "init");
	pthread_mutex_init(&e->version_lock, NULL);
	e->timeout_ms = timeout_ms;
	snprintf(e->api_version, sizeof(e->api_version), "%s", DOCKER_API_VERSION);
	return SBX_OK;
}

void docker_engine_fini(docker_engine *e)
{
	if (e->share) {
		sbxs_http_share_free(e->share);
		e->share = NULL;
		pthread_mutex_destroy(&e->version_lock);
	}
}

/* The unix socket, and nothing but plain HTTP to it. */
static void apply(const docker_engine *e, CURL *easy)
{
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http");
	if (e->socket_path[0])
		curl_easy_setopt(easy, CURLOPT_UNIX_SOCKET_PATH, e->socket_path);
}

static int setup_stream(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	(void)headers;
	(void)err;
	apply(ctx, easy);
	return SBX_OK;
}

/* What a collected request's hooks share: the engine and the answer being filled. */
typedef struct call {
	const docker_engine *e;
	docker_resp *resp;
	int oom;
} call;

static int setup_call(void *ctx, CURL *easy, struct curl_slist **headers, sbx_error *err)
{
	(void)headers;
	(void)err;
	apply(((call *)ctx)->e, easy);
	return SBX_OK;
}

static void copy_value(char *buf, size_t cap, const char *v, size_t vl)
{
	snprintf(buf, cap, "%.*s", (int)vl, v);
}

static void on_header(void *ctx, const char *name, size_t nl, const char *v, size_t vl)
{
	call *c = ctx;
	if (nl == 11 && strncasecmp(name, "Api-Version", nl) == 0) {
		copy_value(c->resp->api_version, sizeof(c->resp->api_version), v, vl);
	} else if (nl == 6 && strncasecmp(name, "Server", nl) == 0) {
		copy_value(c->resp->server, sizeof(c->resp->server), v, vl);
	} else if (nl == 28 && strncasecmp(name, "X-Docker-Container-Path-Stat", nl) == 0) {
		sbxs_host->free(c->resp->path_stat);
		c->resp->path_stat = sbxs_strndup(v, vl);
		c->oom |= !c->resp->path_stat;
	}
}

int docker_transport_error(const docker_engine *e, const char *what, CURLcode code, sbx_error *err)
{
	int status = sbxs_curl_status(code);
	if (status == SBX_E_UNREACHABLE)
		return sbxs_host->set_error(err, status,
					    "docker: %s: engine at %s unreachable: %s (is it "
					    "running? set `host` or DOCKER_HOST)",
					    what, e->host_desc, curl_easy_strerror(code));
	return sbxs_host->set_error(err, status, "docker: %s: engine at %s: %s", what, e->host_desc,
				    curl_easy_strerror(code));
}

void docker_stream_req(docker_engine *e, const char *method, const char *url, const char *what,
		       sbxs_http_req *req)
{
	*req = (sbxs_http_req){.alias = DOCKER_ALIAS,
			       .method = method,
			       .url = url,
			       .what = what,
			       .share = e->share,
			       .setup = setup_stream,
			       .ctx = e};
}

/* One request to a URL path of the engine (versioned or not). */
static int perform(docker_engine *e, const char *method, const char *url_path,
		   const char *content_type, const void *body, size_t len, uint64_t max_body,
		   docker_resp *resp, sbx_error *err)
{
	char url[1024], what[160], ct[128];
	const char *headers[2] = {NULL, NULL};
	memset(resp, 0, sizeof(*resp));
	int n = snprintf(url, sizeof(url), "%s%s", e->base_url, url_path);
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbxs_host->set_error(err, SBX_E_INVAL, "docker: request path is too long");
	snprintf(what, sizeof(what), "%s %.*s", method, (int)strcspn(url_path, "?"), url_path);
	if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
		snprintf(ct, sizeof(ct), "Content-Type: %s",
			 content_type ? content_type : "application/json");
		headers[0] = ct;
	}
	call c = {.e = e, .resp = resp};
	sbxs_http_req req = {.alias = DOCKER_ALIAS,
			     .method = method,
			     .url = url,
			     .what = what,
			     .headers = headers,
			     .body = body,
			     .body_len = len,
			     .timeout_ms = e->timeout_ms,
			     .share = e->share,
			     .setup = setup_call,
			     .on_header = on_header,
			     .ctx = &c,
			     .max_body = max_body};
	sbxs_http_resp http;
	int rc = sbxs_http_do(&req, &http, err);
	resp->status = http.status;
	resp->body = http.body;
	if (rc == SBX_OK && c.oom)
		rc = sbxs_nomem(err, DOCKER_ALIAS, what);
	else if (rc != SBX_OK && rc != SBX_E_NOMEM && !http.too_long && http.curl_code != CURLE_OK)
		rc = docker_transport_error(e, what, http.curl_code, err);
	if (rc != SBX_OK)
		docker_resp_free(resp);
	return rc;
}

int docker_url(const docker_engine *e, const char *path, char *buf, size_t cap, sbx_error *err)
{
	int n = snprintf(buf, cap, "%s/v%s%s", e->base_url, e->api_version, path);
	if (n < 0 || (size_t)n >= cap)
		return sbxs_host->set_error(err, SBX_E_INVAL, "docker: request path is too long");
	return SBX_OK;
}

/* METHOD on the versioned path, after negotiating. */
static int versioned(docker_engine *e, const char *method, const char *path,
		     const char *content_type, const void *body, size_t len, uint64_t max_body,
		     docker_resp *resp, sbx_error *err)
{
	char vpath[900];
	memset(resp, 0, sizeof(*resp));
	int rc = docker_negotiate(e, err);
	if (rc != SBX_OK)
		return rc;
	int n = snprintf(vpath, sizeof(vpath), "/v%s%s", e->api_version, path);
	if (n < 0 || (size_t)n >= sizeof(vpath))
		return sbxs_host->set_error(err, SBX_E_INVAL, "docker: request path is too long");
	return perform(e, method, vpath, content_type, body, len, max_body, resp, err);
}

int docker_request(docker_engine *e, const char *method, const char *path, const char *content_type,
		   const void *body, size_t len, docker_resp *resp, sbx_error *err)
{
	return versioned(e, method, path, content_type, body, len, 0, resp, err);
}

int docker_get_max(docker_engine *e, const char *path, uint64_t max_body, docker_resp *resp,
		   sbx_error *err)
{
	return versioned(e, "GET", path, NULL, NULL, 0, max_body, resp, err);
}

int docker_request_json(docker_engine *e, const char *method, const char *path, const json_t *body,
			docker_resp *resp, sbx_error *err)
{
	memset(resp, 0, sizeof(*resp));
	char *text = sbxs_json_dump(body);
	if (!text)
		return sbxs_nomem(err, DOCKER_ALIAS, "request");
	int rc = docker_request(e, method, path, "application/json", text, strlen(text), resp, err);
	sbxs_host->free(text);
	return rc;
}

void docker_resp_free(docker_resp *resp)
{
	if (!resp)
		return;
	sbxs_buf_free(&resp->body);
	sbxs_host->free(resp->path_stat);
	memset(resp, 0, sizeof(*resp));
}

const char *docker_resp_message(const docker_resp *resp, char *buf, size_t cap)
{
	return sbxs_json_message(resp->body.data, resp->body.len, buf, cap);
}

int docker_http_error(const docker_resp *resp, const char *op, const char *id, sbx_error *err)
{
	char msg[300];
	docker_resp_message(resp, msg, sizeof(msg));
	int code = SBX_E_BACKEND;
	if (resp->status == 404)
		return sbxs_host->set_error(err, SBX_E_NOT_FOUND,
					    "docker: %s: container %.64s not found", op, id);
	if (resp->status == 409 && strstr(msg, "paused"))
		code = SBX_E_PAUSED;
	else if (resp->status == 429)
		code = SBX_E_RATE_LIMITED;
	return sbxs_host->set_error(err, code,
				    "docker: %s: container %.64s: engine answered %ld: %s", op, id,
				    resp->status, msg);
}

int docker_id_check(const char *id, const char *op, sbx_error *err)
{
	/* Container ids (hex) and names ([a-zA-Z0-9][a-zA-Z0-9_.-]*): nothing that could change
	 * the meaning of a request path. */
	size_t n = id ? strlen(id) : 0;
	int ok = n >= 1 && n <= 128 && isalnum((unsigned char)id[0]);
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)id[i]) || id[i] == '_' || id[i] == '.' || id[i] == '-';
	if (!ok)
		return sbxs_host->set_error(err, SBX_E_BAD_ID,
					    "docker: %s: '%.80s' is not a container id or name", op,
					    id ? id : "");
	return SBX_OK;
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

/* The server's API version from /_ping's header, or from /version (Podman answers /_ping at
 * once; its /version takes half a second, asking conmon and the runtime). */
static int server_version(docker_engine *e, char *out, size_t cap, sbx_error *err)
{
	docker_resp resp = {0};
	json_t *j = NULL;
	int rc = perform(e, "GET", "/_ping", NULL, NULL, 0, 0, &resp, err);
	if (rc != SBX_OK)
		return rc;
	snprintf(e->engine, sizeof(e->engine), "%s", resp.server[0] ? resp.server : "unknown");
	if (resp.status == 200 && resp.api_version[0]) {
		snprintf(out, cap, "%s", resp.api_version);
		goto out;
	}
	docker_resp_free(&resp);
	if ((rc = perform(e, "GET", "/version", NULL, NULL, 0, 0, &resp, err)) != SBX_OK)
		return rc;
	if (resp.status != 200) {
		char msg[200];
		rc = sbxs_host->set_error(
		    err, SBX_E_BACKEND, "docker: engine at %s answered /version with %ld: %s",
		    e->host_desc, resp.status, docker_resp_message(&resp, msg, sizeof(msg)));
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	const char *server = json_string_value(json_object_get(j, "ApiVersion"));
	const char *ver = json_string_value(json_object_get(j, "Version"));
	if (ver)
		snprintf(e->engine, sizeof(e->engine), "%.100s", ver);
	snprintf(out, cap, "%s", server ? server : "");
out:
	json_decref(j);
	docker_resp_free(&resp);
	return rc;
}

int docker_negotiate(docker_engine *e, sbx_error *err)
{
	char server[64] = "";
	int rc = SBX_OK;
	pthread_mutex_lock(&e->version_lock);
	if (e->negotiated)
		goto out;
	if ((rc = server_version(e, server, sizeof(server), err)) != SBX_OK)
		goto out;
	if (!server[0] || strlen(server) >= sizeof(e->server_version)) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "docker: engine at %s sent no API version in /_ping or "
					  "/version; is it a Docker Engine API?",
					  e->host_desc);
		goto out;
	}
	memcpy(e->server_version, server, strlen(server) + 1);
	const char *use = version_cmp(server, DOCKER_API_VERSION) < 0 ? server : DOCKER_API_VERSION;
	memcpy(e->api_version, use, strlen(use) + 1);
	e->negotiated = 1;
	sbxs_host->log(SBX_LOG_DEBUG, DOCKER_ALIAS, "engine %s, API %s (server %s)", e->engine,
		       e->api_version, e->server_version);
out:
	pthread_mutex_unlock(&e->version_lock);
	return rc;
}

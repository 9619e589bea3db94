/* The Docker Engine API transport: where the engine is (unix socket or tcp), the API version
 * negotiated with it, and requests over sbx-support's HTTP layer. The bottom of the plugin:
 * it includes nothing of the plugin. */
#ifndef SBX_DOCKER_TRANSPORT_H
#define SBX_DOCKER_TRANSPORT_H

#include <pthread.h>
#include <stddef.h>

#include <jansson.h>

#include <sbx/plugin.h>
#include <sbx/support/buf.h>
#include <sbx/support/http.h>

#define DOCKER_ALIAS       "docker"
#define DOCKER_API_VERSION "1.41" /* the newest Engine API this plugin speaks */

typedef struct docker_engine {
	sbxs_http_share *share; /* one connection cache for every request of the state */
	char base_url[512];     /* http://localhost or http://host:port */
	char socket_path[256];  /* empty for tcp */
	char host_desc[600];    /* as configured, for messages */
	long timeout_ms;        /* per API call */
	pthread_mutex_t version_lock;
	int negotiated;
	char api_version[16];    /* the version used in request paths */
	char server_version[16]; /* the engine's ApiVersion */
	char engine[128];        /* the engine's name and version */
} docker_engine;

/* One answer. body is NUL-terminated; path_stat is X-Docker-Container-Path-Stat (host
 * memory) when the answer had one. Free with docker_resp_free. */
typedef struct docker_resp {
	long status;
	sbxs_buf body;
	char *path_stat;
	char api_version[16]; /* Api-Version header (/_ping) */
	char server[128];     /* Server header */
} docker_resp;

/* Finds the engine: `host` (unix://PATH, /PATH or tcp://HOST:PORT), else Podman's socket when
 * it exists, else Docker's. SBX_E_CONFIG for another form. */
int docker_engine_init(docker_engine *e, const char *host, long timeout_ms, sbx_error *err);
void docker_engine_fini(docker_engine *e);

/* Negotiates the API version once (thread-safe; later calls return at once). */
int docker_negotiate(docker_engine *e, sbx_error *err);

/* METHOD on versioned PATH (starting with '/'), after negotiating. Statuses only for
 * transport failures; an HTTP error is resp->status. content_type NULL: application/json
 * when there is a body or the method sends one. */
int docker_request(docker_engine *e, const char *method, const char *path, const char *content_type,
		   const void *body, size_t len, docker_resp *resp, sbx_error *err);
/* A GET as docker_request whose answer may be long (a file's archive): a body past
 * max_body bytes (0: no limit) ends it with SBX_E_LIMIT. */
int docker_get_max(docker_engine *e, const char *path, uint64_t max_body, docker_resp *resp,
		   sbx_error *err);
/* As docker_request with a JSON body. */
int docker_request_json(docker_engine *e, const char *method, const char *path, const json_t *body,
			docker_resp *resp, sbx_error *err);
void docker_resp_free(docker_resp *resp);

/* The request docker_request would make (for a stream the caller performs itself). */
void docker_stream_req(docker_engine *e, const char *method, const char *url, const char *what,
		       sbxs_http_req *req);
/* The versioned URL of PATH into buf. SBX_E_INVAL when it does not fit. */
int docker_url(const docker_engine *e, const char *path, char *buf, size_t cap, sbx_error *err);

/* The engine's message of an error answer (one line) into buf; returns buf. */
const char *docker_resp_message(const docker_resp *resp, char *buf, size_t cap);
/* A transport failure (a libcurl result) of `what`, worded with the engine's address. */
int docker_transport_error(const docker_engine *e, const char *what, CURLcode code, sbx_error *err);
/* The common mapping of an error answer about container `id`: 404 SBX_E_NOT_FOUND, 409
 * "paused" SBX_E_PAUSED, 429 SBX_E_RATE_LIMITED, else SBX_E_BACKEND. */
int docker_http_error(const docker_resp *resp, const char *op, const char *id, sbx_error *err);

/* Backend ids are container ids or names; anything else is SBX_E_BAD_ID (never part of a
 * request path). */
int docker_id_check(const char *id, const char *op, sbx_error *err);

#endif

/* Internals of the e2b backend, shared by its files: the plugin state, the HTTP layer for
 * the control plane (REST) and envd (Connect), and the ops the descriptor points at. */
#ifndef SBX_E2B_H
#define SBX_E2B_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include <sbx/plugin.h>

#define E2_ALIAS     "e2b"
#define E2_ENVD_PORT "49983"

extern const sbx_host_api *sbx__e2_host;

/* What reaches one sandbox's envd, cached per backend id (recoverable via GET). */
typedef struct e2_target {
	struct e2_target *next;
	char id[64];
	char token[256];
	char base[512]; /* envd base URL, no trailing slash */
} e2_target;

typedef struct e2_state {
	char *api_key; /* secret: never logged, never in an error */
	char *api_url;
	char *sandbox_url;
	char *domain;
	char *template_id;
	int64_t lifetime;     /* seconds */
	json_t *metadata;     /* object */
	json_t *envs;         /* object */
	json_t *template_map; /* object: image -> template */
	int allow_internet;   /* -1: not sent */
	int64_t retries;
	double retry_cap;     /* seconds */
	double retry_delay;   /* seconds, the first backoff */
	int strict_resources; /* refuse rather than warn about resource requests */
	double request_timeout;
	int use_v1; /* the gateway has no /v2/sandboxes */
	pthread_mutex_t lock;
	e2_target *targets;
} e2_state;

typedef struct e2_resp {
	long status;
	char *body;
	size_t len, cap;
	double retry_after; /* seconds, -1 when absent */
	int oom;
} e2_resp;

void sbx__e2_resp_free(e2_resp *r);
size_t sbx__e2_collect(char *data, size_t size, size_t n, void *ctx);
/* The "message" of a JSON error body (or the body's start) into buf. */
void sbx__e2_message(const e2_resp *r, char *buf, size_t cap);

/* A control-plane call. body may be NULL. Idempotent calls are retried on transport errors,
 * 429 and 5xx with capped backoff honouring Retry-After; others only on 429. SBX_OK whenever
 * an HTTP answer arrived (any status); SBX_E_UNREACHABLE/SBX_E_TIMEOUT otherwise. */
int sbx__e2_api(e2_state *st, const char *method, const char *path, const char *body,
		int idempotent, e2_resp *resp, sbx_error *err);

/* Finds how to reach sandbox id's envd (cached; GET /sandboxes/{id} on a miss). */
int sbx__e2_target(e2_state *st, const char *id, e2_target *out, sbx_error *err);
void sbx__e2_forget(e2_state *st, const char *id);

/* Headers every envd request carries; content_type may be NULL. */
struct curl_slist *sbx__e2_envd_headers(const e2_target *t, const char *content_type,
					const char *user);

/* A Connect unary call (method like "filesystem.Filesystem/Stat"). On an RPC error, code
 * (cap 32) receives its Connect code and the status is SBX_E_BACKEND with err filled. */
int sbx__e2_unary(e2_state *st, const char *id, const char *method, json_t *req, json_t **resp,
		  char code[32], const char *what, sbx_error *err);

/* Applies common options (timeouts, no signals) to a handle. */
void sbx__e2_curl_common(CURL *c, e2_state *st);

/* Runs argv in the sandbox and collects stdout (for internal helpers). */
int sbx__e2_run_simple(e2_state *st, const char *id, const char *const *argv, int *exit_code,
		       sbx_error *err);

int sbx__e2_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		    sbx_error *err);
int sbx__e2_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		      sbx_error *err);
int sbx__e2_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		       uint32_t mode, sbx_error *err);
int sbx__e2_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		      sbx_error *err);
int sbx__e2_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		     size_t *n, sbx_error *err);
int sbx__e2_make_dir(void *state, const char *id, const char *path, uint32_t parents,
		     sbx_error *err);
int sbx__e2_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
			sbx_error *err);

#endif

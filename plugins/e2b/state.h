/* The e2b plugin's state: its settings as read from config (e2b.c's key table), what init
 * derives from them, and the cache of how to reach each sandbox's envd. Types only. */
#ifndef SBX_E2B_STATE_H
#define SBX_E2B_STATE_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>

#include <sbx/support/http.h>

#define E2B_ALIAS     "e2b"
#define E2B_ENVD_PORT "49983"

/* Values of the config keys (strings borrowed from the host, or the environment, until fini). */
typedef struct e2b_settings {
	const char *api_key; /* secret: never logged, never in an error */
	const char *api_url;
	const char *sandbox_url;
	const char *domain;
	const char *template_id;
	const char *template_map_json;
	const char *metadata_json;
	const char *envs_json;
	int64_t lifetime;   /* seconds */
	int allow_internet; /* -1: not sent */
	int strict_resources;
	int64_t retries;
	double retry_delay;     /* seconds, the first backoff */
	double retry_cap;       /* seconds */
	double request_timeout; /* seconds */
} e2b_settings;

/* What reaches one sandbox's envd, cached per backend id (recoverable by GET). */
typedef struct e2b_target {
	struct e2b_target *next;
	char id[64];
	char token[256];
	char base[512]; /* envd base URL, no trailing slash */
} e2b_target;

typedef struct e2b_state {
	e2b_settings set;
	char *api_url;     /* host memory, no trailing slash */
	char *sandbox_url; /* host memory, no trailing slash, or NULL */
	json_t *metadata;  /* objects of strings */
	json_t *envs;
	json_t *template_map;
	sbxs_retry retry;
	int use_v1;              /* the gateway has no /v2/sandboxes (atomic) */
	uint64_t max_file_bytes; /* the host's cap on a file read */
	pthread_mutex_t lock;
	e2b_target *targets;
} e2b_state;

#endif

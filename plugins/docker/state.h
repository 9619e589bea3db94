/* The docker plugin's state: its settings as read from config (docker.c's key table) and
 * the engine connection. Types only. */
#ifndef SBX_DOCKER_STATE_H
#define SBX_DOCKER_STATE_H

#include <stdint.h>

#include <jansson.h>

#include "transport.h"

/* Values of the config keys (strings borrowed from the host until fini). */
typedef struct docker_settings {
	const char *host;
	const char *image;
	const char *pull; /* never, missing, always */
	const char *working_dir;
	const char *user;
	const char *network; /* none, bridge */
	double cpu;
	int64_t memory_mb;
	int64_t pids_limit;
	int read_only;
	const char *env_json;      /* map */
	const char *cap_drop_json; /* list */
	const char *ulimits_json;  /* list */
	double api_timeout;        /* seconds */
	double ready_timeout;      /* seconds */
} docker_settings;

typedef struct docker_state {
	docker_settings set;
	docker_engine engine;
	json_t *cap_drop;        /* array of strings */
	json_t *ulimits;         /* array of {Name, Soft, Hard} */
	json_t *env;             /* array of "K=V" */
	uint64_t max_file_bytes; /* the host's cap on a file read */
} docker_state;

#endif

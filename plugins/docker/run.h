/* Processes in a container through the Engine's exec endpoints: create an exec, stream its
 * multiplexed output until the process is done (or a deadline passes), read its exit code;
 * and docker_run, which does all of it for a small internal command. */
#ifndef SBX_DOCKER_RUN_H
#define SBX_DOCKER_RUN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <sbx/plugin.h>

#include "demux.h"
#include "transport.h"

/* Creates an exec from `body` (the ExecConfig) in container id; its id into exec_id. */
int docker_exec_create(docker_engine *e, const char *id, const json_t *body, char *exec_id,
		       size_t cap, sbx_error *err);

typedef struct docker_exec_state {
	int running;
	int exit_code;
	long long pid; /* 0 until the engine has started the process */
} docker_exec_state;

/* Waits (briefly) until the engine records the exec's exit, after its stream ended. */
int docker_exec_wait(docker_engine *e, const char *exec_id, docker_exec_state *es, sbx_error *err);

/* Called once when a stream's deadline passes, to kill the command; the stream is then
 * drained a short while for what the dying command still writes. */
typedef void (*docker_expire_fn)(void *ctx);

typedef struct docker_stream {
	docker_demux_fn sink; /* the output; may be NULL */
	void *sink_ctx;
	int64_t deadline_ms;     /* sbxs_now_ms() clock, 0: none */
	docker_expire_fn expire; /* NULL: a deadline just ends the stream */
	void *expire_ctx;
	const int *stop; /* NULL, or set by the sink when the output is complete */
	/* Results. */
	int expired; /* the deadline passed */
	int sink_rc; /* the sink's refusal, 0 if none */
	int stopped; /* *stop ended the stream (the connection is hung up) */
} docker_stream;

/* Starts exec_id and streams its output into s->sink. Returns when the engine closes the
 * stream, when *s->stop is set after a chunk (s->stopped), when the deadline passes
 * (s->expired), or when the exec has ended while something it left behind still holds the
 * stream open (2 s without output). A sink's refusal is returned as the status. */
int docker_exec_stream(docker_engine *e, const char *exec_id, docker_stream *s, sbx_error *err);

/* Output of docker_run: the start of each stream (NUL-terminated) and the exit code. */
typedef struct docker_capture {
	char out[4096];
	size_t out_len;
	char err[1024];
	size_t err_len;
	int exit_code;
} docker_capture;

/* Runs argv in container id with stdin /dev/null and collects its output. */
int docker_run(docker_engine *e, const char *id, const char *const *argv, docker_capture *cap,
	       sbx_error *err);

#endif

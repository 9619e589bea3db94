/* pods/{name}/exec over WebSocket (v5.channel.k8s.io, falling back to v4): channels 1 and 2
 * stdout and stderr, 3 the status, stdin on channel 0 (closed with v5's close signal), and
 * the in-container kill when the timeout passes. */
#ifndef SBX_K8S_PODEXEC_H
#define SBX_K8S_PODEXEC_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

#include "state.h"

typedef struct k8s_podexec {
	const char *const *argv;      /* the full argv to run in the container */
	const char *const *kill_argv; /* run on timeout to kill the command's tree, or NULL */
	const void *stdin_data;
	size_t stdin_len;
	int has_stdin;
	uint64_t timeout_ms; /* 0: none */
	sbx_output_fn output;
	void *output_ctx;
	const int *stop; /* NULL, or set by output once the command's output is complete */
	/* Results. */
	int exit_code;
	int completed; /* a status arrived */
	int stopped;   /* *stop ended the stream before a status (the connection is closed) */
	int timed_out;
	int protocol; /* 4 or 5 */
} k8s_podexec;

/* Runs argv in the pod's sandbox container. SBX_OK when the command ran (exit_code set),
 * timed out, or was stopped (the caller knows the outcome); an error when the exec could not
 * start or the stream broke. */
int k8s_podexec_run(k8s_state *st, const char *pod, k8s_podexec *io, sbx_error *err);

#endif

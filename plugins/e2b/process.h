/* Commands in a sandbox through envd's process service: process.Process/Start as a Connect
 * server stream, reattached by pid (process.Process/Connect) when it drops, and the kill of
 * what a command left when it times out or the host refuses more output. */
#ifndef SBX_E2B_PROCESS_H
#define SBX_E2B_PROCESS_H

#include <stdint.h>

#include <sbx/plugin.h>

#include "state.h"

/* One command: argv (argv[0] the program), and for execute its request (environment, cwd),
 * where its output goes, and the remote-exec token its tree carries. */
typedef struct e2b_run {
	const char *const *argv;
	const char *user;            /* NULL: envd's default */
	const sbx_exec_request *req; /* NULL: no env or cwd */
	sbx_output_fn output;        /* NULL: output dropped */
	void *output_ctx;
	const int *stop;     /* NULL, or set by output once the command's output is complete */
	uint64_t timeout_ms; /* 0: none */
	const char *token;   /* NULL: nothing to kill on a timeout */
} e2b_run;

/* Runs it to its end, or until *run->stop is set (then SBX_OK and out untouched: the caller
 * knows the outcome; the stream is hung up, the process left to envd). SBX_OK with out's exit
 * code or signal, or out->timed_out (the tree killed); a status when the command could not
 * run or its stream broke. */
int e2b_process_run(e2b_state *st, const char *id, const e2b_run *run, sbx_exec_outcome *out,
		    sbx_error *err);

/* Runs a small internal command (chmod) with a 60 s limit; its exit code into *exit_code. */
int e2b_process_simple(e2b_state *st, const char *id, const char *const *argv, int *exit_code,
		       sbx_error *err);

#endif

/* The execute op: every command runs under sbx-support's remote-exec wrapper, started by
 * envd's process service (process.c). What the command leaves running lives on: the
 * wrapper's end markers say when its output is complete and its exit status, and the call
 * hangs up there (envd keeps the wrapper, which waits for the leftovers holding its relays,
 * as a process of its own). stdin bytes go to the wrapper's file through /files first; the
 * wrapper, not envd, enters the cwd, so a relative one is checked to stay beneath the work
 * dir (the user's home, where envd starts it). */
#include <string.h>

#include <sbx/support/host.h>
#include <sbx/support/rexec.h>

#include "envd.h"
#include "exec.h"
#include "process.h"

int e2b_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		sbx_error *err)
{
	e2b_state *st = state;
	char token[SBXS_REXEC_TOKEN_SIZE], in_path[SBXS_REXEC_PATH_SIZE];
	const char **argv = NULL;
	sbxs_http_resp r = {0};
	if (sbxs_rexec_token(token) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_IO, "e2b: exec: no randomness for a token");
	sbxs_rexec x = {.token = token,
			.stdin_how = req->has_stdin ? SBXS_REXEC_STDIN_FILE : SBXS_REXEC_STDIN_NONE,
			.cwd = req->cwd,
			.shell = req->shell,
			.argv = req->argv};
	int rc = sbxs_rexec_argv(&x, E2B_ALIAS, &argv, NULL, err);
	if (rc != SBX_OK)
		return rc;
	if (req->has_stdin) {
		sbxs_rexec_stdin_path(token, in_path);
		rc = e2b_files(st, id, in_path, req->stdin_data ? req->stdin_data : "",
			       req->stdin_len, &r, "write", err);
		sbxs_http_resp_free(&r);
		if (rc != SBX_OK)
			goto out;
	}
	sbxs_rexec_tap tap;
	sbxs_rexec_tap_init(&tap, token, req->output, req->output_ctx);
	e2b_run run = {.argv = argv,
		       .user = req->user,
		       .req = req,
		       .output = sbxs_rexec_tap_output,
		       .output_ctx = &tap,
		       .stop = &tap.done,
		       .timeout_ms = req->timeout_ms,
		       .token = token};
	rc = e2b_process_run(st, id, &run, out, err);
	if (rc == SBX_OK && tap.done && !out->timed_out)
		sbxs_rexec_outcome(tap.status, out);
	else if (rc == SBX_OK && !out->timed_out &&
		 (rc = sbxs_rexec_cwd_error(&tap, out->exit_code, E2B_ALIAS, req->cwd, err)) !=
		     SBX_OK)
		goto out;
	else if (!tap.done && !tap.sink_rc) {
		/* No markers: the wrapper stopped before the command ran, or was killed. */
		int held = sbxs_rexec_tap_flush(&tap);
		if (held != SBX_OK && rc == SBX_OK)
			rc = sbxs_host->set_error(err, held,
						  "e2b: exec: the host refused more output");
	}
out:
	sbxs_host->free(argv);
	return rc;
}

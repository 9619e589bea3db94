/* The execute op: every command runs under sbx-support's remote-exec wrapper, started by
 * envd's process service (process.c). Envd ends a command's stream only when every holder
 * of its output has exited, so the wrapper sweeps what the command left when it ends (a
 * background child cannot hold the call), and it dies of the command's signal, which envd
 * reports. stdin bytes go to the wrapper's file through /files first. */
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
			.flags = SBXS_REXEC_SWEEP | SBXS_REXEC_RERAISE,
			.stdin_how = req->has_stdin ? SBXS_REXEC_STDIN_FILE : SBXS_REXEC_STDIN_NONE,
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
	e2b_run run = {.argv = argv,
		       .user = req->user,
		       .req = req,
		       .timeout_ms = req->timeout_ms,
		       .token = token};
	rc = e2b_process_run(st, id, &run, out, err);
out:
	sbxs_host->free(argv);
	return rc;
}

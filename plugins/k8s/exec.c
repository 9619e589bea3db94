/* The execute op: every command runs under sbx-support's remote-exec wrapper over pods/exec
 * (podexec.c). The exec API has no environment or working directory, so the wrapper exports
 * the one and enters the other; stdin arrives as N bytes on the exec's own stdin (v4 cannot
 * close it). What the command leaves running lives on: the wrapper's end markers say when
 * its output is complete and its exit status, and the call closes the connection there
 * (closing it kills nothing in the container). On a timeout or a refusal of more output, a
 * second exec runs the wrapper's killer. */
#include <string.h>

#include <sbx/support/host.h>
#include <sbx/support/rexec.h>

#include "exec.h"
#include "podexec.h"
#include "podspec.h"

int k8s_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		sbx_error *err)
{
	k8s_state *st = state;
	char token[SBXS_REXEC_TOKEN_SIZE];
	const char **argv = NULL;
	int rc = k8s_check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	if (sbxs_rexec_token(token) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_IO, "k8s: exec: no randomness for a token");
	sbxs_rexec x = {.token = token,
			.stdin_how = req->has_stdin ? SBXS_REXEC_STDIN_PIPE : SBXS_REXEC_STDIN_NONE,
			.stdin_len = req->stdin_len,
			.cwd = req->cwd,
			.env = req->env,
			.n_env = req->n_env,
			.shell = req->shell,
			.argv = req->argv};
	if ((rc = sbxs_rexec_argv(&x, K8S_ALIAS, &argv, NULL, err)) != SBX_OK)
		return rc;
	const char *kill_argv[SBXS_REXEC_KILL_ARGC];
	sbxs_rexec_kill_argv(token, kill_argv);
	sbxs_rexec_tap marks;
	sbxs_rexec_tap_init(&marks, token, req->output, req->output_ctx);
	k8s_podexec io = {.argv = argv,
			  .kill_argv = kill_argv,
			  .has_stdin = req->has_stdin != 0,
			  .stdin_data = req->stdin_data,
			  .stdin_len = req->stdin_len,
			  .timeout_ms = req->timeout_ms,
			  .output = sbxs_rexec_tap_output,
			  .output_ctx = &marks,
			  .stop = &marks.done};
	rc = k8s_podexec_run(st, id, &io, err);
	if (rc == SBX_OK && !marks.done && (rc = sbxs_rexec_tap_flush(&marks)) != SBX_OK)
		rc = sbxs_host->set_error(err, rc, "k8s: exec: output refused by the host");
	if (rc != SBX_OK)
		goto out;
	if (marks.done && !io.timed_out) {
		sbxs_rexec_outcome(marks.status, out);
		goto out;
	}
	if (!io.timed_out &&
	    (rc = sbxs_rexec_cwd_error(&marks, io.exit_code, K8S_ALIAS, req->cwd, err)) != SBX_OK)
		goto out;
	if (io.timed_out) {
		out->timed_out = 1;
		out->exit_code = -1;
		out->signal = 9;
	} else {
		/* No markers: the wrapper stopped before the command ran, or was killed. */
		sbxs_rexec_outcome(io.exit_code, out);
	}
out:
	sbxs_host->free(argv);
	return rc;
}

/* The execute op: every command runs under sbx-support's remote-exec wrapper (its own
 * session, SBX_EXEC_TOKEN=<token> in the environment of everything it starts), started
 * through run.c's exec endpoints. On a timeout, or when the host refuses more output, a
 * second exec runs the wrapper's killer, which ends every process carrying the token.
 * What the command leaves running lives on after it returns, as on `local`: the wrapper's
 * end markers say when the command's output is complete and its exit status, and the call
 * hangs up there (the wrapper's relays keep a leftover's pipe drained).
 *
 * stdin bytes are not sent over a hijacked connection (libcurl cannot half-close one): they go
 * into /tmp/.sbx-stdin-<token> through the archive endpoint, and the wrapper feeds the command
 * from that file and removes it before the command starts. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/rexec.h>

#include "archive.h"
#include "exec.h"
#include "paths.h"
#include "run.h"
#include "state.h"

/* Kills what the command with `token` left running inside the container. */
static int kill_tree(docker_engine *e, const char *id, const char *token, sbx_error *err)
{
	const char *argv[SBXS_REXEC_KILL_ARGC];
	docker_capture cap;
	sbxs_rexec_kill_argv(token, argv);
	int rc = docker_run(e, id, argv, &cap, err);
	if (rc == SBX_OK && cap.exit_code != 0)
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "docker: exec: could not kill the timed-out command in "
					  "container %.12s (exit %d): %.200s",
					  id, cap.exit_code, cap.err);
	return rc;
}

/* What the stream's deadline kills, and how that went. */
typedef struct kill_target {
	docker_engine *e;
	const char *id;
	const char *token;
	int rc;
	sbx_error err;
} kill_target;

static void on_expire(void *ctx)
{
	kill_target *k = ctx;
	k->rc = kill_tree(k->e, k->id, k->token, &k->err);
}

/* The cwd must exist and be a directory (engines differ: Podman would run in a missing one). */
static int exec_cwd(docker_state *st, const char *id, const char *cwd, char *buf, size_t cap,
		    sbx_error *err)
{
	sbx_file_info fi;
	int rc =
	    docker_resolve(&st->engine, st->set.working_dir, id, cwd, 1, buf, cap, "exec", err);
	if (rc == SBX_OK)
		rc = docker_stat_raw(&st->engine, id, buf, &fi, NULL, 0, err);
	if (rc == SBX_E_NO_FILE)
		return sbxs_host->set_error(err, SBX_E_NO_FILE,
					    "docker: exec: cwd %.300s does not exist", buf);
	if (rc == SBX_OK && fi.kind != SBX_FILE_DIR)
		return sbxs_host->set_error(err, SBX_E_INVAL,
					    "docker: exec: cwd %.300s is not a directory", buf);
	return rc;
}

/* The ExecConfig: the wrapper's argv, the environment, cwd and user. */
static int exec_body(docker_state *st, const char *id, const sbx_exec_request *req,
		     const char *const *argv, json_t **out, sbx_error *err)
{
	char cwd[4096];
	json_t *cmd = json_array(), *env = json_array(), *body = NULL;
	int rc = SBX_OK;
	for (size_t i = 0; cmd && argv[i]; i++)
		if (json_array_append_new(cmd, json_string(argv[i])))
			goto nomem;
	for (uint32_t i = 0; env && i < req->n_env; i++) {
		char kv[8192];
		int n = snprintf(kv, sizeof(kv), "%s=%s", req->env[i].key, req->env[i].value);
		if (n < 0 || (size_t)n >= sizeof(kv)) {
			rc = sbxs_host->set_error(err, SBX_E_INVAL,
						  "docker: exec: env %.64s is too long",
						  req->env[i].key);
			goto out;
		}
		if (json_array_append_new(env, json_string(kv)))
			goto nomem;
	}
	if (!cmd || !env)
		goto nomem;
	body = json_pack("{s:b,s:b,s:b,s:b,s:O,s:O}", "AttachStdin", 0, "AttachStdout", 1,
			 "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env);
	if (!body)
		goto nomem;
	if (req->cwd) {
		if ((rc = exec_cwd(st, id, req->cwd, cwd, sizeof(cwd), err)) != SBX_OK)
			goto out;
		if (json_object_set_new(body, "WorkingDir", json_string(cwd)))
			goto nomem;
	}
	if (req->user && *req->user && json_object_set_new(body, "User", json_string(req->user)))
		goto nomem;
	*out = body;
	body = NULL;
	goto out;
nomem:
	rc = sbxs_nomem(err, DOCKER_ALIAS, "exec");
out:
	json_decref(body);
	json_decref(cmd);
	json_decref(env);
	return rc;
}

/* Uploads the stdin bytes to the wrapper's file. */
static int put_stdin(docker_state *st, const char *id, const char *token,
		     const sbx_exec_request *req, sbx_error *err)
{
	char path[SBXS_REXEC_PATH_SIZE];
	docker_resp resp = {0};
	sbxs_rexec_stdin_path(token, path);
	int rc = docker_put_file(&st->engine, id, "/tmp", path + strlen("/tmp/"), req->stdin_data,
				 req->stdin_len, 0600, &resp, err);
	if (rc == SBX_OK && resp.status != 200)
		rc = docker_http_error(&resp, "exec: stdin", id, err);
	docker_resp_free(&resp);
	return rc;
}

int docker_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		   sbx_error *err)
{
	docker_state *st = state;
	char token[SBXS_REXEC_TOKEN_SIZE], exec_id[128];
	const char **argv = NULL;
	json_t *body = NULL;
	int rc, stdin_put = 0;
	int64_t start = sbxs_now_ms();
	if ((rc = docker_id_check(id, "exec", err)) != SBX_OK)
		return rc;
	if (sbxs_rexec_token(token) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_IO,
					    "docker: exec: no randomness for a token");
	sbxs_rexec x = {.token = token,
			.stdin_how = req->has_stdin ? SBXS_REXEC_STDIN_FILE : SBXS_REXEC_STDIN_NONE,
			.shell = req->shell,
			.argv = req->argv};
	if ((rc = sbxs_rexec_argv(&x, DOCKER_ALIAS, &argv, NULL, err)) != SBX_OK)
		return rc;
	if (req->has_stdin) {
		if ((rc = put_stdin(st, id, token, req, err)) != SBX_OK)
			goto out;
		stdin_put = 1;
	}
	if ((rc = exec_body(st, id, req, argv, &body, err)) != SBX_OK ||
	    (rc = docker_exec_create(&st->engine, id, body, exec_id, sizeof(exec_id), err)) !=
		SBX_OK)
		goto out;
	kill_target kt = {.e = &st->engine, .id = id, .token = token};
	sbxs_rexec_tap tap;
	sbxs_rexec_tap_init(&tap, token, req->output, req->output_ctx);
	docker_stream s = {.sink = sbxs_rexec_tap_output,
			   .sink_ctx = &tap,
			   .deadline_ms = req->timeout_ms ? start + (int64_t)req->timeout_ms : 0,
			   .expire = on_expire,
			   .expire_ctx = &kt,
			   .stop = &tap.done};
	rc = docker_exec_stream(&st->engine, exec_id, &s, err);
	int held_rc = tap.done || s.sink_rc ? SBX_OK : sbxs_rexec_tap_flush(&tap);
	if (held_rc != SBX_OK && rc == SBX_OK)
		rc = s.sink_rc = held_rc;
	if (s.expired) {
		rc = kt.rc;
		if (rc != SBX_OK)
			sbxs_host->set_error(err, rc, "%s", kt.err.message);
		out->timed_out = 1;
		out->exit_code = -1;
		out->signal = SIGKILL;
		goto out;
	}
	if (rc != SBX_OK && s.sink_rc) {
		kill_tree(&st->engine, id, token, NULL);
		sbxs_host->set_error(err, rc, "docker: exec: the output sink refused more output");
		goto out;
	}
	if (rc != SBX_OK)
		goto out;
	stdin_put = 0; /* the wrapper removed it */
	if (tap.done) {
		sbxs_rexec_outcome(tap.status, out);
		goto out;
	}
	/* No markers: the wrapper stopped before the command ran (cwd, stdin) or was killed. */
	docker_exec_state es = {0};
	if ((rc = docker_exec_wait(&st->engine, exec_id, &es, err)) != SBX_OK)
		goto out;
	sbxs_rexec_outcome(es.exit_code, out);
out:
	if (stdin_put && rc != SBX_OK) {
		char path[SBXS_REXEC_PATH_SIZE];
		sbxs_rexec_stdin_path(token, path);
		const char *rm[] = {"rm", "-f", "--", path, NULL};
		docker_capture cap;
		docker_run(&st->engine, id, rm, &cap, NULL);
	}
	json_decref(body);
	sbxs_host->free(argv);
	return rc;
}

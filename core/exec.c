/* sbx_exec, one straight path: route -> request -> execute -> finish.
 *
 *   route    route.c   sbx__route_id: the plugin state serving the sandbox
 *   request  spool.c   sbx__spool_open: the call directory; here: the plugin's request
 *   execute  run.c     sbx__execute: the plugin's execute through an output gate into the
 *                      spool (resuming a paused sandbox when auto_resume says so)
 *   finish   spool.c   sbx__spool_finish: the whole sbx_exec_result (sbx__spool_fail: the
 *                      call directory removed again)
 * A background exec starts a job instead (jobs.c). stdout_path and stderr_path go to a plugin
 * that opens them itself (SBX_PLUGIN_REDIRECT); any other gets the command wrapped in /bin/sh,
 * which opens them in the sandbox. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "host_internal.h"

/* The caller's options, zero-extended, and the checks every exec passes; the only place
 * they are checked (plugins rely on them: plugin.h). */
static int exec_opts_in(const sbx_exec_opts *opts, sbx_exec_opts *o, sbx_error *err)
{
	int rc = sbx__struct_in(opts, o, sizeof(*o), SBX__SIZE_1_0(sbx_exec_opts, background),
				"exec: options", err);
	if (rc != SBX_OK)
		return rc;
	if ((o->shell == NULL) == (o->argv == NULL) || (o->argv && !o->argv[0]))
		return sbx__set_error(err, SBX_E_INVAL,
				      "exec: give exactly one of shell and a non-empty argv");
	const char *const paths[] = {o->stdout_path, o->stderr_path};
	for (int i = 0; i < 2; i++) {
		const char *what = i == 0 ? "stdout_path" : "stderr_path";
		if (!paths[i])
			continue;
		if (o->background)
			return sbx__set_error(err, SBX_E_INVAL,
					      "exec: %s is for foreground commands (a job's "
					      "output has files of its own)",
					      what);
		size_t n = strlen(paths[i]);
		if (n == 0 || n > 4095)
			return sbx__set_error(err, SBX_E_INVAL,
					      "exec: %s must be a path of 1 to 4095 bytes", what);
	}
	if (o->timeout != o->timeout || o->timeout > 1e9)
		return sbx__set_error(err, SBX_E_INVAL,
				      "exec: timeout %g is not a number of seconds up to 1e9",
				      o->timeout);
	return sbx__check_kv(o->env, o->n_env, "exec", "env", 1, err);
}

/* The plugin's request for o; a negative timeout is the data source's. */
static void make_request(const sbx_exec_opts *o, const sbx__policy *pol, sbx_exec_request *req)
{
	memset(req, 0, sizeof(*req));
	SBX_INIT_HEADER(*req);
	req->shell = o->shell;
	req->argv = o->argv;
	req->has_stdin = o->has_stdin ? 1u : 0u;
	req->cwd = o->cwd;
	req->env = o->env;
	req->n_env = o->n_env;
	req->stdin_data = o->has_stdin ? o->stdin_data : NULL;
	req->stdin_len = o->has_stdin ? o->stdin_len : 0;
	req->user = o->user;
	req->stdout_path = o->stdout_path;
	req->stderr_path = o->stderr_path;
	double timeout = o->timeout < 0 ? pol->timeout : o->timeout;
	if (timeout > 0) {
		/* Rounded up, so a fraction of a millisecond still bounds the call. */
		double ms = timeout * 1000.0;
		req->timeout_ms = (uint64_t)ms;
		if ((double)req->timeout_ms < ms)
			req->timeout_ms++;
	}
}

/* The wrapper for a plugin that does not open stdout_path and stderr_path itself: /bin/sh
 * in the sandbox opens them as `>PATH` would and runs the command, shell (bash -c where bash
 * is, else sh -c) or argv. Paths and command are its arguments, never spliced into it. A
 * file it cannot open ends it with 125 before the command runs, the shell's own message and
 * then "sbx-redirect NONCE: STREAM" on stderr (which is still sbx's then); the nonce is new
 * for each call, so no command's own output passes for that line. */
static const char redirect_script[] =
    "o=$1 e=$2 m=$3 n=$4\n"
    "shift 4\n"
    "if [ -n \"$o\" ]; then command exec >\"$o\" || "
    "{ echo \"sbx-redirect $n: stdout\" >&2; exit 125; }; fi\n"
    "if [ -n \"$e\" ] && [ \"$e\" = \"$o\" ]; then exec 2>&1\n"
    "elif [ -n \"$e\" ]; then command exec 2>\"$e\" || "
    "{ echo \"sbx-redirect $n: stderr\" >&2; exit 125; }; fi\n"
    "if [ \"$m\" = a ]; then exec \"$@\"; fi\n"
    "if command -v bash >/dev/null 2>&1; then exec bash -c \"$1\"; fi\n"
    "exec sh -c \"$1\"\n";

/* o's command under the wrapper, with the call's nonce; NULL when out of memory. */
static const char **redirect_argv(const sbx_exec_opts *o, const char *nonce)
{
	const char *const head[] = {"/bin/sh",
				    "-c",
				    redirect_script,
				    "sbx-redirect",
				    o->stdout_path ? o->stdout_path : "",
				    o->stderr_path ? o->stderr_path : "",
				    o->argv ? "a" : "s",
				    nonce};
	return sbx__script_argv(head, sizeof(head) / sizeof(head[0]), o->shell, o->argv);
}

/* After the wrapper: SBX_E_NO_FILE in err when it could not open a file of o's (exit 125 and
 * its line with this call's nonce last on stderr), else SBX_OK. */
static int redirect_failed(sbx__spool *sp, const sbx_exec_opts *o, const char *nonce,
			   const sbx_exec_outcome *oc, sbx_error *err)
{
	if (oc->exit_code != 125 || oc->timed_out)
		return SBX_OK;
	char text[1024];
	size_t n = sbx__spool_head(sp, SBX_STREAM_STDERR, text, sizeof(text));
	while (n && text[n - 1] == '\n')
		text[--n] = '\0';
	char *mark = strrchr(text, '\n');
	const char *stream = mark ? mark + 1 : text;
	char want[48];
	int w = snprintf(want, sizeof(want), "sbx-redirect %s: ", nonce);
	if (strncmp(stream, want, (size_t)w) != 0)
		return SBX_OK;
	stream += w;
	int out = strcmp(stream, "stdout") == 0;
	if (!out && strcmp(stream, "stderr") != 0)
		return SBX_OK;
	if (mark)
		*mark = '\0';
	else
		text[0] = '\0';
	/* The shell's own line (the last before the mark) says why. */
	const char *why = strrchr(text, '\n');
	why = why ? why + 1 : text;
	return sbx__set_error(err, SBX_E_NO_FILE, "exec: cannot open the %s file %s: %s",
			      out ? "stdout" : "stderr", out ? o->stdout_path : o->stderr_path,
			      *why ? why : "the shell gave no reason");
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int start_job(sbx_host *host, const char *id, const sbx_exec_opts *o, sbx_exec_result **out,
		     sbx_error *err)
{
	char job[SBX_JOB_ID_MAX];
	int rc = sbx__job_start(host, id, o, job, err);
	return rc == SBX_OK ? sbx__spool_job_result(job, out, err) : rc;
}

int sbx_exec(sbx_host *host, const char *id, const sbx_exec_opts *opts, sbx_exec_result **out,
	     sbx_error *err)
{
	if (!out || !opts)
		return sbx__set_error(err, SBX_E_INVAL, "exec: NULL options or result pointer");
	*out = NULL;
	sbx_exec_opts o;
	int rc = exec_opts_in(opts, &o, err);
	if (rc != SBX_OK)
		return rc;
	if (o.background)
		return start_job(host, id, &o, out, err);
	sbx__route r;
	rc = sbx__route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	const sbx__policy *pol = &r.ps->ds->policy;
	sbx__spool *sp = NULL;
	rc = sbx__spool_open(host->state_dir, id, o.shell, o.argv, pol, &sp, err);
	if (rc != SBX_OK)
		return rc;
	sbx_exec_request req;
	make_request(&o, pol, &req);
	const char **wrapped = NULL;
	char nonce[17];
	if ((o.stdout_path || o.stderr_path) && !sbx__plugin_flag(&r, SBX_PLUGIN_REDIRECT, 3)) {
		int e = sbx__random_hex(nonce, 8);
		if (e)
			rc =
			    sbx__set_error(err, SBX_E_IO, "exec: no random bytes: %s", strerror(e));
		else if (!(wrapped = redirect_argv(&o, nonce)))
			rc = sbx__nomem(err, "exec");
		if (rc != SBX_OK)
			return sbx__spool_fail(sp, rc, err);
		req.shell = NULL;
		req.argv = wrapped;
		req.stdout_path = req.stderr_path = NULL;
	}
	sbx_exec_outcome oc;
	double t0 = now_seconds();
	rc = sbx__execute(host, &r, id, 0, &req, sbx__spool_write, sp, &oc, err);
	double took = now_seconds() - t0;
	if (rc == SBX_OK && wrapped)
		rc = redirect_failed(sp, &o, nonce, &oc, err);
	sbx__free(wrapped);
	if (rc != SBX_OK)
		return sbx__spool_fail(sp, rc, err);
	return sbx__spool_finish(sp, &oc, took, out, err);
}

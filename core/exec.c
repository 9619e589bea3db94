/* sbx_exec, one straight path: route -> request -> execute -> finish.
 *
 *   route    route.c   sbx__route_id: the plugin state serving the sandbox
 *   request  spool.c   sbx__spool_open: the call directory; here: the plugin's request
 *   execute  run.c     sbx__execute: the plugin's execute through an output gate into the
 *                      spool (resuming a paused sandbox when auto_resume says so)
 *   finish   spool.c   sbx__spool_finish: the whole sbx_exec_result (sbx__spool_fail: the
 *                      call directory removed again)
 * A background exec starts a job instead (jobs.c). */
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
	double timeout = o->timeout < 0 ? pol->timeout : o->timeout;
	if (timeout > 0) {
		/* Rounded up, so a fraction of a millisecond still bounds the call. */
		double ms = timeout * 1000.0;
		req->timeout_ms = (uint64_t)ms;
		if ((double)req->timeout_ms < ms)
			req->timeout_ms++;
	}
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
	sbx_exec_outcome oc;
	double t0 = now_seconds();
	rc = sbx__execute(host, &r, id, 0, &req, sbx__spool_write, sp, &oc, err);
	double took = now_seconds() - t0;
	if (rc != SBX_OK)
		return sbx__spool_fail(sp, rc, err);
	return sbx__spool_finish(sp, &oc, took, out, err);
}

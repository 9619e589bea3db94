/* Running a request in a routed sandbox: the one place a plugin's execute is called, for
 * sbx_exec (exec.c) and for the quiet runs of jobs.c (output kept in memory).
 *
 * The host does not ask a backend for the sandbox's status before an exec: a backend refuses
 * an exec in a paused sandbox with SBX_E_PAUSED (plugin.h). Then, when the data source's
 * policy has auto_resume, the host resumes the sandbox and sends the request once more;
 * otherwise the exec fails with SBX_E_PAUSED naming the fix. */
#include <stddef.h>
#include <string.h>

#include "host_internal.h"

/* A plugin's outcome within what plugin.h allows, else SBX_E_BACKEND naming the plugin. */
static int check_outcome(const sbx_exec_outcome *oc, const char *alias, sbx_error *perr)
{
	if (oc->exit_code < -1 || oc->exit_code > 255)
		return sbx__set_error(perr, SBX_E_BACKEND,
				      "%s: exec: plugin reported exit code %d, outside -1..255",
				      alias, (int)oc->exit_code);
	if (oc->signal < 0 || oc->signal > 64)
		return sbx__set_error(perr, SBX_E_BACKEND,
				      "%s: exec: plugin reported signal %d, outside 0..64", alias,
				      (int)oc->signal);
	if (oc->timed_out > 1)
		return sbx__set_error(perr, SBX_E_BACKEND,
				      "%s: exec: plugin reported timed_out %u, expected 0 or 1",
				      alias, (unsigned)oc->timed_out);
	return SBX_OK;
}

typedef struct execute_args {
	const sbx_exec_request *req;
	sbx_exec_outcome *oc;
} execute_args;

static int execute_call(const sbx__route *r, void *a, sbx_error *perr)
{
	execute_args *x = a;
	int rc = r->slot->desc->execute(r->ps->state, r->backend, x->req, x->oc, perr);
	return rc == SBX_OK ? check_outcome(x->oc, r->alias, perr) : rc;
}

static const sbx__op exec_op = {"exec", offsetof(sbx_plugin_desc, execute), execute_call};
static const sbx__op job_op = {"job", offsetof(sbx_plugin_desc, execute), execute_call};

/* One execute, its output going to sink(ctx, ...) through a gate closed when it returns. */
static int execute_once(const sbx__route *r, const sbx__op *op, sbx_exec_request *req,
			sbx_output_fn sink, void *ctx, sbx_exec_outcome *oc, sbx_error *err)
{
	sbx__outgate *gate = NULL;
	if (sbx__outgate_open(sink, ctx, r->alias, &gate) != SBX_OK)
		return sbx__nomem(err, op->name);
	req->output = sbx__outgate_output;
	req->output_ctx = sbx__outgate_ctx(gate);
	memset(oc, 0, sizeof(*oc));
	SBX_INIT_HEADER(*oc);
	execute_args a = {req, oc};
	int rc = sbx__call(r, op, &a, err);
	/* From here a plugin thread calling back reaches nothing. */
	sbx__outgate_close(gate);
	return rc;
}

int sbx__execute(sbx_host *h, const sbx__route *r, const char *id, int quiet, sbx_exec_request *req,
		 sbx_output_fn sink, void *ctx, sbx_exec_outcome *oc, sbx_error *err)
{
	const sbx__op *op = quiet ? &job_op : &exec_op;
	req->argc = 0;
	while (req->argv && req->argv[req->argc])
		req->argc++;
	int rc = execute_once(r, op, req, sink, ctx, oc, err);
	if (rc != SBX_E_PAUSED)
		return rc;
	if (!r->ps->ds->policy.auto_resume || !r->slot->desc->resume)
		return sbx__set_error(err, SBX_E_PAUSED,
				      "%s: exec: sandbox is paused; resume it or set "
				      "auto_resume: true",
				      id);
	rc = sbx__resume(h, r, id, err);
	return rc == SBX_OK ? execute_once(r, op, req, sink, ctx, oc, err) : rc;
}

/* The sink of a quiet run: stdout in memory up to out_cap, the start of stderr. */
static int capture_output(void *ctx, uint32_t stream, const void *data, size_t len)
{
	sbx__capture *c = ctx;
	if (stream == SBX_STREAM_STDERR) {
		size_t room = sizeof(c->err) - 1 - c->err_len;
		size_t k = len < room ? len : room;
		memcpy(c->err + c->err_len, data, k);
		c->err_len += k;
		c->err[c->err_len] = '\0';
		return SBX_OK;
	}
	size_t k = len;
	if (c->out_len + k > c->out_cap) {
		k = c->out_cap - c->out_len;
		c->out_over = 1;
	}
	if (!k)
		return SBX_OK;
	char *nb = sbx__realloc(c->out, c->out_len + k + 1);
	if (!nb)
		return SBX_E_NOMEM;
	memcpy(nb + c->out_len, data, k);
	c->out = nb;
	c->out_len += k;
	c->out[c->out_len] = '\0';
	return SBX_OK;
}

int sbx__host_run(sbx_host *h, const char *id, const sbx__run_spec *spec, sbx__capture *cap,
		  sbx_exec_outcome *oc, sbx_error *err)
{
	sbx__route r;
	int rc = sbx__route_id(h, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	sbx_exec_request req = {.argv = spec->argv,
				.cwd = spec->cwd,
				.env = spec->env,
				.n_env = spec->n_env,
				.has_stdin = spec->has_stdin ? 1u : 0u,
				.stdin_data = spec->has_stdin ? spec->stdin_data : NULL,
				.stdin_len = spec->has_stdin ? spec->stdin_len : 0,
				.user = spec->user,
				.timeout_ms = spec->timeout_ms};
	SBX_INIT_HEADER(req);
	return sbx__execute(h, &r, id, 1, &req, capture_output, cap, oc, err);
}

const char **sbx__script_argv(const char *const *head, size_t n_head, const char *shell,
			      const char *const *argv)
{
	size_t n = 0;
	while (!shell && argv[n])
		n++;
	const char **v = sbx__calloc(n_head + (shell ? 1 : n) + 1, sizeof(*v));
	if (!v)
		return NULL;
	memcpy(v, head, n_head * sizeof(*v));
	if (shell)
		v[n_head] = shell;
	else
		memcpy(v + n_head, argv, n * sizeof(*v));
	return v;
}

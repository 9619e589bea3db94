/* Commands through envd's process service (see process.h). */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/json.h>
#include <sbx/support/rexec.h>

#include "connect.h"
#include "envd.h"
#include "process.h"

/* One stream call's transfer: the parser, and the handle that tells what the answer is. */
typedef struct stream {
	e2b_process *p;
	CURL *c;
	size_t other; /* bytes of an answer that is no stream */
} stream;

static size_t on_data(char *data, size_t size, size_t n, void *ctx)
{
	stream *s = ctx;
	e2b_process *p = s->p;
	long status = 0;
	curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200) {
		/* An error answer (a paused sandbox's 502) is no Connect stream: stream_call
		 * words it by its status. Its body is not kept, nor read past 64 KiB. */
		s->other += size * n;
		return s->other <= (64u << 10) ? size * n : 0;
	}
	if (!e2b_process_feed(p, data, size * n))
		return 0;
	if (p->stop && *p->stop)
		return 0; /* hangs up: what comes later is a leftover's */
	return size * n;
}

/* One server-stream call (Start or Connect) into p. Returns the curl result; *oom when the
 * call could not even be set up. */
static CURLcode stream_call(const e2b_target *t, const char *method, const char *body_json,
			    const char *user, long timeout_ms, long connect_timeout_ms,
			    e2b_process *p, int *oom)
{
	char url[800], hdr[64];
	size_t bl = strlen(body_json);
	sbxs_buf body = {0};
	struct curl_slist *hd = NULL;
	CURL *c = curl_easy_init();
	CURLcode cc = CURLE_OUT_OF_MEMORY;
	unsigned char prefix[5] = {0, (unsigned char)(bl >> 24), (unsigned char)(bl >> 16),
				   (unsigned char)(bl >> 8), (unsigned char)bl};
	const char *extra[3] = {"Keepalive-Ping-Interval: 50", NULL, NULL};
	*oom = 1;
	if (connect_timeout_ms > 0) {
		snprintf(hdr, sizeof(hdr), "Connect-Timeout-Ms: %ld", connect_timeout_ms);
		extra[1] = hdr;
	}
	if (!c || sbxs_buf_add(&body, prefix, 5) != SBX_OK ||
	    sbxs_buf_add(&body, body_json, bl) != SBX_OK ||
	    snprintf(url, sizeof(url), "%s/%s", t->base, method) >= (int)sizeof(url))
		goto out;
	e2b_envd_call call = {
	    .t = t, .user = user, .content_type = "application/connect+json", .extra = extra};
	sbxs_http_req req;
	e2b_envd_req(&call, "POST", url, method, &req);
	req.body = body.data;
	req.body_len = body.len;
	req.timeout_ms = timeout_ms;
	if (sbxs_http_prepare(&req, c, &hd, NULL) != SBX_OK)
		goto out;
	*oom = 0;
	stream s = {.p = p, .c = c};
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	cc = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (cc == CURLE_WRITE_ERROR && status != 200 && s.other)
		cc = CURLE_OK; /* a long error answer, cut: its status says what happened */
	if (cc == CURLE_OK && status != 200 && !p->end_stream) {
		snprintf(p->error_code, sizeof(p->error_code), "%s",
			 status == 502 ? "unavailable" : "unknown");
		snprintf(p->error, sizeof(p->error), "HTTP %ld", status);
		p->end_stream = 1;
	}
out:
	curl_easy_cleanup(c);
	sbxs_http_headers_free(hd);
	sbxs_buf_free(&body);
	return cc;
}

static json_t *start_request(const char *const *argv, const sbx_exec_request *req)
{
	json_t *args = json_array(), *envs = json_object();
	if (!args || !envs)
		goto fail;
	for (size_t i = 1; argv[i]; i++)
		if (json_array_append_new(args, json_string(argv[i])) != 0)
			goto fail;
	for (uint32_t i = 0; req && i < req->n_env; i++)
		if (json_object_set_new(envs, req->env[i].key, json_string(req->env[i].value)) != 0)
			goto fail;
	/* No cwd: the wrapper enters it (and checks that it stays beneath the work dir). */
	json_t *p = json_pack("{s:s,s:o,s:o}", "cmd", argv[0], "args", args, "envs", envs);
	args = envs = NULL;
	return p ? json_pack("{s:o,s:b}", "process", p, "stdin", 0) : NULL;
fail:
	json_decref(args);
	json_decref(envs);
	return NULL;
}

/* When the killer cannot run (envd refuses a Start), SendSignal SIGKILL to the wrapper is the
 * last resort: it stops the leader at least, as E2B's SDK does. */
static void kill_leader(e2b_state *st, const char *id, uint32_t pid)
{
	sbx_error e = {0};
	char code[32] = "";
	json_t *resp = NULL;
	json_t *req = json_pack("{s:{s:I},s:s}", "process", "pid", (json_int_t)pid, "signal",
				"SIGNAL_SIGKILL");
	if (!req)
		return;
	if (e2b_unary(st, id, "process.Process/SendSignal", req, &resp, code, "kill", &e) != SBX_OK)
		sbxs_host->log(SBX_LOG_WARN, E2B_ALIAS, "exec: cannot kill pid %u: %s", pid,
			       e.message);
	json_decref(resp);
	json_decref(req);
}

/* Runs the wrapper's killer for token, as root if envd lets us, else as the default user. */
static int kill_tree(e2b_state *st, const char *id, const e2b_target *t, uint32_t pid,
		     const char *token)
{
	const char *argv[SBXS_REXEC_KILL_ARGC];
	sbxs_rexec_kill_argv(token, argv);
	json_t *r = start_request(argv, NULL);
	char *body = sbxs_json_dump(r);
	json_decref(r);
	if (!body)
		return SBX_E_NOMEM;
	e2b_process p = {0};
	int oom;
	CURLcode cc = stream_call(t, "process.Process/Start", body, "root", 30000, 30000, &p, &oom);
	if (cc != CURLE_OK || !p.ended) {
		e2b_process_free(&p);
		memset(&p, 0, sizeof(p));
		cc = stream_call(t, "process.Process/Start", body, NULL, 30000, 30000, &p, &oom);
	}
	sbxs_host->free(body);
	int ended = p.ended;
	e2b_process_free(&p);
	if (cc != CURLE_OK || !ended) {
		kill_leader(st, id, pid);
		return SBX_E_BACKEND;
	}
	return SBX_OK;
}

static int map_rpc_error(const char *code)
{
	if (strcmp(code, "not_found") == 0 || strcmp(code, "unavailable") == 0)
		return SBX_E_NOT_FOUND;
	if (strcmp(code, "unauthenticated") == 0 || strcmp(code, "permission_denied") == 0)
		return SBX_E_CONFIG;
	if (strcmp(code, "invalid_argument") == 0)
		return SBX_E_INVAL;
	if (strcmp(code, "resource_exhausted") == 0)
		return SBX_E_RATE_LIMITED;
	if (strcmp(code, "deadline_exceeded") == 0)
		return SBX_E_TIMEOUT;
	return SBX_E_BACKEND;
}

/* A dropped stream is reattached by pid; the output already received is kept. */
static CURLcode reattach(const e2b_target *t, e2b_process *p, uint64_t deadline, CURLcode cc,
			 int *oom)
{
	for (int attempt = 0;
	     attempt < 3 && cc != CURLE_OK && cc != CURLE_OPERATION_TIMEDOUT && !*oom && !p->oom &&
	     !p->sink_rc && !p->bad && p->started && !p->ended && !(p->stop && *p->stop);
	     attempt++) {
		char body[64];
		long left = 0;
		if (deadline) {
			int64_t now = sbxs_now_ms();
			if (now >= (int64_t)deadline)
				return CURLE_OPERATION_TIMEDOUT;
			left = (long)((int64_t)deadline - now);
		}
		sbxs_host->log(SBX_LOG_WARN, E2B_ALIAS,
			       "exec: stream of pid %u dropped (%s), reattaching", p->pid,
			       curl_easy_strerror(cc));
		snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u}}", p->pid);
		e2b_process_reset(p);
		cc = stream_call(t, "process.Process/Connect", body, NULL, left, left, p, oom);
	}
	return cc;
}

int e2b_process_run(e2b_state *st, const char *id, const e2b_run *run, sbx_exec_outcome *out,
		    sbx_error *err)
{
	e2b_target t;
	e2b_process p = {.output = run->output, .output_ctx = run->output_ctx, .stop = run->stop};
	int oom = 0;
	int rc = e2b_target_get(st, id, &t, err);
	if (rc != SBX_OK)
		return rc;
	json_t *r = start_request(run->argv, run->req);
	char *body = sbxs_json_dump(r);
	json_decref(r);
	if (!body)
		return sbxs_nomem(err, E2B_ALIAS, "exec");
	uint64_t deadline = run->timeout_ms ? (uint64_t)sbxs_now_ms() + run->timeout_ms : 0;
	CURLcode cc =
	    stream_call(&t, "process.Process/Start", body, run->user, (long)run->timeout_ms,
			run->timeout_ms ? (long)run->timeout_ms + 10000 : 0, &p, &oom);
	cc = reattach(&t, &p, deadline, cc, &oom);
	if (run->stop && *run->stop)
		goto out;
	if (oom || p.oom) {
		rc = sbxs_nomem(err, E2B_ALIAS, "exec");
		goto kill;
	}
	if (p.sink_rc) {
		rc =
		    sbxs_host->set_error(err, p.sink_rc, "e2b: exec: the host refused more output");
		goto kill;
	}
	if (p.bad) {
		rc = sbxs_host->set_error(
		    err, SBX_E_BACKEND, "e2b: exec: envd sent a frame that is not a process event");
		goto kill;
	}
	if (cc == CURLE_OPERATION_TIMEDOUT && run->timeout_ms) {
		out->timed_out = 1;
		goto kill;
	}
	if (cc != CURLE_OK) {
		rc = sbxs_host->set_error(err, SBX_E_UNREACHABLE, "e2b: exec: envd stream: %s",
					  curl_easy_strerror(cc));
		goto kill;
	}
	if (p.error_code[0] && !p.ended) {
		rc = sbxs_host->set_error(err, map_rpc_error(p.error_code),
					  "e2b: exec: envd: %s: %s", p.error_code, p.error);
		if (rc == SBX_E_NOT_FOUND)
			e2b_forget(st, id);
		/* envd is not there for a target cached before another process paused the
		 * sandbox: the API tells paused from gone (the host resumes on SBX_E_PAUSED). */
		sbx_error why = {0};
		if (rc == SBX_E_NOT_FOUND && !p.started &&
		    e2b_target_get(st, id, &t, &why) == SBX_E_PAUSED)
			rc = sbxs_host->set_error(err, SBX_E_PAUSED, "%s", why.message);
		goto out;
	}
	if (!p.ended) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "e2b: exec: envd stream ended without an end event");
		goto kill;
	}
	out->exit_code = p.exit_code;
	out->signal = p.signal;
	goto out;
kill:
	if (p.started && !p.ended && run->token)
		kill_tree(st, id, &t, p.pid, run->token);
out:
	e2b_process_free(&p);
	sbxs_host->free(body);
	return rc;
}

int e2b_process_simple(e2b_state *st, const char *id, const char *const *argv, int *exit_code,
		       sbx_error *err)
{
	sbx_exec_outcome o = {0};
	e2b_run run = {.argv = argv, .timeout_ms = 60000};
	int rc = e2b_process_run(st, id, &run, &o, err);
	if (rc == SBX_OK && o.timed_out)
		rc =
		    sbxs_host->set_error(err, SBX_E_TIMEOUT, "e2b: helper '%s' timed out", argv[0]);
	*exit_code = o.exit_code;
	return rc;
}

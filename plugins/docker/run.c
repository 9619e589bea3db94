/* Commands in a container: POST /containers/{id}/exec, then /exec/{id}/start, whose answer is
 * the multiplexed stdout/stderr stream that lasts until the command is done and the engine
 * closes the connection; the exit code comes from /exec/{id}/json. */
#include <stdio.h>
#include <string.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>

#include "run.h"

int docker_exec_create(docker_engine *e, const char *id, const json_t *body, char *exec_id,
		       size_t cap, sbx_error *err)
{
	char path[160];
	docker_resp resp = {0};
	json_t *j = NULL;
	snprintf(path, sizeof(path), "/containers/%s/exec", id);
	int rc = docker_request_json(e, "POST", path, body, &resp, err);
	if (rc != SBX_OK)
		return rc;
	if (resp.status != 201 && resp.status != 200) {
		rc = docker_http_error(&resp, "exec", id, err);
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	const char *eid = json_string_value(json_object_get(j, "Id"));
	if (!eid || strlen(eid) >= cap || strspn(eid, "0123456789abcdef") != strlen(eid)) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "docker: exec: engine answered without an exec id");
		goto out;
	}
	memcpy(exec_id, eid, strlen(eid) + 1);
out:
	json_decref(j);
	docker_resp_free(&resp);
	return rc;
}

static int exec_inspect(docker_engine *e, const char *exec_id, docker_exec_state *es,
			sbx_error *err)
{
	char path[160];
	docker_resp resp = {0};
	json_t *j = NULL;
	snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
	int rc = docker_request(e, "GET", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		return rc;
	if (resp.status != 200) {
		rc = docker_http_error(&resp, "exec", exec_id, err);
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	json_t *code = json_object_get(j, "ExitCode");
	es->running = json_is_true(json_object_get(j, "Running"));
	es->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
	es->pid = (long long)json_integer_value(json_object_get(j, "Pid"));
out:
	json_decref(j);
	docker_resp_free(&resp);
	return rc;
}

int docker_exec_wait(docker_engine *e, const char *exec_id, docker_exec_state *es, sbx_error *err)
{
	int64_t pause_ms = 2, deadline = sbxs_now_ms() + 5000;
	for (;;) {
		int rc = exec_inspect(e, exec_id, es, err);
		if (rc != SBX_OK || !es->running)
			return rc;
		if (sbxs_now_ms() > deadline)
			return sbxs_host->set_error(
			    err, SBX_E_BACKEND,
			    "docker: exec: engine still reports exec %.12s running after its "
			    "stream ended",
			    exec_id);
		sbxs_sleep_ms(pause_ms);
		if (pause_ms < 100)
			pause_ms *= 2;
	}
}

/* The write side of a stream: the demultiplexer once the engine answered 200 (or 101), else
 * the start of an error answer for its message. */
typedef struct reader {
	docker_stream *s;
	docker_demux demux;
	CURL *easy;
	int checked; /* 1: a stream, 2: an error answer */
	uint64_t bytes;
	docker_resp error;
	int oom;
} reader;

static size_t on_data(char *data, size_t size, size_t n, void *ctx)
{
	reader *r = ctx;
	size_t len = size * n;
	r->bytes += len;
	if (!r->checked) {
		long status = 0;
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
		r->checked = status == 200 || status == 101 ? 1 : 2;
	}
	if (r->checked == 2) {
		if (r->error.body.len < 4096 && sbxs_buf_add(&r->error.body, data, len) != SBX_OK) {
			r->oom = 1;
			return 0;
		}
		return len;
	}
	int rc = docker_demux_feed(&r->demux, data, len, r->s->sink, r->s->sink_ctx);
	if (rc != 0) {
		r->s->sink_rc = rc;
		return 0; /* ends the transfer */
	}
	if (r->s->stop && *r->s->stop) {
		r->s->stopped = 1;
		return 0;
	}
	return len;
}

/* Drives the transfer, watching the deadline and whether the exec has ended. */
static int pump(docker_engine *e, const char *exec_id, CURLM *m, reader *r, CURLcode *result,
		sbx_error *err)
{
	docker_stream *s = r->s;
	int running = 1;
	int64_t deadline = s->deadline_ms, next_check = sbxs_now_ms() + 500, ended_at = 0;
	uint64_t seen = 0;
	while (running) {
		CURLMcode mc = curl_multi_perform(m, &running);
		if (mc != CURLM_OK)
			return sbxs_host->set_error(err, SBX_E_BACKEND, "docker: exec: %s",
						    curl_multi_strerror(mc));
		if (!running)
			break;
		int64_t now = sbxs_now_ms();
		if (deadline && now >= deadline) {
			if (s->expired || !s->expire)
				return SBX_OK; /* the drain after the kill is over too */
			/* Kill first and keep reading, so output written before the kill arrives. */
			s->expired = 1;
			s->expire(s->expire_ctx);
			deadline = sbxs_now_ms() + 250; /* the stream may outlive the kill */
			continue;
		}
		if (r->bytes != seen) {
			seen = r->bytes;
			ended_at = 0; /* still talking: not a stale holder */
		}
		if (ended_at && now - ended_at >= 2000)
			return SBX_OK; /* the command ended 2 s ago and nothing came since */
		if (now >= next_check && !s->expired && !ended_at) {
			/* A background child may hold the stream after the command ended. An exec
			 * the engine has not started yet also reads "not running", hence the pid. */
			docker_exec_state es = {0};
			if (exec_inspect(e, exec_id, &es, NULL) == SBX_OK && !es.running && es.pid)
				ended_at = sbxs_now_ms();
			next_check = now + 500;
		}
		int64_t wait = (ended_at ? ended_at + 2000 : next_check) - now;
		if (deadline && deadline - now < wait)
			wait = deadline - now;
		curl_multi_poll(m, NULL, 0, (int)(wait > 0 ? wait : 1), NULL);
	}
	int left;
	CURLMsg *msg;
	while ((msg = curl_multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE)
			*result = msg->data.result;
	return SBX_OK;
}

int docker_exec_stream(docker_engine *e, const char *exec_id, docker_stream *s, sbx_error *err)
{
	static const char body[] = "{\"Detach\":false,\"Tty\":false}";
	static const char *const headers[] = {"Content-Type: application/json", NULL};
	char path[160], url[1024];
	struct curl_slist *hdrs = NULL;
	CURLcode result = CURLE_OK;
	reader r = {.s = s};
	s->expired = 0;
	s->sink_rc = 0;
	s->stopped = 0;
	snprintf(path, sizeof(path), "/exec/%s/start", exec_id);
	int rc = docker_url(e, path, url, sizeof(url), err);
	if (rc != SBX_OK)
		return rc;
	CURL *easy = curl_easy_init();
	CURLM *m = curl_multi_init();
	if (!easy || !m) {
		rc = sbxs_nomem(err, DOCKER_ALIAS, "exec");
		goto out;
	}
	sbxs_http_req req;
	docker_stream_req(e, "POST", url, "exec", &req);
	req.headers = headers;
	req.body = body;
	req.body_len = sizeof(body) - 1;
	if ((rc = sbxs_http_prepare(&req, easy, &hdrs, err)) != SBX_OK)
		goto out;
	curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(easy, CURLOPT_WRITEDATA, &r);
	/* The stream has no length and ends with the connection: never reuse it. */
	curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
	r.easy = easy;
	curl_multi_add_handle(m, easy);
	rc = pump(e, exec_id, m, &r, &result, err);
	curl_multi_remove_handle(m, easy);
	if (rc != SBX_OK || s->expired || s->stopped)
		goto out;
	if (s->sink_rc) {
		rc = s->sink_rc;
		goto out;
	}
	if (r.oom) {
		rc = sbxs_nomem(err, DOCKER_ALIAS, "exec");
		goto out;
	}
	if (result != CURLE_OK) {
		rc = docker_transport_error(e, "exec", result, err);
		goto out;
	}
	long status = 0;
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
	if (status != 200 && status != 101) {
		r.error.status = status;
		rc = docker_http_error(&r.error, "exec", exec_id, err);
	}
out:
	docker_resp_free(&r.error);
	curl_easy_cleanup(easy);
	curl_multi_cleanup(m);
	sbxs_http_headers_free(hdrs);
	return rc;
}

static json_t *argv_json(const char *const *argv)
{
	json_t *a = json_array();
	for (size_t i = 0; a && argv[i]; i++)
		if (json_array_append_new(a, json_string(argv[i])) != 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static int capture_sink(void *vctx, uint32_t stream, const void *data, size_t len)
{
	docker_capture *c = vctx;
	char *buf = stream == SBX_STREAM_STDOUT ? c->out : c->err;
	size_t *used = stream == SBX_STREAM_STDOUT ? &c->out_len : &c->err_len;
	size_t cap = stream == SBX_STREAM_STDOUT ? sizeof(c->out) : sizeof(c->err);
	size_t take = cap - 1 - *used < len ? cap - 1 - *used : len;
	memcpy(buf + *used, data, take);
	*used += take;
	buf[*used] = '\0';
	return 0;
}

int docker_run(docker_engine *e, const char *id, const char *const *argv, docker_capture *cap,
	       sbx_error *err)
{
	char exec_id[128];
	docker_exec_state es = {0};
	memset(cap, 0, sizeof(*cap));
	json_t *body = json_pack("{s:b,s:b,s:b,s:b,s:o}", "AttachStdin", 0, "AttachStdout", 1,
				 "AttachStderr", 1, "Tty", 0, "Cmd", argv_json(argv));
	if (!body)
		return sbxs_nomem(err, DOCKER_ALIAS, "exec");
	int rc = docker_exec_create(e, id, body, exec_id, sizeof(exec_id), err);
	json_decref(body);
	if (rc != SBX_OK)
		return rc;
	docker_stream s = {.sink = capture_sink, .sink_ctx = cap};
	rc = docker_exec_stream(e, exec_id, &s, err);
	if (rc == SBX_OK)
		rc = docker_exec_wait(e, exec_id, &es, err);
	cap->exit_code = es.exit_code;
	return rc;
}

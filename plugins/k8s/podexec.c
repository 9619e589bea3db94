/* pods/{name}/exec over WebSocket (see podexec.h). */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/support/buf.h>
#include <sbx/support/clock.h>
#include <sbx/support/host.h>

#include "podexec.h"
#include "ws.h"

#define STDIN_CHUNK (64u << 10)

static int build_path(k8s_state *st, const char *pod, const k8s_podexec *io, sbxs_buf *p,
		      sbx_error *err)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "/api/v1/namespaces/%s/pods/%s/exec?container=" K8S_CONTAINER
			 "&stdout=true&stderr=true%s",
			 st->ns, pod, io->has_stdin ? "&stdin=true" : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return sbxs_host->set_error(err, SBX_E_INVAL, "k8s: exec: pod name too long");
	if (sbxs_buf_add(p, head, (size_t)n) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	for (size_t i = 0; io->argv[i]; i++) {
		char *e = curl_easy_escape(NULL, io->argv[i], (int)strlen(io->argv[i]));
		int rc = e ? SBX_OK : SBX_E_NOMEM;
		if (rc == SBX_OK && (sbxs_buf_add(p, "&command=", 9) != SBX_OK ||
				     sbxs_buf_add(p, e, strlen(e)) != SBX_OK))
			rc = SBX_E_NOMEM;
		curl_free(e);
		if (rc != SBX_OK)
			return sbxs_host->set_error(err, rc, "k8s: out of memory");
	}
	return SBX_OK;
}

/* Reads the exit code from a channel-3 Status. SBX_OK with *code, or SBX_E_BACKEND when the
 * status is a failure without an ExitCode cause (the command could not run). */
static int parse_status(const char *text, size_t len, int *code, sbx_error *err)
{
	json_t *j = json_loadb(text, len, 0, NULL);
	if (!j)
		return sbxs_host->set_error(err, SBX_E_BACKEND,
					    "k8s: exec: the status channel carried no JSON Status");
	int rc = SBX_OK;
	const char *status = json_string_value(json_object_get(j, "status"));
	if (status && strcmp(status, "Success") == 0) {
		*code = 0;
		goto out;
	}
	json_t *causes = json_object_get(json_object_get(j, "details"), "causes");
	size_t i;
	json_t *c;
	json_array_foreach(causes, i, c)
	{
		const char *reason = json_string_value(json_object_get(c, "reason"));
		const char *msg = json_string_value(json_object_get(c, "message"));
		if (reason && msg && strcmp(reason, "ExitCode") == 0) {
			char *end = NULL;
			unsigned long v = strtoul(msg, &end, 10);
			if (end != msg && *end == '\0' && v <= 255) {
				*code = (int)v;
				goto out;
			}
		}
	}
	const char *m = json_string_value(json_object_get(j, "message"));
	rc = sbxs_host->set_error(err, SBX_E_BACKEND, "k8s: exec failed: %s",
				  m ? m : "status Failure without an exit code");
out:
	json_decref(j);
	return rc;
}

/* Opens the exec connection and learns the protocol the server chose. */
static int open_exec(k8s_state *st, const char *path, k8s_podexec *io, k8s_ws **ws, sbx_error *err)
{
	const char *proto = NULL;
	int rc = k8s_ws_open(
	    st, path, st->force_v4 ? "v4.channel.k8s.io" : "v5.channel.k8s.io, v4.channel.k8s.io",
	    ws, &proto, err);
	if (rc != SBX_OK)
		return rc;
	if (strcmp(proto, "v5.channel.k8s.io") == 0)
		io->protocol = 5;
	else if (strcmp(proto, "v4.channel.k8s.io") == 0)
		io->protocol = 4;
	else
		return sbxs_host->set_error(
		    err, SBX_E_BACKEND,
		    "k8s: exec: the server chose subprotocol '%s', which was "
		    "not offered",
		    proto);
	return SBX_OK;
}

/* Queues the stdin bytes on channel 0, then (v5) the close of stdin. */
static int queue_stdin(k8s_ws *ws, const k8s_podexec *io, sbx_error *err)
{
	const unsigned char *d = io->stdin_data;
	unsigned char *frame = sbxs_host->alloc(STDIN_CHUNK + 1);
	int rc = SBX_OK;
	if (!frame)
		return sbxs_nomem(err, K8S_ALIAS, "exec");
	frame[0] = 0;
	for (size_t off = 0; off < io->stdin_len && rc == SBX_OK; off += STDIN_CHUNK) {
		size_t n = io->stdin_len - off < STDIN_CHUNK ? io->stdin_len - off : STDIN_CHUNK;
		memcpy(frame + 1, d + off, n);
		rc = k8s_ws_queue(ws, 2, frame, n + 1);
	}
	sbxs_host->free(frame);
	if (rc == SBX_OK && io->protocol == 5) {
		const unsigned char close_stdin[2] = {0xff, 0x00};
		rc = k8s_ws_queue(ws, 2, close_stdin, 2);
	}
	return rc == SBX_OK ? SBX_OK
			    : sbxs_host->set_error(err, rc, "k8s: exec: cannot queue stdin");
}

/* Runs the kill command in a second exec (a failure is logged: the caller's status wins). */
static void kill_tree(k8s_state *st, const char *pod, const k8s_podexec *io)
{
	if (!io->kill_argv)
		return;
	k8s_podexec kio = {.argv = io->kill_argv};
	sbx_error kerr = {0};
	if (k8s_podexec_run(st, pod, &kio, &kerr) != SBX_OK)
		sbxs_host->log(SBX_LOG_WARN, K8S_ALIAS, "exec: killing the command failed: %s",
			       kerr.message);
}

/* One message of channels 1-3: output to the host, the status kept. */
static int channel(k8s_state *st, const char *pod, k8s_podexec *io, const unsigned char *msg,
		   size_t len, sbxs_buf *status, sbx_error *err)
{
	if ((msg[0] == 1 || msg[0] == 2) && len > 1) {
		int orc =
		    io->output ? io->output(io->output_ctx, msg[0], msg + 1, len - 1) : SBX_OK;
		if (orc != SBX_OK) {
			kill_tree(st, pod, io);
			return sbxs_host->set_error(err, orc,
						    "k8s: exec: output refused by the host");
		}
	} else if (msg[0] == 3 && len > 1) {
		sbxs_buf_clear(status);
		if (sbxs_buf_add(status, msg + 1, len - 1) != SBX_OK)
			return sbxs_nomem(err, K8S_ALIAS, "exec");
	}
	return SBX_OK;
}

/* Reads messages until the server closes the stream, the connection breaks, or the timeout
 * (then the kill, and a short drain for what the dying tree still writes and its status).
 * perr gets a broken connection's reason. */
static int pump(k8s_state *st, const char *pod, k8s_podexec *io, k8s_ws *ws, sbxs_buf *status,
		sbx_error *perr, sbx_error *err)
{
	int64_t deadline =
	    io->timeout_ms ? sbxs_now_us() + (int64_t)io->timeout_ms * 1000 : INT64_MAX;
	for (;;) {
		int op = 0;
		const unsigned char *msg = NULL;
		size_t len = 0;
		int64_t now = sbxs_now_us();
		int64_t step = now + 10000000 < deadline ? now + 10000000 : deadline;
		int r = k8s_ws_pump(ws, step, &op, &msg, &len, perr);
		if (r < 0)
			return SBX_OK;
		if (r == 0 && sbxs_now_us() < deadline) {
			/* Ten quiet seconds: a ping keeps idle-timeout proxies away. */
			k8s_ws_queue(ws, 9, "sbx", 3);
		} else if (r == 0) {
			if (io->timed_out)
				return SBX_OK; /* the drain is over too */
			io->timed_out = 1;
			kill_tree(st, pod, io);
			deadline = sbxs_now_us() + 3000000;
		} else if (op == 8) {
			k8s_ws_queue(ws, 8, msg, len >= 2 ? 2 : 0);
			k8s_ws_pump(ws, sbxs_now_us() + 200000, &op, &msg, &len, perr);
			return SBX_OK;
		} else if ((op == 1 || op == 2) && len >= 1) {
			int rc = channel(st, pod, io, msg, len, status, err);
			if (rc != SBX_OK)
				return rc;
			if (io->stop && *io->stop && !status->len) {
				io->stopped = 1;
				return SBX_OK;
			}
		}
	}
}

int k8s_podexec_run(k8s_state *st, const char *pod, k8s_podexec *io, sbx_error *err)
{
	sbxs_buf path = {0}, status = {0};
	k8s_ws *ws = NULL;
	sbx_error perr = {0};
	int rc = build_path(st, pod, io, &path, err);
	if (rc == SBX_OK)
		rc = open_exec(st, path.data, io, &ws, err);
	if (rc == SBX_OK && io->has_stdin)
		rc = queue_stdin(ws, io, err);
	if (rc == SBX_OK)
		rc = pump(st, pod, io, ws, &status, &perr, err);
	if (rc != SBX_OK)
		goto out;
	if (status.len) {
		rc = parse_status(status.data, status.len, &io->exit_code, err);
		if (rc == SBX_OK)
			io->completed = 1;
	} else if (!io->timed_out && !io->stopped) {
		rc = sbxs_host->set_error(err, SBX_E_UNREACHABLE, "%s",
					  perr.message[0]
					      ? perr.message
					      : "k8s: exec: the stream ended without a status");
	}
out:
	k8s_ws_close(ws);
	sbxs_buf_free(&path);
	sbxs_buf_free(&status);
	return rc;
}

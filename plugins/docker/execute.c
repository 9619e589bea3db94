/* Commands in a container: POST /containers/{id}/exec, then /exec/{id}/start, upgraded to a
 * raw stream: stdin goes out on it and the multiplexed stdout/stderr (8-byte frame headers)
 * comes back until the command is done and the engine closes the connection; the exit code
 * comes from /exec/{id}/json.
 *
 * Every user command runs under a fixed /bin/sh wrapper that gets the command as "$@" (never
 * spliced into a string), points stdin at /dev/null when none was given, and makes the
 * command lead its own process group. The exec carries SBX_EXEC_TOKEN=<random> in its
 * environment, inherited by everything it starts. On a timeout a second exec kills, inside
 * the container, the process group of every process carrying that marker and the processes
 * themselves, until none is left.
 *
 * stdin is written on the exec's own connection and ended with a half-close, as the docker
 * CLI does. It used to be put in a file through the archive endpoint, which Docker Engine
 * refuses for a container with a read-only root ("container rootfs is marked read-only")
 * even when the file's folder is a tmpfs. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "docker.h"

#define host sbx__dk_host

/* $1 "i" when stdin comes on the stream, else ""; $2 "s" for a shell string (then $3 is it) or
 * "a" for argv. */
static const char wrapper[] =
    "i=$1; m=$2; shift 2\n"
    "[ -n \"$i\" ] || exec </dev/null\n"
    "if [ \"$m\" = s ]; then\n"
    "  if command -v bash >/dev/null 2>&1; then set -- bash -c \"$1\"; else set -- /bin/sh -c "
    "\"$1\"; fi\n"
    "fi\n"
    "g=; read -r _ _ _ _ g _ </proc/$$/stat 2>/dev/null\n"
    "if [ \"$g\" = \"$$\" ]; then exec \"$@\"; fi\n"
    "exec setsid \"$@\"\n";

/* $1 the token. Kills every process (and its group) whose environment has the marker, and
 * repeats until a scan finds none, so a fork racing the scan is caught by the next one. */
static const char killer[] =
    "t=$1; n=0\n"
    "while [ $n -lt 200 ]; do\n"
    "  f=\n"
    "  for d in /proc/[0-9]*; do\n"
    "    p=${d#/proc/}\n"
    "    [ \"$p\" = \"$$\" ] && continue\n"
    "    case \"$(tr '\\0' '\\n' <\"$d/environ\" 2>/dev/null)\" in\n"
    "    *\"SBX_EXEC_TOKEN=$t\"*)\n"
    "      g=; read -r _ _ _ _ g _ <\"$d/stat\" 2>/dev/null\n"
    "      case $g in ''|0|1) ;; *) kill -KILL -- \"-$g\" 2>/dev/null;; esac\n"
    "      kill -KILL \"$p\" 2>/dev/null; f=1;;\n"
    "    esac\n"
    "  done\n"
    "  [ -z \"$f\" ] && exit 0\n"
    "  n=$((n+1)); sleep 0.02\n"
    "done\n"
    "exit 1\n";

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Demultiplexer of the exec stream: frames are [type, 0, 0, 0, size32be] + payload and may be
 * split anywhere across reads. */
typedef struct demux {
	unsigned char hdr[8];
	size_t hdr_len;
	size_t remaining;
	uint32_t stream;
	sbx_output_fn sink;
	void *ctx;
	int sink_rc;
	uint64_t bytes; /* received so far, headers included */
} demux;

/* Feeds len bytes of the stream; returns 0, or the sink's refusal. */
static int demux_feed(demux *d, const char *data, size_t len)
{
	size_t off = 0;
	d->bytes += len;
	while (off < len) {
		if (d->remaining == 0) {
			size_t take = 8 - d->hdr_len;
			if (take > len - off)
				take = len - off;
			memcpy(d->hdr + d->hdr_len, data + off, take);
			d->hdr_len += take;
			off += take;
			if (d->hdr_len < 8)
				break;
			d->hdr_len = 0;
			d->remaining = ((size_t)d->hdr[4] << 24) | ((size_t)d->hdr[5] << 16) |
				       ((size_t)d->hdr[6] << 8) | d->hdr[7];
			d->stream = d->hdr[0] == 1 ? SBX_STREAM_STDOUT : SBX_STREAM_STDERR;
			if (d->hdr[0] == 0) /* stdin echo: not output */
				d->stream = 0;
			continue;
		}
		size_t take = d->remaining < len - off ? d->remaining : len - off;
		if (d->stream && d->sink) {
			int rc = d->sink(d->ctx, d->stream, data + off, take);
			if (rc != 0)
				return d->sink_rc = rc;
		}
		d->remaining -= take;
		off += take;
	}
	return 0;
}

static int exec_create(dk_state *st, const char *id, json_t *body, char *exec_id, size_t cap,
		       sbx_error *err)
{
	char path[160];
	dk_resp resp = {0};
	json_t *j = NULL;
	snprintf(path, sizeof(path), "/containers/%s/exec", id);
	int rc = sbx__dk_request_json(st, "POST", path, body, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status != 201 && resp.status != 200) {
		rc = sbx__dk_http_error(&resp, "exec", id, err);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
	const char *eid = json_string_value(json_object_get(j, "Id"));
	if (!eid || strlen(eid) >= cap || strspn(eid, "0123456789abcdef") != strlen(eid)) {
		rc = host->set_error(err, SBX_E_BACKEND,
				     "docker: exec: engine answered without an "
				     "exec id");
		goto out;
	}
	memcpy(exec_id, eid, strlen(eid) + 1);
out:
	json_decref(j);
	sbx__dk_resp_free(&resp);
	return rc;
}

typedef struct exec_state {
	int running;
	int exit_code;
	long long pid; /* 0 until the engine has started the process */
} exec_state;

static int exec_inspect(dk_state *st, const char *exec_id, exec_state *es, sbx_error *err)
{
	char path[160];
	dk_resp resp = {0};
	json_t *j = NULL;
	snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
	int rc = sbx__dk_request(st, "GET", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status != 200) {
		rc = sbx__dk_http_error(&resp, "exec", exec_id, err);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
	json_t *code = json_object_get(j, "ExitCode");
	es->running = json_is_true(json_object_get(j, "Running"));
	es->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
	es->pid = (long long)json_integer_value(json_object_get(j, "Pid"));
out:
	json_decref(j);
	sbx__dk_resp_free(&resp);
	return rc;
}

static int kill_tree(dk_state *st, const char *id, const char *token, sbx_error *err);

/* What to kill when the deadline passes: the container and the exec's marker token. */
typedef struct kill_target {
	const char *container;
	const char *token;
	int rc;
	sbx_error err;
} kill_target;

/* stdin still to go out on the stream; the write side is shut once it all went. */
typedef struct feed {
	const char *data;
	size_t left;
	int open;
} feed;

/* Sends what the socket takes now. An engine that closed its side (the command ended without
 * reading everything) ends the feed: the rest is dropped, as a pipe would drop it. */
static void feed_send(int fd, feed *f)
{
	while (f->left > 0) {
		ssize_t n = send(fd, f->data, f->left < 65536 ? f->left : 65536, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			f->open = 0;
			return;
		}
		f->data += n;
		f->left -= (size_t)n;
	}
	shutdown(fd, SHUT_WR); /* the command reads end of file */
	f->open = 0;
}

/* Starts exec_id and streams its output into d while sending the in_len bytes at `in` as its
 * stdin and then shutting the write side (in NULL: the exec attached no stdin). Returns when the
 * engine closes the stream, when `deadline` (monotonic ms, 0 = none) passes (*expired = 1),
 * or when the exec is seen to have ended while something it left behind still holds the
 * stream open. */
static int exec_stream(dk_state *st, const char *exec_id, const void *in, size_t in_len, demux *d,
		       int64_t deadline, kill_target *kt, int *expired, sbx_error *err)
{
	static const char body[] = "{\"Detach\":false,\"Tty\":false}";
	char path[160], buf[65536];
	dk_conn c = {.fd = -1};
	dk_resp resp = {0};
	/* Without stdin the write side stays open, as the docker CLI leaves it. */
	feed f = {.data = in, .left = in_len, .open = in != NULL};
	int rc;
	*expired = 0;
	snprintf(path, sizeof(path), "/exec/%s/start", exec_id);
	if ((rc = sbx__dk_upgrade(st, path, body, &c, &resp, err)) != SBX_OK)
		goto out;
	if (resp.status != 101 && resp.status != 200) {
		rc = sbx__dk_http_error(&resp, "exec", exec_id, err);
		goto out;
	}
	if (demux_feed(d, c.early, c.early_len) != 0) {
		rc = d->sink_rc;
		goto out;
	}
	int64_t next_check = now_ms() + 500, ended_at = 0;
	uint64_t seen_bytes = d->bytes;
	for (;;) {
		if (f.open)
			feed_send(c.fd, &f);
		int64_t now = now_ms();
		if (deadline && now >= deadline) {
			if (*expired || !kt)
				goto out; /* the drain after the kill is over too */
			/* Kill first and keep reading, so output written before the kill arrives. */
			*expired = 1;
			f.open = 0;
			kt->rc = kill_tree(st, kt->container, kt->token, &kt->err);
			deadline =
			    now_ms() + 250; /* a short drain: the stream may outlive the kill */
			continue;
		}
		if (d->bytes != seen_bytes) {
			seen_bytes = d->bytes;
			ended_at = 0; /* still talking: not a stale holder */
		}
		if (ended_at && now - ended_at >= 2000)
			goto out; /* the command ended 2 s ago and nothing came since */
		if (now >= next_check && !*expired && !ended_at) {
			/* A background child may hold the stream after the command ended. A session
			 * the engine has not started yet also reads "not running", hence the pid. */
			exec_state es = {0};
			if (exec_inspect(st, exec_id, &es, NULL) == SBX_OK && !es.running && es.pid)
				ended_at = now_ms();
			next_check = now + 500;
		}
		int64_t wait = (ended_at ? ended_at + 2000 : next_check) - now;
		if (deadline && deadline - now < wait)
			wait = deadline - now;
		struct pollfd p = {.fd = c.fd, .events = POLLIN | (f.open ? POLLOUT : 0)};
		if (poll(&p, 1, (int)(wait > 0 ? wait : 1)) <= 0 ||
		    !(p.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			break; /* the engine closed the stream: the command is done */
		if (n < 0) {
			rc = host->set_error(err, SBX_E_UNREACHABLE,
					     "docker: exec: engine at %s: stream: %s",
					     st->host_desc, strerror(errno));
			goto out;
		}
		if (demux_feed(d, buf, (size_t)n) != 0) {
			rc = d->sink_rc;
			goto out;
		}
	}
out:
	sbx__dk_conn_close(&c);
	sbx__dk_resp_free(&resp);
	return rc;
}

/* After the stream ends the engine may need a moment to record the exit code. */
static int exec_wait(dk_state *st, const char *exec_id, exec_state *es, sbx_error *err)
{
	long pause_ms = 2;
	int64_t deadline = now_ms() + 5000;
	for (;;) {
		int rc = exec_inspect(st, exec_id, es, err);
		if (rc != SBX_OK || !es->running)
			return rc;
		if (now_ms() > deadline)
			return host->set_error(
			    err, SBX_E_BACKEND,
			    "docker: exec: engine still reports exec %.12s running "
			    "after its stream ended",
			    exec_id);
		sleep_ms(pause_ms);
		if (pause_ms < 100)
			pause_ms *= 2;
	}
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
	dk_capture *c = vctx;
	char *buf = stream == SBX_STREAM_STDOUT ? c->out : c->err;
	size_t *used = stream == SBX_STREAM_STDOUT ? &c->out_len : &c->err_len;
	size_t cap = stream == SBX_STREAM_STDOUT ? sizeof(c->out) : sizeof(c->err);
	size_t take = cap - 1 - *used < len ? cap - 1 - *used : len;
	memcpy(buf + *used, data, take);
	*used += take;
	buf[*used] = '\0';
	return 0;
}

int sbx__dk_run(dk_state *st, const char *id, const char *const *argv, dk_capture *cap,
		sbx_error *err)
{
	char exec_id[128];
	int expired = 0;
	exec_state es = {0};
	memset(cap, 0, sizeof(*cap));
	json_t *body = json_pack("{s:b,s:b,s:b,s:b,s:o}", "AttachStdin", 0, "AttachStdout", 1,
				 "AttachStderr", 1, "Tty", 0, "Cmd", argv_json(argv));
	if (!body)
		return host->set_error(err, SBX_E_NOMEM, "docker: exec: out of memory");
	int rc = exec_create(st, id, body, exec_id, sizeof(exec_id), err);
	json_decref(body);
	if (rc != SBX_OK)
		return rc;
	demux d = {.sink = capture_sink, .ctx = cap};
	rc = exec_stream(st, exec_id, NULL, 0, &d, 0, NULL, &expired, err);
	if (rc == SBX_OK)
		rc = exec_wait(st, exec_id, &es, err);
	cap->exit_code = es.exit_code;
	return rc;
}

/* Kills what the command with `token` left running inside the container. */
static int kill_tree(dk_state *st, const char *id, const char *token, sbx_error *err)
{
	const char *argv[] = {"/bin/sh", "-c", killer, "sbx-kill", token, NULL};
	dk_capture cap;
	int rc = sbx__dk_run(st, id, argv, &cap, err);
	if (rc == SBX_OK && cap.exit_code != 0)
		rc = host->set_error(
		    err, SBX_E_BACKEND,
		    "docker: exec: could not kill the timed-out command in container "
		    "%.12s (exit %d): %.200s",
		    id, cap.exit_code, cap.err);
	return rc;
}

/* The cwd must exist and be a directory (engines differ: Podman would run in a missing one). */
static int exec_cwd(dk_state *st, const char *id, const char *cwd, char *buf, size_t cap,
		    sbx_error *err)
{
	sbx_file_info fi;
	int rc = sbx__dk_resolve(st, id, cwd, 1, buf, cap, "exec", err);
	if (rc == SBX_OK)
		rc = sbx__dk_stat_raw(st, id, buf, &fi, NULL, 0, err);
	if (rc == SBX_E_NO_FILE)
		return host->set_error(err, SBX_E_NO_FILE,
				       "docker: exec: cwd %.300s does not exist", buf);
	if (rc == SBX_OK && fi.kind != SBX_FILE_DIR)
		return host->set_error(err, SBX_E_INVAL,
				       "docker: exec: cwd %.300s is not a directory", buf);
	return rc;
}

int sbx__dk_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		    sbx_error *err)
{
	dk_state *st = state;
	char token[33], marker[64], exec_id[128];
	char cwd[4096];
	json_t *cmd = NULL, *env = NULL, *body = NULL;
	int expired = 0, rc;
	int64_t start = now_ms();
	if ((rc = sbx__dk_id_check(id, "exec", err)) != SBX_OK)
		return rc;
	if (sbx__dk_token(token, sizeof(token), 16) != SBX_OK)
		return host->set_error(err, SBX_E_INVAL, "docker: exec: no token");
	snprintf(marker, sizeof(marker), "SBX_EXEC_TOKEN=%s", token);

	cmd = json_pack("[sssss]", "/bin/sh", "-c", wrapper, "sbx-exec", req->has_stdin ? "i" : "");
	if (!cmd)
		goto nomem;
	if (req->shell) {
		if (json_array_append_new(cmd, json_string("s")) ||
		    json_array_append_new(cmd, json_string(req->shell)))
			goto nomem;
	} else {
		if (json_array_append_new(cmd, json_string("a")))
			goto nomem;
		for (size_t i = 0; req->argv[i]; i++)
			if (json_array_append_new(cmd, json_string(req->argv[i])))
				goto nomem;
	}
	env = json_array();
	if (!env || json_array_append_new(env, json_string(marker)))
		goto nomem;
	for (uint32_t i = 0; i < req->n_env; i++) {
		char kv[8192];
		int n = snprintf(kv, sizeof(kv), "%s=%s", req->env[i].key, req->env[i].value);
		if (n < 0 || (size_t)n >= sizeof(kv)) {
			rc =
			    host->set_error(err, SBX_E_INVAL, "docker: exec: env %.64s is too long",
					    req->env[i].key);
			goto out;
		}
		if (json_array_append_new(env, json_string(kv)))
			goto nomem;
	}
	body = json_pack("{s:b,s:b,s:b,s:b,s:O,s:O}", "AttachStdin", req->has_stdin ? 1 : 0,
			 "AttachStdout", 1, "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env);
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

	if ((rc = exec_create(st, id, body, exec_id, sizeof(exec_id), err)) != SBX_OK)
		goto out;
	demux d = {.sink = req->output, .ctx = req->output_ctx};
	int64_t deadline = req->timeout_ms ? start + (int64_t)req->timeout_ms : 0;
	kill_target kt = {.container = id, .token = token};
	rc = exec_stream(st, exec_id,
			 req->has_stdin ? (req->stdin_data ? req->stdin_data : "") : NULL,
			 req->stdin_len, &d, deadline, &kt, &expired, err);
	if (expired) {
		rc = kt.rc;
		if (rc != SBX_OK)
			host->set_error(err, rc, "%s", kt.err.message);
		out->timed_out = 1;
		out->exit_code = -1;
		out->signal = SIGKILL;
		goto out;
	}
	if (rc != SBX_OK && d.sink_rc) {
		kill_tree(st, id, token, NULL);
		host->set_error(err, rc, "docker: exec: the output sink refused more output");
		goto out;
	}
	if (rc != SBX_OK)
		goto out;
	exec_state es = {0};
	if ((rc = exec_wait(st, exec_id, &es, err)) != SBX_OK)
		goto out;
	out->exit_code = es.exit_code;
out:
	json_decref(body);
	json_decref(cmd);
	json_decref(env);
	return rc;
nomem:
	rc = host->set_error(err, SBX_E_NOMEM, "docker: exec: out of memory");
	goto out;
}

/* Commands through envd's process.Process/Start: a Connect server stream over HTTP/1.1 whose
 * frames (flag byte, 4-byte big-endian length, JSON) are parsed as they arrive, stdout and
 * stderr pushed to the host as they are decoded. The command runs under a /bin/sh wrapper that
 * gives it its own process group and records that group, so a timeout kills the whole tree
 * (E2B's own SDK kills only the leader). A dropped stream is reattached by pid. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b.h"

#define host sbx__e2_host

/* Kills every process whose environment carries SBX_EXEC_TOKEN=$T (every descendant of the
 * command, including those that left the group with setsid or a double fork), and repeats
 * until none is left (a process that forked during a pass, or a killed one not yet gone),
 * for at most about a second. */
#define SWEEP                                                                            \
	"n=0\n"                                                                          \
	"while [ \"$n\" -lt 20 ]; do\n"                                                  \
	"  l=$(grep -lsF \"SBX_EXEC_TOKEN=$T\" /proc/[0-9]*/environ)\n"                  \
	"  [ -z \"$l\" ] && break\n"                                                     \
	"  for f in $l; do f=${f#/proc/}; kill -9 \"${f%/environ}\" 2>/dev/null; done\n" \
	"  n=$((n + 1)); sleep 0.05 2>/dev/null\n"                                       \
	"done\n"

/* argv: sbx-exec STDIN_FILE MODE(s|a) TOKEN CMD... ; $$ is the pid envd reports. The token
 * marks every descendant's environment, so the kill also finds those that left the group.
 * When the command exits, a short grace lets its pipes drain; then whatever is left of its
 * tree is killed, so a background child holding the output open cannot make the call outlive
 * the command (the local backend's rule). */
static const char wrapper[] =
    "p=/tmp/.sbx-pg-$$; i=$1; m=$2; T=$3; SBX_EXEC_TOKEN=$3; export SBX_EXEC_TOKEN; shift 3\n"
    "if [ \"$m\" = s ]; then\n"
    "  if command -v bash >/dev/null 2>&1; then set -- bash -c \"$1\"; else set -- sh -c \"$1\"; "
    "fi\n"
    "fi\n"
    "if command -v setsid >/dev/null 2>&1; then setsid \"$@\" <\"$i\" & else \"$@\" <\"$i\" & fi\n"
    "c=$!\n"
    "unset SBX_EXEC_TOKEN\n"
    "echo \"$c\" >\"$p\"\n"
    "wait \"$c\"\n"
    "s=$?\n"
    "sleep 0.1 2>/dev/null\n"
    "kill -9 \"-$c\" 2>/dev/null\n" SWEEP "rm -f \"$p\"\n"
    "[ \"$i\" = /dev/null ] || rm -f \"$i\"\n"
    "if [ \"$s\" -gt 128 ] && [ \"$s\" -lt 160 ]; then kill -\"$((s - 128))\" $$; fi\n"
    "exit \"$s\"\n";

/* argv: sbx-kill WRAPPER_PID TOKEN STDIN_FILE. The group first (one signal), then whatever
 * still carries the token. */
static const char killer[] =
    "T=$2; c=$(cat /tmp/.sbx-pg-$1 2>/dev/null)\n"
    "if [ -n \"$c\" ]; then kill -9 \"-$c\" 2>/dev/null || kill -9 \"$c\" 2>/dev/null; fi\n"
    "kill -9 \"-$1\" 2>/dev/null; kill -9 \"$1\" 2>/dev/null\n" SWEEP "rm -f /tmp/.sbx-pg-$1\n"
    "[ \"$3\" = /dev/null ] || rm -f \"$3\"\n"
    "exit 0\n";

typedef struct stream {
	const sbx_exec_request *req; /* NULL: discard output */
	unsigned char *buf;
	size_t len, cap;
	uint32_t pid;
	int started, ended, end_stream;
	int32_t exit_code, signal;
	int sink_rc; /* the host's refusal */
	int oom;
	unsigned char *dec; /* decoded output, reused across frames */
	size_t dec_cap;
	char error[256]; /* end-stream error */
	char error_code[32];
} stream;

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Decodes len bytes of base64 (padding and unknown bytes skipped); returns the length. */
static size_t b64decode(const char *in, size_t len, unsigned char *out)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		int v = b64val((unsigned char)in[i]);
		if (v < 0)
			continue;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	return o;
}

static const struct {
	const char *name;
	int num;
} signames[] = {
    {"hangup", 1},
    {"interrupt", 2},
    {"quit", 3},
    {"illegal instruction", 4},
    {"trace/breakpoint trap", 5},
    {"aborted", 6},
    {"bus error", 7},
    {"floating point exception", 8},
    {"killed", 9},
    {"user defined signal 1", 10},
    {"segmentation fault", 11},
    {"user defined signal 2", 12},
    {"broken pipe", 13},
    {"alarm clock", 14},
    {"terminated", 15},
};

static int signal_number(const char *status)
{
	const char *s = status + strlen("signal: ");
	for (size_t i = 0; i < sizeof(signames) / sizeof(signames[0]); i++)
		if (strcmp(s, signames[i].name) == 0)
			return signames[i].num;
	if (strncmp(s, "signal ", 7) == 0) {
		char *end = NULL;
		long v = strtol(s + 7, &end, 10);
		if (end && *end == '\0' && v > 0 && v < 128)
			return (int)v;
	}
	return 0;
}

/* Pushes base64 output (len bytes at b) to the host through the reused decode buffer. */
static int push(stream *s, uint32_t which, const char *b, size_t len)
{
	if (!s->req || s->sink_rc || len == 0)
		return 1;
	if (len / 4 * 3 + 3 > s->dec_cap) {
		size_t cap = len / 4 * 3 + 3;
		unsigned char *d = realloc(s->dec, cap);
		if (!d) {
			s->oom = 1;
			return 0;
		}
		s->dec = d;
		s->dec_cap = cap;
	}
	size_t n = b64decode(b, len, s->dec);
	int rc = n ? s->req->output(s->req->output_ctx, which, s->dec, n) : SBX_OK;
	if (rc != SBX_OK) {
		s->sink_rc = rc;
		return 0;
	}
	return 1;
}

/* The common frame {"event":{"data":{"stdout":"<base64>"}}} without a JSON parse: output
 * moves in many such frames, and a parse per frame would allocate their whole size again. */
static int fast_data(stream *s, const char *data, size_t len, int *handled)
{
	static const char pre[] = "{\"event\":{\"data\":{\"std";
	static const char post[] = "\"}}}";
	size_t pl = sizeof(pre) - 1, ql = sizeof(post) - 1;
	*handled = 0;
	if (len < pl + 9 + ql || memcmp(data, pre, pl) != 0)
		return 1;
	uint32_t which;
	if (memcmp(data + pl, "out\":\"", 6) == 0)
		which = SBX_STREAM_STDOUT;
	else if (memcmp(data + pl, "err\":\"", 6) == 0)
		which = SBX_STREAM_STDERR;
	else
		return 1;
	const char *b = data + pl + 6;
	size_t bl = len - pl - 6 - ql;
	if (memcmp(b + bl, post, ql) != 0 || memchr(b, '"', bl) || memchr(b, '\\', bl))
		return 1;
	*handled = 1;
	return push(s, which, b, bl);
}

static int frame(stream *s, unsigned flags, const char *data, size_t len)
{
	if (!(flags & 2)) {
		int handled;
		int ok = fast_data(s, data, len, &handled);
		if (handled)
			return ok;
	}
	json_t *j = json_loadb(data, len, 0, NULL);
	if (!j)
		return 0;
	if (flags & 2) {
		s->end_stream = 1;
		json_t *e = json_object_get(j, "error");
		if (e) {
			const char *c = json_string_value(json_object_get(e, "code"));
			const char *m = json_string_value(json_object_get(e, "message"));
			snprintf(s->error_code, sizeof(s->error_code), "%s", c ? c : "unknown");
			snprintf(s->error, sizeof(s->error), "%s", m ? m : "");
		}
		json_decref(j);
		return 1;
	}
	json_t *ev = json_object_get(j, "event");
	json_t *x;
	if ((x = json_object_get(ev, "start"))) {
		json_t *p = json_object_get(x, "pid");
		s->pid = json_is_integer(p)  ? (uint32_t)json_integer_value(p)
			 : json_is_string(p) ? (uint32_t)strtoul(json_string_value(p), NULL, 10)
					     : 0;
		s->started = 1;
	} else if ((x = json_object_get(ev, "data"))) {
		static const char *names[] = {"stdout", "stderr"};
		for (int k = 0; k < 2; k++) {
			const char *b = json_string_value(json_object_get(x, names[k]));
			if (b &&
			    !push(s, k ? SBX_STREAM_STDERR : SBX_STREAM_STDOUT, b, strlen(b))) {
				json_decref(j);
				return 0;
			}
		}
	} else if ((x = json_object_get(ev, "end"))) {
		json_t *ec = json_object_get(x, "exitCode");
		const char *st = json_string_value(json_object_get(x, "status"));
		s->ended = 1;
		s->exit_code = json_is_integer(ec) ? (int32_t)json_integer_value(ec)
			       : json_is_string(ec)
				   ? (int32_t)strtol(json_string_value(ec), NULL, 10)
				   : 0;
		if (st && strncmp(st, "signal: ", 8) == 0) {
			s->signal = signal_number(st);
			s->exit_code = -1;
		}
	}
	json_decref(j);
	return 1;
}

static size_t on_data(char *data, size_t size, size_t n, void *ctx)
{
	stream *s = ctx;
	size_t add = size * n;
	if (s->len + add > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + add)
			cap *= 2;
		unsigned char *b = realloc(s->buf, cap);
		if (!b) {
			s->oom = 1;
			return 0;
		}
		s->buf = b;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, add);
	s->len += add;
	size_t off = 0;
	while (s->len - off >= 5) {
		const unsigned char *f = s->buf + off;
		size_t fl =
		    ((size_t)f[1] << 24) | ((size_t)f[2] << 16) | ((size_t)f[3] << 8) | f[4];
		if (s->len - off - 5 < fl)
			break;
		if (!frame(s, f[0], (const char *)f + 5, fl))
			return 0;
		off += 5 + fl;
	}
	memmove(s->buf, s->buf + off, s->len - off);
	s->len -= off;
	return add;
}

/* One server-stream call (Start or Connect). Returns the curl result. */
static CURLcode stream_call(e2_state *st, const e2_target *t, const char *method,
			    const char *body_json, const char *user, long timeout_ms,
			    long connect_timeout_ms, stream *s, int *oom)
{
	char url[800], hdr[64];
	size_t bl = strlen(body_json);
	unsigned char *body = malloc(bl + 5);
	struct curl_slist *hd = sbx__e2_envd_headers(t, "application/connect+json", user), *n;
	CURL *c = curl_easy_init();
	CURLcode cc = CURLE_OUT_OF_MEMORY;
	*oom = 1;
	if (!body || !hd || !c)
		goto out;
	if (connect_timeout_ms > 0) {
		snprintf(hdr, sizeof(hdr), "Connect-Timeout-Ms: %ld", connect_timeout_ms);
		if (!(n = curl_slist_append(hd, hdr)))
			goto out;
		hd = n;
	}
	if (!(n = curl_slist_append(hd, "Keepalive-Ping-Interval: 50")))
		goto out;
	hd = n;
	body[0] = 0;
	body[1] = (unsigned char)(bl >> 24);
	body[2] = (unsigned char)(bl >> 16);
	body[3] = (unsigned char)(bl >> 8);
	body[4] = (unsigned char)bl;
	memcpy(body + 5, body_json, bl);
	if (snprintf(url, sizeof(url), "%s/%s", t->base, method) >= (int)sizeof(url))
		goto out;
	*oom = 0;
	sbx__e2_curl_common(c, st);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(bl + 5));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
	if (timeout_ms > 0)
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	cc = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (cc == CURLE_OK && status != 200 && !s->end_stream) {
		snprintf(s->error_code, sizeof(s->error_code), "%s",
			 status == 502 ? "unavailable" : "unknown");
		snprintf(s->error, sizeof(s->error), "HTTP %ld", status);
		s->end_stream = 1;
	}
out:
	curl_easy_cleanup(c);
	curl_slist_free_all(hd);
	free(body);
	return cc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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
	json_t *p = json_pack("{s:s,s:o,s:o}", "cmd", argv[0], "args", args, "envs", envs);
	args = envs = NULL;
	if (p && req && req->cwd && *req->cwd)
		json_object_set_new(p, "cwd", json_string(req->cwd));
	json_t *r = p ? json_pack("{s:o,s:b}", "process", p, "stdin", 0) : NULL;
	return r;
fail:
	json_decref(args);
	json_decref(envs);
	return NULL;
}

/* When the killer cannot run (envd refuses a Start), SendSignal SIGKILL to the wrapper is the
 * last resort: it stops the leader at least, as E2B's SDK does. */
static void kill_leader(e2_state *st, const char *id, uint32_t pid)
{
	sbx_error e = {0};
	char code[32] = "";
	json_t *resp = NULL;
	json_t *req = json_pack("{s:{s:I},s:s}", "process", "pid", (json_int_t)pid, "signal",
				"SIGNAL_SIGKILL");
	if (!req)
		return;
	if (sbx__e2_unary(st, id, "process.Process/SendSignal", req, &resp, code, "kill", &e) !=
	    SBX_OK)
		host->log(SBX_LOG_WARN, E2_ALIAS, "exec: cannot kill pid %u: %s", pid, e.message);
	json_decref(resp);
	json_decref(req);
}

static int kill_group(e2_state *st, const char *id, const e2_target *t, uint32_t pid,
		      const char *token, const char *in_path)
{
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
	const char *argv[] = {"/bin/sh", "-c", killer, "sbx-kill", pidbuf, token, in_path, NULL};
	json_t *r = start_request(argv, NULL);
	char *body = r ? json_dumps(r, JSON_COMPACT) : NULL;
	json_decref(r);
	if (!body)
		return SBX_E_NOMEM;
	stream s = {0};
	int oom;
	CURLcode cc =
	    stream_call(st, t, "process.Process/Start", body, "root", 30000, 30000, &s, &oom);
	if (cc != CURLE_OK || !s.ended)
		cc =
		    stream_call(st, t, "process.Process/Start", body, NULL, 30000, 30000, &s, &oom);
	free(body);
	free(s.buf);
	free(s.dec);
	if (cc != CURLE_OK || !s.ended) {
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

/* Runs argv (through the wrapper when wrap) and feeds output to req (may be NULL). */
static int run(e2_state *st, const char *id, const char *const *argv, const char *user,
	       const sbx_exec_request *req, uint64_t timeout_ms, const char *token,
	       const char *in_path, sbx_exec_outcome *out, sbx_error *err)
{
	e2_target t;
	stream s = {.req = req};
	char *body = NULL;
	int rc = sbx__e2_target(st, id, &t, err), oom = 0;
	if (rc != SBX_OK)
		return rc;
	json_t *r = start_request(argv, req);
	body = r ? json_dumps(r, JSON_COMPACT) : NULL;
	json_decref(r);
	if (!body)
		return host->set_error(err, SBX_E_NOMEM, "e2b: exec: out of memory");
	uint64_t deadline = timeout_ms ? now_ms() + timeout_ms : 0;
	CURLcode cc = stream_call(st, &t, "process.Process/Start", body, user, (long)timeout_ms,
				  timeout_ms ? (long)timeout_ms + 10000 : 0, &s, &oom);
	/* A dropped stream is reattached by pid; the output already received is kept. */
	for (int attempt = 0; attempt < 3 && cc != CURLE_OK && cc != CURLE_OPERATION_TIMEDOUT &&
			      !oom && !s.oom && !s.sink_rc && s.started && !s.ended;
	     attempt++) {
		char cb[64];
		long left = 0;
		if (deadline) {
			uint64_t now = now_ms();
			if (now >= deadline) {
				cc = CURLE_OPERATION_TIMEDOUT;
				break;
			}
			left = (long)(deadline - now);
		}
		host->log(SBX_LOG_WARN, E2_ALIAS,
			  "exec: stream of pid %u dropped (%s), reattaching", s.pid,
			  curl_easy_strerror(cc));
		snprintf(cb, sizeof(cb), "{\"process\":{\"pid\":%u}}", s.pid);
		s.len = 0;
		s.end_stream = 0;
		cc = stream_call(st, &t, "process.Process/Connect", cb, NULL, left, left, &s, &oom);
	}
	if (oom || s.oom) {
		rc = host->set_error(err, SBX_E_NOMEM, "e2b: exec: out of memory");
		goto kill;
	}
	if (s.sink_rc) {
		rc = host->set_error(err, s.sink_rc, "e2b: exec: the host refused more output");
		goto kill;
	}
	if (cc == CURLE_OPERATION_TIMEDOUT && timeout_ms) {
		if (out)
			out->timed_out = 1;
		rc = SBX_OK;
		goto kill;
	}
	if (cc != CURLE_OK) {
		rc = host->set_error(err, SBX_E_UNREACHABLE, "e2b: exec: envd stream: %s",
				     curl_easy_strerror(cc));
		goto kill;
	}
	if (s.error_code[0] && !s.ended) {
		rc = host->set_error(err, map_rpc_error(s.error_code), "e2b: exec: envd: %s: %s",
				     s.error_code, s.error);
		if (rc == SBX_E_NOT_FOUND)
			sbx__e2_forget(st, id);
		/* envd is not there for a target cached before another process paused the
		 * sandbox: the API tells paused from gone (the host resumes on SBX_E_PAUSED). */
		sbx_error why = {0};
		if (rc == SBX_E_NOT_FOUND && !s.started &&
		    sbx__e2_target(st, id, &t, &why) == SBX_E_PAUSED)
			rc = host->set_error(err, SBX_E_PAUSED, "%s", why.message);
		goto out;
	}
	if (!s.ended) {
		rc = host->set_error(err, SBX_E_BACKEND,
				     "e2b: exec: envd stream ended without an end event");
		goto kill;
	}
	if (out) {
		out->exit_code = s.exit_code;
		out->signal = s.signal;
	}
	goto out;
kill:
	if (s.started && !s.ended && token)
		kill_group(st, id, &t, s.pid, token, in_path);
out:
	free(s.buf);
	free(s.dec);
	free(body);
	return rc;
}

int sbx__e2_run_simple(e2_state *st, const char *id, const char *const *argv, int *exit_code,
		       sbx_error *err)
{
	sbx_exec_outcome o = {0};
	int rc = run(st, id, argv, NULL, NULL, 60000, NULL, NULL, &o, err);
	if (rc == SBX_OK && o.timed_out)
		rc = host->set_error(err, SBX_E_TIMEOUT, "e2b: helper '%s' timed out", argv[0]);
	*exit_code = o.exit_code;
	return rc;
}

int sbx__e2_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		    sbx_error *err)
{
	e2_state *st = state;
	char in_path[80] = "/dev/null", token[20];
	unsigned char r[8];
	const char **argv = NULL;
	int rc = SBX_OK;
	size_t n = 0;
	if (req->argv)
		for (n = 0; req->argv[n]; n++)
			;
	if (!req->shell && n == 0)
		return host->set_error(err, SBX_E_INVAL, "e2b: exec: empty command");
	FILE *f = fopen("/dev/urandom", "rb");
	size_t got = f ? fread(r, 1, sizeof(r), f) : 0;
	if (f)
		fclose(f);
	if (got != sizeof(r))
		return host->set_error(err, SBX_E_IO, "e2b: exec: cannot read /dev/urandom");
	snprintf(token, sizeof(token), "%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
		 r[4], r[5], r[6], r[7]);
	argv = calloc(n + 9, sizeof(*argv));
	if (!argv)
		return host->set_error(err, SBX_E_NOMEM, "e2b: exec: out of memory");
	if (req->has_stdin) {
		snprintf(in_path, sizeof(in_path), "/tmp/.sbx-stdin-%s", token);
		rc = sbx__e2_write_file(st, id, in_path, req->stdin_data ? req->stdin_data : "",
					req->stdin_len, 0, err);
		if (rc != SBX_OK)
			goto out;
	}
	size_t k = 0;
	argv[k++] = "/bin/sh";
	argv[k++] = "-c";
	argv[k++] = wrapper;
	argv[k++] = "sbx-exec";
	argv[k++] = in_path;
	argv[k++] = req->shell ? "s" : "a";
	argv[k++] = token;
	if (req->shell)
		argv[k++] = req->shell;
	for (size_t i = 0; !req->shell && i < n; i++)
		argv[k++] = req->argv[i];
	argv[k] = NULL;
	rc = run(st, id, argv, req->user, req, req->timeout_ms, token, in_path, out, err);
out:
	free(argv);
	return rc;
}

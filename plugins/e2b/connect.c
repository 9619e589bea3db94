/* The process stream parser (see connect.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <sbx/support/base64.h>

#include "connect.h"

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

int e2b_signal_number(const char *status)
{
	if (!status || strncmp(status, "signal: ", 8) != 0)
		return 0;
	const char *s = status + 8;
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

/* Decodes base64 output and pushes it to the host. */
static int push(e2b_process *p, uint32_t which, const char *b, size_t len)
{
	if (!p->output || p->sink_rc || len == 0)
		return 1;
	size_t n = 0;
	sbxs_buf_clear(&p->dec);
	if (sbxs_buf_reserve(&p->dec, len / 4 * 3 + 3) != SBX_OK) {
		p->oom = 1;
		return 0;
	}
	if (sbxs_base64_decode(b, len, p->dec.data, p->dec.cap, &n) != SBX_OK) {
		p->bad = 1;
		return 0;
	}
	int rc = n ? p->output(p->output_ctx, which, p->dec.data, n) : SBX_OK;
	if (rc != SBX_OK) {
		p->sink_rc = rc;
		return 0;
	}
	return 1;
}

/* The common frame {"event":{"data":{"stdout":"<base64>"}}} without a JSON parse: output
 * moves in many such frames, and a parse per frame would allocate their whole size again. */
static int fast_data(e2b_process *p, const char *data, size_t len, int *handled)
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
	return push(p, which, b, bl);
}

static int32_t integer(json_t *v)
{
	return json_is_integer(v)  ? (int32_t)json_integer_value(v)
	       : json_is_string(v) ? (int32_t)strtol(json_string_value(v), NULL, 10)
				   : 0;
}

static void end_stream(e2b_process *p, json_t *j)
{
	json_t *e = json_object_get(j, "error");
	p->end_stream = 1;
	if (e) {
		const char *c = json_string_value(json_object_get(e, "code"));
		const char *m = json_string_value(json_object_get(e, "message"));
		snprintf(p->error_code, sizeof(p->error_code), "%s", c ? c : "unknown");
		snprintf(p->error, sizeof(p->error), "%s", m ? m : "");
	}
}

static int event(e2b_process *p, json_t *ev)
{
	json_t *x;
	if ((x = json_object_get(ev, "start"))) {
		p->pid = (uint32_t)integer(json_object_get(x, "pid"));
		p->started = 1;
	} else if ((x = json_object_get(ev, "data"))) {
		static const char *const names[] = {"stdout", "stderr"};
		for (int k = 0; k < 2; k++) {
			const char *b = json_string_value(json_object_get(x, names[k]));
			if (b && !push(p, k ? SBX_STREAM_STDERR : SBX_STREAM_STDOUT, b, strlen(b)))
				return 0;
		}
	} else if ((x = json_object_get(ev, "end"))) {
		const char *st = json_string_value(json_object_get(x, "status"));
		p->ended = 1;
		p->exit_code = integer(json_object_get(x, "exitCode"));
		if ((p->signal = e2b_signal_number(st)) != 0)
			p->exit_code = -1;
	}
	return 1;
}

static int frame(e2b_process *p, unsigned flags, const char *data, size_t len)
{
	if (!(flags & 2)) {
		int handled, ok = fast_data(p, data, len, &handled);
		if (handled)
			return ok;
	}
	json_t *j = json_loadb(data, len, 0, NULL);
	if (!j) {
		p->bad = 1;
		return 0;
	}
	int ok = 1;
	if (flags & 2)
		end_stream(p, j);
	else
		ok = event(p, json_object_get(j, "event"));
	json_decref(j);
	return ok;
}

int e2b_process_feed(e2b_process *p, const void *data, size_t len)
{
	if (sbxs_buf_add(&p->in, data, len) != SBX_OK) {
		p->oom = 1;
		return 0;
	}
	const unsigned char *b = (const unsigned char *)p->in.data;
	size_t off = 0, have = p->in.len;
	int ok = 1;
	while (ok && have - off >= 5) {
		const unsigned char *f = b + off;
		size_t fl =
		    ((size_t)f[1] << 24) | ((size_t)f[2] << 16) | ((size_t)f[3] << 8) | f[4];
		if (fl > E2B_MAX_FRAME) {
			/* envd is the sandbox's: its word is not a reason to buffer 4 GiB. */
			p->bad = 1;
			ok = 0;
			break;
		}
		if (have - off - 5 < fl)
			break;
		ok = frame(p, f[0], (const char *)f + 5, fl);
		off += 5 + fl;
	}
	sbxs_buf_drop(&p->in, off);
	return ok;
}

void e2b_process_reset(e2b_process *p)
{
	sbxs_buf_clear(&p->in);
	p->end_stream = 0;
}

void e2b_process_free(e2b_process *p)
{
	sbxs_buf_free(&p->in);
	sbxs_buf_free(&p->dec);
}

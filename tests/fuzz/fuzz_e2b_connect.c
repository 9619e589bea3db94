/* Fuzz target: envd's process stream (plugins/e2b/connect.c): Connect frames with JSON events
 * and base64 output. envd runs inside the sandbox, where a command with root can put its own
 * server in its place, so every byte is the sandbox's. Fed whole and in pieces, the parse
 * must reach the same events and hand over the same output. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/support/host.h>

#include "connect.h"
#include "plugin_host.h"
#include "split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink {
	sbxs_buf out, err;
	int bad_stream;
} sink;

static int collect(void *ctx, uint32_t stream, const void *p, size_t len)
{
	sink *s = ctx;
	if (stream == SBX_STREAM_STDOUT)
		return sbxs_buf_add(&s->out, p, len);
	if (stream == SBX_STREAM_STDERR)
		return sbxs_buf_add(&s->err, p, len);
	s->bad_stream = 1;
	return SBX_OK;
}

static int same_buf(const sbxs_buf *a, const sbxs_buf *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static int same_events(const e2b_process *a, const e2b_process *b)
{
	return a->pid == b->pid && a->started == b->started && a->ended == b->ended &&
	       a->end_stream == b->end_stream && a->exit_code == b->exit_code &&
	       a->signal == b->signal && strcmp(a->error, b->error) == 0 &&
	       strcmp(a->error_code, b->error_code) == 0 && a->sink_rc == b->sink_rc &&
	       a->oom == b->oom && a->bad == b->bad;
}

/* A frame announcing more than E2B_MAX_FRAME is refused at its header, before any of it is
 * buffered. */
static void check_frame_cap(void)
{
	static const unsigned char huge[] = {0, 0xff, 0xff, 0xff, 0xff, '{'};
	static const unsigned char at_cap[] = {0, 0x04, 0, 0, 0, '{'};
	e2b_process p = {0};
	if (e2b_process_feed(&p, huge, sizeof(huge)) != 0 || !p.bad)
		abort();
	e2b_process_free(&p);
	e2b_process q = {0};
	if (e2b_process_feed(&q, at_cap, sizeof(at_cap)) != 1 || q.bad)
		abort(); /* 64 MiB exactly: waits for the rest */
	e2b_process_free(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int checked;
	fuzz_plugin_host();
	if (!checked++)
		check_frame_cap();
	sink s1 = {0}, s2 = {0};
	e2b_process whole = {.output = collect, .output_ctx = &s1};
	e2b_process parts = {.output = collect, .output_ctx = &s2};
	int ok_whole = e2b_process_feed(&whole, data, size);
	fuzz_split sp;
	fuzz_split_init(&sp, data, size);
	int ok_parts = 1;
	for (size_t off = 0; off < size && ok_parts;) {
		size_t n = fuzz_split_next(&sp, size - off);
		ok_parts = e2b_process_feed(&parts, data + off, n);
		off += n;
	}
	if (ok_whole != ok_parts || !same_events(&whole, &parts) || !same_buf(&s1.out, &s2.out) ||
	    !same_buf(&s1.err, &s2.err) || s1.bad_stream || s2.bad_stream)
		abort();
	if (whole.signal && whole.exit_code != -1)
		abort(); /* a signal death reads as exit code -1 */
	if (s1.out.len + s1.err.len > size)
		abort(); /* base64 decodes to less than it takes */
	if (!memchr(whole.error, '\0', sizeof(whole.error)) ||
	    !memchr(whole.error_code, '\0', sizeof(whole.error_code)))
		abort();
	e2b_process_free(&whole);
	e2b_process_free(&parts);
	sbxs_buf_free(&s1.out);
	sbxs_buf_free(&s1.err);
	sbxs_buf_free(&s2.out);
	sbxs_buf_free(&s2.err);
	return 0;
}

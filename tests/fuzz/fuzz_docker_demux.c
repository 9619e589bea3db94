/* Fuzz target: the Engine's multiplexed exec stream (plugins/docker/demux.c). The bytes come
 * from a command in the container, through the engine. Fed whole and in pieces, the parse
 * must hand over the same bytes of each stream in the same order, and never more bytes than
 * it was given. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/types.h>

#include "demux.h"
#include "split.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the parse handed over: runs of one stream, adjacent pieces of a stream merged. */
typedef struct seen {
	unsigned char *bytes;
	uint32_t *stream;
	size_t n, cap;
	int bad_stream;
} seen;

static int collect(void *ctx, uint32_t stream, const void *p, size_t len)
{
	seen *s = ctx;
	if (stream != SBX_STREAM_STDOUT && stream != SBX_STREAM_STDERR)
		s->bad_stream = 1;
	if (s->n + len > s->cap)
		return 1; /* more out than in: caught by the caller */
	memcpy(s->bytes + s->n, p, len);
	for (size_t i = 0; i < len; i++)
		s->stream[s->n + i] = stream;
	s->n += len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	seen whole = {.bytes = malloc(size + 1), .stream = malloc((size + 1) * sizeof(uint32_t))};
	seen parts = {.bytes = malloc(size + 1), .stream = malloc((size + 1) * sizeof(uint32_t))};
	whole.cap = parts.cap = size;
	if (whole.bytes && whole.stream && parts.bytes && parts.stream) {
		docker_demux d = {0};
		int rc_whole = docker_demux_feed(&d, data, size, collect, &whole);
		docker_demux e = {0};
		fuzz_split sp;
		fuzz_split_init(&sp, data, size);
		int rc_parts = 0;
		for (size_t off = 0; off < size && rc_parts == 0;) {
			size_t n = fuzz_split_next(&sp, size - off);
			rc_parts = docker_demux_feed(&e, data + off, n, collect, &parts);
			off += n;
		}
		if (rc_whole != 0 || rc_parts != 0 || whole.bad_stream || parts.bad_stream)
			abort(); /* more payload than input, or a stream that is no output */
		if (whole.n != parts.n || memcmp(whole.bytes, parts.bytes, whole.n) != 0 ||
		    memcmp(whole.stream, parts.stream, whole.n * sizeof(uint32_t)) != 0)
			abort(); /* the result depends on where reads end */
		if (d.remaining != e.remaining || d.hdr_len != e.hdr_len)
			abort();
	}
	free(whole.bytes);
	free(whole.stream);
	free(parts.bytes);
	free(parts.stream);
	return 0;
}

/* WebSocket frame parsing: the k8s plugin's own RFC 6455 parser (plugins/k8s/wsframe.c)
 * against libwslay's event API, on the same stream of server frames fed in 64 KiB reads as
 * the exec connection receives them, interleaved rounds in one run. Prints MB/s of each and
 * the ratio (the figures behind docs/design.md's choice to keep our own parser).
 *
 * `bench_wsframe MIB` parses MIB MiB per round (default 256). Built only where libwslay's
 * CMake package is installed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wslay/wslay.h>

#include <sbx/support/host.h>

#include "wsframe.h"

#define READ_SIZE (64u << 10)

static void *h_alloc(size_t n)
{
	return malloc(n);
}

static void *h_realloc(void *p, size_t n)
{
	return realloc(p, n);
}

static void h_free(void *p)
{
	free(p);
}

static const sbx_host_api host = {.alloc = h_alloc, .realloc = h_realloc, .free = h_free};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Unmasked binary frames as an apiserver sends exec output: a channel byte and a payload
 * of 64 B to 32 KiB. */
static unsigned char *make_stream(size_t want, size_t *len, size_t *messages)
{
	static const size_t sizes[] = {4096, 32768, 64, 16384, 1024};
	unsigned char *s = malloc(want + 65536);
	size_t o = 0, k = 0;
	*messages = 0;
	while (s && o < want) {
		size_t n = sizes[k++ % 5] + 1;
		s[o++] = 0x82;
		if (n < 126) {
			s[o++] = (unsigned char)n;
		} else {
			s[o++] = 126;
			s[o++] = (unsigned char)(n >> 8);
			s[o++] = (unsigned char)n;
		}
		s[o] = 1; /* stdout */
		memset(s + o + 1, 'x', n - 1);
		o += n;
		(*messages)++;
	}
	*len = o;
	return s;
}

static size_t ours(const unsigned char *s, size_t len)
{
	k8s_wsframe p = {0};
	sbxs_buf in = {0};
	size_t off = 0, got = 0, in_off = 0;
	while (off < len) {
		size_t n = len - off < READ_SIZE ? len - off : READ_SIZE;
		sbxs_buf_drop(&in, in_off);
		in_off = 0;
		if (sbxs_buf_add(&in, s + off, n) != SBX_OK)
			exit(1);
		off += n;
		for (;;) {
			size_t used = 0;
			int r = k8s_wsframe_parse(&p, (const unsigned char *)in.data + in_off,
						  in.len - in_off, &used);
			in_off += used;
			if (r == K8S_WS_MESSAGE)
				got += p.msg.len;
			else if (r == K8S_WS_MORE && !used)
				break;
			else if (r == K8S_WS_ERROR)
				exit(1);
		}
	}
	sbxs_buf_free(&in);
	k8s_wsframe_free(&p);
	return got;
}

typedef struct feed {
	const unsigned char *s;
	size_t len, off;
	size_t got;
} feed;

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
	(void)flags;
	feed *f = ud;
	if (f->off == f->len) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	size_t n = f->len - f->off;
	if (n > len)
		n = len;
	if (n > READ_SIZE)
		n = READ_SIZE;
	memcpy(buf, f->s + f->off, n);
	f->off += n;
	return (ssize_t)n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
		       void *ud)
{
	(void)ctx;
	(void)data;
	(void)flags;
	(void)ud;
	return (ssize_t)len;
}

static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *ud)
{
	(void)ctx;
	(void)ud;
	memset(buf, 0x5a, len);
	return 0;
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
		   void *ud)
{
	(void)ctx;
	((feed *)ud)->got += arg->msg_length;
}

static size_t theirs(const unsigned char *s, size_t len)
{
	feed f = {.s = s, .len = len};
	struct wslay_event_callbacks cb = {.recv_callback = recv_cb,
					   .send_callback = send_cb,
					   .genmask_callback = genmask_cb,
					   .on_msg_recv_callback = on_msg};
	wslay_event_context_ptr ctx;
	if (wslay_event_context_client_init(&ctx, &cb, &f) != 0)
		exit(1);
	wslay_event_config_set_max_recv_msg_length(ctx, 64u << 20);
	while (f.off < f.len)
		if (wslay_event_recv(ctx) != 0)
			exit(1);
	wslay_event_context_free(ctx);
	return f.got;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256, len, messages;
	sbxs_host_set(&host);
	unsigned char *s = make_stream(mib << 20, &len, &messages);
	if (!s)
		return 1;
	double best_ours = 1e9, best_theirs = 1e9;
	for (int round = 0; round < 3; round++) {
		double t0 = now();
		size_t a = ours(s, len);
		double t1 = now();
		size_t b = theirs(s, len);
		double t2 = now();
		if (a != b) {
			fprintf(stderr, "payload bytes differ: %zu vs %zu\n", a, b);
			return 1;
		}
		best_ours = t1 - t0 < best_ours ? t1 - t0 : best_ours;
		best_theirs = t2 - t1 < best_theirs ? t2 - t1 : best_theirs;
	}
	double mb = (double)len / 1e6;
	printf("%zu messages, %.0f MB, 64 KiB reads, best of 3\n", messages, mb);
	printf("k8s wsframe.c  %8.0f MB/s\n", mb / best_ours);
	printf("libwslay       %8.0f MB/s\n", mb / best_theirs);
	printf("ratio (wsframe.c / wslay) %.2f\n", best_theirs / best_ours);
	free(s);
	return 0;
}

/* Fuzz target: WebSocket frames from the API server (plugins/k8s/wsframe.c), which carry a
 * pod exec's output: fragmented messages reassembled, control frames between fragments. The
 * bytes are parsed from a growing buffer as ws.c does, once whole and once arriving in
 * pieces; both must give the same messages, control frames and errors, and no message may
 * exceed K8S_WS_MAX_MSG. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/support/host.h>

#include "plugin_host.h"
#include "split.h"
#include "wsframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One parse's record: for each result its code, opcode and payload. */
typedef struct record {
	sbxs_buf log;
	int error;
} record;

static void note(record *r, int code, int op, const sbxs_buf *payload)
{
	unsigned char head[2] = {(unsigned char)(code + 1), (unsigned char)op};
	uint64_t len = payload ? payload->len : 0;
	sbxs_buf_add(&r->log, head, sizeof(head));
	sbxs_buf_add(&r->log, &len, sizeof(len));
	if (payload && payload->len)
		sbxs_buf_add(&r->log, payload->data, payload->len);
}

/* Parses what buf holds from *off on, as ws.c's next_message does; 0 when it stopped on an
 * error. */
static int drain(k8s_wsframe *p, const unsigned char *buf, size_t len, size_t *off, record *r)
{
	for (;;) {
		size_t used = 0;
		int code = k8s_wsframe_parse(p, buf + *off, len - *off, &used);
		if (used > len - *off)
			abort();
		*off += used;
		switch (code) {
		case K8S_WS_MESSAGE:
			if (p->msg.len > K8S_WS_MAX_MSG || (p->op != 1 && p->op != 2))
				abort();
			note(r, code, p->op, &p->msg);
			break;
		case K8S_WS_CLOSE:
		case K8S_WS_PING:
			if (p->ctl.len > 125)
				abort(); /* control payloads are at most 125 bytes */
			note(r, code, 0, &p->ctl);
			break;
		case K8S_WS_PONG:
			note(r, code, 0, NULL);
			break;
		case K8S_WS_MORE:
			if (used)
				break;
			return 1;
		default:
			note(r, code, 0, NULL);
			r->error = 1;
			return 0;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_plugin_host();
	record whole = {0}, parts = {0};
	k8s_wsframe a = {0}, b = {0};
	size_t off = 0;
	drain(&a, data, size, &off, &whole);
	sbxs_buf in = {0};
	size_t used = 0;
	fuzz_split sp;
	fuzz_split_init(&sp, data, size);
	for (size_t at = 0; at < size && !parts.error;) {
		size_t n = fuzz_split_next(&sp, size - at);
		if (sbxs_buf_add(&in, data + at, n) != SBX_OK)
			abort();
		at += n;
		drain(&b, (const unsigned char *)in.data, in.len, &used, &parts);
	}
	if (whole.log.len != parts.log.len ||
	    (whole.log.len && memcmp(whole.log.data, parts.log.data, whole.log.len) != 0))
		abort();
	sbxs_buf_free(&in);
	sbxs_buf_free(&whole.log);
	sbxs_buf_free(&parts.log);
	k8s_wsframe_free(&a);
	k8s_wsframe_free(&b);
	return 0;
}

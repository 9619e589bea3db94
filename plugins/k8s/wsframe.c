/* RFC 6455 framing (see wsframe.h). */
#include <stdint.h>
#include <string.h>

#include <sbx/types.h>

#include "wsframe.h"

int k8s_wsframe_write(sbxs_buf *out, int opcode, const void *data, size_t len,
		      const unsigned char mask[4])
{
	unsigned char hdr[14];
	size_t h = 0;
	hdr[h++] = (unsigned char)(0x80 | (opcode & 0x0f));
	if (len < 126) {
		hdr[h++] = (unsigned char)(0x80 | len);
	} else if (len < 65536) {
		hdr[h++] = 0x80 | 126;
		hdr[h++] = (unsigned char)(len >> 8);
		hdr[h++] = (unsigned char)len;
	} else {
		hdr[h++] = 0x80 | 127;
		for (int i = 7; i >= 0; i--)
			hdr[h++] = (unsigned char)((uint64_t)len >> (8 * i));
	}
	memcpy(hdr + h, mask, 4);
	h += 4;
	size_t start = out->len;
	if (sbxs_buf_reserve(out, h + len) != SBX_OK || sbxs_buf_add(out, hdr, h) != SBX_OK ||
	    sbxs_buf_add(out, data, len) != SBX_OK)
		return SBX_E_NOMEM;
	unsigned char *p = (unsigned char *)out->data + start + h;
	for (size_t i = 0; i < len; i++)
		p[i] ^= mask[i & 3];
	return SBX_OK;
}

/* The frame header at b: its payload's offset and length. 0 when more bytes are needed. */
static int header(const unsigned char *b, size_t avail, size_t *off, uint64_t *len)
{
	if (avail < 2)
		return 0;
	*len = b[1] & 0x7f;
	*off = 2;
	if (*len == 126) {
		if (avail < 4)
			return 0;
		*len = (uint64_t)b[2] << 8 | b[3];
		*off = 4;
	} else if (*len == 127) {
		if (avail < 10)
			return 0;
		*len = 0;
		for (int i = 0; i < 8; i++)
			*len = *len << 8 | b[2 + i];
		*off = 10;
	}
	return 1;
}

static int control(k8s_wsframe *p, int opcode, int fin, const unsigned char *payload, size_t len)
{
	if (!fin || len > 125)
		return K8S_WS_ERROR;
	if (opcode != 8 && opcode != 9 && opcode != 10)
		return K8S_WS_ERROR;
	sbxs_buf_clear(&p->ctl);
	if (sbxs_buf_add(&p->ctl, payload, len) != SBX_OK)
		return K8S_WS_ERROR;
	return opcode == 8 ? K8S_WS_CLOSE : opcode == 9 ? K8S_WS_PING : K8S_WS_PONG;
}

int k8s_wsframe_parse(k8s_wsframe *p, const unsigned char *b, size_t avail, size_t *used)
{
	size_t off;
	uint64_t len;
	*used = 0;
	if (avail >= 2 && ((b[0] & 0x70) || (b[1] & 0x80)))
		return K8S_WS_ERROR; /* RSV bits, or a masked server frame */
	if (!header(b, avail, &off, &len))
		return K8S_WS_MORE;
	if (len > K8S_WS_MAX_MSG)
		return K8S_WS_ERROR;
	if (avail - off < len)
		return K8S_WS_MORE;
	int fin = b[0] & 0x80, opcode = b[0] & 0x0f;
	const unsigned char *payload = b + off;
	*used = off + (size_t)len;
	if (opcode >= 8)
		return control(p, opcode, fin, payload, (size_t)len);
	if (opcode > 2)
		return K8S_WS_ERROR; /* 3-7 are reserved (RFC 6455 5.2): fail the connection */
	if (opcode == 0) {
		if (!p->msg_op)
			return K8S_WS_ERROR; /* a continuation of nothing */
	} else {
		if (p->msg_op)
			return K8S_WS_ERROR; /* a new message inside another */
		p->msg_op = opcode;
		sbxs_buf_clear(&p->msg);
	}
	if (p->msg.len + len > K8S_WS_MAX_MSG ||
	    sbxs_buf_add(&p->msg, payload, (size_t)len) != SBX_OK)
		return K8S_WS_ERROR;
	if (!fin)
		return K8S_WS_MORE;
	p->op = p->msg_op;
	p->msg_op = 0;
	return K8S_WS_MESSAGE;
}

void k8s_wsframe_free(k8s_wsframe *p)
{
	sbxs_buf_free(&p->msg);
	sbxs_buf_free(&p->ctl);
}

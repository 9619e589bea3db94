/* RFC 6455 framing for a WebSocket client: frames parsed out of received bytes (server
 * frames unmasked, no RSV bits, fragmented messages reassembled, control frames handed back)
 * and frames written for sending (masked with the key given). Plain functions over buffers
 * (no I/O), so a fuzz target can link this file with sbx-support alone. */
#ifndef SBX_K8S_WSFRAME_H
#define SBX_K8S_WSFRAME_H

#include <stddef.h>

#include <sbx/support/buf.h>

#define K8S_WS_MAX_MSG (64u << 20) /* the longest message accepted */

/* What k8s_wsframe_parse found. */
#define K8S_WS_MORE    0  /* the bytes end inside a frame: feed more */
#define K8S_WS_MESSAGE 1  /* a whole data message (text 1, binary 2) is in msg */
#define K8S_WS_CLOSE   2  /* a close frame; its payload is in ctl */
#define K8S_WS_PING    3  /* a ping; its payload is in ctl (answer with a pong) */
#define K8S_WS_PONG    4  /* a pong (nothing to do) */
#define K8S_WS_ERROR   -1 /* a protocol error: the connection cannot go on */

typedef struct k8s_wsframe {
	sbxs_buf msg; /* the message being reassembled */
	sbxs_buf ctl; /* the last control frame's payload (they may come between fragments) */
	int msg_op;   /* opcode of a message in progress, 0 if none */
	int op;       /* opcode of what the last K8S_WS_MESSAGE returned */
} k8s_wsframe;

/* Parses one frame from buf[len]; *used gets the bytes it took (0 with K8S_WS_MORE). Data
 * frames that do not end a message return K8S_WS_MORE with their bytes taken. A zeroed
 * k8s_wsframe starts a connection; K8S_WS_ERROR also for out of memory. */
int k8s_wsframe_parse(k8s_wsframe *p, const unsigned char *buf, size_t len, size_t *used);

/* Appends a final frame of opcode with data, masked with mask, to out. SBX_OK or
 * SBX_E_NOMEM. */
int k8s_wsframe_write(sbxs_buf *out, int opcode, const void *data, size_t len,
		      const unsigned char mask[4]);

void k8s_wsframe_free(k8s_wsframe *p);

#endif

/* A WebSocket client connection over a libcurl CONNECT_ONLY connection: libcurl does DNS,
 * TCP, TLS (with the same CA, client certificate and proxy settings as REST), this file the
 * HTTP/1.1 upgrade and the I/O; wsframe.c the framing. */
#ifndef SBX_K8S_WS_H
#define SBX_K8S_WS_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

#include "state.h"

typedef struct k8s_ws k8s_ws;

/* Connects to path and upgrades, offering `protocols` (comma-separated, in order). A non-101
 * answer is SBX_E_BACKEND (SBX_E_NOT_FOUND for 404) with the server's message. *chosen is
 * the subprotocol the server picked (owned by ws). */
int k8s_ws_open(k8s_state *st, const char *path, const char *protocols, k8s_ws **out,
		const char **chosen, sbx_error *err);
void k8s_ws_close(k8s_ws *ws);

/* Queues a message (binary opcode 2 for data; 8 close; 9 ping). SBX_OK, SBX_E_NOMEM or
 * SBX_E_IO (no randomness for the mask). */
int k8s_ws_queue(k8s_ws *ws, int opcode, const void *data, size_t len);

/* Runs I/O until a message arrives or the deadline passes: 1 with *op (1, 2, or 8 for a
 * close) and msg/len (valid until the next call), 0 at the deadline, -1 on EOF, a transport
 * or a protocol error (err filled). Pings are answered here. */
int k8s_ws_pump(k8s_ws *ws, int64_t deadline_us, int *op, const unsigned char **msg, size_t *len,
		sbx_error *err);

/* Bytes queued and not sent yet. */
size_t k8s_ws_pending(const k8s_ws *ws);

#endif

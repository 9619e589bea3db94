/* The runner's wire protocol: how the host (proxy.c, link.c) and sbx-runner (core/runner/)
 * talk over their AF_UNIX SOCK_SEQPACKET socketpair.
 *
 * Every frame is one packet: a 16-byte header (type, flags, call id) and at most
 * SBX__WIRE_CHUNK bytes of payload. A message longer than a chunk is cut into frames that
 * carry SBX__WIRE_MORE but the last; frames of different calls interleave freely, so many
 * calls share one connection and the receiver reassembles each by its call id. Payloads are
 * fields in this machine's byte order (both ends are the same build): u32, u64, i64, strings
 * (u32 length, the bytes and a NUL; length 0xffffffff is NULL), byte runs (u64 length and the
 * bytes), key/value lists and config node trees. A decoder never reads past its buffer: a
 * short or malformed payload sets `bad`, and the side that sees it treats the connection as
 * broken. See docs/design.md, "Out-of-process plugins", for the messages of each call. */
#ifndef SBX_WIRE_H
#define SBX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define SBX__WIRE_VERSION 1u
/* Payload bytes of one frame: output, stdin and file contents travel in pieces this big. */
#define SBX__WIRE_CHUNK (64u * 1024u)
/* A request or reply reassembled from frames may not be longer (data streams may). */
#define SBX__WIRE_MSG_MAX (64u * 1024u * 1024u)
/* The descriptor number of the runner's end of the socketpair. */
#define SBX__WIRE_FD 3

/* Frame flags. */
#define SBX__WIRE_MORE 1u /* another frame of the same message follows */

/* Requests, host -> runner. The reply is a REPLY message with the same call id. */
#define SBX__W_LOAD          1u
#define SBX__W_INIT          2u
#define SBX__W_FINI          3u
#define SBX__W_CREATE        4u
#define SBX__W_EXECUTE       5u
#define SBX__W_DESTROY       6u
#define SBX__W_READ_FILE     7u
#define SBX__W_WRITE_FILE    8u
#define SBX__W_STAT          9u
#define SBX__W_LIST_DIR      10u
#define SBX__W_MAKE_DIR      11u
#define SBX__W_REMOVE        12u
#define SBX__W_PAUSE         13u
#define SBX__W_RESUME        14u
#define SBX__W_STATUS        15u
#define SBX__W_LIST_BY_LABEL 16u
#define SBX__W_INFO          17u
#define SBX__W_SANDBOX_INFO  18u
#define SBX__W_REQUEST_LAST  18u
/* Host -> runner, about a call in flight. */
#define SBX__W_DATA 32u /* a piece of the call's stdin or file contents (also runner -> host) */
#define SBX__W_STOP 33u /* the call's output sink refused more: u32 status */
/* Runner -> host, for a call in flight. */
#define SBX__W_OUTPUT  48u /* flags' high half: the stream; payload: the bytes */
#define SBX__W_ENTRIES 49u /* list_dir entries */
#define SBX__W_IDS     50u /* list_by_label ids */
#define SBX__W_REPLY   51u /* i32 status, i32 error code, string message, then the op's results */

/* Optional ops of a descriptor, as bits of the LOAD reply's op mask. */
#define SBX__OP_READ_FILE     (1u << 0)
#define SBX__OP_WRITE_FILE    (1u << 1)
#define SBX__OP_STAT_FILE     (1u << 2)
#define SBX__OP_LIST_DIR      (1u << 3)
#define SBX__OP_MAKE_DIR      (1u << 4)
#define SBX__OP_REMOVE_PATH   (1u << 5)
#define SBX__OP_PAUSE         (1u << 6)
#define SBX__OP_RESUME        (1u << 7)
#define SBX__OP_STATUS        (1u << 8)
#define SBX__OP_LIST_BY_LABEL (1u << 9)
#define SBX__OP_INFO          (1u << 10)
#define SBX__OP_SANDBOX_INFO  (1u << 11)

typedef struct sbx__frame_hdr {
	uint32_t type;
	uint32_t flags; /* SBX__WIRE_MORE; OUTPUT frames carry the stream in bits 16..31 */
	uint64_t call;
} sbx__frame_hdr;

/* A growing payload. A failed allocation sets `oom` and makes every later put a no-op. */
typedef struct sbx__wbuf {
	unsigned char *p;
	size_t len, cap;
	int oom;
} sbx__wbuf;

void sbx__wput_u32(sbx__wbuf *b, uint32_t v);
void sbx__wput_u64(sbx__wbuf *b, uint64_t v);
void sbx__wput_i64(sbx__wbuf *b, int64_t v);
/* A NUL-terminated string or NULL. */
void sbx__wput_str(sbx__wbuf *b, const char *s);
void sbx__wput_bytes(sbx__wbuf *b, const void *p, size_t n);
/* n bytes as they are, no length: for reassembling a message from its frames. */
void sbx__wput_raw(sbx__wbuf *b, const void *p, size_t n);
void sbx__wput_kvs(sbx__wbuf *b, const sbx_kv *kv, uint32_t n);
void sbx__wput_info(sbx__wbuf *b, const sbx_file_info *fi);
/* A config node tree (NULL allowed). */
void sbx__wput_node(sbx__wbuf *b, const sbx__node *n);
void sbx__wbuf_free(sbx__wbuf *b);

/* Reads a payload. Pointers it returns point into the payload and live as long as it. */
typedef struct sbx__rbuf {
	const unsigned char *p;
	size_t len, off;
	int bad;
} sbx__rbuf;

uint32_t sbx__rget_u32(sbx__rbuf *r);
uint64_t sbx__rget_u64(sbx__rbuf *r);
int64_t sbx__rget_i64(sbx__rbuf *r);
/* NULL for a NULL string (and when bad). */
const char *sbx__rget_str(sbx__rbuf *r);
const void *sbx__rget_bytes(sbx__rbuf *r, size_t *n);
/* A new array of n pairs pointing into the payload (free with sbx__free); SBX_E_NOMEM,
 * SBX_E_INVAL when malformed. */
int sbx__rget_kvs(sbx__rbuf *r, sbx_kv **kv, uint32_t *n);
/* Fills fi (header set) from the payload. */
void sbx__rget_info(sbx__rbuf *r, sbx_file_info *fi);
/* A new node tree (NULL when NULL was sent); SBX_E_NOMEM, SBX_E_INVAL when malformed. */
int sbx__rget_node(sbx__rbuf *r, sbx__node **out);

/* Sends one message as frames of at most SBX__WIRE_CHUNK payload bytes. deadline_ms is a
 * CLOCK_MONOTONIC time in milliseconds after which a blocked send gives up, or -1. Returns 0,
 * or an errno value (ETIMEDOUT past the deadline, EPIPE when the peer is gone). Thread-safe:
 * each frame is one packet, so frames of concurrent senders never mix. */
int sbx__wire_send(int fd, uint32_t type, uint32_t flags, uint64_t call, const void *payload,
		   size_t len, int64_t deadline_ms);
/* Receives one frame: its header and up to SBX__WIRE_CHUNK payload bytes into buf. Returns
 * the payload length, 0 with h->type == 0 at the end of the stream, or -errno (-EPROTO for a
 * frame that is too long or too short). */
long sbx__wire_recv(int fd, sbx__frame_hdr *h, void *buf, int dontwait);

/* CLOCK_MONOTONIC now, in milliseconds. */
int64_t sbx__wire_now_ms(void);

#endif

/* The Engine's multiplexed exec stream, parsed: frames are [type, 0, 0, 0, size32be] and a
 * payload, and may be split anywhere across reads. A plain function over bytes (no I/O, no
 * allocation), so a fuzz target can link it alone. */
#ifndef SBX_DOCKER_DEMUX_H
#define SBX_DOCKER_DEMUX_H

#include <stddef.h>
#include <stdint.h>

/* Receives a piece of one stream's payload (SBX_STREAM_STDOUT or SBX_STREAM_STDERR). A
 * nonzero return stops the parse and is returned by docker_demux_feed. */
typedef int (*docker_demux_fn)(void *ctx, uint32_t stream, const void *data, size_t len);

typedef struct docker_demux {
	unsigned char hdr[8];
	size_t hdr_len;
	size_t remaining; /* payload bytes left in the current frame */
	uint32_t stream;  /* its stream; 0 for stdin echo, which is not output */
} docker_demux;

/* Feeds len bytes; calls fn for the payload they complete. Returns 0 or fn's refusal. A
 * zeroed docker_demux starts a stream. */
int docker_demux_feed(docker_demux *d, const void *data, size_t len, docker_demux_fn fn, void *ctx);

#endif

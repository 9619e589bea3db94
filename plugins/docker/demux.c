/* The exec stream demultiplexer (see demux.h). */
#include <string.h>

#include <sbx/types.h>

#include "demux.h"

int docker_demux_feed(docker_demux *d, const void *data, size_t len, docker_demux_fn fn, void *ctx)
{
	const unsigned char *p = data;
	size_t off = 0;
	while (off < len) {
		if (d->remaining == 0) {
			size_t take = sizeof(d->hdr) - d->hdr_len;
			if (take > len - off)
				take = len - off;
			memcpy(d->hdr + d->hdr_len, p + off, take);
			d->hdr_len += take;
			off += take;
			if (d->hdr_len < sizeof(d->hdr))
				break;
			d->hdr_len = 0;
			d->remaining = ((size_t)d->hdr[4] << 24) | ((size_t)d->hdr[5] << 16) |
				       ((size_t)d->hdr[6] << 8) | d->hdr[7];
			d->stream = d->hdr[0] == 0   ? 0
				    : d->hdr[0] == 1 ? SBX_STREAM_STDOUT
						     : SBX_STREAM_STDERR;
			continue;
		}
		size_t take = d->remaining < len - off ? d->remaining : len - off;
		if (d->stream && fn) {
			int rc = fn(ctx, d->stream, p + off, take);
			if (rc != 0)
				return rc;
		}
		d->remaining -= take;
		off += take;
	}
	return 0;
}

/* envd's process stream, parsed: Connect server-stream frames (a flags byte, a 4-byte
 * big-endian length, a JSON message) split anywhere across reads, and the events of
 * process.Process/Start and Connect in them (start with the pid, stdout and stderr as
 * base64, end with the exit status; an end-stream frame with an error). Plain functions over
 * bytes (no I/O), so a fuzz target can link this file with sbx-support and jansson. */
#ifndef SBX_E2B_CONNECT_H
#define SBX_E2B_CONNECT_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>
#include <sbx/support/buf.h>

#define E2B_MAX_FRAME (64u << 20) /* the longest frame accepted; a longer one is bad */

typedef struct e2b_process {
	/* Output: where decoded stdout and stderr go (NULL: dropped). */
	sbx_output_fn output;
	void *output_ctx;
	const int *stop; /* NULL, or set by the output once it is complete: the caller hangs up */
	/* Events seen. */
	uint32_t pid;
	int started, ended, end_stream;
	int32_t exit_code, signal;
	char error[256]; /* an end-stream error's message */
	char error_code[32];
	/* Why the parse stopped: the output's refusal, out of memory, a bad frame. */
	int sink_rc;
	int oom;
	int bad;
	sbxs_buf in;  /* bytes of an incomplete frame */
	sbxs_buf dec; /* decoded output, reused */
} e2b_process;

/* Feeds bytes of the stream. 1 to go on, 0 when the parse stopped (see sink_rc, oom, bad). */
int e2b_process_feed(e2b_process *p, const void *data, size_t len);

/* Forgets a partial frame (a new stream is attached) and frees the buffers. */
void e2b_process_reset(e2b_process *p);
void e2b_process_free(e2b_process *p);

/* The signal named by an envd status ("signal: killed", "signal: 11"), 0 if none. */
int e2b_signal_number(const char *status);

#endif

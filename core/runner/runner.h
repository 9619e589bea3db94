/* sbx-runner: one plugin file served to one host over the socketpair on descriptor 3.
 * main.c reads frames and runs each request on a worker thread; ops.c does what a request
 * asks of the plugin and sends the reply. */
#ifndef SBX_RUNNER_H
#define SBX_RUNNER_H

#include <stdint.h>

#include "internal.h"
#include "wire.h"

/* One request from the host: assembled by main.c, run by ops.c on a worker thread. */
typedef struct sbx__rjob {
	uint64_t call;
	uint32_t type;
	sbx__wbuf req;           /* the request, reassembled from its frames */
	int req_done;            /* its last frame came */
	uint64_t data_want;      /* stdin or file bytes announced by the request */
	uint64_t data_got;       /* ... received so far */
	unsigned char *data;     /* those bytes: on the heap when small, else a read-only map */
	size_t map_len;          /* nonzero: data is a map of this length */
	int data_fd;             /* the unlinked file a large stream goes into, or -1 */
	int stop;                /* atomic: the status a STOP frame gave */
	struct sbx__rjob *next;  /* every job not finished */
	struct sbx__rjob *qnext; /* jobs ready for a worker */
} sbx__rjob;

/* The connection to the host. */
extern int sbx__rn_fd;

/* Runs j's request and sends its reply (and any data before it). Thread-safe. */
void sbx__rn_run(sbx__rjob *j);
/* Unloads the plugin, if one was loaded (at the end of an orderly shutdown). */
void sbx__rn_unload(void);

#endif

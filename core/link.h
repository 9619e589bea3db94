/* The host's link to the runner process of one plugin file (link.c): starting it, carrying
 * calls to it over one connection, and turning its death into statuses. proxy.c is its only
 * user. */
#ifndef SBX_LINK_H
#define SBX_LINK_H

#include <pthread.h>
#include <stdint.h>

#include "internal.h"
#include "wire.h"

typedef struct sbx__link sbx__link; /* one plugin file, whatever runner serves it now */
typedef struct sbx__conn sbx__conn; /* one runner process and its connection */

/* One call in flight. It lives on the caller's stack; the caller fills the first part. */
typedef struct sbx__call {
	const char *alias; /* for messages */
	const char *op;    /* "exec", "create", ... for messages */
	/* OUTPUT frames, passed on in order from the link's reader thread. A nonzero return
	 * stops the call's output (the runner is told; later chunks are dropped). */
	sbx_output_fn output;
	void *output_ctx;
	/* DATA, ENTRIES and IDS frames, from the reader thread. A nonzero return (SBX_E_*)
	 * becomes the call's status once the runner has replied. */
	int (*on_frame)(void *ctx, uint32_t type, const void *data, size_t len);
	void *frame_ctx;

	/* Filled by the link. */
	sbx__wbuf reply; /* the REPLY payload when the call returns SBX_OK */
	uint64_t id;
	int done;     /* under the connection's lock */
	int status;   /* under the connection's lock */
	int stop;     /* reader thread only: the output sink's refusal */
	int frame_rc; /* reader thread only: what on_frame refused with */
	sbx_error err;
	pthread_cond_t cond;
} sbx__call;

/* Starts the runner for plugin file `path`, loads it there with the expected aliases and
 * keeps its LOAD reply (see sbx__link_manifest). state_dir (may be NULL) is the host's
 * plugins folder: the runner's state_dir() and where it keeps large streams of data.
 * SBX_E_IO when sbx-runner cannot be started; the load's own status and message when the
 * plugin does not load. */
int sbx__link_start(const char *path, const char *state_dir, const char *const *expected,
		    size_t n_expected, const sbx__runner_opts *opts, sbx__link **out,
		    sbx_error *err);
/* Ends the runner (waiting up to the grace period before killing it) and frees the link.
 * No call may be in flight. NULL is a no-op. */
void sbx__link_stop(sbx__link *l);
/* The first runner's LOAD reply: status, error and the descriptors (see proxy.c). */
const sbx__wbuf *sbx__link_manifest(const sbx__link *l);
/* SBX_E_FAULTY and the reason once the runner died max_crashes times within the window;
 * SBX_OK otherwise. */
int sbx__link_fault(sbx__link *l, char *reason, size_t cap);

/* A live runner to call, started now when none is (after the backoff that repeated crashes
 * impose). Release it with sbx__conn_release. SBX_E_FAULTY once the link is faulty;
 * SBX_E_PLUGIN_CRASHED when a fresh runner died while loading. Thread-safe. */
int sbx__link_acquire(sbx__link *l, const char *alias, const char *op, sbx__conn **out,
		      sbx_error *err);
void sbx__conn_release(sbx__conn *c);
/* The live runner if there is one (a reference to release), else NULL: for calls that are
 * not worth starting a runner for (fini). */
sbx__conn *sbx__link_current(sbx__link *l);
/* Kills the runner because of what it sent (`why` completes "its runner (pid N) ..."): every
 * call in flight returns SBX_E_PLUGIN_CRASHED. */
void sbx__conn_fail(sbx__conn *c, const char *why);
/* Which runner this is: a new number for every process the link starts. */
uint64_t sbx__conn_gen(const sbx__conn *c);

/* Sends request `type` (payload req, then data_len bytes of data in chunks) and waits for
 * the reply. own_timeout_ms is the call's own timeout (an exec's), 0 for none: past it plus
 * the grace period, or past the registry's `timeout` for a call without one, the runner is
 * killed. SBX_OK: call->reply holds the reply (free it with sbx__wbuf_free). Otherwise
 * SBX_E_PLUGIN_CRASHED (the runner died or was killed: err names the alias, the op and the
 * signal, exit status or reason), or the status an on_frame callback returned. Thread-safe. */
int sbx__conn_call(sbx__conn *c, uint32_t type, const sbx__wbuf *req, const void *data,
		   size_t data_len, uint64_t own_timeout_ms, sbx__call *call, sbx_error *err);

#endif

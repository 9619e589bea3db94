/* The ledger: an SQLite database (WAL) recording every sandbox before its create is sent and
 * again when the create is confirmed or fails, so nothing is lost when the harness dies.
 * Rows never hold secrets: only ids, owners, labels the host set and timestamps. */
#ifndef SBX_LEDGER_H
#define SBX_LEDGER_H

#include <stdint.h>

#include "internal.h"

typedef struct sbx__ledger sbx__ledger;

/* PRAGMA user_version of the schema this code writes (ledger.c's migrations). */
#define SBX__LEDGER_SCHEMA_VERSION 5

/* Row states. */
#define SBX__LEDGER_CREATING "creating"
#define SBX__LEDGER_RUNNING  "running"
#define SBX__LEDGER_PAUSED   "paused"
#define SBX__LEDGER_DELETING "deleting"
#define SBX__LEDGER_GONE     "gone"
#define SBX__LEDGER_FAILED   "failed"

typedef struct sbx__ledger_row {
	char token[40];      /* host-made key, also set as label sbx.token on the sandbox */
	char id[SBX_ID_MAX]; /* "<alias>:<backend-id>", empty while creating */
	char alias[64];
	char data_source[128];
	char owner_host[128];
	int64_t owner_pid;   /* 0 when detached */
	int64_t owner_start; /* process start time (clock ticks since boot), for pid reuse */
	char run_id[128];
	int64_t created; /* unix seconds */
	int64_t expires; /* unix seconds, 0 = no TTL */
	char state[16];
	char error[256]; /* why a create failed, or what gc did */
	/* The process creating or deleting the sandbox right now (states creating, deleting):
	 * a row stuck in one of them whose actor died is finished by gc. pid 0: unknown. */
	char actor_host[128];
	int64_t actor_pid;
	int64_t actor_start;
	int64_t updated; /* unix seconds of the last change */
	/* The plugin's non-secret config at create, as JSON (secrets as ${env.NAME}), so any
	 * process can reach the sandbox again; "" when none was recorded. */
	char config[2048];
} sbx__ledger_row;

/* Who is acting on a row: host name, pid and process start time. */
typedef struct sbx__ledger_actor {
	const char *host;
	int64_t pid;
	int64_t start;
} sbx__ledger_actor;

/* Opens (creating and migrating as needed) the ledger at `path`. Safe for many processes and
 * threads at once: WAL, a busy timeout, and one connection per handle guarded by a mutex. */
int sbx__ledger_open(const char *path, sbx__ledger **out, sbx_error *err);
void sbx__ledger_close(sbx__ledger *led);
/* pthread_atfork handlers (fork.c): no thread is inside SQLite at a fork, and the child
 * starts with every inherited connection closed (a handle it still has fails its calls). */
void sbx__ledger_fork_prepare(void);
void sbx__ledger_fork_parent(void);
void sbx__ledger_fork_child(void);

/* Records a sandbox about to be created (state creating), keyed by row->token. */
int sbx__ledger_begin(sbx__ledger *led, const sbx__ledger_row *row, sbx_error *err);
/* Caps of one data source, held across every process sharing the ledger (caps.c reads them
 * from the policy). */
typedef struct sbx__ledger_caps {
	uint64_t max_live;     /* max_concurrency: running, paused and creating rows; 0: none */
	uint64_t max_starting; /* creating rows; 0: none */
	double rate;           /* creates per second; 0: none */
	double burst;          /* creates the rate's bucket holds, at least 1 */
} sbx__ledger_caps;

/* Which cap kept a create out. */
#define SBX__CAP_NONE     0
#define SBX__CAP_LIVE     1
#define SBX__CAP_STARTING 2
#define SBX__CAP_RATE     3

typedef struct sbx__ledger_admission {
	int admitted;      /* the row was inserted (state creating) */
	int cap;           /* when not admitted: SBX__CAP_* */
	uint64_t live;     /* rows counted running or paused (when a count was made) */
	uint64_t starting; /* rows counted creating */
	int64_t retry_ms;  /* SBX__CAP_RATE: milliseconds until the bucket holds a create */
} sbx__ledger_admission;

/* sbx__ledger_begin under caps, in one write transaction: counts the rows of row->data_source
 * and row->alias that gc would spare (running or paused with a live owner and a TTL not
 * passed, creating with a live creator; `this_host` tells which pids can be checked), takes
 * one create from the data source's rate bucket (as of now_ms, unix milliseconds), and
 * inserts the row only when every cap has room. A refusal is SBX_OK with a->admitted 0 and
 * a->cap saying which; a bucket token is taken only by an admitted create. */
int sbx__ledger_admit(sbx__ledger *led, const sbx__ledger_row *row, const sbx__ledger_caps *caps,
		      const char *this_host, int64_t now_ms, sbx__ledger_admission *a,
		      sbx_error *err);
/* Grows whenever this handle records something that may free a place under a cap (a create
 * confirmed or failed, a delete begun, a state changed, gc's outcome). */
uint64_t sbx__ledger_generation(sbx__ledger *led);
/* Sleeps until the generation differs from `seen` or CLOCK_MONOTONIC reaches until_ms. Only
 * this handle's writes wake it: other processes' are seen by looking again after the sleep. */
void sbx__ledger_wait(sbx__ledger *led, uint64_t seen, int64_t until_ms);

/* The create succeeded: sets the id and state running. */
int sbx__ledger_confirm(sbx__ledger *led, const char *token, const char *id, sbx_error *err);
/* The create failed: state failed with the message. */
int sbx__ledger_fail(sbx__ledger *led, const char *token, const char *message, sbx_error *err);
/* A destroy of `id` begins: rows with this id not yet gone or failed go to state deleting
 * with `actor` as the deleter. */
int sbx__ledger_mark_deleting(sbx__ledger *led, const char *id, const sbx__ledger_actor *actor,
			      sbx_error *err);
/* The destroy failed: rows of `id` this actor put in deleting go back to running. */
int sbx__ledger_undelete(sbx__ledger *led, const char *id, const sbx__ledger_actor *actor,
			 sbx_error *err);
/* gc's claim on a row it read as `seen`: state deleting with `actor` as the deleter, only if
 * the row is still exactly as read (state, expiry, owner, actor). *claimed 1 when it was. */
int sbx__ledger_claim(sbx__ledger *led, const sbx__ledger_row *seen, const sbx__ledger_actor *actor,
		      int *claimed, sbx_error *err);
/* gc's claim on a backend object no row holds: a new row (token `token`, state deleting,
 * `actor` the deleter) is inserted only if at this moment no row with this id is creating,
 * running, paused or deleting. *claimed 1 when it was. */
int sbx__ledger_claim_orphan(sbx__ledger *led, const char *token, const char *id, const char *alias,
			     const sbx__ledger_actor *actor, int *claimed, sbx_error *err);
/* Sets state and message of the row with this token (gc finishing what it claimed). */
int sbx__ledger_finish(sbx__ledger *led, const char *token, const char *state, const char *message,
		       sbx_error *err);
/* The newest row holding this sandbox id: SBX_E_NOT_FOUND (err untouched) when none. */
int sbx__ledger_find(sbx__ledger *led, const char *id, sbx__ledger_row *out, sbx_error *err);
/* Sets the state of the row with this sandbox id (gone: its jobs' rows go in the same
 * write). A missing row is not an error. */
int sbx__ledger_set_state(sbx__ledger *led, const char *id, const char *state, sbx_error *err);
/* Sets the expiry of the row with this sandbox id. */
int sbx__ledger_set_expiry(sbx__ledger *led, const char *id, int64_t expires, sbx_error *err);
/* Removes rows in state gone or failed older than `before` (unix seconds). */
int sbx__ledger_prune(sbx__ledger *led, int64_t before, sbx_error *err);

/* Calls fn for every row, oldest first; fn returning nonzero stops the walk (and is returned). */
typedef int (*sbx__ledger_row_fn)(void *ctx, const sbx__ledger_row *row);
int sbx__ledger_each(sbx__ledger *led, sbx__ledger_row_fn fn, void *ctx, sbx_error *err);

/* Start time of a process (field 22 of /proc/PID/stat), 0 if it does not exist. */
int64_t sbx__process_start_time(int64_t pid);
/* True when the row's owner process is alive (same pid and start time on this host). A
 * detached row, or a row owned by another host, counts as alive: only TTL governs it. */
int sbx__ledger_owner_alive(const sbx__ledger_row *row, const char *this_host);
/* 1 when the row's actor is alive (or on another host), 0 when it died, -1 when the row
 * names no actor (rows written before schema version 3). */
int sbx__ledger_actor_alive(const sbx__ledger_row *row, const char *this_host);

/* ---- sessions (session.c): (user_id, session_id) -> sandbox */

typedef struct sbx__session_row {
	char user_id[256];
	char session_id[256];
	char sandbox_id[SBX_ID_MAX];
	char data_source[128];
	char image[256];
	int64_t ttl;
	char state[16]; /* running, paused */
	int64_t created;
	int64_t updated;
	char *assets; /* NUL-terminated host and sandbox paths, alternating; owned */
	size_t assets_len;
} sbx__session_row;

/* Frees the row's assets (the row itself is the caller's). */
void sbx__session_row_clear(sbx__session_row *row);
void sbx__session_rows_free(sbx__session_row *rows, size_t n);
/* SBX_E_NOT_FOUND (err untouched) when there is no such session. */
int sbx__session_load(sbx__ledger *led, const char *user, const char *session,
		      sbx__session_row *out, sbx_error *err);
/* Every session, oldest first; free with sbx__session_rows_free. */
int sbx__session_all(sbx__ledger *led, sbx__session_row **rows, size_t *n, sbx_error *err);
/* Records a new session in state running; *inserted 0 when one with that key exists. */
int sbx__session_insert(sbx__ledger *led, const sbx__session_row *row, int *inserted,
			sbx_error *err);
/* Points the session at row->sandbox_id (state running) if it still names old_id;
 * *replaced 0 when another process got there first. */
int sbx__session_replace(sbx__ledger *led, const sbx__session_row *row, const char *old_id,
			 int *replaced, sbx_error *err);
int sbx__session_set_state(sbx__ledger *led, const char *user, const char *session,
			   const char *state, sbx_error *err);
int sbx__session_set_assets(sbx__ledger *led, const char *user, const char *session,
			    const char *assets, size_t len, sbx_error *err);
/* *deleted 0 when there was no such session. */
int sbx__session_delete(sbx__ledger *led, const char *user, const char *session, int *deleted,
			sbx_error *err);

/* ---- jobs: the last state seen of each background job (jobs.c keeps them) */

typedef struct sbx__job_row {
	char job_id[SBX_JOB_ID_MAX];
	char sandbox_id[SBX_ID_MAX];
	char state[16]; /* starting, running, exited, killed, lost */
	int64_t pid;
	int exit_code;
	int signal;
	int64_t started_ms; /* unix milliseconds */
	int64_t ended_ms;   /* 0 while running */
	int64_t stdout_bytes;
	int64_t stderr_bytes;
} sbx__job_row;

/* Inserts or updates the row of r->job_id. */
int sbx__ledger_job_put(sbx__ledger *led, const sbx__job_row *r, sbx_error *err);
int sbx__ledger_job_delete(sbx__ledger *led, const char *job_id, sbx_error *err);
/* The sandbox's job rows, oldest first; *rows from sbx__alloc (free with sbx__free). */
int sbx__ledger_jobs(sbx__ledger *led, const char *sandbox_id, sbx__job_row **rows, size_t *n,
		     sbx_error *err);

#endif

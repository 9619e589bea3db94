/* SQLite-backed ledger of sandboxes (see ledger.h). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "ledger.h"

/* How long a ledger call waits for another process's lock before it fails. */
#define LEDGER_BUSY_MS 30000

/* Write statements stay prepared: parsing one costs as much as running it. They are keyed by
 * their SQL text's address (each is a literal in this file). Room for every one of them (21
 * today) and more: one past the cache would be parsed again at each use. */
#define STMT_CACHE 48

/* Writes of concurrent threads share one transaction (see take/give below), at most this
 * many, so a steady stream of writers still commits. */
#define BATCH_MAX    32
#define BATCH_MAX_US 2000

typedef struct cached_stmt {
	const char *sql;
	sqlite3_stmt *st;
} cached_stmt;

/* A write waiting for the commit of the transaction it ran in. */
typedef struct member {
	struct member *next;
	int done, rc;
	char message[sizeof(((sbx_error *)0)->message)];
} member;

struct sbx__ledger {
	sqlite3 *db;
	pthread_mutex_t lock;
	cached_stmt cache[STMT_CACHE]; /* under lock */
	/* Group commit (under lock): the open transaction, the writes in it waiting for its
	 * outcome, and (atomic) how many threads are waiting to take the lock. */
	int in_tx;
	int64_t tx_started_us; /* CLOCK_MONOTONIC */
	size_t n_members;
	member *members;
	pthread_cond_t batch_done;
	atomic_int wanting;
	/* Bumped (under wake_lock, with a broadcast of `woken`) whenever this handle records
	 * something that may free a place under a data source's caps. */
	pthread_mutex_t wake_lock;
	pthread_cond_t woken;
	uint64_t generation;
	struct sbx__ledger *next; /* in `ledgers`, under ledgers_lock */
};

/* Every open handle of this process, for fork (sbx__ledger_fork_*). Opening and closing one
 * (SQLite's open, migrations and close) happens under ledgers_lock; everything else SQLite
 * does for a handle happens under its lock. */
static pthread_mutex_t ledgers_lock = PTHREAD_MUTEX_INITIALIZER;
static sbx__ledger *ledgers;

/* Each migration takes the schema from version i to i + 1. Append only. */
static const char *const migrations[] = {
    "CREATE TABLE sandboxes ("
    " token TEXT PRIMARY KEY,"
    " id TEXT NOT NULL DEFAULT '',"
    " alias TEXT NOT NULL,"
    " data_source TEXT NOT NULL DEFAULT '',"
    " owner_host TEXT NOT NULL DEFAULT '',"
    " owner_pid INTEGER NOT NULL DEFAULT 0,"
    " owner_start INTEGER NOT NULL DEFAULT 0,"
    " run_id TEXT NOT NULL DEFAULT '',"
    " created INTEGER NOT NULL,"
    " expires INTEGER NOT NULL DEFAULT 0,"
    " state TEXT NOT NULL,"
    " error TEXT NOT NULL DEFAULT '',"
    " updated INTEGER NOT NULL);"
    "CREATE INDEX sandboxes_id ON sandboxes(id);",
    /* 2: sessions (user, session) -> sandbox; assets are NUL-terminated host and sandbox
     * paths, alternating. */
    "CREATE TABLE sessions ("
    " user_id TEXT NOT NULL,"
    " session_id TEXT NOT NULL,"
    " sandbox_id TEXT NOT NULL,"
    " data_source TEXT NOT NULL DEFAULT '',"
    " image TEXT NOT NULL DEFAULT '',"
    " ttl INTEGER NOT NULL DEFAULT 0,"
    " state TEXT NOT NULL,"
    " assets BLOB,"
    " created INTEGER NOT NULL,"
    " updated INTEGER NOT NULL,"
    " PRIMARY KEY (user_id, session_id));",
    /* 3: the process creating or deleting a row (so gc can finish rows whose actor died),
     * and the plugin's non-secret config the sandbox was created with. */
    "ALTER TABLE sandboxes ADD COLUMN actor_host TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE sandboxes ADD COLUMN actor_pid INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN actor_start INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE sandboxes ADD COLUMN config TEXT NOT NULL DEFAULT '';",
    /* 4: background jobs, one row per job; the sandbox holds the job's files and is the
     * truth, these rows are the last state seen (for listing and the per-sandbox cap).
     * Times in unix milliseconds. */
    "CREATE TABLE jobs ("
    " job_id TEXT PRIMARY KEY,"
    " sandbox_id TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " pid INTEGER NOT NULL DEFAULT 0,"
    " exit_code INTEGER NOT NULL DEFAULT -1,"
    " signal INTEGER NOT NULL DEFAULT 0,"
    " started_ms INTEGER NOT NULL DEFAULT 0,"
    " ended_ms INTEGER NOT NULL DEFAULT 0,"
    " stdout_bytes INTEGER NOT NULL DEFAULT 0,"
    " stderr_bytes INTEGER NOT NULL DEFAULT 0,"
    " created INTEGER NOT NULL,"
    " updated INTEGER NOT NULL);"
    "CREATE INDEX jobs_sandbox ON jobs(sandbox_id);",
    /* 5: caps across processes. Each data source's create rate is a token bucket kept
     * here (tokens as of stamp_ms, unix milliseconds), and rows are counted per data
     * source at every admission. */
    "CREATE TABLE create_rates ("
    " data_source TEXT NOT NULL,"
    " alias TEXT NOT NULL,"
    " tokens REAL NOT NULL,"
    " stamp_ms INTEGER NOT NULL,"
    " PRIMARY KEY (data_source, alias));"
    "CREATE INDEX sandboxes_source ON sandboxes(data_source, state);",
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == SBX__LEDGER_SCHEMA_VERSION,
	       "one migration per schema version");

static int db_error(sbx__ledger *led, sbx_error *err, const char *what)
{
	return sbx__set_error(err, SBX_E_LEDGER, "ledger: %s: %s", what, sqlite3_errmsg(led->db));
}

static int exec_sql(sbx__ledger *led, const char *sql, sbx_error *err)
{
	char *msg = NULL;
	if (sqlite3_exec(led->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		sbx__set_error(err, SBX_E_LEDGER, "ledger: %s", msg ? msg : "statement failed");
		sqlite3_free(msg);
		return SBX_E_LEDGER;
	}
	return SBX_OK;
}

static int migrate(sbx__ledger *led, sbx_error *err)
{
	int rc = exec_sql(led, "BEGIN IMMEDIATE", err);
	if (rc != SBX_OK)
		return rc;
	sqlite3_stmt *st = NULL;
	int version = 0;
	if (sqlite3_prepare_v2(led->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) {
		rc = db_error(led, err, "read schema version");
		goto out;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	st = NULL;
	if (version > SBX__LEDGER_SCHEMA_VERSION) {
		rc = sbx__set_error(err, SBX_E_LEDGER,
				    "ledger: schema version %d is newer than this sbx (%d); use a "
				    "newer sbx or another SBX_STATE_DIR",
				    version, SBX__LEDGER_SCHEMA_VERSION);
		goto out;
	}
	for (int v = version; v < SBX__LEDGER_SCHEMA_VERSION; v++) {
		rc = exec_sql(led, migrations[v], err);
		if (rc != SBX_OK)
			goto out;
	}
	if (version < SBX__LEDGER_SCHEMA_VERSION) {
		char sql[64];
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", SBX__LEDGER_SCHEMA_VERSION);
		rc = exec_sql(led, sql, err);
	}
out:
	if (rc == SBX_OK)
		return exec_sql(led, "COMMIT", err);
	exec_sql(led, "ROLLBACK", NULL);
	return rc;
}

/* SQL sbx_alive(this_host, host, pid, start): 1 when that process is alive, as
 * sbx__ledger_owner_alive judges it (pid 0 or another host: alive). Lets an admission count
 * the rows gc would spare inside its own transaction. */
static void alive_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc;
	const unsigned char *self = sqlite3_value_text(argv[0]);
	const unsigned char *host = sqlite3_value_text(argv[1]);
	int64_t pid = sqlite3_value_int64(argv[2]);
	int64_t start = sqlite3_value_int64(argv[3]);
	int alive = 1;
	if (pid > 0 && self && host && strcmp((const char *)self, (const char *)host) == 0) {
		int64_t now_start = sbx__process_start_time(pid);
		alive = now_start != 0 && now_start == start;
	}
	sqlite3_result_int(ctx, alive);
}

/* Turning a new database to WAL takes its exclusive lock while holding a shared one, so when
 * several processes open a fresh ledger at once SQLite answers SQLITE_BUSY without calling the
 * busy handler (waiting could deadlock). Those losers retry here, backing off, within the same
 * bound the busy handler has; any other error is final. */
static int set_wal(sbx__ledger *led, sbx_error *err)
{
	long waited_ms = 0, step_ms = 1;
	for (;;) {
		int rc = sqlite3_exec(led->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
				      NULL, NULL, NULL);
		if (rc == SQLITE_OK)
			return SBX_OK;
		if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= LEDGER_BUSY_MS)
			return db_error(led, err, "set WAL mode");
		struct timespec ts = {0, step_ms * 1000000L};
		nanosleep(&ts, NULL);
		waited_ms += step_ms;
		if (step_ms < 64)
			step_ms *= 2;
	}
}

/* What threads wait on for a handle: at open, and again in a forked child, where the parent's
 * waiters are not. */
static void init_waits(sbx__ledger *led)
{
	pthread_cond_init(&led->batch_done, NULL);
	pthread_mutex_init(&led->wake_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&led->woken, &ca);
	pthread_condattr_destroy(&ca);
}

int sbx__ledger_open(const char *path, sbx__ledger **out, sbx_error *err)
{
	*out = NULL;
	sbx__ledger *led = sbx__calloc(1, sizeof(*led));
	if (!led)
		return sbx__set_error(err, SBX_E_NOMEM, "ledger: out of memory");
	pthread_mutex_init(&led->lock, NULL);
	init_waits(led);
	int rc;
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
	pthread_mutex_lock(&ledgers_lock);
	if (sqlite3_open_v2(path, &led->db, flags, NULL) != SQLITE_OK) {
		rc = sbx__set_error(err, SBX_E_LEDGER, "ledger: cannot open %s: %s", path,
				    led->db ? sqlite3_errmsg(led->db) : "out of memory");
		goto fail;
	}
	/* Many harness processes write at once: wait for the lock rather than fail. */
	sqlite3_busy_timeout(led->db, LEDGER_BUSY_MS);
	if (sqlite3_create_function(led->db, "sbx_alive", 4, SQLITE_UTF8 | SQLITE_DIRECTONLY, NULL,
				    alive_fn, NULL, NULL) != SQLITE_OK) {
		rc = db_error(led, err, "register sbx_alive");
		goto fail;
	}
	rc = set_wal(led, err);
	if (rc != SBX_OK)
		goto fail;
	rc = migrate(led, err);
	if (rc != SBX_OK)
		goto fail;
	led->next = ledgers;
	ledgers = led;
	pthread_mutex_unlock(&ledgers_lock);
	*out = led;
	return SBX_OK;
fail:
	pthread_mutex_unlock(&ledgers_lock);
	sbx__error_prefix(err, "%s", path);
	sbx__ledger_close(led);
	return rc;
}

/* Under ledgers_lock: finalizes led's statements and closes its connection. */
static void close_db_locked(sbx__ledger *led)
{
	for (size_t i = 0; i < STMT_CACHE; i++) {
		sqlite3_finalize(led->cache[i].st);
		led->cache[i].st = NULL;
		led->cache[i].sql = NULL;
	}
	sqlite3_close(led->db);
	led->db = NULL;
}

void sbx__ledger_close(sbx__ledger *led)
{
	if (!led)
		return;
	pthread_mutex_lock(&ledgers_lock);
	for (sbx__ledger **p = &ledgers; *p; p = &(*p)->next)
		if (*p == led) {
			*p = led->next;
			break;
		}
	close_db_locked(led);
	pthread_mutex_unlock(&ledgers_lock);
	pthread_cond_destroy(&led->woken);
	pthread_mutex_destroy(&led->wake_lock);
	pthread_cond_destroy(&led->batch_done);
	pthread_mutex_destroy(&led->lock);
	sbx__free(led);
}

/* The prepared statement of sql (a literal), from the cache or made and kept there; NULL
 * with the error in the connection. Under led->lock. */
static sqlite3_stmt *prepared(sbx__ledger *led, const char *sql)
{
	size_t i = 0;
	for (; i < STMT_CACHE && led->cache[i].sql; i++)
		if (led->cache[i].sql == sql)
			return led->cache[i].st;
	sqlite3_stmt *st = NULL;
	unsigned flags = i < STMT_CACHE ? SQLITE_PREPARE_PERSISTENT : 0;
	if (sqlite3_prepare_v3(led->db, sql, -1, flags, &st, NULL) != SQLITE_OK)
		return NULL;
	if (i < STMT_CACHE)
		led->cache[i] = (cached_stmt){sql, st};
	return st;
}

/* Gives a statement back: reset for its next use when cached, finalized otherwise. */
static void release(sbx__ledger *led, sqlite3_stmt *st)
{
	for (size_t i = 0; i < STMT_CACHE && led->cache[i].sql; i++) {
		if (led->cache[i].st == st) {
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			return;
		}
	}
	sqlite3_finalize(st);
}

/* BEGIN and COMMIT of a batch stay prepared too: sqlite3_exec would parse them at every use. */
static const char sql_begin[] = "BEGIN IMMEDIATE";
static const char sql_commit[] = "COMMIT";

/* Runs a cached statement without parameters (sql_begin, sql_commit). Under led->lock. */
static int exec_kept(sbx__ledger *led, const char *sql, sbx_error *err)
{
	sqlite3_stmt *st = prepared(led, sql);
	if (!st)
		return db_error(led, err, sql);
	int rc = sqlite3_step(st) == SQLITE_DONE ? SBX_OK : db_error(led, err, sql);
	release(led, st);
	return rc;
}

/* Runs one statement with parameters given as a format: 's' text, 'i' int64, 'b' blob (a
 * pointer and a size_t length), 'd' double. *changes (may be NULL) gets the rows it changed.
 * The caller holds led->lock. */
static int step_locked(sbx__ledger *led, sbx_error *err, int *changes, const char *what,
		       const char *sql, const char *types, va_list ap)
{
	int rc = SBX_OK;
	sqlite3_stmt *st = prepared(led, sql);
	if (!st) {
		rc = db_error(led, err, what);
		goto out;
	}
	for (int i = 0; types[i]; i++) {
		if (types[i] == 's') {
			sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1,
					  SQLITE_TRANSIENT);
		} else if (types[i] == 'b') {
			const void *data = va_arg(ap, const void *);
			size_t len = va_arg(ap, size_t);
			sqlite3_bind_blob64(st, i + 1, data, len, SQLITE_TRANSIENT);
		} else if (types[i] == 'd') {
			sqlite3_bind_double(st, i + 1, va_arg(ap, double));
		} else {
			sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
		}
	}
	if (sqlite3_step(st) != SQLITE_DONE)
		rc = db_error(led, err, what);
	else if (changes)
		*changes = sqlite3_changes(led->db);
out:
	if (st)
		release(led, st);
	return rc;
}

/* ---- group commit
 *
 * A write does not commit on its own. It runs inside the connection's open transaction
 * (begun by the first write of a batch) and waits; whoever holds the lock last, when no other
 * thread is waiting for it (or once BATCH_MAX writes are in), commits for all and hands each
 * its outcome. A write returns only after the transaction holding it committed, so what its
 * caller does next (a backend call) still comes after its row is in the ledger. Readers of
 * this handle take the same lock and see the batch's rows (same connection). */

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Under lock: the open transaction should commit now. */
static int batch_full(sbx__ledger *led)
{
	return atomic_load(&led->wanting) == 0 || led->n_members >= BATCH_MAX ||
	       mono_us() - led->tx_started_us >= BATCH_MAX_US;
}

static void take(sbx__ledger *led)
{
	atomic_fetch_add(&led->wanting, 1);
	pthread_mutex_lock(&led->lock);
	atomic_fetch_sub(&led->wanting, 1);
}

/* Ends the open transaction, COMMIT or (rc != SBX_OK, message) ROLLBACK, and tells every
 * write in it. Under lock. */
static void finish_batch(sbx__ledger *led, int rc, const char *message)
{
	char msg[sizeof(((sbx_error *)0)->message)] = "";
	if (rc == SBX_OK) {
		sbx_error e = {0};
		rc = exec_kept(led, sql_commit, &e);
		snprintf(msg, sizeof(msg), "%s", e.message);
	} else {
		snprintf(msg, sizeof(msg), "%s", message);
	}
	if (rc != SBX_OK && !sqlite3_get_autocommit(led->db))
		exec_sql(led, "ROLLBACK", NULL);
	for (member *m = led->members; m; m = m->next) {
		m->rc = rc;
		snprintf(m->message, sizeof(m->message), "%s", msg);
		m->done = 1;
	}
	led->members = NULL;
	led->n_members = 0;
	led->in_tx = 0;
	pthread_cond_broadcast(&led->batch_done);
}

/* Lets go of the lock, committing the open transaction when nobody else is about to add to
 * it. */
static void give(sbx__ledger *led)
{
	if (led->in_tx && batch_full(led))
		finish_batch(led, SBX_OK, NULL);
	pthread_mutex_unlock(&led->lock);
}

/* ---- fork
 *
 * SQLite's own advice is not to carry a connection into a forked child: the child's copy
 * shares the parent's WAL index (a shared mapping) and the bookkeeping of which locks this
 * process holds, which the kernel did not copy, and a thread of the parent inside SQLite at
 * the fork leaves its mutexes locked for good. So a fork waits until no thread is inside
 * SQLite through a ledger: prepare takes every handle's lock, committing its open batch (a
 * write waiting for that commit learns its outcome once the parent goes on). In the child
 * every connection is then closed before anything else runs, without the checkpoint a last
 * close would otherwise try (the child must never write the parent's WAL into the database);
 * the handles stay, unusable, with the hosts that own them (host.c refuses a host used in a
 * fork), and a host the child makes opens connections of its own. */
void sbx__ledger_fork_prepare(void)
{
	pthread_mutex_lock(&ledgers_lock);
	for (sbx__ledger *led = ledgers; led; led = led->next) {
		take(led);
		if (led->in_tx)
			finish_batch(led, SBX_OK, NULL);
	}
}

void sbx__ledger_fork_parent(void)
{
	for (sbx__ledger *led = ledgers; led; led = led->next)
		pthread_mutex_unlock(&led->lock);
	pthread_mutex_unlock(&ledgers_lock);
}

void sbx__ledger_fork_child(void)
{
	for (sbx__ledger *led = ledgers; led; led = led->next) {
		sqlite3_db_config(led->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
		close_db_locked(led);
		/* The parent's threads waiting on these are not in this process. */
		pthread_mutex_unlock(&led->lock);
		init_waits(led);
	}
	ledgers = NULL;
	pthread_mutex_unlock(&ledgers_lock);
}

/* Under lock: opens the batch's transaction if none is open. */
static int batch_begin(sbx__ledger *led, sbx_error *err)
{
	if (led->in_tx)
		return SBX_OK;
	int rc = exec_kept(led, sql_begin, err);
	if (rc == SBX_OK) {
		led->in_tx = 1;
		led->tx_started_us = mono_us();
	}
	return rc;
}

/* Under lock, after a write ran in the batch (rc its status): on success joins the batch and
 * returns the commit's status once known; on failure returns rc, and if SQLite rolled the
 * whole transaction back, the batch's other writes fail with this error too. Returns with
 * the lock released. */
static int batch_end(sbx__ledger *led, int rc, sbx_error *err)
{
	if (rc != SBX_OK) {
		if (led->in_tx && sqlite3_get_autocommit(led->db))
			finish_batch(led, rc,
				     err && err->message[0] ? err->message
							    : "ledger: write failed");
		give(led);
		return rc;
	}
	member me = {0};
	me.next = led->members;
	led->members = &me;
	led->n_members++;
	if (batch_full(led))
		finish_batch(led, SBX_OK, NULL);
	while (!me.done)
		pthread_cond_wait(&led->batch_done, &led->lock);
	pthread_mutex_unlock(&led->lock);
	if (me.rc != SBX_OK)
		return sbx__set_error(err, me.rc, "%s", me.message);
	return SBX_OK;
}

/* Takes the lock and joins the open batch (opening it if need be); on failure returns with
 * the lock released. */
static int batch_enter(sbx__ledger *led, sbx_error *err)
{
	take(led);
	int rc = batch_begin(led, err);
	if (rc != SBX_OK)
		give(led);
	return rc;
}

static int run_changes(sbx__ledger *led, sbx_error *err, int *changes, const char *what,
		       const char *sql, const char *types, va_list ap)
{
	int rc = batch_enter(led, err);
	if (rc != SBX_OK)
		return rc;
	rc = step_locked(led, err, changes, what, sql, types, ap);
	return batch_end(led, rc, err);
}

static int run_locked(sbx__ledger *led, sbx_error *err, const char *what, const char *sql,
		      const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	int rc = step_locked(led, err, NULL, what, sql, types, ap);
	va_end(ap);
	return rc;
}

static int run(sbx__ledger *led, sbx_error *err, const char *what, const char *sql,
	       const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	int rc = run_changes(led, err, NULL, what, sql, types, ap);
	va_end(ap);
	return rc;
}

static int run_counted(sbx__ledger *led, sbx_error *err, int *changes, const char *what,
		       const char *sql, const char *types, ...)
{
	va_list ap;
	va_start(ap, types);
	int rc = run_changes(led, err, changes, what, sql, types, ap);
	va_end(ap);
	return rc;
}

static int64_t now(void)
{
	return (int64_t)time(NULL);
}

/* Something that may free a place under a cap was recorded: wake this handle's waiters. */
static int changed(sbx__ledger *led, int rc)
{
	pthread_mutex_lock(&led->wake_lock);
	led->generation++;
	pthread_cond_broadcast(&led->woken);
	pthread_mutex_unlock(&led->wake_lock);
	return rc;
}

uint64_t sbx__ledger_generation(sbx__ledger *led)
{
	pthread_mutex_lock(&led->wake_lock);
	uint64_t g = led->generation;
	pthread_mutex_unlock(&led->wake_lock);
	return g;
}

void sbx__ledger_wait(sbx__ledger *led, uint64_t seen, int64_t until_ms)
{
	struct timespec ts = {(time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000L};
	pthread_mutex_lock(&led->wake_lock);
	while (led->generation == seen &&
	       pthread_cond_timedwait(&led->woken, &led->wake_lock, &ts) == 0)
		;
	pthread_mutex_unlock(&led->wake_lock);
}

#define INSERT_CREATING                                                                  \
	"INSERT INTO sandboxes (token, id, alias, data_source, owner_host, owner_pid,"   \
	" owner_start, run_id, created, expires, state, updated, actor_host, actor_pid," \
	" actor_start, config)"                                                          \
	" VALUES (?, '', ?, ?, ?, ?, ?, ?, ?, ?, 'creating', ?, ?, ?, ?, ?)"
#define INSERT_TYPES "ssssiisiiisiis"
#define INSERT_ARGS(r)                                                                         \
	(r)->token, (r)->alias, (r)->data_source, (r)->owner_host, (r)->owner_pid,             \
	    (r)->owner_start, (r)->run_id, (r)->created, (r)->expires, now(), (r)->actor_host, \
	    (r)->actor_pid, (r)->actor_start, (r)->config

int sbx__ledger_begin(sbx__ledger *led, const sbx__ledger_row *r, sbx_error *err)
{
	return run(led, err, "record create", INSERT_CREATING, INSERT_TYPES, INSERT_ARGS(r));
}

/* ---- caps: one transaction counts, takes a token and inserts the row */

/* The data source's rows gc would spare: running or paused ones whose owner lives and whose
 * TTL has not passed, creating ones whose creator lives. */
static int count_locked(sbx__ledger *led, const sbx__ledger_row *r, const char *this_host,
			sbx__ledger_admission *a, sbx_error *err)
{
	static const char sql[] =
	    "SELECT coalesce(sum(state <> 'creating'), 0), coalesce(sum(state = 'creating'), 0)"
	    " FROM sandboxes WHERE data_source = ?1 AND alias = ?2 AND state IN ('creating',"
	    " 'running', 'paused') AND CASE state WHEN 'creating' THEN"
	    " sbx_alive(?3, actor_host, actor_pid, actor_start) ELSE (expires = 0 OR expires > ?4)"
	    " AND sbx_alive(?3, owner_host, owner_pid, owner_start) END";
	sqlite3_stmt *st = NULL;
	int rc = SBX_OK;
	if (sqlite3_prepare_v2(led->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_error(led, err, "count sandboxes");
	sqlite3_bind_text(st, 1, r->data_source, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, r->alias, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, this_host, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, now());
	if (sqlite3_step(st) == SQLITE_ROW) {
		a->live = (uint64_t)sqlite3_column_int64(st, 0);
		a->starting = (uint64_t)sqlite3_column_int64(st, 1);
	} else {
		rc = db_error(led, err, "count sandboxes");
	}
	sqlite3_finalize(st);
	return rc;
}

/* Takes one create from the data source's bucket (refilled at caps->rate per second up to
 * caps->burst), or says in a->retry_ms when the bucket will hold one. */
static int take_token_locked(sbx__ledger *led, const sbx__ledger_row *r, const sbx__ledger_caps *c,
			     int64_t now_ms, sbx__ledger_admission *a, sbx_error *err)
{
	sqlite3_stmt *st = NULL;
	double tokens = c->burst;
	int64_t stamp = now_ms;
	if (sqlite3_prepare_v2(led->db,
			       "SELECT tokens, stamp_ms FROM create_rates WHERE data_source = ?"
			       " AND alias = ?",
			       -1, &st, NULL) != SQLITE_OK)
		return db_error(led, err, "read create rate");
	sqlite3_bind_text(st, 1, r->data_source, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, r->alias, -1, SQLITE_TRANSIENT);
	int step = sqlite3_step(st);
	if (step == SQLITE_ROW) {
		tokens = sqlite3_column_double(st, 0);
		int64_t then = sqlite3_column_int64(st, 1);
		/* A clock that went back (or another host's) refills nothing. */
		if (now_ms > then)
			tokens += (double)(now_ms - then) * c->rate / 1000.0;
		else
			stamp = then;
	}
	sqlite3_finalize(st);
	if (step != SQLITE_ROW && step != SQLITE_DONE)
		return db_error(led, err, "read create rate");
	if (tokens > c->burst)
		tokens = c->burst;
	if (tokens < 1.0) {
		double ms = (1.0 - tokens) * 1000.0 / c->rate;
		a->retry_ms = (int64_t)ms + 1;
		return SBX_OK;
	}
	a->retry_ms = 0;
	return run_locked(led, err, "take from create rate",
			  "INSERT INTO create_rates (data_source, alias, tokens, stamp_ms)"
			  " VALUES (?, ?, ?, ?) ON CONFLICT(data_source, alias) DO UPDATE SET"
			  " tokens = excluded.tokens, stamp_ms = excluded.stamp_ms",
			  "ssdi", r->data_source, r->alias, tokens - 1.0, stamp);
}

/* Inside the transaction: which cap, if any, keeps the create out. */
static int admit_locked(sbx__ledger *led, const sbx__ledger_row *r, const sbx__ledger_caps *c,
			const char *this_host, int64_t now_ms, sbx__ledger_admission *a,
			sbx_error *err)
{
	int rc = SBX_OK;
	if (c->max_live || c->max_starting)
		rc = count_locked(led, r, this_host, a, err);
	if (rc != SBX_OK)
		return rc;
	if (c->max_live && a->live + a->starting >= c->max_live) {
		a->cap = SBX__CAP_LIVE;
		return SBX_OK;
	}
	if (c->max_starting && a->starting >= c->max_starting) {
		a->cap = SBX__CAP_STARTING;
		return SBX_OK;
	}
	if (c->rate > 0)
		rc = take_token_locked(led, r, c, now_ms, a, err);
	if (rc != SBX_OK)
		return rc;
	if (a->retry_ms > 0) {
		a->cap = SBX__CAP_RATE;
		return SBX_OK;
	}
	rc = run_locked(led, err, "record create", INSERT_CREATING, INSERT_TYPES, INSERT_ARGS(r));
	if (rc == SBX_OK)
		a->admitted = 1;
	return rc;
}

int sbx__ledger_admit(sbx__ledger *led, const sbx__ledger_row *r, const sbx__ledger_caps *caps,
		      const char *this_host, int64_t now_ms, sbx__ledger_admission *a,
		      sbx_error *err)
{
	memset(a, 0, sizeof(*a));
	take(led);
	int rc = batch_begin(led, err);
	if (rc != SBX_OK) {
		give(led);
		return rc;
	}
	/* The count, the token and the row as one step of the batch: all or nothing. */
	rc = exec_sql(led, "SAVEPOINT admit", err);
	if (rc == SBX_OK) {
		rc = admit_locked(led, r, caps, this_host, now_ms, a, err);
		if (rc != SBX_OK && !sqlite3_get_autocommit(led->db))
			exec_sql(led, "ROLLBACK TO admit", NULL);
		if (!sqlite3_get_autocommit(led->db))
			exec_sql(led, "RELEASE admit", NULL);
	}
	rc = batch_end(led, rc, err);
	if (rc != SBX_OK)
		a->admitted = 0;
	return rc;
}

int sbx__ledger_confirm(sbx__ledger *led, const char *token, const char *id, sbx_error *err)
{
	return changed(
	    led, run(led, err, "confirm create",
		     "UPDATE sandboxes SET id = ?, state = 'running', updated = ?, actor_host = '',"
		     " actor_pid = 0, actor_start = 0 WHERE token = ?",
		     "sis", id, now(), token));
}

int sbx__ledger_fail(sbx__ledger *led, const char *token, const char *message, sbx_error *err)
{
	return changed(
	    led,
	    run(led, err, "record failed create",
		"UPDATE sandboxes SET state = 'failed', error = ?, updated = ? WHERE token = ?",
		"sis", message, now(), token));
}

int sbx__ledger_mark_deleting(sbx__ledger *led, const char *id, const sbx__ledger_actor *a,
			      sbx_error *err)
{
	return changed(
	    led,
	    run(led, err, "record delete",
		"UPDATE sandboxes SET state = 'deleting', updated = ?, actor_host = ?,"
		" actor_pid = ?, actor_start = ? WHERE id = ? AND state NOT IN ('gone', 'failed')",
		"isiis", now(), a->host, a->pid, a->start, id));
}

int sbx__ledger_undelete(sbx__ledger *led, const char *id, const sbx__ledger_actor *a,
			 sbx_error *err)
{
	return run(led, err, "record failed delete",
		   "UPDATE sandboxes SET state = 'running', updated = ?, actor_host = '',"
		   " actor_pid = 0, actor_start = 0 WHERE id = ? AND state = 'deleting' AND"
		   " actor_host = ? AND actor_pid = ? AND actor_start = ?",
		   "issii", now(), id, a->host, a->pid, a->start);
}

int sbx__ledger_claim(sbx__ledger *led, const sbx__ledger_row *seen, const sbx__ledger_actor *a,
		      int *claimed, sbx_error *err)
{
	*claimed = 0;
	return run_counted(led, err, claimed, "claim for gc",
			   "UPDATE sandboxes SET state = 'deleting', updated = ?, actor_host = ?,"
			   " actor_pid = ?, actor_start = ? WHERE token = ? AND id = ? AND"
			   " state = ? AND expires = ? AND owner_pid = ? AND owner_start = ? AND"
			   " actor_host = ? AND actor_pid = ? AND actor_start = ?",
			   "isiisssiiisii", now(), a->host, a->pid, a->start, seen->token, seen->id,
			   seen->state, seen->expires, seen->owner_pid, seen->owner_start,
			   seen->actor_host, seen->actor_pid, seen->actor_start);
}

int sbx__ledger_claim_orphan(sbx__ledger *led, const char *token, const char *id, const char *alias,
			     const sbx__ledger_actor *a, int *claimed, sbx_error *err)
{
	*claimed = 0;
	int64_t t = now();
	return run_counted(
	    led, err, claimed, "claim for gc",
	    "INSERT INTO sandboxes (token, id, alias, owner_host, created, state, updated,"
	    " actor_host, actor_pid, actor_start)"
	    " SELECT ?, ?, ?, ?, ?, 'deleting', ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM"
	    " sandboxes WHERE id = ? AND state IN ('creating', 'running', 'paused', 'deleting'))",
	    "ssssiisiis", token, id, alias, a->host, t, t, a->host, a->pid, a->start, id);
}

int sbx__ledger_finish(sbx__ledger *led, const char *token, const char *state, const char *message,
		       sbx_error *err)
{
	return changed(
	    led, run(led, err, "record gc outcome",
		     "UPDATE sandboxes SET state = ?, error = ?, updated = ?, actor_host = '',"
		     " actor_pid = 0, actor_start = 0 WHERE token = ?",
		     "ssis", state, message, now(), token));
}

int sbx__ledger_set_state(sbx__ledger *led, const char *id, const char *state, sbx_error *err)
{
	int rc = batch_enter(led, err);
	if (rc != SBX_OK)
		return rc;
	rc = run_locked(led, err, "update state",
			"UPDATE sandboxes SET state = ?, updated = ? WHERE id = ?", "sis", state,
			now(), id);
	/* A gone sandbox has no jobs: their rows go in the same write. */
	if (rc == SBX_OK && strcmp(state, SBX__LEDGER_GONE) == 0)
		rc = run_locked(led, err, "forget jobs", "DELETE FROM jobs WHERE sandbox_id = ?",
				"s", id);
	return changed(led, batch_end(led, rc, err));
}

int sbx__ledger_set_expiry(sbx__ledger *led, const char *id, int64_t expires, sbx_error *err)
{
	return run(led, err, "update expiry",
		   "UPDATE sandboxes SET expires = ?, updated = ? WHERE id = ?", "iis", expires,
		   now(), id);
}

int sbx__ledger_prune(sbx__ledger *led, int64_t before, sbx_error *err)
{
	return run(led, err, "prune",
		   "DELETE FROM sandboxes WHERE state IN ('gone', 'failed') AND updated < ?", "i",
		   before);
}

static void copy_col(char *dst, size_t cap, sqlite3_stmt *st, int col)
{
	const unsigned char *s = sqlite3_column_text(st, col);
	snprintf(dst, cap, "%s", s ? (const char *)s : "");
}

#define ROW_COLUMNS                                                                            \
	"SELECT token, id, alias, data_source, owner_host, owner_pid, owner_start, run_id,"    \
	" created, expires, state, error, actor_host, actor_pid, actor_start, updated, config" \
	" FROM sandboxes"

static void read_row(sqlite3_stmt *st, sbx__ledger_row *r)
{
	memset(r, 0, sizeof(*r));
	copy_col(r->token, sizeof(r->token), st, 0);
	copy_col(r->id, sizeof(r->id), st, 1);
	copy_col(r->alias, sizeof(r->alias), st, 2);
	copy_col(r->data_source, sizeof(r->data_source), st, 3);
	copy_col(r->owner_host, sizeof(r->owner_host), st, 4);
	r->owner_pid = sqlite3_column_int64(st, 5);
	r->owner_start = sqlite3_column_int64(st, 6);
	copy_col(r->run_id, sizeof(r->run_id), st, 7);
	r->created = sqlite3_column_int64(st, 8);
	r->expires = sqlite3_column_int64(st, 9);
	copy_col(r->state, sizeof(r->state), st, 10);
	copy_col(r->error, sizeof(r->error), st, 11);
	copy_col(r->actor_host, sizeof(r->actor_host), st, 12);
	r->actor_pid = sqlite3_column_int64(st, 13);
	r->actor_start = sqlite3_column_int64(st, 14);
	r->updated = sqlite3_column_int64(st, 15);
	copy_col(r->config, sizeof(r->config), st, 16);
}

int sbx__ledger_each(sbx__ledger *led, sbx__ledger_row_fn fn, void *ctx, sbx_error *err)
{
	/* Rows are read into memory first so fn may write to the ledger itself. */
	sbx__ledger_row *rows = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st = NULL;
	int rc = SBX_OK;
	take(led);
	if (sqlite3_prepare_v2(led->db, ROW_COLUMNS " ORDER BY created, rowid", -1, &st, NULL) !=
	    SQLITE_OK) {
		rc = db_error(led, err, "list");
		give(led);
		goto out;
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			sbx__ledger_row *nr = sbx__realloc(rows, ncap * sizeof(*rows));
			if (!nr) {
				rc = sbx__set_error(err, SBX_E_NOMEM, "ledger: out of memory");
				break;
			}
			rows = nr;
			cap = ncap;
		}
		read_row(st, &rows[n++]);
	}
	if (rc == SBX_OK && step != SQLITE_DONE)
		rc = db_error(led, err, "list");
	sqlite3_finalize(st);
	give(led);
	for (size_t i = 0; rc == SBX_OK && i < n; i++)
		rc = fn(ctx, &rows[i]);
out:
	sbx__free(rows);
	return rc;
}

int sbx__ledger_find(sbx__ledger *led, const char *id, sbx__ledger_row *out, sbx_error *err)
{
	sqlite3_stmt *st = NULL;
	int rc = SBX_OK;
	take(led);
	if (sqlite3_prepare_v2(led->db,
			       ROW_COLUMNS " WHERE id = ? ORDER BY created DESC, rowid DESC"
					   " LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK) {
		rc = db_error(led, err, "find");
		goto out;
	}
	sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
	int step = sqlite3_step(st);
	if (step == SQLITE_ROW)
		read_row(st, out);
	else if (step == SQLITE_DONE)
		rc = SBX_E_NOT_FOUND;
	else
		rc = db_error(led, err, "find");
out:
	sqlite3_finalize(st);
	give(led);
	return rc;
}

int64_t sbx__process_start_time(int64_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: fields start after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	/* After ')' come fields 3..; the start time is field 22. */
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return 0;
	return strtoll(p + 1, NULL, 10);
}

int sbx__ledger_owner_alive(const sbx__ledger_row *row, const char *this_host)
{
	if (row->owner_pid <= 0 || strcmp(row->owner_host, this_host) != 0)
		return 1;
	int64_t start = sbx__process_start_time(row->owner_pid);
	return start != 0 && start == row->owner_start;
}

int sbx__ledger_actor_alive(const sbx__ledger_row *row, const char *this_host)
{
	if (row->actor_pid <= 0)
		return -1;
	if (strcmp(row->actor_host, this_host) != 0)
		return 1;
	int64_t start = sbx__process_start_time(row->actor_pid);
	return start != 0 && start == row->actor_start;
}

/* ---- sessions */

void sbx__session_row_clear(sbx__session_row *row)
{
	sbx__free(row->assets);
	row->assets = NULL;
	row->assets_len = 0;
}

static int read_session(sqlite3_stmt *st, sbx__session_row *r)
{
	memset(r, 0, sizeof(*r));
	copy_col(r->user_id, sizeof(r->user_id), st, 0);
	copy_col(r->session_id, sizeof(r->session_id), st, 1);
	copy_col(r->sandbox_id, sizeof(r->sandbox_id), st, 2);
	copy_col(r->data_source, sizeof(r->data_source), st, 3);
	copy_col(r->image, sizeof(r->image), st, 4);
	r->ttl = sqlite3_column_int64(st, 5);
	copy_col(r->state, sizeof(r->state), st, 6);
	const void *blob = sqlite3_column_blob(st, 7);
	int len = sqlite3_column_bytes(st, 7);
	r->created = sqlite3_column_int64(st, 8);
	r->updated = sqlite3_column_int64(st, 9);
	if (blob && len > 0) {
		/* One NUL more, so a truncated blob still ends in a string. */
		r->assets = sbx__alloc((size_t)len + 1);
		if (!r->assets)
			return SBX_E_NOMEM;
		memcpy(r->assets, blob, (size_t)len);
		r->assets[len] = '\0';
		r->assets_len = (size_t)len;
	}
	return SBX_OK;
}

#define SESSION_COLUMNS                                                                   \
	"SELECT user_id, session_id, sandbox_id, data_source, image, ttl, state, assets," \
	" created, updated FROM sessions"

/* Reads the sessions matching (user, session), or all of them when user is NULL. */
static int select_sessions(sbx__ledger *led, const char *user, const char *session,
			   sbx__session_row **out, size_t *n_out, sbx_error *err)
{
	sbx__session_row *rows = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *st = NULL;
	int rc = SBX_OK;
	const char *sql = user ? SESSION_COLUMNS " WHERE user_id = ? AND session_id = ?"
			       : SESSION_COLUMNS " ORDER BY created, rowid";
	take(led);
	if (sqlite3_prepare_v2(led->db, sql, -1, &st, NULL) != SQLITE_OK) {
		rc = db_error(led, err, "read sessions");
		goto out;
	}
	if (user) {
		sqlite3_bind_text(st, 1, user, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 2, session, -1, SQLITE_TRANSIENT);
	}
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			sbx__session_row *nr = sbx__realloc(rows, ncap * sizeof(*rows));
			if (!nr) {
				rc = sbx__set_error(err, SBX_E_NOMEM, "ledger: out of memory");
				break;
			}
			rows = nr;
			cap = ncap;
		}
		if (read_session(st, &rows[n]) != SBX_OK) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "ledger: out of memory");
			break;
		}
		n++;
	}
	if (rc == SBX_OK && step != SQLITE_DONE)
		rc = db_error(led, err, "read sessions");
out:
	sqlite3_finalize(st);
	give(led);
	if (rc != SBX_OK) {
		sbx__session_rows_free(rows, n);
		rows = NULL;
		n = 0;
	}
	*out = rows;
	*n_out = n;
	return rc;
}

void sbx__session_rows_free(sbx__session_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sbx__session_row_clear(&rows[i]);
	sbx__free(rows);
}

int sbx__session_load(sbx__ledger *led, const char *user, const char *session,
		      sbx__session_row *out, sbx_error *err)
{
	sbx__session_row *rows = NULL;
	size_t n = 0;
	memset(out, 0, sizeof(*out));
	int rc = select_sessions(led, user, session, &rows, &n, err);
	if (rc != SBX_OK)
		return rc;
	if (n == 0) {
		sbx__free(rows);
		return SBX_E_NOT_FOUND;
	}
	*out = rows[0];
	for (size_t i = 1; i < n; i++)
		sbx__session_row_clear(&rows[i]);
	sbx__free(rows);
	return SBX_OK;
}

int sbx__session_all(sbx__ledger *led, sbx__session_row **rows, size_t *n, sbx_error *err)
{
	return select_sessions(led, NULL, NULL, rows, n, err);
}

int sbx__session_insert(sbx__ledger *led, const sbx__session_row *r, int *inserted, sbx_error *err)
{
	int64_t t = now();
	return run_counted(led, err, inserted, "record session",
			   "INSERT OR IGNORE INTO sessions (user_id, session_id, sandbox_id,"
			   " data_source, image, ttl, state, assets, created, updated)"
			   " VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
			   "sssssibii", r->user_id, r->session_id, r->sandbox_id, r->data_source,
			   r->image, r->ttl, (const void *)r->assets, r->assets_len, t, t);
}

int sbx__session_replace(sbx__ledger *led, const sbx__session_row *r, const char *old_id,
			 int *replaced, sbx_error *err)
{
	return run_counted(led, err, replaced, "update session",
			   "UPDATE sessions SET sandbox_id = ?, data_source = ?, image = ?,"
			   " ttl = ?, state = 'running', assets = ?, updated = ?"
			   " WHERE user_id = ? AND session_id = ? AND sandbox_id = ?",
			   "sssibisss", r->sandbox_id, r->data_source, r->image, r->ttl,
			   (const void *)r->assets, r->assets_len, now(), r->user_id, r->session_id,
			   old_id);
}

int sbx__session_set_state(sbx__ledger *led, const char *user, const char *session,
			   const char *state, sbx_error *err)
{
	return run(led, err, "update session state",
		   "UPDATE sessions SET state = ?, updated = ? WHERE user_id = ? AND"
		   " session_id = ?",
		   "siss", state, now(), user, session);
}

int sbx__session_set_assets(sbx__ledger *led, const char *user, const char *session,
			    const char *assets, size_t len, sbx_error *err)
{
	return run(led, err, "update session assets",
		   "UPDATE sessions SET assets = ?, updated = ? WHERE user_id = ? AND"
		   " session_id = ?",
		   "biss", (const void *)assets, len, now(), user, session);
}

int sbx__session_delete(sbx__ledger *led, const char *user, const char *session, int *deleted,
			sbx_error *err)
{
	return run_counted(led, err, deleted, "forget session",
			   "DELETE FROM sessions WHERE user_id = ? AND session_id = ?", "ss", user,
			   session);
}

/* ---- jobs */

int sbx__ledger_job_put(sbx__ledger *led, const sbx__job_row *r, sbx_error *err)
{
	return run(
	    led, err, "record job",
	    "INSERT INTO jobs (job_id, sandbox_id, state, pid, exit_code, signal, started_ms,"
	    " ended_ms, stdout_bytes, stderr_bytes, created, updated)"
	    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	    " ON CONFLICT(job_id) DO UPDATE SET state = excluded.state, pid = excluded.pid,"
	    " exit_code = excluded.exit_code, signal = excluded.signal,"
	    " started_ms = excluded.started_ms, ended_ms = excluded.ended_ms,"
	    " stdout_bytes = excluded.stdout_bytes, stderr_bytes = excluded.stderr_bytes,"
	    " updated = excluded.updated",
	    "sssiiiiiiiii", r->job_id, r->sandbox_id, r->state, r->pid, (int64_t)r->exit_code,
	    (int64_t)r->signal, r->started_ms, r->ended_ms, r->stdout_bytes, r->stderr_bytes, now(),
	    now());
}

int sbx__ledger_job_delete(sbx__ledger *led, const char *job_id, sbx_error *err)
{
	return run(led, err, "forget job", "DELETE FROM jobs WHERE job_id = ?", "s", job_id);
}

int sbx__ledger_jobs(sbx__ledger *led, const char *sandbox_id, sbx__job_row **rows, size_t *n,
		     sbx_error *err)
{
	*rows = NULL;
	*n = 0;
	size_t cap = 0;
	sqlite3_stmt *st = NULL;
	int rc = SBX_OK;
	take(led);
	if (sqlite3_prepare_v2(
		led->db,
		"SELECT job_id, sandbox_id, state, pid, exit_code, signal, started_ms,"
		" ended_ms, stdout_bytes, stderr_bytes FROM jobs WHERE sandbox_id = ?"
		" ORDER BY started_ms, rowid",
		-1, &st, NULL) != SQLITE_OK) {
		rc = db_error(led, err, "list jobs");
		goto out;
	}
	sqlite3_bind_text(st, 1, sandbox_id, -1, SQLITE_TRANSIENT);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		if (*n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			sbx__job_row *nr = sbx__realloc(*rows, ncap * sizeof(**rows));
			if (!nr) {
				rc = sbx__set_error(err, SBX_E_NOMEM, "ledger: out of memory");
				break;
			}
			*rows = nr;
			cap = ncap;
		}
		sbx__job_row *r = &(*rows)[(*n)++];
		memset(r, 0, sizeof(*r));
		copy_col(r->job_id, sizeof(r->job_id), st, 0);
		copy_col(r->sandbox_id, sizeof(r->sandbox_id), st, 1);
		copy_col(r->state, sizeof(r->state), st, 2);
		r->pid = sqlite3_column_int64(st, 3);
		r->exit_code = sqlite3_column_int(st, 4);
		r->signal = sqlite3_column_int(st, 5);
		r->started_ms = sqlite3_column_int64(st, 6);
		r->ended_ms = sqlite3_column_int64(st, 7);
		r->stdout_bytes = sqlite3_column_int64(st, 8);
		r->stderr_bytes = sqlite3_column_int64(st, 9);
	}
	if (rc == SBX_OK && step != SQLITE_DONE)
		rc = db_error(led, err, "list jobs");
out:
	sqlite3_finalize(st);
	give(led);
	if (rc != SBX_OK) {
		sbx__free(*rows);
		*rows = NULL;
		*n = 0;
	}
	return rc;
}

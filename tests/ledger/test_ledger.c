/* The ledger: rows survive, concurrent writers lose nothing, owners are judged alive by pid
 * and start time, and a schema from a newer sbx is refused. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "caps.h"
#include "ledger.h"

static char db_path[512];

static void fresh_db(const char *name)
{
	const char *dir = getenv("LEDGER_TMP");
	snprintf(db_path, sizeof(db_path), "%s/%s-%d.db", dir ? dir : "/tmp", name, (int)getpid());
	unlink(db_path);
	char wal[600];
	snprintf(wal, sizeof(wal), "%s-wal", db_path);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s-shm", db_path);
	unlink(wal);
}

static sbx__ledger_row row_for(const char *token)
{
	sbx__ledger_row r;
	memset(&r, 0, sizeof(r));
	snprintf(r.token, sizeof(r.token), "%s", token);
	snprintf(r.alias, sizeof(r.alias), "local");
	snprintf(r.data_source, sizeof(r.data_source), "default");
	snprintf(r.owner_host, sizeof(r.owner_host), "testhost");
	r.owner_pid = getpid();
	r.owner_start = sbx__process_start_time(getpid());
	snprintf(r.run_id, sizeof(r.run_id), "run-1");
	r.created = (int64_t)time(NULL);
	return r;
}

/* A new ledger file named for the test, open. */
static sbx__ledger *open_fresh(const char *name)
{
	fresh_db(name);
	sbx__ledger *led = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK, "%s", err.message);
	return led;
}

typedef struct collected {
	sbx__ledger_row rows[512];
	size_t n;
} collected;

static int collect(void *ctx, const sbx__ledger_row *row)
{
	collected *c = ctx;
	if (c->n < 512)
		c->rows[c->n++] = *row;
	return 0;
}

Test(ledger, create_confirm_fail_and_state_round_trip)
{
	sbx__ledger *led = open_fresh("roundtrip");
	sbx_error err = {0};
	sbx__ledger_row a = row_for("tok-a"), b = row_for("tok-b");
	cr_assert_eq(sbx__ledger_begin(led, &a, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_begin(led, &b, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "tok-a", "local:abc", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_fail(led, "tok-b", "local: create: disk full", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_set_state(led, "local:abc", SBX__LEDGER_PAUSED, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_set_expiry(led, "local:abc", 12345, &err), SBX_OK);
	sbx__ledger_close(led);

	/* Reopening sees what the first handle wrote. */
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK);
	collected c = {.n = 0};
	cr_assert_eq(sbx__ledger_each(led, collect, &c, &err), SBX_OK);
	cr_assert_eq(c.n, 2);
	cr_assert_str_eq(c.rows[0].token, "tok-a");
	cr_assert_str_eq(c.rows[0].id, "local:abc");
	cr_assert_str_eq(c.rows[0].state, "paused");
	cr_assert_eq(c.rows[0].expires, 12345);
	cr_assert_str_eq(c.rows[1].state, "failed");
	cr_assert_str_eq(c.rows[1].error, "local: create: disk full");
	cr_assert_str_eq(c.rows[1].id, "");

	/* Prune removes only finished rows. */
	cr_assert_eq(sbx__ledger_prune(led, (int64_t)time(NULL) + 10, &err), SBX_OK);
	c.n = 0;
	cr_assert_eq(sbx__ledger_each(led, collect, &c, &err), SBX_OK);
	cr_assert_eq(c.n, 1);
	cr_assert_str_eq(c.rows[0].token, "tok-a");
	sbx__ledger_close(led);
}

/* Writes of concurrent threads share commits (group commit), but each returns only once
 * committed: another connection sees the row at once. A write that fails (a duplicate token)
 * fails alone; the batch it ran in keeps the others' rows. */
#define GROUP_THREADS 32
#define GROUP_ROWS    20

typedef struct grouper {
	sbx__ledger *led;
	int t, bad;
	char why[600];
} grouper;

static void *group_writer(void *arg)
{
	grouper *g = arg;
	sbx__ledger *other = NULL;
	sbx_error err = {0};
	if (sbx__ledger_open(db_path, &other, &err) != SBX_OK) {
		snprintf(g->why, sizeof(g->why), "open: %s", err.message);
		g->bad++;
		return NULL;
	}
	for (int i = 0; i < GROUP_ROWS; i++) {
		char tok[64], id[64];
		snprintf(tok, sizeof(tok), "tok-%d-%d", g->t, i);
		snprintf(id, sizeof(id), "local:%d-%d", g->t, i);
		sbx__ledger_row r = row_for(tok);
		sbx__ledger_row seen;
		if (sbx__ledger_begin(g->led, &r, &err) != SBX_OK ||
		    sbx__ledger_confirm(g->led, tok, id, &err) != SBX_OK) {
			snprintf(g->why, sizeof(g->why), "%s: %s", tok, err.message);
			g->bad++;
		} else if (sbx__ledger_find(other, id, &seen, &err) != SBX_OK ||
			   strcmp(seen.state, "running") != 0) {
			snprintf(g->why, sizeof(g->why), "%s: not committed when confirm returned",
				 id);
			g->bad++;
		}
		if (i == GROUP_ROWS / 2) {
			memset(&err, 0, sizeof(err));
			if (sbx__ledger_begin(g->led, &r, &err) != SBX_E_LEDGER ||
			    !strstr(err.message, "UNIQUE")) {
				snprintf(g->why, sizeof(g->why), "duplicate %s: '%s'", tok,
					 err.message);
				g->bad++;
			}
		}
	}
	sbx__ledger_close(other);
	return NULL;
}

Test(ledger, concurrent_writes_share_commits_and_return_committed, .timeout = 120)
{
	sbx__ledger *led = open_fresh("group");
	sbx_error err = {0};
	static grouper g[GROUP_THREADS];
	pthread_t th[GROUP_THREADS];
	for (int t = 0; t < GROUP_THREADS; t++) {
		g[t] = (grouper){.led = led, .t = t};
		cr_assert_eq(pthread_create(&th[t], NULL, group_writer, &g[t]), 0);
	}
	for (int t = 0; t < GROUP_THREADS; t++) {
		pthread_join(th[t], NULL);
		cr_expect_eq(g[t].bad, 0, "thread %d: %d bad, last: %s", t, g[t].bad, g[t].why);
	}
	sbx__ledger_close(led);
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK);
	static collected c;
	c.n = 0;
	cr_assert_eq(sbx__ledger_each(led, collect, &c, &err), SBX_OK);
	cr_assert_eq(c.n, 512); /* collect keeps at most 512: count them in SQL too */
	sbx__ledger_close(led);
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	sqlite3_stmt *st = NULL;
	cr_assert_eq(sqlite3_prepare_v2(db,
					"SELECT count(*), sum(state = 'running') FROM sandboxes",
					-1, &st, NULL),
		     SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_eq(sqlite3_column_int(st, 0), GROUP_THREADS * GROUP_ROWS);
	cr_assert_eq(sqlite3_column_int(st, 1), GROUP_THREADS * GROUP_ROWS);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

Test(ledger, eight_processes_writing_at_once_lose_no_row)
{
	sbx__ledger *led = open_fresh("concurrent");
	sbx_error err = {0};
	sbx__ledger_close(led);
	pid_t kids[8];
	for (int k = 0; k < 8; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			sbx__ledger *l = NULL;
			if (sbx__ledger_open(db_path, &l, NULL) != SBX_OK)
				_exit(10);
			for (int i = 0; i < 50; i++) {
				char tok[40], id[64];
				snprintf(tok, sizeof(tok), "p%d-%d", k, i);
				snprintf(id, sizeof(id), "local:p%d-%d", k, i);
				sbx__ledger_row r = row_for(tok);
				if (sbx__ledger_begin(l, &r, NULL) != SBX_OK ||
				    sbx__ledger_confirm(l, tok, id, NULL) != SBX_OK)
					_exit(11);
			}
			sbx__ledger_close(l);
			_exit(0);
		}
	}
	for (int k = 0; k < 8; k++) {
		int st = 0;
		cr_assert_eq(waitpid(kids[k], &st, 0), kids[k]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed: %d", k, st);
	}
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK);
	collected c = {.n = 0};
	cr_assert_eq(sbx__ledger_each(led, collect, &c, &err), SBX_OK);
	cr_assert_eq(c.n, 400);
	for (size_t i = 0; i < c.n; i++) {
		cr_assert_str_eq(c.rows[i].state, "running");
		cr_assert_str_eq(c.rows[i].id + strlen("local:"), c.rows[i].token);
	}
	sbx__ledger_close(led);
}

/* Eight processes open one ledger that none has made yet: turning it to WAL races, and SQLite
 * answers the losers SQLITE_BUSY without its busy handler. Every opener must still get in.
 * Without the retry a few openers in a thousand lost here: 200 rounds of 8 catch it more
 * often than not. */
Test(ledger, eight_processes_opening_a_new_ledger_at_once_all_get_in)
{
	for (int round = 0; round < 200; round++) {
		fresh_db("fresh-open");
		pid_t kids[8];
		for (int k = 0; k < 8; k++) {
			kids[k] = fork();
			if (kids[k] == 0) {
				sbx__ledger *l = NULL;
				sbx_error e = {0};
				if (sbx__ledger_open(db_path, &l, &e) != SBX_OK) {
					fprintf(stderr, "opener %d: %s\n", k, e.message);
					_exit(10);
				}
				sbx__ledger_row r = row_for("tok");
				snprintf(r.token, sizeof(r.token), "r%d-p%d", round, k);
				int rc = sbx__ledger_begin(l, &r, NULL);
				sbx__ledger_close(l);
				_exit(rc == SBX_OK ? 0 : 11);
			}
		}
		for (int k = 0; k < 8; k++) {
			int st = 0;
			cr_assert_eq(waitpid(kids[k], &st, 0), kids[k]);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "round %d opener %d: %d",
				  round, k, st);
		}
		sbx__ledger *led = NULL;
		sbx_error err = {0};
		cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK, "%s", err.message);
		collected c = {.n = 0};
		cr_assert_eq(sbx__ledger_each(led, collect, &c, &err), SBX_OK);
		cr_assert_eq(c.n, 8);
		sbx__ledger_close(led);
	}
}

Test(ledger, owner_is_alive_only_with_same_pid_and_start_time)
{
	sbx__ledger_row r = row_for("x");
	cr_assert(sbx__ledger_owner_alive(&r, "testhost"));
	r.owner_start += 1; /* a reused pid has another start time */
	cr_assert_not(sbx__ledger_owner_alive(&r, "testhost"));
	pid_t kid = fork();
	if (kid == 0)
		_exit(0);
	waitpid(kid, NULL, 0);
	r.owner_pid = kid;
	r.owner_start = 1;
	cr_assert_not(sbx__ledger_owner_alive(&r, "testhost"));
	/* Detached rows and rows from other hosts are governed by TTL only. */
	r.owner_pid = 0;
	cr_assert(sbx__ledger_owner_alive(&r, "testhost"));
	r.owner_pid = kid;
	cr_assert(sbx__ledger_owner_alive(&r, "otherhost"));
}

Test(ledger, schema_from_a_newer_sbx_is_refused_with_advice)
{
	fresh_db("newer");
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	sbx__ledger *led = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_E_LEDGER);
	cr_assert_null(led);
	char want[700];
	snprintf(want, sizeof(want),
		 "%s: ledger: schema version 99 is newer than this sbx (%d); use a newer sbx or "
		 "another SBX_STATE_DIR",
		 db_path, SBX__LEDGER_SCHEMA_VERSION);
	cr_assert_str_eq(err.message, want);
}

static sbx__job_row job_for(const char *job_id, const char *sandbox_id)
{
	sbx__job_row j;
	memset(&j, 0, sizeof(j));
	snprintf(j.job_id, sizeof(j.job_id), "%s", job_id);
	snprintf(j.sandbox_id, sizeof(j.sandbox_id), "%s", sandbox_id);
	snprintf(j.state, sizeof(j.state), "running");
	j.pid = 4242;
	j.started_ms = 1000;
	return j;
}

Test(ledger, state_gone_drops_only_that_sandboxs_jobs)
{
	sbx__ledger *led = open_fresh("gone");
	sbx_error err = {0};
	const char *boxes[][2] = {{"tok-a", "local:aa"}, {"tok-b", "local:bb"}};
	for (size_t i = 0; i < 2; i++) {
		sbx__ledger_row row = row_for(boxes[i][0]);
		cr_assert_eq(sbx__ledger_begin(led, &row, &err), SBX_OK, "%s", err.message);
		cr_assert_eq(sbx__ledger_confirm(led, boxes[i][0], boxes[i][1], &err), SBX_OK);
	}
	const char *jobs[][2] = {{"j1", "local:aa"}, {"j2", "local:aa"}, {"j3", "local:bb"}};
	for (size_t i = 0; i < 3; i++) {
		sbx__job_row j = job_for(jobs[i][0], jobs[i][1]);
		cr_assert_eq(sbx__ledger_job_put(led, &j, &err), SBX_OK, "%s", err.message);
	}
	cr_assert_eq(sbx__ledger_set_state(led, "local:aa", SBX__LEDGER_GONE, &err), SBX_OK, "%s",
		     err.message);
	/* An id with no row is not an error: the destroy of a sandbox the ledger never saw. */
	cr_assert_eq(sbx__ledger_set_state(led, "local:none", SBX__LEDGER_GONE, &err), SBX_OK, "%s",
		     err.message);
	sbx__ledger_close(led);

	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK);
	sbx__ledger_row r;
	cr_assert_eq(sbx__ledger_find(led, "local:aa", &r, &err), SBX_OK);
	cr_assert_str_eq(r.state, "gone");
	cr_assert_eq(sbx__ledger_find(led, "local:bb", &r, &err), SBX_OK);
	cr_assert_str_eq(r.state, "running");
	sbx__job_row *rows = NULL;
	size_t n = 99;
	cr_assert_eq(sbx__ledger_jobs(led, "local:aa", &rows, &n, &err), SBX_OK);
	cr_assert_eq(n, 0);
	sbx__free(rows);
	cr_assert_eq(sbx__ledger_jobs(led, "local:bb", &rows, &n, &err), SBX_OK);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(rows[0].job_id, "j3");
	sbx__free(rows);
	sbx__ledger_close(led);
}

Test(ledger, gc_claims_only_a_row_unchanged_since_it_was_read)
{
	sbx__ledger *led = open_fresh("claim");
	sbx_error err = {0};
	sbx__ledger_row r = row_for("tok-claim");
	r.expires = 100;
	cr_assert_eq(sbx__ledger_begin(led, &r, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx__ledger_confirm(led, "tok-claim", "local:aa", &err), SBX_OK);
	sbx__ledger_row seen;
	cr_assert_eq(sbx__ledger_find(led, "local:aa", &seen, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(seen.state, "running");
	cr_assert_eq(seen.expires, 100);
	/* Another process extends the TTL after gc read the row: the claim is lost. */
	cr_assert_eq(sbx__ledger_set_expiry(led, "local:aa", 200, &err), SBX_OK);
	sbx__ledger_actor gc = {"testhost", 4242, 77};
	int claimed = -1;
	cr_assert_eq(sbx__ledger_claim(led, &seen, &gc, &claimed, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(claimed, 0);
	/* Read again, the claim holds, and names gc as the deleter. */
	cr_assert_eq(sbx__ledger_find(led, "local:aa", &seen, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_claim(led, &seen, &gc, &claimed, &err), SBX_OK);
	cr_assert_eq(claimed, 1);
	sbx__ledger_row now;
	cr_assert_eq(sbx__ledger_find(led, "local:aa", &now, &err), SBX_OK);
	cr_assert_str_eq(now.state, "deleting");
	cr_assert_str_eq(now.actor_host, "testhost");
	cr_assert_eq(now.actor_pid, 4242);
	cr_assert_eq(now.actor_start, 77);
	/* A second gc holding the old copy loses. */
	cr_assert_eq(sbx__ledger_claim(led, &seen, &gc, &claimed, &err), SBX_OK);
	cr_assert_eq(claimed, 0);
	cr_assert_eq(
	    sbx__ledger_finish(led, "tok-claim", "gone", "reaped by gc: ttl expired", &err),
	    SBX_OK);
	cr_assert_eq(sbx__ledger_find(led, "local:aa", &now, &err), SBX_OK);
	cr_assert_str_eq(now.state, "gone");
	cr_assert_str_eq(now.error, "reaped by gc: ttl expired");
	cr_assert_eq(now.actor_pid, 0);
	sbx__ledger_close(led);
}

Test(ledger, an_orphan_is_claimed_only_while_no_live_row_holds_its_id)
{
	sbx__ledger *led = open_fresh("orphan");
	sbx_error err = {0};
	sbx__ledger_row r = row_for("tok-live");
	cr_assert_eq(sbx__ledger_begin(led, &r, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "tok-live", "local:bb", &err), SBX_OK);
	sbx__ledger_actor gc = {"testhost", 4242, 77};
	int claimed = -1;
	/* The create was confirmed after gc read the ledger: the id is held, no claim. */
	cr_assert_eq(
	    sbx__ledger_claim_orphan(led, "gc-1", "local:bb", "local", &gc, &claimed, &err), SBX_OK,
	    "%s", err.message);
	cr_assert_eq(claimed, 0);
	/* Once its row is gone, gc may claim it, once. */
	cr_assert_eq(sbx__ledger_set_state(led, "local:bb", "gone", &err), SBX_OK);
	cr_assert_eq(
	    sbx__ledger_claim_orphan(led, "gc-2", "local:bb", "local", &gc, &claimed, &err),
	    SBX_OK);
	cr_assert_eq(claimed, 1);
	cr_assert_eq(
	    sbx__ledger_claim_orphan(led, "gc-3", "local:bb", "local", &gc, &claimed, &err),
	    SBX_OK);
	cr_assert_eq(claimed, 0);
	/* A destroy that fails gives the row back as it was before the delete began. */
	sbx__ledger_row b = row_for("tok-undo");
	cr_assert_eq(sbx__ledger_begin(led, &b, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "tok-undo", "local:cc", &err), SBX_OK);
	sbx__ledger_actor me = {"testhost", getpid(), 5};
	cr_assert_eq(sbx__ledger_mark_deleting(led, "local:cc", &me, &err), SBX_OK);
	sbx__ledger_row now;
	cr_assert_eq(sbx__ledger_find(led, "local:cc", &now, &err), SBX_OK);
	cr_assert_str_eq(now.state, "deleting");
	cr_assert_eq(now.actor_pid, getpid());
	cr_assert_eq(sbx__ledger_undelete(led, "local:cc", &me, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_find(led, "local:cc", &now, &err), SBX_OK);
	cr_assert_str_eq(now.state, "running");
	cr_assert_eq(sbx__ledger_find(led, "local:none", &now, &err), SBX_E_NOT_FOUND);
	sbx__ledger_close(led);
}

/* ---- caps across processes */

/* A row created by this process (the actor) for data source `ds`. */
static sbx__ledger_row creating_row(const char *token, const char *ds)
{
	sbx__ledger_row r = row_for(token);
	snprintf(r.data_source, sizeof(r.data_source), "%s", ds);
	snprintf(r.actor_host, sizeof(r.actor_host), "testhost");
	r.actor_pid = getpid();
	r.actor_start = sbx__process_start_time(getpid());
	return r;
}

static pid_t dead_pid(void)
{
	pid_t kid = fork();
	if (kid == 0)
		_exit(0);
	waitpid(kid, NULL, 0);
	return kid;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(ledger, caps_count_only_the_rows_gc_would_spare)
{
	sbx__ledger *led = open_fresh("caps-count");
	sbx_error err = {0};
	pid_t gone = dead_pid();
	/* Counted: a running row of a live owner, a detached one, one that is creating. */
	sbx__ledger_row mine = creating_row("mine", "ds"), det = creating_row("det", "ds");
	det.owner_pid = 0;
	cr_assert_eq(sbx__ledger_begin(led, &mine, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "mine", "local:mine", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_begin(led, &det, &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "det", "local:det", &err), SBX_OK);
	sbx__ledger_row flight = creating_row("flight", "ds");
	cr_assert_eq(sbx__ledger_begin(led, &flight, &err), SBX_OK);
	/* Not counted: a dead owner's, an expired one, a create whose creator died, a gone
	 * one, another data source's, another alias's. */
	sbx__ledger_row dead = creating_row("dead", "ds"), old = creating_row("old", "ds");
	dead.owner_pid = gone;
	old.expires = 100;
	sbx__ledger_row stuck = creating_row("stuck", "ds"), done = creating_row("done", "ds");
	stuck.actor_pid = gone;
	sbx__ledger_row other = creating_row("other", "other-ds"), alias = creating_row("al", "ds");
	snprintf(alias.alias, sizeof(alias.alias), "docker");
	const sbx__ledger_row *skip[] = {&dead, &old, &stuck, &done, &other, &alias};
	for (size_t i = 0; i < 6; i++)
		cr_assert_eq(sbx__ledger_begin(led, skip[i], &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx__ledger_confirm(led, "dead", "local:dead", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "old", "local:old", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "done", "local:done", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_set_state(led, "local:done", "gone", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_confirm(led, "other", "local:other", &err), SBX_OK);

	sbx__ledger_caps caps = {.max_live = 4};
	sbx__ledger_admission a;
	sbx__ledger_row next = creating_row("next", "ds");
	cr_assert_eq(sbx__ledger_admit(led, &next, &caps, "testhost", 0, &a, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(a.admitted, 1);
	cr_assert_eq(a.live, 2);
	cr_assert_eq(a.starting, 1);
	/* Now 2 running and 2 creating: full. */
	sbx__ledger_row over = creating_row("over", "ds");
	cr_assert_eq(sbx__ledger_admit(led, &over, &caps, "testhost", 0, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 0);
	cr_assert_eq(a.cap, SBX__CAP_LIVE);
	cr_assert_eq(a.live + a.starting, 4);
	/* A refused create leaves no row. */
	collected c = {.n = 0};
	cr_assert_eq(sbx__ledger_each(led, collect, &c, &err), SBX_OK);
	for (size_t i = 0; i < c.n; i++)
		cr_assert_str_neq(c.rows[i].token, "over");
	/* max_starting counts only the creates in flight. */
	sbx__ledger_caps starting = {.max_starting = 2};
	cr_assert_eq(sbx__ledger_admit(led, &over, &starting, "testhost", 0, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 0);
	cr_assert_eq(a.cap, SBX__CAP_STARTING);
	cr_assert_eq(sbx__ledger_confirm(led, "next", "local:next", &err), SBX_OK);
	cr_assert_eq(sbx__ledger_admit(led, &over, &starting, "testhost", 0, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 1);
	sbx__ledger_close(led);
}

Test(ledger, caps_rate_is_a_token_bucket_shared_by_every_handle)
{
	sbx__ledger *led = open_fresh("caps-rate");
	sbx__ledger *other = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &other, &err), SBX_OK);
	sbx__ledger_caps caps = {.rate = 2, .burst = 2};
	sbx__ledger_admission a;
	char tok[16];
	int64_t t = 1000000;
	for (int i = 0; i < 2; i++) {
		snprintf(tok, sizeof(tok), "b%d", i);
		sbx__ledger_row r = creating_row(tok, "ds");
		cr_assert_eq(sbx__ledger_admit(i ? other : led, &r, &caps, "testhost", t, &a, &err),
			     SBX_OK, "%s", err.message);
		cr_assert_eq(a.admitted, 1, "burst create %d", i);
	}
	sbx__ledger_row r = creating_row("b2", "ds");
	cr_assert_eq(sbx__ledger_admit(other, &r, &caps, "testhost", t, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 0);
	cr_assert_eq(a.cap, SBX__CAP_RATE);
	cr_assert_eq(a.retry_ms, 501);
	cr_assert_eq(sbx__ledger_admit(led, &r, &caps, "testhost", t + 250, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 0);
	cr_assert_eq(a.retry_ms, 251);
	cr_assert_eq(sbx__ledger_admit(led, &r, &caps, "testhost", t + 500, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 1);
	/* A create refused by another cap takes no token: at t + 1000 one has refilled. */
	sbx__ledger_caps full = {.max_live = 1, .rate = 2, .burst = 2};
	sbx__ledger_row s = creating_row("b3", "ds");
	cr_assert_eq(sbx__ledger_admit(led, &s, &full, "testhost", t + 1000, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 0);
	cr_assert_eq(a.cap, SBX__CAP_LIVE);
	cr_assert_eq(sbx__ledger_admit(led, &s, &caps, "testhost", t + 1000, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 1);
	/* A clock that goes back refills nothing and loses nothing. */
	sbx__ledger_row u = creating_row("b4", "ds");
	cr_assert_eq(sbx__ledger_admit(led, &u, &caps, "testhost", t, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 0);
	cr_assert_eq(a.cap, SBX__CAP_RATE);
	sbx__ledger_close(other);
	sbx__ledger_close(led);
}

Test(ledger, eight_processes_racing_for_five_places_get_exactly_five)
{
	sbx__ledger *led = open_fresh("caps-race");
	sbx__ledger_close(led);
	/* Each racer reports how many places it got, then stays alive (its creates in flight
	 * count only while it lives) until the parent closes `hold`. */
	int report[2], hold[2];
	cr_assert_eq(pipe(report), 0);
	cr_assert_eq(pipe(hold), 0);
	pid_t kids[8];
	for (int k = 0; k < 8; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			close(report[0]);
			close(hold[1]);
			sbx__ledger *l = NULL;
			char got = 0;
			if (sbx__ledger_open(db_path, &l, NULL) != SBX_OK)
				_exit(100);
			sbx__ledger_caps caps = {.max_live = 5};
			for (int i = 0; i < 20; i++) {
				char tok[40];
				snprintf(tok, sizeof(tok), "p%d-%d", k, i);
				sbx__ledger_row r = creating_row(tok, "ds");
				sbx__ledger_admission a;
				if (sbx__ledger_admit(l, &r, &caps, "testhost", 0, &a, NULL) !=
				    SBX_OK)
					_exit(101);
				got = (char)(got + a.admitted);
			}
			if (write(report[1], &got, 1) != 1)
				_exit(102);
			char c;
			while (read(hold[0], &c, 1) > 0)
				;
			sbx__ledger_close(l);
			_exit(0);
		}
	}
	close(report[1]);
	close(hold[0]);
	int total = 0;
	for (int k = 0; k < 8; k++) {
		char got = 0;
		cr_assert_eq(read(report[0], &got, 1), 1, "racer %d gave no report", k);
		total += got;
	}
	close(hold[1]);
	close(report[0]);
	for (int k = 0; k < 8; k++) {
		int st = 0;
		cr_assert_eq(waitpid(kids[k], &st, 0), kids[k]);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "racer %d: %d", k, st);
	}
	cr_assert_eq(total, 5);
	/* The racers are gone, so their creates no longer count. */
	sbx__ledger_caps caps = {.max_live = 5};
	sbx__ledger_admission a;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK);
	sbx__ledger_row r = creating_row("after", "ds");
	cr_assert_eq(sbx__ledger_admit(led, &r, &caps, "testhost", 0, &a, &err), SBX_OK);
	cr_assert_eq(a.admitted, 1);
	cr_assert_eq(a.starting, 0);
	sbx__ledger_close(led);
}

static sbx__policy policy_with(uint64_t max_live, double rate, uint64_t burst)
{
	sbx__policy p;
	memset(&p, 0, sizeof(p));
	p.max_concurrency = max_live;
	p.create_rate = rate;
	p.create_burst = burst;
	return p;
}

Test(ledger, caps_admit_refuses_at_once_without_a_wait)
{
	sbx__ledger *led = open_fresh("caps-now");
	sbx__policy p = policy_with(1, 0, 0);
	sbx_error err = {0};
	sbx__ledger_row a = creating_row("a", "ds"), b = creating_row("b", "ds");
	cr_assert_eq(sbx__caps_admit(led, &p, &a, 0, &err), SBX_OK, "%s", err.message);
	int64_t t0 = mono_ms();
	cr_assert_eq(sbx__caps_admit(led, &p, &b, 0, &err), SBX_E_LIMIT);
	cr_assert_lt(mono_ms() - t0, 5000);
	cr_assert_str_eq(err.message, "create: data source 'ds' has 1 live sandboxes, its "
				      "max_concurrency; destroy one first");
	sbx__policy s = policy_with(0, 0, 0);
	s.max_starting = 1;
	cr_assert_eq(sbx__caps_admit(led, &s, &b, 0, &err), SBX_E_LIMIT);
	cr_assert_str_eq(err.message, "create: data source 'ds' has 1 creates in flight, its "
				      "max_starting; try again when one has finished");
	sbx__policy r = policy_with(0, 0.5, 0);
	cr_assert_eq(sbx__caps_admit(led, &r, &b, 0, &err), SBX_OK);
	sbx__ledger_row c = creating_row("c", "ds");
	cr_assert_eq(sbx__caps_admit(led, &r, &c, 0, &err), SBX_E_LIMIT);
	cr_assert(strncmp(err.message,
			  "create: data source 'ds' is at its create_rate (0.5 per second, burst "
			  "1); the next create can start in ",
			  strlen("create: data source 'ds' is at its create_rate (0.5 per "
				 "second, burst 1); the next create can start in ")) == 0,
		  "%s", err.message);
	sbx__ledger_close(led);
}

Test(ledger, caps_admit_waits_out_the_rate_and_gives_up_at_the_deadline)
{
	sbx__ledger *led = open_fresh("caps-wait");
	sbx__policy p = policy_with(0, 20, 1);
	sbx_error err = {0};
	int64_t t0 = mono_ms();
	for (int i = 0; i < 5; i++) {
		char tok[16];
		snprintf(tok, sizeof(tok), "w%d", i);
		sbx__ledger_row r = creating_row(tok, "ds");
		cr_assert_eq(sbx__caps_admit(led, &p, &r, 60, &err), SBX_OK, "%s", err.message);
	}
	/* Four waits of at least 50 ms each (the bucket starts full with one). */
	cr_assert_geq(mono_ms() - t0, 200);
	sbx__policy full = policy_with(5, 0, 0);
	sbx__ledger_row x = creating_row("x", "ds");
	t0 = mono_ms();
	cr_assert_eq(sbx__caps_admit(led, &full, &x, 0.3, &err), SBX_E_LIMIT);
	int64_t took = mono_ms() - t0;
	cr_assert_geq(took, 300);
	cr_assert_lt(took, 30000);
	cr_assert(strstr(err.message, "has 5 live sandboxes, its max_concurrency; destroy one "
				      "first (waited 0.") != NULL,
		  "%s", err.message);
	sbx__ledger_close(led);
}

typedef struct freer {
	sbx__ledger *led;
	const char *token;
} freer;

static void *free_later(void *arg)
{
	freer *f = arg;
	struct timespec ts = {0, 200 * 1000000L};
	nanosleep(&ts, NULL);
	sbx__ledger_fail(f->led, f->token, "gave up", NULL);
	return NULL;
}

Test(ledger, caps_admit_wakes_when_this_process_frees_a_place)
{
	sbx__ledger *led = open_fresh("caps-wake");
	sbx__policy p = policy_with(1, 0, 0);
	sbx_error err = {0};
	sbx__ledger_row a = creating_row("a", "ds"), b = creating_row("b", "ds");
	cr_assert_eq(sbx__caps_admit(led, &p, &a, 0, &err), SBX_OK);
	pthread_t th;
	freer f = {led, "a"};
	cr_assert_eq(pthread_create(&th, NULL, free_later, &f), 0);
	int64_t t0 = mono_ms();
	cr_assert_eq(sbx__caps_admit(led, &p, &b, 120, &err), SBX_OK, "%s", err.message);
	cr_assert_geq(mono_ms() - t0, 150);
	pthread_join(th, NULL);
	collected c = {.n = 0};
	cr_assert_eq(sbx__ledger_each(led, collect, &c, &err), SBX_OK);
	cr_assert_eq(c.n, 2);
	cr_assert_str_eq(c.rows[1].token, "b");
	cr_assert_str_eq(c.rows[1].state, "creating");
	sbx__ledger_close(led);
}

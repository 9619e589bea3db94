/* The ledger: rows survive, concurrent writers lose nothing, owners are judged alive by pid
 * and start time, and a schema from a newer sbx is refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

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
	fresh_db("roundtrip");
	sbx__ledger *led = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK, "%s", err.message);
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

Test(ledger, eight_processes_writing_at_once_lose_no_row)
{
	fresh_db("concurrent");
	sbx__ledger *led = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK, "%s", err.message);
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

Test(ledger, gc_claims_only_a_row_unchanged_since_it_was_read)
{
	fresh_db("claim");
	sbx__ledger *led = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK, "%s", err.message);
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
	fresh_db("orphan");
	sbx__ledger *led = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(db_path, &led, &err), SBX_OK, "%s", err.message);
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

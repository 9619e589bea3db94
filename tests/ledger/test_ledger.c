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
		 "%s: ledger: schema version 99 is newer than this sbx (2); use a newer sbx or "
		 "another SBX_STATE_DIR",
		 db_path);
	cr_assert_str_eq(err.message, want);
}

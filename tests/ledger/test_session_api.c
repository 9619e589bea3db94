/* Sessions at the C level: the ledger's schema 1 -> 2 migration keeps sandbox rows, the
 * sessions table's insert and replace lose cleanly to a concurrent writer, and the host API
 * against the `ok` fixture plugin (no pause op) reports each outcome and error exactly. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "ledger.h"

static char path[512];

static const char *tmp_dir(void)
{
	const char *dir = getenv("LEDGER_TMP");
	return dir ? dir : "/tmp";
}

static void fresh(const char *name)
{
	snprintf(path, sizeof(path), "%s/%s-%d", tmp_dir(), name, (int)getpid());
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	cr_assert_eq(system(cmd), 0);
}

Test(session_ledger, migration_from_schema_1_keeps_rows_and_adds_sessions)
{
	fresh("v1.db");
	sqlite3 *db = NULL;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	const char *v1 =
	    "CREATE TABLE sandboxes (token TEXT PRIMARY KEY, id TEXT NOT NULL DEFAULT"
	    " '', alias TEXT NOT NULL, data_source TEXT NOT NULL DEFAULT '',"
	    " owner_host TEXT NOT NULL DEFAULT '', owner_pid INTEGER NOT NULL DEFAULT"
	    " 0, owner_start INTEGER NOT NULL DEFAULT 0, run_id TEXT NOT NULL DEFAULT"
	    " '', created INTEGER NOT NULL, expires INTEGER NOT NULL DEFAULT 0, state"
	    " TEXT NOT NULL, error TEXT NOT NULL DEFAULT '', updated INTEGER NOT NULL);"
	    "CREATE INDEX sandboxes_id ON sandboxes(id);"
	    "INSERT INTO sandboxes (token, id, alias, created, state, updated)"
	    " VALUES ('t1', 'local:aa', 'local', 5, 'running', 5);"
	    "PRAGMA user_version = 1;";
	cr_assert_eq(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	sbx__ledger *led = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__ledger_open(path, &led, &err), SBX_OK, "%s", err.message);
	sbx__session_row r;
	memset(&r, 0, sizeof(r));
	snprintf(r.user_id, sizeof(r.user_id), "u");
	snprintf(r.session_id, sizeof(r.session_id), "s");
	snprintf(r.sandbox_id, sizeof(r.sandbox_id), "local:aa");
	static const char blob[] = "/h/a\0in/a\0/h/b\0in/b";
	r.assets = (char *)blob;
	r.assets_len = sizeof(blob);
	int n = -1;
	cr_assert_eq(sbx__session_insert(led, &r, &n, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(n, 1);
	/* A second insert of the same key loses. */
	snprintf(r.sandbox_id, sizeof(r.sandbox_id), "local:bb");
	cr_assert_eq(sbx__session_insert(led, &r, &n, &err), SBX_OK);
	cr_assert_eq(n, 0);
	/* A replace that expects the wrong old id loses; the right one wins. */
	cr_assert_eq(sbx__session_replace(led, &r, "local:zz", &n, &err), SBX_OK);
	cr_assert_eq(n, 0);
	cr_assert_eq(sbx__session_replace(led, &r, "local:aa", &n, &err), SBX_OK);
	cr_assert_eq(n, 1);
	sbx__ledger_close(led);

	cr_assert_eq(sbx__ledger_open(path, &led, &err), SBX_OK);
	sbx__session_row got;
	cr_assert_eq(sbx__session_load(led, "u", "s", &got, &err), SBX_OK);
	cr_assert_str_eq(got.sandbox_id, "local:bb");
	cr_assert_str_eq(got.state, "running");
	cr_assert_eq(got.assets_len, sizeof(blob));
	cr_assert_eq(memcmp(got.assets, blob, sizeof(blob)), 0);
	sbx__session_row_clear(&got);
	cr_assert_eq(sbx__session_load(led, "u", "other", &got, &err), SBX_E_NOT_FOUND);
	cr_assert_eq(sbx__session_delete(led, "u", "s", &n, &err), SBX_OK);
	cr_assert_eq(n, 1);
	cr_assert_eq(sbx__session_delete(led, "u", "s", &n, &err), SBX_OK);
	cr_assert_eq(n, 0);
	sbx__ledger_close(led);

	/* The schema-1 row is still there and the version is the current one. */
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *st = NULL;
	cr_assert_eq(
	    sqlite3_prepare_v2(db,
			       "SELECT (SELECT count(*) FROM sandboxes WHERE id ="
			       " 'local:aa'), (SELECT user_version FROM pragma_user_version)",
			       -1, &st, NULL),
	    SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	cr_assert_eq(sqlite3_column_int(st, 0), 1);
	cr_assert_eq(sqlite3_column_int(st, 1), SBX__LEDGER_SCHEMA_VERSION);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static sbx_host *ok_host(const char *name)
{
	fresh(name);
	sbx_host_options o = {0};
	SBX_INIT_HEADER(o);
	o.registry_path = getenv("FIXTURE_REGISTRY");
	o.config_text = "data_source:\n  sandbox:\n    type: ok\n";
	o.state_dir = path;
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	return h;
}

typedef struct seen {
	int calls;
	char id[SBX_ID_MAX];
	char state[16];
	uint32_t n_assets;
} seen;

static int remember(void *ctx, const sbx_session_record *r)
{
	seen *s = ctx;
	s->calls++;
	snprintf(s->id, sizeof(s->id), "%s", r->sandbox_id);
	snprintf(s->state, sizeof(s->state), "%s", r->state);
	s->n_assets = r->n_assets;
	return 0;
}

Test(session_api, start_reuse_pause_unsupported_end_on_the_ok_fixture)
{
	sbx_host *h = ok_host("okstate");
	char id[SBX_ID_MAX], again[SBX_ID_MAX];
	uint32_t how = 99;
	sbx_error err = {0};
	cr_assert_eq(sbx_session_start(h, "u", "s", NULL, NULL, 0, id, &how, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(how, SBX_SESSION_CREATED);
	cr_assert_str_eq(id, "ok:ok-1");
	cr_assert_eq(sbx_session_start(h, "u", "s", NULL, NULL, 0, again, &how, &err), SBX_OK);
	cr_assert_eq(how, SBX_SESSION_REUSED);
	cr_assert_str_eq(again, id);

	/* ok has no pause: the exact status and message, and the record is kept unchanged. */
	cr_assert_eq(sbx_session_pause(h, "u", "s", &err), SBX_E_UNSUPPORTED);
	cr_assert_str_eq(err.message, "ok: pause: not supported by this backend");
	seen s = {0};
	cr_assert_eq(sbx_session_get(h, "u", "s", remember, &s, &err), SBX_OK);
	cr_assert_eq(s.calls, 1);
	cr_assert_str_eq(s.id, "ok:ok-1");
	cr_assert_str_eq(s.state, "running");
	cr_assert_eq(s.n_assets, 0);

	cr_assert_eq(sbx_session_start(h, "u", "other", NULL, NULL, 0, id, &how, &err), SBX_OK);
	cr_assert_str_eq(id, "ok:ok-2");
	seen all = {0};
	cr_assert_eq(sbx_session_list(h, remember, &all, &err), SBX_OK);
	cr_assert_eq(all.calls, 2);

	cr_assert_eq(sbx_session_end(h, "u", "s", &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_session_get(h, "u", "s", remember, &s, &err), SBX_E_NOT_FOUND);
	cr_assert_str_eq(err.message, "session: get: no session 's' for user 'u'; start it first");
	cr_assert_eq(sbx_session_pause(h, "u", "s", &err), SBX_E_NOT_FOUND);
	cr_assert_str_eq(err.message,
			 "session: pause: no session 's' for user 'u'; start it first");
	cr_assert_eq(sbx_session_start(h, "", "s", NULL, NULL, 0, id, &how, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "session: start: user_id and session_id must be non-empty");
	sbx_host_free(h);
}

Test(session_api, a_new_host_recreates_when_the_backend_forgot_the_sandbox)
{
	/* Mark the recorded sandbox unknown to ok's status by rewriting its id, as if the
	 * backend had lost it. */
	sbx_host *h = ok_host("okgone");
	char id[SBX_ID_MAX];
	uint32_t how = 99;
	sbx_error err = {0};
	cr_assert_eq(sbx_session_start(h, "u", "s", NULL, NULL, 0, id, &how, &err), SBX_OK);
	sbx_host_free(h);
	char db[600];
	snprintf(db, sizeof(db), "%s/ledger.db", path);
	sqlite3 *sq = NULL;
	cr_assert_eq(sqlite3_open(db, &sq), SQLITE_OK);
	sqlite3_busy_timeout(sq, 10000);
	cr_assert_eq(
	    sqlite3_exec(sq, "UPDATE sessions SET sandbox_id = 'ok:lost-1'", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(sq);

	sbx_host_options o = {0};
	SBX_INIT_HEADER(o);
	o.registry_path = getenv("FIXTURE_REGISTRY");
	o.config_text = "data_source:\n  sandbox:\n    type: ok\n";
	o.state_dir = path;
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_session_start(h, "u", "s", NULL, NULL, 0, id, &how, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(how, SBX_SESSION_RECREATED);
	/* A new sandbox of ok's (its counter goes on: the plugin stays mapped between hosts). */
	cr_assert_eq(strncmp(id, "ok:ok-", 6), 0, "%s", id);
	cr_assert_str_neq(id, "ok:lost-1");
	sbx_host_free(h);
}

/* Options from a caller built against 1.0 headers (they end before wait_seconds) start a
 * session; what lies past them is never read. */
Test(session_api, start_takes_options_from_older_headers)
{
	sbx_host *h = ok_host("okolder");
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.struct_size = (uint32_t)offsetof(sbx_create_opts, wait_seconds);
	co.share_dir = "relative"; /* refused, were it read */
	char id[SBX_ID_MAX];
	uint32_t how = 99;
	sbx_error err = {0};
	cr_assert_eq(sbx_session_start(h, "u", "s", &co, NULL, 0, id, &how, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(how, SBX_SESSION_CREATED);
	sbx_host_free(h);
}

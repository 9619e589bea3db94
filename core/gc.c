/* Ledger listing and reaping: sbx_ledger_list and sbx_gc.
 *
 * gc reaps rows whose owner process is dead (same host, pid and start time no longer match)
 * or whose TTL has passed; a detached row is governed by its TTL alone. A row whose create
 * never got an id (the harness died mid-call) is found through the plugin's list_by_label on
 * the row's sbx.token label. Last, each configured alias's list_by_label on the sbx.ledger label
 * (host and state dir, so other users' sandboxes are never touched) finds backend objects the
 * ledger does not hold as live; creates in flight for a live owner are spared. Rows are read
 * first and reaped afterwards, so no ledger statement
 * is open while a backend is called. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gc.h"

typedef struct row_list {
	sbx__ledger_row *rows;
	size_t n, cap;
} row_list;

static int collect(void *ctx, const sbx__ledger_row *row)
{
	row_list *l = ctx;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		sbx__ledger_row *rows = sbx__realloc(l->rows, cap * sizeof(*rows));
		if (!rows)
			return SBX_E_NOMEM;
		l->rows = rows;
		l->cap = cap;
	}
	l->rows[l->n++] = *row;
	return 0;
}

static int read_rows(sbx_host *host, row_list *l, sbx_error *err)
{
	sbx__ledger *led = NULL;
	memset(l, 0, sizeof(*l));
	int rc = sbx__host_ledger(host, &led, err);
	if (rc != SBX_OK)
		return rc;
	rc = sbx__ledger_each(led, collect, l, err);
	if (rc == SBX_E_NOMEM)
		sbx__set_error(err, rc, "ledger: out of memory reading rows");
	return rc;
}

int sbx_ledger_list(sbx_host *host, sbx_record_fn fn, void *ctx, sbx_error *err)
{
	if (!host || !fn)
		return sbx__set_error(err, SBX_E_INVAL, "ledger list: NULL host or callback");
	row_list l;
	int rc = read_rows(host, &l, err);
	for (size_t i = 0; rc == SBX_OK && i < l.n; i++) {
		const sbx__ledger_row *r = &l.rows[i];
		sbx_sandbox_record rec;
		memset(&rec, 0, sizeof(rec));
		SBX_INIT_HEADER(rec);
		rec.id = r->id;
		rec.alias = r->alias;
		rec.data_source = r->data_source;
		rec.owner_host = r->owner_host;
		rec.owner_pid = r->owner_pid;
		rec.run_id = r->run_id;
		rec.created = r->created;
		rec.expires = r->expires;
		rec.state = r->state;
		rec.owner_alive = sbx__ledger_owner_alive(r, sbx__host_name(host)) ? 1u : 0u;
		rec.error = r->error;
		rc = fn(ctx, &rec);
	}
	sbx__free(l.rows);
	return rc;
}

static int live_state(const char *state)
{
	return strcmp(state, SBX__LEDGER_CREATING) == 0 ||
	       strcmp(state, SBX__LEDGER_RUNNING) == 0 || strcmp(state, SBX__LEDGER_PAUSED) == 0 ||
	       strcmp(state, SBX__LEDGER_DELETING) == 0;
}

typedef struct token_reap {
	sbx_host *host;
	const sbx__ledger_row *row;
	const char *reason;
	uint32_t flags;
	sbx_gc_fn fn;
	void *ctx;
	size_t found;
} token_reap;

static int reap_found(void *ctx, const char *backend_id)
{
	token_reap *t = ctx;
	char id[SBX_ID_MAX];
	int n = snprintf(id, sizeof(id), "%s:%s", t->row->alias, backend_id);
	if (n < 0 || (size_t)n >= sizeof(id))
		return 0;
	t->found++;
	int rc = SBX_OK;
	if (!(t->flags & SBX_GC_DRY_RUN)) {
		sbx_error derr = {0};
		rc = sbx_destroy(t->host, id, &derr);
	}
	if (t->fn)
		t->fn(t->ctx, id, t->reason, rc);
	return 0;
}

/* Backend ids (full "<alias>:<id>" strings) found by one list_by_label. */
typedef struct id_list {
	const char *alias;
	char (*ids)[SBX_ID_MAX];
	size_t n, cap;
} id_list;

static int collect_id(void *ctx, const char *backend_id)
{
	id_list *l = ctx;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char(*ids)[SBX_ID_MAX] = sbx__realloc(l->ids, cap * sizeof(*ids));
		if (!ids)
			return SBX_E_NOMEM;
		l->ids = ids;
		l->cap = cap;
	}
	int n = snprintf(l->ids[l->n], SBX_ID_MAX, "%s:%s", l->alias, backend_id);
	if (n > 0 && (size_t)n < SBX_ID_MAX)
		l->n++;
	return 0;
}

static int list_ids(sbx_host *host, const char *alias, const char *key, const char *value,
		    id_list *out)
{
	memset(out, 0, sizeof(*out));
	out->alias = alias;
	sbx_error lerr = {0};
	int rc = sbx__host_list_by_label(host, alias, key, value, collect_id, out, &lerr);
	if (rc != SBX_OK && rc != SBX_E_UNSUPPORTED)
		sbx__log(SBX_LOG_WARN, "gc", "%s: cannot list sandboxes by label %s: %s", alias,
			 key, lerr.message);
	return rc;
}

static int known_live(const row_list *l, const char *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->rows[i].id, id) == 0 && live_state(l->rows[i].state))
			return 1;
	return 0;
}

/* Creates still in flight for a live owner: their sandboxes must not look like orphans. */
static int in_flight(sbx_host *host, const row_list *l, const char *alias, const char *id)
{
	for (size_t i = 0; i < l->n; i++) {
		const sbx__ledger_row *r = &l->rows[i];
		if (r->id[0] || strcmp(r->state, SBX__LEDGER_CREATING) != 0 ||
		    strcmp(r->alias, alias) != 0 ||
		    !sbx__ledger_owner_alive(r, sbx__host_name(host)))
			continue;
		id_list mine;
		list_ids(host, alias, "sbx.token", r->token, &mine);
		int hit = 0;
		for (size_t j = 0; j < mine.n && !hit; j++)
			hit = strcmp(mine.ids[j], id) == 0;
		sbx__free(mine.ids);
		if (hit)
			return 1;
	}
	return 0;
}

static void reap_orphans(sbx_host *host, const row_list *l, uint32_t flags, sbx_gc_fn fn, void *ctx)
{
	size_t n = sbx_data_source_count(host);
	for (size_t k = 0; k <= n; k++) {
		const char *alias = NULL;
		sbx_data_source_get(host, k == n ? SIZE_MAX : k, NULL, &alias, NULL);
		if (!alias)
			continue;
		/* Each alias once. */
		int seen = 0;
		for (size_t j = 0; j < k && !seen; j++) {
			const char *other = NULL;
			sbx_data_source_get(host, j, NULL, &other, NULL);
			seen = other && strcmp(other, alias) == 0;
		}
		if (seen)
			continue;
		id_list found;
		if (list_ids(host, alias, "sbx.ledger", sbx__host_ledger_id(host), &found) !=
		    SBX_OK) {
			sbx__free(found.ids);
			continue;
		}
		for (size_t i = 0; i < found.n; i++) {
			const char *id = found.ids[i];
			if (known_live(l, id) || in_flight(host, l, alias, id))
				continue;
			int st = SBX_OK;
			if (!(flags & SBX_GC_DRY_RUN)) {
				sbx_error derr = {0};
				st = sbx_destroy(host, id, &derr);
			}
			if (fn)
				fn(ctx, id, "not in the ledger", st);
		}
		sbx__free(found.ids);
	}
}

int sbx_gc(sbx_host *host, uint32_t flags, sbx_gc_fn fn, void *ctx, sbx_error *err)
{
	if (!host)
		return sbx__set_error(err, SBX_E_INVAL, "gc: NULL host");
	row_list l;
	int rc = read_rows(host, &l, err);
	int64_t now = (int64_t)time(NULL);
	for (size_t i = 0; rc == SBX_OK && i < l.n; i++) {
		const sbx__ledger_row *r = &l.rows[i];
		if (!live_state(r->state))
			continue;
		char reason[96];
		if (!sbx__ledger_owner_alive(r, sbx__host_name(host)))
			snprintf(reason, sizeof(reason), "owner pid %lld is dead",
				 (long long)r->owner_pid);
		else if (r->expires > 0 && r->expires <= now)
			snprintf(reason, sizeof(reason), "ttl expired");
		else
			continue;
		if (r->id[0]) {
			int st = SBX_OK;
			if (!(flags & SBX_GC_DRY_RUN)) {
				sbx_error derr = {0};
				st = sbx_destroy(host, r->id, &derr);
			}
			if (fn)
				fn(ctx, r->id, reason, st);
			continue;
		}
		/* The create's outcome never reached the ledger: look for it by its token. */
		token_reap t = {host, r, reason, flags, fn, ctx, 0};
		sbx_error lerr = {0};
		int lr = sbx__host_list_by_label(host, r->alias, "sbx.token", r->token, reap_found,
						 &t, &lerr);
		if (lr != SBX_OK) {
			sbx__log(SBX_LOG_WARN, "gc", "%s: cannot search for token %s: %s", r->alias,
				 r->token, lerr.message);
			continue;
		}
		if (!(flags & SBX_GC_DRY_RUN)) {
			sbx__ledger *led = NULL;
			if (sbx__host_ledger(host, &led, &lerr) == SBX_OK)
				sbx__ledger_fail(led, r->token,
						 t.found ? "reaped by gc: create never confirmed"
							 : "create never confirmed; nothing found",
						 &lerr);
		}
	}
	if (rc == SBX_OK)
		reap_orphans(host, &l, flags, fn, ctx);
	sbx__free(l.rows);
	return rc;
}

/* Ledger listing and reaping: sbx_ledger_list, sbx_gc and sbx_gc_run.
 *
 * Why gc cannot reap a live sandbox (docs/design.md, "Reaping", has the whole argument):
 * 1. Backend objects are listed (by the sbx.ledger label) BEFORE the ledger is read. Every
 *    create writes its row (state creating, with its token) before the backend is asked, so
 *    any object in the listing has its row in the ledger read afterwards: either holding its
 *    id, or still creating, in which case the row's token label finds the object. Only an
 *    object matched by neither is "not in the ledger".
 * 2. A row is reaped when its owner died or its TTL passed, or when it is stuck in creating
 *    or deleting and the process doing that (the row's actor) died. A create or delete whose
 *    actor lives is spared, and so is a row created after gc started.
 * 3. Every deletion is claimed in the ledger at the moment it is made: a row by a conditional
 *    UPDATE that succeeds only if the row is still exactly as gc read it; an object no row
 *    held by an INSERT that succeeds only if no live row holds its id by then. A lost claim
 *    is a skip, never a deletion.
 * Rows are read into memory first, so no ledger statement is open while a backend is called.
 * Last, rows finished (gone, failed) longer ago than the host's ledger_retention are pruned. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "host_internal.h"

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

/* A row in deleting that names no actor (written before schema 3) is finished after this. */
#define GC_STALE_DELETE_SECONDS 600

/* Backend ids (full "<alias>:<id>" strings) found by one list_by_label. */
typedef struct id_list {
	const char *alias;
	char (*ids)[SBX_ID_MAX];
	size_t n, cap;
	int ok; /* the listing succeeded */
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
		    id_list *out, sbx_error *lerr)
{
	memset(out, 0, sizeof(*out));
	out->alias = alias;
	int rc = sbx__host_list_by_label(host, alias, key, value, collect_id, out, lerr);
	if (rc != SBX_OK && rc != SBX_E_UNSUPPORTED)
		sbx__log(SBX_LOG_WARN, "gc", "%s: cannot list sandboxes by label %s: %s", alias,
			 key, lerr->message);
	out->ok = rc == SBX_OK;
	return rc;
}

static int id_listed(const id_list *l, const char *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->ids[i], id) == 0)
			return 1;
	return 0;
}

static int add_id(id_list *l, const char *id)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char(*ids)[SBX_ID_MAX] = sbx__realloc(l->ids, cap * sizeof(*ids));
		if (!ids)
			return SBX_E_NOMEM;
		l->ids = ids;
		l->cap = cap;
	}
	snprintf(l->ids[l->n++], SBX_ID_MAX, "%s", id);
	return SBX_OK;
}

typedef struct gc_run {
	sbx_host *host;
	uint32_t flags;
	sbx_gc_event_fn fn;
	void *ctx;
	sbx__ledger *led;
	sbx__ledger_actor self;
	int64_t started;
	int64_t now;
	row_list rows;
	id_list done; /* ids destroyed in this run */
} gc_run;

static void report(gc_run *g, uint32_t action, int status, const char *id, const char *token,
		   const char *reason)
{
	if (!g->fn)
		return;
	sbx_gc_event ev;
	memset(&ev, 0, sizeof(ev));
	SBX_INIT_HEADER(ev);
	ev.action = action;
	ev.status = status;
	ev.id = id ? id : "";
	ev.token = token ? token : "";
	ev.reason = reason;
	g->fn(g->ctx, &ev);
}

static int dry(const gc_run *g)
{
	return (g->flags & SBX_GC_DRY_RUN) != 0;
}

static void finish(gc_run *g, const char *token, const char *state, const char *message)
{
	sbx_error lerr = {0};
	if (sbx__ledger_finish(g->led, token, state, message, &lerr) != SBX_OK)
		sbx__log(SBX_LOG_WARN, "gc", "cannot record what gc did with row %s: %s", token,
			 lerr.message);
}

/* Destroys id (already claimed) and reports it. */
static int destroy_one(gc_run *g, const char *id, const char *token, const char *reason)
{
	int st = SBX_OK;
	if (!dry(g)) {
		sbx_error derr = {0};
		st = sbx_destroy(g->host, id, &derr);
		if (st != SBX_OK)
			sbx__log(SBX_LOG_WARN, "gc", "%s: %s", id, derr.message);
		else
			add_id(&g->done, id);
	}
	report(g, SBX_GC_DELETED, st, id, token, reason);
	return st;
}

enum { LEAVE, SPARE, REAP };

/* What gc should do with a row, and why (into why). */
static int judge(const gc_run *g, const sbx__ledger_row *r, char *why, size_t cap)
{
	if (!live_state(r->state))
		return LEAVE;
	const char *host = sbx__host_name(g->host);
	int creating = strcmp(r->state, SBX__LEDGER_CREATING) == 0;
	int deleting = strcmp(r->state, SBX__LEDGER_DELETING) == 0;
	int verdict = LEAVE;
	int actor = creating || deleting ? sbx__ledger_actor_alive(r, host) : -1;
	if ((creating || deleting) && actor == 1) {
		snprintf(why, cap, "%s in flight (pid %lld)", creating ? "create" : "delete",
			 (long long)r->actor_pid);
		return SPARE;
	}
	if (actor == 0) {
		snprintf(why, cap, "%s by pid %lld never finished (the process is gone)",
			 creating ? "create" : "delete", (long long)r->actor_pid);
		verdict = REAP;
	} else if (!sbx__ledger_owner_alive(r, host)) {
		snprintf(why, cap, "owner pid %lld is dead", (long long)r->owner_pid);
		verdict = REAP;
	} else if (r->expires > 0 && r->expires <= g->now) {
		snprintf(why, cap, "ttl expired");
		verdict = REAP;
	} else if (deleting && r->updated + GC_STALE_DELETE_SECONDS <= g->now) {
		snprintf(why, cap, "delete never finished (no process recorded, stuck since %lld)",
			 (long long)r->updated);
		verdict = REAP;
	}
	if (verdict == REAP && r->created > g->started) {
		snprintf(why, cap, "created after gc started");
		return SPARE;
	}
	return verdict;
}

/* A row whose create never got an id: its objects are found by the row's sbx.token label. */
static void reap_by_token(gc_run *g, const sbx__ledger_row *r, const char *why)
{
	id_list found;
	sbx_error lerr = {0};
	if (list_ids(g->host, r->alias, "sbx.token", r->token, &found, &lerr) != SBX_OK) {
		/* The claim stays: the row is deleting with this process as its actor, so the
		 * next gc, finding that actor gone, tries again. */
		char msg[800];
		snprintf(msg, sizeof(msg), "%s, but cannot search for its objects: %s", why,
			 lerr.message);
		report(g, SBX_GC_SKIPPED, SBX_OK, "", r->token, msg);
		sbx__free(found.ids);
		return;
	}
	int failed = 0;
	for (size_t i = 0; i < found.n; i++)
		failed |= destroy_one(g, found.ids[i], r->token, why) != SBX_OK;
	if (!found.n)
		report(g, SBX_GC_FINISHED, SBX_OK, "", r->token, why);
	if (!dry(g) && !failed) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s: %s", found.n ? "reaped by gc" : "closed by gc",
			 why);
		finish(g, r->token, SBX__LEDGER_FAILED, msg);
	}
	sbx__free(found.ids);
}

static void reap_rows(gc_run *g)
{
	for (size_t i = 0; i < g->rows.n; i++) {
		const sbx__ledger_row *r = &g->rows.rows[i];
		char why[200];
		int v = judge(g, r, why, sizeof(why));
		if (v == LEAVE)
			continue;
		if (v == SPARE) {
			report(g, SBX_GC_SKIPPED, SBX_OK, r->id, r->token, why);
			continue;
		}
		if (!dry(g)) {
			int claimed = 0;
			sbx_error lerr = {0};
			int lr = sbx__ledger_claim(g->led, r, &g->self, &claimed, &lerr);
			if (lr != SBX_OK || !claimed) {
				report(g, SBX_GC_SKIPPED, SBX_OK, r->id, r->token,
				       lr != SBX_OK ? lerr.message
						    : "row changed after gc read it");
				continue;
			}
		}
		if (!r->id[0]) {
			reap_by_token(g, r, why);
			continue;
		}
		if (destroy_one(g, r->id, r->token, why) == SBX_OK && !dry(g)) {
			char msg[256];
			snprintf(msg, sizeof(msg), "reaped by gc: %s", why);
			finish(g, r->token, SBX__LEDGER_GONE, msg);
		}
	}
}

static int held_live(const gc_run *g, const char *id)
{
	for (size_t i = 0; i < g->rows.n; i++)
		if (strcmp(g->rows.rows[i].id, id) == 0 && live_state(g->rows.rows[i].state))
			return 1;
	return 0;
}

/* A token nobody else makes, for the row gc writes when it claims an object no row held. */
static void gc_token(const gc_run *g, size_t n, char token[40])
{
	snprintf(token, 40, "gc-%08llx-%lld-%zu", (unsigned long long)g->started & 0xffffffffull,
		 (long long)g->self.pid, n);
}

static void reap_orphans(gc_run *g, const id_list *found)
{
	/* Objects no row of the ledger read after the listing holds. */
	id_list cand;
	memset(&cand, 0, sizeof(cand));
	cand.alias = found->alias;
	for (size_t i = 0; i < found->n; i++)
		if (!id_listed(&g->done, found->ids[i]) && !held_live(g, found->ids[i]))
			add_id(&cand, found->ids[i]);
	/* Creates (and deletes) without an id yet: their objects carry the row's token. */
	for (size_t i = 0; cand.n && i < g->rows.n; i++) {
		const sbx__ledger_row *r = &g->rows.rows[i];
		if (r->id[0] || strcmp(r->alias, found->alias) != 0 || !live_state(r->state))
			continue;
		id_list mine;
		sbx_error lerr = {0};
		if (list_ids(g->host, found->alias, "sbx.token", r->token, &mine, &lerr) !=
		    SBX_OK) {
			char msg[800];
			snprintf(msg, sizeof(msg),
				 "not in the ledger, but cannot tell it from create %s in flight: "
				 "%s",
				 r->token, lerr.message);
			for (size_t j = 0; j < cand.n; j++)
				report(g, SBX_GC_SKIPPED, SBX_OK, cand.ids[j], "", msg);
			cand.n = 0;
		}
		for (size_t j = 0; j < cand.n;) {
			if (id_listed(&mine, cand.ids[j]))
				memcpy(cand.ids[j], cand.ids[--cand.n], SBX_ID_MAX);
			else
				j++;
		}
		sbx__free(mine.ids);
	}
	for (size_t i = 0; i < cand.n; i++) {
		const char *id = cand.ids[i];
		if (dry(g)) {
			report(g, SBX_GC_DELETED, SBX_OK, id, "", "not in the ledger");
			continue;
		}
		char token[40];
		gc_token(g, g->done.n * 1000 + i, token);
		int claimed = 0;
		sbx_error lerr = {0};
		int lr = sbx__ledger_claim_orphan(g->led, token, id, found->alias, &g->self,
						  &claimed, &lerr);
		if (lr != SBX_OK || !claimed) {
			report(g, SBX_GC_SKIPPED, SBX_OK, id, "",
			       lr != SBX_OK ? lerr.message
					    : "appeared in the ledger after gc read it");
			continue;
		}
		uint32_t st = SBX_STATE_UNKNOWN;
		sbx_error serr = {0};
		if (sbx_status(g->host, id, &st, &serr) == SBX_OK && st == SBX_STATE_GONE) {
			/* Deleted by its owner between the listing and now. */
			finish(g, token, SBX__LEDGER_GONE, "already gone when gc claimed it");
			continue;
		}
		if (destroy_one(g, id, "", "not in the ledger") == SBX_OK)
			finish(g, token, SBX__LEDGER_GONE, "reaped by gc: not in the ledger");
		else
			finish(g, token, SBX__LEDGER_FAILED, "gc could not delete it");
	}
	sbx__free(cand.ids);
}

/* Each configured alias once, in config order, the default block last. */
static size_t aliases(sbx_host *host, const char **out, size_t cap)
{
	size_t n = sbx_data_source_count(host), k = 0;
	for (size_t i = 0; i <= n; i++) {
		const char *alias = NULL;
		sbx_data_source_get(host, i == n ? SIZE_MAX : i, NULL, &alias, NULL);
		if (!alias)
			continue;
		int seen = 0;
		for (size_t j = 0; j < k && !seen; j++)
			seen = strcmp(out[j], alias) == 0;
		if (!seen && k < cap)
			out[k++] = alias;
	}
	return k;
}

#define GC_MAX_ALIASES 64

/* Removes the rows of sandboxes gone (or creates failed) longer ago than the host's
 * ledger_retention; best effort, like the rest of a gc run. */
static void prune(gc_run *g)
{
	int64_t keep = g->host->ledger_retention;
	sbx_error lerr = {0};
	if (keep >= 0 && sbx__ledger_prune(g->led, g->now - keep, &lerr) != SBX_OK)
		sbx__log(SBX_LOG_WARN, "gc", "cannot prune finished ledger rows: %s", lerr.message);
}

int sbx_gc_run(sbx_host *host, const sbx_gc_opts *opts, sbx_error *err)
{
	if (!host)
		return sbx__set_error(err, SBX_E_INVAL, "gc: NULL host");
	sbx_gc_opts o;
	int rc = sbx__struct_in(opts, &o, sizeof(o), sizeof(o), "gc: options", err);
	if (rc != SBX_OK)
		return rc;
	gc_run g;
	memset(&g, 0, sizeof(g));
	g.host = host;
	g.flags = o.flags;
	g.fn = o.on_event;
	g.ctx = o.ctx;
	g.self = sbx__host_actor(host);
	g.started = (int64_t)time(NULL);
	g.done.alias = "";
	rc = sbx__host_ledger(host, &g.led, err);
	if (rc != SBX_OK)
		return rc;
	/* 1. The backend objects first (see the top of this file for why the order matters). */
	const char *names[GC_MAX_ALIASES];
	size_t n_alias = aliases(host, names, GC_MAX_ALIASES);
	id_list found[GC_MAX_ALIASES];
	for (size_t i = 0; i < n_alias; i++) {
		sbx_error lerr = {0};
		list_ids(host, names[i], "sbx.ledger", sbx__host_ledger_id(host), &found[i], &lerr);
	}
	/* 2. Then the ledger. */
	rc = read_rows(host, &g.rows, err);
	g.now = (int64_t)time(NULL);
	if (rc == SBX_OK) {
		reap_rows(&g);
		for (size_t i = 0; i < n_alias; i++)
			if (found[i].ok)
				reap_orphans(&g, &found[i]);
	}
	/* 3. Rows finished longer ago than the retention go. */
	if (rc == SBX_OK && !(g.flags & SBX_GC_DRY_RUN))
		prune(&g);
	for (size_t i = 0; i < n_alias; i++)
		sbx__free(found[i].ids);
	sbx__free(g.rows.rows);
	sbx__free(g.done.ids);
	return rc;
}

typedef struct gc_compat {
	sbx_gc_fn fn;
	void *ctx;
} gc_compat;

static void compat_event(void *ctx, const sbx_gc_event *ev)
{
	const gc_compat *c = ctx;
	if (ev->action == SBX_GC_DELETED && c->fn)
		c->fn(c->ctx, ev->id, ev->reason, ev->status);
}

int sbx_gc(sbx_host *host, uint32_t flags, sbx_gc_fn fn, void *ctx, sbx_error *err)
{
	gc_compat c = {fn, ctx};
	sbx_gc_opts o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.flags = flags;
	o.on_event = compat_event;
	o.ctx = &c;
	return sbx_gc_run(host, &o, err);
}

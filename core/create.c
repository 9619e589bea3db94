/* sbx_create and sbx_destroy.
 *
 * Every create is recorded in the ledger ($state_dir/ledger.db) before it is sent, with the
 * row's token as the sandbox label sbx.token, and confirmed or failed after; destroy marks the
 * row deleting (this process as the actor) and gone once the backend confirms, so gc.c can
 * finish either when the process dies midway. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "host_internal.h"

/* Labels the host puts on every sandbox, before the caller's. */
#define HOST_LABELS 6

/* One create under way. */
typedef struct creation {
	sbx_host *host;
	const sbx_create_opts *opts;
	const sbx__data_source *ds;
	int64_t now, ttl;
	sbx__ledger *led;
	sbx__ledger_row row;
	char expires[32];
	sbx_kv *labels;
	size_t n_labels;
} creation;

/* A token nobody else will make: time, pid, a counter and 8 random bytes (one getrandom; a
 * buffered read of /dev/urandom cost five system calls and 4 KiB per create). */
static void make_token(sbx_host *h, char token[40])
{
	unsigned char rnd[8] = {0};
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		memset(rnd, 0, sizeof(rnd));
	pthread_mutex_lock(&h->lock);
	uint64_t n = ++h->seq;
	pthread_mutex_unlock(&h->lock);
	uint64_t r = 0;
	for (int i = 0; i < 8; i++)
		r = (r << 8) | rnd[i];
	snprintf(token, 40, "%08llx%06llx%016llx", (unsigned long long)time(NULL) & 0xffffffffull,
		 (unsigned long long)((uint64_t)getpid() ^ (n << 20)) & 0xffffffull,
		 (unsigned long long)r);
}

/* sbx.owner, sbx.run, sbx.data_source, sbx.token, sbx.ledger, sbx.expires (with a TTL), then
 * the caller's labels. */
static int make_labels(creation *c)
{
	sbx_host *h = c->host;
	size_t n_extra = c->opts ? c->opts->n_labels : 0;
	sbx_kv *l = sbx__calloc(HOST_LABELS + n_extra, sizeof(*l));
	if (!l)
		return SBX_E_NOMEM;
	size_t n = 0;
	l[n++] = (sbx_kv){"sbx.owner", h->owner};
	l[n++] = (sbx_kv){"sbx.run", h->run_id};
	l[n++] = (sbx_kv){"sbx.data_source", c->ds->name};
	l[n++] = (sbx_kv){"sbx.token", c->row.token};
	l[n++] = (sbx_kv){"sbx.ledger", h->ledger_id};
	if (c->ttl > 0) {
		snprintf(c->expires, sizeof(c->expires), "%lld", (long long)(c->now + c->ttl));
		l[n++] = (sbx_kv){"sbx.expires", c->expires};
	}
	for (size_t i = 0; i < n_extra; i++)
		l[n++] = c->opts->labels[i];
	c->labels = l;
	c->n_labels = n;
	return SBX_OK;
}

/* The row written before the create is sent (state creating), so a crash mid-call leaves a
 * row to reap by the sbx.token label. */
static void fill_row(creation *c)
{
	sbx_host *h = c->host;
	sbx__ledger_row *row = &c->row;
	snprintf(row->alias, sizeof(row->alias), "%s", c->ds->alias);
	snprintf(row->data_source, sizeof(row->data_source), "%s", c->ds->name);
	memcpy(row->owner_host, h->hostname, sizeof(row->owner_host));
	if (c->opts && c->opts->detached) {
		row->owner_pid = c->opts->owner_pid > 0 ? c->opts->owner_pid : 0;
		row->owner_start = row->owner_pid ? sbx__process_start_time(row->owner_pid) : 0;
	} else {
		row->owner_pid = (int64_t)getpid();
		row->owner_start = h->self_start;
	}
	/* The creating process, whoever owns the sandbox: gc finishes the row if it dies. */
	memcpy(row->actor_host, h->hostname, sizeof(row->actor_host));
	row->actor_pid = (int64_t)getpid();
	row->actor_start = h->self_start;
	snprintf(row->run_id, sizeof(row->run_id), "%s", h->run_id);
	row->created = c->now;
	row->expires = c->ttl > 0 ? c->now + c->ttl : 0;
	snprintf(row->state, sizeof(row->state), "%s", SBX__LEDGER_CREATING);
}

/* What another process needs to reach the sandbox again (secrets as references). */
static int record_config(creation *c, const sbx__route *r)
{
	const sbx__data_source *conf = r->ps->ds;
	char *recorded = r->ps->recorded
			     ? sbx__strdup(r->ps->recorded)
			     : sbx__config_record(conf ? conf->keys : NULL, r->slot->desc);
	if (!recorded)
		return SBX_E_NOMEM;
	size_t n = strlen(recorded);
	if (n < sizeof(c->row.config))
		memcpy(c->row.config, recorded, n + 1);
	else
		sbx__log(SBX_LOG_WARN, "ledger",
			 "%s: the config is too long to record (%zu bytes); other processes "
			 "reach the sandbox with their own config",
			 c->ds->alias, n);
	sbx__free(recorded);
	return SBX_OK;
}

typedef struct create_args {
	const sbx_create_spec *spec;
	char *buf; /* the backend part of the id */
	size_t cap;
} create_args;

static int create_call(const sbx__route *r, void *a, sbx_error *perr)
{
	create_args *x = a;
	memset(x->buf, 0, x->cap);
	int rc = r->slot->desc->create(r->ps->state, x->spec, x->buf, x->cap, perr);
	if (rc == SBX_OK && (memchr(x->buf, '\0', x->cap) == NULL || x->buf[0] == '\0'))
		rc = sbx__set_error(perr, SBX_E_BACKEND,
				    "%s: create: plugin returned %s sandbox id (at most %zu bytes "
				    "allowed)",
				    r->alias, x->buf[0] ? "an unterminated" : "an empty",
				    x->cap - 1);
	return rc;
}

static int destroy_call(const sbx__route *r, void *a, sbx_error *perr)
{
	return r->slot->desc->destroy(r->ps->state, a, perr);
}

static const sbx__op create_op = {"create", offsetof(sbx_plugin_desc, create), create_call};
static const sbx__op destroy_op = {"destroy", offsetof(sbx_plugin_desc, destroy), destroy_call};

/* Sends the create and makes id "<alias>:<backend id>"; a backend id that does not make a
 * valid sandbox id is destroyed again. */
static int send_create(creation *c, const sbx__route *r, char id[SBX_ID_MAX], sbx_error *err)
{
	const sbx_create_opts *o = c->opts;
	sbx_create_spec spec = {.image = o ? o->image : NULL,
				.labels = c->labels,
				.n_labels = (uint32_t)c->n_labels,
				.env = o ? o->env : NULL,
				.n_env = o ? o->n_env : 0,
				.ttl_seconds = c->ttl > 0 ? c->ttl : 0,
				.data_source = c->ds->name,
				.share_dir = o ? o->share_dir : NULL};
	SBX_INIT_HEADER(spec);
	size_t prefix = strlen(c->ds->alias) + 1;
	create_args a = {.spec = &spec, .buf = id + prefix, .cap = SBX_ID_MAX - prefix};
	int rc = sbx__call(r, &create_op, &a, err);
	if (rc != SBX_OK)
		return rc;
	memcpy(id, c->ds->alias, prefix - 1);
	id[prefix - 1] = ':';
	char alias[SBX__ALIAS_MAX];
	const char *rest;
	if (sbx__id_split(id, alias, sizeof(alias), &rest, NULL) == SBX_OK)
		return SBX_OK;
	sbx__call(r, &destroy_op, a.buf, NULL);
	return sbx__set_error(err, SBX_E_BACKEND,
			      "%s: create: plugin returned an id with spaces or control "
			      "characters (destroyed it)",
			      c->ds->alias);
}

/* The row is inserted only where the data source's caps leave room (caps.c counts every
 * process's rows in the same transaction); without caps it is simply written. */
static int begin(creation *c, sbx_error *err)
{
	const sbx__policy *p = &c->ds->policy;
	if (!p->max_concurrency && !p->max_starting && p->create_rate <= 0)
		return sbx__ledger_begin(c->led, &c->row, err);
	return sbx__caps_admit(c->led, p, &c->row, c->opts ? c->opts->wait_seconds : 0, err);
}

/* The create proper, once the data source's plugin state is known: ledger row (under the
 * caps), plugin create, confirmation. */
static int create_in(creation *c, const sbx__route *r, char id[SBX_ID_MAX], sbx_error *err)
{
	int rc = sbx__host_ledger(c->host, &c->led, err);
	if (rc != SBX_OK)
		return rc;
	make_token(c->host, c->row.token);
	fill_row(c);
	if (make_labels(c) != SBX_OK || record_config(c, r) != SBX_OK)
		return sbx__nomem(err, "create");
	rc = begin(c, err);
	if (rc != SBX_OK)
		return rc;
	sbx_error e = {0};
	rc = send_create(c, r, id, &e);
	sbx_error lerr = {0};
	if (rc != SBX_OK) {
		id[0] = '\0';
		sbx__ledger_fail(c->led, c->row.token, e.message, &lerr);
		return sbx__set_error(err, rc, "%s", e.message);
	}
	if (sbx__ledger_confirm(c->led, c->row.token, id, &lerr) != SBX_OK)
		sbx__log(SBX_LOG_WARN, "ledger", "%s: cannot confirm the create: %s", id,
			 lerr.message);
	/* Without the note the sandbox is still reachable through the alias. */
	if (sbx__route_remember(c->host, id, r->ps) != SBX_OK)
		sbx__log(SBX_LOG_DEBUG, "host", "could not remember the data source of %s", id);
	return SBX_OK;
}

/* share_dir: an existing folder named by its absolute path, for a backend that takes one. */
static int check_share_dir(const char *dir, const sbx__route *r, sbx_error *err)
{
	struct stat sb;
	if (!dir)
		return SBX_OK;
	if (dir[0] != '/' || strlen(dir) >= 1024 || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return sbx__set_error(err, SBX_E_INVAL,
				      "create: share_dir '%.300s' must be an existing folder given "
				      "by its absolute path (at most 1023 bytes)",
				      dir);
	if (!sbx__plugin_flag(r, SBX_PLUGIN_SHARE_DIR, 4))
		return sbx__set_error(err, SBX_E_UNSUPPORTED,
				      "%s: create: share_dir: this backend cannot share a host "
				      "folder with a sandbox",
				      r->alias);
	return SBX_OK;
}

/* The data source a create goes to, with a sandbox type this host can route. */
static int create_source(sbx_host *host, const sbx_create_opts *opts, const sbx__data_source **out,
			 sbx_error *err)
{
	const sbx__data_source *ds;
	int rc = opts ? sbx__check_kv(opts->env, opts->n_env, "create", "env", 1, err) : SBX_OK;
	if (rc == SBX_OK && opts)
		rc = sbx__check_kv(opts->labels, opts->n_labels, "create", "label", 0, err);
	if (rc == SBX_OK)
		rc = sbx__config_find(host->cfg, opts ? opts->data_source : NULL, &ds, err);
	if (rc != SBX_OK)
		return rc;
	if (!ds->alias)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "create: data source '%s' has no sandbox (type: none); "
				      "set sandbox.type to a backend alias",
				      ds->name);
	if (strlen(ds->alias) >= SBX__ALIAS_MAX)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "create: data source '%s': alias '%.40s...' is longer than "
				      "%d bytes",
				      ds->name, ds->alias, SBX__ALIAS_MAX - 1);
	*out = ds;
	return SBX_OK;
}

int sbx_create(sbx_host *host, const sbx_create_opts *opts, char id[SBX_ID_MAX], sbx_error *err)
{
	if (!host || !id)
		return sbx__set_error(err, SBX_E_INVAL, "create: NULL host or id buffer");
	id[0] = '\0';
	sbx_create_opts o;
	/* A caller built against older headers passes a shorter struct: what it lacks is 0. */
	int rc = sbx__struct_in(opts, &o, sizeof(o), SBX__SIZE_1_0(sbx_create_opts, wait_seconds),
				"create: options", err);
	creation c = {.host = host, .opts = opts ? &o : NULL};
	sbx__route r;
	if (rc == SBX_OK)
		rc = create_source(host, c.opts, &c.ds, err);
	if (rc == SBX_OK)
		rc = sbx__route_alias(host, c.ds->alias, c.ds, &r, err);
	if (rc == SBX_OK && c.opts)
		rc = check_share_dir(c.opts->share_dir, &r, err);
	if (rc != SBX_OK)
		return rc;
	c.now = (int64_t)time(NULL);
	c.ttl = c.opts && c.opts->ttl_seconds > 0 ? c.opts->ttl_seconds : c.ds->policy.ttl;
	rc = create_in(&c, &r, id, err);
	sbx__free(c.labels);
	return rc;
}

int sbx_destroy(sbx_host *host, const char *id, sbx_error *err)
{
	sbx__route r;
	int rc = sbx__route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	/* The row names this process as the deleter, so a delete cut short by a crash is
	 * finished by gc, and one that fails leaves the row as it was. */
	sbx__ledger_actor self = sbx__host_actor(host);
	sbx_error lerr = {0};
	sbx__ledger *led = NULL;
	if (sbx__host_ledger(host, &led, &lerr) != SBX_OK ||
	    sbx__ledger_mark_deleting(led, id, &self, &lerr) != SBX_OK)
		sbx__log(SBX_LOG_WARN, "ledger", "%s: cannot record the delete: %s", id,
			 lerr.message);
	rc = sbx__call(&r, &destroy_op, (void *)r.backend, err);
	if (rc != SBX_OK) {
		if (led)
			sbx__ledger_undelete(led, id, &self, &lerr);
		return rc;
	}
	sbx__host_ledger_state(host, id, SBX__LEDGER_GONE);
	sbx__route_forget(host, id);
	sbx__spool_forget(host->state_dir, id);
	return SBX_OK;
}

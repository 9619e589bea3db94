/* sbx_host: the registry and config of one embedder, the plugins loaded for it, and the routing
 * of every call by the alias prefix of a sandbox id.
 *
 * Plugins load on first use of an alias. All aliases that the registry maps to one file share
 * one load; a failed load leaves each of them faulty with the saved status and message, which
 * every later call returns, while other aliases keep working.
 *
 * A plugin state is made per (data source, alias) by init with that data source's config. A
 * call on an id uses the state that created it when this host made it; otherwise the first
 * state initialised for the alias; otherwise a state initialised now from the default block
 * when it uses the alias, else from the first data source that does, else from the registry
 * defaults alone. That state's data source supplies the policy (timeout, truncation,
 * auto_resume).
 *
 * Every create is recorded in the ledger ($state_dir/ledger.db) before it is sent, with the
 * row's token as the sandbox label sbx.token, and confirmed or failed after; destroy, pause
 * and resume update the row's state (gc.c reaps from it).
 *
 * Locking: host->lock guards the tables and is held while a plugin loads or inits (plugin.h:
 * init is never concurrent with another init); plugin ops run outside it, under the alias's
 * call lock when the plugin is not SBX_PLUGIN_THREAD_SAFE. States live until sbx_host_free,
 * so a routed pointer stays valid without reference counts. */
#include <errno.h>
#include <ftw.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gc.h"
#include "internal.h"
#include "ledger.h"

#define ALIAS_MAX 128

typedef struct plugin_slot {
	const sbx__reg_entry *ent;
	uint32_t state; /* SBX_PLUGIN_* */
	int fault_code;
	char *reason;
	const sbx_plugin_desc *desc; /* host-owned copy inside a module */
	pthread_mutex_t call_lock;
} plugin_slot;

typedef struct plugin_state {
	size_t slot;
	const sbx__data_source *ds; /* a config block, or &own */
	sbx__data_source own;       /* for an alias no data source names */
	int has_own;
	void *state;
	struct sbx_config *cfg;
	int inited;
	uint64_t live;     /* sandboxes this host created from it and has not destroyed */
	uint64_t inflight; /* creates under way */
	char *recorded;    /* made from a ledger row's recorded config (that JSON), else NULL */
} plugin_state;

typedef struct known_id {
	char *id;
	plugin_state *ps;
} known_id;

struct sbx_host {
	pthread_mutex_t lock;
	sbx__registry *reg;
	sbx__config *cfg;
	char *state_dir;
	char *run_id;
	char owner[320];
	char hostname[128];
	int64_t self_start;  /* start time of this process, for the ledger's owner check */
	sbx__ledger *ledger; /* opened on first use */
	char ledger_id[17];  /* label sbx.ledger: which ledger knows the sandbox */
	char *ledger_error;  /* why it could not be opened */
	plugin_slot *slots;
	size_t n_slots;
	sbx__module **mods;
	size_t n_mods;
	plugin_state **states;
	size_t n_states;
	known_id *ids;
	size_t n_ids;
	uint64_t seq;
};

/* What a call on one sandbox id goes to. */
typedef struct route {
	plugin_slot *slot;
	plugin_state *ps;
	const char *backend;
	char alias[ALIAS_MAX];
} route;

static int nomem(sbx_error *err, const char *what)
{
	return sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory", what);
}

/* Copies a plugin's error into err, supplying a message when the plugin left none. A status
 * that is not an sbx status (negative, garbage) becomes SBX_E_BACKEND naming the plugin. */
static int plugin_error(sbx_error *err, const sbx_error *pe, int rc, const char *alias,
			const char *op)
{
	if (rc <= 0 || strcmp(sbx_status_name(rc), "SBX_E_UNKNOWN") == 0)
		return sbx__set_error(
		    err, SBX_E_BACKEND,
		    "%s: %s: plugin returned %d, which is not an sbx failure status", alias, op,
		    rc);
	if (pe->message[0] == '\0')
		return sbx__set_error(err, rc, "%s: %s: %s", alias, op, sbx_status_message(rc));
	return sbx__set_error(err, rc, "%s", pe->message);
}

static int mkdir_parents(const char *path)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return errno;
		*p = '/';
	}
	if (mkdir(buf, 0700) != 0 && errno != EEXIST)
		return errno;
	return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- host object */

static int resolve_state_dir(const sbx_host_options *opts, char **out, sbx_error *err)
{
	const char *v;
	char *dir = NULL;
	if (opts && opts->state_dir)
		dir = sbx__strdup(opts->state_dir);
	else if ((v = getenv("SBX_STATE_DIR")) && *v)
		dir = sbx__strdup(v);
	else if ((v = getenv("XDG_STATE_HOME")) && *v)
		dir = sbx__asprintf("%s/sbx", v);
	else if ((v = getenv("HOME")) && *v)
		dir = sbx__asprintf("%s/.local/state/sbx", v);
	else
		return sbx__set_error(err, SBX_E_IO,
				      "host: no state directory: set SBX_STATE_DIR, "
				      "XDG_STATE_HOME or HOME");
	if (!dir)
		return nomem(err, "host");
	int e = mkdir_parents(dir);
	struct stat st;
	if (!e && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
		e = ENOTDIR;
	if (e) {
		sbx__set_error(err, SBX_E_IO, "host: cannot create state directory %s: %s", dir,
			       strerror(e));
		sbx__free(dir);
		return SBX_E_IO;
	}
	*out = dir;
	return SBX_OK;
}

int sbx_host_new(const sbx_host_options *opts, sbx_host **out, sbx_error *err)
{
	int rc = SBX_OK;
	char *plugins_dir = NULL;
	if (!out)
		return sbx__set_error(err, SBX_E_INVAL, "host: NULL output pointer");
	*out = NULL;
	if (opts && (opts->struct_size < sizeof(*opts) || opts->abi_major != SBX_ABI_MAJOR))
		return sbx__set_error(err, SBX_E_INVAL,
				      "host: options struct has size %u and ABI %u; expected "
				      "size %zu and ABI %u (use SBX_INIT_HEADER)",
				      opts->struct_size, opts->abi_major, sizeof(*opts),
				      SBX_ABI_MAJOR);
	if (opts && opts->config_path && opts->config_text)
		return sbx__set_error(err, SBX_E_INVAL,
				      "host: config_path and config_text are both set; give one");
	sbx_host *h = sbx__calloc(1, sizeof(*h));
	if (!h)
		return nomem(err, "host");
	if (pthread_mutex_init(&h->lock, NULL) != 0) {
		sbx__free(h);
		return sbx__set_error(err, SBX_E_NOMEM, "host: cannot create a mutex");
	}
	rc = sbx__registry_load(opts ? opts->registry_path : NULL, &h->reg, err);
	if (rc != SBX_OK)
		goto out;
	rc = sbx__config_load(opts ? opts->config_path : NULL, opts ? opts->config_text : NULL,
			      &h->cfg, err);
	if (rc != SBX_OK)
		goto out;
	rc = resolve_state_dir(opts, &h->state_dir, err);
	if (rc != SBX_OK)
		goto out;
	plugins_dir = sbx__asprintf("%s/plugins", h->state_dir);
	if (!plugins_dir) {
		rc = nomem(err, "host");
		goto out;
	}
	sbx__set_state_dir(plugins_dir);

	char hostname[256];
	if (gethostname(hostname, sizeof(hostname)) != 0)
		snprintf(hostname, sizeof(hostname), "unknown");
	hostname[sizeof(hostname) - 1] = '\0';
	snprintf(h->owner, sizeof(h->owner), "%s:%ld", hostname, (long)getpid());
	snprintf(h->hostname, sizeof(h->hostname), "%.127s", hostname);
	h->self_start = sbx__process_start_time(getpid());
	/* FNV-1a of host and state dir: gc finds what this ledger made, not other users'. */
	uint64_t fnv = 14695981039346656037ull;
	for (const char *p = h->owner; *p && *p != ':'; p++)
		fnv = (fnv ^ (unsigned char)*p) * 1099511628211ull;
	char real[4096];
	const char *sd = realpath(h->state_dir, real) ? real : h->state_dir;
	for (const char *p = sd; *p; p++)
		fnv = (fnv ^ (unsigned char)*p) * 1099511628211ull;
	snprintf(h->ledger_id, sizeof(h->ledger_id), "%016llx", (unsigned long long)fnv);
	if (opts && opts->run_id)
		h->run_id = sbx__strdup(opts->run_id);
	else
		h->run_id = sbx__asprintf("run-%lld-%ld", (long long)time(NULL), (long)getpid());
	if (!h->run_id) {
		rc = nomem(err, "host");
		goto out;
	}

	if (h->reg->n) {
		h->slots = sbx__calloc(h->reg->n, sizeof(*h->slots));
		if (!h->slots) {
			rc = nomem(err, "host");
			goto out;
		}
	}
	for (size_t i = 0; i < h->reg->n; i++) {
		if (pthread_mutex_init(&h->slots[i].call_lock, NULL) != 0) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "host: cannot create a mutex");
			goto out;
		}
		h->slots[i].ent = &h->reg->entries[i];
		h->n_slots++;
	}
out:
	sbx__free(plugins_dir);
	if (rc != SBX_OK) {
		sbx_host_free(h);
		return rc;
	}
	*out = h;
	return SBX_OK;
}

static void state_free(sbx_host *h, plugin_state *ps)
{
	if (!ps)
		return;
	if (ps->inited)
		h->slots[ps->slot].desc->fini(ps->state);
	sbx__config_obj_free(ps->cfg);
	if (ps->has_own)
		sbx__node_free(ps->own.keys);
	sbx__free(ps->recorded);
	sbx__free(ps);
}

void sbx_host_free(sbx_host *host)
{
	if (!host)
		return;
	for (size_t i = host->n_states; i > 0; i--)
		state_free(host, host->states[i - 1]);
	sbx__free(host->states);
	for (size_t i = 0; i < host->n_mods; i++)
		sbx__module_unload(host->mods[i]);
	sbx__free(host->mods);
	for (size_t i = 0; i < host->n_slots; i++) {
		sbx__free(host->slots[i].reason);
		pthread_mutex_destroy(&host->slots[i].call_lock);
	}
	sbx__free(host->slots);
	for (size_t i = 0; i < host->n_ids; i++)
		sbx__free(host->ids[i].id);
	sbx__free(host->ids);
	sbx__ledger_close(host->ledger);
	sbx__config_free(host->cfg);
	sbx__registry_free(host->reg);
	sbx__free(host->state_dir);
	sbx__free(host->run_id);
	pthread_mutex_destroy(&host->lock);
	sbx__free(host);
}

/* ---- plugins */

size_t sbx_plugin_count(const sbx_host *host)
{
	return host ? host->n_slots : 0;
}

static plugin_slot *find_slot(sbx_host *h, const char *alias, sbx_error *err)
{
	for (size_t i = 0; i < h->n_slots; i++)
		if (strcmp(h->slots[i].ent->alias, alias) == 0)
			return &h->slots[i];
	char *known = sbx__registry_alias_list(h->reg);
	sbx__set_error(err, SBX_E_UNKNOWN_ALIAS, "unknown sandbox type '%.100s'; known: %s", alias,
		       known ? known : (h->n_slots ? "(out of memory)" : "none"));
	sbx__free(known);
	return NULL;
}

static void mark_faulty(plugin_slot *s, int code, const char *reason)
{
	s->state = SBX_PLUGIN_FAULTY;
	s->fault_code = code;
	sbx__free(s->reason);
	/* Without memory for the reason the status alone is kept. */
	s->reason = sbx__asprintf("%s: %s", s->ent->alias, reason);
}

static int fault_error(const plugin_slot *s, sbx_error *err)
{
	if (s->reason)
		return sbx__set_error(err, s->fault_code, "%s", s->reason);
	return sbx__set_error(err, s->fault_code, "%s: plugin is faulty (%s)", s->ent->alias,
			      sbx_status_message(s->fault_code));
}

/* Loads the plugin of slot s and of every alias sharing its file. Called with h->lock held. */
static int load_locked(sbx_host *h, plugin_slot *s, sbx_error *err)
{
	if (s->state == SBX_PLUGIN_LOADED)
		return SBX_OK;
	if (s->state == SBX_PLUGIN_FAULTY)
		return fault_error(s, err);
	int rc = SBX_OK;
	sbx__module *mod = NULL;
	const char *path = s->ent->path;
	const char **expected = sbx__calloc(h->n_slots, sizeof(*expected));
	sbx__module **mods = sbx__realloc(h->mods, (h->n_mods + 1) * sizeof(*mods));
	if (mods)
		h->mods = mods;
	if (!expected || !mods) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory loading %s", s->ent->alias,
				    path);
		goto out;
	}
	size_t n = 0;
	for (size_t i = 0; i < h->n_slots; i++)
		if (strcmp(h->slots[i].ent->path, path) == 0)
			expected[n++] = h->slots[i].ent->alias;
	sbx_error lerr = {0};
	rc = sbx__module_load(path, expected, n, &mod, &lerr);
	if (rc == SBX_E_NOMEM) {
		/* Not the plugin's fault: a later call may succeed. */
		sbx__set_error(err, rc, "%s: %s", s->ent->alias, lerr.message);
		goto out;
	}
	for (size_t i = 0; i < h->n_slots; i++) {
		plugin_slot *o = &h->slots[i];
		if (strcmp(o->ent->path, path) != 0)
			continue;
		if (rc != SBX_OK) {
			mark_faulty(o, rc, lerr.message[0] ? lerr.message : sbx_status_message(rc));
			continue;
		}
		o->desc = NULL;
		for (size_t j = 0; j < sbx__module_count(mod); j++) {
			const sbx_plugin_desc *d = sbx__module_desc(mod, j);
			if (strcmp(d->alias, o->ent->alias) == 0)
				o->desc = d;
		}
		if (o->desc) {
			o->state = SBX_PLUGIN_LOADED;
		} else {
			char msg[400];
			snprintf(msg, sizeof(msg), "%s does not register alias '%s'", path,
				 o->ent->alias);
			mark_faulty(o, SBX_E_ABI, msg);
		}
	}
	if (mod)
		h->mods[h->n_mods++] = mod;
	rc = s->state == SBX_PLUGIN_LOADED ? SBX_OK : fault_error(s, err);
out:
	sbx__free(expected);
	return rc;
}

int sbx_plugin_load(sbx_host *host, const char *alias, sbx_error *err)
{
	if (!host || !alias)
		return sbx__set_error(err, SBX_E_INVAL, "plugin load: NULL host or alias");
	pthread_mutex_lock(&host->lock);
	int rc;
	plugin_slot *s = find_slot(host, alias, err);
	rc = s ? load_locked(host, s, err) : SBX_E_UNKNOWN_ALIAS;
	pthread_mutex_unlock(&host->lock);
	return rc;
}

int sbx_plugin_get(sbx_host *host, size_t index, sbx_plugin_info *info, sbx_error *err)
{
	if (!host || !info)
		return sbx__set_error(err, SBX_E_INVAL, "plugins: NULL host or info");
	if (info->struct_size < sizeof(*info))
		return sbx__set_error(err, SBX_E_INVAL,
				      "plugins: info struct has size %u, expected %zu (use "
				      "SBX_INIT_HEADER)",
				      info->struct_size, sizeof(*info));
	if (index >= host->n_slots)
		return sbx__set_error(err, SBX_E_INVAL, "plugins: index %zu is past the end (%zu)",
				      index, host->n_slots);
	pthread_mutex_lock(&host->lock);
	const plugin_slot *s = &host->slots[index];
	info->alias = s->ent->alias;
	info->path = s->ent->path;
	info->registry_file = s->ent->file;
	info->state = s->state;
	info->plugin_abi_major = s->desc ? s->desc->abi_major : 0;
	info->plugin_abi_minor = s->desc ? s->desc->abi_minor : 0;
	info->version = s->desc ? s->desc->version : NULL;
	info->description = s->desc ? s->desc->description : NULL;
	info->reason = s->state == SBX_PLUGIN_FAULTY
			   ? (s->reason ? s->reason : sbx_status_message(s->fault_code))
			   : NULL;
	pthread_mutex_unlock(&host->lock);
	return SBX_OK;
}

/* ---- data sources */

size_t sbx_data_source_count(const sbx_host *host)
{
	return host ? host->cfg->n : 0;
}

int sbx_data_source_get(const sbx_host *host, size_t index, const char **name, const char **alias,
			sbx_error *err)
{
	if (!host)
		return sbx__set_error(err, SBX_E_INVAL, "data sources: NULL host");
	const sbx__data_source *ds;
	if (index == SIZE_MAX)
		ds = &host->cfg->deflt;
	else if (index < host->cfg->n)
		ds = &host->cfg->sources[index];
	else
		return sbx__set_error(err, SBX_E_INVAL,
				      "data sources: index %zu is past the end (%zu)", index,
				      host->cfg->n);
	if (name)
		*name = ds->name;
	if (alias)
		*alias = ds->alias;
	return SBX_OK;
}

/* ---- plugin states */

/* The data source an alias's ids go to when nothing else says: the default block if it
 * uses the alias, else the first data source that does, else NULL. */
static const sbx__data_source *alias_source(const sbx_host *h, const char *alias)
{
	if (h->cfg->deflt.alias && strcmp(h->cfg->deflt.alias, alias) == 0)
		return &h->cfg->deflt;
	for (size_t i = 0; i < h->cfg->n; i++)
		if (h->cfg->sources[i].alias && strcmp(h->cfg->sources[i].alias, alias) == 0)
			return &h->cfg->sources[i];
	return NULL;
}

/* The state for (ds, slot), initialising it when needed. ds NULL: the routing default for
 * the alias (see the top of this file). Called with h->lock held. */
static int state_made_locked(sbx_host *h, plugin_slot *s, const sbx__data_source *ds,
			     const char *recorded, plugin_state **out, sbx_error *err)
{
	size_t slot = (size_t)(s - h->slots);
	int rc = load_locked(h, s, err);
	if (rc != SBX_OK)
		return rc;
	for (size_t i = 0; i < h->n_states; i++) {
		plugin_state *ps = h->states[i];
		if (ps->slot != slot)
			continue;
		if (recorded ? ps->recorded && strcmp(ps->recorded, recorded) == 0
			     : !ps->recorded && (ds == NULL || ps->ds == ds)) {
			*out = ps;
			return SBX_OK;
		}
	}
	const char *alias = s->ent->alias;
	if (!ds)
		ds = alias_source(h, alias);
	if (recorded) {
		/* The same config as this process's: its usual state does. */
		char *mine = sbx__config_record(ds ? ds->keys : NULL, s->desc);
		int same = mine && strcmp(mine, recorded) == 0;
		sbx__free(mine);
		if (same)
			return state_made_locked(h, s, NULL, NULL, out, err);
	}
	sbx__node *recalled = NULL;
	if (recorded) {
		rc = sbx__config_recall(recorded, &recalled, err);
		if (rc != SBX_OK)
			return rc;
	}
	plugin_state **states = sbx__realloc(h->states, (h->n_states + 1) * sizeof(*states));
	if (!states) {
		sbx__node_free(recalled);
		return nomem(err, alias);
	}
	h->states = states;
	plugin_state *ps = sbx__calloc(1, sizeof(*ps));
	if (!ps) {
		sbx__node_free(recalled);
		return nomem(err, alias);
	}
	ps->slot = slot;
	if (recalled) {
		/* The config the sandbox was created with, under this process's policy. */
		ps->own = ds ? *ds : h->cfg->deflt;
		ps->own.alias = NULL;
		ps->own.keys = recalled;
		ps->has_own = 1;
		ps->ds = &ps->own;
		ps->recorded = sbx__strdup(recorded);
		if (!ps->recorded) {
			state_free(h, ps);
			return nomem(err, alias);
		}
	} else if (ds) {
		ps->ds = ds;
	} else {
		/* No data source uses this alias: registry defaults and the default policy. */
		ps->own = h->cfg->deflt;
		ps->own.alias = NULL;
		ps->own.keys = sbx__calloc(1, sizeof(sbx__node));
		if (!ps->own.keys) {
			sbx__free(ps);
			return nomem(err, alias);
		}
		ps->own.keys->kind = SBX__NODE_MAP;
		ps->has_own = 1;
		ps->ds = &ps->own;
	}
	rc = sbx__config_for_plugin(ps->ds, s->ent->defaults, s->desc, &ps->cfg, err);
	if (rc != SBX_OK)
		goto fail;
	sbx_error perr = {0};
	rc = s->desc->init(ps->cfg, &ps->state, &perr);
	if (rc != SBX_OK) {
		rc = plugin_error(err, &perr, rc, alias, "init");
		goto fail;
	}
	ps->inited = 1;
	h->states[h->n_states++] = ps;
	*out = ps;
	return SBX_OK;
fail:
	state_free(h, ps);
	return rc;
}

static int state_locked(sbx_host *h, plugin_slot *s, const sbx__data_source *ds, plugin_state **out,
			sbx_error *err)
{
	return state_made_locked(h, s, ds, NULL, out, err);
}

static int known_index(const sbx_host *h, const char *id, size_t *idx)
{
	for (size_t i = 0; i < h->n_ids; i++)
		if (strcmp(h->ids[i].id, id) == 0) {
			*idx = i;
			return 1;
		}
	return 0;
}

/* The plugin config recorded with the newest ledger row of id, NULL when none (or when the
 * ledger cannot be read: the id is then tried with this process's config). */
static char *recorded_config(sbx_host *h, const char *id)
{
	sbx__ledger *led = NULL;
	sbx_error lerr = {0};
	if (sbx__host_ledger(h, &led, &lerr) != SBX_OK)
		return NULL;
	sbx__ledger_row *row = sbx__calloc(1, sizeof(*row));
	if (!row)
		return NULL;
	char *out = NULL;
	if (sbx__ledger_find(led, id, row, &lerr) == SBX_OK && row->config[0])
		out = sbx__strdup(row->config);
	sbx__free(row);
	return out;
}

static int route_id(sbx_host *h, const char *id, route *r, sbx_error *err)
{
	if (!h)
		return sbx__set_error(err, SBX_E_INVAL, "host is NULL");
	memset(r, 0, sizeof(*r));
	int rc = sbx__id_split(id, r->alias, sizeof(r->alias), &r->backend, err);
	if (rc != SBX_OK)
		return rc;
	pthread_mutex_lock(&h->lock);
	r->slot = find_slot(h, r->alias, err);
	if (!r->slot) {
		rc = SBX_E_UNKNOWN_ALIAS;
		goto out;
	}
	size_t i;
	if (known_index(h, id, &i)) {
		r->ps = h->ids[i].ps;
		goto out;
	}
	/* An id this process did not create: the config recorded with its ledger row, if
	 * any, reaches it (the ledger is read without the host lock). */
	pthread_mutex_unlock(&h->lock);
	char *recorded = recorded_config(h, id);
	pthread_mutex_lock(&h->lock);
	rc = state_made_locked(h, r->slot, NULL, recorded, &r->ps, err);
	sbx__free(recorded);
out:
	pthread_mutex_unlock(&h->lock);
	return rc;
}

static void call_begin(const route *r)
{
	if (!(r->slot->desc->flags & SBX_PLUGIN_THREAD_SAFE))
		pthread_mutex_lock(&r->slot->call_lock);
}

static void call_end(const route *r)
{
	if (!(r->slot->desc->flags & SBX_PLUGIN_THREAD_SAFE))
		pthread_mutex_unlock(&r->slot->call_lock);
}

static int unsupported(const route *r, const char *op, sbx_error *err)
{
	return sbx__set_error(err, SBX_E_UNSUPPORTED, "%s: %s: not supported by this backend",
			      r->alias, op);
}

/* ---- ledger */

int sbx__host_ledger(sbx_host *h, sbx__ledger **out, sbx_error *err)
{
	int rc = SBX_OK;
	pthread_mutex_lock(&h->lock);
	if (!h->ledger) {
		char *path = sbx__asprintf("%s/ledger.db", h->state_dir);
		if (!path)
			rc = nomem(err, "ledger");
		else
			rc = sbx__ledger_open(path, &h->ledger, err);
		sbx__free(path);
	}
	*out = h->ledger;
	pthread_mutex_unlock(&h->lock);
	return rc;
}

const char *sbx__host_name(const sbx_host *h)
{
	return h->hostname;
}

const char *sbx__host_ledger_id(const sbx_host *h)
{
	return h->ledger_id;
}

sbx__ledger_actor sbx__host_actor(const sbx_host *h)
{
	sbx__ledger_actor a = {h->hostname, (int64_t)getpid(), h->self_start};
	return a;
}

/* A token nobody else will make: time, pid, a counter and bytes from /dev/urandom. */
static void make_token(sbx_host *h, char token[40])
{
	unsigned char rnd[8] = {0};
	FILE *f = fopen("/dev/urandom", "rb");
	if (f) {
		if (fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd))
			memset(rnd, 0, sizeof(rnd));
		fclose(f);
	}
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

static void ledger_state(sbx_host *h, const char *id, const char *state)
{
	/* Best effort after the fact: the backend's state is the truth, and gc re-checks it. */
	sbx_error lerr = {0};
	sbx__ledger *led = NULL;
	if (sbx__host_ledger(h, &led, &lerr) == SBX_OK &&
	    sbx__ledger_set_state(led, id, state, &lerr) == SBX_OK)
		return;
	sbx__log(SBX_LOG_WARN, "ledger", "%s: cannot record state %s: %s", id, state, lerr.message);
}

/* Passes the ids a plugin lists on to the caller's callback, dropping NULL and empty ones. */
typedef struct id_check {
	sbx_id_fn fn;
	void *ctx;
	const char *alias;
	size_t bad;
} id_check;

static int checked_id(void *ctx, const char *backend_id)
{
	id_check *c = ctx;
	if (!backend_id || !backend_id[0]) {
		c->bad++;
		return SBX_OK;
	}
	return c->fn(c->ctx, backend_id);
}

int sbx__host_list_by_label(sbx_host *h, const char *alias, const char *key, const char *value,
			    sbx_id_fn fn, void *ctx, sbx_error *err)
{
	route r;
	memset(&r, 0, sizeof(r));
	snprintf(r.alias, sizeof(r.alias), "%s", alias);
	pthread_mutex_lock(&h->lock);
	r.slot = find_slot(h, alias, err);
	int rc = r.slot ? state_locked(h, r.slot, NULL, &r.ps, err) : SBX_E_UNKNOWN_ALIAS;
	pthread_mutex_unlock(&h->lock);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->list_by_label)
		return unsupported(&r, "list_by_label", err);
	sbx_error perr = {0};
	id_check chk = {.fn = fn, .ctx = ctx, .alias = alias};
	call_begin(&r);
	rc = r.slot->desc->list_by_label(r.ps->state, key, value, checked_id, &chk, &perr);
	call_end(&r);
	if (chk.bad)
		sbx__log(SBX_LOG_WARN, alias,
			 "list_by_label: plugin reported %zu NULL or empty ids; ignored", chk.bad);
	return rc == SBX_OK ? SBX_OK : plugin_error(err, &perr, rc, alias, "list_by_label");
}

/* ---- create / destroy */

static int remember_id(sbx_host *h, const char *id, plugin_state *ps)
{
	char *copy = sbx__strdup(id);
	if (!copy)
		return SBX_E_NOMEM;
	pthread_mutex_lock(&h->lock);
	known_id *ids = sbx__realloc(h->ids, (h->n_ids + 1) * sizeof(*ids));
	if (!ids) {
		pthread_mutex_unlock(&h->lock);
		sbx__free(copy);
		return SBX_E_NOMEM;
	}
	h->ids = ids;
	h->ids[h->n_ids].id = copy;
	h->ids[h->n_ids].ps = ps;
	h->n_ids++;
	ps->live++;
	pthread_mutex_unlock(&h->lock);
	return SBX_OK;
}

static void forget_id(sbx_host *h, const char *id)
{
	pthread_mutex_lock(&h->lock);
	size_t i;
	if (known_index(h, id, &i)) {
		h->ids[i].ps->live--;
		sbx__free(h->ids[i].id);
		h->ids[i] = h->ids[h->n_ids - 1];
		h->n_ids--;
	}
	pthread_mutex_unlock(&h->lock);
}

/* The create proper, once the data source's plugin state is known and a place under its
 * max_concurrency is reserved. */
static int create_in(sbx_host *host, const sbx_create_opts *opts, const sbx__data_source *ds,
		     route r, char id[SBX_ID_MAX], sbx_error *err)
{
	int rc;
	size_t n_extra = opts ? opts->n_labels : 0;
	sbx__ledger *led = NULL;
	rc = sbx__host_ledger(host, &led, err);
	if (rc != SBX_OK)
		return rc;
	sbx__ledger_row row;
	memset(&row, 0, sizeof(row));
	make_token(host, row.token);
	sbx_kv *labels = sbx__calloc(6 + n_extra, sizeof(*labels));
	if (!labels)
		return nomem(err, "create");
	int64_t ttl = opts && opts->ttl_seconds > 0 ? opts->ttl_seconds : ds->policy.ttl;
	char expires[32];
	size_t nl = 0;
	labels[nl++] = (sbx_kv){"sbx.owner", host->owner};
	labels[nl++] = (sbx_kv){"sbx.run", host->run_id};
	labels[nl++] = (sbx_kv){"sbx.data_source", ds->name};
	labels[nl++] = (sbx_kv){"sbx.token", row.token};
	labels[nl++] = (sbx_kv){"sbx.ledger", host->ledger_id};
	int64_t now = (int64_t)time(NULL);
	if (ttl > 0) {
		snprintf(expires, sizeof(expires), "%lld", (long long)(now + ttl));
		labels[nl++] = (sbx_kv){"sbx.expires", expires};
	}
	for (size_t i = 0; i < n_extra; i++)
		labels[nl++] = opts->labels[i];

	sbx_create_spec spec;
	memset(&spec, 0, sizeof(spec));
	SBX_INIT_HEADER(spec);
	spec.image = opts ? opts->image : NULL;
	spec.labels = labels;
	spec.n_labels = (uint32_t)nl;
	spec.env = opts ? opts->env : NULL;
	spec.n_env = opts ? opts->n_env : 0;
	spec.ttl_seconds = ttl > 0 ? ttl : 0;
	spec.data_source = ds->name;

	/* Recorded before the create is sent, so a crash mid-call leaves a row to reap by the
	 * sbx.token label. */
	snprintf(row.alias, sizeof(row.alias), "%s", ds->alias);
	snprintf(row.data_source, sizeof(row.data_source), "%s", ds->name);
	memcpy(row.owner_host, host->hostname, sizeof(row.owner_host));
	if (opts && opts->detached) {
		row.owner_pid = opts->owner_pid > 0 ? opts->owner_pid : 0;
		row.owner_start = row.owner_pid ? sbx__process_start_time(row.owner_pid) : 0;
	} else {
		row.owner_pid = (int64_t)getpid();
		row.owner_start = host->self_start;
	}
	/* The creating process, whoever owns the sandbox: gc finishes the row if it dies. */
	memcpy(row.actor_host, host->hostname, sizeof(row.actor_host));
	row.actor_pid = (int64_t)getpid();
	row.actor_start = host->self_start;
	snprintf(row.run_id, sizeof(row.run_id), "%s", host->run_id);
	row.created = now;
	row.expires = ttl > 0 ? now + ttl : 0;
	snprintf(row.state, sizeof(row.state), "%s", SBX__LEDGER_CREATING);
	/* What another process needs to reach the sandbox again (secrets as references). */
	const sbx__data_source *conf = r.ps->ds;
	char *recorded = r.ps->recorded
			     ? sbx__strdup(r.ps->recorded)
			     : sbx__config_record(conf ? conf->keys : NULL, r.slot->desc);
	if (!recorded) {
		sbx__free(labels);
		return nomem(err, "create");
	}
	if (strlen(recorded) < sizeof(row.config))
		memcpy(row.config, recorded, strlen(recorded) + 1);
	else
		sbx__log(SBX_LOG_WARN, "ledger",
			 "%s: the config is too long to record (%zu bytes); other processes "
			 "reach the sandbox with their own config",
			 ds->alias, strlen(recorded));
	sbx__free(recorded);
	rc = sbx__ledger_begin(led, &row, err);
	if (rc != SBX_OK) {
		sbx__free(labels);
		return rc;
	}

	size_t prefix = strlen(ds->alias) + 1;
	char *backend = id + prefix;
	size_t cap = SBX_ID_MAX - prefix;
	memset(backend, 0, cap);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->create(r.ps->state, &spec, backend, cap, &perr);
	call_end(&r);
	sbx__free(labels);
	if (rc != SBX_OK) {
		id[0] = '\0';
		rc = plugin_error(err, &perr, rc, ds->alias, "create");
		sbx_error lerr = {0};
		sbx__ledger_fail(led, row.token, err ? err->message : sbx_status_message(rc),
				 &lerr);
		return rc;
	}
	if (memchr(backend, '\0', cap) == NULL || backend[0] == '\0') {
		id[0] = '\0';
		sbx_error lerr = {0};
		sbx__ledger_fail(led, row.token, "plugin returned no usable sandbox id", &lerr);
		return sbx__set_error(
		    err, SBX_E_BACKEND,
		    "%s: create: plugin returned %s sandbox id (at most %zu bytes "
		    "allowed)",
		    ds->alias, backend[0] ? "an unterminated" : "an empty", cap - 1);
	}
	memcpy(id, ds->alias, prefix - 1);
	id[prefix - 1] = ':';
	char check[ALIAS_MAX];
	const char *rest;
	sbx_error ierr = {0};
	if (sbx__id_split(id, check, sizeof(check), &rest, &ierr) != SBX_OK) {
		sbx_error derr = {0};
		call_begin(&r);
		r.slot->desc->destroy(r.ps->state, backend, &derr);
		call_end(&r);
		rc = sbx__set_error(err, SBX_E_BACKEND,
				    "%s: create: plugin returned an id with spaces or control "
				    "characters (destroyed it)",
				    ds->alias);
		id[0] = '\0';
		sbx_error lerr = {0};
		sbx__ledger_fail(led, row.token, "plugin returned a malformed sandbox id", &lerr);
		return rc;
	}
	sbx_error cerr = {0};
	if (sbx__ledger_confirm(led, row.token, id, &cerr) != SBX_OK)
		sbx__log(SBX_LOG_WARN, "ledger", "%s: cannot confirm the create: %s", id,
			 cerr.message);
	if (remember_id(host, id, r.ps) != SBX_OK) {
		/* Without the note the sandbox is still reachable through the alias. */
		sbx__log(SBX_LOG_DEBUG, "host", "could not remember the data source of %s", id);
	}
	return SBX_OK;
}

int sbx_create(sbx_host *host, const sbx_create_opts *opts, char id[SBX_ID_MAX], sbx_error *err)
{
	if (!host || !id)
		return sbx__set_error(err, SBX_E_INVAL, "create: NULL host or id buffer");
	id[0] = '\0';
	if (opts && opts->struct_size < sizeof(*opts))
		return sbx__set_error(err, SBX_E_INVAL,
				      "create: options struct has size %u, expected %zu (use "
				      "SBX_INIT_HEADER)",
				      opts->struct_size, sizeof(*opts));
	const sbx__data_source *ds;
	int rc = sbx__config_find(host->cfg, opts ? opts->data_source : NULL, &ds, err);
	if (rc != SBX_OK)
		return rc;
	if (!ds->alias)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "create: data source '%s' has no sandbox (type: none); "
				      "set sandbox.type to a backend alias",
				      ds->name);
	if (strlen(ds->alias) >= ALIAS_MAX)
		return sbx__set_error(
		    err, SBX_E_CONFIG,
		    "create: data source '%s': alias '%.40s...' is longer than %d "
		    "bytes",
		    ds->name, ds->alias, ALIAS_MAX - 1);
	route r;
	memset(&r, 0, sizeof(r));
	snprintf(r.alias, sizeof(r.alias), "%s", ds->alias);
	pthread_mutex_lock(&host->lock);
	r.slot = find_slot(host, ds->alias, err);
	rc = r.slot ? state_locked(host, r.slot, ds, &r.ps, err) : SBX_E_UNKNOWN_ALIAS;
	uint64_t cap = ds->policy.max_concurrency;
	if (rc == SBX_OK && cap && r.ps->live + r.ps->inflight >= cap)
		rc = sbx__set_error(err, SBX_E_LIMIT,
				    "create: data source '%s' has %llu live sandboxes, its "
				    "max_concurrency; destroy one first",
				    ds->name, (unsigned long long)cap);
	if (rc == SBX_OK)
		r.ps->inflight++;
	pthread_mutex_unlock(&host->lock);
	if (rc != SBX_OK)
		return rc;
	rc = create_in(host, opts, ds, r, id, err);
	pthread_mutex_lock(&host->lock);
	r.ps->inflight--;
	pthread_mutex_unlock(&host->lock);
	return rc;
}

static char *calls_dir_of(const sbx_host *h, const char *id)
{
	/* Percent-encode everything but [A-Za-z0-9._-] so each id gets a distinct folder. */
	char enc[SBX_ID_MAX * 3 + 1];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-') {
			enc[o++] = (char)*p;
		} else {
			snprintf(enc + o, 4, "%%%02X", *p);
			o += 3;
		}
	}
	enc[o] = '\0';
	return sbx__asprintf("%s/calls/%s", h->state_dir, enc);
}

int sbx_destroy(sbx_host *host, const char *id, sbx_error *err)
{
	route r;
	int rc = route_id(host, id, &r, err);
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
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->destroy(r.ps->state, r.backend, &perr);
	call_end(&r);
	if (rc != SBX_OK) {
		if (led)
			sbx__ledger_undelete(led, id, &self, &lerr);
		return plugin_error(err, &perr, rc, r.alias, "destroy");
	}
	ledger_state(host, id, SBX__LEDGER_GONE);
	sbx__jobs_forget(host, id);
	forget_id(host, id);
	char *calls = calls_dir_of(host, id);
	if (!calls)
		return nomem(err, "destroy");
	remove_tree(calls);
	sbx__free(calls);
	return SBX_OK;
}

/* ---- exec */

/* A shell-quoted rendering of argv for command.txt. */
static char *argv_text(const char *const *argv)
{
	size_t n = 1;
	for (size_t i = 0; argv[i]; i++) {
		n += 3;
		for (const char *p = argv[i]; *p; p++)
			n += *p == '\'' ? 4 : 1;
	}
	char *s = sbx__alloc(n);
	if (!s)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; argv[i]; i++) {
		if (i)
			s[o++] = ' ';
		s[o++] = '\'';
		for (const char *p = argv[i]; *p; p++) {
			if (*p == '\'') {
				memcpy(s + o, "'\\''", 4);
				o += 4;
			} else {
				s[o++] = *p;
			}
		}
		s[o++] = '\'';
	}
	s[o] = '\0';
	return s;
}

static double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Resumes a paused sandbox when the policy allows it, else SBX_E_PAUSED. Backends that cannot
 * pause are not asked. */
static int check_paused(sbx_host *h, const route *r, const char *id, sbx_error *err)
{
	const sbx_plugin_desc *d = r->slot->desc;
	if (!d->pause || !d->status)
		return SBX_OK;
	uint32_t st = SBX_STATE_UNKNOWN;
	sbx_error perr = {0};
	call_begin(r);
	int rc = d->status(r->ps->state, r->backend, &st, &perr);
	call_end(r);
	if (rc != SBX_OK)
		return plugin_error(err, &perr, rc, r->alias, "status");
	if (st != SBX_STATE_PAUSED)
		return SBX_OK;
	if (!r->ps->ds->policy.auto_resume || !d->resume)
		return sbx__set_error(err, SBX_E_PAUSED,
				      "%s: exec: sandbox is paused; resume it or set "
				      "auto_resume: true",
				      id);
	call_begin(r);
	rc = d->resume(r->ps->state, r->backend, &perr);
	call_end(r);
	if (rc != SBX_OK)
		return plugin_error(err, &perr, rc, r->alias, "resume");
	ledger_state(h, id, SBX__LEDGER_RUNNING);
	return SBX_OK;
}

/* A plugin's outcome within what plugin.h allows, else SBX_E_BACKEND naming the plugin. */
static int check_outcome(const sbx_exec_outcome *oc, const char *alias, sbx_error *perr)
{
	if (oc->exit_code < -1 || oc->exit_code > 255)
		return sbx__set_error(perr, SBX_E_BACKEND,
				      "%s: exec: plugin reported exit code %d, outside -1..255",
				      alias, (int)oc->exit_code);
	if (oc->signal < 0 || oc->signal > 64)
		return sbx__set_error(perr, SBX_E_BACKEND,
				      "%s: exec: plugin reported signal %d, outside 0..64", alias,
				      (int)oc->signal);
	if (oc->timed_out > 1)
		return sbx__set_error(perr, SBX_E_BACKEND,
				      "%s: exec: plugin reported timed_out %u, expected 0 or 1",
				      alias, (unsigned)oc->timed_out);
	return SBX_OK;
}

int sbx_exec(sbx_host *host, const char *id, const sbx_exec_opts *opts, sbx_exec_result **out,
	     sbx_error *err)
{
	if (!out || !opts)
		return sbx__set_error(err, SBX_E_INVAL, "exec: NULL options or result pointer");
	*out = NULL;
	/* Callers built against ABI 1.0 end before `background`. */
	if (opts->struct_size < offsetof(sbx_exec_opts, background))
		return sbx__set_error(err, SBX_E_INVAL,
				      "exec: options struct has size %u, expected %zu (use "
				      "SBX_INIT_HEADER)",
				      opts->struct_size, sizeof(*opts));
	if ((opts->shell == NULL) == (opts->argv == NULL) || (opts->argv && !opts->argv[0]))
		return sbx__set_error(err, SBX_E_INVAL,
				      "exec: give exactly one of shell and a non-empty argv");
	if (opts->timeout != opts->timeout || opts->timeout > 1e9)
		return sbx__set_error(err, SBX_E_INVAL,
				      "exec: timeout %g is not a number of seconds up to 1e9",
				      opts->timeout);
	if (SBX_HAS(opts, sbx_exec_opts, background) && opts->background) {
		char job[SBX_JOB_ID_MAX];
		int jrc = sbx__job_start(host, id, opts, job, err);
		if (jrc != SBX_OK)
			return jrc;
		sbx_exec_result *jr = sbx__calloc(1, sizeof(*jr));
		if (jr) {
			jr->job_id = sbx__strdup(job);
			jr->stdout_text = sbx__strdup("");
			jr->stderr_text = sbx__strdup("");
		}
		if (!jr || !jr->job_id || !jr->stdout_text || !jr->stderr_text) {
			sbx_exec_result_free(jr);
			return nomem(err, "exec");
		}
		SBX_INIT_HEADER(*jr);
		*out = jr;
		return SBX_OK;
	}
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	rc = check_paused(host, &r, id, err);
	if (rc != SBX_OK)
		return rc;

	char *calls = NULL, *call_dir = NULL, *command = NULL;
	sbx__spool *sp = NULL;
	sbx__outgate *gate = NULL;
	sbx_exec_result *res = NULL;
	uint32_t argc = 0;
	const sbx__policy *pol = &r.ps->ds->policy;
	double timeout = opts->timeout < 0 ? pol->timeout : opts->timeout;

	pthread_mutex_lock(&host->lock);
	uint64_t n = ++host->seq;
	pthread_mutex_unlock(&host->lock);
	calls = calls_dir_of(host, id);
	if (calls)
		call_dir = sbx__asprintf("%s/%lld-%ld-%llu", calls, (long long)time(NULL),
					 (long)getpid(), (unsigned long long)n);
	command = opts->shell ? sbx__strdup(opts->shell) : argv_text(opts->argv);
	res = sbx__calloc(1, sizeof(*res));
	if (!calls || !call_dir || !command || !res) {
		rc = nomem(err, "exec");
		goto out;
	}
	SBX_INIT_HEADER(*res);
	rc = sbx__spool_new(call_dir, command, pol, &sp, err);
	if (rc != SBX_OK)
		goto out;
	if (opts->argv)
		while (opts->argv[argc])
			argc++;

	sbx_exec_request req;
	memset(&req, 0, sizeof(req));
	SBX_INIT_HEADER(req);
	req.shell = opts->shell;
	req.argv = opts->argv;
	req.argc = argc;
	req.has_stdin = opts->has_stdin ? 1u : 0u;
	req.cwd = opts->cwd;
	req.env = opts->env;
	req.n_env = opts->n_env;
	req.stdin_data = opts->has_stdin ? opts->stdin_data : NULL;
	req.stdin_len = opts->has_stdin ? opts->stdin_len : 0;
	if (timeout > 0) {
		/* Rounded up, so a fraction of a millisecond still bounds the call. */
		double ms = timeout * 1000.0;
		req.timeout_ms = (uint64_t)ms;
		if ((double)req.timeout_ms < ms)
			req.timeout_ms++;
	}
	req.user = opts->user;
	rc = sbx__outgate_open(sbx__spool_write, sp, r.alias, &gate);
	if (rc != SBX_OK) {
		rc = nomem(err, "exec");
		goto out;
	}
	req.output = sbx__outgate_output;
	req.output_ctx = sbx__outgate_ctx(gate);

	sbx_exec_outcome oc;
	memset(&oc, 0, sizeof(oc));
	SBX_INIT_HEADER(oc);
	sbx_error perr = {0};
	double t0 = now_seconds();
	call_begin(&r);
	rc = r.slot->desc->execute(r.ps->state, r.backend, &req, &oc, &perr);
	call_end(&r);
	/* From here a plugin thread calling back reaches nothing. */
	sbx__outgate_close(gate);
	gate = NULL;
	res->duration = now_seconds() - t0;
	if (rc == SBX_OK)
		rc = check_outcome(&oc, r.alias, &perr);
	if (rc != SBX_OK) {
		sbx_exec_result scratch;
		memset(&scratch, 0, sizeof(scratch));
		sbx_error serr = {0};
		/* A spool failure (disk full) is the more useful message. */
		if (sbx__spool_finish(sp, &scratch, &serr) != SBX_OK && serr.code == SBX_E_IO)
			sbx__set_error(err, SBX_E_IO, "%s", serr.message);
		else
			rc = plugin_error(err, &perr, rc, r.alias, "exec");
		sbx__free(scratch.stdout_text);
		sbx__free(scratch.stderr_text);
		sbx__free(scratch.output_dir);
		sbx__free(scratch.stdout_file);
		sbx__free(scratch.stderr_file);
		goto out;
	}
	rc = sbx__spool_finish(sp, res, err);
	if (rc != SBX_OK)
		goto out;
	res->exit_code = oc.exit_code;
	res->signal = oc.signal;
	res->timed_out = oc.timed_out ? 1u : 0u;
	res->oom_killed = oc.oom_killed ? 1u : 0u;
	*out = res;
	res = NULL;
out:
	sbx__outgate_close(gate);
	sbx__spool_free(sp);
	if (rc != SBX_OK && call_dir) {
		/* Nothing to show for a call that did not run; keep the sandbox folder tidy. */
		remove_tree(call_dir);
		if (calls)
			rmdir(calls);
	}
	sbx_exec_result_free(res);
	sbx__free(command);
	sbx__free(call_dir);
	sbx__free(calls);
	return rc;
}

/* ---- quiet runs for jobs.c */

static int capture_output(void *ctx, uint32_t stream, const void *data, size_t len)
{
	sbx__capture *c = ctx;
	if (stream == SBX_STREAM_STDERR) {
		size_t room = sizeof(c->err) - 1 - c->err_len;
		size_t k = len < room ? len : room;
		memcpy(c->err + c->err_len, data, k);
		c->err_len += k;
		c->err[c->err_len] = '\0';
		return SBX_OK;
	}
	size_t k = len;
	if (c->out_len + k > c->out_cap) {
		k = c->out_cap - c->out_len;
		c->out_over = 1;
	}
	if (!k)
		return SBX_OK;
	char *nb = sbx__realloc(c->out, c->out_len + k + 1);
	if (!nb)
		return SBX_E_NOMEM;
	memcpy(nb + c->out_len, data, k);
	c->out = nb;
	c->out_len += k;
	c->out[c->out_len] = '\0';
	return SBX_OK;
}

int sbx__host_run(sbx_host *h, const char *id, const sbx__run_spec *spec, sbx__capture *cap,
		  sbx_exec_outcome *oc, sbx_error *err)
{
	route r;
	int rc = route_id(h, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	rc = check_paused(h, &r, id, err);
	if (rc != SBX_OK)
		return rc;
	sbx_exec_request req;
	memset(&req, 0, sizeof(req));
	SBX_INIT_HEADER(req);
	req.argv = spec->argv;
	while (spec->argv[req.argc])
		req.argc++;
	req.cwd = spec->cwd;
	req.env = spec->env;
	req.n_env = spec->n_env;
	req.has_stdin = spec->has_stdin ? 1u : 0u;
	req.stdin_data = spec->has_stdin ? spec->stdin_data : NULL;
	req.stdin_len = spec->has_stdin ? spec->stdin_len : 0;
	req.user = spec->user;
	req.timeout_ms = spec->timeout_ms;
	sbx__outgate *gate = NULL;
	if (sbx__outgate_open(capture_output, cap, r.alias, &gate) != SBX_OK)
		return nomem(err, "job");
	req.output = sbx__outgate_output;
	req.output_ctx = sbx__outgate_ctx(gate);
	memset(oc, 0, sizeof(*oc));
	SBX_INIT_HEADER(*oc);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->execute(r.ps->state, r.backend, &req, oc, &perr);
	call_end(&r);
	sbx__outgate_close(gate);
	if (rc == SBX_OK)
		rc = check_outcome(oc, r.alias, &perr);
	if (rc != SBX_OK)
		return plugin_error(err, &perr, rc, r.alias, "job");
	return SBX_OK;
}

int sbx__host_policy(sbx_host *h, const char *id, const sbx__policy **out, sbx_error *err)
{
	route r;
	int rc = route_id(h, id, &r, err);
	if (rc == SBX_OK)
		*out = &r.ps->ds->policy;
	return rc;
}

/* ---- files */

int sbx_read_file(sbx_host *host, const char *id, const char *path, void **data, size_t *len,
		  sbx_error *err)
{
	if (!path || !data || !len)
		return sbx__set_error(err, SBX_E_INVAL, "read_file: NULL path or output");
	*data = NULL;
	*len = 0;
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->read_file)
		return unsupported(&r, "read_file", err);
	void *buf = NULL;
	size_t n = 0;
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->read_file(r.ps->state, r.backend, path, &buf, &n, &perr);
	call_end(&r);
	if (rc == SBX_OK && !buf && n > 0)
		rc = sbx__set_error(&perr, SBX_E_BACKEND,
				    "%s: read_file: plugin returned %zu bytes but no buffer",
				    r.alias, n);
	if (rc != SBX_OK) {
		sbx__free(buf);
		return plugin_error(err, &perr, rc, r.alias, "read_file");
	}
	/* The promised terminating NUL, whatever the plugin allocated. */
	char *b = sbx__realloc(buf, n + 1);
	if (!b) {
		sbx__free(buf);
		return nomem(err, "read_file");
	}
	b[n] = '\0';
	*data = b;
	*len = n;
	return SBX_OK;
}

int sbx_write_file(sbx_host *host, const char *id, const char *path, const void *data, size_t len,
		   uint32_t mode, sbx_error *err)
{
	if (!path || (!data && len))
		return sbx__set_error(err, SBX_E_INVAL, "write_file: NULL path or data");
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->write_file)
		return unsupported(&r, "write_file", err);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->write_file(r.ps->state, r.backend, path, data ? data : "", len,
				      mode ? mode : 0644, &perr);
	call_end(&r);
	return rc == SBX_OK ? SBX_OK : plugin_error(err, &perr, rc, r.alias, "write_file");
}

int sbx_stat(sbx_host *host, const char *id, const char *path, sbx_file_info *info, sbx_error *err)
{
	if (!path || !info)
		return sbx__set_error(err, SBX_E_INVAL, "stat: NULL path or info");
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->stat_file)
		return unsupported(&r, "stat", err);
	memset(info, 0, sizeof(*info));
	SBX_INIT_HEADER(*info);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->stat_file(r.ps->state, r.backend, path, info, &perr);
	call_end(&r);
	return rc == SBX_OK ? SBX_OK : plugin_error(err, &perr, rc, r.alias, "stat");
}

int sbx_list_dir(sbx_host *host, const char *id, const char *path, sbx_file_info **entries,
		 size_t *n, sbx_error *err)
{
	if (!path || !entries || !n)
		return sbx__set_error(err, SBX_E_INVAL, "list_dir: NULL path or output");
	*entries = NULL;
	*n = 0;
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->list_dir)
		return unsupported(&r, "list_dir", err);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->list_dir(r.ps->state, r.backend, path, entries, n, &perr);
	call_end(&r);
	if (rc == SBX_OK && !*entries && *n > 0)
		rc = sbx__set_error(&perr, SBX_E_BACKEND,
				    "%s: list_dir: plugin returned %zu entries but no array",
				    r.alias, *n);
	if (rc != SBX_OK) {
		sbx__free(*entries);
		*entries = NULL;
		*n = 0;
		return plugin_error(err, &perr, rc, r.alias, "list_dir");
	}
	return SBX_OK;
}

int sbx_mkdir(sbx_host *host, const char *id, const char *path, int parents, sbx_error *err)
{
	if (!path)
		return sbx__set_error(err, SBX_E_INVAL, "mkdir: NULL path");
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->make_dir)
		return unsupported(&r, "mkdir", err);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->make_dir(r.ps->state, r.backend, path, parents ? 1u : 0u, &perr);
	call_end(&r);
	return rc == SBX_OK ? SBX_OK : plugin_error(err, &perr, rc, r.alias, "mkdir");
}

int sbx_remove(sbx_host *host, const char *id, const char *path, int recursive, sbx_error *err)
{
	if (!path)
		return sbx__set_error(err, SBX_E_INVAL, "remove: NULL path");
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->remove_path)
		return unsupported(&r, "remove", err);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->remove_path(r.ps->state, r.backend, path, recursive ? 1u : 0u, &perr);
	call_end(&r);
	return rc == SBX_OK ? SBX_OK : plugin_error(err, &perr, rc, r.alias, "remove");
}

/* ---- lifecycle */

typedef int (*id_op)(void *state, const char *id, sbx_error *err);

static int simple_op(sbx_host *host, const char *id, size_t offset, const char *name,
		     sbx_error *err)
{
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	id_op op;
	memcpy(&op, (const char *)r.slot->desc + offset, sizeof(op));
	if (!op)
		return unsupported(&r, name, err);
	sbx_error perr = {0};
	call_begin(&r);
	rc = op(r.ps->state, r.backend, &perr);
	call_end(&r);
	return rc == SBX_OK ? SBX_OK : plugin_error(err, &perr, rc, r.alias, name);
}

int sbx_pause(sbx_host *host, const char *id, sbx_error *err)
{
	int rc = simple_op(host, id, offsetof(sbx_plugin_desc, pause), "pause", err);
	if (rc == SBX_OK)
		ledger_state(host, id, SBX__LEDGER_PAUSED);
	return rc;
}

int sbx_resume(sbx_host *host, const char *id, sbx_error *err)
{
	int rc = simple_op(host, id, offsetof(sbx_plugin_desc, resume), "resume", err);
	if (rc == SBX_OK)
		ledger_state(host, id, SBX__LEDGER_RUNNING);
	return rc;
}

int sbx_status(sbx_host *host, const char *id, uint32_t *state, sbx_error *err)
{
	if (!state)
		return sbx__set_error(err, SBX_E_INVAL, "status: NULL state pointer");
	*state = SBX_STATE_UNKNOWN;
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->status)
		return unsupported(&r, "status", err);
	sbx_error perr = {0};
	call_begin(&r);
	rc = r.slot->desc->status(r.ps->state, r.backend, state, &perr);
	call_end(&r);
	if (rc == SBX_OK && *state > SBX_STATE_GONE) {
		rc =
		    sbx__set_error(err, SBX_E_BACKEND,
				   "%s: status: plugin reported state %u, not an SBX_STATE_* value",
				   r.alias, (unsigned)*state);
		*state = SBX_STATE_UNKNOWN;
		return rc;
	}
	return rc == SBX_OK ? SBX_OK : plugin_error(err, &perr, rc, r.alias, "status");
}

int sbx_sandbox_info(sbx_host *host, const char *id, char **json, sbx_error *err)
{
	if (!json)
		return sbx__set_error(err, SBX_E_INVAL, "sandbox info: NULL output");
	*json = NULL;
	route r;
	int rc = route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	if (!r.slot->desc->sandbox_info) {
		*json = sbx__strdup("{}");
		return *json ? SBX_OK : nomem(err, "sandbox info");
	}
	sbx_error perr = {0};
	char *out = NULL;
	call_begin(&r);
	rc = r.slot->desc->sandbox_info(r.ps->state, r.backend, &out, &perr);
	call_end(&r);
	if (rc != SBX_OK) {
		sbx__free(out);
		return plugin_error(err, &perr, rc, r.alias, "sandbox_info");
	}
	if (!out)
		return sbx__set_error(err, SBX_E_BACKEND, "%s: sandbox_info: no JSON returned",
				      r.alias);
	*json = out;
	return SBX_OK;
}

/* ---- backend info */

/* Appends s to a JSON string literal (quotes included). */
static char *json_str(const char *s)
{
	size_t n = 3;
	for (const char *p = s; *p; p++)
		n += 6;
	char *o = sbx__alloc(n);
	if (!o)
		return NULL;
	size_t k = 0;
	o[k++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			o[k++] = '\\';
			o[k++] = (char)*p;
		} else if (*p < 0x20) {
			snprintf(o + k, 7, "\\u%04x", *p);
			k += 6;
		} else {
			o[k++] = (char)*p;
		}
	}
	o[k++] = '"';
	o[k] = '\0';
	return o;
}

int sbx_backend_info(sbx_host *host, const char *alias, char **json, sbx_error *err)
{
	if (!host || !alias || !json)
		return sbx__set_error(err, SBX_E_INVAL, "backend info: NULL host, alias or output");
	*json = NULL;
	route r;
	memset(&r, 0, sizeof(r));
	int rc;
	pthread_mutex_lock(&host->lock);
	r.slot = find_slot(host, alias, err);
	rc = r.slot ? state_locked(host, r.slot, NULL, &r.ps, err) : SBX_E_UNKNOWN_ALIAS;
	pthread_mutex_unlock(&host->lock);
	if (rc != SBX_OK)
		return rc;
	snprintf(r.alias, sizeof(r.alias), "%s", alias);
	char *backend = NULL, *qa = NULL, *qp = NULL, *qv = NULL, *qd = NULL;
	if (r.slot->desc->info) {
		sbx_error perr = {0};
		call_begin(&r);
		rc = r.slot->desc->info(r.ps->state, &backend, &perr);
		call_end(&r);
		if (rc != SBX_OK) {
			sbx__free(backend);
			return plugin_error(err, &perr, rc, alias, "info");
		}
	}
	qa = json_str(alias);
	qp = json_str(r.slot->ent->path);
	qv = json_str(r.slot->desc->version ? r.slot->desc->version : "");
	qd = json_str(r.ps->ds->name ? r.ps->ds->name : "default");
	if (qa && qp && qv && qd)
		*json =
		    sbx__asprintf("{\"alias\":%s,\"path\":%s,\"version\":%s,\"abi\":\"%u.%u\","
				  "\"data_source\":%s,\"thread_safe\":%s,\"backend\":%s}",
				  qa, qp, qv, r.slot->desc->abi_major, r.slot->desc->abi_minor, qd,
				  (r.slot->desc->flags & SBX_PLUGIN_THREAD_SAFE) ? "true" : "false",
				  backend ? backend : "{}");
	rc = *json ? SBX_OK : nomem(err, "backend info");
	sbx__free(backend);
	sbx__free(qa);
	sbx__free(qp);
	sbx__free(qv);
	sbx__free(qd);
	return rc;
}

int sbx_data_source_check(sbx_host *host, size_t index, sbx_error *err)
{
	if (!host)
		return sbx__set_error(err, SBX_E_INVAL, "check: NULL host");
	if (index != SIZE_MAX && index >= host->cfg->n)
		return sbx__set_error(err, SBX_E_INVAL, "check: no data source %zu (there are %zu)",
				      index, host->cfg->n);
	const sbx__data_source *ds =
	    index == SIZE_MAX ? &host->cfg->deflt : &host->cfg->sources[index];
	if (!ds->alias)
		return SBX_OK;
	pthread_mutex_lock(&host->lock);
	plugin_slot *s = find_slot(host, ds->alias, err);
	int rc = s ? load_locked(host, s, err) : SBX_E_UNKNOWN_ALIAS;
	struct sbx_config *cfg = NULL;
	if (rc == SBX_OK)
		rc = sbx__config_for_plugin(ds, s->ent->defaults, s->desc, &cfg, err);
	pthread_mutex_unlock(&host->lock);
	sbx__config_obj_free(cfg);
	return rc;
}

/* Routing: which plugin state serves a call.
 *
 * A plugin state is made per (data source, alias) by init with that data source's config. A
 * call on an id uses the state that created it when this host made it; otherwise, when the
 * ledger holds the id with a recorded config that differs from this process's, a state of
 * its own made from that config (recall.c); otherwise the first state initialised for the
 * alias; otherwise a state initialised now from the default block when it uses the alias,
 * else from the first data source that does, else from the registry defaults alone. That
 * state's data source supplies the policy (timeout, truncation, auto_resume). */
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

void sbx__state_free(sbx_host *h, sbx__state *ps)
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

/* An initialised state of slot for ds (NULL: any of this process's config) or for the
 * recorded config, or NULL. */
static sbx__state *find_state(const sbx_host *h, size_t slot, const sbx__data_source *ds,
			      const char *recorded)
{
	for (size_t i = 0; i < h->n_states; i++) {
		sbx__state *ps = h->states[i];
		if (ps->slot != slot)
			continue;
		if (recorded ? ps->recorded && strcmp(ps->recorded, recorded) == 0
			     : !ps->recorded && (ds == NULL || ps->ds == ds))
			return ps;
	}
	return NULL;
}

/* Whether the recorded config is the one this process would record for ds. */
static int same_config(const sbx__data_source *ds, const sbx__slot *s, const char *recorded)
{
	char *mine = sbx__config_record(ds ? ds->keys : NULL, s->desc);
	int same = mine && strcmp(mine, recorded) == 0;
	sbx__free(mine);
	return same;
}

/* The data source a new state serves: ds; else, for a recorded config, a copy of ds (or of
 * the default block) with the recalled keys, under this process's policy; else, when no
 * data source uses the alias, the default block's policy with no keys (registry defaults
 * only). */
static int state_source(sbx_host *h, sbx__state *ps, const sbx__data_source *ds,
			const char *recorded, sbx_error *err)
{
	if (ds && !recorded) {
		ps->ds = ds;
		return SBX_OK;
	}
	sbx__node *keys = NULL;
	int rc = recorded ? sbx__config_recall(recorded, &keys, err) : SBX_OK;
	if (rc != SBX_OK)
		return rc;
	if (!keys && (keys = sbx__calloc(1, sizeof(*keys))) != NULL)
		keys->kind = SBX__NODE_MAP;
	ps->own = ds ? *ds : h->cfg->deflt;
	ps->own.alias = NULL;
	ps->own.keys = keys;
	ps->has_own = keys != NULL;
	ps->ds = &ps->own;
	if (recorded)
		ps->recorded = sbx__strdup(recorded);
	return keys && (!recorded || ps->recorded) ? SBX_OK : SBX_E_NOMEM;
}

/* A new state of slot s for ds or the recorded config: its config, and the plugin's init. */
static int new_state(sbx_host *h, sbx__slot *s, const sbx__data_source *ds, const char *recorded,
		     sbx__state **out, sbx_error *err)
{
	const char *alias = s->ent->alias;
	sbx__state **states = sbx__realloc(h->states, (h->n_states + 1) * sizeof(*states));
	if (!states)
		return sbx__nomem(err, alias);
	h->states = states;
	sbx__state *ps = sbx__calloc(1, sizeof(*ps));
	if (!ps)
		return sbx__nomem(err, alias);
	ps->slot = (size_t)(s - h->slots);
	int rc = state_source(h, ps, ds, recorded, err);
	if (rc == SBX_E_NOMEM)
		sbx__nomem(err, alias);
	if (rc == SBX_OK)
		rc = sbx__config_for_plugin(ps->ds, s->ent->defaults, s->desc, &ps->cfg, err);
	if (rc == SBX_OK) {
		ps->cfg->state_dir = h->plugins_dir;
		sbx_error perr = {0};
		rc = s->desc->init(ps->cfg, &ps->state, &perr);
		if (rc != SBX_OK)
			rc = sbx__plugin_error(err, &perr, rc, alias, "init");
	}
	if (rc != SBX_OK) {
		sbx__state_free(h, ps);
		return rc;
	}
	ps->inited = 1;
	h->states[h->n_states++] = ps;
	*out = ps;
	return SBX_OK;
}

/* The state for (ds, slot s), initialising it when needed. ds NULL: the routing default of
 * the alias (see the top of this file); recorded: the config a ledger row recorded. Called
 * with h->lock held. */
static int state_made_locked(sbx_host *h, sbx__slot *s, const sbx__data_source *ds,
			     const char *recorded, sbx__state **out, sbx_error *err)
{
	int rc = sbx__slot_load_locked(h, s, err);
	if (rc != SBX_OK)
		return rc;
	*out = find_state(h, (size_t)(s - h->slots), ds, recorded);
	if (*out)
		return SBX_OK;
	if (!ds)
		ds = alias_source(h, s->ent->alias);
	/* The same config as this process's: its usual state does. */
	if (recorded && same_config(ds, s, recorded))
		return state_made_locked(h, s, NULL, NULL, out, err);
	return new_state(h, s, ds, recorded, out, err);
}

int sbx__route_alias(sbx_host *h, const char *alias, const sbx__data_source *ds, sbx__route *r,
		     sbx_error *err)
{
	memset(r, 0, sizeof(*r));
	if (sbx__host_forked(h, err) != SBX_OK)
		return SBX_E_INVAL;
	snprintf(r->alias, sizeof(r->alias), "%s", alias);
	pthread_mutex_lock(&h->lock);
	r->slot = sbx__slot_find(h, alias, err);
	int rc =
	    r->slot ? state_made_locked(h, r->slot, ds, NULL, &r->ps, err) : SBX_E_UNKNOWN_ALIAS;
	pthread_mutex_unlock(&h->lock);
	return rc;
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

int sbx__route_id(sbx_host *h, const char *id, sbx__route *r, sbx_error *err)
{
	if (!h)
		return sbx__set_error(err, SBX_E_INVAL, "host is NULL");
	memset(r, 0, sizeof(*r));
	if (sbx__host_forked(h, err) != SBX_OK)
		return SBX_E_INVAL;
	int rc = sbx__id_split(id, r->alias, sizeof(r->alias), &r->backend, err);
	if (rc != SBX_OK)
		return rc;
	pthread_mutex_lock(&h->lock);
	r->slot = sbx__slot_find(h, r->alias, err);
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

int sbx__route_remember(sbx_host *h, const char *id, sbx__state *ps)
{
	char *copy = sbx__strdup(id);
	if (!copy)
		return SBX_E_NOMEM;
	pthread_mutex_lock(&h->lock);
	sbx__known_id *ids = sbx__realloc(h->ids, (h->n_ids + 1) * sizeof(*ids));
	if (!ids) {
		pthread_mutex_unlock(&h->lock);
		sbx__free(copy);
		return SBX_E_NOMEM;
	}
	h->ids = ids;
	h->ids[h->n_ids].id = copy;
	h->ids[h->n_ids].ps = ps;
	h->n_ids++;
	pthread_mutex_unlock(&h->lock);
	return SBX_OK;
}

void sbx__route_forget(sbx_host *h, const char *id)
{
	pthread_mutex_lock(&h->lock);
	size_t i;
	if (known_index(h, id, &i)) {
		sbx__free(h->ids[i].id);
		h->ids[i] = h->ids[h->n_ids - 1];
		h->n_ids--;
	}
	pthread_mutex_unlock(&h->lock);
}

int sbx__host_policy(sbx_host *h, const char *id, const sbx__policy **out, sbx_error *err)
{
	sbx__route r;
	int rc = sbx__route_id(h, id, &r, err);
	if (rc == SBX_OK)
		*out = &r.ps->ds->policy;
	return rc;
}

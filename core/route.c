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

/* The state for (ds, slot), initialising it when needed. ds NULL: the routing default for
 * the alias (see the top of this file). Called with h->lock held. */
static int state_made_locked(sbx_host *h, sbx__slot *s, const sbx__data_source *ds,
			     const char *recorded, sbx__state **out, sbx_error *err)
{
	size_t slot = (size_t)(s - h->slots);
	int rc = sbx__slot_load_locked(h, s, err);
	if (rc != SBX_OK)
		return rc;
	for (size_t i = 0; i < h->n_states; i++) {
		sbx__state *ps = h->states[i];
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
	sbx__state **states = sbx__realloc(h->states, (h->n_states + 1) * sizeof(*states));
	if (!states) {
		sbx__node_free(recalled);
		return sbx__nomem(err, alias);
	}
	h->states = states;
	sbx__state *ps = sbx__calloc(1, sizeof(*ps));
	if (!ps) {
		sbx__node_free(recalled);
		return sbx__nomem(err, alias);
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
			sbx__state_free(h, ps);
			return sbx__nomem(err, alias);
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
			return sbx__nomem(err, alias);
		}
		ps->own.keys->kind = SBX__NODE_MAP;
		ps->has_own = 1;
		ps->ds = &ps->own;
	}
	rc = sbx__config_for_plugin(ps->ds, s->ent->defaults, s->desc, &ps->cfg, err);
	if (rc != SBX_OK)
		goto fail;
	ps->cfg->state_dir = h->plugins_dir;
	sbx_error perr = {0};
	rc = s->desc->init(ps->cfg, &ps->state, &perr);
	if (rc != SBX_OK) {
		rc = sbx__plugin_error(err, &perr, rc, alias, "init");
		goto fail;
	}
	ps->inited = 1;
	h->states[h->n_states++] = ps;
	*out = ps;
	return SBX_OK;
fail:
	sbx__state_free(h, ps);
	return rc;
}

int sbx__route_alias(sbx_host *h, const char *alias, const sbx__data_source *ds, sbx__route *r,
		     sbx_error *err)
{
	memset(r, 0, sizeof(*r));
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
	ps->live++;
	pthread_mutex_unlock(&h->lock);
	return SBX_OK;
}

void sbx__route_forget(sbx_host *h, const char *id)
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

int sbx__host_policy(sbx_host *h, const char *id, const sbx__policy **out, sbx_error *err)
{
	sbx__route r;
	int rc = sbx__route_id(h, id, &r, err);
	if (rc == SBX_OK)
		*out = &r.ps->ds->policy;
	return rc;
}

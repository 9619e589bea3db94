/* Plugin slots: one per registry alias. Plugins load on first use of an alias. All aliases
 * that the registry maps to one file share one load; a failed load leaves each of them faulty
 * with the saved status and message, which every later call returns, while other aliases keep
 * working. */
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

int sbx__slots_new(sbx_host *h, sbx_error *err)
{
	if (h->reg->n) {
		h->slots = sbx__calloc(h->reg->n, sizeof(*h->slots));
		if (!h->slots)
			return sbx__nomem(err, "host");
	}
	for (size_t i = 0; i < h->reg->n; i++) {
		if (pthread_mutex_init(&h->slots[i].call_lock, NULL) != 0)
			return sbx__set_error(err, SBX_E_NOMEM, "host: cannot create a mutex");
		h->slots[i].ent = &h->reg->entries[i];
		h->n_slots++;
	}
	return SBX_OK;
}

void sbx__slots_free(sbx_host *h)
{
	for (size_t i = 0; i < h->n_slots; i++) {
		sbx__free(h->slots[i].reason);
		pthread_mutex_destroy(&h->slots[i].call_lock);
	}
	sbx__free(h->slots);
}

size_t sbx_plugin_count(const sbx_host *host)
{
	return host ? host->n_slots : 0;
}

sbx__slot *sbx__slot_find(sbx_host *h, const char *alias, sbx_error *err)
{
	/* Slot i is registry entry i. */
	const sbx__reg_entry *e = sbx__registry_find(h->reg, alias);
	if (e)
		return &h->slots[e - h->reg->entries];
	char *known = sbx__registry_alias_list(h->reg);
	sbx__set_error(err, SBX_E_UNKNOWN_ALIAS, "unknown sandbox type '%.100s'; known: %s", alias,
		       known ? known : (h->n_slots ? "(out of memory)" : "none"));
	sbx__free(known);
	return NULL;
}

static void mark_faulty(sbx__slot *s, int code, const char *reason)
{
	s->state = SBX_PLUGIN_FAULTY;
	s->fault_code = code;
	sbx__free(s->reason);
	/* Without memory for the reason the status alone is kept. */
	s->reason = sbx__asprintf("%s: %s", s->ent->alias, reason);
}

static int fault_error(const sbx__slot *s, sbx_error *err)
{
	if (s->reason)
		return sbx__set_error(err, s->fault_code, "%s", s->reason);
	return sbx__set_error(err, s->fault_code, "%s: plugin is faulty (%s)", s->ent->alias,
			      sbx_status_message(s->fault_code));
}

/* The outcome of loading `path` (module mod, or status rc with lerr) for every alias the
 * registry maps to it: loaded with its descriptor, or faulty with the reason. */
static void settle(sbx_host *h, const char *path, int rc, const sbx__module *mod,
		   const sbx_error *lerr)
{
	for (size_t i = 0; i < h->n_slots; i++) {
		sbx__slot *o = &h->slots[i];
		if (strcmp(o->ent->path, path) != 0)
			continue;
		if (rc != SBX_OK) {
			mark_faulty(o, rc,
				    lerr->message[0] ? lerr->message : sbx_status_message(rc));
			continue;
		}
		o->desc = sbx__module_find(mod, o->ent->alias);
		if (o->desc) {
			o->state = SBX_PLUGIN_LOADED;
			continue;
		}
		char msg[400];
		snprintf(msg, sizeof(msg), "%s does not register alias '%s'", path, o->ent->alias);
		mark_faulty(o, SBX_E_ABI, msg);
	}
}

int sbx__slot_load_locked(sbx_host *h, sbx__slot *s, sbx_error *err)
{
	if (s->state == SBX_PLUGIN_LOADED)
		return SBX_OK;
	if (s->state == SBX_PLUGIN_FAULTY)
		return fault_error(s, err);
	const char *path = s->ent->path;
	const char **expected = sbx__calloc(h->n_slots, sizeof(*expected));
	sbx__module **mods = sbx__realloc(h->mods, (h->n_mods + 1) * sizeof(*mods));
	if (mods)
		h->mods = mods;
	if (!expected || !mods) {
		sbx__free(expected);
		return sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory loading %s",
				      s->ent->alias, path);
	}
	/* Every alias the registry maps to this file: the plugin may register only those. */
	size_t n = 0;
	for (size_t i = 0; i < h->n_slots; i++)
		if (strcmp(h->slots[i].ent->path, path) == 0)
			expected[n++] = h->slots[i].ent->alias;
	sbx__module *mod = NULL;
	sbx_error lerr = {0};
	int rc = sbx__plugin_open(s->ent, h->plugins_dir, expected, n, &mod, &lerr);
	sbx__free(expected);
	/* Out of memory is not the plugin's fault: a later call may succeed. */
	if (rc == SBX_E_NOMEM)
		return sbx__set_error(err, rc, "%s: %s", s->ent->alias, lerr.message);
	settle(h, path, rc, mod, &lerr);
	if (mod)
		h->mods[h->n_mods++] = mod;
	return s->state == SBX_PLUGIN_LOADED ? SBX_OK : fault_error(s, err);
}

int sbx_plugin_load(sbx_host *host, const char *alias, sbx_error *err)
{
	if (!host || !alias)
		return sbx__set_error(err, SBX_E_INVAL, "plugin load: NULL host or alias");
	pthread_mutex_lock(&host->lock);
	int rc;
	sbx__slot *s = sbx__slot_find(host, alias, err);
	rc = s ? sbx__slot_load_locked(host, s, err) : SBX_E_UNKNOWN_ALIAS;
	pthread_mutex_unlock(&host->lock);
	return rc;
}

int sbx_plugin_get(sbx_host *host, size_t index, sbx_plugin_info *info, sbx_error *err)
{
	if (!host || !info)
		return sbx__set_error(err, SBX_E_INVAL, "plugins: NULL host or info");
	int rc = sbx__struct_out_check(info, sizeof(*info), "plugins: info", err);
	if (rc != SBX_OK)
		return rc;
	if (index >= host->n_slots)
		return sbx__set_error(err, SBX_E_INVAL, "plugins: index %zu is past the end (%zu)",
				      index, host->n_slots);
	sbx_plugin_info full = {0};
	SBX_INIT_HEADER(full);
	pthread_mutex_lock(&host->lock);
	const sbx__slot *s = &host->slots[index];
	const sbx_plugin_desc *d = s->desc;
	full.alias = s->ent->alias;
	full.path = s->ent->path;
	full.registry_file = s->ent->file;
	full.state = s->state;
	full.plugin_abi_major = d ? d->abi_major : 0;
	full.plugin_abi_minor = d ? d->abi_minor : 0;
	full.version = d ? d->version : NULL;
	full.description = d ? d->description : NULL;
	full.reason = s->state == SBX_PLUGIN_FAULTY
			  ? (s->reason ? s->reason : sbx_status_message(s->fault_code))
			  : NULL;
	/* A runner that kept dying leaves its aliases faulty after they loaded. */
	sbx__proxy_health(d, &full.state, &full.reason);
	pthread_mutex_unlock(&host->lock);
	sbx__struct_out(info, &full, sizeof(full));
	return SBX_OK;
}

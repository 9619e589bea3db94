/* Calls made on an alias rather than on a sandbox: list_by_label (gc's listing), backend info
 * and the check of a data source's plugin config. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

/* A list_by_label call: the label, and the caller's callback, which gets the ids the plugin
 * lists minus NULL and empty ones (counted in `bad`). */
typedef struct list_args {
	const char *key, *value;
	sbx_id_fn fn;
	void *ctx;
	size_t bad;
} list_args;

static int checked_id(void *ctx, const char *backend_id)
{
	list_args *a = ctx;
	if (!backend_id || !backend_id[0]) {
		a->bad++;
		return SBX_OK;
	}
	return a->fn(a->ctx, backend_id);
}

static int list_call(const sbx__route *r, void *a, sbx_error *perr)
{
	list_args *x = a;
	return r->slot->desc->list_by_label(r->ps->state, x->key, x->value, checked_id, x, perr);
}

static const sbx__op list_op = {"list_by_label", offsetof(sbx_plugin_desc, list_by_label),
				list_call};

int sbx__host_list_by_label(sbx_host *h, const char *alias, const char *key, const char *value,
			    sbx_id_fn fn, void *ctx, sbx_error *err)
{
	sbx__route r;
	int rc = sbx__route_alias(h, alias, NULL, &r, err);
	if (rc != SBX_OK)
		return rc;
	list_args a = {.key = key, .value = value, .fn = fn, .ctx = ctx};
	rc = sbx__call(&r, &list_op, &a, err);
	if (a.bad)
		sbx__log(SBX_LOG_WARN, alias,
			 "list_by_label: plugin reported %zu NULL or empty ids; ignored", a.bad);
	return rc;
}

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

static int info_call(const sbx__route *r, void *a, sbx_error *perr)
{
	return r->slot->desc->info(r->ps->state, a, perr);
}

static const sbx__op info_op = {"info", offsetof(sbx_plugin_desc, info), info_call};

/* The JSON of sbx_backend_info around the plugin's own (NULL: none). */
static char *info_json(const sbx__route *r, const char *backend)
{
	const sbx_plugin_desc *d = r->slot->desc;
	char *qa = json_str(r->slot->ent->alias);
	char *qp = json_str(r->slot->ent->path);
	char *qv = json_str(d->version ? d->version : "");
	char *qd = json_str(r->ps->ds->name ? r->ps->ds->name : "default");
	char *json = NULL;
	if (qa && qp && qv && qd)
		json = sbx__asprintf("{\"alias\":%s,\"path\":%s,\"version\":%s,\"abi\":\"%u.%u\","
				     "\"data_source\":%s,\"thread_safe\":%s,\"backend\":%s}",
				     qa, qp, qv, d->abi_major, d->abi_minor, qd,
				     (d->flags & SBX_PLUGIN_THREAD_SAFE) ? "true" : "false",
				     backend ? backend : "{}");
	sbx__free(qa);
	sbx__free(qp);
	sbx__free(qv);
	sbx__free(qd);
	return json;
}

int sbx_backend_info(sbx_host *host, const char *alias, char **json, sbx_error *err)
{
	if (!host || !alias || !json)
		return sbx__set_error(err, SBX_E_INVAL, "backend info: NULL host, alias or output");
	*json = NULL;
	sbx__route r;
	int rc = sbx__route_alias(host, alias, NULL, &r, err);
	if (rc != SBX_OK)
		return rc;
	char *backend = NULL;
	/* A plugin without info has nothing to add: not an error here. */
	if (r.slot->desc->info)
		rc = sbx__call(&r, &info_op, &backend, err);
	if (rc == SBX_OK) {
		*json = info_json(&r, backend);
		rc = *json ? SBX_OK : sbx__nomem(err, "backend info");
	}
	sbx__free(backend);
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
	sbx__slot *s = sbx__slot_find(host, ds->alias, err);
	int rc = s ? sbx__slot_load_locked(host, s, err) : SBX_E_UNKNOWN_ALIAS;
	struct sbx_config *cfg = NULL;
	if (rc == SBX_OK)
		rc = sbx__config_for_plugin(ds, s->ent->defaults, s->desc, &cfg, err);
	pthread_mutex_unlock(&host->lock);
	sbx__config_obj_free(cfg);
	return rc;
}

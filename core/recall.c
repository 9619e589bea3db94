/* A sandbox's plugin config recorded with its ledger row, so a process without the original
 * config can reach the sandbox again by id (docs/design.md, "Ids that stand alone").
 *
 * What is recorded: the data source's plugin keys as JSON. A non-secret value is recorded as
 * loaded (a literal "${" in it escaped as "$${"); a secret key only as the ${env.NAME}
 * reference it was written with, and not at all when it was written as a literal value, so
 * no secret reaches the ledger. Reading it back interpolates the references from the reading
 * process's environment. */
#include <string.h>

#include "internal.h"

static const sbx_config_key *decl_of(const sbx_plugin_desc *desc, const char *key)
{
	for (uint32_t k = 0; desc && k < desc->n_keys; k++)
		if (desc->keys[k].name && strcmp(desc->keys[k].name, key) == 0)
			return &desc->keys[k];
	return NULL;
}

/* "${" -> "$${", so interpolation on the way back gives the text unchanged. */
static char *escape_dollars(const char *s)
{
	size_t n = 0;
	for (const char *p = s; *p; p++)
		n += (p[0] == '$' && p[1] == '{') ? 2 : 1;
	char *out = sbx__calloc(n + 1, 1);
	if (!out)
		return NULL;
	size_t k = 0;
	for (const char *p = s; *p; p++) {
		if (p[0] == '$' && p[1] == '{')
			out[k++] = '$';
		out[k++] = *p;
	}
	out[k] = '\0';
	return out;
}

/* Rewrites the scalars of a copied tree for recording: the text before interpolation where
 * use_raw (a secret's reference), else the resolved text escaped; 0 on out of memory. */
static int escape_tree(sbx__node *n, int use_raw)
{
	if (n->kind == SBX__NODE_SCALAR) {
		const char *text = use_raw && n->raw ? n->raw : n->scalar;
		char *e = use_raw && n->raw ? sbx__strdup(text) : escape_dollars(text ? text : "");
		if (!e)
			return 0;
		sbx__free(n->scalar);
		n->scalar = e;
		return 1;
	}
	for (size_t i = 0; i < n->n; i++)
		if (!escape_tree(n->items[i], use_raw))
			return 0;
	return 1;
}

/* 1 when a secret's value is a reference: a scalar written with ${env.NAME} in it. */
static int secret_is_reference(const sbx__node *v)
{
	return v->kind == SBX__NODE_SCALAR && v->raw && strstr(v->raw, "${env.") != NULL;
}

char *sbx__config_record(const sbx__node *keys, const sbx_plugin_desc *desc)
{
	if (!keys || keys->kind != SBX__NODE_MAP || keys->n == 0)
		return sbx__strdup("");
	sbx__node *copy = sbx__node_dup(keys);
	if (!copy)
		return NULL;
	char *json = NULL;
	size_t k = 0;
	for (size_t i = 0; i < copy->n; i++) {
		const sbx_config_key *d = decl_of(desc, copy->keys[i]);
		if (d && d->secret && !secret_is_reference(copy->items[i])) {
			sbx__free(copy->keys[i]);
			sbx__node_free(copy->items[i]);
			continue;
		}
		copy->keys[k] = copy->keys[i];
		copy->items[k] = copy->items[i];
		k++;
	}
	copy->n = k;
	if (k == 0) {
		json = sbx__strdup("");
		goto out;
	}
	/* Values as the recall will interpolate them: a secret as its reference, anything
	 * else as it was resolved at create. */
	for (size_t i = 0; i < copy->n; i++) {
		const sbx_config_key *d = decl_of(desc, copy->keys[i]);
		if (!escape_tree(copy->items[i], d && d->secret))
			goto out;
	}
	json = sbx__node_to_json(copy);
out:
	sbx__node_free(copy);
	return json;
}

int sbx__config_recall(const char *json, sbx__node **keys, sbx_error *err)
{
	*keys = NULL;
	sbx__node *n = NULL;
	int rc =
	    sbx__yaml_load_string(json, "the ledger's recorded config", 1, SBX_E_LEDGER, &n, err);
	if (rc != SBX_OK)
		return rc;
	if (n->kind != SBX__NODE_MAP) {
		sbx__node_free(n);
		return sbx__set_error(err, SBX_E_LEDGER,
				      "ledger: the recorded config is not a map of keys");
	}
	*keys = n;
	return SBX_OK;
}

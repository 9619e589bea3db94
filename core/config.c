/* Config: which backend and settings each data source uses, and the host's policies.
 *
 * Shapes accepted: LoongSage's `data_source.sandbox` (defaults) with `data_sources[i].sandbox`
 * overrides, and NexAU's `sandbox_config` block (the defaults). Merge rule: an override's keys
 * replace the defaults' keys of the same name; when the override names another type, the
 * defaults' plugin keys are not inherited (they belong to another backend) but policy keys are.
 * `type: none`, an empty type or an empty `sandbox:` means no sandbox. A data source may carry
 * name, sandbox, path, weight and metadata (the host reads name and sandbox); any other key is
 * an error. A null policy value keeps the default. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static const char *const top_keys[] = {"data_source", "data_sources", "sandbox_config", NULL};
static const char *const source_keys[] = {"name", "sandbox", "path", "weight", "metadata", NULL};

/* Host policy keys, with the peers' spellings that mean the same thing. */
typedef struct policy_key {
	const char *name;
	const char *canonical;
} policy_key;

static const policy_key policy_keys[] = {
    {"timeout", "timeout"},
    {"command_exec_timeout_seconds", "timeout"}, /* LoongSage */
    {"max_concurrency", "max_concurrency"},
    {"output_char_threshold", "output_char_threshold"},
    {"truncate_head_chars", "truncate_head_chars"},
    {"truncate_tail_chars", "truncate_tail_chars"},
    {"output_max_bytes", "output_max_bytes"},
    {"ttl", "ttl"},
    {"auto_resume", "auto_resume"},
    {"max_jobs", "max_jobs"},
    {"max_starting", "max_starting"},
    {"create_rate", "create_rate"},
    {"create_burst", "create_burst"},
    {"max_file_bytes", "max_file_bytes"},
    /* LoongSage: range-checked but unused; the host has no create-timeout policy yet. */
    {"sandbox_creation_timeout_seconds", "create_timeout"},
    {NULL, NULL},
};

static const char *policy_canonical(const char *key)
{
	for (const policy_key *p = policy_keys; p->name; p++)
		if (strcmp(p->name, key) == 0)
			return p->canonical;
	return NULL;
}

static char *join_names(const char *const *names)
{
	size_t len = 1;
	for (size_t i = 0; names[i]; i++)
		len += strlen(names[i]) + 2;
	char *s = sbx__alloc(len);
	if (!s)
		return NULL;
	size_t used = 0;
	for (size_t i = 0; names[i]; i++)
		used += (size_t)snprintf(s + used, len - used, "%s%s", i ? ", " : "", names[i]);
	s[used] = '\0';
	return s;
}

static int check_keys(const sbx__node *map, const char *const *valid, const char *what,
		      sbx_error *err)
{
	for (size_t i = 0; i < map->n; i++) {
		int ok = 0;
		for (size_t j = 0; valid[j] && !ok; j++)
			ok = strcmp(map->keys[i], valid[j]) == 0;
		if (!ok) {
			char *list = join_names(valid);
			sbx__set_error(err, SBX_E_CONFIG,
				       "%s:%d: unknown key '%s' in %s; valid keys: %s",
				       map->items[i]->file, map->items[i]->line, map->keys[i], what,
				       list ? list : "?");
			sbx__free(list);
			return SBX_E_CONFIG;
		}
	}
	return SBX_OK;
}

static void default_policy(sbx__policy *p)
{
	memset(p, 0, sizeof(*p));
	p->output_char_threshold = 10000;
	p->truncate_head_chars = 5000;
	p->truncate_tail_chars = 5000;
	p->output_max_bytes = 256ull << 20;
	p->max_jobs = 64;
	p->max_file_bytes = 256ull << 20;
}

/* Ranges: a year for timeouts, ten years for ttl. */
#define MAX_TIMEOUT     31536000.0
#define MAX_TTL         315360000LL
#define MAX_CONCURRENCY 1000000LL
#define MAX_RATE        1000000.0 /* creates per second */
#define MAX_CHARS       1000000000LL
#define MAX_BYTES       4611686018427387904LL /* 2^62 */

static int apply_policy(sbx__policy *p, const char *key, const char *canonical, const sbx__node *v,
			sbx_error *err)
{
	if (sbx__scalar_null(v))
		return SBX_OK;
	double d = 0;
	long long x = 0;
	int rc;
	if (strcmp(canonical, "timeout") == 0 || strcmp(canonical, "create_timeout") == 0) {
		rc = sbx__scalar_float(v, key, 0, MAX_TIMEOUT, 0, &d, err);
		if (rc == SBX_OK && canonical[0] == 't')
			p->timeout = d;
		return rc;
	}
	if (strcmp(canonical, "auto_resume") == 0)
		return sbx__scalar_bool(v, key, 0, &p->auto_resume, err);
	if (strcmp(canonical, "ttl") == 0) {
		rc = sbx__scalar_int(v, key, 0, MAX_TTL, 0, &x, err);
		if (rc == SBX_OK)
			p->ttl = (int64_t)x;
		return rc;
	}
	if (strcmp(canonical, "max_concurrency") == 0) {
		rc = sbx__scalar_int(v, key, 0, MAX_CONCURRENCY, 0, &x, err);
		if (rc == SBX_OK)
			p->max_concurrency = (uint64_t)x;
		return rc;
	}
	if (strcmp(canonical, "max_starting") == 0) {
		rc = sbx__scalar_int(v, key, 0, MAX_CONCURRENCY, 0, &x, err);
		if (rc == SBX_OK)
			p->max_starting = (uint64_t)x;
		return rc;
	}
	if (strcmp(canonical, "create_rate") == 0)
		return sbx__scalar_float(v, key, 0, MAX_RATE, 0, &p->create_rate, err);
	if (strcmp(canonical, "create_burst") == 0) {
		rc = sbx__scalar_int(v, key, 1, MAX_CONCURRENCY, 0, &x, err);
		if (rc == SBX_OK)
			p->create_burst = (uint64_t)x;
		return rc;
	}
	if (strcmp(canonical, "max_jobs") == 0) {
		rc = sbx__scalar_int(v, key, 1, MAX_CONCURRENCY, 0, &x, err);
		if (rc == SBX_OK)
			p->max_jobs = (uint64_t)x;
		return rc;
	}
	if (strcmp(canonical, "max_file_bytes") == 0) {
		rc = sbx__scalar_int(v, key, 1, MAX_BYTES, 0, &x, err);
		if (rc == SBX_OK)
			p->max_file_bytes = (uint64_t)x;
		return rc;
	}
	if (strcmp(canonical, "output_max_bytes") == 0) {
		rc = sbx__scalar_int(v, key, 0, MAX_BYTES, 0, &x, err);
		if (rc == SBX_OK)
			p->output_max_bytes = (uint64_t)x;
		return rc;
	}
	int threshold = strcmp(canonical, "output_char_threshold") == 0;
	rc = sbx__scalar_int(v, key, threshold ? 1 : 0, MAX_CHARS, 0, &x, err);
	if (rc != SBX_OK)
		return rc;
	if (threshold)
		p->output_char_threshold = (uint64_t)x;
	else if (strcmp(canonical, "truncate_head_chars") == 0)
		p->truncate_head_chars = (uint64_t)x;
	else
		p->truncate_tail_chars = (uint64_t)x;
	return SBX_OK;
}

static int new_map(const char *file, int line, sbx__node **out)
{
	sbx__node *m = sbx__calloc(1, sizeof(*m));
	if (!m || !(m->file = sbx__strdup(file ? file : "<config>"))) {
		sbx__free(m);
		return SBX_E_NOMEM;
	}
	m->kind = SBX__NODE_MAP;
	m->line = line;
	*out = m;
	return SBX_OK;
}

/* Sets key to a copy of v in map, replacing an existing entry; *at (may be NULL) gets the
 * entry's index. `index` (key -> position, kept in step here; may be NULL for small maps)
 * finds that entry without a scan, and the arrays grow in powers of two, so a block of many
 * keys is merged in linear time. */
static int map_set(sbx__node *map, sbx__nameset *index, const char *key, const sbx__node *v,
		   size_t *at)
{
	sbx__node *copy = sbx__node_dup(v);
	if (!copy)
		return SBX_E_NOMEM;
	size_t i = map->n;
	if (index && !sbx__nameset_get(index, key, &i))
		i = map->n;
	for (size_t j = 0; !index && j < map->n && i == map->n; j++)
		if (strcmp(map->keys[j], key) == 0)
			i = j;
	if (at)
		*at = i;
	if (i < map->n) {
		sbx__node_free(map->items[i]);
		map->items[i] = copy;
		return SBX_OK;
	}
	size_t room = 1;
	while (room < map->n + 1)
		room *= 2;
	char *k = sbx__strdup(key);
	char **nk = sbx__realloc(map->keys, room * sizeof(*nk));
	if (nk)
		map->keys = nk;
	sbx__node **ni = nk ? sbx__realloc(map->items, room * sizeof(*ni)) : NULL;
	if (ni)
		map->items = ni;
	if (!k || !nk || !ni || (index && sbx__nameset_add(index, k, map->n, NULL) < 0)) {
		sbx__free(k);
		sbx__node_free(copy);
		return SBX_E_NOMEM;
	}
	map->keys[map->n] = k;
	map->items[map->n] = copy;
	map->n++;
	return SBX_OK;
}

static void ds_clear(sbx__data_source *ds)
{
	sbx__free(ds->name);
	sbx__free(ds->alias);
	sbx__free(ds->file);
	sbx__node_free(ds->keys);
	memset(ds, 0, sizeof(*ds));
}

/* The alias a `type` value names, NULL for none/empty. */
static int type_alias(const sbx__node *v, char **alias, sbx_error *err)
{
	*alias = NULL;
	int rc = sbx__scalar_kind(v, "type", "a sandbox type alias", err);
	if (rc != SBX_OK)
		return rc;
	const char *s = v->scalar;
	while (*s == ' ')
		s++;
	size_t n = strlen(s);
	while (n && s[n - 1] == ' ')
		n--;
	if (n == 0 || (n == 4 && strncasecmp(s, "none", 4) == 0) ||
	    (!v->quoted && (strcmp(s, "null") == 0 || strcmp(s, "~") == 0)))
		return SBX_OK;
	*alias = sbx__strndup(s, n);
	return *alias ? SBX_OK : sbx__set_error(err, SBX_E_NOMEM, "out of memory");
}

/* The block's policy keys into ds->policy, the rest over ds->keys. */
static int overlay_block(sbx__data_source *ds, const sbx__node *block, int nexau, sbx_error *err)
{
	sbx__nameset index = {0};
	int rc = SBX_OK;
	for (size_t i = 0; i < ds->keys->n && rc == SBX_OK; i++)
		if (sbx__nameset_add(&index, ds->keys->keys[i], i, NULL) < 0)
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	for (size_t i = 0; i < block->n && rc == SBX_OK; i++) {
		const char *key = block->keys[i];
		if (strcmp(key, "type") == 0)
			continue;
		const char *canonical = policy_canonical(key);
		if (nexau && strcmp(key, "timeout") == 0)
			canonical = "ttl";
		if (canonical)
			rc = apply_policy(&ds->policy, key, canonical, block->items[i], err);
		else if (map_set(ds->keys, &index, key, block->items[i], NULL) != SBX_OK)
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	}
	sbx__nameset_clear(&index);
	return rc;
}

/* Applies one sandbox block over ds (which may already hold inherited values). */
/* `nexau`: the block is NexAU's sandbox_config, where `timeout` is the sandbox's lifetime in
 * seconds (its e2b key), not a command timeout: it becomes the host's `ttl`, which reaches every
 * backend as the create's lifetime. */
static int apply_block(sbx__data_source *ds, const sbx__node *block, int nexau, sbx_error *err)
{
	if (sbx__scalar_null(block)) {
		/* `sandbox:` left empty: no sandbox, like `type: none`. */
		sbx__free(ds->alias);
		ds->alias = NULL;
		sbx__node_free(ds->keys);
		ds->keys = NULL;
		if (new_map(block->file, block->line, &ds->keys) != SBX_OK)
			return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
		return SBX_OK;
	}
	if (block->kind != SBX__NODE_MAP)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "%s:%d: a sandbox block must be a mapping with at least "
				      "'type'",
				      block->file, block->line);
	int rc;
	const sbx__node *type = sbx__node_get(block, "type");
	if (type) {
		char *alias = NULL;
		rc = type_alias(type, &alias, err);
		if (rc != SBX_OK)
			return rc;
		int same = (alias && ds->alias && strcmp(alias, ds->alias) == 0);
		if (!same) {
			/* Another backend: the inherited plugin keys were meant for the other. */
			sbx__node_free(ds->keys);
			ds->keys = NULL;
			if (new_map(block->file, block->line, &ds->keys) != SBX_OK) {
				sbx__free(alias);
				return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
			}
		}
		sbx__free(ds->alias);
		ds->alias = alias;
	}
	sbx__free(ds->file);
	ds->file = sbx__strdup(block->file);
	ds->line = block->line;
	if (!ds->file)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	if (!ds->keys && new_map(block->file, block->line, &ds->keys) != SBX_OK)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	rc = overlay_block(ds, block, nexau, err);
	if (rc != SBX_OK)
		return rc;
	const sbx__policy *p = &ds->policy;
	if (p->create_burst && p->create_rate <= 0)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "%s:%d: create_burst (%llu) needs create_rate, the creates "
				      "per second that refill it",
				      block->file, block->line,
				      (unsigned long long)p->create_burst);
	if (p->truncate_head_chars + p->truncate_tail_chars > p->output_char_threshold)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "%s:%d: truncate_head_chars (%llu) + truncate_tail_chars "
				      "(%llu) must not exceed output_char_threshold (%llu)",
				      block->file, block->line,
				      (unsigned long long)p->truncate_head_chars,
				      (unsigned long long)p->truncate_tail_chars,
				      (unsigned long long)p->output_char_threshold);
	return SBX_OK;
}

static int ds_copy(sbx__data_source *dst, const sbx__data_source *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->policy = src->policy;
	dst->line = src->line;
	if ((src->alias && !(dst->alias = sbx__strdup(src->alias))) ||
	    (src->file && !(dst->file = sbx__strdup(src->file))) ||
	    (src->keys && !(dst->keys = sbx__node_dup(src->keys)))) {
		ds_clear(dst);
		return SBX_E_NOMEM;
	}
	return SBX_OK;
}

void sbx__config_free(sbx__config *cfg)
{
	if (!cfg)
		return;
	ds_clear(&cfg->deflt);
	for (size_t i = 0; i < cfg->n; i++)
		ds_clear(&cfg->sources[i]);
	sbx__free(cfg->sources);
	sbx__free(cfg->file);
	sbx__free(cfg);
}

/* data_sources[i]. */
static int load_source(sbx__config *cfg, const sbx__node *item, size_t i, sbx__nameset *names,
		       sbx_error *err)
{
	if (item->kind != SBX__NODE_MAP)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "%s:%d: data_sources[%zu] must be a mapping", item->file,
				      item->line, i);
	int rc = check_keys(item, source_keys, "a data source", err);
	if (rc != SBX_OK)
		return rc;
	sbx__data_source *ds = &cfg->sources[i];
	if (ds_copy(ds, &cfg->deflt) != SBX_OK)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	cfg->n = i + 1;
	const sbx__node *name = sbx__node_get(item, "name");
	if (name && name->kind != SBX__NODE_SCALAR)
		return sbx__set_error(err, SBX_E_CONFIG, "%s:%d: 'name' must be a string",
				      name->file, name->line);
	ds->name = name ? sbx__strdup(name->scalar) : sbx__asprintf("%zu", i);
	if (!ds->name)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	int r = sbx__nameset_add(names, ds->name, (size_t)item->line, NULL);
	if (r < 0)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	if (r > 0)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "%s:%d: data source name '%s' is used twice", item->file,
				      item->line, ds->name);
	const sbx__node *block = sbx__node_get(item, "sandbox");
	return block ? apply_block(ds, block, 0, err) : SBX_OK;
}

static int load_sources(sbx__config *cfg, const sbx__node *list, sbx_error *err)
{
	if (list->kind != SBX__NODE_LIST)
		return sbx__set_error(err, SBX_E_CONFIG, "%s:%d: 'data_sources' must be a list",
				      list->file, list->line);
	cfg->sources = sbx__calloc(list->n ? list->n : 1, sizeof(*cfg->sources));
	if (!cfg->sources)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	sbx__nameset names = {0}; /* name -> line, so a config of 200,000 sources loads in
				     linear time */
	int rc = SBX_OK;
	for (size_t i = 0; i < list->n && rc == SBX_OK; i++)
		rc = load_source(cfg, list->items[i], i, &names, err);
	sbx__nameset_clear(&names);
	return rc;
}
int sbx__config_load(const char *path, const char *text, sbx__config **out, sbx_error *err)
{
	*out = NULL;
	sbx__node *root = NULL;
	int rc;
	sbx__config *cfg = sbx__calloc(1, sizeof(*cfg));
	if (!cfg)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	default_policy(&cfg->deflt.policy);
	if (!(cfg->deflt.name = sbx__strdup("default"))) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
		goto out;
	}
	if (!path && !text) {
		cfg->deflt.alias = sbx__strdup("local");
		if (!cfg->deflt.alias ||
		    new_map("<built-in default>", 1, &cfg->deflt.keys) != SBX_OK)
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
		else
			rc = SBX_OK;
		goto out;
	}
	if (path) {
		rc = sbx__yaml_load_file(path, 1, SBX_E_CONFIG, &root, err);
		if (rc == SBX_OK && !(cfg->file = sbx__strdup(path)))
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	} else {
		rc = sbx__yaml_load_string(text, "<config>", 1, SBX_E_CONFIG, &root, err);
	}
	if (rc != SBX_OK) {
		if (rc == SBX_E_IO) {
			sbx__error_prefix(err, "config");
			rc = err ? (err->code = SBX_E_CONFIG) : SBX_E_CONFIG;
		}
		goto out;
	}
	if (root->kind != SBX__NODE_MAP) {
		rc = sbx__set_error(err, SBX_E_CONFIG,
				    "%s:%d: a config must be a mapping with 'data_source', "
				    "'data_sources' or 'sandbox_config'",
				    root->file, root->line);
		goto out;
	}
	rc = check_keys(root, top_keys, "the config", err);
	if (rc != SBX_OK)
		goto out;
	const sbx__node *ds = sbx__node_get(root, "data_source");
	const sbx__node *nexau = sbx__node_get(root, "sandbox_config");
	if (ds && nexau) {
		rc =
		    sbx__set_error(err, SBX_E_CONFIG,
				   "%s:%d: give either 'data_source' or 'sandbox_config', not both",
				   nexau->file, nexau->line);
		goto out;
	}
	const sbx__node *block = nexau;
	if (ds) {
		if (ds->kind != SBX__NODE_MAP) {
			rc = sbx__set_error(err, SBX_E_CONFIG,
					    "%s:%d: 'data_source' must be a mapping", ds->file,
					    ds->line);
			goto out;
		}
		rc = check_keys(ds, source_keys, "data_source", err);
		if (rc != SBX_OK)
			goto out;
		block = sbx__node_get(ds, "sandbox");
	}
	if (new_map(root->file, 1, &cfg->deflt.keys) != SBX_OK) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
		goto out;
	}
	if (block) {
		rc = apply_block(&cfg->deflt, block, block == nexau, err);
		if (rc != SBX_OK)
			goto out;
	}
	const sbx__node *list = sbx__node_get(root, "data_sources");
	if (list) {
		rc = load_sources(cfg, list, err);
		if (rc != SBX_OK)
			goto out;
	}
	rc = SBX_OK;
out:
	sbx__node_free(root);
	if (rc != SBX_OK) {
		sbx__config_free(cfg);
		return rc;
	}
	*out = cfg;
	return SBX_OK;
}

int sbx__config_find(const sbx__config *cfg, const char *name_or_index,
		     const sbx__data_source **out, sbx_error *err)
{
	if (!name_or_index || strcmp(name_or_index, "default") == 0) {
		*out = &cfg->deflt;
		return SBX_OK;
	}
	for (size_t i = 0; i < cfg->n; i++) {
		if (strcmp(cfg->sources[i].name, name_or_index) == 0) {
			*out = &cfg->sources[i];
			return SBX_OK;
		}
	}
	char *end = NULL;
	errno = 0;
	unsigned long long idx = strtoull(name_or_index, &end, 10);
	if (*name_or_index >= '0' && *name_or_index <= '9' && !*end && !errno && idx < cfg->n) {
		*out = &cfg->sources[idx];
		return SBX_OK;
	}
	char names[400] = "default";
	for (size_t i = 0; i < cfg->n; i++) {
		size_t used = strlen(names);
		if (used + strlen(cfg->sources[i].name) + 8 >= sizeof(names)) {
			snprintf(names + used, sizeof(names) - used, ", ...");
			break;
		}
		snprintf(names + used, sizeof(names) - used, ", %s", cfg->sources[i].name);
	}
	if (cfg->n == 0)
		return sbx__set_error(err, SBX_E_CONFIG,
				      "unknown data source '%.100s'; configured: default",
				      name_or_index);
	return sbx__set_error(err, SBX_E_CONFIG,
			      "unknown data source '%.100s'; configured: %s (or an index 0..%zu)",
			      name_or_index, names, cfg->n - 1);
}

static const char *type_name(uint32_t t)
{
	switch (t) {
	case SBX_KEY_STRING:
		return "a string";
	case SBX_KEY_INT:
		return "an integer";
	case SBX_KEY_FLOAT:
		return "a number";
	case SBX_KEY_BOOL:
		return "true or false";
	case SBX_KEY_LIST:
		return "a list";
	case SBX_KEY_MAP:
		return "a mapping";
	}
	return "any value";
}

/* Checks v against its declaration and converts it, once: val gets the typed value (type 0
 * for a null or an SBX_KEY_ANY value, left to the getters). */
static int check_type(const sbx__node *v, const char *key, const sbx_config_key *decl,
		      sbx__value *val, sbx_error *err)
{
	long long x = 0;
	int secret = decl->secret != 0;
	int rc = SBX_OK;
	memset(val, 0, sizeof(*val));
	if (decl->type == SBX_KEY_ANY || sbx__scalar_null(v))
		return SBX_OK;
	switch (decl->type) {
	case SBX_KEY_STRING:
		rc = sbx__scalar_kind(v, key, "a string", err);
		break;
	case SBX_KEY_INT:
		rc = sbx__scalar_int(v, key, LLONG_MIN, LLONG_MAX, secret, &x, err);
		val->i = (int64_t)x;
		break;
	case SBX_KEY_FLOAT:
		rc = sbx__scalar_float(v, key, -DBL_MAX, DBL_MAX, secret, &val->d, err);
		break;
	case SBX_KEY_BOOL:
		rc = sbx__scalar_bool(v, key, secret, &val->b, err);
		break;
	case SBX_KEY_LIST:
	case SBX_KEY_MAP:
		if (v->kind != (decl->type == SBX_KEY_LIST ? SBX__NODE_LIST : SBX__NODE_MAP))
			rc = sbx__set_error(err, SBX_E_CONFIG, "%s:%d: '%s' must be %s, not %s",
					    v->file, v->line, key, type_name(decl->type),
					    v->kind == SBX__NODE_MAP    ? "a mapping"
					    : v->kind == SBX__NODE_LIST ? "a list"
									: "a scalar");
		break;
	}
	if (rc == SBX_OK)
		val->type = decl->type;
	return rc;
}

static int unknown_plugin_key(const sbx__node *v, const char *key, const sbx_plugin_desc *desc,
			      sbx_error *err)
{
	/* The host's keys are valid in the same block: a typo of `timeout` lists it too. */
	size_t n_policy = sizeof(policy_keys) / sizeof(policy_keys[0]);
	const char **names = sbx__calloc((size_t)desc->n_keys + n_policy + 2, sizeof(*names));
	if (!names)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	size_t n = 0;
	names[n++] = "type";
	for (const policy_key *p = policy_keys; p->name; p++)
		if (strcmp(p->name, p->canonical) == 0)
			names[n++] = p->name;
	for (uint32_t k = 0; k < desc->n_keys; k++)
		if (desc->keys[k].name)
			names[n++] = desc->keys[k].name;
	char *list = join_names(names);
	sbx__free(names);
	if (!list)
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	sbx__set_error(err, SBX_E_CONFIG,
		       "%s:%d: unknown key '%s' for sandbox type '%s'; valid keys: %s", v->file,
		       v->line, key, desc->alias ? desc->alias : "?", n ? list : "(none)");
	sbx__free(list);
	return SBX_E_CONFIG;
}

/* The host's keys every plugin config carries besides the plugin's own (plugin.h):
 * max_file_bytes, so a plugin stops reading a file past the cap instead of after it. */
static int host_keys(sbx__node *merged, const sbx__data_source *ds)
{
	char text[32];
	snprintf(text, sizeof(text), "%llu", (unsigned long long)ds->policy.max_file_bytes);
	sbx__node v = {.kind = SBX__NODE_SCALAR,
		       .scalar = text,
		       .file = ds->file ? ds->file : "<config>",
		       .line = ds->line};
	return map_set(merged, NULL, "max_file_bytes", &v, NULL);
}

static const sbx_config_key *declared(const sbx_plugin_desc *desc, const char *key)
{
	for (uint32_t k = 0; k < desc->n_keys; k++)
		if (desc->keys[k].name && strcmp(desc->keys[k].name, key) == 0)
			return &desc->keys[k];
	return NULL;
}

/* Overlays layer m on merged: each key declared, its value checked and converted into
 * values (indexed like merged). With host_made, m is a config the host made, so it may also
 * carry the host's keys (host_keys), kept as they are. */
static int overlay(sbx__node *merged, sbx__value *values, const sbx__node *m,
		   const sbx_plugin_desc *desc, int host_made, sbx_error *err)
{
	for (size_t i = 0; m && m->kind == SBX__NODE_MAP && i < m->n; i++) {
		const char *key = m->keys[i];
		const sbx_config_key *decl = declared(desc, key);
		sbx__value val = {0};
		int rc = SBX_OK;
		if (decl)
			rc = check_type(m->items[i], key, decl, &val, err);
		else if (!host_made || strcmp(key, "max_file_bytes") != 0)
			return unknown_plugin_key(m->items[i], key, desc, err);
		if (rc != SBX_OK)
			return rc;
		size_t at = 0;
		if (map_set(merged, NULL, key, m->items[i], &at) != SBX_OK)
			return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
		values[at] = val;
	}
	return SBX_OK;
}

/* A config of layers[0] overlaid by layers[1] (either may be NULL), its map named file:line,
 * with the host's keys of ds; without ds, layers[0] is a config the host made (a runner's). */
static int config_make(const sbx__node *const layers[2], const char *file, int line,
		       const sbx__data_source *ds, const sbx_plugin_desc *desc,
		       struct sbx_config **out, sbx_error *err)
{
	*out = NULL;
	struct sbx_config *cfg = sbx__calloc(1, sizeof(*cfg));
	if (!cfg || new_map(file, line, &cfg->map) != SBX_OK) {
		sbx__free(cfg);
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	}
	/* At most one entry per key of the two layers, and the host's own. */
	size_t most = 2;
	for (int l = 0; l < 2; l++)
		most += layers[l] && layers[l]->kind == SBX__NODE_MAP ? layers[l]->n : 0;
	cfg->values = sbx__calloc(most, sizeof(*cfg->values));
	cfg->json = sbx__calloc(most, sizeof(char *));
	int rc =
	    cfg->values && cfg->json ? SBX_OK : sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	for (int l = 0; l < 2 && rc == SBX_OK; l++)
		rc = overlay(cfg->map, cfg->values, layers[l], desc, !ds, err);
	if (rc == SBX_OK && ds && host_keys(cfg->map, ds) != SBX_OK)
		rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	if (rc != SBX_OK) {
		sbx__config_obj_free(cfg);
		return rc;
	}
	cfg->desc = desc;
	*out = cfg;
	return SBX_OK;
}

int sbx__config_for_plugin(const sbx__data_source *ds, const sbx__node *registry_defaults,
			   const sbx_plugin_desc *desc, struct sbx_config **out, sbx_error *err)
{
	const sbx__node *layers[2] = {registry_defaults, ds->keys};
	return config_make(layers, ds->file, ds->line, ds, desc, out, err);
}

int sbx__config_from_map(const sbx__node *map, const sbx_plugin_desc *desc, struct sbx_config **out,
			 sbx_error *err)
{
	const sbx__node *layers[2] = {map, NULL};
	return config_make(layers, map ? map->file : NULL, map ? map->line : 0, NULL, desc, out,
			   err);
}

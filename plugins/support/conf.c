/* Config keys as a table: reading every key of a plugin into its settings struct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/support/conf.h>
#include <sbx/support/host.h>

void sbxs_conf_keys(const sbxs_conf *rows, size_t n, sbx_config_key *keys)
{
	for (size_t i = 0; i < n; i++)
		keys[i] = rows[i].key;
}

/* Whether v is one of the '|'-separated choices. */
static int chosen(const char *choices, const char *v)
{
	size_t vl = strlen(v);
	for (const char *c = choices; *c;) {
		size_t l = strcspn(c, "|");
		if (l == vl && strncmp(c, v, l) == 0)
			return 1;
		c += l;
		c += *c == '|';
	}
	return 0;
}

/* "a, b or c" from "a|b|c". */
static void list_choices(const char *choices, char *buf, size_t cap)
{
	size_t o = 0, count = 0, seen = 0;
	for (const char *c = choices; *c; c++)
		count += *c == '|';
	buf[0] = '\0';
	for (const char *c = choices; *c && o < cap;) {
		size_t l = strcspn(c, "|");
		const char *sep = seen == 0 ? "" : seen == count ? " or " : ", ";
		int n = snprintf(buf + o, cap - o, "%s%.*s", sep, (int)l, c);
		if (n < 0)
			break;
		o += (size_t)n;
		seen++;
		c += l;
		c += *c == '|';
	}
}

static int read_string(const char *alias, const sbx_config *cfg, const sbxs_conf *r,
		       const char **dst, sbx_error *err)
{
	const char *v = NULL;
	int rc = sbxs_host->config_string(cfg, r->key.name, &v, err);
	if (rc == SBX_E_NOT_FOUND) {
		v = r->env ? getenv(r->env) : NULL;
		if (!v || !*v)
			v = r->def;
		rc = SBX_OK;
	}
	if (rc != SBX_OK)
		return rc;
	if (v && r->choices && !chosen(r->choices, v)) {
		char list[256];
		list_choices(r->choices, list, sizeof(list));
		return sbxs_host->set_error(err, SBX_E_CONFIG, "%s: '%s' is '%.64s'; it must be %s",
					    alias, r->key.name, v, list);
	}
	*dst = v;
	return SBX_OK;
}

static int out_of_range(const char *alias, const sbxs_conf *r, double v, int integer,
			sbx_error *err)
{
	int below = (r->flags & SBXS_CONF_ABOVE_MIN) ? v <= r->min : v < r->min;
	if (!(r->flags & SBXS_CONF_RANGE) || (!below && v <= r->max))
		return SBX_OK;
	if (integer)
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG, "%s: '%s' is %lld; it must be between %lld and %lld", alias,
		    r->key.name, (long long)v, (long long)r->min, (long long)r->max);
	if (r->flags & SBXS_CONF_ABOVE_MIN)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "%s: '%s' is %g; it must be above %g and at most %g",
					    alias, r->key.name, v, r->min, r->max);
	return sbxs_host->set_error(err, SBX_E_CONFIG,
				    "%s: '%s' is %g; it must be between %g and %g", alias,
				    r->key.name, v, r->min, r->max);
}

static int read_row(const char *alias, const sbx_config *cfg, const sbxs_conf *r, char *base,
		    sbx_error *err)
{
	void *dst = base + r->at;
	int rc;
	switch (r->key.type) {
	case SBX_KEY_STRING:
		return read_string(alias, cfg, r, (const char **)dst, err);
	case SBX_KEY_INT: {
		int64_t v = (int64_t)r->num;
		rc = sbxs_host->config_int(cfg, r->key.name, &v, err);
		if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
			return rc;
		if (rc == SBX_OK && (rc = out_of_range(alias, r, (double)v, 1, err)) != SBX_OK)
			return rc;
		memcpy(dst, &v, sizeof(v));
		return SBX_OK;
	}
	case SBX_KEY_FLOAT: {
		double v = r->num;
		int64_t i;
		rc = sbxs_host->config_float(cfg, r->key.name, &v, err);
		/* A host whose float getter refuses an integer scalar: take it as one. */
		if (rc == SBX_E_CONFIG &&
		    sbxs_host->config_int(cfg, r->key.name, &i, NULL) == SBX_OK) {
			v = (double)i;
			rc = SBX_OK;
		}
		if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
			return rc;
		if (rc == SBX_OK && (rc = out_of_range(alias, r, v, 0, err)) != SBX_OK)
			return rc;
		memcpy(dst, &v, sizeof(v));
		return SBX_OK;
	}
	case SBX_KEY_BOOL: {
		int v = (int)r->num;
		rc = sbxs_host->config_bool(cfg, r->key.name, &v, err);
		if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
			return rc;
		if (rc == SBX_OK)
			v = v != 0;
		memcpy(dst, &v, sizeof(v));
		return SBX_OK;
	}
	default: {
		const char *v = r->def;
		rc = sbxs_host->config_json(cfg, r->key.name, &v, err);
		if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
			return rc;
		if (rc == SBX_E_NOT_FOUND)
			v = r->def;
		memcpy(dst, &v, sizeof(v));
		return SBX_OK;
	}
	}
}

int sbxs_conf_read(const char *alias, const sbx_config *cfg, const sbxs_conf *rows, size_t n,
		   void *settings, sbx_error *err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = read_row(alias, cfg, &rows[i], settings, err);
		if (rc != SBX_OK)
			return rc;
	}
	return SBX_OK;
}

int sbxs_conf_new(const char *alias, const sbx_config *cfg, const sbxs_conf *rows, size_t n,
		  size_t size, void **state, sbx_error *err)
{
	void *st = sbxs_zalloc(size);
	if (!st)
		return sbxs_nomem(err, alias, "init");
	int rc = sbxs_conf_read(alias, cfg, rows, n, st, err);
	if (rc != SBX_OK) {
		sbxs_host->free(st);
		return rc;
	}
	*state = st;
	return SBX_OK;
}

int sbxs_register(const sbx_host_api *host, sbx_registrar *reg, sbx_plugin_desc *desc,
		  const sbxs_conf *rows, sbx_config_key *keys, size_t n)
{
	sbxs_host_set(host);
	sbxs_conf_keys(rows, n, keys);
	desc->keys = keys;
	desc->n_keys = (uint32_t)n;
	SBX_INIT_HEADER(*desc);
	return host->register_sandbox(reg, desc);
}

uint64_t sbxs_conf_max_file_bytes(const sbx_config *cfg)
{
	int64_t v = 0;
	if (sbxs_host->config_int(cfg, "max_file_bytes", &v, NULL) != SBX_OK || v <= 0)
		return SBXS_MAX_FILE_BYTES;
	return (uint64_t)v;
}

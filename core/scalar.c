/* YAML scalars as typed values: the one place that decides how a null, an integer, a number
 * and a boolean are spelt, and what the error says when a value is none of them. Config
 * loading (config.c) checks policy keys and the keys a plugin declares with these once; the
 * plugins' typed getters (host_api.c) use the values so checked, and these functions for a
 * key the plugin declared with another type or SBX_KEY_ANY.
 *
 * Messages are "FILE:LINE: 'KEY' must be ..., got 'VALUE'", the value left out when the key
 * is secret. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* The file a node came from ("config" for one made from no file). */
static const char *where(const sbx__node *v)
{
	return v->file ? v->file : "config";
}

int sbx__scalar_kind(const sbx__node *v, const char *key, const char *want, sbx_error *err)
{
	if (v->kind != SBX__NODE_SCALAR)
		return sbx__set_error(err, SBX_E_CONFIG, "%s:%d: '%s' must be %s, not a %s",
				      where(v), v->line, key, want,
				      v->kind == SBX__NODE_MAP ? "mapping" : "list");
	return SBX_OK;
}

/* An unquoted empty, ~ or null scalar: YAML's null, which leaves a key at its default (the
 * plugin's config getters treat it as absent too). */
int sbx__scalar_null(const sbx__node *v)
{
	if (v->kind != SBX__NODE_SCALAR || v->quoted)
		return 0;
	const char *s = v->scalar ? v->scalar : "";
	return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
	       strcmp(s, "NULL") == 0;
}

/* The text of an unquoted scalar (numbers and booleans are never quoted, as the plugin's
 * getters require); `secret` keeps the value out of the message. */
static int typed_text(const sbx__node *v, const char *key, const char *want, int secret,
		      const char **out, sbx_error *err)
{
	int rc = sbx__scalar_kind(v, key, want, err);
	if (rc != SBX_OK)
		return rc;
	if (v->quoted)
		return sbx__set_error(
		    err, SBX_E_CONFIG, "%s:%d: '%s' must be %s, got a quoted string%s%s%s", v->file,
		    v->line, key, want, secret ? "" : " '", secret ? "" : v->scalar,
		    secret ? "" : "' (remove the quotes)");
	*out = v->scalar;
	return SBX_OK;
}

static int bad_value(const sbx__node *v, const char *key, const char *want, int secret,
		     sbx_error *err)
{
	if (secret)
		return sbx__set_error(err, SBX_E_CONFIG, "%s:%d: '%s' must be %s", where(v),
				      v->line, key, want);
	return sbx__set_error(err, SBX_E_CONFIG, "%s:%d: '%s' must be %s, got '%s'", v->file,
			      v->line, key, want, v->scalar);
}

/* A decimal integer in lo..hi. */
int sbx__scalar_int(const sbx__node *v, const char *key, long long lo, long long hi, int secret,
		    long long *out, sbx_error *err)
{
	const char *s = NULL;
	int rc = typed_text(v, key, "an integer", secret, &s, err);
	if (rc != SBX_OK)
		return rc;
	const char *p = s[0] == '-' ? s + 1 : s;
	if (!(*p >= '0' && *p <= '9'))
		return bad_value(v, key, "an integer", secret, err);
	char *end = NULL;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (*end)
		return bad_value(v, key, "an integer", secret, err);
	if (errno == ERANGE || x < lo || x > hi) {
		if (secret)
			return sbx__set_error(err, SBX_E_CONFIG,
					      "%s:%d: '%s' must be between %lld and %lld", v->file,
					      v->line, key, lo, hi);
		return sbx__set_error(err, SBX_E_CONFIG,
				      "%s:%d: '%s' is %s; it must be between %lld and %lld",
				      where(v), v->line, key, s, lo, hi);
	}
	*out = x;
	return SBX_OK;
}

/* A finite decimal number in lo..hi (no hex, inf or nan). */
int sbx__scalar_float(const sbx__node *v, const char *key, double lo, double hi, int secret,
		      double *out, sbx_error *err)
{
	const char *s = NULL;
	int rc = typed_text(v, key, "a number", secret, &s, err);
	if (rc != SBX_OK)
		return rc;
	const char *p = s[0] == '-' ? s + 1 : s;
	if (!((*p >= '0' && *p <= '9') || *p == '.') || strspn(s, "0123456789.eE+-") != strlen(s))
		return bad_value(v, key, "a number", secret, err);
	char *end = NULL;
	errno = 0;
	double d = strtod(s, &end);
	if (*end || end == s)
		return bad_value(v, key, "a number", secret, err);
	if (errno == ERANGE || !isfinite(d) || d < lo || d > hi) {
		if (secret)
			return sbx__set_error(err, SBX_E_CONFIG,
					      "%s:%d: '%s' must be between %.15g and %.15g",
					      where(v), v->line, key, lo, hi);
		return sbx__set_error(err, SBX_E_CONFIG,
				      "%s:%d: '%s' is %s; it must be between %.15g and %.15g",
				      where(v), v->line, key, s, lo, hi);
	}
	*out = d;
	return SBX_OK;
}

#define BOOL_WANT "true or false (or yes/no, on/off, 1/0)"

/* The spellings the plugin's config_bool getter accepts. */
int sbx__scalar_bool(const sbx__node *v, const char *key, int secret, int *out, sbx_error *err)
{
	const char *s = NULL;
	int rc = typed_text(v, key, BOOL_WANT, secret, &s, err);
	if (rc != SBX_OK)
		return rc;
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return SBX_OK;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return SBX_OK;
		}
	}
	return bad_value(v, key, BOOL_WANT, secret, err);
}

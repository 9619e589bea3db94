#include "testhost.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long fail_after = -1;
static char last_log[512];

void test_fail_allocs_after(long n)
{
	fail_after = n;
}

const char *test_last_log(void)
{
	return last_log;
}

static int may_alloc(void)
{
	if (fail_after < 0)
		return 1;
	if (fail_after == 0)
		return 0;
	fail_after--;
	return 1;
}

static void *t_alloc(size_t n)
{
	return may_alloc() ? malloc(n) : NULL;
}

static void *t_realloc(void *p, size_t n)
{
	return may_alloc() ? realloc(p, n) : NULL;
}

static int t_register(sbx_registrar *reg, const sbx_plugin_desc *d)
{
	(void)reg;
	(void)d;
	return SBX_OK;
}

static void t_log(int level, const char *alias, const char *fmt, ...)
{
	if (level > SBX_LOG_INFO)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(last_log, sizeof(last_log), "%s: ", alias);
	vsnprintf(last_log + n, sizeof(last_log) - (size_t)n, fmt, ap);
	va_end(ap);
}

static int t_set_error(sbx_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		err->code = code;
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}

static const test_value *find(const sbx_config *c, const char *key)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (strcmp(c->values[i].key, key) == 0)
			return &c->values[i];
	return NULL;
}

static int typed(const sbx_config *c, const char *key, uint32_t type, const test_value **v,
		 sbx_error *err)
{
	*v = find(c, key);
	if (!*v)
		return SBX_E_NOT_FOUND;
	if ((*v)->type != type)
		return t_set_error(err, SBX_E_CONFIG, "'%s' has another type", key);
	return SBX_OK;
}

static int t_string(const sbx_config *c, const char *key, const char **out, sbx_error *err)
{
	const test_value *v;
	int rc = typed(c, key, SBX_KEY_STRING, &v, err);
	if (rc == SBX_OK)
		*out = v->text;
	return rc;
}

static int t_int(const sbx_config *c, const char *key, int64_t *out, sbx_error *err)
{
	const test_value *v;
	int rc = typed(c, key, SBX_KEY_INT, &v, err);
	if (rc == SBX_OK)
		*out = strtoll(v->text, NULL, 10);
	return rc;
}

/* Like a strict host: a float getter that refuses integer scalars. */
static int t_float(const sbx_config *c, const char *key, double *out, sbx_error *err)
{
	const test_value *v;
	int rc = typed(c, key, SBX_KEY_FLOAT, &v, err);
	if (rc == SBX_OK)
		*out = strtod(v->text, NULL);
	return rc;
}

static int t_bool(const sbx_config *c, const char *key, int *out, sbx_error *err)
{
	const test_value *v;
	int rc = typed(c, key, SBX_KEY_BOOL, &v, err);
	if (rc == SBX_OK)
		*out = strcmp(v->text, "true") == 0;
	return rc;
}

static int t_json(const sbx_config *c, const char *key, const char **out, sbx_error *err)
{
	(void)err;
	const test_value *v = find(c, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = v->text;
	return SBX_OK;
}

static const char *t_state_dir(void)
{
	return "/tmp";
}

const sbx_host_api test_host = {
    .struct_size = sizeof(sbx_host_api),
    .abi_major = SBX_ABI_MAJOR,
    .abi_minor = SBX_ABI_MINOR,
    .register_sandbox = t_register,
    .log = t_log,
    .alloc = t_alloc,
    .realloc = t_realloc,
    .free = free,
    .set_error = t_set_error,
    .config_string = t_string,
    .config_int = t_int,
    .config_float = t_float,
    .config_bool = t_bool,
    .config_json = t_json,
    .state_dir = t_state_dir,
};

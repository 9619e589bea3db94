#include "minihost.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sbx_plugin_desc *target;

static int h_register(sbx_registrar *reg, const sbx_plugin_desc *d)
{
	(void)reg;
	memcpy(target, d, d->struct_size < sizeof(*target) ? d->struct_size : sizeof(*target));
	return SBX_OK;
}

static void h_log(int level, const char *alias, const char *fmt, ...)
{
	(void)level;
	(void)alias;
	(void)fmt;
}

static int h_set_error(sbx_error *err, int code, const char *fmt, ...)
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

static const char *lookup(const sbx_config *c, const char *key)
{
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->keys[i], key) == 0)
			return c->vals[i];
	return NULL;
}

static int h_string(const sbx_config *c, const char *key, const char **out, sbx_error *err)
{
	(void)err;
	const char *v = lookup(c, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = v;
	return SBX_OK;
}

static int h_int(const sbx_config *c, const char *key, int64_t *out, sbx_error *err)
{
	(void)err;
	const char *v = lookup(c, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = strtoll(v, NULL, 10);
	return SBX_OK;
}

static int h_float(const sbx_config *c, const char *key, double *out, sbx_error *err)
{
	(void)err;
	const char *v = lookup(c, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = strtod(v, NULL);
	return SBX_OK;
}

static int h_bool(const sbx_config *c, const char *key, int *out, sbx_error *err)
{
	(void)err;
	const char *v = lookup(c, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = strcmp(v, "true") == 0;
	return SBX_OK;
}

static const char *h_state_dir(void)
{
	return "/tmp";
}

static sbx_host_api host = {
    .struct_size = sizeof(sbx_host_api),
    .abi_major = SBX_ABI_MAJOR,
    .abi_minor = SBX_ABI_MINOR,
    .register_sandbox = h_register,
    .log = h_log,
    .alloc = malloc,
    .realloc = realloc,
    .free = free,
    .set_error = h_set_error,
    .config_string = h_string,
    .config_int = h_int,
    .config_float = h_float,
    .config_bool = h_bool,
    .config_json = h_string,
    .state_dir = h_state_dir,
};

int minihost_load(const char *path, sbx_plugin_desc *desc, char *why, size_t cap)
{
	/* The handle is never closed: libcurl and OpenSSL keep process-wide state. */
	void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		snprintf(why, cap, "dlopen: %s", dlerror());
		return -1;
	}
	void *sym = dlsym(dl, SBX_PLUGIN_ENTRY);
	if (!sym) {
		snprintf(why, cap, "no %s in %s", SBX_PLUGIN_ENTRY, path);
		return -1;
	}
	sbx_plugin_register_fn reg;
	memcpy(&reg, &sym, sizeof(reg));
	memset(desc, 0, sizeof(*desc));
	target = desc;
	if (reg(&host, NULL) != SBX_OK || !desc->alias) {
		snprintf(why, cap, "%s did not register", path);
		return -1;
	}
	return 0;
}

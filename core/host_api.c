/* The services table every plugin receives: registration, logging, the library's allocator,
 * error setting, typed config getters and the plugins' state folder. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "internal.h"
#include "loader.h"

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static char state_dir_buf[PATH_MAX];

static void api_log(int level, const char *alias, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void api_log(int level, const char *alias, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sbx__logv(level, alias ? alias : "plugin", fmt, ap);
	va_end(ap);
}

/* Finds key; SBX_E_NOT_FOUND when absent or null. */
static int lookup(const sbx_config *cfg, const char *key, const sbx__node **out, size_t *index,
		  sbx_error *err)
{
	*out = NULL;
	if (key == NULL)
		return sbx__set_error(err, SBX_E_INVAL, "config: NULL key");
	if (cfg == NULL || cfg->map == NULL || cfg->map->kind != SBX__NODE_MAP)
		return sbx__set_error(err, SBX_E_NOT_FOUND, "config: key '%s' is not set", key);
	for (size_t i = 0; i < cfg->map->n; i++) {
		if (strcmp(cfg->map->keys[i], key) != 0)
			continue;
		const sbx__node *v = cfg->map->items[i];
		if (v == NULL || sbx__scalar_null(v))
			break;
		*out = v;
		*index = i;
		return SBX_OK;
	}
	return sbx__set_error(err, SBX_E_NOT_FOUND, "config: key '%s' is not set", key);
}

/* Key i's value as converted when the config was made, when its declared type is `type`. */
static const sbx__value *converted(const sbx_config *cfg, size_t i, uint32_t type)
{
	return cfg->values && cfg->values[i].type == type ? &cfg->values[i] : NULL;
}

/* A key the plugin declared SBX_KEY_ANY (or with another type) is converted here, with the
 * same functions as at load; its value never shows in a message (it may be secret). */
#define SECRET 1

static int api_config_string(const sbx_config *cfg, const char *key, const char **out,
			     sbx_error *err)
{
	const sbx__node *v = NULL;
	size_t i = 0;
	int rc = lookup(cfg, key, &v, &i, err);
	if (rc == SBX_OK)
		rc = sbx__scalar_kind(v, key, "a string", err);
	if (rc == SBX_OK)
		*out = v->scalar ? v->scalar : "";
	return rc;
}

static int api_config_int(const sbx_config *cfg, const char *key, int64_t *out, sbx_error *err)
{
	const sbx__node *v = NULL;
	size_t i = 0;
	int rc = lookup(cfg, key, &v, &i, err);
	if (rc != SBX_OK)
		return rc;
	const sbx__value *c = converted(cfg, i, SBX_KEY_INT);
	long long x = c ? c->i : 0;
	if (!c)
		rc = sbx__scalar_int(v, key, LLONG_MIN, LLONG_MAX, SECRET, &x, err);
	if (rc == SBX_OK)
		*out = (int64_t)x;
	return rc;
}

static int api_config_float(const sbx_config *cfg, const char *key, double *out, sbx_error *err)
{
	const sbx__node *v = NULL;
	size_t i = 0;
	int rc = lookup(cfg, key, &v, &i, err);
	if (rc != SBX_OK)
		return rc;
	const sbx__value *f = converted(cfg, i, SBX_KEY_FLOAT);
	const sbx__value *n = converted(cfg, i, SBX_KEY_INT);
	double x = f ? f->d : n ? (double)n->i : 0;
	if (!f && !n)
		rc = sbx__scalar_float(v, key, -DBL_MAX, DBL_MAX, SECRET, &x, err);
	if (rc == SBX_OK)
		*out = x;
	return rc;
}

static int api_config_bool(const sbx_config *cfg, const char *key, int *out, sbx_error *err)
{
	const sbx__node *v = NULL;
	size_t i = 0;
	int rc = lookup(cfg, key, &v, &i, err);
	if (rc != SBX_OK)
		return rc;
	const sbx__value *c = converted(cfg, i, SBX_KEY_BOOL);
	int b = c ? c->b : 0;
	if (!c)
		rc = sbx__scalar_bool(v, key, SECRET, &b, err);
	if (rc == SBX_OK)
		*out = b;
	return rc;
}

static int api_config_json(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	const sbx__node *v = NULL;
	size_t i = 0;
	int rc = lookup(cfg, key, &v, &i, err);
	if (rc != SBX_OK)
		return rc;
	/* The cache is the one mutable part of a config; plugins may read from many threads. */
	struct sbx_config *c = (struct sbx_config *)cfg;
	pthread_mutex_lock(&api_lock);
	if (c->json == NULL)
		c->json = sbx__calloc(c->map->n, sizeof(*c->json));
	if (c->json == NULL) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "config: out of memory for key '%s'", key);
	} else if (c->json[i] == NULL && (c->json[i] = sbx__node_to_json(v)) == NULL) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "config: out of memory for key '%s'", key);
	} else {
		*out = c->json[i];
	}
	pthread_mutex_unlock(&api_lock);
	return rc;
}

static const char *api_state_dir(void)
{
	const char *dir = NULL;
	pthread_mutex_lock(&api_lock);
	if (state_dir_buf[0]) {
		if (sbx__mkdirs(state_dir_buf) == 0)
			dir = state_dir_buf;
	}
	pthread_mutex_unlock(&api_lock);
	return dir;
}

static const char *api_state_dir_for(const sbx_config *cfg)
{
	if (cfg == NULL || cfg->state_dir == NULL)
		return NULL;
	return sbx__mkdirs(cfg->state_dir) == 0 ? cfg->state_dir : NULL;
}

void sbx__host_api_fork_child(void)
{
	pthread_mutex_init(&api_lock, NULL);
}

void sbx__set_state_dir(const char *dir)
{
	pthread_mutex_lock(&api_lock);
	int n = snprintf(state_dir_buf, sizeof(state_dir_buf), "%s", dir ? dir : "");
	if (n < 0 || (size_t)n >= sizeof(state_dir_buf))
		state_dir_buf[0] = '\0'; /* a cut path would name another folder */
	pthread_mutex_unlock(&api_lock);
}

void sbx__config_obj_free(struct sbx_config *cfg)
{
	if (cfg == NULL)
		return;
	if (cfg->json && cfg->map)
		for (size_t i = 0; i < cfg->map->n; i++)
			sbx__free(cfg->json[i]);
	sbx__free(cfg->json);
	sbx__free(cfg->values);
	sbx__node_free(cfg->map);
	sbx__free(cfg);
}

static const sbx_host_api host_api = {
    .struct_size = (uint32_t)sizeof(sbx_host_api),
    .abi_major = SBX_ABI_MAJOR,
    .abi_minor = SBX_ABI_MINOR,
    .register_sandbox = sbx__registrar_register,
    .log = api_log,
    .alloc = sbx__alloc,
    .realloc = sbx__realloc,
    .free = sbx__free,
    .set_error = sbx__set_error,
    .config_string = api_config_string,
    .config_int = api_config_int,
    .config_float = api_config_float,
    .config_bool = api_config_bool,
    .config_json = api_config_json,
    .state_dir = api_state_dir,
    .state_dir_for = api_state_dir_for,
    .command_nofile = sbx__nofile_command,
};

const sbx_host_api *sbx__host_api(void)
{
	return &host_api;
}

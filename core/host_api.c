/* The services table every plugin receives: registration, logging, the library's allocator,
 * error setting, typed config getters and the plugins' state folder. */
#include <errno.h>
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

/* "FILE:LINE: " of a node, or "config: " when it has no origin. */
static void origin(const sbx__node *n, char *buf, size_t cap)
{
	int w;
	if (n && n->file)
		w = snprintf(buf, cap, "%s:%d", n->file, n->line);
	else
		w = snprintf(buf, cap, "config");
	if (w < 0 || (size_t)w >= cap)
		buf[cap - 1] = '\0';
}

static const char *kind_name(const sbx__node *n)
{
	switch (n->kind) {
	case SBX__NODE_MAP:
		return "a mapping";
	case SBX__NODE_LIST:
		return "a list";
	default:
		return n->quoted ? "a quoted string" : "a scalar";
	}
}

/* An unquoted empty, ~ or null scalar: YAML's null, treated as an absent key. */
static int is_null(const sbx__node *n)
{
	if (n->kind != SBX__NODE_SCALAR || n->quoted)
		return 0;
	const char *s = n->scalar ? n->scalar : "";
	return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	       strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* Finds key; SBX_E_NOT_FOUND when absent or null. Never quotes values: they may be secret. */
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
		if (v == NULL || is_null(v))
			break;
		*out = v;
		if (index)
			*index = i;
		return SBX_OK;
	}
	return sbx__set_error(err, SBX_E_NOT_FOUND, "config: key '%s' is not set", key);
}

static int wrong_type(const sbx__node *v, const char *key, const char *wanted, const char *why,
		      sbx_error *err)
{
	char where[PATH_MAX + 32];
	origin(v, where, sizeof(where));
	return sbx__set_error(err, SBX_E_CONFIG, "%s: key '%s' must be %s, found %s", where, key,
			      wanted, why ? why : kind_name(v));
}

static int api_config_string(const sbx_config *cfg, const char *key, const char **out,
			     sbx_error *err)
{
	const sbx__node *v = NULL;
	int rc = lookup(cfg, key, &v, NULL, err);
	if (rc != SBX_OK)
		return rc;
	if (v->kind != SBX__NODE_SCALAR)
		return wrong_type(v, key, "a string", NULL, err);
	*out = v->scalar ? v->scalar : "";
	return SBX_OK;
}

/* The scalar text of an unquoted scalar, or a type error. */
static int typed_scalar(const sbx__node *v, const char *key, const char *wanted, const char **text,
			sbx_error *err)
{
	if (v->kind != SBX__NODE_SCALAR || v->quoted)
		return wrong_type(v, key, wanted, NULL, err);
	*text = v->scalar ? v->scalar : "";
	return SBX_OK;
}

static int api_config_int(const sbx_config *cfg, const char *key, int64_t *out, sbx_error *err)
{
	const sbx__node *v = NULL;
	const char *s = "";
	int rc = lookup(cfg, key, &v, NULL, err);
	if (rc == SBX_OK)
		rc = typed_scalar(v, key, "an integer", &s, err);
	if (rc != SBX_OK)
		return rc;
	char *end = NULL;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t')
		return wrong_type(v, key, "an integer", "a scalar that is not a decimal integer",
				  err);
	if (errno == ERANGE)
		return wrong_type(v, key, "an integer",
				  "a number outside -9223372036854775808..9223372036854775807",
				  err);
	*out = (int64_t)x;
	return SBX_OK;
}

static int api_config_float(const sbx_config *cfg, const char *key, double *out, sbx_error *err)
{
	const sbx__node *v = NULL;
	const char *s = "";
	int rc = lookup(cfg, key, &v, NULL, err);
	if (rc == SBX_OK)
		rc = typed_scalar(v, key, "a number", &s, err);
	if (rc != SBX_OK)
		return rc;
	char *end = NULL;
	errno = 0;
	double x = strtod(s, &end);
	if (end == s || *end != '\0' || s[0] == ' ' || s[0] == '\t')
		return wrong_type(v, key, "a number", "a scalar that is not a number", err);
	if (errno == ERANGE || !isfinite(x))
		return wrong_type(v, key, "a finite number", "a number out of range", err);
	*out = x;
	return SBX_OK;
}

static int api_config_bool(const sbx_config *cfg, const char *key, int *out, sbx_error *err)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};
	const sbx__node *v = NULL;
	const char *s = "";
	int rc = lookup(cfg, key, &v, NULL, err);
	if (rc == SBX_OK)
		rc = typed_scalar(v, key, "a boolean (true/false, yes/no, on/off, 1/0)", &s, err);
	if (rc != SBX_OK)
		return rc;
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = 1;
			return SBX_OK;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = 0;
			return SBX_OK;
		}
	}
	return wrong_type(v, key, "a boolean (true/false, yes/no, on/off, 1/0)", "another scalar",
			  err);
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
};

const sbx_host_api *sbx__host_api(void)
{
	return &host_api;
}

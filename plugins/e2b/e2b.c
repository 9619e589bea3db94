/* The e2b backend: sandboxes through E2B's REST control plane (E2B cloud, self-hosted E2B or
 * an E2B-compatible gateway), commands and files through each sandbox's envd. This file holds
 * the config keys, init and fini, info and the descriptor; the ops live in lifecycle.c,
 * exec.c and files.c. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <sbx/support/conf.h>
#include <sbx/support/host.h>
#include <sbx/support/http.h>
#include <sbx/support/json.h>

#include "exec.h"
#include "files.h"
#include "lifecycle.h"
#include "state.h"

#define AT(f) offsetof(e2b_state, set.f)

static const sbxs_conf rows[] = {
    {.key = {.name = "api_key",
	     .type = SBX_KEY_STRING,
	     .secret = 1,
	     .help = "E2B API key (default: $E2B_API_KEY)"},
     .at = AT(api_key),
     .env = "E2B_API_KEY"},
    {.key = {.name = "api_url",
	     .type = SBX_KEY_STRING,
	     .help = "control plane URL (default: $E2B_API_URL, then https://api.<domain>)"},
     .at = AT(api_url),
     .env = "E2B_API_URL"},
    {.key = {.name = "sandbox_url",
	     .type = SBX_KEY_STRING,
	     .help =
		 "one envd URL for every sandbox, routed by header (default: $E2B_SANDBOX_URL)"},
     .at = AT(sandbox_url),
     .env = "E2B_SANDBOX_URL"},
    {.key = {.name = "domain",
	     .type = SBX_KEY_STRING,
	     .help = "E2B domain (default: $E2B_DOMAIN, then e2b.app)"},
     .at = AT(domain),
     .env = "E2B_DOMAIN",
     .def = "e2b.app"},
    {.key = {.name = "template",
	     .type = SBX_KEY_STRING,
	     .help = "template when the task names no image (base)"},
     .at = AT(template_id),
     .def = "base"},
    {.key = {.name = "template_map",
	     .type = SBX_KEY_MAP,
	     .help = "image -> template; unmapped images must be plain template names"},
     .at = AT(template_map_json)},
    {.key = {.name = "timeout", .type = SBX_KEY_INT, .help = "sandbox lifetime in seconds (300)"},
     .at = AT(lifetime),
     .num = 300,
     .min = 1,
     .max = 86400 * 30,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "metadata", .type = SBX_KEY_MAP, .help = "metadata added to every sandbox"},
     .at = AT(metadata_json)},
    {.key = {.name = "envs", .type = SBX_KEY_MAP, .help = "environment of every sandbox"},
     .at = AT(envs_json)},
    {.key = {.name = "allow_internet_access",
	     .type = SBX_KEY_BOOL,
	     .help = "let the sandbox reach the internet (the gateway's default when unset)"},
     .at = AT(allow_internet),
     .num = -1},
    {.key = {.name = "retries",
	     .type = SBX_KEY_INT,
	     .help = "retries of idempotent calls on 429/5xx/transport errors (3)"},
     .at = AT(retries),
     .num = 3,
     .max = 20,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "retry_delay",
	     .type = SBX_KEY_FLOAT,
	     .help = "seconds, the first retry's backoff, doubled per attempt, plus up to half "
		     "again at random (0.25)"},
     .at = AT(retry_delay),
     .num = 0.25,
     .max = 3600,
     .flags = SBXS_CONF_RANGE | SBXS_CONF_ABOVE_MIN},
    {.key = {.name = "strict_resources",
	     .type = SBX_KEY_BOOL,
	     .help = "refuse resource requests a template fixes, instead of warning (false)"},
     .at = AT(strict_resources)},
    {.key = {.name = "retry_max_delay",
	     .type = SBX_KEY_FLOAT,
	     .help = "seconds, cap of one retry's backoff or Retry-After (8)"},
     .at = AT(retry_cap),
     .num = 8,
     .max = 3600,
     .flags = SBXS_CONF_RANGE | SBXS_CONF_ABOVE_MIN},
    {.key = {.name = "request_timeout",
	     .type = SBX_KEY_FLOAT,
	     .help = "seconds per control-plane or unary envd call (60)"},
     .at = AT(request_timeout),
     .num = 60,
     .max = 3600,
     .flags = SBXS_CONF_RANGE | SBXS_CONF_ABOVE_MIN},
};

/* A map of the config as an object of strings (numbers and bools written as JSON). */
static int read_map(const char *key, const char *text, json_t **dst, sbx_error *err)
{
	const char *k;
	json_t *v;
	*dst = text ? json_loads(text, 0, NULL) : json_object();
	if (!text && !*dst)
		return sbxs_nomem(err, E2B_ALIAS, "init");
	if (!json_is_object(*dst))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "e2b: key '%s' must be a map", key);
	json_object_foreach(*dst, k, v)
	{
		if (json_is_string(v))
			continue;
		if (!json_is_integer(v) && !json_is_real(v) && !json_is_boolean(v))
			return sbxs_host->set_error(err, SBX_E_CONFIG,
						    "e2b: key '%s': value of '%s' must be a scalar",
						    key, k);
		char *s = sbxs_json_dump(v);
		if (!s)
			return sbxs_nomem(err, E2B_ALIAS, "init");
		int bad = json_object_set_new(*dst, k, json_string(s));
		sbxs_host->free(s);
		if (bad)
			return sbxs_nomem(err, E2B_ALIAS, "init");
	}
	return SBX_OK;
}

/* A URL without its trailing slashes, in host memory. */
static char *url_copy(const char *u)
{
	size_t l = strlen(u);
	while (l > 0 && u[l - 1] == '/')
		l--;
	return sbxs_strndup(u, l);
}

static void e2b_fini(void *state)
{
	e2b_state *st = state;
	if (!st)
		return;
	sbxs_host->free(st->api_url);
	sbxs_host->free(st->sandbox_url);
	json_decref(st->metadata);
	json_decref(st->envs);
	json_decref(st->template_map);
	while (st->targets) {
		e2b_target *t = st->targets;
		st->targets = t->next;
		sbxs_host->free(t);
	}
	pthread_mutex_destroy(&st->lock);
	sbxs_host->free(st);
	sbxs_http_fini();
}

static int derive(e2b_state *st, sbx_error *err)
{
	char u[600];
	const char *api = st->set.api_url;
	if (!st->set.api_key || !*st->set.api_key)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "e2b: init: no API key: set api_key or E2B_API_KEY");
	if (!api) {
		int n = snprintf(u, sizeof(u), "https://api.%s", st->set.domain);
		if (n < 0 || (size_t)n >= sizeof(u))
			return sbxs_host->set_error(err, SBX_E_CONFIG,
						    "e2b: init: domain is too long");
		api = u;
	}
	if (!(st->api_url = url_copy(api)) ||
	    (st->set.sandbox_url && !(st->sandbox_url = url_copy(st->set.sandbox_url))))
		return sbxs_nomem(err, E2B_ALIAS, "init");
	st->retry = (sbxs_retry){.max_retries = (int)st->set.retries,
				 .base_ms = (int64_t)(st->set.retry_delay * 1000),
				 .cap_ms = (int64_t)(st->set.retry_cap * 1000),
				 .retry_after_cap = (int64_t)(st->set.retry_cap * 1000),
				 .jitter = 0.5,
				 .flags = SBXS_RETRY_ANY_5XX};
	int rc = read_map("metadata", st->set.metadata_json, &st->metadata, err);
	if (rc == SBX_OK)
		rc = read_map("envs", st->set.envs_json, &st->envs, err);
	if (rc == SBX_OK)
		rc = read_map("template_map", st->set.template_map_json, &st->template_map, err);
	return rc;
}

static int e2b_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	e2b_state *st = NULL;
	int rc = sbxs_http_init(E2B_ALIAS, err);
	if (rc != SBX_OK)
		return rc;
	if ((rc = sbxs_conf_new(E2B_ALIAS, cfg, rows, SBXS_COUNT(rows), sizeof(*st), (void **)&st,
				err)) != SBX_OK) {
		sbxs_http_fini();
		return rc;
	}
	pthread_mutex_init(&st->lock, NULL);
	st->max_file_bytes = sbxs_conf_max_file_bytes(cfg);
	if ((rc = derive(st, err)) != SBX_OK)
		e2b_fini(st);
	else
		*state = st;
	return rc;
}

static int e2b_info(void *state, char **json, sbx_error *err)
{
	e2b_state *st = state;
	json_t *j = json_pack(
	    "{s:s,s:s,s:s,s:s,s:I,s:b,s:s,s:s}", "backend", "e2b", "api_url", st->api_url,
	    "sandbox_url", st->sandbox_url ? st->sandbox_url : "", "template", st->set.template_id,
	    "timeout", (json_int_t)st->set.lifetime, "strict_resources", st->set.strict_resources,
	    "exec", "envd process.Process/Start (Connect server stream)", "timeout_kill",
	    "process group of a /bin/sh wrapper, inside the sandbox");
	int rc = sbxs_json_info(j, E2B_ALIAS, json, err);
	json_decref(j);
	return rc;
}

int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg)
{
	static sbx_config_key keys[SBXS_COUNT(rows)];
	sbx_plugin_desc d = {
	    .alias = E2B_ALIAS,
	    .version = "0.1.0",
	    .description = "sandboxes on E2B or an E2B-compatible gateway (REST + envd)",
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = e2b_init,
	    .fini = e2b_fini,
	    .create = e2b_create,
	    .execute = e2b_execute,
	    .destroy = e2b_destroy,
	    .read_file = e2b_read_file,
	    .write_file = e2b_write_file,
	    .stat_file = e2b_stat_file,
	    .list_dir = e2b_list_dir,
	    .make_dir = e2b_make_dir,
	    .remove_path = e2b_remove_path,
	    .pause = e2b_pause,
	    .resume = e2b_resume,
	    .status = e2b_status,
	    .list_by_label = e2b_list_by_label,
	    .info = e2b_info,
	};
	return sbxs_register(host, reg, &d, rows, keys, SBXS_COUNT(rows));
}

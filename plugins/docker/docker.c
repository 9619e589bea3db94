/* The `docker` sandbox plugin: one container per sandbox, driven through the Docker Engine
 * API (Docker itself or Podman's compatible service) with libcurl, never the docker CLI.
 * This file holds the config keys, init and fini, info and the descriptor; the ops live in
 * lifecycle.c, exec.c and files.c. */
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

#define AT(f) offsetof(docker_state, set.f)

static const sbxs_conf rows[] = {
    {.key = {.name = "host",
	     .type = SBX_KEY_STRING,
	     .help = "engine: unix:///path or tcp://host:port"},
     .at = AT(host),
     .env = "DOCKER_HOST"},
    {.key = {.name = "image", .type = SBX_KEY_STRING, .help = "image when the task names none"},
     .at = AT(image)},
    {.key = {.name = "pull", .type = SBX_KEY_STRING, .help = "never (default), missing or always"},
     .at = AT(pull),
     .def = "never",
     .choices = "never|missing|always"},
    {.key = {.name = "working_dir",
	     .type = SBX_KEY_STRING,
	     .help = "work dir in the container (/work)"},
     .at = AT(working_dir),
     .def = "/work"},
    {.key = {.name = "env", .type = SBX_KEY_MAP, .help = "environment of every exec"},
     .at = AT(env_json)},
    {.key = {.name = "user", .type = SBX_KEY_STRING, .help = "user[:group] commands run as"},
     .at = AT(user)},
    {.key = {.name = "cpu", .type = SBX_KEY_FLOAT, .help = "CPUs (fractions allowed)"},
     .at = AT(cpu),
     .max = 1024,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "memory_mb", .type = SBX_KEY_INT, .help = "memory limit in MiB"},
     .at = AT(memory_mb),
     .max = 1 << 30,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "pids_limit", .type = SBX_KEY_INT, .help = "most processes in the container"},
     .at = AT(pids_limit),
     .max = 4194304, /* the kernel's pid_max ceiling */
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "network", .type = SBX_KEY_STRING, .help = "none or bridge (default)"},
     .at = AT(network),
     .def = "bridge",
     .choices = "none|bridge"},
    {.key = {.name = "read_only",
	     .type = SBX_KEY_BOOL,
	     .help = "read-only root fs (/tmp a volume of the container)"},
     .at = AT(read_only)},
    {.key = {.name = "cap_drop",
	     .type = SBX_KEY_LIST,
	     .help = "capabilities to drop (ALL allowed)"},
     .at = AT(cap_drop_json)},
    {.key = {.name = "ulimits", .type = SBX_KEY_LIST, .help = "list of {name, soft, hard}"},
     .at = AT(ulimits_json)},
    {.key = {.name = "api_timeout", .type = SBX_KEY_FLOAT, .help = "seconds per API call (120)"},
     .at = AT(api_timeout),
     .num = 120,
     .max = 86400,
     .flags = SBXS_CONF_RANGE | SBXS_CONF_ABOVE_MIN},
    {.key = {.name = "ready_timeout",
	     .type = SBX_KEY_FLOAT,
	     .help = "seconds to wait for exec (30)"},
     .at = AT(ready_timeout),
     .num = 30,
     .max = 3600,
     .flags = SBXS_CONF_RANGE | SBXS_CONF_ABOVE_MIN},
};

static json_t *parse(const char *text)
{
	return text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
}

static int read_cap_drop(docker_state *st, sbx_error *err)
{
	size_t i;
	json_t *v;
	st->cap_drop = parse(st->set.cap_drop_json);
	if (st->set.cap_drop_json && !json_is_array(st->cap_drop))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "docker: cap_drop is not a list");
	json_array_foreach(st->cap_drop, i, v)
	{
		if (!json_is_string(v))
			return sbxs_host->set_error(
			    err, SBX_E_CONFIG, "docker: cap_drop[%zu] is not a capability name", i);
	}
	return SBX_OK;
}

/* ulimits as the Engine wants them: [{Name, Soft, Hard}], hard defaulting to soft. */
static int read_ulimits(docker_state *st, sbx_error *err)
{
	json_t *ul = parse(st->set.ulimits_json), *v;
	size_t i;
	int rc = SBX_OK;
	if (!(st->ulimits = json_array())) {
		rc = sbxs_nomem(err, DOCKER_ALIAS, "init");
		goto out;
	}
	json_array_foreach(ul, i, v)
	{
		json_t *name = json_object_get(v, "name"), *soft = json_object_get(v, "soft"),
		       *hard = json_object_get(v, "hard");
		if (!json_is_string(name) || !json_is_integer(soft) ||
		    (hard && !json_is_integer(hard))) {
			rc = sbxs_host->set_error(
			    err, SBX_E_CONFIG,
			    "docker: ulimits[%zu] is not {name: NAME, soft: N, hard: N}", i);
			goto out;
		}
		if (json_array_append_new(
			st->ulimits, json_pack("{s:s,s:I,s:I}", "Name", json_string_value(name),
					       "Soft", json_integer_value(soft), "Hard",
					       json_integer_value(hard ? hard : soft))) != 0) {
			rc = sbxs_nomem(err, DOCKER_ALIAS, "init");
			goto out;
		}
	}
out:
	json_decref(ul);
	return rc;
}

/* env as the Engine wants it: ["K=V"], numbers written as numbers. */
static int read_env(docker_state *st, sbx_error *err)
{
	json_t *env = parse(st->set.env_json), *v;
	const char *k;
	int rc = SBX_OK;
	if (!(st->env = json_array())) {
		rc = sbxs_nomem(err, DOCKER_ALIAS, "init");
		goto out;
	}
	json_object_foreach(env, k, v)
	{
		char kv[4096], num[64];
		const char *s = json_string_value(v);
		if (!s && json_is_number(v)) {
			snprintf(num, sizeof(num), "%g", json_number_value(v));
			s = num;
		}
		int n = s ? snprintf(kv, sizeof(kv), "%s=%s", k, s) : -1;
		if (n < 0 || (size_t)n >= sizeof(kv) ||
		    json_array_append_new(st->env, json_string(kv))) {
			rc = sbxs_host->set_error(
			    err, SBX_E_CONFIG, "docker: env.%.64s must be a string under 4 KiB", k);
			goto out;
		}
	}
out:
	json_decref(env);
	return rc;
}

static void docker_fini(void *state)
{
	docker_state *st = state;
	if (!st)
		return;
	docker_engine_fini(&st->engine);
	json_decref(st->cap_drop);
	json_decref(st->ulimits);
	json_decref(st->env);
	sbxs_host->free(st);
	sbxs_http_fini();
}

static int docker_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	docker_state *st = NULL;
	int rc = sbxs_http_init(DOCKER_ALIAS, err);
	if (rc != SBX_OK)
		return rc;
	if ((rc = sbxs_conf_new(DOCKER_ALIAS, cfg, rows, SBXS_COUNT(rows), sizeof(*st),
				(void **)&st, err)) != SBX_OK) {
		sbxs_http_fini();
		return rc;
	}
	st->max_file_bytes = sbxs_conf_max_file_bytes(cfg);
	if (st->set.working_dir[0] != '/') {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "docker: working_dir '%.200s' is not an absolute path",
					  st->set.working_dir);
		goto out;
	}
	if ((rc = docker_engine_init(&st->engine, st->set.host, (long)(st->set.api_timeout * 1000),
				     err)) != SBX_OK ||
	    (rc = read_cap_drop(st, err)) != SBX_OK || (rc = read_ulimits(st, err)) != SBX_OK ||
	    (rc = read_env(st, err)) != SBX_OK)
		goto out;
	*state = st;
	st = NULL;
out:
	docker_fini(st);
	return rc;
}

static int docker_info(void *state, char **json, sbx_error *err)
{
	docker_state *st = state;
	docker_engine *e = &st->engine;
	sbx_error ne = {0};
	int reach = docker_negotiate(e, &ne) == SBX_OK;
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:b,s:s,s:s,s:s,s:s}", "backend", "docker", "host",
			      e->host_desc, "api_version", e->api_version, "client_api_version",
			      DOCKER_API_VERSION, "reachable", reach, "server_api_version",
			      reach ? e->server_version : "", "engine", reach ? e->engine : "",
			      "exec_stdin", "archive file (no hijacked connection)", "timeout_kill",
			      "process group and SBX_EXEC_TOKEN marker, inside the container");
	if (j && !reach)
		json_object_set_new(j, "error", json_string(ne.message));
	if (j && st->set.image)
		json_object_set_new(j, "image", json_string(st->set.image));
	int rc = sbxs_json_info(j, DOCKER_ALIAS, json, err);
	json_decref(j);
	return rc;
}

int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg)
{
	static sbx_config_key keys[SBXS_COUNT(rows)];
	sbx_plugin_desc d = {
	    .alias = DOCKER_ALIAS,
	    .version = "0.1.0",
	    .description = "containers through the Docker Engine API (Docker or Podman)",
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = docker_init,
	    .fini = docker_fini,
	    .create = docker_create,
	    .execute = docker_execute,
	    .destroy = docker_destroy,
	    .read_file = docker_read_file,
	    .write_file = docker_write_file,
	    .stat_file = docker_stat_file,
	    .list_dir = docker_list_dir,
	    .make_dir = docker_make_dir,
	    .remove_path = docker_remove_path,
	    .pause = docker_pause,
	    .resume = docker_resume,
	    .status = docker_status,
	    .list_by_label = docker_list_by_label,
	    .info = docker_info,
	};
	return sbxs_register(host, reg, &d, rows, keys, SBXS_COUNT(rows));
}

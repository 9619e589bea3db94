/* The `docker` sandbox plugin: one container per sandbox, driven through the Docker Engine
 * API (Docker itself or Podman's compatible service) with libcurl, never the docker CLI.
 * This file holds the descriptor, configuration and the container lifecycle; the transport,
 * exec and files live beside it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "docker.h"

const sbx_host_api *sbx__dk_host;
#define host sbx__dk_host

/* Keeps the container alive with nothing but /bin/sh; exits at once on docker stop. */
static const char keepalive[] = "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done";

static const sbx_config_key dk_keys[] = {
    {.name = "host", .type = SBX_KEY_STRING, .help = "engine: unix:///path or tcp://host:port"},
    {.name = "image", .type = SBX_KEY_STRING, .help = "image when the task names none"},
    {.name = "pull", .type = SBX_KEY_STRING, .help = "never (default), missing or always"},
    {.name = "working_dir", .type = SBX_KEY_STRING, .help = "work dir in the container (/work)"},
    {.name = "env", .type = SBX_KEY_MAP, .help = "environment of every exec"},
    {.name = "user", .type = SBX_KEY_STRING, .help = "user[:group] commands run as"},
    {.name = "cpu", .type = SBX_KEY_FLOAT, .help = "CPUs (fractions allowed)"},
    {.name = "memory_mb", .type = SBX_KEY_INT, .help = "memory limit in MiB"},
    {.name = "pids_limit", .type = SBX_KEY_INT, .help = "most processes in the container"},
    {.name = "network", .type = SBX_KEY_STRING, .help = "none or bridge (default)"},
    {.name = "read_only", .type = SBX_KEY_BOOL, .help = "read-only root fs (tmpfs /tmp)"},
    {.name = "cap_drop", .type = SBX_KEY_LIST, .help = "capabilities to drop (ALL allowed)"},
    {.name = "ulimits", .type = SBX_KEY_LIST, .help = "list of {name, soft, hard}"},
    {.name = "api_timeout", .type = SBX_KEY_FLOAT, .help = "seconds per API call (120)"},
    {.name = "ready_timeout", .type = SBX_KEY_FLOAT, .help = "seconds to wait for exec (30)"},
};

int sbx__dk_token(char *buf, size_t cap, size_t bytes)
{
	unsigned char raw[32];
	if (bytes > sizeof(raw) || cap < bytes * 2 + 1)
		return SBX_E_INVAL;
	if (getrandom(raw, bytes, 0) != (ssize_t)bytes) {
		/* Unique enough for a marker: time, pid and a counter. */
		static unsigned counter;
		unsigned long v = (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16) ^
				  __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
		for (size_t i = 0; i < bytes; i++)
			raw[i] = (unsigned char)(v >> ((i % 8) * 8)) ^ (unsigned char)(i * 131);
	}
	for (size_t i = 0; i < bytes; i++)
		snprintf(buf + 2 * i, 3, "%02x", raw[i]);
	return SBX_OK;
}

int sbx__dk_id_check(const char *id, const char *op, sbx_error *err)
{
	/* Container ids (hex) and names ([a-zA-Z0-9][a-zA-Z0-9_.-]*): nothing that could change
	 * the meaning of a request path. */
	size_t n = id ? strlen(id) : 0;
	int ok = n >= 1 && n <= 128 && isalnum((unsigned char)id[0]);
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)id[i]) || id[i] == '_' || id[i] == '.' || id[i] == '-';
	if (!ok)
		return host->set_error(err, SBX_E_BAD_ID,
				       "docker: %s: '%.80s' is not a container id or name", op,
				       id ? id : "");
	return SBX_OK;
}

int sbx__dk_http_error(const dk_resp *resp, const char *op, const char *id, sbx_error *err)
{
	char msg[300];
	sbx__dk_resp_message(resp, msg, sizeof(msg));
	int code = SBX_E_BACKEND;
	if (resp->status == 404)
		return host->set_error(err, SBX_E_NOT_FOUND,
				       "docker: %s: container %.64s not found", op, id);
	if (resp->status == 409 && strstr(msg, "paused"))
		code = SBX_E_PAUSED;
	else if (resp->status == 429)
		code = SBX_E_RATE_LIMITED;
	return host->set_error(err, code, "docker: %s: container %.64s: engine answered %ld: %s",
			       op, id, resp->status, msg);
}

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = host->alloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

static void state_free(dk_state *st)
{
	if (!st)
		return;
	sbx__dk_transport_fini(st);
	host->free(st->image);
	host->free(st->pull);
	host->free(st->working_dir);
	host->free(st->user);
	host->free(st->network);
	json_decref(st->cap_drop);
	json_decref(st->ulimits);
	json_decref(st->env);
	host->free(st);
}

/* Reads an optional string key into *dst (a copy), keeping `def` when absent. */
static int opt_string(const sbx_config *cfg, const char *key, const char *def, char **dst,
		      sbx_error *err)
{
	const char *v = NULL;
	int rc = host->config_string(cfg, key, &v, err);
	if (rc == SBX_E_NOT_FOUND) {
		rc = SBX_OK;
		v = def;
	}
	if (rc != SBX_OK || !v)
		return rc;
	*dst = dup_str(v);
	return *dst ? SBX_OK : host->set_error(err, SBX_E_NOMEM, "docker: init: out of memory");
}

static int opt_number(const sbx_config *cfg, const char *key, double *dst, sbx_error *err)
{
	int64_t i;
	int rc = host->config_float(cfg, key, dst, err);
	if (rc == SBX_E_CONFIG && host->config_int(cfg, key, &i, NULL) == SBX_OK) {
		*dst = (double)i;
		rc = SBX_OK;
	}
	return rc == SBX_E_NOT_FOUND ? SBX_OK : rc;
}

static int opt_json(const sbx_config *cfg, const char *key, json_t **dst, sbx_error *err)
{
	const char *text = NULL;
	int rc = host->config_json(cfg, key, &text, err);
	if (rc == SBX_E_NOT_FOUND)
		return SBX_OK;
	if (rc != SBX_OK)
		return rc;
	*dst = json_loads(text, JSON_DECODE_ANY, NULL);
	if (!*dst)
		return host->set_error(err, SBX_E_CONFIG, "docker: init: key '%s' is not valid",
				       key);
	return SBX_OK;
}

static int read_config(const sbx_config *cfg, dk_state *st, sbx_error *err)
{
	int rc;
	const char *host_key = NULL;
	json_t *v = NULL;
	rc = host->config_string(cfg, "host", &host_key, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	rc = sbx__dk_transport_init(st, rc == SBX_OK ? host_key : NULL, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "image", NULL, &st->image, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "pull", "never", &st->pull, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "working_dir", "/work", &st->working_dir, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "user", NULL, &st->user, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "network", "bridge", &st->network, err);
	if (rc != SBX_OK)
		return rc;
	if (strcmp(st->pull, "never") && strcmp(st->pull, "missing") && strcmp(st->pull, "always"))
		return host->set_error(err, SBX_E_CONFIG,
				       "docker: pull '%.40s' is not never, missing or always",
				       st->pull);
	if (strcmp(st->network, "none") && strcmp(st->network, "bridge"))
		return host->set_error(err, SBX_E_CONFIG,
				       "docker: network '%.40s' is not none or bridge",
				       st->network);
	if (st->working_dir[0] != '/')
		return host->set_error(err, SBX_E_CONFIG,
				       "docker: working_dir '%.200s' is not an absolute path",
				       st->working_dir);

	double api_timeout = 120, ready = 30;
	if ((rc = opt_number(cfg, "cpu", &st->cpu, err)) != SBX_OK ||
	    (rc = opt_number(cfg, "api_timeout", &api_timeout, err)) != SBX_OK ||
	    (rc = opt_number(cfg, "ready_timeout", &ready, err)) != SBX_OK)
		return rc;
	if (st->cpu < 0 || st->cpu > 1024)
		return host->set_error(err, SBX_E_CONFIG,
				       "docker: cpu %g is not between 0 and 1024", st->cpu);
	if (api_timeout <= 0 || api_timeout > 86400 || ready <= 0 || ready > 3600)
		return host->set_error(
		    err, SBX_E_CONFIG,
		    "docker: api_timeout must be in (0, 86400] and ready_timeout in "
		    "(0, 3600] seconds");
	st->request_timeout_ms = (long)(api_timeout * 1000);
	st->ready_timeout_ms = (int64_t)(ready * 1000);
	rc = host->config_int(cfg, "memory_mb", &st->memory_mb, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	rc = host->config_int(cfg, "pids_limit", &st->pids_limit, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	if (st->memory_mb < 0 || st->memory_mb > (INT64_C(1) << 30) || st->pids_limit < 0)
		return host->set_error(err, SBX_E_CONFIG,
				       "docker: memory_mb and pids_limit must not be negative");
	rc = host->config_bool(cfg, "read_only", &st->read_only, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;

	if ((rc = opt_json(cfg, "cap_drop", &st->cap_drop, err)) != SBX_OK)
		return rc;
	size_t i;
	json_array_foreach(st->cap_drop, i, v)
	{
		if (!json_is_string(v))
			return host->set_error(err, SBX_E_CONFIG,
					       "docker: cap_drop[%zu] is not a capability name", i);
	}

	json_t *ul = NULL;
	if ((rc = opt_json(cfg, "ulimits", &ul, err)) != SBX_OK)
		return rc;
	st->ulimits = json_array();
	if (!st->ulimits) {
		json_decref(ul);
		return host->set_error(err, SBX_E_NOMEM, "docker: init: out of memory");
	}
	json_array_foreach(ul, i, v)
	{
		json_t *name = json_object_get(v, "name"), *soft = json_object_get(v, "soft"),
		       *hard = json_object_get(v, "hard");
		if (!json_is_string(name) || !json_is_integer(soft) ||
		    (hard && !json_is_integer(hard))) {
			json_decref(ul);
			return host->set_error(
			    err, SBX_E_CONFIG,
			    "docker: ulimits[%zu] is not {name: NAME, soft: N, hard: N}", i);
		}
		if (json_array_append_new(
			st->ulimits, json_pack("{s:s,s:I,s:I}", "Name", json_string_value(name),
					       "Soft", json_integer_value(soft), "Hard",
					       json_integer_value(hard ? hard : soft))) != 0) {
			json_decref(ul);
			return host->set_error(err, SBX_E_NOMEM, "docker: init: out of memory");
		}
	}
	json_decref(ul);

	json_t *env = NULL;
	if ((rc = opt_json(cfg, "env", &env, err)) != SBX_OK)
		return rc;
	st->env = json_array();
	if (!st->env) {
		json_decref(env);
		return host->set_error(err, SBX_E_NOMEM, "docker: init: out of memory");
	}
	const char *k;
	json_object_foreach(env, k, v)
	{
		char kv[4096];
		const char *s = json_string_value(v);
		char num[64];
		if (!s && json_is_number(v)) {
			snprintf(num, sizeof(num), "%g", json_number_value(v));
			s = num;
		}
		int n = s ? snprintf(kv, sizeof(kv), "%s=%s", k, s) : -1;
		if (n < 0 || (size_t)n >= sizeof(kv) ||
		    json_array_append_new(st->env, json_string(kv))) {
			json_decref(env);
			return host->set_error(err, SBX_E_CONFIG,
					       "docker: env.%.64s must be a string under 4 KiB", k);
		}
	}
	json_decref(env);
	return SBX_OK;
}

static int dk_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	dk_state *st = host->alloc(sizeof(*st));
	if (!st)
		return host->set_error(err, SBX_E_NOMEM, "docker: init: out of memory");
	memset(st, 0, sizeof(*st));
	int rc = read_config(cfg, st, err);
	if (rc != SBX_OK) {
		state_free(st);
		return rc;
	}
	*state = st;
	return SBX_OK;
}

static void dk_fini(void *state)
{
	state_free(state);
}

static int remove_container(dk_state *st, const char *id, sbx_error *err)
{
	char path[160];
	dk_resp resp = {0};
	snprintf(path, sizeof(path), "/containers/%s?force=true&v=true", id);
	int rc = sbx__dk_request(st, "DELETE", path, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK && resp.status >= 400 && resp.status != 404) {
		/* An engine that refuses to remove a paused container gets it unpaused first. */
		dk_resp r2 = {0};
		char upath[160];
		snprintf(upath, sizeof(upath), "/containers/%s/unpause", id);
		if (sbx__dk_request(st, "POST", upath, NULL, NULL, 0, &r2, NULL) == SBX_OK)
			sbx__dk_resp_free(&r2);
		sbx__dk_resp_free(&resp);
		rc = sbx__dk_request(st, "DELETE", path, NULL, NULL, 0, &resp, err);
	}
	if (rc == SBX_OK && resp.status >= 400 && resp.status != 404)
		rc = sbx__dk_http_error(&resp, "destroy", id, err);
	sbx__dk_resp_free(&resp);
	return rc;
}

static int pull_image(dk_state *st, const char *image, sbx_error *err)
{
	char *esc = curl_easy_escape(NULL, image, 0);
	char path[1024];
	dk_resp resp = {0};
	if (!esc)
		return host->set_error(err, SBX_E_NOMEM, "docker: create: out of memory");
	int n = snprintf(path, sizeof(path), "/images/create?fromImage=%s", esc);
	curl_free(esc);
	if (n < 0 || (size_t)n >= sizeof(path))
		return host->set_error(err, SBX_E_INVAL, "docker: create: image name is too long");
	host->log(SBX_LOG_INFO, DK_ALIAS, "pulling image %s", image);
	int rc = sbx__dk_request(st, "POST", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	/* The answer is a stream of JSON progress objects; a failure is one with "error". */
	const char *e = resp.body ? strstr(resp.body, "\"error\"") : NULL;
	if (resp.status >= 400 || e) {
		char msg[300];
		if (e) {
			const char *line = e;
			while (line > resp.body && line[-1] != '\n')
				line--;
			json_t *j = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
			snprintf(msg, sizeof(msg), "%.290s",
				 json_string_value(json_object_get(j, "error"))
				     ? json_string_value(json_object_get(j, "error"))
				     : "error");
			json_decref(j);
			for (char *p = msg; *p; p++)
				if (*p == '\n')
					*p = ' ';
		} else {
			sbx__dk_resp_message(&resp, msg, sizeof(msg));
		}
		rc = host->set_error(err, SBX_E_BACKEND,
				     "docker: create: pulling image '%.200s' failed: %s", image,
				     msg);
	}
out:
	sbx__dk_resp_free(&resp);
	return rc;
}

static json_t *create_body(dk_state *st, const sbx_create_spec *spec, const char *image)
{
	json_t *labels = json_object(), *env = json_deep_copy(st->env);
	json_t *hc = json_object(), *body = NULL;
	json_t *ep = json_pack("[sss]", "/bin/sh", "-c", keepalive);
	if (!labels || !env || !hc || !ep)
		goto fail;
	for (uint32_t i = 0; i < spec->n_labels; i++)
		if (spec->labels[i].key && spec->labels[i].value &&
		    json_object_set_new(labels, spec->labels[i].key,
					json_string(spec->labels[i].value)) != 0)
			goto fail;
	if (spec->data_source && !json_object_get(labels, "sbx.data_source") &&
	    json_object_set_new(labels, "sbx.data_source", json_string(spec->data_source)) != 0)
		goto fail;
	if (spec->ttl_seconds > 0 && !json_object_get(labels, "sbx.expires")) {
		char exp[32];
		snprintf(exp, sizeof(exp), "%lld",
			 (long long)time(NULL) + (long long)spec->ttl_seconds);
		if (json_object_set_new(labels, "sbx.expires", json_string(exp)) != 0)
			goto fail;
	}
	for (uint32_t i = 0; i < spec->n_env; i++) {
		char kv[8192];
		int n = snprintf(kv, sizeof(kv), "%s=%s", spec->env[i].key, spec->env[i].value);
		if (n < 0 || (size_t)n >= sizeof(kv) || json_array_append_new(env, json_string(kv)))
			goto fail;
	}
	if (json_object_set_new(hc, "NetworkMode", json_string(st->network)) ||
	    json_object_set_new(hc, "ReadonlyRootfs", json_boolean(st->read_only)) ||
	    json_object_set(hc, "Ulimits", st->ulimits))
		goto fail;
	if (st->cpu > 0 &&
	    json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)(st->cpu * 1e9))))
		goto fail;
	if (st->memory_mb > 0 &&
	    json_object_set_new(hc, "Memory", json_integer((json_int_t)st->memory_mb << 20)))
		goto fail;
	if (st->pids_limit > 0 &&
	    json_object_set_new(hc, "PidsLimit", json_integer((json_int_t)st->pids_limit)))
		goto fail;
	if (st->cap_drop && json_object_set(hc, "CapDrop", st->cap_drop))
		goto fail;
	/* A read-only root still needs a writable /tmp. An anonymous volume (removed with the
	 * container: destroy passes v=true) rather than a tmpfs: Docker's archive endpoint works
	 * on the container's file system as seen from the host, where a tmpfs does not show,
	 * and refuses uploads to a read-only root outside volumes. */
	if (st->read_only &&
	    json_object_set_new(hc, "Mounts",
				json_pack("[{ssss}]", "Type", "volume", "Target", "/tmp")))
		goto fail;
	/* "o" hands each reference to the new object, on failure too. */
	body = json_pack("{s:s,s:o,s:[],s:o,s:o,s:s,s:o,s:b,s:b}", "Image", image, "Entrypoint", ep,
			 "Cmd", "Labels", labels, "Env", env, "WorkingDir", st->working_dir,
			 "HostConfig", hc, "AttachStdin", 0, "Tty", 0);
	if (!body)
		return NULL;
	if (st->user && json_object_set_new(body, "User", json_string(st->user))) {
		json_decref(body);
		return NULL;
	}
	return body;
fail:
	json_decref(labels);
	json_decref(env);
	json_decref(hc);
	json_decref(ep);
	json_decref(body);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The sandbox is handed out only once a command can run in it. */
static int wait_ready(dk_state *st, const char *id, sbx_error *err)
{
	static const char *const argv[] = {"/bin/sh", "-c", "exit 0", NULL};
	int64_t deadline = now_ms() + st->ready_timeout_ms;
	long pause_ms = 10;
	for (;;) {
		dk_capture cap;
		sbx_error e = {0};
		int rc = sbx__dk_run(st, id, argv, &cap, &e);
		if (rc == SBX_OK && cap.exit_code == 0)
			return SBX_OK;
		if (now_ms() >= deadline) {
			if (rc == SBX_OK)
				return host->set_error(
				    err, SBX_E_BACKEND,
				    "docker: create: container %.12s: /bin/sh -c 'exit "
				    "0' exited %d: %.200s; the image needs /bin/sh",
				    id, cap.exit_code, cap.err);
			return host->set_error(err, rc,
					       "docker: create: container %.12s never became "
					       "ready: %s",
					       id, e.message);
		}
		sleep_ms(pause_ms);
		if (pause_ms < 200)
			pause_ms *= 2;
	}
}

static int dk_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		     sbx_error *err)
{
	dk_state *st = state;
	dk_resp resp = {0};
	json_t *body = NULL, *ans = NULL;
	char id[80] = "";
	char path[200];
	int rc;
	const char *image = spec->image && *spec->image ? spec->image : st->image;
	if (!image)
		return host->set_error(err, SBX_E_CONFIG,
				       "docker: create: no image: give one per task "
				       "(metadata.docker_image) or set `image` in the config");
	if ((rc = sbx__dk_negotiate(st, err)) != SBX_OK)
		return rc;
	if (strcmp(st->pull, "always") == 0 && (rc = pull_image(st, image, err)) != SBX_OK)
		return rc;
	body = create_body(st, spec, image);
	if (!body)
		return host->set_error(err, SBX_E_NOMEM, "docker: create: out of memory");
	rc = sbx__dk_request_json(st, "POST", "/containers/create", body, &resp, err);
	if (rc == SBX_OK && resp.status == 404 && strcmp(st->pull, "missing") == 0) {
		sbx__dk_resp_free(&resp);
		if ((rc = pull_image(st, image, err)) == SBX_OK)
			rc = sbx__dk_request_json(st, "POST", "/containers/create", body, &resp,
						  err);
	}
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		rc = host->set_error(
		    err, SBX_E_CONFIG,
		    "docker: create: image '%.200s' not found in the engine at %.200s "
		    "(build or pull it, or set pull: missing)",
		    image, st->host_desc);
		goto out;
	}
	if (resp.status != 201 && resp.status != 200) {
		char msg[300];
		sbx__dk_resp_message(&resp, msg, sizeof(msg));
		rc = host->set_error(err, resp.status == 429 ? SBX_E_RATE_LIMITED : SBX_E_BACKEND,
				     "docker: create: image '%.200s': engine answered %ld: %s",
				     image, resp.status, msg);
		goto out;
	}
	ans = json_loadb(resp.body, resp.len, 0, NULL);
	const char *cid = json_string_value(json_object_get(ans, "Id"));
	if (!cid || snprintf(id, sizeof(id), "%s", cid) >= (int)sizeof(id) ||
	    sbx__dk_id_check(id, "create", NULL) != SBX_OK) {
		rc = host->set_error(err, SBX_E_BACKEND,
				     "docker: create: engine answered without a container id");
		goto out;
	}
	sbx__dk_resp_free(&resp);

	snprintf(path, sizeof(path), "/containers/%s/start", id);
	rc = sbx__dk_request(st, "POST", path, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK && resp.status != 204 && resp.status != 304 && resp.status != 200) {
		char msg[300];
		sbx__dk_resp_message(&resp, msg, sizeof(msg));
		rc = host->set_error(err, SBX_E_BACKEND,
				     "docker: create: starting container from '%.200s' failed: %s",
				     image, msg);
	}
	if (rc == SBX_OK)
		rc = wait_ready(st, id, err);
	if (rc == SBX_OK && strlen(id) + 1 > id_cap)
		rc = host->set_error(err, SBX_E_INVAL, "docker: create: id buffer too small");
	if (rc != SBX_OK)
		goto out;
	memcpy(id_buf, id, strlen(id) + 1);
out:
	if (rc != SBX_OK && id[0] && remove_container(st, id, NULL) != SBX_OK)
		host->log(SBX_LOG_WARN, DK_ALIAS, "create: could not remove half-made container %s",
			  id);
	json_decref(ans);
	json_decref(body);
	sbx__dk_resp_free(&resp);
	return rc;
}

static int dk_destroy(void *state, const char *id, sbx_error *err)
{
	int rc = sbx__dk_id_check(id, "destroy", err);
	return rc != SBX_OK ? rc : remove_container(state, id, err);
}

static int simple_post(dk_state *st, const char *id, const char *op, const char *verb,
		       const char *benign, sbx_error *err)
{
	char path[160];
	dk_resp resp = {0};
	int rc = sbx__dk_id_check(id, op, err);
	if (rc != SBX_OK)
		return rc;
	snprintf(path, sizeof(path), "/containers/%s/%s", id, verb);
	rc = sbx__dk_request(st, "POST", path, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK && resp.status >= 400) {
		char msg[300];
		sbx__dk_resp_message(&resp, msg, sizeof(msg));
		/* Pausing a paused container (or resuming a running one) is already done; Docker
		 * says so with 409, Podman with 500. */
		if ((resp.status != 409 && resp.status != 500) || !strstr(msg, benign))
			rc = sbx__dk_http_error(&resp, op, id, err);
	}
	sbx__dk_resp_free(&resp);
	return rc;
}

static int dk_pause(void *state, const char *id, sbx_error *err)
{
	return simple_post(state, id, "pause", "pause", "already paused", err);
}

static int dk_resume(void *state, const char *id, sbx_error *err)
{
	return simple_post(state, id, "resume", "unpause", "not paused", err);
}

static int dk_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	char path[160];
	dk_resp resp = {0};
	json_t *j = NULL;
	int rc = sbx__dk_id_check(id, "status", err);
	if (rc != SBX_OK)
		return rc;
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	rc = sbx__dk_request(state, "GET", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		*out = SBX_STATE_GONE;
		goto out;
	}
	if (resp.status != 200) {
		rc = sbx__dk_http_error(&resp, "status", id, err);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
	const char *s = json_string_value(json_object_get(json_object_get(j, "State"), "Status"));
	if (!s)
		*out = SBX_STATE_UNKNOWN;
	else if (strcmp(s, "running") == 0)
		*out = SBX_STATE_RUNNING;
	else if (strcmp(s, "paused") == 0)
		*out = SBX_STATE_PAUSED;
	else if (strcmp(s, "created") == 0 || strcmp(s, "restarting") == 0 ||
		 strcmp(s, "configured") == 0 || strcmp(s, "initialized") == 0)
		*out = SBX_STATE_CREATING;
	else if (strcmp(s, "exited") == 0 || strcmp(s, "dead") == 0 || strcmp(s, "removing") == 0 ||
		 strcmp(s, "stopped") == 0)
		*out = SBX_STATE_GONE;
	else
		*out = SBX_STATE_UNKNOWN;
out:
	json_decref(j);
	sbx__dk_resp_free(&resp);
	return rc;
}

static int dk_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn,
			    void *ctx, sbx_error *err)
{
	char label[1024], path[1400];
	dk_resp resp = {0};
	json_t *j = NULL, *filters = NULL;
	char *text = NULL, *esc = NULL;
	int rc = SBX_OK;
	int n = value ? snprintf(label, sizeof(label), "%s=%s", key, value)
		      : snprintf(label, sizeof(label), "%s", key);
	if (n < 0 || (size_t)n >= sizeof(label))
		return host->set_error(err, SBX_E_INVAL, "docker: list: label is too long");
	filters = json_pack("{s:[s]}", "label", label);
	text = filters ? json_dumps(filters, JSON_COMPACT) : NULL;
	esc = text ? curl_easy_escape(NULL, text, 0) : NULL;
	if (!esc) {
		rc = host->set_error(err, SBX_E_NOMEM, "docker: list: out of memory");
		goto out;
	}
	n = snprintf(path, sizeof(path), "/containers/json?all=true&filters=%s", esc);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		rc = host->set_error(err, SBX_E_INVAL, "docker: list: label is too long");
		goto out;
	}
	rc = sbx__dk_request(state, "GET", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status != 200) {
		char msg[300];
		sbx__dk_resp_message(&resp, msg, sizeof(msg));
		rc = host->set_error(err, SBX_E_BACKEND, "docker: list: engine answered %ld: %s",
				     resp.status, msg);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
	size_t i;
	json_t *c;
	json_array_foreach(j, i, c)
	{
		const char *cid = json_string_value(json_object_get(c, "Id"));
		if (cid && (rc = fn(ctx, cid)) != SBX_OK) {
			rc = host->set_error(err, rc, "docker: list: stopped by the caller");
			goto out;
		}
	}
out:
	json_decref(j);
	json_decref(filters);
	free(text);
	curl_free(esc);
	sbx__dk_resp_free(&resp);
	return rc;
}

static int dk_info(void *state, char **json, sbx_error *err)
{
	dk_state *st = state;
	sbx_error e = {0};
	int reach = sbx__dk_negotiate(st, &e) == SBX_OK;
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:b,s:s,s:s,s:s,s:s}", "backend", "docker", "host",
			      st->host_desc, "api_version", st->api_version, "client_api_version",
			      DK_API_VERSION, "reachable", reach, "server_api_version",
			      reach ? st->server_version : "", "engine", reach ? st->engine : "",
			      "exec_stdin", "on the exec's own connection, ended by a half-close",
			      "timeout_kill",
			      "process group and SBX_EXEC_TOKEN marker, inside the container");
	if (j && !reach)
		json_object_set_new(j, "error", json_string(e.message));
	if (j && st->image)
		json_object_set_new(j, "image", json_string(st->image));
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return host->set_error(err, SBX_E_NOMEM, "docker: info: out of memory");
	size_t n = strlen(text) + 1;
	*json = host->alloc(n);
	if (*json)
		memcpy(*json, text, n);
	free(text);
	return *json ? SBX_OK : host->set_error(err, SBX_E_NOMEM, "docker: info: out of memory");
}

int sbx_plugin_register(const sbx_host_api *api, sbx_registrar *reg)
{
	host = api;
	sbx_plugin_desc d = {
	    .alias = DK_ALIAS,
	    .version = "0.1.0",
	    .description = "containers through the Docker Engine API (Docker or Podman)",
	    .keys = dk_keys,
	    .n_keys = (uint32_t)(sizeof(dk_keys) / sizeof(dk_keys[0])),
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = dk_init,
	    .fini = dk_fini,
	    .create = dk_create,
	    .execute = sbx__dk_execute,
	    .destroy = dk_destroy,
	    .read_file = sbx__dk_read_file,
	    .write_file = sbx__dk_write_file,
	    .stat_file = sbx__dk_stat_file,
	    .list_dir = sbx__dk_list_dir,
	    .make_dir = sbx__dk_make_dir,
	    .remove_path = sbx__dk_remove_path,
	    .pause = dk_pause,
	    .resume = dk_resume,
	    .status = dk_status,
	    .list_by_label = dk_list_by_label,
	    .info = dk_info,
	};
	SBX_INIT_HEADER(d);
	return api->register_sandbox(reg, &d);
}

/* The container lifecycle: create (pull as configured, create, start, wait until a command
 * runs), destroy, pause and resume, status, and the listing by label that gc uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/json.h>

#include "lifecycle.h"
#include "run.h"
#include "state.h"

/* Keeps the container alive with nothing but /bin/sh; exits at once on docker stop. */
static const char keepalive[] = "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done";

static int remove_container(docker_state *st, const char *id, sbx_error *err)
{
	char path[160];
	docker_resp resp = {0};
	snprintf(path, sizeof(path), "/containers/%s?force=true&v=true", id);
	int rc = docker_request(&st->engine, "DELETE", path, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK && resp.status >= 400 && resp.status != 404) {
		/* An engine that refuses to remove a paused container gets it unpaused first. */
		docker_resp r2 = {0};
		char upath[160];
		snprintf(upath, sizeof(upath), "/containers/%s/unpause", id);
		if (docker_request(&st->engine, "POST", upath, NULL, NULL, 0, &r2, NULL) == SBX_OK)
			docker_resp_free(&r2);
		docker_resp_free(&resp);
		rc = docker_request(&st->engine, "DELETE", path, NULL, NULL, 0, &resp, err);
	}
	if (rc == SBX_OK && resp.status >= 400 && resp.status != 404)
		rc = docker_http_error(&resp, "destroy", id, err);
	docker_resp_free(&resp);
	return rc;
}

static int pull_image(docker_state *st, const char *image, sbx_error *err)
{
	char *esc = curl_easy_escape(NULL, image, 0);
	char path[1024];
	docker_resp resp = {0};
	if (!esc)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "docker: create: out of memory");
	int n = snprintf(path, sizeof(path), "/images/create?fromImage=%s", esc);
	curl_free(esc);
	if (n < 0 || (size_t)n >= sizeof(path))
		return sbxs_host->set_error(err, SBX_E_INVAL,
					    "docker: create: image name is too long");
	sbxs_host->log(SBX_LOG_INFO, DOCKER_ALIAS, "pulling image %s", image);
	int rc = docker_request(&st->engine, "POST", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	/* The answer is a stream of JSON progress objects; a failure is one with "error". */
	const char *e = resp.body.data ? strstr(resp.body.data, "\"error\"") : NULL;
	if (resp.status >= 400 || e) {
		char msg[300];
		if (e) {
			const char *line = e;
			while (line > resp.body.data && line[-1] != '\n')
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
			docker_resp_message(&resp, msg, sizeof(msg));
		}
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "docker: create: pulling image '%.200s' failed: %s",
					  image, msg);
	}
out:
	docker_resp_free(&resp);
	return rc;
}

static json_t *create_body(docker_state *st, const sbx_create_spec *spec, const char *image)
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
			 (long long)sbxs_wall_s() + (long long)spec->ttl_seconds);
		if (json_object_set_new(labels, "sbx.expires", json_string(exp)) != 0)
			goto fail;
	}
	for (uint32_t i = 0; i < spec->n_env; i++) {
		char kv[8192];
		int n = snprintf(kv, sizeof(kv), "%s=%s", spec->env[i].key, spec->env[i].value);
		if (n < 0 || (size_t)n >= sizeof(kv) || json_array_append_new(env, json_string(kv)))
			goto fail;
	}
	if (json_object_set_new(hc, "NetworkMode", json_string(st->set.network)) ||
	    json_object_set_new(hc, "ReadonlyRootfs", json_boolean(st->set.read_only)) ||
	    json_object_set(hc, "Ulimits", st->ulimits))
		goto fail;
	if (st->set.cpu > 0 &&
	    json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)(st->set.cpu * 1e9))))
		goto fail;
	if (st->set.memory_mb > 0 &&
	    json_object_set_new(hc, "Memory", json_integer((json_int_t)st->set.memory_mb << 20)))
		goto fail;
	if (st->set.pids_limit > 0 &&
	    json_object_set_new(hc, "PidsLimit", json_integer((json_int_t)st->set.pids_limit)))
		goto fail;
	if (st->cap_drop && json_object_set(hc, "CapDrop", st->cap_drop))
		goto fail;
	/* A read-only root still needs a writable /tmp for stdin files and the commands' own
	 * temp. An anonymous volume (removed with the container: destroy passes v=true) rather
	 * than a tmpfs: Docker's archive endpoint works on the container's file system as seen
	 * from the host, where a tmpfs does not show, and refuses uploads to a read-only root
	 * outside volumes ("container rootfs is marked read-only"). */
	if (st->set.read_only &&
	    json_object_set_new(hc, "Mounts",
				json_pack("[{ssss}]", "Type", "volume", "Target", "/tmp")))
		goto fail;
	/* "o" hands each reference to the new object, on failure too. */
	body = json_pack("{s:s,s:o,s:[],s:o,s:o,s:s,s:o,s:b,s:b}", "Image", image, "Entrypoint", ep,
			 "Cmd", "Labels", labels, "Env", env, "WorkingDir", st->set.working_dir,
			 "HostConfig", hc, "AttachStdin", 0, "Tty", 0);
	if (!body)
		return NULL;
	if (st->set.user && json_object_set_new(body, "User", json_string(st->set.user))) {
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

/* The sandbox is handed out only once a command can run in it. */
static int wait_ready(docker_state *st, const char *id, sbx_error *err)
{
	static const char *const argv[] = {"/bin/sh", "-c", "exit 0", NULL};
	int64_t deadline = sbxs_now_ms() + (int64_t)(st->set.ready_timeout * 1000);
	int64_t pause_ms = 10;
	for (;;) {
		docker_capture cap;
		sbx_error e = {0};
		int rc = docker_run(&st->engine, id, argv, &cap, &e);
		if (rc == SBX_OK && cap.exit_code == 0)
			return SBX_OK;
		if (sbxs_now_ms() >= deadline) {
			if (rc == SBX_OK)
				return sbxs_host->set_error(
				    err, SBX_E_BACKEND,
				    "docker: create: container %.12s: /bin/sh -c 'exit "
				    "0' exited %d: %.200s; the image needs /bin/sh",
				    id, cap.exit_code, cap.err);
			return sbxs_host->set_error(err, rc,
						    "docker: create: container %.12s never became "
						    "ready: %s",
						    id, e.message);
		}
		sbxs_sleep_ms(pause_ms);
		if (pause_ms < 200)
			pause_ms *= 2;
	}
}

int docker_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		  sbx_error *err)
{
	docker_state *st = state;
	docker_resp resp = {0};
	json_t *body = NULL, *ans = NULL;
	char id[80] = "";
	char path[200];
	int rc;
	const char *image = spec->image && *spec->image ? spec->image : st->set.image;
	if (!image)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "docker: create: no image: give one per task "
					    "(metadata.docker_image) or set `image` in the config");
	if ((rc = docker_negotiate(&st->engine, err)) != SBX_OK)
		return rc;
	if (strcmp(st->set.pull, "always") == 0 && (rc = pull_image(st, image, err)) != SBX_OK)
		return rc;
	body = create_body(st, spec, image);
	if (!body)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "docker: create: out of memory");
	rc = docker_request_json(&st->engine, "POST", "/containers/create", body, &resp, err);
	if (rc == SBX_OK && resp.status == 404 && strcmp(st->set.pull, "missing") == 0) {
		docker_resp_free(&resp);
		if ((rc = pull_image(st, image, err)) == SBX_OK)
			rc = docker_request_json(&st->engine, "POST", "/containers/create", body,
						 &resp, err);
	}
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		rc = sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "docker: create: image '%.200s' not found in the engine at %.200s "
		    "(build or pull it, or set pull: missing)",
		    image, st->engine.host_desc);
		goto out;
	}
	if (resp.status != 201 && resp.status != 200) {
		char msg[300];
		docker_resp_message(&resp, msg, sizeof(msg));
		rc = sbxs_host->set_error(err,
					  resp.status == 429 ? SBX_E_RATE_LIMITED : SBX_E_BACKEND,
					  "docker: create: image '%.200s': engine answered %ld: %s",
					  image, resp.status, msg);
		goto out;
	}
	ans = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	const char *cid = json_string_value(json_object_get(ans, "Id"));
	if (!cid || snprintf(id, sizeof(id), "%s", cid) >= (int)sizeof(id) ||
	    docker_id_check(id, "create", NULL) != SBX_OK) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "docker: create: engine answered without a container id");
		goto out;
	}
	docker_resp_free(&resp);

	snprintf(path, sizeof(path), "/containers/%s/start", id);
	rc = docker_request(&st->engine, "POST", path, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK && resp.status != 204 && resp.status != 304 && resp.status != 200) {
		char msg[300];
		docker_resp_message(&resp, msg, sizeof(msg));
		rc = sbxs_host->set_error(
		    err, SBX_E_BACKEND,
		    "docker: create: starting container from '%.200s' failed: %s", image, msg);
	}
	if (rc == SBX_OK)
		rc = wait_ready(st, id, err);
	if (rc == SBX_OK && strlen(id) + 1 > id_cap)
		rc = sbxs_host->set_error(err, SBX_E_INVAL, "docker: create: id buffer too small");
	if (rc != SBX_OK)
		goto out;
	memcpy(id_buf, id, strlen(id) + 1);
out:
	if (rc != SBX_OK && id[0] && remove_container(st, id, NULL) != SBX_OK)
		sbxs_host->log(SBX_LOG_WARN, DOCKER_ALIAS,
			       "create: could not remove half-made container %s", id);
	json_decref(ans);
	json_decref(body);
	docker_resp_free(&resp);
	return rc;
}

int docker_destroy(void *state, const char *id, sbx_error *err)
{
	int rc = docker_id_check(id, "destroy", err);
	return rc != SBX_OK ? rc : remove_container(state, id, err);
}

static int simple_post(docker_state *st, const char *id, const char *op, const char *verb,
		       const char *benign, sbx_error *err)
{
	char path[160];
	docker_resp resp = {0};
	int rc = docker_id_check(id, op, err);
	if (rc != SBX_OK)
		return rc;
	snprintf(path, sizeof(path), "/containers/%s/%s", id, verb);
	rc = docker_request(&st->engine, "POST", path, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK && resp.status >= 400) {
		char msg[300];
		docker_resp_message(&resp, msg, sizeof(msg));
		/* Pausing a paused container (or resuming a running one) is already done; Docker
		 * says so with 409, Podman with 500. */
		if ((resp.status != 409 && resp.status != 500) || !strstr(msg, benign))
			rc = docker_http_error(&resp, op, id, err);
	}
	docker_resp_free(&resp);
	return rc;
}

int docker_pause(void *state, const char *id, sbx_error *err)
{
	return simple_post(state, id, "pause", "pause", "already paused", err);
}

int docker_resume(void *state, const char *id, sbx_error *err)
{
	return simple_post(state, id, "resume", "unpause", "not paused", err);
}

int docker_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	docker_state *st = state;
	char path[160];
	docker_resp resp = {0};
	json_t *j = NULL;
	int rc = docker_id_check(id, "status", err);
	if (rc != SBX_OK)
		return rc;
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	rc = docker_request(&st->engine, "GET", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		*out = SBX_STATE_GONE;
		goto out;
	}
	if (resp.status != 200) {
		rc = docker_http_error(&resp, "status", id, err);
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
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
	docker_resp_free(&resp);
	return rc;
}

int docker_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
			 sbx_error *err)
{
	docker_state *st = state;
	char label[1024], path[1400];
	docker_resp resp = {0};
	json_t *j = NULL, *filters = NULL;
	char *text = NULL, *esc = NULL;
	int rc = SBX_OK;
	int n = value ? snprintf(label, sizeof(label), "%s=%s", key, value)
		      : snprintf(label, sizeof(label), "%s", key);
	if (n < 0 || (size_t)n >= sizeof(label))
		return sbxs_host->set_error(err, SBX_E_INVAL, "docker: list: label is too long");
	filters = json_pack("{s:[s]}", "label", label);
	text = filters ? sbxs_json_dump(filters) : NULL;
	esc = text ? curl_easy_escape(NULL, text, 0) : NULL;
	if (!esc) {
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "docker: list: out of memory");
		goto out;
	}
	n = snprintf(path, sizeof(path), "/containers/json?all=true&filters=%s", esc);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		rc = sbxs_host->set_error(err, SBX_E_INVAL, "docker: list: label is too long");
		goto out;
	}
	rc = docker_request(&st->engine, "GET", path, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status != 200) {
		char msg[300];
		docker_resp_message(&resp, msg, sizeof(msg));
		rc = sbxs_host->set_error(
		    err, SBX_E_BACKEND, "docker: list: engine answered %ld: %s", resp.status, msg);
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	size_t i;
	json_t *c;
	json_array_foreach(j, i, c)
	{
		const char *cid = json_string_value(json_object_get(c, "Id"));
		if (cid && (rc = fn(ctx, cid)) != SBX_OK) {
			rc = sbxs_host->set_error(err, rc, "docker: list: stopped by the caller");
			goto out;
		}
	}
out:
	json_decref(j);
	json_decref(filters);
	sbxs_host->free(text);
	curl_free(esc);
	docker_resp_free(&resp);
	return rc;
}

/* The pod lifecycle: create (a POST of a pod this plugin names, so a retried create adopts
 * its own pod on 409, then a watch until Running and Ready), destroy, status, and the listing
 * by label that gc uses. Kubernetes has no pod pause, so pause and resume stay unsupported. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/json.h>
#include <sbx/support/random.h>

#include "http.h"
#include "lifecycle.h"
#include "podspec.h"
#include "watch.h"

static int64_t op_deadline(int64_t ms)
{
	return sbxs_now_us() + ms * 1000;
}

static int get_pod(k8s_state *st, const char *name, int64_t deadline, json_t **pod, long *http,
		   sbx_error *err)
{
	char path[512];
	sbxs_buf body = {0};
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", st->ns, name);
	int rc = k8s_request(st, "GET", path, NULL, deadline, http, &body, err);
	*pod = NULL;
	if (rc == SBX_OK && *http == 200)
		*pod = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
	else if (rc == SBX_OK)
		rc = k8s_api_error("get pod", *http, &body, err);
	sbxs_buf_free(&body);
	return rc;
}

static int delete_pod(k8s_state *st, const char *name, int grace, sbx_error *err)
{
	char path[512];
	sbxs_buf body = {0};
	long http = 0;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=%d", st->ns,
		 name, grace);
	int rc = k8s_request(st, "DELETE", path, NULL, op_deadline(60000), &http, &body, err);
	if (rc == SBX_OK && http != 200 && http != 202 && http != 404 && http != 409)
		rc = k8s_api_error("delete", http, &body, err);
	sbxs_buf_free(&body);
	return rc;
}

/* Waits for Running+Ready: a watch from the create's resourceVersion, re-established when the
 * server ends it; polling when the watch is refused. */
static int wait_ready(k8s_state *st, const char *name, const char *rv0, int64_t deadline,
		      sbx_error *err)
{
	k8s_watch w = {0};
	snprintf(w.rv, sizeof(w.rv), "%s", rv0);
	snprintf(w.last, sizeof(w.last), "phase Pending");
	int poll = 0;
	int64_t poll_us = 250000;
	while (sbxs_now_us() < deadline) {
		if (!poll) {
			char path[1024];
			int64_t left = (deadline - sbxs_now_us()) / 1000000 + 1;
			snprintf(
			    path, sizeof(path),
			    "/api/v1/namespaces/%s/pods?watch=1&fieldSelector=metadata.name%%3D%s"
			    "&resourceVersion=%s&timeoutSeconds=%lld&allowWatchBookmarks=true",
			    st->ns, name, w.rv, (long long)(left > 300 ? 300 : left));
			sbxs_buf eb = {0};
			long http = 0;
			sbx_error serr = {0};
			int rc =
			    k8s_stream(st, path, deadline, k8s_watch_line, &w, &http, &eb, &serr);
			sbxs_buf_free(&eb);
			if (w.verdict)
				break;
			if (rc == SBX_E_NOMEM)
				return sbxs_host->set_error(err, rc, "%s", serr.message);
			if (rc == SBX_OK && http == 200 && !w.expired)
				continue; /* the server ended the watch: resume from the last RV */
			if (rc == SBX_E_TIMEOUT)
				break;
			if (!w.expired) {
				sbxs_host->log(SBX_LOG_INFO, "k8s",
					       "create: watch unavailable (HTTP %ld), polling",
					       http);
				poll = 1;
			}
		}
		json_t *pod = NULL;
		long http = 0;
		int rc = get_pod(st, name, deadline, &pod, &http, err);
		if (rc != SBX_OK)
			return rc;
		const char *rv = json_string_value(
		    json_object_get(json_object_get(pod, "metadata"), "resourceVersion"));
		if (rv)
			snprintf(w.rv, sizeof(w.rv), "%s", rv);
		w.expired = 0;
		w.verdict = k8s_pod_verdict(pod, w.msg, sizeof(w.msg), w.last, sizeof(w.last));
		json_decref(pod);
		if (w.verdict)
			break;
		if (poll) {
			sbxs_sleep_us(poll_us);
			poll_us = poll_us * 2 > 2000000 ? 2000000 : poll_us * 2;
		}
	}
	if (w.verdict > 0)
		return SBX_OK;
	if (w.verdict < 0)
		return sbxs_host->set_error(err, SBX_E_BACKEND,
					    "k8s: create: pod %s failed to start: %s", name, w.msg);
	return sbxs_host->set_error(err, SBX_E_TIMEOUT,
				    "k8s: create: pod %s not Running+Ready after %llds (%s)", name,
				    (long long)st->set.create_timeout_seconds, w.last);
}

int k8s_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
	       sbx_error *err)
{
	k8s_state *st = state;
	int rc = SBX_OK;
	char hex[17], name[32], path[512];
	json_t *pod = NULL, *resp = NULL;
	char *text = NULL;
	sbxs_buf body = {0};
	if (id_cap < 21)
		return sbxs_host->set_error(err, SBX_E_INVAL, "k8s: create: id buffer too small");
	const char *image = spec->image && *spec->image ? spec->image : st->set.image;
	if (!image)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: create: no image (the task names none and the "
					    "`image` key is not set)");
	if (sbxs_random_hex(hex, sizeof(hex), 8) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_IO, "k8s: create: no randomness");
	snprintf(name, sizeof(name), "sbx-%s", hex);
	int64_t deadline = op_deadline(st->set.create_timeout_seconds * 1000);
	pod = k8s_pod_body(st, spec, name, hex);
	text = pod ? sbxs_json_dump(pod) : NULL;
	if (!text) {
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", st->ns);
	long http = 0;
	/* The name is ours, so retrying the POST after a 5xx or a lost answer is safe: a 409
	 * then means the earlier attempt landed, and the id label proves it. */
	rc = k8s_request(st, "POST", path, text, deadline, &http, &body, err);
	if (rc != SBX_OK)
		goto out;
	if (http == 409) {
		rc = get_pod(st, name, deadline, &resp, &http, err);
		if (rc != SBX_OK)
			goto out;
		const char *owner = json_string_value(json_object_get(
		    json_object_get(json_object_get(resp, "metadata"), "labels"), K8S_LABEL_ID));
		if (!owner || strcmp(owner, hex) != 0) {
			rc = sbxs_host->set_error(
			    err, SBX_E_EXISTS, "k8s: create: pod %s exists and is not ours", name);
			goto out;
		}
	} else if (http == 200 || http == 201 || http == 202) {
		resp = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
	} else {
		rc = k8s_api_error("create", http, &body, err);
		goto out;
	}
	const char *rv = json_string_value(
	    json_object_get(json_object_get(resp, "metadata"), "resourceVersion"));
	rc = wait_ready(st, name, rv ? rv : "0", deadline, err);
	if (rc != SBX_OK) {
		sbx_error derr = {0};
		delete_pod(st, name, 0, &derr);
		goto out;
	}
	snprintf(id_buf, id_cap, "%s", name);
out:
	json_decref(pod);
	json_decref(resp);
	sbxs_host->free(text);
	sbxs_buf_free(&body);
	return rc;
}

int k8s_destroy(void *state, const char *id, sbx_error *err)
{
	int rc = k8s_check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	rc = delete_pod(state, id, 1, err);
	if (rc != SBX_OK)
		return rc;
	/* Wait (briefly) until the object is gone, so the id stops answering execs and the
	 * quota is back when destroy returns. The entrypoint exits at once on TERM. */
	int64_t deadline = op_deadline(15000);
	int64_t pause_us = 50000;
	while (sbxs_now_us() < deadline) {
		json_t *pod = NULL;
		long http = 0;
		sbx_error gerr = {0};
		int grc = get_pod(state, id, deadline, &pod, &http, &gerr);
		json_decref(pod);
		if (grc != SBX_OK)
			break; /* 404 (gone) or the apiserver went away: the DELETE was accepted */
		sbxs_sleep_us(pause_us);
		pause_us = pause_us * 2 > 1000000 ? 1000000 : pause_us * 2;
	}
	return SBX_OK;
}

int k8s_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	int rc = k8s_check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	json_t *pod = NULL;
	long http = 0;
	sbx_error gerr = {0};
	rc = get_pod(state, id, op_deadline(30000), &pod, &http, &gerr);
	if (rc == SBX_E_NOT_FOUND) {
		*out = SBX_STATE_GONE;
		return SBX_OK;
	}
	if (rc != SBX_OK)
		return sbxs_host->set_error(err, rc, "%s", gerr.message);
	const char *phase =
	    json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
	if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp"))
		*out = SBX_STATE_GONE;
	else if (phase && strcmp(phase, "Running") == 0)
		*out = SBX_STATE_RUNNING;
	else if (phase && strcmp(phase, "Pending") == 0)
		*out = SBX_STATE_CREATING;
	else
		*out = SBX_STATE_GONE;
	json_decref(pod);
	return SBX_OK;
}

int k8s_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
		      sbx_error *err)
{
	k8s_state *st = state;
	char k[128], v[128], sel[300], path[2048];
	k8s_label_clean(key, k, sizeof(k), 1);
	k8s_label_clean(value ? value : "", v, sizeof(v), 0);
	snprintf(sel, sizeof(sel), "%s=%s,%s=sbx", k, v, K8S_LABEL_MANAGED);
	char *esc = curl_easy_escape(NULL, sel, 0);
	if (!esc)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	char cont[1024] = "";
	int rc = SBX_OK;
	do {
		char *cesc = curl_easy_escape(NULL, cont, 0);
		snprintf(path, sizeof(path),
			 "/api/v1/namespaces/%s/pods?labelSelector=%s&limit=500%s%s", st->ns, esc,
			 cont[0] ? "&continue=" : "", cesc ? cesc : "");
		curl_free(cesc);
		sbxs_buf body = {0};
		long http = 0;
		rc = k8s_request(st, "GET", path, NULL, op_deadline(60000), &http, &body, err);
		if (rc == SBX_OK && http != 200)
			rc = k8s_api_error("list", http, &body, err);
		json_t *list = rc == SBX_OK ? json_loadb(body.data, body.len, 0, NULL) : NULL;
		sbxs_buf_free(&body);
		if (rc != SBX_OK)
			break;
		size_t i;
		json_t *item;
		json_array_foreach(json_object_get(list, "items"), i, item)
		{
			const char *n = json_string_value(
			    json_object_get(json_object_get(item, "metadata"), "name"));
			if (n && k8s_id_ok(n) && (rc = fn(ctx, n)) != SBX_OK)
				break;
		}
		const char *c = json_string_value(
		    json_object_get(json_object_get(list, "metadata"), "continue"));
		snprintf(cont, sizeof(cont), "%s", c ? c : "");
		json_decref(list);
	} while (rc == SBX_OK && cont[0]);
	curl_free(esc);
	return rc;
}

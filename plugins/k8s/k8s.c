/* The `k8s` sandbox plugin: one Pod per sandbox through the Kubernetes API, commands and files
 * over pods/exec (WebSocket v5.channel.k8s.io, falling back to v4). The backend id is the pod
 * name, which the plugin chooses, so a retried create is idempotent and any process holding
 * the same config can reach the sandbox. */
#include <curl/curl.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "k8s.h"

const sbx_host_api *k8s__host;

#define LABEL_MANAGED "app.kubernetes.io/managed-by"
#define LABEL_ID      "sbx.dev/sandbox-id"

static const sbx_config_key k8s_keys[] = {
    {.name = "kubeconfig",
     .type = SBX_KEY_STRING,
     .help = "kubeconfig file (default: the merged $KUBECONFIG list, then ~/.kube/config)"},
    {.name = "context", .type = SBX_KEY_STRING, .help = "kubeconfig context (default current)"},
    {.name = "in_cluster",
     .type = SBX_KEY_BOOL,
     .help = "use the pod's service account instead of a kubeconfig"},
    {.name = "namespace",
     .type = SBX_KEY_STRING,
     .help = "namespace of the sandbox pods (default: the context's, else default)"},
    {.name = "image", .type = SBX_KEY_STRING, .help = "image when the task names none"},
    {.name = "cpu", .type = SBX_KEY_STRING, .help = "cpu request and limit, e.g. 500m"},
    {.name = "memory", .type = SBX_KEY_STRING, .help = "memory request and limit, e.g. 1Gi"},
    {.name = "node_selector", .type = SBX_KEY_MAP, .help = "pod nodeSelector"},
    {.name = "tolerations", .type = SBX_KEY_LIST, .help = "pod tolerations"},
    {.name = "service_account", .type = SBX_KEY_STRING, .help = "pod serviceAccountName"},
    {.name = "runtime_class", .type = SBX_KEY_STRING, .help = "pod runtimeClassName (gVisor...)"},
    {.name = "work_dir", .type = SBX_KEY_STRING, .help = "container workingDir"},
    {.name = "active_deadline_seconds",
     .type = SBX_KEY_INT,
     .help = "pod activeDeadlineSeconds, a leak backstop (default 86400)"},
    {.name = "create_timeout_seconds",
     .type = SBX_KEY_INT,
     .help = "how long create waits for Running+Ready (default 600)"},
    {.name = "qps", .type = SBX_KEY_FLOAT, .help = "client-side request rate (default 20)"},
    {.name = "burst", .type = SBX_KEY_INT, .help = "client-side burst (default 40)"},
    {.name = "max_retries", .type = SBX_KEY_INT, .help = "retries on 429/5xx (default 10)"},
    {.name = "exec_protocol",
     .type = SBX_KEY_STRING,
     .help = "auto (v5 then v4) or v4 (never offer v5)"},
};

/* ---- config ---- */

static int opt_str(const sbx_config *cfg, const char *key, char **out, sbx_error *err)
{
	const char *v = NULL;
	int rc = k8s__host->config_string(cfg, key, &v, err);
	if (rc == SBX_E_NOT_FOUND)
		return SBX_OK;
	if (rc != SBX_OK)
		return rc;
	if (!(*out = strdup(v)))
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	return SBX_OK;
}

static int opt_json(const sbx_config *cfg, const char *key, char **out, sbx_error *err)
{
	const char *v = NULL;
	int rc = k8s__host->config_json(cfg, key, &v, err);
	if (rc == SBX_E_NOT_FOUND)
		return SBX_OK;
	if (rc != SBX_OK)
		return rc;
	if (!(*out = strdup(v)))
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	return SBX_OK;
}

static int opt_int(const sbx_config *cfg, const char *key, int64_t *out, int64_t lo, int64_t hi,
		   sbx_error *err)
{
	int64_t v = 0;
	int rc = k8s__host->config_int(cfg, key, &v, err);
	if (rc == SBX_E_NOT_FOUND)
		return SBX_OK;
	if (rc != SBX_OK)
		return rc;
	if (v < lo || v > hi)
		return k8s__host->set_error(err, SBX_E_CONFIG,
					    "k8s: %s is %lld; it must be between %lld and %lld",
					    key, (long long)v, (long long)lo, (long long)hi);
	*out = v;
	return SBX_OK;
}

static void k8s_fini(void *state)
{
	k8s_state *st = state;
	if (!st)
		return;
	k8s__conn_free(&st->conn);
	curl_global_cleanup();
	free(st->ns);
	free(st->image);
	free(st->cpu);
	free(st->memory);
	free(st->node_selector_json);
	free(st->tolerations_json);
	free(st->service_account);
	free(st->runtime_class);
	free(st->work_dir);
	pthread_mutex_destroy(&st->bucket_lock);
	free(st);
}

static int k8s_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	int rc;
	char *kubeconfig = NULL, *context = NULL, *proto = NULL, *ctx_ns = NULL;
	k8s_state *st = calloc(1, sizeof(*st));
	if (!st)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	/* init never runs concurrently with anything, so libcurl's global set-up happens here
	 * rather than lazily (and racily) in the first of many threads; fini undoes it. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(st);
		return k8s__host->set_error(err, SBX_E_BACKEND,
					    "k8s: init: libcurl failed to start");
	}
	pthread_mutex_init(&st->bucket_lock, NULL);
	st->active_deadline_seconds = 86400;
	st->create_timeout_ms = 600000;
	st->qps = 20;
	st->burst = 40;
	st->max_retries = 10;
	int64_t cts = 600, burst = 40, retries = 10;
	double qps = 20;
	int in_cluster = 0;
	if ((rc = opt_str(cfg, "kubeconfig", &kubeconfig, err)) ||
	    (rc = opt_str(cfg, "context", &context, err)) ||
	    (rc = opt_str(cfg, "namespace", &st->ns, err)) ||
	    (rc = opt_str(cfg, "image", &st->image, err)) ||
	    (rc = opt_str(cfg, "cpu", &st->cpu, err)) ||
	    (rc = opt_str(cfg, "memory", &st->memory, err)) ||
	    (rc = opt_json(cfg, "node_selector", &st->node_selector_json, err)) ||
	    (rc = opt_json(cfg, "tolerations", &st->tolerations_json, err)) ||
	    (rc = opt_str(cfg, "service_account", &st->service_account, err)) ||
	    (rc = opt_str(cfg, "runtime_class", &st->runtime_class, err)) ||
	    (rc = opt_str(cfg, "work_dir", &st->work_dir, err)) ||
	    (rc = opt_str(cfg, "exec_protocol", &proto, err)) ||
	    (rc = opt_int(cfg, "active_deadline_seconds", &st->active_deadline_seconds, 0,
			  (int64_t)1 << 40, err)) ||
	    (rc = opt_int(cfg, "create_timeout_seconds", &cts, 1, 86400, err)) ||
	    (rc = opt_int(cfg, "burst", &burst, 1, 100000, err)) ||
	    (rc = opt_int(cfg, "max_retries", &retries, 0, 100, err)))
		goto out;
	rc = k8s__host->config_float(cfg, "qps", &qps, err);
	if (rc == SBX_OK && !(qps >= 0 && qps <= 100000)) {
		rc = k8s__host->set_error(
		    err, SBX_E_CONFIG, "k8s: qps is %g; it must be between 0 (no limit) and 100000",
		    qps);
		goto out;
	}
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		goto out;
	rc = k8s__host->config_bool(cfg, "in_cluster", &in_cluster, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		goto out;
	st->create_timeout_ms = cts * 1000;
	st->burst = (double)burst;
	st->qps = qps;
	st->tokens = st->burst;
	st->bucket_last_us = k8s__now_us();
	st->max_retries = (int)retries;
	if (proto && strcmp(proto, "v4") == 0) {
		st->force_v4 = 1;
	} else if (proto && strcmp(proto, "auto") != 0) {
		rc = k8s__host->set_error(
		    err, SBX_E_CONFIG, "k8s: exec_protocol is '%s'; it must be auto or v4", proto);
		goto out;
	}
	if (in_cluster) {
		rc = k8s__load_incluster(&st->conn, &ctx_ns, err);
	} else {
		/* As kubectl: the key (--kubeconfig), else the merged $KUBECONFIG list, else
		 * ~/.kube/config. */
		char path[4096];
		const char *env = getenv("KUBECONFIG");
		const char *home = getenv("HOME");
		const char *paths = path;
		int list = 0;
		if (kubeconfig && *kubeconfig) {
			paths = kubeconfig;
		} else if (env && *env) {
			paths = env;
			list = 1;
		} else if (snprintf(path, sizeof(path), "%s/.kube/config", home ? home : "") >=
			   (int)sizeof(path)) {
			rc = k8s__host->set_error(err, SBX_E_CONFIG,
						  "k8s: kubeconfig path too long");
			goto out;
		}
		rc = k8s__load_kubeconfig(&st->conn, paths, list, context, &ctx_ns, err);
	}
	if (rc != SBX_OK)
		goto out;
	if (!st->ns) {
		st->ns = ctx_ns ? ctx_ns : strdup("default");
		ctx_ns = NULL;
		if (!st->ns) {
			rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
			goto out;
		}
	}
	*state = st;
	st = NULL;
out:
	free(kubeconfig);
	free(context);
	free(proto);
	free(ctx_ns);
	k8s_fini(st);
	return rc;
}

/* ---- helpers ---- */

static int id_ok(const char *id)
{
	if (strncmp(id, "sbx-", 4) != 0 || strlen(id) != 20)
		return 0;
	for (const char *p = id + 4; *p; p++)
		if (!strchr("0123456789abcdef", *p))
			return 0;
	return 1;
}

static int check_id(const char *id, sbx_error *err)
{
	if (!id_ok(id))
		return k8s__host->set_error(err, SBX_E_BAD_ID,
					    "k8s: '%.64s' is not a k8s sandbox id (sbx- and 16 hex "
					    "digits)",
					    id);
	return SBX_OK;
}

static int is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Sanitises s into label syntax: at most 63 characters of [A-Za-z0-9._-], starting and ending
 * alphanumeric. `slash` keeps one '/' (a key prefix). Empty stays empty. */
static void label_clean(const char *s, char *out, size_t cap, int slash)
{
	size_t n = 0;
	int seen_slash = 0;
	for (; *s && n + 1 < cap && n < 63; s++) {
		char c = *s;
		if (c == '/' && slash && !seen_slash) {
			seen_slash = 1;
		} else if (!is_alnum(c) && c != '.' && c != '-' && c != '_') {
			c = '-';
		}
		out[n++] = c;
	}
	out[n] = '\0';
	size_t start = 0;
	while (out[start] && !is_alnum(out[start]))
		start++;
	memmove(out, out + start, strlen(out + start) + 1);
	n = strlen(out);
	while (n && !is_alnum(out[n - 1]))
		out[--n] = '\0';
}

static int64_t op_deadline(int64_t ms)
{
	return k8s__now_us() + ms * 1000;
}

static int api_error(const char *what, long http, const k8s_buf *body, sbx_error *err)
{
	char tmp[300];
	int code = http == 404   ? SBX_E_NOT_FOUND
		   : http == 401 ? SBX_E_CONFIG
		   : http == 403 ? SBX_E_CONFIG
		   : http == 429 ? SBX_E_RATE_LIMITED
				 : SBX_E_BACKEND;
	return k8s__host->set_error(err, code, "k8s: %s: HTTP %ld: %s", what, http,
				    k8s__status_message(body, tmp, sizeof(tmp)));
}

/* ---- create ---- */

static json_t *pod_body(k8s_state *st, const sbx_create_spec *spec, const char *name,
			const char *hex)
{
	char k[128], v[128];
	json_t *labels = json_object();
	json_t *env = json_array();
	json_t *ctr = json_object();
	json_t *podspec = json_object();
	json_t *pod = json_object();
	if (!labels || !env || !ctr || !podspec || !pod)
		goto fail;
	for (uint32_t i = 0; i < spec->n_labels; i++) {
		label_clean(spec->labels[i].key, k, sizeof(k), 1);
		label_clean(spec->labels[i].value ? spec->labels[i].value : "", v, sizeof(v), 0);
		if (k[0])
			json_object_set_new(labels, k, json_string(v));
	}
	if (spec->data_source) {
		label_clean(spec->data_source, v, sizeof(v), 0);
		json_object_set_new(labels, "sbx.dev/data-source", json_string(v));
	}
	json_object_set_new(labels, LABEL_MANAGED, json_string("sbx"));
	json_object_set_new(labels, LABEL_ID, json_string(hex));
	for (uint32_t i = 0; i < spec->n_env; i++)
		json_array_append_new(env, json_pack("{s:s,s:s}", "name", spec->env[i].key, "value",
						     spec->env[i].value ? spec->env[i].value : ""));
	const char *image = spec->image && *spec->image ? spec->image : st->image;
	json_object_set_new(ctr, "name", json_string(K8S_CONTAINER));
	json_object_set_new(ctr, "image", json_string(image));
	json_object_set_new(ctr, "imagePullPolicy", json_string("IfNotPresent"));
	/* PID 1 that exits at once on TERM, so deletion does not wait out the grace period. */
	json_object_set_new(ctr, "command",
			    json_pack("[s,s,s]", "/bin/sh", "-c",
				      "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; "
				      "done"));
	if (json_array_size(env))
		json_object_set(ctr, "env", env);
	if (st->work_dir)
		json_object_set_new(ctr, "workingDir", json_string(st->work_dir));
	if (st->cpu || st->memory) {
		json_t *r = json_object();
		if (st->cpu)
			json_object_set_new(r, "cpu", json_string(st->cpu));
		if (st->memory)
			json_object_set_new(r, "memory", json_string(st->memory));
		json_object_set_new(ctr, "resources",
				    json_pack("{s:O,s:O}", "requests", r, "limits", r));
		json_decref(r);
	}
	json_object_set_new(podspec, "restartPolicy", json_string("Never"));
	json_object_set_new(podspec, "terminationGracePeriodSeconds", json_integer(2));
	json_object_set_new(podspec, "automountServiceAccountToken", json_false());
	json_object_set_new(podspec, "enableServiceLinks", json_false());
	int64_t ads = st->active_deadline_seconds;
	if (spec->ttl_seconds > 0 && (ads == 0 || spec->ttl_seconds < ads))
		ads = spec->ttl_seconds;
	if (ads > 0)
		json_object_set_new(podspec, "activeDeadlineSeconds", json_integer(ads));
	if (st->service_account)
		json_object_set_new(podspec, "serviceAccountName",
				    json_string(st->service_account));
	if (st->runtime_class)
		json_object_set_new(podspec, "runtimeClassName", json_string(st->runtime_class));
	if (st->node_selector_json)
		json_object_set_new(podspec, "nodeSelector",
				    json_loads(st->node_selector_json, 0, NULL));
	if (st->tolerations_json)
		json_object_set_new(podspec, "tolerations",
				    json_loads(st->tolerations_json, 0, NULL));
	json_object_set_new(podspec, "containers", json_pack("[O]", ctr));
	json_object_set_new(pod, "apiVersion", json_string("v1"));
	json_object_set_new(pod, "kind", json_string("Pod"));
	json_object_set_new(pod, "metadata",
			    json_pack("{s:s,s:O}", "name", name, "labels", labels));
	json_object_set_new(pod, "spec", podspec);
	json_decref(labels);
	json_decref(env);
	json_decref(ctr);
	return pod;
fail:
	json_decref(labels);
	json_decref(env);
	json_decref(ctr);
	json_decref(podspec);
	json_decref(pod);
	return NULL;
}

/* 1 = Running and Ready, 0 = keep waiting, -1 = failed (why in msg). `last` describes the
 * state for a timeout message. */
static int pod_verdict(json_t *pod, char *msg, size_t cap, char *last, size_t lcap)
{
	json_t *status = json_object_get(pod, "status");
	const char *phase = json_string_value(json_object_get(status, "phase"));
	if (!phase)
		phase = "Pending";
	snprintf(last, lcap, "phase %s", phase);
	if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) {
		snprintf(msg, cap, "the pod is being deleted");
		return -1;
	}
	size_t i;
	json_t *c;
	int running = 0;
	json_array_foreach(json_object_get(status, "containerStatuses"), i, c)
	{
		json_t *state = json_object_get(c, "state");
		json_t *w = json_object_get(state, "waiting");
		json_t *t = json_object_get(state, "terminated");
		const char *reason = json_string_value(json_object_get(w ? w : t, "reason"));
		const char *m = json_string_value(json_object_get(w ? w : t, "message"));
		if (w && reason) {
			snprintf(last, lcap, "phase %s, container waiting: %s", phase, reason);
			static const char *const fatal[] = {"ErrImagePull",
							    "ImagePullBackOff",
							    "InvalidImageName",
							    "ErrImageNeverPull",
							    "CreateContainerConfigError",
							    "CreateContainerError",
							    "RunContainerError"};
			for (size_t k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++)
				if (strcmp(reason, fatal[k]) == 0) {
					snprintf(msg, cap, "%s: %s", reason, m ? m : "");
					return -1;
				}
		}
		if (t) {
			snprintf(msg, cap, "the container exited (%s, exit code %lld)%s%s",
				 reason ? reason : "terminated",
				 (long long)json_integer_value(json_object_get(t, "exitCode")),
				 m ? ": " : "", m ? m : "");
			return -1;
		}
		if (json_object_get(state, "running"))
			running = 1;
	}
	if (strcmp(phase, "Failed") == 0 || strcmp(phase, "Succeeded") == 0) {
		const char *r = json_string_value(json_object_get(status, "reason"));
		const char *m = json_string_value(json_object_get(status, "message"));
		snprintf(msg, cap, "phase %s%s%s%s%s", phase, r ? " (" : "", r ? r : "",
			 r ? ")" : "", m ? m : "");
		return -1;
	}
	int ready = 0;
	json_array_foreach(json_object_get(status, "conditions"), i, c)
	{
		const char *type = json_string_value(json_object_get(c, "type"));
		const char *val = json_string_value(json_object_get(c, "status"));
		const char *reason = json_string_value(json_object_get(c, "reason"));
		const char *m = json_string_value(json_object_get(c, "message"));
		if (!type || !val)
			continue;
		if (strcmp(type, "PodScheduled") == 0 && strcmp(val, "False") == 0 && reason &&
		    strcmp(reason, "Unschedulable") == 0) {
			snprintf(msg, cap, "Unschedulable: %s", m ? m : "");
			return -1;
		}
		if (strcmp(type, "Ready") == 0) {
			ready = strcmp(val, "True") == 0;
			if (!ready)
				snprintf(last, lcap, "phase %s, Ready=%s%s%s", phase, val,
					 reason ? " " : "", reason ? reason : "");
		}
	}
	return strcmp(phase, "Running") == 0 && ready && running;
}

typedef struct watch_ctx {
	char *msg;
	size_t cap;
	char last[256];
	char rv[64];
	int verdict;
	int expired;
} watch_ctx;

static int on_watch_line(void *ud, const char *line, size_t len)
{
	watch_ctx *w = ud;
	json_t *ev = json_loadb(line, len, 0, NULL);
	if (!ev)
		return 0;
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	const char *rv =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
	if (rv && type && strcmp(type, "ERROR") != 0)
		snprintf(w->rv, sizeof(w->rv), "%s", rv);
	int stop = 0;
	if (type && strcmp(type, "ERROR") == 0) {
		w->expired = 1;
		stop = 1;
	} else if (type && strcmp(type, "DELETED") == 0) {
		snprintf(w->msg, w->cap, "the pod was deleted while starting");
		w->verdict = -1;
		stop = 1;
	} else if (type && (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)) {
		w->verdict = pod_verdict(obj, w->msg, w->cap, w->last, sizeof(w->last));
		stop = w->verdict != 0;
	}
	json_decref(ev);
	return stop;
}

static int get_pod(k8s_state *st, const char *name, int64_t deadline, json_t **pod, long *http,
		   sbx_error *err)
{
	char path[512];
	k8s_buf body = {0};
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", st->ns, name);
	int rc = k8s__request(st, "GET", path, NULL, deadline, http, &body, err);
	*pod = NULL;
	if (rc == SBX_OK && *http == 200)
		*pod = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
	else if (rc == SBX_OK)
		rc = api_error("get pod", *http, &body, err);
	k8s__buf_free(&body);
	return rc;
}

static int delete_pod(k8s_state *st, const char *name, int grace, sbx_error *err)
{
	char path[512];
	k8s_buf body = {0};
	long http = 0;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=%d", st->ns,
		 name, grace);
	int rc = k8s__request(st, "DELETE", path, NULL, op_deadline(60000), &http, &body, err);
	if (rc == SBX_OK && http != 200 && http != 202 && http != 404 && http != 409)
		rc = api_error("delete", http, &body, err);
	k8s__buf_free(&body);
	return rc;
}

/* Waits for Running+Ready: a watch from the create's resourceVersion, re-established when the
 * server ends it; polling when the watch is refused. */
static int wait_ready(k8s_state *st, const char *name, const char *rv0, int64_t deadline,
		      sbx_error *err)
{
	char msg[400] = "";
	watch_ctx w = {.msg = msg, .cap = sizeof(msg)};
	snprintf(w.rv, sizeof(w.rv), "%s", rv0);
	snprintf(w.last, sizeof(w.last), "phase Pending");
	int poll = 0;
	int64_t poll_us = 250000;
	while (k8s__now_us() < deadline) {
		if (!poll) {
			char path[1024];
			int64_t left = (deadline - k8s__now_us()) / 1000000 + 1;
			snprintf(
			    path, sizeof(path),
			    "/api/v1/namespaces/%s/pods?watch=1&fieldSelector=metadata.name%%3D%s"
			    "&resourceVersion=%s&timeoutSeconds=%lld&allowWatchBookmarks=true",
			    st->ns, name, w.rv, (long long)(left > 300 ? 300 : left));
			k8s_buf eb = {0};
			long http = 0;
			sbx_error serr = {0};
			int rc =
			    k8s__stream(st, path, deadline, on_watch_line, &w, &http, &eb, &serr);
			k8s__buf_free(&eb);
			if (w.verdict)
				break;
			if (rc == SBX_E_NOMEM)
				return k8s__host->set_error(err, rc, "%s", serr.message);
			if (rc == SBX_OK && http == 200 && !w.expired)
				continue; /* the server ended the watch: resume from the last RV */
			if (rc == SBX_E_TIMEOUT)
				break;
			if (!w.expired) {
				k8s__host->log(SBX_LOG_INFO, "k8s",
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
		w.verdict = pod_verdict(pod, msg, sizeof(msg), w.last, sizeof(w.last));
		json_decref(pod);
		if (w.verdict)
			break;
		if (poll) {
			k8s__sleep_us(poll_us);
			poll_us = poll_us * 2 > 2000000 ? 2000000 : poll_us * 2;
		}
	}
	if (w.verdict > 0)
		return SBX_OK;
	if (w.verdict < 0)
		return k8s__host->set_error(err, SBX_E_BACKEND,
					    "k8s: create: pod %s failed to start: %s", name, msg);
	return k8s__host->set_error(err, SBX_E_TIMEOUT,
				    "k8s: create: pod %s not Running+Ready after %llds (%s)", name,
				    (long long)(st->create_timeout_ms / 1000), w.last);
}

static int k8s_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		      sbx_error *err)
{
	k8s_state *st = state;
	int rc = SBX_OK;
	unsigned char raw[8];
	char hex[17], name[32], path[512];
	json_t *pod = NULL, *resp = NULL;
	char *text = NULL;
	k8s_buf body = {0};
	if (id_cap < 21)
		return k8s__host->set_error(err, SBX_E_INVAL, "k8s: create: id buffer too small");
	const char *image = spec->image && *spec->image ? spec->image : st->image;
	if (!image)
		return k8s__host->set_error(err, SBX_E_CONFIG,
					    "k8s: create: no image (the task names none and the "
					    "`image` key is not set)");
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return k8s__host->set_error(err, SBX_E_IO, "k8s: create: no randomness");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	snprintf(name, sizeof(name), "sbx-%s", hex);
	int64_t deadline = op_deadline(st->create_timeout_ms);
	pod = pod_body(st, spec, name, hex);
	text = pod ? json_dumps(pod, JSON_COMPACT) : NULL;
	if (!text) {
		rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", st->ns);
	long http = 0;
	/* The name is ours, so retrying the POST after a 5xx or a lost answer is safe: a 409
	 * then means the earlier attempt landed, and the id label proves it. */
	rc = k8s__request(st, "POST", path, text, deadline, &http, &body, err);
	if (rc != SBX_OK)
		goto out;
	if (http == 409) {
		rc = get_pod(st, name, deadline, &resp, &http, err);
		if (rc != SBX_OK)
			goto out;
		const char *owner = json_string_value(json_object_get(
		    json_object_get(json_object_get(resp, "metadata"), "labels"), LABEL_ID));
		if (!owner || strcmp(owner, hex) != 0) {
			rc = k8s__host->set_error(
			    err, SBX_E_EXISTS, "k8s: create: pod %s exists and is not ours", name);
			goto out;
		}
	} else if (http == 200 || http == 201 || http == 202) {
		resp = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
	} else {
		rc = api_error("create", http, &body, err);
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
	free(text);
	k8s__buf_free(&body);
	return rc;
}

static int k8s_destroy(void *state, const char *id, sbx_error *err)
{
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	rc = delete_pod(state, id, 1, err);
	if (rc != SBX_OK)
		return rc;
	/* Wait (briefly) until the object is gone, so the id stops answering execs and the
	 * quota is back when destroy returns. The entrypoint exits at once on TERM. */
	int64_t deadline = op_deadline(15000);
	int64_t pause_us = 50000;
	while (k8s__now_us() < deadline) {
		json_t *pod = NULL;
		long http = 0;
		sbx_error gerr = {0};
		int grc = get_pod(state, id, deadline, &pod, &http, &gerr);
		json_decref(pod);
		if (grc != SBX_OK)
			break; /* 404 (gone) or the apiserver went away: the DELETE was accepted */
		k8s__sleep_us(pause_us);
		pause_us = pause_us * 2 > 1000000 ? 1000000 : pause_us * 2;
	}
	return SBX_OK;
}

static int k8s_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	int rc = check_id(id, err);
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
		return k8s__host->set_error(err, rc, "%s", gerr.message);
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

static int k8s_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn,
			     void *ctx, sbx_error *err)
{
	k8s_state *st = state;
	char k[128], v[128], sel[300], path[2048];
	label_clean(key, k, sizeof(k), 1);
	label_clean(value ? value : "", v, sizeof(v), 0);
	snprintf(sel, sizeof(sel), "%s=%s,%s=sbx", k, v, LABEL_MANAGED);
	char *esc = curl_easy_escape(NULL, sel, 0);
	if (!esc)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	char cont[1024] = "";
	int rc = SBX_OK;
	do {
		char *cesc = curl_easy_escape(NULL, cont, 0);
		snprintf(path, sizeof(path),
			 "/api/v1/namespaces/%s/pods?labelSelector=%s&limit=500%s%s", st->ns, esc,
			 cont[0] ? "&continue=" : "", cesc ? cesc : "");
		curl_free(cesc);
		k8s_buf body = {0};
		long http = 0;
		rc = k8s__request(st, "GET", path, NULL, op_deadline(60000), &http, &body, err);
		if (rc == SBX_OK && http != 200)
			rc = api_error("list", http, &body, err);
		json_t *list = rc == SBX_OK ? json_loadb(body.data, body.len, 0, NULL) : NULL;
		k8s__buf_free(&body);
		if (rc != SBX_OK)
			break;
		size_t i;
		json_t *item;
		json_array_foreach(json_object_get(list, "items"), i, item)
		{
			const char *n = json_string_value(
			    json_object_get(json_object_get(item, "metadata"), "name"));
			if (n && id_ok(n) && (rc = fn(ctx, n)) != SBX_OK)
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

/* ---- exec ---- */

/* Runs the command as its own session under /bin/sh and tags it with SBX_EXEC_TOKEN in its
 * environment, which every descendant inherits, setsid and double-fork escapees included. The
 * session leader's pid goes to /tmp/.sbx-exec-<token>. When the command ends, the wrapper
 * kills what is left of the tree (a background child holding the output open), found by its
 * process group and by the token in /proc/<pid>/environ. On timeout, a second exec (`killer`)
 * does the same from outside. Arguments: token, number of env assignments, cwd,
 * assignments..., mode (shell|argv), stdin byte count (or "none"), command... */
static const char wrapper[] =
    "t=$1; n=$2; d=$3; shift 3; f=/tmp/.sbx-exec-$t\n"
    "while [ \"$n\" -gt 0 ]; do export \"$1\" || exit 126; shift; n=$((n-1)); done\n"
    "if [ -n \"$d\" ]; then cd -- \"$d\" 2>/dev/null || { echo \"sbx-exec: no such directory: "
    "$d\" >&2; exit 126; }; fi\n"
    "m=$1; i=$2; shift 2\n"
    "if [ \"$m\" = shell ]; then if command -v bash >/dev/null 2>&1; then set -- bash -c \"$1\";"
    " else set -- sh -c \"$1\"; fi; fi\n"
    "S=; command -v setsid >/dev/null 2>&1 && S=setsid\n"
    "if [ \"$i\" = none ]; then SBX_EXEC_TOKEN=$t $S \"$@\" </dev/null &\n"
    "else exec 3<&0; head -c \"$i\" <&3 | SBX_EXEC_TOKEN=$t $S \"$@\" 3<&- & fi\n"
    "p=$!; echo \"$p\" > \"$f\"\n"
    "wait \"$p\" 2>/dev/null; r=$?\n"
    "kill -9 \"-$p\" 2>/dev/null\n"
    "for q in $(grep -l -a \"SBX_EXEC_TOKEN=$t\" /proc/[0-9]*/environ 2>/dev/null); do "
    "q=${q#/proc/}; kill -9 \"${q%/environ}\" 2>/dev/null; done\n"
    "rm -f -- \"$f\"\n"
    "exit $r\n";

static const char killer[] =
    "t=$1; f=/tmp/.sbx-exec-$t; p=$(cat -- \"$f\" 2>/dev/null)\n"
    "[ -n \"$p\" ] && kill -9 \"-$p\" \"$p\" 2>/dev/null\n"
    "for k in 1 2; do for q in $(grep -l -a \"SBX_EXEC_TOKEN=$t\" /proc/[0-9]*/environ "
    "2>/dev/null); do q=${q#/proc/}; kill -9 \"${q%/environ}\" 2>/dev/null; done; done\n"
    "rm -f -- \"$f\"; exit 0\n";

/* Passes output on to the host and keeps the tail of stderr, where the wrapper reports a
 * missing cwd. */
typedef struct exec_tap {
	sbx_output_fn fn;
	void *ctx;
	char tail[256];
	size_t tail_len;
} exec_tap;

static int on_tap(void *ctx, uint32_t stream, const void *data, size_t len)
{
	exec_tap *t = ctx;
	if (stream == SBX_STREAM_STDERR) {
		const char *d = data;
		size_t keep = len < sizeof(t->tail) - 1 ? len : sizeof(t->tail) - 1;
		if (t->tail_len + keep > sizeof(t->tail) - 1) {
			size_t drop = t->tail_len + keep - (sizeof(t->tail) - 1);
			memmove(t->tail, t->tail + drop, t->tail_len - drop);
			t->tail_len -= drop;
		}
		memcpy(t->tail + t->tail_len, d + len - keep, keep);
		t->tail_len += keep;
		t->tail[t->tail_len] = '\0';
	}
	return t->fn ? t->fn(t->ctx, stream, data, len) : SBX_OK;
}

static int k8s_execute(void *state, const char *id, const sbx_exec_request *req,
		       sbx_exec_outcome *out, sbx_error *err)
{
	k8s_state *st = state;
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	size_t nargv = 0;
	if (req->argv)
		while (req->argv[nargv])
			nargv++;
	size_t total = 12 + req->n_env + (req->shell ? 1 : nargv);
	const char **argv = calloc(total, sizeof(*argv));
	char **owned = calloc(req->n_env + 1, sizeof(*owned));
	if (!argv || !owned) {
		free(argv);
		free(owned);
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	}
	unsigned char raw[8];
	char token[32], nenv[16], nin[32];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		memset(raw, 0x5a, sizeof(raw));
	snprintf(token, sizeof(token), "%02x%02x%02x%02x%02x%02x%02x%02x", raw[0], raw[1], raw[2],
		 raw[3], raw[4], raw[5], raw[6], raw[7]);
	snprintf(nenv, sizeof(nenv), "%u", req->n_env);
	snprintf(nin, sizeof(nin), "%zu", req->stdin_len);
	size_t a = 0;
	argv[a++] = "/bin/sh";
	argv[a++] = "-c";
	argv[a++] = wrapper;
	argv[a++] = "sbx-exec";
	argv[a++] = token;
	argv[a++] = nenv;
	argv[a++] = req->cwd ? req->cwd : "";
	for (uint32_t i = 0; i < req->n_env; i++) {
		size_t l = strlen(req->env[i].key) + strlen(req->env[i].value) + 2;
		if (!(owned[i] = malloc(l))) {
			rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
			goto out;
		}
		snprintf(owned[i], l, "%s=%s", req->env[i].key, req->env[i].value);
		argv[a++] = owned[i];
	}
	argv[a++] = req->shell ? "shell" : "argv";
	argv[a++] = req->has_stdin ? nin : "none";
	if (req->shell)
		argv[a++] = req->shell;
	else
		for (size_t i = 0; i < nargv; i++)
			argv[a++] = req->argv[i];
	argv[a] = NULL;
	const char *kill_argv[] = {"/bin/sh", "-c", killer, "sbx-kill", token, NULL};
	exec_tap tap = {.fn = req->output, .ctx = req->output_ctx};
	k8s_exec_io io = {.argv = argv,
			  .kill_argv = kill_argv,
			  .has_stdin = req->has_stdin != 0,
			  .stdin_data = req->stdin_data,
			  .stdin_len = req->stdin_len,
			  .timeout_ms = req->timeout_ms,
			  .output = on_tap,
			  .output_ctx = &tap};
	rc = k8s__exec(st, id, &io, err);
	if (rc != SBX_OK)
		goto out;
	if (req->cwd && *req->cwd && io.exit_code == 126 && !io.timed_out &&
	    strstr(tap.tail, "sbx-exec: no such directory: ")) {
		rc = k8s__host->set_error(err, SBX_E_NO_FILE, "k8s: exec: cwd '%s' does not exist",
					  req->cwd);
		goto out;
	}
	if (io.timed_out) {
		out->timed_out = 1;
		out->exit_code = -1;
		out->signal = 9;
	} else if (io.exit_code > 128 && io.exit_code <= 128 + 64) {
		out->exit_code = -1;
		out->signal = io.exit_code - 128;
	} else {
		out->exit_code = io.exit_code;
	}
out:
	for (uint32_t i = 0; i < req->n_env; i++)
		free(owned[i]);
	free(owned);
	free(argv);
	return rc;
}

/* ---- files ---- */

typedef struct collect {
	k8s_buf out;
	k8s_buf err;
} collect;

static int on_collect(void *ctx, uint32_t stream, const void *data, size_t len)
{
	collect *c = ctx;
	if (stream == SBX_STREAM_STDERR)
		return c->err.len < 4096 ? k8s__buf_add(&c->err, data, len) : SBX_OK;
	return k8s__buf_add(&c->out, data, len);
}

/* Runs argv (no wrapper), collecting output. */
static int run_collect(k8s_state *st, const char *id, const char *const *argv, const void *in,
		       size_t in_len, int has_in, collect *c, int *exit_code, sbx_error *err)
{
	k8s_exec_io io = {.argv = argv,
			  .has_stdin = has_in,
			  .stdin_data = in,
			  .stdin_len = in_len,
			  .output = on_collect,
			  .output_ctx = c};
	int rc = k8s__exec(st, id, &io, err);
	*exit_code = io.exit_code;
	return rc;
}

static const char *first_line(k8s_buf *b)
{
	if (!b->data)
		return "";
	b->data[strcspn(b->data, "\r\n")] = '\0';
	return b->data;
}

/* Shell prelude of every file op: `chk PATH` exits 5 unless PATH, with symlinks resolved
 * (through its deepest existing ancestor when it does not exist yet), stays inside the work
 * dir (the exec cwd); `chkp PATH` checks the parent only (for ops on a link itself). */
#define PATH_CHECK                                                                            \
	"b=$(pwd -P); chk() { p=$1; case $p in /*) ;; *) p=$b/$p;; esac; "                    \
	"while [ ! -e \"$p\" ] && [ ! -L \"$p\" ]; do p=$(dirname -- \"$p\"); done; "         \
	"r=$(readlink -f -- \"$p\") || exit 5; case $r in \"$b\"|\"$b\"/*) ;; *) exit 5;; "   \
	"esac; }; chkp() { case $1 in /*) q=$1;; *) q=$b/$1;; esac; "                         \
	"case $(basename -- \"$q\") in ..|.) chk \"$q\";; *) chk \"$(dirname -- \"$q\")\";; " \
	"esac; }; "

static int path_refused(const char *op, const char *path, sbx_error *err)
{
	return k8s__host->set_error(err, SBX_E_PATH,
				    "k8s: %s %s: the path leaves the sandbox work dir", op, path);
}

/* Runs one file-op script and maps its exit status, the same for every op: 5 the path leaves
 * the work dir, 3 `missing` (SBX_E_NO_FILE), 4 `wrong_kind` (SBX_E_INVAL), any other nonzero
 * an I/O error quoting the script's first stderr line. A NULL message means the script never
 * uses that status. The caller frees c's buffers on every path. */
static int run_file_op(k8s_state *st, const char *id, const char *const *argv, const void *in,
		       size_t in_len, int has_in, const char *op, const char *path,
		       const char *missing, const char *wrong_kind, collect *c, sbx_error *err)
{
	int code = 0;
	int rc = run_collect(st, id, argv, in, in_len, has_in, c, &code, err);
	if (rc != SBX_OK || code == 0)
		return rc;
	if (code == 5)
		return path_refused(op, path, err);
	if (code == 3 && missing)
		return k8s__host->set_error(err, SBX_E_NO_FILE, "k8s: %s %s: %s", op, path,
					    missing);
	if (code == 4 && wrong_kind)
		return k8s__host->set_error(err, SBX_E_INVAL, "k8s: %s %s: %s", op, path,
					    wrong_kind);
	return k8s__host->set_error(err, SBX_E_IO, "k8s: %s %s: %s", op, path, first_line(&c->err));
}

static int k8s_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
			 sbx_error *err)
{
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv[] = {"/bin/sh",
			      "-c",
			      PATH_CHECK
			      "chk \"$1\"; [ -e \"$1\" ] || exit 3; [ -d \"$1\" ] && exit 4; "
			      "exec cat -- \"$1\"",
			      "sbx-read",
			      path,
			      NULL};
	collect c = {0};
	rc = run_file_op(state, id, argv, NULL, 0, 0, "read", path, "no such file",
			 "is a directory", &c, err);
	if (rc == SBX_OK) {
		void *p = k8s__host->alloc(c.out.len ? c.out.len : 1);
		if (!p) {
			rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		} else {
			if (c.out.len)
				memcpy(p, c.out.data, c.out.len);
			*data = p;
			*len = c.out.len;
		}
	}
	k8s__buf_free(&c.out);
	k8s__buf_free(&c.err);
	return rc;
}

static int k8s_write_file(void *state, const char *id, const char *path, const void *data,
			  size_t len, uint32_t mode, sbx_error *err)
{
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	char nbuf[32], mbuf[16];
	snprintf(nbuf, sizeof(nbuf), "%zu", len);
	snprintf(mbuf, sizeof(mbuf), "%o", mode ? mode & 07777 : 0644);
	/* head -c needs no stdin EOF, so this works under v4 too; the temp file and mv make the
	 * replacement atomic. */
	const char *argv[] = {
	    "/bin/sh",
	    "-c",
	    PATH_CHECK "chk \"$1\"; t=\"$1.sbx-tmp.$$\"; mkdir -p -- \"$(dirname -- \"$1\")\" && "
		       "head -c \"$2\" > \"$t\" && chmod \"$3\" \"$t\" && mv -f -- \"$t\" "
		       "\"$1\" || { rm -f -- \"$t\"; exit 1; }",
	    "sbx-write",
	    path,
	    nbuf,
	    mbuf,
	    NULL};
	collect c = {0};
	rc = run_file_op(state, id, argv, data, len, 1, "write", path, NULL, NULL, &c, err);
	k8s__buf_free(&c.out);
	k8s__buf_free(&c.err);
	return rc;
}

static int k8s_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
			   sbx_error *err)
{
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv[] = {"/bin/sh",
			      "-c",
			      PATH_CHECK "chkp \"$1\"; [ -e \"$1\" ] || [ -L \"$1\" ] || exit 3; "
					 "if [ \"$2\" = 1 ]; then rm "
					 "-rf -- \"$1\"; elif [ -d \"$1\" ] && [ ! -L \"$1\" ]; "
					 "then rmdir -- \"$1\"; else rm -f -- "
					 "\"$1\"; fi",
			      "sbx-rm",
			      path,
			      recursive ? "1" : "0",
			      NULL};
	collect c = {0};
	rc =
	    run_file_op(state, id, argv, NULL, 0, 0, "remove", path, "no such file", NULL, &c, err);
	k8s__buf_free(&c.out);
	k8s__buf_free(&c.err);
	return rc;
}

static int k8s_make_dir(void *state, const char *id, const char *path, uint32_t parents,
			sbx_error *err)
{
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv[] = {"/bin/sh",
			      "-c",
			      PATH_CHECK "chk \"$1\"; if [ \"$2\" = 1 ]; then mkdir -p -- \"$1\"; "
					 "else mkdir -- \"$1\"; fi",
			      "sbx-mkdir",
			      path,
			      parents ? "1" : "0",
			      NULL};
	collect c = {0};
	rc = run_file_op(state, id, argv, NULL, 0, 0, "mkdir", path, NULL, NULL, &c, err);
	k8s__buf_free(&c.out);
	k8s__buf_free(&c.err);
	return rc;
}

/* Parses one `stat -c '%f %s %Y %n'` line into info. */
static int parse_stat_line(const char *line, sbx_file_info *info)
{
	unsigned long mode = 0;
	unsigned long long size = 0;
	long long mtime = 0;
	int off = 0;
	if (sscanf(line, "%lx %llu %lld %n", &mode, &size, &mtime, &off) != 3)
		return -1;
	memset((char *)info + offsetof(sbx_file_info, kind), 0,
	       sizeof(*info) - offsetof(sbx_file_info, kind));
	unsigned long fmt = mode & 0170000;
	info->kind = fmt == 0100000   ? SBX_FILE_REGULAR
		     : fmt == 0040000 ? SBX_FILE_DIR
		     : fmt == 0120000 ? SBX_FILE_SYMLINK
				      : SBX_FILE_OTHER;
	info->mode = (uint32_t)(mode & 07777);
	info->size = size;
	info->mtime = mtime;
	const char *name = line + off;
	const char *slash = strrchr(name, '/');
	if (slash && slash[1])
		name = slash + 1;
	snprintf(info->name, sizeof(info->name), "%s", name);
	return 0;
}

static int k8s_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
			 sbx_error *err)
{
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv[] = {"/bin/sh",
			      "-c",
			      PATH_CHECK "chkp \"$1\"; [ -e \"$1\" ] || [ -L \"$1\" ] || exit 3; "
					 "exec stat -c '%f %s %Y %n' -- \"$1\"",
			      "sbx-stat",
			      path,
			      NULL};
	collect c = {0};
	rc = run_file_op(state, id, argv, NULL, 0, 0, "stat", path, "no such file", NULL, &c, err);
	if (rc == SBX_OK && parse_stat_line(first_line(&c.out), info) != 0)
		rc = k8s__host->set_error(err, SBX_E_BACKEND,
					  "k8s: stat %s: unreadable stat output", path);
	k8s__buf_free(&c.out);
	k8s__buf_free(&c.err);
	return rc;
}

static int k8s_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
			size_t *n, sbx_error *err)
{
	int rc = check_id(id, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv[] = {"/bin/sh",
			      "-c",
			      PATH_CHECK
			      "chk \"$1\"; [ -e \"$1\" ] || exit 3; [ -d \"$1\" ] || exit 4; "
			      "cd -- \"$1\" || exit 1; for e in * .[!.]* ..?*; do "
			      "[ -e \"$e\" ] || [ -L \"$e\" ] || continue; "
			      "stat -c '%f %s %Y %n' -- \"$e\"; done",
			      "sbx-ls",
			      path,
			      NULL};
	collect c = {0};
	sbx_file_info *arr = NULL;
	rc = run_file_op(state, id, argv, NULL, 0, 0, "list", path, "no such directory",
			 "not a directory", &c, err);
	if (rc != SBX_OK)
		goto out;
	size_t lines = 0;
	for (size_t i = 0; i < c.out.len; i++)
		lines += c.out.data[i] == '\n';
	arr = k8s__host->alloc((lines ? lines : 1) * sizeof(*arr));
	if (!arr) {
		rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	size_t k = 0;
	char *save = c.out.data;
	while (save && *save && k < lines) {
		char *nl = strchr(save, '\n');
		if (nl)
			*nl = '\0';
		SBX_INIT_HEADER(arr[k]);
		if (parse_stat_line(save, &arr[k]) == 0)
			k++;
		save = nl ? nl + 1 : NULL;
	}
	*entries = arr;
	*n = k;
	arr = NULL;
out:
	k8s__host->free(arr);
	k8s__buf_free(&c.out);
	k8s__buf_free(&c.err);
	return rc;
}

static int k8s_info(void *state, char **json, sbx_error *err)
{
	k8s_state *st = state;
	const k8s_conn *c = &st->conn;
	json_t *j = json_pack(
	    "{s:s,s:s,s:s,s:s,s:f,s:i,s:s?,s:s?,s:s?,s:s,s:s}", "server", c->server, "namespace",
	    st->ns, "exec", st->force_v4 ? "websocket v4" : "websocket v5, v4", "websocket",
	    "hand-written RFC 6455 over libcurl CONNECT_ONLY", "qps", st->qps, "burst",
	    (int)st->burst, "context", c->context, "cluster", c->cluster, "user", c->user, "auth",
	    c->auth ? c->auth : "none", "ca_sha256", c->ca_sha256);
	if (j &&
	    ((c->cred &&
	      json_object_set_new(j, "credential_runs", json_integer(k8s__cred_runs(c->cred)))) ||
	     (c->token_file && json_object_set_new(j, "token_file", json_string(c->token_file))))) {
		json_decref(j);
		j = NULL;
	}
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	size_t n = strlen(s) + 1;
	*json = k8s__host->alloc(n);
	if (*json)
		memcpy(*json, s, n);
	free(s);
	return *json ? SBX_OK : k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
}

SBX_EXPORT int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg)
{
	k8s__host = host;
	sbx_plugin_desc d = {
	    .alias = "k8s",
	    .version = "0.1.0",
	    .description = "one Kubernetes Pod per sandbox; exec over WebSocket v5/v4",
	    .keys = k8s_keys,
	    .n_keys = sizeof(k8s_keys) / sizeof(k8s_keys[0]),
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = k8s_init,
	    .fini = k8s_fini,
	    .create = k8s_create,
	    .execute = k8s_execute,
	    .destroy = k8s_destroy,
	    .read_file = k8s_read_file,
	    .write_file = k8s_write_file,
	    .stat_file = k8s_stat_file,
	    .list_dir = k8s_list_dir,
	    .make_dir = k8s_make_dir,
	    .remove_path = k8s_remove_path,
	    .status = k8s_status,
	    .list_by_label = k8s_list_by_label,
	    .info = k8s_info,
	};
	SBX_INIT_HEADER(d);
	return host->register_sandbox(reg, &d);
}

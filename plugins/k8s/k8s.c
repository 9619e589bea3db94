/* The `k8s` sandbox plugin: one Pod per sandbox through the Kubernetes API, commands and files
 * over pods/exec (WebSocket v5.channel.k8s.io, falling back to v4). The backend id is the pod
 * name, which the plugin chooses, so a retried create is idempotent and any process holding
 * the same config can reach the sandbox. This file holds the config keys, init and fini, info
 * and the descriptor; the ops live in lifecycle.c, exec.c and files.c. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <sbx/support/clock.h>
#include <sbx/support/conf.h>
#include <sbx/support/host.h>
#include <sbx/support/http.h>
#include <sbx/support/json.h>

#include "credential.h"
#include "exec.h"
#include "files.h"
#include "kubeconfig.h"
#include "lifecycle.h"
#include "state.h"

#define AT(f) offsetof(k8s_state, set.f)

static const sbxs_conf rows[] = {
    {.key = {.name = "kubeconfig",
	     .type = SBX_KEY_STRING,
	     .help = "kubeconfig file (default: the merged $KUBECONFIG list, then ~/.kube/config)"},
     .at = AT(kubeconfig)},
    {.key = {.name = "context",
	     .type = SBX_KEY_STRING,
	     .help = "kubeconfig context (default current)"},
     .at = AT(context)},
    {.key = {.name = "in_cluster",
	     .type = SBX_KEY_BOOL,
	     .help = "use the pod's service account instead of a kubeconfig"},
     .at = AT(in_cluster)},
    {.key = {.name = "namespace",
	     .type = SBX_KEY_STRING,
	     .help = "namespace of the sandbox pods (default: the context's, else default)"},
     .at = AT(ns)},
    {.key = {.name = "image", .type = SBX_KEY_STRING, .help = "image when the task names none"},
     .at = AT(image)},
    {.key = {.name = "cpu", .type = SBX_KEY_STRING, .help = "cpu request and limit, e.g. 500m"},
     .at = AT(cpu)},
    {.key = {.name = "memory",
	     .type = SBX_KEY_STRING,
	     .help = "memory request and limit, e.g. 1Gi"},
     .at = AT(memory)},
    {.key = {.name = "node_selector", .type = SBX_KEY_MAP, .help = "pod nodeSelector"},
     .at = AT(node_selector_json)},
    {.key = {.name = "tolerations", .type = SBX_KEY_LIST, .help = "pod tolerations"},
     .at = AT(tolerations_json)},
    {.key = {.name = "service_account", .type = SBX_KEY_STRING, .help = "pod serviceAccountName"},
     .at = AT(service_account)},
    {.key = {.name = "runtime_class",
	     .type = SBX_KEY_STRING,
	     .help = "pod runtimeClassName (gVisor...)"},
     .at = AT(runtime_class)},
    {.key = {.name = "work_dir", .type = SBX_KEY_STRING, .help = "container workingDir"},
     .at = AT(work_dir)},
    {.key = {.name = "active_deadline_seconds",
	     .type = SBX_KEY_INT,
	     .help = "pod activeDeadlineSeconds, a leak backstop (default 86400)"},
     .at = AT(active_deadline_seconds),
     .num = 86400,
     .max = (double)((int64_t)1 << 40),
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "create_timeout_seconds",
	     .type = SBX_KEY_INT,
	     .help = "how long create waits for Running+Ready (default 600)"},
     .at = AT(create_timeout_seconds),
     .num = 600,
     .min = 1,
     .max = 86400,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "qps",
	     .type = SBX_KEY_FLOAT,
	     .help = "client-side request rate (default 20; 0: no limit)"},
     .at = AT(qps),
     .num = 20,
     .max = 100000,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "burst", .type = SBX_KEY_INT, .help = "client-side burst (default 40)"},
     .at = AT(burst),
     .num = 40,
     .min = 1,
     .max = 100000,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "max_retries", .type = SBX_KEY_INT, .help = "retries on 429/5xx (default 10)"},
     .at = AT(max_retries),
     .num = 10,
     .max = 100,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "exec_protocol",
	     .type = SBX_KEY_STRING,
	     .help = "auto (v5 then v4) or v4 (never offer v5)"},
     .at = AT(exec_protocol),
     .def = "auto",
     .choices = "auto|v4"},
};

static void k8s_fini(void *state)
{
	k8s_state *st = state;
	if (!st)
		return;
	k8s_conn_free(&st->conn);
	sbxs_host->free(st->ns);
	pthread_mutex_destroy(&st->bucket_lock);
	sbxs_host->free(st);
	sbxs_http_fini();
}

/* As kubectl: the key (--kubeconfig), else the merged $KUBECONFIG list, else
 * ~/.kube/config. */
static int load_conn(k8s_state *st, char **ctx_ns, sbx_error *err)
{
	char path[4096];
	const char *env = getenv("KUBECONFIG");
	const char *home = getenv("HOME");
	if (st->set.in_cluster)
		return k8s_load_incluster(&st->conn, ctx_ns, err);
	if (st->set.kubeconfig && *st->set.kubeconfig)
		return k8s_load_kubeconfig(&st->conn, st->set.kubeconfig, 0, st->set.context,
					   ctx_ns, err);
	if (env && *env)
		return k8s_load_kubeconfig(&st->conn, env, 1, st->set.context, ctx_ns, err);
	int n = snprintf(path, sizeof(path), "%s/.kube/config", home ? home : "");
	if (n < 0 || (size_t)n >= sizeof(path))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: kubeconfig path too long");
	return k8s_load_kubeconfig(&st->conn, path, 0, st->set.context, ctx_ns, err);
}

static int k8s_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	k8s_state *st = NULL;
	char *ctx_ns = NULL;
	int rc = sbxs_http_init(K8S_ALIAS, err);
	if (rc != SBX_OK)
		return rc;
	if ((rc = sbxs_conf_new(K8S_ALIAS, cfg, rows, SBXS_COUNT(rows), sizeof(*st), (void **)&st,
				err)) != SBX_OK) {
		sbxs_http_fini();
		return rc;
	}
	pthread_mutex_init(&st->bucket_lock, NULL);
	st->max_file_bytes = sbxs_conf_max_file_bytes(cfg);
	if ((rc = load_conn(st, &ctx_ns, err)) != SBX_OK)
		goto out;
	st->force_v4 = strcmp(st->set.exec_protocol, "v4") == 0;
	st->tokens = (double)st->set.burst;
	st->bucket_last_us = sbxs_now_us();
	st->ns = st->set.ns ? sbxs_strdup(st->set.ns) : ctx_ns ? ctx_ns : sbxs_strdup("default");
	if (st->ns == ctx_ns)
		ctx_ns = NULL;
	if (!st->ns) {
		rc = sbxs_nomem(err, K8S_ALIAS, "init");
		goto out;
	}
	*state = st;
	st = NULL;
out:
	sbxs_host->free(ctx_ns);
	k8s_fini(st);
	return rc;
}

static int k8s_info(void *state, char **json, sbx_error *err)
{
	k8s_state *st = state;
	const k8s_conn *c = &st->conn;
	json_t *j = json_pack(
	    "{s:s,s:s,s:s,s:s,s:f,s:i,s:s?,s:s?,s:s?,s:s,s:s}", "server", c->server, "namespace",
	    st->ns, "exec", st->force_v4 ? "websocket v4" : "websocket v5, v4", "websocket",
	    "hand-written RFC 6455 over libcurl CONNECT_ONLY", "qps", st->set.qps, "burst",
	    (int)st->set.burst, "context", c->context, "cluster", c->cluster, "user", c->user,
	    "auth", c->auth ? c->auth : "none", "ca_sha256", c->ca_sha256);
	if (j &&
	    ((c->cred &&
	      json_object_set_new(j, "credential_runs", json_integer(k8s_cred_runs(c->cred)))) ||
	     (c->token_file && json_object_set_new(j, "token_file", json_string(c->token_file))))) {
		json_decref(j);
		j = NULL;
	}
	int rc = sbxs_json_info(j, K8S_ALIAS, json, err);
	json_decref(j);
	return rc;
}

SBX_EXPORT int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg)
{
	static sbx_config_key keys[SBXS_COUNT(rows)];
	sbx_plugin_desc d = {
	    .alias = K8S_ALIAS,
	    .version = "0.1.0",
	    .description = "one Kubernetes Pod per sandbox; exec over WebSocket v5/v4",
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
	return sbxs_register(host, reg, &d, rows, keys, SBXS_COUNT(rows));
}

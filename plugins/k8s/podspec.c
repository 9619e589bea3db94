/* A sandbox's pod: its name (the backend id), its labels in label syntax, and its spec. */
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>

#include "podspec.h"

int k8s_id_ok(const char *id)
{
	if (strncmp(id, "sbx-", 4) != 0 || strlen(id) != 20)
		return 0;
	for (const char *p = id + 4; *p; p++)
		if (!strchr("0123456789abcdef", *p))
			return 0;
	return 1;
}

int k8s_check_id(const char *id, sbx_error *err)
{
	if (!k8s_id_ok(id))
		return sbxs_host->set_error(err, SBX_E_BAD_ID,
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
void k8s_label_clean(const char *s, char *out, size_t cap, int slash)
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

json_t *k8s_pod_body(const k8s_state *st, const sbx_create_spec *spec, const char *name,
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
		k8s_label_clean(spec->labels[i].key, k, sizeof(k), 1);
		k8s_label_clean(spec->labels[i].value ? spec->labels[i].value : "", v, sizeof(v),
				0);
		if (k[0])
			json_object_set_new(labels, k, json_string(v));
	}
	if (spec->data_source) {
		k8s_label_clean(spec->data_source, v, sizeof(v), 0);
		json_object_set_new(labels, "sbx.dev/data-source", json_string(v));
	}
	json_object_set_new(labels, K8S_LABEL_MANAGED, json_string("sbx"));
	json_object_set_new(labels, K8S_LABEL_ID, json_string(hex));
	for (uint32_t i = 0; i < spec->n_env; i++)
		json_array_append_new(env, json_pack("{s:s,s:s}", "name", spec->env[i].key, "value",
						     spec->env[i].value ? spec->env[i].value : ""));
	const char *image = spec->image && *spec->image ? spec->image : st->set.image;
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
	if (st->set.work_dir)
		json_object_set_new(ctr, "workingDir", json_string(st->set.work_dir));
	if (st->set.cpu || st->set.memory) {
		json_t *r = json_object();
		if (st->set.cpu)
			json_object_set_new(r, "cpu", json_string(st->set.cpu));
		if (st->set.memory)
			json_object_set_new(r, "memory", json_string(st->set.memory));
		json_object_set_new(ctr, "resources",
				    json_pack("{s:O,s:O}", "requests", r, "limits", r));
		json_decref(r);
	}
	json_object_set_new(podspec, "restartPolicy", json_string("Never"));
	json_object_set_new(podspec, "terminationGracePeriodSeconds", json_integer(2));
	json_object_set_new(podspec, "automountServiceAccountToken", json_false());
	json_object_set_new(podspec, "enableServiceLinks", json_false());
	int64_t ads = st->set.active_deadline_seconds;
	if (spec->ttl_seconds > 0 && (ads == 0 || spec->ttl_seconds < ads))
		ads = spec->ttl_seconds;
	if (ads > 0)
		json_object_set_new(podspec, "activeDeadlineSeconds", json_integer(ads));
	if (st->set.service_account)
		json_object_set_new(podspec, "serviceAccountName",
				    json_string(st->set.service_account));
	if (st->set.runtime_class)
		json_object_set_new(podspec, "runtimeClassName",
				    json_string(st->set.runtime_class));
	if (st->set.node_selector_json)
		json_object_set_new(podspec, "nodeSelector",
				    json_loads(st->set.node_selector_json, 0, NULL));
	if (st->set.tolerations_json)
		json_object_set_new(podspec, "tolerations",
				    json_loads(st->set.tolerations_json, 0, NULL));
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

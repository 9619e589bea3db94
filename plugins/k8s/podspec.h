/* A sandbox's pod: its name (the backend id), its labels in label syntax, and its spec. */
#ifndef SBX_K8S_PODSPEC_H
#define SBX_K8S_PODSPEC_H

#include <stddef.h>

#include <jansson.h>

#include <sbx/plugin.h>

#include "state.h"

#define K8S_LABEL_MANAGED "app.kubernetes.io/managed-by"
#define K8S_LABEL_ID      "sbx.dev/sandbox-id"

/* Backend ids are pod names this plugin chose: sbx- and 16 hex digits. */
int k8s_id_ok(const char *id);
/* As k8s_id_ok, SBX_E_BAD_ID with err filled when it is not. */
int k8s_check_id(const char *id, sbx_error *err);

/* s in label syntax into out[cap]: at most 63 characters of [A-Za-z0-9._-], starting and
 * ending alphanumeric; `slash` keeps one '/' (a key's prefix). Empty stays empty. */
void k8s_label_clean(const char *s, char *out, size_t cap, int slash);

/* The Pod object of a create: name, hex (its id label), the spec's labels, env and image
 * (else the configured one), and the configured resources and scheduling. NULL when out of
 * memory. */
json_t *k8s_pod_body(const k8s_state *st, const sbx_create_spec *spec, const char *name,
		     const char *hex);

#endif

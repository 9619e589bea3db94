/* Connection settings as kubectl reads them (one kubeconfig file or a merged $KUBECONFIG
 * list; the current or a named context) or from the pod's service account when running in a
 * cluster. */
#ifndef SBX_K8S_KUBECONFIG_H
#define SBX_K8S_KUBECONFIG_H

#include <sbx/plugin.h>

#include "state.h"

/* Reads kubeconfig into conn: `paths` is one file, or when is_list a $KUBECONFIG list
 * (':'-separated, merged by client-go's rules); `context` NULL means the current-context.
 * *ns_out (host memory) gets the context's namespace when it names one. SBX_E_CONFIG naming
 * the file and what is wrong. */
int k8s_load_kubeconfig(k8s_conn *conn, const char *paths, int is_list, const char *context,
			char **ns_out, sbx_error *err);
/* The service account of the pod this runs in (KUBERNETES_SERVICE_HOST and its files). */
int k8s_load_incluster(k8s_conn *conn, char **ns_out, sbx_error *err);
/* Frees what conn holds, key and token zeroed first. */
void k8s_conn_free(k8s_conn *conn);

#endif

/* Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1) of a kubeconfig
 * user, run as client-go runs them, and the credential they print, cached. */
#ifndef SBX_K8S_CREDENTIAL_H
#define SBX_K8S_CREDENTIAL_H

#include <yaml.h>

#include <sbx/plugin.h>

#include "state.h"

/* Reads a kubeconfig user's `exec` block (command relative to dir when it has a slash; cd/cl
 * the cluster, for provideClusterInfo) into *out. SBX_E_CONFIG naming what is wrong. */
int k8s_cred_parse(k8s_cred **out, yaml_document_t *d, yaml_node_t *exec, const char *dir,
		   const char *user, yaml_document_t *cd, yaml_node_t *cl, const k8s_conn *conn,
		   sbx_error *err);
/* Copies of the credential (token, or certificate and key PEM; absent ones NULL; host memory
 * the caller wipes and frees), running the command when nothing fresh is cached.
 * Thread-safe. */
int k8s_cred_get(k8s_cred *c, char **token, char **cert, char **key, sbx_error *err);
/* The generation of the cached credential; k8s_cred_expire drops it if it is still `gen`
 * (the one a request that got 401 used). */
unsigned k8s_cred_generation(k8s_cred *c);
void k8s_cred_expire(k8s_cred *c, unsigned gen);
/* How often the command ran, for `info`. */
unsigned k8s_cred_runs(k8s_cred *c);
void k8s_cred_free(k8s_cred *c);

#endif

/* The k8s plugin's execute op. */
#ifndef SBX_K8S_EXEC_H
#define SBX_K8S_EXEC_H

#include <sbx/plugin.h>

int k8s_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		sbx_error *err);

#endif

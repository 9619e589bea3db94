/* The e2b plugin's execute op. */
#ifndef SBX_E2B_EXEC_H
#define SBX_E2B_EXEC_H

#include <sbx/plugin.h>

int e2b_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		sbx_error *err);

#endif

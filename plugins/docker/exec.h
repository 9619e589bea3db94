/* The docker plugin's execute op. */
#ifndef SBX_DOCKER_EXEC_H
#define SBX_DOCKER_EXEC_H

#include <sbx/plugin.h>

int docker_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		   sbx_error *err);

#endif

/* env.c: what a command's environment starts from. */
#ifndef SBX_LOCAL_ENV_H
#define SBX_LOCAL_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

/* Reads inherit_env and env_passthrough. */
int local_env_init(local_state *st, const sbx_config *cfg, sbx_error *err);

#endif

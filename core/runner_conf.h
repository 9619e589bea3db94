/* Where sbx-runner is and which plugins run in it (runner_conf.c). */
#ifndef SBX_RUNNER_CONF_H
#define SBX_RUNNER_CONF_H

#include <stddef.h>

#include "internal.h"

/* The sbx-runner to start: $SBX_RUNNER, else the one this libsbx ships with (the build
 * tree's when libsbx is the build tree's, else the installed one, found beside a relocated
 * libsbx first). SBX_E_NOMEM when it does not fit in buf. */
int sbx__runner_path(char *buf, size_t cap);
/* SBX__RUNNER_INPROC or SBX__RUNNER_PROCESS for ent: its `runner` mode, else in process
 * when its file is in the folder of the sbx-runner this libsbx ships with. */
int sbx__runner_mode(const sbx__reg_entry *ent);

#endif

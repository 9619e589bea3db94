/* limits.c: memory, pids and cpu cgroups of the isolated level. */
#ifndef SBX_LOCAL_LIMITS_H
#define SBX_LOCAL_LIMITS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

int local_limits_detect(local_state *st);
/* Where limits would go on this machine: "cgroup-v2", "cgroup-v1" or "none". */
const char *local_limits_kind(const local_state *st);
/* Creates the sandbox's limit cgroups with their limits. */
int local_limits_create(const local_state *st, const char *id, sbx_error *err);
/* Opens the cgroup.procs files of the sandbox's limit cgroups into procs (-1 for none). */
int local_limits_open(const local_state *st, const char *id, int *procs, size_t n, sbx_error *err);
/* The memory cgroup's OOM kill count (-1 when unknown) and the file it came from. */
int64_t local_limits_oom_count(const char *file);
int local_limits_oom_file(const local_state *st, const char *id, char *buf, size_t cap);
void local_limits_remove(const local_state *st, const char *id);
/* At unload: removes this root's limit cgroup folders that no sandbox uses any more. */
void local_limits_release(const local_state *st);

#endif

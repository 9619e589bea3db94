/* Sandbox paths in a container: absolute, or relative beneath the work dir, where a relative
 * path must stay, also through the container's symlinks. */
#ifndef SBX_DOCKER_PATHS_H
#define SBX_DOCKER_PATHS_H

#include <stddef.h>

#include <sbx/plugin.h>

#include "transport.h"

/* Lexically: an absolute path as it is, a relative one joined to work_dir; ".." in a
 * relative path is SBX_E_PATH. No trailing slash (the archive endpoint reads "dir/" as the
 * directory's contents). */
int docker_path(const char *work_dir, const char *path, char *buf, size_t cap, const char *op,
		sbx_error *err);

/* As docker_path, and a relative path is walked one component at a time through the
 * container's symlinks, as the kernel would: one that leads out of work_dir is SBX_E_PATH.
 * follow_final: follow the last component too. */
int docker_resolve(docker_engine *e, const char *work_dir, const char *id, const char *path,
		   int follow_final, char *buf, size_t cap, const char *op, sbx_error *err);

#endif

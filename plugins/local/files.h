/* files.c: file operations confined to the work dir. */
#ifndef SBX_LOCAL_FILES_H
#define SBX_LOCAL_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

#include "state.h"

int local_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		    sbx_error *err);
int local_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		     uint32_t mode, sbx_error *err);
int local_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		    sbx_error *err);
int local_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		   size_t *n, sbx_error *err);
int local_make_dir(void *state, const char *id, const char *path, uint32_t parents, sbx_error *err);
int local_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
		      sbx_error *err);
/* The length of dir's path when path is dir or lies below it, else 0. */
size_t local_under(const char *path, const char *dir);
/* The same for the sandbox's work dir `work`, which a path may also name by the host folder
 * it links to (share_dir). */
size_t local_under_work(const char *path, const char *work);
/* The host folder the work dir `work` links to (share_dir) into buf, NUL-terminated, and its
 * length; 0 (buf "") when work is a folder of its own. */
size_t local_work_link(const char *work, char *buf, size_t cap);
/* Opens `path` (absolute in the work dir or relative to it) as a folder beneath the work dir
 * for an exec's cwd: *fd is an O_PATH descriptor. SBX_E_PATH when it leads outside. */
int local_open_dir(local_state *st, const char *id, const char *path, int *fd, sbx_error *err);
/* Removes the folder at `path` and all below it without following symlinks. */
int local_rmtree(const char *path);
/* The same for `name` in the folder open at dfd; 0 or an errno (ENOENT when absent). */
int local_rmtree_at(int dfd, const char *name);

#endif

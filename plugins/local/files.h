/* files.c: file operations confined to the work dir. */
#ifndef SBX_LOCAL_FILES_H
#define SBX_LOCAL_FILES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sbx/plugin.h>

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
/* Removes the folder at `path` and all below it without following symlinks. */
int local_rmtree(const char *path);
/* The same for `name` in the folder open at dfd; 0 or an errno (ENOENT when absent). */
int local_rmtree_at(int dfd, const char *name);

#endif

/* The k8s plugin's file ops. */
#ifndef SBX_K8S_FILES_H
#define SBX_K8S_FILES_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

int k8s_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		  sbx_error *err);
int k8s_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		   uint32_t mode, sbx_error *err);
int k8s_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		  sbx_error *err);
int k8s_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries, size_t *n,
		 sbx_error *err);
int k8s_make_dir(void *state, const char *id, const char *path, uint32_t parents, sbx_error *err);
int k8s_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
		    sbx_error *err);

#endif

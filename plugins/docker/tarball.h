/* Tar archives for the Engine's archive endpoints, built and read in memory with libarchive:
 * plain functions over buffers (no I/O), so a fuzz target can link them with libarchive and
 * sbx-support alone. Memory comes from host->alloc. */
#ifndef SBX_DOCKER_TARBALL_H
#define SBX_DOCKER_TARBALL_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

/* A tar holding one regular file `name` with data and mode, into *tar (host memory). */
int docker_tar_one(const char *name, const void *data, size_t len, uint32_t mode, void **tar,
		   size_t *tar_len, sbx_error *err);

/* The first entry of a tar as a regular file (*data from host->alloc, NUL-terminated). A
 * symlink gives SBX_E_EXISTS with its target in link[link_cap]; a directory or another kind
 * (FIFO, device, socket) SBX_E_INVAL; a file larger than max bytes SBX_E_LIMIT; `path` names
 * the file in messages. */
int docker_tar_first(const void *tar, size_t tar_len, const char *path, uint64_t max, void **data,
		     size_t *len, char *link, size_t link_cap, sbx_error *err);

/* The entries directly below the tar's top directory (*entries from host->alloc, at least
 * one element allocated). SBX_E_INVAL when the top is not a directory. */
int docker_tar_list(const void *tar, size_t tar_len, const char *path, sbx_file_info **entries,
		    size_t *n, sbx_error *err);

#endif

/* The Engine's archive endpoints (/containers/{id}/archive): HEAD for an entry's stat, GET
 * for a tar of a path, PUT to unpack a tar into a directory. */
#ifndef SBX_DOCKER_ARCHIVE_H
#define SBX_DOCKER_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

#include "transport.h"

/* The entry at absolute path `full` itself (a symlink is not followed). SBX_E_NO_FILE, err
 * untouched, when the engine answers 404; link[link_cap] (may be NULL) gets a symlink's
 * target. */
int docker_stat_raw(docker_engine *e, const char *id, const char *full, sbx_file_info *info,
		    char *link, size_t link_cap, sbx_error *err);

/* The same, and *what names what the entry is when it is none of a regular file, folder and
 * symlink ("a FIFO", "a socket", "a character device", "a block device"), else NULL. */
int docker_stat_what(docker_engine *e, const char *id, const char *full, sbx_file_info *info,
		     const char **what, sbx_error *err);

/* The tar headers, pax records and padding around max bytes of content in an archive. */
#define DOCKER_TAR_SLACK (64u << 10)

/* A tar of `full` into resp (200), or the error: a 404 is told apart as a missing container
 * (SBX_E_NOT_FOUND) or a missing file (SBX_E_NO_FILE); an archive longer than max bytes of
 * content (max_file_bytes) and DOCKER_TAR_SLACK is SBX_E_LIMIT, never held whole. */
int docker_get_archive(docker_engine *e, const char *id, const char *full, const char *op,
		       uint64_t max, docker_resp *resp, sbx_error *err);

/* Puts one regular file dir/name (0 mode: 0644) into the container; the answer in resp. */
int docker_put_file(docker_engine *e, const char *id, const char *dir, const char *name,
		    const void *data, size_t len, uint32_t mode, docker_resp *resp, sbx_error *err);

/* After a 404 of the archive endpoint: SBX_E_NOT_FOUND when the container is gone, else
 * SBX_E_NO_FILE naming `path`. */
int docker_missing(docker_engine *e, const char *id, const char *op, const char *path,
		   sbx_error *err);

#endif

/* Sandbox paths in a container (see paths.h). */
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>
#include <sbx/support/path.h>

#include "archive.h"
#include "paths.h"

int docker_path(const char *work_dir, const char *path, char *buf, size_t cap, const char *op,
		sbx_error *err)
{
	if (!path || !*path)
		return sbxs_host->set_error(err, SBX_E_PATH, "docker: %s: empty path", op);
	int rel = path[0] != '/';
	for (const char *p = path; *p;) {
		size_t l = strcspn(p, "/");
		if (rel && l == 2 && p[0] == '.' && p[1] == '.')
			return sbxs_host->set_error(
			    err, SBX_E_PATH,
			    "docker: %s: '%.200s' leaves the work dir (no '..' in "
			    "relative paths)",
			    op, path);
		p += l;
		while (*p == '/')
			p++;
	}
	int n = rel ? snprintf(buf, cap, "%s/%s", work_dir, path) : snprintf(buf, cap, "%s", path);
	if (n < 0 || (size_t)n >= cap)
		return sbxs_host->set_error(err, SBX_E_PATH, "docker: %s: path is too long", op);
	/* No trailing slash: the archive endpoint treats "dir/" differently. */
	size_t l = strlen(buf);
	while (l > 1 && buf[l - 1] == '/')
		buf[--l] = '\0';
	return SBX_OK;
}

int docker_resolve(docker_engine *e, const char *work_dir, const char *id, const char *path,
		   int follow_final, char *buf, size_t cap, const char *op, sbx_error *err)
{
	int rc = docker_path(work_dir, path, buf, cap, op, err);
	if (rc != SBX_OK || path[0] == '/')
		return rc;
	/* A relative path stays beneath the work dir even through symlinks: walk it one
	 * component at a time, as the kernel would, and check every link's target. */
	char cur[4096], rest[4096], link[4096];
	int hops = 0;
	if (!sbxs_path_normalize(work_dir, cur, sizeof(cur)))
		return sbxs_host->set_error(err, SBX_E_PATH, "docker: %s: path is too long", op);
	snprintf(rest, sizeof(rest), "%s", buf + strlen(work_dir));
	const char *r = rest;
	while (*r) {
		while (*r == '/')
			r++;
		if (!*r)
			break;
		size_t l = strcspn(r, "/");
		const char *after = r + l;
		while (*after == '/')
			after++;
		char next[4096];
		int n = snprintf(next, sizeof(next), "%s%s%.*s", cur, strcmp(cur, "/") ? "/" : "",
				 (int)l, r);
		if (n < 0 || (size_t)n >= sizeof(next))
			return sbxs_host->set_error(err, SBX_E_PATH, "docker: %s: path is too long",
						    op);
		if (!*after && !follow_final) {
			memcpy(cur, next, (size_t)n + 1);
			break;
		}
		sbx_file_info fi;
		rc = docker_stat_raw(e, id, next, &fi, link, sizeof(link), err);
		if (rc == SBX_E_NO_FILE) {
			/* The rest does not exist yet: nothing to follow. */
			n = snprintf(cur, sizeof(cur), "%s%s%s", next, *after ? "/" : "", after);
			if (n < 0 || (size_t)n >= sizeof(cur))
				return sbxs_host->set_error(err, SBX_E_PATH,
							    "docker: %s: path is too long", op);
			break;
		}
		if (rc != SBX_OK)
			return rc;
		if (fi.kind == SBX_FILE_SYMLINK) {
			if (++hops > 32)
				return sbxs_host->set_error(
				    err, SBX_E_PATH, "docker: %s: '%.200s': too many symlinks", op,
				    path);
			char target[4096];
			if (link[0] == '/')
				n = snprintf(target, sizeof(target), "%s", link);
			else
				n = snprintf(target, sizeof(target), "%s/%s", cur, link);
			if (n < 0 || (size_t)n >= sizeof(target))
				return sbxs_host->set_error(err, SBX_E_PATH,
							    "docker: %s: path is too long", op);
			if (!sbxs_path_normalize(target, target, sizeof(target)))
				return sbxs_host->set_error(err, SBX_E_PATH,
							    "docker: %s: path is too long", op);
			if (!sbxs_path_beneath(work_dir, target))
				return sbxs_host->set_error(
				    err, SBX_E_PATH,
				    "docker: %s: '%.200s' leaves the work dir through "
				    "the symlink %.*s",
				    op, path, (int)(r + l - rest), rest);
			memcpy(cur, target, strlen(target) + 1);
		} else {
			memcpy(cur, next, (size_t)n + 1);
		}
		r = after;
	}
	if (!sbxs_path_normalize(cur, cur, sizeof(cur)) || strlen(cur) >= cap)
		return sbxs_host->set_error(err, SBX_E_PATH, "docker: %s: path is too long", op);
	memcpy(buf, cur, strlen(cur) + 1);
	return SBX_OK;
}

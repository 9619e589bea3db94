/* Files in a container through the archive endpoints (GET/PUT/HEAD
 * /containers/{id}/archive); directories are made and removed by a short exec. */
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>

#include "archive.h"
#include "files.h"
#include "paths.h"
#include "run.h"
#include "state.h"
#include "tarball.h"

/* The op's container and path: a container id, and the path resolved beneath the work dir
 * (follow: through a final symlink too) into full[4096]. */
static int target(docker_state *st, const char *id, const char *path, int follow, const char *op,
		  char *full, sbx_error *err)
{
	int rc = docker_id_check(id, op, err);
	if (rc == SBX_OK)
		rc = docker_resolve(&st->engine, st->set.working_dir, id, path, follow, full, 4096,
				    op, err);
	return rc;
}

static int split(const char *full, char *dir, size_t cap, const char **name)
{
	const char *slash = strrchr(full, '/');
	size_t l = (size_t)(slash - full);
	if (l == 0)
		l = 1; /* the root */
	if (l >= cap)
		return SBX_E_PATH;
	memcpy(dir, full, l);
	dir[l] = '\0';
	*name = slash + 1;
	return **name ? SBX_OK : SBX_E_PATH;
}

int docker_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		      uint32_t mode, sbx_error *err)
{
	docker_state *st = state;
	char full[4096], dir[4096];
	const char *name;
	docker_resp resp = {0};
	int rc;
	if ((rc = target(st, id, path, 1, "write", full, err)) != SBX_OK)
		return rc;
	/* The engines put a file in place of whatever is there: a folder would go with all it
	 * holds, a FIFO or device would be replaced behind the command's back. What they do
	 * replace is the name, a new file: a hard link out of the work dir is left alone. */
	sbx_file_info fi;
	const char *what;
	rc = docker_stat_what(&st->engine, id, full, &fi, &what, err);
	if (rc == SBX_OK && fi.kind == SBX_FILE_DIR)
		return sbxs_host->set_error(err, SBX_E_INVAL,
					    "docker: write: '%.200s' is a directory", path);
	if (rc == SBX_OK && what)
		return sbxs_host->set_error(
		    err, SBX_E_INVAL,
		    "docker: write: '%.200s' is %s; only regular files can be "
		    "read or written",
		    path, what);
	if (rc != SBX_OK && rc != SBX_E_NO_FILE)
		return rc;
	if (split(full, dir, sizeof(dir), &name) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_PATH,
					    "docker: write: '%.200s' names no file", path);
	rc = docker_put_file(&st->engine, id, dir, name, data, len, mode, &resp, err);
	if (rc == SBX_OK && resp.status == 404) {
		/* Most likely the parent is missing: make it, then try again. */
		docker_resp_free(&resp);
		rc = docker_make_dir(st, id, dir, 1, err);
		if (rc == SBX_OK)
			rc = docker_put_file(&st->engine, id, dir, name, data, len, mode, &resp,
					     err);
	}
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404)
		rc = docker_missing(&st->engine, id, "write", full, err);
	else if (resp.status != 200) {
		char msg[300];
		docker_resp_message(&resp, msg, sizeof(msg));
		rc = sbxs_host->set_error(err, resp.status == 403 ? SBX_E_PATH : SBX_E_IO,
					  "docker: write: %.300s: engine answered %ld: %s", full,
					  resp.status, msg);
	}
out:
	docker_resp_free(&resp);
	return rc;
}

int docker_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		     sbx_error *err)
{
	docker_state *st = state;
	char full[4096], link[4096];
	int rc;
	if ((rc = target(st, id, path, 1, "read", full, err)) != SBX_OK)
		return rc;
	/* The archive holds a symlink itself, not its target: follow a few by hand. */
	for (int hops = 0; hops < 8; hops++) {
		docker_resp resp = {0};
		if ((rc = docker_get_archive(&st->engine, id, full, "read", st->max_file_bytes,
					     &resp, err)) != SBX_OK)
			return rc;
		rc = docker_tar_first(resp.body.data, resp.body.len, path, st->max_file_bytes, data,
				      len, link, sizeof(link), err);
		docker_resp_free(&resp);
		if (rc != SBX_E_EXISTS)
			return rc;
		char next[4096];
		int n;
		if (link[0] == '/') {
			n = snprintf(next, sizeof(next), "%s", link);
		} else {
			char *slash = strrchr(full, '/');
			n = snprintf(next, sizeof(next), "%.*s/%s", (int)(slash - full), full,
				     link);
		}
		if (n < 0 || (size_t)n >= sizeof(next))
			return sbxs_host->set_error(err, SBX_E_PATH,
						    "docker: read: %.200s: link too long", path);
		memcpy(full, next, (size_t)n + 1);
	}
	return sbxs_host->set_error(err, SBX_E_PATH, "docker: read: %.200s: too many symlinks",
				    path);
}

int docker_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		     sbx_error *err)
{
	docker_state *st = state;
	char full[4096];
	int rc;
	if ((rc = target(st, id, path, 0, "stat", full, err)) != SBX_OK)
		return rc;
	rc = docker_stat_raw(&st->engine, id, full, info, NULL, 0, err);
	return rc == SBX_E_NO_FILE ? docker_missing(&st->engine, id, "stat", full, err) : rc;
}

int docker_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		    size_t *n, sbx_error *err)
{
	docker_state *st = state;
	char full[4096];
	docker_resp resp = {0};
	int rc;
	if ((rc = target(st, id, path, 1, "list", full, err)) != SBX_OK)
		return rc;
	if ((rc = docker_get_archive(&st->engine, id, full, "list", st->max_file_bytes, &resp,
				     err)) != SBX_OK)
		return rc;
	rc = docker_tar_list(resp.body.data, resp.body.len, full, entries, n, err);
	docker_resp_free(&resp);
	return rc;
}

/* Runs a file tool and turns a failure into a status, looking at what is there now. */
static int file_tool(docker_state *st, const char *id, const char *op, const char *full,
		     const char *const *argv, sbx_error *err)
{
	docker_capture cap;
	int rc = docker_run(&st->engine, id, argv, &cap, err);
	if (rc != SBX_OK || cap.exit_code == 0)
		return rc;
	for (size_t i = 0; i < cap.err_len; i++)
		if (cap.err[i] == '\n')
			cap.err[i] = ' ';
	sbx_file_info fi;
	int exists = docker_stat_raw(&st->engine, id, full, &fi, NULL, 0, NULL) == SBX_OK;
	int code = SBX_E_IO;
	if (strcmp(op, "mkdir") == 0 && exists)
		code = SBX_E_EXISTS;
	else if (!exists && strcmp(op, "mkdir") != 0)
		code = SBX_E_NO_FILE;
	else if (strcmp(op, "mkdir") == 0 && strstr(cap.err, "No such file"))
		code = SBX_E_NO_FILE;
	return sbxs_host->set_error(err, code, "docker: %s: %.300s: %.150s", op, full,
				    cap.err_len ? cap.err : "failed");
}

int docker_make_dir(void *state, const char *id, const char *path, uint32_t parents, sbx_error *err)
{
	docker_state *st = state;
	char full[4096];
	int rc;
	if ((rc = target(st, id, path, 1, "mkdir", full, err)) != SBX_OK)
		return rc;
	const char *argv_p[] = {"mkdir", "-p", "--", full, NULL};
	const char *argv[] = {"mkdir", "--", full, NULL};
	return file_tool(st, id, "mkdir", full, parents ? argv_p : argv, err);
}

int docker_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
		       sbx_error *err)
{
	docker_state *st = state;
	char full[4096];
	sbx_file_info fi;
	int rc;
	if ((rc = target(st, id, path, 0, "remove", full, err)) != SBX_OK)
		return rc;
	if (strcmp(full, "/") == 0)
		return sbxs_host->set_error(err, SBX_E_PATH,
					    "docker: remove: refusing to remove /");
	rc = docker_stat_raw(&st->engine, id, full, &fi, NULL, 0, err);
	if (rc == SBX_E_NO_FILE)
		return docker_missing(&st->engine, id, "remove", full, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv_r[] = {"rm", "-rf", "--", full, NULL};
	const char *argv_d[] = {"rmdir", "--", full, NULL};
	const char *argv_f[] = {"rm", "-f", "--", full, NULL};
	const char *const *argv = recursive ? argv_r : fi.kind == SBX_FILE_DIR ? argv_d : argv_f;
	return file_tool(st, id, "remove", full, argv, err);
}

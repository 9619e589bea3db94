/* Files through envd: /files GET and POST (multipart) for contents, filesystem.Filesystem
 * Stat, ListDir, MakeDir and Remove (Connect unary, JSON) for the rest. Relative paths go to
 * envd as they are; it resolves them against the user's home. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/path.h>

#include "envd.h"
#include "files.h"
#include "process.h"

/* A relative path must stay beneath the work dir (the user's home), also through symlinks
 * (one level: a link's target is checked, not links inside that target). Absolute paths are
 * the sandbox's own and pass. follow_last: the last component is followed too. */
static int check_path(e2b_state *st, const char *id, const char *path, int follow_last,
		      const char *what, sbx_error *err)
{
	char home[1024], cur[2048], code[32];
	json_t *resp = NULL, *req;
	int rc;
	if (!path || !*path || path[0] == '/')
		return SBX_OK;
	/* Lexically first: no round trip for ../ escapes. */
	snprintf(cur, sizeof(cur), "/h");
	for (const char *c = path; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.' && strcmp(cur, "/h") == 0)
			goto refuse;
		if (!sbxs_path_push(cur, sizeof(cur), c, n))
			goto refuse;
		c += n;
		c += *c == '/';
	}
	req = json_pack("{s:s}", "path", ".");
	if (!req)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
	rc = e2b_unary(st, id, "filesystem.Filesystem/Stat", req, &resp, code, what, err);
	json_decref(req);
	if (rc != SBX_OK)
		return rc;
	const char *h = json_string_value(json_object_get(json_object_get(resp, "entry"), "path"));
	if (!h || h[0] != '/' || snprintf(home, sizeof(home), "%s", h) >= (int)sizeof(home)) {
		json_decref(resp);
		return sbxs_host->set_error(err, SBX_E_BACKEND, "e2b: %s: envd gave no home path",
					    what);
	}
	json_decref(resp);
	snprintf(cur, sizeof(cur), "%s", home);
	char rel[2048] = "";
	for (const char *c = path; *c;) {
		size_t n = strcspn(c, "/");
		const char *next = c + n + (c[n] == '/');
		int last = *next == '\0';
		if (n && !(n == 1 && c[0] == '.') && !(n == 2 && c[0] == '.' && c[1] == '.')) {
			size_t rl = strlen(rel);
			if (rl + n + 2 > sizeof(rel))
				goto refuse;
			snprintf(rel + rl, sizeof(rel) - rl, "%s%.*s", rl ? "/" : "", (int)n, c);
		} else if (n == 2) {
			char *slash = strrchr(rel, '/');
			if (slash)
				*slash = '\0';
			else
				rel[0] = '\0';
		}
		char dir[2048];
		snprintf(dir, sizeof(dir), "%s", cur);
		if (!sbxs_path_push(cur, sizeof(cur), c, n))
			goto refuse;
		if (!sbxs_path_beneath(home, cur))
			goto refuse;
		if (rel[0] && (!last || follow_last) && n && !(n == 1 && c[0] == '.') &&
		    !(n == 2 && c[0] == '.' && c[1] == '.')) {
			req = json_pack("{s:s}", "path", rel);
			if (!req)
				return sbxs_host->set_error(err, SBX_E_NOMEM,
							    "e2b: %s: out of memory", what);
			rc = e2b_unary(st, id, "filesystem.Filesystem/Stat", req, &resp, code, what,
				       NULL);
			json_decref(req);
			if (rc != SBX_OK)
				break; /* missing: nothing further can be a link */
			json_t *e = json_object_get(resp, "entry");
			const char *target = json_string_value(json_object_get(e, "symlinkTarget"));
			if (target && *target) {
				char t[2048];
				snprintf(t, sizeof(t), "%s", target[0] == '/' ? "/" : dir);
				for (const char *x = target; *x;) {
					size_t m = strcspn(x, "/");
					if (!sbxs_path_push(t, sizeof(t), x, m)) {
						json_decref(resp);
						goto refuse;
					}
					x += m;
					x += *x == '/';
				}
				if (!sbxs_path_beneath(home, t)) {
					json_decref(resp);
					goto refuse;
				}
			}
			json_decref(resp);
			resp = NULL;
		}
		c = next;
	}
	return SBX_OK;
refuse:
	return sbxs_host->set_error(
	    err, SBX_E_PATH,
	    "e2b: %s: path '%.200s' leaves the work dir; give a path beneath it "
	    "or an absolute one",
	    what, path);
}

int e2b_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		  sbx_error *err)
{
	sbxs_http_resp r = {0};
	int rc = check_path(state, id, path, 1, "read", err);
	if (rc == SBX_OK)
		rc = e2b_files(state, id, path, NULL, 0, &r, "read", err);
	if (rc == SBX_OK) {
		*data = sbxs_buf_take(&r.body, len);
		if (!*data)
			rc = sbxs_nomem(err, E2B_ALIAS, "read");
	}
	sbxs_http_resp_free(&r);
	return rc;
}

int e2b_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		   uint32_t mode, sbx_error *err)
{
	sbxs_http_resp r = {0};
	int rc = check_path(state, id, path, 1, "write", err);
	if (rc == SBX_OK)
		rc = e2b_files(state, id, path, data ? data : "", len, &r, "write", err);
	sbxs_http_resp_free(&r);
	if (rc != SBX_OK || mode == 0 || mode == 0644)
		return rc;
	char m[16];
	snprintf(m, sizeof(m), "%04o", (unsigned)(mode & 07777));
	const char *argv[] = {"chmod", m, "--", path, NULL};
	int code = 0;
	rc = e2b_process_simple(state, id, argv, &code, err);
	if (rc == SBX_OK && code != 0)
		rc = sbxs_host->set_error(
		    err, SBX_E_IO, "e2b: write '%.200s': chmod %s failed (%d)", path, m, code);
	return rc;
}

static void entry_info(json_t *e, sbx_file_info *fi)
{
	memset(fi, 0, sizeof(*fi));
	SBX_INIT_HEADER(*fi);
	const char *type = json_string_value(json_object_get(e, "type"));
	json_t *tn = json_object_get(e, "type");
	long tv = json_is_integer(tn) ? (long)json_integer_value(tn) : 0;
	if ((type && strcmp(type, "FILE_TYPE_FILE") == 0) || tv == 1)
		fi->kind = SBX_FILE_REGULAR;
	else if ((type && strcmp(type, "FILE_TYPE_DIRECTORY") == 0) || tv == 2)
		fi->kind = SBX_FILE_DIR;
	else if ((type && strcmp(type, "FILE_TYPE_SYMLINK") == 0) || tv == 3)
		fi->kind = SBX_FILE_SYMLINK;
	else
		fi->kind = SBX_FILE_OTHER;
	json_t *m = json_object_get(e, "mode");
	fi->mode = (uint32_t)(json_is_integer(m) ? json_integer_value(m) : 0) & 07777;
	json_t *sz = json_object_get(e, "size");
	fi->size = json_is_integer(sz)  ? (uint64_t)json_integer_value(sz)
		   : json_is_string(sz) ? strtoull(json_string_value(sz), NULL, 10)
					: 0;
	int64_t mtime = 0;
	if (sbxs_rfc3339(json_string_value(json_object_get(e, "modifiedTime")), &mtime, NULL) !=
	    SBX_OK)
		mtime = 0;
	fi->mtime = mtime;
	const char *name = json_string_value(json_object_get(e, "name"));
	snprintf(fi->name, sizeof(fi->name), "%s", name ? name : "");
}

static int fs_call(e2b_state *st, const char *id, const char *method, json_t *req, json_t **resp,
		   const char *what, const char *path, sbx_error *err)
{
	char code[32];
	if (!req)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
	int rc = e2b_unary(st, id, method, req, resp, code, what, err);
	json_decref(req);
	if (rc == SBX_E_BACKEND && strcmp(code, "not_found") == 0)
		rc = sbxs_host->set_error(err, SBX_E_NO_FILE, "e2b: %s: no such file '%.200s'",
					  what, path);
	else if (rc == SBX_E_BACKEND && strcmp(code, "already_exists") == 0)
		rc = sbxs_host->set_error(err, SBX_E_EXISTS, "e2b: %s: '%.200s' already exists",
					  what, path);
	else if (rc == SBX_E_BACKEND && strcmp(code, "invalid_argument") == 0)
		rc = sbxs_host->set_error(err, SBX_E_PATH, "e2b: %s: path '%.200s' refused", what,
					  path);
	return rc;
}

int e2b_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		  sbx_error *err)
{
	json_t *resp = NULL;
	int rc = fs_call(state, id, "filesystem.Filesystem/Stat", json_pack("{s:s}", "path", path),
			 &resp, "stat", path, err);
	if (rc == SBX_OK)
		entry_info(json_object_get(resp, "entry"), info);
	json_decref(resp);
	return rc;
}

static int list(e2b_state *st, const char *id, const char *path, json_t **entries, sbx_error *err)
{
	json_t *resp = NULL;
	int rc =
	    fs_call(st, id, "filesystem.Filesystem/ListDir",
		    json_pack("{s:s,s:i}", "path", path, "depth", 1), &resp, "list", path, err);
	if (rc == SBX_OK) {
		*entries = json_incref(json_object_get(resp, "entries"));
		if (!*entries)
			*entries = json_array();
	}
	json_decref(resp);
	return rc;
}

int e2b_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries, size_t *n,
		 sbx_error *err)
{
	json_t *arr = NULL;
	int rc = check_path(state, id, path, 1, "list", err);
	if (rc == SBX_OK)
		rc = list(state, id, path, &arr, err);
	if (rc != SBX_OK)
		return rc;
	size_t cnt = json_array_size(arr);
	sbx_file_info *out = sbxs_host->alloc((cnt ? cnt : 1) * sizeof(*out));
	if (!out) {
		json_decref(arr);
		return sbxs_host->set_error(err, SBX_E_NOMEM, "e2b: list: out of memory");
	}
	for (size_t i = 0; i < cnt; i++)
		entry_info(json_array_get(arr, i), &out[i]);
	json_decref(arr);
	*entries = out;
	*n = cnt;
	return SBX_OK;
}

int e2b_make_dir(void *state, const char *id, const char *path, uint32_t parents, sbx_error *err)
{
	sbx_file_info fi;
	sbx_error e = {0};
	int rc = check_path(state, id, path, 1, "mkdir", err);
	if (rc != SBX_OK)
		return rc;
	rc = e2b_stat_file(state, id, path, &fi, &e);
	if (rc == SBX_OK) {
		if (parents && fi.kind == SBX_FILE_DIR)
			return SBX_OK;
		return sbxs_host->set_error(err, SBX_E_EXISTS,
					    "e2b: mkdir: '%.200s' already exists", path);
	}
	if (rc != SBX_E_NO_FILE)
		return sbxs_host->set_error(err, rc, "%s", e.message);
	if (!parents) {
		/* envd's MakeDir always creates parents: check the parent first. */
		char parent[1024];
		int l = snprintf(parent, sizeof(parent), "%s", path);
		if (l < 0 || (size_t)l >= sizeof(parent))
			return sbxs_host->set_error(err, SBX_E_PATH, "e2b: mkdir: path too long");
		while (l > 1 && parent[l - 1] == '/')
			parent[--l] = '\0';
		char *slash = strrchr(parent, '/');
		if (slash) {
			if (slash == parent)
				slash[1] = '\0';
			else
				*slash = '\0';
			rc = e2b_stat_file(state, id, parent, &fi, &e);
			if (rc == SBX_E_NO_FILE)
				return sbxs_host->set_error(
				    err, rc,
				    "e2b: mkdir '%.200s': parent '%.200s' does "
				    "not exist (make parents to create it)",
				    path, parent);
			if (rc != SBX_OK)
				return sbxs_host->set_error(err, rc, "%s", e.message);
			if (fi.kind != SBX_FILE_DIR)
				return sbxs_host->set_error(
				    err, SBX_E_PATH, "e2b: mkdir: '%.200s' is not a directory",
				    parent);
		}
	}
	json_t *resp = NULL;
	rc = fs_call(state, id, "filesystem.Filesystem/MakeDir", json_pack("{s:s}", "path", path),
		     &resp, "mkdir", path, err);
	json_decref(resp);
	return rc;
}

int e2b_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
		    sbx_error *err)
{
	sbx_file_info fi;
	int rc = check_path(state, id, path, 0, "remove", err);
	if (rc == SBX_OK)
		rc = e2b_stat_file(state, id, path, &fi, err);
	if (rc != SBX_OK)
		return rc;
	if (fi.kind == SBX_FILE_DIR && !recursive) {
		json_t *arr = NULL;
		if ((rc = list(state, id, path, &arr, err)) != SBX_OK)
			return rc;
		size_t cnt = json_array_size(arr);
		json_decref(arr);
		if (cnt)
			return sbxs_host->set_error(
			    err, SBX_E_IO, "e2b: remove: directory '%.200s' is not empty", path);
	}
	json_t *resp = NULL;
	rc = fs_call(state, id, "filesystem.Filesystem/Remove", json_pack("{s:s}", "path", path),
		     &resp, "remove", path, err);
	json_decref(resp);
	return rc;
}

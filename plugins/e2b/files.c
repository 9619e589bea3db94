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
#include <sbx/support/random.h>

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

/* An EntryInfo's type, by name or number: 1 file, 2 directory, 3 symlink, 0 anything else. */
static long entry_type(json_t *e)
{
	json_t *t = json_object_get(e, "type");
	const char *name = json_string_value(t);
	if (!name)
		return json_is_integer(t) ? (long)json_integer_value(t) : 0;
	return strcmp(name, "FILE_TYPE_FILE") == 0        ? 1
	       : strcmp(name, "FILE_TYPE_DIRECTORY") == 0 ? 2
	       : strcmp(name, "FILE_TYPE_SYMLINK") == 0   ? 3
							  : 0;
}

/* What a Go os.FileMode string (EntryInfo's permissions: "prw-r--r--", "Dcrw-rw-rw-") says
 * an entry that is no regular file, folder or symlink is: its type letters come before the
 * nine permission ones. */
static const char *other_kind(const char *perms)
{
	if (!perms)
		return "not a regular file";
	size_t n = strlen(perms);
	size_t k = n > 9 ? n - 9 : 0;
	return memchr(perms, 'p', k)   ? "a FIFO"
	       : memchr(perms, 'c', k) ? "a character device"
	       : memchr(perms, 'D', k) ? "a block device"
	       : memchr(perms, 'S', k) ? "a socket"
				       : "not a regular file";
}

/* What regular_target found. */
typedef struct regular {
	int exists;      /* 0: nothing there (or a link to nothing) */
	uint64_t size;   /* when it exists */
	uint32_t mode;   /* its permission bits */
	char path[2048]; /* the file itself: the link's resolved target, else the path asked for */
} regular;

/* The file a read or write of path touches, looked at before envd opens it (envd would
 * open a FIFO and block, read a device without end, write through a hard link): SBX_OK with
 * f->exists 0 when there is none, else what f holds; SBX_E_INVAL for a folder, FIFO, device
 * or socket. envd's Stat reports a symlink's target type and its resolved path. */
static int regular_target(e2b_state *st, const char *id, const char *path, const char *op,
			  regular *f, sbx_error *err)
{
	json_t *resp = NULL;
	char code[32];
	memset(f, 0, sizeof(*f));
	if (snprintf(f->path, sizeof(f->path), "%s", path) >= (int)sizeof(f->path))
		return sbxs_host->set_error(err, SBX_E_PATH, "e2b: %s: '%.200s': path too long", op,
					    path);
	json_t *req = json_pack("{s:s}", "path", path);
	if (!req)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", op);
	int rc = e2b_unary(st, id, "filesystem.Filesystem/Stat", req, &resp, code, op, err);
	json_decref(req);
	if (rc == SBX_E_BACKEND && strcmp(code, "not_found") == 0)
		return SBX_OK;
	if (rc != SBX_OK)
		return rc;
	json_t *e = json_object_get(resp, "entry");
	long type = entry_type(e);
	const char *perms = json_string_value(json_object_get(e, "permissions"));
	const char *link = json_string_value(json_object_get(e, "symlinkTarget"));
	int is_link = perms && perms[0] == 'L';
	if (type == 3) {
		/* An older envd named a link so, with its raw target: envd's to follow. */
		json_decref(resp);
		return SBX_OK;
	}
	if (is_link && (!link || link[0] != '/' || strcmp(link, path) == 0)) {
		/* A link envd could not resolve: it leads nowhere. */
		json_decref(resp);
		return SBX_OK;
	}
	if (type == 2) {
		rc = sbxs_host->set_error(err, SBX_E_INVAL, "e2b: %s: '%.300s' is a directory", op,
					  path);
	} else if (type != 1) {
		/* A symlink's own permissions say nothing of its target's kind: ask for it. */
		const char *kind = other_kind(perms);
		json_t *treq = is_link ? json_pack("{s:s}", "path", link) : NULL, *tresp = NULL;
		if (treq && e2b_unary(st, id, "filesystem.Filesystem/Stat", treq, &tresp, code, op,
				      NULL) == SBX_OK)
			kind = other_kind(json_string_value(
			    json_object_get(json_object_get(tresp, "entry"), "permissions")));
		json_decref(treq);
		json_decref(tresp);
		rc = sbxs_host->set_error(err, SBX_E_INVAL,
					  "e2b: %s: '%.300s' is %s; only regular files can be "
					  "read or written",
					  op, path, kind);
	} else {
		f->exists = 1;
		json_t *sz = json_object_get(e, "size"), *m = json_object_get(e, "mode");
		f->size = json_is_integer(sz)  ? (uint64_t)json_integer_value(sz)
			  : json_is_string(sz) ? strtoull(json_string_value(sz), NULL, 10)
					       : 0;
		f->mode = (uint32_t)(json_is_integer(m) ? json_integer_value(m) : 0644) & 07777;
		if (is_link &&
		    snprintf(f->path, sizeof(f->path), "%s", link) >= (int)sizeof(f->path))
			rc = sbxs_host->set_error(err, SBX_E_PATH,
						  "e2b: %s: '%.200s': path too long", op, path);
	}
	json_decref(resp);
	return rc;
}

int e2b_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		  sbx_error *err)
{
	e2b_state *st = state;
	sbxs_http_resp r = {0};
	regular f;
	int rc = check_path(st, id, path, 1, "read", err);
	if (rc == SBX_OK)
		rc = regular_target(st, id, path, "read", &f, err);
	if (rc == SBX_OK && f.exists && f.size > st->max_file_bytes)
		rc = sbxs_host->set_error(err, SBX_E_LIMIT,
					  "e2b: read: '%.300s' is larger than max_file_bytes (%llu "
					  "bytes)",
					  path, (unsigned long long)st->max_file_bytes);
	/* A file that is not there (anymore) is envd's to report. */
	if (rc == SBX_OK)
		rc = e2b_files(st, id, path, NULL, 0, &r, "read", err);
	if (rc == SBX_OK) {
		*data = sbxs_buf_take(&r.body, len);
		if (!*data)
			rc = sbxs_nomem(err, E2B_ALIAS, "read");
	}
	sbxs_http_resp_free(&r);
	return rc;
}

/* Removes a temporary file a failed write left. */
static void drop_temp(e2b_state *st, const char *id, const char *tmp)
{
	json_t *resp = NULL;
	char code[32];
	json_t *req = json_pack("{s:s}", "path", tmp);
	if (req)
		e2b_unary(st, id, "filesystem.Filesystem/Remove", req, &resp, code, "write", NULL);
	json_decref(req);
	json_decref(resp);
}

/* envd writes a file in place (O_TRUNC): through a hard link, and half-written when it
 * fails. So the bytes go to a temporary file beside the target, which Move (a rename)
 * then puts in its place. */
int e2b_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		   uint32_t mode, sbx_error *err)
{
	e2b_state *st = state;
	sbxs_http_resp r = {0};
	char tmp[2200], rnd[17];
	regular f;
	int rc = check_path(st, id, path, 1, "write", err);
	if (rc == SBX_OK)
		rc = regular_target(st, id, path, "write", &f, err);
	if (rc != SBX_OK)
		return rc;
	const char *target = f.path;
	/* Mode 0 keeps an existing file's mode, as the file it replaces had it. */
	uint32_t m = mode ? mode & 07777 : f.exists ? f.mode : 0644;
	if (sbxs_random_hex(rnd, sizeof(rnd), 8) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_IO, "e2b: write: no randomness");
	const char *slash = strrchr(target, '/');
	const char *base = slash ? slash + 1 : target;
	int dir_len = slash ? (int)(slash - target + 1) : 0;
	if (!*base || snprintf(tmp, sizeof(tmp), "%.*s.%s.sbx-%s", dir_len, target, base, rnd) >=
			  (int)sizeof(tmp))
		return sbxs_host->set_error(err, SBX_E_PATH, "e2b: write: '%.200s' names no file",
					    path);
	rc = e2b_files(st, id, tmp, data ? data : "", len, &r, "write", err);
	sbxs_http_resp_free(&r);
	if (rc != SBX_OK)
		return rc;
	if (m != 0644) {
		char ms[16];
		snprintf(ms, sizeof(ms), "%04o", (unsigned)m);
		const char *argv[] = {"chmod", ms, "--", tmp, NULL};
		int code = 0;
		rc = e2b_process_simple(st, id, argv, &code, err);
		if (rc == SBX_OK && code != 0)
			rc = sbxs_host->set_error(err, SBX_E_IO,
						  "e2b: write '%.200s': chmod %s failed (%d)", path,
						  ms, code);
	}
	json_t *resp = NULL;
	if (rc == SBX_OK)
		rc = fs_call(st, id, "filesystem.Filesystem/Move",
			     json_pack("{s:s,s:s}", "source", tmp, "destination", target), &resp,
			     "write", path, err);
	json_decref(resp);
	if (rc != SBX_OK)
		drop_temp(st, id, tmp);
	return rc;
}

static void entry_info(json_t *e, sbx_file_info *fi)
{
	memset(fi, 0, sizeof(*fi));
	SBX_INIT_HEADER(*fi);
	long tv = entry_type(e);
	fi->kind = tv == 1   ? SBX_FILE_REGULAR
		   : tv == 2 ? SBX_FILE_DIR
		   : tv == 3 ? SBX_FILE_SYMLINK
			     : SBX_FILE_OTHER;
	/* envd gives a symlink its target's type; its own mode string starts with L. */
	const char *perms = json_string_value(json_object_get(e, "permissions"));
	if (perms && perms[0] == 'L')
		fi->kind = SBX_FILE_SYMLINK;
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

/* Files in a container through the archive endpoints (GET/PUT/HEAD
 * /containers/{id}/archive); directories are made and removed by a short exec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "docker.h"

#define host sbx__dk_host

int sbx__dk_path(const dk_state *st, const char *path, char *buf, size_t cap, const char *op,
		 sbx_error *err)
{
	if (!path || !*path)
		return host->set_error(err, SBX_E_PATH, "docker: %s: empty path", op);
	int rel = path[0] != '/';
	for (const char *p = path; *p;) {
		size_t l = strcspn(p, "/");
		if (rel && l == 2 && p[0] == '.' && p[1] == '.')
			return host->set_error(
			    err, SBX_E_PATH,
			    "docker: %s: '%.200s' leaves the work dir (no '..' in "
			    "relative paths)",
			    op, path);
		p += l;
		while (*p == '/')
			p++;
	}
	int n = rel ? snprintf(buf, cap, "%s/%s", st->working_dir, path)
		    : snprintf(buf, cap, "%s", path);
	if (n < 0 || (size_t)n >= cap)
		return host->set_error(err, SBX_E_PATH, "docker: %s: path is too long", op);
	/* No trailing slash: the archive endpoint treats "dir/" differently. */
	size_t l = strlen(buf);
	while (l > 1 && buf[l - 1] == '/')
		buf[--l] = '\0';
	return SBX_OK;
}

static int archive_path(const char *id, const char *p, char *out, size_t cap, sbx_error *err)
{
	char *esc = curl_easy_escape(NULL, p, 0);
	if (!esc)
		return host->set_error(err, SBX_E_NOMEM, "docker: out of memory");
	int n = snprintf(out, cap, "/containers/%s/archive?path=%s", id, esc);
	curl_free(esc);
	if (n < 0 || (size_t)n >= cap)
		return host->set_error(err, SBX_E_PATH, "docker: path is too long");
	return SBX_OK;
}

/* A 404 from the archive endpoint: the file or the whole container? */
static int missing(dk_state *st, const char *id, const char *op, const char *p, sbx_error *err)
{
	char path[160];
	dk_resp resp = {0};
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	int rc = sbx__dk_request(st, "GET", path, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK) {
		if (resp.status == 404)
			rc = host->set_error(err, SBX_E_NOT_FOUND,
					     "docker: %s: container %.64s not found", op, id);
		else
			rc = host->set_error(err, SBX_E_NO_FILE, "docker: %s: %.300s: no such file",
					     op, p);
	}
	sbx__dk_resp_free(&resp);
	return rc;
}

int sbx__dk_put_file(dk_state *st, const char *id, const char *dir, const char *name,
		     const void *data, size_t len, uint32_t mode, dk_resp *resp, sbx_error *err)
{
	void *tar = NULL;
	size_t tar_len = 0;
	char path[4400];
	int rc = archive_path(id, dir, path, sizeof(path), err);
	if (rc == SBX_OK)
		rc = sbx__dk_tar_one(name, data, len, mode, &tar, &tar_len, err);
	if (rc == SBX_OK)
		rc = sbx__dk_request(st, "PUT", path, "application/x-tar", tar, tar_len, resp, err);
	host->free(tar);
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

int sbx__dk_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		       uint32_t mode, sbx_error *err)
{
	dk_state *st = state;
	char full[4096], dir[4096];
	const char *name;
	dk_resp resp = {0};
	int rc;
	if ((rc = sbx__dk_id_check(id, "write", err)) != SBX_OK ||
	    (rc = sbx__dk_resolve(st, id, path, 1, full, sizeof(full), "write", err)) != SBX_OK)
		return rc;
	if (split(full, dir, sizeof(dir), &name) != SBX_OK)
		return host->set_error(err, SBX_E_PATH, "docker: write: '%.200s' names no file",
				       path);
	mode = mode ? mode : 0644;
	rc = sbx__dk_put_file(st, id, dir, name, data, len, mode, &resp, err);
	if (rc == SBX_OK && resp.status == 404) {
		/* Most likely the parent is missing: make it, then try again. */
		sbx__dk_resp_free(&resp);
		rc = sbx__dk_make_dir(st, id, dir, 1, err);
		if (rc == SBX_OK)
			rc = sbx__dk_put_file(st, id, dir, name, data, len, mode, &resp, err);
	}
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404)
		rc = missing(st, id, "write", full, err);
	else if (resp.status != 200) {
		char msg[300];
		sbx__dk_resp_message(&resp, msg, sizeof(msg));
		rc = host->set_error(err, resp.status == 403 ? SBX_E_PATH : SBX_E_IO,
				     "docker: write: %.300s: engine answered %ld: %s", full,
				     resp.status, msg);
	}
out:
	sbx__dk_resp_free(&resp);
	return rc;
}

static int get_archive(dk_state *st, const char *id, const char *full, const char *op,
		       dk_resp *resp, sbx_error *err)
{
	char path[4400];
	int rc = archive_path(id, full, path, sizeof(path), err);
	if (rc == SBX_OK)
		rc = sbx__dk_request(st, "GET", path, NULL, NULL, 0, resp, err);
	if (rc != SBX_OK)
		return rc;
	if (resp->status == 404)
		rc = missing(st, id, op, full, err);
	else if (resp->status != 200)
		rc = sbx__dk_http_error(resp, op, id, err);
	if (rc != SBX_OK)
		sbx__dk_resp_free(resp);
	return rc;
}

int sbx__dk_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		      sbx_error *err)
{
	dk_state *st = state;
	char full[4096], link[4096];
	int rc;
	if ((rc = sbx__dk_id_check(id, "read", err)) != SBX_OK ||
	    (rc = sbx__dk_resolve(st, id, path, 1, full, sizeof(full), "read", err)) != SBX_OK)
		return rc;
	/* The archive holds a symlink itself, not its target: follow a few by hand. */
	for (int hops = 0; hops < 8; hops++) {
		dk_resp resp = {0};
		if ((rc = get_archive(st, id, full, "read", &resp, err)) != SBX_OK)
			return rc;
		rc = sbx__dk_tar_first(resp.body, resp.len, full, data, len, link, sizeof(link),
				       err);
		sbx__dk_resp_free(&resp);
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
			return host->set_error(err, SBX_E_PATH,
					       "docker: read: %.200s: link too long", path);
		memcpy(full, next, (size_t)n + 1);
	}
	return host->set_error(err, SBX_E_PATH, "docker: read: %.200s: too many symlinks", path);
}

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Decodes base64 (standard or URL alphabet, padding optional). */
static size_t b64decode(const char *in, unsigned char *out, size_t cap)
{
	size_t n = 0;
	unsigned acc = 0;
	int bits = 0;
	for (; *in && *in != '='; in++) {
		int v = b64val((unsigned char)*in);
		if (v < 0)
			return 0;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n + 1 >= cap)
				return 0;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	out[n] = '\0';
	return n;
}

static int64_t parse_time(const char *s)
{
	struct tm tm = {0};
	int y, mo, d, h, mi, sec;
	if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &sec) != 6)
		return 0;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	int64_t t = (int64_t)timegm(&tm);
	/* An offset such as +01:00 after the seconds (and fraction). */
	const char *z = strpbrk(s + 19, "Z+-");
	if (z && *z != 'Z') {
		int oh = 0, om = 0;
		if (sscanf(z + 1, "%d:%d", &oh, &om) >= 1)
			t -= (*z == '+' ? 1 : -1) * (oh * 3600 + om * 60);
	}
	return t;
}

/* HEAD of the archive endpoint: the entry at `full` itself (a symlink is not followed).
 * SBX_E_NO_FILE (err untouched) when the engine answers 404; link[] gets linkTarget. */
int sbx__dk_stat_raw(dk_state *st, const char *id, const char *full, sbx_file_info *info,
		     char *link, size_t link_cap, sbx_error *err)
{
	char url[4400];
	unsigned char js[8192];
	dk_resp resp = {0};
	json_t *j = NULL;
	int rc = archive_path(id, full, url, sizeof(url), err);
	if (rc != SBX_OK)
		return rc;
	rc = sbx__dk_request(st, "HEAD", url, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		rc = SBX_E_NO_FILE;
		goto out;
	}
	if (resp.status != 200 || !resp.path_stat || !b64decode(resp.path_stat, js, sizeof(js)) ||
	    !(j = json_loads((const char *)js, 0, NULL))) {
		rc = resp.status != 200 ? sbx__dk_http_error(&resp, "stat", id, err)
					: host->set_error(err, SBX_E_BACKEND,
							  "docker: stat: %.200s: engine sent no "
							  "X-Docker-Container-Path-Stat",
							  full);
		goto out;
	}
	/* mode is a Go os.FileMode: type bits at the top, permissions at the bottom. */
	uint64_t mode = (uint64_t)json_integer_value(json_object_get(j, "mode"));
	uint32_t perm = (uint32_t)(mode & 0777);
	if (mode & (1u << 23))
		perm |= 04000;
	if (mode & (1u << 22))
		perm |= 02000;
	if (mode & (1u << 20))
		perm |= 01000;
	memset(info, 0, sizeof(*info));
	SBX_INIT_HEADER(*info);
	info->kind =
	    (mode & (1ull << 31))   ? SBX_FILE_DIR
	    : (mode & (1ull << 27)) ? SBX_FILE_SYMLINK
	    : (mode & ((1ull << 26) | (1ull << 25) | (1ull << 24) | (1ull << 21) | (1ull << 19)))
		? SBX_FILE_OTHER
		: SBX_FILE_REGULAR;
	info->mode = perm;
	info->size = (uint64_t)json_integer_value(json_object_get(j, "size"));
	info->mtime = parse_time(json_string_value(json_object_get(j, "mtime")));
	/* The engine names a symlink after its target: use the last component asked for. */
	const char *base = strrchr(full, '/');
	snprintf(info->name, sizeof(info->name), "%s", base && base[1] ? base + 1 : full);
	const char *t = json_string_value(json_object_get(j, "linkTarget"));
	if (link && link_cap)
		snprintf(link, link_cap, "%s", t ? t : "");
out:
	json_decref(j);
	sbx__dk_resp_free(&resp);
	return rc;
}

/* Collapses "//", "." and ".." of an absolute path in place. */
static void normalize(char *p)
{
	char out[4096];
	size_t o = 0;
	const char *s = p;
	while (*s) {
		while (*s == '/')
			s++;
		if (!*s)
			break;
		size_t l = strcspn(s, "/");
		if (l == 1 && s[0] == '.') {
			/* nothing */
		} else if (l == 2 && s[0] == '.' && s[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
		} else if (o + 1 + l < sizeof(out)) {
			out[o++] = '/';
			memcpy(out + o, s, l);
			o += l;
		}
		s += l;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	memcpy(p, out, o + 1);
}

static int beneath(const char *root, const char *p)
{
	size_t n = strlen(root);
	if (n == 1)
		return 1;
	return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int sbx__dk_resolve(dk_state *st, const char *id, const char *path, int follow_final, char *buf,
		    size_t cap, const char *op, sbx_error *err)
{
	int rc = sbx__dk_path(st, path, buf, cap, op, err);
	if (rc != SBX_OK || path[0] == '/')
		return rc;
	/* A relative path stays beneath the work dir even through symlinks: walk it one
	 * component at a time, as the kernel would, and check every link's target. */
	char cur[4096], rest[4096], link[4096];
	int hops = 0;
	snprintf(cur, sizeof(cur), "%s", st->working_dir);
	normalize(cur);
	snprintf(rest, sizeof(rest), "%s", buf + strlen(st->working_dir));
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
			return host->set_error(err, SBX_E_PATH, "docker: %s: path is too long", op);
		if (!*after && !follow_final) {
			memcpy(cur, next, (size_t)n + 1);
			break;
		}
		sbx_file_info fi;
		rc = sbx__dk_stat_raw(st, id, next, &fi, link, sizeof(link), err);
		if (rc == SBX_E_NO_FILE) {
			/* The rest does not exist yet: nothing to follow. */
			n = snprintf(cur, sizeof(cur), "%s%s%s", next, *after ? "/" : "", after);
			if (n < 0 || (size_t)n >= sizeof(cur))
				return host->set_error(err, SBX_E_PATH,
						       "docker: %s: path is too long", op);
			break;
		}
		if (rc != SBX_OK)
			return rc;
		if (fi.kind == SBX_FILE_SYMLINK) {
			if (++hops > 32)
				return host->set_error(err, SBX_E_PATH,
						       "docker: %s: '%.200s': too many symlinks",
						       op, path);
			char target[4096];
			if (link[0] == '/')
				n = snprintf(target, sizeof(target), "%s", link);
			else
				n = snprintf(target, sizeof(target), "%s/%s", cur, link);
			if (n < 0 || (size_t)n >= sizeof(target))
				return host->set_error(err, SBX_E_PATH,
						       "docker: %s: path is too long", op);
			normalize(target);
			if (!beneath(st->working_dir, target))
				return host->set_error(
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
	normalize(cur);
	if (strlen(cur) >= cap)
		return host->set_error(err, SBX_E_PATH, "docker: %s: path is too long", op);
	memcpy(buf, cur, strlen(cur) + 1);
	return SBX_OK;
}

int sbx__dk_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		      sbx_error *err)
{
	dk_state *st = state;
	char full[4096];
	int rc;
	if ((rc = sbx__dk_id_check(id, "stat", err)) != SBX_OK ||
	    (rc = sbx__dk_resolve(st, id, path, 0, full, sizeof(full), "stat", err)) != SBX_OK)
		return rc;
	rc = sbx__dk_stat_raw(st, id, full, info, NULL, 0, err);
	return rc == SBX_E_NO_FILE ? missing(st, id, "stat", full, err) : rc;
}

int sbx__dk_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		     size_t *n, sbx_error *err)
{
	dk_state *st = state;
	char full[4096];
	dk_resp resp = {0};
	int rc;
	if ((rc = sbx__dk_id_check(id, "list", err)) != SBX_OK ||
	    (rc = sbx__dk_resolve(st, id, path, 1, full, sizeof(full), "list", err)) != SBX_OK)
		return rc;
	if ((rc = get_archive(st, id, full, "list", &resp, err)) != SBX_OK)
		return rc;
	rc = sbx__dk_tar_list(resp.body, resp.len, full, entries, n, err);
	sbx__dk_resp_free(&resp);
	return rc;
}

/* Runs a file tool and turns a failure into a status, looking at what is there now. */
static int file_tool(dk_state *st, const char *id, const char *op, const char *full,
		     const char *const *argv, sbx_error *err)
{
	dk_capture cap;
	int rc = sbx__dk_run(st, id, argv, &cap, err);
	if (rc != SBX_OK || cap.exit_code == 0)
		return rc;
	for (size_t i = 0; i < cap.err_len; i++)
		if (cap.err[i] == '\n')
			cap.err[i] = ' ';
	sbx_file_info fi;
	int exists = sbx__dk_stat_raw(st, id, full, &fi, NULL, 0, NULL) == SBX_OK;
	int code = SBX_E_IO;
	if (strcmp(op, "mkdir") == 0 && exists)
		code = SBX_E_EXISTS;
	else if (!exists && strcmp(op, "mkdir") != 0)
		code = SBX_E_NO_FILE;
	else if (strcmp(op, "mkdir") == 0 && strstr(cap.err, "No such file"))
		code = SBX_E_NO_FILE;
	return host->set_error(err, code, "docker: %s: %.300s: %.150s", op, full,
			       cap.err_len ? cap.err : "failed");
}

int sbx__dk_make_dir(void *state, const char *id, const char *path, uint32_t parents,
		     sbx_error *err)
{
	char full[4096];
	int rc;
	if ((rc = sbx__dk_id_check(id, "mkdir", err)) != SBX_OK ||
	    (rc = sbx__dk_resolve(state, id, path, 1, full, sizeof(full), "mkdir", err)) != SBX_OK)
		return rc;
	const char *argv_p[] = {"mkdir", "-p", "--", full, NULL};
	const char *argv[] = {"mkdir", "--", full, NULL};
	return file_tool(state, id, "mkdir", full, parents ? argv_p : argv, err);
}

int sbx__dk_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
			sbx_error *err)
{
	char full[4096];
	sbx_file_info fi;
	int rc;
	if ((rc = sbx__dk_id_check(id, "remove", err)) != SBX_OK ||
	    (rc = sbx__dk_resolve(state, id, path, 0, full, sizeof(full), "remove", err)) != SBX_OK)
		return rc;
	if (strcmp(full, "/") == 0)
		return host->set_error(err, SBX_E_PATH, "docker: remove: refusing to remove /");
	rc = sbx__dk_stat_raw(state, id, full, &fi, NULL, 0, err);
	if (rc == SBX_E_NO_FILE)
		return missing(state, id, "remove", full, err);
	if (rc != SBX_OK)
		return rc;
	const char *argv_r[] = {"rm", "-rf", "--", full, NULL};
	const char *argv_d[] = {"rmdir", "--", full, NULL};
	const char *argv_f[] = {"rm", "-f", "--", full, NULL};
	const char *const *argv = recursive ? argv_r : fi.kind == SBX_FILE_DIR ? argv_d : argv_f;
	return file_tool(state, id, "remove", full, argv, err);
}

/* Files through envd: /files GET and POST (multipart) for contents, filesystem.Filesystem
 * Stat, ListDir, MakeDir and Remove (Connect unary, JSON) for the rest. Relative paths go to
 * envd as they are; it resolves them against the user's home. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b.h"

#define host sbx__e2_host

static int files_url(const e2_target *t, const char *path, char *url, size_t cap)
{
	char *esc = curl_easy_escape(NULL, path, 0);
	if (!esc)
		return SBX_E_NOMEM;
	int n = snprintf(url, cap, "%s/files?path=%s", t->base, esc);
	curl_free(esc);
	return n < 0 || (size_t)n >= cap ? SBX_E_PATH : SBX_OK;
}

static int files_error(const e2_resp *r, const char *what, const char *path, sbx_error *err)
{
	char msg[300];
	sbx__e2_message(r, msg, sizeof(msg));
	int code = r->status == 404   ? SBX_E_NO_FILE
		   : r->status == 400 ? SBX_E_PATH
		   : r->status == 502 ? SBX_E_NOT_FOUND
		   : r->status == 401 ? SBX_E_CONFIG
				      : SBX_E_IO;
	return host->set_error(err, code, "e2b: %s '%.200s': envd answered %ld: %s", what, path,
			       r->status, msg);
}

static int transfer(e2_state *st, const char *id, const char *path, const void *data, size_t len,
		    e2_resp *r, const char *what, sbx_error *err)
{
	e2_target t;
	char url[2048];
	struct curl_slist *hd = NULL;
	curl_mime *mime = NULL;
	CURL *c = NULL;
	int rc = sbx__e2_target(st, id, &t, err);
	if (rc != SBX_OK)
		return rc;
	if ((rc = files_url(&t, path, url, sizeof(url))) != SBX_OK)
		return host->set_error(err, rc, "e2b: %s '%.200s': path refused", what, path);
	hd = sbx__e2_envd_headers(&t, NULL, NULL);
	c = curl_easy_init();
	if (!hd || !c)
		goto nomem;
	for (int attempt = 0;; attempt++) {
		sbx__e2_resp_free(r);
		curl_easy_reset(c);
		sbx__e2_curl_common(c, st);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sbx__e2_collect);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(st->request_timeout * 1000));
		if (data) {
			curl_mime_free(mime);
			mime = curl_mime_init(c);
			curl_mimepart *part = mime ? curl_mime_addpart(mime) : NULL;
			if (!part || curl_mime_name(part, "file") != CURLE_OK ||
			    curl_mime_filename(part, path) != CURLE_OK ||
			    curl_mime_type(part, "application/octet-stream") != CURLE_OK ||
			    curl_mime_data(part, data, len) != CURLE_OK)
				goto nomem;
			curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
		}
		CURLcode cc = curl_easy_perform(c);
		if (r->oom)
			goto nomem;
		if (cc != CURLE_OK) {
			if (attempt < st->retries)
				continue;
			rc = host->set_error(err, SBX_E_UNREACHABLE, "e2b: %s '%.200s': envd: %s",
					     what, path, curl_easy_strerror(cc));
			goto out;
		}
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
		if ((r->status == 429 || r->status == 503) && attempt < st->retries)
			continue;
		break;
	}
	if (r->status != 200)
		rc = files_error(r, what, path, err);
	goto out;
nomem:
	rc = host->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
out:
	curl_mime_free(mime);
	curl_easy_cleanup(c);
	curl_slist_free_all(hd);
	return rc;
}

/* Appends component c (len n) to the absolute path in buf, resolving "." and ".."
 * lexically. Returns 0 when buf would overflow. */
static int join_component(char *buf, size_t cap, const char *c, size_t n)
{
	size_t l = strlen(buf);
	if (n == 0 || (n == 1 && c[0] == '.'))
		return 1;
	if (n == 2 && c[0] == '.' && c[1] == '.') {
		while (l > 1 && buf[l - 1] != '/')
			l--;
		if (l > 1)
			l--;
		buf[l] = '\0';
		return 1;
	}
	if (l + 1 + n + 1 > cap)
		return 0;
	if (l > 1)
		buf[l++] = '/';
	memcpy(buf + l, c, n);
	buf[l + n] = '\0';
	return 1;
}

static int within(const char *home, const char *p)
{
	size_t hl = strlen(home);
	return strncmp(p, home, hl) == 0 && (p[hl] == '\0' || p[hl] == '/' || hl == 1);
}

/* A relative path must stay beneath the work dir (the user's home), also through symlinks
 * (one level: a link's target is checked, not links inside that target). Absolute paths are
 * the sandbox's own and pass. follow_last: the last component is followed too. */
static int check_path(e2_state *st, const char *id, const char *path, int follow_last,
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
		if (!join_component(cur, sizeof(cur), c, n))
			goto refuse;
		c += n;
		c += *c == '/';
	}
	req = json_pack("{s:s}", "path", ".");
	if (!req)
		return host->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
	rc = sbx__e2_unary(st, id, "filesystem.Filesystem/Stat", req, &resp, code, what, err);
	json_decref(req);
	if (rc != SBX_OK)
		return rc;
	const char *h = json_string_value(json_object_get(json_object_get(resp, "entry"), "path"));
	if (!h || h[0] != '/' || snprintf(home, sizeof(home), "%s", h) >= (int)sizeof(home)) {
		json_decref(resp);
		return host->set_error(err, SBX_E_BACKEND, "e2b: %s: envd gave no home path", what);
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
		if (!join_component(cur, sizeof(cur), c, n))
			goto refuse;
		if (!within(home, cur))
			goto refuse;
		if (rel[0] && (!last || follow_last) && n && !(n == 1 && c[0] == '.') &&
		    !(n == 2 && c[0] == '.' && c[1] == '.')) {
			req = json_pack("{s:s}", "path", rel);
			if (!req)
				return host->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory",
						       what);
			rc = sbx__e2_unary(st, id, "filesystem.Filesystem/Stat", req, &resp, code,
					   what, NULL);
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
					if (!join_component(t, sizeof(t), x, m)) {
						json_decref(resp);
						goto refuse;
					}
					x += m;
					x += *x == '/';
				}
				if (!within(home, t)) {
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
	return host->set_error(err, SBX_E_PATH,
			       "e2b: %s: path '%.200s' leaves the work dir; give a path beneath it "
			       "or an absolute one",
			       what, path);
}

int sbx__e2_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		      sbx_error *err)
{
	e2_resp r = {0};
	int rc = check_path(state, id, path, 1, "read", err);
	if (rc == SBX_OK)
		rc = transfer(state, id, path, NULL, 0, &r, "read", err);
	if (rc == SBX_OK) {
		unsigned char *b = host->alloc(r.len + 1);
		if (!b) {
			rc = host->set_error(err, SBX_E_NOMEM, "e2b: read: out of memory");
		} else {
			if (r.len)
				memcpy(b, r.body, r.len);
			b[r.len] = '\0';
			*data = b;
			*len = r.len;
		}
	}
	sbx__e2_resp_free(&r);
	return rc;
}

int sbx__e2_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		       uint32_t mode, sbx_error *err)
{
	e2_resp r = {0};
	int rc = check_path(state, id, path, 1, "write", err);
	if (rc == SBX_OK)
		rc = transfer(state, id, path, data ? data : "", len, &r, "write", err);
	sbx__e2_resp_free(&r);
	if (rc != SBX_OK || mode == 0 || mode == 0644)
		return rc;
	char m[16];
	snprintf(m, sizeof(m), "%04o", (unsigned)(mode & 07777));
	const char *argv[] = {"chmod", m, "--", path, NULL};
	int code = 0;
	rc = sbx__e2_run_simple(state, id, argv, &code, err);
	if (rc == SBX_OK && code != 0)
		rc = host->set_error(err, SBX_E_IO, "e2b: write '%.200s': chmod %s failed (%d)",
				     path, m, code);
	return rc;
}

static int64_t parse_time(const char *s)
{
	struct tm tm = {0};
	int y, mo, d, hh, mm, ss;
	if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &hh, &mm, &ss) != 6)
		return 0;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = hh;
	tm.tm_min = mm;
	tm.tm_sec = ss;
	return (int64_t)timegm(&tm);
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
	fi->mtime = parse_time(json_string_value(json_object_get(e, "modifiedTime")));
	const char *name = json_string_value(json_object_get(e, "name"));
	snprintf(fi->name, sizeof(fi->name), "%s", name ? name : "");
}

static int fs_call(e2_state *st, const char *id, const char *method, json_t *req, json_t **resp,
		   const char *what, const char *path, sbx_error *err)
{
	char code[32];
	if (!req)
		return host->set_error(err, SBX_E_NOMEM, "e2b: %s: out of memory", what);
	int rc = sbx__e2_unary(st, id, method, req, resp, code, what, err);
	json_decref(req);
	if (rc == SBX_E_BACKEND && strcmp(code, "not_found") == 0)
		rc = host->set_error(err, SBX_E_NO_FILE, "e2b: %s: no such file '%.200s'", what,
				     path);
	else if (rc == SBX_E_BACKEND && strcmp(code, "already_exists") == 0)
		rc = host->set_error(err, SBX_E_EXISTS, "e2b: %s: '%.200s' already exists", what,
				     path);
	else if (rc == SBX_E_BACKEND && strcmp(code, "invalid_argument") == 0)
		rc = host->set_error(err, SBX_E_PATH, "e2b: %s: path '%.200s' refused", what, path);
	return rc;
}

int sbx__e2_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
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

static int list(e2_state *st, const char *id, const char *path, json_t **entries, sbx_error *err)
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

int sbx__e2_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		     size_t *n, sbx_error *err)
{
	json_t *arr = NULL;
	int rc = check_path(state, id, path, 1, "list", err);
	if (rc == SBX_OK)
		rc = list(state, id, path, &arr, err);
	if (rc != SBX_OK)
		return rc;
	size_t cnt = json_array_size(arr);
	sbx_file_info *out = host->alloc((cnt ? cnt : 1) * sizeof(*out));
	if (!out) {
		json_decref(arr);
		return host->set_error(err, SBX_E_NOMEM, "e2b: list: out of memory");
	}
	for (size_t i = 0; i < cnt; i++)
		entry_info(json_array_get(arr, i), &out[i]);
	json_decref(arr);
	*entries = out;
	*n = cnt;
	return SBX_OK;
}

int sbx__e2_make_dir(void *state, const char *id, const char *path, uint32_t parents,
		     sbx_error *err)
{
	sbx_file_info fi;
	sbx_error e = {0};
	int rc = check_path(state, id, path, 1, "mkdir", err);
	if (rc != SBX_OK)
		return rc;
	rc = sbx__e2_stat_file(state, id, path, &fi, &e);
	if (rc == SBX_OK) {
		if (parents && fi.kind == SBX_FILE_DIR)
			return SBX_OK;
		return host->set_error(err, SBX_E_EXISTS, "e2b: mkdir: '%.200s' already exists",
				       path);
	}
	if (rc != SBX_E_NO_FILE)
		return host->set_error(err, rc, "%s", e.message);
	if (!parents) {
		/* envd's MakeDir always creates parents: check the parent first. */
		char parent[1024];
		int l = snprintf(parent, sizeof(parent), "%s", path);
		if (l < 0 || (size_t)l >= sizeof(parent))
			return host->set_error(err, SBX_E_PATH, "e2b: mkdir: path too long");
		while (l > 1 && parent[l - 1] == '/')
			parent[--l] = '\0';
		char *slash = strrchr(parent, '/');
		if (slash) {
			if (slash == parent)
				slash[1] = '\0';
			else
				*slash = '\0';
			rc = sbx__e2_stat_file(state, id, parent, &fi, &e);
			if (rc == SBX_E_NO_FILE)
				return host->set_error(err, rc,
						       "e2b: mkdir '%.200s': parent '%.200s' does "
						       "not exist (make parents to create it)",
						       path, parent);
			if (rc != SBX_OK)
				return host->set_error(err, rc, "%s", e.message);
			if (fi.kind != SBX_FILE_DIR)
				return host->set_error(err, SBX_E_PATH,
						       "e2b: mkdir: '%.200s' is not a directory",
						       parent);
		}
	}
	json_t *resp = NULL;
	rc = fs_call(state, id, "filesystem.Filesystem/MakeDir", json_pack("{s:s}", "path", path),
		     &resp, "mkdir", path, err);
	json_decref(resp);
	return rc;
}

int sbx__e2_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
			sbx_error *err)
{
	sbx_file_info fi;
	int rc = check_path(state, id, path, 0, "remove", err);
	if (rc == SBX_OK)
		rc = sbx__e2_stat_file(state, id, path, &fi, err);
	if (rc != SBX_OK)
		return rc;
	if (fi.kind == SBX_FILE_DIR && !recursive) {
		json_t *arr = NULL;
		if ((rc = list(state, id, path, &arr, err)) != SBX_OK)
			return rc;
		size_t cnt = json_array_size(arr);
		json_decref(arr);
		if (cnt)
			return host->set_error(
			    err, SBX_E_IO, "e2b: remove: directory '%.200s' is not empty", path);
	}
	json_t *resp = NULL;
	rc = fs_call(state, id, "filesystem.Filesystem/Remove", json_pack("{s:s}", "path", path),
		     &resp, "remove", path, err);
	json_decref(resp);
	return rc;
}

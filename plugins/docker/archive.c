/* The archive endpoints (see archive.h). */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <sbx/support/base64.h>
#include <sbx/support/clock.h>
#include <sbx/support/host.h>

#include "archive.h"
#include "tarball.h"

static int archive_path(const char *id, const char *p, char *out, size_t cap, sbx_error *err)
{
	char *esc = curl_easy_escape(NULL, p, 0);
	if (!esc)
		return sbxs_nomem(err, DOCKER_ALIAS, "archive");
	int n = snprintf(out, cap, "/containers/%s/archive?path=%s", id, esc);
	curl_free(esc);
	if (n < 0 || (size_t)n >= cap)
		return sbxs_host->set_error(err, SBX_E_PATH, "docker: path is too long");
	return SBX_OK;
}

int docker_missing(docker_engine *e, const char *id, const char *op, const char *path,
		   sbx_error *err)
{
	char url[160];
	docker_resp resp = {0};
	snprintf(url, sizeof(url), "/containers/%s/json", id);
	int rc = docker_request(e, "GET", url, NULL, NULL, 0, &resp, err);
	if (rc == SBX_OK) {
		if (resp.status == 404)
			rc = sbxs_host->set_error(err, SBX_E_NOT_FOUND,
						  "docker: %s: container %.64s not found", op, id);
		else
			rc = sbxs_host->set_error(err, SBX_E_NO_FILE,
						  "docker: %s: %.300s: no such file", op, path);
	}
	docker_resp_free(&resp);
	return rc;
}

int docker_put_file(docker_engine *e, const char *id, const char *dir, const char *name,
		    const void *data, size_t len, uint32_t mode, docker_resp *resp, sbx_error *err)
{
	void *tar = NULL;
	size_t tar_len = 0;
	char path[4400];
	memset(resp, 0, sizeof(*resp));
	int rc = archive_path(id, dir, path, sizeof(path), err);
	if (rc == SBX_OK)
		rc = docker_tar_one(name, data, len, mode ? mode : 0644, &tar, &tar_len, err);
	if (rc == SBX_OK)
		rc = docker_request(e, "PUT", path, "application/x-tar", tar, tar_len, resp, err);
	sbxs_host->free(tar);
	return rc;
}

int docker_get_archive(docker_engine *e, const char *id, const char *full, const char *op,
		       uint64_t max, docker_resp *resp, sbx_error *err)
{
	char path[4400];
	memset(resp, 0, sizeof(*resp));
	int rc = archive_path(id, full, path, sizeof(path), err);
	if (rc == SBX_OK)
		rc = docker_get_max(e, path, max + DOCKER_TAR_SLACK, resp, err);
	if (rc == SBX_E_LIMIT)
		return sbxs_host->set_error(
		    err, SBX_E_LIMIT,
		    "docker: %s: '%.300s' is larger than max_file_bytes "
		    "(%llu bytes)%s",
		    op, full, (unsigned long long)max,
		    strcmp(op, "list") == 0 ? " in all: list a folder below it" : "");
	if (rc != SBX_OK)
		return rc;
	if (resp->status == 404)
		rc = docker_missing(e, id, op, full, err);
	else if (resp->status != 200)
		rc = docker_http_error(resp, op, id, err);
	if (rc != SBX_OK)
		docker_resp_free(resp);
	return rc;
}

/* The stat header's mode is a Go os.FileMode: type bits at the top, permissions at the
 * bottom. */
static void fill_info(json_t *j, const char *full, sbx_file_info *info)
{
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
	int64_t mtime = 0;
	if (sbxs_rfc3339(json_string_value(json_object_get(j, "mtime")), &mtime, NULL) != SBX_OK)
		mtime = 0;
	info->mtime = mtime;
	/* The engine names a symlink after its target: use the last component asked for. */
	const char *base = strrchr(full, '/');
	snprintf(info->name, sizeof(info->name), "%s", base && base[1] ? base + 1 : full);
}

/* Names the kind of a Go os.FileMode that is no regular file, folder or symlink. */
static const char *mode_what(uint64_t mode)
{
	if (mode & (1ull << 25))
		return "a FIFO";
	if (mode & (1ull << 24))
		return "a socket";
	if (mode & (1ull << 21))
		return "a character device";
	if (mode & (1ull << 26))
		return "a block device";
	return "not a regular file";
}

static int stat_entry(docker_engine *e, const char *id, const char *full, sbx_file_info *info,
		      char *link, size_t link_cap, const char **what, sbx_error *err)
{
	char url[4400];
	unsigned char js[8192];
	size_t jl = 0;
	docker_resp resp = {0};
	json_t *j = NULL;
	int rc = archive_path(id, full, url, sizeof(url), err);
	if (rc != SBX_OK)
		return rc;
	rc = docker_request(e, "HEAD", url, NULL, NULL, 0, &resp, err);
	if (rc != SBX_OK)
		return rc;
	if (resp.status == 404) {
		rc = SBX_E_NO_FILE;
		goto out;
	}
	if (resp.status != 200) {
		rc = docker_http_error(&resp, "stat", id, err);
		goto out;
	}
	if (!resp.path_stat ||
	    sbxs_base64_decode(resp.path_stat, strlen(resp.path_stat), js, sizeof(js), &jl) !=
		SBX_OK ||
	    !(j = json_loadb((const char *)js, jl, 0, NULL))) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "docker: stat: %.200s: engine sent no "
					  "X-Docker-Container-Path-Stat",
					  full);
		goto out;
	}
	fill_info(j, full, info);
	const char *t = json_string_value(json_object_get(j, "linkTarget"));
	if (link && link_cap)
		snprintf(link, link_cap, "%s", t ? t : "");
	if (what)
		*what = info->kind == SBX_FILE_OTHER
			    ? mode_what((uint64_t)json_integer_value(json_object_get(j, "mode")))
			    : NULL;
out:
	json_decref(j);
	docker_resp_free(&resp);
	return rc;
}

int docker_stat_raw(docker_engine *e, const char *id, const char *full, sbx_file_info *info,
		    char *link, size_t link_cap, sbx_error *err)
{
	return stat_entry(e, id, full, info, link, link_cap, NULL, err);
}

int docker_stat_what(docker_engine *e, const char *id, const char *full, sbx_file_info *info,
		     const char **what, sbx_error *err)
{
	*what = NULL;
	return stat_entry(e, id, full, info, NULL, 0, what, err);
}

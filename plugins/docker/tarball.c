/* Tar archives for the Engine's archive endpoints, built and read with libarchive over
 * memory (see tarball.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <archive.h>
#include <archive_entry.h>

#include <sbx/support/host.h>

#include "tarball.h"

typedef struct membuf {
	unsigned char *data;
	size_t len, cap;
	int failed;
} membuf;

static la_ssize_t mem_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
	(void)a;
	membuf *m = ctx;
	if (m->len + n > m->cap) {
		size_t cap = m->cap ? m->cap : 16384;
		while (cap < m->len + n)
			cap *= 2;
		unsigned char *d = sbxs_host->realloc(m->data, cap);
		if (!d) {
			m->failed = 1;
			return -1;
		}
		m->data = d;
		m->cap = cap;
	}
	memcpy(m->data + m->len, buf, n);
	m->len += n;
	return (la_ssize_t)n;
}

int docker_tar_one(const char *name, const void *data, size_t len, uint32_t mode, void **tar,
		   size_t *tar_len, sbx_error *err)
{
	membuf m = {0};
	int rc = SBX_OK;
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	if (!a || !e)
		goto nomem;
	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open2(a, &m, NULL, mem_write, NULL, NULL) != ARCHIVE_OK)
		goto fail;
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, mode & 07777);
	archive_entry_set_size(e, (la_int64_t)len);
	archive_entry_set_mtime(e, time(NULL), 0);
	if (archive_write_header(a, e) != ARCHIVE_OK)
		goto fail;
	if (len && archive_write_data(a, data, len) != (la_ssize_t)len)
		goto fail;
	if (archive_write_close(a) != ARCHIVE_OK)
		goto fail;
	*tar = m.data;
	*tar_len = m.len;
	m.data = NULL;
	goto out;
nomem:
	rc = sbxs_host->set_error(err, SBX_E_NOMEM, "docker: write: out of memory");
	goto out;
fail:
	rc = m.failed ? sbxs_host->set_error(err, SBX_E_NOMEM, "docker: write: out of memory")
		      : sbxs_host->set_error(err, SBX_E_IO, "docker: write: tar: %s",
					     archive_error_string(a) ? archive_error_string(a)
								     : "error");
out:
	sbxs_host->free(m.data);
	archive_entry_free(e);
	archive_write_free(a);
	return rc;
}

/* What a tar entry that is no regular file, folder or symlink is, for messages. */
static const char *other_kind(mode_t type)
{
	switch (type) {
	case AE_IFIFO:
		return "a FIFO";
	case AE_IFSOCK:
		return "a socket";
	case AE_IFCHR:
		return "a character device";
	case AE_IFBLK:
		return "a block device";
	default:
		return "not a regular file";
	}
}

int docker_tar_first(const void *tar, size_t tar_len, const char *path, uint64_t max, void **data,
		     size_t *len, char *link, size_t link_cap, sbx_error *err)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	unsigned char *buf = NULL;
	int rc = SBX_OK;
	if (!a)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "docker: read: out of memory");
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar, tar_len) != ARCHIVE_OK ||
	    archive_read_next_header(a, &e) != ARCHIVE_OK) {
		rc = sbxs_host->set_error(err, SBX_E_IO,
					  "docker: read: %.200s: engine sent no tar entry", path);
		goto out;
	}
	if (archive_entry_filetype(e) == AE_IFDIR) {
		rc = sbxs_host->set_error(err, SBX_E_INVAL, "docker: read: %.200s is a directory",
					  path);
		goto out;
	}
	if (archive_entry_filetype(e) == AE_IFLNK) {
		const char *t = archive_entry_symlink(e);
		if (!t || snprintf(link, link_cap, "%s", t) >= (int)link_cap) {
			rc = sbxs_host->set_error(err, SBX_E_PATH,
						  "docker: read: %.200s: bad symlink", path);
			goto out;
		}
		rc = SBX_E_EXISTS;
		goto out;
	}
	if (archive_entry_filetype(e) != AE_IFREG) {
		rc = sbxs_host->set_error(err, SBX_E_INVAL,
					  "docker: read: '%.200s' is %s; only regular files can be "
					  "read or written",
					  path, other_kind(archive_entry_filetype(e)));
		goto out;
	}
	la_int64_t size = archive_entry_size(e);
	if (size < 0) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "docker: read: %.200s: bad size", path);
		goto out;
	}
	if ((uint64_t)size > max) {
		rc = sbxs_host->set_error(err, SBX_E_LIMIT,
					  "docker: read: '%.200s' is larger than max_file_bytes "
					  "(%llu > %llu bytes)",
					  path, (unsigned long long)size, (unsigned long long)max);
		goto out;
	}
	/* The content is in the archive: a size past it is a lie, not a reason to allocate. */
	if ((uint64_t)size > tar_len) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "docker: read: %.200s: truncated tar",
					  path);
		goto out;
	}
	buf = sbxs_host->alloc((size_t)size + 1);
	if (!buf) {
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "docker: read: out of memory");
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)size) {
		la_ssize_t n = archive_read_data(a, buf + got, (size_t)size - got);
		if (n <= 0) {
			rc = sbxs_host->set_error(err, SBX_E_IO,
						  "docker: read: %.200s: truncated tar", path);
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	*data = buf;
	*len = got;
	buf = NULL;
out:
	sbxs_host->free(buf);
	archive_read_free(a);
	return rc;
}

static uint32_t kind_of(mode_t type)
{
	switch (type) {
	case AE_IFREG:
		return SBX_FILE_REGULAR;
	case AE_IFDIR:
		return SBX_FILE_DIR;
	case AE_IFLNK:
		return SBX_FILE_SYMLINK;
	default:
		return SBX_FILE_OTHER;
	}
}

int docker_tar_list(const void *tar, size_t tar_len, const char *path, sbx_file_info **entries,
		    size_t *n, sbx_error *err)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	sbx_file_info *list = NULL;
	size_t count = 0, cap = 0;
	int rc = SBX_OK, r, first = 1;
	if (!a)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "docker: list: out of memory");
	archive_read_support_format_tar(a);
	if (archive_read_open_memory(a, tar, tar_len) != ARCHIVE_OK) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "docker: list: %.200s: bad tar", path);
		goto out;
	}
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		if (!name)
			continue;
		while (name[0] == '.' && name[1] == '/')
			name += 2;
		if (first) {
			first = 0;
			if (archive_entry_filetype(e) != AE_IFDIR) {
				rc = sbxs_host->set_error(err, SBX_E_INVAL,
							  "docker: list: %.200s is not a directory",
							  path);
				goto out;
			}
			continue;
		}
		/* Entries directly below the top: "top/name" or "top/name/". */
		const char *slash = strchr(name, '/');
		if (!slash || !slash[1])
			continue;
		const char *rest = slash + 1;
		size_t l = strcspn(rest, "/");
		if (l == 0 || (rest[l] && rest[l + 1]))
			continue; /* "top//": no name; "top/a/b": not directly below */
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			sbx_file_info *nl = sbxs_host->realloc(list, ncap * sizeof(*nl));
			if (!nl) {
				rc = sbxs_host->set_error(err, SBX_E_NOMEM,
							  "docker: list: out of memory");
				goto out;
			}
			list = nl;
			cap = ncap;
		}
		sbx_file_info *fi = &list[count++];
		memset(fi, 0, sizeof(*fi));
		SBX_INIT_HEADER(*fi);
		fi->kind = kind_of(archive_entry_filetype(e));
		fi->mode = archive_entry_perm(e) & 07777;
		fi->size = fi->kind == SBX_FILE_REGULAR ? (uint64_t)archive_entry_size(e) : 0;
		fi->mtime = (int64_t)archive_entry_mtime(e);
		snprintf(fi->name, sizeof(fi->name), "%.*s", (int)(l < 255 ? l : 255), rest);
	}
	if (r != ARCHIVE_EOF) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "docker: list: %.200s: %s", path,
					  archive_error_string(a) ? archive_error_string(a)
								  : "bad tar");
		goto out;
	}
	if (first) {
		rc = sbxs_host->set_error(err, SBX_E_IO,
					  "docker: list: %.200s: engine sent no tar entry", path);
		goto out;
	}
	if (!list) {
		list = sbxs_host->alloc(sizeof(*list));
		if (!list) {
			rc = sbxs_host->set_error(err, SBX_E_NOMEM, "docker: list: out of memory");
			goto out;
		}
	}
	*entries = list;
	*n = count;
	list = NULL;
out:
	sbxs_host->free(list);
	archive_read_free(a);
	return rc;
}

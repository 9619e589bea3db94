/* Applying an image's layers to one folder, bottom layer first.
 *
 * Each layer is a tar stream inside the archive (read through a second libarchive reader fed
 * from the first, hashed on the way to check its digest). Its members are written with
 * archive_write_disk under the folder's real path, after checks of our own that refuse the
 * whole import: a name that is absolute or holds "..", a hard link whose target does, and a
 * name whose folders are not all real folders (a symlink made by a lower layer must never be
 * followed: "etc -> /etc" then "etc/passwd" would write the host's). Whiteouts follow the OCI
 * layer format: ".wh.NAME" removes NAME, ".wh..wh..opq" empties its folder of what lower
 * layers put there. Device nodes are skipped (every sandbox gets its own /dev). Without root,
 * owners are not restored and folders keep their owner's rwx, so later layers and gc can write
 * and remove beneath them. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "image_read.h"
#include "image_unpack.h"
#include "state.h"

#define WH     ".wh."
#define WH_OPQ ".wh..wh..opq"

/* Paths the current layer wrote: an opaque whiteout keeps them. */
typedef struct name_set {
	char **slot;
	size_t cap, n;
} name_set;

static size_t hash(const char *s)
{
	size_t h = 14695981039346656037ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int set_add(name_set *s, const char *name)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		char **slot = calloc(cap, sizeof(*slot));
		if (!slot)
			return -1;
		for (size_t i = 0; i < s->cap; i++) {
			if (!s->slot[i])
				continue;
			size_t k = hash(s->slot[i]) & (cap - 1);
			while (slot[k])
				k = (k + 1) & (cap - 1);
			slot[k] = s->slot[i];
		}
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	size_t k = hash(name) & (s->cap - 1);
	for (; s->slot[k]; k = (k + 1) & (s->cap - 1))
		if (strcmp(s->slot[k], name) == 0)
			return 0;
	if (!(s->slot[k] = strdup(name)))
		return -1;
	s->n++;
	return 0;
}

static int set_has(const name_set *s, const char *name)
{
	if (!s->cap)
		return 0;
	for (size_t k = hash(name) & (s->cap - 1); s->slot[k]; k = (k + 1) & (s->cap - 1))
		if (strcmp(s->slot[k], name) == 0)
			return 1;
	return 0;
}

static void set_free(name_set *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

/* A member name made relative ("./a//b" -> "a/b"); -1 when it is absolute or holds "..". */
static int relative_name(const char *in, char *out, size_t cap)
{
	if (in[0] == '/')
		return -1;
	size_t k = 0;
	for (const char *r = in; *r;) {
		while (*r == '/')
			r++;
		const char *end = strchr(r, '/');
		size_t len = end ? (size_t)(end - r) : strlen(r);
		if (len == 2 && r[0] == '.' && r[1] == '.')
			return -1;
		if (len && !(len == 1 && r[0] == '.')) {
			if (k + len + 2 > cap)
				return -1;
			if (k)
				out[k++] = '/';
			memcpy(out + k, r, len);
			k += len;
		}
		r += len;
	}
	out[k] = '\0';
	return 0;
}

/* Opens the folder `dir` (relative, clean) beneath rootfd, making missing folders; every
 * component must be a real folder. Returns the fd or -errno (-ELOOP for a symlink). */
static int open_dir(int rootfd, const char *dir, int make)
{
	int fd = dup(rootfd);
	if (fd < 0)
		return -errno;
	char part[4096];
	for (const char *r = dir; *r;) {
		const char *end = strchr(r, '/');
		size_t len = end ? (size_t)(end - r) : strlen(r);
		snprintf(part, sizeof(part), "%.*s", (int)len, r);
		int next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && make) {
			if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) {
				int e = errno;
				close(fd);
				return -e;
			}
			next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		int e = errno;
		close(fd);
		if (next < 0)
			return -(e == ENOTDIR ? ELOOP : e);
		fd = next;
		r += len;
		while (*r == '/')
			r++;
	}
	return fd;
}

static void split(const char *name, char *dir, size_t cap, const char **base)
{
	const char *slash = strrchr(name, '/');
	snprintf(dir, cap, "%.*s", slash ? (int)(slash - name) : 0, name);
	*base = slash ? slash + 1 : name;
}

typedef struct layer_ctx {
	const char *archive_path, *layer, *root;
	int rootfd;
	name_set written;
	struct archive *disk;
	int as_root;
	sbx_error *err;
} layer_ctx;

static int refuse(layer_ctx *c, const char *name, const char *why)
{
	return sbxs_host->set_error(
	    c->err, SBX_E_PATH,
	    "local: image archive %s: layer %.100s: member '%.300s' %s (import "
	    "refused)",
	    c->archive_path, c->layer, name, why);
}

/* ".wh..wh..opq" (the member `name`) in dir: what lower layers put in dir goes. */
static int opaque(layer_ctx *c, const char *name, const char *dir)
{
	int fd = open_dir(c->rootfd, dir, 1);
	if (fd < 0)
		return fd == -ELOOP
			   ? refuse(c, name, "goes through a symlink")
			   : sbxs_host->set_error(c->err, SBX_E_IO, "local: image: %s/%s: %s",
						  c->root, dir, strerror(-fd));
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return sbxs_host->set_error(c->err, SBX_E_IO, "local: image: %s", strerror(errno));
	}
	int rc = SBX_OK;
	struct dirent *e;
	while (rc == SBX_OK && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char path[4400];
		int n = snprintf(path, sizeof(path), "%s%s%s", dir, dir[0] ? "/" : "", e->d_name);
		if (n < 0 || (size_t)n >= sizeof(path) || set_has(&c->written, path))
			continue;
		int r = local_rmtree_at(dirfd(d), e->d_name);
		if (r != 0 && r != ENOENT)
			rc = sbxs_host->set_error(c->err, SBX_E_IO,
						  "local: image: cannot remove %s/%s: %s", c->root,
						  path, strerror(r));
	}
	closedir(d);
	return rc;
}

/* ".wh.NAME" (the member `member`) in dir: NAME goes. */
static int whiteout(layer_ctx *c, const char *member, const char *dir, const char *name)
{
	int fd = open_dir(c->rootfd, dir, 0);
	if (fd == -ENOENT)
		return SBX_OK;
	if (fd < 0)
		return fd == -ELOOP
			   ? refuse(c, member, "goes through a symlink")
			   : sbxs_host->set_error(c->err, SBX_E_IO, "local: image: %s/%s: %s",
						  c->root, dir, strerror(-fd));
	int r =
	    strcmp(name, ".") && strcmp(name, "..") && name[0] ? local_rmtree_at(fd, name) : EINVAL;
	close(fd);
	if (r != 0 && r != ENOENT)
		return sbxs_host->set_error(c->err, SBX_E_IO,
					    "local: image: cannot remove %s/%s/%s: %s", c->root,
					    dir, name, strerror(r));
	return SBX_OK;
}

/* Makes room for the member: its folders exist and are real, and what it replaces is gone
 * when the kinds differ (a file over a folder, a folder over a file or link). */
static int make_room(layer_ctx *c, const char *name, const char *dir, const char *base, int is_dir)
{
	int fd = open_dir(c->rootfd, dir, 1);
	if (fd < 0)
		return fd == -ELOOP
			   ? refuse(c, name, "goes through a symlink")
			   : sbxs_host->set_error(c->err, SBX_E_IO, "local: image: %s/%s: %s",
						  c->root, dir, strerror(-fd));
	struct stat sb;
	int rc = SBX_OK;
	if (fstatat(fd, base, &sb, AT_SYMLINK_NOFOLLOW) == 0 && (S_ISDIR(sb.st_mode) != is_dir)) {
		int r = local_rmtree_at(fd, base);
		if (r != 0 && r != ENOENT)
			rc = sbxs_host->set_error(c->err, SBX_E_IO,
						  "local: image: cannot replace %s/%s: %s", c->root,
						  name, strerror(r));
	}
	close(fd);
	return rc;
}

static int copy_data(layer_ctx *c, struct archive *in, const char *name)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	int r;
	while ((r = archive_read_data_block(in, &buf, &size, &off)) == ARCHIVE_OK)
		if (archive_write_data_block(c->disk, buf, size, off) != ARCHIVE_OK)
			return sbxs_host->set_error(c->err, SBX_E_IO,
						    "local: image: writing %s/%s: %s", c->root,
						    name, archive_error_string(c->disk));
	if (r != ARCHIVE_EOF)
		return sbxs_host->set_error(c->err, SBX_E_IO,
					    "local: image archive %s: layer %.100s: %s",
					    c->archive_path, c->layer, archive_error_string(in));
	return SBX_OK;
}

static int apply_entry(layer_ctx *c, struct archive *in, struct archive_entry *e)
{
	const char *raw = archive_entry_pathname(e);
	char name[4096], dir[4096], full[8300];
	const char *base;
	if (!raw || relative_name(raw, name, sizeof(name)) != 0)
		return refuse(c, raw ? raw : "", "is absolute or leaves the root");
	if (!name[0])
		return SBX_OK; /* the root itself */
	split(name, dir, sizeof(dir), &base);
	if (strcmp(base, WH_OPQ) == 0)
		return opaque(c, name, dir);
	if (strncmp(base, WH, strlen(WH)) == 0)
		return whiteout(c, name, dir, base + strlen(WH));
	mode_t type = archive_entry_filetype(e);
	if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK)
		return SBX_OK;
	const char *link = archive_entry_hardlink(e);
	if (link) {
		char target[4096];
		if (relative_name(link, target, sizeof(target)) != 0 || !target[0])
			return refuse(c, raw, "is a hard link out of the root");
		int fd = -1;
		char tdir[4096];
		const char *tbase;
		split(target, tdir, sizeof(tdir), &tbase);
		if ((fd = open_dir(c->rootfd, tdir, 0)) < 0)
			return fd == -ELOOP ? refuse(c, raw, "links through a symlink")
					    : refuse(c, raw, "links to a member not yet written");
		close(fd);
		snprintf(full, sizeof(full), "%s/%s", c->root, target);
		archive_entry_set_hardlink(e, full);
	}
	int rc = make_room(c, name, dir, base, type == AE_IFDIR);
	if (rc != SBX_OK)
		return rc;
	if (set_add(&c->written, name) != 0)
		return sbxs_host->set_error(c->err, SBX_E_NOMEM, "local: image: out of memory");
	if (type == AE_IFDIR && !c->as_root)
		archive_entry_set_perm(e, archive_entry_perm(e) | 0700);
	snprintf(full, sizeof(full), "%s/%s", c->root, name);
	archive_entry_set_pathname(e, full);
	int w = archive_write_header(c->disk, e);
	if (w != ARCHIVE_OK && w != ARCHIVE_WARN)
		return sbxs_host->set_error(
		    c->err, w == ARCHIVE_FAILED ? SBX_E_PATH : SBX_E_IO,
		    "local: image archive %s: layer %.100s: member '%.300s': %s", c->archive_path,
		    c->layer, raw, archive_error_string(c->disk));
	if (archive_entry_size(e) > 0 && type == AE_IFREG && (rc = copy_data(c, in, name)) != 0)
		return rc;
	if (archive_write_finish_entry(c->disk) < ARCHIVE_WARN)
		return sbxs_host->set_error(c->err, SBX_E_IO, "local: image: %s/%s: %s", c->root,
					    name, archive_error_string(c->disk));
	return SBX_OK;
}

/* The inner reader pulls the layer's bytes from the outer one, hashing them. */
typedef struct feed {
	struct archive *outer;
	EVP_MD_CTX *sha;
	char buf[1 << 16];
} feed;

static la_ssize_t feed_read(struct archive *a, void *arg, const void **out)
{
	(void)a;
	feed *f = arg;
	la_ssize_t n = archive_read_data(f->outer, f->buf, sizeof(f->buf));
	if (n > 0)
		EVP_DigestUpdate(f->sha, f->buf, (size_t)n);
	*out = f->buf;
	return n;
}

/* Reads the rest of the member (tar padding the inner reader left) into the hash; the hex
 * digest into out. */
static void feed_finish(feed *f, char out[IMG_HEX + 1])
{
	la_ssize_t n;
	while ((n = archive_read_data(f->outer, f->buf, sizeof(f->buf))) > 0)
		EVP_DigestUpdate(f->sha, f->buf, (size_t)n);
	unsigned char md[32];
	unsigned int len = 0;
	EVP_DigestFinal_ex(f->sha, md, &len);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int apply_layer(layer_ctx *c, struct archive *outer, const char *want_sha,
		       const char *diff_id)
{
	feed *f = malloc(sizeof(*f));
	struct archive *in = archive_read_new();
	int rc = SBX_OK;
	if (!f || !in || !(f->sha = EVP_MD_CTX_new())) {
		free(f);
		archive_read_free(in);
		return sbxs_host->set_error(c->err, SBX_E_NOMEM, "local: image: out of memory");
	}
	f->outer = outer;
	EVP_DigestInit_ex(f->sha, EVP_sha256(), NULL);
	archive_read_support_filter_all(in);
	archive_read_support_format_tar(in);
	if (archive_read_open(in, f, NULL, feed_read, NULL) != ARCHIVE_OK) {
		rc = sbxs_host->set_error(c->err, SBX_E_IO,
					  "local: image archive %s: layer %.100s: %s",
					  c->archive_path, c->layer, archive_error_string(in));
		goto out;
	}
	struct archive_entry *e;
	int r;
	while (rc == SBX_OK &&
	       ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN))
		rc = apply_entry(c, in, e);
	if (rc == SBX_OK && r != ARCHIVE_EOF)
		rc = sbxs_host->set_error(c->err, SBX_E_IO,
					  "local: image archive %s: layer %.100s: %s",
					  c->archive_path, c->layer, archive_error_string(in));
	int compressed = archive_filter_count(in) > 1;
	char got[IMG_HEX + 1];
	feed_finish(f, got);
	const char *want = want_sha[0] ? want_sha : compressed ? "" : diff_id;
	if (rc == SBX_OK && want[0] && strcmp(got, want) != 0)
		rc = sbxs_host->set_error(
		    c->err, SBX_E_IO,
		    "local: image archive %s: layer %.100s hashes to sha256:%s, not "
		    "sha256:%s",
		    c->archive_path, c->layer, got, want);
out:
	EVP_MD_CTX_free(f->sha);
	free(f);
	archive_read_free(in);
	return rc;
}

/* One pass over the archive to the layer's member, then the layer itself. */
static int unpack_layer(layer_ctx *c, const img_plan *img, size_t i)
{
	struct archive *outer = archive_read_new();
	if (!outer)
		return sbxs_host->set_error(c->err, SBX_E_NOMEM, "local: image: out of memory");
	archive_read_support_filter_all(outer);
	archive_read_support_format_tar(outer);
	int rc = SBX_OK, found = 0;
	if (archive_read_open_filename(outer, c->archive_path, 1 << 16) != ARCHIVE_OK) {
		rc = sbxs_host->set_error(c->err, SBX_E_IO, "local: image archive %s: %s",
					  c->archive_path, archive_error_string(outer));
		goto out;
	}
	struct archive_entry *e;
	int r;
	while ((r = archive_read_next_header(outer, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *p = archive_entry_pathname(e);
		char clean[4096];
		if (!p || relative_name(p, clean, sizeof(clean)) != 0 ||
		    strcmp(clean, c->layer) != 0)
			continue;
		found = 1;
		rc = apply_layer(c, outer, img->layer_sha[i], img->diff_id[i]);
		break;
	}
	if (rc == SBX_OK && !found)
		rc = sbxs_host->set_error(c->err, SBX_E_IO,
					  "local: image archive %s: layer %.200s is missing",
					  c->archive_path, c->layer);
out:
	archive_read_free(outer);
	return rc;
}

int local_img_unpack(const char *path, const img_plan *img, const char *root, sbx_error *err)
{
	layer_ctx c = {.archive_path = path, .root = root, .err = err, .as_root = geteuid() == 0};
	c.rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.rootfd < 0)
		return sbxs_host->set_error(err, SBX_E_IO, "local: image: cannot open %s: %s", root,
					    strerror(errno));
	/* Numeric owners only: the host's user names say nothing about the image's. */
	int flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_UNLINK |
		    ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT;
	if (c.as_root)
		flags |= ARCHIVE_EXTRACT_OWNER;
	int rc = SBX_OK;
	for (size_t i = 0; rc == SBX_OK && i < img->n_layers; i++) {
		/* A writer per layer: closing it sets the folder modes and times it deferred
		 * before the next layer writes beneath them. */
		if (!(c.disk = archive_write_disk_new())) {
			rc = sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
			break;
		}
		archive_write_disk_set_options(c.disk, flags);
		c.layer = img->layers[i];
		rc = unpack_layer(&c, img, i);
		set_free(&c.written);
		if (archive_write_close(c.disk) != ARCHIVE_OK && rc == SBX_OK)
			rc = sbxs_host->set_error(err, SBX_E_IO, "local: image: finishing %s: %s",
						  root, archive_error_string(c.disk));
		archive_write_free(c.disk);
		c.disk = NULL;
	}
	close(c.rootfd);
	return rc;
}

/* `image: NAME` for the isolated level: an image archive (`docker save`, `podman save`, OCI)
 * unpacked once into a content-addressed cache, whose tree the sandboxes mount read-only under
 * an overlay of their own.
 *
 * NAME is an archive's absolute path, or a reference ("busybox", "python:3.11",
 * "localhost/x:1") looked up among the archives of the `image_archives` folder by the names
 * they carry (RepoTags, OCI ref annotations), so a data source moves between docker and local
 * by changing its type. The cache (`image_cache`, default <root>/.images) holds
 *   sha256/<config digest>/rootfs  the unpacked tree, env (the image's Env, NUL-separated)
 *   archives/<sha256 of the archive's path>  what an archive holds (digests and names), valid
 *                                 while the archive's size, mtime and inode are unchanged
 * An import runs under sha256/<digest>.lock into tmp/<pid>-<digest> and is renamed into
 * place, so a killed import leaves nothing a later one could take for finished. */
#ifdef SBX_LOCAL_IMAGES
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "image.h"
#include "image_read.h"
#include "image_unpack.h"
#include "state.h"

#define INDEX_MAGIC "sbx-image-index 1"

typedef struct idx_entry {
	char digest[IMG_HEX + 1];
	char name[600]; /* "" for an image without a name */
} idx_entry;

typedef struct img_index {
	idx_entry *v;
	size_t n;
} img_index;

static int mkdirs(const char *path)
{
	char buf[1400];
	int n = snprintf(buf, sizeof(buf), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return errno;
		*p = '/';
	}
	return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : errno;
}

/* A name too long for an entry is left out: no reference is that long. */
static int idx_add(img_index *x, const char *digest, const char *name)
{
	size_t dl = strlen(digest), nl = strlen(name);
	if (dl != IMG_HEX || nl >= sizeof(x->v[0].name))
		return 0;
	idx_entry *v = realloc(x->v, (x->n + 1) * sizeof(*v));
	if (!v)
		return -1;
	x->v = v;
	memcpy(v[x->n].digest, digest, dl + 1);
	memcpy(v[x->n].name, name, nl + 1);
	x->n++;
	return 0;
}

static void stamp(const struct stat *sb, char *buf, size_t cap)
{
	snprintf(buf, cap, INDEX_MAGIC " %lld %lld %ld %llu %llu\n", (long long)sb->st_size,
		 (long long)sb->st_mtim.tv_sec, (long)sb->st_mtim.tv_nsec,
		 (unsigned long long)sb->st_ino, (unsigned long long)sb->st_dev);
}

/* The index of the archive when it is still valid for it; -1 otherwise. */
static int index_load(const char *file, const struct stat *sb, img_index *x)
{
	char want[200], line[800];
	stamp(sb, want, sizeof(want));
	FILE *f = fopen(file, "re");
	if (!f)
		return -1;
	int rc = fgets(line, sizeof(line), f) && strcmp(line, want) == 0 ? 0 : -1;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strlen(line) < IMG_HEX + 1 || line[IMG_HEX] != ' ') {
			rc = -1;
			break;
		}
		line[IMG_HEX] = '\0';
		if (idx_add(x, line, line + IMG_HEX + 1) != 0)
			rc = -1;
	}
	fclose(f);
	if (rc != 0) {
		free(x->v);
		x->v = NULL;
		x->n = 0;
	}
	return rc;
}

static int index_save(const char *file, const struct stat *sb, const img_index *x)
{
	char tmp[1500], head[200];
	snprintf(tmp, sizeof(tmp), "%s.%ld", file, (long)getpid());
	stamp(sb, head, sizeof(head));
	FILE *f = fopen(tmp, "we");
	if (!f)
		return -1;
	fputs(head, f);
	for (size_t i = 0; i < x->n; i++)
		fprintf(f, "%s %s\n", x->v[i].digest, x->v[i].name);
	if (fclose(f) != 0 || rename(tmp, file) != 0) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

typedef struct found {
	char archive[PATH_MAX];
	char digest[IMG_HEX + 1];
	img_archive parsed; /* when this call read the archive (n 0 otherwise) */
} found;

/* What the archive at path holds: from its index when current, else read (and indexed). */
static int archive_index(const local_state *st, const char *path, img_index *x, found *f,
			 sbx_error *err)
{
	struct stat sb;
	char real[PATH_MAX], key[IMG_HEX + 1], file[1400];
	if (!realpath(path, real) || stat(real, &sb) != 0)
		return sbxs_host->set_error(err, errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
					    "local: image archive %s: %s", path, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "local: image archive %s is not a file", path);
	local_img_sha256_hex(real, strlen(real), key);
	snprintf(file, sizeof(file), "%s/archives/%s", st->iso.image_cache, key);
	snprintf(f->archive, sizeof(f->archive), "%s", real);
	if (index_load(file, &sb, x) == 0)
		return SBX_OK;
	int rc = local_img_read(real, &f->parsed, err);
	for (size_t i = 0; rc == SBX_OK && i < f->parsed.n; i++) {
		const img_plan *p = &f->parsed.images[i];
		if (idx_add(x, p->digest, "") != 0)
			rc = sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
		for (size_t k = 0; rc == SBX_OK && k < p->n_names; k++)
			if (idx_add(x, p->digest, p->names[k]) != 0)
				rc = sbxs_host->set_error(err, SBX_E_NOMEM,
							  "local: image: out of memory");
	}
	if (rc == SBX_OK && index_save(file, &sb, x) != 0)
		sbxs_host->log(SBX_LOG_WARN, "local", "cannot write the image index %s: %s", file,
			       strerror(errno));
	return rc;
}

static void index_reset(img_index *x, found *f)
{
	free(x->v);
	x->v = NULL;
	x->n = 0;
	local_img_archive_free(&f->parsed);
}

/* The one image of the archive at `path`. */
static int by_path(const local_state *st, const char *path, found *f, sbx_error *err)
{
	img_index x = {0};
	int rc = archive_index(st, path, &x, f, err);
	if (rc != SBX_OK)
		return rc;
	for (size_t i = 0; i < x.n; i++) {
		if (i > 0 && strcmp(x.v[i].digest, x.v[0].digest) != 0) {
			rc = sbxs_host->set_error(
			    err, SBX_E_CONFIG,
			    "local: image archive %s holds several images: put it in "
			    "the image_archives folder and name one",
			    path);
			break;
		}
	}
	if (rc == SBX_OK)
		snprintf(f->digest, sizeof(f->digest), "%s", x.v[0].digest);
	free(x.v);
	return rc;
}

/* The image named `ref` among the archives of the image_archives folder. */
static int by_name(const local_state *st, const char *ref, found *f, sbx_error *err)
{
	char want[600];
	local_img_normalise(ref, want, sizeof(want));
	if (!st->iso.image_dir[0])
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "local: image '%.200s' is no archive path, and no "
					    "image_archives folder is configured to look it up in",
					    ref);
	struct dirent **names = NULL;
	int n = scandir(st->iso.image_dir, &names, NULL, alphasort);
	if (n < 0)
		return sbxs_host->set_error(err, SBX_E_CONFIG, "local: image_archives %s: %s",
					    st->iso.image_dir, strerror(errno));
	int rc = SBX_OK, hit = 0, looked = 0;
	for (int i = 0; i < n && rc == SBX_OK && !hit; i++) {
		char path[1400];
		struct stat sb;
		snprintf(path, sizeof(path), "%s/%s", st->iso.image_dir, names[i]->d_name);
		if (names[i]->d_name[0] == '.' || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;
		img_index x = {0};
		sbx_error ignored = {0};
		looked++;
		if (archive_index(st, path, &x, f, &ignored) != SBX_OK) {
			sbxs_host->log(SBX_LOG_WARN, "local", "skipping %s: %s", path,
				       ignored.message);
			index_reset(&x, f);
			continue;
		}
		for (size_t k = 0; k < x.n && !hit; k++)
			if (strcmp(x.v[k].name, want) == 0) {
				snprintf(f->digest, sizeof(f->digest), "%s", x.v[k].digest);
				hit = 1;
			}
		free(x.v);
		if (!hit)
			local_img_archive_free(&f->parsed);
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (!hit)
		return sbxs_host->set_error(
		    err, SBX_E_NOT_FOUND,
		    "local: image '%.200s' (%s) is in none of the %d archives of %s", ref, want,
		    looked, st->iso.image_dir);
	return SBX_OK;
}

/* The image's Env as NUL-separated "K=V" strings into root's sibling file env. */
static int write_env(const img_plan *p, const char *dir, sbx_error *err)
{
	char path[1500];
	snprintf(path, sizeof(path), "%s/env", dir);
	json_t *c = json_loadb(p->config, p->config_len, 0, NULL);
	json_t *env = json_object_get(json_object_get(c, "config"), "Env");
	FILE *f = fopen(path, "we");
	int ok = f != NULL;
	for (size_t i = 0; ok && i < json_array_size(env); i++) {
		const char *kv = json_string_value(json_array_get(env, i));
		if (kv && strchr(kv, '=') && kv[0] != '=')
			ok = fwrite(kv, strlen(kv) + 1, 1, f) == 1;
	}
	if (f && fclose(f) != 0)
		ok = 0;
	json_decref(c);
	return ok ? SBX_OK
		  : sbxs_host->set_error(err, SBX_E_IO, "local: image: cannot write %s: %s", path,
					 strerror(errno));
}

/* tmp/<pid>-<digest> folders whose importer died. */
static void sweep_tmp(const char *tmpdir)
{
	DIR *d = opendir(tmpdir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end = NULL;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || !end || *end != '-' || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		local_rmtree_at(dirfd(d), e->d_name);
	}
	closedir(d);
}

static int import(const local_state *st, found *f, const char *final, sbx_error *err)
{
	const img_plan *p = NULL;
	int rc = SBX_OK;
	if (f->parsed.n == 0)
		rc = local_img_read(f->archive, &f->parsed, err);
	for (size_t i = 0; rc == SBX_OK && i < f->parsed.n && !p; i++)
		if (strcmp(f->parsed.images[i].digest, f->digest) == 0)
			p = &f->parsed.images[i];
	if (rc != SBX_OK)
		return rc;
	if (!p)
		return sbxs_host->set_error(
		    err, SBX_E_IO, "local: image archive %s changed while read", f->archive);
	char tmpdir[1300], tmp[1400], root[1500], real[PATH_MAX];
	snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", st->iso.image_cache);
	sweep_tmp(tmpdir);
	snprintf(tmp, sizeof(tmp), "%s/%ld-%s", tmpdir, (long)getpid(), f->digest);
	snprintf(root, sizeof(root), "%s/rootfs", tmp);
	local_rmtree(tmp);
	if (mkdir(tmp, 0755) != 0 || mkdir(root, 0755) != 0 || !realpath(root, real))
		return sbxs_host->set_error(err, SBX_E_IO, "local: image: cannot make %s: %s", root,
					    strerror(errno));
	sbxs_host->log(SBX_LOG_INFO, "local", "importing image %s from %s", f->digest, f->archive);
	rc = local_img_unpack(f->archive, p, real, err);
	if (rc == SBX_OK)
		rc = write_env(p, tmp, err);
	if (rc == SBX_OK && rename(tmp, final) != 0 && errno != EEXIST && errno != ENOTEMPTY)
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: image: cannot move %s to %s: %s",
					  tmp, final, strerror(errno));
	local_rmtree(tmp);
	return rc;
}

int local_image_rootfs(const local_state *st, const char *image, char *buf, size_t cap,
		       sbx_error *err)
{
	buf[0] = '\0';
	static const char *const sub[] = {"sha256", "archives", "tmp"};
	for (size_t i = 0; i < 3; i++) {
		char dir[1300];
		snprintf(dir, sizeof(dir), "%s/%s", st->iso.image_cache, sub[i]);
		int e = mkdirs(dir);
		if (e != 0)
			return sbxs_host->set_error(err, SBX_E_IO, "local: image cache %s: %s", dir,
						    strerror(e));
	}
	found *f = calloc(1, sizeof(*f));
	if (!f)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "local: image: out of memory");
	int rc = image[0] == '/' ? by_path(st, image, f, err) : by_name(st, image, f, err);
	char final[1300], lock[1400];
	snprintf(final, sizeof(final), "%s/sha256/%s", st->iso.image_cache, f->digest);
	snprintf(lock, sizeof(lock), "%s.lock", final);
	int lfd = -1;
	struct stat sb;
	if (rc == SBX_OK && stat(final, &sb) != 0) {
		lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (lfd < 0 || flock(lfd, LOCK_EX) != 0)
			rc = sbxs_host->set_error(err, SBX_E_IO, "local: image: lock %s: %s", lock,
						  strerror(errno));
		else if (stat(final, &sb) != 0)
			rc = import(st, f, final, err);
	}
	if (rc == SBX_OK) {
		int n = snprintf(buf, cap, "%s/rootfs", final);
		if (n < 0 || (size_t)n >= cap)
			rc = sbxs_host->set_error(err, SBX_E_INVAL,
						  "local: image cache path too long");
	}
	if (lfd >= 0)
		close(lfd);
	local_img_archive_free(&f->parsed);
	free(f);
	return rc;
}

int local_image_env_copy(const char *rootfs, const char *sandbox_dir, sbx_error *err)
{
	char from[1300], to[1300], buf[65536];
	snprintf(from, sizeof(from), "%.*s/env", (int)(strrchr(rootfs, '/') - rootfs), rootfs);
	snprintf(to, sizeof(to), "%s/env.image", sandbox_dir);
	int in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return errno == ENOENT ? SBX_OK
				       : sbxs_host->set_error(err, SBX_E_IO, "local: image: %s: %s",
							      from, strerror(errno));
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ssize_t r = 0;
	int ok = out >= 0;
	while (ok && (r = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, (size_t)r) == r;
	int e = errno;
	close(in);
	if (out >= 0 && close(out) != 0)
		ok = 0;
	return ok && r == 0
		   ? SBX_OK
		   : sbxs_host->set_error(err, SBX_E_IO, "local: image: cannot copy %s to %s: %s",
					  from, to, strerror(e));
}

int local_image_supported(void)
{
	return 1;
}

#else /* no libarchive or libcrypto */

#include "image.h"
#include "state.h"

int local_image_rootfs(const local_state *st, const char *image, char *buf, size_t cap,
		       sbx_error *err)
{
	(void)st;
	(void)cap;
	buf[0] = '\0';
	return sbxs_host->set_error(err, SBX_E_UNSUPPORTED,
				    "local: image '%.200s': this sbx was built without "
				    "libarchive or libcrypto, which image archives need",
				    image);
}

int local_image_env_copy(const char *rootfs, const char *sandbox_dir, sbx_error *err)
{
	(void)rootfs;
	(void)sandbox_dir;
	(void)err;
	return SBX_OK;
}

int local_image_supported(void)
{
	return 0;
}

#endif

/* File operations confined to a sandbox's work dir. Every path is resolved beneath the work
 * dir with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so `..` and symlinks that lead
 * outside are refused by the kernel; where openat2 is missing (ENOSYS) a component walk with
 * O_NOFOLLOW does the same job in user space. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files.h"
#include "meta.h"
#include "state.h"

#define MAX_LINKS 40

/* A walk without openat2: splits the path, follows relative symlinks by splicing their target
 * into the rest, refuses absolute targets and any `..` above the root. */
static int walk_open(int root, const char *rel, int flags, mode_t mode)
{
	char rest[8192], resolved[8192] = "";
	int n = snprintf(rest, sizeof(rest), "%s", rel);
	if (n < 0 || (size_t)n >= sizeof(rest))
		return -ENAMETOOLONG;
	int links = 0;
	for (;;) {
		char *p = rest;
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *slash = strchr(p, '/');
		size_t clen = slash ? (size_t)(slash - p) : strlen(p);
		char comp[256];
		if (clen >= sizeof(comp))
			return -ENAMETOOLONG;
		memcpy(comp, p, clen);
		comp[clen] = '\0';
		const char *after = slash ? slash : "";
		int last = !slash || after[strspn(after, "/")] == '\0';
		char tail[8192];
		snprintf(tail, sizeof(tail), "%s", after);
		if (strcmp(comp, ".") == 0) {
			memmove(rest, tail, strlen(tail) + 1);
			continue;
		}
		if (strcmp(comp, "..") == 0) {
			char *cut = strrchr(resolved, '/');
			if (!resolved[0])
				return -EXDEV;
			if (cut)
				*cut = '\0';
			else
				resolved[0] = '\0';
			memmove(rest, tail, strlen(tail) + 1);
			continue;
		}
		int dfd = resolved[0] ? openat(root, resolved, O_PATH | O_DIRECTORY | O_CLOEXEC)
				      : dup(root);
		if (dfd < 0)
			return -errno;
		char target[4096];
		ssize_t tl = readlinkat(dfd, comp, target, sizeof(target) - 1);
		if (tl >= 0) {
			close(dfd);
			target[tl] = '\0';
			if (target[0] == '/' || ++links > MAX_LINKS)
				return target[0] == '/' ? -EXDEV : -ELOOP;
			char next[8192];
			n = snprintf(next, sizeof(next), "%s%s", target, tail);
			if (n < 0 || (size_t)n >= sizeof(next))
				return -ENAMETOOLONG;
			memcpy(rest, next, (size_t)n + 1);
			continue;
		}
		if (last) {
			int fd = openat(dfd, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
			int e = errno;
			close(dfd);
			return fd >= 0 ? fd : -e;
		}
		close(dfd);
		size_t rl = strlen(resolved);
		n = snprintf(resolved + rl, sizeof(resolved) - rl, "%s%s", rl ? "/" : "", comp);
		if (n < 0 || (size_t)n >= sizeof(resolved) - rl)
			return -ENAMETOOLONG;
		memmove(rest, tail, strlen(tail) + 1);
	}
	/* The path named a folder already resolved (or the root). */
	int fd = resolved[0] ? openat(root, resolved, flags | O_NOFOLLOW | O_CLOEXEC, mode)
			     : openat(root, ".", flags | O_CLOEXEC, mode);
	return fd >= 0 ? fd : -errno;
}

/* Opens rel beneath root; returns an fd or -errno. */
static int open_beneath(local_state *st, int root, const char *rel, int flags, mode_t mode)
{
	if (st->use_openat2) {
		struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
				       .mode = (flags & O_CREAT) ? mode : 0,
				       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
		long fd = syscall(SYS_openat2, root, rel, &how, sizeof(how));
		if (fd >= 0)
			return (int)fd;
		if (errno != ENOSYS)
			return -errno;
		st->use_openat2 = 0;
	}
	return walk_open(root, rel, flags, mode);
}

static int fail(const char *op, const char *path, int e, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	switch (e) {
	case EXDEV:
	case ELOOP:
		return h->set_error(err, SBX_E_PATH,
				    "local: %s: path '%.300s' leads outside the sandbox", op, path);
	case ENOENT:
	case ENOTDIR:
		return h->set_error(err, SBX_E_NO_FILE, "local: %s: '%.300s': no such file", op,
				    path);
	case EISDIR:
		return h->set_error(err, SBX_E_INVAL, "local: %s: '%.300s' is a directory", op,
				    path);
	case EEXIST:
		return h->set_error(err, SBX_E_EXISTS, "local: %s: '%.300s' already exists", op,
				    path);
	case ENOTEMPTY:
		return h->set_error(err, SBX_E_INVAL,
				    "local: %s: directory '%.300s' is not empty (remove it "
				    "recursively)",
				    op, path);
	case ENOMEM:
		return h->set_error(err, SBX_E_NOMEM, "local: %s: out of memory", op);
	default:
		return h->set_error(err, SBX_E_IO, "local: %s: '%.300s': %s", op, path,
				    strerror(e));
	}
}

/* Opens the sandbox work dir and turns `path` into a path relative to it. */
static int prepare(local_state *st, const char *id, const char *op, const char *path, int *root,
		   char *rel, size_t cap, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	char work[1200];
	int rc = local_path(st, id, "work", work, sizeof(work), err);
	if (rc != SBX_OK)
		return rc;
	if (!path)
		return h->set_error(err, SBX_E_INVAL, "local: %s: no path given", op);
	const char *r = path;
	if (path[0] == '/') {
		size_t wl = strlen(work);
		if (strncmp(path, work, wl) != 0 || (path[wl] != '/' && path[wl] != '\0'))
			return h->set_error(err, SBX_E_PATH,
					    "local: %s: path '%.300s' is outside the sandbox work "
					    "dir %s",
					    op, path, work);
		r = path + wl;
		while (*r == '/')
			r++;
	}
	int n = snprintf(rel, cap, "%s", *r ? r : ".");
	if (n < 0 || (size_t)n >= cap)
		return h->set_error(err, SBX_E_INVAL, "local: %s: path is too long", op);
	/* Trailing slashes say nothing the kernel needs; they would confuse the split. */
	for (size_t len = strlen(rel); len > 1 && rel[len - 1] == '/'; len--)
		rel[len - 1] = '\0';
	*root = open(work, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*root < 0)
		return h->set_error(err, SBX_E_NOT_FOUND, "local: %s: sandbox %s not found", op,
				    id);
	return SBX_OK;
}

/* Splits rel into its parent (in place) and last component. */
static const char *split(char *rel, char *parent_buf, size_t cap)
{
	char *slash = strrchr(rel, '/');
	if (!slash) {
		snprintf(parent_buf, cap, ".");
		return rel;
	}
	*slash = '\0';
	snprintf(parent_buf, cap, "%s", rel[0] ? rel : ".");
	return slash + 1;
}

static void fill_info(sbx_file_info *info, const struct stat *sb, const char *name)
{
	uint32_t size = info->struct_size ? info->struct_size : (uint32_t)sizeof(*info);
	memset(info, 0, sizeof(*info));
	info->struct_size = size;
	info->abi_major = SBX_ABI_MAJOR;
	info->abi_minor = SBX_ABI_MINOR;
	info->kind = S_ISREG(sb->st_mode)   ? SBX_FILE_REGULAR
		     : S_ISDIR(sb->st_mode) ? SBX_FILE_DIR
		     : S_ISLNK(sb->st_mode) ? SBX_FILE_SYMLINK
					    : SBX_FILE_OTHER;
	info->mode = (uint32_t)(sb->st_mode & 07777);
	info->size = (uint64_t)sb->st_size;
	info->mtime = (int64_t)sb->st_mtime;
	/* Names longer than the field (255 bytes is also the kernel's limit) are cut. */
	size_t n = strnlen(name, sizeof(info->name) - 1);
	memcpy(info->name, name, n);
	info->name[n] = '\0';
}

int local_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		    sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	char rel[4096];
	int root = -1, fd = -1;
	char *buf = NULL;
	int rc = prepare(state, id, "read", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	fd = open_beneath(state, root, rel, O_RDONLY, 0);
	if (fd < 0) {
		rc = fail("read", path, -fd, err);
		goto out;
	}
	struct stat sb;
	if (fstat(fd, &sb) != 0 || S_ISDIR(sb.st_mode)) {
		rc = fail("read", path, S_ISDIR(sb.st_mode) ? EISDIR : errno, err);
		goto out;
	}
	size_t cap = (size_t)sb.st_size + 1, used = 0;
	buf = h->alloc(cap + 1);
	if (!buf)
		goto nomem;
	for (;;) {
		if (used == cap) {
			char *nb = h->realloc(buf, cap * 2 + 1);
			if (!nb)
				goto nomem;
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + used, cap - used);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = fail("read", path, errno, err);
			goto out;
		}
		if (r == 0)
			break;
		used += (size_t)r;
	}
	buf[used] = '\0';
	*data = buf;
	*len = used;
	buf = NULL;
	goto out;
nomem:
	rc = h->set_error(err, SBX_E_NOMEM, "local: read: out of memory");
out:
	if (buf)
		h->free(buf);
	if (fd >= 0)
		close(fd);
	close(root);
	return rc;
}

/* mkdir -p of rel beneath root. Returns 0 or an errno. */
static int mkdirs(local_state *st, int root, const char *rel)
{
	char prefix[4096];
	size_t n = strlen(rel);
	if (n >= sizeof(prefix))
		return ENAMETOOLONG;
	for (size_t i = 0; i <= n; i++) {
		if (rel[i] != '/' && rel[i] != '\0')
			continue;
		if (i == 0)
			continue;
		memcpy(prefix, rel, i);
		prefix[i] = '\0';
		char parent[4096];
		const char *name = split(prefix, parent, sizeof(parent));
		if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		int pfd = open_beneath(st, root, parent, O_PATH | O_DIRECTORY, 0);
		if (pfd < 0)
			return -pfd;
		int r = mkdirat(pfd, name, 0755);
		int e = errno;
		close(pfd);
		if (r != 0 && e != EEXIST)
			return e;
	}
	/* Every level must now be a folder beneath the root. */
	int fd = open_beneath(st, root, rel, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return -fd;
	close(fd);
	return 0;
}

int local_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		     uint32_t mode, sbx_error *err)
{
	char rel[4096], parent[4096], copy[4096];
	int root = -1, fd = -1;
	int rc = prepare(state, id, "write", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	snprintf(copy, sizeof(copy), "%s", rel);
	split(copy, parent, sizeof(parent));
	int e = mkdirs(state, root, parent);
	if (e != 0) {
		rc = fail("write", path, e, err);
		goto out;
	}
	mode_t m = mode ? (mode_t)(mode & 07777) : 0644;
	fd = open_beneath(state, root, rel, O_WRONLY | O_CREAT | O_TRUNC, m);
	if (fd < 0) {
		rc = fail("write", path, -fd, err);
		goto out;
	}
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = fail("write", path, errno, err);
			goto out;
		}
		p += w;
		len -= (size_t)w;
	}
	if (mode)
		fchmod(fd, m);
out:
	if (fd >= 0)
		close(fd);
	close(root);
	return rc;
}

int local_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		    sbx_error *err)
{
	char rel[4096], parent[4096], copy[4096];
	int root = -1, pfd = -1;
	int rc = prepare(state, id, "stat", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	snprintf(copy, sizeof(copy), "%s", rel);
	const char *name = split(copy, parent, sizeof(parent));
	struct stat sb;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		pfd = open_beneath(state, root, rel, O_PATH, 0);
		if (pfd < 0 || fstat(pfd, &sb) != 0) {
			rc = fail("stat", path, pfd < 0 ? -pfd : errno, err);
			goto out;
		}
	} else {
		pfd = open_beneath(state, root, parent, O_PATH | O_DIRECTORY, 0);
		if (pfd < 0 || fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
			rc = fail("stat", path, pfd < 0 ? -pfd : errno, err);
			goto out;
		}
	}
	fill_info(info, &sb, strcmp(name, ".") == 0 ? "" : name);
out:
	if (pfd >= 0)
		close(pfd);
	close(root);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const sbx_file_info *)a)->name, ((const sbx_file_info *)b)->name);
}

int local_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		   size_t *n, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	char rel[4096];
	int root = -1;
	DIR *d = NULL;
	sbx_file_info *v = NULL;
	size_t used = 0, cap = 0;
	int rc = prepare(state, id, "list", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	int fd = open_beneath(state, root, rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0) {
		rc = fail("list", path, -fd, err);
		goto out;
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		rc = fail("list", path, errno, err);
		goto out;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		struct stat sb;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			continue; /* removed meanwhile */
		if (used == cap) {
			size_t nc = cap ? cap * 2 : 16;
			sbx_file_info *nv = h->realloc(v, nc * sizeof(*nv));
			if (!nv) {
				rc = h->set_error(err, SBX_E_NOMEM, "local: list: out of memory");
				goto out;
			}
			v = nv;
			cap = nc;
		}
		v[used].struct_size = (uint32_t)sizeof(sbx_file_info);
		fill_info(&v[used], &sb, e->d_name);
		used++;
	}
	if (used)
		qsort(v, used, sizeof(*v), by_name);
	*entries = v;
	*n = used;
	v = NULL;
out:
	if (v)
		h->free(v);
	if (d)
		closedir(d);
	close(root);
	return rc;
}

int local_make_dir(void *state, const char *id, const char *path, uint32_t parents, sbx_error *err)
{
	char rel[4096], parent[4096], copy[4096];
	int root = -1, pfd = -1;
	int rc = prepare(state, id, "mkdir", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	if (parents) {
		int e = mkdirs(state, root, rel);
		if (e != 0)
			rc = fail("mkdir", path, e, err);
		goto out;
	}
	snprintf(copy, sizeof(copy), "%s", rel);
	const char *name = split(copy, parent, sizeof(parent));
	pfd = open_beneath(state, root, parent, O_PATH | O_DIRECTORY, 0);
	if (pfd < 0 || mkdirat(pfd, name, 0755) != 0)
		rc = fail("mkdir", path, pfd < 0 ? -pfd : errno, err);
out:
	if (pfd >= 0)
		close(pfd);
	close(root);
	return rc;
}

/* rm -r of name in dfd, never following symlinks. Returns 0 or an errno. */
static int rm_rf_at(int dfd, const char *name)
{
	struct stat sb;
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
		return errno;
	if (!S_ISDIR(sb.st_mode))
		return unlinkat(dfd, name, 0) == 0 ? 0 : errno;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return e;
	}
	int first = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		int r = rm_rf_at(dirfd(d), e->d_name);
		if (r != 0 && r != ENOENT && !first)
			first = r;
	}
	closedir(d);
	if (first)
		return first;
	return unlinkat(dfd, name, AT_REMOVEDIR) == 0 ? 0 : errno;
}

int local_rmtree(const char *path)
{
	int r = rm_rf_at(AT_FDCWD, path);
	return r == ENOENT ? 0 : r;
}

int local_rmtree_at(int dfd, const char *name)
{
	return rm_rf_at(dfd, name);
}

int local_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
		      sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	char rel[4096], parent[4096], copy[4096];
	int root = -1, pfd = -1;
	int rc = prepare(state, id, "remove", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	snprintf(copy, sizeof(copy), "%s", rel);
	const char *name = split(copy, parent, sizeof(parent));
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		rc = h->set_error(err, SBX_E_PATH,
				  "local: remove: '%.300s' names the work dir or above it; name "
				  "an entry inside it",
				  path);
		goto out;
	}
	pfd = open_beneath(state, root, parent, O_PATH | O_DIRECTORY, 0);
	if (pfd < 0) {
		rc = fail("remove", path, -pfd, err);
		goto out;
	}
	struct stat sb;
	if (fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
		rc = fail("remove", path, errno, err);
		goto out;
	}
	int e;
	if (S_ISDIR(sb.st_mode))
		e = recursive ? rm_rf_at(pfd, name)
			      : (unlinkat(pfd, name, AT_REMOVEDIR) == 0 ? 0 : errno);
	else
		e = unlinkat(pfd, name, 0) == 0 ? 0 : errno;
	if (e == EEXIST)
		e = ENOTEMPTY;
	if (e != 0)
		rc = fail("remove", path, e, err);
out:
	if (pfd >= 0)
		close(pfd);
	close(root);
	return rc;
}

/* File operations confined to a sandbox's work dir, touching regular files only.
 *
 * Every path is resolved beneath the work dir with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS), so `..` and symlinks that lead outside are refused by the kernel.
 * Where openat2 is missing (kernels before 5.6, or SBX_LOCAL_NO_OPENAT2 set) a walk does the
 * same in user space without a window for a swap: it holds a descriptor for every folder it
 * has entered, opens each component relative to the last one with O_NOFOLLOW (a folder
 * swapped for a symlink fails to open instead of being followed), splices relative symlink
 * targets into the rest of the path itself, and answers `..` by going back to a descriptor it
 * holds, never by opening `..` on disk. (A folder the command moves out of the work dir while
 * the walk is inside it is not caught; moving it there needs write access outside, which a
 * command at the plain level has anyway and one in namespaces lacks.)
 *
 * Reads open with O_NONBLOCK and refuse anything fstat does not call a regular file, so a
 * FIFO cannot block the host and a device cannot feed it forever; `max_file_bytes` caps what
 * is read. Writes go to a new file beside the target, renamed over it once complete: a
 * failed write (a full disk included) leaves the old content whole, and a hard link to a file
 * outside the sandbox is replaced in the sandbox, never written through. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "files.h"
#include "meta.h"
#include "state.h"

#define MAX_LINKS 40

/* The folders a walk has entered: fds[0] is the root, fds[n - 1] the current one. */
typedef struct walk {
	int *fds;
	size_t n, cap;
} walk;

static int walk_push(walk *w, int fd)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		int *v = realloc(w->fds, cap * sizeof(*v));
		if (!v) {
			close(fd);
			return -ENOMEM;
		}
		w->fds = v;
		w->cap = cap;
	}
	w->fds[w->n++] = fd;
	return 0;
}

static void walk_free(walk *w)
{
	for (size_t i = 0; i < w->n; i++)
		close(w->fds[i]);
	free(w->fds);
}

/* Replaces rest with target followed by what came after the symlink (tail). */
static int splice_link(char *rest, size_t cap, const char *target, const char *tail)
{
	int n = snprintf(rest, cap, "%s%s%s", target, *tail ? "/" : "", tail);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* The walk without openat2 (see the top of this file). Returns an fd or -errno. */
static int walk_open(int root, const char *rel, int flags, mode_t mode)
{
	char rest[8192], tail[8192], target[4096];
	int n = snprintf(rest, sizeof(rest), "%s", rel);
	if (n < 0 || (size_t)n >= sizeof(rest))
		return -ENAMETOOLONG;
	walk w = {0};
	int top = fcntl(root, F_DUPFD_CLOEXEC, 3);
	if (top < 0)
		return -errno;
	int links = 0, rc = walk_push(&w, top);
	while (rc == 0) {
		char *p = rest + strspn(rest, "/");
		if (!*p)
			break;
		size_t clen = strcspn(p, "/");
		const char *after = p + clen + strspn(p + clen, "/");
		snprintf(tail, sizeof(tail), "%s", after);
		p[clen] = '\0';
		int last = !*tail;
		int cur = w.fds[w.n - 1];
		if (strcmp(p, ".") == 0) {
			memmove(rest, tail, strlen(tail) + 1);
			continue;
		}
		if (strcmp(p, "..") == 0) {
			if (w.n == 1) {
				rc = -EXDEV;
				break;
			}
			close(w.fds[--w.n]);
			memmove(rest, tail, strlen(tail) + 1);
			continue;
		}
		ssize_t tl = readlinkat(cur, p, target, sizeof(target) - 1);
		if (tl >= 0) {
			target[tl] = '\0';
			if (target[0] == '/')
				rc = -EXDEV;
			else if (++links > MAX_LINKS)
				rc = -ELOOP;
			else
				rc = splice_link(rest, sizeof(rest), target, tail);
			continue;
		}
		if (last) {
			int fd = openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
			rc = fd >= 0 ? fd : -errno;
			walk_free(&w);
			return rc;
		}
		int fd = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		rc = fd >= 0 ? walk_push(&w, fd) : -errno;
		if (rc == 0)
			memmove(rest, tail, strlen(tail) + 1);
	}
	if (rc == 0) {
		/* The path named a folder already entered (or the root). */
		int fd = openat(w.fds[w.n - 1], ".", flags | O_CLOEXEC, mode);
		rc = fd >= 0 ? fd : -errno;
	}
	walk_free(&w);
	return rc;
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

static const char *kind_of(mode_t m)
{
	return S_ISFIFO(m)   ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISLNK(m)  ? "a symbolic link"
			     : "not a regular file";
}

/* The error for a FIFO, device or socket where a regular file was wanted. */
static int not_regular(const char *op, const char *path, mode_t m, sbx_error *err)
{
	return sbxs_host->set_error(err, SBX_E_INVAL,
				    "local: %s: '%.300s' is %s; only regular files can be "
				    "read or written",
				    op, path, kind_of(m));
}

size_t local_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (strncmp(path, dir, n) != 0 || (path[n] != '/' && path[n] != '\0'))
		return 0;
	return n;
}

size_t local_work_link(const char *work, char *buf, size_t cap)
{
	ssize_t len = cap ? readlink(work, buf, cap - 1) : -1;
	if (len <= 1 || buf[0] != '/') {
		if (cap)
			buf[0] = '\0';
		return 0;
	}
	buf[len] = '\0';
	return (size_t)len;
}

size_t local_under_work(const char *path, const char *work)
{
	size_t n = local_under(path, work);
	if (n)
		return n;
	/* Only a path outside the work dir's own name pays for the readlink. */
	char target[1100];
	return local_work_link(work, target, sizeof(target)) ? local_under(path, target) : 0;
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
		/* With share_dir the work dir is that host folder: its path names it too. */
		size_t wl = local_under_work(path, work);
		if (!wl)
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

static int too_big(const char *path, uint64_t size, int64_t cap, sbx_error *err)
{
	return sbxs_host->set_error(err, SBX_E_LIMIT,
				    "local: read: '%.300s' is larger than max_file_bytes "
				    "(%llu > %lld bytes)",
				    path, (unsigned long long)size, (long long)cap);
}

int local_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		    sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	local_state *st = state;
	char rel[4096];
	int root = -1, fd = -1;
	char *buf = NULL;
	int rc = prepare(st, id, "read", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	fd = open_beneath(st, root, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	struct stat sb;
	if (fd == -ENXIO) {
		/* A socket cannot be opened at all: say what it is. */
		fd = open_beneath(st, root, rel, O_PATH, 0);
		if (fd >= 0 && fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
			rc = not_regular("read", path, sb.st_mode, err);
			goto out;
		}
		if (fd >= 0)
			close(fd);
		fd = -ENXIO;
	}
	if (fd < 0) {
		rc = fail("read", path, -fd, err);
		goto out;
	}
	if (fstat(fd, &sb) != 0) {
		rc = fail("read", path, errno, err);
		goto out;
	}
	if (S_ISDIR(sb.st_mode)) {
		rc = fail("read", path, EISDIR, err);
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		rc = not_regular("read", path, sb.st_mode, err);
		goto out;
	}
	if (sb.st_size > st->max_file_bytes) {
		rc = too_big(path, (uint64_t)sb.st_size, st->max_file_bytes, err);
		goto out;
	}
	/* The file may grow while it is read: the cap holds for what is read, not the size. */
	size_t cap = (size_t)sb.st_size + 1, used = 0;
	buf = h->alloc(cap + 1);
	if (!buf)
		goto nomem;
	for (;;) {
		if (used == cap) {
			if ((int64_t)used > st->max_file_bytes) {
				rc = too_big(path, used, st->max_file_bytes, err);
				goto out;
			}
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
	if ((int64_t)used > st->max_file_bytes) {
		rc = too_big(path, used, st->max_file_bytes, err);
		goto out;
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

/* Opens the folder holding rel's last entry and puts the entry's name in `name`; a symlink
 * there is followed (beneath the root) to the entry it names, as writing through a path
 * would. Returns the folder's fd or -errno. */
static int open_parent(local_state *st, int root, const char *rel, char *name, size_t cap)
{
	char cur[8192], parent[8192], target[4096];
	int n = snprintf(cur, sizeof(cur), "%s", rel);
	if (n < 0 || (size_t)n >= sizeof(cur))
		return -ENAMETOOLONG;
	for (int links = 0;; links++) {
		const char *last = split(cur, parent, sizeof(parent));
		if (!*last || strcmp(last, ".") == 0 || strcmp(last, "..") == 0)
			return -EISDIR;
		if ((size_t)snprintf(name, cap, "%s", last) >= cap)
			return -ENAMETOOLONG;
		int pfd = open_beneath(st, root, parent, O_PATH | O_DIRECTORY, 0);
		if (pfd < 0)
			return pfd;
		ssize_t tl = readlinkat(pfd, name, target, sizeof(target) - 1);
		if (tl < 0)
			return pfd;
		close(pfd);
		target[tl] = '\0';
		if (target[0] == '/')
			return -EXDEV;
		if (links >= MAX_LINKS)
			return -ELOOP;
		n = snprintf(cur, sizeof(cur), "%s/%s", parent, target);
		if (n < 0 || (size_t)n >= sizeof(cur))
			return -ENAMETOOLONG;
	}
}

/* Writes data into a new file `tmp` in pfd and renames it over `name`. 0 or an errno; the
 * new file is gone again on failure. */
static int replace(int pfd, const char *name, const char *tmp, const void *data, size_t len,
		   mode_t m, const struct stat *old)
{
	int fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	int e = local_write_all(fd, data, len);
	if (e == 0 && fchmod(fd, m) != 0)
		e = errno;
	/* The owner stays (best effort: only root may give a file away). */
	if (e == 0 && old && fchown(fd, old->st_uid, old->st_gid) != 0 && errno != EPERM)
		e = errno;
	if (close(fd) != 0 && e == 0)
		e = errno;
	if (e == 0 && renameat(pfd, tmp, pfd, name) != 0)
		e = errno;
	if (e != 0)
		unlinkat(pfd, tmp, 0);
	return e;
}

int local_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		     uint32_t mode, sbx_error *err)
{
	local_state *st = state;
	char rel[4096], parent[4096], copy[4096], name[256], tmp[300];
	int root = -1, pfd = -1;
	int rc = prepare(st, id, "write", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	snprintf(copy, sizeof(copy), "%s", rel);
	split(copy, parent, sizeof(parent));
	int e = mkdirs(st, root, parent);
	if (e == 0) {
		pfd = open_parent(st, root, rel, name, sizeof(name));
		e = pfd < 0 ? -pfd : 0;
	}
	if (e != 0) {
		rc = fail("write", path, e, err);
		goto out;
	}
	struct stat sb;
	int exists = fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && S_ISDIR(sb.st_mode)) {
		rc = fail("write", path, EISDIR, err);
		goto out;
	}
	if (exists && !S_ISREG(sb.st_mode)) {
		rc = not_regular("write", path, sb.st_mode, err);
		goto out;
	}
	unsigned char rnd[6];
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		memset(rnd, 0, sizeof(rnd)); /* O_EXCL still refuses a name in use */
	snprintf(tmp, sizeof(tmp), ".sbx-write-%02x%02x%02x%02x%02x%02x-%.200s", rnd[0], rnd[1],
		 rnd[2], rnd[3], rnd[4], rnd[5], name);
	mode_t m = mode ? (mode_t)(mode & 07777) : exists ? (sb.st_mode & 07777) : 0644;
	e = replace(pfd, name, tmp, data, len, m, exists ? &sb : NULL);
	if (e == ENOSPC || e == EDQUOT)
		rc = sbxs_host->set_error(err, SBX_E_IO,
					  "local: write: '%.300s': %s; the file is unchanged", path,
					  strerror(e));
	else if (e != 0)
		rc = fail("write", path, e, err);
out:
	if (pfd >= 0)
		close(pfd);
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
	int fd = open_beneath(state, root, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK, 0);
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

/* rm -r of name in dfd, never following symlinks; 0 or an errno. `type` is the entry's d_type
 * as its folder listed it (DT_UNKNOWN: look): a file goes with one unlinkat and no stat. An
 * entry replaced since is caught by unlinkat's EISDIR or openat's O_NOFOLLOW. */
static int rm_rf_typed(int dfd, const char *name, unsigned char type)
{
	if (type == DT_UNKNOWN) {
		struct stat sb;
		if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			return errno;
		type = S_ISDIR(sb.st_mode) ? DT_DIR : DT_REG;
	}
	if (type != DT_DIR) {
		if (unlinkat(dfd, name, 0) == 0)
			return 0;
		if (errno != EISDIR)
			return errno;
	}
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
		int r = rm_rf_typed(dirfd(d), e->d_name, e->d_type);
		if (r != 0 && r != ENOENT && !first)
			first = r;
	}
	closedir(d);
	if (first)
		return first;
	return unlinkat(dfd, name, AT_REMOVEDIR) == 0 ? 0 : errno;
}

/* rm -r of name in dfd, never following symlinks. Returns 0 or an errno. */
static int rm_rf_at(int dfd, const char *name)
{
	return rm_rf_typed(dfd, name, DT_UNKNOWN);
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

int local_open_dir(local_state *st, const char *id, const char *path, int *fd, sbx_error *err)
{
	char rel[4096];
	int root = -1;
	int rc = prepare(st, id, "exec", path, &root, rel, sizeof(rel), err);
	if (rc != SBX_OK)
		return rc;
	*fd = open_beneath(st, root, rel, O_PATH | O_DIRECTORY, 0);
	close(root);
	if (*fd >= 0)
		return SBX_OK;
	int e = -*fd;
	*fd = -1;
	const sbx_host_api *h = sbxs_host;
	if (e == EXDEV || e == ELOOP)
		return h->set_error(err, SBX_E_PATH,
				    "local: exec: cwd '%.300s' leads outside the sandbox", path);
	if (e == ENOTDIR)
		return h->set_error(err, SBX_E_INVAL,
				    "local: exec: cwd '%.300s' is not a directory in the sandbox",
				    path);
	if (e == ENOENT)
		return h->set_error(err, SBX_E_NO_FILE,
				    "local: exec: cwd '%.300s' does not exist in the sandbox",
				    path);
	return fail("exec", path, e, err);
}

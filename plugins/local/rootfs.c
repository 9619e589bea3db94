/* The mount table of an isolated sandbox. The parent plans every mount (paths, options) into
 * a list; the sandbox's init, sbx-local-init, performs it (mounts.c) and pivots into the
 * result.
 *
 * rootfs: host   a small read-only tmpfs root holding read-only binds of the host's /usr,
 *                /bin, /sbin, /lib*, /etc (symlinks of a merged /usr are recreated as they
 *                are), private /tmp, /home and /root from the sandbox's folder, and the work
 *                dir at its host path, the only writable tree shared with the host.
 * DIR, image     an overlay: the tree read-only below, the sandbox's own upper dir above;
 *                the work dir bound in at its host path.
 * Both get a fresh /proc (its /proc/sys and /proc/sysrq-trigger read-only) and a minimal
 * /dev: null, zero, full, random, urandom, tty, fd links, a private /dev/shm and /dev/pts.
 *
 * With a `disk` cap the writable layer (the upper dir, or the private folders) lives on a
 * tmpfs of that size at <dir>/rw, mounted in the sandbox's mount namespace only; the init
 * holds it open at LOCAL_RW_FD so the host can measure it (disk.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rootfs.h"
#include "state.h"

static int add(local_mounts *m, int kind, unsigned mode, const char *src, const char *dst,
	       const char *data)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 48;
		local_mount_op *ops = realloc(m->ops, cap * sizeof(*ops));
		if (!ops)
			return -1;
		m->ops = ops;
		m->cap = cap;
	}
	local_mount_op *op = &m->ops[m->n];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->mode = mode;
	int a = snprintf(op->src, sizeof(op->src), "%s", src ? src : "");
	int b = snprintf(op->dst, sizeof(op->dst), "%s", dst ? dst : "");
	int c = snprintf(op->data, sizeof(op->data), "%s", data ? data : "");
	if (a < 0 || b < 0 || c < 0 || (size_t)a >= sizeof(op->src) ||
	    (size_t)b >= sizeof(op->dst) || (size_t)c >= sizeof(op->data))
		return -1;
	m->n++;
	return 0;
}

/* dst = newroot + path */
static int in_root(const local_mounts *m, const char *path, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s%s", m->newroot, path);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int add_in(local_mounts *m, int kind, unsigned mode, const char *src, const char *path,
		  const char *data)
{
	char dst[1400];
	if (in_root(m, path, dst, sizeof(dst)) != 0)
		return -1;
	return add(m, kind, mode, src, dst, data);
}

static int plan_dev_proc(local_mounts *m)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
	static const char *const links[][2] = {{"/proc/self/fd", "/dev/fd"},
					       {"/proc/self/fd/0", "/dev/stdin"},
					       {"/proc/self/fd/1", "/dev/stdout"},
					       {"/proc/self/fd/2", "/dev/stderr"},
					       {"pts/ptmx", "/dev/ptmx"}};
	char dst[1400];
	if (add_in(m, OP_MKDIR, 0755, NULL, "/dev", NULL) ||
	    add_in(m, OP_TMPFS, 0, "tmpfs", "/dev", "mode=0755,size=64k,nr_inodes=64"))
		return -1;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		char src[64];
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		if (access(src, F_OK) != 0)
			continue;
		if (add_in(m, OP_TOUCH, 0666, NULL, src, NULL) ||
		    add_in(m, OP_BIND, 0, src, src, NULL))
			return -1;
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (add_in(m, OP_SYMLINK, 0, links[i][0], links[i][1], NULL))
			return -1;
	if (add_in(m, OP_MKDIR, 01777, NULL, "/dev/shm", NULL) ||
	    add_in(m, OP_TMPFS, 0, "tmpfs", "/dev/shm", "mode=1777") ||
	    add_in(m, OP_MKDIR, 0755, NULL, "/dev/pts", NULL) ||
	    add_in(m, OP_DEVPTS | OP_OPTIONAL, 0, "devpts", "/dev/pts",
		   "newinstance,ptmxmode=0666,mode=0620") ||
	    add_in(m, OP_RDONLY, 0, NULL, "/dev", NULL))
		return -1;
	if (add_in(m, OP_MKDIR, 0555, NULL, "/proc", NULL) ||
	    add_in(m, OP_PROC, 0, "proc", "/proc", NULL))
		return -1;
	/* Root inside keeps its uid: what the kernel guards by uid alone stays read-only. */
	static const char *const ro[] = {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq",
					 "/proc/bus"};
	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		if (in_root(m, ro[i], dst, sizeof(dst)) != 0 ||
		    add(m, OP_BIND_RO | OP_OPTIONAL, 0, dst, dst, NULL))
			return -1;
	}
	return 0;
}

int local_mounts_plan(const char *dir, const char *lower, int64_t cap, local_mounts *m,
		      sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	char work[1300], data[3200];
	memset(m, 0, sizeof(*m));
	int n = snprintf(m->newroot, sizeof(m->newroot), "%s/root", dir);
	int w = snprintf(work, sizeof(work), "%s/work", dir);
	if (n < 0 || (size_t)n >= sizeof(m->newroot) || w < 0 || (size_t)w >= sizeof(work))
		return h->set_error(err, SBX_E_INVAL, "local: sandbox path too long");
	/* Where the writable layer lives: the sandbox folder, or a capped tmpfs in it. */
	char rw[1300];
	n = cap ? snprintf(rw, sizeof(rw), "%s/rw", dir) : snprintf(rw, sizeof(rw), "%s", dir);
	if (n < 0 || (size_t)n >= sizeof(rw))
		return h->set_error(err, SBX_E_INVAL, "local: sandbox path too long");
	if (cap) {
		char opts[64];
		snprintf(opts, sizeof(opts), "mode=0755,size=%lld", (long long)cap);
		if (add(m, OP_TMPFS, 0, "tmpfs", rw, opts) || add(m, OP_HOLD, 0, NULL, rw, NULL))
			goto nomem;
	}
	if (!lower[0]) {
		static const char *const host[] = {"/usr",   "/bin",   "/sbin",   "/lib",
						   "/lib32", "/lib64", "/libx32", "/etc"};
		if (add(m, OP_TMPFS, 0, "tmpfs", m->newroot, "mode=0755,size=1m,nr_inodes=4096"))
			goto nomem;
		for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
			struct stat sb;
			if (lstat(host[i], &sb) != 0)
				continue;
			if (S_ISLNK(sb.st_mode)) {
				char target[1024];
				ssize_t t = readlink(host[i], target, sizeof(target) - 1);
				if (t < 0)
					continue;
				target[t] = '\0';
				if (add_in(m, OP_SYMLINK, 0, target, host[i], NULL))
					goto nomem;
			} else if (S_ISDIR(sb.st_mode)) {
				if (add_in(m, OP_MKDIR, 0755, NULL, host[i], NULL) ||
				    add_in(m, OP_BIND_RO, 0, host[i], host[i], NULL))
					goto nomem;
			}
		}
		static const char *const priv[] = {"tmp", "home", "root"};
		static const unsigned priv_mode[] = {01777, 0755, 0700};
		for (size_t i = 0; i < 3; i++) {
			char src[1400], in[16];
			snprintf(in, sizeof(in), "/%s", priv[i]);
			n = snprintf(src, sizeof(src), "%s/priv/%s", rw, priv[i]);
			if (n < 0 || (size_t)n >= sizeof(src))
				goto nomem;
			if ((cap && add(m, OP_MKDIR, priv_mode[i], NULL, src, NULL)) ||
			    add_in(m, OP_MKDIR, priv_mode[i], NULL, in, NULL) ||
			    add_in(m, OP_BIND, 0, src, in, NULL))
				goto nomem;
		}
	} else {
		/* overlayfs splits its options at ',' and ':' (escaping is new in 6.x). */
		if (strpbrk(lower, ",:\\") || strpbrk(rw, ",:\\"))
			return h->set_error(err, SBX_E_CONFIG,
					    "local: rootfs: '%.200s' or the sandbox folder holds a "
					    "',', ':' or '\\', which overlayfs cannot take",
					    lower);
		n = snprintf(data, sizeof(data), "lowerdir=%s,upperdir=%s/upper,workdir=%s/ovwork",
			     lower, rw, rw);
		if (n < 0 || (size_t)n >= sizeof(data))
			return h->set_error(err, SBX_E_INVAL, "local: rootfs: path too long");
		char up[1400], wk[1400];
		snprintf(up, sizeof(up), "%s/upper", rw);
		snprintf(wk, sizeof(wk), "%s/ovwork", rw);
		if ((cap && (add(m, OP_MKDIR, 0755, NULL, up, NULL) ||
			     add(m, OP_MKDIR, 0700, NULL, wk, NULL))) ||
		    add(m, OP_OVERLAY, 0, "overlay", m->newroot, data) ||
		    add_in(m, OP_MKDIR, 01777, NULL, "/tmp", NULL))
			goto nomem;
	}
	/* The work dir last: a state dir under /dev/shm would be hidden by the fresh /dev. */
	if (plan_dev_proc(m))
		goto nomem;
	if (add_in(m, OP_MKDIR, 0700, NULL, work, NULL) || add_in(m, OP_BIND, 0, work, work, NULL))
		goto nomem;
	if (!lower[0] && add(m, OP_RDONLY, 0, NULL, m->newroot, NULL))
		goto nomem;
	if (add(m, OP_PIVOT, 0, NULL, m->newroot, NULL))
		goto nomem;
	return SBX_OK;
nomem:
	local_mounts_free(m);
	return h->set_error(err, SBX_E_NOMEM, "local: rootfs: cannot plan the mounts");
}

void local_mounts_free(local_mounts *m)
{
	free(m->ops);
	m->ops = NULL;
	m->n = m->cap = 0;
}

const char *local_mounts_path(const local_mounts *m, size_t i)
{
	return i < m->n ? m->ops[i].dst : "/";
}

int64_t local_disk_cap(const char *dir)
{
	char path[1300], buf[32] = "";
	snprintf(path, sizeof(path), "%s/disk", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	long long v = r > 0 ? strtoll(buf, NULL, 10) : 0;
	return v > 0 ? (int64_t)v : 0;
}

/* The sandbox's mount table performed (mounts.h): in sbx-local-init, before it becomes the
 * sandbox's PID 1. System calls only. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mounts.h"

static int mkdir_all(const char *path, unsigned mode)
{
	char buf[1400];
	size_t len = strlen(path);
	if (len >= sizeof(buf))
		return ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i < len; i++) {
		if (buf[i] != '/')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return errno;
		buf[i] = '/';
	}
	if (mkdir(buf, mode) != 0) {
		if (errno != EEXIST)
			return errno;
		return 0;
	}
	return chmod(buf, mode) == 0 ? 0 : errno; /* the umask must not narrow /tmp's 1777 */
}

static int set_attr(const char *path, unsigned attr, unsigned flags)
{
	struct mount_attr a;
	memset(&a, 0, sizeof(a));
	a.attr_set = attr;
	return syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof(a)) == 0 ? 0 : errno;
}

static int apply_one(const local_mount_op *op, int *held)
{
	int fd;
	switch (op->kind & 0xff) {
	case OP_HOLD:
		fd = open(op->dst, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		*held = fd;
		return 0;
	case OP_TMPFS:
		return mount(op->src, op->dst, "tmpfs", MS_NOSUID | MS_NODEV, op->data) == 0
			   ? 0
			   : errno;
	case OP_MKDIR:
		return mkdir_all(op->dst, op->mode);
	case OP_BIND:
		return mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL) == 0 ? 0 : errno;
	case OP_BIND_RO:
		if (mount(op->src, op->dst, NULL, MS_BIND | MS_REC, NULL) != 0)
			return errno;
		return set_attr(op->dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
				AT_RECURSIVE);
	case OP_TOUCH:
		fd = open(op->dst, O_WRONLY | O_CREAT | O_CLOEXEC, op->mode);
		if (fd < 0)
			return errno;
		close(fd);
		return 0;
	case OP_SYMLINK:
		return symlink(op->src, op->dst) == 0 || errno == EEXIST ? 0 : errno;
	case OP_PROC:
		return mount("proc", op->dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0
			   ? 0
			   : errno;
	case OP_OVERLAY:
		return mount("overlay", op->dst, "overlay", MS_NOSUID, op->data) == 0 ? 0 : errno;
	case OP_RDONLY:
		return set_attr(op->dst, MOUNT_ATTR_RDONLY, 0);
	case OP_DEVPTS:
		return mount("devpts", op->dst, "devpts", MS_NOSUID | MS_NOEXEC, op->data) == 0
			   ? 0
			   : errno;
	case OP_PIVOT:
		if (chdir(op->dst) != 0 || syscall(SYS_pivot_root, ".", ".") != 0)
			return errno;
		if (umount2(".", MNT_DETACH) != 0 || chdir("/") != 0)
			return errno;
		return 0;
	default:
		return EINVAL;
	}
}

int local_mounts_apply(const local_mounts *m, size_t *failed, int *held)
{
	*failed = m->n;
	*held = -1;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return errno;
	for (size_t i = 0; i < m->n; i++) {
		int e = apply_one(&m->ops[i], held);
		if (e != 0 && !(m->ops[i].kind & OP_OPTIONAL)) {
			*failed = i;
			return e;
		}
	}
	return 0;
}

/* Folders the library makes and removes: the state dir, per-call output folders, the plugins'
 * folder. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* Makes buf's missing ancestors from the nearest existing one down: a path whose parent
 * exists costs one mkdir, one missing level two, never a walk from the root. */
static int mkdirs_in(char *buf)
{
	if (mkdir(buf, 0700) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return errno;
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf)
		return ENOENT;
	*slash = '\0';
	int e = mkdirs_in(buf);
	*slash = '/';
	if (e != 0)
		return e;
	if (mkdir(buf, 0700) != 0 && errno != EEXIST)
		return errno;
	return 0;
}

int sbx__mkdirs(const char *path)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return ENAMETOOLONG;
	return mkdirs_in(buf);
}

/* Empties the folder open at fd (and closes it), everything below it included. The listing
 * comes straight from getdents64 into a buffer on the stack (opendir would add a 32 KiB
 * allocation and three system calls per folder, and a destroy removes a few). A file costs
 * one unlinkat and no stat: the listing says what each entry is, and unlinkat's EISDIR catches
 * a folder that replaced a file since. Symlinks are removed, never followed (O_NOFOLLOW).
 * The spool's trees are two levels deep; past 16 a folder is left (and its parent with it). */
static void empty_folder(int fd, int depth)
{
	char buf[4096] __attribute__((aligned(8)));
	long n;
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long at = 0; at < n;) {
			const struct dirent64 *e = (const struct dirent64 *)(buf + at);
			at += e->d_reclen;
			const char *name = e->d_name;
			if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
				continue;
			if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN &&
			    unlinkat(fd, name, 0) == 0)
				continue;
			int sub =
			    depth < 16
				? openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
				: -1;
			if (sub >= 0) {
				empty_folder(sub, depth + 1);
				unlinkat(fd, name, AT_REMOVEDIR);
			} else {
				unlinkat(fd, name, 0);
			}
		}
	}
	close(fd);
}

void sbx__remove_tree(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		unlink(path);
		return;
	}
	empty_folder(fd, 0);
	rmdir(path);
}

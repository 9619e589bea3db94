/* Opening the files the host reads itself (config, registry, drop-ins) so that what is opened
 * is what was checked: O_NONBLOCK keeps a FIFO from stalling the open, and fstat on the
 * descriptor refuses anything but a regular file (a FIFO would block the read forever, a
 * character device might never end). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

const char *sbx__file_kind(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFLNK:
		return "a symbolic link";
	}
	return "not a file";
}

int sbx__open_regular(const char *path, FILE **out, sbx_error *err)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return sbx__set_error(err, SBX_E_IO, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return sbx__set_error(err, SBX_E_IO, "%s: cannot open: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return sbx__set_error(err, SBX_E_IO, "%s: is %s, not a regular file", path,
				      sbx__file_kind(st.st_mode));
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	FILE *f = fdopen(fd, "rb");
	if (!f) {
		close(fd);
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	}
	*out = f;
	return SBX_OK;
}

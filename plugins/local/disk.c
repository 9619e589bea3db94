/* What an isolated sandbox's writable layer uses on disk: its overlay's upper dir (rootfs: DIR,
 * image) or its private /tmp, /home and /root (rootfs: host). Without a cap they are folders
 * of the sandbox, summed file by file (allocated blocks, links not followed); with one they
 * are a tmpfs in the sandbox's mount namespace that its init holds open at LOCAL_RW_FD, and
 * statfs says what it uses. The cap itself is <dir>/disk, written at create. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "disk.h"
#include "meta.h"
#include "ns.h"
#include "rootfs.h"
#include "state.h"

/* Allocated bytes of everything below the folder open at fd (closed here). */
static int64_t tree_bytes(int fd, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	int64_t sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		struct stat sb;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		sum += (int64_t)sb.st_blocks * 512;
		if (S_ISDIR(sb.st_mode) && depth < 256) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				sum += tree_bytes(sub, depth + 1);
		}
	}
	closedir(d);
	return sum;
}

int local_disk_usage(const local_state *st, const char *id, int64_t *used, int64_t *cap,
		     sbx_error *err)
{
	char dir[1200], path[1300];
	*used = *cap = 0;
	int rc = local_path(st, id, NULL, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	*cap = local_disk_cap(dir);
	if (*cap) {
		/* No init, no tmpfs: the layer went with it. */
		long pid = local_iso_init_pid(dir);
		snprintf(path, sizeof(path), "/proc/%ld/fd/%d", pid, LOCAL_RW_FD);
		int fd = pid ? open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		struct statfs sf;
		if (fd >= 0 && fstatfs(fd, &sf) == 0)
			*used = (int64_t)(sf.f_blocks - sf.f_bfree) * (int64_t)sf.f_bsize;
		if (fd >= 0)
			close(fd);
		return SBX_OK;
	}
	snprintf(path, sizeof(path), "%s/upper", dir);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(path, sizeof(path), "%s/priv", dir);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd >= 0)
		*used = tree_bytes(fd, 0);
	return SBX_OK;
}

/* Folders the library makes and removes: the state dir, per-call output folders, the plugins'
 * folder. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

#include "internal.h"

int sbx__mkdirs(const char *path)
{
	/* The parent usually exists: one syscall in the common case. */
	if (mkdir(path, 0700) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return errno;
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%s", path);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int rc = mkdir(buf, 0700);
		int e = errno;
		*p = '/';
		if (rc != 0 && e != EEXIST)
			return e;
	}
	if (mkdir(buf, 0700) != 0 && errno != EEXIST)
		return errno;
	return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void sbx__remove_tree(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

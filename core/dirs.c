/* Folders the library makes and removes: the state dir, per-call output folders, the plugins'
 * folder. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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

/* Whether a plugin file may be loaded: code loaded into the host runs with the host's rights,
 * so the file and every folder above it must be writable by nobody but root and the user
 * running the host, as PAM and sudo require of their modules and configs. Otherwise whoever
 * else can write there can replace the plugin. A world-writable folder with the sticky bit
 * (/tmp) is accepted when the entry below it belongs to root or the user: nobody else may
 * rename or remove that entry. The file is loaded by the resolved path that was checked. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static int owner_ok(const struct stat *st)
{
	return st->st_uid == 0 || st->st_uid == geteuid();
}

static int refuse(const char *plugin, const char *what, const struct stat *st, const char *why,
		  sbx_error *err)
{
	return sbx__set_error(err, SBX_E_ABI,
			      "%s: refusing to load: %s %s (mode %04o, owner uid %u); a plugin and "
			      "the folders above it must be writable only by root or the user "
			      "running sbx",
			      plugin, what, why, (unsigned)(st->st_mode & 07777),
			      (unsigned)st->st_uid);
}

int sbx__plugin_trusted(const char *path, char *real, size_t cap, sbx_error *err)
{
	char buf[PATH_MAX];
	if (cap < PATH_MAX || !realpath(path, buf))
		return sbx__set_error(err, SBX_E_IO, "%s: cannot resolve the plugin path: %s", path,
				      strerror(errno ? errno : ENAMETOOLONG));
	struct stat st, child;
	if (stat(buf, &st) != 0)
		return sbx__set_error(err, SBX_E_IO, "%s: cannot access plugin file: %s", path,
				      strerror(errno));
	if (!owner_ok(&st))
		return refuse(path, "the file", &st, "belongs to another user", err);
	if (st.st_mode & 022)
		return refuse(path, "the file", &st, "is writable by others", err);
	child = st;
	char dir[PATH_MAX];
	memcpy(dir, buf, sizeof(dir));
	for (;;) {
		char *slash = strrchr(dir, '/');
		if (!slash)
			break;
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (stat(dir, &st) != 0)
			return sbx__set_error(err, SBX_E_IO, "%s: cannot access folder %s: %s",
					      path, dir, strerror(errno));
		char what[PATH_MAX + 16];
		snprintf(what, sizeof(what), "the folder %s", dir);
		if (!owner_ok(&st))
			return refuse(path, what, &st, "belongs to another user", err);
		int sticky_ok = (st.st_mode & S_ISVTX) && owner_ok(&child);
		if ((st.st_mode & 022) && !sticky_ok)
			return refuse(path, what, &st, "is writable by others", err);
		if (strcmp(dir, "/") == 0)
			break;
		child = st;
	}
	memcpy(real, buf, strlen(buf) + 1);
	return SBX_OK;
}

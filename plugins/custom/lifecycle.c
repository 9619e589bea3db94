/* Create and destroy: a sandbox is a directory under the plugin's root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sbx/support/host.h>
#include <sbx/support/random.h>

#include "lifecycle.h"

/* Backend ids are 16 hex digits; anything else cannot name one of our sandboxes. */
static int id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n != 16)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", id[i]))
			return 0;
	return 1;
}

int custom_sandbox_dir(const custom_state *st, const char *id, char *buf, size_t cap,
		       sbx_error *err)
{
	if (!id_ok(id))
		return sbxs_host->set_error(
		    err, SBX_E_BAD_ID, "custom: '%.64s' is not a custom sandbox id (16 hex digits)",
		    id);
	int n = snprintf(buf, cap, "%s/%s", st->root, id);
	if (n < 0 || (size_t)n >= cap)
		return sbxs_host->set_error(err, SBX_E_INVAL, "custom: sandbox path too long");
	return SBX_OK;
}

int custom_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		  sbx_error *err)
{
	custom_state *st = state;
	(void)spec;
	if (id_cap < 17)
		return sbxs_host->set_error(err, SBX_E_INVAL,
					    "custom: create: id buffer too small");
	if (sbxs_random_hex(id_buf, id_cap, 8) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_IO, "custom: create: no randomness");
	char dir[1200];
	int rc = custom_sandbox_dir(st, id_buf, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	if (mkdir(dir, 0700) != 0)
		return sbxs_host->set_error(err, SBX_E_IO, "custom: create: cannot create %s: %s",
					    dir, strerror(errno));
	return SBX_OK;
}

static int remove_tree(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			remove_tree(fd, e->d_name);
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

int custom_destroy(void *state, const char *id, sbx_error *err)
{
	custom_state *st = state;
	char dir[1200];
	int rc = custom_sandbox_dir(st, id, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	if (remove_tree(AT_FDCWD, dir) != 0)
		return sbxs_host->set_error(err, SBX_E_IO, "custom: destroy: cannot remove %s: %s",
					    dir, strerror(errno));
	return SBX_OK;
}

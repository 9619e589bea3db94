/* The `local` plugin's sandboxes: create (built under a staging name, renamed into
 * place), destroy, status, pause and resume (the sandbox cgroup frozen), list by label. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "exec.h"
#include "files.h"
#include "lifecycle.h"
#include "limits.h"
#include "meta.h"
#include "ns.h"
#include "state.h"

#define STAGING_PREFIX ".new-"

/* Kills whatever runs in the sandbox and removes its cgroups. */
static void kill_sandbox(const local_state *st, const char *id)
{
	char cg[600];
	if (st->iso.level == LOCAL_ISO_NAMESPACES)
		local_iso_destroy(st, id); /* its init: the kernel kills the rest */
	if (local_cg_sandbox_path(st, id, cg, sizeof(cg)) == SBX_OK && access(cg, F_OK) == 0) {
		local_cg_kill(st, cg);
		local_cg_spares_drop(st, id);
		local_cg_remove(cg);
	}
	if (st->iso.level == LOCAL_ISO_NAMESPACES)
		local_limits_remove(st, id);
}

int local_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		 sbx_error *err)
{
	local_state *st = state;
	if (id_cap < LOCAL_ID_LEN + 1)
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: create: id buffer too small");
	unsigned char raw[LOCAL_ID_LEN / 2];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return sbxs_host->set_error(err, SBX_E_IO, "local: create: getrandom: %s",
					    strerror(errno));
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id_buf + 2 * i, 3, "%02x", raw[i]);
	/* The sandbox is built under a staging name and renamed into place with its labels
	 * already written, so a process killed mid-create never leaves an unlabelled sandbox
	 * that gc could not find; a staging folder whose creator died is swept by
	 * list_by_label. */
	char dir[1200], staging[1200], work[1300];
	int rc = local_path(st, id_buf, NULL, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	int n = snprintf(staging, sizeof(staging), "%s/%s%ld-%s", st->root, STAGING_PREFIX,
			 (long)getpid(), id_buf);
	if (n < 0 || (size_t)n >= sizeof(staging))
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: sandbox path too long");
	snprintf(work, sizeof(work), "%s/work", staging);
	/* With share_dir (this sandbox's, checked by the host, else the config's, checked by
	 * init) the work dir is a link to that folder: commands and file ops see the host's
	 * files there, the link is how another process finds the folder, and destroy removes
	 * the link, never what it points to. */
	int own = spec && SBX_HAS(spec, sbx_create_spec, share_dir) && spec->share_dir;
	const char *share = own ? spec->share_dir : st->share_dir;
	if (own && st->iso.level == LOCAL_ISO_NAMESPACES) {
		rc = sbxs_host->set_error(err, SBX_E_UNSUPPORTED,
					  "local: create: share_dir is for the plain level: at "
					  "isolation: namespaces a sandbox sees a tree of its own");
		goto fail;
	}
	char running[1300];
	const char *made = work;
	int failed =
	    mkdir(staging, 0700) != 0 || (share[0] ? symlink(share, work) : mkdir(work, 0700)) != 0;
	if (!failed && st->kill_mechanism == LOCAL_KILL_SUBREAPER &&
	    st->iso.level == LOCAL_ISO_PLAIN) {
		/* The marks of execs that may leave processes (exec.c). */
		snprintf(running, sizeof(running), "%s/" LOCAL_RUNNING_DIR, staging);
		made = running;
		failed = mkdir(running, 0700) != 0;
	}
	if (failed) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: create: cannot create %s: %s",
					  made, strerror(errno));
		local_rmtree(staging);
		goto fail;
	}
	rc = local_meta_write(staging, spec, err);
	if (rc == SBX_OK && rename(staging, dir) != 0)
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: create: cannot rename %s: %s",
					  staging, strerror(errno));
	if (rc != SBX_OK) {
		local_rmtree(staging);
		goto fail;
	}
	rc = local_cg_sandbox(st, id_buf, err);
	if (rc == SBX_OK && st->iso.level == LOCAL_ISO_NAMESPACES)
		rc = local_iso_create(st, id_buf, spec, err);
	if (rc == SBX_OK)
		return SBX_OK;
	kill_sandbox(st, id_buf);
	local_rmtree(dir);
fail:
	id_buf[0] = '\0';
	return rc;
}

int local_destroy(void *state, const char *id, sbx_error *err)
{
	local_state *st = state;
	char dir[1200];
	int rc = local_path(st, id, NULL, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	struct stat sb;
	if (lstat(dir, &sb) != 0 && errno == ENOENT)
		return SBX_OK; /* not under this root: gone, or another root's, left alone */
	kill_sandbox(st, id);
	if (st->kill_mechanism == LOCAL_KILL_SUBREAPER && !local_exec_none_left(dir))
		local_kill_tagged(id); /* no cgroup: find its processes by their tag */
	int e = local_rmtree(dir);
	if (e != 0)
		return sbxs_host->set_error(err, SBX_E_IO, "local: destroy: cannot remove %s: %s",
					    dir, strerror(e));
	return SBX_OK;
}

int local_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	local_state *st = state;
	char work[1200];
	int rc = local_path(st, id, "work", work, sizeof(work), err);
	if (rc != SBX_OK)
		return rc;
	struct stat sb;
	if (stat(work, &sb) != 0)
		*out = SBX_STATE_GONE;
	else
		*out = local_cg_frozen(st, id) == 1 ? SBX_STATE_PAUSED : SBX_STATE_RUNNING;
	return SBX_OK;
}

int local_exists(local_state *st, const char *id, const char *op, sbx_error *err)
{
	char work[1200];
	int rc = local_path(st, id, "work", work, sizeof(work), err);
	if (rc != SBX_OK)
		return rc;
	if (access(work, F_OK) != 0)
		return sbxs_host->set_error(err, SBX_E_NOT_FOUND, "local: %s: sandbox %s not found",
					    op, id);
	return SBX_OK;
}

int local_pause(void *state, const char *id, sbx_error *err)
{
	int rc = local_exists(state, id, "pause", err);
	return rc != SBX_OK ? rc : local_cg_freeze(state, id, 1, err);
}

int local_resume(void *state, const char *id, sbx_error *err)
{
	int rc = local_exists(state, id, "resume", err);
	return rc != SBX_OK ? rc : local_cg_freeze(state, id, 0, err);
}

/* Removes a staging folder ".new-<pid>-<id>" whose creating process no longer exists. */
static void sweep_staging(const local_state *st, const char *name)
{
	char *end = NULL;
	long pid = strtol(name + strlen(STAGING_PREFIX), &end, 10);
	if (pid <= 0 || !end || *end != '-' || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
		return;
	char path[1200];
	int n = snprintf(path, sizeof(path), "%s/%s", st->root, name);
	if (n > 0 && (size_t)n < sizeof(path))
		local_rmtree(path);
}

int local_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
			sbx_error *err)
{
	local_state *st = state;
	DIR *d = opendir(st->root);
	if (!d)
		return errno == ENOENT
			   ? SBX_OK
			   : sbxs_host->set_error(err, SBX_E_IO, "local: list: cannot read %s: %s",
						  st->root, strerror(errno));
	/* gc lists by the ledger label: the moment to sweep leftovers no label can find. */
	if (strcmp(key, "sbx.ledger") == 0)
		local_cg_sweep(st);
	int rc = SBX_OK;
	struct dirent *e;
	while (rc == SBX_OK && (e = readdir(d))) {
		if (strncmp(e->d_name, STAGING_PREFIX, strlen(STAGING_PREFIX)) == 0) {
			sweep_staging(st, e->d_name);
			continue;
		}
		if (local_id_ok(e->d_name) && local_meta_has_label(st, e->d_name, key, value))
			rc = fn(ctx, e->d_name);
	}
	closedir(d);
	return rc;
}

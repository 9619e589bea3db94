/* The `local` sandbox plugin: a sandbox is a private work dir on this machine,
 * <root>/<id>/work, with its metadata in <root>/<id>/meta.json. Commands run in their own
 * session, process group and (where writable) cgroup; see exec.c. Files are confined to the
 * work dir; see files.c. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "local.h"

#define STAGING_PREFIX ".new-"

const sbx_host_api *sbx__local_host;

#define H sbx__local_host

static const sbx_config_key local_keys[] = {
    {.name = "root", .type = SBX_KEY_STRING, .help = "folder holding the sandboxes"},
    {.name = "work_dir", .type = SBX_KEY_STRING, .help = "alias of root (NexAU)"},
    {.name = "working_dir", .type = SBX_KEY_STRING, .help = "alias of root"},
    {.name = "inherit_env",
     .type = SBX_KEY_BOOL,
     .help = "commands start from the host's environment (default true)"},
    {.name = "kill_mechanism",
     .type = SBX_KEY_STRING,
     .help = "auto, cgroup-v2, cgroup-v1-freezer or subreaper"},
    {.name = "drain_ms",
     .type = SBX_KEY_INT,
     .help = "grace for output after the command exits, ms (default 100)"},
    {.name = "isolation",
     .type = SBX_KEY_STRING,
     .help = "plain (default) or namespaces: own PID, mount, IPC, UTS, network namespaces"},
    {.name = "rootfs",
     .type = SBX_KEY_STRING,
     .help = "isolated root filesystem: host (default) or an absolute folder"},
    {.name = "image",
     .type = SBX_KEY_STRING,
     .help = "isolated root filesystem from a docker/podman save or OCI archive"},
    {.name = "image_archives",
     .type = SBX_KEY_STRING,
     .help = "folder of image archives an image name is looked up in"},
    {.name = "image_cache",
     .type = SBX_KEY_STRING,
     .help = "folder images are unpacked into (default <root>/.images)"},
    {.name = "network", .type = SBX_KEY_STRING, .help = "none (default, loopback only) or host"},
    {.name = "memory", .type = SBX_KEY_ANY, .help = "memory limit per sandbox, e.g. 512M, 2G"},
    {.name = "pids", .type = SBX_KEY_INT, .help = "most processes per sandbox"},
    {.name = "cpus", .type = SBX_KEY_ANY, .help = "CPU quota per sandbox, e.g. 1.5"},
    {.name = "disk", .type = SBX_KEY_ANY, .help = "cap on the overlay's upper dir, e.g. 10G"},
    {.name = "share_dir",
     .type = SBX_KEY_STRING,
     .help = "existing host folder that is every sandbox's work dir (NexAU LocalSandbox's "
	     "work_dir); destroy leaves its contents"},
};

static int id_ok(const char *id)
{
	if (!id || strlen(id) != LOCAL_ID_LEN)
		return 0;
	for (size_t i = 0; i < LOCAL_ID_LEN; i++)
		if (!strchr("0123456789abcdef", id[i]))
			return 0;
	return 1;
}

int sbx__local_path(const local_state *st, const char *id, const char *suffix, char *buf,
		    size_t cap, sbx_error *err)
{
	if (!id_ok(id))
		return H->set_error(err, SBX_E_BAD_ID,
				    "local: '%.64s' is not a local sandbox id (%d hex digits)",
				    id ? id : "", LOCAL_ID_LEN);
	int n = suffix ? snprintf(buf, cap, "%s/%s/%s", st->root, id, suffix)
		       : snprintf(buf, cap, "%s/%s", st->root, id);
	if (n < 0 || (size_t)n >= cap)
		return H->set_error(err, SBX_E_INVAL, "local: sandbox path too long");
	return SBX_OK;
}

static int opt_string(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	int rc = H->config_string(cfg, key, out, err);
	return rc == SBX_E_NOT_FOUND ? SBX_OK : rc;
}

static int mkdir_p(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int r = mkdir(path, 0700);
		*p = '/';
		if (r != 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

static int local_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	const char *root = NULL, *mech = NULL, *share = NULL;
	int rc = opt_string(cfg, "root", &root, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "share_dir", &share, err);
	if (rc == SBX_OK && !root)
		rc = opt_string(cfg, "work_dir", &root, err);
	if (rc == SBX_OK && !root)
		rc = opt_string(cfg, "working_dir", &root, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "kill_mechanism", &mech, err);
	if (rc != SBX_OK)
		return rc;
	struct stat sb;
	if (share && (share[0] != '/' || stat(share, &sb) != 0 || !S_ISDIR(sb.st_mode)))
		return H->set_error(err, SBX_E_CONFIG,
				    "local: share_dir '%.300s' must be an existing folder given by "
				    "its absolute path",
				    share);
	int inherit = 1;
	rc = H->config_bool(cfg, "inherit_env", &inherit, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	int64_t drain = 100;
	rc = H->config_int(cfg, "drain_ms", &drain, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	if (drain < 0 || drain > 10000)
		return H->set_error(err, SBX_E_CONFIG,
				    "local: drain_ms %lld is out of range (0 .. 10000)",
				    (long long)drain);
	local_state *st = H->alloc(sizeof(*st));
	if (!st)
		return H->set_error(err, SBX_E_NOMEM, "local: init: out of memory");
	memset(st, 0, sizeof(*st));
	st->iso.self_pidns = -1;
	st->inherit_env = inherit != 0;
	st->drain_ms = (int)drain;
	if (share && (size_t)snprintf(st->share_dir, sizeof(st->share_dir), "%s", share) >=
			 sizeof(st->share_dir)) {
		rc = H->set_error(err, SBX_E_CONFIG, "local: init: share_dir path is too long");
		goto fail;
	}
	st->use_openat2 = getenv("SBX_LOCAL_NO_OPENAT2") == NULL;
	const char *dir =
	    SBX_HAS(H, sbx_host_api, state_dir_for) ? H->state_dir_for(cfg) : H->state_dir();
	int n = root  ? snprintf(st->root, sizeof(st->root), "%s", root)
		: dir ? snprintf(st->root, sizeof(st->root), "%s/local", dir)
		      : -1;
	if (n < 0 || (size_t)n >= sizeof(st->root) - 64) {
		rc = H->set_error(err, SBX_E_CONFIG, "local: init: root path is too long");
		goto fail;
	}
	if (mkdir_p(st->root) != 0) {
		rc = H->set_error(err, SBX_E_CONFIG, "local: init: cannot create root %s: %s",
				  st->root, strerror(errno));
		goto fail;
	}
	rc = sbx__local_cg_detect(st, mech, err);
	if (rc == SBX_OK)
		rc = sbx__local_iso_init(st, cfg, err);
	if (rc != SBX_OK)
		goto fail;
	H->log(SBX_LOG_DEBUG, "local", "root %s, kill mechanism %s", st->root,
	       sbx__local_mechanism_name(st->kill_mechanism));
	*state = st;
	return SBX_OK;
fail:
	sbx__local_iso_fini(st);
	H->free(st);
	return rc;
}

static void local_fini(void *state)
{
	sbx__local_iso_fini(state);
	H->free(state);
}

/* Kills whatever runs in the sandbox and removes its cgroups. */
static void kill_sandbox(const local_state *st, const char *id)
{
	char cg[600];
	if (st->iso.level == LOCAL_ISO_NAMESPACES)
		sbx__local_iso_destroy(st, id); /* its init: the kernel kills the rest */
	if (sbx__local_cg_sandbox_path(st, id, cg, sizeof(cg)) == SBX_OK && access(cg, F_OK) == 0) {
		sbx__local_cg_kill(st, cg);
		sbx__local_cg_remove(cg);
	}
	if (st->iso.level == LOCAL_ISO_NAMESPACES)
		sbx__local_limits_remove(st, id);
}

static int local_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
			sbx_error *err)
{
	local_state *st = state;
	if (id_cap < LOCAL_ID_LEN + 1)
		return H->set_error(err, SBX_E_INVAL, "local: create: id buffer too small");
	unsigned char raw[LOCAL_ID_LEN / 2];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return H->set_error(err, SBX_E_IO, "local: create: getrandom: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id_buf + 2 * i, 3, "%02x", raw[i]);
	/* The sandbox is built under a staging name and renamed into place with its labels
	 * already written, so a process killed mid-create never leaves an unlabelled sandbox
	 * that gc could not find; a staging folder whose creator died is swept by
	 * list_by_label. */
	char dir[1200], staging[1200], work[1300];
	int rc = sbx__local_path(st, id_buf, NULL, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	int n = snprintf(staging, sizeof(staging), "%s/%s%ld-%s", st->root, STAGING_PREFIX,
			 (long)getpid(), id_buf);
	if (n < 0 || (size_t)n >= sizeof(staging))
		return H->set_error(err, SBX_E_INVAL, "local: sandbox path too long");
	snprintf(work, sizeof(work), "%s/work", staging);
	/* With share_dir the work dir is a link to that folder: commands and file ops see the
	 * host's files there, and destroy removes the link, never what it points to. */
	if (mkdir(staging, 0700) != 0 ||
	    (st->share_dir[0] ? symlink(st->share_dir, work) : mkdir(work, 0700)) != 0) {
		rc = H->set_error(err, SBX_E_IO, "local: create: cannot create %s: %s", work,
				  strerror(errno));
		sbx__local_rmtree(staging);
		goto fail;
	}
	rc = sbx__local_meta_write(staging, spec, err);
	if (rc == SBX_OK && rename(staging, dir) != 0)
		rc = H->set_error(err, SBX_E_IO, "local: create: cannot rename %s: %s", staging,
				  strerror(errno));
	if (rc != SBX_OK) {
		sbx__local_rmtree(staging);
		goto fail;
	}
	rc = sbx__local_cg_sandbox(st, id_buf, err);
	if (rc == SBX_OK && st->iso.level == LOCAL_ISO_NAMESPACES)
		rc = sbx__local_iso_create(st, id_buf, spec, err);
	if (rc == SBX_OK)
		return SBX_OK;
	kill_sandbox(st, id_buf);
	sbx__local_rmtree(dir);
fail:
	id_buf[0] = '\0';
	return rc;
}

static int local_destroy(void *state, const char *id, sbx_error *err)
{
	local_state *st = state;
	char dir[1200];
	int rc = sbx__local_path(st, id, NULL, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	struct stat sb;
	if (lstat(dir, &sb) != 0 && errno == ENOENT)
		return SBX_OK; /* not under this root: gone, or another root's, left alone */
	kill_sandbox(st, id);
	if (st->kill_mechanism == LOCAL_KILL_SUBREAPER)
		sbx__local_kill_tagged(id); /* no cgroup: find its processes by their tag */
	int e = sbx__local_rmtree(dir);
	if (e != 0)
		return H->set_error(err, SBX_E_IO, "local: destroy: cannot remove %s: %s", dir,
				    strerror(e));
	return SBX_OK;
}

static int local_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	local_state *st = state;
	char work[1200];
	int rc = sbx__local_path(st, id, "work", work, sizeof(work), err);
	if (rc != SBX_OK)
		return rc;
	struct stat sb;
	if (stat(work, &sb) != 0)
		*out = SBX_STATE_GONE;
	else
		*out = sbx__local_cg_frozen(st, id) == 1 ? SBX_STATE_PAUSED : SBX_STATE_RUNNING;
	return SBX_OK;
}

static int exists_or_not_found(local_state *st, const char *id, const char *op, sbx_error *err)
{
	char work[1200];
	int rc = sbx__local_path(st, id, "work", work, sizeof(work), err);
	if (rc != SBX_OK)
		return rc;
	if (access(work, F_OK) != 0)
		return H->set_error(err, SBX_E_NOT_FOUND, "local: %s: sandbox %s not found", op,
				    id);
	return SBX_OK;
}

static int local_pause(void *state, const char *id, sbx_error *err)
{
	int rc = exists_or_not_found(state, id, "pause", err);
	return rc != SBX_OK ? rc : sbx__local_cg_freeze(state, id, 1, err);
}

static int local_resume(void *state, const char *id, sbx_error *err)
{
	int rc = exists_or_not_found(state, id, "resume", err);
	return rc != SBX_OK ? rc : sbx__local_cg_freeze(state, id, 0, err);
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
		sbx__local_rmtree(path);
}

static int local_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn,
			       void *ctx, sbx_error *err)
{
	local_state *st = state;
	DIR *d = opendir(st->root);
	if (!d)
		return errno == ENOENT
			   ? SBX_OK
			   : H->set_error(err, SBX_E_IO, "local: list: cannot read %s: %s",
					  st->root, strerror(errno));
	/* gc lists by the ledger label: the moment to sweep leftovers no label can find. */
	if (strcmp(key, "sbx.ledger") == 0)
		sbx__local_cg_sweep(st);
	int rc = SBX_OK;
	struct dirent *e;
	while (rc == SBX_OK && (e = readdir(d))) {
		if (strncmp(e->d_name, STAGING_PREFIX, strlen(STAGING_PREFIX)) == 0) {
			sweep_staging(st, e->d_name);
			continue;
		}
		if (id_ok(e->d_name) && sbx__local_meta_has_label(st, e->d_name, key, value))
			rc = fn(ctx, e->d_name);
	}
	closedir(d);
	return rc;
}

static int local_info(void *state, char **json, sbx_error *err)
{
	local_state *st = state;
	char buf[3072], iso[1024];
	const char *r = st->root;
	char esc[1100];
	size_t k = 0;
	for (size_t i = 0; r[i] && k + 7 < sizeof(esc); i++) {
		unsigned char c = (unsigned char)r[i];
		if (c == '"' || c == '\\') {
			esc[k++] = '\\';
			esc[k++] = (char)c;
		} else if (c < 0x20) {
			k += (size_t)snprintf(esc + k, sizeof(esc) - k, "\\u%04x", c);
		} else {
			esc[k++] = (char)c;
		}
	}
	esc[k] = '\0';
	if (sbx__local_iso_info(st, iso, sizeof(iso)) != 0)
		return H->set_error(err, SBX_E_INVAL, "local: info: too long");
	int n = snprintf(buf, sizeof(buf),
			 "{\"kill_mechanism\":\"%s\",\"cgroup\":\"%s\",\"root\":\"%s\","
			 "\"pause\":%s,\"openat2\":%s,\"inherit_env\":%s,\"drain_ms\":%d,%s}",
			 sbx__local_mechanism_name(st->kill_mechanism), st->cg_root, esc,
			 st->kill_mechanism == LOCAL_KILL_SUBREAPER ? "false" : "true",
			 st->use_openat2 ? "true" : "false", st->inherit_env ? "true" : "false",
			 st->drain_ms, iso);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return H->set_error(err, SBX_E_INVAL, "local: info: too long");
	*json = H->alloc((size_t)n + 1);
	if (!*json)
		return H->set_error(err, SBX_E_NOMEM, "local: info: out of memory");
	memcpy(*json, buf, (size_t)n + 1);
	return SBX_OK;
}

/* One sandbox: its level and, isolated, its root and what its writable layer uses. */
static int local_sandbox_info(void *state, const char *id, char **json, sbx_error *err)
{
	local_state *st = state;
	int rc = exists_or_not_found(st, id, "sandbox info", err);
	if (rc != SBX_OK)
		return rc;
	char buf[512], dir[1200], path[1300];
	int n;
	if (st->iso.level != LOCAL_ISO_NAMESPACES) {
		n = snprintf(buf, sizeof(buf), "{\"isolation\":\"plain\"}");
	} else {
		int64_t used = 0, cap = 0;
		rc = sbx__local_disk_usage(st, id, &used, &cap, err);
		if (rc == SBX_OK)
			rc = sbx__local_path(st, id, NULL, dir, sizeof(dir), err);
		if (rc != SBX_OK)
			return rc;
		snprintf(path, sizeof(path), "%s/env.image", dir);
		const char *rootfs = access(path, F_OK) == 0 ? "image" : "host";
		snprintf(path, sizeof(path), "%s/lower", dir);
		if (rootfs[0] == 'h' && access(path, F_OK) == 0)
			rootfs = "dir";
		n = snprintf(buf, sizeof(buf),
			     "{\"isolation\":\"namespaces\",\"rootfs\":\"%s\",\"init_pid\":%ld,"
			     "\"disk\":{\"upper_bytes\":%lld,\"cap_bytes\":%lld}}",
			     rootfs, sbx__local_iso_init_pid(dir), (long long)used, (long long)cap);
	}
	if (n < 0 || (size_t)n >= sizeof(buf))
		return H->set_error(err, SBX_E_INVAL, "local: sandbox info: too long");
	*json = H->alloc((size_t)n + 1);
	if (!*json)
		return H->set_error(err, SBX_E_NOMEM, "local: sandbox info: out of memory");
	memcpy(*json, buf, (size_t)n + 1);
	return SBX_OK;
}

int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg)
{
	sbx__local_host = host;
	sbx_plugin_desc d = {
	    .alias = "local",
	    .version = "0.1.0",
	    .description = "sandboxes as private work dirs on this machine, tree kill by cgroup "
			   "or subreaper",
	    .keys = local_keys,
	    .n_keys = sizeof(local_keys) / sizeof(local_keys[0]),
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = local_init,
	    .fini = local_fini,
	    .create = local_create,
	    .execute = sbx__local_execute,
	    .destroy = local_destroy,
	    .read_file = sbx__local_read_file,
	    .write_file = sbx__local_write_file,
	    .stat_file = sbx__local_stat_file,
	    .list_dir = sbx__local_list_dir,
	    .make_dir = sbx__local_make_dir,
	    .remove_path = sbx__local_remove_path,
	    .pause = local_pause,
	    .resume = local_resume,
	    .status = local_status,
	    .list_by_label = local_list_by_label,
	    .info = local_info,
	    .sandbox_info = local_sandbox_info,
	};
	SBX_INIT_HEADER(d);
	return host->register_sandbox(reg, &d);
}

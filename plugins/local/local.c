/* The `local` sandbox plugin: a sandbox is a private work dir on this machine,
 * <root>/<id>/work, with its metadata in <root>/<id>/meta.json. Commands run in their own
 * session, process group and (where writable) cgroup; see exec.c. Files are confined to the
 * work dir; see files.c. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "child.h"
#include "disk.h"
#include "env.h"
#include "exec.h"
#include "files.h"
#include "lifecycle.h"
#include "limits.h"
#include "local.h"
#include "meta.h"
#include "ns.h"
#include "spawn.h"
#include "state.h"

static const sbx_config_key local_keys[] = {
    {.name = "root", .type = SBX_KEY_STRING, .help = "folder holding the sandboxes"},
    {.name = "work_dir", .type = SBX_KEY_STRING, .help = "alias of root (NexAU)"},
    {.name = "working_dir", .type = SBX_KEY_STRING, .help = "alias of root"},
    {.name = "inherit_env",
     .type = SBX_KEY_BOOL,
     .help = "commands start from the host's whole environment (default false: PATH, HOME, "
	     "LANG, TERM, SHELL and env_passthrough)"},
    {.name = "env_passthrough",
     .type = SBX_KEY_LIST,
     .help = "names of host environment variables passed to commands"},
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
    {.name = "strict_isolation",
     .type = SBX_KEY_BOOL,
     .help = "refuse to start unless no command can leave the sandbox's reach (see "
	     "'contained' in sbx plugins --json)"},
    {.name = "share_dir",
     .type = SBX_KEY_STRING,
     .help = "existing host folder that is every sandbox's work dir (NexAU LocalSandbox's "
	     "work_dir); destroy leaves its contents"},
};

static int opt_string(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	int rc = sbxs_host->config_string(cfg, key, out, err);
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

/* Why a hostile command could leave the reach of the sandbox's timeout, pause and destroy
 * (NULL when it cannot). At the plain level commands run with the host user's own rights. */
static const char *uncontained_why(const local_state *st)
{
	if (st->iso.level == LOCAL_ISO_NAMESPACES)
		return NULL;
	if (st->kill_mechanism == LOCAL_KILL_SUBREAPER)
		return "with kill_mechanism subreaper a command can kill its subreaper helper "
		       "(kill -9 $PPID) and drop its tag (env -u SBX_LOCAL_SANDBOX)";
	if (geteuid() == 0)
		return "at the plain level commands run as root with every capability: one can "
		       "move itself out of the sandbox's cgroup and drop its tag "
		       "(env -u SBX_LOCAL_EXEC)";
	return "at the plain level a command can move itself to another cgroup of the "
	       "delegated tree";
}

static int local_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	if (SBX_HAS(sbxs_host, sbx_host_api, command_nofile) && sbxs_host->command_nofile)
		local_child_set_nofile(sbxs_host->command_nofile());
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
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "local: share_dir '%.300s' must be an existing folder given by "
		    "its absolute path",
		    share);
	/* The host's cap on a file read (a key the host adds to every plugin config). */
	int64_t max_file = 256ll << 20;
	rc = sbxs_host->config_int(cfg, "max_file_bytes", &max_file, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	int64_t drain = 100;
	rc = sbxs_host->config_int(cfg, "drain_ms", &drain, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	if (drain < 0 || drain > 10000)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "local: drain_ms %lld is out of range (0 .. 10000)",
					    (long long)drain);
	local_state *st = sbxs_host->alloc(sizeof(*st));
	if (!st)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "local: init: out of memory");
	memset(st, 0, sizeof(*st));
	st->iso.self_pidns = -1;
	st->drain_ms = (int)drain;
	st->max_file_bytes = max_file > 0 ? max_file : 256ll << 20;
	if (share && (size_t)snprintf(st->share_dir, sizeof(st->share_dir), "%s", share) >=
			 sizeof(st->share_dir)) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "local: init: share_dir path is too long");
		goto fail;
	}
	st->use_openat2 = getenv("SBX_LOCAL_NO_OPENAT2") == NULL;
	const char *dir = SBX_HAS(sbxs_host, sbx_host_api, state_dir_for)
			      ? sbxs_host->state_dir_for(cfg)
			      : sbxs_host->state_dir();
	int n = root  ? snprintf(st->root, sizeof(st->root), "%s", root)
		: dir ? snprintf(st->root, sizeof(st->root), "%s/local", dir)
		      : -1;
	if (n < 0 || (size_t)n >= sizeof(st->root) - 64) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG, "local: init: root path is too long");
		goto fail;
	}
	if (mkdir_p(st->root) != 0) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "local: init: cannot create root %s: %s", st->root,
					  strerror(errno));
		goto fail;
	}
	/* A relative root is the working directory's now: a harness that changes directory
	 * later must not lose its sandboxes. */
	if (st->root[0] != '/') {
		char real[PATH_MAX];
		const char *why = realpath(st->root, real) ? NULL : strerror(errno);
		if (!why && strlen(real) >= sizeof(st->root) - 64)
			why = "its absolute path is too long";
		if (why) {
			rc = sbxs_host->set_error(err, SBX_E_CONFIG, "local: init: root %s: %s",
						  st->root, why);
			goto fail;
		}
		memcpy(st->root, real, strlen(real) + 1);
	}
	rc = local_env_init(st, cfg, err);
	if (rc == SBX_OK)
		rc = local_cg_detect(st, mech, err);
	if (rc == SBX_OK &&
	    local_beside_plugin("sbx-local-exec", st->exec_exe, sizeof(st->exec_exe)) != 0)
		sbxs_host->log(SBX_LOG_WARN, "local",
			       "sbx-local-exec is not beside the plugin: kill_mechanism subreaper "
			       "cannot run commands, and leftovers holding a command's output get "
			       "no sink");
	if (rc == SBX_OK)
		rc = local_iso_init(st, cfg, err);
	int strict = 0;
	if (rc == SBX_OK &&
	    (rc = sbxs_host->config_bool(cfg, "strict_isolation", &strict, err)) == SBX_E_NOT_FOUND)
		rc = SBX_OK;
	if (rc == SBX_OK && strict && uncontained_why(st))
		rc = sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "local: strict_isolation: commands could leave the sandbox's "
		    "reach: %s; use isolation: namespaces",
		    uncontained_why(st));
	if (rc != SBX_OK)
		goto fail;
	sbxs_host->log(SBX_LOG_DEBUG, "local", "root %s, kill mechanism %s", st->root,
		       local_mechanism_name(st->kill_mechanism));
	*state = st;
	return SBX_OK;
fail:
	local_cg_release(st); /* a refused config leaves no cgroup folder either */
	local_limits_release(st);
	local_iso_fini(st);
	local_strv_free(st->passthrough);
	sbxs_host->free(st);
	return rc;
}

static void local_fini(void *state)
{
	local_state *st = state;
	local_exec_reap_all();
	local_cg_spares_drop(st, NULL);
	local_cg_release(st);
	local_limits_release(st);
	local_iso_fini(st);
	local_strv_free(st->passthrough);
	sbxs_host->free(st);
}

static int local_info(void *state, char **json, sbx_error *err)
{
	local_state *st = state;
	char buf[4096], iso[1024];
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
	if (local_iso_info(st, iso, sizeof(iso)) != 0)
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: info: too long");
	int n = snprintf(buf, sizeof(buf),
			 "{\"kill_mechanism\":\"%s\",\"cgroup\":\"%s\",\"root\":\"%s\","
			 "\"pause\":%s,\"openat2\":%s,\"inherit_env\":%s,\"drain_ms\":%d,"
			 "\"max_file_bytes\":%lld,\"contained\":%s,\"contained_why\":\"%s\",%s}",
			 local_mechanism_name(st->kill_mechanism), st->cg_root, esc,
			 st->kill_mechanism == LOCAL_KILL_SUBREAPER ? "false" : "true",
			 st->use_openat2 ? "true" : "false", st->inherit_env ? "true" : "false",
			 st->drain_ms, (long long)st->max_file_bytes,
			 uncontained_why(st) ? "false" : "true",
			 uncontained_why(st) ? uncontained_why(st) : "", iso);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: info: too long");
	*json = sbxs_host->alloc((size_t)n + 1);
	if (!*json)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "local: info: out of memory");
	memcpy(*json, buf, (size_t)n + 1);
	return SBX_OK;
}

/* One sandbox: its level and, isolated, its root and what its writable layer uses. */
static int local_sandbox_info(void *state, const char *id, char **json, sbx_error *err)
{
	local_state *st = state;
	int rc = local_exists(st, id, "sandbox info", err);
	if (rc != SBX_OK)
		return rc;
	char buf[512], dir[1200], path[1300];
	int n;
	if (st->iso.level != LOCAL_ISO_NAMESPACES) {
		n = snprintf(buf, sizeof(buf), "{\"isolation\":\"plain\"}");
	} else {
		int64_t used = 0, cap = 0;
		rc = local_disk_usage(st, id, &used, &cap, err);
		if (rc == SBX_OK)
			rc = local_path(st, id, NULL, dir, sizeof(dir), err);
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
			     rootfs, local_iso_init_pid(dir), (long long)used, (long long)cap);
	}
	if (n < 0 || (size_t)n >= sizeof(buf))
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: sandbox info: too long");
	*json = sbxs_host->alloc((size_t)n + 1);
	if (!*json)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "local: sandbox info: out of memory");
	memcpy(*json, buf, (size_t)n + 1);
	return SBX_OK;
}

/* A harness may fork while another of its threads is inside this plugin: the child resets
 * what that thread may have held (the host refuses a host made before the fork; the child's
 * own host gets states of its own from local_init). */
static void local_fork_child(void)
{
	local_spawn_fork_child();
	local_exec_fork_child();
	local_cg_fork_child();
}

__attribute__((constructor)) static void local_watch_forks(void)
{
	pthread_atfork(NULL, NULL, local_fork_child);
}

int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg)
{
	sbxs_host_set(host);
	sbx_plugin_desc d = {
	    .alias = "local",
	    .version = "0.1.0",
	    .description = "sandboxes as private work dirs on this machine, tree kill by cgroup "
			   "or subreaper",
	    .keys = local_keys,
	    .n_keys = sizeof(local_keys) / sizeof(local_keys[0]),
	    .flags = SBX_PLUGIN_THREAD_SAFE | SBX_PLUGIN_REDIRECT | SBX_PLUGIN_SHARE_DIR,
	    .init = local_init,
	    .fini = local_fini,
	    .create = local_create,
	    .execute = local_execute,
	    .destroy = local_destroy,
	    .read_file = local_read_file,
	    .write_file = local_write_file,
	    .stat_file = local_stat_file,
	    .list_dir = local_list_dir,
	    .make_dir = local_make_dir,
	    .remove_path = local_remove_path,
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

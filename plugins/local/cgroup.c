/* Per-sandbox and per-exec cgroups: the sandbox's at <cg_root>/<id>, each exec's below it.
 * Killing a cgroup reaches every process that ever started in it, setsid and double-fork
 * escapees included. cgroup v2 has cgroup.kill; on v1 the freezer stops the tree first so
 * nothing can fork while we signal it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

static atomic_uint exec_counter;

const char *sbx__local_mechanism_name(int mechanism)
{
	switch (mechanism) {
	case LOCAL_KILL_CGROUP_V2:
		return "cgroup-v2";
	case LOCAL_KILL_FREEZER:
		return "cgroup-v1-freezer";
	default:
		return "subreaper";
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[1400];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	ssize_t w = write(fd, text, len);
	close(fd);
	return w == (ssize_t)len ? 0 : -1;
}

static int read_small(const char *dir, const char *name, char *buf, size_t cap)
{
	char path[1400];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, cap - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = '\0';
	return 0;
}

static int exists(const char *dir, const char *name)
{
	char path[1400];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	return n > 0 && (size_t)n < sizeof(path) && access(path, F_OK) == 0;
}

static int try_root(local_state *st, const char *root, int mechanism)
{
	int n = snprintf(st->cg_root, sizeof(st->cg_root), "%s/sbx", root);
	if (n < 0 || (size_t)n >= sizeof(st->cg_root))
		return 0;
	if (mkdir(st->cg_root, 0755) != 0 && errno != EEXIST)
		return 0;
	const char *probe = mechanism == LOCAL_KILL_CGROUP_V2 ? "cgroup.kill" : "freezer.state";
	if (!exists(st->cg_root, probe) || access(st->cg_root, W_OK) != 0)
		return 0;
	st->kill_mechanism = mechanism;
	return 1;
}

static int v2_usable(local_state *st)
{
	static const char *const mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		char ctl[512] = "";
		if (read_small(mounts[i], "cgroup.controllers", ctl, sizeof(ctl)) != 0)
			continue;
		/* A v2 tree without controllers is the hybrid layout's: leave it to v1. */
		if (strspn(ctl, " \n") == strlen(ctl))
			continue;
		if (try_root(st, mounts[i], LOCAL_KILL_CGROUP_V2))
			return 1;
	}
	return 0;
}

int sbx__local_cg_detect(local_state *st, const char *wanted, sbx_error *err)
{
	const sbx_host_api *h = sbx__local_host;
	int any = !wanted || strcmp(wanted, "auto") == 0;
	st->cg_root[0] = '\0';
	if (any || strcmp(wanted, "cgroup-v2") == 0) {
		if (v2_usable(st))
			return SBX_OK;
		if (!any)
			return h->set_error(
			    err, SBX_E_CONFIG,
			    "local: kill_mechanism 'cgroup-v2': no writable cgroup v2 "
			    "tree with controllers on this machine");
	}
	if (any || strcmp(wanted, "cgroup-v1-freezer") == 0) {
		if (try_root(st, "/sys/fs/cgroup/freezer", LOCAL_KILL_FREEZER))
			return SBX_OK;
		if (!any)
			return h->set_error(err, SBX_E_CONFIG,
					    "local: kill_mechanism 'cgroup-v1-freezer': "
					    "/sys/fs/cgroup/freezer is missing or not writable");
	}
	if (any || strcmp(wanted, "subreaper") == 0) {
		st->cg_root[0] = '\0';
		st->kill_mechanism = LOCAL_KILL_SUBREAPER;
		return SBX_OK;
	}
	return h->set_error(err, SBX_E_CONFIG,
			    "local: kill_mechanism '%.64s' is not one of auto, cgroup-v2, "
			    "cgroup-v1-freezer, subreaper",
			    wanted);
}

int sbx__local_cg_sandbox_path(const local_state *st, const char *id, char *buf, size_t cap)
{
	if (st->kill_mechanism == LOCAL_KILL_SUBREAPER)
		return SBX_E_UNSUPPORTED;
	int n = snprintf(buf, cap, "%s/%s", st->cg_root, id);
	return n < 0 || (size_t)n >= cap ? SBX_E_INVAL : SBX_OK;
}

int sbx__local_cg_sandbox(const local_state *st, const char *id, sbx_error *err)
{
	char path[600];
	int rc = sbx__local_cg_sandbox_path(st, id, path, sizeof(path));
	if (rc == SBX_E_UNSUPPORTED)
		return SBX_OK;
	if (rc != SBX_OK)
		return sbx__local_host->set_error(err, rc, "local: cgroup path too long");
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		return sbx__local_host->set_error(
		    err, SBX_E_IO, "local: cannot create cgroup %s: %s", path, strerror(errno));
	return SBX_OK;
}

int sbx__local_cg_exec_new(const local_state *st, const char *id, char *buf, size_t cap,
			   sbx_error *err)
{
	unsigned k = atomic_fetch_add(&exec_counter, 1u);
	int n = snprintf(buf, cap, "%s/%s/e%ld-%u", st->cg_root, id, (long)getpid(), k);
	if (n < 0 || (size_t)n >= cap)
		return sbx__local_host->set_error(err, SBX_E_INVAL, "local: cgroup path too long");
	if (mkdir(buf, 0755) == 0)
		return SBX_OK;
	/* The sandbox cgroup is made at create; it is missing after a reboot. */
	int rc = sbx__local_cg_sandbox(st, id, err);
	if (rc != SBX_OK)
		return rc;
	if (mkdir(buf, 0755) != 0)
		return sbx__local_host->set_error(
		    err, SBX_E_IO, "local: cannot create cgroup %s: %s", buf, strerror(errno));
	return SBX_OK;
}

/* Calls fn on path and every cgroup below it, children first. */
static void walk(const char *path, void (*fn)(const char *, void *), void *ctx)
{
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_type != DT_DIR || e->d_name[0] == '.')
				continue;
			char sub[1400];
			int n = snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			if (n > 0 && (size_t)n < sizeof(sub))
				walk(sub, fn, ctx);
		}
		closedir(d);
	}
	fn(path, ctx);
}

/* Signals (ctx = &sig) or counts (ctx = &count with sig 0 semantics) the processes in one
 * cgroup. */
typedef struct procs_ctx {
	int sig;
	size_t count;
} procs_ctx;

static void procs_one(const char *path, void *vctx)
{
	procs_ctx *ctx = vctx;
	char file[1400];
	int n = snprintf(file, sizeof(file), "%s/cgroup.procs", path);
	if (n < 0 || (size_t)n >= sizeof(file))
		return;
	FILE *f = fopen(file, "re");
	if (!f)
		return;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1) {
		ctx->count++;
		if (ctx->sig && pid > 1)
			kill((pid_t)pid, ctx->sig);
	}
	fclose(f);
}

static void freeze_one(const char *path, void *vctx)
{
	write_file(path, "freezer.state", vctx);
}

static size_t count_procs(const char *path)
{
	procs_ctx ctx = {0, 0};
	walk(path, procs_one, &ctx);
	return ctx.count;
}

/* 1 when cgroup.events of a v2 cgroup says nothing runs in it or below (one read instead of
 * a walk of the tree). */
static int v2_unpopulated(const local_state *st, const char *path)
{
	char ev[256] = "";
	return st->kill_mechanism == LOCAL_KILL_CGROUP_V2 &&
	       read_small(path, "cgroup.events", ev, sizeof(ev)) == 0 &&
	       strstr(ev, "populated 0") != NULL;
}

int sbx__local_cg_kill(const local_state *st, const char *path)
{
	if (v2_unpopulated(st, path) || count_procs(path) == 0)
		return 0; /* the usual case: the command left nothing behind */
	if (st->kill_mechanism == LOCAL_KILL_CGROUP_V2) {
		write_file(path, "cgroup.kill", "1");
	} else {
		write_file(path, "freezer.state", "FROZEN");
		for (int i = 0; i < 200; i++) {
			char s[64] = "";
			if (read_small(path, "freezer.state", s, sizeof(s)) != 0 ||
			    strncmp(s, "FROZEN", 6) == 0)
				break;
			sleep_ms(1);
		}
		procs_ctx ctx = {SIGKILL, 0};
		walk(path, procs_one, &ctx);
		/* Thaw every level: a frozen child cgroup would keep its processes stopped. */
		walk(path, freeze_one, "THAWED");
	}
	for (int i = 0; i < 500; i++) {
		if (count_procs(path) == 0)
			return 0;
		sleep_ms(2);
	}
	return -1;
}

static void rmdir_one(const char *path, void *ctx)
{
	(void)ctx;
	rmdir(path);
}

void sbx__local_cg_remove(const char *path)
{
	/* Usually the exec's cgroup has no child cgroups: one rmdir does. */
	if (rmdir(path) == 0 || errno == ENOENT)
		return;
	walk(path, rmdir_one, NULL);
}

int sbx__local_cg_freeze(const local_state *st, const char *id, int frozen, sbx_error *err)
{
	const sbx_host_api *h = sbx__local_host;
	const char *op = frozen ? "pause" : "resume";
	char path[600];
	if (sbx__local_cg_sandbox_path(st, id, path, sizeof(path)) != SBX_OK)
		return h->set_error(err, SBX_E_UNSUPPORTED,
				    "local: %s: needs a writable cgroup freezer; this machine "
				    "uses the subreaper fallback",
				    op);
	int rc = sbx__local_cg_sandbox(st, id, err);
	if (rc != SBX_OK)
		return rc;
	int w = st->kill_mechanism == LOCAL_KILL_CGROUP_V2
		    ? write_file(path, "cgroup.freeze", frozen ? "1" : "0")
		    : write_file(path, "freezer.state", frozen ? "FROZEN" : "THAWED");
	if (w != 0)
		return h->set_error(err, SBX_E_IO, "local: %s: cannot write the freezer of %s: %s",
				    op, path, strerror(errno));
	if (frozen && st->kill_mechanism == LOCAL_KILL_FREEZER) {
		for (int i = 0; i < 1000; i++) {
			char s[64] = "";
			if (read_small(path, "freezer.state", s, sizeof(s)) != 0 ||
			    strncmp(s, "FROZEN", 6) == 0)
				break;
			sleep_ms(1);
		}
	}
	return SBX_OK;
}

int sbx__local_cg_frozen(const local_state *st, const char *id)
{
	char path[600], s[64] = "";
	if (sbx__local_cg_sandbox_path(st, id, path, sizeof(path)) != SBX_OK)
		return -1;
	if (st->kill_mechanism == LOCAL_KILL_CGROUP_V2) {
		if (read_small(path, "cgroup.freeze", s, sizeof(s)) != 0)
			return -1;
		return s[0] == '1';
	}
	if (read_small(path, "freezer.state", s, sizeof(s)) != 0)
		return -1;
	return strncmp(s, "THAWED", 6) != 0;
}

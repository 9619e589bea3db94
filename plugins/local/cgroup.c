/* Per-sandbox and per-exec cgroups: the sandbox's at <cg_root>/<id> (cg_root being
 * <mount>/sbx/<hash of the sandbox root>), each exec's below it.
 * Killing a cgroup reaches every process that ever started in it, setsid and double-fork
 * escapees included. cgroup v2 has cgroup.kill; on v1 the freezer stops the tree first so
 * nothing can fork while we signal it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "state.h"

static atomic_uint exec_counter;

const char *local_mechanism_name(int mechanism)
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

/* The cgroup tree is one for the whole machine, so each sandbox root (by default one per
 * state dir) gets its own folder in it, "r-<hash of the root's real path>": a process using
 * another root (another state dir, another user) cannot reach these sandboxes' processes even
 * with their ids. Old-layout folders directly under sbx/ are 16 hex digits (sandbox ids). */
#define NS_PREFIX "r-"
#define NS_LEN    (2 + 16)
/* Machine-global record of which root each namespace belongs to (a symlink per namespace),
 * so gc can tell a namespace whose root was deleted from one whose root lives. */
#define NS_REGISTRY "/run/sbx-local"

static void root_namespace(const local_state *st, char out[NS_LEN + 1])
{
	char real[4096];
	const char *r = realpath(st->root, real) ? real : st->root;
	uint64_t h = 14695981039346656037ull;
	for (const char *p = r; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	snprintf(out, NS_LEN + 1, NS_PREFIX "%016llx", (unsigned long long)h);
}

static void register_namespace(const local_state *st, const char *ns)
{
	char real[4096], link[256], cur[4096];
	if (!realpath(st->root, real))
		return;
	if (mkdir(NS_REGISTRY, 0755) != 0 && errno != EEXIST)
		return;
	int n = snprintf(link, sizeof(link), "%s/%s", NS_REGISTRY, ns);
	if (n < 0 || (size_t)n >= sizeof(link))
		return;
	ssize_t k = readlink(link, cur, sizeof(cur) - 1);
	if (k >= 0) {
		cur[k] = '\0';
		if (strcmp(cur, real) == 0)
			return;
		unlink(link);
	}
	if (symlink(real, link) != 0 && errno != EEXIST)
		return;
}

/* mkdir of <mount>/sbx/<ns>[/<id>]: the parents are made again when missing (a gc may remove
 * an empty namespace folder at any time; the kernel refuses to remove a populated one). */
static int mkdir_cg(const local_state *st, const char *path)
{
	char top[600];
	int n = snprintf(top, sizeof(top), "%s", st->cg_root);
	char *slash = n > 0 && (size_t)n < sizeof(top) ? strrchr(top, '/') : NULL;
	if (!slash)
		return -1;
	*slash = '\0'; /* <mount>/sbx */
	for (int attempt = 0; attempt < 8; attempt++) {
		if (mkdir(path, 0755) == 0 || errno == EEXIST)
			return 0;
		if (errno != ENOENT)
			return -1;
		if (mkdir(top, 0755) != 0 && errno != EEXIST)
			return -1;
		if (strcmp(path, st->cg_root) != 0) {
			if (mkdir(st->cg_root, 0755) == 0) {
				/* Made again after an unload or a gc removed it: its record and
				 * the controllers its sandboxes' limits need too. */
				char ns[NS_LEN + 1];
				root_namespace(st, ns);
				register_namespace(st, ns);
				if (st->iso.limits_v2)
					write_file(st->cg_root, "cgroup.subtree_control",
						   "+memory +pids +cpu");
			} else if (errno != EEXIST && errno != ENOENT) {
				return -1;
			}
		}
	}
	errno = EAGAIN;
	return -1;
}

static int try_root(local_state *st, const char *root, int mechanism)
{
	char ns[NS_LEN + 1];
	root_namespace(st, ns);
	int n = snprintf(st->cg_root, sizeof(st->cg_root), "%s/sbx/%s", root, ns);
	if (n < 0 || (size_t)n >= sizeof(st->cg_root))
		return 0;
	const char *probe = mechanism == LOCAL_KILL_CGROUP_V2 ? "cgroup.kill" : "freezer.state";
	/* Another process's gc may remove the folder, still empty, between the mkdir and the
	 * probe: made again then, rather than taken for a tree this process cannot use. */
	int usable = 0;
	for (int attempt = 0; attempt < 4 && !usable; attempt++) {
		if (mkdir_cg(st, st->cg_root) != 0)
			return 0;
		usable = exists(st->cg_root, probe) && access(st->cg_root, W_OK) == 0;
		if (!usable && access(st->cg_root, F_OK) == 0)
			return 0;
	}
	if (!usable)
		return 0;
	st->kill_mechanism = mechanism;
	register_namespace(st, ns);
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

int local_cg_detect(local_state *st, const char *wanted, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
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

int local_cg_sandbox_path(const local_state *st, const char *id, char *buf, size_t cap)
{
	if (st->kill_mechanism == LOCAL_KILL_SUBREAPER)
		return SBX_E_UNSUPPORTED;
	int n = snprintf(buf, cap, "%s/%s", st->cg_root, id);
	return n < 0 || (size_t)n >= cap ? SBX_E_INVAL : SBX_OK;
}

int local_cg_sandbox(const local_state *st, const char *id, sbx_error *err)
{
	char path[600];
	int rc = local_cg_sandbox_path(st, id, path, sizeof(path));
	if (rc == SBX_E_UNSUPPORTED)
		return SBX_OK;
	if (rc != SBX_OK)
		return sbxs_host->set_error(err, rc, "local: cgroup path too long");
	if (mkdir_cg(st, path) != 0)
		return sbxs_host->set_error(err, SBX_E_IO, "local: cannot create cgroup %s: %s",
					    path, strerror(errno));
	return SBX_OK;
}

/* Exec cgroups of this process's finished commands, kept for its next exec in the same
 * sandbox (cgroup v2). A fresh cgroup's first process costs its spawn and exit extra system
 * time on the kernels measured here (a new css_set; bench/README), one used a moment ago
 * does not, and rmdir and mkdir go as well. One is taken only while it is empty, not frozen
 * and has no cgroup below it (looked at when taken, so a sandbox that runs one command never
 * reads it); it is named for this process, like every exec cgroup it made, so nobody else
 * puts a process in it, and a destroy removes it with the sandbox's tree.
 * A cgroup that was killed is never kept: the kernels measured here kill every process born
 * into a cgroup once cgroup.kill has been written to it (exec.c starts the command again in
 * a new cgroup if its own command wrote it).
 * The oldest goes when the list is full (its sandbox may have been destroyed elsewhere). */
#define SPARES_MAX 64
static pthread_mutex_t spares_lock = PTHREAD_MUTEX_INITIALIZER;
static char *spares[SPARES_MAX];
static size_t n_spares;

void local_cg_fork_child(void)
{
	/* The kept cgroups are named for the parent, which may use them any moment. */
	pthread_mutex_init(&spares_lock, NULL);
	n_spares = 0;
}

/* Takes the entry at i out of the list (under spares_lock), oldest first kept in order. */
static char *spare_take(size_t i)
{
	char *s = spares[i];
	memmove(&spares[i], &spares[i + 1], (n_spares - i - 1) * sizeof(*spares));
	n_spares--;
	return s;
}

/* Takes the newest kept cgroup whose path starts with the n bytes of prefix, or NULL. */
static char *spare_take_matching(const char *prefix, size_t n)
{
	char *s = NULL;
	pthread_mutex_lock(&spares_lock);
	for (size_t i = n_spares; i-- > 0 && !s;)
		if (strncmp(spares[i], prefix, n) == 0)
			s = spare_take(i);
	pthread_mutex_unlock(&spares_lock);
	return s;
}

/* 1 when the exec cgroup at path can take the next exec's command as it is (a missing one
 * cannot). */
static int reusable(const char *path)
{
	char ev[256] = "", stat[512] = "";
	return read_small(path, "cgroup.events", ev, sizeof(ev)) == 0 &&
	       strstr(ev, "populated 0\n") && strstr(ev, "frozen 0\n") &&
	       read_small(path, "cgroup.stat", stat, sizeof(stat)) == 0 &&
	       strstr(stat, "nr_descendants 0\n");
}

/* A kept cgroup of this sandbox that can take a command into buf: 1 when there was one. Kept
 * ones that cannot (leftovers still run there, or it is gone) are removed as they are met
 * (one still populated stays for the destroy to kill). */
static int spare_reuse(const local_state *st, const char *id, char *buf, size_t cap)
{
	char prefix[700];
	int n = snprintf(prefix, sizeof(prefix), "%s/%s/e", st->cg_root, id);
	if (n < 0 || (size_t)n >= sizeof(prefix))
		return 0;
	char *s;
	while ((s = spare_take_matching(prefix, (size_t)n))) {
		size_t len = strlen(s);
		int ok = len < cap && reusable(s);
		if (ok)
			memcpy(buf, s, len + 1);
		else
			local_cg_remove(s);
		free(s);
		if (ok)
			return 1;
	}
	return 0;
}

void local_cg_exec_done(const local_state *st, const char *path, int killed)
{
	char *keep = NULL, *evicted = NULL;
	/* Whether it can be used again is looked at when a next exec wants it: a sandbox that
	 * runs one command is destroyed with its cgroup unread. */
	if (!killed && st->kill_mechanism == LOCAL_KILL_CGROUP_V2)
		keep = strdup(path);
	if (!keep) {
		local_cg_remove(path);
		return;
	}
	pthread_mutex_lock(&spares_lock);
	if (n_spares == SPARES_MAX)
		evicted = spare_take(0);
	spares[n_spares++] = keep;
	pthread_mutex_unlock(&spares_lock);
	if (evicted) {
		rmdir(evicted);
		free(evicted);
	}
}

void local_cg_spares_drop(const local_state *st, const char *id)
{
	char prefix[700];
	int n = id ? snprintf(prefix, sizeof(prefix), "%s/%s/e", st->cg_root, id)
		   : snprintf(prefix, sizeof(prefix), "%s/", st->cg_root);
	if (n < 0 || (size_t)n >= sizeof(prefix) || !st->cg_root[0])
		return;
	char *s;
	while ((s = spare_take_matching(prefix, (size_t)n))) {
		rmdir(s);
		free(s);
	}
}

int local_cg_exec_new(const local_state *st, const char *id, int reuse, char *buf, size_t cap,
		      sbx_error *err)
{
	if (reuse && st->kill_mechanism == LOCAL_KILL_CGROUP_V2 && spare_reuse(st, id, buf, cap))
		return SBX_OK;
	unsigned k = atomic_fetch_add(&exec_counter, 1u);
	int n = snprintf(buf, cap, "%s/%s/e%ld-%u", st->cg_root, id, (long)getpid(), k);
	if (n < 0 || (size_t)n >= cap)
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: cgroup path too long");
	/* The sandbox cgroup is made at create; it is missing after a reboot, or when a gc
	 * removed it a moment ago (its folder was gone): make it again and retry. */
	for (int attempt = 0; attempt < 4; attempt++) {
		if (mkdir(buf, 0755) == 0)
			return SBX_OK;
		if (errno != ENOENT)
			break;
		int rc = local_cg_sandbox(st, id, err);
		if (rc != SBX_OK)
			return rc;
	}
	return sbxs_host->set_error(err, SBX_E_IO, "local: cannot create cgroup %s: %s", buf,
				    strerror(errno));
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

int local_cg_kill(const local_state *st, const char *path)
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

void local_cg_remove(const char *path)
{
	/* Usually the exec's cgroup has no child cgroups: one rmdir does. */
	if (rmdir(path) == 0 || errno == ENOENT)
		return;
	walk(path, rmdir_one, NULL);
}

int local_cg_freeze(const local_state *st, const char *id, int frozen, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	const char *op = frozen ? "pause" : "resume";
	char path[600];
	if (local_cg_sandbox_path(st, id, path, sizeof(path)) != SBX_OK)
		return h->set_error(err, SBX_E_UNSUPPORTED,
				    "local: %s: needs a writable cgroup freezer; this machine "
				    "uses the subreaper fallback",
				    op);
	int rc = local_cg_sandbox(st, id, err);
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

int local_cg_frozen(const local_state *st, const char *id)
{
	char path[600], s[64] = "";
	if (local_cg_sandbox_path(st, id, path, sizeof(path)) != SBX_OK)
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

static int all_hex(const char *s, size_t len)
{
	if (strlen(s) != len)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* 1 when the registry names this namespace's root and that root no longer exists; 0 when
 * the root lives or nothing is known about it (then the namespace is left alone). */
static int namespace_dead(const char *ns)
{
	char link[256], root[4096];
	int n = snprintf(link, sizeof(link), "%s/%s", NS_REGISTRY, ns);
	if (n < 0 || (size_t)n >= sizeof(link))
		return 0;
	ssize_t k = readlink(link, root, sizeof(root) - 1);
	if (k <= 0)
		return 0;
	root[k] = '\0';
	struct stat sb;
	return stat(root, &sb) != 0 && errno == ENOENT;
}

static void reap_tree(const local_state *st, const char *path)
{
	local_cg_kill(st, path);
	local_cg_remove(path);
}

/* This root's sandbox cgroups whose sandbox folder is gone (a destroy cut short, an exec
 * that raced a destroy): their processes are killed and the cgroups removed. A create
 * makes the folder before the cgroup, so a create in flight is never taken for one. */
static void sweep_own(const local_state *st)
{
	DIR *d = opendir(st->cg_root);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || !all_hex(e->d_name, LOCAL_ID_LEN))
			continue;
		char folder[1200], cg[1400];
		int n = snprintf(folder, sizeof(folder), "%s/%s", st->root, e->d_name);
		int m = snprintf(cg, sizeof(cg), "%s/%s", st->cg_root, e->d_name);
		if (n < 0 || (size_t)n >= sizeof(folder) || m < 0 || (size_t)m >= sizeof(cg))
			continue;
		struct stat sb;
		if (lstat(folder, &sb) != 0 && errno == ENOENT) {
			sbxs_host->log(SBX_LOG_INFO, "local",
				       "removing cgroup %s: its sandbox folder is gone", cg);
			reap_tree(st, cg);
		}
	}
	closedir(d);
}

/* Drops namespace ns's record, once its folder is gone. */
static void forget_namespace(const char *ns)
{
	char link[256];
	int n = snprintf(link, sizeof(link), "%s/%s", NS_REGISTRY, ns);
	if (n > 0 && (size_t)n < sizeof(link))
		unlink(link);
}

void local_cg_release(const local_state *st)
{
	if (!st->cg_root[0] || rmdir(st->cg_root) != 0)
		return; /* the kernel refuses while a sandbox cgroup is left in it */
	/* Another host on this root makes the folder again at its next create (mkdir_cg) and
	 * removes it at its own unload; its record goes now, and gc's sweep only needs one for a
	 * folder that exists. */
	char ns[NS_LEN + 1];
	root_namespace(st, ns);
	forget_namespace(ns);
}

void local_cg_sweep(const local_state *st)
{
	if (st->kill_mechanism == LOCAL_KILL_SUBREAPER)
		return;
	sweep_own(st);
	char top[600];
	int n = snprintf(top, sizeof(top), "%s", st->cg_root);
	char *slash = n > 0 && (size_t)n < sizeof(top) ? strrchr(top, '/') : NULL;
	if (!slash)
		return;
	const char *own = slash + 1;
	*slash = '\0';
	DIR *d = opendir(top);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || strcmp(e->d_name, own) == 0)
			continue;
		char path[1400];
		int m = snprintf(path, sizeof(path), "%s/%s", top, e->d_name);
		if (m < 0 || (size_t)m >= sizeof(path))
			continue;
		if (strncmp(e->d_name, NS_PREFIX, strlen(NS_PREFIX)) == 0 &&
		    all_hex(e->d_name + strlen(NS_PREFIX), NS_LEN - strlen(NS_PREFIX))) {
			if (!namespace_dead(e->d_name)) {
				/* A live root's namespace with no sandbox cgroup in it, which hosts
				 * left behind before they removed it at unload (local_cg_release):
				 * the kernel refuses a populated one, and the root's hosts make it
				 * again on demand. */
				if (rmdir(path) == 0)
					forget_namespace(e->d_name);
				continue;
			}
			/* Another root's namespace, and that root was deleted: nobody can reach
			 * these sandboxes any more. */
			sbxs_host->log(SBX_LOG_INFO, "local",
				       "removing cgroup %s: its sandbox root is gone", path);
			reap_tree(st, path);
			if (access(path, F_OK) != 0)
				forget_namespace(e->d_name);
		} else if (all_hex(e->d_name, LOCAL_ID_LEN)) {
			/* The layout before namespaces: nothing tells whose it is, so only
			 * cgroups with no process left are removed (the kernel refuses the
			 * others). */
			walk(path, rmdir_one, NULL);
		}
	}
	closedir(d);
}

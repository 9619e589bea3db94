/* Limits of the isolated level: memory, pids and cpu per sandbox.
 *
 * Where the cgroup v2 tree has the controllers, the limits are set on the sandbox's own v2
 * cgroup (the one that also kills and freezes it). On the hybrid layout (v2 without
 * controllers, v1 `memory`, `pids`, `cpu` writable) each limit gets a v1 cgroup of the same
 * relative name, <v1 mount>/<suffix of cg_root>/<id>, which the init and every exec join.
 * An OOM kill is read from the memory cgroup's counter (v1 memory.oom_control, v2
 * memory.events `oom_kill`). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "limits.h"
#include "state.h"

#define V1_BASE "/sys/fs/cgroup"

static int write_text(const char *dir, const char *name, const char *text)
{
	char path[1400];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	size_t len = strlen(text);
	ssize_t w = write(fd, text, len);
	int e = w == (ssize_t)len ? 0 : errno ? errno : EIO;
	close(fd);
	return e;
}

static int read_text(const char *path, char *buf, size_t cap)
{
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

static int has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += wl)
		if ((p == list || p[-1] == ' ') && (p[wl] == '\0' || p[wl] == ' ' || p[wl] == '\n'))
			return 1;
	return 0;
}

/* cg_root without its mount point: "/sbx" of /sys/fs/cgroup/unified/sbx. */
static const char *cg_suffix(const char *cg_root)
{
	static const char *const mounts[] = {V1_BASE "/unified", V1_BASE "/freezer", V1_BASE};
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		size_t l = strlen(mounts[i]);
		if (strncmp(cg_root, mounts[i], l) == 0 && cg_root[l] == '/')
			return cg_root + l;
	}
	return "/sbx";
}

static int v1_root(const char *ctl, const char *suffix, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, V1_BASE "/%s%s", ctl, suffix);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	char probe[600];
	n = snprintf(probe, sizeof(probe), V1_BASE "/%s/cgroup.procs", ctl);
	if (n < 0 || (size_t)n >= sizeof(probe) || access(probe, W_OK) != 0)
		return -1;
	/* The folders down to the suffix (e.g. sbx/, or sbx/<ledger>/ per state dir). */
	for (char *p = buf + strlen(V1_BASE) + 1 + strlen(ctl) + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int r = mkdir(buf, 0755);
		*p = '/';
		if (r != 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* 1 when cg_root's v2 tree offers memory, pids and cpu. */
static int v2_has_controllers(const local_state *st)
{
	char ctl[512] = "", path[700];
	if (st->kill_mechanism != LOCAL_KILL_CGROUP_V2)
		return 0;
	snprintf(path, sizeof(path), "%s/cgroup.controllers", st->cg_root);
	return read_text(path, ctl, sizeof(ctl)) == 0 && has_word(ctl, "memory") &&
	       has_word(ctl, "pids") && has_word(ctl, "cpu");
}

const char *local_limits_kind(const local_state *st)
{
	if (v2_has_controllers(st))
		return "cgroup-v2";
	static const char *const ctl[] = {V1_BASE "/memory/cgroup.procs",
					  V1_BASE "/pids/cgroup.procs",
					  V1_BASE "/cpu/cgroup.procs"};
	for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++)
		if (access(ctl[i], W_OK) != 0)
			return "none";
	return "cgroup-v1";
}

int local_limits_detect(local_state *st)
{
	local_iso *iso = &st->iso;
	iso->mem_cg[0] = iso->pids_cg[0] = iso->cpu_cg[0] = '\0';
	iso->limits_v2 = 0;
	if (!iso->memory && !iso->pids && !iso->cpu_quota_us)
		return 0;
	if (v2_has_controllers(st)) {
		/* The sandbox cgroups below cg_root get the controllers. */
		write_text(st->cg_root, "cgroup.subtree_control", "+memory +pids +cpu");
		iso->limits_v2 = 1;
		return 0;
	}
	const char *suffix = cg_suffix(st->cg_root[0] ? st->cg_root : "/sbx");
	if (iso->memory && v1_root("memory", suffix, iso->mem_cg, sizeof(iso->mem_cg)) != 0)
		return -1;
	if (iso->pids && v1_root("pids", suffix, iso->pids_cg, sizeof(iso->pids_cg)) != 0)
		return -1;
	if (iso->cpu_quota_us && v1_root("cpu", suffix, iso->cpu_cg, sizeof(iso->cpu_cg)) != 0)
		return -1;
	return 0;
}

static int cg_of(const char *root, const char *id, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", root, id);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int set_limit(const char *dir, const char *file, const char *value, sbx_error *err)
{
	int e = write_text(dir, file, value);
	if (e != 0)
		return sbxs_host->set_error(err, SBX_E_IO, "local: cannot set %s/%s to %s: %s", dir,
					    file, value, strerror(e));
	return SBX_OK;
}

int local_limits_create(const local_state *st, const char *id, sbx_error *err)
{
	const local_iso *iso = &st->iso;
	char dir[700], v[64];
	int rc = SBX_OK;
	if (iso->limits_v2) {
		if (local_cg_sandbox_path(st, id, dir, sizeof(dir)) != SBX_OK)
			return sbxs_host->set_error(err, SBX_E_INVAL, "local: path too long");
		if (iso->memory) {
			snprintf(v, sizeof(v), "%lld", (long long)iso->memory);
			rc = set_limit(dir, "memory.max", v, err);
			if (rc == SBX_OK)
				write_text(dir, "memory.swap.max", "0");
		}
		if (rc == SBX_OK && iso->pids) {
			snprintf(v, sizeof(v), "%lld", (long long)iso->pids);
			rc = set_limit(dir, "pids.max", v, err);
		}
		if (rc == SBX_OK && iso->cpu_quota_us) {
			snprintf(v, sizeof(v), "%lld 100000", (long long)iso->cpu_quota_us);
			rc = set_limit(dir, "cpu.max", v, err);
		}
		return rc;
	}
	const char *roots[] = {iso->mem_cg, iso->pids_cg, iso->cpu_cg};
	for (size_t i = 0; i < 3 && rc == SBX_OK; i++) {
		if (!roots[i][0])
			continue;
		if (cg_of(roots[i], id, dir, sizeof(dir)) != 0)
			return sbxs_host->set_error(err, SBX_E_INVAL, "local: path too long");
		if (mkdir(dir, 0755) != 0 && errno != EEXIST)
			return sbxs_host->set_error(err, SBX_E_IO,
						    "local: cannot create cgroup %s: %s", dir,
						    strerror(errno));
		if (i == 0) {
			snprintf(v, sizeof(v), "%lld", (long long)iso->memory);
			rc = set_limit(dir, "memory.limit_in_bytes", v, err);
			/* No swap beyond the limit, where swap accounting exists. */
			if (rc == SBX_OK)
				write_text(dir, "memory.memsw.limit_in_bytes", v);
		} else if (i == 1) {
			snprintf(v, sizeof(v), "%lld", (long long)iso->pids);
			rc = set_limit(dir, "pids.max", v, err);
		} else {
			rc = set_limit(dir, "cpu.cfs_period_us", "100000", err);
			snprintf(v, sizeof(v), "%lld", (long long)iso->cpu_quota_us);
			if (rc == SBX_OK)
				rc = set_limit(dir, "cpu.cfs_quota_us", v, err);
		}
	}
	return rc;
}

int local_limits_open(const local_state *st, const char *id, int *procs, size_t n, sbx_error *err)
{
	const local_iso *iso = &st->iso;
	const char *roots[] = {iso->mem_cg, iso->pids_cg, iso->cpu_cg};
	for (size_t i = 0; i < n; i++)
		procs[i] = -1;
	for (size_t i = 0, k = 0; i < 3 && k < n; i++) {
		if (!roots[i][0])
			continue;
		char path[800];
		int m = snprintf(path, sizeof(path), "%s/%s/cgroup.procs", roots[i], id);
		if (m < 0 || (size_t)m >= sizeof(path))
			return sbxs_host->set_error(err, SBX_E_INVAL, "local: path too long");
		procs[k] = open(path, O_WRONLY | O_CLOEXEC);
		if (procs[k] < 0)
			return sbxs_host->set_error(err, SBX_E_IO,
						    "local: cannot open the limit cgroup %s: %s",
						    path, strerror(errno));
		k++;
	}
	return SBX_OK;
}

int local_limits_oom_file(const local_state *st, const char *id, char *buf, size_t cap)
{
	const local_iso *iso = &st->iso;
	int n;
	buf[0] = '\0';
	if (!iso->memory)
		return -1;
	if (iso->limits_v2)
		n = snprintf(buf, cap, "%s/%s/memory.events", st->cg_root, id);
	else if (iso->mem_cg[0])
		n = snprintf(buf, cap, "%s/%s/memory.oom_control", iso->mem_cg, id);
	else
		return -1;
	if (n < 0 || (size_t)n >= cap) {
		buf[0] = '\0';
		return -1;
	}
	return 0;
}

int64_t local_limits_oom_count(const char *file)
{
	char buf[1024];
	if (!file[0] || read_text(file, buf, sizeof(buf)) != 0)
		return -1;
	for (char *p = buf; (p = strstr(p, "oom_kill")); p++) {
		if ((p != buf && p[-1] != '\n') || p[8] != ' ')
			continue;
		return strtoll(p + 9, NULL, 10);
	}
	return -1;
}

void local_limits_remove(const local_state *st, const char *id)
{
	const local_iso *iso = &st->iso;
	const char *roots[] = {iso->mem_cg, iso->pids_cg, iso->cpu_cg};
	for (size_t i = 0; i < 3; i++) {
		char dir[700];
		if (roots[i][0] && cg_of(roots[i], id, dir, sizeof(dir)) == 0)
			rmdir(dir);
	}
}

void local_limits_release(const local_state *st)
{
	const local_iso *iso = &st->iso;
	const char *roots[] = {iso->mem_cg, iso->pids_cg, iso->cpu_cg};
	for (size_t i = 0; i < 3; i++)
		if (roots[i][0])
			rmdir(roots[i]); /* refused while a sandbox's cgroup is left in it */
}

/* The isolated level of `local` (`isolation: namespaces`).
 *
 * Each sandbox has an init: a small process that is PID 1 of the sandbox's own PID, mount,
 * IPC, UTS and (unless `network: host`) network namespaces, sits in the sandbox's cgroups,
 * and does nothing but reap orphans (SIGCHLD ignored, so the kernel reaps them for it). It is
 * made at create: the plugin starts sbx-local-init (init/main.c) the way it starts a command,
 * so nothing of the host is copied; that program unshares the namespaces and forks the init,
 * which performs the mount plan rootfs.c made (mounts.c), pivots into it, reports ready and
 * waits.
 *
 * An exec does not build namespaces: the calling thread points its children's PID namespace
 * at the init's (setns on a pidfd), clones the command, and points it back; the child enters
 * the init's other namespaces with one setns, joins the cgroups, drops every capability and
 * execs. So an exec costs a few system calls more than the plain level. Killing the init
 * (destroy, or anything else) makes the kernel kill every process of the sandbox.
 *
 * Where sbx does not run as root, each sandbox also gets a user namespace mapping uid and gid
 * 0 inside to sbx's own (so commands are root in the sandbox, and their files are sbx's on
 * the host); mounts, overlays, /proc and the network namespace are the user namespace's
 * own. A thread of a threaded host cannot join a user namespace, nor (unprivileged) point its
 * children's PID namespace, so such an exec goes through the subreaper helper, sbx-local-exec
 * (helper/main.c): started like a command, it enters every namespace of the init, user
 * namespace first, and forks the helper proper, which is born in the sandbox's PID namespace
 * and so stays the reaper of the command's escapees there. The same helper serves root
 * without a writable cgroup.
 *
 * Plugins are stateless: <root>/<id>/init holds the init's pid and start time (so a reused pid
 * is never mistaken for it) and <root>/<id>/lower the read-only tree of an image or DIR
 * rootfs. An exec that finds the init gone (after a reboot, or killed) starts a new one under
 * a lock on <root>/<id>/init.lock; the work dir and the private folders are on disk and
 * survive it.
 *
 * Commands run as uid 0 (the caller's own as root, mapped to the caller's otherwise) without
 * any capability: the bounding set is emptied, so no exec gives them back. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "image.h"
#include "init_proto.h"
#include "limits.h"
#include "meta.h"
#include "ns.h"
#include "rootfs.h"
#include "spawn.h"
#include "state.h"

static int64_t parse_size(const char *s, int *ok)
{
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	*ok = 0;
	if (errno || end == s || v < 0)
		return 0;
	double mult = 1;
	if (*end) {
		switch (*end) {
		case 'k':
		case 'K':
			mult = 1024.0;
			break;
		case 'm':
		case 'M':
			mult = 1024.0 * 1024;
			break;
		case 'g':
		case 'G':
			mult = 1024.0 * 1024 * 1024;
			break;
		case 't':
		case 'T':
			mult = 1024.0 * 1024 * 1024 * 1024;
			break;
		default:
			return 0;
		}
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return 0;
	}
	v *= mult;
	if (v > 9.0e18)
		return 0;
	*ok = 1;
	return (int64_t)v;
}

static int opt_string(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	*out = NULL;
	int rc = sbxs_host->config_string(cfg, key, out, err);
	return rc == SBX_E_NOT_FOUND ? SBX_OK : rc;
}

static int read_cap_last(void)
{
	char buf[32] = "";
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 40;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	long v = r > 0 ? strtol(buf, NULL, 10) : 40;
	return v > 0 && v < 64 ? (int)v : 40;
}

/* 0 when a child of this process can unshare a user namespace with the sandbox's other
 * namespaces, else the errno. A pipe carries the answer: the host may reap children itself. */
static int try_userns(void)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return errno;
	pid_t c = fork();
	if (c == 0) {
		int e = unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
				CLONE_NEWUTS | CLONE_NEWNET) == 0
			    ? 0
			    : errno;
		ssize_t w = write(fds[1], &e, sizeof(e));
		(void)w;
		_exit(0);
	}
	int e = c < 0 ? errno : EPERM;
	close(fds[1]);
	if (c > 0) {
		ssize_t r;
		while ((r = read(fds[0], &e, sizeof(e))) < 0 && errno == EINTR)
			;
		if (r != (ssize_t)sizeof(e))
			e = EPERM;
		waitpid(c, NULL, 0);
	}
	close(fds[0]);
	return e;
}

/* How this machine runs the isolated level, or why it cannot ("" when it can). */
static void probe(local_state *st)
{
	local_iso *iso = &st->iso;
	iso->why_not[0] = '\0';
	iso->userns = iso->via_helper = 0;
	if (access("/proc/self/ns/pid", F_OK) != 0 || access("/proc/self/ns/mnt", F_OK) != 0 ||
	    access("/proc/self/ns/user", F_OK) != 0) {
		snprintf(iso->why_not, sizeof(iso->why_not), "the kernel has no namespaces");
	} else if (geteuid() == 0) {
		iso->via_helper = st->kill_mechanism == LOCAL_KILL_SUBREAPER;
	} else {
		int e = try_userns();
		if (e == 0)
			iso->userns = iso->via_helper = 1;
		else
			snprintf(iso->why_not, sizeof(iso->why_not),
				 "sbx runs as uid %ld and cannot make a user namespace: %s (see "
				 "/proc/sys/user/max_user_namespaces)",
				 (long)geteuid(), strerror(e));
	}
}

int local_beside_plugin(const char *name, char *out, size_t cap)
{
	Dl_info info;
	out[0] = '\0';
	/* Any object of this library names it; a function pointer may not be cast to one. */
	if (!dladdr((const void *)&sbxs_host, &info) || !info.dli_fname)
		return -1;
	const char *slash = strrchr(info.dli_fname, '/');
	int n = snprintf(out, cap, "%.*s/%s", slash ? (int)(slash - info.dli_fname) : 1,
			 slash ? info.dli_fname : ".", name);
	if (n < 0 || (size_t)n >= cap || access(out, X_OK) != 0) {
		out[0] = '\0';
		return -1;
	}
	return 0;
}

int local_iso_init(local_state *st, const sbx_config *cfg, sbx_error *err)
{
	local_iso *iso = &st->iso;
	const char *level = NULL, *rootfs = NULL, *image = NULL, *net = NULL, *mem = NULL,
		   *disk = NULL, *cpus = NULL, *archives = NULL, *cache = NULL;
	iso->self_pidns = -1;
	iso->rootfs = LOCAL_ROOTFS_HOST;
	int rc = opt_string(cfg, "isolation", &level, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "rootfs", &rootfs, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "image", &image, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "network", &net, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "memory", &mem, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "disk", &disk, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "cpus", &cpus, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "image_archives", &archives, err);
	if (rc == SBX_OK)
		rc = opt_string(cfg, "image_cache", &cache, err);
	if (rc != SBX_OK)
		return rc;
	int64_t pids = 0;
	rc = sbxs_host->config_int(cfg, "pids", &pids, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	probe(st);
	if (!level || strcmp(level, "plain") == 0 || strcmp(level, "none") == 0)
		iso->level = LOCAL_ISO_PLAIN;
	else if (strcmp(level, "namespaces") == 0)
		iso->level = LOCAL_ISO_NAMESPACES;
	else
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG, "local: isolation '%.64s' is not one of plain, namespaces",
		    level);
	if (iso->level == LOCAL_ISO_PLAIN) {
		const char *set = rootfs  ? "rootfs"
				  : image ? "image"
				  : net   ? "network"
				  : mem   ? "memory"
				  : disk  ? "disk"
				  : cpus  ? "cpus"
				  : pids  ? "pids"
					  : NULL;
		if (set)
			return sbxs_host->set_error(
			    err, SBX_E_CONFIG, "local: '%s' needs 'isolation: namespaces'", set);
		return SBX_OK;
	}
	if (iso->why_not[0])
		return sbxs_host->set_error(err, SBX_E_CONFIG, "local: isolation 'namespaces': %s",
					    iso->why_not);
	if (rootfs && strcmp(rootfs, "host") != 0) {
		struct stat sb;
		if (rootfs[0] != '/' || stat(rootfs, &sb) != 0 || !S_ISDIR(sb.st_mode))
			return sbxs_host->set_error(
			    err, SBX_E_CONFIG,
			    "local: rootfs '%.200s' is neither 'host' nor an absolute "
			    "path of a folder",
			    rootfs);
		if (snprintf(iso->rootfs_dir, sizeof(iso->rootfs_dir), "%s", rootfs) >=
		    (int)sizeof(iso->rootfs_dir))
			return sbxs_host->set_error(err, SBX_E_CONFIG,
						    "local: rootfs path too long");
		iso->rootfs = LOCAL_ROOTFS_DIR;
	}
	if (image) {
		if (rootfs)
			return sbxs_host->set_error(
			    err, SBX_E_CONFIG, "local: give one of 'rootfs' and 'image', not both");
		if (!image[0] || snprintf(iso->image, sizeof(iso->image), "%s", image) >=
				     (int)sizeof(iso->image))
			return sbxs_host->set_error(err, SBX_E_CONFIG,
						    "local: image name is empty or too long");
		iso->rootfs = LOCAL_ROOTFS_IMAGE;
	}
	struct stat ad;
	if (archives && (archives[0] != '/' || stat(archives, &ad) != 0 || !S_ISDIR(ad.st_mode)))
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "local: image_archives '%.200s' is not the absolute path of a "
		    "folder",
		    archives);
	if (cache && cache[0] != '/')
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "local: image_cache '%.200s' is not an absolute path",
					    cache);
	int cn = cache
		     ? snprintf(iso->image_cache, sizeof(iso->image_cache), "%s", cache)
		     : snprintf(iso->image_cache, sizeof(iso->image_cache), "%s/.images", st->root);
	if (cn < 0 || (size_t)cn >= sizeof(iso->image_cache) ||
	    (archives && (size_t)snprintf(iso->image_dir, sizeof(iso->image_dir), "%s", archives) >=
			     sizeof(iso->image_dir)))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "local: image folder path too long");
	if (net && strcmp(net, "host") != 0 && strcmp(net, "none") != 0)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "local: network '%.64s' is not one of none, host", net);
	iso->network_host = net && strcmp(net, "host") == 0;
	int ok = 1;
	if (mem && ((iso->memory = parse_size(mem, &ok)), !ok || iso->memory < (1 << 20)))
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "local: memory '%.64s' is not a size of at least 1M (e.g. 512M, "
		    "2G)",
		    mem);
	if (disk && ((iso->disk = parse_size(disk, &ok)), !ok || iso->disk <= 0))
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "local: disk '%.64s' is not a size (e.g. 10G)", disk);
	if (pids < 0 || pids > 4194304 || (pids > 0 && pids < 2))
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "local: pids %lld is out of range (2 .. 4194304)",
					    (long long)pids);
	iso->pids = pids;
	if (cpus) {
		char *end = NULL;
		double c = strtod(cpus, &end);
		if (end == cpus || *end || !(c >= 0.01 && c <= 4096))
			return sbxs_host->set_error(
			    err, SBX_E_CONFIG,
			    "local: cpus '%.64s' is not a number of CPUs (e.g. 1.5)", cpus);
		iso->cpu_quota_us = (int64_t)(c * 100000.0 + 0.5);
	}
	if (local_limits_detect(st) != 0)
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "local: memory, pids and cpus need the cgroup controllers "
		    "(v2 with controllers, or v1 memory/pids/cpu writable by uid "
		    "%ld)",
		    (long)geteuid());
	iso->cap_last = read_cap_last();
	/* The program that builds each sandbox and stays its init (init/main.c). */
	if (local_beside_plugin("sbx-local-init", iso->init_exe, sizeof(iso->init_exe)) != 0)
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "local: isolation: namespaces needs sbx-local-init beside "
		    "the plugin, and it is not there; reinstall sbx's local "
		    "plugin");
	iso->self_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
	if (iso->self_pidns < 0)
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG, "local: cannot open /proc/self/ns/pid: %s", strerror(errno));
	return SBX_OK;
}

void local_iso_fini(local_state *st)
{
	if (st->iso.self_pidns >= 0)
		close(st->iso.self_pidns);
	st->iso.self_pidns = -1;
}

/* ---- the init's record */

/* Field 22 of /proc/<pid>/stat (start time in ticks), 0 when the process is gone or a zombie. */
static unsigned long long start_time(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return 0;
	buf[r] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	p += 2;
	if (*p == 'Z' || *p == 'X')
		return 0;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

static int read_record(const char *dir, long *pid, unsigned long long *start)
{
	char path[1300], buf[128] = "";
	snprintf(path, sizeof(path), "%s/init", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	char *end = NULL;
	*pid = strtol(buf, &end, 10);
	if (*pid <= 1 || !end || *end != ' ')
		return -1;
	*start = strtoull(end + 1, NULL, 10);
	return 0;
}

static int write_record(const char *dir, long pid, unsigned long long start, sbx_error *err)
{
	char path[1300], tmp[1310], buf[128];
	snprintf(path, sizeof(path), "%s/init", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int n = snprintf(buf, sizeof(buf), "%ld %llu\n", pid, start);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return sbxs_host->set_error(err, SBX_E_IO, "local: cannot write %s: %s", path,
					    strerror(e));
	}
	return SBX_OK;
}

/* A pidfd of the live init, or -1. */
static int open_init(const char *dir, long *pid_out)
{
	long pid;
	unsigned long long start;
	if (read_record(dir, &pid, &start) != 0 || start_time(pid) != start)
		return -1;
	int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	/* Checked again now the pidfd pins the process: the pid was not reused in between. */
	if (fd >= 0 && start_time(pid) != start) {
		close(fd);
		fd = -1;
	}
	if (pid_out)
		*pid_out = pid;
	return fd;
}

long local_iso_init_pid(const char *dir)
{
	long pid;
	unsigned long long start;
	return read_record(dir, &pid, &start) == 0 && start_time(pid) == start ? pid : 0;
}

/* ---- starting the init */

/* What start_init hands sbx-local-init besides the plan (init/main.c has the layout). */
typedef struct init_plan {
	int report;
	int plan; /* memfd: the init_spec and the mount ops */
	int procs[1 + LOCAL_JOIN_PROCS];
	int cg_dir; /* the v2 kill cgroup's folder, to be born in (-1: none, or v1) */
} init_plan;

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* In the child, when sbx-local-init cannot be exec'd. */
static void init_exec_failed(int fd, int err)
{
	init_msg m = {MSG_FAIL, STAGE_EXEC, err, 0, 0};
	ssize_t w = write(fd, &m, sizeof(m));
	(void)w;
}

static int mkdir_in(const char *dir, const char *name, mode_t mode)
{
	char path[1400];
	int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= sizeof(path))
		return ENAMETOOLONG;
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		return errno;
	return 0;
}

static int read_lower(const char *dir, char *buf, size_t cap)
{
	char path[1300];
	snprintf(path, sizeof(path), "%s/lower", dir);
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	ssize_t r = read(fd, buf, cap - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = '\0';
	return 0;
}

static const char *stage_name(int stage)
{
	switch (stage) {
	case STAGE_UNSHARE:
		return "unshare";
	case STAGE_FORK:
		return "fork";
	case STAGE_CGROUP:
		return "joining its cgroups";
	case STAGE_MOUNT:
		return "mount";
	case STAGE_USERNS:
		return "mapping its user ids";
	case STAGE_EXEC:
		return "exec of sbx-local-init";
	case STAGE_PLAN:
		return "reading its plan";
	default:
		return "loopback";
	}
}

/* Starts the init of the sandbox in dir; writes its record. */
static int start_init(const local_state *st, const char *id, const char *dir, sbx_error *err)
{
	const local_iso *iso = &st->iso;
	char lower[1100], path[1400];
	local_mounts m;
	init_plan ip = {.report = -1, .cg_dir = -1, .plan = -1};
	int report_r = -1, rc;
	for (size_t i = 0; i < 1 + LOCAL_JOIN_PROCS; i++)
		ip.procs[i] = -1;
	if (read_lower(dir, lower, sizeof(lower)) != 0)
		return sbxs_host->set_error(err, SBX_E_IO, "local: cannot read %s/lower: %s", dir,
					    strerror(errno));
	int64_t cap = local_disk_cap(dir);
	int e = mkdir_in(dir, "root", 0755);
	if (!e && cap)
		e = mkdir_in(dir, "rw", 0755);
	else if (!e && !lower[0]) {
		e = mkdir_in(dir, "priv", 0755);
		if (!e)
			e = mkdir_in(dir, "priv/tmp", 01777);
		if (!e)
			e = mkdir_in(dir, "priv/home", 0755);
		if (!e)
			e = mkdir_in(dir, "priv/root", 0700);
		snprintf(path, sizeof(path), "%s/priv/tmp", dir);
		if (!e && chmod(path, 01777) != 0)
			e = errno;
	} else if (!e) {
		e = mkdir_in(dir, "upper", 0755);
		if (!e)
			e = mkdir_in(dir, "ovwork", 0700);
	}
	if (e)
		return sbxs_host->set_error(
		    err, SBX_E_IO, "local: cannot make the folders of %s: %s", dir, strerror(e));
	rc = local_mounts_plan(dir, lower, cap, &m, err);
	if (rc != SBX_OK)
		return rc;
	/* The sandbox's kill cgroup (where there is one), then its limit cgroups. */
	if (st->kill_mechanism != LOCAL_KILL_SUBREAPER) {
		char cg[700];
		if (local_cg_sandbox_path(st, id, cg, sizeof(cg)) != SBX_OK) {
			rc = sbxs_host->set_error(err, SBX_E_INVAL, "local: cgroup path too long");
			goto out;
		}
		rc = local_cg_sandbox(st, id, err);
		if (rc != SBX_OK)
			goto out;
		if (st->kill_mechanism == LOCAL_KILL_CGROUP_V2)
			ip.cg_dir = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		if ((ip.procs[0] = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
			rc = sbxs_host->set_error(err, SBX_E_IO, "local: cannot open %s: %s", path,
						  strerror(errno));
			goto out;
		}
	}
	rc = local_limits_create(st, id, err);
	if (rc == SBX_OK)
		rc = local_limits_open(st, id, ip.procs + 1, LOCAL_JOIN_PROCS, err);
	if (rc != SBX_OK)
		goto out;
	init_spec sp;
	memset(&sp, 0, sizeof(sp));
	sp.unshare_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
	if (!iso->network_host)
		sp.unshare_flags |= CLONE_NEWNET;
	if (iso->userns) {
		sp.unshare_flags |= CLONE_NEWUSER;
		snprintf(sp.uid_map, sizeof(sp.uid_map), "0 %ld 1", (long)geteuid());
		snprintf(sp.gid_map, sizeof(sp.gid_map), "0 %ld 1", (long)getegid());
	}
	snprintf(sp.hostname, sizeof(sp.hostname), "sbx-%.12s", id);
	memcpy(sp.newroot, m.newroot, sizeof(sp.newroot));
	sp.n_ops = m.n;
	/* The plan goes as bytes in a memfd (it may be larger than a pipe holds). */
	ip.plan = (int)syscall(SYS_memfd_create, "sbx-init-plan", MFD_CLOEXEC);
	if (ip.plan < 0 || write_all(ip.plan, &sp, sizeof(sp)) != 0 ||
	    write_all(ip.plan, m.ops, m.n * sizeof(*m.ops)) != 0) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: create: the init's plan: %s",
					  strerror(errno));
		goto out;
	}
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: pipe: %s", strerror(errno));
		goto out;
	}
	report_r = fds[0];
	ip.report = fds[1];
	int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
	char *argv[] = {"sbx-init", NULL}, *envp[] = {NULL};
	local_program prog = {.exe = iso->init_exe,
			      .argv = argv,
			      .envp = envp,
			      .fds = {dn, dn, dn, ip.report, ip.plan, ip.cg_dir},
			      .n_fds = 6 + 1 + LOCAL_JOIN_PROCS,
			      .report = 3,
			      .failed = init_exec_failed};
	for (int i = 0; i < 1 + LOCAL_JOIN_PROCS; i++)
		prog.fds[6 + i] = ip.procs[i];
	pid_t helper = dn >= 0 ? local_spawn_program(&prog, NULL) : -1;
	int saved = errno;
	if (dn >= 0)
		close(dn);
	if (helper < 0) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: create: cannot start %s: %s",
					  iso->init_exe, strerror(saved));
		goto out;
	}
	close(ip.report);
	ip.report = -1;
	/* Two writers, in no set order: the helper sends the init's pid after its fork, the init
	 * sends ready once it has pivoted. On a loaded machine the init can finish first, so both
	 * messages are awaited (or the end of the pipe, once both writers are gone). */
	long pid = 0;
	int ready = 0;
	init_msg msg;
	while (!ready || pid <= 1) {
		ssize_t r = read(report_r, &msg, sizeof(msg));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof(msg))
			break;
		if (msg.kind == MSG_PID)
			pid = msg.pid;
		else if (msg.kind == MSG_READY)
			ready = 1;
		else {
			rc = sbxs_host->set_error(
			    err, SBX_E_IO, "local: create: the sandbox's init failed at %s%s%s: %s",
			    stage_name(msg.stage), msg.stage == STAGE_MOUNT ? " of " : "",
			    msg.stage == STAGE_MOUNT ? local_mounts_path(&m, msg.op) : "",
			    strerror(msg.err));
			break;
		}
	}
	waitpid(helper, NULL, 0);
	if (rc == SBX_OK && (!ready || pid <= 1))
		rc = sbxs_host->set_error(err, SBX_E_IO,
					  "local: create: the sandbox's init died unready");
	if (rc == SBX_OK) {
		unsigned long long start = start_time(pid);
		rc = start ? write_record(dir, pid, start, err)
			   : sbxs_host->set_error(err, SBX_E_IO,
						  "local: create: the sandbox's init died");
	}
	if (rc != SBX_OK && pid > 1)
		kill((pid_t)pid, SIGKILL);
out:
	if (report_r >= 0)
		close(report_r);
	if (ip.cg_dir >= 0)
		close(ip.cg_dir);
	if (ip.plan >= 0)
		close(ip.plan);
	for (size_t i = 0; i < 1 + LOCAL_JOIN_PROCS; i++)
		if (ip.procs[i] >= 0)
			close(ip.procs[i]);
	local_mounts_free(&m);
	return rc;
}

/* A pidfd of the live init, starting one (under the sandbox's lock) when there is none. */
static int ensure_init(const local_state *st, const char *id, const char *dir, int *pidfd,
		       sbx_error *err)
{
	*pidfd = open_init(dir, NULL);
	if (*pidfd >= 0)
		return SBX_OK;
	char lock[1300];
	snprintf(lock, sizeof(lock), "%s/init.lock", dir);
	int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lfd < 0)
		return sbxs_host->set_error(err, errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
					    "local: sandbox %s: cannot open %s: %s", id, lock,
					    strerror(errno));
	int rc = SBX_OK;
	if (flock(lfd, LOCK_EX) != 0) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: flock %s: %s", lock,
					  strerror(errno));
		goto out;
	}
	*pidfd = open_init(dir, NULL);
	if (*pidfd < 0) {
		rc = start_init(st, id, dir, err);
		if (rc == SBX_OK && (*pidfd = open_init(dir, NULL)) < 0)
			rc = sbxs_host->set_error(err, SBX_E_IO, "local: sandbox %s: its init died",
						  id);
	}
out:
	close(lfd);
	return rc;
}

int local_iso_create(const local_state *st, const char *id, const sbx_create_spec *spec,
		     sbx_error *err)
{
	const local_iso *iso = &st->iso;
	char dir[1200], lower[1100] = "";
	int rc = local_path(st, id, NULL, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	const char *image = spec && spec->image && spec->image[0] ? spec->image
			    : iso->rootfs == LOCAL_ROOTFS_IMAGE   ? iso->image
								  : NULL;
	if (image) {
		rc = local_image_rootfs(st, image, lower, sizeof(lower), err);
		if (rc == SBX_OK)
			rc = local_image_env_copy(lower, dir, err);
	} else if (iso->rootfs == LOCAL_ROOTFS_DIR)
		snprintf(lower, sizeof(lower), "%s", iso->rootfs_dir);
	if (rc != SBX_OK)
		return rc;
	if (iso->disk) {
		char path[1300], v[32];
		snprintf(path, sizeof(path), "%s/disk", dir);
		int n = snprintf(v, sizeof(v), "%lld\n", (long long)iso->disk);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, v, (size_t)n) != n || close(fd) != 0)
			return sbxs_host->set_error(err, SBX_E_IO,
						    "local: create: cannot write %s: %s", path,
						    strerror(errno));
	}
	if (lower[0]) {
		char path[1300];
		snprintf(path, sizeof(path), "%s/lower", dir);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		size_t len = strlen(lower);
		if (fd < 0 || write(fd, lower, len) != (ssize_t)len || close(fd) != 0)
			return sbxs_host->set_error(err, SBX_E_IO,
						    "local: create: cannot write %s: %s", path,
						    strerror(errno));
	}
	int pidfd = -1;
	rc = ensure_init(st, id, dir, &pidfd, err);
	if (pidfd >= 0)
		close(pidfd);
	return rc;
}

void local_iso_destroy(const local_state *st, const char *id)
{
	char dir[1200];
	if (local_path(st, id, NULL, dir, sizeof(dir), NULL) != SBX_OK)
		return;
	long pid = 0;
	int fd = open_init(dir, &pid);
	if (fd >= 0) {
		syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
		close(fd);
		for (int i = 0; i < 1000 && start_time(pid) != 0; i++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
	for (int i = 0; i < 50; i++) {
		local_limits_remove(st, id);
		char probe[800];
		if (!st->iso.mem_cg[0] && !st->iso.pids_cg[0] && !st->iso.cpu_cg[0])
			break;
		snprintf(probe, sizeof(probe), "%s/%s",
			 st->iso.mem_cg[0]    ? st->iso.mem_cg
			 : st->iso.pids_cg[0] ? st->iso.pids_cg
					      : st->iso.cpu_cg,
			 id);
		if (access(probe, F_OK) != 0)
			break;
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
}

/* ---- joining from an exec */

int local_join_prepare(const local_state *st, const char *id, local_join *j, sbx_error *err)
{
	memset(j, 0, sizeof(*j));
	j->pidfd = -1;
	for (size_t i = 0; i < LOCAL_JOIN_PROCS; i++)
		j->procs[i] = -1;
	if (st->iso.level != LOCAL_ISO_NAMESPACES)
		return SBX_OK;
	j->active = 1;
	j->via_helper = st->iso.via_helper;
	j->cap_last = st->iso.cap_last;
	j->self_pidns = st->iso.self_pidns;
	j->ns_flags = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
	if (!st->iso.network_host)
		j->ns_flags |= CLONE_NEWNET;
	j->helper_flags = j->ns_flags | CLONE_NEWPID | (st->iso.userns ? CLONE_NEWUSER : 0);
	int rc = local_path(st, id, NULL, j->dir, sizeof(j->dir), err);
	if (rc == SBX_OK && read_lower(j->dir, j->root, sizeof(j->root)) != 0)
		rc = sbxs_host->set_error(err, SBX_E_IO, "local: cannot read %s/lower: %s", j->dir,
					  strerror(errno));
	if (rc == SBX_OK)
		rc = ensure_init(st, id, j->dir, &j->pidfd, err);
	if (rc == SBX_OK)
		rc = local_limits_open(st, id, j->procs, LOCAL_JOIN_PROCS, err);
	if (rc == SBX_OK && local_limits_oom_file(st, id, j->oom_file, sizeof(j->oom_file)) == 0)
		j->oom_before = local_limits_oom_count(j->oom_file);
	if (rc != SBX_OK)
		local_join_close(j);
	return rc;
}

int local_join_fork_begin(const local_join *j)
{
	if (!j->active || j->via_helper)
		return 0;
	return setns(j->pidfd, CLONE_NEWPID) == 0 ? 0 : errno;
}

void local_join_fork_end(const local_join *j)
{
	if (j->active && !j->via_helper && setns(j->self_pidns, CLONE_NEWPID) != 0)
		sbxs_host->log(SBX_LOG_ERROR, "local",
			       "cannot return to the host's PID namespace: %s", strerror(errno));
}

char *local_join_image_env(const local_join *j, size_t *len)
{
	char path[1300];
	*len = 0;
	if (!j->active || !j->root[0])
		return NULL;
	snprintf(path, sizeof(path), "%s/env.image", j->dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0 || sb.st_size > (1 << 20)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	char *buf = malloc((size_t)sb.st_size + 1);
	ssize_t r = buf ? read(fd, buf, (size_t)sb.st_size) : -1;
	close(fd);
	if (r <= 0) {
		free(buf);
		return NULL;
	}
	buf[r] = '\0';
	*len = (size_t)r;
	return buf;
}

int local_join_oom(const local_join *j)
{
	if (!j->active || !j->oom_file[0] || j->oom_before < 0)
		return 0;
	return local_limits_oom_count(j->oom_file) > j->oom_before;
}

void local_join_close(local_join *j)
{
	if (j->pidfd >= 0)
		close(j->pidfd);
	j->pidfd = -1;
	for (size_t i = 0; i < LOCAL_JOIN_PROCS; i++) {
		if (j->procs[i] >= 0)
			close(j->procs[i]);
		j->procs[i] = -1;
	}
}

int local_iso_info(const local_state *st, char *buf, size_t cap)
{
	const local_iso *iso = &st->iso;
	const char *rootfs = iso->rootfs == LOCAL_ROOTFS_DIR     ? "dir"
			     : iso->rootfs == LOCAL_ROOTFS_IMAGE ? "image"
								 : "host";
	char why[300] = "";
	for (size_t i = 0, k = 0; iso->why_not[i] && k + 2 < sizeof(why); i++) {
		if (iso->why_not[i] == '"' || iso->why_not[i] == '\\')
			why[k++] = '\\';
		why[k++] = iso->why_not[i];
		why[k] = '\0';
	}
	int n;
	if (iso->why_not[0])
		n = snprintf(buf, cap,
			     "\"isolation\":\"%s\",\"levels\":{\"plain\":{\"supported\":true},"
			     "\"namespaces\":{\"supported\":false,\"why\":\"%s\"}}",
			     iso->level ? "namespaces" : "plain", why);
	else
		n = snprintf(buf, cap,
			     "\"isolation\":\"%s\",\"levels\":{\"plain\":{\"supported\":true},"
			     "\"namespaces\":{\"supported\":true,\"user_namespace\":%s,"
			     "\"exec\":\"%s\",\"rootfs\":[\"host\",\"dir\"%s],\"limits\":\"%s\","
			     "\"pause\":%s}},\"rootfs\":\"%s\",\"network\":\"%s\","
			     "\"memory\":%lld,\"pids\":%lld,\"cpu_quota_us\":%lld",
			     iso->level ? "namespaces" : "plain", iso->userns ? "true" : "false",
			     iso->via_helper ? "helper" : "setns",
			     local_image_supported() ? ",\"image\"" : "", local_limits_kind(st),
			     st->kill_mechanism == LOCAL_KILL_SUBREAPER ? "false" : "true", rootfs,
			     iso->network_host ? "host" : "none", (long long)iso->memory,
			     (long long)iso->pids, (long long)iso->cpu_quota_us);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

/* A command's own process between its birth and its exec (child.h). Only system calls and
 * async-signal-safe library functions: in the plugin this runs in a child that borrows the
 * host's memory and stack-switches off a host thread that may hold any lock. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "child.h"

void local_child_fail(const local_plan *p, int stage, int err)
{
	local_child_report r = {stage, err};
	if (p->report_fd >= 0) {
		ssize_t w = write(p->report_fd, &r, sizeof(r));
		(void)w;
	} else {
		*p->rep = r;
	}
	_exit(127);
}

size_t local_child_fmt_long(char *buf, long v)
{
	char tmp[24];
	size_t n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0 && n < sizeof(tmp));
	for (size_t i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	return n;
}

void local_child_reset_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < 65; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

static _Atomic uint64_t nofile_soft;

void local_child_set_nofile(uint64_t soft)
{
	atomic_store(&nofile_soft, soft);
}

void local_child_restore_nofile(void)
{
	uint64_t soft = atomic_load(&nofile_soft);
	struct rlimit rl;
	if (soft == 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur <= soft)
		return;
	rl.rlim_cur = (rlim_t)soft;
	setrlimit(RLIMIT_NOFILE, &rl);
}

void local_child_close_others(int *keep, size_t n_keep)
{
	/* Sort the few fds to keep, then close every gap between them. */
	for (size_t i = 1; i < n_keep; i++)
		for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	unsigned lo = 3;
	for (size_t i = 0; i <= n_keep; i++) {
		unsigned hi = i < n_keep ? (unsigned)keep[i] : ~0u;
		if (i < n_keep && keep[i] < 3)
			continue;
		if (hi > lo && syscall(SYS_close_range, lo, hi - 1, 0) != 0) {
			for (unsigned fd = lo; fd < hi && fd < 65536; fd++)
				close((int)fd);
		}
		if (i < n_keep)
			lo = (unsigned)keep[i] + 1;
	}
}

void local_child_run(const local_plan *p)
{
	if (!p->signals_default)
		local_child_reset_signals();
	if (setsid() < 0)
		local_child_fail(p, LOCAL_STAGE_SETUP, errno);
	if (p->cg_fd >= 0 && !p->placed) {
		char buf[24];
		size_t n = local_child_fmt_long(buf, (long)getpid());
		int fd = openat(p->cg_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, buf, n) != (ssize_t)n)
			local_child_fail(p, LOCAL_STAGE_CGROUP, errno);
		close(fd);
	}
	int je = p->join ? local_join_child(p->join) : 0;
	if (je != 0)
		local_child_fail(p, LOCAL_STAGE_JOIN, je);
	/* Move the ends above 2 first: one of them may itself be 0, 1 or 2. */
	int in = fcntl(p->in_fd, F_DUPFD_CLOEXEC, 3);
	int out = fcntl(p->out_fd, F_DUPFD_CLOEXEC, 3);
	int er = fcntl(p->err_fd, F_DUPFD_CLOEXEC, 3);
	if (in < 0 || out < 0 || er < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(er, 2) < 0)
		local_child_fail(p, LOCAL_STAGE_SETUP, errno);
	if ((p->cwd_fd >= 0 ? fchdir(p->cwd_fd) : chdir(p->cwd)) != 0)
		local_child_fail(p, LOCAL_STAGE_CHDIR, errno);
	/* The files a shell's >PATH would open, from the cwd, in the sandbox's own view. */
	const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC;
	if (p->out_path) {
		int fd = open(p->out_path, flags, 0666);
		if (fd < 0 || dup2(fd, 1) < 0)
			local_child_fail(p, LOCAL_STAGE_STDOUT, errno);
	}
	if (p->err_path && p->out_path && strcmp(p->err_path, p->out_path) == 0) {
		if (dup2(1, 2) < 0)
			local_child_fail(p, LOCAL_STAGE_STDERR, errno);
	} else if (p->err_path) {
		int fd = open(p->err_path, flags, 0666);
		if (fd < 0 || dup2(fd, 2) < 0)
			local_child_fail(p, LOCAL_STAGE_STDERR, errno);
	}
	/* This child holds copies of every fd of the host, other calls' pipe ends among them
	 * until its exec: a concurrent call whose command exits in that window would wait out
	 * its drain and hand its pipes to a sink. Keep only the report pipe. */
	int keep[] = {p->report_fd};
	local_child_close_others(keep, p->report_fd >= 0 ? 1 : 0);
	local_child_restore_nofile();
	const char *file = p->argv[0];
	if (strchr(file, '/')) {
		execve(file, p->argv, p->envp);
		local_child_fail(p, LOCAL_STAGE_EXEC, errno);
	}
	int saved = ENOENT;
	const char *dir = p->path ? p->path : "/usr/local/bin:/usr/bin:/bin";
	size_t flen = strlen(file);
	for (;;) {
		const char *end = strchr(dir, ':');
		size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
		char full[4096];
		if (dlen + flen + 2 <= sizeof(full)) {
			size_t k = 0;
			if (dlen == 0)
				full[k++] = '.';
			memcpy(full + k, dir, dlen);
			k += dlen;
			full[k++] = '/';
			memcpy(full + k, file, flen + 1);
			execve(full, p->argv, p->envp);
			if (errno != ENOENT && errno != ENOTDIR)
				saved = errno;
		}
		if (!end)
			break;
		dir = end + 1;
	}
	local_child_fail(p, LOCAL_STAGE_EXEC, saved);
}

int local_join_child(const local_join *j)
{
	if (!j->active)
		return 0;
	for (size_t i = 0; i < LOCAL_JOIN_PROCS; i++)
		if (j->procs[i] >= 0 && write(j->procs[i], "0", 1) != 1)
			return errno;
	if (!j->via_helper && setns(j->pidfd, j->ns_flags) != 0)
		return errno;
	for (int c = 0; c <= j->cap_last; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL)
			return errno;
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) != 0)
		return errno;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return errno;
	return 0;
}

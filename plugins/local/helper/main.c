/* sbx-local-exec: the subreaper helper of `local`, a program of its own.
 *
 * Where no cgroup can hold a command's tree (kill_mechanism: subreaper), and at the isolated
 * level when the host cannot enter the sandbox's namespaces itself (a user namespace), a
 * command runs under a helper process that marks itself a child subreaper: every orphan of
 * the command is reparented to it, so a timeout reaches the whole tree. The plugin starts it
 * as it starts any command (a child that borrows the host's memory until it execs) and this
 * program is what it execs, so no copy of the host exists at any point: fork() from a host
 * of gigabytes and hundreds of threads costs a page-table copy and a copy-on-write fault per
 * page touched afterwards, seconds per exec (bench_exec with a ballast).
 *
 * The plugin hands it a fixed set of descriptors (the ones absent are closed):
 *   0 1 2   the command's stdin, stdout, stderr
 *   3       report pipe: a failed set-up, as {stage, errno}; end of file once the command
 *           has execed
 *   4       status pipe: the command's wait status once it exited, and whether anything of
 *           its tree was left then (local_exit_report)
 *   5       control pipe: 'K' kills the tree; end of file after the status lets the
 *           leftovers live on (they are reparented above us when we exit)
 *   6       the cwd, opened beneath the sandbox's work dir (else -c PATH)
 *   7       the sandbox's init (pidfd), with -j: the namespaces to enter first
 *   8 9 10  limit cgroups' cgroup.procs the command joins (isolated level)
 * and the command's environment as its own. Usage:
 *   sbx-local-exec [-c CWD] [-o STDOUT_PATH] [-e STDERR_PATH] [-j NSFLAGS -C CAP_LAST]
 *                  -- ARGV...
 *   sbx-local-exec -s      the sink: reads and drops what arrives on 3 and 4 (a command's
 *                          output pipes its leftovers still hold) until both close, in the
 *                          cgroup whose cgroup.procs is 5; detaches first.
 * It makes no use of malloc or stdio. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../child.h"

#define FD_REPORT     3
#define FD_STATUS     4
#define FD_CONTROL    5
#define FD_CWD        6
#define FD_PIDFD      7
#define FD_PROCS      8
#define FD_SINK_OUT   3
#define FD_SINK_ERR   4
#define FD_SINK_PROCS 5

extern char **environ;

/* CLOSE_RANGE_CLOEXEC of <linux/close_range.h>, which not every C library's headers reach. */
#define HELPER_CLOSE_RANGE_CLOEXEC (1u << 2)

static int is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

#define MAX_PROCS 8192

static long parse_long(const char *s, const char **end)
{
	long v = 0;
	while (*s >= '0' && *s <= '9')
		v = v * 10 + (*s++ - '0');
	*end = s;
	return v;
}

/* SIGKILLs every descendant of this process found in /proc. Returns how many. */
static int kill_descendants(void)
{
	static pid_t pids[MAX_PROCS], ppids[MAX_PROCS];
	static unsigned char mark[MAX_PROCS];
	size_t n = 0;
	int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	char buf[8192];
	for (;;) {
		long got = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		if (got <= 0)
			break;
		for (long off = 0; off < got;) {
			unsigned short reclen;
			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			const char *name = buf + off + 19;
			off += reclen;
			if (name[0] < '0' || name[0] > '9' || n >= MAX_PROCS)
				continue;
			char path[64] = "/proc/";
			size_t k = 6, nl = strlen(name);
			if (nl > 20)
				continue;
			memcpy(path + k, name, nl);
			k += nl;
			memcpy(path + k, "/stat", 6);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			char st[512];
			ssize_t r = read(fd, st, sizeof(st) - 1);
			close(fd);
			if (r <= 0)
				continue;
			st[r] = '\0';
			const char *close_paren = NULL;
			for (ssize_t i = 0; i < r; i++)
				if (st[i] == ')')
					close_paren = st + i;
			if (!close_paren || close_paren + 4 >= st + r)
				continue;
			const char *e;
			pids[n] = (pid_t)parse_long(name, &e);
			ppids[n] = (pid_t)parse_long(close_paren + 4, &e);
			mark[n] = 0;
			n++;
		}
	}
	close(dfd);
	pid_t self = getpid();
	int changed = 1, killed = 0;
	while (changed) {
		changed = 0;
		for (size_t i = 0; i < n; i++) {
			if (mark[i])
				continue;
			int hit = ppids[i] == self;
			for (size_t j = 0; !hit && j < n; j++)
				hit = mark[j] && pids[j] == ppids[i];
			if (hit) {
				mark[i] = 1;
				changed = 1;
				kill(pids[i], SIGKILL);
				killed++;
			}
		}
	}
	return killed;
}

/* Reads and drops what the leftovers write until they close their ends. */
static int sink(void)
{
	pid_t pid = fork();
	if (pid != 0)
		_exit(pid < 0 ? 1 : 0); /* the host reaps this one at once; nobody reaps the sink */
	setsid();
	int fds[2] = {is_open(FD_SINK_OUT) ? FD_SINK_OUT : -1,
		      is_open(FD_SINK_ERR) ? FD_SINK_ERR : -1};
	if (is_open(FD_SINK_PROCS)) {
		/* In the exec's cgroup, pause freezes the sink and destroy kills it with the
		 * leftovers. */
		char buf[24];
		size_t len = local_child_fmt_long(buf, (long)getpid());
		ssize_t w = write(FD_SINK_PROCS, buf, len);
		(void)w;
		close(FD_SINK_PROCS);
	}
	while (fds[0] >= 0 || fds[1] >= 0) {
		struct pollfd pf[2] = {{.fd = fds[0], .events = POLLIN},
				       {.fd = fds[1], .events = POLLIN}};
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (fds[i] < 0 || !pf[i].revents)
				continue;
			char buf[65536];
			ssize_t got = read(fds[i], buf, sizeof(buf));
			if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
				close(fds[i]);
				fds[i] = -1;
			}
		}
	}
	return 0;
}

/* The isolated level's way in: enters the sandbox's namespaces, user namespace first, and
 * forks the helper proper, born in the sandbox's PID namespace so that it reaps the
 * command's escapees there. This process stays as its parent until it ends, so nothing is
 * reparented outside the host's view. Returns in the helper. */
static void enter_sandbox(const local_plan *p, int flags)
{
	if (setns(FD_PIDFD, flags) != 0)
		local_child_fail(p, LOCAL_STAGE_JOIN, errno);
	close(FD_PIDFD);
	pid_t helper = fork();
	if (helper < 0)
		local_child_fail(p, LOCAL_STAGE_FORK, errno);
	if (helper == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Seen from the sandbox: its descriptors are not for the sandbox's root. */
		prctl(PR_SET_DUMPABLE, 0);
		return;
	}
	syscall(SYS_close_range, 0u, ~0u, 0);
	while (waitpid(helper, NULL, 0) < 0 && errno == EINTR)
		;
	_exit(0);
}

static void watch(pid_t cmd)
{
	/* A pidfd wakes us the moment the command exits; without one, look every 5 ms. */
	int cmd_fd = (int)syscall(SYS_pidfd_open, cmd, 0);
	int reported = 0;
	for (;;) {
		struct pollfd pfd[2] = {{.fd = FD_CONTROL, .events = POLLIN},
					{.fd = reported ? -1 : cmd_fd, .events = POLLIN}};
		int pr = poll(pfd, 2, reported || cmd_fd >= 0 ? -1 : 5);
		int status, cmd_status = 0, cmd_ended = 0;
		pid_t w;
		while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
			if (w == cmd && !reported) {
				cmd_status = status;
				cmd_ended = 1;
			}
		}
		if (cmd_ended) {
			/* The command's orphans were ours before it exited, so no child left
			 * means no descendant left. */
			local_exit_report er = {.status = cmd_status,
						.leftovers = !(w < 0 && errno == ECHILD)};
			ssize_t wr = write(FD_STATUS, &er, sizeof(er));
			(void)wr;
			reported = 1;
		}
		if (pr > 0 && pfd[0].revents) {
			char c = 0;
			ssize_t n = read(FD_CONTROL, &c, 1);
			if (n == 1 && c != 'K')
				continue;
			if (n == 0 && reported)
				_exit(0);
			break;
		}
	}
	kill(-cmd, SIGKILL);
	for (int round = 0; round < 2000; round++) {
		int status;
		while (waitpid(-1, &status, WNOHANG) > 0)
			;
		/* No child left means no descendant left: every orphan is reparented to us. */
		if (waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD)
			_exit(0); /* the host reads 0 as the tree gone */
		kill_descendants();
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	_exit(1);
}

/* The command's own process until its exec, on a stack of its own. */
static char command_stack[64 * 1024] __attribute__((aligned(16)));

static int command_main(void *arg)
{
	close(FD_STATUS);
	close(FD_CONTROL);
	local_child_run(arg);
	return 127; /* not reached: local_child_run execs or exits */
}

static int usage(void)
{
	static const char msg[] = "sbx-local-exec: the subreaper helper of sbx's local backend; "
				  "it is started by the plugin, not by hand\n";
	ssize_t w = write(2, msg, sizeof(msg) - 1);
	(void)w;
	return 2;
}

int main(int argc, char **argv)
{
	prctl(PR_SET_NAME, "sbx-exec", 0, 0, 0);
	if (argc == 2 && strcmp(argv[1], "-s") == 0)
		return sink();
	local_join join;
	memset(&join, 0, sizeof(join));
	join.pidfd = -1;
	local_plan p;
	memset(&p, 0, sizeof(p));
	p.cwd_fd = is_open(FD_CWD) ? FD_CWD : -1;
	p.report_fd = FD_REPORT;
	p.cg_fd = -1;
	p.status_fd = FD_STATUS;
	p.control_fd = FD_CONTROL;
	p.in_fd = 0, p.out_fd = 1, p.err_fd = 2;
	p.signals_default = 1; /* the plugin reset them before its exec of this program */
	int ns_flags = 0, i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
		if (i + 1 >= argc || argv[i][0] != '-' || argv[i][1] == '\0' || argv[i][2] != '\0')
			return usage();
		const char *v = argv[i + 1];
		switch (argv[i][1]) {
		case 'c':
			p.cwd = v;
			break;
		case 'o':
			p.out_path = v;
			break;
		case 'e':
			p.err_path = v;
			break;
		case 'j':
			ns_flags = (int)strtol(v, NULL, 10);
			break;
		case 'C':
			join.cap_last = (int)strtol(v, NULL, 10);
			break;
		default:
			return usage();
		}
	}
	if (i + 1 >= argc || !is_open(FD_REPORT) || !is_open(FD_STATUS) || !is_open(FD_CONTROL) ||
	    (p.cwd_fd < 0 && !p.cwd))
		return usage();
	p.argv = argv + i + 1;
	p.envp = environ;
	p.path = getenv("PATH");
	/* The command's exec closes the report pipe: its end of file tells the host it ran.
	 * One call where the kernel has it (5.11), else one descriptor at a time. */
	if (syscall(SYS_close_range, (unsigned)FD_REPORT, ~0u, HELPER_CLOSE_RANGE_CLOEXEC) != 0)
		for (int fd = FD_REPORT; fd < FD_PROCS + LOCAL_JOIN_PROCS; fd++)
			if (is_open(fd) && fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
				local_child_fail(&p, LOCAL_STAGE_SETUP, errno);
	if (ns_flags) {
		join.active = join.via_helper = 1;
		for (int k = 0; k < LOCAL_JOIN_PROCS; k++)
			join.procs[k] = is_open(FD_PROCS + k) ? FD_PROCS + k : -1;
		p.join = &join;
		enter_sandbox(&p, ns_flags);
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
		local_child_fail(&p, LOCAL_STAGE_SETUP, errno);
	/* The command borrows this process's memory until its exec, as the plugin's commands
	 * borrow the host's: a fork() here, small as this process is, cost a page-table copy
	 * and the copy-on-write faults after it, 0.6 to 0.9 ms per command on the machines
	 * measured (bench/README). */
	pid_t cmd = (pid_t)clone(command_main, command_stack + sizeof(command_stack),
				 CLONE_VM | CLONE_VFORK | SIGCHLD, &p);
	if (cmd < 0)
		local_child_fail(&p, LOCAL_STAGE_FORK, errno);
	int keep[] = {FD_STATUS, FD_CONTROL};
	local_child_close_others(keep, 2);
	for (int fd = 0; fd < 3; fd++)
		close(fd);
	watch(cmd);
	return 0;
}

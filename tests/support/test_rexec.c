/* The remote-exec wrapper and killer, run by this machine's /bin/sh exactly as a backend
 * runs them inside a sandbox. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/support.h>

#include "testhost.h"

typedef struct ran {
	char out[8192];
	char err[8192];
	size_t out_len, err_len;
	int status; /* from waitpid */
	int done;   /* both end markers came */
	int marked; /* the status they carried */
} ran;

/* The shell the wrapper runs under: this machine's /bin/sh, or busybox's (whose applets it
 * prefers, as in a busybox image). */
static int use_busybox;

static char token[SBXS_REXEC_TOKEN_SIZE];

static pid_t spawn(const char *const *argv, int *in_fd, int *out_fd, int *err_fd)
{
	const char *bb[64];
	if (use_busybox) {
		size_t n = 0;
		bb[n++] = "/bin/busybox";
		bb[n++] = "sh";
		for (size_t i = 1; argv[i] && n < 63; i++)
			bb[n++] = argv[i];
		bb[n] = NULL;
		argv = bb;
	}
	int pi[2], po[2], pe[2];
	cr_assert_eq(pipe2(pi, O_CLOEXEC) | pipe2(po, O_CLOEXEC) | pipe2(pe, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(pi[0], 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pi[0]);
	close(po[1]);
	close(pe[1]);
	*in_fd = pi[1];
	*out_fd = po[0];
	*err_fd = pe[0];
	return pid;
}

static int into(void *ctx, uint32_t stream, const void *data, size_t len)
{
	ran *r = ctx;
	char *buf = stream == SBX_STREAM_STDOUT ? r->out : r->err;
	size_t *l = stream == SBX_STREAM_STDOUT ? &r->out_len : &r->err_len;
	cr_assert_leq(*l + len, sizeof(r->out) - 1);
	memcpy(buf + *l, data, len);
	*l += len;
	buf[*l] = '\0';
	return SBX_OK;
}

/* Reads the wrapper's output through a tap until both end markers have come (or both
 * streams ended), as a backend does; then hangs up (closes both) and, unless `hold`, waits
 * for the wrapper. */
static void collect_until(pid_t pid, int out_fd, int err_fd, ran *r, int hold)
{
	struct pollfd p[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
	sbxs_rexec_tap tap;
	memset(r, 0, sizeof(*r));
	sbxs_rexec_tap_init(&tap, token, into, r);
	int open_fds = 2;
	while (open_fds && !tap.done) {
		poll(p, 2, 1000);
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char buf[4096];
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_fds--;
			} else {
				sbxs_rexec_tap_output(&tap,
						      i ? SBX_STREAM_STDERR : SBX_STREAM_STDOUT,
						      buf, (size_t)n);
			}
		}
	}
	if (!tap.done)
		sbxs_rexec_tap_flush(&tap);
	r->done = tap.done;
	r->marked = tap.status;
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	if (!hold)
		cr_assert_eq(waitpid(pid, &r->status, WUNTRACED), pid);
}

static void collect(pid_t pid, int out_fd, int err_fd, ran *r)
{
	collect_until(pid, out_fd, err_fd, r, 0);
}

static void run(const sbxs_rexec *x, const char *input, ran *r)
{
	const char **argv = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbxs_rexec_argv(x, "t", &argv, NULL, &err), SBX_OK, "%s", err.message);
	int in, out, er;
	pid_t pid = spawn(argv, &in, &out, &er);
	/* The command may be done, and the pipe closed, before the bytes go in. */
	if (input && write(in, input, strlen(input)) < 0)
		cr_assert_eq(errno, EPIPE);
	close(in);
	collect(pid, out, er, r);
	free(argv);
}

/* The wrapper exited with `code`, and its end markers, when it wrote them, carried it too. */
static int exited(const ran *r, int code)
{
	return WIFEXITED(r->status) && WEXITSTATUS(r->status) == code &&
	       (!r->done || r->marked == code);
}

/* Processes of this machine carrying SBX_EXEC_TOKEN=token. */
static int carriers(const char *tok)
{
	char want[64];
	int n = snprintf(want, sizeof(want), "SBX_EXEC_TOKEN=%s", tok), found = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300], buf[65536];
		snprintf(path, sizeof(path), "/proc/%s/environ", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof(buf));
		close(fd);
		if (len > 0 && memmem(buf, (size_t)len, want, (size_t)n))
			found++;
	}
	closedir(d);
	return found;
}

static void setup(void)
{
	signal(SIGPIPE, SIG_IGN);
	sbxs_host_set(&test_host);
	cr_assert_eq(sbxs_rexec_token(token), SBX_OK);
	cr_assert_eq(strlen(token), 16);
}

static void kill_leftovers(void)
{
	const char *argv[SBXS_REXEC_KILL_ARGC];
	sbxs_rexec_kill_argv(token, argv);
	int in, out, er;
	ran r;
	pid_t pid = spawn(argv, &in, &out, &er);
	close(in);
	collect(pid, out, er, &r);
}

TestSuite(support_rexec, .init = setup, .fini = kill_leftovers, .timeout = 60);
TestSuite(support_rexec_busybox, .init = setup, .fini = kill_leftovers, .timeout = 60);

/* Each case runs under both shells. */
#define BOTH(name)                                       \
	static void name(void);                          \
	Test(support_rexec, name)                        \
	{                                                \
		name();                                  \
	}                                                \
	Test(support_rexec_busybox, name)                \
	{                                                \
		if (access("/bin/busybox", X_OK) != 0)   \
			cr_skip_test("no /bin/busybox"); \
		use_busybox = 1;                         \
		name();                                  \
	}                                                \
	static void name(void)

BOTH(argv_reaches_the_command_unspliced)
{
	const char *const cmd[] = {"printf", "%s|", "a b", "$(echo no)", "'q'", "", NULL};
	sbxs_rexec x = {.token = token, .argv = cmd};
	ran r;
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, "a b|$(echo no)|'q'||");
	cr_assert(r.done, "both end markers came");
	cr_assert(exited(&r, 0), "%d", r.status);
}

BOTH(a_shell_string_runs_under_bash_and_its_exit_code_comes_back)
{
	sbxs_rexec x = {.token = token, .shell = "[ -n \"$BASH_VERSION\" ] && echo bash; exit 7"};
	ran r;
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, access("/bin/bash", X_OK) == 0 ? "bash\n" : "");
	cr_assert(exited(&r, 7), "%d", r.status);
}

BOTH(env_is_exported_and_cwd_entered)
{
	sbx_kv env[] = {{"A_B", "x y"}, {"EMPTY", NULL}};
	sbxs_rexec x = {.token = token,
			.shell = "echo \"$A_B|$EMPTY|$(pwd)\"",
			.env = env,
			.n_env = 2,
			.cwd = "/tmp"};
	ran r;
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, "x y||/tmp\n");
	sbx_kv bad[] = {{"A-B", "1"}};
	x.env = bad;
	x.n_env = 1;
	const char **argv = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbxs_rexec_argv(&x, "t", &argv, NULL, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message,
			 "t: exec: environment name 'A-B' is not a shell variable name "
			 "([A-Za-z_][A-Za-z0-9_]*)");
}

BOTH(a_missing_cwd_is_exit_126_with_its_name)
{
	sbxs_rexec x = {.token = token, .shell = "echo ran", .cwd = "/no/such/dir"};
	ran r;
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, "");
	cr_assert_str_eq(r.err, "sbx-exec: no such directory: /no/such/dir\n");
	cr_assert(exited(&r, 126), "%d", r.status);
	cr_assert_not(r.done, "the command never ran: no markers");
	sbxs_rexec_tap t;
	sbxs_rexec_tap_init(&t, token, NULL, NULL);
	sbxs_rexec_tap_output(&t, SBX_STREAM_STDERR, r.err, strlen(r.err));
	sbx_error err = {0};
	cr_assert_eq(sbxs_rexec_cwd_error(&t, 126, "t", "/no/such/dir", &err), SBX_E_NO_FILE);
	cr_assert_str_eq(err.message, "t: exec: cwd '/no/such/dir' does not exist");
}

/* A relative cwd is entered, `..` and symlinks resolved, only while it stays beneath the
 * folder the wrapper started in (the work dir); the backend words the refusal from stderr. */
BOTH(a_relative_cwd_that_leads_outside_is_exit_126_with_its_name)
{
	char base[] = "/tmp/sbx-rexec-cwd-XXXXXX", p[100];
	cr_assert_not_null(mkdtemp(base));
	snprintf(p, sizeof(p), "%s/sub", base);
	cr_assert_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/out", base);
	cr_assert_eq(symlink("/", p), 0);
	snprintf(p, sizeof(p), "%s/in", base);
	cr_assert_eq(symlink("sub", p), 0);
	cr_assert_eq(chdir(base), 0);
	static const char *const inside[] = {"sub", "in", "sub/..", "."};
	for (size_t i = 0; i < 4; i++) {
		sbxs_rexec x = {.token = token, .shell = "echo ran", .cwd = inside[i]};
		ran r;
		run(&x, NULL, &r);
		cr_assert_str_eq(r.out, "ran\n", "cwd %s: %s", inside[i], r.err);
		cr_assert(exited(&r, 0), "%d", r.status);
	}
	static const char *const outside[] = {"..", "out", "sub/../..", "out/tmp", "in/../.."};
	for (size_t i = 0; i < 5; i++) {
		sbxs_rexec x = {.token = token, .shell = "echo ran", .cwd = outside[i]};
		ran r;
		run(&x, NULL, &r);
		char want[100];
		snprintf(want, sizeof(want), "sbx-exec: cwd leads outside the work dir: %s\n",
			 outside[i]);
		cr_assert_str_eq(r.out, "");
		cr_assert_str_eq(r.err, want);
		cr_assert(exited(&r, 126), "%d", r.status);
		cr_assert_not(r.done, "the command never ran: no markers");
		sbxs_rexec_tap t;
		sbxs_rexec_tap_init(&t, token, NULL, NULL);
		cr_assert_eq(sbxs_rexec_tap_output(&t, SBX_STREAM_STDERR, r.err, strlen(r.err)),
			     SBX_OK);
		sbx_error err = {0};
		cr_assert_eq(sbxs_rexec_cwd_error(&t, 126, "t", outside[i], &err), SBX_E_PATH);
		snprintf(want, sizeof(want), "t: exec: cwd '%s' leads outside the sandbox work dir",
			 outside[i]);
		cr_assert_str_eq(err.message, want);
		cr_assert_eq(sbxs_rexec_cwd_error(&t, 1, "t", outside[i], &err), SBX_OK);
	}
	/* An absolute cwd is the sandbox's own. */
	sbxs_rexec x = {.token = token, .shell = "pwd", .cwd = "/"};
	ran r;
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, "/\n");
	cr_assert_eq(chdir("/"), 0);
	snprintf(p, sizeof(p), "%s/in", base);
	unlink(p);
	snprintf(p, sizeof(p), "%s/out", base);
	unlink(p);
	snprintf(p, sizeof(p), "%s/sub", base);
	rmdir(p);
	rmdir(base);
}

BOTH(stdin_is_dev_null_n_bytes_of_a_pipe_or_the_token_file)
{
	sbxs_rexec x = {.token = token, .shell = "cat; echo \"rc=$?\""};
	ran r;
	run(&x, "not for the command", &r);
	cr_assert_str_eq(r.out, "rc=0\n");

	x.stdin_how = SBXS_REXEC_STDIN_PIPE;
	x.stdin_len = 5;
	run(&x, "hello world", &r);
	cr_assert_str_eq(r.out, "hellorc=0\n");

	char path[SBXS_REXEC_PATH_SIZE];
	sbxs_rexec_stdin_path(token, path);
	cr_assert_eq(strncmp(path, "/tmp/.sbx-stdin-", 16), 0);
	FILE *f = fopen(path, "w");
	fputs("file data", f);
	fclose(f);
	x.stdin_how = SBXS_REXEC_STDIN_FILE;
	x.shell = "cat; [ -e \"/tmp/.sbx-stdin-$SBX_EXEC_TOKEN\" ] && echo still there; true";
	run(&x, "not this", &r);
	cr_assert_str_eq(r.out, "file data");
	cr_assert_neq(access(path, F_OK), 0, "the file is removed before the command starts");
	run(&x, NULL, &r);
	cr_assert(exited(&r, 126), "no file: %d", r.status);
	char want[128];
	snprintf(want, sizeof(want), "sbx-exec: no stdin file %s\n", path);
	cr_assert_str_eq(r.err, want);
}

BOTH(the_command_leads_its_own_session_and_carries_the_token)
{
	sbxs_rexec x = {.token = token,
			.shell = "read -r s </proc/$$/stat; s=${s##*\") \"}; set -- $s; "
				 "[ \"$4\" = $$ ] && echo leader; echo \"$SBX_EXEC_TOKEN\""};
	ran r;
	run(&x, NULL, &r);
	char want[64];
	snprintf(want, sizeof(want), "leader\n%s\n", token);
	cr_assert_str_eq(r.out, want);
	char pidfile[64];
	snprintf(pidfile, sizeof(pidfile), "/tmp/.sbx-exec-%s", token);
	cr_assert_neq(access(pidfile, F_OK), 0, "the pid file goes with the command");
}

BOTH(sigint_is_not_ignored_by_the_command)
{
	sbxs_rexec x = {.token = token, .shell = "kill -INT $$; echo survived"};
	ran r;
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, "");
	cr_assert(exited(&r, 130), "%d", r.status);
}

BOTH(sweep_kills_what_the_command_left_and_only_with_the_flag)
{
	sbxs_rexec x = {.token = token,
			.flags = SBXS_REXEC_SWEEP,
			.shell = "sleep 300 & setsid sh -c 'sleep 300' & echo started"};
	ran r;
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, "started\n");
	cr_assert(exited(&r, 0), "%d", r.status);
	cr_assert_eq(carriers(token), 0);

	x.flags = 0;
	x.shell = "sleep 300 >/dev/null 2>&1 & echo started";
	run(&x, NULL, &r);
	cr_assert_str_eq(r.out, "started\n");
	cr_assert_eq(carriers(token), 1, "without the flag the leftover lives on");
}

/* Processes of this machine running `sleep SECONDS`. */
static int sleeping(long seconds)
{
	char want[32];
	int n = snprintf(want, sizeof(want), "sleep%c%ld", 0, seconds) + 1, found = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300], buf[256];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof(buf));
		close(fd);
		if (len == n && memcmp(buf, want, (size_t)n) == 0)
			found++;
	}
	closedir(d);
	return found;
}

BOTH(the_killer_ends_the_whole_tree_of_a_running_command)
{
	/* Four sleeps of their own lengths: one in a session of its own, one left by a subshell,
	 * one that shed the token (but stays in the command's group), and the last in the
	 * foreground. */
	long base = 5000 + (long)(getpid() % 1000) * 4;
	char cmd[300];
	snprintf(cmd, sizeof(cmd),
		 "setsid sh -c 'sleep %ld' & (sleep %ld &) ; env -u SBX_EXEC_TOKEN sleep %ld & "
		 "sleep %ld",
		 base, base + 1, base + 2, base + 3);
	sbxs_rexec x = {.token = token, .shell = cmd};
	const char **argv = NULL;
	cr_assert_eq(sbxs_rexec_argv(&x, "t", &argv, NULL, NULL), SBX_OK);
	int in, out, er;
	pid_t pid = spawn(argv, &in, &out, &er);
	close(in);
	free(argv);
	int all = 0;
	for (int i = 0; i < 500 && !all; i++) {
		all = 1;
		for (long k = 0; k < 4; k++)
			all &= sleeping(base + k) == 1;
		if (!all)
			usleep(10000);
	}
	cr_assert(all, "the four sleeps started");
	char pidfile[64];
	snprintf(pidfile, sizeof(pidfile), "/tmp/.sbx-exec-%s", token);
	cr_assert_eq(access(pidfile, F_OK), 0, "the pid file names the session leader");

	const char *kargv[SBXS_REXEC_KILL_ARGC];
	sbxs_rexec_kill_argv(token, kargv);
	int kin, kout, ker;
	ran k;
	pid_t kp = spawn(kargv, &kin, &kout, &ker);
	close(kin);
	collect(kp, kout, ker, &k);
	cr_assert(exited(&k, 0), "killer: %d %s", k.status, k.err);
	cr_assert_str_eq(k.out, "");
	cr_assert_str_eq(k.err, "");

	ran r;
	collect(pid, out, er, &r); /* EOF: nothing holds the output any more */
	cr_assert(exited(&r, 137), "%d", r.status);
	cr_assert_eq(carriers(token), 0);
	for (long i = 0; i < 4; i++)
		cr_assert_eq(sleeping(base + i), 0, "sleep %ld survived", base + i);
	cr_assert_neq(access(pidfile, F_OK), 0);
}

BOTH(a_signal_death_is_not_reported_on_stderr)
{
	sbxs_rexec x = {.token = token, .shell = "echo out; echo err >&2; kill -9 $$"};
	ran r;
	run(&x, NULL, &r);
	cr_assert(exited(&r, 137), "%d", r.status);
	cr_assert_str_eq(r.out, "out\n");
	cr_assert_str_eq(r.err, "err\n",
			 "the shell's \"Killed\" must not reach the command's stderr");
}

BOTH(reraise_dies_of_the_commands_signal_but_never_stops)
{
	sbxs_rexec x = {.token = token, .shell = "kill -TERM $$"};
	ran r;
	run(&x, NULL, &r);
	cr_assert(exited(&r, 143), "without the flag: 128+N, %d", r.status);
	x.flags = SBXS_REXEC_RERAISE;
	run(&x, NULL, &r);
	cr_assert(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGTERM, "%d", r.status);
	cr_assert(r.done && r.marked == 143, "the markers carry 128+N: %d", r.marked);
	x.shell = "exit 147";
	run(&x, NULL, &r);
	cr_assert(exited(&r, 147), "a stop signal's number is an exit code: %d", r.status);
}

BOTH(the_end_markers_come_behind_all_of_the_commands_output)
{
	/* More than a pipe holds, on both streams, the last bytes without a newline. */
	sbxs_rexec x = {.token = token,
			.shell = "i=0; while [ $i -lt 300 ]; do printf '%019d\n' $i; "
				 "printf 'e%018d\n' $i >&2; i=$((i + 1)); done; printf tail; "
				 "printf '\\001sbx-end:0000000000000000:9\\001' >&2; exit 3"};
	ran r;
	run(&x, NULL, &r);
	cr_assert(r.done);
	cr_assert(exited(&r, 3), "%d", r.status);
	cr_assert_eq(r.out_len, 300 * 20 + 4);
	cr_assert_str_eq(r.out + 299 * 20, "0000000000000000299\ntail");
	/* A marker with another token is output like any other. */
	cr_assert_eq(r.err_len, 300 * 20 + 28);
	cr_assert_eq(memcmp(r.err + 300 * 20, "\001sbx-end:0000000000000000:9\001", 28), 0);
}

/* Lines in `path`, 0 when it is missing. */
static long lines_in(const char *path)
{
	FILE *f = fopen(path, "r");
	long n = 0;
	int c;
	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

BOTH(a_leftover_holding_the_output_neither_holds_the_call_nor_dies_of_the_hangup)
{
	char dir[] = "/tmp/sbx-rexec-XXXXXX", cmd[512], go[64], held[64];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(go, sizeof(go), "%s/go", dir);
	snprintf(held, sizeof(held), "%s/held", dir);
	/* The writer starts writing once the call has been hung up; a failed echo ends it with
	 * 3, SIGPIPE would kill it. */
	snprintf(
	    cmd, sizeof(cmd),
	    "cd %s; ( while [ ! -e go ]; do sleep 0.05; done; while :; do echo tick || exit 3; "
	    "echo tock >&2 || exit 3; echo t >> held; sleep 0.05; done ) & echo done; "
	    "echo err >&2; exit 5",
	    dir);
	sbxs_rexec x = {.token = token, .shell = cmd};
	const char **argv = NULL;
	cr_assert_eq(sbxs_rexec_argv(&x, "t", &argv, NULL, NULL), SBX_OK);
	int in, out, er;
	pid_t pid = spawn(argv, &in, &out, &er);
	close(in);
	free(argv);
	ran r;
	collect_until(pid, out, er, &r, 1);
	cr_assert(r.done, "the markers came while the writer holds the output");
	cr_assert_eq(r.marked, 5);
	cr_assert_str_eq(r.out, "done\n");
	cr_assert_str_eq(r.err, "err\n");
	int status;
	cr_assert_eq(waitpid(pid, &status, WNOHANG), 0, "the wrapper waits for the holder");
	FILE *f = fopen(go, "w");
	cr_assert_not_null(f);
	fclose(f);
	/* Written after the hang-up: the relays read into /dev/null now. */
	for (int i = 0; i < 2000 && lines_in(held) < 5; i++)
		usleep(10000);
	cr_assert_geq(lines_in(held), 5, "the writer wrote %ld lines after the hang-up",
		      lines_in(held));
	cr_assert_eq(waitpid(pid, &status, WNOHANG), 0);
	kill_leftovers();
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 5, "%d", status);
	unlink(held);
	unlink(go);
	rmdir(dir);
}

/* ---- the tap, over chunks cut anywhere */

typedef struct seen {
	char out[256], err[256];
	size_t out_len, err_len;
	int refuse; /* refuse output once this many bytes came */
} seen;

static int keep_seen(void *ctx, uint32_t stream, const void *data, size_t len)
{
	seen *s = ctx;
	char *b = stream == SBX_STREAM_STDOUT ? s->out : s->err;
	size_t *l = stream == SBX_STREAM_STDOUT ? &s->out_len : &s->err_len;
	cr_assert_gt(len, 0, "no empty chunks");
	cr_assert_lt(*l + len, sizeof(s->out));
	memcpy(b + *l, data, len);
	*l += len;
	b[*l] = '\0';
	return s->refuse && *l >= (size_t)s->refuse ? SBX_E_LIMIT : SBX_OK;
}

/* Feeds out and err (whose lengths are given) to a tap in chunks of `step` bytes. */
static void feed(sbxs_rexec_tap *t, const char *out, size_t ol, const char *err, size_t el,
		 size_t step)
{
	for (size_t i = 0; i < ol || i < el; i += step) {
		if (i < ol)
			sbxs_rexec_tap_output(t, SBX_STREAM_STDOUT, out + i,
					      ol - i < step ? ol - i : step);
		if (i < el)
			sbxs_rexec_tap_output(t, SBX_STREAM_STDERR, err + i,
					      el - i < step ? el - i : step);
	}
}

#define TOK "0123456789abcdef"

Test(support_rexec_tap, strips_the_markers_and_drops_what_follows_at_any_cut)
{
	sbxs_host_set(&test_host);
	const char out[] =
	    "a\001b\001sbx-end:" TOK "x\001sbx-end:" TOK ":\001\001sbx-end:" TOK ":137\001after";
	const char err[] = "\001sbx-end:" TOK ":137\001late";
	const char want_out[] = "a\001b\001sbx-end:" TOK "x\001sbx-end:" TOK ":\001";
	for (size_t step = 1; step <= sizeof(out); step++) {
		seen s = {0};
		sbxs_rexec_tap t;
		sbxs_rexec_tap_init(&t, TOK, keep_seen, &s);
		feed(&t, out, sizeof(out) - 1, err, sizeof(err) - 1, step);
		cr_assert(t.done, "step %zu", step);
		cr_assert_eq(t.status, 137);
		cr_assert_eq(s.out_len, sizeof(want_out) - 1, "step %zu: %zu", step, s.out_len);
		cr_assert_eq(memcmp(s.out, want_out, s.out_len), 0, "step %zu", step);
		cr_assert_eq(s.err_len, 0);
		cr_assert_eq(sbxs_rexec_tap_flush(&t), SBX_OK);
		cr_assert_eq(s.out_len, sizeof(want_out) - 1, "nothing held once done");
	}
}

Test(support_rexec_tap, one_marker_is_not_done_and_a_cut_marker_is_flushed)
{
	sbxs_host_set(&test_host);
	seen s = {0};
	sbxs_rexec_tap t;
	sbxs_rexec_tap_init(&t, TOK, keep_seen, &s);
	const char out[] = "x\001sbx-end:" TOK ":0\001";
	const char err[] = "y\001sbx-end:" TOK ":1";
	feed(&t, out, sizeof(out) - 1, err, sizeof(err) - 1, 3);
	cr_assert_not(t.done);
	cr_assert_str_eq(s.out, "x");
	cr_assert_str_eq(s.err, "y");
	cr_assert_eq(sbxs_rexec_tap_flush(&t), SBX_OK);
	cr_assert_str_eq(s.err, err, "the held bytes go out at the stream's end");
	cr_assert_str_eq(s.out, "x");
	/* Four digits are no status. */
	sbxs_rexec_tap_init(&t, TOK, keep_seen, &s);
	memset(&s, 0, sizeof(s));
	const char four[] = "\001sbx-end:" TOK ":1234\001";
	feed(&t, four, sizeof(four) - 1, "", 0, 1);
	cr_assert_eq(sbxs_rexec_tap_flush(&t), SBX_OK);
	cr_assert_str_eq(s.out, four);
}

Test(support_rexec_tap, a_refusal_is_returned_and_kept)
{
	sbxs_host_set(&test_host);
	seen s = {.refuse = 4};
	sbxs_rexec_tap t;
	sbxs_rexec_tap_init(&t, TOK, keep_seen, &s);
	cr_assert_eq(sbxs_rexec_tap_output(&t, SBX_STREAM_STDOUT, "abcdef", 6), SBX_E_LIMIT);
	cr_assert_eq(t.sink_rc, SBX_E_LIMIT);
	cr_assert_eq(sbxs_rexec_tap_output(&t, SBX_STREAM_STDOUT, "gh", 2), SBX_E_LIMIT);
	cr_assert_str_eq(s.out, "abcdef");
}

Test(support_rexec_tap, the_outcome_of_a_status)
{
	sbx_exec_outcome o = {0};
	sbxs_rexec_outcome(0, &o);
	cr_assert(o.exit_code == 0 && o.signal == 0);
	sbxs_rexec_outcome(128, &o);
	cr_assert(o.exit_code == 128 && o.signal == 0);
	sbxs_rexec_outcome(137, &o);
	cr_assert(o.exit_code == -1 && o.signal == 9);
	sbxs_rexec_outcome(128 + SIGSTOP, &o);
	cr_assert(o.exit_code == 128 + SIGSTOP && o.signal == 0);
	sbxs_rexec_outcome(192, &o);
	cr_assert(o.exit_code == -1 && o.signal == 64);
	sbxs_rexec_outcome(193, &o);
	cr_assert(o.exit_code == 193 && o.signal == 0);
}

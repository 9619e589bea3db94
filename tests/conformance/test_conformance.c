/* The exec and file contract, written once for every backend and driven through the public
 * host API (sbx/host.h).
 *
 * Environment:
 *   SBX_CONFORMANCE_CONFIG  config YAML whose default data source uses the backend under test
 *                           (required). Its truncation keys must be NexAU's defaults
 *                           (output_char_threshold 10000, truncate_head_chars 5000,
 *                           truncate_tail_chars 5000): the truncation cases assume them.
 *   SBX_CONFORMANCE_IMAGE   image for each create (optional).
 *   SBX_CONFORMANCE_SKIP    names of cases this backend cannot support, separated by commas
 *                           or spaces (e.g. "files_escape_refused,signal_death").
 *   SBX_CONFORMANCE_LEVEL   BACKEND:LEVEL (optional), the level of the backend the config asks
 *                           for (e.g. "local:namespaces"). Where the backend's info says this
 *                           machine cannot give it, the suite prints why and exits 77, which
 *                           CTest reports as skipped; a level the info does not name fails.
 *   SBX_CONFORMANCE_SLACK   seconds a timed-out call takes beyond its timeout on a quiet machine
 *                           (default 1); the timeout cases allow 6 s more.
 *   SBX_CONFORMANCE_CLI     the `sbx` command, which the job cases run as the other process
 *                           (required by those cases).
 *   SBX_CONFORMANCE_SECRETS names of environment variables whose values the config uses for
 *                           keys the plugin declares secret (e.g. "E2B_API_KEY"): they must
 *                           appear in no file of the state dir and in no log line.
 *
 * Cases: echo, exit_codes, signal_death, argv, cwd_env, stdin_read, heredoc_quotes,
 * bytes_preserved, output_100mb, truncation_exact, timeout_kills_escapees, background_holder,
 * files_ops, files_escape_refused, destroy_twice, concurrent_execs, pause_resume,
 * paused_exec_refused, leftover_ticker, leftover_server, leftover_holds_stdout,
 * destroy_kills_leftovers, job_waited_and_killed_from_another_process,
 * job_outcome_and_logs_from_another_process, job_survives_sigkill_of_its_starter,
 * files_fifo_refused, files_device_refused, files_read_cap,
 * files_write_replaces_hard_links, exec_cwd_stays_beneath, host_env_not_inherited,
 * timeout_kills_cgroup_movers, secrets_stay_out_of_state_and_logs, exec_redirect, share_dir.
 *
 * files_read_cap assumes the config sets max_file_bytes: 1048576.
 *
 * destroy_kills_leftovers looks for the sandbox's processes in this machine's /proc: every
 * backend under test (containers through Podman, the e2b and k8s stand-ins) runs them here.
 *
 * Every case runs in a fresh sandbox that the fixture creates and destroys. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

#define XSTR(x) #x
#define STR(x)  XSTR(x)

static sbx_host *host;
static char id[SBX_ID_MAX];
static sbx_error err;

static void setup(void)
{
	const char *cfg = getenv("SBX_CONFORMANCE_CONFIG");
	cr_assert(cfg && *cfg, "set SBX_CONFORMANCE_CONFIG to the config of the backend");
	sbx_host_options o = {.config_path = cfg};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_host_new(&o, &host, &err), SBX_OK, "%s", err.message);
	sbx_create_opts c = {.image = getenv("SBX_CONFORMANCE_IMAGE")};
	SBX_INIT_HEADER(c);
	if (c.image && !*c.image)
		c.image = NULL;
	cr_assert_eq(sbx_create(host, &c, id, &err), SBX_OK, "%s", err.message);
}

/* Results still held when an assertion ends a case early, freed by the fixture so a failure
 * reads as that failure and not also as a leak. */
static sbx_exec_result *live[16];

static sbx_exec_result *keep(sbx_exec_result *r)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (!live[i]) {
			live[i] = r;
			break;
		}
	return r;
}

static void release(sbx_exec_result *r)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i] == r)
			live[i] = NULL;
	sbx_exec_result_free(r);
}

static void teardown(void)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		sbx_exec_result_free(live[i]);
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		live[i] = NULL;
	if (id[0] && host)
		sbx_destroy(host, id, NULL);
	id[0] = '\0';
	sbx_host_free(host);
	host = NULL;
}

/* Whether case `name` is in SBX_CONFORMANCE_SKIP. */
static int skipped(const char *name)
{
	const char *list = getenv("SBX_CONFORMANCE_SKIP");
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		p += strspn(p, ", ");
		size_t k = strcspn(p, ", ");
		if (k == n && strncmp(p, name, n) == 0)
			return 1;
		p += k;
	}
	return 0;
}

static void skip_unless_supported(const char *name)
{
	if (skipped(name)) {
		/* A skipped case never reaches .fini: delete its sandbox first. */
		teardown();
		cr_skip_test("%s is in SBX_CONFORMANCE_SKIP", name);
	}
}

#define CASE(name)                                                               \
	static void body_##name(void);                                           \
	Test(conformance, name, .init = setup, .fini = teardown, .timeout = 120) \
	{                                                                        \
		skip_unless_supported(#name);                                    \
		body_##name();                                                   \
	}                                                                        \
	static void body_##name(void)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double slack(void)
{
	const char *s = getenv("SBX_CONFORMANCE_SLACK");
	return s && *s ? strtod(s, NULL) : 1.0;
}

/* Runs a shell string with an optional timeout (seconds, 0 none) and stdin. */
static sbx_exec_result *sh_in(const char *cmd, double timeout, const void *in, size_t in_len)
{
	sbx_exec_opts o = {.shell = cmd,
			   .timeout = timeout,
			   .has_stdin = in != NULL,
			   .stdin_data = in,
			   .stdin_len = in_len};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(host, id, &o, &r, &err), SBX_OK, "%s: %s", cmd, err.message);
	return keep(r);
}

static sbx_exec_result *sh(const char *cmd)
{
	return sh_in(cmd, 0, NULL, 0);
}

static void expect_out(sbx_exec_result *r, const char *out, int code)
{
	cr_assert_eq(r->exit_code, code, "exit %d (signal %d, timed out %d), stderr: %s",
		     r->exit_code, r->signal, r->timed_out, r->stderr_text);
	cr_assert_str_eq(r->stdout_text, out);
	cr_assert_eq(r->stdout_text_len, strlen(out));
	cr_assert_eq(r->truncated, 0);
	cr_assert_eq(r->timed_out, 0);
}

CASE(echo)
{
	sbx_exec_result *r = sh("echo hello; echo oops >&2");
	expect_out(r, "hello\n", 0);
	cr_assert_str_eq(r->stderr_text, "oops\n");
	cr_assert_eq(r->stdout_bytes, 6);
	cr_assert_eq(r->stderr_bytes, 5);
	cr_assert_eq(r->original_stdout_length, 6);
	cr_assert_eq(r->signal, 0);
	cr_assert_not_null(r->stdout_file);
	release(r);
}

CASE(exit_codes)
{
	static const int codes[] = {0, 1, 255};
	for (size_t i = 0; i < 3; i++) {
		char cmd[32];
		snprintf(cmd, sizeof(cmd), "exit %d", codes[i]);
		sbx_exec_result *r = sh(cmd);
		expect_out(r, "", codes[i]);
		cr_assert_eq(r->signal, 0);
		release(r);
	}
}

CASE(signal_death)
{
	sbx_exec_result *r = sh("echo before; kill -KILL $$; echo after");
	cr_assert_eq(r->exit_code, -1);
	cr_assert_eq(r->signal, 9);
	cr_assert_str_eq(r->stdout_text, "before\n");
	cr_assert_eq(r->timed_out, 0);
	release(r);
}

CASE(argv)
{
	const char *argv[] = {"sh",  "-c",    "printf '%s|' \"$0\" \"$1\"; exit 7",
			      "a b", "c'\"d", NULL};
	sbx_exec_opts o = {.argv = argv};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(host, id, &o, &r, &err), SBX_OK, "%s", err.message);
	keep(r);
	expect_out(r, "a b|c'\"d|", 7);
	release(r);
}

/* Runs o in the sandbox; its status, *r kept (NULL when the call failed). */
static int exec_opts_run(sbx_exec_opts *o, sbx_exec_result **r)
{
	SBX_INIT_HEADER(*o);
	*r = NULL;
	int rc = sbx_exec(host, id, o, r, &err);
	if (*r)
		keep(*r);
	return rc;
}

/* stdout_path and stderr_path (ABI 1.3): the files take the streams, from the cwd as >PATH
 * would and truncated first; the same path twice is one file; nothing of a redirected stream
 * reaches the result; a file that cannot be opened fails the call before the command runs.
 * The same whether the backend opens them (local) or the host's /bin/sh wrapper does. */
CASE(exec_redirect)
{
	cr_assert_eq(sbx_mkdir(host, id, "red", 1, &err), SBX_OK, "%s", err.message);
	sbx_exec_result *r;
	sbx_exec_opts o = {.shell = "echo out; echo err >&2; exit 3",
			   .cwd = "red",
			   .stdout_path = "o.txt",
			   .stderr_path = "e.txt"};
	cr_assert_eq(exec_opts_run(&o, &r), SBX_OK, "%s", err.message);
	cr_assert_eq(r->exit_code, 3, "stderr: %s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text, "");
	cr_assert_str_eq(r->stderr_text, "");
	cr_assert_eq(r->stdout_bytes + r->stderr_bytes, 0);
	release(r);
	expect_out(sh("cat red/o.txt red/e.txt"), "out\nerr\n", 0);
	o = (sbx_exec_opts){.shell = "echo 2nd", .stdout_path = "red/o.txt"};
	cr_assert_eq(exec_opts_run(&o, &r), SBX_OK, "%s", err.message);
	expect_out(r, "", 0);
	expect_out(sh("cat red/o.txt"), "2nd\n", 0);

	const char *argv[] = {"sh", "-c", "echo a; echo b >&2; echo c", NULL};
	o = (sbx_exec_opts){.argv = argv, .stdout_path = "red/both", .stderr_path = "red/both"};
	cr_assert_eq(exec_opts_run(&o, &r), SBX_OK, "%s", err.message);
	expect_out(r, "", 0);
	expect_out(sh("cat red/both"), "a\nb\nc\n", 0);

	o = (sbx_exec_opts){.shell = "echo seen; echo hidden >&2", .stderr_path = "red/e2"};
	cr_assert_eq(exec_opts_run(&o, &r), SBX_OK, "%s", err.message);
	expect_out(r, "seen\n", 0);
	cr_assert_str_eq(r->stderr_text, "");
	expect_out(sh("cat red/e2"), "hidden\n", 0);

	static const char *const bad[] = {"stdout", "stderr"};
	for (int i = 0; i < 2; i++) {
		o = (sbx_exec_opts){.shell = "touch red/ran"};
		*(i ? &o.stderr_path : &o.stdout_path) = "no/such/dir/f";
		cr_assert_eq(exec_opts_run(&o, &r), SBX_E_NO_FILE, "%s: %s", bad[i], err.message);
		cr_assert_null(r);
		char want[64];
		snprintf(want, sizeof(want), "cannot open the %s file no/such/dir/f: ", bad[i]);
		cr_assert(strstr(err.message, want), "%s", err.message);
		expect_out(sh("test -e red/ran || echo not run"), "not run\n", 0);
	}
	o = (sbx_exec_opts){.shell = "true", .stdout_path = "red/j", .background = 1};
	cr_assert_eq(exec_opts_run(&o, &r), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "exec: stdout_path is for foreground commands (a job's "
				      "output has files of its own)");
	o = (sbx_exec_opts){.shell = "true", .stderr_path = ""};
	cr_assert_eq(exec_opts_run(&o, &r), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "exec: stderr_path must be a path of 1 to 4095 bytes");
}

CASE(cwd_env)
{
	cr_assert_eq(sbx_mkdir(host, id, "sub/dir", 1, &err), SBX_OK, "%s", err.message);
	sbx_kv env[] = {{"CONF_A", "with space"}, {"CONF_B", "q'\"$x"}};
	sbx_exec_opts o = {.shell = "basename \"$PWD\"; basename \"$(pwd)\"; "
				    "printf '%s|%s\\n' \"$CONF_A\" \"$CONF_B\"",
			   .cwd = "sub/dir",
			   .env = env,
			   .n_env = 2};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(host, id, &o, &r, &err), SBX_OK, "%s", err.message);
	keep(r);
	expect_out(r, "dir\ndir\nwith space|q'\"$x\n", 0);
	release(r);
	o.cwd = "no/such/dir";
	r = NULL;
	int rc = sbx_exec(host, id, &o, &r, &err);
	if (r)
		keep(r);
	cr_assert(rc == SBX_E_NO_FILE || rc == SBX_E_INVAL, "missing cwd gave %s: %s",
		  sbx_status_name(rc), err.message);
	cr_assert_null(r);
}

CASE(stdin_read)
{
	sbx_exec_result *r = sh_in("read a; read b; echo \"$b-$a\"", 0, "one\ntwo\n", 8);
	expect_out(r, "two-one\n", 0);
	release(r);
	static const char bin[] = "a\0b\xff\xfe\n";
	r = sh_in("cat", 0, bin, 6);
	cr_assert_eq(r->exit_code, 0);
	cr_assert_eq(r->stdout_text_len, 6);
	cr_assert_arr_eq(r->stdout_text, bin, 6);
	release(r);
	/* Without stdin the command reads EOF at once: nothing hangs on an interactive read. */
	r = sh_in("cat; read x; echo \"read=$?\"", 20, NULL, 0);
	expect_out(r, "read=1\n", 0);
	release(r);
}

CASE(heredoc_quotes)
{
	sbx_exec_result *r = sh("cat <<'EOF'\n$HOME \"dq\" 'sq' \\n `x`\nEOF\n"
				"X=val; cat <<EOF\n[$X]\nEOF\n"
				"printf '%s\\n' \"a  b\" 'c\"d' \"e'f\"");
	expect_out(r, "$HOME \"dq\" 'sq' \\n `x`\n[val]\na  b\nc\"d\ne'f\n", 0);
	release(r);
}

CASE(bytes_preserved)
{
	static const char bytes[] = "\x00\xff\xfe\xc3\x28 \xe2\x82 end\x00";
	size_t n = sizeof(bytes) - 1;
	cr_assert_eq(sbx_write_file(host, id, "bin.dat", bytes, n, 0, &err), SBX_OK, "%s",
		     err.message);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_read_file(host, id, "bin.dat", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(len, n);
	cr_assert_arr_eq(data, bytes, n);
	sbx_free(data);
	/* The same bytes through a command's output, display copy and byte count. */
	sbx_exec_result *r = sh("cat bin.dat");
	cr_assert_eq(r->exit_code, 0);
	cr_assert_eq(r->stdout_bytes, n);
	cr_assert_eq(r->stdout_text_len, n);
	cr_assert_arr_eq(r->stdout_text, bytes, n);
	cr_assert_eq(r->truncated, 0);
	release(r);
	/* And the command writes them itself. */
	r = sh("printf 'x\\000\\377y' > out.dat; wc -c < out.dat");
	cr_assert_eq(r->exit_code, 0);
	cr_assert_eq(atoi(r->stdout_text), 4);
	release(r);
	cr_assert_eq(sbx_read_file(host, id, "out.dat", &data, &len, &err), SBX_OK);
	cr_assert_eq(len, 4);
	cr_assert_arr_eq(data, "x\0\377y", 4);
	sbx_free(data);
}

static long max_rss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* The display copy of a cut stream: head, NexAU's marker, tail. */
static char *expected_cut(const char *head, const char *omitted, const char *path, const char *tail)
{
	size_t cap = strlen(head) + strlen(tail) + strlen(path) + 128;
	char *s = malloc(cap);
	cr_assert_not_null(s);
	snprintf(s, cap, "%s\n\n... [%s characters omitted] ...\n(Full output: %s)\n\n%s", head,
		 omitted, path, tail);
	return s;
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	cr_assert_not_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

CASE(output_100mb)
{
	long before = max_rss_kb();
	sbx_exec_result *r =
	    sh("printf S; head -c 104857598 /dev/zero | tr '\\0' 'a'; printf E; echo tail >&2");
	long grew_kb = max_rss_kb() - before;
	cr_assert_eq(r->exit_code, 0);
	cr_assert_eq(r->stdout_bytes, 104857600ull);
	cr_assert_eq(r->original_stdout_length, 104857600ull);
	cr_assert_eq(r->truncated, 1);
	cr_assert_str_eq(r->stderr_text, "tail\n");
	char *a = repeat('a', 4999);
	char head[5001], tail[5001];
	snprintf(head, sizeof(head), "S%s", a);
	snprintf(tail, sizeof(tail), "%sE", a);
	char *want = expected_cut(head, "104,847,600", r->stdout_file, tail);
	cr_assert_eq(r->stdout_text_len, strlen(want));
	cr_assert_str_eq(r->stdout_text, want);
	struct stat sb;
	cr_assert_eq(stat(r->stdout_file, &sb), 0);
	cr_assert_eq((uint64_t)sb.st_size, r->stdout_bytes - r->stdout_dropped);
	/* Constant memory: the host never holds the output. */
	cr_assert_lt(grew_kb, 64 * 1024, "peak RSS grew by %ld KiB", grew_kb);
	free(want);
	free(a);
	release(r);
}

CASE(truncation_exact)
{
	/* Exactly the threshold: whole. */
	sbx_exec_result *r = sh("printf A; yes b | head -n 9998 | tr -d '\\n'; printf Z");
	cr_assert_eq(r->original_stdout_length, 10000);
	cr_assert_eq(r->truncated, 0);
	cr_assert_eq(r->stdout_text_len, 10000);
	cr_assert_eq(r->stdout_text[0], 'A');
	cr_assert_eq(r->stdout_text[9999], 'Z');
	release(r);
	/* One past it: 5000 + marker("1") + 5000. */
	r = sh("printf A; yes b | head -n 9999 | tr -d '\\n'; printf Z");
	cr_assert_eq(r->original_stdout_length, 10001);
	cr_assert_eq(r->stdout_bytes, 10001);
	cr_assert_eq(r->truncated, 1);
	char *b = repeat('b', 4999);
	char head[5001], tail[5001];
	snprintf(head, sizeof(head), "A%s", b);
	snprintf(tail, sizeof(tail), "%sZ", b);
	char *want = expected_cut(head, "1", r->stdout_file, tail);
	cr_assert_str_eq(r->stdout_text, want);
	cr_assert_eq(r->stdout_text_len, strlen(want));
	free(want);
	free(b);
	release(r);
	/* Characters, not bytes: 10001 two-byte characters cut at character boundaries. */
	r = sh("yes é | head -n 10001 | tr -d '\\n'");
	cr_assert_eq(r->stdout_bytes, 20002);
	cr_assert_eq(r->original_stdout_length, 10001);
	cr_assert_eq(r->truncated, 1);
	char ehalf[10001];
	for (size_t i = 0; i < 5000; i++)
		memcpy(ehalf + 2 * i, "\xc3\xa9", 2);
	ehalf[10000] = '\0';
	want = expected_cut(ehalf, "1", r->stdout_file, ehalf);
	cr_assert_str_eq(r->stdout_text, want);
	free(want);
	release(r);
}

/* How long the escapees of the timeout cases sleep: well past the 1 s timeout and the
 * backend's kill slack, so that a loaded machine's slow kill still comes first. */
static int escapee_nap(void)
{
	return (int)(1.0 + slack()) + 6;
}

/* A setsid escapee, a double-fork escapee and a grandchild holding the output pipe: the call
 * returns with the output so far before any escapee wakes, and nothing of the tree survives.
 * The bound on the call's time is a second below the escapees' sleep, so a call that waited
 * for them cannot pass it; it is several times what the kill takes on a quiet machine
 * (timeout + slack). */
CASE(timeout_kills_escapees)
{
	/* Marker names carry this process's pid: other runs of the suite may be in their own
	 * timeout window on the same machine. */
	char cmd[600], check[200];
	long me = (long)getpid();
	int nap = escapee_nap();
	snprintf(cmd, sizeof(cmd),
		 "echo before; "
		 "setsid sh -c 'sleep %d; echo x > conf-esc-%ld-1' & "
		 "( ( sleep %d; echo x > conf-esc-%ld-2 ) & ); "
		 "( sleep %d; echo x > conf-esc-%ld-3 ) & "
		 "sleep 30; echo never",
		 nap, me, nap, me, nap, me);
	snprintf(check, sizeof(check), "grep -las 'conf-es[c]-%ld-' /proc/[0-9]*/cmdline | wc -l",
		 me);
	double t0 = now_s();
	sbx_exec_result *r = sh_in(cmd, 1.0, NULL, 0);
	double took = now_s() - t0;
	cr_assert_eq(r->timed_out, 1);
	cr_assert_lt(took, nap - 1.0, "took %.3f s", took);
	cr_assert_str_eq(r->stdout_text, "before\n");
	release(r);
	r = sh(check);
	cr_assert_eq(atoi(r->stdout_text), 0, "survivors: %s", r->stdout_text);
	release(r);
	/* Past the escapees' sleep: none of them lived to write its marker. */
	double left = t0 + nap + 0.5 - now_s();
	if (left > 0)
		usleep((useconds_t)(left * 1e6));
	r = sh("ls");
	expect_out(r, "", 0);
	release(r);
}

/* A background child holding stdout does not keep the call open: it sleeps past the call's
 * timeout, so a call that waited for it would be timed_out. */
CASE(background_holder)
{
	sbx_exec_result *r = sh_in("sleep 300 & echo done", 60, NULL, 0);
	cr_assert_eq(r->timed_out, 0, "the call waited for the holder");
	expect_out(r, "done\n", 0);
	release(r);
}

CASE(files_ops)
{
	cr_assert_eq(sbx_write_file(host, id, "d/e/f.txt", "hello", 5, 0640, &err), SBX_OK, "%s",
		     err.message);
	sbx_file_info info = {0};
	SBX_INIT_HEADER(info);
	cr_assert_eq(sbx_stat(host, id, "d/e/f.txt", &info, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(info.kind, SBX_FILE_REGULAR);
	cr_assert_eq(info.size, 5);
	cr_assert_eq(info.mode, 0640);
	cr_assert_str_eq(info.name, "f.txt");
	cr_assert_eq(sbx_mkdir(host, id, "d/m", 0, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_stat(host, id, "d/m", &info, &err), SBX_OK);
	cr_assert_eq(info.kind, SBX_FILE_DIR);
	sbx_file_info *ents = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_list_dir(host, id, "d", &ents, &n, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(n, 2);
	int seen_e = 0, seen_m = 0;
	for (size_t i = 0; i < n; i++) {
		seen_e |= strcmp(ents[i].name, "e") == 0 && ents[i].kind == SBX_FILE_DIR;
		seen_m |= strcmp(ents[i].name, "m") == 0 && ents[i].kind == SBX_FILE_DIR;
	}
	sbx_free(ents);
	cr_assert(seen_e && seen_m);
	sbx_exec_result *r = sh("cat d/e/f.txt");
	expect_out(r, "hello", 0);
	release(r);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_read_file(host, id, "d/missing", &data, &len, &err), SBX_E_NO_FILE);
	cr_assert_eq(sbx_remove(host, id, "d/e/f.txt", 0, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_stat(host, id, "d/e/f.txt", &info, &err), SBX_E_NO_FILE);
	cr_assert_eq(sbx_write_file(host, id, "d/e/g", "x", 1, 0, &err), SBX_OK);
	cr_assert_neq(sbx_remove(host, id, "d", 0, &err), SBX_OK);
	cr_assert_eq(sbx_remove(host, id, "d", 1, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_stat(host, id, "d", &info, &err), SBX_E_NO_FILE);
}

/* Status of reading path; frees whatever a wrongly successful read returned. */
static int read_status(const char *path)
{
	void *data = NULL;
	size_t len = 0;
	int rc = sbx_read_file(host, id, path, &data, &len, &err);
	if (rc == SBX_OK)
		sbx_free(data);
	return rc;
}

CASE(files_escape_refused)
{
	cr_assert_eq(read_status("../../../../etc/passwd"), SBX_E_PATH);
	cr_assert(strstr(err.message, "../../../../etc/passwd"), "%s", err.message);
	cr_assert_eq(sbx_write_file(host, id, "../escape.txt", "x", 1, 0, &err), SBX_E_PATH);
	sbx_exec_result *r = sh("ln -s / rootlink && ln -s ../.. uplink && echo ok");
	expect_out(r, "ok\n", 0);
	release(r);
	cr_assert_eq(read_status("rootlink/etc/passwd"), SBX_E_PATH);
	cr_assert(strstr(err.message, "rootlink/etc/passwd"), "%s", err.message);
	cr_assert_eq(sbx_write_file(host, id, "uplink/escape.txt", "x", 1, 0, &err), SBX_E_PATH);
	sbx_file_info *ents = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_list_dir(host, id, "uplink", &ents, &n, &err), SBX_E_PATH);
	cr_assert_eq(sbx_remove(host, id, "rootlink", 0, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(access("/etc/passwd", F_OK), 0);
}

/* create with share_dir: where the backend shares host folders (local at the plain level),
 * the folder is that sandbox's work dir, the command's pwd, and outlives the sandbox;
 * elsewhere it is refused with SBX_E_UNSUPPORTED: by the host for a backend without
 * SBX_PLUGIN_SHARE_DIR, by local itself at its isolated level. */
CASE(share_dir)
{
	char dir[] = "/tmp/sbx-conf-share-XXXXXX";
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	sbx_create_opts c = {.image = getenv("SBX_CONFORMANCE_IMAGE"), .share_dir = dir};
	SBX_INIT_HEADER(c);
	if (c.image && !*c.image)
		c.image = NULL;
	char other[SBX_ID_MAX];
	int rc = sbx_create(host, &c, other, &err);
	if (rc == SBX_E_UNSUPPORTED) {
		cr_assert(strstr(err.message, ": create: share_dir: this backend cannot share a "
					      "host folder with a sandbox") ||
			      strcmp(err.message,
				     "local: create: share_dir is for the plain level: "
				     "at isolation: namespaces a sandbox sees a tree "
				     "of its own") == 0,
			  "%s", err.message);
		cr_assert_eq(rmdir(dir), 0);
		return;
	}
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
	sbx_exec_opts o = {.shell = "pwd; echo kept > f", .timeout = 60};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	rc = sbx_exec(host, other, &o, &r, &err);
	sbx_error derr = {0};
	int drc = sbx_destroy(host, other, &derr);
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
	keep(r);
	char want[64];
	snprintf(want, sizeof(want), "%s\n", dir);
	expect_out(r, want, 0);
	release(r);
	cr_assert_eq(drc, SBX_OK, "%s", derr.message);
	char path[64], got[16] = "";
	snprintf(path, sizeof(path), "%s/f", dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	size_t n = fread(got, 1, sizeof(got) - 1, f);
	fclose(f);
	got[n] = '\0';
	cr_assert_str_eq(got, "kept\n");
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(rmdir(dir), 0);
}

CASE(destroy_twice)
{
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
	sbx_exec_opts o = {.shell = "true"};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	int rc = sbx_exec(host, id, &o, &r, &err);
	cr_assert_eq(rc, SBX_E_NOT_FOUND, "exec after destroy gave %s: %s", sbx_status_name(rc),
		     err.message);
	id[0] = '\0';
}

/* Many threads at once on one sandbox: each gets its own output, and no call waits on pipes
 * another thread's command holds. */
#define N_THREADS 8
#define N_EXECS   4

/* Seconds a background holder of the output keeps it open in concurrent_execs: longer than
 * the case may run, so a call that waited for one would end in its timeout (timed_out). */
#define HOLDER_S 600

typedef struct worker {
	int index;
	int holders; /* odd execs start a holder (not where the backend waits for holders) */
	int failures;
	char first_bad[1200];
	int k;          /* the exec under way, under `progress` */
	double started; /* when it started, 0 between calls */
} worker;

static pthread_mutex_t progress = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_done = PTHREAD_COND_INITIALIZER;
static int workers_done;

/* The first line of /proc/<pid>/<name> into buf, "" when unreadable. */
static void proc_line(const char *pid, const char *name, char *buf, size_t cap)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%s/%s", pid, name);
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\n' || buf[i] == '\0')
			buf[i] = i + 1 < n && buf[i] == '\0' ? ' ' : '\0';
}

/* What a stuck concurrent_execs was doing, to stderr: each worker's call, each thread's
 * kernel wait, and every process this one started (pid, parent, state, wait, command). */
static void dump_progress(const worker *w, int n)
{
	double t = now_s();
	pthread_mutex_lock(&progress);
	for (int i = 0; i < n; i++)
		fprintf(stderr, "concurrent_execs: worker %d: exec %d, %.1f s in it\n", i, w[i].k,
			w[i].started > 0 ? t - w[i].started : 0.0);
	pthread_mutex_unlock(&progress);
	char self[32], line[600], wchan[128], sys[128];
	snprintf(self, sizeof(self), "%ld/task", (long)getpid());
	DIR *d = opendir("/proc/self/task");
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char tid[300];
		snprintf(tid, sizeof(tid), "%s/%s", self, e->d_name);
		proc_line(tid, "wchan", wchan, sizeof(wchan));
		proc_line(tid, "syscall", sys, sizeof(sys));
		fprintf(stderr, "concurrent_execs: thread %s: wchan %s, syscall %.60s\n", e->d_name,
			wchan, sys);
	}
	if (d)
		closedir(d);
	d = opendir("/proc");
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		proc_line(e->d_name, "stat", line, sizeof(line));
		const char *paren = strrchr(line, ')');
		long ppid = 0;
		char state = '?';
		if (!paren || sscanf(paren + 1, " %c %ld", &state, &ppid) != 2)
			continue;
		/* This process's descendants: follow the parents up (a few levels). */
		long at = ppid;
		for (int up = 0; up < 8 && at > 1 && at != (long)getpid(); up++) {
			char pp[24], st2[600];
			snprintf(pp, sizeof(pp), "%ld", at);
			proc_line(pp, "stat", st2, sizeof(st2));
			const char *p2 = strrchr(st2, ')');
			char s2;
			if (!p2 || sscanf(p2 + 1, " %c %ld", &s2, &at) != 2)
				at = 0;
		}
		if (at != (long)getpid())
			continue;
		char cmd[200];
		proc_line(e->d_name, "wchan", wchan, sizeof(wchan));
		proc_line(e->d_name, "cmdline", cmd, sizeof(cmd));
		fprintf(stderr,
			"concurrent_execs: pid %s, parent %ld, state %c, wchan %s: %.100s\n",
			e->d_name, ppid, state, wchan, cmd);
	}
	if (d)
		closedir(d);
}

/* Dumps progress once the case has run CONCURRENT_DUMP_S seconds, before criterion's
 * timeout ends it without a word. */
#define CONCURRENT_DUMP_S 100

typedef struct watch {
	worker *w;
	int n;
} watch;

static void *watchdog(void *arg)
{
	watch *wa = arg;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += CONCURRENT_DUMP_S;
	pthread_mutex_lock(&progress);
	int rc = 0;
	while (workers_done < wa->n && rc == 0)
		rc = pthread_cond_timedwait(&all_done, &progress, &until);
	int late = workers_done < wa->n;
	pthread_mutex_unlock(&progress);
	if (late)
		dump_progress(wa->w, wa->n);
	return NULL;
}

static void *work(void *arg)
{
	worker *w = arg;
	for (int k = 0; k < N_EXECS; k++) {
		char cmd[128], want[64];
		snprintf(cmd, sizeof(cmd), "echo t%d-%d; %s", w->index, k,
			 k % 2 && w->holders ? "sleep " STR(HOLDER_S) " & true" : "true");
		snprintf(want, sizeof(want), "t%d-%d\n", w->index, k);
		sbx_exec_opts o = {.shell = cmd, .timeout = 60};
		SBX_INIT_HEADER(o);
		sbx_exec_result *r = NULL;
		sbx_error e = {0};
		double t0 = now_s();
		pthread_mutex_lock(&progress);
		w->k = k;
		w->started = t0;
		pthread_mutex_unlock(&progress);
		int rc = sbx_exec(host, id, &o, &r, &e);
		double took = now_s() - t0;
		pthread_mutex_lock(&progress);
		w->started = 0;
		pthread_mutex_unlock(&progress);
		if (rc != SBX_OK || r->timed_out || r->exit_code != 0 ||
		    strcmp(r->stdout_text, want) != 0) {
			if (!w->failures++)
				snprintf(w->first_bad, sizeof(w->first_bad),
					 "%s: rc %d, %.300s, timed out %d after %.3f s, out %.300s",
					 cmd, rc, e.message, r ? (int)r->timed_out : 0, took,
					 r ? r->stdout_text : "");
		}
		sbx_exec_result_free(r);
	}
	pthread_mutex_lock(&progress);
	workers_done++;
	pthread_cond_signal(&all_done);
	pthread_mutex_unlock(&progress);
	return NULL;
}

CASE(concurrent_execs)
{
	pthread_t t[N_THREADS], dog;
	worker w[N_THREADS];
	watch wa = {w, N_THREADS};
	for (int i = 0; i < N_THREADS; i++) {
		w[i] = (worker){.index = i, .holders = !skipped("background_holder")};
		cr_assert_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	cr_assert_eq(pthread_create(&dog, NULL, watchdog, &wa), 0);
	for (int i = 0; i < N_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_join(dog, NULL);
	/* No call waited for a holder: none timed out (a time bound would measure the load: a
	 * loaded machine makes a podman exec take 20 s and more). */
	for (int i = 0; i < N_THREADS; i++)
		cr_assert_eq(w[i].failures, 0, "%s", w[i].first_bad);
}

CASE(pause_resume)
{
	cr_assert_eq(sbx_pause(host, id, &err), SBX_OK, "%s", err.message);
	uint32_t state = 0;
	cr_assert_eq(sbx_status(host, id, &state, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(state, SBX_STATE_PAUSED);
	cr_assert_eq(sbx_resume(host, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(host, id, &state, &err), SBX_OK);
	cr_assert_eq(state, SBX_STATE_RUNNING);
	sbx_exec_result *r = sh("echo awake");
	expect_out(r, "awake\n", 0);
	release(r);
}

/* A sandbox another process paused refuses an exec with SBX_E_PAUSED: the backend says so
 * (the host asks for no status first), also when this process has talked to the sandbox
 * before; once resumed it runs commands again. */
CASE(paused_exec_refused)
{
	sbx_exec_result *r = sh("echo warm");
	expect_out(r, "warm\n", 0);
	release(r);
	sbx_host *other = NULL;
	sbx_host_options o = {.config_path = getenv("SBX_CONFORMANCE_CONFIG")};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_host_new(&o, &other, &err), SBX_OK, "%s", err.message);
	int rc = sbx_pause(other, id, &err);
	sbx_host_free(other);
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
	sbx_exec_opts eo = {.shell = "echo never", .timeout = 30};
	SBX_INIT_HEADER(eo);
	r = NULL;
	rc = sbx_exec(host, id, &eo, &r, &err);
	cr_assert_eq(rc, SBX_E_PAUSED, "exec in a paused sandbox gave %s: %s", sbx_status_name(rc),
		     err.message);
	cr_assert_null(r);
	char want[SBX_ID_MAX + 80];
	snprintf(want, sizeof(want),
		 "%s: exec: sandbox is paused; resume it or set auto_resume: true", id);
	cr_assert_str_eq(err.message, want);
	cr_assert_eq(sbx_resume(host, id, &err), SBX_OK, "%s", err.message);
	r = sh("echo awake");
	expect_out(r, "awake\n", 0);
	release(r);
}

/* ---- what a command leaves behind lives on */

/* Lines `file` gains while a later exec watches it, up to three: the writer lives on after
 * its command returned. The watch ends at three lines or after 200 looks 0.1 s apart, so a
 * loaded machine slows the writer without failing the case. */
static long lines_gained(const char *file)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd),
		 "a=$(wc -l < %s); i=0; while [ $(($(wc -l < %s) - a)) -lt 3 ] && [ $i -lt 200 ]; "
		 "do sleep 0.1; i=$((i + 1)); done; echo $(($(wc -l < %s) - a))",
		 file, file, file);
	sbx_exec_result *r = sh_in(cmd, 120, NULL, 0);
	cr_assert_eq(r->exit_code, 0, "%s: %s", cmd, r->stderr_text);
	long n = strtol(r->stdout_text, NULL, 10);
	release(r);
	return n;
}

/* A ticker started with `&` keeps ticking after its command returned. */
CASE(leftover_ticker)
{
	sbx_exec_result *r = sh_in(
	    "( while :; do echo t >> ticks; sleep 0.1; done ) > /dev/null 2>&1 & echo started", 20,
	    NULL, 0);
	expect_out(r, "started\n", 0);
	release(r);
	long n = lines_gained("ticks");
	cr_assert_geq(n, 3, "the ticker wrote %ld lines after its command returned", n);
}

/* A server started with `&` answers a later exec: it serves requests through a FIFO, which
 * every image has (no image is sure to have a TCP listener). The server keeps the FIFO open
 * for reading and writing: a loop that reopened it per request could reopen it while a slow
 * writer still held it, read end of file when that writer closed, and end, leaving the next
 * writer blocked until its timeout (seen on a loaded machine). */
CASE(leftover_server)
{
	sbx_exec_result *r =
	    sh_in("mkfifo req && ( exec 3<>req; while read line <&3; do "
		  "echo \"pong $line\" > resp.tmp; mv resp.tmp resp; done ) > /dev/null 2>&1 & "
		  "echo listening",
		  20, NULL, 0);
	expect_out(r, "listening\n", 0);
	release(r);
	usleep(200 * 1000);
	r = sh_in("echo ping > req; i=0; while [ ! -f resp ] && [ $i -lt 200 ]; do sleep 0.05; "
		  "i=$((i + 1)); done; cat resp",
		  30, NULL, 0);
	expect_out(r, "pong ping\n", 0);
	release(r);
	r = sh_in("rm resp; echo again > req; i=0; while [ ! -f resp ] && [ $i -lt 200 ]; do "
		  "sleep 0.05; i=$((i + 1)); done; cat resp",
		  30, NULL, 0);
	expect_out(r, "pong again\n", 0);
	release(r);
}

/* A background writer that keeps the command's stdout does not hold the call, and lives on
 * writing (no SIGPIPE, no EPIPE): it keeps appending to a file as well. The writer never
 * ends, so a call that waited for it would end in its timeout: timed_out 0 is the proof (a
 * time bound would only measure how loaded the engine is). */
CASE(leftover_holds_stdout)
{
	sbx_exec_result *r = sh_in("( while :; do echo tick || exit 3; echo t >> held; sleep 0.1; "
				   "done ) & echo done",
				   60, NULL, 0);
	cr_assert_eq(r->timed_out, 0, "the call waited for the writer");
	cr_assert_eq(r->exit_code, 0);
	cr_assert(strstr(r->stdout_text, "done\n") != NULL, "stdout: %s", r->stdout_text);
	release(r);
	long n = lines_gained("held");
	cr_assert_geq(n, 3, "the writer wrote %ld lines after the call returned", n);
}

/* Processes of this machine whose command line contains `marker`. */
static int count_marked(const char *marker)
{
	int found = 0;
	DIR *d = opendir("/proc");
	cr_assert(d != NULL);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[n] = '\0';
		/* Not this test's own view of the marker: only the sandbox's shells carry it. */
		if (strstr(buf, marker) && !strstr(buf, "sbx_conformance"))
			found++;
	}
	closedir(d);
	return found;
}

/* destroy ends every process of the sandbox: plain `&`, setsid and double-forked leftovers. */
CASE(destroy_kills_leftovers)
{
	char marker[64], cmd[600];
	snprintf(marker, sizeof(marker), "conf-left-%ld-%ld", (long)getpid(), (long)time(NULL));
	/* The marker comes in through the environment, so only the three leftover shells carry
	 * it on their command line (not the command, nor its subshells). */
	snprintf(cmd, sizeof(cmd), "%s",
		 "sh -c \"sleep 300; : $CONF_MARK-1\" > /dev/null 2>&1 & "
		 "setsid sh -c \"sleep 300; : $CONF_MARK-2\" > /dev/null 2>&1 & "
		 "( ( sh -c \"sleep 300; : $CONF_MARK-3\" > /dev/null 2>&1 & ) & ); echo ok");
	sbx_kv env[] = {{"CONF_MARK", marker}};
	sbx_exec_opts o = {.shell = cmd, .timeout = 20, .env = env, .n_env = 1};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(host, id, &o, &r, &err), SBX_OK, "%s", err.message);
	expect_out(keep(r), "ok\n", 0);
	release(r);
	int alive = 0;
	/* Until each shell has forked its sleep (a fork not yet exec'd counts twice). */
	for (int i = 0; i < 100 && (alive = count_marked(marker)) != 3; i++)
		usleep(50 * 1000);
	cr_assert_eq(alive, 3, "%d of the 3 leftovers are running after their command", alive);
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
	id[0] = '\0';
	for (int i = 0; i < 100 && (alive = count_marked(marker)) > 0; i++)
		usleep(50 * 1000);
	cr_assert_eq(alive, 0, "%d leftovers survived destroy", alive);
}

/* ---- background jobs, from other processes */

/* Starts `cmd` as a background job; its id into job. */
static void start_job(const char *cmd, char job[SBX_JOB_ID_MAX])
{
	sbx_exec_opts o = {.shell = cmd, .background = 1};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(host, id, &o, &r, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(r->job_id);
	snprintf(job, SBX_JOB_ID_MAX, "%s", r->job_id);
	sbx_exec_result_free(r);
}

/* Runs `sbx --config CONFIG ARGS...` (NULL-terminated) as another process; its stdout into
 * out (NUL-terminated, cut at cap), its exit status returned (-1: killed). In a sanitized
 * build that status includes the leak check at the CLI's exit, which GCC 12 crashed (exit 1)
 * when a dynamic TLS block sat 16 bytes past a page: the build's ASan defaults avoid it
 * (docs/design.md "Sanitized builds"). */
static int cli(char *out, size_t cap, ...)
{
	const char *bin = getenv("SBX_CONFORMANCE_CLI"), *cfg = getenv("SBX_CONFORMANCE_CONFIG");
	cr_assert(bin && *bin, "set SBX_CONFORMANCE_CLI to the sbx command");
	const char *argv[16] = {bin, "--config", cfg};
	size_t n = 3;
	va_list ap;
	va_start(ap, cap);
	for (const char *a; n < 15 && (a = va_arg(ap, const char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t got;
	char sink[4096];
	while ((got = read(p[0], len + 1 < cap ? out + len : sink,
			   len + 1 < cap ? cap - 1 - len : sizeof(sink))) > 0)
		if (len + 1 < cap)
			len += (size_t)got;
	close(p[0]);
	out[len] = '\0';
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A job started here is waited for and killed by the CLI, another process; a wait that times
 * out is 124 and leaves the job running. */
CASE(job_waited_and_killed_from_another_process)
{
	char job[SBX_JOB_ID_MAX], out[4096];
	start_job("sleep 300", job);
	cr_assert_eq(cli(out, sizeof(out), "job", "wait", job, "--timeout", "1", NULL), 124);
	cr_assert_eq(cli(out, sizeof(out), "job", "status", job, "--json", NULL), 0);
	cr_assert(strstr(out, "\"state\":\"running\""), "%s", out);
	cr_assert_eq(cli(out, sizeof(out), "job", "kill", job, "--signal", "KILL", NULL), 0);
	cr_assert_eq(cli(out, sizeof(out), "job", "wait", job, "--timeout", "60", NULL), 128 + 9);
	sbx_job_info info = {0};
	SBX_INIT_HEADER(info);
	cr_assert_eq(sbx_job_status(host, job, &info, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(info.state, SBX_JOB_KILLED, "%s", sbx_job_state_name(info.state));
	cr_assert_eq(info.signal, 9);
}

/* The CLI reads a job's exit status and both streams. */
CASE(job_outcome_and_logs_from_another_process)
{
	char job[SBX_JOB_ID_MAX], out[4096];
	start_job("echo out; echo err >&2; printf 'a\\nb\\nc\\n'; exit 3", job);
	cr_assert_eq(cli(out, sizeof(out), "job", "wait", job, "--timeout", "60", NULL), 3);
	cr_assert_eq(cli(out, sizeof(out), "job", "logs", job, NULL), 0);
	cr_assert_str_eq(out, "out\na\nb\nc\n");
	cr_assert_eq(cli(out, sizeof(out), "job", "logs", job, "--stderr", NULL), 0);
	cr_assert_str_eq(out, "err\n");
	cr_assert_eq(cli(out, sizeof(out), "job", "logs", job, "--tail", "2", NULL), 0);
	cr_assert_str_eq(out, "b\nc\n");
	cr_assert_eq(cli(out, sizeof(out), "job", "ls", id, "--json", NULL), 0);
	cr_assert(strstr(out, job) && strstr(out, "\"state\":\"exited\"") &&
		      strstr(out, "\"exit_code\":3"),
		  "%s", out);
}

/* A job outlives the process that started it, killed with SIGKILL right after the start. */
CASE(job_survives_sigkill_of_its_starter)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		sbx_host *h = NULL;
		sbx_host_options o = {.config_path = getenv("SBX_CONFORMANCE_CONFIG")};
		SBX_INIT_HEADER(o);
		sbx_exec_opts eo = {.shell = "sleep 1; echo survived; exit 5", .background = 1};
		SBX_INIT_HEADER(eo);
		sbx_exec_result *r = NULL;
		if (sbx_host_new(&o, &h, NULL) == SBX_OK &&
		    sbx_exec(h, id, &eo, &r, NULL) == SBX_OK)
			(void)!write(p[1], r->job_id, strlen(r->job_id));
		raise(SIGKILL);
		_exit(1);
	}
	close(p[1]);
	char job[SBX_JOB_ID_MAX] = "";
	ssize_t n = read(p[0], job, sizeof(job) - 1);
	close(p[0]);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "starter: %d", status);
	cr_assert_gt(n, 0, "the starter printed no job id");
	job[n] = '\0';
	sbx_job_info info = {0};
	SBX_INIT_HEADER(info);
	cr_assert_eq(sbx_job_wait(host, job, 60, &info, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(info.state, SBX_JOB_EXITED, "%s", sbx_job_state_name(info.state));
	cr_assert_eq(info.exit_code, 5);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_job_read(host, job, SBX_STREAM_STDOUT, 0, 0, 0, &data, &len, &err), SBX_OK,
		     "%s", err.message);
	cr_assert_eq(len, 9);
	cr_assert_arr_eq(data, "survived\n", 9);
	sbx_free(data);
}

/* ---- what a hostile command can leave in the sandbox (issue #15) */

/* Skips the running case from its body (the fixture's teardown does not run on a skip). */
static void skip_case(const char *why)
{
	teardown();
	cr_skip_test("%s", why);
}

/* A FIFO made by the command: opening it to read or write would block the caller forever. */
CASE(files_fifo_refused)
{
	sbx_exec_result *r = sh("mkfifo pipe && echo ok");
	expect_out(r, "ok\n", 0);
	release(r);
	cr_assert_eq(read_status("pipe"), SBX_E_INVAL, "%s", err.message);
	cr_assert(strstr(err.message, "'pipe' is a FIFO"), "%s", err.message);
	cr_assert_eq(sbx_write_file(host, id, "pipe", "x", 1, 0, &err), SBX_E_INVAL, "%s",
		     err.message);
	cr_assert(strstr(err.message, "'pipe' is a FIFO"), "%s", err.message);
	sbx_file_info info = {0};
	SBX_INIT_HEADER(info);
	cr_assert_eq(sbx_stat(host, id, "pipe", &info, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(info.kind, SBX_FILE_OTHER);
}

/* /dev/zero's twin in the work dir: a read would allocate until the host ran out of memory. */
CASE(files_device_refused)
{
	sbx_exec_result *r = sh("mknod zero c 1 5 2>/dev/null && echo made || echo no");
	if (strcmp(r->stdout_text, "no\n") == 0)
		skip_case("mknod is not allowed in this sandbox");
	expect_out(r, "made\n", 0);
	release(r);
	cr_assert_eq(read_status("zero"), SBX_E_INVAL, "%s", err.message);
	cr_assert(strstr(err.message, "'zero' is a character device"), "%s", err.message);
	cr_assert_eq(sbx_write_file(host, id, "zero", "x", 1, 0, &err), SBX_E_INVAL, "%s",
		     err.message);
}

CASE(files_read_cap)
{
	sbx_exec_result *r = sh("head -c 1048576 /dev/zero > at_cap && "
				"head -c 1048577 /dev/zero > past_cap && echo ok");
	expect_out(r, "ok\n", 0);
	release(r);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_read_file(host, id, "at_cap", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(len, 1048576);
	sbx_free(data);
	cr_assert_eq(read_status("past_cap"), SBX_E_LIMIT, "%s", err.message);
	cr_assert(strstr(err.message, "max_file_bytes"), "%s", err.message);
}

/* A hard link from the work dir to a file outside it: a write replaces the link in the
 * sandbox and leaves the other file (content and mode) alone. */
CASE(files_write_replaces_hard_links)
{
	sbx_exec_result *r =
	    sh("for d in .. /tmp \"$HOME\"; do f=\"$d/sbx-victim-$$\"; "
	       "(echo original > \"$f\" && chmod 600 \"$f\" && ln \"$f\" link) 2>/dev/null "
	       "&& { echo \"$f\"; exit 0; }; rm -f \"$f\" 2>/dev/null; done; echo none");
	if (strcmp(r->stdout_text, "none\n") == 0)
		skip_case("no folder outside the work dir shares its file system here");
	cr_assert_eq(r->exit_code, 0);
	char victim[600];
	snprintf(victim, sizeof(victim), "%.*s", (int)strcspn(r->stdout_text, "\n"),
		 r->stdout_text);
	release(r);
	cr_assert_eq(sbx_write_file(host, id, "link", "new\n", 4, 0, &err), SBX_OK, "%s",
		     err.message);
	sbx_kv env[] = {{"VICTIM", victim}};
	sbx_exec_opts o = {.shell = "cat \"$VICTIM\"; ls -l \"$VICTIM\" | cut -c1-10; cat link; "
				    "rm -f \"$VICTIM\"",
			   .env = env,
			   .n_env = 1};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_exec(host, id, &o, &r, &err), SBX_OK, "%s", err.message);
	expect_out(keep(r), "original\n-rw-------\nnew\n", 0);
	release(r);
}

static int exec_in(const char *cwd, sbx_exec_result **r)
{
	sbx_exec_opts o = {.shell = "pwd", .cwd = cwd};
	SBX_INIT_HEADER(o);
	*r = NULL;
	int rc = sbx_exec(host, id, &o, r, &err);
	if (*r)
		keep(*r);
	return rc;
}

/* A relative cwd is beneath the work dir (plugin.h): `..` and symlinks cannot lead out. */
CASE(exec_cwd_stays_beneath)
{
	sbx_exec_result *r = sh("mkdir -p sub/dir && ln -s / rootlink && ln -s sub/dir inlink && "
				"pwd");
	cr_assert_eq(r->exit_code, 0);
	char work[600];
	snprintf(work, sizeof(work), "%.*s", (int)strcspn(r->stdout_text, "\n"), r->stdout_text);
	release(r);
	char want[700];
	cr_assert_eq(exec_in("sub/dir", &r), SBX_OK, "%s", err.message);
	snprintf(want, sizeof(want), "%s/sub/dir\n", strcmp(work, "/") == 0 ? "" : work);
	expect_out(r, want, 0);
	release(r);
	cr_assert_eq(exec_in("inlink", &r), SBX_OK, "%s", err.message);
	cr_assert_eq(r->exit_code, 0);
	release(r);
	const char *outside[] = {"../../..", "sub/../..", "rootlink", "rootlink/etc"};
	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(exec_in(outside[i], &r), SBX_E_PATH, "cwd %s ran (%s) in %s",
			     outside[i], err.message, r ? r->stdout_text : "?");
		cr_assert(strstr(err.message, outside[i]), "%s", err.message);
	}
}

/* The harness's environment (API keys, cloud tokens) stays out of the sandbox. */
CASE(host_env_not_inherited)
{
	setenv("SBX_CONF_PLANTED", "planted-secret-4471", 1);
	sbx_exec_result *r = sh("env; echo end");
	unsetenv("SBX_CONF_PLANTED");
	cr_assert_eq(r->exit_code, 0);
	cr_assert(strstr(r->stdout_text, "end\n"), "%s", r->stdout_text);
	cr_assert(!strstr(r->stdout_text, "planted-secret-4471"), "%s", r->stdout_text);
	release(r);
}

/* A command that writes its pid into the root cgroup (as root on cgroup v2 that took it out of
 * the per-exec cgroup, so a timeout missed it) is still killed with its tree. */
CASE(timeout_kills_cgroup_movers)
{
	char cmd[600];
	long me = (long)getpid();
	/* As in timeout_kills_escapees: it sleeps past the timeout and the kill's slack. */
	int nap = escapee_nap();
	snprintf(
	    cmd, sizeof(cmd),
	    "setsid sh -c 'for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; "
	    "do [ -e \"$f\" ] && echo $$ > \"$f\"; done 2>/dev/null; sleep %d; "
	    "echo x > conf-cgm-%ld' & "
	    "sleep 30",
	    nap, me);
	double t0 = now_s();
	sbx_exec_result *r = sh_in(cmd, 1.0, NULL, 0);
	cr_assert_eq(r->timed_out, 1);
	release(r);
	double left = t0 + nap + 0.5 - now_s();
	if (left > 0)
		usleep((useconds_t)(left * 1e6));
	r = sh("ls");
	expect_out(r, "", 0);
	release(r);
}

/* Whether any of the n byte strings in needles occurs in the file at path. */
static int file_holds(const char *path, const char *const *needles, size_t n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	size_t cap = 1 << 20, len = 0, got;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
		len += got;
		if (len == cap) {
			char *nb = realloc(buf, cap * 2);
			cr_assert_not_null(nb);
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	int hit = 0;
	for (size_t i = 0; i < n && !hit; i++)
		hit = memmem(buf, len, needles[i], strlen(needles[i])) != NULL;
	free(buf);
	return hit;
}

/* Every regular file below dir holding one of needles: counted, the first named in first. */
static int files_holding(const char *dir, const char *const *needles, size_t n, int private_ok,
			 char *first, size_t cap, int *searched)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		struct stat sb;
		if (lstat(path, &sb) != 0)
			continue;
		if (S_ISDIR(sb.st_mode)) {
			found += files_holding(path, needles, n, private_ok, first, cap, searched);
			continue;
		}
		if (!S_ISREG(sb.st_mode))
			continue;
		(*searched)++;
		if (private_ok && (sb.st_mode & 077) == 0)
			continue;
		if (file_holds(path, needles, n)) {
			if (!found && !first[0])
				snprintf(first, cap, "%s", path);
			found++;
		}
	}
	closedir(d);
	return found;
}

/* files_holding in a child process. Closing any descriptor of a file drops every POSIX lock
 * this process holds on it, and this process holds the ledger's SQLite locks: reading
 * ledger.db-shm here would let another process of the suite take it for unused and reset
 * it under this one's mapping (SIGBUS in the next ledger write). */
static int state_files_holding(const char *dir, const char *const *needles, size_t n,
			       int private_ok, char *first, size_t cap, int *searched)
{
	struct {
		int found, searched;
		char first[4096];
	} res = {0};
	int fds[2];
	cr_assert_eq(pipe(fds), 0, "%s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		res.found = files_holding(dir, needles, n, private_ok, res.first, sizeof(res.first),
					  &res.searched);
		_exit(write(fds[1], &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1);
	}
	close(fds[1]);
	ssize_t got = read(fds[0], &res, sizeof(res));
	close(fds[0]);
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(got == (ssize_t)sizeof(res) && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the scan of %s ended early (status %#x)", dir, status);
	snprintf(first, cap, "%s", res.first);
	*searched += res.searched;
	return res.found;
}

/* Planted secrets never reach the state dir (ledger, per-call output, plugin state) nor a
 * log line: the harness's own environment, a value given to one exec, the config's secret
 * keys; a value given to create may be kept, but only in files of mode 0600. Logs are at
 * debug level and go to a file for the case. */
CASE(secrets_stay_out_of_state_and_logs)
{
	const char *state = getenv("SBX_STATE_DIR");
	if (!state || !*state)
		skip_case("SBX_STATE_DIR is not set: the state dir to search is unknown");
	char host_secret[64], create_secret[64], exec_secret[64], log[700];
	long me = (long)getpid();
	snprintf(host_secret, sizeof(host_secret), "host-secret-%ld-q7", me);
	snprintf(create_secret, sizeof(create_secret), "create-secret-%ld-k3", me);
	snprintf(exec_secret, sizeof(exec_secret), "exec-secret-%ld-z9", me);
	/* Beside the state dir's parent is not ours to write where the suite runs as another
	 * user (local_namespaces_userns_conformance); the temporary folder is. */
	const char *tmp = getenv("TMPDIR");
	snprintf(log, sizeof(log), "%s/sbx-secrets-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	setenv("SBX_CONF_HOST_SECRET", host_secret, 1);
	setenv("SBX_LOG", "debug", 1);
	fflush(stderr);
	int saved = dup(2), lf = mkostemp(log, O_CLOEXEC);
	cr_assert(saved >= 0 && lf >= 0, "%s: %s", log, strerror(errno));
	dup2(lf, 2);
	close(lf);
	sbx_kv cenv[] = {{"API_TOKEN", create_secret}};
	sbx_create_opts c = {.image = getenv("SBX_CONFORMANCE_IMAGE"), .env = cenv, .n_env = 1};
	SBX_INIT_HEADER(c);
	if (c.image && !*c.image)
		c.image = NULL;
	char other[SBX_ID_MAX];
	int crc = sbx_create(host, &c, other, &err);
	sbx_exec_result *r = NULL;
	int erc = SBX_E_INVAL;
	if (crc == SBX_OK) {
		sbx_kv eenv[] = {{"EXEC_TOKEN", exec_secret}};
		sbx_exec_opts o = {.shell = "test \"$API_TOKEN\" = \"${API_TOKEN%-k3}-k3\" && "
					    "test -n \"$EXEC_TOKEN\" && echo ok",
				   .env = eenv,
				   .n_env = 1};
		SBX_INIT_HEADER(o);
		erc = sbx_exec(host, other, &o, &r, &err);
		sbx_write_file(host, other, "f.txt", "data", 4, 0, NULL);
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	unsetenv("SBX_LOG");
	unsetenv("SBX_CONF_HOST_SECRET");
	cr_assert_eq(crc, SBX_OK, "%s", err.message);
	cr_assert_eq(erc, SBX_OK, "%s", err.message);
	expect_out(keep(r), "ok\n", 0);
	release(r);
	const char *never[8] = {host_secret, exec_secret};
	size_t n = 2;
	for (const char *p = getenv("SBX_CONFORMANCE_SECRETS"); p && *p && n < 7;) {
		p += strspn(p, ", ");
		size_t k = strcspn(p, ", ");
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)k, p);
		if (k && getenv(name) && *getenv(name))
			never[n++] = getenv(name);
		p += k;
	}
	char first[4096] = "";
	int searched = 0;
	int bad = state_files_holding(state, never, n, 0, first, sizeof(first), &searched);
	cr_assert_eq(bad, 0, "%d files of the state dir hold a secret, first %s", bad, first);
	const char *created[] = {create_secret};
	bad = state_files_holding(state, created, 1, 1, first, sizeof(first), &searched);
	cr_assert_eq(bad, 0, "%d files readable by others hold create's env, first %s", bad, first);
	cr_assert_gt(searched, 2, "only %d files under %s", searched, state);
	never[n++] = create_secret;
	cr_assert(!file_holds(log, never, n), "a secret is in the log %s", log);
	cr_assert_eq(sbx_destroy(host, other, &err), SBX_OK, "%s", err.message);
	unlink(log);
}

/* Whether SBX_CONFORMANCE_LEVEL's level is unsupported here: 1 with the backend's reason in
 * `why`, 0 when supported or not asked for, -1 with the error in `why`. */
static int level_unsupported(char *why, size_t size)
{
	const char *level = getenv("SBX_CONFORMANCE_LEVEL");
	const char *colon = level ? strchr(level, ':') : NULL;
	if (!level || !*level)
		return 0;
	if (!colon || colon == level || !colon[1]) {
		snprintf(why, size, "SBX_CONFORMANCE_LEVEL must be BACKEND:LEVEL, not \"%s\"",
			 level);
		return -1;
	}
	char alias[64], key[128];
	snprintf(alias, sizeof(alias), "%.*s", (int)(colon - level), level);
	snprintf(key, sizeof(key), "\"%s\":{\"supported\":", colon + 1);
	/* The backend's info from a data source of that type alone. (A host made from a config
	 * asking for local's isolated level, then freed, made LSan's exit check crash here on the
	 * DTLS range it found: gcc 12's LSan, not a leak.) */
	char cfg[160];
	snprintf(cfg, sizeof(cfg), "data_source:\n  sandbox:\n    type: %s\n", alias);
	sbx_host_options o = {.config_text = cfg};
	SBX_INIT_HEADER(o);
	sbx_host *h = NULL;
	char *json = NULL;
	sbx_error e = {0};
	if (sbx_host_new(&o, &h, &e) != SBX_OK || sbx_backend_info(h, alias, &json, &e) != SBX_OK) {
		snprintf(why, size, "%s", e.message);
		sbx_host_free(h);
		return -1;
	}
	int rc = 0;
	const char *levels = strstr(json, "\"levels\":{");
	const char *at = levels ? strstr(levels, key) : NULL;
	if (!at) {
		snprintf(why, size, "%s's info names no level %s", alias, colon + 1);
		rc = -1;
	} else if (strncmp(at + strlen(key), "true", 4) != 0) {
		const char *w = strstr(at, "\"why\":\"");
		if (w)
			snprintf(why, size, "%.*s", (int)strcspn(w + 7, "\""), w + 7);
		else
			snprintf(why, size, "(no reason given)");
		rc = 1;
	}
	sbx_free(json);
	sbx_host_free(h);
	return rc;
}

/* Before any case, in Criterion's runner: the level check. */
ReportHook(PRE_ALL)(struct criterion_test_set *tests)
{
	(void)tests;
	char why[1024] = "";
	int rc = level_unsupported(why, sizeof(why));
	if (rc > 0) {
		fprintf(stderr, "sbx_conformance: skipped (%s is not supported here: %s)\n",
			getenv("SBX_CONFORMANCE_LEVEL"), why);
		exit(77);
	}
	if (rc < 0) {
		fprintf(stderr, "sbx_conformance: %s\n", why);
		exit(1);
	}
}

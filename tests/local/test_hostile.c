/* Hostile commands on `local`, through the public host API, at each level: plain (the cgroup
 * kill mechanism this machine has), plain with the subreaper, and `isolation: namespaces`
 * (skipped with the plugin's reason where the machine cannot run it). The cases of issue #15
 * that only `local` has: a full disk during a write, sockets, absolute cwds, the subreaper's
 * blind spot, strict_isolation, the environment a command starts from, meta.json's mode. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

#ifndef BUILD_DIR
#error BUILD_DIR must name the build folder of these tests
#endif

#define PLAIN      0
#define SUBREAPER  1
#define NAMESPACES 2

static const char *const level_names[] = {"plain", "subreaper", "namespaces"};
static const char *const level_keys[] = {"", "    kill_mechanism: subreaper\n",
					 "    isolation: namespaces\n"};

static sbx_host *host;
static sbx_error err;
static char state_dir[600];
static char id[SBX_ID_MAX];

static void stop(void)
{
	if (host && id[0])
		sbx_destroy(host, id, NULL);
	id[0] = '\0';
	sbx_host_free(host);
	host = NULL;
}

/* A host whose default data source is `local` at `level`, with `extra` sandbox lines.
 * Returns 0 (after cleaning up) when the machine cannot run the level. */
static int start_host(int level, const char *extra, const char *root)
{
	stop();
	snprintf(state_dir, sizeof(state_dir), "%s/hostile-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(state_dir));
	char cfg[2048], rootline[800] = "";
	if (root)
		snprintf(rootline, sizeof(rootline), "    root: %s\n", root);
	snprintf(cfg, sizeof(cfg), "data_source:\n  sandbox:\n    type: local\n%s%s%s",
		 level_keys[level], rootline, extra ? extra : "");
	sbx_host_options o = {.config_text = cfg, .state_dir = state_dir};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_host_new(&o, &host, &err), SBX_OK, "%s", err.message);
	int rc = sbx_plugin_load(host, "local", &err);
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
	char *json = NULL;
	rc = sbx_backend_info(host, "local", &json, &err);
	if (rc != SBX_OK && level == NAMESPACES) {
		cr_log_warn("%s level not runnable here: %s", level_names[level], err.message);
		stop();
		return 0;
	}
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
	sbx_free(json);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	rc = sbx_create(host, &c, id, &err);
	if (rc != SBX_OK && level == NAMESPACES) {
		cr_log_warn("%s level not runnable here: %s", level_names[level], err.message);
		stop();
		return 0;
	}
	cr_assert_eq(rc, SBX_OK, "%s level: %s", level_names[level], err.message);
	return 1;
}

static sbx_exec_result *run_in(const char *cmd, const char *cwd, int *rc)
{
	sbx_exec_opts o = {.shell = cmd, .cwd = cwd, .timeout = 60};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	*rc = sbx_exec(host, id, &o, &r, &err);
	return r;
}

static sbx_exec_result *sh(const char *cmd)
{
	int rc;
	sbx_exec_result *r = run_in(cmd, NULL, &rc);
	cr_assert_eq(rc, SBX_OK, "%s: %s", cmd, err.message);
	return r;
}

/* ---- a full disk while a file is written */

/* A write that fails on a full disk (ENOSPC) leaves the file it replaces whole: the data
 * goes to a new file beside it, renamed over it only once complete. Before, the file was
 * truncated first and the write then failed half way. The sandboxes live on a 1 MiB tmpfs. */
Test(local_hostile, full_disk_write_keeps_the_old_content, .timeout = 240)
{
	char mnt[700];
	snprintf(mnt, sizeof(mnt), "%s/enospc-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(mnt));
	if (mount("sbx-enospc", mnt, "tmpfs", 0, "size=1m,mode=0700") != 0)
		cr_skip_test("cannot mount a small tmpfs here: %s", strerror(errno));
	size_t big = 600 * 1024;
	char *data = malloc(big);
	cr_assert_not_null(data);
	memset(data, 'n', big);
	for (int level = PLAIN; level <= NAMESPACES; level++) {
		if (!start_host(level, NULL, mnt))
			continue;
		cr_assert_eq(sbx_write_file(host, id, "f.txt", "old content\n", 12, 0640, &err),
			     SBX_OK, "%s", err.message);
		/* Room for one copy of 600 KiB, not for the new one beside it as well. */
		cr_assert_eq(sbx_write_file(host, id, "filler", data, big, 0, &err), SBX_OK,
			     "%s level: %s", level_names[level], err.message);
		int rc = sbx_write_file(host, id, "f.txt", data, big, 0, &err);
		cr_assert_eq(rc, SBX_E_IO, "%s level: %s", level_names[level], sbx_status_name(rc));
		cr_assert(strstr(err.message, "No space left on device; the file is unchanged"),
			  "%s", err.message);
		void *back = NULL;
		size_t len = 0;
		cr_assert_eq(sbx_read_file(host, id, "f.txt", &back, &len, &err), SBX_OK, "%s",
			     err.message);
		cr_assert_eq(len, 12, "%s level: %zu bytes", level_names[level], len);
		cr_assert_str_eq(back, "old content\n");
		sbx_free(back);
		sbx_file_info info = {0};
		SBX_INIT_HEADER(info);
		cr_assert_eq(sbx_stat(host, id, "f.txt", &info, &err), SBX_OK);
		cr_assert_eq(info.mode, 0640);
		/* No half-written file is left beside it. */
		sbx_exec_result *r = sh("ls -A");
		cr_assert_str_eq(r->stdout_text, "f.txt\nfiller\n", "%s level", level_names[level]);
		sbx_exec_result_free(r);
		stop();
	}
	free(data);
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}

/* ---- the swap race without openat2 */

/* A thread swaps a folder of the work dir with a symlink to a folder outside it (renameat2
 * RENAME_EXCHANGE, as fast as it can) while reads go through that folder. No read may return
 * the outside file; without openat2 the walk re-opened the path it had checked and returned it
 * on about 1% of reads (567 of 40,000 here). */
typedef struct swapper {
	char a[1300], b[1300];
	volatile int stop;
	long swaps;
} swapper;

static void *swap_loop(void *arg)
{
	swapper *sw = arg;
	while (!sw->stop)
		if (renameat2(AT_FDCWD, sw->a, AT_FDCWD, sw->b, RENAME_EXCHANGE) == 0)
			sw->swaps++;
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check_swap_race(void)
{
	start_host(PLAIN, NULL, NULL);
	char work[1200], outside[800], path[1300];
	snprintf(work, sizeof(work), "%s/plugins/local/%s/work", state_dir, strchr(id, ':') + 1);
	snprintf(outside, sizeof(outside), "%s/outside", state_dir);
	cr_assert_eq(mkdir(outside, 0700), 0);
	snprintf(path, sizeof(path), "%s/f", outside);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("OUTSIDE", f);
	fclose(f);
	cr_assert_eq(sbx_write_file(host, id, "d/f", "inside", 6, 0, &err), SBX_OK, "%s",
		     err.message);
	swapper sw = {.stop = 0};
	snprintf(sw.a, sizeof(sw.a), "%s/d", work);
	snprintf(sw.b, sizeof(sw.b), "%s/s", work);
	cr_assert_eq(symlink(outside, sw.b), 0);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, swap_loop, &sw), 0);
	long reads = 0, inside = 0, leaked = 0;
	double until = now_s() + 20;
	while (reads < 40000 && now_s() < until) {
		void *data = NULL;
		size_t len = 0;
		reads++;
		if (sbx_read_file(host, id, "d/f", &data, &len, &err) != SBX_OK)
			continue;
		if (len == 6 && memcmp(data, "inside", 6) == 0)
			inside++;
		else
			leaked++;
		sbx_free(data);
	}
	sw.stop = 1;
	pthread_join(t, NULL);
	cr_assert_eq(leaked, 0, "%ld of %ld reads returned the outside file (%ld swaps)", leaked,
		     reads, sw.swaps);
	cr_assert_gt(inside, 0, "no read got through in %ld reads", reads);
	cr_assert_gt(sw.swaps, 100, "only %ld swaps", sw.swaps);
	stop();
}

Test(local_hostile, swap_race_without_openat2, .timeout = 120)
{
	setenv("SBX_LOCAL_NO_OPENAT2", "1", 1);
	check_swap_race();
	unsetenv("SBX_LOCAL_NO_OPENAT2");
}

Test(local_hostile, swap_race_with_openat2, .timeout = 120)
{
	check_swap_race();
}

/* ---- sockets are neither read nor written */

Test(local_hostile, socket_is_refused)
{
	for (int level = PLAIN; level <= NAMESPACES; level++) {
		if (!start_host(level, NULL, NULL))
			continue;
		/* A unix socket that stays bound after its maker exits. */
		sbx_exec_result *r =
		    sh("python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); "
		       "s.bind(\"sock\")' && echo ok");
		cr_assert_str_eq(r->stdout_text, "ok\n", "%s", r->stderr_text);
		sbx_exec_result_free(r);
		void *data = NULL;
		size_t len = 0;
		cr_assert_eq(sbx_read_file(host, id, "sock", &data, &len, &err), SBX_E_INVAL);
		cr_assert_str_eq(err.message, "local: read: 'sock' is a socket; only regular files "
					      "can be read or written");
		cr_assert_eq(sbx_write_file(host, id, "sock", "x", 1, 0, &err), SBX_E_INVAL);
		cr_assert_str_eq(err.message,
				 "local: write: 'sock' is a socket; only regular files "
				 "can be read or written");
		stop();
	}
}

/* ---- an absolute cwd */

/* On the plain levels `/` is this machine's root: an absolute cwd must lie in the work dir.
 * In namespaces it is the sandbox's own root, where the command may go. */
Test(local_hostile, absolute_cwd_outside_the_work_dir)
{
	for (int level = PLAIN; level <= NAMESPACES; level++) {
		if (!start_host(level, NULL, NULL))
			continue;
		sbx_exec_result *r = sh("mkdir -p sub && pwd");
		char work[700], inside[800];
		snprintf(work, sizeof(work), "%.*s", (int)strcspn(r->stdout_text, "\n"),
			 r->stdout_text);
		sbx_exec_result_free(r);
		snprintf(inside, sizeof(inside), "%s/sub", work);
		int rc;
		r = run_in("pwd", inside, &rc);
		cr_assert_eq(rc, SBX_OK, "%s", err.message);
		char want[900];
		snprintf(want, sizeof(want), "%s\n", inside);
		cr_assert_str_eq(r->stdout_text, want);
		sbx_exec_result_free(r);
		r = run_in("pwd", "/", &rc);
		if (level == NAMESPACES) {
			cr_assert_eq(rc, SBX_OK, "%s", err.message);
			cr_assert_str_eq(r->stdout_text, "/\n");
			sbx_exec_result_free(r);
		} else {
			cr_assert_eq(rc, SBX_E_PATH, "%s level ran in / (%s)", level_names[level],
				     r ? r->stdout_text : err.message);
			snprintf(want, sizeof(want),
				 "local: exec: path '/' is outside the sandbox work dir %s", work);
			cr_assert_str_eq(err.message, want);
		}
		stop();
	}
}

/* ---- the subreaper's blind spot */

/* A command that kills its subreaper helper: the exec no longer reports exit code 137 for a
 * command that exited 0, but says what happened; the level reports itself as not containing
 * hostile commands, and strict_isolation refuses it. */
Test(local_hostile, subreaper_killed_by_its_command_is_reported, .timeout = 120)
{
	start_host(SUBREAPER, NULL, NULL);
	int rc;
	sbx_exec_result *r =
	    run_in("env -u SBX_LOCAL_SANDBOX -u SBX_LOCAL_EXEC sleep 5 & kill -9 $PPID; exit 0",
		   NULL, &rc);
	cr_assert_eq(rc, SBX_E_BACKEND, "exit %d", r ? r->exit_code : -2);
	cr_assert(strstr(err.message, "local: exec: the command's subreaper helper was killed "
				      "before the command ended"),
		  "%s", err.message);
	char *json = NULL;
	cr_assert_eq(sbx_backend_info(host, "local", &json, &err), SBX_OK);
	cr_assert(strstr(json, "\"contained\":false,\"contained_why\":\"with kill_mechanism "
			       "subreaper a command can kill its subreaper helper"),
		  "%s", json);
	sbx_free(json);
	stop();
}

/* strict_isolation: true runs only where no command can leave the sandbox's reach. */
Test(local_hostile, strict_isolation_refuses_the_plain_levels)
{
	for (int level = PLAIN; level <= NAMESPACES; level++) {
		stop();
		snprintf(state_dir, sizeof(state_dir), "%s/hostile-XXXXXX", BUILD_DIR);
		cr_assert_not_null(mkdtemp(state_dir));
		char cfg[600];
		snprintf(
		    cfg, sizeof(cfg),
		    "data_source:\n  sandbox:\n    type: local\n    strict_isolation: true\n%s",
		    level_keys[level]);
		sbx_host_options o = {.config_text = cfg, .state_dir = state_dir};
		SBX_INIT_HEADER(o);
		cr_assert_eq(sbx_host_new(&o, &host, &err), SBX_OK, "%s", err.message);
		sbx_create_opts c = {0};
		SBX_INIT_HEADER(c);
		int rc = sbx_create(host, &c, id, &err);
		if (level == NAMESPACES) {
			if (rc != SBX_OK && !strstr(err.message, "strict_isolation"))
				continue; /* the level itself cannot run here */
			cr_assert_eq(rc, SBX_OK, "%s", err.message);
			continue;
		}
		id[0] = '\0';
		cr_assert_eq(rc, SBX_E_CONFIG, "%s level", level_names[level]);
		cr_assert(strstr(err.message, "local: strict_isolation: commands could leave the "
					      "sandbox's reach: "),
			  "%s", err.message);
		cr_assert(strstr(err.message, "; use isolation: namespaces"), "%s", err.message);
	}
	stop();
}

/* ---- the environment a command starts from */

#define BASE_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* The shell the plugin runs shell commands with on the base PATH: its first bash, else
 * /bin/sh. */
static void base_shell(char *out, size_t cap)
{
	char dirs[] = BASE_PATH;
	for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(out, cap, "%s/bash", d);
		if (access(out, X_OK) == 0)
			return;
	}
	snprintf(out, cap, "/bin/sh");
}

/* The harness's variables stay out (its API keys and tokens); a command gets the documented
 * base, what env_passthrough names, and what create and exec pass. */
Test(local_hostile, environment_is_the_base_plus_what_is_asked)
{
	setenv("SBX_HOSTILE_PLANTED", "planted-7731", 1);
	setenv("SBX_HOSTILE_PASSED", "passed-1234", 1);
	for (int level = PLAIN; level <= NAMESPACES; level++) {
		if (!start_host(level, "    env_passthrough: [SBX_HOSTILE_PASSED, NOT_SET_HERE]\n",
				NULL))
			continue;
		sbx_exec_result *r = sh("env | grep -v -e '^SBX_LOCAL_' -e '^SHLVL=' -e '^_=' | "
					"sort; pwd");
		char work[700], want[3200], shell[300];
		base_shell(shell, sizeof(shell));
		const char *last = strrchr(r->stdout_text, '\n');
		cr_assert(last && last > r->stdout_text);
		const char *pwd = last - 1;
		while (pwd > r->stdout_text && pwd[-1] != '\n')
			pwd--;
		snprintf(work, sizeof(work), "%.*s", (int)(last - pwd), pwd);
		snprintf(want, sizeof(want),
			 "HOME=%s\nLANG=C.UTF-8\nPATH=" BASE_PATH "\n"
			 "PWD=%s\nSBX_HOSTILE_PASSED=passed-1234\nSHELL=%s\nTERM=dumb\n%s\n",
			 work, work, shell, work);
		cr_assert_str_eq(r->stdout_text, want, "%s level", level_names[level]);
		sbx_exec_result_free(r);
		stop();
	}
	unsetenv("SBX_HOSTILE_PLANTED");
	unsetenv("SBX_HOSTILE_PASSED");
}

/* SHELL names the shell that runs the command, at every level; the call's env replaces it
 * (and the shell is still found on PATH). */
Test(local_hostile, shell_variable_names_the_running_shell)
{
	char shell[300], want[700];
	base_shell(shell, sizeof(shell));
	for (int level = PLAIN; level <= NAMESPACES; level++) {
		if (!start_host(level, NULL, NULL))
			continue;
		sbx_exec_result *r = sh("echo \"$SHELL\"; readlink -f /proc/$$/exe; true");
		char real[300];
		cr_assert(realpath(shell, real), "%s", shell);
		snprintf(want, sizeof(want), "%s\n%s\n", shell, real);
		cr_assert_str_eq(r->stdout_text, want, "%s level", level_names[level]);
		sbx_exec_result_free(r);
		sbx_kv env[] = {{"SHELL", "/bin/own-shell"}};
		sbx_exec_opts o = {
		    .shell = "echo \"$SHELL\"", .env = env, .n_env = 1, .timeout = 30};
		SBX_INIT_HEADER(o);
		cr_assert_eq(sbx_exec(host, id, &o, &r, &err), SBX_OK, "%s", err.message);
		cr_assert_str_eq(r->stdout_text, "/bin/own-shell\n", "%s level",
				 level_names[level]);
		sbx_exec_result_free(r);
		stop();
	}
}

/* The harness's open-files limit is its commands', though libsbx raised its own soft limit to
 * the hard one (a few hundred commands in flight need more than a shell's usual 1024), at
 * every level: the command's child, the subreaper's helper, the namespaced init. Each test
 * runs in a process of its own, which makes its first host here. */
Test(local_hostile, commands_keep_the_callers_open_files_limit)
{
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 400)
		cr_skip_test("the hard open-files limit here is %llu",
			     (unsigned long long)rl.rlim_max);
	rlim_t hard = rl.rlim_max, raised = hard > ((rlim_t)1 << 20) ? (rlim_t)1 << 20 : hard;
	rl.rlim_cur = 200;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "%s", strerror(errno));
	for (int level = PLAIN; level <= NAMESPACES; level++) {
		if (!start_host(level, NULL, NULL))
			continue;
		cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
		cr_assert_eq(rl.rlim_cur, raised, "%s level: the host's soft limit is %llu",
			     level_names[level], (unsigned long long)rl.rlim_cur);
		sbx_exec_result *r = sh("ulimit -Sn");
		cr_assert_str_eq(r->stdout_text, "200\n", "%s level", level_names[level]);
		sbx_exec_result_free(r);
		stop();
	}
}

/* A harness that names its state dir and root relatively, then changes directory (a tool
 * call's `cd`, a test's chdir): its sandboxes stay where they were made. Before, the next
 * exec looked for the sandbox under the new directory and failed with SBX_E_NOT_FOUND,
 * making a second state dir there. */
Test(local_hostile, relative_state_dir_and_root_survive_a_chdir)
{
	char base[700], was[PATH_MAX], want[1200];
	snprintf(base, sizeof(base), "%s/relative-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(base));
	cr_assert_not_null(getcwd(was, sizeof(was)));
	cr_assert_eq(chdir(base), 0);
	sbx_host_options o = {
	    .config_text = "data_source:\n  sandbox:\n    type: local\n    root: sandboxes\n",
	    .state_dir = "state"};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_host_new(&o, &host, &err), SBX_OK, "%s", err.message);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(chdir("/"), 0);
	sbx_exec_result *r = sh("pwd");
	snprintf(want, sizeof(want), "%s/sandboxes/%s/work\n", base, strchr(id, ':') + 1);
	cr_assert_str_eq(r->stdout_text, want);
	sbx_exec_result_free(r);
	cr_assert_eq(sbx_destroy(host, id, &err), SBX_OK, "%s", err.message);
	id[0] = '\0';
	cr_assert(access("/state", F_OK) != 0 && access("/sandboxes", F_OK) != 0,
		  "a state dir or root appeared in the new working directory");
	stop();
	cr_assert_eq(chdir(was), 0);
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

/* The string `key` of the plugin's info into out (the root's cgroup folder is "cgroup", empty
 * under the subreaper; its folder is "root"); 0 when it is empty. */
static int info_string(const char *key, char *out, size_t cap)
{
	char *json = NULL, pat[64];
	cr_assert_eq(sbx_backend_info(host, "local", &json, &err), SBX_OK, "%s", err.message);
	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	const char *k = strstr(json, pat);
	cr_assert_not_null(k, "%s", json);
	k += strlen(pat);
	size_t n = strcspn(k, "\"");
	cr_assert_lt(n, cap);
	memcpy(out, k, n);
	out[n] = '\0';
	sbx_free(json);
	return n > 0;
}

static int root_cgroup(char *out, size_t cap)
{
	return info_string("cgroup", out, cap);
}

static sbx_host *host_on(const char *dir, const char *mechanism)
{
	char cfg[300];
	snprintf(cfg, sizeof(cfg),
		 "data_source:\n  sandbox:\n    type: local\n    kill_mechanism: %s\n", mechanism);
	sbx_host_options o = {.config_text = cfg, .state_dir = dir};
	SBX_INIT_HEADER(o);
	sbx_host *h = NULL;
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	return h;
}

/* A host on dir runs a command in a new sandbox, and the root's folder cg and record rec are
 * there again; the host is then stopped. */
static void use_root_again(const char *dir, const char *mechanism, const char *cg, const char *rec)
{
	host = host_on(dir, mechanism);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, id, &err), SBX_OK, "%s", err.message);
	sbx_exec_result *r = sh("echo again");
	cr_assert_str_eq(r->stdout_text, "again\n");
	sbx_exec_result_free(r);
	cr_assert_eq(access(cg, F_OK), 0, "%s", cg);
	cr_assert_eq(access(rec, F_OK), 0, "%s", rec);
	stop();
}

/* A root's cgroup folder, and its record in /run/sbx-local, go when the last host using the
 * root unloads with no sandbox left; before, each state dir ever used left both behind for
 * good. A host still holding a sandbox there keeps them, and the next create brings them
 * back. Each cgroup mechanism the machine offers. */
Test(local_hostile, unload_leaves_no_cgroup_behind)
{
	static const char *const mechanisms[] = {"cgroup-v2", "cgroup-v1-freezer"};
	int tried = 0;
	for (size_t m = 0; m < sizeof(mechanisms) / sizeof(mechanisms[0]); m++) {
		stop();
		snprintf(state_dir, sizeof(state_dir), "%s/hostile-XXXXXX", BUILD_DIR);
		cr_assert_not_null(mkdtemp(state_dir));
		host = host_on(state_dir, mechanisms[m]);
		sbx_create_opts c = {0};
		SBX_INIT_HEADER(c);
		int rc = sbx_create(host, &c, id, &err);
		if (rc == SBX_E_CONFIG) { /* this mechanism is not on this machine */
			cr_log_warn("%s: %s", mechanisms[m], err.message);
			continue;
		}
		cr_assert_eq(rc, SBX_OK, "%s: %s", mechanisms[m], err.message);
		tried++;
		char cg[700], rec[300];
		cr_assert(root_cgroup(cg, sizeof(cg)), "%s", mechanisms[m]);
		snprintf(rec, sizeof(rec), "/run/sbx-local/%s", strrchr(cg, '/') + 1);
		sbx_exec_result *r = sh("echo hi");
		sbx_exec_result_free(r);
		sbx_host *other = host_on(state_dir, mechanisms[m]);
		char other_id[SBX_ID_MAX];
		cr_assert_eq(sbx_create(other, &c, other_id, &err), SBX_OK, "%s", err.message);
		stop();
		cr_assert_eq(access(cg, F_OK), 0, "%s went while a sandbox was in it", cg);
		cr_assert_eq(access(rec, F_OK), 0, "%s", rec);
		cr_assert_eq(sbx_destroy(other, other_id, &err), SBX_OK, "%s", err.message);
		sbx_host_free(other);
		cr_assert(access(cg, F_OK) != 0 && errno == ENOENT, "%s is still there", cg);
		cr_assert(access(rec, F_OK) != 0 && errno == ENOENT, "%s is still there", rec);
		use_root_again(state_dir, mechanisms[m], cg, rec);
		cr_assert(access(cg, F_OK) != 0 && errno == ENOENT, "%s is still there", cg);
	}
	if (!tried)
		cr_skip_test("no cgroup mechanism on this machine");
}

/* What hosts left behind before they removed their root's folder at unload: an empty
 * namespace folder and its record. gc from any root removes them (and leaves a folder that
 * still holds a sandbox); the root's next host makes them again. */
Test(local_hostile, gc_removes_empty_namespaces_of_live_roots)
{
	start_host(PLAIN, NULL, NULL);
	char cg[700], rec[300], root[700], real[PATH_MAX];
	if (!root_cgroup(cg, sizeof(cg))) {
		stop();
		cr_skip_test("no cgroup here (subreaper)");
	}
	info_string("root", root, sizeof(root));
	cr_assert_not_null(realpath(root, real), "%s", root);
	snprintf(rec, sizeof(rec), "/run/sbx-local/%s", strrchr(cg, '/') + 1);
	char old_dir[600];
	snprintf(old_dir, sizeof(old_dir), "%s", state_dir);
	stop();
	cr_assert(access(cg, F_OK) != 0, "%s", cg);
	/* An older host's leftovers. */
	cr_assert_eq(mkdir(cg, 0755), 0, "%s: %s", cg, strerror(errno));
	cr_assert_eq(symlink(real, rec), 0, "%s: %s", rec, strerror(errno));
	/* A root whose sandbox is live. */
	start_host(PLAIN, NULL, NULL);
	char live_cg[700];
	root_cgroup(live_cg, sizeof(live_cg));
	sbx_host *busy = host, *gc_host;
	char busy_id[SBX_ID_MAX];
	memcpy(busy_id, id, sizeof(busy_id));
	host = NULL, id[0] = '\0';
	/* gc from a third root. */
	start_host(PLAIN, NULL, NULL);
	gc_host = host;
	cr_assert_eq(sbx_gc(gc_host, 0, NULL, NULL, &err), SBX_OK, "%s", err.message);
	cr_assert(access(cg, F_OK) != 0 && errno == ENOENT, "%s is still there", cg);
	cr_assert(access(rec, F_OK) != 0 && errno == ENOENT, "%s is still there", rec);
	cr_assert_eq(access(live_cg, F_OK), 0, "%s went with a sandbox in it", live_cg);
	host = busy;
	memcpy(id, busy_id, sizeof(id));
	sbx_exec_result *r = sh("echo still");
	cr_assert_str_eq(r->stdout_text, "still\n");
	sbx_exec_result_free(r);
	stop();
	host = gc_host;
	stop();
	use_root_again(old_dir, "auto", cg, rec);
}

/* What create's env holds may be secret: meta.json, which keeps it, is the owner's only. */
Test(local_hostile, create_env_is_kept_owner_only)
{
	start_host(PLAIN, NULL, NULL);
	sbx_destroy(host, id, NULL);
	sbx_kv env[] = {{"API_TOKEN", "tok-5521"}};
	sbx_create_opts c = {.env = env, .n_env = 1};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, id, &err), SBX_OK, "%s", err.message);
	char meta[1200];
	snprintf(meta, sizeof(meta), "%s/plugins/local/%s/meta.json", state_dir,
		 strchr(id, ':') + 1);
	struct stat sb;
	cr_assert_eq(stat(meta, &sb), 0, "%s", meta);
	cr_assert_eq(sb.st_mode & 07777, 0600, "meta.json has mode %o", sb.st_mode & 07777);
	sbx_exec_result *r = sh("echo $API_TOKEN");
	cr_assert_str_eq(r->stdout_text, "tok-5521\n");
	sbx_exec_result_free(r);
	stop();
}

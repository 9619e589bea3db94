/* The isolated level of `local` (`isolation: namespaces`), driven through the public host API:
 * what a command in the sandbox can and cannot see or reach, the limits, and that destroy
 * leaves nothing behind. Needs root (namespaces, mounts, cgroups); where the machine cannot
 * run the level, every case skips with the plugin's own reason and the program, once every
 * case has passed or skipped, prints that reason and exits 77 (CTest: skipped). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

#include "ballast.h"

#ifndef BUILD_DIR
#error BUILD_DIR must name the build folder of these tests
#endif

static sbx_host *host;
static sbx_error err;
static char state_dir[600];
static char ids[2][SBX_ID_MAX];
static sbx_exec_result *live[32];

/* The default data source on the isolated level, with `extra` lines (each starting with
 * four spaces) appended to its sandbox block. */
static void start(const char *extra)
{
	if (!state_dir[0]) {
		snprintf(state_dir, sizeof(state_dir), "%s/iso-XXXXXX", BUILD_DIR);
		cr_assert_not_null(mkdtemp(state_dir));
	}
	char cfg[2048];
	int n = snprintf(cfg, sizeof(cfg),
			 "data_source:\n  sandbox:\n    type: local\n    isolation: namespaces\n%s",
			 extra ? extra : "");
	cr_assert(n > 0 && (size_t)n < sizeof(cfg));
	sbx_host_options o = {.config_text = cfg, .state_dir = state_dir};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_host_new(&o, &host, &err), SBX_OK, "%s", err.message);
}

/* The plugin's reason why this machine cannot run the level into `why` ("" when it can),
 * asked of a host on state dir `dir`; -1 with the error in `why` when it cannot be asked. */
static int level_why(const char *dir, char *why, size_t size)
{
	sbx_host_options o = {.config_text = "data_source:\n  sandbox:\n    type: local\n",
			      .state_dir = dir};
	SBX_INIT_HEADER(o);
	sbx_host *plain = NULL;
	char *json = NULL;
	sbx_error e = {0};
	why[0] = '\0';
	if (sbx_host_new(&o, &plain, &e) != SBX_OK ||
	    sbx_backend_info(plain, "local", &json, &e) != SBX_OK) {
		snprintf(why, size, "%.*s", (int)(size - 1), e.message);
		sbx_host_free(plain);
		return -1;
	}
	int rc = 0;
	const char *ns = strstr(json, "\"namespaces\":{\"supported\":");
	if (!ns) {
		snprintf(why, size, "local's info names no namespaces level: %.300s", json);
		rc = -1;
	} else if (strncmp(ns + strlen("\"namespaces\":{\"supported\":"), "true", 4) != 0) {
		const char *w = strstr(ns, "\"why\":\"");
		if (w)
			snprintf(why, size, "%.*s", (int)strcspn(w + 7, "\""), w + 7);
		else
			snprintf(why, size, "(no reason given)");
	}
	sbx_free(json);
	sbx_host_free(plain);
	return rc;
}

/* Skips (after cleaning up) when the machine cannot run the level, with the plugin's reason. */
static void skip_unless_supported(void)
{
	char why[sizeof(((sbx_error *)0)->message) + 64];
	cr_assert_eq(level_why(state_dir, why, sizeof(why)), 0, "%s", why);
	if (why[0])
		cr_skip_test("the isolated level is not supported here: %s", why);
}

static void rmtree(const char *path)
{
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			char sub[1400];
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			struct stat sb;
			if (lstat(sub, &sb) == 0 && S_ISDIR(sb.st_mode))
				rmtree(sub);
			else
				unlink(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

static void stop(void)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
		sbx_exec_result_free(live[i]);
		live[i] = NULL;
	}
	for (size_t i = 0; i < 2; i++) {
		if (ids[i][0] && host)
			sbx_destroy(host, ids[i], NULL);
		ids[i][0] = '\0';
	}
	sbx_host_free(host);
	host = NULL;
	if (state_dir[0])
		rmtree(state_dir);
	state_dir[0] = '\0';
}

static void fresh(size_t k)
{
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, ids[k], &err), SBX_OK, "%s", err.message);
}

static sbx_exec_result *run_in(size_t k, const char *cmd, double timeout)
{
	sbx_exec_opts o = {.shell = cmd, .timeout = timeout};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(host, ids[k], &o, &r, &err), SBX_OK, "%s: %s", cmd, err.message);
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (!live[i]) {
			live[i] = r;
			break;
		}
	return r;
}

static sbx_exec_result *run(const char *cmd)
{
	return run_in(0, cmd, 0);
}

/* Sets up a host with `extra` keys and one sandbox. */
static void one(const char *extra)
{
	start(extra);
	skip_unless_supported();
	fresh(0);
}

/* The backend id (after "local:") of sandbox k. */
static const char *bid(size_t k)
{
	return strchr(ids[k], ':') + 1;
}

/* How many processes of this machine have `token` in their command line. */
static int count_procs(const char *token)
{
	int n = 0;
	DIR *d = opendir("/proc");
	cr_assert_not_null(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[r > 0 ? r : 0] = '\0';
		if (strstr(buf, token))
			n++;
	}
	closedir(d);
	return n;
}

TestSuite(isolation, .fini = stop, .timeout = 120);

#define NOBODY 65534

/* The rest of the case runs as uid and gid 65534 with a state dir of its own (the case's
 * process only: criterion forks one per case). Skips where the suite is not root. */
static void become_nobody(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to switch to an unprivileged user");
	snprintf(state_dir, sizeof(state_dir), "%s/iso-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(state_dir));
	cr_assert_eq(chown(state_dir, NOBODY, NOBODY), 0);
	cr_assert_eq(setgroups(0, NULL), 0);
	cr_assert_eq(setresgid(NOBODY, NOBODY, NOBODY), 0);
	cr_assert_eq(setresuid(NOBODY, NOBODY, NOBODY), 0);
	/* A changed uid makes the process undumpable, which LeakSanitizer's tracer needs. */
	prctl(PR_SET_DUMPABLE, 1);
}

Test(isolation, levels_reported)
{
	start(NULL);
	skip_unless_supported();
	char *json = NULL;
	cr_assert_eq(sbx_backend_info(host, "local", &json, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(strstr(json, "\"isolation\":\"namespaces\""), "%s", json);
	cr_assert_not_null(strstr(json, "\"plain\":{\"supported\":true}"), "%s", json);
	cr_assert_not_null(strstr(json, "\"network\":\"none\""), "%s", json);
	sbx_free(json);
}

Test(isolation, sees_only_its_own_processes)
{
	one(NULL);
	/* The shell's builtins only: its init is PID 1, the shell the first process after it. */
	sbx_exec_result *r = run("exec sh -c 'echo /proc/[0-9]*; cat /proc/1/status | head -1'");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert(strncmp(r->stdout_text, "/proc/1 /proc/2\n", 16) == 0, "%s", r->stdout_text);
	char mine[64];
	snprintf(mine, sizeof(mine), "test -e /proc/%ld", (long)getpid());
	r = run(mine);
	cr_assert_eq(r->exit_code, 1, "the test's own pid %ld is visible", (long)getpid());
}

Test(isolation, host_root_unreadable)
{
	one(NULL);
	char planted[] = "/root/sbx-iso-secret-XXXXXX";
	int fd = mkstemp(planted);
	cr_assert(fd >= 0, "cannot plant a file in /root");
	cr_assert_eq(write(fd, "secret\n", 7), 7);
	close(fd);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "cat %s", planted);
	sbx_exec_result *r = run(cmd);
	unlink(planted);
	cr_assert_eq(r->exit_code, 1);
	cr_assert_str_eq(r->stdout_text, "");
	cr_assert_not_null(strstr(r->stderr_text, "No such file or directory"), "%s",
			   r->stderr_text);
	/* The sandbox's /root is its own, and writable. */
	r = run("echo mine > /root/note && cat /root/note && ls -A /root");
	cr_assert_str_eq(r->stdout_text, "mine\nnote\n", "%s", r->stderr_text);
}

/* A listener on the host's loopback; returns its fd and port. */
static int listener(int *port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(s >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(s, 8), 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return s;
}

Test(isolation, host_loopback_unreachable)
{
	one(NULL);
	int port;
	int s = listener(&port);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'",
		 port);
	sbx_exec_result *r = run(cmd);
	cr_assert_eq(r->exit_code, 1, "%s", r->stdout_text);
	cr_assert_str_eq(r->stdout_text, "");
	cr_assert_not_null(strstr(r->stderr_text, "Connection refused"), "%s", r->stderr_text);
	/* Its own loopback is up: a listener and a client inside the sandbox meet. */
	r = run("python3 -c 'import socket\ns = socket.socket(); s.bind((\"127.0.0.1\", 0)); "
		"s.listen()\nc = socket.create_connection(s.getsockname()); print(\"met\")'");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text, "met\n");
	close(s);
}

Test(isolation, network_host_reaches_loopback)
{
	one("    network: host\n");
	int port;
	int s = listener(&port);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'",
		 port);
	sbx_exec_result *r = run(cmd);
	close(s);
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text, "connected\n");
}

Test(isolation, host_tree_read_only_work_dir_shared)
{
	one(NULL);
	sbx_exec_result *r = run("touch /usr/sbx-iso-probe");
	cr_assert_eq(r->exit_code, 1);
	cr_assert_not_null(strstr(r->stderr_text, "Read-only file system"), "%s", r->stderr_text);
	cr_assert_neq(access("/usr/sbx-iso-probe", F_OK), 0);
	r = run("echo x >> /etc/hostname");
	cr_assert_neq(r->exit_code, 0);
	cr_assert_not_null(strstr(r->stderr_text, "Read-only file system"), "%s", r->stderr_text);
	/* The work dir is the tree shared with the host: what the command writes there the host
	 * reads through the file API. */
	r = run("echo shared > out.txt && echo tmp > /tmp/t && cat /tmp/t");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text, "tmp\n");
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_read_file(host, ids[0], "out.txt", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(len, 7);
	cr_assert(memcmp(data, "shared\n", 7) == 0);
	sbx_free(data);
}

Test(isolation, two_sandboxes_apart)
{
	one(NULL);
	fresh(1);
	sbx_exec_result *a =
	    run_in(0, "echo a > /tmp/mark && echo a > /root/mark && (sleep 300 &) && pwd", 0);
	cr_assert_eq(a->exit_code, 0, "%s", a->stderr_text);
	char cmd[1400];
	snprintf(cmd, sizeof(cmd),
		 "cat /tmp/mark /root/mark 2>/dev/null; test -e %.*s && echo sees-work; "
		 "for p in /proc/[0-9]*; do cat $p/comm; done | grep -c sleep",
		 (int)strcspn(a->stdout_text, "\n"), a->stdout_text);
	sbx_exec_result *b = run_in(1, cmd, 0);
	cr_assert_str_eq(b->stdout_text, "0\n", "B sees A: %s", b->stdout_text);
	/* A still sees its own. */
	a = run_in(0, "cat /tmp/mark; for p in /proc/[0-9]*; do cat $p/comm; done | grep -c sleep",
		   0);
	cr_assert_str_eq(a->stdout_text, "a\n1\n");
}

Test(isolation, destroy_leaves_nothing)
{
	one("    memory: 256M\n    pids: 64\n");
	char token[64];
	snprintf(token, sizeof(token), "sleep 3%05ld.%ld", (long)(getpid() % 100000),
		 (long)time(NULL) % 1000);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "(%s &); (setsid %s &); echo ok", token, token);
	sbx_exec_result *r = run(cmd);
	cr_assert_str_eq(r->stdout_text, "ok\n", "%s", r->stderr_text);
	cr_assert_eq(count_procs(token), 2);
	char *json = NULL;
	cr_assert_eq(sbx_backend_info(host, "local", &json, &err), SBX_OK, "%s", err.message);
	const char *c = strstr(json, "\"cgroup\":\"");
	cr_assert_not_null(c);
	char cg[700];
	snprintf(cg, sizeof(cg), "%.*s/%s", (int)strcspn(c + 10, "\""), c + 10, bid(0));
	sbx_free(json);
	char mem[700];
	const char *suffix = strstr(cg, "/sbx");
	snprintf(mem, sizeof(mem), "/sys/fs/cgroup/memory%s", suffix ? suffix : "/none");
	int had_v1 = access(mem, F_OK) == 0;
	cr_assert_eq(access(cg, F_OK), 0, "%s", cg);
	cr_assert_eq(sbx_destroy(host, ids[0], &err), SBX_OK, "%s", err.message);
	ids[0][0] = '\0';
	cr_assert_eq(count_procs(token), 0);
	cr_assert_neq(access(cg, F_OK), 0, "%s survived", cg);
	if (had_v1)
		cr_assert_neq(access(mem, F_OK), 0, "%s survived", mem);
	char line[4096];
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	cr_assert_not_null(mi);
	while (fgets(line, sizeof(line), mi))
		cr_assert_null(strstr(line, state_dir), "a mount survived: %s", line);
	fclose(mi);
}

Test(isolation, oom_reported)
{
	one("    memory: 48M\n");
	sbx_exec_result *r = run("python3 -c 'a = bytearray(400 << 20); print(len(a))'");
	cr_assert_eq(r->exit_code, -1, "exit %d: %s", r->exit_code, r->stderr_text);
	cr_assert_eq(r->signal, 9);
	cr_assert_eq(r->oom_killed, 1);
	r = run("python3 -c 'a = bytearray(4 << 20); print(len(a))'");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text, "4194304\n");
	cr_assert_eq(r->oom_killed, 0);
}

Test(isolation, fork_bomb_stops_at_pids)
{
	one("    pids: 16\n");
	/* dash gives up at the first fork the kernel refuses (bash would retry for seconds). */
	sbx_exec_result *r = run(
	    "exec dash -c 'n=0; while [ $n -lt 200 ]; do sleep 60 & n=$((n+1)); echo $n; done'");
	cr_assert_eq(r->exit_code, 2, "exit %d: %s", r->exit_code, r->stderr_text);
	cr_assert_not_null(strstr(r->stderr_text, "Cannot fork"), "%s", r->stderr_text);
	const char *last = r->stdout_text;
	for (const char *p = r->stdout_text; *p; p++)
		if (p[0] == '\n' && p[1])
			last = p + 1;
	long started = strtol(last, NULL, 10);
	/* init and the shell take two of the sixteen. */
	cr_assert(started >= 1 && started <= 14, "started %ld sleeps", started);
}

Test(isolation, cpus_quota_slows_a_busy_loop)
{
	one("    cpus: 0.2\n");
	/* 0.3 s of CPU at a fifth of a CPU takes at least 1.5 s of wall time; unlimited, 0.3 s. */
	sbx_exec_result *r =
	    run("python3 -c 'import time\nw=time.time(); c=time.process_time()\n"
		"while time.process_time() - c < 0.3: pass\nprint(time.time() - w)'");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	double wall = strtod(r->stdout_text, NULL);
	cr_assert(wall >= 1.0, "0.3 s of CPU took %.2f s under cpus 0.2", wall);
}

Test(isolation, bad_settings_refused)
{
	static const struct {
		const char *extra, *msg;
	} cases[] = {
	    {"    memory: 12X\n", "local: memory '12X' is not a size of at least 1M"},
	    {"    cpus: lots\n", "local: cpus 'lots' is not a number of CPUs"},
	    {"    network: bridge\n", "local: network 'bridge' is not one of none, host"},
	    {"    rootfs: relative/dir\n", "local: rootfs 'relative/dir' is neither 'host'"},
	    {"    pids: 1\n", "local: pids 1 is out of range"},
	    {"    disk: lots\n", "local: disk 'lots' is not a size (e.g. 10G)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		start(cases[i].extra);
		if (i == 0)
			skip_unless_supported();
		sbx_create_opts c = {0};
		SBX_INIT_HEADER(c);
		cr_assert_neq(sbx_create(host, &c, ids[0], &err), SBX_OK, "%s", cases[i].extra);
		cr_assert_not_null(strstr(err.message, cases[i].msg), "%s -> %s", cases[i].extra,
				   err.message);
		stop();
	}
	/* The plain level takes none of the isolated level's keys. */
	sbx_host_options o = {.config_text = "data_source:\n  sandbox:\n    type: local\n    "
					     "memory: 1G\n"};
	SBX_INIT_HEADER(o);
	snprintf(state_dir, sizeof(state_dir), "%s/iso-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(state_dir));
	o.state_dir = state_dir;
	cr_assert_eq(sbx_host_new(&o, &host, &err), SBX_OK, "%s", err.message);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, ids[0], &err), SBX_E_CONFIG);
	cr_assert_not_null(strstr(err.message, "local: 'memory' needs 'isolation: namespaces'"),
			   "%s", err.message);
}

/* Where sbx is not root, each sandbox is a user namespace too: root inside is sbx's uid
 * outside, and the isolation holds as it does for root. */
Test(isolation, unprivileged_user_namespace)
{
	/* A file the user can read on the host, in a tree the sandbox does not have. */
	char planted[] = "/var/tmp/sbx-iso-userns-XXXXXX";
	int fd = mkstemp(planted);
	cr_assert(fd >= 0, "cannot plant a file in /var/tmp");
	cr_assert_eq(write(fd, "secret\n", 7), 7);
	cr_assert_eq(fchmod(fd, 0644), 0);
	if (geteuid() == 0)
		cr_assert_eq(fchown(fd, NOBODY, NOBODY), 0);
	close(fd);
	become_nobody();
	cr_assert_eq(access(planted, R_OK), 0);
	start(NULL);
	skip_unless_supported();
	char *json = NULL;
	cr_assert_eq(sbx_backend_info(host, "local", &json, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(strstr(json,
				  "\"namespaces\":{\"supported\":true,\"user_namespace\":true,"
				  "\"exec\":\"helper\""),
			   "%s", json);
	sbx_free(json);
	fresh(0);
	sbx_exec_result *r =
	    run("id -u; id -g; awk '{print $1, $2, $3}' /proc/self/uid_map /proc/self/gid_map");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text, "0\n0\n0 65534 1\n0 65534 1\n");
	/* Its init, the exec's helper, the shell: nothing of the host's. */
	r = run("for p in /proc/[0-9]*; do cat $p/comm; done");
	cr_assert_str_eq(r->stdout_text, "sbx-init\nsbx-exec\nbash\n", "%s", r->stderr_text);
	/* Neither the helper nor the init gives away the host's environment. */
	r = run("cat /proc/1/environ /proc/2/environ");
	cr_assert_eq(r->exit_code, 1);
	cr_assert_str_eq(r->stdout_text, "");
	cr_assert_not_null(strstr(r->stderr_text, "Permission denied"), "%s", r->stderr_text);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "cat %s", planted);
	r = run(cmd);
	unlink(planted);
	cr_assert_eq(r->exit_code, 1);
	cr_assert_str_eq(r->stdout_text, "");
	cr_assert_not_null(strstr(r->stderr_text, "No such file or directory"), "%s",
			   r->stderr_text);
	r = run("touch /usr/sbx-iso-probe");
	cr_assert_eq(r->exit_code, 1);
	cr_assert_not_null(strstr(r->stderr_text, "Read-only file system"), "%s", r->stderr_text);
	int port;
	int s = listener(&port);
	snprintf(cmd, sizeof(cmd), "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'",
		 port);
	r = run(cmd);
	close(s);
	cr_assert_eq(r->exit_code, 1, "%s", r->stdout_text);
	cr_assert_not_null(strstr(r->stderr_text, "Connection refused"), "%s", r->stderr_text);
	/* What root in the sandbox writes to the work dir is sbx's user's on the host. */
	r = run("echo mine > out.txt");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	char out[1400];
	snprintf(out, sizeof(out), "%s/plugins/local/%s/work/out.txt", state_dir, bid(0));
	struct stat sb;
	cr_assert_eq(stat(out, &sb), 0, "%s", out);
	cr_assert_eq(sb.st_uid, NOBODY);
	cr_assert_eq(sb.st_gid, NOBODY);
	/* A timeout takes the command's escapees; destroy takes the rest. */
	char token[64];
	snprintf(token, sizeof(token), "sleep 4%05ld.%ld", (long)(getpid() % 100000),
		 (long)time(NULL) % 1000);
	snprintf(cmd, sizeof(cmd), "(setsid %s1 &); (%s2 &); sleep 60", token, token);
	r = run_in(0, cmd, 1);
	cr_assert_eq(r->timed_out, 1);
	cr_assert_eq(count_procs(token), 0);
	snprintf(cmd, sizeof(cmd), "(setsid %s3 &); echo ok", token);
	r = run(cmd);
	cr_assert_str_eq(r->stdout_text, "ok\n", "%s", r->stderr_text);
	/* The escapee may still be on its way to its exec when the command returns: up to 10 s
	 * (a loose bound for a busy machine) for it to show as `sleep`. */
	int n = 0;
	for (int i = 0; i < 1000 && (n = count_procs(token)) != 1; i++)
		usleep(10000);
	cr_assert_eq(n, 1);
	cr_assert_eq(sbx_destroy(host, ids[0], &err), SBX_OK, "%s", err.message);
	ids[0][0] = '\0';
	cr_assert_eq(count_procs(token), 0);
}

Test(isolation, unprivileged_limits_refused)
{
	become_nobody();
	start("    memory: 64M\n");
	skip_unless_supported();
	char *json = NULL;
	sbx_host_options o = {.config_text = "data_source:\n  sandbox:\n    type: local\n",
			      .state_dir = state_dir};
	SBX_INIT_HEADER(o);
	sbx_host *plain = NULL;
	cr_assert_eq(sbx_host_new(&o, &plain, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_backend_info(plain, "local", &json, &err), SBX_OK, "%s", err.message);
	int none = strstr(json, "\"limits\":\"none\"") != NULL;
	sbx_free(json);
	sbx_host_free(plain);
	if (!none)
		cr_skip_test("uid %d has writable cgroups here", NOBODY);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, ids[0], &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message,
			 "local: memory, pids and cpus need the cgroup controllers (v2 with "
			 "controllers, or v1 memory/pids/cpu writable by uid 65534)");
}

/* ---- image archives and root folders (made by make-archives.sh) */

/* SBX_TEST_ARCHIVES/sub, skipping the case when it is absent. */
static void archives(const char *sub, char *buf, size_t cap)
{
	const char *dir = getenv("SBX_TEST_ARCHIVES");
	if (!dir || !*dir)
		cr_skip_test("SBX_TEST_ARCHIVES is not set (the local_image_archives fixture)");
	snprintf(buf, cap, "%s/%s", dir, sub);
	if (access(buf, F_OK) != 0)
		cr_skip_test("%s is missing (no podman to save images with?)", buf);
}

/* Config lines for the image cases: the cache inside the case's state dir. */
static void start_image(const char *extra)
{
	char lines[1600];
	snprintf(lines, sizeof(lines), "%s", extra);
	start(lines);
	skip_unless_supported();
}

/* The folders in the image cache's sha256/ (the unpacked images), and the first one's path. */
static int cached_images(char *first, size_t cap)
{
	char dir[1000];
	snprintf(dir, sizeof(dir), "%s/plugins/local/.images/sha256", state_dir);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strstr(e->d_name, ".lock"))
			continue;
		if (n++ == 0)
			cr_assert_lt((size_t)snprintf(first, cap, "%s/%s", dir, e->d_name), cap);
	}
	closedir(d);
	return n;
}

static void fresh_image(size_t k, const char *image)
{
	sbx_create_opts c = {.image = image};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, ids[k], &err), SBX_OK, "%s: %s", image, err.message);
}

Test(isolation, image_by_name_from_archives_overlay_per_sandbox)
{
	char dir[700], extra[900];
	archives("images", dir, sizeof(dir));
	snprintf(extra, sizeof(extra), "    image: sbx-local-busybox\n    image_archives: %s\n",
		 dir);
	start_image(extra);
	fresh(0);
	fresh(1);
	/* The image's tree and Env, not the host's. */
	sbx_exec_result *r = run("echo $0 $PATH; head -1 /etc/passwd; test -e /usr/bin || echo "
				 "no-usr; touch /bin/mine && echo wrote");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text,
			 "/bin/sh /bin\nroot:x:0:0:root:/root:/bin/sh\nno-usr\nwrote\n");
	r = run_in(1, "test -e /bin/mine && echo shared || echo apart", 0);
	cr_assert_str_eq(r->stdout_text, "apart\n", "%s", r->stderr_text);
	char img[1200], probe[1400];
	cr_assert_eq(cached_images(img, sizeof(img)), 1);
	snprintf(probe, sizeof(probe), "%s/rootfs/bin/mine", img);
	cr_assert_neq(access(probe, F_OK), 0, "a sandbox wrote into the cache: %s", probe);
	snprintf(probe, sizeof(probe), "%s/rootfs/bin/busybox", img);
	cr_assert_eq(access(probe, X_OK), 0, "%s", probe);
}

Test(isolation, image_docker_and_oci_archives_share_one_cache_entry)
{
	char docker[700], oci[700];
	archives("images/busybox-docker.tar", docker, sizeof(docker));
	archives("images/busybox-oci.tar", oci, sizeof(oci));
	start_image("");
	fresh_image(0, docker);
	fresh_image(1, oci);
	char img[1200];
	cr_assert_eq(cached_images(img, sizeof(img)), 1);
	for (size_t k = 0; k < 2; k++) {
		sbx_exec_result *r = run_in(k, "busybox echo hi; cat /etc/group | head -1", 0);
		cr_assert_str_eq(r->stdout_text, "hi\nroot:x:0:\n", "%s", r->stderr_text);
	}
	/* The archive's contents are read once: an index per archive, current. */
	char idx[1000];
	snprintf(idx, sizeof(idx), "%s/plugins/local/.images/archives", state_dir);
	DIR *d = opendir(idx);
	cr_assert_not_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	cr_assert_eq(n, 2);
}

Test(isolation, image_whiteouts_applied)
{
	char path[700];
	archives("hostile/whiteouts.tar", path, sizeof(path));
	start_image("");
	fresh_image(0, path);
	char img[1200], cmd[1600];
	cr_assert_eq(cached_images(img, sizeof(img)), 1);
	/* Read on the host: the image has no shell. */
	snprintf(cmd, sizeof(cmd),
		 "cd %s/rootfs && find . | sort | tr '\\n' ' ' && cat g && tr '\\0' ' ' < ../env",
		 img);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char out[1000] = "";
	size_t got = fread(out, 1, sizeof(out) - 1, p);
	out[got] = '\0';
	pclose(p);
	cr_assert_str_eq(out, ". ./a ./a/new ./c ./c/stay ./etc ./etc/hostname ./f ./f/inside ./g "
			      "new filePATH=/bin FROM_IMAGE=sbx-test/whiteouts:1 ");
}

Test(isolation, image_hostile_archives_refused)
{
	static const struct {
		const char *file, *msg;
		int code;
	} cases[] = {
	    {"dotdot",
	     "member '../../sbx-escape-dotdot' is absolute or leaves the root (import "
	     "refused)",
	     SBX_E_PATH},
	    {"absolute", "/target/absolute' is absolute or leaves the root (import refused)",
	     SBX_E_PATH},
	    {"symlink", "member 'evil/symlink' goes through a symlink (import refused)",
	     SBX_E_PATH},
	    {"symlink-parent", "member 'evil/same-layer' goes through a symlink (import refused)",
	     SBX_E_PATH},
	    {"hardlink", "member 'h' is a hard link out of the root (import refused)", SBX_E_PATH},
	    {"hardlink-dotdot", "member 'h' is a hard link out of the root (import refused)",
	     SBX_E_PATH},
	    {"whiteout-symlink", "member 'lnk/.wh.victim' goes through a symlink (import refused)",
	     SBX_E_PATH},
	    {"opaque-symlink", "member 'lnk/.wh..wh..opq' goes through a symlink (import refused)",
	     SBX_E_PATH},
	    {"bad-digest",
	     ", not sha256:0000000000000000000000000000000000000000000000000000000000000000",
	     SBX_E_IO},
	    {"not-an-archive", "is not a readable tar: Unrecognized archive format", SBX_E_IO},
	};
	char dir[700], target[700];
	archives("hostile", dir, sizeof(dir));
	archives("target", target, sizeof(target));
	start_image("");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[900], prefix[1000];
		snprintf(path, sizeof(path), "%s/%s.tar", dir, cases[i].file);
		sbx_create_opts c = {.image = path};
		SBX_INIT_HEADER(c);
		cr_assert_eq(sbx_create(host, &c, ids[0], &err), cases[i].code, "%s: %s",
			     cases[i].file, err.message);
		snprintf(prefix, sizeof(prefix), "local: image archive %s", path);
		cr_assert(strncmp(err.message, prefix, strlen(prefix)) == 0, "%s", err.message);
		cr_assert_not_null(strstr(err.message, cases[i].msg), "%s", err.message);
		ids[0][0] = '\0';
	}
	/* Nothing was written where they aimed, nothing half-made is left in the cache. */
	char cmd[1600];
	snprintf(cmd, sizeof(cmd),
		 "ls -A %s; ls -A %s/plugins/local/.images/tmp; ls %s/.. | grep -c escape", target,
		 state_dir, BUILD_DIR);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	char out[400] = "";
	size_t got = fread(out, 1, sizeof(out) - 1, p);
	out[got] = '\0';
	pclose(p);
	cr_assert_str_eq(out, "victim\n0\n");
	char img[1200];
	cr_assert_eq(cached_images(img, sizeof(img)), 0);
}

Test(isolation, image_unknown_name_and_archive)
{
	char dir[700], extra[900];
	archives("images", dir, sizeof(dir));
	snprintf(extra, sizeof(extra), "    image_archives: %s\n", dir);
	start_image(extra);
	sbx_create_opts c = {.image = "no-such-image:2"};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(host, &c, ids[0], &err), SBX_E_NOT_FOUND, "%s", err.message);
	char want[1200];
	snprintf(
	    want, sizeof(want),
	    "local: image 'no-such-image:2' (no-such-image:2) is in none of the 2 archives of %s",
	    dir);
	cr_assert_str_eq(err.message, want);
	c.image = "/nonexistent/busybox.tar";
	cr_assert_eq(sbx_create(host, &c, ids[0], &err), SBX_E_NOT_FOUND, "%s", err.message);
	cr_assert_str_eq(
	    err.message,
	    "local: image archive /nonexistent/busybox.tar: No such file or directory");
}

Test(isolation, rootfs_dir_under_an_overlay)
{
	char dir[700], extra[900], probe[900];
	archives("rootdir", dir, sizeof(dir));
	snprintf(extra, sizeof(extra), "    rootfs: %s\n", dir);
	start_image(extra);
	fresh(0);
	sbx_exec_result *r = run("cat /etc/hostname; echo $PATH; touch /bin/mine && echo wrote");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text,
			 "rootdir\n/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
			 "wrote\n");
	snprintf(probe, sizeof(probe), "%s/bin/mine", dir);
	cr_assert_neq(access(probe, F_OK), 0, "the sandbox wrote into the folder: %s", probe);
}

Test(isolation, image_imported_without_root)
{
	char path[700];
	archives("images/busybox-docker.tar", path, sizeof(path));
	become_nobody();
	start_image("");
	fresh_image(0, path);
	sbx_exec_result *r = run("id -u; ls -ln /bin/busybox | awk '{print $3}'; echo x > "
				 "/etc/new && cat /etc/new");
	cr_assert_eq(r->exit_code, 0, "%s", r->stderr_text);
	cr_assert_str_eq(r->stdout_text, "0\n0\nx\n");
	char img[1200], bin[1400];
	cr_assert_eq(cached_images(img, sizeof(img)), 1);
	snprintf(bin, sizeof(bin), "%s/rootfs/bin/busybox", img);
	struct stat sb;
	cr_assert_eq(stat(bin, &sb), 0, "%s", bin);
	cr_assert_eq(sb.st_uid, NOBODY);
}

/* ---- the writable layer's disk */

/* "upper_bytes" and "cap_bytes" of sandbox k. */
static void disk_of(size_t k, long long *used, long long *cap)
{
	char *json = NULL;
	cr_assert_eq(sbx_sandbox_info(host, ids[k], &json, &err), SBX_OK, "%s", err.message);
	const char *u = strstr(json, "\"upper_bytes\":");
	const char *c = strstr(json, "\"cap_bytes\":");
	cr_assert(u && c, "%s", json);
	*used = strtoll(u + 14, NULL, 10);
	*cap = strtoll(c + 12, NULL, 10);
	sbx_free(json);
}

Test(isolation, disk_use_reported)
{
	one(NULL);
	long long used, cap;
	disk_of(0, &used, &cap);
	cr_assert_eq(cap, 0);
	cr_assert_lt(used, 1 << 20);
	sbx_exec_result *r = run("head -c 3145728 /dev/urandom > /tmp/f && echo ok");
	cr_assert_str_eq(r->stdout_text, "ok\n", "%s", r->stderr_text);
	disk_of(0, &used, &cap);
	cr_assert(used >= 3145728 && used < 4194304, "%lld bytes", used);
	r = run("rm /tmp/f");
	disk_of(0, &used, &cap);
	cr_assert_lt(used, 1 << 20);
}

Test(isolation, disk_cap_stops_writes)
{
	one("    disk: 8M\n");
	sbx_exec_result *r = run("dd if=/dev/zero of=/tmp/big bs=1M count=12");
	cr_assert_eq(r->exit_code, 1);
	cr_assert_not_null(strstr(r->stderr_text, "No space left on device"), "%s", r->stderr_text);
	long long used, cap;
	disk_of(0, &used, &cap);
	cr_assert_eq(cap, 8 << 20);
	cr_assert(used > (7 << 20) && used <= cap, "%lld bytes", used);
	/* The work dir is the host's, outside the cap. */
	r = run("head -c 9437184 /dev/zero > big && echo ok");
	cr_assert_str_eq(r->stdout_text, "ok\n", "%s", r->stderr_text);
	char *json = NULL;
	cr_assert_eq(sbx_sandbox_info(host, ids[0], &json, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(strstr(json, "{\"isolation\":\"namespaces\",\"rootfs\":\"host\","), "%s",
			   json);
	sbx_free(json);
}

Test(isolation, image_overlay_disk_capped)
{
	char path[700];
	archives("images/busybox-docker.tar", path, sizeof(path));
	start_image("    disk: 4M\n");
	fresh_image(0, path);
	sbx_exec_result *r =
	    run("dd if=/dev/zero of=/bin/big bs=1M count=2 2>/dev/null && echo fits; "
		"dd if=/dev/zero of=/etc/big bs=1M count=4 2>&1 | grep -c 'No space'");
	cr_assert_str_eq(r->stdout_text, "fits\n1\n", "%s", r->stderr_text);
	long long used, cap;
	disk_of(0, &used, &cap);
	cr_assert_eq(cap, 4 << 20);
	cr_assert(used > (3 << 20) && used <= cap, "%lld bytes", used);
	char *json = NULL;
	cr_assert_eq(sbx_sandbox_info(host, ids[0], &json, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(strstr(json, "\"rootfs\":\"image\""), "%s", json);
	sbx_free(json);
}

/* The work dir is bound at its host path after the sandbox's /dev is made: a state dir on
 * /dev/shm (the usual tmpfs) is not hidden by it. */
Test(isolation, state_dir_under_dev_shm)
{
	snprintf(state_dir, sizeof(state_dir), "/dev/shm/sbx-iso-XXXXXX");
	cr_assert_not_null(mkdtemp(state_dir));
	start(NULL);
	skip_unless_supported();
	fresh(0);
	sbx_exec_result *r = run("pwd && echo x > f && cat f && ls /dev/null");
	char want[1200];
	snprintf(want, sizeof(want), "%s/plugins/local/%s/work\nx\n/dev/null\n", state_dir, bid(0));
	cr_assert_str_eq(r->stdout_text, want, "%s", r->stderr_text);
}

/* The init is a small program of its own, not a fork of the host: it holds no copy of the
 * host's memory (whose later writes would each copy a page per live sandbox), environment or
 * command line. */
Test(isolation, init_holds_nothing_of_the_host)
{
	one(NULL);
	char *json = NULL;
	cr_assert_eq(sbx_sandbox_info(host, ids[0], &json, &err), SBX_OK, "%s", err.message);
	const char *p = strstr(json, "\"init_pid\":");
	cr_assert_not_null(p, "%s", json);
	long pid = strtol(p + 11, NULL, 10);
	sbx_free(json);
	char path[64], exe[1200] = "", buf[4096];
	snprintf(path, sizeof(path), "/proc/%ld/exe", pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0, "%s", path);
	exe[n] = '\0';
	cr_assert_not_null(strstr(exe, "/sbx-local-init"), "%s", exe);
	snprintf(path, sizeof(path), "/proc/%ld/environ", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0, "%s", path);
	cr_assert_eq(read(fd, buf, sizeof(buf)), 0, "the init has an environment");
	close(fd);
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	long rss = -1;
	while (fgets(buf, sizeof(buf), f))
		if (strncmp(buf, "VmRSS:", 6) == 0)
			rss = strtol(buf + 6, NULL, 10);
	fclose(f);
	cr_assert(rss > 0 && rss < 4096, "the init's RSS is %ld kB", rss);
	/* Its argv: its name alone (its descriptors are at fixed numbers). */
	sbx_exec_result *r = run("cat /proc/1/comm; tr '\\0' '\\n' < /proc/1/cmdline | head -1; "
				 "tr '\\0' '\\n' < /proc/1/cmdline | grep -c .");
	cr_assert_str_eq(r->stdout_text, "sbx-init\nsbx-init\n1\n", "%s", r->stderr_text);
}

/* Making a sandbox does not copy the caller either: the init is started like a command and
 * execs sbx-local-init, which builds the sandbox. After a create, writing again to every page
 * of a 64 MiB ballast takes no page faults (after a fork of the host each page would fault
 * once, to undo the copy-on-write protection fork put on it). */
Test(isolation, create_does_not_copy_the_caller)
{
	start(NULL);
	skip_unless_supported();
	ballast b = ballast_make(64u << 20);
	cr_assert_neq(b.p, MAP_FAILED);
	fresh(0);
	long faults = ballast_rewrite_faults(&b, 2);
	cr_assert_lt(faults, (long)(ballast_pages(&b) / 16), "%ld faults re-touching %zu pages",
		     faults, ballast_pages(&b));
	ballast_free(&b);
	sbx_exec_result *r = run("echo built");
	cr_assert_str_eq(r->stdout_text, "built\n", "%s", r->stderr_text);
}

/* Where sbx is not root and cannot make a user namespace, plugins --json says the isolated
 * level is unsupported and why, and a data source asking for it is refused with that reason.
 * Set up without touching the machine: a child in a user namespace of its own (uid 0 and
 * 65534 mapped) forbids user namespaces below it, then becomes 65534. */
Test(isolation, unsupported_level_says_why)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to map uids in a user namespace");
	snprintf(state_dir, sizeof(state_dir), "%s/iso-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(state_dir));
	cr_assert_eq(chown(state_dir, NOBODY, NOBODY), 0);
	int go[2], out[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(out), 0);
	pid_t c = fork();
	cr_assert(c >= 0);
	if (c == 0) {
		char b;
		close(out[0]);
		if (unshare(CLONE_NEWUSER) != 0 || read(go[0], &b, 1) != 1)
			_exit(2);
		int fd = open("/proc/sys/user/max_user_namespaces", O_WRONLY);
		if (fd < 0 || write(fd, "0", 1) != 1 || setgroups(0, NULL) != 0 ||
		    setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) != 0)
			_exit(3);
		close(fd);
		prctl(PR_SET_DUMPABLE, 1);
		sbx_host_options o = {.config_text = "data_source:\n  sandbox:\n    type: local\n",
				      .state_dir = state_dir};
		SBX_INIT_HEADER(o);
		sbx_host *h = NULL;
		char *json = NULL;
		if (sbx_host_new(&o, &h, &err) != SBX_OK ||
		    sbx_backend_info(h, "local", &json, &err) != SBX_OK)
			_exit(4);
		const char *ns = strstr(json, "\"namespaces\":");
		char msg[1600];
		snprintf(msg, sizeof(msg), "%s\n", ns ? ns : "none");
		sbx_free(json);
		sbx_host_free(h);
		o.config_text = "data_source:\n  sandbox:\n    type: local\n    isolation: "
				"namespaces\n";
		char id[SBX_ID_MAX];
		sbx_create_opts co = {0};
		SBX_INIT_HEADER(co);
		if (sbx_host_new(&o, &h, &err) != SBX_OK || sbx_create(h, &co, id, &err) == SBX_OK)
			_exit(6);
		sbx_host_free(h);
		size_t k = strlen(msg);
		snprintf(msg + k, sizeof(msg) - k, "%s", err.message);
		ssize_t w = write(out[1], msg, strlen(msg));
		_exit(w > 0 ? 0 : 5);
	}
	close(out[1]);
	char path[64];
	static const char map[] = "0 0 1\n65534 65534 1\n";
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%ld/%s", (long)c, i ? "gid_map" : "uid_map");
		int fd = -1;
		/* The child unshares on its own time: its map files change owner when it has. */
		for (int k = 0; k < 2000 && fd < 0; k++) {
			fd = open(path, O_WRONLY);
			if (fd >= 0 &&
			    write(fd, map, sizeof(map) - 1) != (ssize_t)sizeof(map) - 1) {
				close(fd);
				fd = -1;
			}
			if (fd < 0)
				usleep(1000);
		}
		cr_assert(fd >= 0, "cannot write %s", path);
		close(fd);
	}
	cr_assert_eq(write(go[1], "x", 1), 1);
	char got[1000] = "";
	ssize_t n = read(out[0], got, sizeof(got) - 1);
	got[n > 0 ? n : 0] = '\0';
	int st = 0;
	cr_assert_eq(waitpid(c, &st, 0), c);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	cr_assert_str_eq(got,
			 "\"namespaces\":{\"supported\":false,\"why\":\"sbx runs as uid "
			 "65534 and cannot make a user namespace: No space left on device (see "
			 "/proc/sys/user/max_user_namespaces)\"}}}}\n"
			 "local: isolation 'namespaces': sbx runs as uid 65534 and cannot make a "
			 "user namespace: No space left on device (see "
			 "/proc/sys/user/max_user_namespaces)");
}

/* The runner asks for the level before any case and, when every case has passed or skipped
 * on a machine without it, exits 77 with the reason: CTest reports a skip, never a pass. */
static char runner_why[sizeof(((sbx_error *)0)->message) + 64];

ReportHook(PRE_ALL)(struct criterion_test_set *tests)
{
	(void)tests;
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/iso-XXXXXX", BUILD_DIR);
	if (!mkdtemp(dir)) {
		perror(dir);
		exit(1);
	}
	int rc = level_why(dir, runner_why, sizeof(runner_why));
	rmtree(dir);
	if (rc < 0) {
		fprintf(stderr, "local_isolation: %s\n", runner_why);
		exit(1);
	}
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
	if (runner_why[0] && stats->tests_failed == 0 && stats->tests_crashed == 0) {
		fprintf(stderr,
			"local_isolation: skipped (the isolated level is not supported here: %s)\n",
			runner_why);
		exit(77);
	}
}

/* Direct tests of the local plugin: dlopen the .so and drive its ops through a minimal
 * services table, so the plugin's own guarantees (tree kill by every mechanism, confinement of
 * files, pause/resume, labels) are pinned independently of the host. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/plugin.h>

#include "ballast.h"
#include "fork_tests.h"

#ifndef SBX_LOCAL_SO
#error SBX_LOCAL_SO must name the plugin
#endif

/* ---- a minimal host */

struct sbx_config {
	const char *keys[8];
	const char *values[8];
	int n;
};

static sbx_plugin_desc desc;
static char state_dir[512];
static void *dl;

static int t_register(sbx_registrar *reg, const sbx_plugin_desc *d)
{
	(void)reg;
	memcpy(&desc, d, sizeof(desc));
	return SBX_OK;
}

static void t_log(int level, const char *alias, const char *fmt, ...)
{
	(void)level;
	(void)alias;
	(void)fmt;
}

static int t_set_error(sbx_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		err->code = code;
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}

static const char *lookup(const sbx_config *cfg, const char *key)
{
	for (int i = 0; cfg && i < cfg->n; i++)
		if (strcmp(cfg->keys[i], key) == 0)
			return cfg->values[i];
	return NULL;
}

static int t_string(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	(void)err;
	*out = lookup(cfg, key);
	return *out ? SBX_OK : SBX_E_NOT_FOUND;
}

static int t_int(const sbx_config *cfg, const char *key, int64_t *out, sbx_error *err)
{
	(void)err;
	const char *v = lookup(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = strtoll(v, NULL, 10);
	return SBX_OK;
}

static int t_float(const sbx_config *cfg, const char *key, double *out, sbx_error *err)
{
	(void)err;
	const char *v = lookup(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = strtod(v, NULL);
	return SBX_OK;
}

static int t_bool(const sbx_config *cfg, const char *key, int *out, sbx_error *err)
{
	(void)err;
	const char *v = lookup(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	*out = strcmp(v, "true") == 0;
	return SBX_OK;
}

static int t_json(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	return t_string(cfg, key, out, err);
}

static const char *t_state_dir(void)
{
	return state_dir;
}

static const char *t_state_dir_for(const sbx_config *cfg)
{
	(void)cfg;
	return state_dir;
}

static sbx_host_api api = {
    .register_sandbox = t_register,
    .log = t_log,
    .alloc = malloc,
    .realloc = realloc,
    .free = free,
    .set_error = t_set_error,
    .config_string = t_string,
    .config_int = t_int,
    .config_float = t_float,
    .config_bool = t_bool,
    .config_json = t_json,
    .state_dir = t_state_dir,
    .state_dir_for = t_state_dir_for,
};

static void *state;
static sbx_error err;

/* dlopens the plugin at so and registers it, with a fresh state dir; init is the caller's. */
static void open_plugin(const char *so)
{
	SBX_INIT_HEADER(api);
	snprintf(state_dir, sizeof(state_dir), "%s/local-test-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(state_dir));
	dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(dl, "%s", dlerror());
	void *sym = dlsym(dl, SBX_PLUGIN_ENTRY);
	cr_assert_not_null(sym);
	sbx_plugin_register_fn reg;
	memcpy(&reg, &sym, sizeof(reg));
	cr_assert_eq(reg(&api, NULL), SBX_OK);
	cr_assert_str_eq(desc.alias, "local");
	cr_assert(desc.flags & SBX_PLUGIN_THREAD_SAFE);
}

static void load_from(const char *so, const char *mechanism)
{
	open_plugin(so);
	sbx_config cfg = {.keys = {"kill_mechanism"}, .values = {mechanism}, .n = 1};
	int rc = desc.init(&cfg, &state, &err);
	if (rc == SBX_E_CONFIG && strcmp(mechanism, "auto") != 0) {
		dlclose(dl);
		cr_skip_test("%s", err.message); /* that mechanism is not available here */
	}
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
}

static void load(const char *mechanism)
{
	load_from(SBX_LOCAL_SO, mechanism);
}

/* Never across a mount a failed test may have left behind. */
static void remove_folder(const char *dir)
{
	char cmd[1600];
	snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* A test that got this far passed: its state folder goes (a failed one's stays to look at). */
static void unload(void)
{
	desc.fini(state);
	dlclose(dl);
	remove_folder(state_dir);
}

static void create(char id[64])
{
	sbx_kv labels[] = {{"sbx.run", "r1"}};
	sbx_kv env[] = {{"SANDBOX_VAR", "from-create"}};
	sbx_create_spec spec = {.labels = labels, .n_labels = 1, .env = env, .n_env = 1};
	SBX_INIT_HEADER(spec);
	cr_assert_eq(desc.create(state, &spec, id, 64, &err), SBX_OK, "%s", err.message);
}

typedef struct capture {
	char out[65536], errs[4096];
	size_t n_out, n_err;
} capture;

static int sink(void *ctx, uint32_t stream, const void *data, size_t len)
{
	capture *c = ctx;
	char *buf = stream == SBX_STREAM_STDOUT ? c->out : c->errs;
	size_t *n = stream == SBX_STREAM_STDOUT ? &c->n_out : &c->n_err;
	size_t cap = stream == SBX_STREAM_STDOUT ? sizeof(c->out) : sizeof(c->errs);
	size_t k = len < cap - 1 - *n ? len : cap - 1 - *n;
	memcpy(buf + *n, data, k);
	*n += k;
	buf[*n] = '\0';
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(const char *id, const char *shell, uint64_t timeout_ms, capture *c,
	       sbx_exec_outcome *o)
{
	sbx_exec_request req = {
	    .shell = shell, .timeout_ms = timeout_ms, .output = sink, .output_ctx = c};
	SBX_INIT_HEADER(req);
	memset(c, 0, sizeof(*c));
	memset(o, 0, sizeof(*o));
	SBX_INIT_HEADER(*o);
	return desc.execute(state, id, &req, o, &err);
}

/* ---- exec */

static void check_basics(const char *mechanism)
{
	load(mechanism);
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "echo hi; echo err >&2; echo $SANDBOX_VAR; exit 3", 0, &c, &o), SBX_OK,
		     "%s", err.message);
	cr_assert_str_eq(c.out, "hi\nfrom-create\n");
	cr_assert_str_eq(c.errs, "err\n");
	cr_assert_eq(o.exit_code, 3);
	cr_assert_eq(run(id, "kill -TERM $$", 0, &c, &o), SBX_OK);
	cr_assert_eq(o.exit_code, -1);
	cr_assert_eq(o.signal, SIGTERM);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	unload();
}

Test(local_exec, basics_freezer)
{
	check_basics("cgroup-v1-freezer");
}

Test(local_exec, basics_subreaper)
{
	check_basics("subreaper");
}

/* A setsid escapee, a double-fork escapee and a grandchild holding the pipe: the call returns
 * within timeout + 1 s with the output so far, and none of them survives to write its marker. */
/* A harness that ignores SIGCHLD has the kernel discard its children's exit statuses (and one
 * that reaps with waitpid(-1) takes them). A command started as this process's child then
 * ends with an error that says so, promptly and with its output delivered; under the
 * subreaper the status comes over a pipe and the exec is whole. */
static void check_sigchld_ignored(const char *mechanism)
{
	load(mechanism);
	char id[64];
	create(id);
	cr_assert_neq(signal(SIGCHLD, SIG_IGN), SIG_ERR);
	capture c;
	sbx_exec_outcome o;
	double t0 = now_s();
	int rc = run(id, "echo hi; exit 3", 0, &c, &o);
	double took = now_s() - t0;
	signal(SIGCHLD, SIG_DFL);
	cr_assert_str_eq(c.out, "hi\n");
	cr_assert_lt(took, 10.0, "the exec took %.1f s", took);
	if (strcmp(mechanism, "subreaper") == 0) {
		cr_assert_eq(rc, SBX_OK, "%s", err.message);
		cr_assert_eq(o.exit_code, 3);
	} else {
		cr_assert_eq(rc, SBX_E_BACKEND);
		cr_assert_str_eq(
		    err.message,
		    "local: exec: the command ended, but this process ignores SIGCHLD and the "
		    "kernel discarded the status, so its exit status is unknown (with "
		    "kill_mechanism: subreaper the status comes over a pipe instead)");
	}
	cr_assert_eq(run(id, "exit 4", 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_eq(o.exit_code, 4);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	unload();
}

Test(local_exec, sigchld_ignored_v2, .timeout = 30)
{
	check_sigchld_ignored("cgroup-v2");
}

Test(local_exec, sigchld_ignored_freezer, .timeout = 30)
{
	check_sigchld_ignored("cgroup-v1-freezer");
}

Test(local_exec, sigchld_ignored_subreaper, .timeout = 30)
{
	check_sigchld_ignored("subreaper");
}

/* A harness forks while another of its threads is starting commands (multiprocessing does).
 * The child's own state of the plugin runs commands: what the parent's threads held at the
 * fork (the spawn lock a command's start holds, the kept stacks and helpers) is not the
 * child's. Without the reset, a child that forked while a start was in flight waited for it
 * forever. */
static atomic_int spawner_stop;

static void *spawner_loop(void *arg)
{
	const char *id = arg;
	while (!atomic_load(&spawner_stop)) {
		capture c;
		sbx_exec_outcome o;
		run(id, "true", 0, &c, &o);
	}
	return NULL;
}

static int child_runs_commands(const char *mechanism)
{
	void *mine = NULL;
	sbx_config cfg = {.keys = {"kill_mechanism"}, .values = {mechanism}, .n = 1};
	sbx_error e;
	if (desc.init(&cfg, &mine, &e) != SBX_OK)
		return 20;
	sbx_create_spec spec = {0};
	SBX_INIT_HEADER(spec);
	char id[64];
	if (desc.create(mine, &spec, id, sizeof(id), &e) != SBX_OK)
		return 21;
	capture c;
	sbx_exec_request req = {.shell = "echo forked", .output = sink, .output_ctx = &c};
	SBX_INIT_HEADER(req);
	memset(&c, 0, sizeof(c));
	sbx_exec_outcome o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	if (desc.execute(mine, id, &req, &o, &e) != SBX_OK || o.exit_code != 0 ||
	    strcmp(c.out, "forked\n") != 0)
		return 22;
	if (desc.destroy(mine, id, &e) != SBX_OK)
		return 23;
	desc.fini(mine);
	return 0;
}

static void check_fork_while_spawning(const char *mechanism)
{
	SKIP_FORK_UNDER_ASAN();
	load(mechanism);
	char id[64];
	create(id);
	atomic_store(&spawner_stop, 0);
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, spawner_loop, id), 0);
	enum { FORKS = 30 };
	fork_tally t = {0, 0, 0};
	for (int i = 0; i < FORKS; i++) {
		usleep(2000);
		pid_t kid = fork();
		cr_assert_geq(kid, 0);
		if (kid == 0)
			_exit(child_runs_commands(mechanism));
		fork_tally_wait(&t, kid);
	}
	atomic_store(&spawner_stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(t.hung, 0, "%d of %d children hung", t.hung, FORKS);
	cr_assert_eq(t.failed, 0, "%d of %d children failed, the last with %d", t.failed, FORKS,
		     t.last);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	unload();
}

Test(local_exec, fork_while_spawning_v2, .timeout = 240)
{
	check_fork_while_spawning("cgroup-v2");
}

Test(local_exec, fork_while_spawning_subreaper, .timeout = 240)
{
	check_fork_while_spawning("subreaper");
}

static void check_timeout_kills_tree(const char *mechanism)
{
	load(mechanism);
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	double t0 = now_s();
	int rc = run(id,
		     "echo started; setsid sh -c 'sleep 1.5; echo x > esc1' & "
		     "( ( sleep 1.5; echo x > esc2 ) & ) ; "
		     "( sleep 1.5; echo x > esc3 ) & sleep 30",
		     500, &c, &o);
	double took = now_s() - t0;
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
	cr_assert_eq(o.timed_out, 1);
	cr_assert_str_eq(c.out, "started\n");
	cr_assert_lt(took, 1.5, "took %.3f s", took);
	sleep(2);
	cr_assert_eq(run(id, "ls", 0, &c, &o), SBX_OK);
	cr_assert_str_eq(c.out, "", "survivors wrote: %s", c.out);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
}

Test(local_exec, timeout_kills_tree_freezer, .timeout = 20)
{
	check_timeout_kills_tree("cgroup-v1-freezer");
}

Test(local_exec, timeout_kills_tree_subreaper, .timeout = 20)
{
	check_timeout_kills_tree("subreaper");
}

Test(local_exec, background_holding_stdout_does_not_hold_the_call, .timeout = 20)
{
	load("auto");
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	double t0 = now_s();
	cr_assert_eq(run(id, "sleep 30 & echo done", 10000, &c, &o), SBX_OK);
	cr_assert_lt(now_s() - t0, 2.0);
	cr_assert_eq(o.timed_out, 0);
	cr_assert_eq(o.exit_code, 0);
	cr_assert_str_eq(c.out, "done\n");
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
}

Test(local_exec, stdin_cwd_env_argv)
{
	load("auto");
	char id[64];
	create(id);
	capture c = {0};
	sbx_exec_outcome o = {0};
	SBX_INIT_HEADER(o);
	cr_assert_eq(desc.make_dir(state, id, "sub", 0, &err), SBX_OK);
	const char *argv[] = {"sh", "-c", "read line; echo \"$line|$(basename $PWD)|$V\"", NULL};
	sbx_kv env[] = {{"V", "v1"}};
	sbx_exec_request req = {.argv = argv,
				.argc = 3,
				.has_stdin = 1,
				.stdin_data = "abc\n",
				.stdin_len = 4,
				.cwd = "sub",
				.env = env,
				.n_env = 1,
				.output = sink,
				.output_ctx = &c};
	SBX_INIT_HEADER(req);
	cr_assert_eq(desc.execute(state, id, &req, &o, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(c.out, "abc|sub|v1\n");
	req.cwd = "missing";
	cr_assert_eq(desc.execute(state, id, &req, &o, &err), SBX_E_NO_FILE);
	cr_assert(strstr(err.message, "cwd 'missing' does not exist"), "%s", err.message);
	const char *bad[] = {"no-such-program-xyz", NULL};
	req.argv = bad;
	req.cwd = NULL;
	memset(&c, 0, sizeof(c));
	cr_assert_eq(desc.execute(state, id, &req, &o, &err), SBX_OK);
	cr_assert_eq(o.exit_code, 127);
	cr_assert(strstr(c.errs, "no-such-program-xyz"), "%s", c.errs);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
}

/* The command is born in its own cgroup below the sandbox's, on every cgroup mechanism (v2:
 * clone3 straight into it; v1: the child joins before it execs). */
static void check_born_in_exec_cgroup(const char *mechanism, const char *hierarchy)
{
	load(mechanism);
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "cat /proc/self/cgroup", 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_eq(o.exit_code, 0);
	/* <hierarchy>:/sbx/r-<16 hex: the root's namespace>/<id>/e<pid>- */
	char want[200];
	snprintf(want, sizeof(want), "%s:/sbx/r-", hierarchy);
	const char *at = strstr(c.out, want);
	cr_assert(at, "no '%s' in:\n%s", want, c.out);
	at += strlen(want);
	cr_assert_eq(strspn(at, "0123456789abcdef"), 16, "no namespace in:\n%s", c.out);
	snprintf(want, sizeof(want), "/%s/e%ld-", id, (long)getpid());
	cr_assert_eq(strncmp(at + 16, want, strlen(want)), 0, "no '%s' in:\n%s", want, c.out);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
}

Test(local_exec, born_in_exec_cgroup_v2)
{
	check_born_in_exec_cgroup("cgroup-v2", "\n0:");
}

Test(local_exec, born_in_exec_cgroup_freezer)
{
	check_born_in_exec_cgroup("cgroup-v1-freezer", ":freezer");
}

/* The v2 cgroup the last command ran in, from its /proc/self/cgroup ("0::/sbx/..."). */
static void exec_cgroup(const char *id, const char *extra, char *out, size_t cap)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s%ssed -n 's/^0:://p' /proc/self/cgroup", extra ? extra : "",
		 extra ? "\n" : "");
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, cmd, 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_eq(o.exit_code, 0, "%s: %s", cmd, c.errs);
	cr_assert(c.n_out > 1 && c.out[c.n_out - 1] == '\n', "%s", c.out);
	c.out[c.n_out - 1] = '\0';
	cr_assert(strchr(c.out, '\n') == NULL, "%s", c.out);
	cr_assert_lt(c.n_out, cap, "%s", c.out);
	memcpy(out, c.out, c.n_out);
}

/* cgroup v2: a command is born in the exec cgroup an earlier command of this process left
 * empty and clean (a fresh cgroup's first process costs the spawn), never in one something
 * still runs in or that a command put a cgroup below; destroy leaves none of them. */
Test(local_exec, exec_cgroup_reused_when_empty_and_clean)
{
	load("cgroup-v2");
	const char *mnt = access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0
			      ? "/sys/fs/cgroup/unified"
			      : "/sys/fs/cgroup";
	char id[64], first[512], again[512], busy[512], after_busy[512], nested[512], last[512];
	create(id);
	exec_cgroup(id, NULL, first, sizeof(first));
	char want[200];
	snprintf(want, sizeof(want), "/%s/e%ld-", id, (long)getpid());
	cr_assert(strstr(first, want), "%s", first);
	exec_cgroup(id, NULL, again, sizeof(again));
	cr_assert_str_eq(again, first);
	/* Something left running keeps its cgroup: the next command gets another. */
	exec_cgroup(id, "setsid sleep 300 </dev/null >/dev/null 2>&1 &", busy, sizeof(busy));
	cr_assert_str_eq(busy, first);
	exec_cgroup(id, NULL, after_busy, sizeof(after_busy));
	cr_assert_str_neq(after_busy, busy);
	/* A cgroup a command made below its own: not reused either. */
	char mk[700];
	snprintf(mk, sizeof(mk), "mkdir \"%s$(sed -n 's/^0:://p' /proc/self/cgroup)/sub\"", mnt);
	exec_cgroup(id, mk, nested, sizeof(nested));
	cr_assert_str_eq(nested, after_busy);
	exec_cgroup(id, NULL, last, sizeof(last));
	cr_assert_str_neq(last, nested);
	cr_assert_str_neq(last, busy);
	/* A cgroup killed at a timeout is not reused: the kernel would kill whatever is born in
	 * it. */
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "sleep 30", 300, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_eq(o.timed_out, 1);
	char after_timeout[512];
	exec_cgroup(id, NULL, after_timeout, sizeof(after_timeout));
	cr_assert_str_neq(after_timeout, last);
	/* Nor is one whose command killed it itself: the next command is started again in a
	 * new cgroup and runs as usual. */
	snprintf(mk, sizeof(mk),
		 "echo 1 >\"%s$(sed -n 's/^0:://p' /proc/self/cgroup)/cgroup.kill\"", mnt);
	cr_assert_eq(run(id, mk, 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_eq(o.signal, SIGKILL, "exit %d: %s", o.exit_code, c.errs);
	cr_assert_eq(run(id, "echo alive; sed -n 's/^0:://p' /proc/self/cgroup", 0, &c, &o), SBX_OK,
		     "%s", err.message);
	cr_assert_eq(o.exit_code, 0, "signal %d: %s", o.signal, c.errs);
	cr_assert(strncmp(c.out, "alive\n", 6) == 0, "%s", c.out);
	cr_assert(strstr(c.out + 6, want), "%s", c.out);
	cr_assert(strncmp(c.out + 6, after_timeout, strlen(after_timeout)) != 0, "%s", c.out);
	char sandbox_cg[700];
	snprintf(sandbox_cg, sizeof(sandbox_cg), "%s%s", mnt, last);
	*strrchr(sandbox_cg, '/') = '\0';
	cr_assert_eq(access(sandbox_cg, F_OK), 0, "%s", sandbox_cg);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	cr_assert_neq(access(sandbox_cg, F_OK), 0, "%s is left after destroy", sandbox_cg);
	unload();
}

/* Starting a command does not copy the caller: after an exec, writing again to every page of
 * a 64 MiB ballast takes no page faults (after a fork each page would fault once, to undo
 * the copy-on-write protection fork put on it). The second command leaves a process holding
 * its stdout, which gets a sink once the call returns: that start copies nothing either. */
static void check_exec_does_not_copy_the_caller(const char *mechanism)
{
	load(mechanism);
	char id[64];
	create(id);
	ballast b = ballast_make(64u << 20);
	cr_assert_neq(b.p, MAP_FAILED);
	static const char *const commands[] = {"echo hi", "sleep 3 & echo hi"};
	for (int k = 0; k < 2; k++) {
		capture c;
		sbx_exec_outcome o;
		cr_assert_eq(run(id, commands[k], 0, &c, &o), SBX_OK, "%s", err.message);
		cr_assert_str_eq(c.out, "hi\n");
		long faults = ballast_rewrite_faults(&b, (unsigned char)(2 + k));
		cr_assert_lt(faults, (long)(ballast_pages(&b) / 16),
			     "%s: %ld faults re-touching %zu pages", commands[k], faults,
			     ballast_pages(&b));
	}
	ballast_free(&b);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
}

Test(local_exec, exec_does_not_copy_the_caller_v2)
{
	check_exec_does_not_copy_the_caller("cgroup-v2");
}

Test(local_exec, exec_does_not_copy_the_caller_freezer)
{
	check_exec_does_not_copy_the_caller("cgroup-v1-freezer");
}

Test(local_exec, exec_does_not_copy_the_caller_subreaper, .timeout = 30)
{
	check_exec_does_not_copy_the_caller("subreaper");
}

/* sbx-local-exec beside the plugin, as the plugin finds it. */
static void helper_path(char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", SBX_LOCAL_SO);
	char *slash = strrchr(buf, '/');
	cr_assert_not_null(slash);
	snprintf(slash + 1, cap - (size_t)(slash + 1 - buf), "sbx-local-exec");
}

/* With the subreaper, a command's parent is sbx-local-exec, a program of its own, not a
 * copy of the host; with a cgroup, the host itself. */
static void check_command_parent(const char *mechanism, const char *want)
{
	load(mechanism);
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "readlink /proc/$PPID/exe", 0, &c, &o), SBX_OK, "%s", err.message);
	char expect[1100];
	snprintf(expect, sizeof(expect), "%s\n", want);
	cr_assert_str_eq(c.out, expect);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
}

Test(local_exec, subreaper_helper_is_its_own_program)
{
	char want[1024];
	helper_path(want, sizeof(want));
	check_command_parent("subreaper", want);
}

/* The state letter and parent of process pid (a /proc entry's name) from /proc/PID/stat:
 * 1, or -1 when there is no such process (0: not read). */
static int proc_stat(const char *pid, char *state_c, long *ppid)
{
	char path[300], st[512];
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t got = fread(st, 1, sizeof(st) - 1, f);
	fclose(f);
	st[got] = '\0';
	/* The command name may hold spaces and parentheses: fields start after the last ')'. */
	const char *paren = strrchr(st, ')');
	return paren && sscanf(paren + 1, " %c %ld", state_c, ppid) == 2;
}

/* This process's children, zombies included: the entries of /proc whose parent it is. */
static int count_children(void)
{
	DIR *d = opendir("/proc");
	cr_assert_not_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char state_c;
		long ppid;
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' &&
		    proc_stat(e->d_name, &state_c, &ppid) == 1 && ppid == (long)getpid())
			n++;
	}
	closedir(d);
	return n;
}

/* Under the subreaper an exec returns once it has its command's status, without waiting for
 * its helper to exit: later execs reap the helpers that ended, and fini the rest. A harness
 * that reaps every child itself (waitpid(-1)) takes one from under the plugin, which neither
 * waits for it forever nor reaps anything else. */
Test(local_exec, subreaper_helpers_are_reaped, .timeout = 60)
{
	load("subreaper");
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(run(id, "echo hi", 0, &c, &o), SBX_OK, "%s", err.message);
		cr_assert_str_eq(c.out, "hi\n");
		cr_assert_eq(o.exit_code, 0);
	}
	int left = count_children();
	cr_assert_lt(left, 50, "%d helpers of 100 execs are not reaped", left);
	cr_assert_eq(run(id, "echo again", 0, &c, &o), SBX_OK, "%s", err.message);
	pid_t w = waitpid(-1, NULL, 0);
	cr_assert(w > 0 || errno == ECHILD, "waitpid: %s", strerror(errno));
	cr_assert_eq(run(id, "echo after", 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_str_eq(c.out, "after\n");
	cr_assert_eq(o.exit_code, 0);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
	cr_assert_eq(count_children(), 0);
}

/* The entries of sandbox id's running/ folder (its execs' marks), -1 when it is absent. */
static int count_marks(const char *id)
{
	char path[1300];
	snprintf(path, sizeof(path), "%s/local/%s/running", state_dir, id);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* 1 when pid is dead: no such process, or a zombie whose parent has not reaped it yet (an
 * orphan's new parent may be an init that reaps late). */
static int is_dead(pid_t pid)
{
	char name[24], state_c;
	long ppid;
	snprintf(name, sizeof(name), "%ld", (long)pid);
	if (kill(pid, 0) != 0)
		return 1;
	int r = proc_stat(name, &state_c, &ppid);
	return r < 0 || (r == 1 && state_c == 'Z');
}

/* A sleep started by the test itself, tagged as sandbox id's processes are. */
static pid_t start_tagged(const char *id)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char tag[128];
		snprintf(tag, sizeof(tag), "SBX_LOCAL_SANDBOX=%s", id);
		char *argv[] = {"sleep", "300", NULL}, *envp[] = {tag, NULL};
		execve("/bin/sleep", argv, envp);
		_exit(127);
	}
	for (int i = 0; i < 500; i++) { /* until it runs sleep, with its tag */
		char exe[64], link[300] = "";
		snprintf(exe, sizeof(exe), "/proc/%ld/exe", (long)pid);
		ssize_t k = readlink(exe, link, sizeof(link) - 1);
		if (k > 0 && strstr(link, "sleep"))
			break;
		usleep(10000);
	}
	return pid;
}

/* 1 when pid, our child, was killed by SIGKILL within 10 s; 0 when it still runs (then it is
 * killed and reaped here). */
static int was_killed(pid_t pid)
{
	for (int i = 0; i < 1000; i++) {
		int ws;
		if (waitpid(pid, &ws, WNOHANG) == pid)
			return WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
		if (i == 100) { /* a second: long enough for a destroy that looks */
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			return 0;
		}
		usleep(10000);
	}
	return 0;
}

/* Under the subreaper a sandbox's running/ folder holds a mark per exec that may have left
 * a process: none once a command's tree ended with it (or was killed on a timeout), one for
 * an exec that left something. Destroy looks for the sandbox's processes by their tag unless
 * the folder is there and empty: an exec that left something, a mark a host that died left,
 * and a sandbox made before the marks (no folder) all get the search. */
Test(local_exec, subreaper_marks_execs_that_leave_processes, .timeout = 90)
{
	load("subreaper");
	char id[64];
	capture c;
	sbx_exec_outcome o;

	/* Clean execs leave no mark; destroy then trusts the folder. */
	create(id);
	cr_assert_eq(count_marks(id), 0);
	cr_assert_eq(run(id, "echo hi", 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_str_eq(c.out, "hi\n");
	cr_assert_eq(count_marks(id), 0);
	cr_assert_eq(run(id, "sleep 30", 300, &c, &o), SBX_OK, "%s", err.message);
	cr_assert(o.timed_out);
	cr_assert_eq(count_marks(id), 0, "the killed tree left its mark");
	pid_t planted = start_tagged(id);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	cr_assert_not(was_killed(planted), "destroy searched though no exec left anything");

	/* An exec that leaves a process keeps its mark, and destroy kills what it left. */
	create(id);
	cr_assert_eq(run(id, "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!", 0, &c, &o),
		     SBX_OK, "%s", err.message);
	long left = atol(c.out);
	cr_assert_gt(left, 0, "%s", c.out);
	cr_assert_eq(count_marks(id), 1);
	cr_assert_not(is_dead((pid_t)left));
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	int gone = 0;
	for (int i = 0; i < 1000 && !gone; i++) {
		gone = is_dead((pid_t)left);
		if (!gone)
			usleep(10000);
	}
	cr_assert(gone, "destroy left the exec's process %ld", left);

	/* A mark a dead host left: destroy searches. */
	create(id);
	char path[1400];
	snprintf(path, sizeof(path), "%s/local/%s/running/0123456789abcdef", state_dir, id);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	close(fd);
	planted = start_tagged(id);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	cr_assert(was_killed(planted), "destroy did not search with a mark left");

	/* A sandbox without the folder (an older sbx made it): destroy searches, and its execs
	 * run as before. */
	create(id);
	snprintf(path, sizeof(path), "%s/local/%s/running", state_dir, id);
	cr_assert_eq(rmdir(path), 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(run(id, "echo old", 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_str_eq(c.out, "old\n");
	cr_assert_eq(count_marks(id), -1);
	planted = start_tagged(id);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	cr_assert(was_killed(planted), "destroy did not search a sandbox without marks");
	unload();
}

/* The plugin copied alone into a new folder dir (its programs not beside it), at copy. */
static void copy_plugin_alone(char *dir, size_t dir_cap, char *copy, size_t copy_cap)
{
	char cmd[1600];
	snprintf(dir, dir_cap, "%s/local-test-XXXXXX", BUILD_DIR);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(copy, copy_cap, "%s/sbx-local.so", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", SBX_LOCAL_SO, copy);
	cr_assert_eq(system(cmd), 0);
}

/* A plugin installed without sbx-local-exec beside it: an exec under the subreaper fails with
 * what to do, and loses nothing (the sandbox stays usable through files). */
Test(local_exec, subreaper_without_its_helper_says_so)
{
	char dir[600], copy[700];
	copy_plugin_alone(dir, sizeof(dir), copy, sizeof(copy));
	load_from(copy, "subreaper");
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "echo hi", 0, &c, &o), SBX_E_IO);
	cr_assert_str_eq(err.message, "local: exec: the subreaper helper sbx-local-exec is not "
				      "beside the plugin; reinstall sbx's local plugin");
	cr_assert_eq(desc.write_file(state, id, "f", "x", 1, 0600, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	unload();
	remove_folder(dir);
}

/* Loads the plugin at so with isolation: namespaces; returns init's status (err holds its
 * message), the plugin loaded either way. */
static int load_isolated(const char *so)
{
	open_plugin(so);
	sbx_config cfg = {.keys = {"isolation"}, .values = {"namespaces"}, .n = 1};
	return desc.init(&cfg, &state, &err);
}

/* The isolated level without sbx-local-init beside the plugin: the plugin refuses the config
 * with what to do (it would otherwise have to copy the host to build each sandbox). */
Test(local_plugin, isolation_without_its_init_says_so)
{
	int rc = load_isolated(SBX_LOCAL_SO);
	if (rc != SBX_OK) {
		dlclose(dl);
		cr_skip_test("%s", err.message); /* the level cannot run on this machine */
	}
	unload();
	char dir[600], copy[700];
	copy_plugin_alone(dir, sizeof(dir), copy, sizeof(copy));
	cr_assert_eq(load_isolated(copy), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "local: isolation: namespaces needs sbx-local-init beside "
				      "the plugin, and it is not there; reinstall sbx's local "
				      "plugin");
	dlclose(dl);
	remove_folder(dir);
}

Test(local_exec, cgroup_command_parent_is_the_host)
{
	char want[1024];
	ssize_t n = readlink("/proc/self/exe", want, sizeof(want) - 1);
	cr_assert_gt(n, 0);
	want[n] = '\0';
	check_command_parent("auto", want);
}

/* The process holding the other end of pipe inode `pipe` at descriptor 3 or 4 (the sink's
 * layout), 0 when none. */
static pid_t holder_of(const char *pipe)
{
	pid_t found = 0;
	FILE *ls = popen("ls /proc", "r");
	cr_assert_not_null(ls);
	char name[64];
	while (!found && fgets(name, sizeof(name), ls)) {
		name[strcspn(name, "\n")] = '\0';
		if (name[0] < '0' || name[0] > '9')
			continue;
		for (int fd = 3; fd <= 4 && !found; fd++) {
			char path[128], target[128];
			snprintf(path, sizeof(path), "/proc/%s/fd/%d", name, fd);
			ssize_t n = readlink(path, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			if (strcmp(target, pipe) == 0)
				found = (pid_t)atol(name);
		}
	}
	pclose(ls);
	return found;
}

/* A leftover that keeps the command's stdout gets a sink: sbx-local-exec -s, holding the
 * read end, with none of the host's other descriptors; destroy ends it with the leftover. */
static void check_sink(const char *mechanism)
{
	load(mechanism);
	char id[64];
	create(id);
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "sleep 30 & echo $!", 0, &c, &o), SBX_OK, "%s", err.message);
	cr_assert_eq(o.exit_code, 0);
	pid_t leftover = (pid_t)atol(c.out);
	cr_assert_gt(leftover, 0, "%s", c.out);
	char path[128], pipe[128];
	snprintf(path, sizeof(path), "/proc/%ld/fd/1", (long)leftover);
	ssize_t n = readlink(path, pipe, sizeof(pipe) - 1);
	cr_assert_gt(n, 0, "%s", path);
	pipe[n] = '\0';
	cr_assert(strncmp(pipe, "pipe:[", 6) == 0, "%s", pipe);
	pid_t sink_pid = holder_of(pipe);
	cr_assert_gt(sink_pid, 0, "no process holds the read end of %s", pipe);
	char exe[1024], want[1024];
	snprintf(path, sizeof(path), "/proc/%ld/exe", (long)sink_pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	cr_assert_gt(n, 0);
	exe[n] = '\0';
	helper_path(want, sizeof(want));
	cr_assert_str_eq(exe, want);
	char cmdline[1200] = "";
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)sink_pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t got = fread(cmdline, 1, sizeof(cmdline) - 1, f);
	fclose(f);
	cr_assert_eq(got, strlen(want) + 4, "%zu bytes of cmdline", got);
	cr_assert_str_eq(cmdline + strlen(want) + 1, "-s");
	/* Its descriptors: /dev/null on 0-2 and the two read ends, nothing of the host's. */
	snprintf(path, sizeof(path), "/proc/%ld/fd/5", (long)sink_pid);
	cr_assert_eq(access(path, F_OK), -1, "%s is open", path);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "%s", err.message);
	int gone = 0;
	for (int i = 0; i < 500 && !gone; i++) {
		gone = is_dead(sink_pid) && is_dead(leftover);
		if (!gone)
			usleep(10000);
	}
	cr_assert(gone, "the sink %ld or the leftover %ld outlived destroy", (long)sink_pid,
		  (long)leftover);
	unload();
}

Test(local_exec, sink_is_its_own_program_v2, .timeout = 30)
{
	check_sink("cgroup-v2");
}

Test(local_exec, sink_is_its_own_program_subreaper, .timeout = 30)
{
	check_sink("subreaper");
}

/* ---- files */

static void check_files(void)
{
	char id[64];
	create(id);
	const char bytes[] = "a\0b\xff\xfe";
	cr_assert_eq(desc.write_file(state, id, "d/e/f.bin", bytes, 5, 0600, &err), SBX_OK, "%s",
		     err.message);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(desc.read_file(state, id, "d/e/f.bin", &data, &len, &err), SBX_OK);
	cr_assert_eq(len, 5);
	cr_assert_arr_eq(data, bytes, 5);
	free(data);
	sbx_file_info info = {0};
	SBX_INIT_HEADER(info);
	cr_assert_eq(desc.stat_file(state, id, "d/e/f.bin", &info, &err), SBX_OK);
	cr_assert_eq(info.kind, SBX_FILE_REGULAR);
	cr_assert_eq(info.size, 5);
	cr_assert_eq(info.mode, 0600);
	cr_assert_str_eq(info.name, "f.bin");
	sbx_file_info *ents = NULL;
	size_t n = 0;
	cr_assert_eq(desc.make_dir(state, id, "d/a", 0, &err), SBX_OK);
	cr_assert_eq(desc.make_dir(state, id, "d/a", 0, &err), SBX_E_EXISTS);
	cr_assert_eq(desc.list_dir(state, id, "d", &ents, &n, &err), SBX_OK);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(ents[0].name, "a");
	cr_assert_eq(ents[0].kind, SBX_FILE_DIR);
	cr_assert_str_eq(ents[1].name, "e");
	free(ents);
	/* Escapes: `..`, an absolute symlink, a relative symlink climbing out. */
	cr_assert_eq(desc.read_file(state, id, "../meta.json", &data, &len, &err), SBX_E_PATH);
	cr_assert(strstr(err.message, "'../meta.json'"), "%s", err.message);
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "ln -s /etc etc; ln -s ../.. up; ln -s d/e inside", 0, &c, &o),
		     SBX_OK);
	cr_assert_eq(desc.read_file(state, id, "etc/passwd", &data, &len, &err), SBX_E_PATH);
	cr_assert_eq(desc.write_file(state, id, "up/evil", "x", 1, 0, &err), SBX_E_PATH);
	cr_assert_eq(desc.read_file(state, id, "/etc/passwd", &data, &len, &err), SBX_E_PATH);
	cr_assert_eq(desc.read_file(state, id, "inside/f.bin", &data, &len, &err), SBX_OK);
	free(data);
	cr_assert_eq(desc.read_file(state, id, "nope", &data, &len, &err), SBX_E_NO_FILE);
	/* Removing a symlink removes the link, never its target. */
	cr_assert_eq(desc.remove_path(state, id, "etc", 0, &err), SBX_OK);
	cr_assert_eq(access("/etc/passwd", F_OK), 0);
	cr_assert_eq(desc.remove_path(state, id, "d", 0, &err), SBX_E_INVAL);
	cr_assert_eq(desc.remove_path(state, id, "d", 1, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(desc.stat_file(state, id, "d", &info, &err), SBX_E_NO_FILE);
	cr_assert_eq(desc.remove_path(state, id, ".", 1, &err), SBX_E_PATH);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	cr_assert_eq(desc.read_file(state, id, "x", &data, &len, &err), SBX_E_NOT_FOUND);
}

Test(local_files, confined_openat2)
{
	load("auto");
	check_files();
	unload();
}

Test(local_files, confined_component_walk)
{
	setenv("SBX_LOCAL_NO_OPENAT2", "1", 1);
	load("auto");
	check_files();
	unload();
	unsetenv("SBX_LOCAL_NO_OPENAT2");
}

/* ---- lifecycle */

static int collect(void *ctx, const char *id)
{
	snprintf(ctx, 64, "%s", id);
	return 0;
}

Test(local_lifecycle, pause_resume_status_labels_info, .timeout = 20)
{
	load("cgroup-v1-freezer");
	char id[64];
	create(id);
	uint32_t s = 0;
	cr_assert_eq(desc.status(state, id, &s, &err), SBX_OK);
	cr_assert_eq(s, SBX_STATE_RUNNING);
	cr_assert_eq(desc.pause(state, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(desc.status(state, id, &s, &err), SBX_OK);
	cr_assert_eq(s, SBX_STATE_PAUSED);
	capture c;
	sbx_exec_outcome o;
	cr_assert_eq(run(id, "true", 0, &c, &o), SBX_E_PAUSED);
	cr_assert_eq(desc.resume(state, id, &err), SBX_OK);
	cr_assert_eq(run(id, "echo back", 0, &c, &o), SBX_OK);
	cr_assert_str_eq(c.out, "back\n");
	char found[64] = "";
	cr_assert_eq(desc.list_by_label(state, "sbx.run", "r1", collect, found, &err), SBX_OK);
	cr_assert_str_eq(found, id);
	found[0] = '\0';
	cr_assert_eq(desc.list_by_label(state, "sbx.run", "other", collect, found, &err), SBX_OK);
	cr_assert_str_eq(found, "");
	char *json = NULL;
	cr_assert_eq(desc.info(state, &json, &err), SBX_OK);
	cr_assert(strstr(json, "\"kill_mechanism\":\"cgroup-v1-freezer\""), "%s", json);
	free(json);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	cr_assert_eq(desc.status(state, id, &s, &err), SBX_OK);
	cr_assert_eq(s, SBX_STATE_GONE);
	cr_assert_eq(desc.execute(state, "zz", NULL, &o, &err), SBX_E_BAD_ID);
	unload();
}

Test(local_lifecycle, destroy_kills_paused_processes, .timeout = 20)
{
	load("subreaper");
	char *json = NULL;
	cr_assert_eq(desc.info(state, &json, &err), SBX_OK);
	cr_assert(strstr(json, "\"kill_mechanism\":\"subreaper\""), "%s", json);
	free(json);
	char id[64];
	create(id);
	cr_assert_eq(desc.pause(state, id, &err), SBX_E_UNSUPPORTED);
	cr_assert(strstr(err.message, "pause"), "%s", err.message);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK);
	unload();
}

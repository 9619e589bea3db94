/* Faulty plugins through the C API. `inproc/`: what the host does with an in-process plugin's
 * out-of-range outcomes and late output callbacks. `process/`: the same plugin in a runner,
 * where crashes, exits and hangs become statuses. The registry comes from $FAULTS_REGISTRY
 * ($FAULTS_TIGHT_REGISTRY: a runner with a one-second timeout that may die twice). */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fork_tests.h"
#include "host_internal.h"

static const char *config_text = "data_source:\n"
				 "  sandbox:\n"
				 "    type: rogue\n"
				 "data_sources:\n"
				 "  - name: good\n"
				 "    sandbox:\n"
				 "      type: ok\n";

static int counter;

static char state_dir[600];
static int go_w = -1; /* harness_forks: the worker ends when this closes */

static sbx_host *host_with(const char *registry_env, const char *config)
{
	snprintf(state_dir, sizeof(state_dir), "%s/faults-%d-%d", RUNNER_TMP, (int)getpid(),
		 ++counter);
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = getenv(registry_env);
	cr_assert_not_null(o.registry_path, "%s is not set", registry_env);
	o.config_text = config;
	o.state_dir = state_dir;
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	return h;
}

static sbx_host *new_host(void)
{
	return host_with("FAULTS_REGISTRY", config_text);
}

static void create(sbx_host *h, const char *ds, char id[SBX_ID_MAX])
{
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.data_source = ds;
	sbx_error err = {0};
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_OK, "%s", err.message);
}

/* Runs shell in id; returns the status, the result in *res when SBX_OK. */
static int run(sbx_host *h, const char *id, const char *shell, sbx_exec_result **res,
	       sbx_error *err)
{
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = shell;
	eo.timeout = -1;
	*res = NULL;
	return sbx_exec(h, id, &eo, res, err);
}

static void expect_output(sbx_host *h, const char *id, const char *shell, const char *out)
{
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(run(h, id, shell, &r, &err), SBX_OK, "%s: %s", shell, err.message);
	cr_assert_str_eq(r->stdout_text, out, "%s", shell);
	cr_assert_eq(r->exit_code, 0);
	sbx_exec_result_free(r);
}

static void expect_failure(sbx_host *h, const char *id, const char *shell, int status,
			   const char *message)
{
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	int rc = run(h, id, shell, &r, &err);
	cr_assert_eq(rc, status, "%s: %s (%s)", shell, sbx_status_name(rc), err.message);
	cr_assert_null(r);
	if (message)
		cr_assert_str_eq(err.message, message, "%s", shell);
}

/* Reads fd until its end or cap bytes; returns how many. */
static size_t read_fully(int fd, void *buf, size_t cap)
{
	size_t got = 0;
	ssize_t k;
	while (got < cap && (k = read(fd, (char *)buf + got, cap - got)) > 0)
		got += (size_t)k;
	return got;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

Test(inproc, late_output_callbacks_reach_no_call)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(run(h, id, "late", &r, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(r->stdout_text, "on time\n");
	char path[1024];
	snprintf(path, sizeof(path), "%s", r->stdout_file);
	sbx_exec_result_free(r);
	/* The plugin's thread keeps calling back for 300 ms while later calls run; none of its
	 * bytes may land in them, nor in the finished call's file. */
	expect_output(h, id, "sleep 150", "slept\n");
	expect_output(h, id, "sleep 200", "slept\n");
	sleep_ms(100);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	char buf[64] = {0};
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	cr_assert_eq(n, 8);
	cr_assert_str_eq(buf, "on time\n");
	sbx_host_free(h);
}

Test(inproc, out_of_range_outcomes_are_refused_naming_the_plugin)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "bad-exit", SBX_E_BACKEND,
		       "rogue: exec: plugin reported exit code 1000, outside -1..255");
	expect_failure(h, id, "bad-signal", SBX_E_BACKEND,
		       "rogue: exec: plugin reported signal -3, outside 0..64");
	expect_failure(h, id, "bad-timed-out", SBX_E_BACKEND,
		       "rogue: exec: plugin reported timed_out 7, expected 0 or 1");
	expect_output(h, id, "still fine", "still fine\n");
	sbx_host_free(h);
}

Test(inproc, statuses_that_are_not_sbx_statuses_become_backend_errors)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "bad-status", SBX_E_BACKEND,
		       "rogue: exec: plugin returned -7, which is not an sbx failure status");
	expect_failure(h, id, "huge-status", SBX_E_BACKEND,
		       "rogue: exec: plugin returned 99999, which is not an sbx failure status");
	sbx_host_free(h);
}

Test(inproc, output_on_an_unknown_stream_is_refused)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "bad-stream", SBX_E_INVAL, "rogue: exec: invalid argument");
	sbx_host_free(h);
}

/* The rules of plugin.h that both ways of running a plugin enforce alike. */
typedef struct ids_seen {
	char ids[8][16];
	int n;
} ids_seen;

static int on_id(void *ctx, const char *id)
{
	ids_seen *s = ctx;
	if (s->n < 8)
		snprintf(s->ids[s->n++], sizeof(s->ids[0]), "%s", id);
	return SBX_OK;
}

static void buffers_and_ids_are_checked(void)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "null-data", SBX_E_INVAL, "rogue: exec: invalid argument");
	void *data = NULL;
	size_t len = 0;
	sbx_error err = {0};
	cr_assert_eq(sbx_read_file(h, id, "nobuf", &data, &len, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "rogue: read_file: plugin returned 5 bytes but no buffer");
	cr_assert_eq(sbx_read_file(h, id, "/a/b", &data, &len, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(len, 4);
	cr_assert_str_eq(data, "/a/b");
	sbx_free(data);
	sbx_file_info *v = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_list_dir(h, id, "nobuf", &v, &n, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "rogue: list_dir: plugin returned 3 entries but no array");
	cr_assert_eq(sbx_list_dir(h, id, "x.txt", &v, &n, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(v[0].name, "x.txt");
	cr_assert_eq(v[0].size, 5);
	sbx_free(v);
	ids_seen s;
	memset(&s, 0, sizeof(s));
	cr_assert_eq(sbx__host_list_by_label(h, "rogue", "k", "v", on_id, &s, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.ids[0], "r-a");
	cr_assert_str_eq(s.ids[1], "r-b");
	sbx_host_free(h);
}

Test(inproc, bad_buffers_and_ids_are_refused)
{
	buffers_and_ids_are_checked();
}

Test(inproc, unknown_sandbox_state_is_refused)
{
	sbx_host *h = new_host();
	uint32_t st = 99;
	sbx_error err = {0};
	cr_assert_eq(sbx_status(h, "rogue:x-bad", &st, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message,
			 "rogue: status: plugin reported state 77, not an SBX_STATE_* value");
	cr_assert_eq(st, SBX_STATE_UNKNOWN);
	cr_assert_eq(sbx_status(h, "rogue:x", &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	sbx_host_free(h);
}

/* ---- process: the fixture in a runner */

static long runner_pid(sbx_host *h, const char *id)
{
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(run(h, id, "pid", &r, &err), SBX_OK, "%s", err.message);
	long pid = strtol(r->stdout_text, NULL, 10);
	sbx_exec_result_free(r);
	cr_assert_gt(pid, 1);
	cr_assert_neq(pid, (long)getpid(), "the plugin runs in the caller");
	return pid;
}

/* msg is before + a decimal pid + after; returns the pid. */
static long pid_between(const char *msg, const char *before, const char *after)
{
	size_t b = strlen(before), a = strlen(after), n = strlen(msg);
	cr_assert(n > a + b && strncmp(msg, before, b) == 0 && strcmp(msg + n - a, after) == 0,
		  "message `%s` is not `%s<pid>%s`", msg, before, after);
	char *end = NULL;
	long pid = strtol(msg + b, &end, 10);
	cr_assert(pid > 1 && end == msg + n - a, "message `%s` has no pid", msg);
	return pid;
}

static long expect_crash(sbx_host *h, const char *id, const char *shell, const char *after)
{
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	int rc = run(h, id, shell, &r, &err);
	cr_assert_eq(rc, SBX_E_PLUGIN_CRASHED, "%s: %s (%s)", shell, sbx_status_name(rc),
		     err.message);
	cr_assert_null(r);
	return pid_between(err.message, "rogue: exec: plugin crashed: its runner (pid ", after);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(process, crashes_become_statuses_and_the_next_call_starts_a_fresh_runner)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX], good[SBX_ID_MAX];
	create(h, NULL, id);
	create(h, "good", good);
	long p1 = runner_pid(h, id);
	cr_assert_eq(expect_crash(h, id, "segv", ") was killed by signal 11 (SIGSEGV)"), p1);
	long p2 = runner_pid(h, id);
	cr_assert_neq(p2, p1);
	cr_assert_eq(expect_crash(h, id, "abort", ") was killed by signal 6 (SIGABRT)"), p2);
	long p3 = runner_pid(h, id);
	cr_assert_eq(expect_crash(h, id, "exit 3", ") exited with status 3"), p3);
	/* The sandbox made by the first runner is reached through the fourth. */
	expect_output(h, id, "still here", "still here\n");
	expect_output(h, good, "other alias", "other alias\n");
	sbx_host_free(h);
}

typedef struct parked {
	sbx_host *h;
	const char *id;
	char shell[700];
	int rc;
	sbx_error err;
} parked;

static void *park(void *arg)
{
	parked *p = arg;
	sbx_exec_result *r = NULL;
	p->rc = run(p->h, p->id, p->shell, &r, &p->err);
	sbx_exec_result_free(r);
	return NULL;
}

static void wait_for_file(const char *path)
{
	struct stat st;
	for (int i = 0; i < 6000 && stat(path, &st) != 0; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	cr_assert_eq(stat(path, &st), 0, "%s never appeared", path);
}

Test(process, every_call_in_flight_fails_when_the_runner_dies)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	long pid = runner_pid(h, id);
	parked p[3];
	pthread_t t[3];
	for (int i = 0; i < 3; i++) {
		memset(&p[i], 0, sizeof(p[i]));
		p[i].h = h;
		p[i].id = id;
		snprintf(p[i].shell, sizeof(p[i].shell), "park %s/parked-%d", state_dir, i);
		cr_assert_eq(pthread_create(&t[i], NULL, park, &p[i]), 0);
	}
	for (int i = 0; i < 3; i++)
		wait_for_file(p[i].shell + 5);
	cr_assert_eq(expect_crash(h, id, "segv", ") was killed by signal 11 (SIGSEGV)"), pid);
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(p[i].rc, SBX_E_PLUGIN_CRASHED, "%s", p[i].err.message);
		cr_assert_eq(pid_between(p[i].err.message,
					 "rogue: exec: plugin crashed: its runner (pid ",
					 ") was killed by signal 11 (SIGSEGV)"),
			     pid);
	}
	expect_output(h, id, "after", "after\n");
	sbx_host_free(h);
}

Test(process, a_hung_exec_is_killed_at_its_timeout_plus_the_grace_period)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	long pid = runner_pid(h, id);
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = "hang";
	eo.timeout = 0.5;
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	double t0 = now();
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_E_PLUGIN_CRASHED, "%s", err.message);
	double took = now() - t0;
	cr_assert_eq(pid_between(err.message, "rogue: exec: plugin hung: its runner (pid ",
				 ") was killed: a call to exec did not return within its "
				 "timeout (0.5 s) plus the grace period (1 s)"),
		     pid);
	cr_assert_geq(took, 1.5);
	cr_assert_lt(took, 60);
	expect_output(h, id, "after", "after\n");
	sbx_host_free(h);
}

typedef struct row_seen {
	char state[32];
	char error[512];
	int n;
} row_seen;

static int on_row(void *ctx, const sbx_sandbox_record *rec)
{
	row_seen *s = ctx;
	if (strcmp(rec->alias, "rogue") != 0)
		return 0;
	s->n++;
	snprintf(s->state, sizeof(s->state), "%s", rec->state);
	snprintf(s->error, sizeof(s->error), "%s", rec->error ? rec->error : "");
	return 0;
}

static void create_fails(sbx_host *h, const char *image, int status, char *msg, size_t cap)
{
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.image = image;
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	cr_assert_eq(sbx_create(h, &co, id, &err), status, "%s", err.message);
	cr_assert_str_eq(id, "");
	snprintf(msg, cap, "%s", err.message);
}

Test(process, a_crashed_create_leaves_a_failed_ledger_row)
{
	sbx_host *h = new_host();
	char msg[512];
	create_fails(h, "segv", SBX_E_PLUGIN_CRASHED, msg, sizeof(msg));
	pid_between(msg, "rogue: create: plugin crashed: its runner (pid ",
		    ") was killed by signal 11 (SIGSEGV)");
	row_seen s;
	memset(&s, 0, sizeof(s));
	sbx_error err = {0};
	cr_assert_eq(sbx_ledger_list(h, on_row, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.state, "failed");
	cr_assert_str_eq(s.error, msg);
	sbx_host_free(h);
}

Test(process, a_call_without_a_timeout_is_killed_at_the_runner_timeout)
{
	sbx_host *h = host_with("FAULTS_TIGHT_REGISTRY", config_text);
	char msg[512];
	double t0 = now();
	create_fails(h, "hang", SBX_E_PLUGIN_CRASHED, msg, sizeof(msg));
	cr_assert_geq(now() - t0, 1.0);
	pid_between(msg, "rogue: create: plugin hung: its runner (pid ",
		    ") was killed: a call to create did not return within the runner timeout "
		    "(1 s)");
	row_seen s;
	memset(&s, 0, sizeof(s));
	sbx_error err = {0};
	cr_assert_eq(sbx_ledger_list(h, on_row, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(s.state, "failed");
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_host_free(h);
}

Test(process, repeated_crashes_leave_the_alias_faulty_and_others_working)
{
	sbx_host *h = host_with("FAULTS_TIGHT_REGISTRY", config_text);
	char id[SBX_ID_MAX], good[SBX_ID_MAX];
	create(h, NULL, id);
	create(h, "good", good);
	expect_crash(h, id, "segv", ") was killed by signal 11 (SIGSEGV)");
	expect_crash(h, id, "abort", ") was killed by signal 6 (SIGABRT)");
	const char *reason = "rogue: plugin is faulty: its runner died 2 times within 600 s "
			     "(last: was killed by signal 6 (SIGABRT)); it is not restarted";
	expect_failure(h, id, "echo", SBX_E_FAULTY, reason);
	int found = 0;
	for (size_t i = 0; i < sbx_plugin_count(h); i++) {
		sbx_plugin_info info;
		memset(&info, 0, sizeof(info));
		SBX_INIT_HEADER(info);
		cr_assert_eq(sbx_plugin_get(h, i, &info, NULL), SBX_OK);
		if (strcmp(info.alias, "rogue") != 0)
			continue;
		found = 1;
		cr_assert_eq(info.state, SBX_PLUGIN_FAULTY);
		cr_assert_str_eq(info.reason, reason);
	}
	cr_assert(found);
	expect_output(h, good, "other alias", "other alias\n");
	sbx_host_free(h);
}

Test(process, a_restart_after_repeated_crashes_waits)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_crash(h, id, "segv", ") was killed by signal 11 (SIGSEGV)");
	expect_crash(h, id, "segv", ") was killed by signal 11 (SIGSEGV)");
	/* Two deaths in the window: the next runner starts 100 ms after the last one. */
	double t0 = now();
	expect_output(h, id, "after", "after\n");
	cr_assert_geq(now() - t0, 0.1);
	sbx_host_free(h);
}

/* Resident memory of pid in KiB, from /proc. */
static long rss_kib(long pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	long kib = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static long peak_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

Test(process, memory_a_plugin_keeps_stays_in_its_runner)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	long pid = runner_pid(h, id);
	long before = peak_kib();
	for (int i = 0; i < 3; i++)
		expect_output(h, id, "leak", "leaked\n");
	cr_assert_lt(peak_kib() - before, 16 * 1024, "the caller grew by %ld KiB",
		     peak_kib() - before);
	cr_assert_geq(rss_kib(pid), 96 * 1024);
	cr_assert_eq(runner_pid(h, id), pid);
	sbx_host_free(h);
}

Test(process, late_output_callbacks_reach_no_call)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(run(h, id, "late", &r, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(r->stdout_text, "on time\n");
	sbx_exec_result_free(r);
	expect_output(h, id, "sleep 150", "slept\n");
	expect_output(h, id, "sleep 200", "slept\n");
	sbx_host_free(h);
}

Test(process, out_of_range_outcomes_are_refused_as_in_process)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "bad-exit", SBX_E_BACKEND,
		       "rogue: exec: plugin reported exit code 1000, outside -1..255");
	expect_failure(h, id, "bad-signal", SBX_E_BACKEND,
		       "rogue: exec: plugin reported signal -3, outside 0..64");
	expect_failure(h, id, "bad-timed-out", SBX_E_BACKEND,
		       "rogue: exec: plugin reported timed_out 7, expected 0 or 1");
	expect_failure(h, id, "bad-status", SBX_E_BACKEND,
		       "rogue: exec: plugin returned -7, which is not an sbx failure status");
	expect_failure(h, id, "bad-stream", SBX_E_INVAL, "rogue: exec: invalid argument");
	uint32_t st = 99;
	sbx_error err = {0};
	cr_assert_eq(sbx_status(h, "rogue:x-bad", &st, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message,
			 "rogue: status: plugin reported state 77, not an SBX_STATE_* value");
	expect_output(h, id, "still fine", "still fine\n");
	sbx_host_free(h);
}

Test(process, bad_buffers_and_ids_are_refused_as_in_process)
{
	buffers_and_ids_are_checked();
}

Test(process, the_plugins_own_stdout_is_not_the_callers)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_output(h, id, "garbage", "clean\n");
	sbx_host_free(h);
}

Test(process, a_runner_that_sends_garbage_is_killed)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_crash(h, id, "scribble", ") was killed after it sent a frame for no call in flight");
	expect_output(h, id, "after", "after\n");
	sbx_host_free(h);
}

Test(process, the_services_table_works_in_the_runner)
{
	sbx_host *h = host_with("FAULTS_REGISTRY", "data_source:\n"
						   "  sandbox:\n"
						   "    type: rogue\n"
						   "    greeting: hi there\n"
						   "    count: 31\n");
	char id[SBX_ID_MAX], want[700];
	create(h, NULL, id);
	expect_output(h, id, "greeting", "hi there\n");
	/* Typed values are converted in the runner as in the host. */
	expect_output(h, id, "count", "31\n");
	snprintf(want, sizeof(want), "%s/plugins\n", state_dir);
	expect_output(h, id, "state-dir", want);
	expect_output(h, id, "state-dir-for", want);
	/* sandbox_info travels too: the pid in it is the runner's, not this process's. */
	char *json = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_sandbox_info(h, id, &json, &err), SBX_OK, "%s", err.message);
	char head[SBX_ID_MAX + 40];
	snprintf(head, sizeof(head), "{\"id\":\"%s\",\"pid\":", strchr(id, ':') + 1);
	cr_assert_eq(strncmp(json, head, strlen(head)), 0, "%s", json);
	cr_assert_neq(atol(json + strlen(head)), (long)getpid(), "%s", json);
	cr_assert_gt(atol(json + strlen(head)), 1, "%s", json);
	sbx_free(json);
	/* A fresh runner gets the same config. */
	expect_crash(h, id, "segv", ") was killed by signal 11 (SIGSEGV)");
	expect_output(h, id, "greeting", "hi there\n");
	sbx_host_free(h);
}

Test(process, stdin_and_output_travel_in_bounded_chunks)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	size_t n = (3u << 20) + 5;
	char *in = malloc(n);
	cr_assert_not_null(in);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)('a' + i % 23);
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = "echo-back";
	eo.timeout = -1;
	eo.has_stdin = 1;
	eo.stdin_data = in;
	eo.stdin_len = n;
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(r->stdout_bytes, 9 + n + 1);
	FILE *f = fopen(r->stdout_file, "rb");
	cr_assert_not_null(f);
	char *out = malloc(n + 16);
	cr_assert_eq(fread(out, 1, n + 16, f), 9 + n + 1);
	fclose(f);
	cr_assert_eq(memcmp(out, "echo-back", 9), 0);
	cr_assert_eq(memcmp(out + 9, in, n), 0);
	cr_assert_eq(out[9 + n], '\n');
	free(out);
	free(in);
	sbx_exec_result_free(r);
	sbx_host_free(h);
}

typedef struct worker {
	sbx_host *h;
	const char *id;
	int n, bad;
	char why[600];
} worker;

static void *many(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < 25; i++) {
		char cmd[64], want[70];
		snprintf(cmd, sizeof(cmd), "w%d-%d", w->n, i);
		snprintf(want, sizeof(want), "%s\n", cmd);
		sbx_exec_result *r = NULL;
		sbx_error err = {0};
		int rc = run(w->h, w->id, cmd, &r, &err);
		if (rc != SBX_OK || strcmp(r->stdout_text, want) != 0) {
			w->bad++;
			snprintf(w->why, sizeof(w->why), "%s: %s", cmd,
				 rc == SBX_OK ? r->stdout_text : err.message);
		}
		sbx_exec_result_free(r);
	}
	return NULL;
}

Test(process, concurrent_calls_share_one_runner)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	long pid = runner_pid(h, id);
	worker w[8];
	pthread_t t[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (worker){.h = h, .id = id, .n = i};
		cr_assert_eq(pthread_create(&t[i], NULL, many, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		cr_assert_eq(w[i].bad, 0, "%s", w[i].why);
	}
	cr_assert_eq(runner_pid(h, id), pid);
	sbx_host_free(h);
}

Test(process, a_missing_runner_leaves_the_alias_faulty_with_the_reason)
{
	setenv("SBX_RUNNER", "/nonexistent/sbx-runner", 1);
	sbx_host *h = new_host();
	char msg[512], good[SBX_ID_MAX];
	create_fails(h, NULL, SBX_E_IO, msg, sizeof(msg));
	cr_assert_str_eq(msg, "rogue: runner: /nonexistent/sbx-runner not found (install "
			      "sbx-runner beside the plugins, or set runner: inproc in the "
			      "registry)");
	create(h, "good", good);
	sbx_host_free(h);
	unsetenv("SBX_RUNNER");
}

Test(process, the_runner_ends_with_its_host)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	long pid = runner_pid(h, id);
	sbx_host_free(h);
	/* Reaped by the time sbx_host_free returns. */
	cr_assert_eq(kill((pid_t)pid, 0), -1);
	cr_assert_eq(errno, ESRCH);
}

/* A host that drops the connection without fini (it crashed, or exited early) still gets its
 * plugin states finished: the runner runs fini on each before it unloads the plugin and ends,
 * and has nothing left to leak. The child below builds a host, makes the runner init a state,
 * then closes every descriptor it has (the connection, and its stderr, which the runner
 * shares) and waits to be killed: the runner sees the connection end while its host lives. */
Test(process, states_a_vanished_host_left_are_finished)
{
	int rep[2], errp[2];
	cr_assert_eq(pipe(rep), 0);
	cr_assert_eq(pipe(errp), 0);
	pid_t c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		close(rep[0]);
		close(errp[0]);
		dup2(errp[1], 2);
		sbx_host *h = new_host();
		char cid[SBX_ID_MAX];
		create(h, NULL, cid);
		sbx_exec_result *r = NULL;
		sbx_error err = {0};
		if (run(h, cid, "state-dir-for", &r, &err) != SBX_OK)
			_exit(3);
		size_t n = strlen(r->stdout_text);
		if (write(rep[1], r->stdout_text, n) != (ssize_t)n)
			_exit(4);
		for (int fd = 2; fd < 1024; fd++)
			close(fd);
		for (;;)
			pause();
	}
	close(rep[1]);
	close(errp[1]);
	char dir[4200] = "";
	size_t got = read_fully(rep[0], dir, sizeof(dir) - 1);
	dir[got] = '\0';
	close(rep[0]);
	cr_assert(got > 1 && dir[got - 1] == '\n', "the child reported no state dir: '%s'", dir);
	dir[got - 1] = '\0';
	/* The runner holds the other end of errp until it ends. */
	static char text[65536];
	got = read_fully(errp[0], text, sizeof(text) - 1);
	text[got] = '\0';
	close(errp[0]);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	cr_assert_null(strstr(text, "LeakSanitizer: detected memory leaks"), "%s", text);
	char mark[4300];
	snprintf(mark, sizeof(mark), "%s/finished", dir);
	struct stat sb;
	cr_assert_eq(stat(mark, &sb), 0, "fini left no %s: %s", mark, strerror(errno));
}

/* A harness that forks a worker (Python's multiprocessing does) holding copies of every
 * descriptor, the runner's connection among them; then the harness frees its host (free) or
 * vanishes without freeing it. Either way its runner ends while the worker lives: sbx_host_free
 * shuts the connection down, which reaches the runner through any copy, and the runner ends
 * without the host waiting out the grace period (30 s in $FAULTS_FORK_REGISTRY); a vanished
 * host is seen on the runner's pidfd of it. Returns the runner's pid; *kid is the worker,
 * blocked until go_w closes; *free_ms is how long sbx_host_free took. */
static long harness_forks(int free_host, long *kid, long *free_ms)
{
	int rep[2], go[2];
	cr_assert_eq(pipe(rep), 0);
	cr_assert_eq(pipe(go), 0);
	pid_t c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		close(rep[0]);
		close(go[1]);
		sbx_host *h = host_with("FAULTS_FORK_REGISTRY", config_text);
		char cid[SBX_ID_MAX];
		create(h, NULL, cid);
		long rep_v[3] = {runner_pid(h, cid), 0, 0};
		pid_t w = fork();
		if (w == 0) {
			char b;
			ssize_t k = read(go[0], &b, 1); /* until the test closes its end */
			_exit(k == 0 ? 0 : 5);
		}
		rep_v[1] = (long)w;
		if (free_host) {
			double t0 = now();
			sbx_host_free(h);
			rep_v[2] = (long)((now() - t0) * 1000);
		}
		if (w < 0 || write(rep[1], rep_v, sizeof(rep_v)) != (ssize_t)sizeof(rep_v))
			_exit(4);
		_exit(0);
	}
	close(rep[1]);
	close(go[0]);
	long v[3] = {0, 0, 0};
	size_t got = read_fully(rep[0], v, sizeof(v));
	close(rep[0]);
	int status = 0;
	cr_assert_eq(waitpid(c, &status, 0), c);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the harness failed: %d", status);
	cr_assert_eq(got, sizeof(v));
	cr_assert_gt(v[0], 1);
	cr_assert_gt(v[1], 1);
	*kid = v[1];
	*free_ms = v[2];
	go_w = go[1];
	return v[0];
}

/* Whether process pid ends within ms (it is not the caller's child). */
static int ends_within(long pid, int ms)
{
	int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	if (pidfd < 0)
		return errno == ESRCH;
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int ended = poll(&p, 1, ms) == 1;
	close(pidfd);
	return ended;
}

Test(process, a_fork_of_a_freed_host_keeps_no_runner_alive)
{
	SKIP_FORK_UNDER_ASAN();
	long kid = 0, free_ms = 0;
	long runner = harness_forks(1, &kid, &free_ms);
	/* sbx_host_free reaped it, and it had ended by itself: no wait for the 30 s grace. */
	cr_assert_eq(kill((pid_t)runner, 0), -1);
	cr_assert_lt(free_ms, 10000, "sbx_host_free took %ld ms", free_ms); /* loose */
	cr_assert_eq(kill((pid_t)kid, 0), 0, "the worker is gone: %s", strerror(errno));
	close(go_w);
}

Test(process, a_fork_of_a_vanished_host_keeps_no_runner_alive)
{
	SKIP_FORK_UNDER_ASAN();
	long kid = 0, free_ms = 0;
	long runner = harness_forks(0, &kid, &free_ms);
	int ended = ends_within(runner, 30000); /* loose: it goes as soon as it sees the host go */
	cr_assert_eq(kill((pid_t)kid, 0), 0, "the worker ended before the runner was seen");
	close(go_w);
	cr_assert(ended, "runner %ld lives on while its host's fork %ld does", runner, kid);
}

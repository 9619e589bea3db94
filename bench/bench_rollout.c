/* The main job: N tasks of create -> `echo hi` -> delete on `local`, at each concurrency given,
 * against a C floor in the same run:
 *   floor:     N x {mkdir, posix_spawn bash -c 'echo hi' read from a pipe, waitpid, rmdir} on
 *              as many threads;
 *   C API:     N x {sbx_create, sbx_exec, sbx_destroy} on as many threads, one host;
 *   rollout:   `sbx rollout --concurrency T` on a file of N such tasks;
 *   AsyncHost: (with SBX_BENCH_PYTHON=1) bench/rollout.py asynchost: N tasks as asyncio
 *              coroutines, at most T at once, through sbx.AsyncHost;
 *   NexAU:     (with SBX_BENCH_NEXAU=<checkout>) bench/rollout.py nexau: N tasks on T threads
 *              through NexAU's LocalSandboxManager (start, execute_bash, stop, rmtree), run
 *              by $SBX_BENCH_NEXAU_PYTHON (default python3.12) with the caller's PYTHONPATH
 *              (NexAU's dependencies or stand-ins for them).
 * Each concurrency runs its cases back to back, ROUNDS times, and prints the ratios to the
 * floor of the same round. Targets (issue 19): rollout <= 1.2x the floor at concurrency 64,
 * faster than NexAU; AsyncHost <= 1.1x the C API.
 *
 * `bench_rollout N ROUNDS T...` (defaults 1000 1 4 16 64). Sandboxes and the floor's folders
 * live under $SBX_STATE_DIR (put it on tmpfs). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

extern char **environ;

#define MAX_THREADS 1024

static int n_tasks;
static atomic_int next_task;
static atomic_int failures;
static const char *floor_dir;
static sbx_host *host;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void floor_task(int i)
{
	char dir[1200];
	snprintf(dir, sizeof(dir), "%s/task-%d", floor_dir, i);
	if (mkdir(dir, 0700) != 0) {
		atomic_fetch_add(&failures, 1);
		return;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		atomic_fetch_add(&failures, 1);
		return;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addchdir_np(&fa, dir);
	char *argv[] = {"bash", "-c", "echo hi", NULL};
	pid_t pid;
	int e = posix_spawn(&pid, "/bin/bash", &fa, NULL, argv, environ);
	close(p[1]);
	char buf[64];
	while (e == 0 && read(p[0], buf, sizeof(buf)) > 0)
		;
	close(p[0]);
	int status = 1;
	if (e == 0)
		waitpid(pid, &status, 0);
	posix_spawn_file_actions_destroy(&fa);
	if (status != 0 || rmdir(dir) != 0)
		atomic_fetch_add(&failures, 1);
}

static void capi_task(int i)
{
	(void)i;
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	int rc;
	/* A create past max_concurrency is refused at once: wait like `sbx rollout` would. */
	while ((rc = sbx_create(host, NULL, id, &err)) == SBX_E_LIMIT) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	if (rc != SBX_OK) {
		fprintf(stderr, "bench_rollout: create: %s\n", err.message);
		atomic_fetch_add(&failures, 1);
		return;
	}
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.shell = "echo hi";
	sbx_exec_result *r = NULL;
	if (sbx_exec(host, id, &o, &r, &err) != SBX_OK || r->exit_code != 0 ||
	    strcmp(r->stdout_text, "hi\n") != 0) {
		fprintf(stderr, "bench_rollout: exec: %s\n", err.message);
		atomic_fetch_add(&failures, 1);
	}
	sbx_exec_result_free(r);
	if (sbx_destroy(host, id, &err) != SBX_OK) {
		fprintf(stderr, "bench_rollout: destroy: %s\n", err.message);
		atomic_fetch_add(&failures, 1);
	}
}

typedef struct job {
	void (*task)(int);
} job;

static void *worker(void *arg)
{
	const job *j = arg;
	int i;
	while ((i = atomic_fetch_add(&next_task, 1)) < n_tasks)
		j->task(i);
	return NULL;
}

/* Seconds for all n_tasks of `task` on t threads. */
static double on_threads(void (*task)(int), int t)
{
	pthread_t th[MAX_THREADS];
	job j = {task};
	atomic_store(&next_task, 0);
	double t0 = now();
	int started = 0;
	for (; started < t; started++)
		if (pthread_create(&th[started], NULL, worker, &j) != 0)
			break;
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return now() - t0;
}

/* Seconds for a child process, or the figure it prints as "elapsed SECONDS" (a Python run
 * times its tasks only, not its interpreter's start and imports). */
static double run_child(char *const argv[])
{
	double t0 = now();
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return 0;
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	int e = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	char out[4096];
	size_t got = 0;
	ssize_t n;
	while ((n = read(p[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	int status = 1;
	if (e == 0)
		waitpid(pid, &status, 0);
	double t = now() - t0;
	if (e != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bench_rollout: %s failed (%s)\n", argv[0],
			e ? strerror(e) : "exit status");
		atomic_fetch_add(&failures, 1);
	}
	const char *el = strstr(out, "elapsed ");
	return el ? strtod(el + 8, NULL) : t;
}

static int write_tasks(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	for (int i = 0; i < n_tasks; i++)
		fprintf(f, "{\"id\": %d, \"commands\": [\"echo hi\"]}\n", i);
	return fclose(f);
}

static void report(const char *name, double t, double base, const char *base_name)
{
	printf("  %-10s %7.2f s  %5.0f tasks/s  %.2fx %s\n", name, t, n_tasks / t, t / base,
	       base_name);
}

int main(int argc, char **argv)
{
	n_tasks = argc > 1 ? atoi(argv[1]) : 1000;
	int rounds = argc > 2 ? atoi(argv[2]) : 1;
	int conc[16] = {4, 16, 64}, n_conc = 3;
	if (argc > 3) {
		n_conc = 0;
		for (int i = 3; i < argc && n_conc < 16; i++)
			conc[n_conc++] = atoi(argv[i]);
	}
	const char *state = getenv("SBX_STATE_DIR") ? getenv("SBX_STATE_DIR") : "/tmp";
	static char fdir[1000], tasks[1000];
	snprintf(fdir, sizeof(fdir), "%s/bench-rollout-floor", state);
	snprintf(tasks, sizeof(tasks), "%s/bench-rollout-tasks.jsonl", state);
	mkdir(state, 0700);
	if (mkdir(fdir, 0700) != 0 && errno != EEXIST) {
		perror(fdir);
		return 1;
	}
	floor_dir = fdir;
	if (write_tasks(tasks) != 0) {
		perror(tasks);
		return 1;
	}
	/* The children find this build's library and plugins. */
	setenv("SBX_LIBRARY", SBX_BENCH_LIBRARY, 0);
	sbx_error err = {0};
	if (sbx_host_new(NULL, &host, &err) != SBX_OK) {
		fprintf(stderr, "bench_rollout: %s\n", err.message);
		return 1;
	}
	const char *nexau = getenv("SBX_BENCH_NEXAU");
	const char *nexau_py = getenv("SBX_BENCH_NEXAU_PYTHON");
	int python = getenv("SBX_BENCH_PYTHON") && strcmp(getenv("SBX_BENCH_PYTHON"), "1") == 0;
	printf("bench_rollout: %d tasks of create -> echo hi -> delete, %d round(s)\n", n_tasks,
	       rounds);
	for (int c = 0; c < n_conc; c++) {
		int t = conc[c] < 1 ? 1 : conc[c] > MAX_THREADS ? MAX_THREADS : conc[c];
		char ts[16], ns[16];
		snprintf(ts, sizeof(ts), "%d", t);
		snprintf(ns, sizeof(ns), "%d", n_tasks);
		for (int r = 0; r < rounds; r++) {
			printf("concurrency %d, round %d\n", t, r + 1);
			double fl = on_threads(floor_task, t);
			report("floor", fl, fl, "floor");
			double capi = on_threads(capi_task, t);
			report("C API", capi, fl, "floor");
			char *roll[] = {SBX_BENCH_CLI, "rollout",   "--concurrency", ts,
					"--output",    "/dev/null", tasks,           NULL};
			report("rollout", run_child(roll), fl, "floor");
			if (python) {
				char *py[] = {"python3",   SBX_BENCH_SOURCE "/bench/rollout.py",
					      "asynchost", ns,
					      ts,          NULL};
				double a = run_child(py);
				report("AsyncHost", a, fl, "floor");
				printf("  %-10s %.2fx the C API\n", "", a / capi);
			}
			if (nexau) {
				char *py[] = {(char *)(nexau_py ? nexau_py : "python3.12"),
					      SBX_BENCH_SOURCE "/bench/rollout.py",
					      "nexau",
					      ns,
					      ts,
					      (char *)nexau,
					      NULL};
				report("NexAU", run_child(py), fl, "floor");
			}
		}
	}
	sbx_host_free(host);
	unlink(tasks);
	rmdir(fdir);
	if (atomic_load(&failures)) {
		fprintf(stderr, "bench_rollout: %d failures\n", atomic_load(&failures));
		return 1;
	}
	return 0;
}

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
 *              (NexAU's dependencies or stand-ins for them);
 *   NexAU/sbx: (with SBX_BENCH_NEXAU) the same tasks after the one-line swap to sbx's drop-in,
 *              sbx.adapters.nexau.SbxSandboxManager: what a NexAU user who switches gets.
 * Each concurrency runs its kinds back to back, ROUNDS times, each round starting one kind
 * further along (so load drift lands on all alike), and prints the ratios to the floor and
 * the C API of the same round, the load average, each kind's CPU per task (everything, the
 * commands included, and the host process's alone where it is known apart), the medians, and
 * each sbx kind against NexAU round by round.
 * Targets (issue 19): rollout <= 1.2x the floor at concurrency 64, faster than NexAU;
 * AsyncHost <= 1.1x the C API.
 *
 * `bench_rollout N ROUNDS T...` (defaults 1000 1 4 16 64). Sandboxes and the floor's folders
 * live under $SBX_STATE_DIR (put it on tmpfs). SBX_BENCH_COMMANDS=K runs K `echo hi` per task
 * (default 1) in every kind, as a rollout runs many commands per sandbox; SBX_BENCH_CONFIG=FILE
 * gives the C API, `sbx rollout` and AsyncHost that config (e.g. kill_mechanism: subreaper). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

extern char **environ;

#define MAX_THREADS 1024

static int n_tasks;
static int n_commands = 1; /* `echo hi` per task */
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

/* One floor command in dir: bash -c 'echo hi' read from a pipe; its wait status. */
static int floor_command(const char *dir)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addchdir_np(&fa, dir);
	/* In a session of its own, as sbx starts its commands: with scheduler autogroups a
	 * session is a scheduling group, and children left in the bench's session would share
	 * one group's time while each sbx command gets a group of its own. */
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
	char *argv[] = {"bash", "-c", "echo hi", NULL};
	pid_t pid;
	int e = posix_spawn(&pid, "/bin/bash", &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	close(p[1]);
	char buf[64];
	while (e == 0 && read(p[0], buf, sizeof(buf)) > 0)
		;
	close(p[0]);
	int status = 1;
	if (e == 0)
		waitpid(pid, &status, 0);
	posix_spawn_file_actions_destroy(&fa);
	return status;
}

static void floor_task(int i)
{
	char dir[1200];
	snprintf(dir, sizeof(dir), "%s/task-%d", floor_dir, i);
	if (mkdir(dir, 0700) != 0) {
		atomic_fetch_add(&failures, 1);
		return;
	}
	int bad = 0;
	for (int k = 0; k < n_commands; k++)
		bad |= floor_command(dir) != 0;
	if (bad || rmdir(dir) != 0)
		atomic_fetch_add(&failures, 1);
}

/* Where a C API task's time goes: wall and calling-thread CPU per phase, summed over the
 * tasks of the current run (microseconds). */
enum { PH_CREATE, PH_EXEC, PH_DESTROY, N_PHASES };
static atomic_llong phase_wall[N_PHASES], phase_cpu[N_PHASES];

static long long usec(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

typedef struct mark {
	long long wall, cpu;
} mark;

static mark mark_now(void)
{
	mark m = {usec(CLOCK_MONOTONIC), usec(CLOCK_THREAD_CPUTIME_ID)};
	return m;
}

static mark phase_end(int ph, mark from)
{
	mark m = mark_now();
	atomic_fetch_add(&phase_wall[ph], m.wall - from.wall);
	atomic_fetch_add(&phase_cpu[ph], m.cpu - from.cpu);
	return m;
}

static void capi_task(int i)
{
	(void)i;
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	int rc;
	mark m = mark_now();
	/* A create past max_concurrency is refused at once: wait like `sbx rollout` would. */
	while ((rc = sbx_create(host, NULL, id, &err)) == SBX_E_LIMIT) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	m = phase_end(PH_CREATE, m);
	if (rc != SBX_OK) {
		fprintf(stderr, "bench_rollout: create: %s\n", err.message);
		atomic_fetch_add(&failures, 1);
		return;
	}
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.shell = "echo hi";
	for (int k = 0; k < n_commands; k++) {
		sbx_exec_result *r = NULL;
		if (sbx_exec(host, id, &o, &r, &err) != SBX_OK || r->exit_code != 0 ||
		    strcmp(r->stdout_text, "hi\n") != 0) {
			fprintf(stderr, "bench_rollout: exec: %s\n", err.message);
			atomic_fetch_add(&failures, 1);
		}
		sbx_exec_result_free(r);
	}
	m = phase_end(PH_EXEC, m);
	if (sbx_destroy(host, id, &err) != SBX_OK) {
		fprintf(stderr, "bench_rollout: destroy: %s\n", err.message);
		atomic_fetch_add(&failures, 1);
	}
	phase_end(PH_DESTROY, m);
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
 * times its tasks only, not its interpreter's start and imports); a line "cpu HOST COMMANDS"
 * (ms per task) goes into cpu_out[2] when cpu_out is not NULL. */
static double run_child(char *const argv[], double *cpu_out)
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
		return -1;
	}
	const char *el = strstr(out, "elapsed ");
	const char *cpu = strstr(out, "cpu ");
	if (cpu && cpu_out) {
		char *end;
		cpu_out[0] = strtod(cpu + 4, &end);
		cpu_out[1] = strtod(end, NULL);
	}
	return el ? strtod(el + 8, NULL) : t;
}

static int write_tasks(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	for (int i = 0; i < n_tasks; i++) {
		fprintf(f, "{\"id\": %d, \"commands\": [", i);
		for (int k = 0; k < n_commands; k++)
			fprintf(f, "%s\"echo hi\"", k ? ", " : "");
		fprintf(f, "]}\n");
	}
	return fclose(f);
}

/* The 1-minute load average, as /proc/loadavg says it (-1 when it cannot be read). */
static double load_average(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");
	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

enum { K_FLOOR, K_CAPI, K_ROLLOUT, K_ASYNC, K_NEXAU, K_NEXAU_SBX, N_KINDS };
static const char *const kind_names[N_KINDS] = {"floor",     "C API", "rollout",
						"AsyncHost", "NexAU", "NexAU/sbx"};

/* The sbx kinds that add a layer over the C API, printed against it too. */
static int over_capi(int k)
{
	return k == K_ROLLOUT || k == K_ASYNC || k == K_NEXAU_SBX;
}

typedef struct setup {
	const char *tasks, *nexau, *nexau_py;
	char ts[16], ns[16];
	int t;
} setup;

/* CPU seconds (user + system) of this process (RUSAGE_SELF, the commands it reaped not
 * counted) or of the children it reaped (RUSAGE_CHILDREN: the commands, or a child kind's
 * whole process tree). */
static double cpu_of(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Per task of each kind's last run, in ms: the CPU of the process doing the tasks (the host;
 * -1 when not known apart, for `sbx rollout`) and of everything, the commands included. */
static double cpu_ms[N_KINDS], total_ms[N_KINDS];

static double run_kind(int k, setup *s)
{
	double c0 = cpu_of(RUSAGE_SELF), k0 = cpu_of(RUSAGE_CHILDREN), t, py_cpu[2] = {-1, -1};
	cpu_ms[k] = total_ms[k] = -1;
	switch (k) {
	case K_FLOOR:
		t = on_threads(floor_task, s->t);
		break;
	case K_CAPI:
		for (int ph = 0; ph < N_PHASES; ph++) {
			atomic_store(&phase_wall[ph], 0);
			atomic_store(&phase_cpu[ph], 0);
		}
		t = on_threads(capi_task, s->t);
		break;
	case K_ROLLOUT: {
		char *roll[] = {SBX_BENCH_CLI, "rollout",   "--concurrency",  s->ts,
				"--output",    "/dev/null", (char *)s->tasks, NULL};
		t = run_child(roll, NULL);
		total_ms[k] = (cpu_of(RUSAGE_CHILDREN) - k0) * 1000.0 / n_tasks;
		return t;
	}
	case K_ASYNC: {
		char *py[] = {"python3",   SBX_BENCH_SOURCE "/bench/rollout.py",
			      "asynchost", s->ns,
			      s->ts,       NULL};
		t = run_child(py, py_cpu);
		break;
	}
	default: {
		char *py[] = {(char *)(s->nexau_py ? s->nexau_py : "python3.12"),
			      SBX_BENCH_SOURCE "/bench/rollout.py",
			      k == K_NEXAU ? "nexau" : "nexau-sbx",
			      s->ns,
			      s->ts,
			      (char *)s->nexau,
			      NULL};
		t = run_child(py, py_cpu);
		break;
	}
	}
	if (k == K_ASYNC || k == K_NEXAU || k == K_NEXAU_SBX) { /* the Python run's own span */
		if (py_cpu[0] >= 0) {
			cpu_ms[k] = py_cpu[0];
			total_ms[k] = py_cpu[0] + py_cpu[1];
		}
		return t;
	}
	cpu_ms[k] = (cpu_of(RUSAGE_SELF) - c0) * 1000.0 / n_tasks;
	total_ms[k] = cpu_ms[k] + (cpu_of(RUSAGE_CHILDREN) - k0) * 1000.0 / n_tasks;
	return t;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MAX_ROUNDS 64

/* Each sbx kind against NexAU, paired within a round: in how many rounds it was the faster
 * of the two, and the median of NexAU's time over its own (above 1: sbx faster). Two kinds
 * run a few seconds apart in one round see the same machine; across rounds its speed moves
 * by more than what separates them, which the medians of the ratios to the floor blur.
 * Then the commands' own CPU per task (everything less the host process's) where the host's
 * is known apart: what the host does and what its commands cost are separate questions. */
static void against_nexau(double (*secs)[N_KINDS], double (*tot)[N_KINDS], double (*hcpu)[N_KINDS],
			  int rounds, const int *kinds, int n_kinds, int t)
{
	int any = 0;
	for (int r = 0; r < rounds; r++)
		any |= secs[r][K_NEXAU] >= 0;
	if (!any)
		return;
	printf("concurrency %d, against NexAU in the same round:", t);
	for (int j = 0; j < n_kinds; j++) {
		int k = kinds[j], n = 0, won = 0;
		if (k == K_FLOOR || k == K_NEXAU)
			continue;
		double v[MAX_ROUNDS];
		for (int r = 0; r < rounds; r++) {
			if (secs[r][k] < 0 || secs[r][K_NEXAU] < 0)
				continue;
			v[n++] = secs[r][K_NEXAU] / secs[r][k];
			won += secs[r][k] < secs[r][K_NEXAU];
		}
		if (n)
			printf("  %s faster in %d of %d, NexAU / %s %.2f;", kind_names[k], won, n,
			       kind_names[k], median(v, n));
	}
	printf("\nconcurrency %d, the commands' CPU per task (median):", t);
	for (int j = 0; j < n_kinds; j++) {
		int k = kinds[j], n = 0;
		double v[MAX_ROUNDS];
		for (int r = 0; r < rounds; r++)
			if (tot[r][k] >= 0 && hcpu[r][k] >= 0)
				v[n++] = tot[r][k] - hcpu[r][k];
		if (n)
			printf("  %s %.2f ms;", kind_names[k], median(v, n));
	}
	printf("\n");
}

/* One concurrency: each round runs every kind once, the round r starting r kinds further
 * along, so a load that rises or falls during the run lands on every kind alike; each ratio
 * is taken within its round, and the summary gives their medians. */
static void one_concurrency(setup *s, const int *kinds, int n_kinds, int rounds)
{
	static double secs[MAX_ROUNDS][N_KINDS], tot[MAX_ROUNDS][N_KINDS],
	    hcpu[MAX_ROUNDS][N_KINDS];
	for (int r = 0; r < rounds; r++) {
		double l0 = load_average();
		for (int k = 0; k < N_KINDS; k++) /* a kind not run is not there, not 0 s */
			secs[r][k] = tot[r][k] = hcpu[r][k] = -1;
		for (int j = 0; j < n_kinds; j++) {
			int k = kinds[(j + r) % n_kinds];
			secs[r][k] = run_kind(k, s);
			tot[r][k] = secs[r][k] >= 0 ? total_ms[k] : -1;
			hcpu[r][k] = secs[r][k] >= 0 ? cpu_ms[k] : -1;
		}
		printf("concurrency %d, round %d (load average %.1f -> %.1f)\n", s->t, r + 1, l0,
		       load_average());
		double fl = secs[r][K_FLOOR], capi = secs[r][K_CAPI];
		for (int j = 0; j < n_kinds; j++) {
			int k = kinds[j];
			if (secs[r][k] < 0) {
				printf("  %-10s failed\n", kind_names[k]);
				continue;
			}
			printf("  %-10s %7.2f s  %5.0f tasks/s  %.2fx floor", kind_names[k],
			       secs[r][k], n_tasks / secs[r][k], secs[r][k] / fl);
			if (over_capi(k))
				printf("  %.2fx the C API", secs[r][k] / capi);
			if (total_ms[k] >= 0)
				printf("  CPU %.2f ms/task", total_ms[k]);
			if (cpu_ms[k] >= 0)
				printf(" (host %.2f)", cpu_ms[k]);
			printf("\n");
		}
		static const char *const ph_names[N_PHASES] = {"create", "exec", "destroy"};
		printf("  C API per task, wall (thread CPU):");
		for (int ph = 0; ph < N_PHASES; ph++)
			printf(" %s %.2f (%.2f) ms", ph_names[ph],
			       (double)atomic_load(&phase_wall[ph]) / 1000.0 / n_tasks,
			       (double)atomic_load(&phase_cpu[ph]) / 1000.0 / n_tasks);
		printf("\n");
	}
	printf("concurrency %d, median of %d round(s):", s->t, rounds);
	for (int j = 1; j < n_kinds; j++) {
		double v[MAX_ROUNDS];
		int k = kinds[j], n = 0;
		for (int r = 0; r < rounds; r++)
			if (secs[r][k] >= 0)
				v[n++] = secs[r][k] / secs[r][K_FLOOR];
		if (n == 0) {
			printf("  %s failed;", kind_names[k]);
			continue;
		}
		printf("  %s %.2fx floor", kind_names[k], median(v, n));
		if (over_capi(k)) {
			n = 0;
			for (int r = 0; r < rounds; r++)
				if (secs[r][k] >= 0)
					v[n++] = secs[r][k] / secs[r][K_CAPI];
			printf(" (%.2fx C API)", median(v, n));
		}
		printf(";");
	}
	/* CPU does not wait for a core: on a machine whose speed drifts between runs it ranks
	 * the kinds more steadily than their wall times. */
	printf("\nconcurrency %d, median CPU per task (host):", s->t);
	for (int j = 0; j < n_kinds; j++) {
		double v[MAX_ROUNDS], w[MAX_ROUNDS];
		int k = kinds[j], n = 0, m = 0;
		for (int r = 0; r < rounds; r++) {
			if (tot[r][k] >= 0)
				v[n++] = tot[r][k];
			if (hcpu[r][k] >= 0)
				w[m++] = hcpu[r][k];
		}
		if (n == 0)
			continue;
		printf("  %s %.2f ms", kind_names[k], median(v, n));
		if (m)
			printf(" (%.2f)", median(w, m));
		printf(";");
	}
	printf("\n");
	against_nexau(secs, tot, hcpu, rounds, kinds, n_kinds, s->t);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	n_tasks = argc > 1 ? atoi(argv[1]) : 1000;
	int rounds = argc > 2 ? atoi(argv[2]) : 1;
	if (getenv("SBX_BENCH_COMMANDS") && atoi(getenv("SBX_BENCH_COMMANDS")) > 0)
		n_commands = atoi(getenv("SBX_BENCH_COMMANDS"));
	if (rounds < 1)
		rounds = 1;
	if (rounds > MAX_ROUNDS)
		rounds = MAX_ROUNDS;
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
	/* $SBX_BENCH_CONFIG selects another config (kill_mechanism: subreaper, as in most
	 * containers) for the C API, `sbx rollout` ($SBX_CONFIG) and AsyncHost; NexAU/sbx keeps
	 * the drop-in's own. */
	const char *config = getenv("SBX_BENCH_CONFIG");
	if (config)
		setenv("SBX_CONFIG", config, 1);
	sbx_host_options ho = {0};
	SBX_INIT_HEADER(ho);
	ho.config_path = config;
	sbx_error err = {0};
	if (sbx_host_new(&ho, &host, &err) != SBX_OK) {
		fprintf(stderr, "bench_rollout: %s\n", err.message);
		return 1;
	}
	setup s = {.tasks = tasks,
		   .nexau = getenv("SBX_BENCH_NEXAU"),
		   .nexau_py = getenv("SBX_BENCH_NEXAU_PYTHON")};
	int kinds[N_KINDS] = {K_FLOOR, K_CAPI, K_ROLLOUT}, n_kinds = 3;
	if (getenv("SBX_BENCH_PYTHON") && strcmp(getenv("SBX_BENCH_PYTHON"), "1") == 0)
		kinds[n_kinds++] = K_ASYNC;
	if (s.nexau) {
		kinds[n_kinds++] = K_NEXAU;
		kinds[n_kinds++] = K_NEXAU_SBX;
	}
	printf("bench_rollout: %d tasks of create -> %d x echo hi -> delete, %d round(s)\n",
	       n_tasks, n_commands, rounds);
	snprintf(s.ns, sizeof(s.ns), "%d", n_tasks);
	for (int c = 0; c < n_conc; c++) {
		s.t = conc[c] < 1 ? 1 : conc[c] > MAX_THREADS ? MAX_THREADS : conc[c];
		snprintf(s.ts, sizeof(s.ts), "%d", s.t);
		one_concurrency(&s, kinds, n_kinds, rounds);
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

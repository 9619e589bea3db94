/* Per-exec overhead of sbx_exec on `local` for bash -c 'echo hi', against a raw posix_spawn +
 * waitpid of the same argv with its output read from a pipe (the floor), interleaved so
 * machine noise hits both alike. Prints the ratio; the target is <= 1.25.
 *
 * `bench_exec N MIB THREADS` first gives the caller a touched ballast of MIB MiB and THREADS
 * threads that keep writing to it, the shape of a large harness: a fork()-based spawn pays for
 * both (page-table copy, copy-on-write faults, TLB shootdowns), posix_spawn does not. */
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

extern char **environ;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void raw_spawn(void)
{
	int p[2];
	if (pipe(p) != 0)
		exit(1);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	/* A session of its own, as sbx gives its commands: with scheduler autogroups a session
	 * is a scheduling group, and a floor left in the bench's would compete on other terms. */
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
	char *argv[] = {"bash", "-c", "echo hi", NULL};
	pid_t pid;
	if (posix_spawnp(&pid, "bash", &fa, &at, argv, environ) != 0)
		exit(1);
	posix_spawnattr_destroy(&at);
	close(p[1]);
	char buf[64];
	while (read(p[0], buf, sizeof(buf)) > 0)
		;
	close(p[0]);
	waitpid(pid, NULL, 0);
	posix_spawn_file_actions_destroy(&fa);
}

static unsigned char *ballast;
static size_t ballast_size;
static atomic_int stop;

/* Writes one byte per page of its share of the ballast, then sleeps 10 ms, until told to stop. */
static void *toucher(void *arg)
{
	size_t k = (size_t)(uintptr_t)arg, step = 4096 * 64;
	while (!atomic_load(&stop)) {
		for (size_t i = k * 4096; i < ballast_size; i += step)
			ballast[i]++;
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Minor page faults of the whole process so far, every thread's. */
static long minor_faults(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;
	size_t mib = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 0;
	int n_threads = argc > 3 ? atoi(argv[3]) : 0;
	pthread_t th[1024];
	if (n_threads > 1024)
		n_threads = 1024;
	if (mib) {
		ballast_size = mib << 20;
		ballast = mmap(NULL, ballast_size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ballast == MAP_FAILED)
			return 1;
		memset(ballast, 1, ballast_size);
	}
	for (int i = 0; i < n_threads; i++)
		if (pthread_create(&th[i], NULL, toucher, (void *)(uintptr_t)(i % 64)) != 0)
			return 1;
	sbx_host *h = NULL;
	sbx_error err = {0};
	/* $SBX_BENCH_CONFIG selects another config (e.g. a forced kill mechanism). */
	sbx_host_options ho = {0};
	SBX_INIT_HEADER(ho);
	ho.config_path = getenv("SBX_BENCH_CONFIG");
	if (sbx_host_new(&ho, &h, &err) != SBX_OK) {
		fprintf(stderr, "bench_exec: %s\n", err.message);
		return 1;
	}
	char id[SBX_ID_MAX];
	if (sbx_create(h, NULL, id, &err) != SBX_OK) {
		fprintf(stderr, "bench_exec: %s\n", err.message);
		return 1;
	}
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.shell = "echo hi";
	o.timeout = 0;
	double t_raw = 0, t_sbx = 0;
	long f_raw = 0, f_sbx = 0;
	for (int i = 0; i < n; i++) {
		long f0 = minor_faults();
		double t0 = now();
		raw_spawn();
		double t1 = now();
		long f1 = minor_faults();
		sbx_exec_result *r = NULL;
		if (sbx_exec(h, id, &o, &r, &err) != SBX_OK) {
			fprintf(stderr, "bench_exec: %s\n", err.message);
			return 1;
		}
		double t2 = now();
		f_sbx += minor_faults() - f1;
		f_raw += f1 - f0;
		sbx_exec_result_free(r);
		t_raw += t1 - t0;
		t_sbx += t2 - t1;
	}
	sbx_destroy(h, id, NULL);
	sbx_host_free(h);
	atomic_store(&stop, 1);
	for (int i = 0; i < n_threads; i++)
		pthread_join(th[i], NULL);
	printf("bench_exec: ballast %zu MiB, %d threads\n", mib, n_threads);
	printf("bench_exec: %d execs: raw posix_spawn %.1f us, sbx_exec %.1f us, ratio %.3f "
	       "(target <= 1.25)\n",
	       n, t_raw / n * 1e6, t_sbx / n * 1e6, t_sbx / t_raw);
	/* A start that copied the caller shows here: every page its threads write while the copy
	 * lives faults once to undo copy-on-write (the time goes to those threads, not the call). */
	printf(
	    "bench_exec: page faults in the caller per exec: raw posix_spawn %.1f, sbx_exec %.1f\n",
	    (double)f_raw / n, (double)f_sbx / n);
	return 0;
}

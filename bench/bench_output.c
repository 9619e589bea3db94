/* A command printing MIB MiB (default 256) through sbx_exec on `local`, against two floors
 * measured in the same run, interleaved so machine noise hits all alike:
 *   file: the same pipeline writing into a file itself (`... > FILE`);
 *   pipe: the same pipeline into a pipe that this process reads 64 KiB at a time into a file
 *         (what a plain harness does).
 * Prints the wall time, this process's CPU time and the ratios (target: sbx <= 1.3x file), and
 * the peak RSS (target: flat, a few MiB whatever the size).
 *
 * `bench_output ROUNDS MIB`. Files go to $SBX_STATE_DIR (put it on tmpfs to keep the disk
 * out) and are removed after each round. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

extern char **environ;

typedef struct cost {
	double wall, cpu;
} cost;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void add(cost *c, double w0, double c0)
{
	c->wall += now() - w0;
	c->cpu += cpu_self() - c0;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* The floor "file": sh -c 'PIPELINE > FILE'. */
static void run_into_file(const char *pipeline, const char *file)
{
	char cmd[1400];
	int n = snprintf(cmd, sizeof(cmd), "%s > '%s'", pipeline, file);
	if (n < 0 || (size_t)n >= sizeof(cmd))
		die("command too long");
	char *argv[] = {"sh", "-c", cmd, NULL};
	pid_t pid;
	if (posix_spawnp(&pid, "sh", NULL, NULL, argv, environ) != 0)
		die("posix_spawn");
	waitpid(pid, NULL, 0);
}

/* The floor "pipe": sh -c PIPELINE into a pipe, read here and written to FILE. */
static void run_through_pipe(const char *pipeline, const char *file)
{
	int p[2];
	if (pipe(p) != 0)
		die("pipe");
	int out = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0)
		die(file);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	char *argv[] = {"sh", "-c", (char *)pipeline, NULL};
	pid_t pid;
	if (posix_spawnp(&pid, "sh", &fa, NULL, argv, environ) != 0)
		die("posix_spawn");
	close(p[1]);
	static char buf[65536];
	ssize_t n;
	while ((n = read(p[0], buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			die("write");
	close(p[0]);
	close(out);
	waitpid(pid, NULL, 0);
	posix_spawn_file_actions_destroy(&fa);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3;
	unsigned long mib = argc > 2 ? strtoul(argv[2], NULL, 10) : 256;
	const char *dir = getenv("SBX_STATE_DIR") ? getenv("SBX_STATE_DIR") : "/tmp";
	char pipeline[200], file[1000];
	snprintf(pipeline, sizeof(pipeline), "yes hello | head -c %lu", mib << 20);
	snprintf(file, sizeof(file), "%s/bench_output.floor", dir);

	sbx_host *h = NULL;
	sbx_error err = {0};
	char id[SBX_ID_MAX];
	if (sbx_host_new(NULL, &h, &err) != SBX_OK || sbx_create(h, NULL, id, &err) != SBX_OK) {
		fprintf(stderr, "bench_output: %s\n", err.message);
		return 1;
	}
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.shell = pipeline;
	cost c_file = {0, 0}, c_pipe = {0, 0}, c_sbx = {0, 0};
	for (int i = 0; i < rounds; i++) {
		double w0 = now(), c0 = cpu_self();
		run_into_file(pipeline, file);
		add(&c_file, w0, c0);
		unlink(file);

		w0 = now(), c0 = cpu_self();
		run_through_pipe(pipeline, file);
		add(&c_pipe, w0, c0);
		unlink(file);

		w0 = now(), c0 = cpu_self();
		sbx_exec_result *r = NULL;
		if (sbx_exec(h, id, &o, &r, &err) != SBX_OK) {
			fprintf(stderr, "bench_output: %s\n", err.message);
			return 1;
		}
		add(&c_sbx, w0, c0);
		if (r->stdout_bytes != (uint64_t)mib << 20 || r->exit_code != 0) {
			fprintf(stderr, "bench_output: sbx_exec saw %llu bytes, exit %d\n",
				(unsigned long long)r->stdout_bytes, (int)r->exit_code);
			return 1;
		}
		unlink(r->stdout_file);
		sbx_exec_result_free(r);
	}
	sbx_destroy(h, id, NULL);
	sbx_host_free(h);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("bench_output: %lu MiB, %d rounds, wall (this process's CPU) per round\n", mib,
	       rounds);
	printf("  file  (pipeline > file)        %.3f s (%.3f s)\n", c_file.wall / rounds,
	       c_file.cpu / rounds);
	printf("  pipe  (raw reader into a file) %.3f s (%.3f s)\n", c_pipe.wall / rounds,
	       c_pipe.cpu / rounds);
	printf("  sbx   (sbx_exec)               %.3f s (%.3f s)\n", c_sbx.wall / rounds,
	       c_sbx.cpu / rounds);
	printf("bench_output: sbx/file %.2f (target <= 1.3), sbx/pipe %.2f; peak RSS %.1f MiB\n",
	       c_sbx.wall / c_file.wall, c_sbx.wall / c_pipe.wall, ru.ru_maxrss / 1024.0);
	return 0;
}

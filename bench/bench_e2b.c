/* Round trips per exec on the e2b backend, counted by the stand-in gateway
 * (tests/e2b/standin.mjs logs every request it receives), and the time per exec.
 *
 * `bench_e2b [N]` starts the stand-in (tests/e2b/standin.sh) in a fresh folder, creates one
 * sandbox and runs `true` N times in it two ways: through one long-lived host (a harness
 * doing many execs) and through a new host per exec (`sbx exec` from a shell: every process
 * starts cold). For each it prints the requests per exec, by kind, and the milliseconds per
 * sbx_exec call. Needs node and the build tree's registry ($SBX_REGISTRY or found beside
 * libsbx). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

#ifndef SBX_SOURCE_DIR
#define SBX_SOURCE_DIR "."
#endif

static char folder[256];
static char config[300];
static char log_path[300];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs standin.sh `what` on the folder; "clean" removes the folder. */
static int run_standin(const char *what)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (strcmp(what, "clean") == 0)
			execlp("rm", "rm", "-rf", folder, (char *)NULL);
		else
			execlp("sh", "sh", SBX_SOURCE_DIR "/tests/e2b/standin.sh", what, folder,
			       (char *)NULL);
		_exit(127);
	}
	int status = 0;
	while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Requests the stand-in has received so far: all, control-plane GETs of one sandbox, and
 * envd process starts. */
typedef struct counts {
	long all, get_sandbox, start;
} counts;

static counts count_requests(void)
{
	counts c = {0, 0, 0};
	FILE *f = fopen(log_path, "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "> ", 2) != 0)
			continue;
		c.all++;
		if (strncmp(line, "> GET /sandboxes/", 17) == 0)
			c.get_sandbox++;
		else if (strncmp(line, "> POST /process.Process/Start", 29) == 0)
			c.start++;
	}
	if (f)
		fclose(f);
	return c;
}

static sbx_host *new_host(void)
{
	sbx_host_options o = {.config_path = config};
	SBX_INIT_HEADER(o);
	sbx_host *h = NULL;
	sbx_error err = {0};
	if (sbx_host_new(&o, &h, &err) != SBX_OK) {
		fprintf(stderr, "bench_e2b: host: %s\n", err.message);
		exit(1);
	}
	return h;
}

/* One `true` in sandbox id; returns the seconds sbx_exec took. */
static double one_exec(sbx_host *h, const char *id)
{
	const char *const argv[] = {"true", NULL};
	sbx_exec_opts o = {.argv = argv, .timeout = 30};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	double t0 = now();
	int rc = sbx_exec(h, id, &o, &r, &err);
	double took = now() - t0;
	if (rc != SBX_OK || r->exit_code != 0) {
		fprintf(stderr, "bench_e2b: exec: %s\n", rc != SBX_OK ? err.message : "exit != 0");
		exit(1);
	}
	sbx_exec_result_free(r);
	return took;
}

static void report(const char *name, int n, counts a, counts b, double secs)
{
	printf("%-22s %5.2f requests/exec (%.2f GET /sandboxes/ID, %.2f Process/Start)  "
	       "%7.2f ms/exec\n",
	       name, (double)(b.all - a.all) / n, (double)(b.get_sandbox - a.get_sandbox) / n,
	       (double)(b.start - a.start) / n, secs * 1000.0 / n);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 50;
	if (n < 1)
		n = 50;
	if (!getenv("E2B_API_KEY"))
		setenv("E2B_API_KEY", "e2b_5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e70000", 1);
	snprintf(folder, sizeof(folder), "/tmp/sbx-bench-e2b-%ld", (long)getpid());
	snprintf(config, sizeof(config), "%s/e2b.yaml", folder);
	snprintf(log_path, sizeof(log_path), "%s/requests.log", folder);
	if (run_standin("start") != 0) {
		fprintf(stderr, "bench_e2b: the stand-in did not start\n");
		return 1;
	}
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	if (sbx_create(h, NULL, id, &err) != SBX_OK) {
		fprintf(stderr, "bench_e2b: create: %s\n", err.message);
		run_standin("stop");
		run_standin("clean");
		return 1;
	}
	one_exec(h, id); /* the first exec of a host looks the sandbox up: not counted */

	counts a = count_requests();
	double secs = 0;
	for (int i = 0; i < n; i++)
		secs += one_exec(h, id);
	report("one long-lived host", n, a, count_requests(), secs);

	a = count_requests();
	secs = 0;
	for (int i = 0; i < n; i++) {
		sbx_host *cold = new_host();
		secs += one_exec(cold, id);
		sbx_host_free(cold);
	}
	report("a new host per exec", n, a, count_requests(), secs);

	sbx_destroy(h, id, NULL);
	sbx_host_free(h);
	run_standin("stop");
	run_standin("clean");
	return 0;
}

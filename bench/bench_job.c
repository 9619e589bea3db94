/* Start latency of a detached job on `local` (sbx_exec with `background`: the call returns
 * the job id once the in-sandbox supervisor runs), against the plain exec floor of the same
 * run: sbx_exec of the same command in the foreground, and a raw posix_spawn + waitpid of
 * `sh -c true`. Interleaved, so machine noise hits all three alike. Prints the ratios.
 *
 * `bench_job N` (default 200). $SBX_BENCH_CONFIG selects another config. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include <sbx/host.h>

extern char **environ;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int raw_spawn(void)
{
	char *argv[] = {"sh", "-c", "true", NULL};
	pid_t pid;
	if (posix_spawnp(&pid, "sh", NULL, NULL, argv, environ) != 0)
		return -1;
	return waitpid(pid, NULL, 0) == pid ? 0 : -1;
}

static int run(sbx_host *h, const char *id, int background, sbx_error *err)
{
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.shell = "true";
	o.timeout = 0;
	o.background = background ? 1 : 0;
	sbx_exec_result *r = NULL;
	int rc = sbx_exec(h, id, &o, &r, err);
	if (rc == SBX_OK && background && !r->job_id)
		rc = SBX_E_BACKEND;
	sbx_exec_result_free(r);
	return rc;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200;
	sbx_host *h = NULL;
	sbx_error err = {0};
	sbx_host_options ho = {0};
	SBX_INIT_HEADER(ho);
	ho.config_path = getenv("SBX_BENCH_CONFIG");
	if (sbx_host_new(&ho, &h, &err) != SBX_OK) {
		fprintf(stderr, "bench_job: %s\n", err.message);
		return 1;
	}
	char id[SBX_ID_MAX];
	if (sbx_create(h, NULL, id, &err) != SBX_OK) {
		fprintf(stderr, "bench_job: %s\n", err.message);
		return 1;
	}
	double t_raw = 0, t_exec = 0, t_job = 0;
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		double t0 = now();
		rc = raw_spawn();
		double t1 = now();
		if (rc == 0 && run(h, id, 0, &err) != SBX_OK)
			rc = 1;
		double t2 = now();
		if (rc == 0 && run(h, id, 1, &err) != SBX_OK)
			rc = 1;
		double t3 = now();
		t_raw += t1 - t0;
		t_exec += t2 - t1;
		t_job += t3 - t2;
	}
	sbx_destroy(h, id, NULL);
	sbx_host_free(h);
	if (rc != 0) {
		fprintf(stderr, "bench_job: %s\n", err.message[0] ? err.message : "spawn failed");
		return 1;
	}
	printf("bench_job: %d rounds of sh -c true: raw posix_spawn %.1f us, sbx_exec %.1f us, "
	       "detached job start %.1f us\n",
	       n, t_raw / n * 1e6, t_exec / n * 1e6, t_job / n * 1e6);
	printf("bench_job: job start / sbx_exec %.2f, job start / raw spawn %.2f\n", t_job / t_exec,
	       t_job / t_raw);
	return 0;
}

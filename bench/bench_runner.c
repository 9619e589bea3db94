/* What a runner process costs: `local` in process against `local` in a runner (runner:
 * process), interleaved in the same run so machine noise hits both alike.
 *
 *   bench_runner [N [MIB]]
 *
 * N execs of bash -c 'echo hi' on each (target: runner <= 1.10x in process per exec), then
 * ROUNDS rounds (default 5) of MIB MiB of output (default 256) through each: the time ratio,
 * and the runner's own peak RSS (the caller's bound is bench_rss's, run with SBX_REGISTRY set
 * to either registry). Ratios are the median of paired batches (20 execs, or one round of
 * output, on each side back to back), which a shared machine's noise moves least; the totals
 * are printed too. Run from the build tree; the registries are the build tree's two. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sbx/host.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const sbx_error *err)
{
	fprintf(stderr, "bench_runner: %s: %s\n", what, err->message);
	exit(1);
}

static sbx_host *open_host(const char *registry, char id[SBX_ID_MAX])
{
	sbx_host_options o = {0};
	SBX_INIT_HEADER(o);
	o.registry_path = registry;
	sbx_host *h = NULL;
	sbx_error err = {0};
	if (sbx_host_new(&o, &h, &err) != SBX_OK)
		die(registry, &err);
	if (sbx_create(h, NULL, id, &err) != SBX_OK)
		die("create", &err);
	return h;
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

static double timed_exec(sbx_host *h, const char *id, const char *shell, uint64_t *bytes)
{
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.shell = shell;
	o.timeout = 0;
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	double t0 = now();
	if (sbx_exec(h, id, &o, &r, &err) != SBX_OK)
		die(shell, &err);
	double t = now() - t0;
	if (bytes)
		*bytes = r->stdout_bytes;
	sbx_exec_result_free(r);
	return t;
}

/* Peak RSS in KiB of this process's child named sbx-runner, -1 when there is none. */
static long runner_peak_kib(void)
{
	long best = -1;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		char path[300], pids[4096] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(pids, 1, sizeof(pids) - 1, f);
		pids[n] = '\0';
		fclose(f);
		char *p = pids, *end = NULL;
		for (long pid; (pid = strtol(p, &end, 10)) > 0; p = end) {
			char comm[64] = "", line[256];
			snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
			if (!(f = fopen(path, "r")))
				continue;
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = '\0';
			fclose(f);
			if (strcmp(comm, "sbx-runner\n") != 0)
				continue;
			snprintf(path, sizeof(path), "/proc/%ld/status", pid);
			if (!(f = fopen(path, "r")))
				continue;
			long kib;
			while (fgets(line, sizeof(line), f))
				if (sscanf(line, "VmHWM: %ld kB", &kib) == 1 && kib > best)
					best = kib;
			fclose(f);
		}
	}
	if (d)
		closedir(d);
	return best;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;
	long mib = argc > 2 ? atol(argv[2]) : 256;
	char in_id[SBX_ID_MAX], pr_id[SBX_ID_MAX], big[128];
	sbx_host *in = open_host(SBX_BENCH_INPROC_REGISTRY, in_id);
	sbx_host *pr = open_host(SBX_BENCH_PROCESS_REGISTRY, pr_id);
	/* One call each first: the runner starts, files and caches warm up. */
	timed_exec(in, in_id, "echo hi", NULL);
	timed_exec(pr, pr_id, "echo hi", NULL);
	int rounds = argc > 3 ? atoi(argv[3]) : 5;
	int batches = n / 20 > 0 ? n / 20 : 1;
	double t_in = 0, t_pr = 0, ratios[1024];
	for (int b = 0; b < batches && b < 1024; b++) {
		double bi = 0, bp = 0;
		for (int i = 0; i < 20; i++) {
			bi += timed_exec(in, in_id, "echo hi", NULL);
			bp += timed_exec(pr, pr_id, "echo hi", NULL);
		}
		t_in += bi;
		t_pr += bp;
		ratios[b] = bp / bi;
	}
	int execs = batches * 20;
	printf("bench_runner: %d execs of bash -c 'echo hi': in process %.1f us, runner %.1f us; "
	       "ratio %.3f (median of %d batches; totals %.3f; target <= 1.10)\n",
	       execs, t_in / execs * 1e6, t_pr / execs * 1e6, median(ratios, batches), batches,
	       t_pr / t_in);
	snprintf(big, sizeof(big), "head -c %ld /dev/zero", mib << 20);
	double b_in = 0, b_pr = 0;
	uint64_t got_in = 0, got_pr = 0;
	for (int i = 0; i < rounds && i < 1024; i++) {
		double a = timed_exec(in, in_id, big, &got_in);
		double b = timed_exec(pr, pr_id, big, &got_pr);
		b_in += a;
		b_pr += b;
		ratios[i] = b / a;
		if (got_in != (uint64_t)mib << 20 || got_pr != (uint64_t)mib << 20) {
			fprintf(stderr, "bench_runner: saw %llu and %llu bytes, not %ld MiB\n",
				(unsigned long long)got_in, (unsigned long long)got_pr, mib);
			return 1;
		}
	}
	printf("bench_runner: %ld MiB of output, %d rounds: in process %.3f s (%.0f MiB/s), "
	       "runner %.3f s (%.0f MiB/s); ratio %.3f (median; totals %.3f; target <= 1.10); "
	       "runner peak RSS %.1f MiB\n",
	       mib, rounds, b_in / rounds, (double)mib * rounds / b_in, b_pr / rounds,
	       (double)mib * rounds / b_pr, median(ratios, rounds), b_pr / b_in,
	       runner_peak_kib() / 1024.0);
	sbx_destroy(in, in_id, NULL);
	sbx_destroy(pr, pr_id, NULL);
	sbx_host_free(in);
	sbx_host_free(pr);
	return 0;
}

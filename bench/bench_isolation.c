/* The isolated level of `local` against its floors, all in one run (the machine is shared and
 * noisy, so only same-run ratios mean anything):
 *
 *   exec     `bash -c 'echo hi'` through sbx_exec on `isolation: namespaces` (rootfs: host),
 *            against posix_spawn + waitpid of the same argv (the floor, target <= 1.5x), the
 *            plain level, `bwrap --unshare-all` per exec, and, with DOCKER_HOST and
 *            SBX_BENCH_DOCKER_IMAGE set, the docker backend's exec on that engine (Podman;
 *            rlimits pinned to 1024 as in tests/docker, which these VMs need); each round
 *            runs every kind once, starting one further along, so noise hits all alike;
 *   cycle    create -> first exec -> destroy on the isolated level (target <= 20 ms);
 *   import   for each archive named in SBX_BENCH_IMAGES (comma-separated paths): the first
 *            create (unpacking into an empty cache) and a cached one.
 *
 * bench_isolation [EXECS [CYCLES]]; SBX_STATE_DIR decides where sandboxes live (use /dev/shm
 * to keep the disk out). Needs a machine where the level is supported (see sbx plugins). */
#include <spawn.h>
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

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const sbx_error *err)
{
	fprintf(stderr, "bench_isolation: %s: %s\n", what, err ? err->message : "failed");
	exit(1);
}

/* argv run by posix_spawnp with its stdout read from a pipe; 0 when it exited 0. */
static int spawn_wait(char *const argv[])
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addclose(&fa, p[0]);
	/* In a session of its own, as every sbx command: with scheduler autogroups (Debian's
	 * default) a session is a scheduling group, and a command in the bench's session would
	 * share its group while sbx's get one each. */
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	char buf[256];
	while (rc == 0 && read(p[0], buf, sizeof(buf)) > 0)
		;
	close(p[0]);
	int st = 0;
	if (rc == 0 && waitpid(pid, &st, 0) != pid)
		rc = -1;
	return rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* One host for every kind (plugins take the state dir of the host made last in a process):
 * the default data source is the isolated level, "network-host" the same without a network
 * namespace, "plain" the plain level, "docker" the docker backend when an engine is given. */
static sbx_host *host_for(const char *state, int docker)
{
	char yaml[1200];
	snprintf(yaml, sizeof(yaml),
		 "data_source:\n  sandbox:\n    type: local\n    isolation: namespaces\n"
		 "    image_cache: %s/cache\n"
		 "data_sources:\n  - name: plain\n    sandbox:\n      type: local\n"
		 "      isolation: plain\n"
		 "  - name: network-host\n    sandbox:\n      type: local\n      network: host\n%s",
		 state,
		 docker ? "  - name: docker\n    sandbox:\n      type: docker\n      ulimits:\n"
			  "        - {name: nofile, soft: 1024, hard: 1024}\n"
			  "        - {name: nproc, soft: 1024, hard: 1024}\n"
			: "");
	sbx_host_options o = {.config_text = yaml, .state_dir = state};
	SBX_INIT_HEADER(o);
	sbx_host *h = NULL;
	sbx_error err = {0};
	if (sbx_host_new(&o, &h, &err) != SBX_OK)
		die("host", &err);
	return h;
}

static void create(sbx_host *h, const char *source, const char *image, char id[SBX_ID_MAX])
{
	sbx_create_opts c = {.data_source = source, .image = image};
	SBX_INIT_HEADER(c);
	sbx_error err = {0};
	if (sbx_create(h, &c, id, &err) != SBX_OK)
		die("create", &err);
}

static void exec_in(sbx_host *h, const char *id, const char *shell)
{
	const char *const argv[] = {shell, "-c", "echo hi", NULL};
	sbx_exec_opts o = {.argv = argv, .timeout = 30};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	if (sbx_exec(h, id, &o, &r, &err) != SBX_OK)
		die("exec", &err);
	if (r->exit_code != 0 || strcmp(r->stdout_text, "hi\n") != 0) {
		fprintf(stderr, "bench_isolation: exec gave %d '%s' %s\n", r->exit_code,
			r->stdout_text, r->stderr_text);
		exit(1);
	}
	sbx_exec_result_free(r);
}

static void exec_hi(sbx_host *h, const char *id)
{
	exec_in(h, id, "bash");
}

static void destroy(sbx_host *h, const char *id)
{
	sbx_error err = {0};
	if (sbx_destroy(h, id, &err) != SBX_OK)
		die("destroy", &err);
}

/* CPU seconds this process and its reaped children have used. */
static double cpu_now(void)
{
	struct rusage s, c;
	getrusage(RUSAGE_SELF, &s);
	getrusage(RUSAGE_CHILDREN, &c);
	return (double)(s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec +
			c.ru_stime.tv_sec) +
	       (double)(s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec +
			c.ru_stime.tv_usec) /
		   1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median and 90th percentile of v[0..n) in ms (sorts v). */
static void stats(double *v, int n, double *med, double *p90)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	*med = v[n / 2] * 1e3;
	*p90 = v[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1] * 1e3;
}

enum { K_FLOOR, K_ISO, K_PLAIN, K_BWRAP, K_DOCKER, K_N };
static const char *const kind_name[K_N] = {"posix_spawn (floor)", "sbx_exec namespaces",
					   "sbx_exec plain", "bwrap --unshare-all",
					   "sbx_exec docker (engine)"};

static void bench_exec(sbx_host *h, int docker, int n)
{
	const char *dimg = getenv("SBX_BENCH_DOCKER_IMAGE");
	int have_bwrap = access("/usr/bin/bwrap", X_OK) == 0;
	char iso_id[SBX_ID_MAX], plain_id[SBX_ID_MAX], docker_id[SBX_ID_MAX] = "";
	create(h, NULL, NULL, iso_id);
	create(h, "plain", NULL, plain_id);
	if (docker)
		create(h, "docker", dimg, docker_id);
	char *hi[] = {"bash", "-c", "echo hi", NULL};
	/* The tree of rootfs: host (merged /usr, as on Debian 12), built by bwrap per exec. */
	char *bw[] = {"bwrap",     "--unshare-all", "--ro-bind", "/usr",     "/usr",    "--symlink",
		      "usr/bin",   "/bin",          "--symlink", "usr/lib",  "/lib",    "--symlink",
		      "usr/lib64", "/lib64",        "--symlink", "usr/sbin", "/sbin",   "--ro-bind",
		      "/etc",      "/etc",          "--dev",     "/dev",     "--proc",  "/proc",
		      "--tmpfs",   "/tmp",          "bash",      "-c",       "echo hi", NULL};
	/* Warm every path once, then rounds of one of each kind. */
	exec_hi(h, iso_id);
	exec_hi(h, plain_id);
	double *t[K_N];
	for (int k = 0; k < K_N; k++)
		if (!(t[k] = calloc((size_t)n, sizeof(double))))
			die("calloc", NULL);
	int docker_n = docker ? (n < 50 ? n : 50) : 0;
	/* The kinds rotate through the round: what one leaves behind (bwrap's network namespace
	 * is torn down by a kernel worker after it exits) lands on each kind alike. */
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < K_N; j++) {
			int k = (i + j) % K_N;
			double a = now();
			if (k == K_FLOOR && spawn_wait(hi) != 0)
				die("posix_spawn bash", NULL);
			if (k == K_ISO)
				exec_hi(h, iso_id);
			if (k == K_PLAIN)
				exec_hi(h, plain_id);
			if (k == K_BWRAP && have_bwrap && spawn_wait(bw) != 0)
				die("bwrap", NULL);
			if (k == K_DOCKER && i < docker_n)
				exec_hi(h, docker_id);
			t[k][i] = now() - a;
		}
	}
	double med[K_N], p90[K_N];
	for (int k = 0; k < K_N; k++)
		stats(t[k], k == K_DOCKER ? (docker_n ? docker_n : 1) : n, &med[k], &p90[k]);
	printf("exec of bash -c 'echo hi', %d rounds (docker: %d), median / p90:\n", n, docker_n);
	for (int k = 0; k < K_N; k++) {
		if ((k == K_BWRAP && !have_bwrap) || (k == K_DOCKER && !docker_n))
			continue;
		printf("  %-26s %8.2f ms %8.2f ms   %.2fx the floor\n", kind_name[k], med[k],
		       p90[k], med[k] / med[K_FLOOR]);
	}
	printf("  namespaces vs bwrap: %.2fx; vs docker: %.2fx\n",
	       have_bwrap ? med[K_ISO] / med[K_BWRAP] : 0.0,
	       docker_n ? med[K_ISO] / med[K_DOCKER] : 0.0);
	destroy(h, iso_id);
	destroy(h, plain_id);
	if (docker)
		destroy(h, docker_id);
	for (int k = 0; k < K_N; k++)
		free(t[k]);
}

static void bench_cycle(sbx_host *h, const char *source, int n)
{
	double *v = calloc((size_t)n, sizeof(double));
	double *c = calloc((size_t)n, sizeof(double));
	double *f = calloc((size_t)n, sizeof(double));
	double *x = calloc((size_t)n, sizeof(double));
	if (!v || !c || !f || !x)
		die("calloc", NULL);
	char *hi[] = {"bash", "-c", "echo hi", NULL};
	double cpu_cycles = 0, cpu_floor = 0;
	for (int i = 0; i < n; i++) {
		char id[SBX_ID_MAX];
		double u = cpu_now();
		double a = now();
		create(h, source, NULL, id);
		double b = now();
		exec_hi(h, id);
		x[i] = now() - b;
		destroy(h, id);
		double d = now();
		double w = cpu_now();
		if (spawn_wait(hi) != 0)
			die("posix_spawn bash", NULL);
		f[i] = now() - d;
		cpu_floor += cpu_now() - w;
		cpu_cycles += w - u;
		v[i] = d - a;
		c[i] = b - a;
	}
	double med, p90, cmed, cp90, fmed, fp90, xmed, xp90;
	stats(v, n, &med, &p90);
	stats(c, n, &cmed, &cp90);
	stats(f, n, &fmed, &fp90);
	stats(x, n, &xmed, &xp90);
	printf("create -> first exec -> destroy, %s, %d cycles: median %.2f ms, p90 %.2f ms "
	       "(medians: create %.2f ms, first exec %.2f ms); the exec floor in the same run "
	       "%.2f ms, so a cycle is %.1f floor execs\n",
	       source ? source : "namespaces (rootfs host)", n, med, p90, cmed, xmed, fmed,
	       med / fmed);
	/* CPU time barely depends on the machine's load; the init's own is not counted. */
	printf("  CPU per cycle %.2f ms (this process and the children it reaped), per floor "
	       "exec %.2f ms\n",
	       cpu_cycles / n * 1e3, cpu_floor / n * 1e3);
	free(v);
	free(c);
	free(f);
	free(x);
}

static void bench_import(sbx_host *h, const char *archive)
{
	struct stat sb;
	if (stat(archive, &sb) != 0) {
		fprintf(stderr, "bench_isolation: %s: not found\n", archive);
		exit(1);
	}
	char id[SBX_ID_MAX];
	double a = now();
	create(h, NULL, archive, id);
	double b = now();
	exec_in(h, id, "sh");
	destroy(h, id);
	double best = 1e9;
	for (int i = 0; i < 5; i++) {
		double c = now();
		create(h, NULL, archive, id);
		double d = now();
		destroy(h, id);
		if (d - c < best)
			best = d - c;
	}
	printf("image %s (%.1f MiB): first create (import) %.1f ms, cached create %.2f ms "
	       "(best of 5)\n",
	       archive, (double)sb.st_size / (1 << 20), (b - a) * 1e3, best * 1e3);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 200;
	int cycles = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 50;
	const char *base = getenv("SBX_STATE_DIR");
	char state[500];
	snprintf(state, sizeof(state), "%s/bench-isolation-%ld", base && *base ? base : "/tmp",
		 (long)getpid());
	if (mkdir(state, 0700) != 0) {
		perror(state);
		return 1;
	}
	const char *dimg = getenv("SBX_BENCH_DOCKER_IMAGE");
	int docker = getenv("DOCKER_HOST") && dimg && *dimg;
	sbx_host *h = host_for(state, docker);
	if (n > 0)
		bench_exec(h, docker, n);
	if (cycles > 0) {
		bench_cycle(h, NULL, cycles);
		bench_cycle(h, "network-host", cycles);
		bench_cycle(h, "plain", cycles);
	}
	const char *images = getenv("SBX_BENCH_IMAGES");
	while (images && *images) {
		const char *end = strchr(images, ',');
		size_t len = end ? (size_t)(end - images) : strlen(images);
		char path[1000];
		snprintf(path, sizeof(path), "%.*s", (int)len, images);
		if (path[0])
			bench_import(h, path);
		images = end ? end + 1 : NULL;
	}
	sbx_host_free(h);
	char *rm[] = {"rm", "-rf", state, NULL};
	return spawn_wait(rm);
}

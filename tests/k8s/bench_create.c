/* Create benchmark (not a test): N pods against the stand-in at a client-side QPS, with T
 * threads, then reports achieved request rate, failed creates and p50/p99 create->Ready.
 *
 * usage: k8s_bench_create STANDIN_DIR [N=1000] [QPS=50] [THREADS=32]
 * Start a stand-in first: python3 tests/k8s/standin_ctl.py start DIR */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minihost.h"

static sbx_plugin_desc desc;
static void *state;
static int total, next_i, failed;
static double *lat;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char first_error[512];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&lock);
		int i = next_i < total ? next_i++ : -1;
		pthread_mutex_unlock(&lock);
		if (i < 0)
			return NULL;
		sbx_kv labels[] = {{"sbx.run", "bench"}};
		sbx_create_spec spec = {.image = "busybox", .labels = labels, .n_labels = 1};
		SBX_INIT_HEADER(spec);
		char id[64];
		sbx_error err = {0};
		double t0 = now_s();
		int rc = desc.create(state, &spec, id, sizeof(id), &err);
		double dt = now_s() - t0;
		pthread_mutex_lock(&lock);
		lat[i] = rc == SBX_OK ? dt : -1;
		if (rc != SBX_OK && failed++ == 0)
			snprintf(first_error, sizeof(first_error), "%s", err.message);
		pthread_mutex_unlock(&lock);
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int destroy_one(void *ctx, const char *id)
{
	sbx_error err = {0};
	(void)ctx;
	desc.destroy(state, id, &err);
	return SBX_OK;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s STANDIN_DIR [N] [QPS] [THREADS]\n", argv[0]);
		return 2;
	}
	total = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 1000;
	const char *qps = argc > 3 ? argv[3] : "50";
	int threads = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 32;
	if (total < 1 || threads < 1 || threads > 1024) {
		fprintf(stderr, "bad N or THREADS\n");
		return 2;
	}
	char kc[1100], why[512];
	snprintf(kc, sizeof(kc), "%s/kubeconfig", argv[1]);
	if (minihost_load(K8S_PLUGIN_PATH, &desc, why, sizeof(why)) != 0) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	sbx_config cfg = {.keys = {"kubeconfig", "qps", "burst", "active_deadline_seconds"},
			  .vals = {kc, qps, qps, "0"},
			  .n = 4};
	sbx_error err = {0};
	if (desc.init(&cfg, &state, &err) != SBX_OK) {
		fprintf(stderr, "%s\n", err.message);
		return 1;
	}
	lat = calloc((size_t)total, sizeof(*lat));
	pthread_t *t = calloc((size_t)threads, sizeof(*t));
	if (!lat || !t)
		return 1;
	double t0 = now_s();
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	double wall = now_s() - t0;
	int ok = 0;
	for (int i = 0; i < total; i++)
		if (lat[i] >= 0)
			lat[ok++] = lat[i];
	qsort(lat, (size_t)ok, sizeof(*lat), cmp);
	/* Each create is a POST plus one watch (more on a re-watch). */
	printf("creates: %d in %.1f s (%.1f creates/s, >= %.1f requests/s at qps %s)\n", total,
	       wall, total / wall, 2.0 * total / wall, qps);
	printf("failed creates: %d%s%s\n", failed, failed ? " first: " : "", first_error);
	if (ok)
		printf("create->Ready p50 %.3f s, p99 %.3f s, max %.3f s\n", lat[ok / 2],
		       lat[(size_t)(ok * 0.99) < (size_t)ok ? (size_t)(ok * 0.99) : (size_t)ok - 1],
		       lat[ok - 1]);
	desc.list_by_label(state, "sbx.run", "bench", destroy_one, NULL, &err);
	desc.fini(state);
	free(lat);
	free(t);
	return failed ? 1 : 0;
}

/* The ledger's write cost per sandbox: the rows a create/destroy cycle writes (begin, confirm,
 * gone), timed alone, against a whole create + destroy on `local` through the host (which
 * includes them). Prints the cost per create and the ratio of a create with the ledger to the
 * same create without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ledger.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 300;
	const char *dir = getenv("SBX_STATE_DIR") ? getenv("SBX_STATE_DIR") : "/tmp";
	char path[1024];
	snprintf(path, sizeof(path), "%s/bench-ledger-%d.db", dir, (int)getpid());
	sbx__ledger *led = NULL;
	sbx_error err = {0};
	sbx_host *h = NULL;
	if (sbx__ledger_open(path, &led, &err) != SBX_OK ||
	    sbx_host_new(NULL, &h, &err) != SBX_OK) {
		fprintf(stderr, "bench_ledger: %s\n", err.message);
		return 1;
	}
	double t_led = 0, t_create = 0;
	for (int i = 0; i < n; i++) {
		sbx__ledger_row r;
		memset(&r, 0, sizeof(r));
		snprintf(r.token, sizeof(r.token), "bench-%d", i);
		snprintf(r.alias, sizeof(r.alias), "local");
		r.owner_pid = getpid();
		r.created = (int64_t)time(NULL);
		char id[SBX_ID_MAX];
		snprintf(id, sizeof(id), "local:bench%d", i);
		double t0 = now();
		if (sbx__ledger_begin(led, &r, &err) != SBX_OK ||
		    sbx__ledger_confirm(led, r.token, id, &err) != SBX_OK ||
		    sbx__ledger_set_state(led, id, SBX__LEDGER_GONE, &err) != SBX_OK) {
			fprintf(stderr, "bench_ledger: %s\n", err.message);
			return 1;
		}
		double t1 = now();
		char sid[SBX_ID_MAX];
		if (sbx_create(h, NULL, sid, &err) != SBX_OK ||
		    sbx_destroy(h, sid, &err) != SBX_OK) {
			fprintf(stderr, "bench_ledger: %s\n", err.message);
			return 1;
		}
		double t2 = now();
		t_led += t1 - t0;
		t_create += t2 - t1;
	}
	double per_led = t_led / n, per_create = t_create / n;
	printf("bench_ledger: %d cycles: ledger rows %.1f us per sandbox, create+destroy on local "
	       "%.1f us (ledger included); with/without ledger ratio %.3f\n",
	       n, per_led * 1e6, per_create * 1e6, per_create / (per_create - per_led));
	sbx_host_free(h);
	sbx__ledger_close(led);
	unlink(path);
	return 0;
}

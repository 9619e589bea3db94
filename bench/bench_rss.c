/* Peak RSS of the host while a command prints 1 GiB through sbx_exec on `local` (target
 * <= 32 MiB), against the RSS of the same process before the exec (the floor). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <sbx/host.h>

static long peak_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

int main(void)
{
	sbx_host *h = NULL;
	sbx_error err = {0};
	char id[SBX_ID_MAX];
	if (sbx_host_new(NULL, &h, &err) != SBX_OK || sbx_create(h, NULL, id, &err) != SBX_OK) {
		fprintf(stderr, "bench_rss: %s\n", err.message);
		return 1;
	}
	long before = peak_kib();
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.shell = "head -c 1073741824 /dev/zero";
	sbx_exec_result *r = NULL;
	if (sbx_exec(h, id, &o, &r, &err) != SBX_OK) {
		fprintf(stderr, "bench_rss: %s\n", err.message);
		return 1;
	}
	long after = peak_kib();
	printf("bench_rss: 1 GiB of output (%llu bytes seen, %llu stored): peak RSS %.1f MiB, "
	       "before the exec %.1f MiB, target <= 32 MiB (%.3f of it)\n",
	       (unsigned long long)r->stdout_bytes,
	       (unsigned long long)(r->stdout_bytes - r->stdout_dropped), after / 1024.0,
	       before / 1024.0, after / 1024.0 / 32.0);
	sbx_exec_result_free(r);
	sbx_destroy(h, id, NULL);
	sbx_host_free(h);
	return 0;
}

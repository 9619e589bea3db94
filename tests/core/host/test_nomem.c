/* Allocation failure along host_new, create, exec (with a cut display copy), read/write file
 * and destroy on the fixture plugin: for every N, allocation N fails; each step must then
 * succeed or return SBX_E_NOMEM, and once the host is freed no library allocation may be
 * left (counted here, and LeakSanitizer checks the rest at exit). A plain program, so a leak
 * or a wrong status fails the CTest entry directly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static long fail_at; /* 0: never */
static long calls;
static long live;
static int failed;

static void *t_alloc(size_t n)
{
	if (++calls == fail_at) {
		failed = 1;
		return NULL;
	}
	void *p = malloc(n);
	if (p)
		live++;
	return p;
}

static void *t_realloc(void *p, size_t n)
{
	if (++calls == fail_at) {
		failed = 1;
		return NULL;
	}
	void *q = realloc(p, n);
	if (q && !p)
		live++;
	return q;
}

static void t_free(void *p)
{
	if (p)
		live--;
	free(p);
}

static int bad(const char *step, int rc, const sbx_error *err)
{
	fprintf(stderr, "core_nomem: N=%ld: %s returned %s (%s); expected SBX_OK or SBX_E_NOMEM\n",
		fail_at, step, sbx_status_name(rc), err->message);
	return 1;
}

#define STEP(name, call)                                 \
	do {                                             \
		rc = (call);                             \
		if (rc == SBX_E_NOMEM)                   \
			goto out;                        \
		if (rc != SBX_OK) {                      \
			problems += bad(name, rc, &err); \
			goto out;                        \
		}                                        \
	} while (0)

static int count_row(void *ctx, const sbx_sandbox_record *rec)
{
	(void)ctx;
	(void)rec;
	return 0;
}

static int one_round(const char *state_dir)
{
	int rc, problems = 0;
	sbx_error err = {0};
	sbx_host *h = NULL;
	sbx_exec_result *r = NULL;
	void *data = NULL;
	size_t len = 0;
	char id[SBX_ID_MAX] = "";
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.config_text = "data_source:\n  sandbox:\n    type: hfix\n"
			"    output_char_threshold: 10\n    truncate_head_chars: 4\n"
			"    truncate_tail_chars: 4\n"
			"data_sources:\n  - name: two\n    sandbox:\n      type: hfix2\n";
	o.state_dir = state_dir;
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.ttl_seconds = 60;
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = "big 100000";
	eo.timeout = -1;

	STEP("sbx_host_new", sbx_host_new(&o, &h, &err));
	STEP("sbx_create", sbx_create(h, &co, id, &err));
	STEP("sbx_exec", sbx_exec(h, id, &eo, &r, &err));
	if (r->truncated != 1 || r->stdout_bytes != 100000) {
		fprintf(stderr, "core_nomem: N=%ld: wrong exec result\n", fail_at);
		problems++;
	}
	STEP("sbx_write_file", sbx_write_file(h, id, "f", "abc", 3, 0, &err));
	STEP("sbx_read_file", sbx_read_file(h, id, "f", &data, &len, &err));
	char *json = NULL;
	STEP("sbx_backend_info", sbx_backend_info(h, "hfix", &json, &err));
	sbx_free(json);
	co.data_source = "two";
	char id2[SBX_ID_MAX];
	STEP("sbx_create two", sbx_create(h, &co, id2, &err));
	STEP("sbx_destroy two", sbx_destroy(h, id2, &err));
	STEP("sbx_destroy", sbx_destroy(h, id, &err));
	id[0] = '\0';
	STEP("sbx_ledger_list", sbx_ledger_list(h, count_row, NULL, &err));
	STEP("sbx_gc", sbx_gc(h, 0, NULL, NULL, &err));
out:
	if (rc == SBX_E_NOMEM && !failed) {
		fprintf(stderr, "core_nomem: N=%ld: SBX_E_NOMEM without a failed allocation\n",
			fail_at);
		problems++;
	}
	if (rc == SBX_E_NOMEM && err.code != SBX_E_NOMEM) {
		fprintf(stderr, "core_nomem: N=%ld: error detail code %d, message '%s'\n", fail_at,
			err.code, err.message);
		problems++;
	}
	long saved = fail_at;
	fail_at = 0;
	if (id[0]) {
		sbx_error e2 = {0};
		sbx_destroy(h, id, &e2);
	}
	fail_at = saved;
	sbx_free(data);
	sbx_exec_result_free(r);
	sbx_host_free(h);
	return problems;
}

int main(void)
{
	char state_dir[600];
	snprintf(state_dir, sizeof(state_dir), "%s/nomem-%d", HOST_TMP, (int)getpid());
	sbx_set_allocator(t_alloc, t_realloc, t_free);
	int problems = 0;
	long n;
	for (n = 1; n < 100000; n++) {
		fail_at = n;
		calls = 0;
		failed = 0;
		problems += one_round(state_dir);
		if (live != 0) {
			fprintf(stderr, "core_nomem: N=%ld: %ld allocations left after the round\n",
				n, live);
			problems++;
			live = 0;
		}
		if (!failed)
			break;
	}
	sbx_set_allocator(NULL, NULL, NULL);
	printf("core_nomem: %ld allocation points checked, %d problems\n", n - 1, problems);
	return problems ? 1 : 0;
}

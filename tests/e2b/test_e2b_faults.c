/* The e2b backend against a stand-in that injects faults (see E2B_FAULTS in CMakeLists.txt):
 * a create answered 500 after it happened is adopted by metadata, one answered 500 before is
 * reported and never repeated, 429 with Retry-After and 503 on a GET are retried, and a
 * command whose stream is cut is reattached by pid with its earlier output kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <sbx/host.h>

static int count_lines(const char *needle)
{
	const char *p = getenv("SBX_E2B_LOG");
	FILE *f = p ? fopen(p, "r") : NULL;
	char line[512];
	int n = 0;
	cr_assert(f, "cannot open SBX_E2B_LOG");
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

Test(e2b_faults, create_status_and_exec_survive_injected_faults, .timeout = 60)
{
	sbx_host *h = NULL;
	sbx_error err = {0};
	sbx_host_options o = {.config_path = getenv("SBX_E2B_CONFIG")};
	SBX_INIT_HEADER(o);
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "host: %s", err.message);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	char id[SBX_ID_MAX], id2[SBX_ID_MAX];

	/* 500 after the sandbox was made: adopted through its create token. */
	cr_assert_eq(sbx_create(h, &c, id, &err), SBX_OK, "create: %s", err.message);
	/* 500 with nothing made: reported, not retried. */
	cr_assert_eq(sbx_create(h, &c, id2, &err), SBX_E_BACKEND);
	cr_assert(strstr(err.message, "not retried"), "%s", err.message);
	cr_assert_eq(count_lines("POST /v2/sandboxes 500"), 2);
	cr_assert_eq(count_lines("POST /v2/sandboxes 201"), 0);

	/* 429 (Retry-After: 0), then 503, then the answer. */
	uint32_t st = 0;
	cr_assert_eq(sbx_status(h, id, &st, &err), SBX_OK, "status: %s", err.message);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	cr_assert_eq(count_lines(" 429"), 1);
	cr_assert_eq(count_lines(" 503"), 1);

	/* The Start stream is cut 400 ms in; Connect(pid) picks the command up again. */
	sbx_exec_opts e = {.shell = "echo a; sleep 1; echo b; exit 4"};
	SBX_INIT_HEADER(e);
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(h, id, &e, &r, &err), SBX_OK, "exec: %s", err.message);
	cr_assert_eq(r->exit_code, 4);
	cr_assert_str_eq(r->stdout_text, "a\nb\n");
	cr_assert_eq(count_lines("> POST /process.Process/Connect"), 1);
	sbx_exec_result_free(r);

	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK, "destroy: %s", err.message);
	sbx_host_free(h);
}

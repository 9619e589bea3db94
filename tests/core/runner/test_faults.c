/* Faulty plugins through the C API. `inproc/`: what the host does with an in-process plugin's
 * out-of-range outcomes and late output callbacks. The registry comes from $FAULTS_REGISTRY. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static const char *config_text = "data_source:\n"
				 "  sandbox:\n"
				 "    type: rogue\n"
				 "data_sources:\n"
				 "  - name: good\n"
				 "    sandbox:\n"
				 "      type: ok\n";

static int counter;

static sbx_host *new_host(void)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/faults-%d-%d", RUNNER_TMP, (int)getpid(), ++counter);
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = getenv("FAULTS_REGISTRY");
	cr_assert_not_null(o.registry_path, "FAULTS_REGISTRY is not set");
	o.config_text = config_text;
	o.state_dir = dir;
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	return h;
}

static void create(sbx_host *h, const char *ds, char id[SBX_ID_MAX])
{
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.data_source = ds;
	sbx_error err = {0};
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_OK, "%s", err.message);
}

/* Runs shell in id; returns the status, the result in *res when SBX_OK. */
static int run(sbx_host *h, const char *id, const char *shell, sbx_exec_result **res,
	       sbx_error *err)
{
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = shell;
	eo.timeout = -1;
	*res = NULL;
	return sbx_exec(h, id, &eo, res, err);
}

static void expect_output(sbx_host *h, const char *id, const char *shell, const char *out)
{
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(run(h, id, shell, &r, &err), SBX_OK, "%s: %s", shell, err.message);
	cr_assert_str_eq(r->stdout_text, out, "%s", shell);
	cr_assert_eq(r->exit_code, 0);
	sbx_exec_result_free(r);
}

static void expect_failure(sbx_host *h, const char *id, const char *shell, int status,
			   const char *message)
{
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	int rc = run(h, id, shell, &r, &err);
	cr_assert_eq(rc, status, "%s: %s (%s)", shell, sbx_status_name(rc), err.message);
	cr_assert_null(r);
	if (message)
		cr_assert_str_eq(err.message, message, "%s", shell);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

Test(inproc, late_output_callbacks_reach_no_call)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(run(h, id, "late", &r, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(r->stdout_text, "on time\n");
	char path[1024];
	snprintf(path, sizeof(path), "%s", r->stdout_file);
	sbx_exec_result_free(r);
	/* The plugin's thread keeps calling back for 300 ms while later calls run; none of its
	 * bytes may land in them, nor in the finished call's file. */
	expect_output(h, id, "sleep 150", "slept\n");
	expect_output(h, id, "sleep 200", "slept\n");
	sleep_ms(100);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	char buf[64] = {0};
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	cr_assert_eq(n, 8);
	cr_assert_str_eq(buf, "on time\n");
	sbx_host_free(h);
}

Test(inproc, out_of_range_outcomes_are_refused_naming_the_plugin)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "bad-exit", SBX_E_BACKEND,
		       "rogue: exec: plugin reported exit code 1000, outside -1..255");
	expect_failure(h, id, "bad-signal", SBX_E_BACKEND,
		       "rogue: exec: plugin reported signal -3, outside 0..64");
	expect_failure(h, id, "bad-timed-out", SBX_E_BACKEND,
		       "rogue: exec: plugin reported timed_out 7, expected 0 or 1");
	expect_output(h, id, "still fine", "still fine\n");
	sbx_host_free(h);
}

Test(inproc, statuses_that_are_not_sbx_statuses_become_backend_errors)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "bad-status", SBX_E_BACKEND,
		       "rogue: exec: plugin returned -7, which is not an sbx failure status");
	expect_failure(h, id, "huge-status", SBX_E_BACKEND,
		       "rogue: exec: plugin returned 99999, which is not an sbx failure status");
	sbx_host_free(h);
}

Test(inproc, output_on_an_unknown_stream_is_refused)
{
	sbx_host *h = new_host();
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	expect_failure(h, id, "bad-stream", SBX_E_INVAL, "rogue: exec: invalid argument");
	sbx_host_free(h);
}

Test(inproc, unknown_sandbox_state_is_refused)
{
	sbx_host *h = new_host();
	uint32_t st = 99;
	sbx_error err = {0};
	cr_assert_eq(sbx_status(h, "rogue:x-bad", &st, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message,
			 "rogue: status: plugin reported state 77, not an SBX_STATE_* value");
	cr_assert_eq(st, SBX_STATE_UNKNOWN);
	cr_assert_eq(sbx_status(h, "rogue:x", &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	sbx_host_free(h);
}

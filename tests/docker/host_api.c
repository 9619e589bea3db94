/* The docker backend through the public embedding API (libsbx, the build-tree registry and
 * tests/docker/docker.yaml), against the engine of a docker_<engine> fixture (Podman or
 * Docker Engine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include <sbx/host.h>

static sbx_host *h;
static char id[SBX_ID_MAX];

static void setup(void)
{
	sbx_host_options o = {.config_path = SBX_DOCKER_CONFIG};
	SBX_INIT_HEADER(o);
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "host: %s", err.message);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(h, &c, id, &err), SBX_OK, "create: %s", err.message);
	cr_assert_eq(strncmp(id, "docker:", 7), 0, "%s", id);
}

static void teardown(void)
{
	sbx_error err = {0};
	if (h && id[0])
		cr_expect_eq(sbx_destroy(h, id, &err), SBX_OK, "destroy: %s", err.message);
	sbx_host_free(h);
	h = NULL;
}

static sbx_exec_result *run(const char *shell, double timeout, const char *in, size_t in_len)
{
	sbx_exec_opts o = {.shell = shell,
			   .timeout = timeout,
			   .has_stdin = in != NULL,
			   .stdin_data = in,
			   .stdin_len = in_len};
	SBX_INIT_HEADER(o);
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_exec(h, id, &o, &r, &err), SBX_OK, "exec %s: %s", shell, err.message);
	return r;
}

TestSuite(docker_host, .init = setup, .fini = teardown, .timeout = 120);

Test(docker_host, exec_through_the_host_keeps_streams_exit_code_and_stdin)
{
	sbx_exec_result *r = run("printf 'a\\n'; printf 'b' >&2; exit 7", 0, NULL, 0);
	cr_assert_eq(r->exit_code, 7);
	cr_assert_eq(r->stdout_text_len, 2);
	cr_assert_arr_eq(r->stdout_text, "a\n", 2);
	cr_assert_eq(r->stderr_text_len, 1);
	cr_assert_arr_eq(r->stderr_text, "b", 1);
	cr_assert_eq(r->truncated, 0);
	sbx_exec_result_free(r);
	r = run("cat", 0, "x\0y", 3);
	cr_assert_eq(r->exit_code, 0);
	cr_assert_eq(r->stdout_bytes, 3);
	cr_assert_arr_eq(r->stdout_text, "x\0y", 3);
	sbx_exec_result_free(r);
}

Test(docker_host, timeout_leaves_no_process_of_the_command)
{
	sbx_exec_result *r =
	    run("echo begun; sleep 120 & setsid sleep 110 & sleep 100", 1.0, NULL, 0);
	cr_assert_eq(r->timed_out, 1);
	cr_assert_eq(r->stdout_text_len, 6);
	cr_assert_arr_eq(r->stdout_text, "begun\n", 6);
	sbx_exec_result_free(r);
	r = run("ps -o args", 0, NULL, 0);
	cr_assert(strstr(r->stdout_text, "sleep 3600"), "%s", r->stdout_text);
	cr_assert_null(strstr(r->stdout_text, "sleep 1"), "survivor: %s", r->stdout_text);
	sbx_exec_result_free(r);
}

Test(docker_host, files_and_lifecycle_through_the_host)
{
	sbx_error err = {0};
	cr_assert_eq(sbx_write_file(h, id, "d/hello.txt", "hi\n", 3, 0, &err), SBX_OK, "%s",
		     err.message);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_read_file(h, id, "d/hello.txt", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(len, 3);
	cr_assert_arr_eq(data, "hi\n", 3);
	sbx_free(data);
	sbx_file_info fi;
	SBX_INIT_HEADER(fi);
	cr_assert_eq(sbx_stat(h, id, "d/hello.txt", &fi, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(fi.size, 3);
	cr_assert_eq(fi.mode, 0644);
	uint32_t st = 0;
	cr_assert_eq(sbx_pause(h, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(h, id, &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(st, SBX_STATE_PAUSED);
	cr_assert_eq(sbx_resume(h, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(h, id, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	char *json = NULL;
	cr_assert_eq(sbx_backend_info(h, "docker", &json, &err), SBX_OK, "%s", err.message);
	cr_assert(strstr(json, "\"api_version\":\"1.41\""), "%s", json);
	sbx_free(json);
}

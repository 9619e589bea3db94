/* The e2b backend through libsbx's public API against the stand-in gateway (e2b_standin
 * fixture; SBX_E2B_CONFIG names the config it wrote). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <sbx/host.h>

static sbx_host *h;
static char id[SBX_ID_MAX];

static void setup(void)
{
	const char *cfg = getenv("SBX_E2B_CONFIG");
	cr_assert(cfg, "SBX_E2B_CONFIG is not set");
	sbx_host_options o = {.config_path = cfg};
	SBX_INIT_HEADER(o);
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "host: %s", err.message);
	sbx_kv env[] = {{"SBX_E2B_SANDBOX_ENV", "from-create"}};
	sbx_create_opts c = {.env = env, .n_env = 1};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(h, &c, id, &err), SBX_OK, "create: %s", err.message);
	cr_assert_eq(strncmp(id, "e2b:", 4), 0, "%s", id);
	cr_assert_eq(strlen(id), 4 + 20, "%s", id);
}

static void teardown(void)
{
	sbx_error err = {0};
	if (h && id[0])
		cr_expect_eq(sbx_destroy(h, id, &err), SBX_OK, "destroy: %s", err.message);
	sbx_host_free(h);
	h = NULL;
}

static sbx_exec_result *run_opts(sbx_exec_opts *o)
{
	SBX_INIT_HEADER(*o);
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_exec(h, id, o, &r, &err), SBX_OK, "exec: %s", err.message);
	return r;
}

static sbx_exec_result *run(const char *shell, double timeout, const char *in, size_t in_len)
{
	sbx_exec_opts o = {.shell = shell,
			   .timeout = timeout,
			   .has_stdin = in != NULL,
			   .stdin_data = in,
			   .stdin_len = in_len};
	return run_opts(&o);
}

TestSuite(e2b, .init = setup, .fini = teardown, .timeout = 60);

Test(e2b, exec_keeps_streams_exit_code_and_stdin_bytes)
{
	sbx_exec_result *r = run("printf 'a\\n'; printf 'b' >&2; exit 7", 0, NULL, 0);
	cr_assert_eq(r->exit_code, 7);
	cr_assert_eq(r->signal, 0);
	cr_assert_eq(r->stdout_text_len, 2);
	cr_assert_arr_eq(r->stdout_text, "a\n", 2);
	cr_assert_eq(r->stderr_text_len, 1);
	cr_assert_arr_eq(r->stderr_text, "b", 1);
	sbx_exec_result_free(r);
	r = run("cat", 0, "x\0y", 3);
	cr_assert_eq(r->exit_code, 0);
	cr_assert_eq(r->stdout_bytes, 3);
	cr_assert_arr_eq(r->stdout_text, "x\0y", 3);
	sbx_exec_result_free(r);
	r = run("cat; echo end", 0, NULL, 0);
	cr_assert_str_eq(r->stdout_text, "end\n", "stdin is not /dev/null: %s", r->stdout_text);
	sbx_exec_result_free(r);
}

Test(e2b, argv_is_passed_unspliced_with_env_and_cwd)
{
	const char *argv[] = {"printf", "%s|%s|", "a b", "$HOME;'q'", NULL};
	sbx_exec_opts o = {.argv = argv};
	sbx_exec_result *r = run_opts(&o);
	cr_assert_str_eq(r->stdout_text, "a b|$HOME;'q'|");
	sbx_exec_result_free(r);
	sbx_error err = {0};
	cr_assert_eq(sbx_mkdir(h, id, "wd", 0, &err), SBX_OK, "%s", err.message);
	sbx_kv env[] = {{"K", "v 1"}};
	sbx_exec_opts o2 = {.shell = "echo \"$K|$SBX_E2B_SANDBOX_ENV|${PWD##*/}\"",
			    .env = env,
			    .n_env = 1,
			    .cwd = "wd"};
	r = run_opts(&o2);
	cr_assert_str_eq(r->stdout_text, "v 1|from-create|wd\n");
	sbx_exec_result_free(r);
}

Test(e2b, signal_death_reports_the_signal)
{
	sbx_exec_result *r = run("kill -TERM $$", 0, NULL, 0);
	cr_assert_eq(r->exit_code, -1);
	cr_assert_eq(r->signal, 15);
	sbx_exec_result_free(r);
}

Test(e2b, timeout_kills_the_process_group_and_keeps_partial_output)
{
	/* The stand-in's processes share the machine with other test runs: durations unique to
	 * this process tell ours apart. */
	char cmd[200], check[200];
	unsigned u = 100000u + (unsigned)getpid() % 100000u;
	snprintf(cmd, sizeof(cmd),
		 "echo begun; sleep %u1 & setsid sleep %u2 & sleep %u3; echo never", u, u, u);
	snprintf(check, sizeof(check), "ps -eo args | grep -c '^sleep %u[123]$'", u);
	sbx_exec_result *r = run(cmd, 1.0, NULL, 0);
	cr_assert_eq(r->timed_out, 1);
	cr_assert_eq(r->stdout_text_len, 6);
	cr_assert_arr_eq(r->stdout_text, "begun\n", 6);
	sbx_exec_result_free(r);
	r = run(check, 0, NULL, 0);
	cr_assert_str_eq(r->stdout_text, "0\n", "survivors: %s", r->stdout_text);
	sbx_exec_result_free(r);
}

Test(e2b, files_write_read_stat_list_mkdir_remove)
{
	sbx_error err = {0};
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_write_file(h, id, "d/f.bin", "a\0b\xff", 4, 0, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(sbx_read_file(h, id, "d/f.bin", &data, &len, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(len, 4);
	cr_assert_arr_eq(data, "a\0b\xff", 4);
	sbx_free(data);
	cr_assert_eq(sbx_write_file(h, id, "d/x.sh", "#!/bin/sh\necho ran\n", 19, 0755, &err),
		     SBX_OK, "%s", err.message);
	sbx_file_info fi;
	SBX_INIT_HEADER(fi);
	cr_assert_eq(sbx_stat(h, id, "d/x.sh", &fi, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(fi.kind, SBX_FILE_REGULAR);
	cr_assert_eq(fi.size, 19);
	cr_assert_eq(fi.mode, 0755, "mode %o", fi.mode);
	cr_assert_str_eq(fi.name, "x.sh");
	cr_assert_gt(fi.mtime, 1600000000);
	sbx_exec_result *r = run("./d/x.sh", 0, NULL, 0);
	cr_assert_str_eq(r->stdout_text, "ran\n");
	sbx_exec_result_free(r);
	sbx_file_info *ents = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_list_dir(h, id, "d", &ents, &n, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(ents[0].name, "f.bin");
	cr_assert_str_eq(ents[1].name, "x.sh");
	sbx_free(ents);
	cr_assert_eq(sbx_read_file(h, id, "nope", &data, &len, &err), SBX_E_NO_FILE);
	cr_assert_eq(sbx_stat(h, id, "nope", &fi, &err), SBX_E_NO_FILE);
	cr_assert_eq(sbx_mkdir(h, id, "p/q", 0, &err), SBX_E_NO_FILE, "%s", err.message);
	cr_assert_eq(sbx_mkdir(h, id, "p/q", 1, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_mkdir(h, id, "p/q", 1, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_mkdir(h, id, "p/q", 0, &err), SBX_E_EXISTS, "%s", err.message);
	cr_assert_eq(sbx_stat(h, id, "p/q", &fi, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(fi.kind, SBX_FILE_DIR);
	cr_assert_neq(sbx_remove(h, id, "d", 0, &err), SBX_OK);
	cr_assert_eq(sbx_remove(h, id, "d", 1, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_stat(h, id, "d", &fi, &err), SBX_E_NO_FILE);
	cr_assert_eq(sbx_remove(h, id, "d", 1, &err), SBX_E_NO_FILE);
}

Test(e2b, pause_resume_status_and_destroy_twice)
{
	sbx_error err = {0};
	uint32_t st = 0;
	cr_assert_eq(sbx_status(h, id, &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	cr_assert_eq(sbx_pause(h, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(h, id, &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(st, SBX_STATE_PAUSED);
	cr_assert_eq(sbx_resume(h, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(h, id, &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	sbx_exec_result *r = run("echo back", 0, NULL, 0);
	cr_assert_str_eq(r->stdout_text, "back\n");
	sbx_exec_result_free(r);
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(h, id, &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(st, SBX_STATE_GONE);
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK, "%s", err.message);
	sbx_exec_opts o = {.shell = "true"};
	SBX_INIT_HEADER(o);
	sbx_exec_result *gone = NULL;
	cr_assert_eq(sbx_exec(h, id, &o, &gone, &err), SBX_E_NOT_FOUND, "%s", err.message);
	id[0] = '\0';
}

Test(e2b, template_map_then_plain_names_choose_the_template)
{
	sbx_exec_result *r = run("echo $E2B_TEMPLATE_ID", 0, NULL, 0);
	cr_assert_str_eq(r->stdout_text, "base\n");
	sbx_exec_result_free(r);
	sbx_error err = {0};
	char other[SBX_ID_MAX];
	sbx_create_opts c = {.image = "nope:1"};
	SBX_INIT_HEADER(c);
	cr_assert_eq(sbx_create(h, &c, other, &err), SBX_E_CONFIG);
	cr_assert(strstr(err.message, "template_map"), "%s", err.message);
	c.image = "python:3.12";
	cr_assert_eq(sbx_create(h, &c, other, &err), SBX_OK, "%s", err.message);
	char keep[SBX_ID_MAX];
	memcpy(keep, id, sizeof(keep));
	memcpy(id, other, sizeof(id));
	r = run("echo $E2B_TEMPLATE_ID", 0, NULL, 0);
	cr_assert_str_eq(r->stdout_text, "py312\n");
	sbx_exec_result_free(r);
	cr_assert_eq(sbx_destroy(h, other, &err), SBX_OK, "%s", err.message);
	memcpy(id, keep, sizeof(id));
}

Test(e2b, a_wrong_key_is_a_config_error_that_does_not_show_the_key)
{
	const char *cfg = getenv("SBX_E2B_CONFIG");
	cr_assert(cfg);
	FILE *f = fopen(cfg, "r");
	cr_assert(f);
	char text[4096];
	size_t n = fread(text, 1, sizeof(text) - 200, f);
	fclose(f);
	text[n] = '\0';
	snprintf(text + n, sizeof(text) - n, "    api_key: e2b_wrongkey0123456789\n");
	sbx_host_options o = {.config_text = text};
	SBX_INIT_HEADER(o);
	sbx_host *wh = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &wh, &err), SBX_OK, "host: %s", err.message);
	sbx_create_opts c = {0};
	SBX_INIT_HEADER(c);
	char wid[SBX_ID_MAX];
	cr_assert_eq(sbx_create(wh, &c, wid, &err), SBX_E_CONFIG, "%s", err.message);
	cr_assert(strstr(err.message, "401"), "%s", err.message);
	cr_assert_null(strstr(err.message, "wrongkey"), "%s", err.message);
	sbx_host_free(wh);
}

Test(e2b, a_background_child_holding_stdout_lives_on_without_keeping_the_call_open)
{
	/* The call ends at the wrapper's end markers; the children keep running. */
	char cmd[200], check[200];
	unsigned u = 100000u + (unsigned)getpid() % 100000u;
	snprintf(cmd, sizeof(cmd), "sleep %u4 & setsid sleep %u5 & echo done; exit 3", u, u);
	snprintf(check, sizeof(check), "ps -eo args | grep -c '^sleep %u[45]$'", u);
	sbx_exec_result *r = run(cmd, 30.0, NULL, 0);
	cr_assert_eq(r->timed_out, 0);
	cr_assert_eq(r->exit_code, 3);
	cr_assert_str_eq(r->stdout_text, "done\n");
	sbx_exec_result_free(r);
	r = run(check, 0, NULL, 0);
	cr_assert_str_eq(r->stdout_text, "2\n", "leftovers running: %s", r->stdout_text);
	sbx_exec_result_free(r);
}

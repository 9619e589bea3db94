/* The host object and routing: lazy loading (one load per file, faulty aliases keep their
 * reason), per-data-source plugin states, labels, ids, exec through the spool with the
 * data source's policy, pause and auto_resume, files, serialised non-thread-safe plugins. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fork_tests.h"
#include "internal.h"

static const char *config_text = "data_source:\n"
				 "  sandbox:\n"
				 "    type: hfix\n"
				 "    timeout: 7\n"
				 "data_sources:\n"
				 "  - name: second\n"
				 "    sandbox:\n"
				 "      type: hfix2\n"
				 "      greeting: bonjour\n"
				 "      auto_resume: true\n"
				 "  - name: off\n"
				 "    sandbox:\n"
				 "      type: none\n"
				 "  - name: broken\n"
				 "    sandbox:\n"
				 "      type: gone\n"
				 "  - name: badinit\n"
				 "    sandbox:\n"
				 "      type: hfix\n"
				 "      fail_init: true\n"
				 "  - name: ttl\n"
				 "    sandbox:\n"
				 "      type: hfix\n"
				 "      ttl: 600\n";

static char state_dir[600];
static int counter;

static sbx_host *new_host(const char *cfg)
{
	snprintf(state_dir, sizeof(state_dir), "%s/host-%d-%d", HOST_TMP, (int)getpid(), ++counter);
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.config_text = cfg;
	o.state_dir = state_dir;
	o.run_id = "run-42";
	sbx_host *h = NULL;
	sbx_error err = {0};
	int rc = sbx_host_new(&o, &h, &err);
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
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

static sbx_exec_result *run(sbx_host *h, const char *id, const char *shell, double timeout)
{
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = shell;
	eo.timeout = timeout;
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_OK, "%s", err.message);
	return r;
}

static int exec_status(sbx_host *h, const char *id, const char *shell, sbx_error *err)
{
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = shell;
	eo.timeout = -1;
	sbx_exec_result *r = NULL;
	int rc = sbx_exec(h, id, &eo, &r, err);
	sbx_exec_result_free(r);
	return rc;
}

Test(host, state_dir_is_created_private)
{
	sbx_host *h = new_host(config_text);
	struct stat st;
	cr_assert_eq(stat(state_dir, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	sbx_host_free(h);
}

/* The soft open-files limit under the hard one, as a login shell leaves it; 0 when the hard
 * limit here is too low to tell a raise. */
static rlim_t lower_soft_limit(rlim_t soft)
{
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= soft + 100)
		return 0;
	rl.rlim_cur = soft;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "%s", strerror(errno));
	return rl.rlim_max > ((rlim_t)1 << 20) ? (rlim_t)1 << 20 : rl.rlim_max;
}

static rlim_t soft_limit(void)
{
	struct rlimit rl;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	return rl.rlim_cur;
}

/* The first host raises the process's soft limit to the hard one (at most 2^20), once; the
 * host API tells plugins what commands should get back. Each test is a process of its own. */
Test(host, the_first_host_raises_the_open_files_limit_once)
{
	rlim_t raised = lower_soft_limit(150);
	if (!raised)
		cr_skip_test("the hard open-files limit here is too low to tell");
	const sbx_host_api *api = sbx__host_api();
	cr_assert_eq(api->command_nofile(), 0, "nothing raised yet");
	sbx_host *h = new_host(config_text);
	cr_assert_eq(soft_limit(), raised);
	cr_assert_eq(api->command_nofile(), 150);
	/* Lowered again by the harness: a later host leaves it to the harness. */
	lower_soft_limit(300);
	sbx_host *h2 = new_host(config_text);
	cr_assert_eq(soft_limit(), 300);
	cr_assert_eq(api->command_nofile(), 150);
	sbx_host_free(h2);
	sbx_host_free(h);
}

Test(host, sbx_keep_nofile_leaves_the_open_files_limit)
{
	if (!lower_soft_limit(150))
		cr_skip_test("the hard open-files limit here is too low to tell");
	setenv("SBX_KEEP_NOFILE", "1", 1);
	sbx_host *h = new_host(config_text);
	unsetenv("SBX_KEEP_NOFILE");
	cr_assert_eq(soft_limit(), 150);
	cr_assert_eq(sbx__host_api()->command_nofile(), 0);
	sbx_host_free(h);
}

Test(host, plugins_load_lazily_and_one_file_loads_once)
{
	sbx_host *h = new_host(config_text);
	cr_assert_eq(sbx_plugin_count(h), 3);
	sbx_plugin_info info;
	memset(&info, 0, sizeof(info));
	SBX_INIT_HEADER(info);
	sbx_error err = {0};
	/* Alias order: gone, hfix, hfix2. */
	cr_assert_eq(sbx_plugin_get(h, 1, &info, &err), SBX_OK);
	cr_assert_str_eq(info.alias, "hfix");
	cr_assert_str_eq(info.path, HFIX_SO);
	cr_assert_str_eq(info.registry_file, HFIX_REGISTRY);
	cr_assert_eq(info.state, SBX_PLUGIN_UNLOADED);
	cr_assert_null(info.version);
	cr_assert_eq(sbx_plugin_load(h, "hfix", &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_plugin_get(h, 2, &info, &err), SBX_OK);
	cr_assert_str_eq(info.alias, "hfix2");
	cr_assert_eq(info.state, SBX_PLUGIN_LOADED);
	cr_assert_str_eq(info.version, "2.5");
	cr_assert_str_eq(info.description, "host test fixture");
	cr_assert_eq(info.plugin_abi_major, SBX_ABI_MAJOR);
	cr_assert_null(info.reason);
	cr_assert_eq(sbx_plugin_get(h, 3, &info, &err), SBX_E_INVAL);
	sbx_host_free(h);
}

Test(host, faulty_alias_keeps_its_reason_and_others_work)
{
	sbx_host *h = new_host(config_text);
	sbx_error e1 = {0}, e2 = {0};
	int rc1 = sbx_plugin_load(h, "gone", &e1);
	cr_assert_neq(rc1, SBX_OK);
	char id[SBX_ID_MAX];
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.data_source = "broken";
	int rc2 = sbx_create(h, &co, id, &e2);
	cr_assert_eq(rc2, rc1);
	cr_assert_str_eq(e2.message, e1.message);
	cr_assert(strncmp(e1.message, "gone: ", 6) == 0, "%s", e1.message);
	cr_assert(strstr(e1.message, "sbx-missing.so") != NULL, "%s", e1.message);
	sbx_plugin_info info;
	memset(&info, 0, sizeof(info));
	SBX_INIT_HEADER(info);
	cr_assert_eq(sbx_plugin_get(h, 0, &info, &e2), SBX_OK);
	cr_assert_eq(info.state, SBX_PLUGIN_FAULTY);
	cr_assert_str_eq(info.reason, e1.message);
	create(h, NULL, id);
	cr_assert_str_eq(id, "hfix:h-1");
	sbx_host_free(h);
}

Test(host, bad_ids_and_unknown_alias_are_clear_errors)
{
	sbx_host *h = new_host(config_text);
	sbx_error err = {0};
	cr_assert_eq(exec_status(h, "nocolon", "x", &err), SBX_E_BAD_ID);
	cr_assert_eq(exec_status(h, "", "x", &err), SBX_E_BAD_ID);
	cr_assert_eq(sbx_destroy(h, "hfix:", &err), SBX_E_BAD_ID);
	cr_assert_eq(sbx_destroy(h, NULL, &err), SBX_E_BAD_ID);
	cr_assert_eq(exec_status(h, "nope:x", "x", &err), SBX_E_UNKNOWN_ALIAS);
	cr_assert_str_eq(err.message, "unknown sandbox type 'nope'; known: gone, hfix, hfix2");
	cr_assert_eq(exec_status(h, "hfix:h-999", "x", &err), SBX_E_NOT_FOUND);
	cr_assert_str_eq(err.message, "hfix: execute: no sandbox 'h-999'");
	sbx_host_free(h);
}

Test(host, create_exec_destroy_round_trip)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	cr_assert_str_eq(id, "hfix:h-1");
	sbx_exec_result *r = run(h, id, "hi there", -1);
	cr_assert_eq(r->exit_code, 0);
	cr_assert_str_eq(r->stdout_text, "hi there\n");
	cr_assert_eq(r->stdout_text_len, 9);
	cr_assert_str_eq(r->stderr_text, "");
	cr_assert_eq(r->truncated, 0);
	cr_assert_geq(r->duration, 0.0);
	char calls[700];
	snprintf(calls, sizeof(calls), "%s/calls/hfix%%3Ah-1/", state_dir);
	cr_assert(strncmp(r->output_dir, calls, strlen(calls)) == 0, "%s", r->output_dir);
	char path[900];
	snprintf(path, sizeof(path), "%s/command.txt", r->output_dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char line[64] = {0};
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_str_eq(line, "hi there");
	sbx_exec_result_free(r);

	r = run(h, id, "exit 3", -1);
	cr_assert_eq(r->exit_code, 3);
	sbx_exec_result_free(r);
	r = run(h, id, "stderr", -1);
	cr_assert_str_eq(r->stderr_text, "err\n");
	sbx_exec_result_free(r);

	sbx_error err = {0};
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK, "%s", err.message);
	calls[strlen(calls) - 1] = '\0';
	struct stat st;
	cr_assert_eq(stat(calls, &st), -1, "%s still exists", calls);
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK, "already gone succeeds");
	sbx_host_free(h);
}

Test(host, argv_exec_and_stdin)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	const char *argv[] = {"echo", "it's", NULL};
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.argv = argv;
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(r->stdout_text, "echo it's\n");
	char path[900];
	snprintf(path, sizeof(path), "%s/command.txt", r->output_dir);
	FILE *f = fopen(path, "r");
	char line[64] = {0};
	cr_assert_not_null(fgets(line, sizeof(line), f));
	fclose(f);
	cr_assert_str_eq(line, "'echo' 'it'\\''s'");
	sbx_exec_result_free(r);

	eo.argv = NULL;
	eo.shell = "cat";
	eo.has_stdin = 1;
	eo.stdin_data = "in\0put";
	eo.stdin_len = 6;
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(r->stdout_text_len, 6);
	cr_assert_eq(memcmp(r->stdout_text, "in\0put", 6), 0);
	sbx_exec_result_free(r);

	eo.argv = argv;
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_E_INVAL);
	cr_assert_null(r);
	cr_assert_str_eq(err.message, "exec: give exactly one of shell and a non-empty argv");
	sbx_host_free(h);
}

Test(host, labels_carry_owner_run_data_source_and_expiry)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	sbx_kv extra = {"team", "rl"};
	co.labels = &extra;
	co.n_labels = 1;
	sbx_error err = {0};
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_OK, "%s", err.message);
	sbx_exec_result *r = run(h, id, "labels", -1);
	char host_name[256];
	gethostname(host_name, sizeof(host_name));
	char want[1024];
	snprintf(want, sizeof(want), "sbx.owner=%s:%d\nsbx.run=run-42\nsbx.data_source=default\n",
		 host_name, (int)getpid());
	cr_assert(strncmp(r->stdout_text, want, strlen(want)) == 0, "%s", r->stdout_text);
	const char *tok = r->stdout_text + strlen(want);
	cr_assert(strncmp(tok, "sbx.token=", 10) == 0, "%s", tok);
	cr_assert_eq(strspn(tok + 10, "0123456789abcdef"), 30, "%s", tok);
	cr_assert(strncmp(tok + 40, "\nsbx.ledger=", 12) == 0, "%s", tok);
	cr_assert_eq(strspn(tok + 52, "0123456789abcdef"), 16, "%s", tok);
	cr_assert_str_eq(tok + 68, "\nteam=rl\n");
	sbx_exec_result_free(r);

	create(h, "ttl", id);
	r = run(h, id, "labels", -1);
	const char *exp = strstr(r->stdout_text, "sbx.expires=");
	cr_assert_not_null(exp, "%s", r->stdout_text);
	long long t = strtoll(exp + 12, NULL, 10);
	long long now = (long long)time(NULL);
	cr_assert(t >= now + 590 && t <= now + 600, "%lld vs %lld", t, now);
	cr_assert_not_null(strstr(r->stdout_text, "sbx.data_source=ttl\n"));
	sbx_exec_result_free(r);
	sbx_host_free(h);
}

Test(host, data_source_config_reaches_its_own_plugin_state)
{
	sbx_host *h = new_host(config_text);
	char a[SBX_ID_MAX], b[SBX_ID_MAX];
	create(h, NULL, a);
	create(h, "second", b);
	cr_assert_str_eq(b, "hfix2:h-2");
	sbx_exec_result *r = run(h, a, "greeting", -1);
	cr_assert_str_eq(r->stdout_text, "from-registry");
	sbx_exec_result_free(r);
	r = run(h, b, "greeting", -1);
	cr_assert_str_eq(r->stdout_text, "bonjour");
	sbx_exec_result_free(r);
	/* By index too. */
	char c[SBX_ID_MAX];
	create(h, "0", c);
	cr_assert_str_eq(c, "hfix2:h-3");
	sbx_host_free(h);
}

Test(host, data_sources_are_listed)
{
	sbx_host *h = new_host(config_text);
	cr_assert_eq(sbx_data_source_count(h), 5);
	const char *name, *alias;
	sbx_error err = {0};
	cr_assert_eq(sbx_data_source_get(h, SIZE_MAX, &name, &alias, &err), SBX_OK);
	cr_assert_str_eq(name, "default");
	cr_assert_str_eq(alias, "hfix");
	cr_assert_eq(sbx_data_source_get(h, 1, &name, &alias, &err), SBX_OK);
	cr_assert_str_eq(name, "off");
	cr_assert_null(alias);
	cr_assert_eq(sbx_data_source_get(h, 5, &name, &alias, &err), SBX_E_INVAL);
	sbx_host_free(h);
}

Test(host, type_none_and_failed_init_are_errors)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.data_source = "off";
	sbx_error err = {0};
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "create: data source 'off' has no sandbox (type: none); set "
				      "sandbox.type to a backend alias");
	co.data_source = "badinit";
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "hfix: init: asked to fail");
	cr_assert_str_eq(id, "");
	co.data_source = NULL;
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_OK, "%s", err.message);
	sbx_host_free(h);
}

Test(host, bad_backend_ids_are_refused)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	sbx_error err = {0};
	co.image = "empty";
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "hfix: create: plugin returned an empty sandbox id (at most "
				      "250 bytes allowed)");
	co.image = "unterminated";
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_E_BACKEND);
	cr_assert_str_eq(id, "");
	co.image = "space";
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "hfix: create: plugin returned an id with spaces or control "
				      "characters (destroyed it)");
	co.image = "fail";
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "hfix: create: image 'fail' refused");
	sbx_host_free(h);
}

Test(host, timeout_defaults_from_the_data_source)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_exec_result *r = run(h, id, "timeout", -1);
	cr_assert_str_eq(r->stdout_text, "7000");
	sbx_exec_result_free(r);
	r = run(h, id, "timeout", 1.5);
	cr_assert_str_eq(r->stdout_text, "1500");
	sbx_exec_result_free(r);
	r = run(h, id, "timeout", 0);
	cr_assert_str_eq(r->stdout_text, "0");
	sbx_exec_result_free(r);
	/* hfix2's data source sets no timeout: the built-in default. */
	create(h, "second", id);
	r = run(h, id, "timeout", 0.0004);
	cr_assert_str_eq(r->stdout_text, "1");
	sbx_exec_result_free(r);
	sbx_host_free(h);
}

Test(host, paused_sandbox_refuses_exec_unless_auto_resume)
{
	sbx_host *h = new_host(config_text);
	char a[SBX_ID_MAX], b[SBX_ID_MAX];
	create(h, NULL, a);
	create(h, "second", b);
	sbx_error err = {0};
	uint32_t st;
	cr_assert_eq(sbx_pause(h, a, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(h, a, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_PAUSED);
	cr_assert_eq(exec_status(h, a, "x", &err), SBX_E_PAUSED);
	cr_assert_str_eq(err.message,
			 "hfix:h-1: exec: sandbox is paused; resume it or set auto_resume: true");
	cr_assert_eq(sbx_resume(h, a, &err), SBX_OK);
	cr_assert_eq(exec_status(h, a, "x", &err), SBX_OK, "%s", err.message);

	cr_assert_eq(sbx_pause(h, b, &err), SBX_OK);
	cr_assert_eq(exec_status(h, b, "x", &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_status(h, b, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	sbx_host_free(h);
}

Test(host, exec_asks_the_backend_for_no_status)
{
	sbx_host *h = new_host(config_text);
	char a[SBX_ID_MAX];
	create(h, NULL, a);
	sbx_exec_result *r = run(h, a, "statuses", -1);
	int before = atoi(r->stdout_text);
	sbx_exec_result_free(r);
	for (int i = 0; i < 3; i++)
		sbx_exec_result_free(run(h, a, "x", -1));
	r = run(h, a, "statuses", -1);
	cr_assert_eq(atoi(r->stdout_text), before, "execs asked for status");
	sbx_exec_result_free(r);
	uint32_t st;
	sbx_error err = {0};
	cr_assert_eq(sbx_status(h, a, &st, &err), SBX_OK);
	r = run(h, a, "statuses", -1);
	cr_assert_eq(atoi(r->stdout_text), before + 1);
	sbx_exec_result_free(r);
	sbx_host_free(h);
}

Test(host, files_route_and_unsupported_ops_say_so)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_error err = {0};
	cr_assert_eq(sbx_write_file(h, id, "a.txt", "ab\0c", 4, 0, &err), SBX_OK, "%s",
		     err.message);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(sbx_read_file(h, id, "a.txt", &data, &len, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(len, 4);
	cr_assert_eq(memcmp(data, "ab\0c\0", 5), 0);
	sbx_free(data);
	cr_assert_eq(sbx_read_file(h, id, "b.txt", &data, &len, &err), SBX_E_NO_FILE);
	cr_assert_null(data);
	sbx_file_info fi;
	cr_assert_eq(sbx_stat(h, id, "a.txt", &fi, &err), SBX_E_UNSUPPORTED);
	cr_assert_str_eq(err.message, "hfix: stat: not supported by this backend");
	sbx_file_info *ents = NULL;
	size_t n = 0;
	cr_assert_eq(sbx_list_dir(h, id, ".", &ents, &n, &err), SBX_E_UNSUPPORTED);
	cr_assert_eq(sbx_mkdir(h, id, "d", 1, &err), SBX_E_UNSUPPORTED);
	cr_assert_eq(sbx_remove(h, id, "d", 1, &err), SBX_E_UNSUPPORTED);
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK);
	sbx_host_free(h);
}

Test(host, backend_info_wraps_the_plugin_json)
{
	sbx_host *h = new_host(config_text);
	char *json = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_backend_info(h, "hfix", &json, &err), SBX_OK, "%s", err.message);
	char want[1024];
	snprintf(want, sizeof(want),
		 "{\"alias\":\"hfix\",\"path\":\"%s\",\"version\":\"2.5\",\"abi\":\"%d.%d\","
		 "\"data_source\":\"default\",\"thread_safe\":true,"
		 "\"backend\":{\"greeting\":\"from-registry\"}}",
		 HFIX_SO, SBX_ABI_MAJOR, SBX_ABI_MINOR);
	cr_assert_str_eq(json, want);
	sbx_free(json);
	cr_assert_eq(sbx_backend_info(h, "nope", &json, &err), SBX_E_UNKNOWN_ALIAS);
	sbx_host_free(h);
}

Test(host, sandbox_info_is_the_plugins_or_empty)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	char *json = NULL;
	sbx_error err = {0};
	/* hfix has no sandbox_info: nothing to say about its sandbox. */
	cr_assert_eq(sbx_sandbox_info(h, id, &json, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(json, "{}");
	sbx_free(json);
	cr_assert_eq(sbx_sandbox_info(h, "nope:1", &json, &err), SBX_E_UNKNOWN_ALIAS);
	cr_assert_null(json);
	cr_assert_eq(sbx_sandbox_info(h, id, NULL, &err), SBX_E_INVAL);
	sbx_host_free(h);
}

Test(host, alias_without_data_source_uses_registry_defaults)
{
	sbx_host *h = new_host("data_source:\n  sandbox:\n    type: hfix2\n");
	char *json = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_backend_info(h, "hfix", &json, &err), SBX_OK, "%s", err.message);
	cr_assert(strstr(json, "\"backend\":{\"greeting\":\"from-registry\"}") != NULL, "%s", json);
	sbx_free(json);
	sbx_host_free(h);
}

static sbx_host *shared_host;
static char shared_id[SBX_ID_MAX];

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20; i++) {
		sbx_error err = {0};
		if (exec_status(shared_host, shared_id, "slow", &err) != SBX_OK)
			return strdup(err.message);
	}
	return NULL;
}

Test(host, calls_into_a_plugin_that_is_not_thread_safe_are_serialised)
{
	shared_host = new_host(config_text);
	create(shared_host, "second", shared_id);
	pthread_t t[6];
	for (int i = 0; i < 6; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, worker, NULL), 0);
	for (int i = 0; i < 6; i++) {
		void *msg = NULL;
		pthread_join(t[i], &msg);
		cr_assert_null(msg, "%s", (char *)msg);
	}
	sbx_host_free(shared_host);
}

Test(host, output_policy_comes_from_the_data_source)
{
	sbx_host *h = new_host("data_source:\n  sandbox:\n    type: hfix\n"
			       "    output_char_threshold: 10\n    truncate_head_chars: 2\n"
			       "    truncate_tail_chars: 3\n    output_max_bytes: 100\n");
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_exec_result *r = run(h, id, "big 200000", -1);
	char want[1024];
	snprintf(want, sizeof(want),
		 "xx\n\n... [199,995 characters omitted] ...\n(Full output: %s)\n\nxxx",
		 r->stdout_file);
	cr_assert_str_eq(r->stdout_text, want);
	cr_assert_eq(r->truncated, 1);
	cr_assert_eq(r->stdout_bytes, 200000);
	cr_assert_eq(r->stdout_dropped, 199900);
	struct stat st;
	cr_assert_eq(stat(r->stdout_file, &st), 0);
	cr_assert_eq(st.st_size, 100);
	sbx_exec_result_free(r);
	sbx_host_free(h);
}

Test(host, null_and_bad_arguments)
{
	sbx_error err = {0};
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.config_path = "/x";
	o.config_text = "y";
	sbx_host *h = NULL;
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_E_INVAL);
	cr_assert_null(h);
	sbx_host_free(NULL);
	cr_assert_eq(sbx_plugin_count(NULL), 0);
	h = new_host(config_text);
	cr_assert_eq(sbx_plugin_load(h, "nope", &err), SBX_E_UNKNOWN_ALIAS);
	cr_assert_eq(sbx_exec(h, "hfix:h-1", NULL, NULL, &err), SBX_E_INVAL);
	sbx_host_free(h);
}

Test(host, option_structs_from_older_and_newer_minors)
{
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.config_text = config_text;
	snprintf(state_dir, sizeof(state_dir), "%s/minors-%d", HOST_TMP, (int)getpid());
	o.state_dir = state_dir;
	/* An ABI 1.0 caller's options end before ledger_retention. */
	o.struct_size = (uint32_t)offsetof(sbx_host_options, ledger_retention);
	o.ledger_retention = 12345; /* past its struct: never read */
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	/* A 1.0 exec options struct ends before `background`: it runs in the foreground. */
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.struct_size = (uint32_t)offsetof(sbx_exec_opts, background);
	eo.shell = "hi";
	eo.background = 1;
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(r->stdout_text, "hi\n");
	cr_assert_null(r->job_id);
	sbx_exec_result_free(r);
	/* A 1.0 create options struct ends before wait_seconds, a 1.3 one before share_dir:
	 * both create, and what lies past them is never read. */
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.share_dir = "relative"; /* refused, were it read */
	const size_t older[] = {offsetof(sbx_create_opts, wait_seconds),
				offsetof(sbx_create_opts, share_dir)};
	for (size_t i = 0; i < 2; i++) {
		char cid[SBX_ID_MAX];
		co.struct_size = (uint32_t)older[i];
		cr_assert_eq(sbx_create(h, &co, cid, &err), SBX_OK, "%zu: %s", older[i],
			     err.message);
		cr_assert_eq(sbx_destroy(h, cid, &err), SBX_OK, "%s", err.message);
	}
	/* Smaller than 1.0: refused. */
	eo.struct_size = (uint32_t)offsetof(sbx_exec_opts, user);
	cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_E_INVAL);
	char want[300];
	snprintf(want, sizeof(want),
		 "exec: options struct has size %zu, expected at least %zu (use "
		 "SBX_INIT_HEADER)",
		 offsetof(sbx_exec_opts, user), offsetof(sbx_exec_opts, background));
	cr_assert_str_eq(err.message, want);
	/* From a newer minor: fine while what this library does not know is zero. */
	struct {
		sbx_create_opts o;
		uint64_t newer;
	} big;
	memset(&big, 0, sizeof(big));
	SBX_INIT_HEADER(big.o);
	big.o.struct_size = (uint32_t)sizeof(big);
	cr_assert_eq(sbx_create(h, &big.o, id, &err), SBX_OK, "%s", err.message);
	big.newer = 7;
	cr_assert_eq(sbx_create(h, &big.o, id, &err), SBX_E_INVAL);
	snprintf(want, sizeof(want),
		 "create: options struct has size %zu and sets members past the %zu bytes libsbx "
		 "%s knows; upgrade libsbx",
		 sizeof(big), sizeof(sbx_create_opts), sbx_version());
	cr_assert_str_eq(err.message, want);
	/* An output struct gets what its size holds, and nothing past it. */
	struct {
		sbx_plugin_info i;
		uint64_t newer;
	} info;
	memset(&info, 0xab, sizeof(info));
	SBX_INIT_HEADER(info.i);
	info.i.struct_size = (uint32_t)sizeof(info);
	cr_assert_eq(sbx_plugin_get(h, 0, &info.i, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(info.i.struct_size, sizeof(info));
	cr_assert_str_eq(info.i.alias, "gone");
	cr_assert_eq(info.newer, 0xababababababababull);
	info.i.struct_size = 8;
	cr_assert_eq(sbx_plugin_get(h, 0, &info.i, &err), SBX_E_INVAL);
	sbx_host_free(h);
}

Test(host, plugins_get_the_state_dir_of_their_own_host)
{
	sbx_host *a = new_host(config_text);
	char dir_a[sizeof(state_dir)];
	snprintf(dir_a, sizeof(dir_a), "%s", state_dir);
	sbx_host *b = new_host(config_text);
	char id[SBX_ID_MAX];
	create(a, NULL, id);
	sbx_exec_result *r = run(a, id, "statedirs", -1);
	char want[1300];
	snprintf(want, sizeof(want), "%s/plugins\n%s/plugins\n", dir_a, state_dir);
	cr_assert_str_eq(r->stdout_text, want, "state_dir_for names host a's, state_dir() b's");
	struct stat st;
	snprintf(want, sizeof(want), "%s/plugins", dir_a);
	cr_assert_eq(stat(want, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	sbx_exec_result_free(r);
	sbx_host_free(b);
	sbx_host_free(a);
}

/* A host whose finished rows are kept `retention` seconds (0: the default). */
static sbx_host *host_keeping(int64_t retention)
{
	snprintf(state_dir, sizeof(state_dir), "%s/keep-%d-%d", HOST_TMP, (int)getpid(), ++counter);
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.config_text = config_text;
	o.state_dir = state_dir;
	o.ledger_retention = retention;
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	return h;
}

static int count_rows(void *ctx, const sbx_sandbox_record *rec)
{
	(void)rec;
	(*(int *)ctx)++;
	return 0;
}

static int rows_of(sbx_host *h)
{
	int n = 0;
	sbx_error err = {0};
	cr_assert_eq(sbx_ledger_list(h, count_rows, &n, &err), SBX_OK, "%s", err.message);
	return n;
}

Test(host, gc_prunes_finished_rows_after_the_retention)
{
	sbx_host *h[3] = {host_keeping(1), host_keeping(0), host_keeping(-1)};
	sbx_error err = {0};
	for (int i = 0; i < 3; i++) {
		char gone[SBX_ID_MAX], live[SBX_ID_MAX];
		create(h[i], NULL, gone);
		create(h[i], NULL, live);
		cr_assert_eq(sbx_destroy(h[i], gone, &err), SBX_OK, "%s", err.message);
		cr_assert_eq(rows_of(h[i]), 2);
	}
	/* Past the one-second retention (the rows are stamped in whole seconds). */
	sleep(3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sbx_gc(h[i], SBX_GC_DRY_RUN, NULL, NULL, &err), SBX_OK, "%s",
			     err.message);
	cr_assert_eq(rows_of(h[0]), 2, "a dry run prunes nothing");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(sbx_gc(h[i], 0, NULL, NULL, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(rows_of(h[0]), 1, "retention 1 s: the gone row is pruned, the live one kept");
	cr_assert_eq(rows_of(h[1]), 2, "the default seven days keep a fresh gone row");
	cr_assert_eq(rows_of(h[2]), 2, "a negative retention keeps every row");
	for (int i = 0; i < 3; i++)
		sbx_host_free(h[i]);
}

typedef struct seen {
	int n;
	char id[SBX_ID_MAX];
	char state[16];
	char reason[128];
	int status;
	int64_t owner_pid;
	uint32_t alive;
} seen;

static int find_row(void *ctx, const sbx_sandbox_record *rec)
{
	seen *s = ctx;
	if (strcmp(rec->id, s->id) == 0) {
		s->n++;
		snprintf(s->state, sizeof(s->state), "%s", rec->state);
		s->owner_pid = rec->owner_pid;
		s->alive = rec->owner_alive;
	}
	return 0;
}

static void on_gc(void *ctx, const char *id, const char *reason, int status)
{
	seen *s = ctx;
	if (strcmp(id, s->id) == 0) {
		s->n++;
		snprintf(s->reason, sizeof(s->reason), "%s", reason);
		s->status = status;
	}
}

Test(host, ledger_records_create_and_destroy)
{
	sbx_host *h = new_host(config_text);
	seen s;
	memset(&s, 0, sizeof(s));
	create(h, NULL, s.id);
	sbx_error err = {0};
	cr_assert_eq(sbx_ledger_list(h, find_row, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.state, "running");
	cr_assert_eq(s.owner_pid, getpid());
	cr_assert_eq(s.alive, 1);
	cr_assert_eq(sbx_pause(h, s.id, &err), SBX_OK);
	s.n = 0;
	cr_assert_eq(sbx_ledger_list(h, find_row, &s, &err), SBX_OK);
	cr_assert_str_eq(s.state, "paused");
	cr_assert_eq(sbx_destroy(h, s.id, &err), SBX_OK);
	s.n = 0;
	cr_assert_eq(sbx_ledger_list(h, find_row, &s, &err), SBX_OK);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.state, "gone");
	/* gc leaves a live owner's sandbox alone. */
	seen live;
	memset(&live, 0, sizeof(live));
	create(h, NULL, live.id);
	cr_assert_eq(sbx_gc(h, 0, on_gc, &live, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(live.n, 0);
	sbx_host_free(h);
}

Test(host, gc_reaps_a_sandbox_whose_owner_died)
{
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	cr_assert_gt(child, 0);
	cr_assert_eq(waitpid(child, NULL, 0), child);
	sbx_host *h = new_host(config_text);
	seen s;
	memset(&s, 0, sizeof(s));
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.detached = 1;
	co.owner_pid = child;
	sbx_error err = {0};
	cr_assert_eq(sbx_create(h, &co, s.id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_gc(h, SBX_GC_DRY_RUN, on_gc, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.n, 1);
	char want[64];
	snprintf(want, sizeof(want), "owner pid %d is dead", (int)child);
	cr_assert_str_eq(s.reason, want);
	s.n = 0;
	cr_assert_eq(sbx_ledger_list(h, find_row, &s, &err), SBX_OK);
	cr_assert_str_eq(s.state, "running", "dry run changes nothing");
	s.n = 0;
	cr_assert_eq(sbx_gc(h, 0, on_gc, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.status, SBX_OK);
	s.n = 0;
	cr_assert_eq(sbx_ledger_list(h, find_row, &s, &err), SBX_OK);
	cr_assert_str_eq(s.state, "gone");
	uint32_t st;
	cr_assert_eq(sbx_status(h, s.id, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_GONE);
	sbx_host_free(h);
}

static void expect_state_dir(const char *want_prefix)
{
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.config_text = config_text;
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_exec_result *r = run(h, id, "x", -1);
	char want[700];
	snprintf(want, sizeof(want), "%s/calls/hfix%%3Ah-", want_prefix);
	cr_assert(strncmp(r->output_dir, want, strlen(want)) == 0, "%s", r->output_dir);
	sbx_exec_result_free(r);
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK);
	sbx_host_free(h);
}

Test(host, state_dir_comes_from_env_then_xdg_then_home)
{
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/env-%d", HOST_TMP, (int)getpid());
	setenv("SBX_STATE_DIR", dir, 1);
	expect_state_dir(dir);
	unsetenv("SBX_STATE_DIR");
	snprintf(dir, sizeof(dir), "%s/xdg-%d", HOST_TMP, (int)getpid());
	setenv("XDG_STATE_HOME", dir, 1);
	char want[700];
	snprintf(want, sizeof(want), "%s/sbx", dir);
	expect_state_dir(want);
	unsetenv("XDG_STATE_HOME");
	snprintf(dir, sizeof(dir), "%s/home-%d", HOST_TMP, (int)getpid());
	setenv("HOME", dir, 1);
	snprintf(want, sizeof(want), "%s/.local/state/sbx", dir);
	expect_state_dir(want);
}

Test(host, state_dir_that_is_a_file_is_refused)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/file-%d", HOST_TMP, (int)getpid());
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fclose(f);
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.state_dir = path;
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_E_IO);
	cr_assert_null(h);
	char want[800];
	snprintf(want, sizeof(want), "host: cannot create state directory %s: Not a directory",
		 path);
	cr_assert_str_eq(err.message, want);
	unlink(path);
}

Test(host, max_concurrency_caps_live_sandboxes_per_data_source)
{
	sbx_host *h = new_host("data_source:\n  sandbox:\n    type: hfix\n    max_concurrency: 2\n"
			       "data_sources:\n  - name: other\n    sandbox:\n      type: hfix2\n");
	char a[SBX_ID_MAX], b[SBX_ID_MAX], c[SBX_ID_MAX];
	create(h, NULL, a);
	create(h, NULL, b);
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	sbx_error err = {0};
	cr_assert_eq(sbx_create(h, &co, c, &err), SBX_E_LIMIT);
	cr_assert_str_eq(err.message, "create: data source 'default' has 2 live sandboxes, its "
				      "max_concurrency; destroy one first");
	/* Another data source has its own count. */
	create(h, "other", c);
	cr_assert_eq(sbx_destroy(h, a, &err), SBX_OK);
	create(h, NULL, a);
	cr_assert_str_eq(a, "hfix:h-4");
	sbx_host_free(h);
}

static sbx_host *host_at(const char *dir)
{
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.config_text = config_text;
	o.state_dir = dir;
	sbx_host *h = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx_host_new(&o, &h, &err), SBX_OK, "%s", err.message);
	return h;
}

Test(host, gc_reaps_labelled_sandboxes_the_ledger_lost_and_only_its_own)
{
	sbx_host *a = new_host(config_text);
	seen s;
	memset(&s, 0, sizeof(s));
	create(a, NULL, s.id);
	/* Another state dir (another user's ledger) never touches it. */
	char other[700];
	snprintf(other, sizeof(other), "%s-other", state_dir);
	sbx_host *c = host_at(other);
	sbx_error err = {0};
	cr_assert_eq(sbx_gc(c, 0, on_gc, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.n, 0);
	sbx_host_free(c);
	/* The ledger is lost: a fresh one in the same state dir finds the sandbox by label. */
	char path[800];
	const char *sfx[] = {"", "-wal", "-shm"};
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/ledger.db%s", state_dir, sfx[i]);
		unlink(path);
	}
	sbx_host *b = host_at(state_dir);
	cr_assert_eq(sbx_gc(b, SBX_GC_DRY_RUN, on_gc, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.n, 1);
	cr_assert_str_eq(s.reason, "not in the ledger");
	s.n = 0;
	cr_assert_eq(sbx_gc(b, 0, on_gc, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.status, SBX_OK);
	uint32_t st;
	cr_assert_eq(sbx_status(a, s.id, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_GONE);
	sbx_host_free(b);
	sbx_host_free(a);
}

/* An env key with '=' would set another variable than the one named ("A=B" with value "c"
 * becomes A="B=c"), an empty one none at all: both are refused before the plugin sees them. */
Test(host, env_keys_with_equals_or_empty_are_refused)
{
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX];
	create(h, NULL, id);
	sbx_kv bad[][1] = {{{"A=B", "c"}}, {{"", "c"}}};
	const char *want[] = {
	    "exec: environment variable name 'A=B' contains '='; a name cannot",
	    "exec: env 0 has an empty key",
	};
	for (int i = 0; i < 2; i++) {
		sbx_exec_opts eo;
		memset(&eo, 0, sizeof(eo));
		SBX_INIT_HEADER(eo);
		eo.shell = "true";
		eo.env = bad[i];
		eo.n_env = 1;
		sbx_exec_result *r = NULL;
		sbx_error err = {0};
		cr_assert_eq(sbx_exec(h, id, &eo, &r, &err), SBX_E_INVAL);
		cr_assert_null(r);
		cr_assert_str_eq(err.message, want[i]);
		sbx_create_opts co;
		memset(&co, 0, sizeof(co));
		SBX_INIT_HEADER(co);
		co.env = bad[i];
		co.n_env = 1;
		char other[SBX_ID_MAX];
		cr_assert_eq(sbx_create(h, &co, other, &err), SBX_E_INVAL);
		cr_assert_str_eq(other, "");
		char cwant[300];
		snprintf(cwant, sizeof(cwant), "create%s", want[i] + strlen("exec"));
		cr_assert_str_eq(err.message, cwant);
	}
	sbx_kv label[] = {{"", "x"}};
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.labels = label;
	co.n_labels = 1;
	sbx_error err = {0};
	char other[SBX_ID_MAX];
	cr_assert_eq(sbx_create(h, &co, other, &err), SBX_E_INVAL);
	cr_assert_str_eq(err.message, "create: label 0 has an empty key");
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK, "%s", err.message);
	sbx_host_free(h);
}

/* Messages quote what callers and sandboxes chose (ids, paths, file names): control
 * characters are escaped so a message stays one line and drives no terminal. */
Test(host, error_messages_escape_control_characters)
{
	sbx_host *h = new_host(config_text);
	sbx_error err = {0};
	cr_assert_eq(sbx_destroy(h, "hfix:\x1b[2J\nfake", &err), SBX_E_BAD_ID);
	cr_assert_str_eq(err.message, "malformed sandbox id 'hfix:\\e[2J\\nfake'; expected "
				      "<alias>:<backend-id> (e.g. local:3f2a9c)");
	/* A C1 control (CSI, U+009B) and a byte that is not UTF-8. */
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	co.data_source = "x\xc2\x9b"
			 "31m\xff";
	char id[SBX_ID_MAX];
	cr_assert_eq(sbx_create(h, &co, id, &err), SBX_E_CONFIG);
	const char *want = "unknown data source 'x\\xc2\\x9b31m\\xff'; configured: ";
	cr_assert(strncmp(err.message, want, strlen(want)) == 0, "%s", err.message);
	sbx_host_free(h);
}

/* ---- fork: a host belongs to the process that made it (core/fork.c) */

static atomic_int churn_stop;

typedef struct churner {
	sbx_host *h;
	char id[SBX_ID_MAX];
} churner;

/* Keeps the parent's ledger and plugin calls busy while it forks (exec, and pause and resume,
 * which the ledger records): a fork then lands, now and then, while another thread is
 * inside SQLite or holds a lock. The fixture's ids count per process, so nothing here
 * creates: a child's create would make an id a parent's thread makes too. */
static void *churn(void *arg)
{
	churner *c = arg;
	while (!atomic_load(&churn_stop)) {
		sbx_exec_opts eo;
		memset(&eo, 0, sizeof(eo));
		SBX_INIT_HEADER(eo);
		eo.shell = "busy";
		sbx_exec_result *r = NULL;
		sbx_error err = {0};
		if (sbx_exec(c->h, c->id, &eo, &r, &err) == SBX_OK)
			sbx_exec_result_free(r);
		sbx_pause(c->h, c->id, &err);
		sbx_resume(c->h, c->id, &err);
	}
	return NULL;
}

static int count_gone(void *ctx, const sbx_sandbox_record *rec)
{
	int *n = ctx;
	if (strcmp(rec->state, "gone") != 0)
		n[0]++;
	else
		n[1]++;
	return 0;
}

/* In the child: the parent's host refuses, freeing it frees nothing of the parent's, and a
 * host made in the child works, its ledger included. Returns 0, or the step that failed. */
static int in_child(sbx_host *parents, const char *mine)
{
	sbx_exec_opts eo;
	memset(&eo, 0, sizeof(eo));
	SBX_INIT_HEADER(eo);
	eo.shell = "hi";
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	char want[400];
	snprintf(want, sizeof(want),
		 "host: made by process %ld, and this process is a fork of it: a host cannot "
		 "cross a fork (its ledger connection, locks and plugin states are the "
		 "parent's); make a new one after the fork",
		 (long)getppid());
	if (sbx_exec(parents, mine, &eo, &r, &err) != SBX_E_INVAL || strcmp(err.message, want) != 0)
		return 11;
	char id[SBX_ID_MAX];
	sbx_create_opts co;
	memset(&co, 0, sizeof(co));
	SBX_INIT_HEADER(co);
	if (sbx_create(parents, &co, id, &err) != SBX_E_INVAL || strcmp(err.message, want) != 0)
		return 12;
	sbx_host_free(parents);
	sbx_host_options o;
	memset(&o, 0, sizeof(o));
	SBX_INIT_HEADER(o);
	o.registry_path = HFIX_REGISTRY;
	o.config_text = config_text;
	o.state_dir = state_dir;
	sbx_host *h = NULL;
	if (sbx_host_new(&o, &h, &err) != SBX_OK)
		return 13;
	int rc = sbx_exec(h, mine, &eo, &r, &err);
	if (rc != SBX_OK || strcmp(r->stdout_text, "hi\n") != 0) {
		fprintf(stderr, "child exec: %d %s\n", rc, err.message);
		return 14;
	}
	sbx_exec_result_free(r);
	if (sbx_destroy(h, mine, &err) != SBX_OK) {
		fprintf(stderr, "child destroy: %s\n", err.message);
		return 15;
	}
	sbx_host_free(h);
	return 0;
}

Test(host, a_fork_needs_a_host_of_its_own, .timeout = 120)
{
	SKIP_FORK_UNDER_ASAN();
	enum { FORKS = 30, CHURNERS = 4 };
	sbx_host *h = new_host(config_text);
	char id[SBX_ID_MAX], kid_ids[FORKS][SBX_ID_MAX];
	create(h, NULL, id);
	for (int i = 0; i < FORKS; i++)
		create(h, NULL, kid_ids[i]);
	churner ch[CHURNERS];
	pthread_t th[CHURNERS];
	atomic_store(&churn_stop, 0);
	for (int i = 0; i < CHURNERS; i++) {
		ch[i].h = h;
		create(h, NULL, ch[i].id);
		cr_assert_eq(pthread_create(&th[i], NULL, churn, &ch[i]), 0);
	}
	pid_t kids[FORKS];
	for (int i = 0; i < FORKS; i++) {
		usleep(3000);
		kids[i] = fork();
		cr_assert_geq(kids[i], 0);
		if (kids[i] == 0)
			_exit(in_child(h, kid_ids[i]));
	}
	fork_tally t = {0, 0, 0};
	for (int i = 0; i < FORKS; i++)
		fork_tally_wait(&t, kids[i]);
	atomic_store(&churn_stop, 1);
	for (int i = 0; i < CHURNERS; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(t.hung, 0, "%d of %d children hung", t.hung, FORKS);
	cr_assert_eq(t.failed, 0, "%d of %d children failed, the last with %d", t.failed, FORKS,
		     t.last);
	/* The parent's host and ledger go on, and hold what the children recorded: each
	 * child's sandbox is gone. */
	sbx_exec_result *r = run(h, id, "still here", -1);
	cr_assert_str_eq(r->stdout_text, "still here\n");
	sbx_exec_result_free(r);
	int rows[2] = {0, 0};
	sbx_error err = {0};
	cr_assert_eq(sbx_ledger_list(h, count_gone, rows, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(rows[0], 1 + CHURNERS, "%d rows not gone", rows[0]);
	cr_assert_eq(rows[1], FORKS, "%d rows gone", rows[1]);
	for (int i = 0; i < CHURNERS; i++)
		cr_assert_eq(sbx_destroy(h, ch[i].id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx_destroy(h, id, &err), SBX_OK, "%s", err.message);
	sbx_host_free(h);
}

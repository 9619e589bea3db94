/* The services table plugins get: typed config getters with exact errors, logging, memory,
 * errors and the state folder. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "leaks.h"
#include "loader.h"

static const sbx_host_api *api;

static sbx_config *cfg_of(const char *yaml)
{
	sbx__node *map = NULL;
	sbx_error err;
	cr_assert_eq(sbx__yaml_load_string(yaml, "cfg.yaml", 0, SBX_E_CONFIG, &map, &err), SBX_OK,
		     "%s", err.message);
	struct sbx_config *cfg = sbx__calloc(1, sizeof(*cfg));
	cr_assert_not_null(cfg);
	cfg->map = map;
	return cfg;
}

static void setup(void)
{
	api = sbx__host_api();
}

TestSuite(host_api, .init = setup, .fini = sbx_test_check_leaks);

Test(host_api, table_header_and_services)
{
	cr_assert_eq(api->struct_size, sizeof(sbx_host_api));
	cr_assert_eq(api->abi_major, SBX_ABI_MAJOR);
	cr_assert_eq(api->abi_minor, SBX_ABI_MINOR);
	cr_assert_eq(api->register_sandbox, sbx__registrar_register);
	cr_assert_not_null(api->log);
	char *p = api->alloc(16);
	cr_assert_not_null(p);
	p = api->realloc(p, 64);
	cr_assert_not_null(p);
	api->free(p);
	sbx_error err;
	cr_assert_eq(api->set_error(&err, SBX_E_BACKEND, "x: %s %d", "y", 3), SBX_E_BACKEND);
	cr_assert_eq(err.code, SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "x: y 3");
	cr_assert_eq(api->set_error(NULL, SBX_E_IO, "ignored"), SBX_E_IO);
}

Test(host_api, config_string_reads_scalars_only)
{
	sbx_config *cfg = cfg_of("name: hello\nnum: 5\nm: {a: 1}\nl: [1, 2]\n");
	const char *s = NULL;
	sbx_error err;
	cr_assert_eq(api->config_string(cfg, "name", &s, &err), SBX_OK);
	cr_assert_str_eq(s, "hello");
	cr_assert_eq(api->config_string(cfg, "num", &s, &err), SBX_OK);
	cr_assert_str_eq(s, "5");
	cr_assert_eq(api->config_string(cfg, "m", &s, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:3: 'm' must be a string, not a mapping");
	cr_assert_eq(api->config_string(cfg, "l", &s, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:4: 'l' must be a string, not a list");
	sbx__config_obj_free(cfg);
}

Test(host_api, absent_and_null_keys_are_not_found)
{
	sbx_config *cfg = cfg_of("empty:\ntilde: ~\nquoted: \"\"\n");
	const char *s = NULL;
	int64_t i;
	sbx_error err;
	cr_assert_eq(api->config_string(cfg, "nope", &s, &err), SBX_E_NOT_FOUND);
	cr_assert_str_eq(err.message, "config: key 'nope' is not set");
	cr_assert_eq(api->config_string(cfg, "empty", &s, &err), SBX_E_NOT_FOUND);
	cr_assert_eq(api->config_int(cfg, "tilde", &i, &err), SBX_E_NOT_FOUND);
	cr_assert_eq(api->config_string(cfg, "quoted", &s, &err), SBX_OK);
	cr_assert_str_eq(s, "");
	cr_assert_eq(api->config_string(NULL, "x", &s, &err), SBX_E_NOT_FOUND);
	cr_assert_eq(api->config_string(cfg, NULL, &s, &err), SBX_E_INVAL);
	sbx__config_obj_free(cfg);
}

Test(host_api, config_int_is_strict)
{
	sbx_config *cfg = cfg_of("a: 42\nb: -9223372036854775808\nc: 9223372036854775808\n"
				 "d: 12abc\ne: \"5\"\nf: 0x10\ng: 1.5\n");
	int64_t v = 0;
	sbx_error err;
	cr_assert_eq(api->config_int(cfg, "a", &v, &err), SBX_OK);
	cr_assert_eq(v, 42);
	cr_assert_eq(api->config_int(cfg, "b", &v, &err), SBX_OK);
	cr_assert_eq(v, INT64_MIN);
	cr_assert_eq(api->config_int(cfg, "c", &v, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:3: 'c' must be between -9223372036854775808 and "
				      "9223372036854775807");
	cr_assert_eq(api->config_int(cfg, "d", &v, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:4: 'd' must be an integer");
	cr_assert_eq(api->config_int(cfg, "e", &v, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:5: 'e' must be an integer, got a quoted string");
	cr_assert_eq(api->config_int(cfg, "f", &v, &err), SBX_E_CONFIG);
	cr_assert_eq(api->config_int(cfg, "g", &v, &err), SBX_E_CONFIG);
	cr_assert_eq(v, INT64_MIN, "a failed getter leaves *out alone");
	sbx__config_obj_free(cfg);
}

Test(host_api, config_float_accepts_numbers)
{
	sbx_config *cfg = cfg_of("a: 1.5\nb: 3\nc: abc\nd: 1e999\n");
	double v = 0;
	sbx_error err;
	cr_assert_eq(api->config_float(cfg, "a", &v, &err), SBX_OK);
	cr_assert_float_eq(v, 1.5, 1e-12);
	cr_assert_eq(api->config_float(cfg, "b", &v, &err), SBX_OK);
	cr_assert_float_eq(v, 3.0, 1e-12);
	cr_assert_eq(api->config_float(cfg, "c", &v, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:3: 'c' must be a number");
	cr_assert_eq(api->config_float(cfg, "d", &v, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:4: 'd' must be between -1.79769313486232e+308 "
				      "and 1.79769313486232e+308");
	sbx__config_obj_free(cfg);
}

Test(host_api, config_bool_words)
{
	sbx_config *cfg = cfg_of("t1: true\nt2: yes\nt3: on\nt4: 1\nt5: TRUE\n"
				 "f1: false\nf2: no\nf3: off\nf4: 0\nbad: maybe\n");
	static const char *const trues[] = {"t1", "t2", "t3", "t4", "t5"};
	static const char *const falses[] = {"f1", "f2", "f3", "f4"};
	sbx_error err;
	int v;
	for (size_t i = 0; i < 5; i++) {
		v = -1;
		cr_assert_eq(api->config_bool(cfg, trues[i], &v, &err), SBX_OK, "%s", trues[i]);
		cr_assert_eq(v, 1, "%s", trues[i]);
	}
	for (size_t i = 0; i < 4; i++) {
		v = -1;
		cr_assert_eq(api->config_bool(cfg, falses[i], &v, &err), SBX_OK, "%s", falses[i]);
		cr_assert_eq(v, 0, "%s", falses[i]);
	}
	cr_assert_eq(api->config_bool(cfg, "bad", &v, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "cfg.yaml:10: 'bad' must be true or false (or yes/no, "
				      "on/off, 1/0)");
	sbx__config_obj_free(cfg);
}

Test(host_api, config_json_is_cached_per_key)
{
	sbx_config *cfg = cfg_of("n: 5\ns: \"x\"\n");
	const char *a = NULL, *b = NULL;
	sbx_error err;
	cr_assert_eq(api->config_json(cfg, "n", &a, &err), SBX_OK);
	cr_assert_str_eq(a, "5");
	cr_assert_eq(api->config_json(cfg, "n", &b, &err), SBX_OK);
	cr_assert_eq(a, b, "the second call returns the cached string");
	cr_assert_eq(api->config_json(cfg, "s", &a, &err), SBX_OK);
	cr_assert_str_eq(a, "\"x\"");
	cr_assert_eq(api->config_json(cfg, "missing", &a, &err), SBX_E_NOT_FOUND);
	sbx__config_obj_free(cfg);
}

Test(host_api, config_json_renders_lists_and_maps)
{
	sbx_config *cfg = cfg_of("l: [1, \"two\", true]\nm: {a: {b: null}}\n");
	const char *j = NULL;
	sbx_error err;
	cr_assert_eq(api->config_json(cfg, "l", &j, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(j, "[1,\"two\",true]");
	cr_assert_eq(api->config_json(cfg, "m", &j, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(j, "{\"a\":{\"b\":null}}");
	sbx__config_obj_free(cfg);
}

Test(host_api, log_goes_to_stderr_with_the_alias, .init = cr_redirect_stderr)
{
	unsetenv("SBX_LOG");
	api = sbx__host_api();
	api->log(SBX_LOG_WARN, "ok", "hello %d", 3);
	api->log(SBX_LOG_DEBUG, "ok", "hidden at the default level");
	fflush(stderr);
	cr_assert_stderr_eq_str("sbx: warn ok: hello 3\n");
}

Test(host_api, state_dir_is_created_on_demand)
{
	cr_assert_null(api->state_dir(), "no state folder until the host sets one");
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/state-XXXXXX", TEST_TMP_DIR);
	cr_assert_not_null(mkdtemp(dir));
	char want[1100];
	snprintf(want, sizeof(want), "%s/a/plugins", dir);
	sbx__set_state_dir(want);
	const char *got = api->state_dir();
	cr_assert_not_null(got);
	cr_assert_str_eq(got, want);
	struct stat st;
	cr_assert_eq(stat(want, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0700);
	sbx__set_state_dir(NULL);
	cr_assert_null(api->state_dir());
}

Test(host_api, state_dir_for_is_the_configs_own)
{
	char dir[1024];
	snprintf(dir, sizeof(dir), "%s/state-XXXXXX", TEST_TMP_DIR);
	cr_assert_not_null(mkdtemp(dir));
	char want[1100];
	snprintf(want, sizeof(want), "%s/b/plugins", dir);
	sbx_config *cfg = cfg_of("k: v\n");
	cr_assert_null(api->state_dir_for(cfg), "a config no host made has no folder");
	cfg->state_dir = want;
	cr_assert_str_eq(api->state_dir_for(cfg), want);
	struct stat st;
	cr_assert_eq(stat(want, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	cr_assert_null(api->state_dir(), "state_dir() is not touched");
	cr_assert_null(api->state_dir_for(NULL));
	sbx__config_obj_free(cfg);
}

/* The config module: LoongSage and NexAU shapes, overrides, policies with their ranges, unknown
 * keys, and the per-plugin validation against a descriptor's declared keys. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../loader/leaks.h"
#include "internal.h"

TestSuite(config, .fini = sbx_test_check_leaks);

static sbx__config *load(const char *text)
{
	sbx__config *cfg = NULL;
	sbx_error err = {0};
	int rc = sbx__config_load(NULL, text, &cfg, &err);
	cr_assert_eq(rc, SBX_OK, "load failed: %s", err.message);
	return cfg;
}

static void load_fails(const char *text, const char *message)
{
	sbx__config *cfg = NULL;
	sbx_error err = {0};
	int rc = sbx__config_load(NULL, text, &cfg, &err);
	cr_assert_eq(rc, SBX_E_CONFIG, "rc %d (%s) for:\n%s", rc, err.message, text);
	cr_assert_eq(err.code, SBX_E_CONFIG);
	cr_assert_null(cfg);
	cr_assert_str_eq(err.message, message, "for:\n%s", text);
}

static void keys_are(const sbx__data_source *ds, const char *json)
{
	char *j = sbx__node_to_json(ds->keys);
	cr_assert_not_null(j);
	cr_assert_str_eq(j, json, "data source %s", ds->name);
	sbx__free(j);
}

static const sbx__data_source *find(const sbx__config *cfg, const char *name)
{
	const sbx__data_source *ds = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__config_find(cfg, name, &ds, &err), SBX_OK, "%s", err.message);
	return ds;
}

Test(config, builtin_default_is_local_with_default_policies)
{
	sbx__config *cfg = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__config_load(NULL, NULL, &cfg, &err), SBX_OK);
	cr_assert_null(cfg->file);
	cr_assert_eq(cfg->n, 0);
	cr_assert_str_eq(cfg->deflt.name, "default");
	cr_assert_str_eq(cfg->deflt.alias, "local");
	keys_are(&cfg->deflt, "{}");
	const sbx__policy *p = &cfg->deflt.policy;
	cr_assert_eq(p->timeout, 0);
	cr_assert_eq(p->max_concurrency, 0);
	cr_assert_eq(p->output_char_threshold, 10000);
	cr_assert_eq(p->truncate_head_chars, 5000);
	cr_assert_eq(p->truncate_tail_chars, 5000);
	cr_assert_eq(p->output_max_bytes, 256ull << 20);
	cr_assert_eq(p->ttl, 0);
	cr_assert_eq(p->auto_resume, 0);
	cr_assert_eq(find(cfg, NULL), &cfg->deflt);
	cr_assert_eq(find(cfg, "default"), &cfg->deflt);
	const sbx__data_source *ds = NULL;
	cr_assert_eq(sbx__config_find(cfg, "x", &ds, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "unknown data source 'x'; configured: default");
	sbx__config_free(cfg);
	sbx__config_free(NULL);
}

static const char *LOONGSAGE = "data_source:\n"
			       "  sandbox:\n"
			       "    type: docker\n"
			       "    image: img\n"
			       "    working_dir: /testbed\n"
			       "    timeout: 30\n"
			       "data_sources:\n"
			       "  - name: a\n"
			       "    path: data/a.jsonl\n"
			       "    weight: 2\n"
			       "    metadata: {k: v}\n"
			       "  - name: b\n"
			       "    sandbox:\n"
			       "      working_dir: /w\n"
			       "      max_concurrency: 4\n"
			       "  - name: c\n"
			       "    sandbox:\n"
			       "      type: k8s\n"
			       "      namespace: ns\n"
			       "  - name: d\n"
			       "    sandbox: {type: none}\n"
			       "  - name: e\n"
			       "    sandbox:\n"
			       "      type: ''\n"
			       "  - name: f\n"
			       "    sandbox:\n"
			       "  - name: g\n"
			       "    sandbox: {type: None, image: x}\n"
			       "  - sandbox: {type: docker, image: other}\n";

Test(config, loongsage_defaults_overrides_and_type_none)
{
	sbx__config *cfg = load(LOONGSAGE);
	cr_assert_eq(cfg->n, 8);
	cr_assert_str_eq(cfg->deflt.alias, "docker");
	keys_are(&cfg->deflt, "{\"image\":\"img\",\"working_dir\":\"/testbed\"}");
	cr_assert_eq(cfg->deflt.policy.timeout, 30);

	const sbx__data_source *a = find(cfg, "a");
	cr_assert_str_eq(a->alias, "docker");
	keys_are(a, "{\"image\":\"img\",\"working_dir\":\"/testbed\"}");
	cr_assert_eq(a->policy.timeout, 30);

	const sbx__data_source *b = find(cfg, "b");
	cr_assert_str_eq(b->alias, "docker");
	keys_are(b, "{\"image\":\"img\",\"working_dir\":\"/w\"}");
	cr_assert_eq(b->policy.max_concurrency, 4);
	cr_assert_eq(b->policy.timeout, 30);
	cr_assert_eq(cfg->deflt.policy.max_concurrency, 0, "overrides leave the default alone");
	cr_assert_eq(b->line, 14);
	cr_assert_str_eq(b->file, "<config>");

	/* Another type: the docker keys are not inherited, the policy keys are. */
	const sbx__data_source *c = find(cfg, "c");
	cr_assert_str_eq(c->alias, "k8s");
	keys_are(c, "{\"namespace\":\"ns\"}");
	cr_assert_eq(c->policy.timeout, 30);

	cr_assert_null(find(cfg, "d")->alias);
	cr_assert_null(find(cfg, "e")->alias);
	cr_assert_null(find(cfg, "f")->alias);
	cr_assert_null(find(cfg, "g")->alias, "none is matched without case, as LoongSage does");

	const sbx__data_source *h = find(cfg, "7");
	cr_assert_str_eq(h->name, "7", "an unnamed source is named by its index");
	keys_are(h, "{\"image\":\"other\",\"working_dir\":\"/testbed\"}");
	cr_assert_eq(find(cfg, "1"), b);

	const sbx__data_source *ds = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__config_find(cfg, "zz", &ds, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "unknown data source 'zz'; configured: default, a, b, c, d, "
				      "e, f, g, 7 (or an index 0..7)");
	cr_assert_eq(sbx__config_find(cfg, "8", &ds, &err), SBX_E_CONFIG);
	sbx__config_free(cfg);
}

Test(config, loongsage_default_type_none_and_no_sandbox)
{
	sbx__config *cfg =
	    load("data_source:\n  sandbox: {type: none}\n"
		 "data_sources:\n  - name: a\n    sandbox: {type: docker, image: i}\n");
	cr_assert_null(cfg->deflt.alias);
	cr_assert_str_eq(find(cfg, "a")->alias, "docker");
	keys_are(find(cfg, "a"), "{\"image\":\"i\"}");
	sbx__config_free(cfg);
	cfg = load("data_source: {name: x}\n");
	cr_assert_null(cfg->deflt.alias, "no sandbox block: no sandbox");
	sbx__config_free(cfg);
	cfg = load("");
	cr_assert_null(cfg->deflt.alias, "an empty config has no sandbox");
	sbx__config_free(cfg);
}

Test(config, loongsage_timeout_spellings_are_policy_keys)
{
	sbx__config *cfg = load("data_source:\n  sandbox:\n    type: local\n"
				"    command_exec_timeout_seconds: 5\n"
				"    sandbox_creation_timeout_seconds: 60\n");
	cr_assert_eq(cfg->deflt.policy.timeout, 5);
	keys_are(&cfg->deflt, "{}");
	sbx__config_free(cfg);
	load_fails("data_source:\n  sandbox:\n    type: local\n"
		   "    sandbox_creation_timeout_seconds: -2\n",
		   "<config>:4: 'sandbox_creation_timeout_seconds' is -2; it must be between 0 and "
		   "31536000");
}

Test(config, nexau_sandbox_config_is_the_default_block)
{
	setenv("SBX_TEST_E2B_KEY", "sekrit", 1);
	sbx__config *cfg = load("sandbox_config:\n"
				"  type: e2b\n"
				"  work_dir: /home/user\n"
				"  template: base\n"
				"  api_key: ${env.SBX_TEST_E2B_KEY}\n"
				"  output_char_threshold: 200\n"
				"  truncate_head_chars: 50\n"
				"  truncate_tail_chars: 150\n"
				"  output_max_bytes: 0\n"
				"  ttl: 600\n"
				"  auto_resume: yes\n");
	unsetenv("SBX_TEST_E2B_KEY");
	cr_assert_str_eq(cfg->deflt.alias, "e2b");
	cr_assert_eq(cfg->n, 0);
	keys_are(&cfg->deflt,
		 "{\"work_dir\":\"/home/user\",\"template\":\"base\",\"api_key\":\"sekrit\"}");
	const sbx__policy *p = &cfg->deflt.policy;
	cr_assert_eq(p->output_char_threshold, 200);
	cr_assert_eq(p->truncate_head_chars, 50);
	cr_assert_eq(p->truncate_tail_chars, 150);
	cr_assert_eq(p->output_max_bytes, 0);
	cr_assert_eq(p->ttl, 600);
	cr_assert_eq(p->auto_resume, 1);
	sbx__config_free(cfg);

	cfg = load("sandbox_config:\n  type: local\n  timeout: ~\n  max_concurrency:\n");
	cr_assert_eq(cfg->deflt.policy.timeout, 0, "null keeps the default");
	cr_assert_eq(cfg->deflt.policy.max_concurrency, 0);
	sbx__config_free(cfg);
	cfg = load("sandbox_config:\n");
	cr_assert_null(cfg->deflt.alias, "NexAU: no sandbox_config, no sandbox");
	sbx__config_free(cfg);
}

Test(config, nexau_timeout_is_the_sandbox_lifetime_loongsage_timeout_the_exec_default)
{
	/* In NexAU's sandbox_config, `timeout` is the e2b sandbox's lifetime in seconds. */
	sbx__config *cfg = load("sandbox_config:\n  type: e2b\n  timeout: 300\n");
	cr_assert_eq(cfg->deflt.policy.ttl, 300);
	cr_assert_eq(cfg->deflt.policy.timeout, 0);
	sbx__config_free(cfg);
	cfg = load("data_source:\n  sandbox:\n    type: e2b\n    timeout: 300\n");
	cr_assert_eq(cfg->deflt.policy.ttl, 0);
	cr_assert_eq(cfg->deflt.policy.timeout, 300);
	sbx__config_free(cfg);
}

Test(config, unset_environment_variable_is_named)
{
	unsetenv("SBX_TEST_NOPE");
	load_fails("sandbox_config:\n  type: e2b\n  api_key: ${env.SBX_TEST_NOPE}\n",
		   "<config>:3: environment variable SBX_TEST_NOPE is not set (used as "
		   "${env.SBX_TEST_NOPE})");
}

static void policy_fails(const char *line, const char *message)
{
	char text[512];
	snprintf(text, sizeof(text), "data_source:\n  sandbox:\n    type: local\n    %s\n", line);
	load_fails(text, message);
}

Test(config, every_policy_value_is_range_checked)
{
	policy_fails("timeout: -1",
		     "<config>:4: 'timeout' is -1; it must be between 0 and 31536000");
	policy_fails("timeout: 31536001",
		     "<config>:4: 'timeout' is 31536001; it must be between 0 and 31536000");
	policy_fails("timeout: abc", "<config>:4: 'timeout' must be a number, got 'abc'");
	policy_fails("timeout: 0x10", "<config>:4: 'timeout' must be a number, got '0x10'");
	policy_fails("timeout: .nan", "<config>:4: 'timeout' must be a number, got '.nan'");
	policy_fails("timeout: '30'", "<config>:4: 'timeout' must be a number, got a quoted string "
				      "'30' (remove the quotes)");
	policy_fails("timeout: [1]", "<config>:4: 'timeout' must be a number, not a list");
	policy_fails("command_exec_timeout_seconds: -0.5",
		     "<config>:4: 'command_exec_timeout_seconds' is -0.5; it must be between 0 "
		     "and 31536000");
	policy_fails("max_concurrency: -1",
		     "<config>:4: 'max_concurrency' is -1; it must be between 0 and 1000000");
	policy_fails("max_concurrency: 1000001",
		     "<config>:4: 'max_concurrency' is 1000001; it must be between 0 and 1000000");
	policy_fails("max_concurrency: 1.5",
		     "<config>:4: 'max_concurrency' must be an integer, got '1.5'");
	policy_fails("max_concurrency: {a: 1}",
		     "<config>:4: 'max_concurrency' must be an integer, not a mapping");
	policy_fails(
	    "output_char_threshold: 0",
	    "<config>:4: 'output_char_threshold' is 0; it must be between 1 and 1000000000");
	policy_fails("truncate_head_chars: 1000000001",
		     "<config>:4: 'truncate_head_chars' is 1000000001; it must be between 0 and "
		     "1000000000");
	policy_fails(
	    "truncate_tail_chars: -3",
	    "<config>:4: 'truncate_tail_chars' is -3; it must be between 0 and 1000000000");
	policy_fails("output_max_bytes: -5", "<config>:4: 'output_max_bytes' is -5; it must be "
					     "between 0 and 4611686018427387904");
	policy_fails("output_max_bytes: 99999999999999999999",
		     "<config>:4: 'output_max_bytes' is 99999999999999999999; it must be between 0 "
		     "and 4611686018427387904");
	policy_fails("ttl: 315360001",
		     "<config>:4: 'ttl' is 315360001; it must be between 0 and 315360000");
	policy_fails("ttl: 1e3", "<config>:4: 'ttl' must be an integer, got '1e3'");
	policy_fails("auto_resume: maybe", "<config>:4: 'auto_resume' must be true or false (or "
					   "yes/no, on/off, 1/0), got 'maybe'");
}

Test(config, head_and_tail_must_fit_the_threshold)
{
	policy_fails("truncate_head_chars: 6000",
		     "<config>:3: truncate_head_chars (6000) + truncate_tail_chars (5000) must not "
		     "exceed output_char_threshold (10000)");
	/* An override that lowers the threshold is checked with the inherited head and tail. */
	load_fails("data_source:\n  sandbox:\n    type: local\n"
		   "data_sources:\n  - name: a\n    sandbox:\n      output_char_threshold: 100\n",
		   "<config>:7: truncate_head_chars (5000) + truncate_tail_chars (5000) must not "
		   "exceed output_char_threshold (100)");
}

Test(config, unknown_keys_name_key_file_line_and_valid_keys)
{
	load_fails("data_source: {sandbox: {type: local}}\nrollout: {n: 1}\n",
		   "<config>:2: unknown key 'rollout' in the config; valid keys: data_source, "
		   "data_sources, sandbox_config");
	load_fails("data_source:\n  sandbox: {type: local}\n  sandboxes: 1\n",
		   "<config>:3: unknown key 'sandboxes' in data_source; valid keys: name, sandbox, "
		   "path, weight, metadata");
	load_fails("data_sources:\n  - name: a\n    reward: x\n",
		   "<config>:3: unknown key 'reward' in a data source; valid keys: name, sandbox, "
		   "path, weight, metadata");
}

Test(config, shape_errors)
{
	load_fails("- a\n", "<config>:1: a config must be a mapping with 'data_source', "
			    "'data_sources' or 'sandbox_config'");
	load_fails("data_source: {sandbox: {type: local}}\nsandbox_config: {type: local}\n",
		   "<config>:2: give either 'data_source' or 'sandbox_config', not both");
	load_fails("data_source: 3\n", "<config>:1: 'data_source' must be a mapping");
	load_fails("data_sources: {a: 1}\n", "<config>:1: 'data_sources' must be a list");
	load_fails("data_sources:\n  - x\n", "<config>:2: data_sources[0] must be a mapping");
	load_fails("data_sources:\n  - name: a\n  - name: a\n",
		   "<config>:3: data source name 'a' is used twice");
	load_fails("data_sources:\n  - name: [a]\n", "<config>:2: 'name' must be a string");
	load_fails("sandbox_config: [local]\n",
		   "<config>:1: a sandbox block must be a mapping with at least 'type'");
	load_fails("sandbox_config: {type: [a]}\n",
		   "<config>:1: 'type' must be a sandbox type alias, not a list");
	load_fails("sandbox_config: {type: local, type: e2b}\n",
		   "<config>:1: duplicate key 'type' (first at line 1)");
}

Test(config, file_config_names_the_file)
{
	char path[] = TEST_TMP_DIR "/config-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs("data_source:\n  sandbox:\n    type: local\n    bogus_policy: 1\n    ttl: -1\n", f);
	fclose(f);
	sbx__config *cfg = NULL;
	sbx_error err = {0};
	char want[700];
	cr_assert_eq(sbx__config_load(path, NULL, &cfg, &err), SBX_E_CONFIG);
	snprintf(want, sizeof(want), "%s:5: 'ttl' is -1; it must be between 0 and 315360000", path);
	cr_assert_str_eq(err.message, want);
	f = fopen(path, "w");
	fputs("data_source:\n  sandbox:\n    type: local\n    bogus: 1\n", f);
	fclose(f);
	cr_assert_eq(sbx__config_load(path, NULL, &cfg, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(cfg->file, path);
	cr_assert_str_eq(cfg->deflt.file, path);
	cr_assert_str_eq(sbx__node_get(cfg->deflt.keys, "bogus")->file, path);
	cr_assert_eq(sbx__node_get(cfg->deflt.keys, "bogus")->line, 4);
	sbx__config_free(cfg);
	unlink(path);
	cfg = NULL;
	cr_assert_eq(sbx__config_load(path, NULL, &cfg, &err), SBX_E_CONFIG);
	snprintf(want, sizeof(want), "config: %s: cannot open: No such file or directory", path);
	cr_assert_str_eq(err.message, want);
	cr_assert_eq(err.code, SBX_E_CONFIG);
	cr_assert_null(cfg);
}

Test(config, a_config_that_is_not_a_regular_file_is_refused_without_blocking)
{
	char path[600], want[800];
	snprintf(path, sizeof(path), "%s/config-fifo-%ld", TEST_TMP_DIR, (long)getpid());
	unlink(path);
	cr_assert_eq(mkfifo(path, 0600), 0);
	sbx__config *cfg = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__config_load(path, NULL, &cfg, &err), SBX_E_CONFIG);
	snprintf(want, sizeof(want), "config: %s: is a FIFO, not a regular file", path);
	cr_assert_str_eq(err.message, want);
	cr_assert_null(cfg);
	unlink(path);
	cr_assert_eq(sbx__config_load(TEST_TMP_DIR, NULL, &cfg, &err), SBX_E_CONFIG);
	snprintf(want, sizeof(want), "config: %s: is a directory, not a regular file",
		 TEST_TMP_DIR);
	cr_assert_str_eq(err.message, want);
}

static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Each source's name was compared with every name before it: 200,000 sources (9 MB) took
 * 509 s, 100,000 about a minute. Expected now: a few seconds of CPU under the sanitizers; the
 * bound is a loose sanity bound. */
static char *numbered_sources(size_t n, size_t *used, size_t *cap)
{
	*cap = n * 64 + 128;
	char *text = malloc(*cap);
	cr_assert_not_null(text);
	*used = (size_t)snprintf(text, *cap,
				 "data_source:\n  sandbox: {type: local}\n"
				 "data_sources:\n");
	for (size_t i = 0; i < n; i++)
		*used += (size_t)snprintf(
		    text + *used, *cap - *used,
		    "  - name: source-%zu\n    sandbox: {type: local, k: %zu}\n", i, i);
	return text;
}

Test(config, many_data_sources_load_in_linear_time, .timeout = 300)
{
	const size_t n = 100000;
	size_t used, cap;
	char *text = numbered_sources(n, &used, &cap);
	double t0 = cpu_seconds();
	sbx__config *cfg = load(text);
	double took = cpu_seconds() - t0;
	cr_assert_eq(cfg->n, n);
	cr_assert_str_eq(find(cfg, "source-99999")->name, "source-99999");
	keys_are(find(cfg, "source-99999"), "{\"k\":99999}");
	sbx__config_free(cfg);
	free(text);
	cr_assert_lt(took, 30.0, "%zu data sources took %.2f s of CPU", n, took);
	/* A name used twice among many is still found, with the line of the second use. */
	text = numbered_sources(5000, &used, &cap);
	snprintf(text + used, cap - used, "  - name: source-7\n");
	load_fails(text, "<config>:10004: data source name 'source-7' is used twice");
	free(text);
}

/* ---- sbx__config_for_plugin */

static const sbx_config_key KEYS[] = {
    {.name = "image", .type = SBX_KEY_STRING},
    {.name = "workers", .type = SBX_KEY_INT},
    {.name = "ratio", .type = SBX_KEY_FLOAT},
    {.name = "debug", .type = SBX_KEY_BOOL},
    {.name = "mounts", .type = SBX_KEY_LIST},
    {.name = "labels", .type = SBX_KEY_MAP},
    {.name = "extra", .type = SBX_KEY_ANY},
    {.name = "token", .type = SBX_KEY_STRING, .secret = 1},
    {.name = "pin", .type = SBX_KEY_INT, .secret = 1},
};

static sbx_plugin_desc test_desc(void)
{
	sbx_plugin_desc d = {.alias = "testbox", .keys = KEYS, .n_keys = 9};
	return d;
}

static sbx__node *registry_defaults(const char *text)
{
	sbx__node *n = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__yaml_load_string(text, "registry.yaml", 0, SBX_E_REGISTRY, &n, &err),
		     SBX_OK, "%s", err.message);
	return n;
}

/* Runs for_plugin on the default block of `sandbox` (YAML lines under `sandbox_config:`). */
static int for_plugin(const char *sandbox, const char *defaults, const sbx_plugin_desc *desc,
		      char **json, sbx_error *err)
{
	char text[1024];
	snprintf(text, sizeof(text), "sandbox_config:\n  type: testbox\n%s", sandbox);
	sbx__config *cfg = load(text);
	sbx__node *def = defaults ? registry_defaults(defaults) : NULL;
	struct sbx_config *pc = NULL;
	int rc = sbx__config_for_plugin(&cfg->deflt, def, desc, &pc, err);
	if (rc == SBX_OK) {
		cr_assert_not_null(pc);
		cr_assert_not_null(pc->json);
		/* The host's own key comes last (for_plugin_carries_max_file_bytes); the
		 * plugin's keys are what these cases compare. */
		cr_assert_geq(pc->map->n, 1);
		cr_assert_str_eq(pc->map->keys[pc->map->n - 1], "max_file_bytes");
		pc->map->n--;
		*json = sbx__node_to_json(pc->map);
		pc->map->n++;
	} else {
		cr_assert_null(pc);
	}
	sbx__config_obj_free(pc);
	sbx__node_free(def);
	sbx__config_free(cfg);
	return rc;
}

static void plugin_ok(const char *sandbox, const char *defaults, const char *want)
{
	sbx_plugin_desc d = test_desc();
	sbx_error err = {0};
	char *json = NULL;
	cr_assert_eq(for_plugin(sandbox, defaults, &d, &json, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(json, want);
	sbx__free(json);
}

static void plugin_fails(const char *sandbox, const char *defaults, const char *message)
{
	sbx_plugin_desc d = test_desc();
	sbx_error err = {0};
	char *json = NULL;
	cr_assert_eq(for_plugin(sandbox, defaults, &d, &json, &err), SBX_E_CONFIG, "%s",
		     err.message);
	cr_assert_str_eq(err.message, message);
}

/* Every plugin config carries the host's max_file_bytes, so plugins stop a read at the cap. */
Test(config, for_plugin_carries_max_file_bytes)
{
	const char *texts[] = {"sandbox_config:\n  type: testbox\n",
			       "sandbox_config:\n  type: testbox\n  max_file_bytes: 4096\n"};
	const char *want[] = {"268435456", "4096"};
	for (int i = 0; i < 2; i++) {
		sbx__config *cfg = load(texts[i]);
		sbx_plugin_desc d = test_desc();
		struct sbx_config *pc = NULL;
		sbx_error err = {0};
		cr_assert_eq(sbx__config_for_plugin(&cfg->deflt, NULL, &d, &pc, &err), SBX_OK, "%s",
			     err.message);
		int64_t v = 0;
		cr_assert_eq(sbx__host_api()->config_int(pc, "max_file_bytes", &v, &err), SBX_OK);
		cr_assert_eq(v, strtoll(want[i], NULL, 10));
		sbx__config_obj_free(pc);
		sbx__config_free(cfg);
	}
	policy_fails(
	    "max_file_bytes: 0",
	    "<config>:4: 'max_file_bytes' is 0; it must be between 1 and 4611686018427387904");
}

Test(config, for_plugin_overlays_registry_defaults_with_data_source_keys)
{
	plugin_ok("  image: mine\n  debug: on\n  timeout: 5\n",
		  "image: base\nworkers: 2\nmounts: [/a]\n",
		  "{\"image\":\"mine\",\"workers\":2,\"mounts\":[\"/a\"],\"debug\":\"on\"}");
	plugin_ok("", NULL, "{}");
	plugin_ok("  workers: -3\n  ratio: 0.25\n  labels: {a: b}\n  extra: [1]\n  token: t0k\n"
		  "  pin: 7\n  image: ~\n",
		  "extra: x\n",
		  "{\"extra\":[1],\"workers\":-3,\"ratio\":0.25,\"labels\":{\"a\":\"b\"},"
		  "\"token\":\"t0k\",\"pin\":7,\"image\":null}");
}

/* The host's own keys, which every sandbox block accepts beside the plugin's. */
#define HOST_KEYS                                                                           \
	"type, timeout, max_concurrency, output_char_threshold, truncate_head_chars, "      \
	"truncate_tail_chars, output_max_bytes, ttl, auto_resume, max_jobs, max_starting, " \
	"create_rate, create_burst, max_file_bytes"

Test(config, for_plugin_rejects_undeclared_keys_listing_valid_ones)
{
	plugin_fails(
	    "  image: x\n  foo: 1\n", NULL,
	    "<config>:4: unknown key 'foo' for sandbox type 'testbox'; valid keys: " HOST_KEYS
	    ", image, workers, ratio, debug, mounts, labels, extra, token, pin");
	plugin_fails(
	    "", "image: base\nbar: 2\n",
	    "registry.yaml:2: unknown key 'bar' for sandbox type 'testbox'; valid keys: " HOST_KEYS
	    ", image, workers, ratio, debug, mounts, labels, extra, token, pin");
	/* A typo of a host key is told the host key too. */
	plugin_fails(
	    "  timout: 5\n", NULL,
	    "<config>:3: unknown key 'timout' for sandbox type 'testbox'; valid keys: " HOST_KEYS
	    ", image, workers, ratio, debug, mounts, labels, extra, token, pin");
	sbx_plugin_desc none = {.alias = "bare"};
	sbx_error err = {0};
	char *json = NULL;
	cr_assert_eq(for_plugin("  image: x\n", NULL, &none, &json, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "<config>:3: unknown key 'image' for sandbox type 'bare'; "
				      "valid keys: " HOST_KEYS);
}

Test(config, for_plugin_checks_declared_types)
{
	plugin_fails("  workers: abc\n", NULL,
		     "<config>:3: 'workers' must be an integer, got 'abc'");
	plugin_fails("  workers: '3'\n", NULL,
		     "<config>:3: 'workers' must be an integer, got a "
		     "quoted string '3' (remove the quotes)");
	plugin_fails("  workers: 99999999999999999999\n", NULL,
		     "<config>:3: 'workers' is 99999999999999999999; it must be between "
		     "-9223372036854775808 and 9223372036854775807");
	plugin_fails("  ratio: fast\n", NULL, "<config>:3: 'ratio' must be a number, got 'fast'");
	plugin_fails("  debug: maybe\n", NULL,
		     "<config>:3: 'debug' must be true or false (or "
		     "yes/no, on/off, 1/0), got 'maybe'");
	plugin_fails("  mounts: /a\n", NULL, "<config>:3: 'mounts' must be a list, not a scalar");
	plugin_fails("  labels: [1]\n", NULL, "<config>:3: 'labels' must be a mapping, not a list");
	plugin_fails("  image: {a: 1}\n", NULL,
		     "<config>:3: 'image' must be a string, not a mapping");
	plugin_fails("", "workers: many\n",
		     "registry.yaml:1: 'workers' must be an integer, got 'many'");
}

Test(config, for_plugin_type_errors_never_show_secret_values)
{
	plugin_fails("  pin: s3cret\n", NULL, "<config>:3: 'pin' must be an integer");
	plugin_fails("  pin: 's3cret'\n", NULL,
		     "<config>:3: 'pin' must be an integer, got a quoted string");
	plugin_fails("  pin: 99999999999999999999\n", NULL,
		     "<config>:3: 'pin' must be between -9223372036854775808 and "
		     "9223372036854775807");
}

/* The node of key in a plugin config, to tamper with after load. */
static sbx__node *node_of(struct sbx_config *pc, const char *key)
{
	for (size_t i = 0; i < pc->map->n; i++)
		if (strcmp(pc->map->keys[i], key) == 0)
			return pc->map->items[i];
	cr_assert_fail("no key %s", key);
	return NULL;
}

Test(config, declared_values_are_converted_once_at_load)
{
	sbx__config *cfg =
	    load("sandbox_config:\n  type: testbox\n  workers: 3\n  ratio: 0.25\n  debug: on\n"
		 "  extra: 12\n");
	sbx__node *def = registry_defaults("workers: 2\npin: 7\n");
	sbx_plugin_desc d = test_desc();
	struct sbx_config *pc = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__config_for_plugin(&cfg->deflt, def, &d, &pc, &err), SBX_OK, "%s",
		     err.message);
	/* Spoil the text of the checked keys: the getters return what load converted. */
	const char *const keys[] = {"workers", "ratio", "debug", "pin", "extra"};
	for (size_t i = 0; i < 5; i++)
		node_of(pc, keys[i])->scalar[0] = '#';
	const sbx_host_api *api = sbx__host_api();
	int64_t n = 0;
	double r = 0;
	int b = 0;
	cr_assert_eq(api->config_int(pc, "workers", &n, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(n, 3, "the data source's value, over the registry's");
	cr_assert_eq(api->config_int(pc, "pin", &n, &err), SBX_OK);
	cr_assert_eq(n, 7);
	cr_assert_eq(api->config_float(pc, "ratio", &r, &err), SBX_OK);
	cr_assert_float_eq(r, 0.25, 1e-12);
	cr_assert_eq(api->config_float(pc, "workers", &r, &err), SBX_OK,
		     "an integer reads as a number");
	cr_assert_float_eq(r, 3.0, 1e-12);
	cr_assert_eq(api->config_bool(pc, "debug", &b, &err), SBX_OK);
	cr_assert_eq(b, 1);
	/* An SBX_KEY_ANY key is converted when read, by the same rules. */
	cr_assert_eq(api->config_int(pc, "extra", &n, &err), SBX_E_CONFIG);
	cr_assert_str_eq(err.message, "<config>:6: 'extra' must be an integer");
	sbx__config_obj_free(pc);
	sbx__node_free(def);
	sbx__config_free(cfg);
}

/* Fails allocation number `fail_at` (1-based) and every one after it. */
static long alloc_count, fail_at;
static void *failing_alloc(size_t n)
{
	return ++alloc_count >= fail_at ? NULL : malloc(n);
}
static void *failing_realloc(void *p, size_t n)
{
	return ++alloc_count >= fail_at ? NULL : realloc(p, n);
}

Test(config, every_allocation_failure_is_nomem_without_leaks)
{
	sbx__node *def = registry_defaults("image: base\nworkers: 2\n");
	static const sbx_config_key docker_keys[] = {
	    {.name = "image", .type = SBX_KEY_STRING},
	    {.name = "working_dir", .type = SBX_KEY_STRING},
	    {.name = "workers", .type = SBX_KEY_INT},
	};
	sbx_plugin_desc d = {.alias = "docker", .keys = docker_keys, .n_keys = 3};
	for (fail_at = 1;; fail_at++) {
		alloc_count = 0;
		sbx_set_allocator(failing_alloc, failing_realloc, free);
		sbx__config *cfg = NULL;
		struct sbx_config *pc = NULL;
		sbx_error err = {0};
		int rc = sbx__config_load(NULL, LOONGSAGE, &cfg, &err);
		const sbx__data_source *b = NULL;
		if (rc == SBX_OK)
			rc = sbx__config_find(cfg, "a", &b, &err);
		if (rc == SBX_OK)
			rc = sbx__config_for_plugin(b, def, &d, &pc, &err);
		sbx_set_allocator(NULL, NULL, NULL);
		if (rc == SBX_OK) {
			cr_assert_not_null(pc);
			sbx__config_obj_free(pc);
			sbx__config_free(cfg);
			break;
		}
		cr_assert_eq(rc, SBX_E_NOMEM, "fail_at %ld: rc %d (%s)", fail_at, rc, err.message);
		cr_assert_null(pc);
		sbx__config_free(cfg);
	}
	cr_assert_gt(fail_at, 20);
	sbx__node_free(def);
}

/* ---- sbx__config_record / sbx__config_recall (recall.c) */

/* What the ledger records of a data source: non-secret values as resolved, a secret only as
 * its ${env.NAME} reference (a literal secret is left out), a literal "${" escaped; the
 * recall interpolates the references from the recalling process's environment. */
Test(config_record, secrets_only_as_references_and_recalled_from_the_environment)
{
	setenv("SBX_TEST_REC_IMG", "img1", 1);
	setenv("SBX_TEST_REC_TOK", "sekrit", 1);
	sbx__config *cfg = load("sandbox_config:\n  type: testbox\n"
				"  image: ${env.SBX_TEST_REC_IMG}\n"
				"  token: Bearer ${env.SBX_TEST_REC_TOK}\n"
				"  pin: 4321\n"
				"  extra: a$${b}\n");
	sbx_plugin_desc d = test_desc();
	char *json = sbx__config_record(cfg->deflt.keys, &d);
	cr_assert_not_null(json);
	cr_assert_str_eq(json, "{\"image\":\"img1\",\"token\":\"Bearer "
			       "${env.SBX_TEST_REC_TOK}\",\"extra\":\"a$${b}\"}");
	cr_assert_null(strstr(json, "sekrit"));
	cr_assert_null(strstr(json, "4321"));
	setenv("SBX_TEST_REC_IMG", "changed", 1);
	setenv("SBX_TEST_REC_TOK", "other", 1);
	sbx__node *keys = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__config_recall(json, &keys, &err), SBX_OK, "%s", err.message);
	char *back = sbx__node_to_json(keys);
	cr_assert_str_eq(back,
			 "{\"image\":\"img1\",\"token\":\"Bearer other\",\"extra\":\"a${b}\"}");
	sbx__free(back);
	sbx__node_free(keys);
	sbx__free(json);
	unsetenv("SBX_TEST_REC_TOK");
	cr_assert_eq(sbx__config_recall("{\"token\":\"${env.SBX_TEST_REC_TOK}\"}", &keys, &err),
		     SBX_E_CONFIG);
	cr_assert(strstr(err.message, "SBX_TEST_REC_TOK"), "%s", err.message);
	cr_assert_eq(sbx__config_recall("[1, 2]", &keys, &err), SBX_E_LEDGER);
	cr_assert_str_eq(err.message, "ledger: the recorded config is not a map of keys");
	/* Nothing but literal secrets: nothing to record. */
	sbx__config *only = load("sandbox_config:\n  type: testbox\n  token: abc\n");
	json = sbx__config_record(only->deflt.keys, &d);
	cr_assert_str_eq(json, "");
	sbx__free(json);
	sbx__config_free(only);
	sbx__config_free(cfg);
	unsetenv("SBX_TEST_REC_IMG");
}

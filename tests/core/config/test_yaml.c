/* The YAML node tree: structure with file and line, ${env.NAME} interpolation, duplicate keys,
 * refused aliases, and the JSON rendering plugins get from config_json. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../loader/leaks.h"
#include "internal.h"

TestSuite(yaml, .fini = sbx_test_check_leaks);

static sbx__node *load(const char *text, int interp)
{
	sbx__node *n = NULL;
	sbx_error err = {0};
	int rc = sbx__yaml_load_string(text, "t.yaml", interp, SBX_E_CONFIG, &n, &err);
	cr_assert_eq(rc, SBX_OK, "load failed: %s", err.message);
	return n;
}

static void load_fails(const char *text, int interp, int status, const char *message)
{
	sbx__node *n = NULL;
	sbx_error err = {0};
	int rc = sbx__yaml_load_string(text, "t.yaml", interp, status, &n, &err);
	cr_assert_eq(rc, status, "rc %d (%s)", rc, err.message);
	cr_assert_eq(err.code, status);
	cr_assert_null(n);
	cr_assert_str_eq(err.message, message);
}

static void json_is(const sbx__node *n, const char *want)
{
	char *j = sbx__node_to_json(n);
	cr_assert_not_null(j);
	cr_assert_str_eq(j, want);
	sbx__free(j);
}

Test(yaml, tree_has_kinds_files_and_lines)
{
	sbx__node *root = load("a: 1\n"
			       "b:\n"
			       "  - x\n"
			       "  - 'y'\n"
			       "c:\n"
			       "  d: \"q\"\n",
			       0);
	cr_assert_eq(root->kind, SBX__NODE_MAP);
	cr_assert_eq(root->n, 3);
	cr_assert_str_eq(root->file, "t.yaml");
	cr_assert_str_eq(root->keys[0], "a");
	const sbx__node *a = sbx__node_get(root, "a");
	cr_assert_eq(a->kind, SBX__NODE_SCALAR);
	cr_assert_str_eq(a->scalar, "1");
	cr_assert_eq(a->quoted, 0);
	cr_assert_eq(a->line, 1);
	const sbx__node *b = sbx__node_get(root, "b");
	cr_assert_eq(b->kind, SBX__NODE_LIST);
	cr_assert_eq(b->n, 2);
	cr_assert_eq(b->items[1]->line, 4);
	cr_assert_eq(b->items[1]->quoted, 1);
	cr_assert_str_eq(b->items[1]->scalar, "y");
	const sbx__node *d = sbx__node_get(sbx__node_get(root, "c"), "d");
	cr_assert_eq(d->line, 6);
	cr_assert_str_eq(d->file, "t.yaml");
	cr_assert_null(sbx__node_get(root, "zz"));
	cr_assert_null(sbx__node_get(a, "a"), "a scalar has no keys");
	sbx__node_free(root);
}

Test(yaml, empty_document_is_an_empty_map)
{
	sbx__node *root = load("# only a comment\n", 0);
	cr_assert_eq(root->kind, SBX__NODE_MAP);
	cr_assert_eq(root->n, 0);
	json_is(root, "{}");
	sbx__node_free(root);
	root = load("", 0);
	cr_assert_eq(root->kind, SBX__NODE_MAP);
	sbx__node_free(root);
}

Test(yaml, json_types_scalars_like_yaml_core_schema)
{
	sbx__node *root = load("n1: null\nn2: ~\nn3:\nn4: 'null'\n"
			       "t: true\nf: False\nqt: \"true\"\n"
			       "i: 42\nneg: -7\nfl: 1.5e3\nlead0: 007\nhex: 0x1F\nplus: +1\n"
			       "dot: 1.\nqi: '42'\ninf: .inf\nbig: 1e999\n"
			       "s: hello world\nblk: |\n  line\n"
			       "l: [1, a, {k: v}]\nm: {}\ne: []\n",
			       0);
	json_is(root, "{\"n1\":null,\"n2\":null,\"n3\":null,\"n4\":\"null\","
		      "\"t\":true,\"f\":false,\"qt\":\"true\","
		      "\"i\":42,\"neg\":-7,\"fl\":1.5e3,\"lead0\":\"007\",\"hex\":\"0x1F\","
		      "\"plus\":\"+1\",\"dot\":\"1.\",\"qi\":\"42\",\"inf\":\".inf\","
		      "\"big\":\"1e999\",\"s\":\"hello world\",\"blk\":\"line\\n\","
		      "\"l\":[1,\"a\",{\"k\":\"v\"}],\"m\":{},\"e\":[]}");
	json_is(sbx__node_get(root, "i"), "42");
	sbx__node_free(root);
	char *j = sbx__node_to_json(NULL);
	cr_assert_str_eq(j, "null");
	sbx__free(j);
}

Test(yaml, json_escapes_quotes_backslashes_controls_and_bad_utf8)
{
	setenv("SBX_TEST_BYTES",
	       "a\xff"
	       "b\xc3\xa9"
	       "\x01",
	       1);
	sbx__node *root =
	    load("s: \"q\\\"b\\\\s\\tt\\nn\\x1f\\u00e9\"\nb: ${env.SBX_TEST_BYTES}\n", 1);
	json_is(sbx__node_get(root, "s"), "\"q\\\"b\\\\s\\tt\\nn\\u001f\xc3\xa9\"");
	json_is(sbx__node_get(root, "b"), "\"a\\ufffdb\xc3\xa9\\u0001\"");
	sbx__node_free(root);
	/* Overlong forms and surrogates are invalid too, one U+FFFD per byte. */
	setenv("SBX_TEST_BYTES", "\xc0\xaf|\xed\xa0\x80|\xf0\x9f\x98\x80", 1);
	root = load("b: ${env.SBX_TEST_BYTES}\n", 1);
	json_is(sbx__node_get(root, "b"),
		"\"\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\xf0\x9f\x98\x80\"");
	sbx__node_free(root);
	unsetenv("SBX_TEST_BYTES");
}

Test(yaml, interpolation_expands_set_variables)
{
	setenv("SBX_TEST_HOST", "example.org", 1);
	setenv("SBX_TEST_PORT", "8080", 1);
	sbx__node *root = load("url: http://${env.SBX_TEST_HOST}:${env.SBX_TEST_PORT}/x\n"
			       "port: ${env.SBX_TEST_PORT}\n"
			       "q: '${env.SBX_TEST_HOST}'\n",
			       1);
	cr_assert_str_eq(sbx__node_get(root, "url")->scalar, "http://example.org:8080/x");
	json_is(sbx__node_get(root, "port"), "8080");
	json_is(sbx__node_get(root, "q"), "\"example.org\"");
	sbx__node_free(root);
	unsetenv("SBX_TEST_HOST");
	unsetenv("SBX_TEST_PORT");
}

Test(yaml, interpolation_of_an_unset_variable_names_it)
{
	unsetenv("SBX_TEST_UNSET");
	load_fails("a: 1\nkey: pre-${env.SBX_TEST_UNSET}\n", 1, SBX_E_CONFIG,
		   "t.yaml:2: environment variable SBX_TEST_UNSET is not set (used as "
		   "${env.SBX_TEST_UNSET})");
}

Test(yaml, double_dollar_is_a_literal_and_no_interpolation_when_not_asked)
{
	unsetenv("SBX_TEST_UNSET");
	sbx__node *root = load("a: cost $5 and $${env.SBX_TEST_UNSET}\n", 1);
	cr_assert_str_eq(sbx__node_get(root, "a")->scalar, "cost $5 and ${env.SBX_TEST_UNSET}");
	sbx__node_free(root);
	root = load("a: ${env.SBX_TEST_UNSET}\n", 0);
	cr_assert_str_eq(sbx__node_get(root, "a")->scalar, "${env.SBX_TEST_UNSET}");
	sbx__node_free(root);
}

Test(yaml, bad_interpolation_says_what_is_expected)
{
	load_fails("a: ${HOME}\n", 1, SBX_E_CONFIG,
		   "t.yaml:1: bad interpolation '${HOME}'; expected ${env.NAME} (write $${ for a "
		   "literal ${)");
	load_fails("a: ${env.}\n", 1, SBX_E_CONFIG,
		   "t.yaml:1: bad environment variable name in '${env.}'");
}

Test(yaml, duplicate_key_names_both_lines)
{
	load_fails("x: 1\nm:\n  a: 1\n  b:\n    c: 2\n  a: 3\n", 0, SBX_E_REGISTRY,
		   "t.yaml:6: duplicate key 'a' (first at line 3)");
	/* The first key's line, not its value's (a block value starts on the next line). */
	load_fails("b:\n  c: 2\nb: 3\n", 0, SBX_E_CONFIG,
		   "t.yaml:3: duplicate key 'b' (first at line 1)");
}

Test(yaml, aliases_are_refused)
{
	load_fails("a: &x {k: v}\nb: 1\nc: *x\n", 0, SBX_E_CONFIG,
		   "t.yaml:3: YAML aliases are not supported (the value anchored at line 1 is "
		   "used again); write the value out");
	/* In a list the alias's own line is named, the anchor's in the parentheses. */
	load_fails("a: &x v\nl:\n  - *x\n", 0, SBX_E_CONFIG,
		   "t.yaml:3: YAML aliases are not supported (the value anchored at line 1 is "
		   "used again); write the value out");
}

Test(yaml, syntax_error_uses_the_callers_status_and_line)
{
	load_fails("a: 1\nb: [1, 2\n", 0, SBX_E_REGISTRY,
		   "t.yaml:3: did not find expected ',' or ']' while parsing a flow sequence");
	load_fails("a: 1\n  b: 2\n", 0, SBX_E_CONFIG,
		   "t.yaml:2: mapping values are not allowed in this context");
}

Test(yaml, non_scalar_keys_are_refused)
{
	load_fails("? [a, b]\n: 1\n", 0, SBX_E_CONFIG,
		   "t.yaml:1: mapping keys must be plain strings");
}

Test(yaml, file_load_and_missing_file)
{
	char path[] = TEST_TMP_DIR "/yaml-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs("k:\n  - 1\n", f);
	fclose(f);
	sbx__node *n = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__yaml_load_file(path, 0, SBX_E_CONFIG, &n, &err), SBX_OK);
	cr_assert_str_eq(sbx__node_get(n, "k")->items[0]->file, path);
	cr_assert_eq(sbx__node_get(n, "k")->items[0]->line, 2);
	sbx__node_free(n);
	unlink(path);
	n = NULL;
	cr_assert_eq(sbx__yaml_load_file(path, 0, SBX_E_CONFIG, &n, &err), SBX_E_IO);
	char want[600];
	snprintf(want, sizeof(want), "%s: cannot open: No such file or directory", path);
	cr_assert_str_eq(err.message, want);
	cr_assert_null(n);
}

Test(yaml, dup_is_deep_and_independent)
{
	sbx__node *root = load("a: 'x'\nl: [1, {k: v}]\n", 0);
	sbx__node *copy = sbx__node_dup(root);
	cr_assert_not_null(copy);
	char *j1 = sbx__node_to_json(root);
	sbx__node_free(root);
	char *j2 = sbx__node_to_json(copy);
	cr_assert_str_eq(j1, j2);
	cr_assert_eq(sbx__node_get(copy, "a")->quoted, 1);
	cr_assert_eq(sbx__node_get(copy, "l")->items[1]->line, 2);
	cr_assert_str_eq(sbx__node_get(copy, "l")->items[1]->file, "t.yaml");
	sbx__free(j1);
	sbx__free(j2);
	sbx__node_free(copy);
	cr_assert_null(sbx__node_dup(NULL));
	sbx__node_free(NULL);
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

Test(yaml, every_allocation_failure_is_nomem_without_leaks)
{
	const char *text = "a: 1\nb: [x, {c: 'd'}]\n";
	for (fail_at = 1;; fail_at++) {
		alloc_count = 0;
		sbx_set_allocator(failing_alloc, failing_realloc, free);
		sbx__node *n = NULL;
		sbx_error err = {0};
		int rc = sbx__yaml_load_string(text, "t.yaml", 1, SBX_E_CONFIG, &n, &err);
		char *j = rc == SBX_OK ? sbx__node_to_json(n) : NULL;
		sbx__node *d = rc == SBX_OK ? sbx__node_dup(n) : NULL;
		sbx_set_allocator(NULL, NULL, NULL);
		if (rc == SBX_OK && j && d) {
			sbx__free(j);
			sbx__node_free(d);
			sbx__node_free(n);
			break;
		}
		if (rc != SBX_OK) {
			cr_assert_eq(rc, SBX_E_NOMEM, "fail_at %ld: rc %d (%s)", fail_at, rc,
				     err.message);
			cr_assert_null(n);
		}
		sbx__free(j);
		sbx__node_free(d);
		sbx__node_free(n);
	}
	cr_assert_gt(fail_at, 5);
}

static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* `unit` n times, then `tail`, in a new string. */
static char *repeat(const char *unit, size_t n, const char *tail)
{
	size_t u = strlen(unit), t = strlen(tail);
	char *s = malloc(u * n + t + 1);
	cr_assert_not_null(s);
	for (size_t i = 0; i < n; i++)
		memcpy(s + i * u, unit, u);
	memcpy(s + u * n, tail, t + 1);
	return s;
}

/* 100,000 levels in 200 KB took 86 s while libyaml's document API read them all before the
 * depth was checked (its scanner works per token in proportion to the depth); the event
 * parser stops at the 65th level. Expected: milliseconds; the bound is a loose sanity bound. */
Test(yaml, deep_nesting_is_refused_at_the_limit_in_linear_time)
{
	const char *units[] = {"[", "{a: ", "- "};
	for (size_t i = 0; i < 3; i++) {
		char *text = repeat(units[i], 100000, "x\n");
		double t0 = cpu_seconds();
		load_fails(text, 0, SBX_E_CONFIG, "t.yaml:1: nesting deeper than 64 levels");
		double took = cpu_seconds() - t0;
		cr_assert_lt(took, 2.0, "'%s' x 100000 took %.2f s of CPU", units[i], took);
		free(text);
	}
	/* 64 levels are fine. */
	char *text = repeat("- ", 63, "x\n");
	sbx__node *root = load(text, 0);
	const sbx__node *n = root;
	int depth = 1;
	for (; n->kind == SBX__NODE_LIST; n = n->items[0])
		depth++;
	cr_assert_eq(depth, 64);
	cr_assert_str_eq(n->scalar, "x");
	sbx__node_free(root);
	free(text);
}

/* Each key was compared with every key before it: 200,000 keys made 2 * 10^10 comparisons,
 * minutes of CPU. Expected now: about a second under the sanitizers; the bound is loose. */
static char *numbered_keys(size_t n, size_t *used)
{
	char *text = malloc(n * 20 + 64);
	cr_assert_not_null(text);
	*used = 0;
	for (size_t i = 0; i < n; i++)
		*used += (size_t)sprintf(text + *used, "k%zu: %zu\n", i, i);
	return text;
}

Test(yaml, many_keys_are_checked_for_duplicates_in_linear_time)
{
	const size_t n = 200000;
	size_t used;
	char *text = numbered_keys(n, &used);
	double t0 = cpu_seconds();
	sbx__node *root = load(text, 0);
	double took = cpu_seconds() - t0;
	cr_assert_eq(root->n, n);
	cr_assert_str_eq(root->keys[n - 1], "k199999");
	cr_assert_str_eq(root->items[n - 1]->scalar, "199999");
	cr_assert_eq(root->items[n - 1]->line, 200000);
	sbx__node_free(root);
	free(text);
	cr_assert_lt(took, 20.0, "%zu keys took %.2f s of CPU", n, took);
	/* A duplicate among many is still found, naming both lines. */
	text = numbered_keys(20000, &used);
	sprintf(text + used, "k12345: again\n");
	load_fails(text, 0, SBX_E_CONFIG,
		   "t.yaml:20001: duplicate key 'k12345' (first at line 12346)");
	free(text);
}

Test(yaml, a_fifo_is_refused_without_blocking)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/yaml-fifo-%ld", TEST_TMP_DIR, (long)getpid());
	unlink(path);
	cr_assert_eq(mkfifo(path, 0600), 0);
	sbx__node *n = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__yaml_load_file(path, 0, SBX_E_CONFIG, &n, &err), SBX_E_IO);
	char want[700];
	snprintf(want, sizeof(want), "%s: is a FIFO, not a regular file", path);
	cr_assert_str_eq(err.message, want);
	cr_assert_null(n);
	unlink(path);
	cr_assert_eq(sbx__yaml_load_file("/dev/zero", 0, SBX_E_CONFIG, &n, &err), SBX_E_IO);
	cr_assert_str_eq(err.message, "/dev/zero: is a character device, not a regular file");
}

/* The registry: entries, relative paths, drop-ins, lookup order and exact error messages. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "leaks.h"

static char dir[512];

static void make_dir(void)
{
	snprintf(dir, sizeof(dir), "%s/registry-XXXXXX", TEST_TMP_DIR);
	cr_assert_not_null(mkdtemp(dir));
}

/* Writes text to dir/name and returns its full path (valid for the next 15 calls). */
static const char *put(const char *name, const char *text)
{
	static char paths[16][1024];
	static int slot;
	char *p = paths[slot++ % 16];
	snprintf(p, 1024, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "cannot write %s", p);
	fputs(text, f);
	fclose(f);
	return p;
}

static void dropin_dir(void)
{
	char d[1024];
	snprintf(d, sizeof(d), "%s/registry.d", dir);
	cr_assert_eq(mkdir(d, 0700), 0);
}

static void expect_error(const char *path, const char *message)
{
	sbx__registry *reg = (sbx__registry *)1;
	sbx_error err = {0};
	int rc = sbx__registry_load(path, &reg, &err);
	cr_assert_eq(rc, SBX_E_REGISTRY, "rc %s (%s)", sbx_status_name(rc), err.message);
	cr_assert_eq(err.code, SBX_E_REGISTRY);
	cr_assert_str_eq(err.message, message);
	cr_assert_null(reg);
}

TestSuite(registry, .init = make_dir, .fini = sbx_test_check_leaks);

Test(registry, entries_are_sorted_with_resolved_paths_and_defaults)
{
	const char *top = put("registry.yaml", "b: {path: /abs/b.so}\n"
					       "a: {path: rel/a.so, defaults: {greeting: hi}}\n");
	sbx__registry *reg = NULL;
	sbx_error err;
	cr_assert_eq(sbx__registry_load(top, &reg, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(reg->main_file, top);
	cr_assert_eq(reg->n, 2);
	const sbx__reg_entry *a = &reg->entries[0], *b = &reg->entries[1];
	cr_assert_str_eq(a->alias, "a");
	cr_assert_str_eq(b->alias, "b");
	char want[1024];
	snprintf(want, sizeof(want), "%s/rel/a.so", dir);
	cr_assert_str_eq(a->path, want);
	cr_assert_str_eq(b->path, "/abs/b.so");
	cr_assert_str_eq(a->file, top);
	cr_assert_eq(a->line, 2);
	cr_assert_eq(b->line, 1);
	cr_assert_not_null(a->defaults);
	cr_assert_eq(a->defaults->kind, SBX__NODE_MAP);
	const sbx__node *g = sbx__node_get(a->defaults, "greeting");
	cr_assert_not_null(g);
	cr_assert_str_eq(g->scalar, "hi");
	cr_assert_null(b->defaults);
	cr_assert_eq(sbx__registry_find(reg, "a"), a);
	cr_assert_eq(sbx__registry_find(reg, "b"), b);
	cr_assert_null(sbx__registry_find(reg, "c"));
	char *list = sbx__registry_alias_list(reg);
	cr_assert_str_eq(list, "a, b");
	sbx__free(list);
	sbx__registry_free(reg);
}

Test(registry, dropins_add_aliases_in_name_order_relative_to_their_folder)
{
	const char *top = put("registry.yaml", "local: {path: local.so}\n");
	dropin_dir();
	put("registry.d/20-z.yaml", "zed: {path: z.so}\n");
	put("registry.d/10-y.yaml", "# a third party\ncustom: {path: /opt/custom.so}\n");
	put("registry.d/notes.txt", "not: {yaml: here}\n");
	put("registry.d/.hidden.yaml", "hidden: {path: h.so}\n");
	sbx__registry *reg = NULL;
	sbx_error err;
	cr_assert_eq(sbx__registry_load(top, &reg, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(reg->n, 3);
	const sbx__reg_entry *c = sbx__registry_find(reg, "custom");
	const sbx__reg_entry *z = sbx__registry_find(reg, "zed");
	cr_assert_not_null(c);
	cr_assert_not_null(z);
	char want[1024];
	snprintf(want, sizeof(want), "%s/registry.d/10-y.yaml", dir);
	cr_assert_str_eq(c->file, want);
	cr_assert_eq(c->line, 2);
	cr_assert_str_eq(c->path, "/opt/custom.so");
	snprintf(want, sizeof(want), "%s/registry.d/z.so", dir);
	cr_assert_str_eq(z->path, want);
	cr_assert_null(sbx__registry_find(reg, "hidden"));
	sbx__registry_free(reg);
}

Test(registry, duplicate_alias_names_both_files_and_lines)
{
	const char *top = put("registry.yaml", "a: {path: a.so}\n");
	dropin_dir();
	const char *drop = put("registry.d/x.yaml", "x: {path: x.so}\na: {path: other.so}\n");
	char msg[2048];
	snprintf(msg, sizeof(msg), "registry: alias 'a' is listed twice: %s:1 and %s:2", top, drop);
	expect_error(top, msg);
}

Test(registry, duplicate_alias_between_dropins)
{
	const char *top = put("registry.yaml", "");
	dropin_dir();
	const char *one = put("registry.d/1.yaml", "a: {path: a.so}\n");
	const char *two = put("registry.d/2.yaml", "a: {path: b.so}\n");
	char msg[2048];
	snprintf(msg, sizeof(msg), "registry: alias 'a' is listed twice: %s:1 and %s:1", one, two);
	expect_error(top, msg);
}

Test(registry, unknown_key_lists_the_valid_ones)
{
	const char *top = put("registry.yaml", "a: {path: a.so}\nb: {path: b.so, pth: x}\n");
	char msg[2048];
	snprintf(msg, sizeof(msg),
		 "%s:2: alias 'b': unknown key 'pth' (valid keys: path, defaults, runner)", top);
	expect_error(top, msg);
}

Test(registry, missing_path_names_the_alias)
{
	const char *top = put("registry.yaml", "a: {defaults: {x: 1}}\n");
	char msg[2048];
	snprintf(msg, sizeof(msg), "%s:1: alias 'a' has no 'path' (the plugin .so file)", top);
	expect_error(top, msg);
}

Test(registry, entry_must_be_a_mapping)
{
	const char *top = put("registry.yaml", "a: a.so\n");
	char msg[2048];
	snprintf(msg, sizeof(msg), "%s:1: alias 'a' must map to {path: FILE.so, defaults: {...}}",
		 top);
	expect_error(top, msg);
}

Test(registry, defaults_must_be_a_mapping)
{
	const char *top = put("registry.yaml", "a: {path: a.so, defaults: [1, 2]}\n");
	char msg[2048];
	snprintf(msg, sizeof(msg), "%s:1: alias 'a': 'defaults' must be a mapping of config keys",
		 top);
	expect_error(top, msg);
}

Test(registry, top_level_must_be_a_mapping)
{
	const char *top = put("registry.yaml", "- a\n- b\n");
	char msg[2048];
	snprintf(msg, sizeof(msg),
		 "%s:1: the registry must be a mapping of alias -> {path: FILE.so, defaults: "
		 "{...}}",
		 top);
	expect_error(top, msg);
}

Test(registry, alias_with_a_colon_is_refused)
{
	const char *top = put("registry.yaml", "\"a:b\": {path: a.so}\n");
	char msg[2048];
	snprintf(msg, sizeof(msg),
		 "%s:1: alias 'a:b' may only contain letters, digits, '-', '_' and '.'", top);
	expect_error(top, msg);
}

Test(registry, empty_file_is_an_empty_registry)
{
	const char *top = put("registry.yaml", "# nothing yet\n");
	sbx__registry *reg = NULL;
	sbx_error err;
	cr_assert_eq(sbx__registry_load(top, &reg, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(reg->n, 0);
	cr_assert_null(sbx__registry_find(reg, "a"));
	char *list = sbx__registry_alias_list(reg);
	cr_assert_str_eq(list, "(none)");
	sbx__free(list);
	sbx__registry_free(reg);
}

Test(registry, missing_explicit_file)
{
	char path[1024], msg[2048];
	snprintf(path, sizeof(path), "%s/nope.yaml", dir);
	snprintf(msg, sizeof(msg), "%s: cannot read the registry: No such file or directory", path);
	expect_error(path, msg);
}

Test(registry, env_is_used_without_an_explicit_path)
{
	const char *env = put("env.yaml", "fromenv: {path: e.so}\n");
	const char *explicit = put("explicit.yaml", "fromexplicit: {path: x.so}\n");
	cr_assert_eq(setenv("SBX_REGISTRY", env, 1), 0);
	sbx__registry *reg = NULL;
	sbx_error err;
	cr_assert_eq(sbx__registry_load(NULL, &reg, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(sbx__registry_find(reg, "fromenv"));
	sbx__registry_free(reg);
	cr_assert_eq(sbx__registry_load(explicit, &reg, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(sbx__registry_find(reg, "fromexplicit"));
	cr_assert_null(sbx__registry_find(reg, "fromenv"));
	sbx__registry_free(reg);
}

Test(registry, missing_env_file_says_where_the_name_came_from)
{
	char path[1024], msg[2048];
	snprintf(path, sizeof(path), "%s/gone.yaml", dir);
	cr_assert_eq(setenv("SBX_REGISTRY", path, 1), 0);
	snprintf(msg, sizeof(msg),
		 "%s (named by $SBX_REGISTRY): cannot read the registry: No such file or "
		 "directory",
		 path);
	expect_error(NULL, msg);
}

Test(registry, relative_registry_path_is_made_absolute)
{
	put("registry.yaml", "a: {path: a.so}\n");
	cr_assert_eq(chdir(dir), 0);
	sbx__registry *reg = NULL;
	sbx_error err;
	cr_assert_eq(sbx__registry_load("registry.yaml", &reg, &err), SBX_OK, "%s", err.message);
	char want[1024];
	snprintf(want, sizeof(want), "%s/a.so", dir);
	cr_assert_str_eq(sbx__registry_find(reg, "a")->path, want);
	snprintf(want, sizeof(want), "%s/registry.yaml", dir);
	cr_assert_str_eq(reg->main_file, want);
	sbx__registry_free(reg);
}

Test(registry, fixture_registry_lists_every_fixture)
{
	sbx__registry *reg = NULL;
	sbx_error err;
	cr_assert_eq(sbx__registry_load(FIXTURE_REGISTRY, &reg, &err), SBX_OK, "%s", err.message);
	char *list = sbx__registry_alias_list(reg);
	cr_assert_str_eq(list, "entryfail, initfail, major, minor, missing, noalias, noentry, "
			       "notso, nullop, ok, ok2a, ok2b, small, twice, unlisted, "
			       "unresolved");
	sbx__free(list);
	cr_assert_str_eq(sbx__registry_find(reg, "ok2b")->path, FIXTURE_DIR "/sbx-fixture-ok2.so");
	sbx__registry_free(reg);
}

static int alloc_count, fail_at;

static void *failing_alloc(size_t size)
{
	return ++alloc_count == fail_at ? NULL : malloc(size);
}

static void *failing_realloc(void *ptr, size_t size)
{
	return ++alloc_count == fail_at ? NULL : realloc(ptr, size);
}

Test(registry, every_allocation_failure_is_nomem_without_leaks)
{
	const char *top = put("registry.yaml", "a: {path: a.so, defaults: {k: [1, 2]}}\n");
	dropin_dir();
	put("registry.d/b.yaml", "b: {path: b.so}\n");
	sbx_error err;
	for (fail_at = 1;; fail_at++) {
		sbx__registry *reg = NULL;
		alloc_count = 0;
		sbx_set_allocator(failing_alloc, failing_realloc, free);
		int rc = sbx__registry_load(top, &reg, &err);
		sbx_set_allocator(NULL, NULL, NULL);
		if (rc == SBX_OK) {
			cr_assert_gt(fail_at, 5, "a load allocates more than five times");
			cr_assert_eq(reg->n, 2);
			sbx__registry_free(reg);
			break;
		}
		cr_assert_eq(rc, SBX_E_NOMEM, "allocation %d: %s", fail_at, err.message);
		cr_assert_null(reg);
	}
}

Test(registry, duplicate_alias_in_one_file_names_both_lines)
{
	const char *top =
	    put("registry.yaml", "a: {path: a.so}\nb: {path: b.so}\na: {path: c.so}\n");
	char msg[2048];
	snprintf(msg, sizeof(msg), "%s:3: duplicate key 'a' (first at line 1)", top);
	expect_error(top, msg);
}

Test(registry, block_style_unknown_key_reports_its_line)
{
	const char *top =
	    put("registry.yaml", "# comment\nx:\n  path: x.so\ny:\n  path: y.so\n  bogus: 1\n");
	char msg[2048];
	snprintf(msg, sizeof(msg),
		 "%s:6: alias 'y': unknown key 'bogus' (valid keys: path, defaults, runner)", top);
	expect_error(top, msg);
}

Test(registry, a_registry_that_is_a_fifo_is_refused_without_blocking)
{
	char path[1024], msg[2048];
	snprintf(path, sizeof(path), "%s/fifo.yaml", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	snprintf(msg, sizeof(msg), "%s: the registry must be a regular file; this is a FIFO", path);
	expect_error(path, msg);
	/* A drop-in too. */
	const char *main = put("main.yaml", "a: {path: a.so}\n");
	dropin_dir();
	char drop[1024];
	snprintf(drop, sizeof(drop), "%s/registry.d/x.yaml", dir);
	cr_assert_eq(mkfifo(drop, 0600), 0);
	snprintf(msg, sizeof(msg), "%s: the registry must be a regular file; this is a FIFO", drop);
	expect_error(main, msg);
}

static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Every alias was compared with every alias before it: 2 * 10^10 comparisons for 200,000.
 * Expected now: a few seconds of CPU under the sanitizers; the bound is a loose sanity bound.
 * (duplicate_alias_between_dropins pins that a repeated alias is still found.) */
Test(registry, many_aliases_load_in_linear_time, .timeout = 300)
{
	const size_t n = 200000;
	char path[1024];
	snprintf(path, sizeof(path), "%s/big.yaml", dir);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "alias%zu: {path: p%zu.so}\n", i, i);
	fclose(f);
	sbx__registry *reg = NULL;
	sbx_error err = {0};
	double t0 = cpu_seconds();
	cr_assert_eq(sbx__registry_load(path, &reg, &err), SBX_OK, "%s", err.message);
	double took = cpu_seconds() - t0;
	cr_assert_eq(reg->n, n);
	const sbx__reg_entry *e = sbx__registry_find(reg, "alias199999");
	cr_assert_not_null(e);
	cr_assert_eq(e->line, 200000);
	sbx__registry_free(reg);
	cr_assert_lt(took, 40.0, "%zu aliases took %.2f s of CPU", n, took);
}

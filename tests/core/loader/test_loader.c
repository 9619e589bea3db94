/* The loader: every failure mode gives its exact status and message, naming the .so, and
 * leaves nothing loaded; working plugins load with host-owned descriptor copies. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "loader.h"

#include "leaks.h"

TestSuite(loader, .fini = sbx_test_check_leaks);

#define FX(name) FIXTURE_DIR "/sbx-fixture-" name ".so"

static int load(const char *path, const char *alias, sbx__module **mod, sbx_error *err)
{
	const char *expected[] = {alias};
	memset(err, 0, sizeof(*err));
	*mod = (sbx__module *)1; /* must be reset to NULL on failure */
	return sbx__module_load(path, sbx__host_api(), expected, 1, mod, err);
}

static void expect_fail(const char *path, const char *alias, int code, const char *message)
{
	sbx__module *mod;
	sbx_error err;
	int rc = load(path, alias, &mod, &err);
	cr_assert_eq(rc, code, "rc %s (%s)", sbx_status_name(rc), err.message);
	cr_assert_eq(err.code, code);
	cr_assert_str_eq(err.message, message);
	cr_assert_null(mod);
}

Test(loader, ok_loads_its_alias_with_a_host_copy)
{
	sbx__module *mod;
	sbx_error err;
	cr_assert_eq(load(FX("ok"), "ok", &mod, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(sbx__module_count(mod), 1);
	const sbx_plugin_desc *d = sbx__module_desc(mod, 0);
	cr_assert_str_eq(d->alias, "ok");
	cr_assert_eq(d->struct_size, sizeof(sbx_plugin_desc));
	cr_assert_eq(d->abi_major, SBX_ABI_MAJOR);
	cr_assert_eq(d->n_keys, 3);
	cr_assert_not_null(d->status);
	cr_assert_null(d->read_file);
	cr_assert_eq(sbx__module_find(mod, "ok"), d);
	cr_assert_null(sbx__module_find(mod, "nope"));
	cr_assert_null(sbx__module_desc(mod, 1));
	sbx__module_unload(mod);
}

static int collect(void *ctx, uint32_t stream, const void *data, size_t len)
{
	char *buf = ctx;
	size_t used = strlen(buf);
	cr_assert_lt(used + len + 3, 256);
	buf[used++] = stream == SBX_STREAM_STDOUT ? 'O' : 'E';
	memcpy(buf + used, data, len);
	buf[used + len] = '\0';
	return SBX_OK;
}

Test(loader, ok_fixture_runs_create_execute_destroy)
{
	sbx__module *mod;
	sbx_error err;
	cr_assert_eq(load(FX("ok"), "ok", &mod, &err), SBX_OK, "%s", err.message);
	const sbx_plugin_desc *d = sbx__module_desc(mod, 0);
	void *state = NULL;
	cr_assert_eq(d->init(NULL, &state, &err), SBX_OK, "%s", err.message);
	char id[64];
	cr_assert_eq(d->create(state, NULL, id, sizeof(id), &err), SBX_OK);
	cr_assert_str_eq(id, "ok-1");

	char out[256] = "";
	sbx_exec_request req = {.shell = "echo hi", .output = collect, .output_ctx = out};
	SBX_INIT_HEADER(req);
	sbx_exec_outcome res = {0};
	cr_assert_eq(d->execute(state, id, &req, &res, &err), SBX_OK);
	cr_assert_str_eq(out, "Oecho hiO\n");
	cr_assert_eq(res.exit_code, 0);

	out[0] = '\0';
	req.shell = "exit 3";
	cr_assert_eq(d->execute(state, id, &req, &res, &err), SBX_OK);
	cr_assert_eq(res.exit_code, 3);
	cr_assert_str_eq(out, "");

	req.shell = "stderr";
	cr_assert_eq(d->execute(state, id, &req, &res, &err), SBX_OK);
	cr_assert_str_eq(out, "Eerr\n");

	out[0] = '\0';
	cr_assert_eq(d->execute(state, "other", &req, &res, &err), SBX_E_NOT_FOUND);
	cr_assert_str_eq(err.message, "ok: execute: no sandbox 'other'");
	cr_assert_eq(d->destroy(state, id, &err), SBX_OK);
	d->fini(state);
	sbx__module_unload(mod);
}

Test(loader, one_file_registers_two_aliases)
{
	const char *expected[] = {"ok2a", "ok2b"};
	sbx__module *mod = NULL;
	sbx_error err;
	cr_assert_eq(sbx__module_load(FX("ok2"), sbx__host_api(), expected, 2, &mod, &err), SBX_OK,
		     "%s", err.message);
	cr_assert_eq(sbx__module_count(mod), 2);
	cr_assert_str_eq(sbx__module_desc(mod, 0)->alias, "ok2a");
	cr_assert_str_eq(sbx__module_desc(mod, 1)->alias, "ok2b");
	sbx__module_unload(mod);
}

Test(loader, second_alias_not_listed_fails_the_whole_file)
{
	expect_fail(FX("ok2"), "ok2a", SBX_E_INVAL,
		    FX("ok2") ": registered alias 'ok2b' that the registry does not list for this "
			      "file (listed: ok2a)");
}

Test(loader, missing_file)
{
	expect_fail(FX("missing"), "missing", SBX_E_IO, FX("missing") ": plugin file not found");
}

Test(loader, not_a_shared_object)
{
	expect_fail(FX("notso"), "notso", SBX_E_ABI,
		    FX("notso") ": not a shared object (no ELF header)");
}

Test(loader, directory_is_not_a_shared_object)
{
	expect_fail(FIXTURE_DIR, "x", SBX_E_ABI,
		    FIXTURE_DIR ": not a shared object (not a regular file)");
}

Test(loader, unresolved_symbol_quotes_dlerror)
{
	expect_fail(FX("unresolved"), "unresolved", SBX_E_ABI,
		    FX("unresolved") ": unresolved symbol: " FX(
			"unresolved") ": undefined symbol: sbx_fixture_undefined_function");
}

Test(loader, no_entry_symbol)
{
	expect_fail(FX("noentry"), "noentry", SBX_E_ABI,
		    FX("noentry") ": no entry symbol 'sbx_plugin_register': a plugin must export "
				  "it (build it with the sbx version script)");
}

Test(loader, wrong_major)
{
	expect_fail(FX("major"), "major", SBX_E_ABI,
		    FX("major") ": plugin ABI 2.5 does not match host ABI 1.5: rebuild the plugin "
				"against sbx 1.x headers");
}

Test(loader, future_minor)
{
	expect_fail(FX("minor"), "minor", SBX_E_ABI,
		    FX("minor") ": plugin ABI 1.10 is newer than host ABI 1.5: upgrade sbx or "
				"rebuild the plugin against sbx 1.5 headers");
}

Test(loader, descriptor_too_small)
{
	char msg[512];
	snprintf(msg, sizeof(msg),
		 "%s: descriptor is %zu bytes, smaller than the %zu bytes of an ABI 1.0 "
		 "descriptor: rebuild the plugin against sbx 1.x headers",
		 FX("small"), offsetof(sbx_plugin_desc, read_file), (size_t)SBX__DESC_SIZE_1_0);
	expect_fail(FX("small"), "small", SBX_E_ABI, msg);
}

Test(loader, required_op_null)
{
	expect_fail(FX("nullop"), "nullop", SBX_E_INVAL,
		    FX("nullop") ": alias 'nullop': required op 'execute' is NULL");
}

Test(loader, alias_registered_twice)
{
	expect_fail(FX("twice"), "twice", SBX_E_EXISTS,
		    FX("twice") ": alias 'twice' registered twice");
}

Test(loader, alias_not_listed)
{
	expect_fail(FX("unlisted"), "unlisted", SBX_E_INVAL,
		    FX("unlisted") ": registered alias 'stranger' that the registry does not "
				   "list for this file (listed: unlisted)");
}

Test(loader, entry_returns_failure)
{
	expect_fail(FX("entryfail"), "entryfail", SBX_E_BACKEND,
		    FX("entryfail") ": sbx_plugin_register failed with SBX_E_BACKEND (11)");
}

Test(loader, entry_registers_nothing)
{
	expect_fail(FX("noalias"), "noalias", SBX_E_ABI,
		    FX("noalias") ": sbx_plugin_register registered no alias");
}

Test(loader, init_failure_is_the_hosts_business)
{
	sbx__module *mod;
	sbx_error err;
	cr_assert_eq(load(FX("initfail"), "initfail", &mod, &err), SBX_OK, "%s", err.message);
	void *state = NULL;
	cr_assert_eq(sbx__module_desc(mod, 0)->init(NULL, &state, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "fixture: init: refused");
	sbx__module_unload(mod);
}

Test(loader, failed_load_does_not_disturb_a_loaded_one)
{
	sbx__module *ok, *bad;
	sbx_error err;
	cr_assert_eq(load(FX("ok"), "ok", &ok, &err), SBX_OK);
	cr_assert_eq(load(FX("major"), "major", &bad, &err), SBX_E_ABI);
	cr_assert_str_eq(sbx__module_desc(ok, 0)->alias, "ok");
	sbx__module_unload(ok);
}

Test(loader, library_dir_is_an_absolute_folder)
{
	const char *dir = sbx__library_dir();
	cr_assert_not_null(dir);
	cr_assert_eq(dir[0], '/');
	cr_assert_str_eq(dir, TEST_BIN_DIR);
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

Test(loader, every_allocation_failure_is_nomem_without_leaks)
{
	const char *expected[] = {"ok2a", "ok2b"};
	sbx_error err;
	for (fail_at = 1;; fail_at++) {
		sbx__module *mod = NULL;
		alloc_count = 0;
		sbx_set_allocator(failing_alloc, failing_realloc, free);
		int rc = sbx__module_load(FX("ok2"), sbx__host_api(), expected, 2, &mod, &err);
		sbx_set_allocator(NULL, NULL, NULL);
		if (rc == SBX_OK) {
			cr_assert_gt(fail_at, 3, "the load allocates at least three times");
			sbx__module_unload(mod);
			break;
		}
		cr_assert_eq(rc, SBX_E_NOMEM, "allocation %d: %s", fail_at, err.message);
		cr_assert_null(mod);
	}
}

/* Writes a copy of the file src to dst (a new file, mode 0755). */
static void copy_file(const char *src, const char *dst)
{
	FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
	cr_assert(in && out, "copy %s to %s", src, dst);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		cr_assert_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	cr_assert_eq(fclose(out), 0);
	cr_assert_eq(chmod(dst, 0755), 0);
}

/* A copy of the ok fixture in a new folder under TEST_TMP_DIR; its path goes into file. */
static void copy_ok(char *dir, size_t dcap, char *file, size_t fcap)
{
	snprintf(dir, dcap, "%s/trust-XXXXXX", TEST_TMP_DIR);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(file, fcap, "%s/sbx-copy.so", dir);
	copy_file(FX("ok"), file);
}

/* 1 when /proc/self/maps has a mapping of the file at path. */
static int mapped(const char *path)
{
	FILE *f = fopen("/proc/self/maps", "re");
	cr_assert_not_null(f);
	char line[4096];
	int found = 0;
	size_t n = strlen(path);
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');
		found = p && strncmp(p, path, n) == 0 && (p[n] == '\n' || p[n] == '\0');
	}
	fclose(f);
	return found;
}

Test(loader, a_loaded_plugin_stays_mapped_until_its_file_is_replaced)
{
	char dir[700], file[800], next[800];
	copy_ok(dir, sizeof(dir), file, sizeof(file));
	sbx__module *mod;
	sbx_error err;
	cr_assert_eq(load(file, "ok", &mod, &err), SBX_OK, "%s", err.message);
	sbx__module_unload(mod);
	/* The next host's load finds it mapped: no map, relocation and unmap per host. */
	cr_assert(mapped(file), "%s was unmapped with its last module", file);
	cr_assert_eq(load(file, "ok", &mod, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(sbx__module_desc(mod, 0)->alias, "ok");
	sbx__module_unload(mod);
	/* Another plugin renamed over it (an upgrade) is what the next load gets. */
	snprintf(next, sizeof(next), "%s/next.so", dir);
	copy_file(FX("ok2"), next);
	cr_assert_eq(rename(next, file), 0);
	const char *expected[] = {"ok2a", "ok2b"};
	cr_assert_eq(sbx__module_load(file, sbx__host_api(), expected, 2, &mod, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(sbx__module_count(mod), 2);
	cr_assert_str_eq(sbx__module_desc(mod, 0)->alias, "ok2a");
	sbx__module_unload(mod);
	/* Replaced while a host still holds the old mapping: a load then gets the old code (the
	 * dynamic loader knows the file by its name), which must not stay pinned as the new
	 * file; once the holders are gone, the new file is what loads. */
	sbx__module *held;
	cr_assert_eq(sbx__module_load(file, sbx__host_api(), expected, 2, &held, &err), SBX_OK,
		     "%s", err.message);
	copy_file(FX("ok"), next);
	cr_assert_eq(rename(next, file), 0);
	cr_assert_eq(sbx__module_load(file, sbx__host_api(), expected, 2, &mod, &err), SBX_OK, "%s",
		     err.message);
	sbx__module_unload(mod);
	sbx__module_unload(held);
	cr_assert_eq(load(file, "ok", &mod, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(sbx__module_desc(mod, 0)->alias, "ok");
	sbx__module_unload(mod);
	unlink(file);
	rmdir(dir);
}

Test(loader, a_plugin_that_fails_to_load_is_not_kept_mapped)
{
	char dir[700], file[800];
	copy_ok(dir, sizeof(dir), file, sizeof(file));
	copy_file(FX("entryfail"), file);
	sbx__module *mod;
	sbx_error err;
	cr_assert_neq(load(file, "ok", &mod, &err), SBX_OK);
	cr_assert_not(mapped(file), "%s stayed mapped after its load failed", file);
	unlink(file);
	rmdir(dir);
}

static void expect_refused(const char *file, const char *what, const char *why, unsigned mode,
			   unsigned uid)
{
	char want[2048];
	int n = snprintf(want, sizeof(want),
			 "%s: refusing to load: %s %s (mode %04o, owner uid %u); a plugin and the "
			 "folders above it must be writable only by root or the user running sbx",
			 file, what, why, mode, uid);
	cr_assert(n > 0 && (size_t)n < sizeof(want), "the expected message does not fit");
	expect_fail(file, "ok", SBX_E_ABI, want);
}

/* Code loaded into the host runs with its rights: a plugin anyone else can replace (the file
 * or a folder above it writable by others, or owned by another user) is refused, as PAM and
 * sudo refuse such modules and configs. */
Test(loader, plugin_writable_by_others_is_refused)
{
	char dir[600], file[700], what[700];
	copy_ok(dir, sizeof(dir), file, sizeof(file));
	unsigned me = (unsigned)geteuid();
	sbx__module *mod;
	sbx_error err;
	cr_assert_eq(load(file, "ok", &mod, &err), SBX_OK, "%s", err.message);
	sbx__module_unload(mod);
	cr_assert_eq(chmod(file, 0757), 0);
	expect_refused(file, "the file", "is writable by others", 0757, me);
	cr_assert_eq(chmod(file, 0775), 0);
	expect_refused(file, "the file", "is writable by others", 0775, me);
	cr_assert_eq(chmod(file, 0755), 0);
	cr_assert_eq(chmod(dir, 0770), 0);
	snprintf(what, sizeof(what), "the folder %s", dir);
	expect_refused(file, what, "is writable by others", 0770, me);
	/* Sticky, like /tmp: nobody else may rename or remove the entries that are ours. */
	cr_assert_eq(chmod(dir, 01777), 0);
	cr_assert_eq(load(file, "ok", &mod, &err), SBX_OK, "%s", err.message);
	sbx__module_unload(mod);
	cr_assert_eq(chmod(dir, 0700), 0);
	/* A symlink is followed to what is checked and loaded. */
	char link[800];
	snprintf(link, sizeof(link), "%s/link.so", dir);
	cr_assert_eq(symlink(file, link), 0);
	cr_assert_eq(load(link, "ok", &mod, &err), SBX_OK, "%s", err.message);
	sbx__module_unload(mod);
	if (me == 0) {
		cr_assert_eq(chown(file, 65534, 65534), 0);
		expect_refused(file, "the file", "belongs to another user", 0755, 65534);
		cr_assert_eq(chown(file, 0, 0), 0);
		cr_assert_eq(chown(dir, 65534, 65534), 0);
		expect_refused(file, what, "belongs to another user", 0700, 65534);
		cr_assert_eq(chown(dir, 0, 0), 0);
	}
	unlink(link);
	unlink(file);
	rmdir(dir);
}

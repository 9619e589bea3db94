/* The docker plugin driven directly: dlopen()s build/plugins/sbx-docker.so and stands in for
 * the host with a minimal sbx_host_api, against the engine of a docker_<engine> fixture
 * (DOCKER_HOST: Podman or Docker Engine). These pin the plugin's own behaviour (frames, timeouts, files,
 * lifecycle); tests/docker/docker.yaml runs the shared conformance suite through libsbx. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include <sbx/plugin.h>

struct sbx_config {
	json_t *obj;
};

static sbx_plugin_desc desc;
static int registered;
static void *state;
static struct sbx_config config;

static int reg_fn(sbx_registrar *reg, const sbx_plugin_desc *d)
{
	(void)reg;
	memcpy(&desc, d, d->struct_size < sizeof(desc) ? d->struct_size : sizeof(desc));
	registered++;
	return SBX_OK;
}

static void log_fn(int level, const char *alias, const char *fmt, ...)
{
	(void)level;
	(void)alias;
	(void)fmt;
}

static int set_error_fn(sbx_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

static json_t *cfg_get(const sbx_config *cfg, const char *key)
{
	return json_object_get(cfg->obj, key);
}

static int cfg_string(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	json_t *v = cfg_get(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	if (!json_is_string(v))
		return set_error_fn(err, SBX_E_CONFIG, "%s: not a string", key);
	*out = json_string_value(v);
	return SBX_OK;
}

static int cfg_int(const sbx_config *cfg, const char *key, int64_t *out, sbx_error *err)
{
	json_t *v = cfg_get(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	if (!json_is_integer(v))
		return set_error_fn(err, SBX_E_CONFIG, "%s: not an integer", key);
	*out = json_integer_value(v);
	return SBX_OK;
}

static int cfg_float(const sbx_config *cfg, const char *key, double *out, sbx_error *err)
{
	json_t *v = cfg_get(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	if (!json_is_number(v))
		return set_error_fn(err, SBX_E_CONFIG, "%s: not a number", key);
	*out = json_number_value(v);
	return SBX_OK;
}

static int cfg_bool(const sbx_config *cfg, const char *key, int *out, sbx_error *err)
{
	json_t *v = cfg_get(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	if (!json_is_boolean(v))
		return set_error_fn(err, SBX_E_CONFIG, "%s: not a bool", key);
	*out = json_is_true(v);
	return SBX_OK;
}

/* Strings a getter returns stay valid until fini (plugin.h): one slot per call. */
static char json_text[32][4096];
static unsigned json_next;
static int cfg_json(const sbx_config *cfg, const char *key, const char **out, sbx_error *err)
{
	(void)err;
	json_t *v = cfg_get(cfg, key);
	if (!v)
		return SBX_E_NOT_FOUND;
	char *t = json_dumps(v, JSON_ENCODE_ANY);
	char *slot = json_text[json_next++ % 32];
	snprintf(slot, sizeof(json_text[0]), "%s", t);
	free(t);
	*out = slot;
	return SBX_OK;
}

static const char *state_dir_fn(void)
{
	return "/tmp";
}

/* A failing allocator: once `fail_after` reaches 0, every allocation fails. */
static long fail_after = -1;
static void *test_alloc(size_t n)
{
	if (fail_after == 0)
		return NULL;
	if (fail_after > 0)
		fail_after--;
	return malloc(n);
}

static void *test_realloc(void *p, size_t n)
{
	if (fail_after == 0)
		return NULL;
	if (fail_after > 0)
		fail_after--;
	return realloc(p, n);
}

static sbx_host_api api = {
    .struct_size = sizeof(sbx_host_api),
    .abi_major = SBX_ABI_MAJOR,
    .abi_minor = SBX_ABI_MINOR,
    .register_sandbox = reg_fn,
    .log = log_fn,
    .alloc = test_alloc,
    .realloc = test_realloc,
    .free = free,
    .set_error = set_error_fn,
    .config_string = cfg_string,
    .config_int = cfg_int,
    .config_float = cfg_float,
    .config_bool = cfg_bool,
    .config_json = cfg_json,
    .state_dir = state_dir_fn,
};

static void *dl;
static const char *image(void)
{
	const char *i = getenv("SBX_CONFORMANCE_IMAGE");
	return i ? i : "localhost/sbx-busybox:latest";
}

static void teardown(void);

static void load(const char *extra_json)
{
	teardown(); /* a test with its own config replaces the suite's */
	registered = 0;
	dl = dlopen(SBX_DOCKER_SO, RTLD_NOW | RTLD_LOCAL);
	cr_assert(dl, "dlopen: %s", dlerror());
	sbx_plugin_register_fn reg = (sbx_plugin_register_fn)(uintptr_t)dlsym(dl, SBX_PLUGIN_ENTRY);
	cr_assert(reg);
	cr_assert_eq(reg(&api, NULL), SBX_OK);
	cr_assert_eq(registered, 1);
	char text[2048];
	snprintf(text, sizeof(text),
		 "{\"image\":\"%s\",\"ulimits\":[{\"name\":\"nofile\",\"soft\":1024,\"hard\":1024},"
		 "{\"name\":\"nproc\",\"soft\":1024,\"hard\":1024}]%s%s}",
		 image(), extra_json ? "," : "", extra_json ? extra_json : "");
	config.obj = json_loads(text, 0, NULL);
	cr_assert(config.obj, "bad test config %s", text);
	sbx_error err = {0};
	cr_assert_eq(desc.init(&config, &state, &err), SBX_OK, "init: %s", err.message);
}

static void setup(void)
{
	load(NULL);
}

/* Containers this test made and has not dropped: a failed assertion ends the test before its
 * drop(), so the suite's fini removes them. */
static char made[8][SBX_ID_MAX];

static void forget(const char *id)
{
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
		if (strcmp(made[i], id) == 0)
			made[i][0] = '\0';
}

static void teardown(void)
{
	fail_after = -1;
	for (size_t i = 0; state && i < sizeof(made) / sizeof(made[0]); i++)
		if (made[i][0]) {
			desc.destroy(state, made[i], NULL);
			made[i][0] = '\0';
		}
	if (state)
		desc.fini(state);
	state = NULL;
	json_decref(config.obj);
	config.obj = NULL;
}

/* Output collected per stream. */
typedef struct sink {
	char out[1 << 16];
	size_t out_len;
	char err[1 << 12];
	size_t err_len;
	uint64_t total;
} sink;

static int sink_fn(void *ctx, uint32_t stream, const void *data, size_t len)
{
	sink *s = ctx;
	char *buf = stream == SBX_STREAM_STDOUT ? s->out : s->err;
	size_t *used = stream == SBX_STREAM_STDOUT ? &s->out_len : &s->err_len;
	size_t cap = stream == SBX_STREAM_STDOUT ? sizeof(s->out) : sizeof(s->err);
	size_t take = cap - *used < len ? cap - *used : len;
	memcpy(buf + *used, data, take);
	*used += take;
	s->total += len;
	return 0;
}

static void make(const char *run_label, char *id, size_t cap)
{
	const char *tree = getenv("SBX_TEST_TREE");
	sbx_kv labels[] = {{"sbx.owner", "docker-test"},
			   {"sbx.run", run_label},
			   {"sbx.test-tree", tree ? tree : ""}};
	sbx_create_spec spec = {.labels = labels, .n_labels = 3, .data_source = "tests"};
	SBX_INIT_HEADER(spec);
	sbx_error err = {0};
	cr_assert_eq(desc.create(state, &spec, id, cap, &err), SBX_OK, "create: %s", err.message);
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
		if (!made[i][0]) {
			snprintf(made[i], sizeof(made[i]), "%s", id);
			return;
		}
	cr_assert_fail("more than %zu containers in one test", sizeof(made) / sizeof(made[0]));
}

static void drop(const char *id)
{
	sbx_error err = {0};
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "destroy: %s", err.message);
	forget(id);
}

static int run(const char *id, const char *shell, const char *const *argv, const char *in,
	       size_t in_len, uint64_t timeout_ms, sink *s, sbx_exec_outcome *out)
{
	sbx_exec_request req = {.shell = shell,
				.argv = argv,
				.has_stdin = in != NULL,
				.stdin_data = in,
				.stdin_len = in_len,
				.timeout_ms = timeout_ms,
				.output = sink_fn,
				.output_ctx = s};
	SBX_INIT_HEADER(req);
	memset(s, 0, sizeof(*s));
	memset(out, 0, sizeof(*out));
	SBX_INIT_HEADER(*out);
	sbx_error err = {0};
	int rc = desc.execute(state, id, &req, out, &err);
	cr_assert_eq(rc, SBX_OK, "execute: %s", err.message);
	return rc;
}

TestSuite(docker_plugin, .init = setup, .fini = teardown, .timeout = 120);

Test(docker_plugin, exec_splits_streams_and_reports_exit_code)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	make("t-exit", id, sizeof(id));
	run(id, "printf 'out\\n'; printf 'err\\n' >&2; exit 3", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(out.exit_code, 3);
	cr_assert_eq(out.timed_out, 0);
	cr_assert_eq(s.out_len, 4);
	cr_assert_arr_eq(s.out, "out\n", 4);
	cr_assert_eq(s.err_len, 4);
	cr_assert_arr_eq(s.err, "err\n", 4);
	drop(id);
}

Test(docker_plugin, argv_reaches_the_command_unspliced)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	const char *argv[] = {"printf", "%s|%s", "a b; $(echo x) `id`", "'\"", NULL};
	make("t-argv", id, sizeof(id));
	run(id, NULL, argv, NULL, 0, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0);
	const char want[] = "a b; $(echo x) `id`|'\"";
	cr_assert_eq(s.out_len, sizeof(want) - 1);
	cr_assert_arr_eq(s.out, want, sizeof(want) - 1);
	drop(id);
}

Test(docker_plugin, stdin_bytes_reach_the_command_and_default_is_empty)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	const char in[] = "hello\0world\xff\n";
	make("t-stdin", id, sizeof(id));
	run(id, "cat", NULL, in, sizeof(in) - 1, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0);
	cr_assert_eq(s.out_len, sizeof(in) - 1);
	cr_assert_arr_eq(s.out, in, sizeof(in) - 1);
	run(id, "cat; echo done", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 5);
	cr_assert_arr_eq(s.out, "done\n", 5);
	/* Given but empty: end of file at once, not /dev/null's stand-in. */
	run(id, "wc -c; ls -l /proc/self/fd/0 | grep -c /dev/null", NULL, "", 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 4, "%.*s", (int)s.out_len, s.out);
	cr_assert_arr_eq(s.out, "0\n0\n", 4);
	/* Nothing is left in the container's file system for stdin. */
	run(id, "ls -a /tmp | grep -c sbx-stdin", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(out.exit_code, 1);
	drop(id);
}

/* stdin and output flow at once: a command that writes more than the stream's buffers before
 * it reads would deadlock a sender that writes all stdin first. */
Test(docker_plugin, large_stdin_flows_while_output_is_read)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	size_t n = 3 << 20;
	char *in = malloc(n);
	cr_assert(in);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)(i * 7 + (i >> 11));
	make("t-stdin-big", id, sizeof(id));
	run(id, "head -c 2000000 /dev/zero; wc -c >&2", NULL, in, n, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0);
	cr_assert_eq(s.total, 2000000 + 8);
	cr_assert_eq(s.err_len, 8, "%.*s", (int)s.err_len, s.err);
	cr_assert_arr_eq(s.err, "3145728\n", 8);
	/* Every byte arrives, in order. */
	run(id, "cat", NULL, in, n, 0, &s, &out);
	cr_assert_eq(s.total, n);
	cr_assert_arr_eq(s.out, in, sizeof(s.out));
	free(in);
	drop(id);
}

/* A command that ends without reading its stdin returns at once with its own exit code; one
 * that never reads it still times out. */
Test(docker_plugin, unread_stdin_neither_blocks_nor_outlives_the_command)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	size_t n = 8 << 20;
	char *in = calloc(1, n);
	cr_assert(in);
	make("t-stdin-unread", id, sizeof(id));
	run(id, "exit 4", NULL, in, n, 60000, &s, &out);
	cr_assert_eq(out.timed_out, 0);
	cr_assert_eq(out.exit_code, 4);
	run(id, "head -c 5 >/dev/null; echo read5", NULL, in, n, 60000, &s, &out);
	cr_assert_eq(out.timed_out, 0);
	cr_assert_eq(out.exit_code, 0);
	cr_assert_eq(s.out_len, 6);
	cr_assert_arr_eq(s.out, "read5\n", 6);
	run(id, "sleep 600", NULL, in, n, 1000, &s, &out);
	cr_assert_eq(out.timed_out, 1);
	run(id, "ps -o args | grep -c '^sleep 600'", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 2, "%.*s", (int)s.out_len, s.out);
	cr_assert_arr_eq(s.out, "0\n", 2);
	free(in);
	drop(id);
}

Test(docker_plugin, large_output_survives_frames_spanning_reads)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	make("t-large", id, sizeof(id));
	run(id, "head -c 3000000 /dev/zero; echo tail >&2", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0);
	cr_assert_eq(s.total, 3000005);
	cr_assert_eq(s.err_len, 5);
	cr_assert_arr_eq(s.err, "tail\n", 5);
	drop(id);
}

Test(docker_plugin, timeout_kills_the_whole_tree_inside_the_container)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	make("t-timeout", id, sizeof(id));
	/* A grandchild in its own session, a background child and a foreground sleep. */
	run(id, "echo started; setsid sleep 300 & sleep 200 & sh -c 'sleep 100'", NULL, NULL, 0,
	    1000, &s, &out);
	cr_assert_eq(out.timed_out, 1);
	cr_assert_eq(out.exit_code, -1);
	cr_assert_eq(out.signal, 9);
	cr_assert_eq(s.out_len, 8);
	cr_assert_arr_eq(s.out, "started\n", 8);
	/* Only the keep-alive shell, its sleep 3600 and ps itself remain. */
	run(id, "ps -o pid,args", NULL, NULL, 0, 0, &s, &out);
	s.out[s.out_len < sizeof(s.out) ? s.out_len : sizeof(s.out) - 1] = '\0';
	cr_assert(strstr(s.out, "sleep 3600"), "ps shows no keep-alive: %s", s.out);
	cr_assert_null(strstr(s.out, "sleep 300"), "survivor: %s", s.out);
	cr_assert_null(strstr(s.out, "sleep 200"), "survivor: %s", s.out);
	cr_assert_null(strstr(s.out, "sleep 100"), "survivor: %s", s.out);
	cr_assert_null(strstr(s.out, "started"), "survivor: %s", s.out);
	run(id, "ps -o stat,args | grep -c '^Z'", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 2);
	cr_assert_arr_eq(s.out, "0\n", 2);
	drop(id);
}

Test(docker_plugin, background_child_does_not_hold_the_call)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	make("t-bg", id, sizeof(id));
	run(id, "sleep 60 & echo quick", NULL, NULL, 0, 30000, &s, &out);
	cr_assert_eq(out.timed_out, 0);
	cr_assert_eq(out.exit_code, 0);
	cr_assert_eq(s.out_len, 6);
	cr_assert_arr_eq(s.out, "quick\n", 6);
	drop(id);
}

Test(docker_plugin, files_round_trip_through_the_archive_endpoint)
{
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	make("t-files", id, sizeof(id));
	const char data[] = "line1\n\0binary\xfe";
	cr_assert_eq(
	    desc.write_file(state, id, "sub/dir/f.bin", data, sizeof(data) - 1, 0600, &err), SBX_OK,
	    "write: %s", err.message);
	void *back = NULL;
	size_t len = 0;
	cr_assert_eq(desc.read_file(state, id, "/work/sub/dir/f.bin", &back, &len, &err), SBX_OK,
		     "read: %s", err.message);
	cr_assert_eq(len, sizeof(data) - 1);
	cr_assert_arr_eq(back, data, len);
	free(back);

	sbx_file_info fi;
	cr_assert_eq(desc.stat_file(state, id, "sub/dir/f.bin", &fi, &err), SBX_OK, "stat: %s",
		     err.message);
	cr_assert_eq(fi.kind, SBX_FILE_REGULAR);
	cr_assert_eq(fi.size, sizeof(data) - 1);
	cr_assert_eq(fi.mode, 0600);
	cr_assert_str_eq(fi.name, "f.bin");
	cr_assert_eq(desc.stat_file(state, id, "sub", &fi, &err), SBX_OK);
	cr_assert_eq(fi.kind, SBX_FILE_DIR);

	cr_assert_eq(desc.make_dir(state, id, "sub/dir/empty", 0, &err), SBX_OK, "mkdir: %s",
		     err.message);
	cr_assert_eq(desc.make_dir(state, id, "sub/dir/empty", 0, &err), SBX_E_EXISTS);
	cr_assert_eq(desc.make_dir(state, id, "a/b/c", 0, &err), SBX_E_NO_FILE);
	cr_assert_eq(desc.make_dir(state, id, "a/b/c", 1, &err), SBX_OK);

	sbx_file_info *list = NULL;
	size_t n = 0;
	cr_assert_eq(desc.list_dir(state, id, "sub/dir", &list, &n, &err), SBX_OK, "list: %s",
		     err.message);
	cr_assert_eq(n, 2);
	int saw_file = 0, saw_dir = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(list[i].name, "f.bin") == 0 && list[i].kind == SBX_FILE_REGULAR &&
		    list[i].size == sizeof(data) - 1)
			saw_file = 1;
		if (strcmp(list[i].name, "empty") == 0 && list[i].kind == SBX_FILE_DIR)
			saw_dir = 1;
	}
	free(list);
	cr_assert(saw_file && saw_dir);

	cr_assert_eq(desc.remove_path(state, id, "sub", 0, &err), SBX_E_IO);
	cr_assert_eq(desc.remove_path(state, id, "sub", 1, &err), SBX_OK, "remove: %s",
		     err.message);
	cr_assert_eq(desc.stat_file(state, id, "sub", &fi, &err), SBX_E_NO_FILE);
	cr_assert_eq(desc.read_file(state, id, "missing.txt", &back, &len, &err), SBX_E_NO_FILE);
	cr_assert(strstr(err.message, "/work/missing.txt"), "%s", err.message);
	cr_assert_eq(desc.read_file(state, id, "../etc/passwd", &back, &len, &err), SBX_E_PATH);
	cr_assert_eq(desc.read_file(state, id, "/work", &back, &len, &err), SBX_E_INVAL);
	drop(id);
}

Test(docker_plugin, pause_resume_status_and_destroy_of_a_paused_container)
{
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	uint32_t st = 0;
	sink s;
	sbx_exec_outcome out;
	make("t-pause", id, sizeof(id));
	cr_assert_eq(desc.status(state, id, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_RUNNING);
	cr_assert_eq(desc.pause(state, id, &err), SBX_OK, "pause: %s", err.message);
	cr_assert_eq(desc.pause(state, id, &err), SBX_OK, "second pause: %s", err.message);
	cr_assert_eq(desc.status(state, id, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_PAUSED);
	sbx_exec_request preq = {.shell = "true", .output = sink_fn, .output_ctx = &s};
	SBX_INIT_HEADER(preq);
	cr_assert_eq(desc.execute(state, id, &preq, &out, &err), SBX_E_PAUSED, "%s", err.message);
	cr_assert_eq(desc.resume(state, id, &err), SBX_OK, "resume: %s", err.message);
	cr_assert_eq(desc.resume(state, id, &err), SBX_OK, "second resume: %s", err.message);
	run(id, "echo back", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 5);
	cr_assert_eq(desc.pause(state, id, &err), SBX_OK);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "destroy paused: %s", err.message);
	cr_assert_eq(desc.status(state, id, &st, &err), SBX_OK);
	cr_assert_eq(st, SBX_STATE_GONE);
	cr_assert_eq(desc.destroy(state, id, &err), SBX_OK, "second destroy: %s", err.message);
	sbx_exec_request req = {.shell = "true", .output = sink_fn, .output_ctx = &s};
	SBX_INIT_HEADER(req);
	cr_assert_eq(desc.execute(state, id, &req, &out, &err), SBX_E_NOT_FOUND);
	cr_assert_eq(desc.destroy(state, "../containers", &err), SBX_E_BAD_ID);
	cr_assert_eq(desc.execute(state, "no-such-sandbox", &req, &out, &err), SBX_E_NOT_FOUND);
}

static int count_fn(void *ctx, const char *backend_id)
{
	(void)backend_id;
	(*(int *)ctx)++;
	return 0;
}

Test(docker_plugin, labels_env_and_cwd_reach_the_container)
{
	char id[SBX_ID_MAX], run_label[40];
	sbx_error err = {0};
	sink s;
	sbx_exec_outcome out;
	snprintf(run_label, sizeof(run_label), "t-labels-%d", (int)getpid());
	make(run_label, id, sizeof(id));
	int found = 0;
	cr_assert_eq(desc.list_by_label(state, "sbx.run", run_label, count_fn, &found, &err),
		     SBX_OK, "list: %s", err.message);
	cr_assert_eq(found, 1);
	sbx_kv env[] = {{"GREETING", "hi there"}};
	sbx_exec_request req = {.shell = "echo \"$GREETING\"; pwd",
				.env = env,
				.n_env = 1,
				.cwd = "sub",
				.output = sink_fn,
				.output_ctx = &s};
	SBX_INIT_HEADER(req);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(desc.make_dir(state, id, "sub", 0, &err), SBX_OK);
	cr_assert_eq(desc.execute(state, id, &req, &out, &err), SBX_OK, "%s", err.message);
	const char want[] = "hi there\n/work/sub\n";
	cr_assert_eq(s.out_len, sizeof(want) - 1, "%.*s", (int)s.out_len, s.out);
	cr_assert_arr_eq(s.out, want, sizeof(want) - 1);
	run(id, "id -u", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 2);
	cr_assert_arr_eq(s.out, "0\n", 2);
	sbx_exec_request ureq = {
	    .shell = "id -u", .user = "nobody", .output = sink_fn, .output_ctx = &s};
	SBX_INIT_HEADER(ureq);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(desc.execute(state, id, &ureq, &out, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(s.out_len, 6, "%.*s", (int)s.out_len, s.out);
	cr_assert_arr_eq(s.out, "65534\n", 6);
	drop(id);
	found = 0;
	cr_assert_eq(desc.list_by_label(state, "sbx.run", run_label, count_fn, &found, &err),
		     SBX_OK);
	cr_assert_eq(found, 0);
}

Test(docker_plugin, missing_image_is_named_and_leaves_nothing)
{
	char id[SBX_ID_MAX], run_label[40];
	sbx_error err = {0};
	snprintf(run_label, sizeof(run_label), "t-missing-%d", (int)getpid());
	sbx_kv labels[] = {{"sbx.run", run_label}};
	sbx_create_spec spec = {
	    .image = "localhost/sbx-no-such-image:1", .labels = labels, .n_labels = 1};
	SBX_INIT_HEADER(spec);
	cr_assert_eq(desc.create(state, &spec, id, sizeof(id), &err), SBX_E_CONFIG);
	cr_assert(strstr(err.message, "image 'localhost/sbx-no-such-image:1' not found"), "%s",
		  err.message);
	int found = 0;
	cr_assert_eq(desc.list_by_label(state, "sbx.run", run_label, count_fn, &found, &err),
		     SBX_OK);
	cr_assert_eq(found, 0);
}

Test(docker_plugin, info_names_the_negotiated_api_version)
{
	char *json = NULL;
	sbx_error err = {0};
	cr_assert_eq(desc.info(state, &json, &err), SBX_OK);
	json_t *j = json_loads(json, 0, NULL);
	cr_assert(j);
	cr_assert(json_is_true(json_object_get(j, "reachable")), "%s", json);
	cr_assert_str_eq(json_string_value(json_object_get(j, "api_version")), "1.41");
	/* The engine under test, as its /_ping Server header names it. */
	const char *engine = json_string_value(json_object_get(j, "engine"));
	const char *want = getenv("SBX_TEST_ENGINE");
	cr_assert(engine, "%s", json);
	if (want && strcmp(want, "dockerd") == 0)
		cr_assert(strncmp(engine, "Docker/20.10.", 13) == 0, "%s", engine);
	else if (want && strcmp(want, "podman") == 0)
		cr_assert(strncmp(engine, "Libpod/", 7) == 0, "%s", engine);
	json_decref(j);
	free(json);
}

Test(docker_plugin, unreachable_engine_is_reported_as_such)
{
	load("\"host\":\"unix:///tmp/sbx-no-such-engine.sock\"");
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	sbx_create_spec spec = {0};
	SBX_INIT_HEADER(spec);
	cr_assert_eq(desc.create(state, &spec, id, sizeof(id), &err), SBX_E_UNREACHABLE);
	cr_assert(strstr(err.message, "/tmp/sbx-no-such-engine.sock"), "%s", err.message);
}

Test(docker_plugin, bad_config_values_are_refused)
{
	teardown();
	const char *bad[] = {"{\"network\":\"host\"}", "{\"pull\":\"sometimes\"}",
			     "{\"host\":\"ftp://x\"}", "{\"ulimits\":[{\"name\":\"nofile\"}]}",
			     "{\"working_dir\":\"rel\"}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		config.obj = json_loads(bad[i], 0, NULL);
		sbx_error err = {0};
		void *st = NULL;
		cr_assert_eq(desc.init(&config, &st, &err), SBX_E_CONFIG, "%s", bad[i]);
		json_decref(config.obj);
	}
	config.obj = NULL;
}

typedef struct worker {
	const char *id;
	int n;
	int ok;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	sink *s = malloc(sizeof(*s));
	for (int i = 0; s && i < 5; i++) {
		char cmd[64], want[32];
		snprintf(cmd, sizeof(cmd), "echo %d-%d", w->n, i);
		int wl = snprintf(want, sizeof(want), "%d-%d\n", w->n, i);
		sbx_exec_request req = {.shell = cmd, .output = sink_fn, .output_ctx = s};
		SBX_INIT_HEADER(req);
		sbx_exec_outcome out = {0};
		SBX_INIT_HEADER(out);
		memset(s, 0, sizeof(*s));
		sbx_error err = {0};
		if (desc.execute(state, w->id, &req, &out, &err) == SBX_OK && out.exit_code == 0 &&
		    s->out_len == (size_t)wl && memcmp(s->out, want, (size_t)wl) == 0)
			w->ok++;
	}
	free(s);
	return NULL;
}

Test(docker_plugin, execs_from_many_threads_share_one_state)
{
	char id[SBX_ID_MAX];
	make("t-threads", id, sizeof(id));
	pthread_t t[4];
	worker w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (worker){.id = id, .n = i};
		cr_assert_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		cr_expect_eq(w[i].ok, 5, "thread %d: %d of 5 execs right", i, w[i].ok);
	}
	drop(id);
}

static int refusing_sink(void *ctx, uint32_t stream, const void *data, size_t len)
{
	(void)stream;
	(void)data;
	*(size_t *)ctx += len;
	return *(size_t *)ctx > 100000 ? SBX_E_LIMIT : 0;
}

Test(docker_plugin, a_refusing_sink_stops_the_command_and_returns_its_status)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out = {0};
	SBX_INIT_HEADER(out);
	size_t got = 0;
	sbx_error err = {0};
	make("t-sink", id, sizeof(id));
	sbx_exec_request req = {
	    .shell = "yes sbx-yes-marker", .output = refusing_sink, .output_ctx = &got};
	SBX_INIT_HEADER(req);
	cr_assert_eq(desc.execute(state, id, &req, &out, &err), SBX_E_LIMIT, "%s", err.message);
	run(id, "ps -o args", NULL, NULL, 0, 0, &s, &out);
	s.out[s.out_len < sizeof(s.out) ? s.out_len : sizeof(s.out) - 1] = '\0';
	cr_assert(strstr(s.out, "sleep 3600"), "%s", s.out);
	cr_assert_null(strstr(s.out, "yes sbx-yes-marker"), "survivor: %s", s.out);
	drop(id);
}

Test(docker_plugin, read_only_network_none_and_dropped_caps_apply)
{
	load("\"read_only\":true,\"network\":\"none\",\"cap_drop\":[\"NET_RAW\"],"
	     "\"pids_limit\":64,\"memory_mb\":256,\"cpu\":0.5");
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	make("t-limits", id, sizeof(id));
	run(id, "touch /work/x", NULL, NULL, 0, 0, &s, &out);
	cr_assert_neq(out.exit_code, 0, "the root fs is writable");
	/* stdin needs no writable file system (Docker refuses archive uploads to a read-only
	 * root, even below a tmpfs). */
	run(id, "cat", NULL, "in", 2, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0, "%.*s", (int)s.err_len, s.err);
	cr_assert_eq(s.out_len, 2);
	cr_assert_arr_eq(s.out, "in", 2);
	run(id, "cat >/tmp/x && cat /tmp/x", NULL, "in", 2, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0, "%.*s", (int)s.err_len, s.err);
	cr_assert_eq(s.out_len, 2);
	cr_assert_arr_eq(s.out, "in", 2);
	/* Files go to the tmpfs on either engine (Docker refuses archive uploads to a read-only
	 * root even below a tmpfs; the plugin then writes through an exec), and not to the
	 * read-only root. */
	sbx_error err = {0};
	cr_assert_eq(desc.write_file(state, id, "/tmp/sub/w", "data", 4, 0640, &err), SBX_OK, "%s",
		     err.message);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(desc.read_file(state, id, "/tmp/sub/w", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(len, 4);
	cr_assert_arr_eq(data, "data", 4);
	free(data);
	sbx_file_info fi;
	cr_assert_eq(desc.stat_file(state, id, "/tmp/sub/w", &fi, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(fi.mode & 07777, 0640, "%o", fi.mode);
	cr_assert_eq(fi.size, 4);
	cr_assert_eq(desc.write_file(state, id, "/work/x", "data", 4, 0, &err), SBX_E_IO, "%s",
		     err.message);
	cr_assert(strstr(err.message, "/work/x"), "%s", err.message);
	/* Only the loopback interface: lines of /proc/net/dev after its two header lines. */
	run(id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 3, "%.*s", (int)s.out_len, s.out);
	cr_assert_arr_eq(s.out, "lo\n", 3);
	/* NET_RAW is capability 13: bit 13 of CapBnd (hex) must be clear. */
	run(id,
	    "v=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status); echo $(( (0x$v >> 13) & 1 "
	    "))",
	    NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(s.out_len, 2, "%.*s", (int)s.out_len, s.out);
	cr_assert_arr_eq(s.out, "0\n", 2);
	drop(id);
}

Test(docker_plugin, pull_missing_reports_a_failed_pull_by_name)
{
	load("\"pull\":\"missing\"");
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	sbx_create_spec spec = {.image = "localhost:1/sbx-no-such-image:1"};
	SBX_INIT_HEADER(spec);
	cr_assert_eq(desc.create(state, &spec, id, sizeof(id), &err), SBX_E_BACKEND, "%s",
		     err.message);
	cr_assert(strstr(err.message, "pulling image 'localhost:1/sbx-no-such-image:1' failed"),
		  "%s", err.message);
}

Test(docker_plugin, allocation_failures_in_exec_and_files_are_nomem_not_crashes)
{
	char id[SBX_ID_MAX];
	sink s;
	make("t-nomem", id, sizeof(id));
	int saw_nomem = 0, saw_ok = 0;
	for (long k = 0; k < 40 && !saw_ok; k++) {
		sbx_exec_request req = {.shell = "echo x",
					.has_stdin = 1,
					.stdin_data = "in",
					.stdin_len = 2,
					.output = sink_fn,
					.output_ctx = &s};
		SBX_INIT_HEADER(req);
		sbx_exec_outcome out = {0};
		SBX_INIT_HEADER(out);
		sbx_error err = {0};
		memset(&s, 0, sizeof(s));
		fail_after = k;
		int rc = desc.execute(state, id, &req, &out, &err);
		fail_after = -1;
		cr_assert(rc == SBX_OK || rc == SBX_E_NOMEM, "k=%ld: %d %s", k, rc, err.message);
		saw_nomem |= rc == SBX_E_NOMEM;
		saw_ok |= rc == SBX_OK;
	}
	cr_assert(saw_nomem && saw_ok);
	saw_ok = 0;
	for (long k = 0; k < 40 && !saw_ok; k++) {
		void *data = NULL;
		size_t len = 0;
		sbx_error err = {0};
		fail_after = k;
		int rc = desc.read_file(state, id, "/etc/passwd", &data, &len, &err);
		fail_after = -1;
		cr_assert(rc == SBX_OK || rc == SBX_E_NOMEM, "k=%ld: %d %s", k, rc, err.message);
		saw_ok |= rc == SBX_OK;
		free(data);
	}
	cr_assert(saw_ok);
	drop(id);
}

Test(docker_plugin, symlinks_out_of_the_work_dir_and_missing_cwd_are_refused)
{
	char id[SBX_ID_MAX];
	sink s;
	sbx_exec_outcome out;
	sbx_error err = {0};
	make("t-links", id, sizeof(id));
	run(id, "mkdir d && ln -s / rootlink && ln -s ../.. uplink && ln -s d inlink && echo ok",
	    NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(desc.read_file(state, id, "rootlink/etc/passwd", &data, &len, &err),
		     SBX_E_PATH);
	cr_assert(strstr(err.message, "rootlink/etc/passwd"), "%s", err.message);
	cr_assert_eq(desc.write_file(state, id, "uplink/x", "x", 1, 0, &err), SBX_E_PATH);
	cr_assert_eq(desc.write_file(state, id, "inlink/x", "x", 1, 0, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(desc.read_file(state, id, "d/x", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(len, 1);
	free(data);
	sbx_file_info fi;
	cr_assert_eq(desc.stat_file(state, id, "rootlink", &fi, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(fi.kind, SBX_FILE_SYMLINK);
	cr_assert_str_eq(fi.name, "rootlink");
	cr_assert_eq(desc.remove_path(state, id, "rootlink", 0, &err), SBX_OK, "%s", err.message);
	run(id, "ls /etc/passwd", NULL, NULL, 0, 0, &s, &out);
	cr_assert_eq(out.exit_code, 0);

	sbx_exec_request req = {
	    .shell = "pwd", .cwd = "no/such", .output = sink_fn, .output_ctx = &s};
	SBX_INIT_HEADER(req);
	cr_assert_eq(desc.execute(state, id, &req, &out, &err), SBX_E_NO_FILE, "%s", err.message);
	req.cwd = "d/x";
	cr_assert_eq(desc.execute(state, id, &req, &out, &err), SBX_E_INVAL, "%s", err.message);
	req.cwd = "uplink";
	cr_assert_eq(desc.execute(state, id, &req, &out, &err), SBX_E_PATH, "%s", err.message);
	drop(id);
}

/* Not part of the suite: run alone with SBX_DOCKER_TEST_FAIL=1 by the
 * docker_*_failed_case_leaves_nothing test, it makes a container and fails before its drop();
 * the suite's fini must remove the container all the same. */
Test(docker_plugin, deliberate_failure)
{
	if (!getenv("SBX_DOCKER_TEST_FAIL"))
		cr_skip_test("only with SBX_DOCKER_TEST_FAIL=1");
	char id[SBX_ID_MAX];
	make("t-deliberate", id, sizeof(id));
	cr_assert_fail("deliberate failure after creating %s", id);
}

/* The k8s plugin against the stand-in apiserver, loaded with dlopen behind a minimal host
 * services table (so these tests need nothing of libsbx). The stand-in's directory comes from
 * $K8S_STANDIN_DIR (a CTest fixture starts it); its kubeconfig, CA and control endpoints are
 * there. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sbx/plugin.h>

#include "minihost.h"

#ifndef K8S_PLUGIN_PATH
#error K8S_PLUGIN_PATH must name build/plugins/sbx-k8s.so
#endif

static sbx_plugin_desc desc;

static char standin[1024];
static char kubeconfig[1100];

static void setup(void)
{
	const char *d = getenv("K8S_STANDIN_DIR");
	cr_assert(d, "K8S_STANDIN_DIR is not set");
	snprintf(standin, sizeof(standin), "%s", d);
	snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", d);
	char why[512];
	cr_assert_eq(minihost_load(K8S_PLUGIN_PATH, &desc, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(desc.alias, "k8s");
}

static void teardown(void)
{
	/* The plugin stays loaded: libcurl and OpenSSL keep process-wide state. */
}

TestSuite(k8s, .init = setup, .fini = teardown, .timeout = 120);

static void *start(sbx_config *cfg)
{
	cfg->keys[cfg->n] = "kubeconfig";
	cfg->vals[cfg->n++] = kubeconfig;
	void *st = NULL;
	sbx_error err = {0};
	cr_assert_eq(desc.init(cfg, &st, &err), SBX_OK, "init: %s", err.message);
	return st;
}

static int create(void *st, const char *image, char *id, sbx_error *err)
{
	sbx_kv labels[] = {{"sbx.owner", "test:run/1"}, {"sbx.run", "plugin-test"}};
	sbx_create_spec spec = {.image = image, .labels = labels, .n_labels = 2};
	SBX_INIT_HEADER(spec);
	return desc.create(st, &spec, id, 64, err);
}

typedef struct capture {
	char out[1 << 16];
	size_t out_len;
	size_t out_total;
	char err[4096];
	size_t err_len;
} capture;

static int on_output(void *ctx, uint32_t stream, const void *data, size_t len)
{
	capture *c = ctx;
	if (stream == SBX_STREAM_STDOUT) {
		size_t n =
		    len < sizeof(c->out) - 1 - c->out_len ? len : sizeof(c->out) - 1 - c->out_len;
		memcpy(c->out + c->out_len, data, n);
		c->out_len += n;
		c->out_total += len;
	} else {
		size_t n =
		    len < sizeof(c->err) - 1 - c->err_len ? len : sizeof(c->err) - 1 - c->err_len;
		memcpy(c->err + c->err_len, data, n);
		c->err_len += n;
	}
	return SBX_OK;
}

static int run(void *st, const char *id, const char *shell, const void *in, size_t in_len,
	       uint64_t timeout_ms, capture *c, sbx_exec_outcome *out, sbx_error *err)
{
	memset(c, 0, sizeof(*c));
	memset(out, 0, sizeof(*out));
	SBX_INIT_HEADER(*out);
	sbx_exec_request req = {.shell = shell,
				.has_stdin = in != NULL,
				.stdin_data = in,
				.stdin_len = in_len,
				.timeout_ms = timeout_ms,
				.output = on_output,
				.output_ctx = c};
	SBX_INIT_HEADER(req);
	return desc.execute(st, id, &req, out, err);
}

/* GET or POST on the stand-in's control endpoints. */
static json_t *control(const char *what, const char *post)
{
	char url[256], port[16] = "", ca[1100];
	snprintf(ca, sizeof(ca), "%s/port", standin);
	FILE *f = fopen(ca, "r");
	cr_assert(f);
	cr_assert(fgets(port, sizeof(port), f));
	fclose(f);
	snprintf(ca, sizeof(ca), "%s/ca.crt", standin);
	snprintf(url, sizeof(url), "https://127.0.0.1:%s/_standin/%s", port, what);
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, mem);
	if (post)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
	cr_assert_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
	fclose(mem);
	json_t *j = json_loads(buf, 0, NULL);
	free(buf);
	cr_assert(j);
	return j;
}

static long stat_int(const char *key)
{
	json_t *j = control("stats", NULL);
	long v = (long)json_integer_value(json_object_get(j, key));
	json_decref(j);
	return v;
}

Test(k8s, exec_reports_stdout_stderr_and_exit_code)
{
	sbx_config cfg = {0};
	void *st = start(&cfg);
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(strncmp(id, "sbx-", 4), 0);
	capture c;
	sbx_exec_outcome out;
	cr_assert_eq(run(st, id, "echo out; echo err >&2; exit 3", NULL, 0, 0, &c, &out, &err),
		     SBX_OK, "%s", err.message);
	cr_assert_eq(out.exit_code, 3);
	cr_assert_eq(out.timed_out, 0);
	cr_assert_str_eq(c.out, "out\n");
	cr_assert_str_eq(c.err, "err\n");
	cr_assert_eq(run(st, id, "exit 255", NULL, 0, 0, &c, &out, &err), SBX_OK);
	cr_assert_eq(out.exit_code, 255);
	cr_assert_eq(run(st, id, "nosuchcommand-sbx", NULL, 0, 0, &c, &out, &err), SBX_OK);
	cr_assert_eq(out.exit_code, 127);
	cr_assert_eq(run(st, id, "kill -9 $$", NULL, 0, 0, &c, &out, &err), SBX_OK);
	cr_assert_eq(out.exit_code, -1);
	cr_assert_eq(out.signal, 9);
	cr_assert_str_eq(c.err, "", "the wrapper must not report the job's death: %s", c.err);
	/* 3 MB of output arrives in full, across many messages. */
	cr_assert_eq(run(st, id, "head -c 3000000 /dev/zero", NULL, 0, 0, &c, &out, &err), SBX_OK);
	cr_assert_eq(c.out_total, 3000000);
	/* stdin reaches the command and ends with EOF. */
	static char in[200000];
	memset(in, 'x', sizeof(in));
	cr_assert_eq(run(st, id, "wc -c", in, sizeof(in), 0, &c, &out, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(strtol(c.out, NULL, 10), 200000);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK, "second destroy: %s", err.message);
	uint32_t state = 0;
	cr_assert_eq(desc.status(st, id, &state, &err), SBX_OK);
	cr_assert_eq(state, SBX_STATE_GONE);
	desc.fini(st);
}

Test(k8s, timeout_kills_the_tree_inside_the_pod)
{
	sbx_config cfg = {0};
	void *st = start(&cfg);
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	capture c;
	sbx_exec_outcome out;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert_eq(run(st, id, "sleep 60 & echo $! > bg.pid; echo started; sleep 60", NULL, 0,
			 1000, &c, &out, &err),
		     SBX_OK, "%s", err.message);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	cr_assert_eq(out.timed_out, 1);
	cr_assert_eq(out.exit_code, -1);
	cr_assert_eq(out.signal, 9);
	cr_assert_str_eq(c.out, "started\n");
	cr_assert_lt(t1.tv_sec - t0.tv_sec, 10);
	/* The stand-in runs pods as local processes, so the background child's pid is ours to
	 * check. */
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(desc.read_file(st, id, "bg.pid", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	long pid = strtol(data, NULL, 10);
	free(data);
	cr_assert_gt(pid, 1);
	int gone = 0;
	for (int i = 0; i < 50 && !gone; i++) {
		gone = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
		if (!gone)
			usleep(100000);
	}
	cr_assert(gone, "background child %ld survived the timeout", pid);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK);
	desc.fini(st);
}

static void files_roundtrip(const char *protocol)
{
	sbx_config cfg = {.keys = {"exec_protocol"}, .vals = {protocol}, .n = 1};
	void *st = start(&cfg);
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	size_t n = 1 << 20;
	unsigned char *blob = malloc(n);
	for (size_t i = 0; i < n; i++)
		blob[i] = (unsigned char)(i * 7 + (i >> 9));
	cr_assert_eq(desc.write_file(st, id, "a/b/blob.bin", blob, n, 0600, &err), SBX_OK, "%s",
		     err.message);
	void *data = NULL;
	size_t len = 0;
	cr_assert_eq(desc.read_file(st, id, "a/b/blob.bin", &data, &len, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_eq(len, n);
	cr_assert_eq(memcmp(data, blob, n), 0);
	free(data);
	cr_assert_eq(desc.write_file(st, id, "empty", "", 0, 0, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(desc.read_file(st, id, "empty", &data, &len, &err), SBX_OK);
	cr_assert_eq(len, 0);
	free(data);
	cr_assert_eq(desc.read_file(st, id, "missing", &data, &len, &err), SBX_E_NO_FILE);
	cr_assert_eq(desc.read_file(st, id, "a", &data, &len, &err), SBX_E_INVAL);
	cr_assert_eq(desc.remove_path(st, id, "a", 1, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(desc.read_file(st, id, "a/b/blob.bin", &data, &len, &err), SBX_E_NO_FILE);
	/* stdin exec works under either protocol. */
	capture c;
	sbx_exec_outcome out;
	cr_assert_eq(run(st, id, "cat", "hello", 5, 0, &c, &out, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(c.out, "hello");
	free(blob);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK);
	desc.fini(st);
}

Test(k8s, files_roundtrip_over_v5)
{
	json_t *before = control("stats", NULL);
	long v5 = (long)json_integer_value(
	    json_object_get(json_object_get(before, "exec_protocols"), "v5.channel.k8s.io"));
	json_decref(before);
	files_roundtrip("auto");
	json_t *after = control("stats", NULL);
	cr_assert_gt(json_integer_value(json_object_get(json_object_get(after, "exec_protocols"),
							"v5.channel.k8s.io")),
		     v5);
	json_decref(after);
}

Test(k8s, files_roundtrip_over_v4)
{
	json_t *before = control("stats", NULL);
	long v4 = (long)json_integer_value(
	    json_object_get(json_object_get(before, "exec_protocols"), "v4.channel.k8s.io"));
	json_decref(before);
	files_roundtrip("v4");
	json_t *after = control("stats", NULL);
	cr_assert_gt(json_integer_value(json_object_get(json_object_get(after, "exec_protocols"),
							"v4.channel.k8s.io")),
		     v4);
	json_decref(after);
}

static int count_id(void *ctx, const char *id)
{
	(void)id;
	(*(int *)ctx)++;
	return SBX_OK;
}

Test(k8s, list_by_label_finds_our_pods)
{
	sbx_config cfg = {0};
	void *st = start(&cfg);
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	int n = 0;
	/* "plugin-test" is already label syntax; "test:run/1" was sanitised the same way. */
	cr_assert_eq(desc.list_by_label(st, "sbx.owner", "test:run/1", count_id, &n, &err), SBX_OK,
		     "%s", err.message);
	cr_assert_geq(n, 1);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK);
	n = 0;
	cr_assert_eq(desc.list_by_label(st, "sbx.run", "no-such-run", count_id, &n, &err), SBX_OK);
	cr_assert_eq(n, 0);
	cr_assert_eq(desc.destroy(st, "sbx-0000000000000000", &err), SBX_OK, "unknown id: %s",
		     err.message);
	cr_assert_eq(desc.destroy(st, "../etc", &err), SBX_E_BAD_ID);
	desc.fini(st);
}

Test(k8s, image_pull_failure_fails_fast_with_the_reason)
{
	sbx_config cfg = {0};
	void *st = start(&cfg);
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "registry.invalid/imagepullbackoff:1", id, &err), SBX_E_BACKEND);
	cr_assert(strstr(err.message, "ErrImagePull") || strstr(err.message, "ImagePullBackOff"),
		  "%s", err.message);
	cr_assert_eq(create(st, "sbx-test/unschedulable", id, &err), SBX_E_BACKEND);
	cr_assert(strstr(err.message, "Unschedulable: 0/1 nodes are available"), "%s", err.message);
	cr_assert_eq(create(st, "sbx-test/configerror", id, &err), SBX_E_BACKEND);
	cr_assert(strstr(err.message, "CreateContainerConfigError: secret"), "%s", err.message);
	cr_assert_eq(create(st, "sbx-test/exits", id, &err), SBX_E_BACKEND);
	cr_assert(strstr(err.message, "exit code 1"), "%s", err.message);
	desc.fini(st);
}

Test(k8s, never_ready_pod_times_out_with_a_clear_error)
{
	sbx_config cfg = {.keys = {"create_timeout_seconds"}, .vals = {"2"}, .n = 1};
	void *st = start(&cfg);
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "sbx-test/never-ready", id, &err), SBX_E_TIMEOUT);
	cr_assert(strstr(err.message, "not Running+Ready after 2s (phase Running, Ready=False"),
		  "%s", err.message);
	desc.fini(st);
}

Test(k8s, storm_of_429_is_retried_after_retry_after)
{
	sbx_config cfg = {0};
	void *st = start(&cfg);
	long before = stat_int("429");
	json_decref(control("faults", "{\"429\": 3}"));
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(stat_int("429"), before + 3);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK);
	/* A storm longer than the retry budget ends in SBX_E_RATE_LIMITED. */
	sbx_config cfg2 = {.keys = {"max_retries"}, .vals = {"1"}, .n = 1};
	void *st2 = start(&cfg2);
	json_decref(control("faults", "{\"429\": 5}"));
	cr_assert_eq(create(st2, "busybox", id, &err), SBX_E_RATE_LIMITED);
	cr_assert(strstr(err.message, "HTTP 429 after 2 attempts"), "%s", err.message);
	json_decref(control("faults", "{\"429\": 0}"));
	desc.fini(st2);
	desc.fini(st);
}

Test(k8s, token_bucket_caps_the_request_rate)
{
	sbx_config cfg = {.keys = {"qps", "burst"}, .vals = {"4", "1"}, .n = 2};
	void *st = start(&cfg);
	json_t *j = control("stats", NULL);
	long t0 = (long)json_integer_value(json_object_get(j, "requests"));
	json_decref(j);
	char since[64];
	snprintf(since, sizeof(since), "stats?since=%ld", t0);
	sbx_error err = {0};
	uint32_t state;
	for (int i = 0; i < 10; i++)
		cr_assert_eq(desc.status(st, "sbx-0000000000000000", &state, &err), SBX_OK);
	j = control(since, NULL);
	cr_assert_eq(json_integer_value(json_object_get(j, "requests")), t0 + 10);
	/* 4 per second plus a burst of 1: never more than 5 in any second. */
	cr_assert_leq(json_integer_value(json_object_get(j, "max_requests_per_second")), 5, "%lld",
		      (long long)json_integer_value(json_object_get(j, "max_requests_per_second")));
	json_decref(j);
	desc.fini(st);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert(f, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert(f, "cannot read %s", path);
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* A kubeconfig for the stand-in with the given user block. */
static void write_kubeconfig(const char *path, const char *user_yaml)
{
	char port[16], ca[1100], text[4096];
	snprintf(ca, sizeof(ca), "%s/port", standin);
	snprintf(port, sizeof(port), "%s", read_text(ca));
	snprintf(ca, sizeof(ca), "%s/ca.crt", standin);
	int n = snprintf(
	    text, sizeof(text),
	    "apiVersion: v1\nkind: Config\ncurrent-context: other\nclusters:\n- name: c\n"
	    "  cluster:\n    server: https://127.0.0.1:%s/\n    certificate-authority: %s\n"
	    "users:\n- name: u\n  user:\n%s\ncontexts:\n- name: other\n  context: {cluster: "
	    "nope, user: u}\n- name: mine\n  context:\n    cluster: c\n    user: u\n"
	    "    namespace: authns\n",
	    port, ca, user_yaml);
	cr_assert(n > 0 && (size_t)n < sizeof(text), "kubeconfig for %s does not fit", path);
	write_text(path, text);
}

Test(k8s, auth_token_file_named_context_and_in_cluster)
{
	char dir[1200], kc[1300], tf[1300], user[1400];
	snprintf(dir, sizeof(dir), "%s/auth-%d", standin, (int)getpid());
	mkdir(dir, 0700);
	snprintf(tf, sizeof(tf), "%s/token", dir);
	char token[256];
	snprintf(kc, sizeof(kc), "%s/token", standin);
	snprintf(token, sizeof(token), "%s\n", read_text(kc));
	write_text(tf, token);
	snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
	snprintf(user, sizeof(user), "    tokenFile: token");
	write_kubeconfig(kc, user);
	/* A named context, a relative tokenFile, a CA file path. */
	sbx_config cfg = {.keys = {"kubeconfig", "context"}, .vals = {kc, "mine"}, .n = 2};
	void *st = NULL;
	sbx_error err = {0};
	cr_assert_eq(desc.init(&cfg, &st, &err), SBX_OK, "%s", err.message);
	char id[64];
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	json_t *j = control("stats", NULL);
	int found = 0;
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(j, "pods"), i, p)
	{
		char want[128];
		snprintf(want, sizeof(want), "authns/%s", id);
		found |= strcmp(json_string_value(p), want) == 0;
	}
	json_decref(j);
	cr_assert(found, "pod %s not in namespace authns", id);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK, "%s", err.message);
	/* The token file is re-read: a rotated (here: wrong) token is used at once. */
	write_text(tf, "not-the-token\n");
	cr_assert_eq(create(st, "busybox", id, &err), SBX_E_CONFIG);
	cr_assert(strstr(err.message, "HTTP 401: Unauthorized"), "%s", err.message);
	desc.fini(st);
	/* The readonly token may read but not create. */
	write_text(tf, "readonly\n");
	cr_assert_eq(desc.init(&cfg, &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(create(st, "busybox", id, &err), SBX_E_CONFIG);
	cr_assert(strstr(err.message, "HTTP 403"), "%s", err.message);
	desc.fini(st);
	/* The current context names a cluster that does not exist. */
	sbx_config bad = {.keys = {"kubeconfig"}, .vals = {kc}, .n = 1};
	cr_assert_eq(desc.init(&bad, &st, &err), SBX_E_CONFIG);
	cr_assert(strstr(err.message, "cluster 'nope' has no server"), "%s", err.message);
	/* In-cluster: the service account folder and KUBERNETES_SERVICE_*. */
	char sa[1300], path[1400], port[16];
	snprintf(sa, sizeof(sa), "%s/sa", dir);
	mkdir(sa, 0700);
	snprintf(path, sizeof(path), "%s/token", sa);
	write_text(path, token);
	snprintf(path, sizeof(path), "%s/namespace", sa);
	write_text(path, "incluster\n");
	snprintf(path, sizeof(path), "%s/ca.crt", sa);
	char ca[1100];
	snprintf(ca, sizeof(ca), "%s/ca.crt", standin);
	write_text(path, read_text(ca));
	snprintf(ca, sizeof(ca), "%s/port", standin);
	snprintf(port, sizeof(port), "%s", read_text(ca));
	setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", port, 1);
	setenv("SBX_K8S_SERVICEACCOUNT_DIR", sa, 1);
	sbx_config ic = {.keys = {"in_cluster"}, .vals = {"true"}, .n = 1};
	cr_assert_eq(desc.init(&ic, &st, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	capture c;
	sbx_exec_outcome out;
	cr_assert_eq(run(st, id, "echo in-cluster", NULL, 0, 0, &c, &out, &err), SBX_OK, "%s",
		     err.message);
	cr_assert_str_eq(c.out, "in-cluster\n");
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK, "%s", err.message);
	desc.fini(st);
}

/* Lines in a file (runs of the exec credential script). */
static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int n = 0, ch;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

/* A folder with a kubeconfig whose user `u` runs `command`, by default
 * tests/k8s/exec_credential.py through a relative path (it resolves against the kubeconfig's
 * folder), with `mode`, `expiry` and `extra` exec keys; its log is DIR/log. */
static void exec_kubeconfig(char *dir, size_t cap, const char *name, const char *mode,
			    const char *expiry, const char *extra, const char *command)
{
	char path[1400], user[4096], tok[1100];
	snprintf(dir, cap, "%s/%s-%d", standin, name, (int)getpid());
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/cred.py", dir);
	unlink(path);
	cr_assert_eq(symlink(K8S_TEST_DIR "/exec_credential.py", path), 0, "%s", strerror(errno));
	snprintf(path, sizeof(path), "%s/log", dir);
	unlink(path);
	snprintf(tok, sizeof(tok), "%s/token", standin);
	snprintf(user, sizeof(user),
		 "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
		 "      command: %s\n      args: [--flag, two words]\n      env:\n"
		 "      - {name: CRED_LOG, value: %s}\n      - {name: CRED_TOKEN_FILE, value: %s}\n"
		 "      - {name: CRED_MODE, value: %s}\n      - {name: CRED_EXPIRY, value: '%s'}\n"
		 "%s",
		 command ? command : "./cred.py", path, tok, mode, expiry,
		 extra ? extra : "      interactiveMode: Never\n");
	snprintf(path, sizeof(path), "%s/kubeconfig", dir);
	write_kubeconfig(path, user);
}

static void *start_at(const char *dir)
{
	static char kc[1400];
	snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
	sbx_config cfg = {.keys = {"kubeconfig", "context"}, .vals = {kc, "mine"}, .n = 2};
	void *st = NULL;
	sbx_error err = {0};
	cr_assert_eq(desc.init(&cfg, &st, &err), SBX_OK, "init: %s", err.message);
	return st;
}

static long api_calls(void)
{
	return stat_int("requests") + stat_int("execs");
}

Test(k8s, auth_exec_credential_runs_as_configured_and_is_cached_until_it_expires)
{
	char dir[1200], log[1300];
	exec_kubeconfig(dir, sizeof(dir), "cred-cache", "ok", "3600", NULL, NULL);
	snprintf(log, sizeof(log), "%s/log", dir);
	void *st = start_at(dir);
	cr_assert_eq(count_lines(log), 0, "the plugin runs at the first request, not at init");
	char id[64];
	sbx_error err = {0};
	capture c;
	sbx_exec_outcome out;
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(run(st, id, "echo hi", NULL, 0, 0, &c, &out, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(c.out, "hi\n");
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(count_lines(log), 1, "an unexpired credential is reused");
	/* How it ran: argv as given, the configured env, KUBERNETES_EXEC_INFO, no stdin. */
	json_error_t je;
	json_t *rec = json_load_file(log, JSON_DISABLE_EOF_CHECK, &je);
	cr_assert(rec, "%s", je.text);
	json_t *want =
	    json_pack("{s:[s,s],s:b,s:s,s:{s:s,s:s,s:{s:b}}}", "argv", "--flag", "two words",
		      "stdin_tty", 0, "stdin", "", "exec_info", "kind", "ExecCredential",
		      "apiVersion", "client.authentication.k8s.io/v1", "spec", "interactive", 0);
	json_object_del(rec, "env");
	cr_assert(json_equal(rec, want), "%s", json_dumps(rec, 0));
	json_decref(want);
	json_decref(rec);
	char *info = NULL;
	cr_assert_eq(desc.info(st, &info, &err), SBX_OK);
	cr_assert(strstr(info, "\"auth\":\"exec\""), "%s", info);
	cr_assert(strstr(info, "\"credential_runs\":1"), "%s", info);
	free(info);
	desc.fini(st);

	/* An expired credential is never reused: one run per API call. */
	exec_kubeconfig(dir, sizeof(dir), "cred-expired", "ok", "-60", NULL, NULL);
	snprintf(log, sizeof(log), "%s/log", dir);
	st = start_at(dir);
	long before = api_calls();
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(run(st, id, "echo hi", NULL, 0, 0, &c, &out, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK, "%s", err.message);
	long calls = api_calls() - before;
	cr_assert_geq(calls, 3);
	cr_assert_eq(count_lines(log), calls);
	desc.fini(st);
}

Test(k8s, auth_exec_credential_refused_with_401_is_run_again)
{
	char dir[1200], log[1300];
	exec_kubeconfig(dir, sizeof(dir), "cred-401", "wrong-first", "none", NULL, NULL);
	snprintf(log, sizeof(log), "%s/log", dir);
	void *st = start_at(dir);
	char id[64];
	sbx_error err = {0};
	cr_assert_eq(create(st, "busybox", id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(count_lines(log), 2);
	cr_assert_eq(desc.destroy(st, id, &err), SBX_OK, "%s", err.message);
	cr_assert_eq(count_lines(log), 2);
	desc.fini(st);
}

Test(k8s, auth_exec_credential_failures_name_the_cause)
{
	static const struct {
		const char *mode, *extra, *command, *want;
	} cases[] = {
	    {"fail", NULL, NULL,
	     "'./cred.py' exited with status 3: credential helper: the cloud said no"},
	    {"garbage", NULL, NULL, "its output is not a JSON object"},
	    {"wrong-api", NULL, NULL,
	     "it returned apiVersion 'client.authentication.k8s.io/v1alpha1', not "
	     "client.authentication.k8s.io/v1"},
	    {"no-status", NULL, NULL, "it returned no status"},
	    {"cert-only", NULL, NULL,
	     "it returned only one of clientCertificateData and clientKeyData"},
	    {"ok", "      interactiveMode: Never\n      installHint: install it with apt\n",
	     "no-such-helper-sbx",
	     "cannot run 'no-such-helper-sbx': No such file or directory; install it with apt"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char dir[1200], name[32];
		snprintf(name, sizeof(name), "cred-bad%zu", i);
		exec_kubeconfig(dir, sizeof(dir), name, cases[i].mode, "none", cases[i].extra,
				cases[i].command);
		void *st = start_at(dir);
		char id[64];
		sbx_error err = {0};
		cr_assert_eq(create(st, "busybox", id, &err), SBX_E_CONFIG, "%s: %s", cases[i].mode,
			     err.message);
		cr_assert(strstr(err.message, "exec credential plugin for user 'u'"), "%s",
			  err.message);
		cr_assert(strstr(err.message, cases[i].want), "%s", err.message);
		cr_assert_null(strstr(err.message, "second line"), "%s", err.message);
		desc.fini(st);
	}
	/* Refused when the kubeconfig is read. */
	static const struct {
		const char *exec, *want;
	} bad[] = {
	    {"apiVersion: client.authentication.k8s.io/v1",
	     "interactiveMode must be specified for u to use exec authentication plugin"},
	    {"apiVersion: client.authentication.k8s.io/v1beta1, interactiveMode: Sometimes",
	     "exec interactiveMode 'Sometimes' is not Never, IfAvailable or Always"},
	    {"apiVersion: client.authentication.k8s.io/v1alpha1, interactiveMode: Never",
	     "exec apiVersion 'client.authentication.k8s.io/v1alpha1' is not supported"},
	    {"apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, args: [{a: b}]",
	     "exec args must be strings and env entries {name, value}"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char dir[1200], kc[1400], user[512];
		snprintf(dir, sizeof(dir), "%s/cred-refused-%d", standin, (int)getpid());
		mkdir(dir, 0700);
		snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
		snprintf(user, sizeof(user), "    exec: {command: x, %s}", bad[i].exec);
		write_kubeconfig(kc, user);
		sbx_config cfg = {.keys = {"kubeconfig", "context"}, .vals = {kc, "mine"}, .n = 2};
		void *st = NULL;
		sbx_error err = {0};
		cr_assert_eq(desc.init(&cfg, &st, &err), SBX_E_CONFIG, "%s", bad[i].want);
		cr_assert(strstr(err.message, bad[i].want), "%s", err.message);
	}
	/* interactiveMode Always needs a terminal on stdin; the tests run without one. */
	if (!isatty(0)) {
		char dir[1200];
		exec_kubeconfig(dir, sizeof(dir), "cred-always", "ok", "none",
				"      interactiveMode: Always\n", NULL);
		void *st = start_at(dir);
		char id[64];
		sbx_error err = {0};
		cr_assert_eq(create(st, "busybox", id, &err), SBX_E_CONFIG);
		cr_assert(strstr(err.message, "needs interactiveMode Always, but standard input is "
					      "not a terminal"),
			  "%s", err.message);
		desc.fini(st);
	}
}

Test(k8s, every_connection_is_http_1_1_when_the_server_offers_h2)
{
	/* A second stand-in that offers h2 first in ALPN and drops connections that take it. */
	char dir[1200], cmd[4096], kc[1300];
	snprintf(dir, sizeof(dir), "%s-h2-%d", standin, (int)getpid());
	snprintf(cmd, sizeof(cmd), "python3 %s/standin_ctl.py start %s --alpn-h2 >/dev/null",
		 K8S_TEST_DIR, dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
	sbx_config cfg = {.keys = {"kubeconfig"}, .vals = {kc}, .n = 1};
	void *st = NULL;
	sbx_error err = {0};
	char id[64];
	int ok = desc.init(&cfg, &st, &err) == SBX_OK && create(st, "busybox", id, &err) == SBX_OK;
	capture c;
	sbx_exec_outcome out;
	int ran = ok && run(st, id, "echo one-point-one", NULL, 0, 0, &c, &out, &err) == SBX_OK;
	int gone = ok && desc.destroy(st, id, &err) == SBX_OK;
	if (st)
		desc.fini(st);
	snprintf(cmd, sizeof(cmd), "python3 %s/standin_ctl.py stop %s", K8S_TEST_DIR, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert(ok && ran && gone, "%s", err.message);
	cr_assert_str_eq(c.out, "one-point-one\n");
}

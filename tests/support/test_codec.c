/* The pure parts of libsbx-support: base64, time stamps, buffers, JSON messages, random
 * tokens, config tables. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/support.h>

#include "testhost.h"

static void setup(void)
{
	sbxs_host_set(&test_host);
	test_fail_allocs_after(-1);
}

TestSuite(support, .init = setup);

/* ---- base64 */

Test(support, base64_encodes_the_rfc_4648_vectors)
{
	static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const want[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
					   "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	char out[16];
	for (size_t i = 0; i < 7; i++) {
		size_t n = sbxs_base64_encode(in[i], strlen(in[i]), out, sizeof(out));
		cr_assert_str_eq(out, want[i]);
		cr_assert_eq(n, strlen(want[i]));
	}
	cr_assert_eq(sbxs_base64_encode("foobar", 6, out, 8), 0, "no room for the NUL");
	cr_assert_str_eq(out, "");
}

Test(support, base64_decodes_both_alphabets_with_or_without_padding)
{
	unsigned char out[16];
	size_t n = 0;
	cr_assert_eq(sbxs_base64_decode("Zm9vYg==", 8, out, sizeof(out), &n), SBX_OK);
	cr_assert_eq(n, 4);
	cr_assert_eq(memcmp(out, "foob", 4), 0);
	cr_assert_eq(sbxs_base64_decode("Zm9vYg", 6, out, sizeof(out), &n), SBX_OK);
	cr_assert_eq(n, 4);
	/* 0xfb 0xff: "+/" in the standard alphabet, "-_" in the URL one. */
	cr_assert_eq(sbxs_base64_decode("-_8=", 4, out, sizeof(out), &n), SBX_OK);
	cr_assert_eq(n, 2);
	cr_assert_eq(out[0], 0xfb);
	cr_assert_eq(out[1], 0xff);
	cr_assert_eq(sbxs_base64_decode("+/8=", 4, out, sizeof(out), &n), SBX_OK);
	cr_assert_eq(out[0], 0xfb);
	/* Line breaks inside (kubeconfig data as some tools write it). */
	cr_assert_eq(sbxs_base64_decode("Zm9v\nYmFy\r\n", 11, out, sizeof(out), &n), SBX_OK);
	cr_assert_eq(n, 6);
	cr_assert_eq(memcmp(out, "foobar", 6), 0);
}

Test(support, base64_refuses_what_is_not_an_encoding)
{
	unsigned char out[16];
	size_t n = 99;
	cr_assert_eq(sbxs_base64_decode("Zm9v!", 5, out, sizeof(out), &n), SBX_E_INVAL);
	cr_assert_eq(sbxs_base64_decode("Zg==Zg==", 8, out, sizeof(out), &n), SBX_E_INVAL);
	cr_assert_eq(sbxs_base64_decode("Zm9vY", 5, out, sizeof(out), &n), SBX_E_INVAL);
	cr_assert_eq(sbxs_base64_decode("Zg=", 3, out, sizeof(out), &n), SBX_E_INVAL);
	cr_assert_eq(sbxs_base64_decode("Zm9vYmFy", 8, out, 5, &n), SBX_E_NOMEM);
	cr_assert_eq(n, 99, "no output length on failure");
}

Test(support, base64_round_trips_every_byte)
{
	unsigned char raw[256], back[256];
	char enc[SBXS_BASE64_ENCODED_LEN(256) + 1];
	for (int i = 0; i < 256; i++)
		raw[i] = (unsigned char)i;
	for (size_t len = 0; len <= 256; len += 17) {
		size_t el = sbxs_base64_encode(raw, len, enc, sizeof(enc)), n = 0;
		cr_assert_eq(el, SBXS_BASE64_ENCODED_LEN(len));
		cr_assert_eq(sbxs_base64_decode(enc, el, back, sizeof(back), &n), SBX_OK);
		cr_assert_eq(n, len);
		cr_assert_eq(memcmp(raw, back, len), 0);
	}
}

/* ---- time */

static int64_t t3339(const char *s)
{
	int64_t t = -1;
	cr_assert_eq(sbxs_rfc3339(s, &t, NULL), SBX_OK, "%s", s);
	return t;
}

Test(support, rfc3339_applies_the_offset)
{
	cr_assert_eq(t3339("1970-01-01T00:00:00Z"), 0);
	cr_assert_eq(t3339("2024-05-01T08:00:00Z"), 1714550400);
	cr_assert_eq(t3339("2024-05-01T10:00:00+02:00"), 1714550400);
	cr_assert_eq(t3339("2024-05-01T02:30:00-05:30"), 1714550400);
	cr_assert_eq(t3339("2024-04-30T23:00:00-09:00"), 1714550400);
	cr_assert_eq(t3339("2024-05-01t08:00:00z"), 1714550400);
	cr_assert_eq(t3339("2024-05-01 08:00:00Z"), 1714550400);
	cr_assert_eq(t3339("2024-02-29T00:00:00Z"), 1709164800);
	cr_assert_eq(t3339("1969-12-31T23:59:59Z"), -1);
}

Test(support, rfc3339_keeps_the_fraction_in_nanoseconds)
{
	int64_t t;
	int32_t ns;
	cr_assert_eq(sbxs_rfc3339("2024-05-01T10:00:00.5+02:00", &t, &ns), SBX_OK);
	cr_assert_eq(t, 1714550400);
	cr_assert_eq(ns, 500000000);
	cr_assert_eq(sbxs_rfc3339("2024-05-01T08:00:00.123456789123Z", &t, &ns), SBX_OK);
	cr_assert_eq(ns, 123456789);
}

Test(support, rfc3339_refuses_anything_else)
{
	static const char *const bad[] = {"",
					  "2024-05-01",
					  "2024-05-01T08:00:00",
					  "2024-05-01T08:00:00+0200",
					  "2024-05-01T08:00:00Zjunk",
					  "2023-02-29T00:00:00Z",
					  "2024-13-01T00:00:00Z",
					  "2024-05-01T24:00:00Z",
					  "2024-05-01T08:60:00Z",
					  "2024-05-01T08:00:00.Z",
					  "2024-5-01T08:00:00Z",
					  "2024-05-01T08:00:00+24:00"};
	for (size_t i = 0; i < SBXS_COUNT(bad); i++) {
		int64_t t = 7;
		cr_assert_eq(sbxs_rfc3339(bad[i], &t, NULL), SBX_E_INVAL, "%s", bad[i]);
		cr_assert_eq(t, 7);
	}
	cr_assert_eq(sbxs_rfc3339(NULL, NULL, NULL), SBX_E_INVAL);
}

Test(support, http_date_reads_imf_fixdate)
{
	int64_t t = 0;
	cr_assert_eq(sbxs_http_date("Sun, 06 Nov 1994 08:49:37 GMT", &t), SBX_OK);
	cr_assert_eq(t, 784111777);
	cr_assert_eq(sbxs_http_date("Sunday, 06-Nov-94 08:49:37 GMT", &t), SBX_E_INVAL);
	cr_assert_eq(sbxs_http_date("Sun, 06 Nov 1994 08:49:37 UTC", &t), SBX_E_INVAL);
}

Test(support, monotonic_clock_and_sleep_agree)
{
	int64_t a = sbxs_now_us();
	sbxs_sleep_ms(20);
	int64_t b = sbxs_now_us();
	cr_assert_geq(b - a, 20000);
	cr_assert_lt(b - a, 5000000, "a loose bound for a loaded machine");
	cr_assert_gt(sbxs_wall_s(), 1700000000);
}

/* ---- lexical paths */

Test(support, path_push_resolves_dot_and_dotdot_and_refuses_overflow)
{
	char b[16] = "/a";
	cr_assert(sbxs_path_push(b, sizeof(b), "b", 1));
	cr_assert_str_eq(b, "/a/b");
	cr_assert(sbxs_path_push(b, sizeof(b), ".", 1));
	cr_assert(sbxs_path_push(b, sizeof(b), "", 0));
	cr_assert_str_eq(b, "/a/b");
	cr_assert(sbxs_path_push(b, sizeof(b), "..", 2));
	cr_assert(sbxs_path_push(b, sizeof(b), "..", 2));
	cr_assert(sbxs_path_push(b, sizeof(b), "..", 2));
	cr_assert_str_eq(b, "/", "above the root stays at the root");
	cr_assert(sbxs_path_push(b, sizeof(b), "0123456789abc", 13));
	cr_assert_str_eq(b, "/0123456789abc");
	cr_assert_not(sbxs_path_push(b, sizeof(b), "x", 1), "15 bytes and a NUL do not fit in 16");
	cr_assert_str_eq(b, "/0123456789abc", "unchanged");
}

Test(support, path_normalize_and_beneath)
{
	char b[64];
	cr_assert(sbxs_path_normalize("//work/./a/../b//", b, sizeof(b)));
	cr_assert_str_eq(b, "/work/b");
	cr_assert(sbxs_path_normalize("/../..", b, sizeof(b)));
	cr_assert_str_eq(b, "/");
	cr_assert_not(sbxs_path_normalize("work/a", b, sizeof(b)), "relative");
	cr_assert_not(sbxs_path_normalize("/work/abcdef", b, 8), "does not fit");
	cr_assert(sbxs_path_beneath("/work", "/work"));
	cr_assert(sbxs_path_beneath("/work", "/work/a"));
	cr_assert_not(sbxs_path_beneath("/work", "/workshop"));
	cr_assert_not(sbxs_path_beneath("/work", "/"));
	cr_assert(sbxs_path_beneath("/", "/anything"));
}

/* ---- buffers */

Test(support, buf_appends_drops_and_hands_over)
{
	sbxs_buf b = {0};
	cr_assert_eq(sbxs_buf_adds(&b, "hello"), SBX_OK);
	cr_assert_eq(sbxs_buf_addf(&b, " %d %s", 42, "x"), SBX_OK);
	cr_assert_str_eq(b.data, "hello 42 x");
	cr_assert_eq(b.len, 10);
	sbxs_buf_drop(&b, 6);
	cr_assert_str_eq(b.data, "42 x");
	cr_assert_eq(sbxs_buf_add(&b, "\0y", 2), SBX_OK);
	cr_assert_eq(b.len, 6);
	cr_assert_eq(b.data[6], '\0', "always NUL-terminated past len");
	size_t n = 0;
	char *d = sbxs_buf_take(&b, &n);
	cr_assert_eq(n, 6);
	cr_assert_eq(memcmp(d, "42 x\0y", 6), 0);
	cr_assert_null(b.data);
	free(d);
	d = sbxs_buf_take(&b, &n);
	cr_assert_str_eq(d, "", "an empty buffer hands over an empty string");
	cr_assert_eq(n, 0);
	free(d);
	sbxs_buf_free(&b);
}

Test(support, buf_out_of_memory_leaves_it_unchanged)
{
	sbxs_buf b = {0};
	cr_assert_eq(sbxs_buf_adds(&b, "abc"), SBX_OK);
	test_fail_allocs_after(0);
	char big[4096];
	memset(big, 'x', sizeof(big));
	cr_assert_eq(sbxs_buf_add(&b, big, sizeof(big)), SBX_E_NOMEM);
	cr_assert_eq(sbxs_buf_addf(&b, "%.4000s", big), SBX_E_NOMEM);
	cr_assert_str_eq(b.data, "abc");
	cr_assert_eq(b.len, 3);
	cr_assert_null(sbxs_strdup("x"));
	test_fail_allocs_after(-1);
	sbxs_buf_wipe(&b);
	cr_assert_null(b.data);
}

/* ---- JSON */

Test(support, json_message_prefers_the_message_member)
{
	char buf[64];
	const char *j = "{\"kind\":\"Status\",\"message\":\"pods \\\"x\\\" not found\\nreally\"}";
	cr_assert_str_eq(sbxs_json_message(j, strlen(j), buf, sizeof(buf)),
			 "pods \"x\" not found really");
	cr_assert_str_eq(sbxs_json_message("plain text \r\n", 13, buf, sizeof(buf)), "plain text");
	cr_assert_str_eq(sbxs_json_message(NULL, 0, buf, sizeof(buf)), "(empty body)");
	cr_assert_str_eq(sbxs_json_message("{\"message\":\"\"}", 14, buf, sizeof(buf)),
			 "{\"message\":\"\"}");
	char longbody[300];
	memset(longbody, 'a', sizeof(longbody));
	char big[512];
	cr_assert_eq(strlen(sbxs_json_message(longbody, sizeof(longbody), big, sizeof(big))), 200);
	cr_assert_eq(strlen(sbxs_json_message(longbody, sizeof(longbody), buf, 10)), 9);
}

Test(support, json_dump_is_host_memory_and_info_reports_nomem)
{
	json_t *j = json_pack("{s:s,s:i}", "a", "b", "n", 3);
	char *t = sbxs_json_dump(j);
	cr_assert_str_eq(t, "{\"a\":\"b\",\"n\":3}");
	free(t);
	char *out = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbxs_json_info(NULL, "x", &out, &err), SBX_E_NOMEM);
	cr_assert_str_eq(err.message, "x: info: out of memory");
	cr_assert_eq(sbxs_json_info(j, "x", &out, &err), SBX_OK);
	cr_assert_str_eq(out, "{\"a\":\"b\",\"n\":3}");
	free(out);
	json_decref(j);
}

/* ---- random */

Test(support, random_hex_tokens_are_hex_and_differ)
{
	char a[17], b[17];
	cr_assert_eq(sbxs_random_hex(a, sizeof(a), 8), SBX_OK);
	cr_assert_eq(sbxs_random_hex(b, sizeof(b), 8), SBX_OK);
	cr_assert_eq(strlen(a), 16);
	cr_assert_eq(strspn(a, "0123456789abcdef"), 16);
	cr_assert_str_neq(a, b);
	cr_assert_eq(sbxs_random_hex(a, 16, 8), SBX_E_INVAL, "no room for the NUL");
	for (int i = 0; i < 1000; i++) {
		double u = sbxs_random_unit();
		cr_assert(u >= 0 && u < 1, "%f", u);
	}
}

/* ---- config tables */

typedef struct settings {
	const char *host;
	const char *pull;
	const char *token;
	int64_t retries;
	double timeout;
	double ratio;
	int flag;
	int tri;
	const char *map;
} settings;

static const sbxs_conf rows[] = {
    {.key = {.name = "host", .type = SBX_KEY_STRING, .help = "h"},
     .at = offsetof(settings, host),
     .env = "SBXS_TEST_HOST",
     .def = "unix:///default"},
    {.key = {.name = "pull", .type = SBX_KEY_STRING},
     .at = offsetof(settings, pull),
     .def = "never",
     .choices = "never|missing|always"},
    {.key = {.name = "token", .type = SBX_KEY_STRING, .secret = 1},
     .at = offsetof(settings, token)},
    {.key = {.name = "retries", .type = SBX_KEY_INT},
     .at = offsetof(settings, retries),
     .num = 3,
     .min = 0,
     .max = 20,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "timeout", .type = SBX_KEY_FLOAT},
     .at = offsetof(settings, timeout),
     .num = 60,
     .min = 0,
     .max = 3600,
     .flags = SBXS_CONF_RANGE | SBXS_CONF_ABOVE_MIN},
    {.key = {.name = "ratio", .type = SBX_KEY_FLOAT},
     .at = offsetof(settings, ratio),
     .num = 0.5,
     .min = 0,
     .max = 1,
     .flags = SBXS_CONF_RANGE},
    {.key = {.name = "flag", .type = SBX_KEY_BOOL}, .at = offsetof(settings, flag)},
    {.key = {.name = "tri", .type = SBX_KEY_BOOL}, .at = offsetof(settings, tri), .num = -1},
    {.key = {.name = "map", .type = SBX_KEY_MAP}, .at = offsetof(settings, map), .def = "{}"},
};

static int read_conf(const test_value *v, size_t n, settings *s, sbx_error *err)
{
	sbx_config cfg = {.values = v, .n = n};
	memset(s, 0x5a, sizeof(*s));
	return sbxs_conf_read("t", &cfg, rows, SBXS_COUNT(rows), s, err);
}

Test(support, conf_fills_defaults_from_the_table)
{
	settings s;
	sbx_error err = {0};
	unsetenv("SBXS_TEST_HOST");
	cr_assert_eq(read_conf(NULL, 0, &s, &err), SBX_OK, "%s", err.message);
	cr_assert_str_eq(s.host, "unix:///default");
	cr_assert_str_eq(s.pull, "never");
	cr_assert_null(s.token);
	cr_assert_eq(s.retries, 3);
	cr_assert_eq(s.timeout, 60);
	cr_assert_eq(s.ratio, 0.5);
	cr_assert_eq(s.flag, 0);
	cr_assert_eq(s.tri, -1);
	cr_assert_str_eq(s.map, "{}");
	setenv("SBXS_TEST_HOST", "tcp://from-env:1", 1);
	cr_assert_eq(read_conf(NULL, 0, &s, &err), SBX_OK);
	cr_assert_str_eq(s.host, "tcp://from-env:1");
	setenv("SBXS_TEST_HOST", "", 1);
	cr_assert_eq(read_conf(NULL, 0, &s, &err), SBX_OK);
	cr_assert_str_eq(s.host, "unix:///default", "an empty variable counts as unset");
	unsetenv("SBXS_TEST_HOST");
}

Test(support, conf_reads_values_and_accepts_an_integer_for_a_float)
{
	static const test_value v[] = {
	    {"host", SBX_KEY_STRING, "tcp://x:2"}, {"pull", SBX_KEY_STRING, "always"},
	    {"retries", SBX_KEY_INT, "0"},         {"timeout", SBX_KEY_INT, "5"},
	    {"flag", SBX_KEY_BOOL, "true"},        {"tri", SBX_KEY_BOOL, "false"},
	    {"map", SBX_KEY_MAP, "{\"a\":1}"}};
	settings s;
	sbx_error err = {0};
	setenv("SBXS_TEST_HOST", "tcp://from-env:1", 1);
	cr_assert_eq(read_conf(v, SBXS_COUNT(v), &s, &err), SBX_OK, "%s", err.message);
	unsetenv("SBXS_TEST_HOST");
	cr_assert_str_eq(s.host, "tcp://x:2", "the key wins over the environment");
	cr_assert_str_eq(s.pull, "always");
	cr_assert_eq(s.retries, 0);
	cr_assert_eq(s.timeout, 5);
	cr_assert_eq(s.flag, 1);
	cr_assert_eq(s.tri, 0);
	cr_assert_str_eq(s.map, "{\"a\":1}");
}

Test(support, conf_names_the_key_its_value_and_what_is_allowed)
{
	static const struct {
		test_value v;
		const char *message;
	} cases[] = {
	    {{"pull", SBX_KEY_STRING, "sometimes"},
	     "t: 'pull' is 'sometimes'; it must be never, missing or always"},
	    {{"retries", SBX_KEY_INT, "21"}, "t: 'retries' is 21; it must be between 0 and 20"},
	    {{"retries", SBX_KEY_INT, "-1"}, "t: 'retries' is -1; it must be between 0 and 20"},
	    {{"timeout", SBX_KEY_FLOAT, "0"},
	     "t: 'timeout' is 0; it must be above 0 and at most 3600"},
	    {{"ratio", SBX_KEY_FLOAT, "1.5"}, "t: 'ratio' is 1.5; it must be between 0 and 1"},
	    {{"retries", SBX_KEY_STRING, "x"}, "'retries' has another type"},
	};
	for (size_t i = 0; i < SBXS_COUNT(cases); i++) {
		settings s;
		sbx_error err = {0};
		cr_assert_eq(read_conf(&cases[i].v, 1, &s, &err), SBX_E_CONFIG, "%zu", i);
		cr_assert_str_eq(err.message, cases[i].message);
	}
	static const test_value edge[] = {{"ratio", SBX_KEY_FLOAT, "0"},
					  {"timeout", SBX_KEY_FLOAT, "3600"}};
	settings s;
	cr_assert_eq(read_conf(edge, 2, &s, NULL), SBX_OK, "ranges are inclusive unless told");
}

static int registered;
static int t_register(sbx_registrar *reg, const sbx_plugin_desc *d)
{
	(void)reg;
	registered = d->struct_size == sizeof(*d) && d->n_keys == SBXS_COUNT(rows) &&
		     strcmp(d->keys[0].name, "host") == 0;
	return SBX_OK;
}

Test(support, register_gives_the_descriptor_its_keys_and_header)
{
	static sbx_config_key keys[SBXS_COUNT(rows)];
	sbx_host_api h = test_host;
	h.register_sandbox = t_register;
	sbx_plugin_desc d = {.alias = "t"};
	cr_assert_eq(sbxs_register(&h, NULL, &d, rows, keys, SBXS_COUNT(rows)), SBX_OK);
	cr_assert(registered);
	cr_assert_eq(sbxs_host, &h);
	sbxs_host_set(&test_host);
}

Test(support, conf_new_allocates_and_frees_on_refusal)
{
	static const test_value bad[] = {{"retries", SBX_KEY_INT, "99"}};
	sbx_config cfg = {.values = bad, .n = 1};
	void *st = (void *)&cfg;
	sbx_error err = {0};
	cr_assert_eq(sbxs_conf_new("t", &cfg, rows, SBXS_COUNT(rows), sizeof(settings), &st, &err),
		     SBX_E_CONFIG);
	cr_assert_eq(st, (void *)&cfg, "untouched on failure");
	cfg.n = 0;
	cr_assert_eq(sbxs_conf_new("t", &cfg, rows, SBXS_COUNT(rows), sizeof(settings), &st, &err),
		     SBX_OK);
	cr_assert_eq(((settings *)st)->retries, 3);
	free(st);
}

Test(support, conf_keys_come_from_the_same_rows)
{
	sbx_config_key keys[SBXS_COUNT(rows)];
	sbxs_conf_keys(rows, SBXS_COUNT(rows), keys);
	cr_assert_str_eq(keys[0].name, "host");
	cr_assert_str_eq(keys[0].help, "h");
	cr_assert_eq(keys[2].secret, 1);
	cr_assert_eq(keys[8].type, SBX_KEY_MAP);
}

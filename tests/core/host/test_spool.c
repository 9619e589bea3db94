/* The exec output spool: it names, makes and removes the call directory and builds the whole
 * result; files hold the bytes, display copies are exact (NexAU's marker and
 * character counting), `truncated` is set only when something was cut, bytes past
 * output_max_bytes are counted as dropped while head and tail stay exact. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static char state[200]; /* the state dir the spools make their call directories in */
static char calls[300]; /* the calls folder of the last spool's sandbox */
static char dir[600];   /* the last spool's call directory */
static int seq;

static sbx__policy policy(uint64_t threshold, uint64_t head, uint64_t tail, uint64_t max_bytes)
{
	sbx__policy p;
	memset(&p, 0, sizeof(p));
	p.output_char_threshold = threshold;
	p.truncate_head_chars = head;
	p.truncate_tail_chars = tail;
	p.output_max_bytes = max_bytes;
	return p;
}

/* A spool of sandbox "t:box-N" (a new N each time) whose command is `shell` or argv. */
static sbx__spool *open_spool(const sbx__policy *p, const char *shell, const char *const *argv)
{
	const char *base = getenv("SPOOL_TMP");
	snprintf(state, sizeof(state), "%s/spool-%d", base ? base : "/tmp", (int)getpid());
	char id[64];
	snprintf(id, sizeof(id), "t:box-%d", ++seq);
	snprintf(calls, sizeof(calls), "%s/calls/t%%3Abox-%d", state, seq);
	sbx__spool *sp = NULL;
	sbx_error err = {0};
	int rc = sbx__spool_open(state, id, shell, argv, p, &sp, &err);
	cr_assert_eq(rc, SBX_OK, "%s", err.message);
	/* The call directory is the only entry of the sandbox's calls folder. */
	DIR *d = opendir(calls);
	cr_assert_not_null(d, "%s", calls);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.') {
			snprintf(dir, sizeof(dir), "%s/%s", calls, e->d_name);
			n++;
		}
	closedir(d);
	cr_assert_eq(n, 1);
	return sp;
}

static sbx__spool *new_spool(const sbx__policy *p)
{
	return open_spool(p, "echo hi", NULL);
}

static sbx_exec_result *finish(sbx__spool *sp)
{
	sbx_exec_outcome oc = {.exit_code = 3, .signal = 0, .timed_out = 1, .oom_killed = 1};
	SBX_INIT_HEADER(oc);
	sbx_exec_result *res = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__spool_finish(sp, &oc, 1.5, &res, &err), SBX_OK, "%s", err.message);
	cr_assert_not_null(res);
	return res;
}

static void put(sbx__spool *sp, uint32_t stream, const char *data, size_t len)
{
	cr_assert_eq(sbx__spool_write(sp, stream, data, len), SBX_OK);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

Test(spool, small_output_is_whole_and_files_hold_it)
{
	sbx__policy p = policy(10000, 5000, 5000, 0);
	sbx__spool *sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "hello\n", 6);
	put(sp, SBX_STREAM_STDERR, "oops\n", 5);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->stdout_text_len, 6);
	cr_assert_str_eq(r->stdout_text, "hello\n");
	cr_assert_str_eq(r->stderr_text, "oops\n");
	cr_assert_eq(r->truncated, 0);
	cr_assert_eq(r->original_stdout_length, 6);
	cr_assert_eq(r->original_stderr_length, 5);
	cr_assert_eq(r->stdout_bytes, 6);
	cr_assert_eq(r->stdout_dropped, 0);
	cr_assert_str_eq(r->output_dir, dir);
	char want[700];
	snprintf(want, sizeof(want), "%s/stdout.txt", dir);
	cr_assert_str_eq(r->stdout_file, want);
	size_t n;
	char *f = slurp(r->stdout_file, &n);
	cr_assert_eq(n, 6);
	cr_assert_str_eq(f, "hello\n");
	free(f);
	snprintf(want, sizeof(want), "%s/command.txt", dir);
	f = slurp(want, &n);
	cr_assert_str_eq(f, "echo hi");
	free(f);
	struct stat stb;
	cr_assert_eq(stat(dir, &stb), 0);
	cr_assert_eq(stb.st_mode & 0777, 0700);
	sbx_exec_result_free(r);
}

Test(spool, empty_output)
{
	sbx__spool *sp = new_spool(NULL);
	sbx_exec_result *r = finish(sp);
	cr_assert_str_eq(r->stdout_text, "");
	cr_assert_eq(r->stdout_text_len, 0);
	cr_assert_eq(r->original_stdout_length, 0);
	cr_assert_eq(r->truncated, 0);
	sbx_exec_result_free(r);
}

Test(spool, exactly_threshold_is_not_cut)
{
	sbx__spool *sp = new_spool(NULL); /* NexAU defaults 10000/5000/5000 */
	char *s = repeat('x', 10000);
	put(sp, SBX_STREAM_STDOUT, s, 10000);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->truncated, 0);
	cr_assert_eq(r->stdout_text_len, 10000);
	cr_assert_eq(memcmp(r->stdout_text, s, 10000), 0);
	free(s);
	sbx_exec_result_free(r);
}

Test(spool, both_streams_long_but_under_threshold_each_is_not_truncated)
{
	/* NexAU flags this truncated with nothing cut; we do not. */
	sbx__spool *sp = new_spool(NULL);
	char *s = repeat('a', 6000);
	put(sp, SBX_STREAM_STDOUT, s, 6000);
	put(sp, SBX_STREAM_STDERR, s, 6000);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->truncated, 0);
	cr_assert_eq(r->stdout_text_len, 6000);
	cr_assert_eq(r->stderr_text_len, 6000);
	free(s);
	sbx_exec_result_free(r);
}

Test(spool, cut_uses_nexau_marker_with_thousands_separator)
{
	sbx__spool *sp = new_spool(NULL);
	char *h = repeat('h', 5000), *m = repeat('m', 15000), *t = repeat('t', 5000);
	put(sp, SBX_STREAM_STDOUT, h, 5000);
	put(sp, SBX_STREAM_STDOUT, m, 15000);
	put(sp, SBX_STREAM_STDOUT, t, 5000);
	sbx_exec_result *r = finish(sp);
	char *want = malloc(20000);
	int n = snprintf(
	    want, 20000,
	    "%s\n\n... [15,000 characters omitted] ...\n(Full output: %s/stdout.txt)\n\n%s", h, dir,
	    t);
	cr_assert_eq(r->truncated, 1);
	cr_assert_eq(r->stdout_text_len, (size_t)n);
	cr_assert_str_eq(r->stdout_text, want);
	cr_assert_eq(r->original_stdout_length, 25000);
	cr_assert_eq(r->stdout_bytes, 25000);
	cr_assert_str_eq(r->stderr_text, "");
	size_t flen;
	char *f = slurp(r->stdout_file, &flen);
	cr_assert_eq(flen, 25000);
	free(f);
	free(want);
	free(h);
	free(m);
	free(t);
	sbx_exec_result_free(r);
}

Test(spool, one_char_over_threshold_omits_one)
{
	sbx__spool *sp = new_spool(NULL);
	char *s = repeat('z', 10001);
	s[5000] = 'M';
	put(sp, SBX_STREAM_STDERR, s, 10001);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->truncated, 1);
	cr_assert_eq(r->original_stderr_length, 10001);
	char marker[700];
	snprintf(marker, sizeof(marker),
		 "\n\n... [1 characters omitted] ...\n(Full output: %s/stderr.txt)\n\n", dir);
	cr_assert_eq(r->stderr_text_len, 10000 + strlen(marker));
	cr_assert_eq(memcmp(r->stderr_text + 5000, marker, strlen(marker)), 0);
	cr_assert_null(memchr(r->stderr_text, 'M', r->stderr_text_len));
	free(s);
	sbx_exec_result_free(r);
}

Test(spool, characters_not_bytes_and_cut_never_splits_utf8)
{
	/* "é" is 2 bytes, "€" 3, "😀" 4: head 3 chars, tail 2 chars, threshold 5. */
	sbx__policy p = policy(5, 3, 2, 0);
	sbx__spool *sp = new_spool(&p);
	const char *text = "é€😀ab€😀é"; /* 8 characters */
	/* Feed one byte at a time so every sequence is split across chunks. */
	for (size_t i = 0; text[i]; i++)
		put(sp, SBX_STREAM_STDOUT, text + i, 1);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->original_stdout_length, 8);
	cr_assert_eq(r->stdout_bytes, strlen(text));
	char want[800];
	snprintf(want, sizeof(want),
		 "é€😀\n\n... [3 characters omitted] ...\n(Full output: %s/stdout.txt)\n\n😀é", dir);
	cr_assert_str_eq(r->stdout_text, want);
	cr_assert_eq(r->truncated, 1);
	sbx_exec_result_free(r);
}

Test(spool, invalid_utf8_and_nul_survive_and_count_one_char_per_byte)
{
	sbx__policy p = policy(100, 50, 50, 0);
	sbx__spool *sp = new_spool(&p);
	/* ff: invalid lead; 00: NUL; c3 28: broken pair (2 chars); ed a0 80: surrogate (3);
	 * c0 80: overlong (2); e2 82: truncated at the end (2). */
	static const char bytes[] = "\xff\x00"
				    "a\xc3\x28\xed\xa0\x80\xc0\x80\xe2\x82";
	size_t n = sizeof(bytes) - 1;
	put(sp, SBX_STREAM_STDOUT, bytes, n);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->original_stdout_length, 12);
	cr_assert_eq(r->stdout_text_len, n);
	cr_assert_eq(memcmp(r->stdout_text, bytes, n), 0);
	cr_assert_eq(r->stdout_text[n], '\0');
	cr_assert_eq(r->truncated, 0);
	size_t flen;
	char *f = slurp(r->stdout_file, &flen);
	cr_assert_eq(flen, n);
	cr_assert_eq(memcmp(f, bytes, n), 0);
	free(f);
	sbx_exec_result_free(r);
}

Test(spool, invalid_bytes_are_cut_as_single_characters)
{
	sbx__policy p = policy(4, 2, 2, 0);
	sbx__spool *sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "\xff\xfe\xfd\xfc\xfb", 5);
	sbx_exec_result *r = finish(sp);
	char want[800];
	int n = snprintf(want, sizeof(want),
			 "\xff\xfe\n\n... [1 characters omitted] ...\n(Full output: %s/stdout.txt)"
			 "\n\n\xfc\xfb",
			 dir);
	cr_assert_eq(r->stdout_text_len, (size_t)n);
	cr_assert_eq(memcmp(r->stdout_text, want, (size_t)n), 0);
	sbx_exec_result_free(r);
}

Test(spool, threshold_below_head_plus_tail_keeps_whole_text)
{
	/* Over the threshold but nothing could be omitted: whole text, not truncated. */
	sbx__policy p = policy(5, 4, 4, 0);
	sbx__spool *sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "abcdefgh", 8);
	sbx_exec_result *r = finish(sp);
	cr_assert_str_eq(r->stdout_text, "abcdefgh");
	cr_assert_eq(r->truncated, 0);
	sbx_exec_result_free(r);

	sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "abcdefghi", 9);
	r = finish(sp);
	char want[800];
	snprintf(want, sizeof(want),
		 "abcd\n\n... [1 characters omitted] ...\n(Full output: %s/stdout.txt)\n\nfghi",
		 dir);
	cr_assert_str_eq(r->stdout_text, want);
	cr_assert_eq(r->truncated, 1);
	sbx_exec_result_free(r);
}

Test(spool, threshold_above_head_plus_tail_keeps_whole_text_up_to_it)
{
	sbx__policy p = policy(20, 2, 2, 0);
	sbx__spool *sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "0123456789", 10);
	put(sp, SBX_STREAM_STDOUT, "abcdefghij", 10);
	sbx_exec_result *r = finish(sp);
	cr_assert_str_eq(r->stdout_text, "0123456789abcdefghij");
	cr_assert_eq(r->truncated, 0);
	sbx_exec_result_free(r);

	sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "0123456789abcdefghijK", 21);
	r = finish(sp);
	char want[800];
	snprintf(want, sizeof(want),
		 "01\n\n... [17 characters omitted] ...\n(Full output: %s/stdout.txt)\n\njK", dir);
	cr_assert_str_eq(r->stdout_text, want);
	sbx_exec_result_free(r);
}

Test(spool, zero_head_and_zero_tail)
{
	sbx__policy p = policy(3, 0, 0, 0);
	sbx__spool *sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "abcd", 4);
	sbx_exec_result *r = finish(sp);
	char want[800];
	snprintf(want, sizeof(want),
		 "\n\n... [4 characters omitted] ...\n(Full output: %s/stdout.txt)\n\n", dir);
	cr_assert_str_eq(r->stdout_text, want);
	sbx_exec_result_free(r);
}

Test(spool, byte_cap_drops_but_head_and_tail_stay_exact)
{
	sbx__policy p = policy(10, 3, 3, 8);
	sbx__spool *sp = new_spool(&p);
	put(sp, SBX_STREAM_STDOUT, "ABC", 3);
	put(sp, SBX_STREAM_STDOUT, "0123456789", 10);
	put(sp, SBX_STREAM_STDOUT, "XYZ", 3);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->stdout_bytes, 16);
	cr_assert_eq(r->stdout_dropped, 8);
	cr_assert_eq(r->original_stdout_length, 16);
	char want[800];
	snprintf(want, sizeof(want),
		 "ABC\n\n... [10 characters omitted] ...\n(Full output: %s/stdout.txt)\n\nXYZ",
		 dir);
	cr_assert_str_eq(r->stdout_text, want);
	size_t flen;
	char *f = slurp(r->stdout_file, &flen);
	cr_assert_eq(flen, 8);
	cr_assert_str_eq(f, "ABC01234");
	free(f);
	sbx_exec_result_free(r);
}

Test(spool, large_output_in_big_chunks_keeps_exact_tail)
{
	/* 32 MiB in 1 MiB chunks with a multi-byte character straddling each boundary. */
	sbx__policy p = policy(10000, 5000, 5000, 1024);
	sbx__spool *sp = new_spool(&p);
	size_t chunk = 1u << 20;
	char *buf = malloc(chunk);
	uint64_t chars = 0;
	for (int i = 0; i < 32; i++) {
		memset(buf, 'a' + (i % 26), chunk);
		/* "€" = e2 82 ac, split: e2 82 at the end of this chunk, ac at the next start. */
		size_t start = 0;
		if (i > 0) {
			buf[0] = (char)0xac;
			start = 1;
		}
		buf[chunk - 2] = (char)0xe2;
		buf[chunk - 1] = (char)0x82;
		chars += (chunk - 2 - start) + (i > 0 ? 1 : 0);
		put(sp, SBX_STREAM_STDOUT, buf, chunk);
	}
	put(sp, SBX_STREAM_STDOUT,
	    "\xac"
	    "END",
	    4);
	chars += 1 + 3;
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->original_stdout_length, chars);
	cr_assert_eq(r->stdout_bytes, 32u * chunk + 4);
	cr_assert_eq(r->stdout_dropped, 32u * chunk + 4 - 1024);
	/* Tail: the last 5000 characters are 4996 'f' ... then "€END". */
	const char *tail = r->stdout_text + r->stdout_text_len - (4996 + 3 + 3);
	for (int i = 0; i < 4996; i++)
		cr_assert_eq(tail[i], 'a' + (31 % 26));
	cr_assert_str_eq(tail + 4996, "\xe2\x82\xac"
				      "END");
	cr_assert_eq(r->stdout_text[0], 'a');
	cr_assert_eq(r->stdout_text[4999], 'a');
	cr_assert_eq(r->truncated, 1);
	free(buf);
	sbx_exec_result_free(r);
}

/* ---- the spool against a byte-at-a-time reference, on random output in random chunks */

/* Where the character starting at s[i] ends: a whole valid sequence is one character, any
 * other byte is one on its own. */
static size_t ref_char_end(const unsigned char *s, size_t n, size_t i)
{
	unsigned char b = s[i];
	size_t len = b < 0x80                 ? 1
		     : b >= 0xC2 && b <= 0xDF ? 2
		     : b >= 0xE0 && b <= 0xEF ? 3
		     : b >= 0xF0 && b <= 0xF4 ? 4
					      : 1;
	if (len == 1 || i + len > n)
		return i + 1;
	unsigned char lo = 0x80, hi = 0xBF;
	if (b == 0xE0)
		lo = 0xA0;
	else if (b == 0xED)
		hi = 0x9F;
	else if (b == 0xF0)
		lo = 0x90;
	else if (b == 0xF4)
		hi = 0x8F;
	if (s[i + 1] < lo || s[i + 1] > hi)
		return i + 1;
	for (size_t j = 2; j < len; j++)
		if ((s[i + j] & 0xC0) != 0x80)
			return i + 1;
	return i + len;
}

/* The display copy the spool must make of s: whole, or head + marker + tail. */
static char *ref_text(const unsigned char *s, size_t n, size_t thr, size_t head, size_t tail,
		      const char *path, size_t *chars, size_t *len)
{
	size_t *starts = malloc((n + 1) * sizeof(*starts)), c = 0;
	for (size_t i = 0; i < n; i = ref_char_end(s, n, i))
		starts[c++] = i;
	starts[c] = n;
	*chars = c;
	char *out = malloc(n + 200 + strlen(path));
	if (c <= thr || c <= head + tail) {
		memcpy(out, s, n);
		*len = n;
	} else {
		size_t o = starts[head];
		memcpy(out, s, o);
		char num[40], sep[60];
		snprintf(num, sizeof(num), "%zu", c - head - tail);
		size_t k = 0, nd = strlen(num);
		for (size_t i = 0; i < nd; i++) {
			if (i > 0 && (nd - i) % 3 == 0)
				sep[k++] = ',';
			sep[k++] = num[i];
		}
		sep[k] = '\0';
		o += (size_t)sprintf(out + o,
				     "\n\n... [%s characters omitted] ...\n(Full output: %s)\n\n",
				     sep, path);
		memcpy(out + o, s + starts[c - tail], n - starts[c - tail]);
		*len = o + n - starts[c - tail];
	}
	free(starts);
	return out;
}

static uint32_t rng = 12345;

static uint32_t next_rand(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

/* Random output: ASCII runs short and long, valid sequences, and every kind of broken one. */
static size_t random_output(unsigned char *s, size_t cap)
{
	static const char *const pieces[] = {"\xc3\xa9",
					     "\xe2\x82\xac",
					     "\xf0\x9f\x98\x80",
					     "\xff",
					     "\xc0\x80",
					     "\xe0\xa0\x80",
					     "\xe0\x80",
					     "\xed\xa0\x80",
					     "\xed\x9f\xbf",
					     "\xf4\x90\x80\x80",
					     "\xf4\x8f\xbf\xbf",
					     "\x80",
					     "\xe2\x82",
					     "\xf0\x9f\x98",
					     "\xc3",
					     "\x00",
					     "\xf5\x80"};
	size_t n = 0, want = next_rand() % cap;
	while (n < want) {
		size_t k = next_rand() % 4;
		if (k == 0) {
			size_t run = next_rand() % 5 == 0 ? next_rand() % 3000 : next_rand() % 40;
			for (size_t i = 0; i < run && n < cap; i++)
				s[n++] = (unsigned char)('a' + next_rand() % 26);
		} else {
			const char *p = pieces[next_rand() % (sizeof(pieces) / sizeof(pieces[0]))];
			size_t len = p[0] ? strlen(p) : 1;
			for (size_t i = 0; i < len && n < cap; i++)
				s[n++] = (unsigned char)p[i];
		}
	}
	return n;
}

Test(spool, random_output_in_random_chunks_matches_a_byte_at_a_time_reference)
{
	size_t cap = 60000;
	unsigned char *s = malloc(cap);
	for (int round = 0; round < 400; round++) {
		size_t n = random_output(s, round % 10 == 0 ? cap : 3000);
		size_t thr = next_rand() % 50, head = next_rand() % 30, tail = next_rand() % 30;
		if (round % 7 == 0)
			thr = 10000, head = 5000, tail = 5000;
		sbx__policy p = policy(thr, head, tail, 0);
		sbx__spool *sp = new_spool(&p);
		for (size_t o = 0; o < n;) {
			size_t k = next_rand() % 4 == 0 ? next_rand() % 20000 : next_rand() % 9;
			if (k > n - o)
				k = n - o;
			if (k)
				put(sp, SBX_STREAM_STDERR, (const char *)s + o, k);
			o += k;
		}
		sbx_exec_result *r = finish(sp);
		size_t chars, len;
		char *want = ref_text(s, n, thr, head, tail, r->stderr_file, &chars, &len);
		cr_assert_eq(r->original_stderr_length, chars, "round %d", round);
		cr_assert_eq(r->stderr_bytes, n, "round %d", round);
		cr_assert_eq(r->stderr_text_len, len, "round %d", round);
		cr_assert_eq(memcmp(r->stderr_text, want, len), 0, "round %d", round);
		cr_assert_eq(r->stderr_text[len], '\0', "round %d", round);
		cr_assert_eq(r->truncated, chars > thr && chars > head + tail ? 1 : 0, "round %d",
			     round);
		free(want);
		sbx_exec_result_free(r);
		char id[64];
		snprintf(id, sizeof(id), "t:box-%d", seq);
		sbx__spool_forget(state, id);
	}
	free(s);
}

Test(spool, bad_stream_is_inval)
{
	sbx__spool *sp = new_spool(NULL);
	cr_assert_eq(sbx__spool_write(sp, 3, "x", 1), SBX_E_INVAL);
	sbx_exec_result *r = finish(sp);
	sbx_exec_result_free(r);
}

Test(spool, uncreatable_dir_is_io_error)
{
	sbx__spool *sp = NULL;
	sbx_error err = {0};
	int rc = sbx__spool_open("/proc/sbx-no-such", "t:x", "x", NULL, NULL, &sp, &err);
	cr_assert_eq(rc, SBX_E_IO);
	cr_assert_null(sp);
	cr_assert(strstr(err.message,
			 "exec: cannot create call directory /proc/sbx-no-such/calls/t%3Ax/") ==
		      err.message,
		  "%s", err.message);
}

Test(spool, result_carries_the_outcome)
{
	sbx__spool *sp = new_spool(NULL);
	sbx_exec_result *r = finish(sp);
	cr_assert_eq(r->struct_size, sizeof(*r));
	cr_assert_eq(r->exit_code, 3);
	cr_assert_eq(r->signal, 0);
	cr_assert_eq(r->timed_out, 1);
	cr_assert_eq(r->oom_killed, 1);
	cr_assert_float_eq(r->duration, 1.5, 1e-9);
	cr_assert_null(r->job_id);
	sbx_exec_result_free(r);
}

Test(spool, argv_command_is_shell_quoted)
{
	const char *const argv[] = {"printf", "%s\n", "it's", NULL};
	sbx__spool *sp = open_spool(NULL, NULL, argv);
	sbx_exec_result *r = finish(sp);
	char want[900];
	snprintf(want, sizeof(want), "%s/command.txt", dir);
	size_t n;
	char *f = slurp(want, &n);
	cr_assert_str_eq(f, "'printf' '%s\n' 'it'\\''s'");
	free(f);
	sbx_exec_result_free(r);
}

Test(spool, failed_call_leaves_no_directory)
{
	sbx__spool *sp = new_spool(NULL);
	put(sp, SBX_STREAM_STDOUT, "partial\n", 8);
	sbx_error err = {0};
	sbx__set_error(&err, SBX_E_BACKEND, "t: exec: it broke");
	cr_assert_eq(sbx__spool_fail(sp, SBX_E_BACKEND, &err), SBX_E_BACKEND);
	cr_assert_str_eq(err.message, "t: exec: it broke");
	struct stat st;
	cr_assert_eq(stat(dir, &st), -1, "%s is still there", dir);
	cr_assert_eq(stat(calls, &st), -1, "the empty %s is still there", calls);
}

Test(spool, failed_call_keeps_the_other_calls)
{
	sbx__spool *first = new_spool(NULL);
	char first_dir[sizeof(dir)];
	snprintf(first_dir, sizeof(first_dir), "%s", dir);
	sbx_exec_result *r = finish(first);
	/* A second call of the same sandbox fails: only its own directory goes. */
	char id[64];
	snprintf(id, sizeof(id), "t:box-%d", seq);
	sbx__spool *sp = NULL;
	sbx_error err = {0};
	cr_assert_eq(sbx__spool_open(state, id, "false", NULL, NULL, &sp, &err), SBX_OK);
	cr_assert_eq(sbx__spool_fail(sp, SBX_E_TIMEOUT, &err), SBX_E_TIMEOUT);
	struct stat st;
	cr_assert_eq(stat(first_dir, &st), 0);
	cr_assert_str_eq(r->output_dir, first_dir);
	sbx_exec_result_free(r);
}

Test(spool, forget_removes_every_call_of_the_sandbox)
{
	sbx__spool *sp = new_spool(NULL);
	sbx_exec_result *r = finish(sp);
	char id[64];
	snprintf(id, sizeof(id), "t:box-%d", seq);
	sbx__spool_forget(state, id);
	struct stat st;
	cr_assert_eq(stat(calls, &st), -1, "%s is still there", calls);
	sbx_exec_result_free(r);
}

/* What a call's folder holds may be anything by the time the sandbox goes (the host user can
 * put things there): links are removed, never followed, and nested folders and special files
 * go with the rest. */
Test(spool, forget_removes_links_and_nested_folders_never_a_links_target)
{
	sbx__spool *sp = new_spool(NULL);
	sbx_exec_result *r = finish(sp);
	char outside[600], path[700], target[700];
	snprintf(outside, sizeof(outside), "%s/outside-%d", state, seq);
	cr_assert_eq(mkdir(outside, 0700), 0, "%s", strerror(errno));
	snprintf(target, sizeof(target), "%s/keep.txt", outside);
	FILE *f = fopen(target, "w");
	cr_assert_not_null(f);
	fputs("keep", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/to-dir", dir);
	cr_assert_eq(symlink(outside, path), 0);
	snprintf(path, sizeof(path), "%s/to-file", dir);
	cr_assert_eq(symlink(target, path), 0);
	snprintf(path, sizeof(path), "%s/a", dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/a/b", dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/a/b/fifo", dir);
	cr_assert_eq(mkfifo(path, 0600), 0);
	char id[64];
	snprintf(id, sizeof(id), "t:box-%d", seq);
	sbx__spool_forget(state, id);
	struct stat st;
	cr_assert_eq(stat(calls, &st), -1, "%s is still there", calls);
	cr_assert_eq(stat(target, &st), 0, "the link's target %s went too", target);
	cr_assert_eq(st.st_size, 4);
	unlink(target);
	rmdir(outside);
	sbx_exec_result_free(r);
}

Test(spool, job_result_has_the_job_and_empty_text)
{
	sbx_exec_result *r = NULL;
	cr_assert_eq(sbx__spool_job_result("0123456789ab@t:x", &r, NULL), SBX_OK);
	cr_assert_str_eq(r->job_id, "0123456789ab@t:x");
	cr_assert_str_eq(r->stdout_text, "");
	cr_assert_str_eq(r->stderr_text, "");
	cr_assert_null(r->output_dir);
	sbx_exec_result_free(r);
}

/* The folders under a call directory: missing levels are made from the nearest existing one
 * down, an existing path is no error, and a file in the way is named by its errno. */
Test(spool, mkdirs_makes_missing_levels_and_names_a_file_in_the_way)
{
	const char *base = getenv("SPOOL_TMP");
	char root[300], deep[400], file[400], under[500];
	snprintf(root, sizeof(root), "%s/mkdirs-%d", base ? base : "/tmp", (int)getpid());
	sbx__remove_tree(root);
	snprintf(deep, sizeof(deep), "%s/a/b/c/", root);
	cr_assert_eq(sbx__mkdirs(deep), 0);
	struct stat sb;
	snprintf(deep, sizeof(deep), "%s/a/b/c", root);
	cr_assert_eq(stat(deep, &sb), 0);
	cr_assert(S_ISDIR(sb.st_mode));
	cr_assert_eq(sb.st_mode & 0777, 0700);
	cr_assert_eq(sbx__mkdirs(deep), 0, "an existing folder is no error");
	snprintf(file, sizeof(file), "%s/a/file", root);
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f);
	fclose(f);
	snprintf(under, sizeof(under), "%s/x/y", file);
	cr_assert_eq(sbx__mkdirs(under), ENOTDIR);
	cr_assert_eq(sbx__mkdirs(file), 0, "EEXIST of a file is left to the caller's open");
	sbx__remove_tree(root);
}

/* One exec's output, from its call directory to its sbx_exec_result.
 *
 * The spool owns the per-call directory: it names it (<state dir>/calls/<sandbox id>/<time>-
 * <pid>-<n>), makes it with command.txt, stdout.txt and stderr.txt, removes it when the call
 * fails and removes a sandbox's folder of them when the sandbox is destroyed. It builds every
 * sbx_exec_result: the display copies, lengths and paths, and the outcome the plugin reported.
 *
 * Memory stays constant however much a command prints: every chunk goes straight to its file
 * (up to output_max_bytes per stream, the rest is counted as dropped), and only a bounded head
 * and a ring of the last bytes are kept in memory. Past the file write each byte is looked at
 * once, by a count that goes a word at a time, so output goes at the speed of the pipe.
 * Characters are counted the way NexAU counts a Python str: one per UTF-8 code point, and one
 * per byte that is not part of a valid sequence, so binary output has a well-defined length
 * and a cut never splits a sequence.
 *
 * A stream's display copy is the whole text when it has at most output_char_threshold
 * characters (or at most head + tail, when nothing could be omitted); otherwise the first
 * truncate_head_chars characters, NexAU's marker
 * "\n\n... [N characters omitted] ...\n(Full output: PATH)\n\n" (N with thousands separators,
 * PATH that stream's file), and the last truncate_tail_chars characters. Unlike NexAU each
 * stream is judged alone, nothing is cleaned, and `truncated` is set only when a cut happened. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define SPOOL_DEFAULT_THRESHOLD 10000u
#define SPOOL_DEFAULT_HEAD      5000u
#define SPOOL_DEFAULT_TAIL      5000u
/* Keeps the in-memory buffers sane whatever the config says (4 MiB characters each). */
#define SPOOL_MAX_CHARS (4u * 1024u * 1024u)

typedef struct utf8_dec {
	unsigned char pend[4]; /* bytes of an incomplete sequence */
	uint8_t npend;
	uint8_t need; /* length of the sequence pend[0] starts */
} utf8_dec;

/* A stream keeps bytes, not characters: its first head_cap bytes (where the first head_max
 * characters are) and a ring of its last ring_cap bytes (where the last tail_chars are, plus
 * a few bytes of slack for a sequence straddling the ring's start). Both start small and grow
 * to their caps only as output comes (most commands print a line or two, and 120 KB of fresh
 * buffers per call cost page faults and heap growth at rollout rates); the ring does not wrap
 * before it has all of ring_cap. Bytes are counted as
 * characters once, a word at a time, as they leave the ring; only the head and the ring are
 * split into characters, once, when the result is built. */
typedef struct spool_stream {
	int fd;
	char *path;
	uint64_t bytes;   /* written by the command */
	uint64_t stored;  /* in the file */
	uint64_t dropped; /* past output_max_bytes */
	unsigned char *head;
	size_t head_cap, head_len, head_room; /* room: allocated, up to head_cap */
	unsigned char *ring;
	size_t ring_cap, ring_start, ring_len, ring_room;
	uint64_t chars_before; /* characters completed before the ring's start */
	utf8_dec dec;          /* the decoder there */
} spool_stream;

struct sbx__spool {
	pthread_mutex_t lock;
	char *calls; /* the sandbox's folder of call directories */
	char *dir;   /* this call's, in it */
	int made;    /* dir was made (and is the spool's to remove) */
	size_t threshold, head_chars, tail_chars, head_max;
	uint64_t max_bytes;
	spool_stream st[2];
	int io_errno; /* first write failure, reported by finish */
	const char *io_stream;
};

static size_t clamp_chars(uint64_t v)
{
	return v > SPOOL_MAX_CHARS ? SPOOL_MAX_CHARS : (size_t)v;
}

static int write_all(int fd, const void *data, size_t len)
{
	const unsigned char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- UTF-8 splitting */

static size_t seq_len(unsigned char b)
{
	if (b < 0x80)
		return 1;
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF)
		return 3;
	if (b >= 0xF0 && b <= 0xF4)
		return 4;
	return 0;
}

/* Whether b may follow the pending bytes (no overlong forms, surrogates or > U+10FFFF). */
static int cont_ok(const utf8_dec *d, unsigned char b)
{
	if ((b & 0xC0) != 0x80)
		return 0;
	if (d->npend == 1) {
		switch (d->pend[0]) {
		case 0xE0:
			return b >= 0xA0;
		case 0xED:
			return b <= 0x9F;
		case 0xF0:
			return b >= 0x90;
		case 0xF4:
			return b <= 0x8F;
		default:
			break;
		}
	}
	return 1;
}

/* Takes byte b into the decoder. Returns how many characters it completed and sets *again
 * when b itself is still to be taken (it broke a pending sequence, whose bytes count one
 * character each). */
static unsigned take(utf8_dec *d, unsigned char b, int *again)
{
	*again = 0;
	if (d->npend) {
		if (cont_ok(d, b)) {
			d->pend[d->npend++] = b;
			if (d->npend < d->need)
				return 0;
			d->npend = 0;
			return 1;
		}
		unsigned n = d->npend;
		d->npend = 0;
		*again = 1;
		return n;
	}
	size_t len = seq_len(b);
	if (len <= 1)
		return 1;
	d->pend[0] = b;
	d->npend = 1;
	d->need = (uint8_t)len;
	return 0;
}

#define HIGH_BITS 0x8080808080808080ull

/* Counts the characters p completes, carrying an incomplete sequence in *d. ASCII, most of
 * any output, goes 32 bytes per step. */
static uint64_t count_chars(utf8_dec *d, const unsigned char *p, size_t n)
{
	uint64_t c = 0;
	size_t i = 0;
	while (i < n) {
		if (!d->npend) {
			size_t run = i;
			while (n - i >= 32) {
				uint64_t w[4];
				memcpy(w, p + i, sizeof(w));
				if ((w[0] | w[1] | w[2] | w[3]) & HIGH_BITS)
					break;
				i += 32;
			}
			while (n - i >= 8) {
				uint64_t w;
				memcpy(&w, p + i, sizeof(w));
				if (w & HIGH_BITS)
					break;
				i += 8;
			}
			while (i < n && p[i] < 0x80)
				i++;
			c += i - run;
			if (i == n)
				break;
		}
		int again;
		c += take(d, p[i], &again);
		i += again ? 0u : 1u;
	}
	return c;
}

/* Where the k-th character (from 0) decoded from p with the decoder d starts in p: 0 for a
 * sequence begun before p, n when p completes at most k (pending bytes at the end count one
 * character each). */
static size_t char_offset(utf8_dec d, const unsigned char *p, size_t n, uint64_t k)
{
	uint64_t e = 0;
	for (size_t i = 0;;) {
		/* A step completes characters of one byte each starting `pend` bytes before p[i]
		 * (a broken or flushed sequence), or one sequence that began there. */
		long long pend = d.npend;
		int again = 0;
		unsigned done;
		if (i < n) {
			done = take(&d, p[i], &again);
		} else {
			done = d.npend;
			d.npend = 0;
		}
		if (k < e + done) {
			long long at = (long long)i - pend + (long long)(k - e);
			return at > 0 ? (size_t)at : 0;
		}
		e += done;
		if (i == n)
			return n;
		i += again ? 0u : 1u;
	}
}

/* Drops the k oldest bytes of the ring, counting their characters. */
static void ring_drop(spool_stream *st, size_t k)
{
	if (k == 0)
		return;
	size_t first = st->ring_cap - st->ring_start;
	if (first > k)
		first = k;
	st->chars_before += count_chars(&st->dec, st->ring + st->ring_start, first);
	st->chars_before += count_chars(&st->dec, st->ring, k - first);
	st->ring_start = (st->ring_start + k) % st->ring_cap;
	st->ring_len -= k;
}

#define SPOOL_FIRST_ROOM 1024u

/* Grows *buf (room bytes, plus one for a NUL) to hold `need` bytes, doubling up to cap. */
static int grow(unsigned char **buf, size_t *room, size_t need, size_t cap)
{
	if (need <= *room)
		return 0;
	size_t n = *room ? *room : SPOOL_FIRST_ROOM;
	while (n < need)
		n = n > cap / 2 ? cap : n * 2;
	if (n > cap)
		n = cap;
	unsigned char *b = sbx__realloc(*buf, n + 1);
	if (!b)
		return -1;
	*buf = b;
	*room = n;
	return 0;
}

/* Keeps what the display copy may need of a chunk: the head's share and the ring's. -1 when
 * a buffer could not grow (nothing was kept). */
static int feed(spool_stream *st, const unsigned char *p, size_t n)
{
	size_t cap = st->ring_cap;
	size_t h = st->head_cap - st->head_len < n ? st->head_cap - st->head_len : n;
	if (grow(&st->head, &st->head_room, st->head_len + h, st->head_cap) != 0 ||
	    grow(&st->ring, &st->ring_room, st->ring_len + n > cap ? cap : st->ring_len + n, cap) !=
		0)
		return -1;
	if (h) {
		memcpy(st->head + st->head_len, p, h);
		st->head_len += h;
	}
	if (n >= cap) {
		ring_drop(st, st->ring_len);
		st->chars_before += count_chars(&st->dec, p, n - cap);
		if (cap)
			memcpy(st->ring, p + n - cap, cap);
		st->ring_start = 0;
		st->ring_len = cap;
		return 0;
	}
	if (st->ring_len + n > cap)
		ring_drop(st, st->ring_len + n - cap);
	size_t at = (st->ring_start + st->ring_len) % cap;
	size_t first = cap - at < n ? cap - at : n;
	memcpy(st->ring + at, p, first);
	memcpy(st->ring, p + first, n - first);
	st->ring_len += n;
	return 0;
}

/* <state_dir>/calls/<id>, the id percent-encoded but for [A-Za-z0-9._-] so each id gets a
 * distinct folder. */
static char *calls_dir(const char *state_dir, const char *id)
{
	char enc[SBX_ID_MAX * 3 + 1];
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)id; *p && o + 4 < sizeof(enc); p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-') {
			enc[o++] = (char)*p;
		} else {
			snprintf(enc + o, 4, "%%%02X", *p);
			o += 3;
		}
	}
	enc[o] = '\0';
	return sbx__asprintf("%s/calls/%s", state_dir, enc);
}

/* A call's own folder in its sandbox's: time, pid and a counter of this process. */
static char *call_dir(const char *calls)
{
	static uint64_t seq;
	uint64_t n = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	return sbx__asprintf("%s/%lld-%ld-%llu", calls, (long long)time(NULL), (long)getpid(),
			     (unsigned long long)n);
}

/* A shell-quoted rendering of argv for command.txt. */
static char *argv_text(const char *const *argv)
{
	size_t n = 1;
	for (size_t i = 0; argv[i]; i++) {
		n += 3;
		for (const char *p = argv[i]; *p; p++)
			n += *p == '\'' ? 4 : 1;
	}
	char *s = sbx__alloc(n);
	if (!s)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; argv[i]; i++) {
		if (i)
			s[o++] = ' ';
		s[o++] = '\'';
		for (const char *p = argv[i]; *p; p++) {
			if (*p == '\'') {
				memcpy(s + o, "'\\''", 4);
				o += 4;
			} else {
				s[o++] = *p;
			}
		}
		s[o++] = '\'';
	}
	s[o] = '\0';
	return s;
}

/* Writes `text` to dir/name (mode 0600). */
static int write_text(const char *dir, const char *name, const char *text, sbx_error *err)
{
	char *path = sbx__asprintf("%s/%s", dir, name);
	if (!path)
		return sbx__nomem(err, "exec");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int e = fd < 0 ? errno : write_all(fd, text, strlen(text));
	if (fd >= 0 && close(fd) != 0 && !e)
		e = errno;
	int rc = e ? sbx__set_error(err, SBX_E_IO, "exec: cannot write %s: %s", path, strerror(e))
		   : SBX_OK;
	sbx__free(path);
	return rc;
}

static void take_policy(struct sbx__spool *sp, const sbx__policy *policy)
{
	sp->threshold =
	    clamp_chars(policy ? policy->output_char_threshold : SPOOL_DEFAULT_THRESHOLD);
	sp->head_chars = clamp_chars(policy ? policy->truncate_head_chars : SPOOL_DEFAULT_HEAD);
	sp->tail_chars = clamp_chars(policy ? policy->truncate_tail_chars : SPOOL_DEFAULT_TAIL);
	sp->max_bytes = policy ? policy->output_max_bytes : 0;
	sp->head_max = sp->head_chars > sp->threshold ? sp->head_chars : sp->threshold;
}

/* The stream's file (empty) and its head and tail buffers. */
static int open_stream(struct sbx__spool *sp, spool_stream *st, const char *name, sbx_error *err)
{
	st->path = sbx__asprintf("%s/%s", sp->dir, name);
	/* A character is at most 4 bytes; the ring has room for the last tail_chars, and for
	 * 3 bytes of one begun before them. Neither is zeroed: only bytes written are read. */
	st->head_cap = sp->head_max * 4;
	st->ring_cap = sp->tail_chars ? sp->tail_chars * 4 + 8 : 0;
	if (!st->path || grow(&st->head, &st->head_room, 1, st->head_cap) != 0 ||
	    grow(&st->ring, &st->ring_room, 1, st->ring_cap) != 0)
		return sbx__nomem(err, "exec");
	st->fd = open(st->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (st->fd < 0)
		return sbx__set_error(err, SBX_E_IO, "exec: cannot create %s: %s", st->path,
				      strerror(errno));
	return SBX_OK;
}

/* Names, makes and fills the call directory. */
static int make_call_dir(struct sbx__spool *sp, const char *state_dir, const char *id,
			 const char *command, sbx_error *err)
{
	sp->calls = calls_dir(state_dir, id);
	sp->dir = sp->calls ? call_dir(sp->calls) : NULL;
	if (!sp->dir)
		return sbx__nomem(err, "exec");
	int e = sbx__mkdirs(sp->dir);
	if (e)
		return sbx__set_error(err, SBX_E_IO, "exec: cannot create call directory %s: %s",
				      sp->dir, strerror(e));
	sp->made = 1;
	int rc = open_stream(sp, &sp->st[0], "stdout.txt", err);
	if (rc == SBX_OK)
		rc = open_stream(sp, &sp->st[1], "stderr.txt", err);
	if (rc == SBX_OK)
		rc = write_text(sp->dir, "command.txt", command, err);
	return rc;
}

int sbx__spool_open(const char *state_dir, const char *id, const char *shell,
		    const char *const *argv, const sbx__policy *policy, sbx__spool **out,
		    sbx_error *err)
{
	*out = NULL;
	struct sbx__spool *sp = sbx__calloc(1, sizeof(*sp));
	if (!sp)
		return sbx__nomem(err, "exec");
	sp->st[0].fd = sp->st[1].fd = -1;
	if (pthread_mutex_init(&sp->lock, NULL) != 0) {
		sbx__free(sp);
		return sbx__set_error(err, SBX_E_NOMEM, "exec: cannot create a mutex");
	}
	take_policy(sp, policy);
	char *command = shell ? sbx__strdup(shell) : argv_text(argv);
	int rc = command ? make_call_dir(sp, state_dir, id, command, err) : sbx__nomem(err, "exec");
	sbx__free(command);
	if (rc != SBX_OK) {
		sbx__spool_fail(sp, rc, NULL);
		return rc;
	}
	*out = sp;
	return SBX_OK;
}

void sbx__spool_forget(const char *state_dir, const char *id)
{
	char *calls = calls_dir(state_dir, id);
	if (calls)
		sbx__remove_tree(calls);
	sbx__free(calls);
}

int sbx__spool_write(void *spool, uint32_t stream, const void *data, size_t len)
{
	struct sbx__spool *sp = spool;
	if (!sp || (stream != SBX_STREAM_STDOUT && stream != SBX_STREAM_STDERR) || (!data && len))
		return SBX_E_INVAL;
	if (len == 0)
		return SBX_OK;
	spool_stream *st = &sp->st[stream == SBX_STREAM_STDOUT ? 0 : 1];
	int rc = SBX_OK;
	pthread_mutex_lock(&sp->lock);
	st->bytes += len;
	size_t keep = len;
	if (sp->max_bytes) {
		uint64_t room = sp->max_bytes > st->stored ? sp->max_bytes - st->stored : 0;
		if (room < keep)
			keep = (size_t)room;
	}
	st->dropped += len - keep;
	if (keep && st->fd >= 0) {
		int e = write_all(st->fd, data, keep);
		if (e) {
			if (!sp->io_errno) {
				sp->io_errno = e;
				sp->io_stream = stream == SBX_STREAM_STDOUT ? "stdout" : "stderr";
			}
			rc = SBX_E_IO;
		} else {
			st->stored += keep;
		}
	}
	if (feed(st, data, len) != 0)
		rc = SBX_E_NOMEM;
	pthread_mutex_unlock(&sp->lock);
	return rc;
}

size_t sbx__spool_head(sbx__spool *sp, uint32_t stream, char *buf, size_t cap)
{
	if (cap == 0)
		return 0;
	const spool_stream *st = &sp->st[stream == SBX_STREAM_STDOUT ? 0 : 1];
	pthread_mutex_lock(&sp->lock);
	size_t n = st->head_len < cap - 1 ? st->head_len : cap - 1;
	if (n)
		memcpy(buf, st->head, n);
	pthread_mutex_unlock(&sp->lock);
	buf[n] = '\0';
	return n;
}

/* Formats v with thousands separators, as Python's "{:,}". */
static void format_thousands(uint64_t v, char *buf, size_t cap)
{
	char digits[32];
	int n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	size_t o = 0;
	for (int i = 0; i < n && o + 2 < cap; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
}

/* A stream once its command is done: the ring in order, its characters, and the totals. */
typedef struct stream_end {
	unsigned char *ring; /* the last ring_len bytes, in order */
	uint64_t ring_chars;
	uint64_t chars;
} stream_end;

static int stream_end_make(const spool_stream *st, stream_end *end)
{
	end->ring = sbx__alloc(st->ring_len + 1);
	if (!end->ring)
		return SBX_E_NOMEM;
	size_t first = st->ring_cap - st->ring_start < st->ring_len ? st->ring_cap - st->ring_start
								    : st->ring_len;
	if (first)
		memcpy(end->ring, st->ring + st->ring_start, first);
	memcpy(end->ring + first, st->ring, st->ring_len - first);
	utf8_dec d = st->dec;
	end->ring_chars = count_chars(&d, end->ring, st->ring_len) + d.npend;
	end->chars = st->chars_before + end->ring_chars;
	return SBX_OK;
}

/* head[0, head_bytes) + middle + the ring from its character `from` to its end. */
static int join_text(const spool_stream *st, const stream_end *end, size_t head_bytes,
		     const char *middle, uint64_t from, char **text, size_t *text_len)
{
	size_t mlen = middle ? strlen(middle) : 0;
	size_t at = char_offset(st->dec, end->ring, st->ring_len, from);
	size_t n = head_bytes + mlen + (st->ring_len - at);
	char *s = sbx__alloc(n + 1);
	if (!s)
		return SBX_E_NOMEM;
	memcpy(s, st->head, head_bytes);
	if (mlen)
		memcpy(s + head_bytes, middle, mlen);
	memcpy(s + head_bytes + mlen, end->ring + at, st->ring_len - at);
	s[n] = '\0';
	*text = s;
	*text_len = n;
	return SBX_OK;
}

static int display_copy(struct sbx__spool *sp, spool_stream *st, const stream_end *end, char **text,
			size_t *text_len, int *cut)
{
	static const utf8_dec fresh;
	uint64_t c = end->chars;
	*cut = c > sp->threshold && c > (uint64_t)sp->head_chars + sp->tail_chars;
	if (!*cut) {
		/* All of it is in the head, or the head's head_max characters and the rest in the
		 * ring (at most tail_chars: they do not reach back to where it starts). */
		if (c <= sp->head_max)
			return join_text(st, end, st->head_len, NULL, end->ring_chars, text,
					 text_len);
		size_t hb = char_offset(fresh, st->head, st->head_len, sp->head_max);
		return join_text(st, end, hb, NULL, end->ring_chars - (c - sp->head_max), text,
				 text_len);
	}
	char omitted[40];
	format_thousands(c - sp->head_chars - sp->tail_chars, omitted, sizeof(omitted));
	char *marker = sbx__asprintf("\n\n... [%s characters omitted] ...\n(Full output: %s)\n\n",
				     omitted, st->path);
	if (!marker)
		return SBX_E_NOMEM;
	size_t hb = char_offset(fresh, st->head, st->head_len, sp->head_chars);
	int rc = join_text(st, end, hb, marker, end->ring_chars - sp->tail_chars, text, text_len);
	sbx__free(marker);
	return rc;
}

/* Closes both files; SBX_E_IO in err when storing output failed. */
static int close_files(struct sbx__spool *sp, sbx_error *err)
{
	pthread_mutex_lock(&sp->lock);
	for (int i = 0; i < 2; i++) {
		spool_stream *st = &sp->st[i];
		if (st->fd >= 0) {
			if (close(st->fd) != 0 && !sp->io_errno) {
				sp->io_errno = errno;
				sp->io_stream = i == 0 ? "stdout" : "stderr";
			}
			st->fd = -1;
		}
	}
	pthread_mutex_unlock(&sp->lock);
	if (sp->io_errno)
		return sbx__set_error(err, SBX_E_IO, "exec: cannot store %s in %s: %s",
				      sp->io_stream, sp->dir, strerror(sp->io_errno));
	return SBX_OK;
}

static void spool_free(struct sbx__spool *sp)
{
	for (int i = 0; i < 2; i++) {
		if (sp->st[i].fd >= 0)
			close(sp->st[i].fd);
		sbx__free(sp->st[i].path);
		sbx__free(sp->st[i].head);
		sbx__free(sp->st[i].ring);
	}
	sbx__free(sp->calls);
	sbx__free(sp->dir);
	pthread_mutex_destroy(&sp->lock);
	sbx__free(sp);
}

/* The display copies, counts and paths of both streams into res. */
static int fill_output(struct sbx__spool *sp, sbx_exec_result *res)
{
	int cut[2] = {0, 0};
	stream_end end[2] = {{0}, {0}};
	int rc = SBX_OK;
	for (int i = 0; i < 2 && rc == SBX_OK; i++) {
		rc = stream_end_make(&sp->st[i], &end[i]);
		if (rc == SBX_OK)
			rc = display_copy(
			    sp, &sp->st[i], &end[i], i == 0 ? &res->stdout_text : &res->stderr_text,
			    i == 0 ? &res->stdout_text_len : &res->stderr_text_len, &cut[i]);
	}
	sbx__free(end[0].ring);
	sbx__free(end[1].ring);
	if (rc != SBX_OK)
		return rc;
	res->output_dir = sbx__strdup(sp->dir);
	res->stdout_file = sbx__strdup(sp->st[0].path);
	res->stderr_file = sbx__strdup(sp->st[1].path);
	if (!res->output_dir || !res->stdout_file || !res->stderr_file)
		return SBX_E_NOMEM;
	res->truncated = (cut[0] || cut[1]) ? 1u : 0u;
	res->original_stdout_length = end[0].chars;
	res->original_stderr_length = end[1].chars;
	res->stdout_bytes = sp->st[0].bytes;
	res->stderr_bytes = sp->st[1].bytes;
	res->stdout_dropped = sp->st[0].dropped;
	res->stderr_dropped = sp->st[1].dropped;
	return SBX_OK;
}

int sbx__spool_finish(sbx__spool *sp, const sbx_exec_outcome *oc, double duration,
		      sbx_exec_result **out, sbx_error *err)
{
	*out = NULL;
	int rc = close_files(sp, err);
	sbx_exec_result *res = rc == SBX_OK ? sbx__calloc(1, sizeof(*res)) : NULL;
	if (rc == SBX_OK && (!res || fill_output(sp, res) != SBX_OK))
		rc = sbx__nomem(err, "exec");
	if (rc != SBX_OK) {
		sbx_exec_result_free(res);
		return sbx__spool_fail(sp, rc, err);
	}
	SBX_INIT_HEADER(*res);
	res->exit_code = oc->exit_code;
	res->signal = oc->signal;
	res->timed_out = oc->timed_out ? 1u : 0u;
	res->oom_killed = oc->oom_killed ? 1u : 0u;
	res->duration = duration;
	spool_free(sp);
	*out = res;
	return SBX_OK;
}

int sbx__spool_fail(sbx__spool *sp, int rc, sbx_error *err)
{
	sbx_error io = {0};
	/* A spool failure (a full disk) is the more useful message. */
	if (close_files(sp, &io) != SBX_OK)
		rc = sbx__set_error(err, SBX_E_IO, "%s", io.message);
	/* Nothing to show for a call that did not run; keep the sandbox's folder tidy. */
	if (sp->made) {
		sbx__remove_tree(sp->dir);
		rmdir(sp->calls);
	}
	spool_free(sp);
	return rc;
}

int sbx__spool_job_result(const char *job_id, sbx_exec_result **out, sbx_error *err)
{
	sbx_exec_result *res = sbx__calloc(1, sizeof(*res));
	if (res) {
		SBX_INIT_HEADER(*res);
		res->job_id = sbx__strdup(job_id);
		res->stdout_text = sbx__strdup("");
		res->stderr_text = sbx__strdup("");
	}
	if (!res || !res->job_id || !res->stdout_text || !res->stderr_text) {
		sbx_exec_result_free(res);
		return sbx__nomem(err, "exec");
	}
	*out = res;
	return SBX_OK;
}

void sbx_exec_result_free(sbx_exec_result *res)
{
	if (!res)
		return;
	sbx__free(res->stdout_text);
	sbx__free(res->stderr_text);
	sbx__free(res->output_dir);
	sbx__free(res->stdout_file);
	sbx__free(res->stderr_file);
	sbx__free(res->job_id);
	sbx__free(res);
}

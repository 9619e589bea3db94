/* Frames and payload fields of the runner's wire protocol (wire.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "wire.h"

#define NULL_STR  0xffffffffu
#define MAX_DEPTH 64 /* config trees nest no deeper; a deeper one is malformed */

int64_t sbx__wire_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- writing */

static unsigned char *room(sbx__wbuf *b, size_t n)
{
	if (b->oom)
		return NULL;
	if (n > SIZE_MAX / 2 - b->len) {
		b->oom = 1;
		return NULL;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		unsigned char *p = sbx__realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
	}
	unsigned char *at = b->p + b->len;
	b->len += n;
	return at;
}

static void put(sbx__wbuf *b, const void *p, size_t n)
{
	unsigned char *at = room(b, n);
	if (at && n)
		memcpy(at, p, n);
}

void sbx__wput_u32(sbx__wbuf *b, uint32_t v)
{
	put(b, &v, sizeof(v));
}

void sbx__wput_u64(sbx__wbuf *b, uint64_t v)
{
	put(b, &v, sizeof(v));
}

void sbx__wput_i64(sbx__wbuf *b, int64_t v)
{
	put(b, &v, sizeof(v));
}

void sbx__wput_str(sbx__wbuf *b, const char *s)
{
	if (!s) {
		sbx__wput_u32(b, NULL_STR);
		return;
	}
	size_t n = strlen(s);
	if (n >= NULL_STR) {
		b->oom = 1;
		return;
	}
	sbx__wput_u32(b, (uint32_t)n);
	put(b, s, n + 1);
}

void sbx__wput_bytes(sbx__wbuf *b, const void *p, size_t n)
{
	sbx__wput_u64(b, (uint64_t)n);
	put(b, p, n);
}

void sbx__wput_raw(sbx__wbuf *b, const void *p, size_t n)
{
	put(b, p, n);
}

void sbx__wput_kvs(sbx__wbuf *b, const sbx_kv *kv, uint32_t n)
{
	sbx__wput_u32(b, kv ? n : 0);
	for (uint32_t i = 0; kv && i < n; i++) {
		sbx__wput_str(b, kv[i].key);
		sbx__wput_str(b, kv[i].value);
	}
}

void sbx__wput_info(sbx__wbuf *b, const sbx_file_info *fi)
{
	char name[sizeof(fi->name)];
	memcpy(name, fi->name, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	sbx__wput_u32(b, fi->kind);
	sbx__wput_u32(b, fi->mode);
	sbx__wput_u64(b, fi->size);
	sbx__wput_i64(b, fi->mtime);
	sbx__wput_str(b, name);
}

void sbx__wput_node(sbx__wbuf *b, const sbx__node *n)
{
	if (!n) {
		sbx__wput_u32(b, 0);
		return;
	}
	sbx__wput_u32(b, (uint32_t)n->kind);
	sbx__wput_u32(b, (uint32_t)n->quoted);
	sbx__wput_u32(b, (uint32_t)n->line);
	sbx__wput_str(b, n->scalar);
	sbx__wput_str(b, n->raw);
	sbx__wput_str(b, n->file);
	sbx__wput_u64(b, n->kind == SBX__NODE_SCALAR ? 0 : (uint64_t)n->n);
	for (size_t i = 0; n->kind != SBX__NODE_SCALAR && i < n->n; i++) {
		if (n->kind == SBX__NODE_MAP)
			sbx__wput_str(b, n->keys[i]);
		sbx__wput_node(b, n->items[i]);
	}
}

void sbx__wbuf_free(sbx__wbuf *b)
{
	sbx__free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- reading */

static const unsigned char *take(sbx__rbuf *r, size_t n)
{
	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return NULL;
	}
	const unsigned char *at = r->p + r->off;
	r->off += n;
	return at;
}

uint32_t sbx__rget_u32(sbx__rbuf *r)
{
	uint32_t v = 0;
	const unsigned char *at = take(r, sizeof(v));
	if (at)
		memcpy(&v, at, sizeof(v));
	return v;
}

uint64_t sbx__rget_u64(sbx__rbuf *r)
{
	uint64_t v = 0;
	const unsigned char *at = take(r, sizeof(v));
	if (at)
		memcpy(&v, at, sizeof(v));
	return v;
}

int64_t sbx__rget_i64(sbx__rbuf *r)
{
	int64_t v = 0;
	const unsigned char *at = take(r, sizeof(v));
	if (at)
		memcpy(&v, at, sizeof(v));
	return v;
}

const char *sbx__rget_str(sbx__rbuf *r)
{
	uint32_t n = sbx__rget_u32(r);
	if (r->bad || n == NULL_STR)
		return NULL;
	const unsigned char *at = take(r, (size_t)n + 1);
	if (!at)
		return NULL;
	if (at[n] != '\0' || memchr(at, '\0', n) != NULL) {
		r->bad = 1;
		return NULL;
	}
	return (const char *)at;
}

const void *sbx__rget_bytes(sbx__rbuf *r, size_t *n)
{
	uint64_t len = sbx__rget_u64(r);
	*n = 0;
	if (r->bad || len > r->len - r->off) {
		r->bad = 1;
		return NULL;
	}
	*n = (size_t)len;
	return take(r, (size_t)len);
}

int sbx__rget_kvs(sbx__rbuf *r, sbx_kv **kv, uint32_t *n)
{
	*kv = NULL;
	*n = 0;
	uint32_t count = sbx__rget_u32(r);
	/* Each pair takes at least 10 bytes: a count past that is malformed, not a big alloc. */
	if (r->bad || count > (r->len - r->off) / 10) {
		r->bad = 1;
		return SBX_E_INVAL;
	}
	if (count == 0)
		return SBX_OK;
	sbx_kv *v = sbx__calloc(count, sizeof(*v));
	if (!v)
		return SBX_E_NOMEM;
	for (uint32_t i = 0; i < count; i++) {
		v[i].key = sbx__rget_str(r);
		v[i].value = sbx__rget_str(r);
	}
	if (r->bad) {
		sbx__free(v);
		return SBX_E_INVAL;
	}
	*kv = v;
	*n = count;
	return SBX_OK;
}

void sbx__rget_info(sbx__rbuf *r, sbx_file_info *fi)
{
	memset(fi, 0, sizeof(*fi));
	SBX_INIT_HEADER(*fi);
	fi->kind = sbx__rget_u32(r);
	fi->mode = sbx__rget_u32(r);
	fi->size = sbx__rget_u64(r);
	fi->mtime = sbx__rget_i64(r);
	const char *name = sbx__rget_str(r);
	if (name && strlen(name) < sizeof(fi->name))
		memcpy(fi->name, name, strlen(name) + 1);
	else
		r->bad = 1;
}

static char *dup_or_null(sbx__rbuf *r, const char *s, int *oom)
{
	if (r->bad || !s)
		return NULL;
	char *d = sbx__strdup(s);
	if (!d)
		*oom = 1;
	return d;
}

static int get_node(sbx__rbuf *r, int depth, sbx__node **out)
{
	*out = NULL;
	uint32_t kind = sbx__rget_u32(r);
	if (r->bad)
		return SBX_E_INVAL;
	if (kind == 0)
		return SBX_OK;
	if (depth > MAX_DEPTH ||
	    (kind != SBX__NODE_SCALAR && kind != SBX__NODE_MAP && kind != SBX__NODE_LIST))
		return (r->bad = 1, SBX_E_INVAL);
	int oom = 0;
	sbx__node *n = sbx__calloc(1, sizeof(*n));
	if (!n)
		return SBX_E_NOMEM;
	n->kind = (int)kind;
	n->quoted = (int)sbx__rget_u32(r);
	n->line = (int)sbx__rget_u32(r);
	n->scalar = dup_or_null(r, sbx__rget_str(r), &oom);
	n->raw = dup_or_null(r, sbx__rget_str(r), &oom);
	n->file = dup_or_null(r, sbx__rget_str(r), &oom);
	uint64_t count = sbx__rget_u64(r);
	/* Each item takes at least 4 bytes. */
	if (r->bad || oom || count > (r->len - r->off) / 4)
		goto fail;
	if (count) {
		n->items = sbx__calloc((size_t)count, sizeof(*n->items));
		if (kind == SBX__NODE_MAP)
			n->keys = sbx__calloc((size_t)count, sizeof(*n->keys));
		if (!n->items || (kind == SBX__NODE_MAP && !n->keys)) {
			oom = 1;
			goto fail;
		}
	}
	for (uint64_t i = 0; i < count; i++) {
		n->n++;
		if (kind == SBX__NODE_MAP) {
			n->keys[i] = dup_or_null(r, sbx__rget_str(r), &oom);
			if (!n->keys[i]) {
				r->bad = !oom;
				goto fail;
			}
		}
		int rc = get_node(r, depth + 1, &n->items[i]);
		if (rc != SBX_OK) {
			oom = rc == SBX_E_NOMEM;
			goto fail;
		}
	}
	*out = n;
	return SBX_OK;
fail:
	sbx__node_free(n);
	if (!oom)
		r->bad = 1;
	return oom ? SBX_E_NOMEM : SBX_E_INVAL;
}

int sbx__rget_node(sbx__rbuf *r, sbx__node **out)
{
	return get_node(r, 0, out);
}

/* ---- frames */

/* Waits until fd can take a packet or the deadline passes. */
static int wait_writable(int fd, int64_t deadline_ms)
{
	for (;;) {
		int wait = -1;
		if (deadline_ms >= 0) {
			int64_t left = deadline_ms - sbx__wire_now_ms();
			if (left <= 0)
				return ETIMEDOUT;
			wait = left > 60000 ? 60000 : (int)left;
		}
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int n = poll(&p, 1, wait);
		if (n > 0)
			return p.revents & (POLLERR | POLLHUP | POLLNVAL) && !(p.revents & POLLOUT)
				   ? EPIPE
				   : 0;
		if (n < 0 && errno != EINTR)
			return errno;
	}
}

int sbx__wire_send(int fd, uint32_t type, uint32_t flags, uint64_t call, const void *payload,
		   size_t len, int64_t deadline_ms)
{
	const unsigned char *p = payload;
	size_t off = 0;
	do {
		size_t n = len - off < SBX__WIRE_CHUNK ? len - off : SBX__WIRE_CHUNK;
		sbx__frame_hdr h = {.type = type, .flags = flags, .call = call};
		if (off + n < len)
			h.flags |= SBX__WIRE_MORE;
		struct iovec iov[2] = {{.iov_base = &h, .iov_len = sizeof(h)},
				       {.iov_base = (void *)(p ? p + off : NULL), .iov_len = n}};
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = n ? 2 : 1};
		for (;;) {
			ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w >= 0)
				break;
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return errno == ECONNRESET || errno == ENOTCONN ? EPIPE : errno;
			int e = wait_writable(fd, deadline_ms);
			if (e)
				return e;
		}
		off += n;
	} while (off < len);
	return 0;
}

long sbx__wire_recv(int fd, sbx__frame_hdr *h, void *buf, int dontwait)
{
	struct iovec iov[2] = {{.iov_base = h, .iov_len = sizeof(*h)},
			       {.iov_base = buf, .iov_len = SBX__WIRE_CHUNK}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
	ssize_t n;
	do
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | (dontwait ? MSG_DONTWAIT : 0));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -(long)errno;
	if (n == 0) {
		memset(h, 0, sizeof(*h));
		return 0;
	}
	if ((m.msg_flags & MSG_TRUNC) || (size_t)n < sizeof(*h) || h->type == 0)
		return -EPROTO;
	return (long)((size_t)n - sizeof(*h));
}

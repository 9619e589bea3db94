/* Growable byte buffers over host->alloc. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sbx/support/buf.h>
#include <sbx/support/host.h>

int sbxs_buf_reserve(sbxs_buf *b, size_t more)
{
	if (more > SIZE_MAX - b->len - 1)
		return SBX_E_NOMEM;
	size_t need = b->len + more + 1;
	if (need <= b->cap)
		return SBX_OK;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	char *d = sbxs_host->realloc(b->data, cap);
	if (!d)
		return SBX_E_NOMEM;
	if (!b->data)
		d[0] = '\0';
	b->data = d;
	b->cap = cap;
	return SBX_OK;
}

int sbxs_buf_add(sbxs_buf *b, const void *data, size_t len)
{
	if (sbxs_buf_reserve(b, len) != SBX_OK)
		return SBX_E_NOMEM;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return SBX_OK;
}

int sbxs_buf_adds(sbxs_buf *b, const char *s)
{
	return sbxs_buf_add(b, s, strlen(s));
}

int sbxs_buf_addf(sbxs_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || sbxs_buf_reserve(b, (size_t)n) != SBX_OK)
		return SBX_E_NOMEM;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return SBX_OK;
}

void sbxs_buf_drop(sbxs_buf *b, size_t n)
{
	if (n >= b->len) {
		sbxs_buf_clear(b);
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
	b->data[b->len] = '\0';
}

void sbxs_buf_clear(sbxs_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void sbxs_buf_free(sbxs_buf *b)
{
	sbxs_host->free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void sbxs_buf_wipe(sbxs_buf *b)
{
	if (b->data)
		explicit_bzero(b->data, b->cap);
	sbxs_buf_free(b);
}

char *sbxs_buf_take(sbxs_buf *b, size_t *len)
{
	if (!b->data && sbxs_buf_reserve(b, 0) != SBX_OK)
		return NULL;
	char *d = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}

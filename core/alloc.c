/* The library's allocator: malloc by default, replaceable (sbx_set_allocator) so tests can
 * fail allocation N and check that every path maps it to SBX_E_NOMEM. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void *(*alloc_fn)(size_t) = malloc;
static void *(*realloc_fn)(void *, size_t) = realloc;
static void (*free_fn)(void *) = free;

void sbx_set_allocator(void *(*a)(size_t), void *(*r)(void *, size_t), void (*f)(void *))
{
	alloc_fn = a ? a : malloc;
	realloc_fn = r ? r : realloc;
	free_fn = f ? f : free;
}

void *sbx__alloc(size_t size)
{
	return alloc_fn(size ? size : 1);
}

void *sbx__calloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	void *p = sbx__alloc(n * size);
	if (p)
		memset(p, 0, n * size > 0 ? n * size : 1);
	return p;
}

void *sbx__realloc(void *ptr, size_t size)
{
	return realloc_fn(ptr, size ? size : 1);
}

void sbx__free(void *ptr)
{
	if (ptr)
		free_fn(ptr);
}

void sbx_free(void *ptr)
{
	sbx__free(ptr);
}

char *sbx__strndup(const char *s, size_t n)
{
	char *d = sbx__alloc(n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

char *sbx__strdup(const char *s)
{
	return s ? sbx__strndup(s, strlen(s)) : NULL;
}

char *sbx__asprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	char *s = sbx__alloc((size_t)n + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

/* A caller's touched memory, to show that starting a process did not copy the caller: after a
 * fork every page of it would fault once when written again (to undo the copy-on-write
 * protection fork put on it); after a start that borrows the caller's memory none does. Shared
 * by test_local.c and test_isolation.c. */
#ifndef SBX_TEST_LOCAL_BALLAST_H
#define SBX_TEST_LOCAL_BALLAST_H

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

typedef struct ballast {
	unsigned char *p; /* MAP_FAILED when it could not be mapped */
	size_t size, page;
} ballast;

static inline ballast ballast_make(size_t size)
{
	ballast b = {mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
		     size, (size_t)sysconf(_SC_PAGESIZE)};
	if (b.p != MAP_FAILED) {
		madvise(b.p, size, MADV_NOHUGEPAGE); /* one fault per page, not per 2 MiB */
		memset(b.p, 1, size);
	}
	return b;
}

static inline size_t ballast_pages(const ballast *b)
{
	return b->size / b->page;
}

/* Writes `v` into every page; returns the page faults the process took meanwhile. */
static inline long ballast_rewrite_faults(ballast *b, unsigned char v)
{
	struct rusage before, after;
	getrusage(RUSAGE_SELF, &before);
	for (size_t i = 0; i < b->size; i += b->page)
		b->p[i] = v;
	getrusage(RUSAGE_SELF, &after);
	return after.ru_minflt - before.ru_minflt;
}

static inline void ballast_free(ballast *b)
{
	munmap(b->p, b->size);
}

#endif

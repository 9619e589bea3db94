/* The smallest process that crashed GCC 12's leak check (asan_defaults.c): it loads a module
 * with thread-local data and makes glibc's block for it start 16 bytes past a page. Exits 0
 * and prints the block's page offset when the build's sanitizer defaults keep the leak check
 * whole. argv[1]: the module. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SMALL 8 /* as large as the module's block: both come from one ASan size class */

static void *held[4096];

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dtls_page_offset MODULE\n");
		return 2;
	}
	void *m = dlopen(argv[1], RTLD_NOW);
	if (!m) {
		fprintf(stderr, "dtls_page_offset: %s\n", dlerror());
		return 2;
	}
	long *(*address)(void) = (long *(*)(void))(uintptr_t)dlsym(m, "tlsmod_address");
	if (!address) {
		fprintf(stderr, "dtls_page_offset: %s\n", dlerror());
		return 2;
	}
	/* ASan hands out the chunks of a size class in address order: stop at the one that ends a
	 * page, so the next one, the TLS block, starts 16 bytes past the page. */
	size_t n = 0;
	do
		held[n] = malloc(SMALL);
	while (((uintptr_t)held[n++] & 4095) != 4096 - 16 && n < sizeof(held) / sizeof(held[0]));
	long *v = address();
	*v = 1;
	printf("page offset %lu\n", (unsigned long)((uintptr_t)v & 4095));
	for (size_t i = 0; i < n; i++)
		free(held[i]);
	return 0;
}

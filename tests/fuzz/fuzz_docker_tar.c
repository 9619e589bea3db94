/* Fuzz target: the tar archives the Engine sends for a file read and a listing
 * (plugins/docker/tarball.c). Member names, kinds, sizes and symlink targets come from the
 * container's files. A read hands back at most what the archive holds, NUL-terminated; a
 * listing names each entry directly below the top by one non-empty name without '/'. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/support/host.h>

#include "plugin_host.h"
#include "tarball.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_plugin_host();
	sbx_error err = {0};
	void *out = NULL;
	size_t len = 0;
	char link[4096];
	int rc = docker_tar_first(data, size, "/f", 1u << 20, &out, &len, link, sizeof(link), &err);
	if (rc == SBX_OK) {
		if (!out || len > size || ((char *)out)[len] != '\0')
			abort();
		sbxs_host->free(out);
	} else if (rc == SBX_E_EXISTS) {
		if (memchr(link, '\0', sizeof(link)) == NULL)
			abort();
	} else if (err.message[0] == '\0') {
		abort(); /* a failure says why */
	}
	sbx_file_info *entries = NULL;
	size_t n = 0;
	rc = docker_tar_list(data, size, "/d", &entries, &n, &err);
	if (rc == SBX_OK) {
		if (!entries)
			abort();
		for (size_t i = 0; i < n; i++) {
			const char *name = entries[i].name;
			size_t l = strnlen(name, sizeof(entries[i].name));
			if (l == 0 || l == sizeof(entries[i].name) || memchr(name, '/', l))
				abort();
			if (entries[i].kind < SBX_FILE_REGULAR || entries[i].kind > SBX_FILE_OTHER)
				abort();
		}
		sbxs_host->free(entries);
	}
	return 0;
}

/* Fuzz target: a registry file (alias -> {path, defaults}). The input is a memfd named by its
 * /proc/self/fd path, so the real file reading (regular-file check, drop-in folder lookup
 * beside it) runs too. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-registry", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(fd, data + off, size - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	sbx__registry *reg = NULL;
	sbx_error err = {0};
	if (off == size && sbx__registry_load(path, &reg, &err) == SBX_OK) {
		char *list = sbx__registry_alias_list(reg);
		sbx__free(list);
		for (size_t i = 0; i < reg->n && i < 8; i++)
			sbx__registry_find(reg, reg->entries[i].alias);
		sbx__registry_find(reg, "local");
		sbx__registry_free(reg);
	}
	close(fd);
	return 0;
}

/* Fuzz target: the lines of a rollout task file, each parsed and checked as `sbx rollout`
 * does before anything runs (JSON, task shape, repeated ids across the lines). */
#include <stdint.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *seen = json_object();
	if (!seen)
		return 0;
	const char *p = (const char *)data, *end = p + size;
	size_t lineno = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		char why[512];
		json_t *t = task_parse(p, len, ++lineno, seen, why, sizeof(why));
		json_decref(t);
		p += len;
	}
	json_decref(seen);
	return 0;
}

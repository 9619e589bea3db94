/* A host table for tests of the support library: malloc with a failure switch, errors into
 * sbx_error, and a config of typed values given as a table. */
#ifndef SBX_TEST_SUPPORT_HOST_H
#define SBX_TEST_SUPPORT_HOST_H

#include <sbx/plugin.h>

/* One config value: type is an SBX_KEY_*; text is the value as YAML would give it. */
typedef struct test_value {
	const char *key;
	uint32_t type;
	const char *text;
} test_value;

struct sbx_config {
	const test_value *values;
	size_t n;
};

extern const sbx_host_api test_host;

/* Allocations fail from the nth one on (0: the next); -1 turns failures off. */
void test_fail_allocs_after(long n);

/* Last message logged at SBX_LOG_INFO or above (for retry logs). */
const char *test_last_log(void);

#endif

/* LeakSanitizer reports at process exit, after Criterion has counted a test as passed, so
 * suites check for leaks after each test themselves (.fini = sbx_test_check_leaks). */
#ifndef SBX_TEST_LEAKS_H
#define SBX_TEST_LEAKS_H

#include <criterion/criterion.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define SBX_TEST_LEAKS() __lsan_do_recoverable_leak_check()
#else
#define SBX_TEST_LEAKS() 0
#endif

static inline void sbx_test_check_leaks(void)
{
	cr_assert_eq(SBX_TEST_LEAKS(), 0, "leaks (see the LeakSanitizer report above)");
}

#endif

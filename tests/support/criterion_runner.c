/* Linked into every Criterion test program: where LeakSanitizer looks, and what a leak does.
 *
 * Criterion runs each case in a worker it execs with BXFI_MAP set (BoxFort's map of the
 * worker's context); the process without it is the runner, which runs none of the cases, only
 * the report hooks.
 * - A worker checks for leaks as it exits, after its case, and aborts when it finds one: the
 *   runner counts that as a case that crashed in its teardown and exits 1. LeakSanitizer's own
 *   check at exit only set the worker's exit status, which Criterion ignores once the case has
 *   reported, so a case that leaked used to pass.
 * - The runner skips the check: under load it once leaked 48 bytes of Criterion's own (calloc
 *   from inside libcriterion, no sbx frame), which failed a suite whose cases had all passed.
 * In a build without the sanitizers both are no-ops. */
#include <stdlib.h>

/* Default visibility: the sanitizer runtime, a shared library, looks the hook up. */
__attribute__((visibility("default"))) int __lsan_is_turned_off(void);
/* Weak: absent from a build without the sanitizers. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

int __lsan_is_turned_off(void)
{
	return getenv("BXFI_MAP") == NULL;
}

static void check_worker(void)
{
	if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check())
		abort();
}

/* Registered after the sanitizer's own exit check, so it runs before it. */
__attribute__((constructor)) static void watch_worker(void)
{
	if (getenv("BXFI_MAP"))
		atexit(check_worker);
}

/* For test cases that fork while other threads run (the *_fork CTest entries).
 *
 * GCC 12's AddressSanitizer runtime does not make its allocator safe across fork(): a child
 * forked while another thread was inside malloc waits on the runtime's lock forever. The fork
 * tests therefore run from a build without SBX_SANITIZE (.ci/run runs the *_fork entries from
 * its optimised build); in a sanitized one they say so and skip. */
#ifndef SBX_TESTS_FORK_TESTS_H
#define SBX_TESTS_FORK_TESTS_H

#include <criterion/criterion.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SKIP_FORK_UNDER_ASAN()                                                               \
	cr_skip_test("AddressSanitizer's allocator is not fork-safe with threads: run this " \
		     "from a build without SBX_SANITIZE")
#else
#define SKIP_FORK_UNDER_ASAN() ((void)0)
#endif

/* What the forked children of a case came to. */
typedef struct fork_tally {
	int hung;   /* still running after 60 s, then killed */
	int failed; /* ended other than with exit 0 */
	int last;   /* the last failed one's exit code, or minus its signal */
} fork_tally;

/* Waits for the child kid (60 s at most, a loose bound for a busy machine) and counts it. */
static inline void fork_tally_wait(fork_tally *t, pid_t kid)
{
	int status = 0;
	pid_t got = 0;
	for (int ms = 0; ms < 60000 && (got = waitpid(kid, &status, WNOHANG)) == 0; ms += 5)
		usleep(5000);
	if (got == 0) {
		t->hung++;
		kill(kid, SIGKILL);
		waitpid(kid, &status, 0);
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		t->failed++;
		t->last = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
	}
}

#endif

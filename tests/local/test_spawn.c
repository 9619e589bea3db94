/* local_spawn_fence (plugins/local/spawn.c): it returns only once every child local_spawn
 * started before it has execed or exited, so a command's pipes still open after it exited are
 * held by its own leftovers, never by a copy in a child another thread is starting. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spawn.h"

static int gate[2];
static atomic_int child_waiting, fenced;

/* The child's set-up, stopped until the test writes to the gate: the window in which a real
 * child holds copies of the host's descriptors. */
static int slow_child(void *arg)
{
	(void)arg;
	char c;
	atomic_store(&child_waiting, 1);
	while (read(gate[0], &c, 1) < 0)
		;
	return 0;
}

static void *spawner(void *arg)
{
	int placed = 0;
	*(pid_t *)arg = local_spawn(slow_child, NULL, -1, &placed);
	return NULL;
}

static void *fencer(void *arg)
{
	(void)arg;
	local_spawn_fence();
	atomic_store(&fenced, 1);
	return NULL;
}

static void nap_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};
	nanosleep(&ts, NULL);
}

Test(local_spawn, fence_waits_for_children_being_started, .timeout = 60)
{
	cr_assert_eq(pipe(gate), 0);
	pid_t pid = 0;
	pthread_t sp, fe;
	cr_assert_eq(pthread_create(&sp, NULL, spawner, &pid), 0);
	while (!atomic_load(&child_waiting))
		nap_ms(1);
	cr_assert_eq(pthread_create(&fe, NULL, fencer, NULL), 0);
	nap_ms(300);
	int early = atomic_load(&fenced);
	cr_assert_eq(write(gate[1], "x", 1), 1);
	pthread_join(sp, NULL);
	pthread_join(fe, NULL);
	cr_assert_eq(early, 0, "the fence returned while a child was starting");
	cr_assert_eq(atomic_load(&fenced), 1);
	cr_assert_gt(pid, 0);
	int status = -1;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
	/* No child starting: the fence returns at once, and again. */
	local_spawn_fence();
	local_spawn_fence();
}

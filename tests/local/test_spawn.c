/* local_spawn (plugins/local/spawn.c).
 * - local_spawn_fence returns only once every child local_spawn started before it has execed
 *   or exited, so a command's pipes still open after it exited are held by its own leftovers,
 *   never by a copy in a child another thread is starting.
 * - The pidfd comes with the clone: it is the child's even when someone else reaps the child
 *   before the caller looks at it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	*(pid_t *)arg = local_spawn(slow_child, NULL, -1, &placed, NULL);
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

static int exits_7(void *arg)
{
	(void)arg;
	_exit(7);
}

/* The pid the kernel says pidfd stands for (the "Pid:" line of its fdinfo), or -2. */
static long pidfd_pid(int pidfd)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	FILE *f = fopen(path, "r");
	long pid = -2;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "Pid:", 4) == 0)
			pid = strtol(line + 4, NULL, 10);
	if (f)
		fclose(f);
	return pid;
}

Test(local_spawn, pidfd_comes_with_the_child)
{
	/* Waited on through the pidfd: the child's own status. */
	int placed = 1, pidfd = -5;
	pid_t pid = local_spawn(exits_7, NULL, -1, &placed, &pidfd);
	cr_assert_gt(pid, 0);
	cr_assert_eq(placed, 0);
	cr_assert_geq(pidfd, 0, "no pidfd from the clone");
	cr_assert_eq(pidfd_pid(pidfd), pid);
	siginfo_t si = {0};
	cr_assert_eq(waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED), 0, "%s", strerror(errno));
	cr_assert_eq(si.si_pid, pid);
	cr_assert_eq(si.si_code, CLD_EXITED);
	cr_assert_eq(si.si_status, 7);
	close(pidfd);

	/* Reaped by someone else first (a harness's waitpid(-1)): the pidfd still stands for
	 * that child, says it ended, and cannot reap any other. */
	pidfd = -5;
	pid = local_spawn(exits_7, NULL, -1, &placed, &pidfd);
	cr_assert_gt(pid, 0);
	cr_assert_geq(pidfd, 0);
	int status = -1;
	cr_assert_eq(waitpid(-1, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 7, "status %d", status);
	struct pollfd pf = {.fd = pidfd, .events = POLLIN};
	cr_assert_eq(poll(&pf, 1, 0), 1, "the pidfd does not say its child ended");
	pid_t other = local_spawn(exits_7, NULL, -1, &placed, NULL);
	cr_assert_gt(other, 0);
	si.si_pid = 0;
	errno = 0;
	cr_assert_eq(waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED), -1);
	cr_assert_eq(errno, ECHILD);
	cr_assert_eq(waitpid(other, &status, 0), other, "the other child was reaped through it");
	close(pidfd);
}

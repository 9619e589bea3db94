/* The open-files limit (RLIMIT_NOFILE) of a process that hosts sandboxes.
 *
 * Every command in flight holds a few descriptors in the host (its output pipes and pidfd),
 * so a harness running a few hundred at once needs more than the soft limit of 1024 that a
 * login session usually starts with, while the hard limit is far higher. libsbx raises the
 * soft limit to the hard one (at most NOFILE_CAP) once, at the first sbx_host_new, as the Go
 * runtime does for every Go program. Commands must not see the raise: some programs walk
 * every descriptor up to the soft limit, and select() cannot take descriptors past 1023. So
 * plugins that start commands on this machine ask for the limit the process had
 * (host API command_nofile, ABI 1.5) and give it back to each command before its exec; a
 * runner process learns it from its host (link.c passes it on the runner's command line).
 * SBX_KEEP_NOFILE=1 in the environment leaves the limit alone. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "internal.h"

#define NOFILE_CAP ((rlim_t)1 << 20)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t command_soft; /* 0: this process did not raise it */

static void raise_once(void)
{
	const char *keep = getenv("SBX_KEEP_NOFILE");
	if (keep && keep[0] && strcmp(keep, "0") != 0)
		return;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	rlim_t want =
	    rl.rlim_max == RLIM_INFINITY || rl.rlim_max > NOFILE_CAP ? NOFILE_CAP : rl.rlim_max;
	if (want <= rl.rlim_cur)
		return;
	rlim_t had = rl.rlim_cur;
	rl.rlim_cur = want;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && command_soft == 0)
		command_soft = (uint64_t)had;
}

void sbx__nofile_raise(void)
{
	pthread_once(&once, raise_once);
}

uint64_t sbx__nofile_command(void)
{
	return command_soft;
}

void sbx__nofile_set_command(uint64_t soft)
{
	command_soft = soft;
}

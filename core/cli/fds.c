/* File descriptors for `sbx rollout`: how many tasks the process limit lets run at once, and
 * whether a failure was the process running out of them (which is the rollout's doing, not
 * the task's, so the task runs again with fewer beside it). */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"

static size_t limit_of(rlim_t v)
{
	return v == RLIM_INFINITY || v > (rlim_t)1 << 30 ? (size_t)1 << 30 : (size_t)v;
}

/* libsbx raised the soft limit to the hard one when the host was made (nofile.c); the
 * commands of local sandboxes still start with the limit the process had. */
size_t cli_fds_limit(void)
{
	struct rlimit rl;
	return getrlimit(RLIMIT_NOFILE, &rl) != 0 ? (size_t)1 << 30 : limit_of(rl.rlim_cur);
}

int cli_fds_at_hard(void)
{
	struct rlimit rl;
	return getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= rl.rlim_max;
}

size_t cli_fds_open(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return 0;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n > 0 ? n - 1 : 0; /* the directory's own */
}

int cli_fds_short(const char *message)
{
	if (message && (strstr(message, strerror(EMFILE)) || strstr(message, strerror(ENFILE))))
		return 1;
	/* Messages that do not say why: can a few more be opened right now? */
	int fds[CLI_FDS_SPARE];
	int n = 0, short_now = 0;
	for (; n < CLI_FDS_SPARE; n++) {
		fds[n] = dup(2);
		if (fds[n] < 0) {
			short_now = errno == EMFILE || errno == ENFILE;
			break;
		}
	}
	while (n-- > 0)
		close(fds[n]);
	return short_now;
}

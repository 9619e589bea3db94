/* File descriptors for `sbx rollout`: how many tasks the process limit lets run at once, and
 * whether a failure was the process running out of them (which is the rollout's doing, not
 * the task's, so the task runs again with fewer beside it). */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"

size_t cli_fds_limit(void)
{
	/* The soft limit is left as it is: the commands of local sandboxes inherit it, and some
	 * programs walk every descriptor up to it. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > (rlim_t)1 << 30)
		return (size_t)1 << 30;
	return (size_t)rl.rlim_cur;
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

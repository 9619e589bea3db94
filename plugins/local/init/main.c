/* sbx-local-init: what a sandbox's init becomes once it has built the sandbox (ns.c).
 *
 * The init is forked from the host; left as it is, it would hold a copy-on-write snapshot of
 * the whole host (a harness of gigabytes, whose every later write then copies a page for
 * each live sandbox) and its environment. So it execs this small static program (static: an
 * image's root may have no C library, or another one), which reports ready on the fd named
 * by argv[1] and waits as PID 1: SIGCHLD ignored, so the kernel reaps every orphan. Killing
 * it ends the sandbox. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "../init_proto.h"

int main(int argc, char **argv)
{
	prctl(PR_SET_NAME, "sbx-init", 0, 0, 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGCHLD, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (argc > 1) {
		int fd = (int)strtol(argv[1], NULL, 10);
		init_msg m;
		memset(&m, 0, sizeof(m));
		m.kind = MSG_READY;
		if (write(fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
			return 1;
		close(fd);
	}
	for (;;)
		pause();
}

/* sbx-runner HOST_PID NOFILE: serves the plugin file the host names in its first request over the
 * socketpair on descriptor 3 (see core/link.c for how the host starts it).
 *
 * Worker threads take turns reading (leader and followers): the one holding the reader role
 * reassembles requests from their frames, collects the stdin or file contents that follow a
 * request (in memory when small, else in an unlinked file the plugin sees mapped), and once a
 * request is complete gives up the role and runs it itself, starting another worker when
 * none waits for the role, so calls never wait on each other and a call costs no hand-over.
 * STOP frames reach the call they name. The runner ends when the host closes the connection
 * (after unloading the plugin) or when the host process is gone (at once). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runner.h"

#define HEAP_DATA_MAX (1u << 20) /* larger stdin or file contents go through a file */
#define IDLE_MAX      8          /* idle workers kept */

int sbx__rn_fd = SBX__WIRE_FD;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t read_lock = PTHREAD_MUTEX_INITIALIZER; /* the reader role */
static sbx__rjob *jobs;          /* under lock: every request not finished */
static sbx__rjob *ready;         /* reader only: the request the last frame completed */
static unsigned waiting;         /* under lock: workers waiting for the reader role */
static unsigned char *frame_buf; /* reader only */
static int host_pidfd = -1;
static pthread_cond_t unlisted = PTHREAD_COND_INITIALIZER; /* a job left `jobs` */

static void fatal(const char *fmt, const char *detail)
{
	sbx__log(SBX_LOG_ERROR, "sbx-runner", fmt, detail);
	_exit(70);
}

static void job_free(sbx__rjob *j)
{
	if (j->map_len)
		munmap(j->data, j->map_len);
	else
		sbx__free(j->data);
	if (j->data_fd >= 0)
		close(j->data_fd);
	sbx__wbuf_free(&j->req);
	sbx__free(j);
}

static void unlist_locked(sbx__rjob *j)
{
	for (sbx__rjob **at = &jobs; *at; at = &(*at)->next)
		if (*at == j) {
			*at = j->next;
			pthread_cond_broadcast(&unlisted);
			return;
		}
}

/* ---- workers */

static void *worker(void *arg);

static void start_worker(void)
{
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, worker, NULL) != 0)
		fatal("cannot start a worker thread%s", "");
	pthread_attr_destroy(&at);
}

static sbx__rjob *next_job(void);

/* Takes turns reading; runs what it read. The main thread (arg non-NULL) never leaves. */
static void *worker(void *arg)
{
	for (;;) {
		pthread_mutex_lock(&lock);
		waiting++;
		pthread_mutex_unlock(&lock);
		pthread_mutex_lock(&read_lock);
		pthread_mutex_lock(&lock);
		waiting--;
		pthread_mutex_unlock(&lock);
		sbx__rjob *j = next_job();
		pthread_mutex_unlock(&read_lock);
		pthread_mutex_lock(&lock);
		int spare = waiting > 0;
		pthread_mutex_unlock(&lock);
		if (!spare)
			start_worker(); /* someone must read while this call runs */
		sbx__rn_run(j);
		pthread_mutex_lock(&lock);
		unlist_locked(j);
		job_free(j);
		int idle_enough = waiting >= IDLE_MAX;
		pthread_mutex_unlock(&lock);
		if (idle_enough && !arg)
			return NULL;
	}
}

/* ---- assembling requests */

static sbx__rjob *find_locked(uint64_t call)
{
	for (sbx__rjob *j = jobs; j; j = j->next)
		if (j->call == call)
			return j;
	return NULL;
}

/* Where a large stream of data goes: an unlinked file in the state folder, else memory. */
static int data_file(void)
{
	const char *dir = sbx__host_api()->state_dir();
	int fd = dir ? open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;
	if (fd < 0)
		fd = memfd_create("sbx-data", MFD_CLOEXEC);
	return fd;
}

/* The request is complete: make room for its data, or make it the one to run. Called with
 * lock held. */
static void request_done_locked(sbx__rjob *j)
{
	sbx__rbuf r = {.p = j->req.p, .len = j->req.len};
	j->data_want = sbx__rget_u64(&r);
	if (r.bad)
		fatal("a request without its data length%s", "");
	if (j->data_want == 0) {
		ready = j;
		return;
	}
	if (j->data_want <= HEAP_DATA_MAX) {
		if (!(j->data = sbx__alloc((size_t)j->data_want)))
			fatal("out of memory for a request's data%s", "");
		return;
	}
	if ((j->data_fd = data_file()) < 0)
		fatal("cannot make a file for a request's data: %s", strerror(errno));
}

/* A piece of a request's data; the last one hands the request on. Only the main thread
 * touches an assembling job's data. */
static void take_data(sbx__rjob *j, const sbx__frame_hdr *h, const unsigned char *p, size_t n)
{
	if (n > j->data_want - j->data_got)
		fatal("more data than the request announced%s", "");
	if (j->data_fd < 0) {
		memcpy(j->data + j->data_got, p, n);
	} else {
		size_t off = 0;
		while (off < n) {
			ssize_t w =
			    pwrite(j->data_fd, p + off, n - off, (off_t)(j->data_got + off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				fatal("cannot keep a request's data: %s", strerror(errno));
			off += (size_t)w;
		}
	}
	j->data_got += n;
	if (h->flags & SBX__WIRE_MORE)
		return;
	if (j->data_got != j->data_want)
		fatal("less data than the request announced%s", "");
	if (j->data_fd >= 0) {
		void *m = mmap(NULL, (size_t)j->data_want, PROT_READ, MAP_PRIVATE, j->data_fd, 0);
		if (m == MAP_FAILED)
			fatal("cannot map a request's data: %s", strerror(errno));
		j->data = m;
		j->map_len = (size_t)j->data_want;
		close(j->data_fd);
		j->data_fd = -1;
	}
	ready = j;
}

static void frame(const sbx__frame_hdr *h, const unsigned char *p, size_t n)
{
	pthread_mutex_lock(&lock);
	sbx__rjob *j = find_locked(h->call);
	if (h->type == SBX__W_STOP) {
		/* A STOP may come after the call ended: then there is nothing to stop. */
		sbx__rbuf r = {.p = p, .len = n};
		int st = (int)sbx__rget_u32(&r);
		if (j && !r.bad && st != SBX_OK)
			__atomic_store_n(&j->stop, st, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&lock);
		return;
	}
	if (h->type == SBX__W_DATA) {
		int ok = j && j->req_done && j->data_want > j->data_got;
		pthread_mutex_unlock(&lock);
		if (!ok)
			fatal("data for no request that takes it%s", "");
		take_data(j, h, p, n);
		return;
	}
	if (h->type < SBX__W_LOAD || h->type > SBX__W_REQUEST_LAST)
		fatal("a frame of an unknown type%s", "");
	if (!j) {
		if (!(j = sbx__calloc(1, sizeof(*j))))
			fatal("out of memory for a request%s", "");
		j->call = h->call;
		j->type = h->type;
		j->data_fd = -1;
		j->next = jobs;
		jobs = j;
	} else if (j->req_done || j->type != h->type) {
		fatal("a request frame for a call under way%s", "");
	}
	if (j->req.len + n > SBX__WIRE_MSG_MAX)
		fatal("a request longer than 64 MiB%s", "");
	sbx__wput_raw(&j->req, p, n);
	if (j->req.oom)
		fatal("out of memory for a request%s", "");
	if (!(h->flags & SBX__WIRE_MORE)) {
		j->req_done = 1;
		request_done_locked(j);
	}
	pthread_mutex_unlock(&lock);
}

/* The host closed the connection: unload the plugin and end, unless calls are still under
 * way (then the host is gone, not done). A worker sends its reply before it takes its job off
 * the list, so a host that ends as soon as it has its last reply can close in between: such
 * jobs get up to 2 s to come off before the runner counts them as under way. */
static void closed(void)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&lock);
	while (jobs && pthread_cond_timedwait(&unlisted, &lock, &until) == 0)
		;
	int busy = jobs != NULL;
	pthread_mutex_unlock(&lock);
	if (busy)
		_exit(0);
	sbx__rn_unload();
	exit(0);
}

/* Reads frames until one completes a request, and returns that request. Called holding the
 * reader role. */
static sbx__rjob *next_job(void)
{
	struct pollfd pf[2] = {{.fd = sbx__rn_fd, .events = POLLIN},
			       {.fd = host_pidfd, .events = POLLIN}};
	ready = NULL;
	while (!ready) {
		int k = poll(pf, 2, -1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			fatal("poll: %s", strerror(errno));
		if (pf[1].revents & POLLIN)
			_exit(0); /* the host process is gone */
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		sbx__frame_hdr h;
		long n = sbx__wire_recv(sbx__rn_fd, &h, frame_buf, 1);
		if (n == -EAGAIN || n == -EWOULDBLOCK)
			continue;
		if (n == 0 && h.type == 0)
			closed();
		if (n < 0)
			fatal("cannot read from the host: %s", strerror((int)-n));
		frame(&h, frame_buf, (size_t)n);
	}
	return ready;
}

int main(int argc, char **argv)
{
	char *end = NULL, *nend = NULL;
	long host = argc == 3 ? strtol(argv[1], &end, 10) : 0;
	unsigned long long nofile = argc == 3 ? strtoull(argv[2], &nend, 10) : 0;
	if (argc != 3 || !end || *end || host <= 1 || !nend || *nend || argv[2][0] == '-') {
		fprintf(stderr, "usage: sbx-runner HOST_PID NOFILE (started by libsbx, with the "
				"connection on descriptor 3; NOFILE: the open-files limit its "
				"commands get, 0 for the inherited one)\n");
		return 2;
	}
	sbx__nofile_set_command((uint64_t)nofile);
	/* The inherited end of the socketpair: no command a plugin starts may hold it. */
	if (fcntl(sbx__rn_fd, F_SETFD, FD_CLOEXEC) != 0) {
		fprintf(stderr, "sbx-runner: descriptor %d is not open\n", sbx__rn_fd);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	host_pidfd = (int)syscall(SYS_pidfd_open, (pid_t)host, 0);
	if (host_pidfd < 0 || getppid() != (pid_t)host)
		return 0; /* the host is already gone */
	fcntl(host_pidfd, F_SETFD, FD_CLOEXEC);
	if (!(frame_buf = sbx__alloc(SBX__WIRE_CHUNK)))
		fatal("out of memory%s", "");
	worker(&host_pidfd);
	return 0;
}

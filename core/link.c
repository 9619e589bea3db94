/* The host's link to the runner process of one plugin file.
 *
 * sbx-runner starts with posix_spawn, never fork(): the host may be large and run many
 * threads. Its stdin and stdout are /dev/null, its stderr is the host's, the runner's end of
 * a SOCK_SEQPACKET socketpair is descriptor 3 and nothing else is inherited; it runs in a
 * session of its own, so a terminal's ^C is the host's to handle. Every descriptor the host
 * keeps is close-on-exec, so no command a plugin starts holds the connection open.
 *
 * The callers read the connection themselves, one at a time (leader and followers): the
 * caller holding the reader role takes frames off the connection and hands each to the call
 * it names (output straight into that call's sink, a reply wakes its caller) until its own
 * call is over, then passes the role to another caller still waiting. A lone call thus costs
 * no thread switch beyond the runner's. Death is seen on a pidfd (a plugin's forked helper
 * may keep the socket open), by the reader or by the next call when none was in flight: the
 * runner is reaped, and every call in flight returns SBX_E_PLUGIN_CRASHED naming the signal,
 * the exit status, or why the host killed it (a call past its timeout plus the grace period,
 * a malformed frame, a closed connection). The next call starts a fresh runner, after a
 * backoff that doubles with each death in the window; max_crashes deaths within it leave the
 * link faulty, as a load failure leaves an alias. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "link.h"
#include "runner_conf.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define LOAD_TIMEOUT_MS 60000 /* a plugin's register function has this long */
#define EOF_WAIT_MS     500   /* a runner that closed its end has this long to exit */

extern char **environ;

struct sbx__conn {
	sbx__link *link;
	pthread_mutex_t lock;
	unsigned refs; /* under lock: the link's, each caller's */
	int fd, pidfd;
	pid_t pid;
	uint64_t gen;
	unsigned char *frame;  /* the reader's buffer */
	int reading;           /* under lock: a caller holds the reader role */
	int dead;              /* under lock: no call starts on it any more */
	int reaped;            /* under lock */
	int closing;           /* the link is ending it: not a crash */
	char kill_reason[240]; /* under lock: why the host killed it */
	const char *verb;      /* "crashed", or "hung" when killed for a late call */
	char death[300];       /* under lock once dead: what happened */
	sbx__call **slots;     /* under lock: calls in flight by the low half of their id */
	uint32_t *slot_gen;
	size_t n_slots;
};

struct sbx__link {
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a start finished */
	char *path;
	char *state_dir; /* the host's plugins folder, or NULL */
	char **expected;
	size_t n_expected;
	sbx__runner_opts opts;
	sbx__wbuf manifest;
	sbx__conn *cur; /* under lock: the live runner (the link's reference), or NULL */
	int starting;   /* under lock */
	uint64_t gens;
	int64_t *deaths; /* under lock: times of the deaths within the window, oldest first */
	size_t n_deaths;
	int64_t next_start_ms;
	int faulty;
	char fault[420];
};

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_kill(int pidfd)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

static int pid_exited(int pidfd, int wait_ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int n;
	do
		n = poll(&p, 1, wait_ms);
	while (n < 0 && errno == EINTR);
	return n > 0;
}

static void conn_unref(sbx__conn *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned left = --c->refs;
	pthread_mutex_unlock(&c->lock);
	if (left)
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	sbx__free(c->frame);
	sbx__free(c->slots);
	sbx__free(c->slot_gen);
	pthread_mutex_destroy(&c->lock);
	sbx__free(c);
}

void sbx__conn_release(sbx__conn *c)
{
	if (c)
		conn_unref(c);
}

uint64_t sbx__conn_gen(const sbx__conn *c)
{
	return c->gen;
}

/* Kills the runner once, remembering why. Called with c->lock held. */
static void kill_locked(sbx__conn *c, const char *verb, const char *reason)
{
	if (c->dead || c->kill_reason[0])
		return;
	snprintf(c->kill_reason, sizeof(c->kill_reason), "%s", reason);
	c->verb = verb;
	if (pidfd_kill(c->pidfd) != 0)
		kill(c->pid, SIGKILL);
}

static void kill_conn(sbx__conn *c, const char *verb, const char *reason)
{
	pthread_mutex_lock(&c->lock);
	kill_locked(c, verb, reason);
	pthread_mutex_unlock(&c->lock);
}

/* ---- the call table */

/* Gives call a slot and an id. Called with c->lock held. */
static int slot_take(sbx__conn *c, sbx__call *call)
{
	size_t i = 0;
	while (i < c->n_slots && c->slots[i])
		i++;
	if (i == c->n_slots) {
		size_t n = c->n_slots ? c->n_slots * 2 : 16;
		sbx__call **s = sbx__realloc(c->slots, n * sizeof(*s));
		if (!s)
			return SBX_E_NOMEM;
		c->slots = s;
		uint32_t *g = sbx__realloc(c->slot_gen, n * sizeof(*g));
		if (!g)
			return SBX_E_NOMEM;
		c->slot_gen = g;
		for (size_t k = c->n_slots; k < n; k++) {
			c->slots[k] = NULL;
			c->slot_gen[k] = 0;
		}
		c->n_slots = n;
	}
	c->slots[i] = call;
	call->id = ((uint64_t)++c->slot_gen[i] << 32) | i;
	return SBX_OK;
}

static sbx__call *slot_find(sbx__conn *c, uint64_t id)
{
	size_t i = (size_t)(id & 0xffffffffu);
	if (i >= c->n_slots || !c->slots[i] || c->slots[i]->id != id)
		return NULL;
	return c->slots[i];
}

/* Ends a call with status (the reply is in place for SBX_OK). Called with c->lock held; the
 * caller may return (and its stack go) as soon as the lock is released. */
static void finish_locked(sbx__conn *c, sbx__call *call, int status)
{
	c->slots[call->id & 0xffffffffu] = NULL;
	call->status = status;
	call->done = 1;
	pthread_cond_signal(&call->cond);
}

/* Gives up the reader role and wakes a waiting call to take it. Called with c->lock held. */
static void release_reader_locked(sbx__conn *c)
{
	c->reading = 0;
	for (size_t i = 0; i < c->n_slots; i++)
		if (c->slots[i]) {
			pthread_cond_signal(&c->slots[i]->cond);
			return;
		}
}

/* ---- reading */

static int protocol_error(sbx__conn *c, const char *what)
{
	char reason[200];
	snprintf(reason, sizeof(reason), "was killed after it sent %s", what);
	kill_conn(c, "crashed", reason);
	return -1;
}

/* A frame for a call in flight. Returns -1 when the connection is to be dropped. */
static int dispatch(sbx__conn *c, const sbx__frame_hdr *h, const unsigned char *p, size_t n)
{
	pthread_mutex_lock(&c->lock);
	sbx__call *call = slot_find(c, h->call);
	pthread_mutex_unlock(&c->lock);
	if (!call)
		return protocol_error(c, "a frame for no call in flight");
	/* Its caller waits for `done`, which only the reader sets: call stays valid. */
	switch (h->type) {
	case SBX__W_OUTPUT: {
		if (!call->output)
			return protocol_error(c, "output for a call that has none");
		if (call->stop)
			return 0;
		int rc = call->output(call->output_ctx, h->flags >> 16, p, n);
		if (rc != SBX_OK) {
			call->stop = rc;
			uint32_t st = (uint32_t)rc;
			sbx__wire_send(c->fd, SBX__W_STOP, 0, call->id, &st, sizeof(st),
				       sbx__wire_now_ms());
		}
		return 0;
	}
	case SBX__W_DATA:
	case SBX__W_ENTRIES:
	case SBX__W_IDS: {
		if (!call->on_frame)
			return protocol_error(c, "data for a call that takes none");
		if (call->frame_rc)
			return 0;
		int rc = call->on_frame(call->frame_ctx, h->type, p, n);
		if (rc == -1)
			return protocol_error(c, "malformed data");
		call->frame_rc = rc;
		return 0;
	}
	case SBX__W_REPLY: {
		sbx__wbuf *r = &call->reply;
		if (r->len + n > SBX__WIRE_MSG_MAX)
			return protocol_error(c, "a reply longer than 64 MiB");
		sbx__wput_raw(r, p, n);
		if (h->flags & SBX__WIRE_MORE)
			return 0;
		int st = r->oom ? SBX_E_NOMEM : call->frame_rc;
		if (st != SBX_OK)
			sbx__set_error(&call->err, st, "%s: %s: %s", call->alias, call->op,
				       st == SBX_E_NOMEM ? "out of memory for the runner's reply"
							 : sbx_status_message(st));
		pthread_mutex_lock(&c->lock);
		finish_locked(c, call, st);
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	}
	return protocol_error(c, "a frame of an unknown type");
}

/* What the runner's end was; reaps it. Called once it has exited or was killed. */
static void describe_death(sbx__conn *c, char *buf, size_t cap)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	int got = waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG) == 0 &&
		  si.si_pid != 0; /* else reaped by someone else, or SIGCHLD is ignored */
	pthread_mutex_lock(&c->lock);
	c->reaped = 1;
	if (c->kill_reason[0])
		snprintf(buf, cap, "%s", c->kill_reason);
	else if (!got)
		snprintf(buf, cap, "ended (its exit status is unknown)");
	else if (si.si_code == CLD_EXITED)
		snprintf(buf, cap, "exited with status %d", si.si_status);
	else
		snprintf(buf, cap, "was killed by signal %d (SIG%s)", si.si_status,
			 sigabbrev_np(si.si_status) ? sigabbrev_np(si.si_status) : "?");
	pthread_mutex_unlock(&c->lock);
}

/* Waits until the runner has exited: at once when its pidfd said so, else a short while for
 * a runner that closed its end, else it is killed. */
static void await_exit(sbx__conn *c, int pid_ready)
{
	if (pid_ready || pid_exited(c->pidfd, EOF_WAIT_MS))
		return;
	kill_conn(c, "crashed", "was killed after it closed its connection");
	pid_exited(c->pidfd, -1);
}

static int64_t backoff_ms(size_t deaths)
{
	if (deaths <= 1)
		return 0;
	int64_t ms = 100ll << (deaths - 2 < 6 ? deaths - 2 : 6);
	return ms > 5000 ? 5000 : ms;
}

/* Counts a death against the window; the link goes faulty at max_crashes. Called with
 * l->lock held. */
static void count_death_locked(sbx__link *l, const char *death)
{
	int64_t now = sbx__wire_now_ms();
	size_t keep = 0;
	for (size_t i = 0; i < l->n_deaths; i++)
		if (now - l->deaths[i] < (int64_t)l->opts.window_ms)
			l->deaths[keep++] = l->deaths[i];
	l->n_deaths = keep;
	if (l->n_deaths < l->opts.max_crashes)
		l->deaths[l->n_deaths++] = now;
	if (l->n_deaths >= l->opts.max_crashes) {
		l->faulty = 1;
		snprintf(l->fault, sizeof(l->fault),
			 "its runner died %zu times within %g s (last: %s); it is not restarted",
			 l->n_deaths, (double)l->opts.window_ms / 1000.0, death);
	}
	l->next_start_ms = now + backoff_ms(l->n_deaths);
}

/* The runner is gone or going: reaps it, fails every call in flight and tells the link.
 * Called by the holder of the reader role, without locks. */
static void die(sbx__conn *c, int pid_ready)
{
	sbx__link *l = c->link;
	char death[sizeof(c->death)];
	await_exit(c, pid_ready);
	describe_death(c, death, sizeof(death));
	shutdown(c->fd, SHUT_RDWR); /* a sender blocked on a full connection gets EPIPE */
	pthread_mutex_lock(&c->lock);
	c->dead = 1;
	memcpy(c->death, death, sizeof(death));
	const char *verb = c->verb ? c->verb : "crashed";
	for (size_t i = 0; i < c->n_slots; i++) {
		sbx__call *call = c->slots[i];
		if (!call)
			continue;
		sbx__set_error(&call->err, SBX_E_PLUGIN_CRASHED,
			       "%s: %s: plugin %s: its runner (pid %ld) %s", call->alias, call->op,
			       verb, (long)c->pid, death);
		finish_locked(c, call, SBX_E_PLUGIN_CRASHED);
	}
	int closing = c->closing;
	pthread_mutex_unlock(&c->lock);
	if (closing)
		return;
	sbx__log(SBX_LOG_WARN, "runner", "%s: runner (pid %ld) %s", l->path, (long)c->pid, death);
	pthread_mutex_lock(&l->lock);
	count_death_locked(l, death);
	int was_cur = l->cur == c;
	if (was_cur)
		l->cur = NULL;
	pthread_cond_broadcast(&l->changed);
	pthread_mutex_unlock(&l->lock);
	if (was_cur)
		conn_unref(c); /* the link's reference; the reader holds its own */
}

/* Reads frames as the holder of the reader role until `mine` is over, the connection is
 * momentarily empty after some frames, or the deadline (-1: none) passes, which kills the
 * runner for `late`. Without locks. */
static void read_some(sbx__conn *c, const sbx__call *mine, int64_t deadline, const char *late)
{
	struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->pidfd, .events = POLLIN}};
	int wait = -1;
	if (deadline >= 0) {
		int64_t left = deadline - sbx__wire_now_ms();
		wait = left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
	}
	int n = poll(p, 2, wait);
	if (n < 0)
		return; /* EINTR: the caller loops */
	if (n == 0) {
		if (deadline >= 0 && sbx__wire_now_ms() >= deadline)
			kill_conn(c, "hung", late);
		return;
	}
	int pid_ready = (p[1].revents & POLLIN) != 0;
	for (;;) {
		/* Frames sent before the runner died are still delivered. */
		sbx__frame_hdr h;
		long got = sbx__wire_recv(c->fd, &h, c->frame, 1);
		if (got == -EAGAIN || got == -EWOULDBLOCK) {
			if (pid_ready)
				die(c, 1);
			return;
		}
		if (got == -EPROTO) {
			protocol_error(c, "a malformed frame");
			die(c, 0);
			return;
		}
		if (got < 0 || h.type == 0) {
			die(c, pid_ready); /* end of stream, or the connection broke */
			return;
		}
		if (dispatch(c, &h, c->frame, (size_t)got) != 0) {
			die(c, 0);
			return;
		}
		pthread_mutex_lock(&c->lock);
		int over = mine->done;
		pthread_mutex_unlock(&c->lock);
		if (over)
			return;
	}
}

/* Whether c can take a call. A runner that died while no call was in flight is dealt with
 * here, so the call goes to a fresh one. */
static int conn_alive(sbx__conn *c)
{
	pthread_mutex_lock(&c->lock);
	int ok = !c->dead;
	int check = ok && !c->reading;
	if (check)
		c->reading = 1;
	pthread_mutex_unlock(&c->lock);
	if (!check)
		return ok;
	ok = !pid_exited(c->pidfd, 0);
	if (!ok)
		die(c, 1);
	pthread_mutex_lock(&c->lock);
	release_reader_locked(c);
	pthread_mutex_unlock(&c->lock);
	return ok;
}

/* ---- starting a runner */

static int spawn_runner(const char *runner, int child_fd, pid_t *pid, sbx_error *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	char host_pid[32], nofile[32];
	snprintf(host_pid, sizeof(host_pid), "%ld", (long)getpid());
	/* The open-files limit its plugins' commands get (nofile.c): the runner inherits the
	 * host's raised one. */
	snprintf(nofile, sizeof(nofile), "%llu", (unsigned long long)sbx__nofile_command());
	char *argv[] = {(char *)runner, host_pid, nofile, NULL};
	sigemptyset(&none);
	sigfillset(&all);
	int e = posix_spawn_file_actions_init(&fa);
	if (e)
		return sbx__set_error(err, SBX_E_NOMEM, "runner: cannot start %s: %s", runner,
				      strerror(e));
	e = posix_spawnattr_init(&at);
	if (!e)
		e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_adddup2(&fa, child_fd, SBX__WIRE_FD);
	if (!e)
		e = posix_spawn_file_actions_addclosefrom_np(&fa, SBX__WIRE_FD + 1);
	if (!e)
		e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						      POSIX_SPAWN_SETSID);
	if (!e)
		e = posix_spawnattr_setsigmask(&at, &none);
	if (!e)
		e = posix_spawnattr_setsigdefault(&at, &all);
	if (!e)
		e = posix_spawn(pid, runner, &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	if (e == ENOENT)
		return sbx__set_error(
		    err, SBX_E_IO,
		    "runner: %s not found (install sbx-runner beside the plugins, "
		    "or set runner: inproc in the registry)",
		    runner);
	if (e)
		return sbx__set_error(err, SBX_E_IO, "runner: cannot start %s: %s", runner,
				      strerror(e));
	return SBX_OK;
}

/* A connection to a new runner process. */
static int conn_new(sbx__link *l, sbx__conn **out, sbx_error *err)
{
	int rc = SBX_OK, sv[2] = {-1, -1};
	char runner[4096];
	sbx__conn *c = sbx__calloc(1, sizeof(*c));
	if (!c)
		return sbx__set_error(err, SBX_E_NOMEM, "runner: out of memory");
	c->fd = c->pidfd = -1;
	c->link = l;
	c->refs = 1;
	if (pthread_mutex_init(&c->lock, NULL) != 0) {
		sbx__free(c);
		return sbx__set_error(err, SBX_E_NOMEM, "runner: cannot make a mutex");
	}
	if (!(c->frame = sbx__alloc(SBX__WIRE_CHUNK))) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "runner: out of memory");
		goto fail;
	}
	if (sbx__runner_path(runner, sizeof(runner)) != SBX_OK) {
		rc = sbx__set_error(err, SBX_E_IO, "runner: the path of sbx-runner is too long");
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		rc = sbx__set_error(err, SBX_E_IO, "runner: socketpair: %s", strerror(errno));
		goto fail;
	}
	/* Room for several output chunks in flight each way (the kernel caps it at
	 * net.core.wmem_max). */
	for (int i = 0; i < 2; i++) {
		int size = 1 << 20;
		setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	}
	if (sv[1] == SBX__WIRE_FD) {
		/* dup2 onto itself would keep close-on-exec set. */
		int moved = fcntl(sv[1], F_DUPFD_CLOEXEC, SBX__WIRE_FD + 1);
		if (moved < 0) {
			rc = sbx__set_error(err, SBX_E_IO, "runner: fcntl: %s", strerror(errno));
			goto fail;
		}
		close(sv[1]);
		sv[1] = moved;
	}
	c->fd = sv[0];
	sv[0] = -1;
	rc = spawn_runner(runner, sv[1], &c->pid, err);
	close(sv[1]);
	sv[1] = -1;
	if (rc != SBX_OK)
		goto fail;
	c->pidfd = pidfd_open_(c->pid);
	if (c->pidfd < 0) {
		rc = sbx__set_error(err, SBX_E_IO, "runner: pidfd_open: %s", strerror(errno));
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		goto fail;
	}
	pthread_mutex_lock(&l->lock);
	c->gen = ++l->gens;
	pthread_mutex_unlock(&l->lock);
	*out = c;
	return SBX_OK;
fail:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	conn_unref(c);
	return rc;
}

static int do_call(sbx__conn *c, uint32_t type, const sbx__wbuf *req, const void *data,
		   size_t data_len, int64_t deadline, const char *late, sbx__call *call,
		   sbx_error *err);

/* LOAD on a new runner: the first one's reply is the manifest, a later one must match it. */
static int load(sbx__link *l, sbx__conn *c, sbx_error *err)
{
	sbx__wbuf req = {0};
	sbx__wput_u64(&req, 0);
	sbx__wput_str(&req, l->path);
	sbx__wput_u32(&req, (uint32_t)l->n_expected);
	for (size_t i = 0; i < l->n_expected; i++)
		sbx__wput_str(&req, l->expected[i]);
	sbx__wput_str(&req, l->state_dir);
	if (req.oom) {
		sbx__wbuf_free(&req);
		return sbx__set_error(err, SBX_E_NOMEM, "runner: out of memory");
	}
	sbx__call call;
	memset(&call, 0, sizeof(call));
	call.alias = l->expected[0];
	call.op = "load";
	int rc = do_call(c, SBX__W_LOAD, &req, NULL, 0, sbx__wire_now_ms() + LOAD_TIMEOUT_MS,
			 "was killed: loading the plugin took longer than 60 s", &call, err);
	sbx__wbuf_free(&req);
	if (rc != SBX_OK)
		return rc;
	sbx__rbuf r = {.p = call.reply.p, .len = call.reply.len};
	int st = (int)(int32_t)sbx__rget_u32(&r);
	int code = (int)(int32_t)sbx__rget_u32(&r);
	const char *msg = sbx__rget_str(&r);
	if (r.bad) {
		rc = sbx__set_error(err, SBX_E_PLUGIN_CRASHED, "%s: runner sent a malformed reply",
				    l->path);
	} else if (st != SBX_OK) {
		rc = sbx__set_error(err, st, "%s", msg && msg[0] ? msg : sbx_status_message(code));
	} else if (!l->manifest.p) {
		l->manifest = call.reply;
		memset(&call.reply, 0, sizeof(call.reply));
	} else if (l->manifest.len != call.reply.len ||
		   memcmp(l->manifest.p, call.reply.p, call.reply.len) != 0) {
		rc = sbx__set_error(err, SBX_E_FAULTY,
				    "%s: the plugin registers other aliases or ops than when it "
				    "was first loaded (was the file replaced?)",
				    l->path);
	}
	sbx__wbuf_free(&call.reply);
	return rc;
}

/* Ends a runner the host is done with: kills it when it has not exited within wait_ms (-1:
 * at once), and reaps it. No call may be in flight. */
static void reap(sbx__conn *c, int wait_ms)
{
	pthread_mutex_lock(&c->lock);
	int reaped = c->reaped;
	c->closing = 1;
	pthread_mutex_unlock(&c->lock);
	if (reaped)
		return;
	if (wait_ms < 0 || !pid_exited(c->pidfd, wait_ms))
		kill_conn(c, "crashed", "was stopped by the host");
	pid_exited(c->pidfd, -1);
	waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, NULL, WEXITED | WNOHANG);
	pthread_mutex_lock(&c->lock);
	c->reaped = 1;
	pthread_mutex_unlock(&c->lock);
}

static int start(sbx__link *l, sbx__conn **out, sbx_error *err)
{
	sbx__conn *c = NULL;
	int rc = conn_new(l, &c, err);
	if (rc != SBX_OK)
		return rc;
	rc = load(l, c, err);
	if (rc != SBX_OK) {
		/* The load's message says why; a runner that died loading was counted. */
		reap(c, -1);
		conn_unref(c);
		return rc;
	}
	*out = c;
	return SBX_OK;
}

int sbx__link_acquire(sbx__link *l, const char *alias, const char *op, sbx__conn **out,
		      sbx_error *err)
{
	int rc = SBX_OK;
	*out = NULL;
	pthread_mutex_lock(&l->lock);
	for (;;) {
		if (l->faulty) {
			rc = sbx__set_error(err, SBX_E_FAULTY, "%s: plugin is faulty: %s", alias,
					    l->fault);
			break;
		}
		if (l->cur) {
			sbx__conn *c = l->cur;
			pthread_mutex_lock(&c->lock);
			c->refs++;
			pthread_mutex_unlock(&c->lock);
			pthread_mutex_unlock(&l->lock);
			if (conn_alive(c)) {
				*out = c;
				return SBX_OK;
			}
			conn_unref(c);
			pthread_mutex_lock(&l->lock);
			if (l->cur == c)
				pthread_cond_wait(&l->changed, &l->lock); /* its death is noted */
			continue;
		}
		if (l->starting) {
			pthread_cond_wait(&l->changed, &l->lock);
			continue;
		}
		int64_t wait = l->next_start_ms - sbx__wire_now_ms();
		if (wait > 0) {
			pthread_mutex_unlock(&l->lock);
			struct timespec ts = {wait / 1000, (wait % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			pthread_mutex_lock(&l->lock);
			continue;
		}
		l->starting = 1;
		pthread_mutex_unlock(&l->lock);
		sbx__conn *c = NULL;
		sbx_error serr = {0};
		rc = start(l, &c, &serr);
		pthread_mutex_lock(&l->lock);
		l->starting = 0;
		pthread_cond_broadcast(&l->changed);
		if (rc == SBX_E_PLUGIN_CRASHED) {
			/* It died loading: the message names the alias and "load". */
			if (err)
				*err = serr;
			break;
		}
		if (rc != SBX_OK) {
			sbx__set_error(err, rc, "%s: %s: %.400s", alias, op, serr.message);
			if (rc != SBX_E_NOMEM && rc != SBX_E_IO) {
				l->faulty = 1;
				snprintf(l->fault, sizeof(l->fault), "%.400s", serr.message);
			}
			break;
		}
		l->cur = c; /* the link keeps the reference start gave */
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

sbx__conn *sbx__link_current(sbx__link *l)
{
	sbx__conn *c = NULL;
	pthread_mutex_lock(&l->lock);
	if (l->cur) {
		pthread_mutex_lock(&l->cur->lock);
		if (!l->cur->dead) {
			c = l->cur;
			c->refs++;
		}
		pthread_mutex_unlock(&l->cur->lock);
	}
	pthread_mutex_unlock(&l->lock);
	return c;
}

void sbx__conn_fail(sbx__conn *c, const char *why)
{
	kill_conn(c, "crashed", why);
}

int sbx__link_fault(sbx__link *l, char *reason, size_t cap)
{
	pthread_mutex_lock(&l->lock);
	int faulty = l->faulty;
	if (faulty)
		snprintf(reason, cap, "%s", l->fault);
	pthread_mutex_unlock(&l->lock);
	return faulty ? SBX_E_FAULTY : SBX_OK;
}

const sbx__wbuf *sbx__link_manifest(const sbx__link *l)
{
	return &l->manifest;
}

/* ---- calls */

static void seconds(char *buf, size_t cap, uint64_t ms)
{
	snprintf(buf, cap, "%g s", (double)ms / 1000.0);
}

/* Sends the request and waits for its end; past deadline (-1: none) the runner is killed
 * with `late` as the reason. */
static int do_call(sbx__conn *c, uint32_t type, const sbx__wbuf *req, const void *data,
		   size_t data_len, int64_t deadline, const char *late, sbx__call *call,
		   sbx_error *err)
{
	memset(&call->reply, 0, sizeof(call->reply));
	call->done = call->status = call->stop = call->frame_rc = 0;
	memset(&call->err, 0, sizeof(call->err));
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int e = pthread_cond_init(&call->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (e)
		return sbx__set_error(err, SBX_E_NOMEM, "%s: %s: cannot make a condition variable",
				      call->alias, call->op);

	pthread_mutex_lock(&c->lock);
	int rc = c->dead ? SBX_E_PLUGIN_CRASHED : slot_take(c, call);
	if (rc == SBX_E_PLUGIN_CRASHED)
		sbx__set_error(err, rc, "%s: %s: plugin %s: its runner (pid %ld) %s", call->alias,
			       call->op, c->verb ? c->verb : "crashed", (long)c->pid, c->death);
	else if (rc != SBX_OK)
		sbx__set_error(err, rc, "%s: %s: out of memory", call->alias, call->op);
	pthread_mutex_unlock(&c->lock);
	if (rc != SBX_OK) {
		pthread_cond_destroy(&call->cond);
		return rc;
	}
	e = sbx__wire_send(c->fd, type, 0, call->id, req->p, req->len, deadline);
	if (!e && data_len)
		e = sbx__wire_send(c->fd, SBX__W_DATA, 0, call->id, data, data_len, deadline);
	pthread_mutex_lock(&c->lock);
	if (e == ETIMEDOUT) {
		kill_locked(c, "hung", late);
	} else if (e && e != EPIPE) {
		char why[200];
		snprintf(why, sizeof(why), "was killed: the host could not send to it: %s",
			 strerror(e));
		kill_locked(c, "crashed", why);
	}
	while (!call->done) {
		if (!c->reading) {
			/* No caller reads: this one does, until its call is over. */
			c->reading = 1;
			pthread_mutex_unlock(&c->lock);
			read_some(c, call, deadline, late);
			pthread_mutex_lock(&c->lock);
			if (call->done) {
				release_reader_locked(c);
				break;
			}
			c->reading = 0;
			if (deadline >= 0 && sbx__wire_now_ms() >= deadline)
				deadline = -1; /* killed: read on until its death is seen */
			continue;
		}
		if (deadline < 0) {
			pthread_cond_wait(&call->cond, &c->lock);
			continue;
		}
		int64_t ms = deadline;
		struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
		if (pthread_cond_timedwait(&call->cond, &c->lock, &ts) == ETIMEDOUT &&
		    !call->done) {
			kill_locked(c, "hung", late);
			deadline = -1; /* the reader ends the call when the runner is gone */
		}
	}
	rc = call->status;
	pthread_mutex_unlock(&c->lock);
	pthread_cond_destroy(&call->cond);
	if (rc != SBX_OK) {
		sbx__wbuf_free(&call->reply);
		if (err)
			*err = call->err;
	}
	return rc;
}

int sbx__conn_call(sbx__conn *c, uint32_t type, const sbx__wbuf *req, const void *data,
		   size_t data_len, uint64_t own_timeout_ms, sbx__call *call, sbx_error *err)
{
	const sbx__runner_opts *o = &c->link->opts;
	char late[240] = "", t1[32], t2[32];
	int64_t limit = -1;
	if (own_timeout_ms) {
		limit = (int64_t)(own_timeout_ms + o->grace_ms);
		seconds(t1, sizeof(t1), own_timeout_ms);
		seconds(t2, sizeof(t2), o->grace_ms);
		snprintf(late, sizeof(late),
			 "was killed: a call to %s did not return within its timeout (%s) plus "
			 "the grace period (%s)",
			 call->op, t1, t2);
	} else if (o->timeout_ms) {
		limit = (int64_t)o->timeout_ms;
		seconds(t1, sizeof(t1), o->timeout_ms);
		snprintf(late, sizeof(late),
			 "was killed: a call to %s did not return within the runner timeout (%s)",
			 call->op, t1);
	}
	int64_t deadline = limit >= 0 ? sbx__wire_now_ms() + limit : -1;
	return do_call(c, type, req, data, data_len, deadline, late, call, err);
}

/* ---- the link */

int sbx__link_start(const char *path, const char *state_dir, const char *const *expected,
		    size_t n_expected, const sbx__runner_opts *opts, sbx__link **out,
		    sbx_error *err)
{
	int rc = SBX_OK;
	*out = NULL;
	sbx__link *l = sbx__calloc(1, sizeof(*l));
	if (!l)
		return sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory", path);
	l->opts = *opts;
	if (pthread_mutex_init(&l->lock, NULL) != 0) {
		sbx__free(l);
		return sbx__set_error(err, SBX_E_NOMEM, "%s: cannot make a mutex", path);
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	int e = pthread_cond_init(&l->changed, &ca);
	pthread_condattr_destroy(&ca);
	if (e) {
		pthread_mutex_destroy(&l->lock);
		sbx__free(l);
		return sbx__set_error(err, SBX_E_NOMEM, "%s: cannot make a condition variable",
				      path);
	}
	l->path = sbx__strdup(path);
	l->state_dir = state_dir ? sbx__strdup(state_dir) : NULL;
	l->expected = sbx__calloc(n_expected ? n_expected : 1, sizeof(*l->expected));
	l->deaths = sbx__calloc(opts->max_crashes ? opts->max_crashes : 1, sizeof(*l->deaths));
	if (!l->path || (state_dir && !l->state_dir) || !l->expected || !l->deaths) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory", path);
		goto fail;
	}
	for (size_t i = 0; i < n_expected; i++) {
		if (!(l->expected[i] = sbx__strdup(expected[i] ? expected[i] : ""))) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory", path);
			goto fail;
		}
		l->n_expected++;
	}
	rc = start(l, &l->cur, err);
	if (rc != SBX_OK)
		goto fail;
	*out = l;
	return SBX_OK;
fail:
	sbx__link_stop(l);
	return rc;
}

void sbx__link_stop(sbx__link *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	sbx__conn *c = l->cur;
	l->cur = NULL;
	pthread_mutex_unlock(&l->lock);
	if (c) {
		/* End of stream: the runner unloads the plugin and exits. */
		shutdown(c->fd, SHUT_WR);
		uint64_t wait = l->opts.grace_ms;
		reap(c, wait > 60000 ? 60000 : (int)wait);
		conn_unref(c);
	}
	for (size_t i = 0; i < l->n_expected; i++)
		sbx__free(l->expected[i]);
	sbx__free(l->expected);
	sbx__free(l->deaths);
	sbx__free(l->path);
	sbx__free(l->state_dir);
	sbx__wbuf_free(&l->manifest);
	pthread_cond_destroy(&l->changed);
	pthread_mutex_destroy(&l->lock);
	sbx__free(l);
}

/* Running one command in a local sandbox.
 *
 * The command gets its own session and process group and, where the machine allows, its own
 * cgroup below the sandbox's. Without a cgroup an intermediate helper process marks itself a
 * child subreaper, so every orphan of the command is reparented to it, and kills every
 * descendant when told to. Output is read with poll and pushed to the host as it arrives.
 *
 * When the command's own process exits, what it left running (`&`, nohup, setsid, daemons)
 * lives on in the sandbox: its cgroup (or its environment tag, without one) keeps it in reach
 * of pause and destroy. A short grace lets the pipes drain; a leftover still holding them then
 * gets a sink, a small process that reads and drops what it writes later, so the call returns
 * on time and the writer sees neither SIGPIPE nor EPIPE. A timeout (or the host refusing more
 * output) kills the whole tree, escapees included.
 *
 * The command is started with clone(CLONE_VM | CLONE_VFORK): the child borrows the caller's
 * memory until it execs, so nothing is copied however large the harness is or however many
 * threads it runs (fork would copy its page tables and make every thread take copy-on-write
 * faults). The host's thread is suspended meanwhile; the child makes only async-signal-safe
 * system calls on its own stack, writes nothing of the caller's but the report of a failed
 * set-up, and starts with every signal blocked so no handler of the caller's runs in it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "child.h"
#include "exec.h"
#include "files.h"
#include "meta.h"
#include "ns.h"
#include "spawn.h"
#include "state.h"

extern char **environ;

#define TAG_ENV      "SBX_LOCAL_SANDBOX"
#define EXEC_TAG_ENV "SBX_LOCAL_EXEC" /* one per exec: what a timeout kills beyond the cgroup */

static void kill_by_env(const char *name, const char *value);

typedef local_plan plan;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int command_entry(void *arg)
{
	((plan *)arg)->ran = 1;
	local_child_run(arg);
	return 127;
}

/* ---- parent side */

typedef struct strv {
	char **v;
	size_t n, cap;
} strv;

static int strv_set(strv *s, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
	char *copy = strdup(kv);
	if (!copy)
		return -1;
	for (size_t i = 0; i < s->n; i++) {
		if (strncmp(s->v[i], kv, klen) == 0 && s->v[i][klen] == '=') {
			free(s->v[i]);
			s->v[i] = copy;
			return 0;
		}
	}
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		char **v = realloc(s->v, cap * sizeof(*v));
		if (!v) {
			free(copy);
			return -1;
		}
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = copy;
	s->v[s->n] = NULL;
	return 0;
}

static int strv_set2(strv *s, const char *k, const char *v)
{
	size_t len = strlen(k) + strlen(v) + 2;
	char *kv = malloc(len);
	if (!kv)
		return -1;
	snprintf(kv, len, "%s=%s", k, v);
	int rc = strv_set(s, kv);
	free(kv);
	return rc;
}

static void strv_free(strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

static const char *strv_get(const strv *s, const char *key)
{
	size_t klen = strlen(key);
	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->v[i], key, klen) == 0 && s->v[i][klen] == '=')
			return s->v[i] + klen + 1;
	return NULL;
}

/* bash from PATH, else /bin/sh. The answer for the last PATH seen is kept: nearly every
 * exec has the same one. */
static pthread_mutex_t shell_lock = PTHREAD_MUTEX_INITIALIZER;
static char shell_path_key[4096], shell_found[4200];

/* bash in a sandbox's own tree: its upper dir first (what its commands installed), then the
 * tree below; else /bin/sh. */
static const char *find_shell_in(const char *dir, const local_join *j, char *buf, size_t cap)
{
	for (const char *d = dir;;) {
		const char *end = strchr(d, ':');
		int dlen = end ? (int)(end - d) : (int)strlen(d);
		char probe[4400];
		for (int k = 0; k < 2 && dlen > 0 && d[0] == '/'; k++) {
			int n = k == 0 ? snprintf(probe, sizeof(probe), "%s/upper%.*s/bash", j->dir,
						  dlen, d)
				       : snprintf(probe, sizeof(probe), "%s%.*s/bash", j->root,
						  dlen, d);
			if (n > 0 && (size_t)n < sizeof(probe) &&
			    faccessat(AT_FDCWD, probe, X_OK, 0) == 0) {
				snprintf(buf, cap, "%.*s/bash", dlen, d);
				return buf;
			}
		}
		if (!end)
			break;
		d = end + 1;
	}
	snprintf(buf, cap, "/bin/sh");
	return buf;
}

static const char *find_shell(const char *path, const local_join *j, char *buf, size_t cap)
{
	const char *dir = path ? path : "/usr/local/bin:/usr/bin:/bin";
	if (j->active && j->root[0])
		return find_shell_in(dir, j, buf, cap);
	pthread_mutex_lock(&shell_lock);
	int hit = shell_found[0] && strcmp(shell_path_key, dir) == 0;
	if (hit)
		snprintf(buf, cap, "%s", shell_found);
	pthread_mutex_unlock(&shell_lock);
	if (hit)
		return buf;
	const char *found = "/bin/sh";
	for (const char *d = dir;;) {
		const char *end = strchr(d, ':');
		int dlen = end ? (int)(end - d) : (int)strlen(d);
		int n = snprintf(buf, cap, "%.*s/bash", dlen, d);
		if (dlen > 0 && n > 0 && (size_t)n < cap && access(buf, X_OK) == 0) {
			found = buf;
			break;
		}
		if (!end)
			break;
		d = end + 1;
	}
	if (found != buf)
		snprintf(buf, cap, "%s", found);
	pthread_mutex_lock(&shell_lock);
	if (strlen(dir) < sizeof(shell_path_key) && strlen(buf) < sizeof(shell_found)) {
		snprintf(shell_path_key, sizeof(shell_path_key), "%s", dir);
		snprintf(shell_found, sizeof(shell_found), "%s", buf);
	}
	pthread_mutex_unlock(&shell_lock);
	return buf;
}

/* The environment: the documented base (env.c: PATH, LANG, TERM, HOME the work dir, SHELL,
 * plus env_passthrough), the host's whole environment (inherit_env), or, for a sandbox with a
 * tree of its own (rootfs: DIR, image), its image's Env or the base, never the host's; then
 * what create saved, the request's, PWD and the tags. On the base, SHELL names the shell that
 * runs shell commands with the final PATH, unless create or the call set it: bash started
 * without SHELL looks its user up in the passwd database to fill it in, at every command.
 * That shell's path is left in `shell` (empty when SHELL was not set here). */
static int build_env(const local_state *st, const char *id, const char *work, const char *cwd,
		     const char *exec_tag, const sbx_exec_request *req, const local_join *j,
		     strv *env, char *shell, size_t shell_cap, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	char **saved = NULL;
	size_t ilen = 0;
	char *image_env = local_join_image_env(j, &ilen);
	int rc = local_meta_env(st, id, &saved, err);
	if (rc != SBX_OK) {
		free(image_env);
		return rc;
	}
	int base = 0;
	if (image_env) {
		for (size_t i = 0; i < ilen; i += strlen(image_env + i) + 1)
			if (strchr(image_env + i, '=') && strv_set(env, image_env + i) != 0)
				goto nomem;
		if (!strv_get(env, "PATH") &&
		    strv_set(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/"
				  "bin") != 0)
			goto nomem;
	} else if (st->inherit_env && !(j->active && j->root[0])) {
		for (char **e = environ; e && *e; e++)
			if (strchr(*e, '=') && strv_set(env, *e) != 0)
				goto nomem;
	} else {
		/* The documented base (env.c); the host's own variables only by name. */
		base = 1;
		if (strv_set(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/"
				  "bin") != 0 ||
		    strv_set(env, "LANG=C.UTF-8") != 0 || strv_set(env, "TERM=dumb") != 0 ||
		    strv_set2(env, "HOME", work) != 0)
			goto nomem;
		for (char **name = st->passthrough; name && *name; name++) {
			const char *v = getenv(*name);
			if (v && strv_set2(env, *name, v) != 0)
				goto nomem;
		}
	}
	for (size_t i = 0; saved && saved[i]; i++)
		if (strv_set(env, saved[i]) != 0)
			goto nomem;
	for (uint32_t i = 0; i < req->n_env; i++)
		if (strv_set2(env, req->env[i].key, req->env[i].value) != 0)
			goto nomem;
	if (base && !strv_get(env, "SHELL") &&
	    strv_set2(env, "SHELL", find_shell(strv_get(env, "PATH"), j, shell, shell_cap)) != 0)
		goto nomem;
	if (strv_set2(env, "PWD", cwd) != 0 || strv_set2(env, TAG_ENV, id) != 0 ||
	    strv_set2(env, EXEC_TAG_ENV, exec_tag) != 0)
		goto nomem;
	local_strv_free(saved);
	free(image_env);
	return SBX_OK;
nomem:
	local_strv_free(saved);
	free(image_env);
	return h->set_error(err, SBX_E_NOMEM, "local: exec: out of memory");
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int push(const sbx_exec_request *req, uint32_t stream, int *fd, int *out_rc)
{
	char buf[65536];
	ssize_t r = read(*fd, buf, sizeof(buf));
	if (r > 0) {
		int rc = req->output ? req->output(req->output_ctx, stream, buf, (size_t)r) : 0;
		if (rc != 0 && *out_rc == 0)
			*out_rc = rc;
		return 1;
	}
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	close_fd(fd);
	return 0;
}

/* Closes the plan's fds that belong to the child (the parent's copies after the spawn, or all of
 * them on an early exit). */
static void close_child_ends(plan *p)
{
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->report_fd);
	close_fd(&p->status_fd);
	close_fd(&p->control_fd);
	close_fd(&p->cg_fd);
	close_fd(&p->cwd_fd);
}

typedef struct run {
	pid_t child;
	int lost;  /* the subreaper helper died before reporting: the exit status is unknown */
	int taken; /* someone else in this process reaped the command: its status is unknown */
	int pidfd;
	int out_r, err_r, in_w;
	int status_r, control_w;
	int helper;    /* the command runs under the subreaper helper (sbx-local-exec) */
	int helper_fd; /* its pidfd, or -1 */
	int leftovers; /* 0 once the helper said nothing of the tree outlived the command */
	int exited;
	int status;
	const uint8_t *in_data;
	size_t in_left;
} run;

static void feed_stdin(run *r)
{
	while (r->in_left > 0) {
		ssize_t w = send(r->in_w, r->in_data, r->in_left, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			break; /* the command closed its stdin: the rest is not wanted */
		}
		r->in_data += w;
		r->in_left -= (size_t)w;
	}
	shutdown(r->in_w, SHUT_WR);
	close_fd(&r->in_w);
}

/* Waits for the command (not under the helper) as waitpid does, through its pidfd where
 * the kernel can (5.4): a waitpid by pid could reap another thread's child that got the pid
 * after someone else reaped this one. Returns the pid, 0 while it runs (WNOHANG), or -1 with
 * errno (ECHILD: no longer this process's to reap). */
static pid_t child_wait(const run *r, int options, int *status)
{
	if (r->pidfd >= 0) {
		siginfo_t si;
		si.si_pid = 0;
		if (waitid(P_PIDFD, (id_t)r->pidfd, &si, WEXITED | options) == 0) {
			if (si.si_pid == 0)
				return 0;
			if (si.si_code == CLD_EXITED)
				*status = (si.si_status & 0xff) << 8;
			else /* CLD_KILLED, CLD_DUMPED */
				*status =
				    (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
			return si.si_pid;
		}
		if (errno != EINVAL)
			return -1;
	}
	return waitpid(r->child, status, options);
}

/* The error of an exec whose command someone else in this process reaped. */
static int status_taken(sbx_error *err)
{
	struct sigaction sa;
	int ignored = sigaction(SIGCHLD, NULL, &sa) == 0 &&
		      (sa.sa_handler == SIG_IGN || (sa.sa_flags & SA_NOCLDWAIT));
	return sbxs_host->set_error(
	    err, SBX_E_BACKEND,
	    "local: exec: the command ended, but %s, so its exit status is unknown (with "
	    "kill_mechanism: subreaper the status comes over a pipe instead)",
	    ignored ? "this process ignores SIGCHLD and the kernel discarded the status"
		    : "another wait in this process reaped it first (a waitpid(-1), or a "
		      "SIGCHLD handler that reaps every child)");
}

static void check_exit(const local_state *st, run *r)
{
	(void)st;
	if (r->exited)
		return;
	if (r->helper) {
		local_exit_report er;
		ssize_t n = read(r->status_r, &er, sizeof(er));
		if (n == (ssize_t)sizeof(er)) {
			r->status = er.status;
			r->leftovers = er.leftovers;
			r->exited = 1;
		} else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			/* The helper died unasked: the command (or someone) killed it. */
			r->status = SIGKILL;
			r->exited = 1;
			r->lost = 1;
		}
		return;
	}
	int status;
	pid_t got = child_wait(r, WNOHANG, &status);
	if (got > 0) {
		r->status = status;
		r->exited = 1;
		r->child = -1;
	} else if (got < 0 && errno == ECHILD) {
		/* Ended, and reaped by a waitpid(-1) of the harness's, or by the kernel
		 * under SIGCHLD ignored. Its pid may be someone else's already: never
		 * signalled nor waited for again. */
		r->taken = 1;
		r->exited = 1;
		r->child = -1;
	}
}

/* ---- helpers whose command ended: reaped later, not waited for
 *
 * Once a helper has reported its command's status and seen the control pipe close, all it
 * has left is its exit. Waiting for that cost every exec one more round of wake-ups (the
 * helper's, then this thread's again), the most on a busy machine: 0.1 of the floor under
 * bench_exec's ballast. So the exec keeps a pidfd of its helper and leaves it here; each
 * later exec reaps the ones that ended, and fini waits for the rest. A pidfd, not the pid:
 * a harness that reaps every child (waitpid(-1)) frees the pid for reuse, and waitid on the
 * pidfd then fails instead of reaping someone else. */
#define OWED_MAX 256
static pthread_mutex_t owed_lock = PTHREAD_MUTEX_INITIALIZER;
static int owed[OWED_MAX];
static size_t n_owed;

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* 1 once the process behind pidfd is reaped (or is not ours to reap any more), 0 while it
 * runs, -1 on a kernel that cannot wait on a pidfd (before 5.4; pidfd_open came in 5.3). */
static int reaped(int pidfd, int options)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED | options) != 0)
		return errno == EINVAL ? -1 : errno != EINTR;
	return si.si_pid != 0;
}

static void reap_owed_locked(void)
{
	size_t k = 0;
	for (size_t i = 0; i < n_owed; i++) {
		if (reaped(owed[i], WNOHANG))
			close(owed[i]);
		else
			owed[k++] = owed[i];
	}
	n_owed = k;
}

/* Takes pidfd (of helper pid, which is about to exit) and reaps it now or later. */
static void reap_later(int pidfd, pid_t pid)
{
	int done = reaped(pidfd, WNOHANG);
	if (done < 0) {
		close(pidfd);
		waitpid(pid, NULL, 0);
		return;
	}
	int oldest = -1;
	pthread_mutex_lock(&owed_lock);
	reap_owed_locked();
	if (!done) {
		if (n_owed == OWED_MAX) {
			oldest = owed[0];
			memmove(owed, owed + 1, (n_owed - 1) * sizeof(*owed));
			n_owed--;
		}
		owed[n_owed++] = pidfd;
		pidfd = -1;
	}
	pthread_mutex_unlock(&owed_lock);
	if (pidfd >= 0)
		close(pidfd);
	if (oldest >= 0) {
		while (!reaped(oldest, 0))
			;
		close(oldest);
	}
}

void local_exec_reap_all(void)
{
	pthread_mutex_lock(&owed_lock);
	for (size_t i = 0; i < n_owed; i++) {
		while (!reaped(owed[i], 0))
			;
		close(owed[i]);
	}
	n_owed = 0;
	pthread_mutex_unlock(&owed_lock);
}

void local_exec_fork_child(void)
{
	/* The helpers owed are the parent's children: nothing here can reap them. */
	pthread_mutex_init(&owed_lock, NULL);
	for (size_t i = 0; i < n_owed && i < OWED_MAX; i++)
		close(owed[i]);
	n_owed = 0;
	pthread_mutex_init(&shell_lock, NULL);
	shell_found[0] = '\0';
}

/* ---- starting sbx-local-exec (helper/main.c): the subreaper helper and the sink */

#define HELPER_REPORT 3 /* sbx-local-exec's report pipe (helper/main.c) */

static void helper_failed(int fd, int err)
{
	local_child_report r = {LOCAL_STAGE_HELPER, err};
	ssize_t w = write(fd, &r, sizeof(r));
	(void)w;
}

/* The subreaper helper for the command of p, with p's pipes. Returns its pid or -1; *pidfd as
 * for local_spawn. */
static pid_t start_helper(const local_state *st, const plan *p, int *pidfd)
{
	size_t argc = 0;
	while (p->argv[argc])
		argc++;
	char **av = malloc((argc + 16) * sizeof(*av));
	if (!av)
		return -1;
	char flags[24], caps[24];
	size_t n = 0;
	av[n++] = (char *)st->exec_exe;
	if (p->cwd_fd < 0) {
		av[n++] = "-c";
		av[n++] = (char *)p->cwd;
	}
	if (p->out_path) {
		av[n++] = "-o";
		av[n++] = (char *)p->out_path;
	}
	if (p->err_path) {
		av[n++] = "-e";
		av[n++] = (char *)p->err_path;
	}
	const local_join *j = p->join && p->join->via_helper ? p->join : NULL;
	if (j) {
		snprintf(flags, sizeof(flags), "%d", j->helper_flags);
		snprintf(caps, sizeof(caps), "%d", j->cap_last);
		av[n++] = "-j";
		av[n++] = flags;
		av[n++] = "-C";
		av[n++] = caps;
	}
	av[n++] = "--";
	for (size_t i = 0; i <= argc; i++)
		av[n++] = p->argv[i];
	local_program hs = {.exe = st->exec_exe,
			    .argv = av,
			    .envp = p->envp,
			    .fds = {p->in_fd, p->out_fd, p->err_fd, p->report_fd, p->status_fd,
				    p->control_fd, p->cwd_fd, j ? j->pidfd : -1},
			    .n_fds = 8 + LOCAL_JOIN_PROCS,
			    .report = HELPER_REPORT,
			    .failed = helper_failed,
			    .pdeathsig = 1};
	for (int i = 0; i < LOCAL_JOIN_PROCS; i++)
		hs.fds[8 + i] = j ? j->procs[i] : -1;
	pid_t pid = local_spawn_program(&hs, pidfd);
	int saved = errno;
	free(av);
	errno = saved;
	return pid;
}

/* Hands the read ends still open to a sink: a detached process (sbx-local-exec -s) that reads
 * and drops whatever the leftovers holding them write, until the last writer closes them. In
 * a cgroup it joins the exec's, so pause freezes it and destroy kills it with the leftovers.
 * It may outlive the host by far (a leftover writes for hours), so it does not get the host's
 * stdio either: whoever reads that (a terminal's pipe, a test runner) would wait for it. */
static void start_sink(const local_state *st, run *r, const char *cg)
{
	if (!st->exec_exe[0])
		return; /* logged at init: the host's ends close, a leftover writing gets EPIPE */
	int procs = -1;
	char path[1500];
	int n = snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	if (cg[0] && n > 0 && (size_t)n < sizeof(path))
		procs = open(path, O_WRONLY | O_CLOEXEC);
	int dn = open("/dev/null", O_RDWR | O_CLOEXEC);
	char *av[] = {(char *)st->exec_exe, "-s", NULL};
	char *env[] = {NULL};
	local_program hs = {.exe = st->exec_exe,
			    .argv = av,
			    .envp = env,
			    .fds = {dn, dn, dn, r->out_r, r->err_r, procs},
			    .n_fds = 6,
			    .report = -1};
	pid_t pid = dn >= 0 ? local_spawn_program(&hs, NULL) : -1;
	int status = 0;
	pid_t w = pid;
	/* It forks the sink and exits at once: nobody has to reap the sink. With SIGCHLD
	 * ignored (or a waitpid(-1) first) its status is gone, and it is taken as started. */
	if (pid > 0)
		while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
			;
	if (pid < 0 || (w != pid && errno != ECHILD) ||
	    (w == pid && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)))
		sbxs_host->log(SBX_LOG_WARN, "local",
			       "exec: cannot start a sink for a leftover's output (%s): it gets "
			       "EPIPE",
			       pid < 0 ? strerror(errno) : "sbx-local-exec -s failed");
	if (dn >= 0)
		close(dn);
	if (procs >= 0)
		close(procs);
}

/* Reads whatever is left in the pipes once every writer is dead, for at most `ms`. */
static void drain(const sbx_exec_request *req, run *r, int ms, int *out_rc)
{
	int64_t until = now_ms() + ms;
	while (*out_rc == 0 && (r->out_r >= 0 || r->err_r >= 0)) {
		struct pollfd p[2] = {{.fd = r->out_r, .events = POLLIN},
				      {.fd = r->err_r, .events = POLLIN}};
		int64_t left = until - now_ms();
		if (left <= 0 || poll(p, 2, (int)left) <= 0)
			break;
		if (p[0].revents)
			push(req, SBX_STREAM_STDOUT, &r->out_r, out_rc);
		if (p[1].revents)
			push(req, SBX_STREAM_STDERR, &r->err_r, out_rc);
	}
}

/* Where the command starts: the work dir, or req->cwd resolved beneath it (relative, or
 * absolute inside it) and opened, so the child enters exactly the folder that was checked
 * (fchdir) and `--cwd /` or `../../..` are refused. In namespaces an absolute cwd outside the
 * work dir names a folder of the sandbox's own root, entered by path after joining its mount
 * namespace (a descriptor from the host's would lead back out of it). */
static int resolve_cwd(local_state *st, const char *id, const char *work, const char *share,
		       const sbx_exec_request *req, char *buf, size_t cap, int *fd, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	const char *c = req->cwd;
	*fd = -1;
	int inside =
	    c && c[0] == '/' && (local_under(c, work) || (share[0] && local_under(c, share)));
	int n;
	if (!c || !c[0]) {
		/* A work dir that links to a shared host folder is named by that folder's path,
		 * as the command's pwd and $PWD show it. */
		n = snprintf(buf, cap, "%s",
			     share[0] && st->iso.level != LOCAL_ISO_NAMESPACES ? share : work);
	} else if (c[0] == '/' && !inside && st->iso.level == LOCAL_ISO_NAMESPACES) {
		n = snprintf(buf, cap, "%s", c);
	} else {
		int rc = local_open_dir(st, id, c, fd, err);
		if (rc != SBX_OK)
			return rc;
		char proc[64];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", *fd);
		ssize_t l = readlink(proc, buf, cap - 1);
		n = l > 0 && (size_t)l < cap - 1 ? (int)l : -1;
		if (n > 0)
			buf[n] = '\0';
		else
			n = c[0] == '/' ? snprintf(buf, cap, "%s", c)
					: snprintf(buf, cap, "%s/%s", work, c);
		if (st->iso.level == LOCAL_ISO_NAMESPACES) {
			close(*fd);
			*fd = -1;
		}
	}
	if (n < 0 || (size_t)n >= cap)
		return h->set_error(err, SBX_E_INVAL, "local: exec: cwd is too long");
	return SBX_OK;
}

static void exec_failed(const sbx_exec_request *req, const local_child_report *rep,
			sbx_exec_outcome *out)
{
	char msg[600];
	const char *what = req->shell ? "shell" : req->argv[0];
	int n = snprintf(msg, sizeof(msg), "local: exec: cannot run '%.400s': %s\n", what,
			 strerror(rep->err));
	if (n > 0 && req->output)
		req->output(req->output_ctx, SBX_STREAM_STDERR, msg,
			    (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	out->exit_code = rep->err == EACCES || rep->err == ENOEXEC ? 126 : 127;
	out->signal = 0;
}

int local_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		  sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	local_state *st = state;
	char work[1200], cwd[4200], cg[1400] = "", shell_buf[4200] = "", mark[1300] = "";
	strv env = {0};
	char **argv = NULL;
	run r = {.child = -1,
		 .pidfd = -1,
		 .helper_fd = -1,
		 .leftovers = 1,
		 .out_r = -1,
		 .err_r = -1,
		 .in_w = -1,
		 .status_r = -1,
		 .control_w = -1};
	plan p = {.in_fd = -1,
		  .cwd_fd = -1,
		  .out_fd = -1,
		  .err_fd = -1,
		  .report_fd = -1,
		  .cg_fd = -1,
		  .status_fd = -1,
		  .control_fd = -1};
	local_join join = {.pidfd = -1};
	for (size_t i = 0; i < LOCAL_JOIN_PROCS; i++)
		join.procs[i] = -1;
	int kill_tree = 0;
	int report_r = -1, rc = local_path(st, id, "work", work, sizeof(work), err);
	if (rc != SBX_OK)
		return rc;
	/* lstat: only a work dir that links to a shared folder pays for following it. */
	struct stat sb;
	char share[1100] = "";
	int found = lstat(work, &sb) == 0;
	if (found && S_ISLNK(sb.st_mode)) {
		local_work_link(work, share, sizeof(share));
		found = stat(work, &sb) == 0;
	}
	if (!found)
		return h->set_error(err, SBX_E_NOT_FOUND, "local: exec: sandbox %s not found", id);
	if (local_cg_frozen(st, id) == 1)
		return h->set_error(err, SBX_E_PAUSED,
				    "local: exec: sandbox %s is paused; resume it first", id);
	rc = resolve_cwd(st, id, work, share, req, cwd, sizeof(cwd), &p.cwd_fd, err);
	if (rc != SBX_OK)
		return rc;
	/* Tags the command's processes for a timeout: at the plain level a root command can
	 * move itself out of its cgroup (contained: false), and its tag still finds it. */
	unsigned char rnd[8];
	char exec_tag[40];
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
		memset(rnd, 0, sizeof(rnd));
	snprintf(exec_tag, sizeof(exec_tag), "%s.%02x%02x%02x%02x%02x%02x%02x%02x", id, rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	rc = local_join_prepare(st, id, &join, err);
	if (rc == SBX_OK)
		rc = build_env(st, id, work, cwd, exec_tag, req, &join, &env, shell_buf,
			       sizeof(shell_buf), err);
	if (rc != SBX_OK)
		goto out;
	p.join = join.active ? &join : NULL;
	r.helper = st->kill_mechanism == LOCAL_KILL_SUBREAPER || join.via_helper;
	if (req->shell) {
		argv = calloc(4, sizeof(*argv));
		if (!argv)
			goto nomem;
		/* build_env found it already when it named it in SHELL (the same PATH). */
		argv[0] = shell_buf[0] ? shell_buf
				       : (char *)find_shell(strv_get(&env, "PATH"), &join,
							    shell_buf, sizeof(shell_buf));
		argv[1] = "-c";
		argv[2] = (char *)req->shell;
	}
	p.argv = argv ? argv : (char *const *)req->argv;
	if (r.helper && !st->exec_exe[0]) {
		rc = h->set_error(
		    err, SBX_E_IO,
		    "local: exec: the subreaper helper sbx-local-exec is not beside the "
		    "plugin; reinstall sbx's local plugin");
		goto out;
	}
	p.out_path = req->stdout_path;
	p.err_path = req->stderr_path;
	p.envp = env.v;
	p.cwd = cwd;
	p.path = strv_get(&env, "PATH");

	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		goto io;
	r.out_r = fds[0], p.out_fd = fds[1];
	if (pipe2(fds, O_CLOEXEC) != 0)
		goto io;
	r.err_r = fds[0], p.err_fd = fds[1];
	if (req->has_stdin) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
			goto io;
		r.in_w = fds[0], p.in_fd = fds[1];
		shutdown(p.in_fd, SHUT_WR);
		r.in_data = req->stdin_data;
		r.in_left = req->stdin_data ? req->stdin_len : 0;
	} else if ((p.in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		goto io;
	}
	if (r.helper) {
		if (pipe2(fds, O_CLOEXEC) != 0)
			goto io;
		report_r = fds[0], p.report_fd = fds[1];
		if (pipe2(fds, O_CLOEXEC) != 0)
			goto io;
		r.status_r = fds[0], p.status_fd = fds[1];
		if (pipe2(fds, O_CLOEXEC) != 0)
			goto io;
		p.control_fd = fds[0], r.control_w = fds[1];
	} else {
		rc = local_cg_exec_new(st, id, 1, cg, sizeof(cg), err);
		if (rc != SBX_OK)
			goto out;
		if ((p.cg_fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
			goto io;
	}

	/* Under the subreaper only its tag finds what a command leaves running, and the search
	 * reads the environment of every process on the machine. A mark in the sandbox's
	 * running/ folder says this exec may have left something; it goes once the helper says
	 * the command's tree was empty at its exit (or after the kill). Destroy searches unless
	 * the folder is there and empty (local_exec_none_left). A mark that cannot be made
	 * takes the folder with it, so that destroy searches. */
	if (r.helper && st->iso.level == LOCAL_ISO_PLAIN) {
		sbx_error ignored;
		if (local_path(st, id, LOCAL_RUNNING_DIR, mark, sizeof(mark), &ignored) == SBX_OK) {
			size_t ml = strlen(mark);
			snprintf(mark + ml, sizeof(mark) - ml, "/%s", strchr(exec_tag, '.') + 1);
			int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd >= 0) {
				close(fd);
			} else {
				if (errno != ENOENT) {
					mark[ml] = '\0';
					rmdir(mark);
				}
				mark[0] = '\0';
			}
		}
	}

	int64_t start = now_ms();
	local_child_report rep = {0, 0};
	ssize_t got = 0;
	p.rep = &rep;
	if (r.helper) {
		r.child = start_helper(st, &p, &r.helper_fd);
	} else {
		/* The isolated level: this thread's children are born in the sandbox's PID
		 * namespace until it points back. */
		int je = local_join_fork_begin(&join);
		if (je != 0) {
			rc = h->set_error(err, SBX_E_IO, "local: exec: cannot enter sandbox %s: %s",
					  id, strerror(je));
			goto out;
		}
		int v2 = st->kill_mechanism == LOCAL_KILL_CGROUP_V2;
		r.child = local_spawn(command_entry, &p, v2 ? p.cg_fd : -1, &p.placed, &r.pidfd);
		if (r.child > 0 && p.placed && !p.ran) {
			/* Killed before it ran a single instruction: a command before it wrote
			 * cgroup.kill of the cgroup it was kept from, and the kernel kills
			 * whatever is born in such a cgroup. Once more in a new one. */
			waitpid(r.child, NULL, 0);
			close_fd(&r.pidfd);
			close_fd(&p.cg_fd);
			local_cg_remove(cg);
			cg[0] = '\0';
			r.child = -1;
			rc = local_cg_exec_new(st, id, 0, cg, sizeof(cg), err);
			if (rc == SBX_OK &&
			    (p.cg_fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0)
				r.child =
				    local_spawn(command_entry, &p, p.cg_fd, &p.placed, &r.pidfd);
			else if (rc == SBX_OK)
				rc = h->set_error(err, SBX_E_IO, "local: exec: %s: %s", cg,
						  strerror(errno));
		}
		int saved = errno;
		local_join_fork_end(&join);
		errno = saved;
		if (rc != SBX_OK)
			goto out;
		if (r.child > 0 && rep.stage != 0)
			got = (ssize_t)sizeof(rep);
	}
	if (r.child < 0)
		goto io;
	close_child_ends(&p);
	while (report_r >= 0 && (got = read(report_r, &rep, sizeof(rep))) < 0 && errno == EINTR)
		;
	close_fd(&report_r);
	if (got == (ssize_t)sizeof(rep)) {
		if (rep.stage == LOCAL_STAGE_EXEC) {
			exec_failed(req, &rep, out);
		} else if (rep.stage == LOCAL_STAGE_CHDIR) {
			rc =
			    h->set_error(err, SBX_E_NO_FILE, "local: exec: cannot enter cwd %s: %s",
					 cwd, strerror(rep.err));
		} else if (rep.stage == LOCAL_STAGE_STDOUT || rep.stage == LOCAL_STAGE_STDERR) {
			int o = rep.stage == LOCAL_STAGE_STDOUT;
			rc = h->set_error(err, SBX_E_NO_FILE,
					  "local: exec: cannot open the %s file %s: %s",
					  o ? "stdout" : "stderr", o ? p.out_path : p.err_path,
					  strerror(rep.err));
		} else {
			rc = h->set_error(
			    err, SBX_E_IO, "local: exec: cannot start the command (%s): %s",
			    rep.stage == LOCAL_STAGE_CGROUP   ? "joining its cgroup"
			    : rep.stage == LOCAL_STAGE_JOIN   ? "entering the sandbox"
			    : rep.stage == LOCAL_STAGE_HELPER ? "running sbx-local-exec"
							      : "set-up",
			    strerror(rep.err));
		}
		goto finish;
	}

	/* A kernel before 5.2 made no pidfd with the clone (local_spawn); 5.3 has pidfd_open. */
	if (!r.helper && r.pidfd < 0)
		r.pidfd = (int)syscall(SYS_pidfd_open, r.child, 0);
	else if (r.helper && r.helper_fd < 0)
		r.helper_fd = (int)syscall(SYS_pidfd_open, r.child, 0);
	if (r.in_w >= 0)
		fcntl(r.in_w, F_SETFL, O_NONBLOCK);
	if (r.status_r >= 0)
		fcntl(r.status_r, F_SETFL, O_NONBLOCK);
	int64_t deadline = req->timeout_ms ? start + (int64_t)req->timeout_ms : INT64_MAX;
	int64_t drain_until = INT64_MAX;
	int out_rc = 0;
	int exit_ready = 1; /* look once before the first poll */
	for (;;) {
		if (exit_ready || r.pidfd < 0)
			check_exit(st, &r);
		exit_ready = 0;
		int64_t t = now_ms();
		if (r.exited && drain_until == INT64_MAX) {
			/* Pipes still open may be held by a child another thread is starting:
			 * wait for those to exec, so the grace below is the leftovers' alone (a
			 * sibling's copy would otherwise cost the whole grace and a sink). */
			if (r.out_r >= 0 || r.err_r >= 0) {
				local_spawn_fence();
				t = now_ms();
			}
			drain_until = t + st->drain_ms;
			close_fd(&r.in_w);
		}
		if (r.exited && ((r.out_r < 0 && r.err_r < 0) || t >= drain_until))
			break;
		if (!r.exited && t >= deadline) {
			out->timed_out = 1;
			break;
		}
		if (out_rc != 0)
			break;
		struct pollfd pf[4];
		int np = 0, io_out = -1, io_err = -1, io_in = -1;
		if (r.out_r >= 0)
			pf[io_out = np++] = (struct pollfd){.fd = r.out_r, .events = POLLIN};
		if (r.err_r >= 0)
			pf[io_err = np++] = (struct pollfd){.fd = r.err_r, .events = POLLIN};
		if (r.in_w >= 0)
			pf[io_in = np++] = (struct pollfd){.fd = r.in_w, .events = POLLOUT};
		int ev = r.exited ? -1 : r.pidfd >= 0 ? r.pidfd : r.status_r;
		int io_ev = -1;
		if (ev >= 0)
			pf[io_ev = np++] = (struct pollfd){.fd = ev, .events = POLLIN};
		int64_t until = r.exited ? drain_until : deadline;
		int64_t wait = until == INT64_MAX ? -1 : until - t;
		if (!r.exited && ev < 0 && (wait < 0 || wait > 10))
			wait = 10; /* no pidfd: look at the child every 10 ms */
		if (wait > 1000000)
			wait = 1000000;
		if (poll(pf, (nfds_t)np, (int)wait) < 0 && errno != EINTR)
			break;
		if (io_ev >= 0 && pf[io_ev].revents)
			exit_ready = 1;
		if (io_out >= 0 && pf[io_out].revents)
			push(req, SBX_STREAM_STDOUT, &r.out_r, &out_rc);
		if (io_err >= 0 && pf[io_err].revents)
			push(req, SBX_STREAM_STDERR, &r.err_r, &out_rc);
		if (io_in >= 0 && pf[io_in].revents) {
			if (pf[io_in].revents & (POLLERR | POLLHUP))
				close_fd(&r.in_w);
			else
				feed_stdin(&r);
		}
	}
	if (r.in_w >= 0 && r.in_left == 0)
		close_fd(&r.in_w);

finish:
	/* A command still running (timeout, the host refusing output, a failed start) loses its
	 * whole tree; one that exited leaves its leftovers running. */
	kill_tree = !r.exited;
	if (r.helper) {
		if (kill_tree && r.control_w >= 0) {
			ssize_t w = write(r.control_w, "K", 1);
			(void)w;
		}
		close_fd(&r.control_w);
	} else if (kill_tree) {
		if (r.child > 0)
			kill(-r.child, SIGKILL);
		if (cg[0])
			local_cg_kill(st, cg);
		if (st->iso.level == LOCAL_ISO_PLAIN)
			kill_by_env(EXEC_TAG_ENV, exec_tag);
	}
	if (kill_tree)
		drain(req, &r, 500, &out_rc);
	else if (r.out_r >= 0 || r.err_r >= 0)
		start_sink(st, &r, cg);
	if (r.helper) {
		if (!r.exited) {
			local_exit_report er;
			fcntl(r.status_r, F_SETFL, 0);
			ssize_t n = read(r.status_r, &er, sizeof(er));
			r.status = n == (ssize_t)sizeof(er) ? er.status : SIGKILL;
			r.exited = 1;
		}
		int hs = 0;
		if (r.helper_fd >= 0 && !kill_tree && !r.lost) {
			reap_later(r.helper_fd, r.child); /* it exits on its own (helper/main.c) */
			r.helper_fd = -1;
		} else if (waitpid(r.child, &hs, 0) == r.child && kill_tree && WIFEXITED(hs) &&
			   WEXITSTATUS(hs) == 0) {
			r.leftovers = 0; /* it killed the tree and saw it gone */
		}
		if (mark[0] && !r.lost && !r.leftovers)
			unlink(mark);
	} else if (r.child > 0) {
		int status;
		pid_t w;
		while ((w = child_wait(&r, 0, &status)) < 0 && errno == EINTR)
			;
		if (w > 0 && !r.exited) {
			r.status = status;
			r.exited = 1;
		} else if (w < 0 && errno == ECHILD && !r.exited) {
			r.taken = 1;
		}
	}
	if (rc == SBX_OK && r.lost) {
		/* Not an exit code: the command may well have exited 0 after killing it. */
		rc = h->set_error(
		    err, SBX_E_BACKEND,
		    "local: exec: the command's subreaper helper was killed before "
		    "the command ended (kill -9 $PPID?): its exit status is unknown and "
		    "what it started may be out of reach; the subreaper cannot contain "
		    "a hostile command (use a writable cgroup, or isolation: "
		    "namespaces)");
	} else if (rc == SBX_OK && r.taken && got != (ssize_t)sizeof(rep)) {
		rc = status_taken(err);
	} else if (rc == SBX_OK && got != (ssize_t)sizeof(rep)) {
		if (WIFSIGNALED(r.status)) {
			out->exit_code = -1;
			out->signal = WTERMSIG(r.status);
		} else {
			out->exit_code = WEXITSTATUS(r.status);
			out->signal = 0;
		}
		if (out_rc != 0)
			rc = h->set_error(err, out_rc,
					  "local: exec: the host stopped taking output");
		if (local_join_oom(&join) && SBX_HAS(out, sbx_exec_outcome, oom_killed))
			out->oom_killed = 1;
	}
	goto out;
io:
	rc = h->set_error(err, SBX_E_IO, "local: exec: %s", strerror(errno));
	goto out;
nomem:
	rc = h->set_error(err, SBX_E_NOMEM, "local: exec: out of memory");
out:
	if (mark[0] && r.helper && r.child < 0)
		unlink(mark); /* no helper started: nothing can have been left */
	close_fd(&r.pidfd);
	close_fd(&r.helper_fd);
	close_fd(&r.out_r);
	close_fd(&r.err_r);
	close_fd(&r.in_w);
	close_fd(&r.status_r);
	close_fd(&r.control_w);
	close_fd(&report_r);
	close_child_ends(&p);
	local_join_close(&join);
	if (cg[0])
		local_cg_exec_done(st, cg, kill_tree);
	free(argv);
	strv_free(&env);
	return rc;
}

int local_exec_none_left(const char *dir)
{
	char path[1300];
	int n = snprintf(path, sizeof(path), "%s/" LOCAL_RUNNING_DIR, dir);
	return n > 0 && (size_t)n < sizeof(path) && rmdir(path) == 0;
}

/* Reads /proc/<pid>/environ; 1 when it holds `tag`. */
static int has_tag(const char *pid, const char *tag, char **buf, size_t *cap)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%s/environ", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t used = 0;
	for (;;) {
		if (used + 1 >= *cap) {
			size_t nc = *cap ? *cap * 2 : 65536;
			char *nb = nc <= (1u << 22) ? realloc(*buf, nc) : NULL;
			if (!nb)
				break;
			*buf = nb;
			*cap = nc;
		}
		ssize_t r = read(fd, *buf + used, *cap - 1 - used);
		if (r <= 0)
			break;
		used += (size_t)r;
	}
	close(fd);
	if (!*buf)
		return 0;
	(*buf)[used] = '\0';
	for (size_t i = 0; i < used; i += strlen(*buf + i) + 1)
		if (strcmp(*buf + i, tag) == 0)
			return 1;
	return 0;
}

void local_kill_tagged(const char *id)
{
	kill_by_env(TAG_ENV, id);
}

static void kill_by_env(const char *name, const char *value)
{
	char tag[128];
	int tn = snprintf(tag, sizeof(tag), "%s=%s", name, value);
	if (tn < 0 || (size_t)tn >= sizeof(tag))
		return;
	char *buf = NULL;
	size_t cap = 0;
	/* A process in the middle of an exec shows an empty environ for a moment (a command's
	 * `setsid sleep &` right before the destroy): one clean pass is not enough, two in a
	 * row are. */
	for (int round = 0, clean = 0; round < 12 && clean < 2; round++) {
		DIR *d = opendir("/proc");
		if (!d)
			break;
		int found = 0;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] < '1' || e->d_name[0] > '9')
				continue;
			if (!has_tag(e->d_name, tag, &buf, &cap))
				continue;
			char *end;
			long pid = strtol(e->d_name, &end, 10);
			if (pid > 1 && pid != getpid()) {
				kill((pid_t)pid, SIGKILL);
				found = 1;
			}
		}
		closedir(d);
		clean = found ? 0 : clean + 1;
		if (clean < 2) {
			struct timespec ts = {0, 5000000};
			nanosleep(&ts, NULL);
		}
	}
	free(buf);
}

/* The `custom` sandbox plugin: a small, real backend written the way a third party writes
 * one, against <sbx/plugin.h> only. A sandbox is a scratch directory; a command runs in it as
 * its own process group, and a timeout kills that group. It implements only the required ops,
 * so every optional op reports SBX_E_UNSUPPORTED through the host. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/plugin.h>

static const sbx_host_api *host;

typedef struct custom_state {
	char root[1024];
} custom_state;

static const sbx_config_key custom_keys[] = {
    {.name = "root", .type = SBX_KEY_STRING, .help = "folder holding the sandboxes"},
};

static int custom_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	const char *root = NULL;
	int rc = host->config_string(cfg, "root", &root, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	custom_state *st = host->alloc(sizeof(*st));
	if (!st)
		return host->set_error(err, SBX_E_NOMEM, "custom: init: out of memory");
	/* The state folder of the host that made cfg (ABI 1.1); a 1.0 host knows only the
	 * latest host's. */
	const char *dir = SBX_HAS(host, sbx_host_api, state_dir_for) ? host->state_dir_for(cfg)
								     : host->state_dir();
	int n = root  ? snprintf(st->root, sizeof(st->root), "%s", root)
		: dir ? snprintf(st->root, sizeof(st->root), "%s/custom", dir)
		      : -1;
	if (n < 0 || (size_t)n >= sizeof(st->root)) {
		host->free(st);
		return host->set_error(err, SBX_E_CONFIG, "custom: init: root path is too long");
	}
	if (mkdir(st->root, 0700) != 0 && errno != EEXIST) {
		int e = errno;
		sbx_error detail = {0};
		host->set_error(&detail, SBX_E_IO, "custom: init: cannot create %s: %s", st->root,
				strerror(e));
		host->free(st);
		return host->set_error(err, SBX_E_IO, "%s", detail.message);
	}
	*state = st;
	return SBX_OK;
}

static void custom_fini(void *state)
{
	host->free(state);
}

/* Backend ids are 16 hex digits; anything else cannot name one of our sandboxes. */
static int id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n != 16)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", id[i]))
			return 0;
	return 1;
}

static int sandbox_dir(const custom_state *st, const char *id, char *buf, size_t cap,
		       sbx_error *err)
{
	if (!id_ok(id))
		return host->set_error(err, SBX_E_BAD_ID,
				       "custom: '%.64s' is not a custom sandbox id (16 hex digits)",
				       id);
	int n = snprintf(buf, cap, "%s/%s", st->root, id);
	if (n < 0 || (size_t)n >= cap)
		return host->set_error(err, SBX_E_INVAL, "custom: sandbox path too long");
	return SBX_OK;
}

static int custom_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
			 sbx_error *err)
{
	custom_state *st = state;
	(void)spec;
	unsigned char raw[8];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, raw, sizeof(raw)) != (ssize_t)sizeof(raw)) {
		if (fd >= 0)
			close(fd);
		return host->set_error(err, SBX_E_IO, "custom: create: cannot read /dev/urandom");
	}
	close(fd);
	if (id_cap < 17)
		return host->set_error(err, SBX_E_INVAL, "custom: create: id buffer too small");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id_buf + 2 * i, 3, "%02x", raw[i]);
	char dir[1200];
	int rc = sandbox_dir(st, id_buf, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	if (mkdir(dir, 0700) != 0)
		return host->set_error(err, SBX_E_IO, "custom: create: cannot create %s: %s", dir,
				       strerror(errno));
	return SBX_OK;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In the child: stdin from /dev/null, output into the pipes, own process group, cwd in the
 * sandbox. Only async-signal-safe calls between fork and exec. */
static void run_child(const char *dir, const sbx_exec_request *req, int out_fd, int err_fd)
{
	setpgid(0, 0);
	int null_fd = open("/dev/null", O_RDONLY);
	if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		_exit(127);
	if (chdir(dir) != 0 || (req->cwd && chdir(req->cwd) != 0))
		_exit(127);
	for (uint32_t i = 0; i < req->n_env; i++)
		setenv(req->env[i].key, req->env[i].value, 1);
	if (req->shell) {
		execlp("bash", "bash", "-c", req->shell, (char *)NULL);
		execl("/bin/sh", "sh", "-c", req->shell, (char *)NULL);
	} else {
		execvp(req->argv[0], (char *const *)req->argv);
	}
	_exit(127);
}

static int custom_execute(void *state, const char *id, const sbx_exec_request *req,
			  sbx_exec_outcome *out, sbx_error *err)
{
	char dir[1200];
	int rc = sandbox_dir(state, id, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	struct stat sb;
	if (stat(dir, &sb) != 0)
		return host->set_error(err, SBX_E_NOT_FOUND, "custom: sandbox %s does not exist",
				       id);
	if (req->has_stdin)
		return host->set_error(err, SBX_E_UNSUPPORTED, "custom: stdin is not supported");
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) != 0)
		return host->set_error(err, SBX_E_IO, "custom: pipe: %s", strerror(errno));
	if (pipe2(pe, O_CLOEXEC) != 0) {
		close(po[0]);
		close(po[1]);
		return host->set_error(err, SBX_E_IO, "custom: pipe: %s", strerror(errno));
	}
	pid_t pid = fork();
	if (pid == 0)
		run_child(dir, req, po[1], pe[1]);
	close(po[1]);
	close(pe[1]);
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		return host->set_error(err, SBX_E_IO, "custom: fork: %s", strerror(errno));
	}
	setpgid(pid, pid);
	int64_t deadline = req->timeout_ms ? now_ms() + (int64_t)req->timeout_ms : 0;
	struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
	int open_fds = 2, status = 0, reaped = 0;
	rc = SBX_OK;
	while (open_fds > 0) {
		/* Once the command itself has exited, a background child holding the pipes gets
		 * a short grace to flush, then the group is killed. */
		if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
			reaped = 1;
			deadline = now_ms() + 100;
		}
		int wait_ms = 50;
		if (deadline) {
			int64_t left = deadline - now_ms();
			if (left <= 0) {
				out->timed_out = !reaped;
				break;
			}
			wait_ms = left > 50 ? 50 : (int)left;
		}
		if (poll(fds, 2, wait_ms) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[65536];
			ssize_t n = read(fds[i].fd, buf, sizeof(buf));
			if (n > 0) {
				uint32_t stream = i == 0 ? SBX_STREAM_STDOUT : SBX_STREAM_STDERR;
				if (rc == SBX_OK)
					rc = req->output(req->output_ctx, stream, buf, (size_t)n);
			} else if (n == 0 || errno != EINTR) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			}
		}
		if (rc != SBX_OK)
			break;
	}
	kill(-pid, SIGKILL); /* whatever of the group is left, including background children */
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	while (!reaped && waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rc != SBX_OK)
		return host->set_error(err, rc, "custom: output sink refused more output");
	if (WIFSIGNALED(status) && !out->timed_out) {
		out->exit_code = -1;
		out->signal = WTERMSIG(status);
	} else if (out->timed_out) {
		out->exit_code = -1;
		out->signal = SIGKILL;
	} else {
		out->exit_code = WEXITSTATUS(status);
	}
	return SBX_OK;
}

static int remove_tree(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			remove_tree(fd, e->d_name);
	closedir(d);
	return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

static int custom_destroy(void *state, const char *id, sbx_error *err)
{
	custom_state *st = state;
	char dir[1200];
	int rc = sandbox_dir(st, id, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	if (remove_tree(AT_FDCWD, dir) != 0)
		return host->set_error(err, SBX_E_IO, "custom: destroy: cannot remove %s: %s", dir,
				       strerror(errno));
	return SBX_OK;
}

SBX_EXPORT int sbx_plugin_register(const sbx_host_api *api, sbx_registrar *reg)
{
	host = api;
	sbx_plugin_desc d = {
	    .struct_size = sizeof(d),
	    .abi_major = SBX_ABI_MAJOR,
	    .abi_minor = SBX_ABI_MINOR,
	    .alias = "custom",
	    .version = "1.0",
	    .description = "scratch-directory sandboxes (third-party plugin example)",
	    .keys = custom_keys,
	    .n_keys = sizeof(custom_keys) / sizeof(custom_keys[0]),
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = custom_init,
	    .fini = custom_fini,
	    .create = custom_create,
	    .execute = custom_execute,
	    .destroy = custom_destroy,
	};
	return api->register_sandbox(reg, &d);
}

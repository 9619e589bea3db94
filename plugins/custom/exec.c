/* The execute op: a command runs in the sandbox directory as its own process group, its
 * output read from two pipes; a timeout kills that group, and so does the command's end
 * (after a short grace), so a background child holding the pipes cannot hold the call. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sbx/support/clock.h>
#include <sbx/support/host.h>

#include "exec.h"
#include "lifecycle.h"

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

int custom_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		   sbx_error *err)
{
	char dir[1200];
	int rc = custom_sandbox_dir(state, id, dir, sizeof(dir), err);
	if (rc != SBX_OK)
		return rc;
	struct stat sb;
	if (stat(dir, &sb) != 0)
		return sbxs_host->set_error(err, SBX_E_NOT_FOUND,
					    "custom: sandbox %s does not exist", id);
	if (req->has_stdin)
		return sbxs_host->set_error(err, SBX_E_UNSUPPORTED,
					    "custom: stdin is not supported");
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) != 0)
		return sbxs_host->set_error(err, SBX_E_IO, "custom: pipe: %s", strerror(errno));
	if (pipe2(pe, O_CLOEXEC) != 0) {
		close(po[0]);
		close(po[1]);
		return sbxs_host->set_error(err, SBX_E_IO, "custom: pipe: %s", strerror(errno));
	}
	pid_t pid = fork();
	if (pid == 0)
		run_child(dir, req, po[1], pe[1]);
	close(po[1]);
	close(pe[1]);
	if (pid < 0) {
		close(po[0]);
		close(pe[0]);
		return sbxs_host->set_error(err, SBX_E_IO, "custom: fork: %s", strerror(errno));
	}
	setpgid(pid, pid);
	int64_t deadline = req->timeout_ms ? sbxs_now_ms() + (int64_t)req->timeout_ms : 0;
	struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
	int open_fds = 2, status = 0, reaped = 0;
	rc = SBX_OK;
	while (open_fds > 0 || !reaped) {
		/* Once the command itself has exited, a background child holding the pipes gets
		 * a short grace to flush, then the group is killed. */
		if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
			reaped = 1;
			deadline = sbxs_now_ms() + 100;
			continue;
		}
		/* Both pipes closed (the command sent its output elsewhere, `exec >file`), the
		 * command still running: wait for it alone. */
		if (open_fds == 0 && !deadline) {
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			reaped = 1;
			break;
		}
		int wait_ms = open_fds ? 50 : 10;
		if (deadline) {
			int64_t left = deadline - sbxs_now_ms();
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
		return sbxs_host->set_error(err, rc, "custom: output sink refused more output");
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

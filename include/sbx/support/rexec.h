/* sbx-support: the one in-sandbox wrapper of the remote backends (docker, e2b, k8s).
 *
 * A backend that runs commands through an API (an exec endpoint, envd, pods/exec) cannot
 * signal the command's processes itself, so every command runs under this POSIX sh script,
 * which busybox, dash and bash all run:
 *   - the command runs in a session of its own (setsid) and carries SBX_EXEC_TOKEN=<token>
 *     in its environment, which every descendant inherits, setsid and double-fork escapees
 *     included; its pid goes to /tmp/.sbx-exec-<token>;
 *   - a shell string runs as `bash -c`, or `sh -c` where bash is missing; argv is passed as
 *     arguments, never spliced into a string;
 *   - stdin is /dev/null, the file /tmp/.sbx-stdin-<token> (removed before the command
 *     starts), or exactly N bytes of the exec's own stdin;
 *   - a cwd that does not exist fails with exit 126 and "sbx-exec: no such directory: DIR"
 *     on stderr, a relative one that leads outside the exec's own (its physical path, `..`
 *     and symlinks resolved, not beneath the one the wrapper started in) with exit 126 and
 *     "sbx-exec: cwd leads outside the work dir: DIR" (sbxs_rexec_cwd_error reads both);
 *     environment additions are exported when the backend has no API for them;
 *   - the command's stdout and stderr are pipes that the wrapper relays to the exec's own,
 *     so what the command leaves running (`&`, nohup, setsid, daemons) lives on after it
 *     exits without holding the exec's streams: once the command has exited and its output
 *     is through, each stream ends with a marker carrying its exit status, which
 *     sbxs_rexec_tap strips; the backend then ends the call (hangs up) however long a
 *     leftover keeps the pipe. A leftover's later output is dropped, and it never sees
 *     SIGPIPE or EPIPE. The wrapper process itself lives until the last holder has gone;
 *   - with SBXS_REXEC_SWEEP, what the command left running is killed when it ends instead;
 *   - the wrapper exits with the command's status; with SBXS_REXEC_RERAISE, a command
 *     killed by signal N makes the wrapper die of N too, else the wrapper exits 128+N.
 * The killer (sbxs_rexec_kill_argv), run as a second exec, kills the recorded session's
 * group, then every process carrying the token and its process group, repeating until a
 * pass finds none (about four seconds at most; it then exits 1).
 * Pure functions over host->alloc: thread-safe. */
#ifndef SBX_SUPPORT_REXEC_H
#define SBX_SUPPORT_REXEC_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBXS_REXEC_SWEEP   1u /* kill what is left of the command's tree when it ends */
#define SBXS_REXEC_RERAISE 2u /* die of the command's signal instead of exiting 128+N */

#define SBXS_REXEC_STDIN_NONE 0u /* /dev/null */
#define SBXS_REXEC_STDIN_FILE 1u /* /tmp/.sbx-stdin-<token>, put there by the backend */
#define SBXS_REXEC_STDIN_PIPE 2u /* stdin_len bytes of the exec's stdin */

/* Size of a token buffer: 16 hex digits and a NUL. */
#define SBXS_REXEC_TOKEN_SIZE 17
/* Size of a buffer for /tmp/.sbx-stdin-<token>. */
#define SBXS_REXEC_PATH_SIZE 48

typedef struct sbxs_rexec {
	const char *token;  /* from sbxs_rexec_token */
	uint32_t flags;     /* SBXS_REXEC_SWEEP, SBXS_REXEC_RERAISE */
	uint32_t stdin_how; /* SBXS_REXEC_STDIN_* */
	size_t stdin_len;   /* with SBXS_REXEC_STDIN_PIPE */
	const char *cwd;    /* NULL or "": the exec's own */
	const sbx_kv *env;  /* exported by the wrapper; n_env 0 when the backend sets them */
	uint32_t n_env;
	const char *shell;       /* exactly one of shell and a non-empty argv */
	const char *const *argv; /* NULL-terminated */
} sbxs_rexec;

/* A fresh random token. SBX_OK or SBX_E_IO. */
int sbxs_rexec_token(char token[SBXS_REXEC_TOKEN_SIZE]);

/* Writes /tmp/.sbx-stdin-<token>, where SBXS_REXEC_STDIN_FILE reads from. */
void sbxs_rexec_stdin_path(const char *token, char path[SBXS_REXEC_PATH_SIZE]);

/* The argv that runs x under the wrapper ("/bin/sh", "-c", <script>, "sbx-exec", ...),
 * NULL-terminated: one host->alloc block the caller frees with sbxs_host->free. It points
 * at x->shell and x->argv's strings, which must outlive it. *argc (may be NULL) gets its
 * length. SBX_OK, SBX_E_INVAL (not exactly one of shell and a non-empty argv, or an
 * environment name that is not a shell variable name), SBX_E_NOMEM; err names `alias`. */
int sbxs_rexec_argv(const sbxs_rexec *x, const char *alias, const char ***argv, size_t *argc,
		    sbx_error *err);

/* Size of the killer's argv, NULL included. */
#define SBXS_REXEC_KILL_ARGC 7

/* The killer's argv for token, NULL-terminated (it points at static text and at token,
 * which must outlive it). */
void sbxs_rexec_kill_argv(const char *token, const char *argv[SBXS_REXEC_KILL_ARGC]);

/* Size of the end marker's fixed part: "\001sbx-end:" <token> ":". */
#define SBXS_REXEC_MARK_PREFIX (1 + 8 + 16 + 1)

/* The backend's side of the relays: an output sink that passes a command's output on to the
 * host without the wrapper's end markers and drops what a stream carries after its marker
 * (a leftover's later output). When both streams have ended, `done` is set and `status` is
 * the command's exit status (0..255): the backend stops reading and hangs up. Bytes that
 * might begin a marker are held back until they prove not to be one; sbxs_rexec_tap_flush
 * passes them on at a stream's end without a marker. Not thread-safe: one per exec. */
typedef struct sbxs_rexec_tap {
	const char *token;    /* the exec's token: only its markers count */
	sbx_output_fn output; /* the host's sink; NULL drops the output */
	void *output_ctx;
	/* What the tap found. */
	int done;    /* both markers arrived */
	int status;  /* the command's exit status, when done */
	int sink_rc; /* the host's sink refused output (its status), 0 if not */
	/* The last bytes of stderr as they arrived (NUL-terminated): the wrapper's messages. */
	char err_tail[192];
	size_t err_tail_len;
	/* Per stream (stdout, stderr): marker bytes matched so far, the status's digits. */
	struct {
		size_t matched;
		char digits[4];
		size_t n_digits;
		int ended;
		int status;
	} s[2];
} sbxs_rexec_tap;

/* Starts a tap for `token` in front of output/output_ctx. */
void sbxs_rexec_tap_init(sbxs_rexec_tap *t, const char *token, sbx_output_fn output,
			 void *output_ctx);

/* An sbx_output_fn over an sbxs_rexec_tap (ctx): feeds one chunk of SBX_STREAM_STDOUT or
 * SBX_STREAM_STDERR. Returns SBX_OK, or the host sink's refusal (also kept in sink_rc). */
int sbxs_rexec_tap_output(void *ctx, uint32_t stream, const void *data, size_t len);

/* Passes on the bytes held back as a possible marker start, for a stream that ended without
 * its marker (a killed wrapper, a timeout). SBX_OK or the sink's refusal. */
int sbxs_rexec_tap_flush(sbxs_rexec_tap *t);

/* The wrapper's refusal of the exec's cwd (see above), for an exec that ended with
 * exit_code 126 and no markers: SBX_E_NO_FILE "ALIAS: exec: cwd 'CWD' does not exist",
 * SBX_E_PATH "ALIAS: exec: cwd 'CWD' leads outside the sandbox work dir"; SBX_OK when the
 * wrapper said neither (the command ran, or failed otherwise). */
int sbxs_rexec_cwd_error(const sbxs_rexec_tap *t, int exit_code, const char *alias, const char *cwd,
			 sbx_error *err);

/* The outcome of an exit status as a shell reports it: 128+N for a death by signal N
 * (1..64, never a stop signal) gives exit_code -1 and signal N, anything else is the exit
 * code. */
void sbxs_rexec_outcome(int status, sbx_exec_outcome *out);

#ifdef __cplusplus
}
#endif
#endif

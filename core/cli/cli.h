/* Shared pieces of the `sbx` command. */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <jansson.h>
#include <stddef.h>

#include "help.h"
#include "sbx/host.h"

/* Exit codes, following docker/podman: the command's own for exec, these otherwise. */
#define CLI_OK      0
#define CLI_FAIL    1
#define CLI_USAGE   2
#define CLI_TIMEOUT 124
#define CLI_INFRA   125

typedef struct cli_globals {
	const char *registry; /* --registry, else NULL */
	const char *config;   /* --config, else $SBX_CONFIG, else NULL */
} cli_globals;

/* Set when the command line asks for --json: errors are then JSON objects on stdout,
 * {"error": {"status": "SBX_E_...", "message": "..."}}, instead of lines on stderr. */
extern int cli_json_errors;

/* Set when the command line asks for --json: errors are then JSON objects on stdout,
 * {"error": {"status": "SBX_E_...", "message": "..."}}, instead of lines on stderr. */
extern int cli_json_errors;

/* Opens a host; on failure prints "sbx: <message>" and returns the exit code to use. */
int cli_open_host(const cli_globals *g, sbx_host **out);

/* Exit code for a failed status: 2 for what the user gave (bad id, config, alias), 125 for
 * failures of sbx or the backend. */
int cli_exit_for(int status);

/* Prints "sbx: <cmd>: <message>" on stderr (just "sbx: <message>" when cmd is NULL or the
 * message already starts with "<cmd>:", so no prefix repeats) and returns
 * cli_exit_for(status). */
int cli_fail(const char *cmd, int status, const sbx_error *err);
/* The line (or JSON error object) cli_fail prints, for a failure that has no sbx_error. */
void cli_report(const char *cmd, const char *status, const char *msg);

/* Prints "sbx: <cmd>: <msg>" and the usage line on stderr, returns CLI_USAGE. */
int cli_usage_error(const char *usage, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* term.c: s escaped for a terminal like `ls -b` (control characters, C1 controls and bytes
 * that are not UTF-8 as \e, \n, \r, \t or \xNN; a backslash doubled). cli_msg leaves
 * backslashes alone (for messages). The result lives in a ring of 8 static buffers: valid
 * for the next 7 calls, one thread only. */
const char *cli_q(const char *s);
const char *cli_msg(const char *s);

/* A JSON string from bytes: valid UTF-8 is kept, each invalid byte becomes U+FFFD. */
json_t *cli_json_bytes(const char *data, size_t len);

/* Prints a JSON value on stdout followed by a newline. */
void cli_print_json(json_t *v);

/* The result of an exec as a JSON object with NexAU's field names. */
json_t *cli_exec_result_json(const sbx_exec_result *r);

/* A job as a JSON object: id, sandbox_id, state, exit_code, signal, pid, started,
 * duration, stdout_bytes, stderr_bytes, command. */
json_t *cli_job_json(const sbx_job_info *j);

/* Parses seconds ("2.5"); -1 when malformed or negative. */
double cli_parse_seconds(const char *s);

/* File descriptors (fds.c). One task of `sbx rollout` holds at most this many at once (pipes,
 * output files, a connection), as measured on local and docker with a margin. */
#define CLI_FDS_PER_TASK 12
/* Kept free beyond the tasks' needs: the ledger, plugin loading, stdio, the output file. */
#define CLI_FDS_RESERVE 24
/* cli_fds_short's probe: fewer than this many free counts as running out. */
#define CLI_FDS_SPARE 8
/* RLIMIT_NOFILE's soft limit (1 << 30 when unlimited). */
size_t cli_fds_limit(void);
/* 1 when that soft limit is the hard one (libsbx raised it there, or they were equal). */
int cli_fds_at_hard(void);
/* Descriptors this process has open now. */
size_t cli_fds_open(void);
/* 1 when a failure with this message came from running out of descriptors: it names EMFILE or
 * ENFILE, or fewer than CLI_FDS_SPARE can be opened right now. */
int cli_fds_short(const char *message);
/* tasks.c: parses one line of a rollout task file (len bytes; a NUL byte in it is refused):
 * JSON, the task's shape (unknown keys refused), an id no earlier line has (seen: id ->
 * line, updated). Returns the task, owned by the caller, or NULL with the reason in why. */
json_t *task_parse(const char *line, size_t len, size_t lineno, json_t *seen, char *why,
		   size_t cap);

int cmd_plugins(const cli_globals *g, int argc, char **argv);
int cmd_config(const cli_globals *g, int argc, char **argv);
int cmd_create(const cli_globals *g, int argc, char **argv);
int cmd_exec(const cli_globals *g, int argc, char **argv);
int cmd_rm(const cli_globals *g, int argc, char **argv);
int cmd_lifecycle(const cli_globals *g, int argc, char **argv); /* pause, resume, status */
int cmd_file(const cli_globals *g, int argc, char **argv);
int cmd_ls(const cli_globals *g, int argc, char **argv);
int cmd_gc(const cli_globals *g, int argc, char **argv);
int cmd_rollout(const cli_globals *g, int argc, char **argv);
int cmd_session(const cli_globals *g, int argc, char **argv); /* start, pause, end, show, ls */
int cmd_job(const cli_globals *g, int argc, char **argv);     /* ls, status, logs, wait, kill */

#endif

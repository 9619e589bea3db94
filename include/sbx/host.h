/* The sbx embedding API: create sandboxes, run commands in them, move files, delete them.
 *
 * A host (sbx_host) reads a registry (type alias -> plugin .so) and a config (which alias
 * and which settings each data source uses), loads plugins on first use of their alias and
 * routes every call by the alias prefix of the sandbox id ("<alias>:<backend-id>").
 *
 * Conventions: every function returns an SBX_* status (0 = SBX_OK) and fills the optional
 * caller-owned `err` on failure. Outputs come last. Strings returned inside a result are owned
 * by that result. All functions taking an sbx_host are thread-safe unless they say otherwise;
 * sbx_host_new and sbx_host_free are not (no other call may run on that host meanwhile).
 *
 * A host belongs to the process that made it. In a child made by fork() (Python's
 * multiprocessing, for one), a host or queue made before the fork fails every call with
 * SBX_E_INVAL, and freeing it there frees nothing that is the parent's; the child makes a host
 * of its own with sbx_host_new. Forking while other threads are inside libsbx is safe. */
#ifndef SBX_HOST_H
#define SBX_HOST_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared here is libsbx's public interface; the library is built with
 * -fvisibility=hidden, so these declarations are what it exports. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef struct sbx_host sbx_host;

/* Name ("SBX_E_NOT_FOUND") and message of a status. Unknown codes give "SBX_E_UNKNOWN" and
 * "unknown status". The strings are static. */
const char *sbx_status_name(int status);
const char *sbx_status_message(int status);

/* Version string of the library ("0.1.0"). */
const char *sbx_version(void);

/* Replaces the allocator used for everything the library and its plugins allocate. Call
 * before the first sbx_host_new; NULL restores malloc/realloc/free. Not thread-safe. */
void sbx_set_allocator(void *(*alloc_fn)(size_t), void *(*realloc_fn)(void *, size_t),
		       void (*free_fn)(void *));

/* Frees memory the library handed out (sbx_read_file data, sbx_list_dir entries, JSON). */
void sbx_free(void *ptr);

typedef struct sbx_host_options {
	SBX_STRUCT_HEADER;
	/* Registry file. NULL: $SBX_REGISTRY, then the registry beside the build or install. */
	const char *registry_path;
	/* Config file. NULL: every data source uses `local` with its defaults. */
	const char *config_path;
	/* Config given as YAML text instead of a file (config_path must then be NULL). */
	const char *config_text;
	/* Directory for per-call output and state. NULL: $SBX_STATE_DIR, then
	 * $XDG_STATE_HOME/sbx, then ~/.local/state/sbx. A relative one is resolved against the
	 * working directory here, once: the caller may change directory later. */
	const char *state_dir;
	/* Identifier of this run, recorded in labels. NULL: generated. */
	const char *run_id;
	/* ABI 1.1: seconds a finished ledger row (sandbox gone or create failed) is kept before
	 * sbx_gc_run removes it. 0: seven days; negative: forever. */
	int64_t ledger_retention;
} sbx_host_options;

/* Creates a host. `opts` may be NULL for all defaults. Reads and validates the registry and
 * the config; plugins are loaded later, on first use of their alias.
 * The first host of a process raises its soft open-files limit (RLIMIT_NOFILE) to the hard
 * one, at most 2^20 (each command in flight holds descriptors); commands started on this
 * machine still get the limit the process had. SBX_KEEP_NOFILE=1 in the environment leaves
 * the limit alone.
 * Returns SBX_E_REGISTRY, SBX_E_CONFIG, SBX_E_NOMEM or SBX_E_IO with detail in err.
 * On success *out owns the host; release it with sbx_host_free. */
int sbx_host_new(const sbx_host_options *opts, sbx_host **out, sbx_error *err);

/* Unloads the plugins and frees the host. NULL is a no-op. Sandboxes are not destroyed. */
void sbx_host_free(sbx_host *host);

/* ---- plugins ---- */

#define SBX_PLUGIN_UNLOADED 0u
#define SBX_PLUGIN_LOADED   1u
#define SBX_PLUGIN_FAULTY   2u

/* What the host knows of one registered alias. Strings are owned by the host and valid until
 * sbx_host_free. */
typedef struct sbx_plugin_info {
	SBX_STRUCT_HEADER;
	const char *alias;
	const char *path;          /* the .so, absolute */
	const char *registry_file; /* the file that listed it */
	uint32_t state;            /* SBX_PLUGIN_* */
	uint16_t plugin_abi_major; /* as registered; 0 until loaded */
	uint16_t plugin_abi_minor;
	const char *version;     /* plugin's own version, NULL until loaded */
	const char *description; /* NULL until loaded */
	const char *reason;      /* why it is faulty, NULL otherwise */
} sbx_plugin_info;

/* Number of aliases in the registry. */
size_t sbx_plugin_count(const sbx_host *host);

/* Fills *info for the alias at `index` (0 .. count-1, in alias order). SBX_E_INVAL past the
 * end. `info` must have its header set (SBX_INIT_HEADER). */
int sbx_plugin_get(sbx_host *host, size_t index, sbx_plugin_info *info, sbx_error *err);

/* Loads the plugin of `alias` now (normally done on first use). SBX_E_UNKNOWN_ALIAS names the
 * known aliases; SBX_E_FAULTY (or the load's own status) carries the saved reason. */
int sbx_plugin_load(sbx_host *host, const char *alias, sbx_error *err);

/* ---- data sources ---- */

/* Number of configured data sources (not counting the default block). */
size_t sbx_data_source_count(const sbx_host *host);

/* Name and alias of data source `index`; *alias is NULL when the source has no sandbox
 * (`type: none`). Index SIZE_MAX gives the default block. Borrowed until sbx_host_free. */
int sbx_data_source_get(const sbx_host *host, size_t index, const char **name, const char **alias,
			sbx_error *err);

/* Loads the plugin of data source `index` (SIZE_MAX: the default block) and validates its keys
 * against the keys the plugin declares, without calling the plugin's init. SBX_OK also for a
 * source with no sandbox. SBX_E_CONFIG names key, file and line; a load failure its reason. */
int sbx_data_source_check(sbx_host *host, size_t index, sbx_error *err);

/* ---- sandboxes ---- */

typedef struct sbx_create_opts {
	SBX_STRUCT_HEADER;
	/* Data source by name or decimal index; NULL: the default block. */
	const char *data_source;
	/* Image for this sandbox (metadata.docker_image); NULL: the backend's default. */
	const char *image;
	const sbx_kv *labels; /* extra labels */
	uint32_t n_labels;
	uint32_t reserved0;
	const sbx_kv *env; /* environment for every exec */
	uint32_t n_env;
	uint32_t reserved1;
	/* Lifetime in seconds; 0: the data source's `ttl` (none if unset). */
	int64_t ttl_seconds;
	/* Nonzero: the sandbox outlives this process on purpose (`sbx create` from a shell);
	 * only its TTL, or owner_pid, lets `sbx gc` reap it. */
	uint32_t detached;
	uint32_t reserved2;
	/* With detached: the process whose death makes the sandbox reapable (0: none). */
	int64_t owner_pid;
	/* ABI 1.1: seconds to wait for a place under the data source's caps (max_concurrency,
	 * max_starting, create_rate), which hold across every process sharing the state dir.
	 * 0: SBX_E_LIMIT at once when a cap is full. The wait sleeps, never spins. */
	double wait_seconds;
	/* ABI 1.4: a host folder that is this sandbox's work dir (an absolute path to an
	 * existing folder): commands start in it and file paths name it, as with the local
	 * backend's share_dir key, but for this sandbox alone, so one host serves sandboxes
	 * that each work in a folder of their own. Destroy leaves the folder and its files.
	 * NULL: the backend's own work dir. A backend that cannot share a host folder
	 * (plugin.h: SBX_PLUGIN_SHARE_DIR) refuses it with SBX_E_UNSUPPORTED. */
	const char *share_dir;
} sbx_create_opts;

/* Creates a sandbox and writes its id ("<alias>:<backend-id>") into id[SBX_ID_MAX].
 * Returns SBX_E_CONFIG when the data source is unknown or has no sandbox, the plugin's load
 * status, or the backend's create status. */
int sbx_create(sbx_host *host, const sbx_create_opts *opts, char id[SBX_ID_MAX], sbx_error *err);

/* Destroys a sandbox and its per-call output. A sandbox that is already gone succeeds.
 * SBX_E_BAD_ID for a malformed id, SBX_E_UNKNOWN_ALIAS for an unknown alias. */
int sbx_destroy(sbx_host *host, const char *id, sbx_error *err);

typedef struct sbx_exec_opts {
	SBX_STRUCT_HEADER;
	const char *shell;       /* run with bash -c (sh -c where bash is missing), or */
	const char *const *argv; /* a NULL-terminated argv */
	const char *cwd;
	const sbx_kv *env;
	uint32_t n_env;
	uint32_t has_stdin;
	const void *stdin_data;
	size_t stdin_len;
	/* Seconds, fractions allowed. 0: none. Negative: the data source's default timeout. */
	double timeout;
	const char *user;
	/* ABI 1.1: nonzero starts the command as a background job (see "jobs" below) and
	 * returns at once with sbx_exec_result.job_id set; the timeout does not apply to it. */
	uint32_t background;
	uint32_t reserved0;
	/* ABI 1.3: files in the sandbox that take the command's stdout and stderr instead of
	 * sbx, as a shell's `>PATH` would (created mode 0666 less the umask, or truncated; a
	 * relative path is from the command's cwd; the same path twice is one file, as with
	 * `>PATH 2>&1`). NULL: the stream comes to sbx as usual. A redirected stream's display
	 * copy is empty and its bytes are not counted; a file that cannot be opened fails the
	 * call with SBX_E_NO_FILE before the command runs. Foreground commands only. A backend
	 * that cannot open them itself gets the command wrapped in /bin/sh in the sandbox
	 * (plugin.h: SBX_PLUGIN_REDIRECT). */
	const char *stdout_path;
	const char *stderr_path;
} sbx_exec_opts;

/* The outcome of one command. Owned by the caller; free with sbx_exec_result_free. */
typedef struct sbx_exec_result {
	SBX_STRUCT_HEADER;
	int32_t exit_code; /* -1 when killed by a signal */
	int32_t signal;
	uint32_t timed_out;
	uint32_t truncated; /* nonzero only when a display copy was cut */
	double duration;    /* seconds */
	char *stdout_text;  /* display copies: NUL-terminated, may hold invalid UTF-8 */
	char *stderr_text;
	size_t stdout_text_len; /* bytes in the display copies (they may contain NULs) */
	size_t stderr_text_len;
	uint64_t original_stdout_length; /* characters, as NexAU counts them */
	uint64_t original_stderr_length;
	uint64_t stdout_bytes; /* bytes the command wrote */
	uint64_t stderr_bytes;
	uint64_t stdout_dropped; /* bytes not stored because of output_max_bytes */
	uint64_t stderr_dropped;
	char *output_dir; /* per-call directory with command.txt, stdout.txt, stderr.txt */
	char *stdout_file;
	char *stderr_file;
	uint32_t oom_killed; /* the sandbox's memory limit killed a process during the command */
	uint32_t reserved0;
	char *job_id; /* ABI 1.1: the job a background exec started, else NULL */
} sbx_exec_result;

/* Runs a command. A command that ran and failed is SBX_OK with its exit code; statuses are
 * for infrastructure (SBX_E_NOT_FOUND, SBX_E_UNREACHABLE, ...). On success *out is set. */
int sbx_exec(sbx_host *host, const char *id, const sbx_exec_opts *opts, sbx_exec_result **out,
	     sbx_error *err);

/* NULL is a no-op. */
void sbx_exec_result_free(sbx_exec_result *res);

/* ---- background jobs (ABI 1.1) ----
 *
 * sbx_exec with `background` starts the command in the sandbox under a small supervisor
 * process that is no child of the caller: stdin is /dev/null (or the given bytes), stdout and
 * stderr go to files in the sandbox (.sbx/jobs/JOB/stdout and stderr beneath its work dir),
 * and the supervisor records the pid, the exit status and the times there even when nobody
 * waits. A job id is "<12 hex>@<sandbox id>", so any process that can reach the sandbox can
 * query, read, wait for and kill it; the ledger keeps the last state seen of each job (for
 * listing and the cap `max_jobs` on live jobs per sandbox, default 64, SBX_E_LIMIT past it).
 * Jobs go with their sandbox: destroy ends them and forgets their rows. */

#define SBX_JOB_ID_MAX (SBX_ID_MAX + 16)

#define SBX_JOB_RUNNING 1u
#define SBX_JOB_EXITED  2u /* ran to its end; exit_code is its status as the shell reports it */
#define SBX_JOB_KILLED  3u /* died of the signal sbx_job_kill sent: signal is set */
#define SBX_JOB_LOST    4u /* its supervisor is gone without an exit status */

typedef struct sbx_job_info {
	SBX_STRUCT_HEADER;
	char id[SBX_JOB_ID_MAX];
	char sandbox_id[SBX_ID_MAX];
	uint32_t state;    /* SBX_JOB_* */
	int32_t exit_code; /* -1 unless exited */
	int32_t signal;    /* killed: the signal, else 0 */
	uint32_t reserved0;
	int64_t pid;     /* the job's pid (and group) in the sandbox; 0 until started */
	double started;  /* unix seconds, the sandbox's clock */
	double duration; /* seconds, so far while running */
	uint64_t stdout_bytes;
	uint64_t stderr_bytes;
	char command[256]; /* first line of the command, cut */
} sbx_job_info;

/* Name of a state: "running", "exited", "killed", "lost"; "unknown" otherwise. */
const char *sbx_job_state_name(uint32_t state);

/* Asks the sandbox for the job's state. SBX_E_INVAL for a malformed job id, SBX_E_NOT_FOUND
 * when the sandbox has no such job. */
int sbx_job_status(sbx_host *host, const char *job_id, sbx_job_info *info, sbx_error *err);

/* Called once per job; a nonzero return stops the walk and is returned. */
typedef int (*sbx_job_fn)(void *ctx, const sbx_job_info *info);

#define SBX_JOB_LIST_CACHED 1u /* the ledger's last seen states; the sandbox is not asked */

/* Every job of the sandbox, oldest first: asks the sandbox (and updates the ledger), or with
 * SBX_JOB_LIST_CACHED reads the ledger only (command is then empty). */
int sbx_job_list(sbx_host *host, const char *sandbox_id, uint32_t flags, sbx_job_fn fn, void *ctx,
		 sbx_error *err);

/* Waits until the job is no longer running, at most `timeout` seconds (negative: no bound),
 * and fills info. SBX_E_TIMEOUT (info filled, the job still running) when the time ran out. */
int sbx_job_wait(sbx_host *host, const char *job_id, double timeout, sbx_job_info *info,
		 sbx_error *err);

/* Sends signal `sig` (1..64; 0 means SIGTERM) to the job's whole tree: its process group and
 * every process carrying its tag in the environment. A job that is not running is left
 * alone (SBX_OK). */
int sbx_job_kill(sbx_host *host, const char *job_id, int sig, sbx_error *err);

/* Reads the job's output stream (SBX_STREAM_STDOUT or SBX_STREAM_STDERR): at most max bytes
 * from byte `offset`, or with tail_lines > 0 its last tail_lines lines. *data (free with
 * sbx_free) holds *len bytes plus a NUL not counted. */
int sbx_job_read(sbx_host *host, const char *job_id, uint32_t stream, uint64_t offset, size_t max,
		 uint32_t tail_lines, void **data, size_t *len, sbx_error *err);

/* ---- files (paths absolute in the sandbox or relative to its work dir) ---- */

/* *data (free with sbx_free) holds *len bytes plus a terminating NUL not counted in len. */
int sbx_read_file(sbx_host *host, const char *id, const char *path, void **data, size_t *len,
		  sbx_error *err);
/* Creates parent directories as needed. mode 0 means 0644. */
int sbx_write_file(sbx_host *host, const char *id, const char *path, const void *data, size_t len,
		   uint32_t mode, sbx_error *err);
int sbx_stat(sbx_host *host, const char *id, const char *path, sbx_file_info *info, sbx_error *err);
/* *entries (free with sbx_free) is an array of *n entries. */
int sbx_list_dir(sbx_host *host, const char *id, const char *path, sbx_file_info **entries,
		 size_t *n, sbx_error *err);
int sbx_mkdir(sbx_host *host, const char *id, const char *path, int parents, sbx_error *err);
int sbx_remove(sbx_host *host, const char *id, const char *path, int recursive, sbx_error *err);

/* ---- lifecycle ---- */

int sbx_pause(sbx_host *host, const char *id, sbx_error *err);
int sbx_resume(sbx_host *host, const char *id, sbx_error *err);
/* *state is one of SBX_STATE_*. */
int sbx_status(sbx_host *host, const char *id, uint32_t *state, sbx_error *err);
/* JSON object the backend gives about one sandbox (what it uses: the local backend's
 * writable layer and its cap, for one), or "{}" when the backend has nothing to say; *json
 * from the library's allocator, free with sbx_free. Thread-safe. */
int sbx_sandbox_info(sbx_host *host, const char *id, char **json, sbx_error *err);

/* JSON object describing alias's backend as configured for data source `data_source` (NULL:
 * default block); *json from the library's allocator, free with sbx_free. */
int sbx_backend_info(sbx_host *host, const char *alias, char **json, sbx_error *err);

/* ---- ledger and reaping (ledger: $SBX_STATE_DIR/ledger.db) ---- */

/* One ledger row. Strings are borrowed for the duration of the callback. */
typedef struct sbx_sandbox_record {
	SBX_STRUCT_HEADER;
	const char *id; /* empty while the create is in flight */
	const char *alias;
	const char *data_source;
	const char *owner_host;
	int64_t owner_pid; /* 0: detached */
	const char *run_id;
	int64_t created;   /* unix seconds */
	int64_t expires;   /* unix seconds, 0: no TTL */
	const char *state; /* creating, running, paused, deleting, gone, failed */
	uint32_t owner_alive;
	uint32_t reserved0;
	const char *error; /* why a create failed, else "" */
} sbx_sandbox_record;

/* Called once per row; a nonzero return stops the walk and is returned. */
typedef int (*sbx_record_fn)(void *ctx, const sbx_sandbox_record *rec);

/* Walks the ledger, oldest first. Thread-safe; safe while other processes write. */
int sbx_ledger_list(sbx_host *host, sbx_record_fn fn, void *ctx, sbx_error *err);

#define SBX_GC_DRY_RUN 1u

/* Called for each sandbox gc deletes (or would delete with SBX_GC_DRY_RUN): its id, why
 * ("owner pid 123 is dead", "ttl expired", "not in the ledger"), and the destroy status. */
typedef void (*sbx_gc_fn)(void *ctx, const char *id, const char *reason, int status);

/* Deletes sandboxes whose owner process died or whose TTL passed, and backend objects carrying
 * sbx labels that the ledger does not know (through each configured alias's list_by_label).
 * Never touches a sandbox whose owner is alive and whose TTL has not passed. fn is called for
 * deletions only; sbx_gc_run reports everything gc did and spared. */
int sbx_gc(sbx_host *host, uint32_t flags, sbx_gc_fn fn, void *ctx, sbx_error *err);

/* What gc did with one sandbox or ledger row. */
#define SBX_GC_DELETED  0u /* deleted it (with SBX_GC_DRY_RUN: would delete it) */
#define SBX_GC_SKIPPED  1u /* looked reapable but was spared; reason says why */
#define SBX_GC_FINISHED 2u /* a row stuck in creating or deleting was closed, nothing to delete */

typedef struct sbx_gc_event {
	SBX_STRUCT_HEADER;
	uint32_t action;   /* SBX_GC_* */
	int32_t status;    /* the destroy's status for SBX_GC_DELETED, else SBX_OK */
	const char *id;    /* "<alias>:<backend-id>", "" for a create that never got one */
	const char *token; /* the ledger row's token, "" for an object no row held */
	const char *reason;
} sbx_gc_event;

typedef void (*sbx_gc_event_fn)(void *ctx, const sbx_gc_event *ev);

typedef struct sbx_gc_opts {
	SBX_STRUCT_HEADER;
	uint32_t flags; /* SBX_GC_DRY_RUN */
	uint32_t reserved0;
	sbx_gc_event_fn on_event; /* may be NULL */
	void *ctx;
} sbx_gc_opts;

/* sbx_gc with a report of every decision. gc never deletes a sandbox whose row or object
 * appeared after it started, a create or delete still in flight (its process alive), or
 * anything whose row changed after gc read it: each deletion is claimed in the ledger by a
 * conditional update at the moment it is made. Rows of sandboxes gone (or of failed creates)
 * longer ago than the host's ledger_retention (default seven days) are then removed, except
 * on a dry run. */
int sbx_gc_run(sbx_host *host, const sbx_gc_opts *opts, sbx_error *err);

/* ---- sessions: (user_id, session_id) -> a sandbox that outlives the process (NexAU) ----
 *
 * A session is a ledger record keyed by (user_id, session_id) holding its sandbox id, the data
 * source, image and TTL it was started with, its state and its assets: files copied from this
 * machine into the sandbox. It never holds secrets: environment variables are not recorded
 * (give them again on each start; a reconnected sandbox keeps the ones it was made with).
 * Session sandboxes are created detached (see sbx_create_opts.detached): they survive the
 * process that started them and only their TTL, or owner_pid, lets `sbx gc` reap them. */

/* What sbx_session_start did. */
#define SBX_SESSION_CREATED   0u /* no record: made a sandbox and uploaded the assets */
#define SBX_SESSION_REUSED    1u /* the recorded sandbox is running: reconnected to it */
#define SBX_SESSION_RESUMED   2u /* the recorded sandbox was paused: resumed it */
#define SBX_SESSION_RECREATED 3u /* the recorded sandbox is gone: made a new one, re-uploaded */

/* Starts or reconnects the session (user_id, session_id) and writes its sandbox id into
 * id[SBX_ID_MAX]. Without a record it creates a sandbox from `opts` (may be NULL), uploads the
 * assets and records all three. With a record it asks the backend for the recorded sandbox's
 * status: running is reused, paused is resumed, gone or not found is replaced by a new
 * sandbox (from `opts`, else the recorded data source, image and TTL) into which the assets
 * are uploaded again. A backend without status is assumed running.
 *
 * `assets` (key: file on this machine, value: path in the sandbox) are regular files, resolved
 * to absolute paths when recorded and uploaded with their permission bits. n_assets 0 keeps
 * the recorded list; a non-empty list replaces it and is uploaded into a reconnected sandbox
 * too. *outcome (may be NULL) is one of SBX_SESSION_*.
 *
 * Two processes starting one new session at once get the same sandbox: the loser of the race
 * destroys the one it made. Errors: SBX_E_INVAL for empty ids, SBX_E_IO naming an unreadable
 * asset (nothing is recorded and the new sandbox is destroyed), the create's or the backend's
 * status otherwise. */
int sbx_session_start(sbx_host *host, const char *user_id, const char *session_id,
		      const sbx_create_opts *opts, const sbx_kv *assets, uint32_t n_assets,
		      char id[SBX_ID_MAX], uint32_t *outcome, sbx_error *err);

/* Pauses the session's sandbox and marks the record paused; the next start resumes it. The
 * record is kept whatever happens. SBX_E_NOT_FOUND when there is no such session; the
 * backend's pause status otherwise (SBX_E_UNSUPPORTED where it cannot pause, record unchanged). */
int sbx_session_pause(sbx_host *host, const char *user_id, const char *session_id, sbx_error *err);

/* Destroys the session's sandbox (one already gone is fine) and forgets the record.
 * SBX_E_NOT_FOUND when there is no such session; when the destroy fails the record is kept
 * and its status returned. */
int sbx_session_end(sbx_host *host, const char *user_id, const char *session_id, sbx_error *err);

/* One session record. Strings and the asset array are borrowed for the callback's duration. */
typedef struct sbx_session_record {
	SBX_STRUCT_HEADER;
	const char *user_id;
	const char *session_id;
	const char *sandbox_id;  /* "<alias>:<backend-id>" */
	const char *data_source; /* as given at start; "" for the default block */
	const char *image;       /* "" for the backend's default */
	const char *state;       /* running or paused (as last set through the session) */
	int64_t ttl_seconds;     /* as given at start; 0: the data source's */
	int64_t created;         /* unix seconds */
	int64_t updated;
	const sbx_kv *assets; /* key: absolute file on this machine, value: path in the sandbox */
	uint32_t n_assets;
	uint32_t reserved0;
} sbx_session_record;

/* Called once per record; a nonzero return stops the walk and is returned. */
typedef int (*sbx_session_fn)(void *ctx, const sbx_session_record *rec);

/* Calls fn with the record of (user_id, session_id); SBX_E_NOT_FOUND when there is none. */
int sbx_session_get(sbx_host *host, const char *user_id, const char *session_id, sbx_session_fn fn,
		    void *ctx, sbx_error *err);

/* Calls fn for every session record, oldest first. */
int sbx_session_list(sbx_host *host, sbx_session_fn fn, void *ctx, sbx_error *err);

/* ---- completion queue (ABI 1.2) ----
 *
 * For event loops. A call submitted to a queue runs on one of the queue's own threads (at
 * most `workers` at once, started as they are needed) and leaves a completion behind, which
 * sbx_queue_take hands back. sbx_queue_fd is readable while completions wait: an event loop
 * watches it (epoll, asyncio's add_reader) and parks no thread of its own per blocked call.
 * A completion says the same as the blocking call would have: status, error, outputs. */
typedef struct sbx_queue sbx_queue;

#define SBX_CALL_CREATE     1 /* create: sbx_create(create), completion.id */
#define SBX_CALL_EXEC       2 /* exec: sbx_exec(id, exec), completion.exec */
#define SBX_CALL_DESTROY    3 /* sbx_destroy(id) */
#define SBX_CALL_READ_FILE  4 /* sbx_read_file(id, path), completion.data and .len */
#define SBX_CALL_WRITE_FILE 5 /* sbx_write_file(id, path, data, len, mode) */

/* One call. The queue copies this struct; what its pointers point to (the id, the options,
 * their strings and arrays, path, data) must stay valid until the call's completion has been
 * taken. */
typedef struct sbx_call {
	SBX_STRUCT_HEADER;
	uint32_t op; /* SBX_CALL_* */
	uint32_t reserved0;
	uint64_t tag; /* the caller's, handed back in the completion */
	const char *id;
	const sbx_create_opts *create; /* NULL: all defaults */
	const sbx_exec_opts *exec;
	const char *path;
	const void *data;
	size_t len;
	uint32_t mode;
	uint32_t reserved1;
} sbx_call;

typedef struct sbx_completion {
	SBX_STRUCT_HEADER;
	uint32_t op;
	int32_t status; /* the call's SBX_* status; err says more when it is not SBX_OK */
	uint64_t tag;
	sbx_error err;
	char id[SBX_ID_MAX];   /* create: the new sandbox */
	sbx_exec_result *exec; /* exec: the caller's now (sbx_exec_result_free) */
	void *data;            /* read_file: the caller's now (sbx_free) */
	size_t len;
} sbx_completion;

/* A queue of `workers` threads (1 to 1024) on `host`, which must outlive it. */
int sbx_queue_new(sbx_host *host, uint32_t workers, sbx_queue **out, sbx_error *err);

/* The descriptor that is readable while completions wait. Owned by the queue. */
int sbx_queue_fd(const sbx_queue *queue);

/* Submits a call; it starts when a worker is free, in the order of submission. SBX_E_INVAL
 * for an unknown op or a missing id, path or exec; the call's own failures come back in its
 * completion. */
int sbx_queue_submit(sbx_queue *queue, const sbx_call *call, sbx_error *err);

/* Moves up to `max` completions, oldest first, into out[], whose first element's header is
 * set (the others take its size), and sets *n to how many. Never blocks: *n is 0 when none
 * waits. The descriptor stays readable while more wait. */
int sbx_queue_take(sbx_queue *queue, sbx_completion *out, size_t max, size_t *n, sbx_error *err);

/* Runs every call already submitted to its end, frees what no one took, stops the workers
 * and frees the queue. A command still running holds this up until it ends: kill it first
 * (a cancel token, a timeout). NULL is a no-op. */
void sbx_queue_free(sbx_queue *queue);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif

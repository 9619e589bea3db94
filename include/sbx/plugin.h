/* The sbx plugin ABI: what a backend shared object implements.
 *
 * ABI change log (append only; see version.h for the current numbers)
 *   1.0  First release: sbx_plugin_register, sbx_host_api, sbx_plugin_desc with the required
 *        ops (init, fini, create, execute, destroy) and the optional ops (file ops, pause,
 *        resume, status, list_by_label, info).
 *   1.1  Status SBX_E_PLUGIN_CRASHED (23): the runner process of an out-of-process plugin
 *        died or hung; registry entries take `runner: process | inproc` (or a map with the
 *        runner's limits: mode, grace, timeout, max_crashes, window).
 *        sbx_exec_outcome grows oom_killed (and reserved1) at its end.
 *        Background jobs (host.h): sbx_exec_opts.background, sbx_exec_result.job_id,
 *        sbx_job_info and sbx_job_status/list/wait/kill/read, policy key max_jobs; jobs
 *        run through a plugin's execute under an in-sandbox supervisor, no new plugin op.
 *        sbx_plugin_desc grows sandbox_info (optional) at its end: a JSON object about one
 *        sandbox, shown by sbx_sandbox_info and `sbx status --json`.
 *        The host no longer asks for status before each exec: execute in a paused sandbox
 *        returns SBX_E_PAUSED (as every bundled backend did), and the host resumes and
 *        retries once under auto_resume.
 *        sbx_host_api grows state_dir_for(cfg): the plugins' folder of the host that made the
 *        config. state_dir(void) stays for 1.0 plugins (the host made last in the process).
 *        Caps held across every process sharing a state dir, through the ledger: policy keys
 *        max_starting, create_rate, create_burst beside max_concurrency; sbx_create_opts
 *        grows wait_seconds at its end (how long a create may wait for a place).
 *        Every plugin config also carries the host's key max_file_bytes (config_int): a
 *        plugin stops reading a file past it and fails with SBX_E_LIMIT; the host checks
 *        what read_file returns against it too.
 *   1.2  The completion queue (host.h: sbx_queue_new/fd/submit/take/free, sbx_call,
 *        sbx_completion) for event loops. Host API only: plugins gain and lose nothing,
 *        but one built against 1.2 headers needs a 1.2 host.
 *   1.3  sbx_exec_opts and sbx_exec_request grow stdout_path and stderr_path at their end:
 *        a command's output straight into files in the sandbox. A plugin that sets the new
 *        descriptor flag SBX_PLUGIN_REDIRECT opens them itself; for any other plugin, 1.0
 *        to 1.2 ones included, the host runs the command under a /bin/sh wrapper that does.
 *   1.4  sbx_create_opts and sbx_create_spec grow share_dir at their end: a host folder that
 *        is one sandbox's work dir. Only a plugin with the new descriptor flag
 *        SBX_PLUGIN_SHARE_DIR sees it; the host refuses it for any other.
 *   1.5  sbx_host_api grows command_nofile(): libsbx raises its process's soft open-files
 *        limit (RLIMIT_NOFILE) to the hard one, and a plugin that starts commands on this
 *        machine gives each the soft limit the process had before.
 *
 * A plugin exports exactly one symbol, sbx_plugin_register(). The host calls it once after
 * dlopen(); the plugin calls host->register_sandbox() once per alias it provides and returns
 * SBX_OK. Nothing else of the plugin runs before the host has checked every descriptor's ABI
 * version. A plugin never writes to stdout or stderr, never exits or aborts and never installs
 * signal handlers: it logs through host->log and reports failures through host->set_error.
 *
 * Plugins are stateless with respect to sandboxes: everything needed to reach a sandbox must
 * be recoverable from its backend id, so a sandbox created by one process can be used and
 * destroyed by another.
 *
 * Where a plugin runs: a registry entry's `runner: inproc` loads it into the caller's process,
 * `runner: process` into sbx-runner, a process of its own that loads the same file through the
 * same checks and serves its ops over a socket (see docs/design.md, "Out-of-process plugins").
 * A plugin that ships with sbx runs in process by default, any other in a runner. The plugin
 * sees no difference: the same services table, the same calls, from many threads.
 *
 * What a plugin must never do, and what the host does when it happens anyway:
 *   - crash (segfault, abort), call exit(), or hang past a call's timeout: in process, this
 *     takes the caller down or hangs it. In a runner, every call in flight returns
 *     SBX_E_PLUGIN_CRASHED naming the alias and the signal or exit status; a call still
 *     running at its timeout plus the entry's grace period (30 s by default; calls without a
 *     timeout of their own get the entry's `timeout`, none by default) kills the runner and
 *     returns it too; the next call starts a fresh runner, and after max_crashes deaths
 *     within the window (5 in 60 s) the alias is faulty (SBX_E_FAULTY) like a failed load.
 *   - keep memory it does not free: in a runner it grows the runner, never the caller.
 *   - write to stdout or stderr: in process, the bytes reach the caller's streams; a runner's
 *     stdout is /dev/null and its stderr is the host's.
 *   - call the output callback after execute returned, or with another call's context: the
 *     context is a token, not a pointer; the host (or the runner) drops the bytes, logs it
 *     once, and the callback returns SBX_E_CANCELLED.
 *   - call the output callback with a stream other than SBX_STREAM_STDOUT/STDERR, or NULL
 *     data with a length: the callback returns SBX_E_INVAL.
 *   - report an outcome out of range (exit_code outside -1..255, signal outside 0..64,
 *     timed_out other than 0 or 1), a sandbox state that is not an SBX_STATE_* value, bytes
 *     or entries without a buffer, or return a value that is not an SBX_E_* status: the call
 *     fails with SBX_E_BACKEND and a message naming the alias and the value.
 *   - pass a NULL or empty id to a list_by_label callback: it is skipped and logged.
 *
 * Threads: the host may call create/execute/destroy/file ops from many threads at once on the
 * same state unless the descriptor leaves SBX_PLUGIN_THREAD_SAFE out of `flags`, in which case
 * the host serialises calls into that plugin. init and fini are never concurrent with anything.
 *
 * fork(): the harness may fork while other threads are inside the plugin. The host never
 * calls a plugin state in a process other than the one whose init made it: a forked child's
 * host calls init again. A plugin whose process-wide data (static locks, caches of running
 * things) a thread may hold at the fork resets it in a pthread_atfork child handler (the
 * local plugin does, in local.c).
 */
#ifndef SBX_PLUGIN_H
#define SBX_PLUGIN_H

#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SBX_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define SBX_EXPORT       __attribute__((visibility("default")))
#else
#define SBX_PRINTF(a, b)
#define SBX_EXPORT
#endif

typedef struct sbx_registrar sbx_registrar; /* opaque, owned by the host */
typedef struct sbx_config sbx_config;       /* opaque, owned by the host */

/* Log levels for host->log. */
#define SBX_LOG_ERROR 0
#define SBX_LOG_WARN  1
#define SBX_LOG_INFO  2
#define SBX_LOG_DEBUG 3

/* Types of declared config keys. */
#define SBX_KEY_STRING 1u
#define SBX_KEY_INT    2u
#define SBX_KEY_FLOAT  3u
#define SBX_KEY_BOOL   4u
#define SBX_KEY_LIST   5u /* a YAML sequence */
#define SBX_KEY_MAP    6u /* a YAML mapping */
#define SBX_KEY_ANY    7u

/* A config key the plugin accepts. The host rejects any other key before init. */
typedef struct sbx_config_key {
	const char *name;
	uint32_t type;    /* SBX_KEY_* */
	uint32_t secret;  /* nonzero: the value never appears in logs, state or the ledger */
	const char *help; /* one line */
} sbx_config_key;

/* Everything a create needs. All pointers are borrowed for the duration of the call. */
typedef struct sbx_create_spec {
	SBX_STRUCT_HEADER;
	const char *image;    /* may be NULL: the backend's configured default */
	const sbx_kv *labels; /* host labels (sbx.owner, sbx.run, sbx.data_source, ...) */
	uint32_t n_labels;
	uint32_t reserved0;
	const sbx_kv *env; /* environment for every exec in the sandbox */
	uint32_t n_env;
	uint32_t reserved1;
	int64_t ttl_seconds;     /* 0: none; backends with a lifetime enforce it */
	const char *data_source; /* name of the data source, for the backend's own labels */
	/* ABI 1.4, only for a plugin whose descriptor has SBX_PLUGIN_SHARE_DIR (the host
	 * refuses it for the others): an absolute path to an existing host folder, checked by
	 * the host, that is this sandbox's work dir; NULL: the plugin's own. The sandbox must
	 * remember it by itself (another process reaches the sandbox by its id alone). */
	const char *share_dir;
} sbx_create_spec;

/* Output sink: the plugin pushes every chunk of output through it as it arrives. A nonzero
 * return (an SBX_E_* status) means the host cannot take more; the plugin stops the command
 * and returns that status. */
typedef int (*sbx_output_fn)(void *ctx, uint32_t stream, const void *data, size_t len);

/* One command to run. Exactly one of `shell` and a non-empty `argv` is set (the host checks
 * this before any plugin sees the request); `argc` counts argv's elements.
 *
 * `shell` runs as `bash -c SHELL`, or `sh -c SHELL` where bash is missing; the host never
 * splices it into a string of its own and neither may the plugin: pass it as one argv element.
 * `timeout_ms` 0 means none; otherwise the plugin kills the command's whole process tree when it
 * expires, sets `timed_out` and returns SBX_OK with the output produced so far. */
typedef struct sbx_exec_request {
	SBX_STRUCT_HEADER;
	const char *shell;
	const char *const *argv; /* NULL-terminated */
	uint32_t argc;
	uint32_t has_stdin; /* nonzero: feed stdin_data; zero: stdin is /dev/null */
	const char *cwd;    /* NULL: the sandbox's work dir; relative: beneath it */
	const sbx_kv *env;  /* additions to the sandbox environment */
	uint32_t n_env;
	uint32_t reserved0;
	const void *stdin_data;
	size_t stdin_len;
	uint64_t timeout_ms;
	const char *user; /* NULL: the backend's default */
	sbx_output_fn output;
	void *output_ctx;
	/* ABI 1.3, only for a plugin whose descriptor has SBX_PLUGIN_REDIRECT (the host wraps
	 * the command for the others): open these files in the sandbox after entering cwd, as
	 * `>PATH` would (O_WRONLY | O_CREAT | O_TRUNC, mode 0666 less the umask; one file when
	 * both name the same path), and give them to the command as stdout and stderr. NULL:
	 * the stream goes to `output` as usual. A file that cannot be opened fails the call
	 * with SBX_E_NO_FILE naming the stream, the path and the reason, the command not run. */
	const char *stdout_path;
	const char *stderr_path;
} sbx_exec_request;

/* What the plugin reports about a finished command. The host has zeroed it and set its
 * header before the call. */
typedef struct sbx_exec_outcome {
	SBX_STRUCT_HEADER;
	int32_t exit_code; /* -1 when killed by a signal */
	int32_t signal;    /* terminating signal, 0 if none */
	uint32_t timed_out;
	uint32_t reserved0;
	/* ABI 1.1: */
	uint32_t oom_killed; /* the sandbox's memory limit killed a process during the command */
	uint32_t reserved1;
} sbx_exec_outcome;

/* Called by list_by_label once per backend id found. */
typedef int (*sbx_id_fn)(void *ctx, const char *backend_id);

/* Flags of sbx_plugin_desc. */
#define SBX_PLUGIN_THREAD_SAFE 1u
/* ABI 1.3: execute honours sbx_exec_request.stdout_path and stderr_path itself. */
#define SBX_PLUGIN_REDIRECT 2u
/* ABI 1.4: create honours sbx_create_spec.share_dir. */
#define SBX_PLUGIN_SHARE_DIR 4u

/* The descriptor a plugin registers for one alias. The host copies it (up to struct_size),
 * so it may live on the plugin's stack. Required ops must not be NULL; optional ops may be
 * NULL, which the host reports as SBX_E_UNSUPPORTED.
 *
 * Every op returns an SBX_* status; on failure it also fills `err` through host->set_error.
 * `id` arguments are the plugin's own part of the sandbox id. */
typedef struct sbx_plugin_desc {
	SBX_STRUCT_HEADER;
	const char *alias;
	const char *version;     /* the plugin's own version string */
	const char *description; /* one line */
	const sbx_config_key *keys;
	uint32_t n_keys;
	uint32_t flags; /* SBX_PLUGIN_* */

	/* Required. */
	int (*init)(const sbx_config *cfg, void **state, sbx_error *err);
	void (*fini)(void *state);
	/* Writes the backend id (NUL-terminated, at most id_cap bytes) into id_buf. */
	int (*create)(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		      sbx_error *err);
	/* A paused sandbox runs nothing: execute returns SBX_E_PAUSED. The host asks for no
	 * status before an exec; on SBX_E_PAUSED it resumes the sandbox and calls execute once
	 * more when the data source's policy has auto_resume. */
	int (*execute)(void *state, const char *id, const sbx_exec_request *req,
		       sbx_exec_outcome *out, sbx_error *err);
	/* Destroying a sandbox that is already gone succeeds. */
	int (*destroy)(void *state, const char *id, sbx_error *err);

	/* Optional: files. Paths are absolute inside the sandbox or relative to its work dir.
	 * read_file returns a buffer from host->alloc that the host frees. */
	int (*read_file)(void *state, const char *id, const char *path, void **data, size_t *len,
			 sbx_error *err);
	int (*write_file)(void *state, const char *id, const char *path, const void *data,
			  size_t len, uint32_t mode, sbx_error *err);
	int (*stat_file)(void *state, const char *id, const char *path, sbx_file_info *info,
			 sbx_error *err);
	/* *entries comes from host->alloc (an array of *n entries, each with its header set). */
	int (*list_dir)(void *state, const char *id, const char *path, sbx_file_info **entries,
			size_t *n, sbx_error *err);
	int (*make_dir)(void *state, const char *id, const char *path, uint32_t parents,
			sbx_error *err);
	int (*remove_path)(void *state, const char *id, const char *path, uint32_t recursive,
			   sbx_error *err);

	/* Optional: lifecycle. */
	int (*pause)(void *state, const char *id, sbx_error *err);
	int (*resume)(void *state, const char *id, sbx_error *err);
	int (*status)(void *state, const char *id, uint32_t *sandbox_state, sbx_error *err);
	/* Calls fn for every sandbox carrying label key=value. */
	int (*list_by_label)(void *state, const char *key, const char *value, sbx_id_fn fn,
			     void *ctx, sbx_error *err);
	/* Optional: a JSON object describing the backend as configured (mechanisms, versions).
	 * *json comes from host->alloc. */
	int (*info)(void *state, char **json, sbx_error *err);
	/* Optional (ABI 1.1): a JSON object about one sandbox (e.g. the disk its writable layer
	 * uses). *json comes from host->alloc. */
	int (*sandbox_info)(void *state, const char *id, char **json, sbx_error *err);
} sbx_plugin_desc;

/* Services the host offers to plugins. Only grows at its end. */
typedef struct sbx_host_api {
	SBX_STRUCT_HEADER;
	/* Registers one alias. Returns SBX_E_ABI, SBX_E_EXISTS or SBX_E_INVAL on a bad
	 * descriptor (the load then fails with that reason). */
	int (*register_sandbox)(sbx_registrar *reg, const sbx_plugin_desc *desc);
	void (*log)(int level, const char *alias, const char *fmt, ...) SBX_PRINTF(3, 4);
	void *(*alloc)(size_t size);
	void *(*realloc)(void *ptr, size_t size);
	void (*free)(void *ptr);
	/* Fills err (if not NULL) and returns code, so `return host->set_error(err, ...);`. */
	int (*set_error)(sbx_error *err, int code, const char *fmt, ...) SBX_PRINTF(3, 4);
	/* Config getters: SBX_OK and the value, SBX_E_NOT_FOUND when the key is absent, or
	 * SBX_E_CONFIG when it has another type (err names the key and the type wanted).
	 * Returned strings are valid until fini. */
	int (*config_string)(const sbx_config *cfg, const char *key, const char **out,
			     sbx_error *err);
	int (*config_int)(const sbx_config *cfg, const char *key, int64_t *out, sbx_error *err);
	int (*config_float)(const sbx_config *cfg, const char *key, double *out, sbx_error *err);
	int (*config_bool)(const sbx_config *cfg, const char *key, int *out, sbx_error *err);
	/* Any value (lists and maps included) as JSON text. */
	int (*config_json)(const sbx_config *cfg, const char *key, const char **out,
			   sbx_error *err);
	/* Directory the plugin may keep private files in (created on demand): that of the host
	 * made last in this process. Superseded by state_dir_for, which knows the host. */
	const char *(*state_dir)(void);
	/* ABI 1.1: the directory the plugin may keep private files in for the host whose
	 * config `cfg` is (<state dir>/plugins, created on demand); NULL when it cannot be
	 * made. Valid until fini. Two hosts with two state dirs in one process each get
	 * their own. */
	const char *(*state_dir_for)(const sbx_config *cfg);
	/* ABI 1.5: the soft RLIMIT_NOFILE a command started on this machine should get before
	 * its exec, or 0 to leave the inherited one. libsbx raises the soft limit of the
	 * process it runs in to the hard limit (many commands in flight hold many descriptors);
	 * this is what the process had before, and what commands expect: some walk every
	 * descriptor up to the limit, and select() cannot take those past 1023. A plugin that
	 * starts processes calls setrlimit() in the child, keeping the hard limit. */
	uint64_t (*command_nofile)(void);
} sbx_host_api;

/* The one symbol a plugin exports. `host` stays valid until the plugin is unloaded. */
typedef int (*sbx_plugin_register_fn)(const sbx_host_api *host, sbx_registrar *reg);
#define SBX_PLUGIN_ENTRY "sbx_plugin_register"

SBX_EXPORT int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg);

#ifdef __cplusplus
}
#endif
#endif

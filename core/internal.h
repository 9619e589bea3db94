/* Layouts and module interfaces private to libsbx. Nothing here is installed.
 *
 * Modules: yaml.c (YAML -> node tree), registry.c (alias -> .so), loader.c (dlopen and the
 * handshake; the only user of <dlfcn.h>), config.c (data sources, policies, plugin configs),
 * host_api.c (the services table plugins get), spool.c (per-call output files and display
 * copies), outgate.c (late-safe output callbacks), host.c (sbx_host and routing), ledger.c (SQLite ledger, ledger.h), gc.c (listing
 * and reaping, gc.h), session.c (NexAU-style sessions). */
#ifndef SBX_INTERNAL_H
#define SBX_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/host.h"
#include "sbx/plugin.h"

#define SBX__HIDDEN __attribute__((visibility("hidden")))

/* ---- allocation (alloc.c): every allocation goes through these, so a test can fail them */
void *sbx__alloc(size_t size);
void *sbx__calloc(size_t n, size_t size);
void *sbx__realloc(void *ptr, size_t size);
void sbx__free(void *ptr);
char *sbx__strdup(const char *s);
char *sbx__strndup(const char *s, size_t n);
/* printf into a new string; NULL on allocation failure. */
char *sbx__asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- errors (error.c) */
/* Fills err (if not NULL) with code and the formatted message, returns code. */
int sbx__set_error(sbx_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int sbx__set_errorv(sbx_error *err, int code, const char *fmt, va_list ap);
/* Puts "prefix: " in front of err's message (keeps the code). */
void sbx__error_prefix(sbx_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- logging (log.c): structured lines on stderr, level from $SBX_LOG (error|warn|info|debug) */
void sbx__log(int level, const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sbx__logv(int level, const char *subject, const char *fmt, va_list ap);

/* ---- YAML node tree (yaml.c) */
#define SBX__NODE_SCALAR 1
#define SBX__NODE_MAP    2
#define SBX__NODE_LIST   3

typedef struct sbx__node {
	int kind;
	int quoted;   /* scalar was quoted: always a string */
	char *scalar; /* SCALAR: text (after ${env.X} interpolation when loaded with it) */
	char **keys;  /* MAP: n keys */
	struct sbx__node **items; /* MAP values / LIST items */
	size_t n;
	char *file; /* file the node came from (owned by each node) */
	int line;   /* 1-based */
	char *raw;  /* SCALAR: the text before ${env.X} interpolation; NULL when none happened */
} sbx__node;

/* Parses a YAML file into a tree. `interpolate` nonzero expands ${env.NAME} in scalars (an
 * unset variable is SBX_E_CONFIG naming it, the file and line). An empty document gives an
 * empty map. Errors: SBX_E_IO (cannot open), `bad_status` for syntax errors, with "FILE:LINE: ...". */
int sbx__yaml_load_file(const char *path, int interpolate, int bad_status, sbx__node **out,
			sbx_error *err);
int sbx__yaml_load_string(const char *text, const char *name, int interpolate, int bad_status,
			  sbx__node **out, sbx_error *err);
void sbx__node_free(sbx__node *node);
sbx__node *sbx__node_dup(const sbx__node *node);
/* Value of key in a MAP node, NULL if absent or node is not a map. */
const sbx__node *sbx__node_get(const sbx__node *map, const char *key);
/* JSON text of a node (scalars typed: null/true/false/numbers unquoted unless quoted). */
char *sbx__node_to_json(const sbx__node *node);

/* ---- registry (registry.c) */
/* How a plugin runs: the registry entry's `runner` key (runner_conf.c). */
#define SBX__RUNNER_DEFAULT 0 /* inproc for a plugin that ships with sbx, else process */
#define SBX__RUNNER_INPROC  1
#define SBX__RUNNER_PROCESS 2

typedef struct sbx__runner_opts {
	int mode;             /* SBX__RUNNER_* */
	uint64_t grace_ms;    /* a call may run this long past its timeout; default 30 s */
	uint64_t timeout_ms;  /* calls without a timeout of their own; 0 (default): none */
	uint32_t max_crashes; /* this many runner deaths ... */
	uint64_t window_ms;   /* ... within this window make the alias faulty; 5 in 60 s */
} sbx__runner_opts;

typedef struct sbx__reg_entry {
	char *alias;
	char *path; /* absolute path of the .so */
	char *file; /* registry file that listed the alias */
	int line;
	sbx__node *defaults; /* MAP or NULL */
	sbx__runner_opts runner;
} sbx__reg_entry;

typedef struct sbx__registry {
	sbx__reg_entry *entries; /* sorted by alias */
	size_t n;
	char *main_file;
} sbx__registry;

/* Resolves the registry file (explicit path, $SBX_REGISTRY, the build tree's, the installed
 * one), reads it and its registry.d/ *.yaml drop-ins. SBX_E_REGISTRY with a message naming
 * the file and line. */
int sbx__registry_load(const char *explicit_path, sbx__registry **out, sbx_error *err);
void sbx__registry_free(sbx__registry *reg);
const sbx__reg_entry *sbx__registry_find(const sbx__registry *reg, const char *alias);
/* "a, b, c" of all aliases (for "unknown alias" messages). */
char *sbx__registry_alias_list(const sbx__registry *reg);

/* ---- loader (loader.c) */
typedef struct sbx__module sbx__module;

/* dlopens `path` (RTLD_NOW|RTLD_LOCAL), checks the entry, calls it and checks every
 * registered descriptor (ABI major equal, minor <= host's, size, required ops, alias listed
 * in `expected`, no duplicate). On any failure nothing stays loaded and err says why. */
int sbx__module_load(const char *path, const char *const *expected, size_t n_expected,
		     sbx__module **out, sbx_error *err);
size_t sbx__module_count(const sbx__module *mod);
/* Host-owned copy of descriptor i, zero-extended to the host's sizeof(sbx_plugin_desc). */
const sbx_plugin_desc *sbx__module_desc(const sbx__module *mod, size_t i);
void sbx__module_unload(sbx__module *mod);

/* ---- plugins in a runner process (runner_conf.c, proxy.c, link.c; the runner: core/runner/) */
/* Parses a registry entry's `runner` value (`process`, `inproc`, or a map of mode, grace,
 * timeout, max_crashes, window) into opts, which holds the defaults when v is NULL.
 * SBX_E_REGISTRY naming file and line. */
int sbx__runner_opts_parse(const sbx__node *v, const char *file, const char *alias,
			   sbx__runner_opts *opts, sbx_error *err);
/* Opens the plugin file of registry entry ent the way the entry says: in this process
 * (sbx__module_load) or in a runner process whose descriptors are proxies. Same contract
 * as sbx__module_load. */
int sbx__plugin_open(const sbx__reg_entry *ent, const char *const *expected, size_t n_expected,
		     sbx__module **out, sbx_error *err);
/* For a proxy descriptor marked faulty after repeated runner crashes: SBX_PLUGIN_FAULTY and
 * the reason (valid until the module is unloaded); otherwise leaves both as they are. */
void sbx__proxy_health(const sbx_plugin_desc *desc, uint32_t *state, const char **reason);

/* ---- host services table (host_api.c) */
const sbx_host_api *sbx__host_api(void);
/* Where plugins may keep files ($SBX_STATE_DIR/plugins); set by host.c. */
void sbx__set_state_dir(const char *dir);

/* The plugin-facing config object: one data source's merged keys for one alias. */
struct sbx_config {
	sbx__node *map;              /* MAP: registry defaults overlaid by the data source's keys */
	char **json;                 /* cache of config_json results, one per key in map order */
	const sbx_plugin_desc *desc; /* the descriptor whose keys it was checked against */
};
void sbx__config_obj_free(struct sbx_config *cfg);

/* ---- config (config.c) */
typedef struct sbx__policy {
	double timeout;           /* default exec timeout, seconds; 0 = none */
	uint64_t max_concurrency; /* live sandboxes; 0 = unlimited */
	uint64_t output_char_threshold;
	uint64_t truncate_head_chars;
	uint64_t truncate_tail_chars;
	uint64_t output_max_bytes; /* stored bytes per stream; 0 = unlimited */
	int64_t ttl;               /* seconds; 0 = none */
	int auto_resume;           /* exec on a paused sandbox resumes it */
	uint64_t max_jobs;         /* live background jobs per sandbox (jobs.c) */
} sbx__policy;

typedef struct sbx__data_source {
	char *name;      /* "default" for the data_source block */
	char *alias;     /* NULL: no sandbox (type none or empty) */
	sbx__node *keys; /* MAP of plugin keys (everything but type and policy keys) */
	sbx__policy policy;
	char *file;
	int line;
} sbx__data_source;

typedef struct sbx__config {
	sbx__data_source deflt;
	sbx__data_source *sources;
	size_t n;
	char *file; /* NULL for the built-in default */
} sbx__config;

/* ---- recorded configs (recall.c) */
/* JSON of a data source's plugin keys for the ledger: secrets only as their ${env.NAME}
 * references (a literal secret is left out), "" when nothing is left; NULL on OOM. */
char *sbx__config_record(const sbx__node *keys, const sbx_plugin_desc *desc);
/* The keys back from sbx__config_record's JSON, references interpolated from this
 * process's environment. */
int sbx__config_recall(const char *json, sbx__node **keys, sbx_error *err);

/* Loads a config (LoongSage data_source/data_sources shape or NexAU sandbox_config). NULL path
 * and text give the built-in default (type local). SBX_E_CONFIG with FILE:LINE on errors. */
int sbx__config_load(const char *path, const char *text, sbx__config **out, sbx_error *err);
void sbx__config_free(sbx__config *cfg);
/* By name, or by decimal index; NULL: the default block. SBX_E_CONFIG lists the names. */
int sbx__config_find(const sbx__config *cfg, const char *name_or_index,
		     const sbx__data_source **out, sbx_error *err);
/* Builds the plugin config for `ds` using `desc`'s declared keys: registry defaults overlaid
 * by the data source's keys; an undeclared key is SBX_E_CONFIG naming key, file, line and the
 * valid keys; a value of the wrong type names the type wanted. */
int sbx__config_for_plugin(const sbx__data_source *ds, const sbx__node *registry_defaults,
			   const sbx_plugin_desc *desc, struct sbx_config **out, sbx_error *err);

/* ---- spool (spool.c): one exec's output */
typedef struct sbx__spool sbx__spool;

/* Creates call_dir (mode 0700, parents as needed) with command.txt holding `command` and empty
 * stdout.txt / stderr.txt. */
int sbx__spool_new(const char *call_dir, const char *command, const sbx__policy *policy,
		   sbx__spool **out, sbx_error *err);
/* An sbx_output_fn: appends to the stream's file (up to output_max_bytes) and keeps the
 * bounded head and tail the display copy needs. Memory stays constant. */
int sbx__spool_write(void *spool, uint32_t stream, const void *data, size_t len);
/* Closes the files and fills the text, length, truncation and path fields of res. */
int sbx__spool_finish(sbx__spool *spool, sbx_exec_result *res, sbx_error *err);
void sbx__spool_free(sbx__spool *spool);

/* ---- output gates (outgate.c): the output callback of one execute, safe to call late */
typedef struct sbx__outgate sbx__outgate;

/* Opens a gate forwarding to fn(ctx, ...) for one call of `alias`. SBX_E_NOMEM. */
int sbx__outgate_open(sbx_output_fn fn, void *ctx, const char *alias, sbx__outgate **out);
/* The sbx_output_fn and the context to put in the request: a token, not a pointer. */
int sbx__outgate_output(void *ctx, uint32_t stream, const void *data, size_t len);
void *sbx__outgate_ctx(const sbx__outgate *g);
/* Closes and frees the gate once no callback is inside the sink; every later callback with
 * its token returns SBX_E_CANCELLED without touching anything. NULL is a no-op. */
void sbx__outgate_close(sbx__outgate *g);

/* ---- ids (id.c) */
/* Splits "alias:backend" into alias (copied into alias_buf) and a pointer to the backend part.
 * SBX_E_BAD_ID with a message quoting the id and the expected shape. */
int sbx__id_split(const char *id, char *alias_buf, size_t alias_cap, const char **backend,
		  sbx_error *err);

/* ---- quiet runs (host.c) for jobs.c: a command whose output stays in memory */
typedef struct sbx__run_spec {
	const char *const *argv; /* NULL-terminated */
	const char *cwd;         /* NULL: the sandbox's work dir */
	const sbx_kv *env;
	uint32_t n_env;
	uint32_t has_stdin;
	const void *stdin_data;
	size_t stdin_len;
	const char *user;
	uint64_t timeout_ms;
} sbx__run_spec;

typedef struct sbx__capture {
	char *out; /* stdout, NUL-terminated, from sbx__alloc (free with sbx__free) */
	size_t out_len;
	size_t out_cap; /* stdout past this many bytes is dropped (out_over set) */
	int out_over;
	char err[512]; /* the start of stderr */
	size_t err_len;
} sbx__capture;

/* Runs spec in sandbox `id` through its plugin's execute (resuming a paused sandbox as
 * sbx_exec would), keeping stdout in cap->out and the start of stderr. SBX_OK with *oc
 * filled when the command ran, whatever its exit status. */
int sbx__host_run(sbx_host *h, const char *id, const sbx__run_spec *spec, sbx__capture *cap,
		  sbx_exec_outcome *oc, sbx_error *err);
/* The policy of the data source that `id` routes to. */
int sbx__host_policy(sbx_host *h, const char *id, const sbx__policy **out, sbx_error *err);

/* ---- jobs (jobs.c) */
/* Starts opts as a background job of sandbox id; its id goes into job_id[SBX_JOB_ID_MAX]. */
int sbx__job_start(sbx_host *h, const char *id, const sbx_exec_opts *opts, char *job_id,
		   sbx_error *err);
/* Forgets the job rows of a destroyed sandbox. */
void sbx__jobs_forget(sbx_host *h, const char *id);

#endif

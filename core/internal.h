/* Module interfaces private to libsbx. Nothing here is installed.
 *
 * Modules: alloc.c, error.c, log.c, dirs.c, yaml.c (YAML -> node tree), registry.c (alias ->
 * .so), loader.c (dlopen and the handshake; the only user of <dlfcn.h>), host_api.c (the
 * services table plugins get), config.c (data sources, policies, plugin configs), recall.c
 * (recorded configs), spool.c (per-call output files and display copies), outgate.c
 * (late-safe output callbacks), id.c, jobs.c. The host object and its routing are in
 * host_internal.h; the ledger in ledger.h. */
#ifndef SBX_INTERNAL_H
#define SBX_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sbx/host.h"
#include "sbx/plugin.h"

/* ---- allocation (alloc.c): every allocation goes through these, so a test can fail them */
void *sbx__alloc(size_t size);
void *sbx__calloc(size_t n, size_t size);
void *sbx__realloc(void *ptr, size_t size);
void sbx__free(void *ptr);
char *sbx__strdup(const char *s);
char *sbx__strndup(const char *s, size_t n);
/* printf into a new string; NULL on allocation failure. */
char *sbx__asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- fork (fork.c): how many forks this process is from the one that loaded libsbx, and
 * what each module resets in a forked child (its process-wide locks, held maybe by a thread
 * the child does not have) */
unsigned sbx__fork_generation(void);
void sbx__host_api_fork_child(void);
void sbx__loader_fork_child(void);
void sbx__outgate_fork_child(void);
void sbx__proxy_fork_child(void);

/* ---- the open-files limit (nofile.c) */
/* Raises this process's soft RLIMIT_NOFILE to its hard limit, once (not with
 * SBX_KEEP_NOFILE=1). */
void sbx__nofile_raise(void);
/* The soft limit commands start with: what the process had before the raise (0: none). */
uint64_t sbx__nofile_command(void);
/* In a runner: its host's answer (the runner's command line). */
void sbx__nofile_set_command(uint64_t soft);

/* ---- errors (error.c) */
/* Fills err (if not NULL) with code and the formatted message, returns code. */
int sbx__set_error(sbx_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int sbx__set_errorv(sbx_error *err, int code, const char *fmt, va_list ap);
/* Puts "prefix: " in front of err's message (keeps the code). */
void sbx__error_prefix(sbx_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- caller input (input.c) */
/* Checks n key/value pairs given to op ("exec", "create"): no NULL, no empty key, and with
 * env no '=' in a key. SBX_E_INVAL naming the pair. */
int sbx__check_kv(const sbx_kv *kv, uint32_t n, const char *op, const char *what, int env,
		  sbx_error *err);

/* ---- escapes (escape.c) */
/* Copies in to out (cap bytes, always terminated) with control characters, C1 controls and
 * bytes that are not UTF-8 written as \e, \n, \r, \t or \xNN; cut at a whole character or
 * escape. Returns the length written. */
size_t sbx__escape_controls(const char *in, char *out, size_t cap);
/* SBX_E_NOMEM with "WHAT: out of memory"; returns SBX_E_NOMEM. */
int sbx__nomem(sbx_error *err, const char *what);
/* A plugin op of `alias` returned rc with perr: copies perr into err, supplying a message
 * when the plugin left none. A status that is not an sbx failure status (negative, garbage)
 * becomes SBX_E_BACKEND naming the plugin. Returns the status put in err. */
int sbx__plugin_error(sbx_error *err, const sbx_error *perr, int rc, const char *alias,
		      const char *op);

/* ---- embedder structs (structs.c): read zero-extended, written up to the caller's size */
/* Copies the caller's struct src (NULL: none, *dst all zero) into dst (size bytes): an older
 * struct (smaller, but at least min_size: the size of its ABI 1.0 layout) reads its missing
 * members as zero; a newer one is refused (SBX_E_INVAL naming `what`) only when it sets a
 * member past `size`. */
int sbx__struct_in(const void *src, void *dst, size_t size, size_t min_size, const char *what,
		   sbx_error *err);
/* SBX_E_INVAL naming `what` when the caller's output struct is NULL or smaller than
 * min_size. */
int sbx__struct_out_check(const void *dst, size_t min_size, const char *what, sbx_error *err);
/* Copies the host's full struct src (size bytes) into the caller's dst: as many bytes as
 * dst's struct_size holds, keeping dst's header. */
void sbx__struct_out(void *dst, const void *src, size_t size);
/* The smallest struct_size of `type`'s ABI 1.0 layout, when `member` came later. */
#define SBX__SIZE_1_0(type, member) offsetof(type, member)

/* ---- folders (dirs.c) */
/* mkdir -p, mode 0700 for the folders it makes. 0 or an errno value. */
int sbx__mkdirs(const char *path);
/* rm -r without following symlinks, best effort. */
void sbx__remove_tree(const char *path);

/* ---- logging (log.c): structured lines on stderr, level from $SBX_LOG (error|warn|info|debug) */
void sbx__log(int level, const char *subject, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sbx__logv(int level, const char *subject, const char *fmt, va_list ap);

/* ---- files the host reads (regfile.c) */
/* "a FIFO", "a directory", ... for an st_mode. */
const char *sbx__file_kind(unsigned mode);
/* Opens path for reading, refusing anything but a regular file without blocking on it.
 * SBX_E_IO "PATH: cannot open: REASON" or "PATH: is a FIFO, not a regular file". */
int sbx__open_regular(const char *path, FILE **out, sbx_error *err);

/* ---- name sets (nameset.c): duplicate checks in linear time */
typedef struct sbx__nameset {
	const char **names; /* borrowed: each must outlive the set */
	size_t *values;
	size_t cap, n;
} sbx__nameset;

/* Adds name with value: 0 when added, 1 when name was there already (*found, if not NULL,
 * gets its value; the set is unchanged), -1 out of memory. A zeroed set is empty. */
int sbx__nameset_add(sbx__nameset *s, const char *name, size_t value, size_t *found);
/* 1 and *value (if not NULL) when name is in the set, else 0. */
int sbx__nameset_get(const sbx__nameset *s, const char *name, size_t *value);
/* Frees the table (not the names) and leaves the set empty. */
void sbx__nameset_clear(sbx__nameset *s);

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

/* ---- typed scalars (scalar.c): how nulls, integers, numbers and booleans are spelt */
/* An unquoted empty, ~ or null scalar: YAML's null, which config treats as an absent key. */
int sbx__scalar_null(const sbx__node *v);
/* SBX_E_CONFIG "FILE:LINE: 'KEY' must be WANT, not a mapping/list" unless v is a scalar. */
int sbx__scalar_kind(const sbx__node *v, const char *key, const char *want, sbx_error *err);
/* v as a decimal integer in lo..hi, a finite number in lo..hi, or a boolean (true/false,
 * yes/no, on/off, 1/0, any case); unquoted only. SBX_E_CONFIG naming file, line and key, with
 * the value unless `secret`. */
int sbx__scalar_int(const sbx__node *v, const char *key, long long lo, long long hi, int secret,
		    long long *out, sbx_error *err);
int sbx__scalar_float(const sbx__node *v, const char *key, double lo, double hi, int secret,
		      double *out, sbx_error *err);
int sbx__scalar_bool(const sbx__node *v, const char *key, int secret, int *out, sbx_error *err);

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
/* The entry of alias (a binary search: entries are sorted), or NULL. */
const sbx__reg_entry *sbx__registry_find(const sbx__registry *reg, const char *alias);
/* "a, b, c" of all aliases (for "unknown alias" messages). */
char *sbx__registry_alias_list(const sbx__registry *reg);

/* ---- trust in plugin files (trust.c) */
/* SBX_OK when path resolves to a file that only root or this user owns and can write, in
 * folders (up to /) that only they can write (a sticky folder may hold their entries); its
 * resolved path goes into real (PATH_MAX bytes). SBX_E_ABI naming what is writable, or
 * SBX_E_IO. */
int sbx__plugin_trusted(const char *path, char *real, size_t cap, sbx_error *err);

/* ---- loader (loader.c) */
typedef struct sbx__module sbx__module;

/* dlopens `path` (RTLD_NOW|RTLD_LOCAL), checks the entry, calls it with the services table
 * `api` and checks every registered descriptor (ABI major equal, minor <= host's, size,
 * required ops, alias listed in `expected`, no duplicate). On any failure nothing stays
 * loaded and err says why. */
int sbx__module_load(const char *path, const sbx_host_api *api, const char *const *expected,
		     size_t n_expected, sbx__module **out, sbx_error *err);
size_t sbx__module_count(const sbx__module *mod);
/* Host-owned copy of descriptor i, zero-extended to the host's sizeof(sbx_plugin_desc). */
const sbx_plugin_desc *sbx__module_desc(const sbx__module *mod, size_t i);
/* The descriptor registered under `alias`, or NULL. A module may lack an alias the registry
 * lists for its file; the caller reports that. */
const sbx_plugin_desc *sbx__module_find(const sbx__module *mod, const char *alias);
void sbx__module_unload(sbx__module *mod);

/* ---- plugins in a runner process (runner_conf.c, proxy.c, link.c; the runner: core/runner/) */
/* Parses a registry entry's `runner` value (`process`, `inproc`, or a map of mode, grace,
 * timeout, max_crashes, window) into opts, which holds the defaults when v is NULL.
 * SBX_E_REGISTRY naming file and line. */
int sbx__runner_opts_parse(const sbx__node *v, const char *file, const char *alias,
			   sbx__runner_opts *opts, sbx_error *err);
/* Opens the plugin file of registry entry ent the way the entry says: in this process
 * (sbx__module_load) or in a runner process whose descriptors are proxies; state_dir is the
 * host's plugins folder, what state_dir() means in the runner. Same contract as
 * sbx__module_load. */
int sbx__plugin_open(const sbx__reg_entry *ent, const char *state_dir, const char *const *expected,
		     size_t n_expected, sbx__module **out, sbx_error *err);
/* For a proxy descriptor marked faulty after repeated runner crashes: SBX_PLUGIN_FAULTY and
 * the reason (valid until the module is unloaded); otherwise leaves both as they are. */
void sbx__proxy_health(const sbx_plugin_desc *desc, uint32_t *state, const char **reason);

/* ---- host services table (host_api.c) */
const sbx_host_api *sbx__host_api(void);
/* The folder state_dir() names for ABI 1.0 plugins: the latest host's plugins folder. */
void sbx__set_state_dir(const char *dir);

/* The plugin-facing config object: one data source's merged keys for one alias. */
/* A config value converted once, when the config was made, to its key's declared type. */
typedef struct sbx__value {
	uint32_t type; /* SBX_KEY_*; 0: not converted (null, or declared SBX_KEY_ANY) */
	int b;
	int64_t i;
	double d;
} sbx__value;

struct sbx_config {
	sbx__node *map;        /* MAP: registry defaults overlaid by the data source's keys */
	char **json;           /* cache of config_json results, one per key in map order */
	const char *state_dir; /* the host's plugins folder (borrowed: the host outlives it) */
	sbx__value *values;    /* one per key in map order; NULL when no key was declared */
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
	/* Caps held across every process sharing the state dir (caps.c): */
	uint64_t max_starting;   /* creates in flight; 0 = unlimited */
	double create_rate;      /* creates per second; 0 = unlimited */
	uint64_t create_burst;   /* creates at once under create_rate; 0 = 1 */
	uint64_t max_file_bytes; /* largest file a read returns (plugins get it in their config) */
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
/* The same config made again from its map (as sbx-runner receives it): each key checked and
 * converted against desc's declarations. */
int sbx__config_from_map(const sbx__node *map, const sbx_plugin_desc *desc, struct sbx_config **out,
			 sbx_error *err);

/* ---- spool (spool.c): one exec's output, from its call directory to its result */
typedef struct sbx__spool sbx__spool;

/* Opens the spool of one call in sandbox `id`: names its call directory
 * <state_dir>/calls/<id, percent-encoded>/<time>-<pid>-<n>, makes it (mode 0700, parents as
 * needed) with command.txt (the shell string, or argv shell-quoted) and empty stdout.txt and
 * stderr.txt. SBX_E_IO (nothing left behind) or SBX_E_NOMEM. */
int sbx__spool_open(const char *state_dir, const char *id, const char *shell,
		    const char *const *argv, const sbx__policy *policy, sbx__spool **out,
		    sbx_error *err);
/* An sbx_output_fn: appends to the stream's file (up to output_max_bytes) and keeps the
 * bounded head and tail the display copy needs. Memory stays constant. */
int sbx__spool_write(void *spool, uint32_t stream, const void *data, size_t len);
/* Ends the spool of a command that ran: closes the files and builds the whole result
 * (display copies, lengths, truncation, paths, the outcome and duration) into *out. On
 * failure (SBX_E_IO storing output, SBX_E_NOMEM) it ends as sbx__spool_fail does. */
int sbx__spool_finish(sbx__spool *sp, const sbx_exec_outcome *oc, double duration,
		      sbx_exec_result **out, sbx_error *err);
/* Ends the spool of a call that failed with rc (err says why): removes the call directory
 * (and the sandbox's folder of them once empty). Returns rc, or SBX_E_IO with the spool's
 * message in err when storing the output had failed (a full disk explains the rest). */
int sbx__spool_fail(sbx__spool *sp, int rc, sbx_error *err);
/* Copies up to cap - 1 of the first bytes the command wrote to stream (SBX_STREAM_*) into
 * buf, NUL-terminated; their number. */
size_t sbx__spool_head(sbx__spool *sp, uint32_t stream, char *buf, size_t cap);
/* Removes every call directory of sandbox `id` (it was destroyed). */
void sbx__spool_forget(const char *state_dir, const char *id);
/* The result of a background exec: job_id set, empty display copies. */
int sbx__spool_job_result(const char *job_id, sbx_exec_result **out, sbx_error *err);

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
/* n_bytes random bytes as 2 * n_bytes lowercase hex digits and a NUL into hex: 0, or the
 * errno of getrandom when the kernel has none to give. */
int sbx__random_hex(char *hex, size_t n_bytes);

/* ---- jobs (jobs.c) */
/* Starts opts as a background job of sandbox id; its id goes into job_id[SBX_JOB_ID_MAX]. */
int sbx__job_start(sbx_host *h, const char *id, const sbx_exec_opts *opts, char *job_id,
		   sbx_error *err);

#endif

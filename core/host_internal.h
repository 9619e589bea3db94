/* The sbx_host layout and what the files of the host share. Nothing here is installed.
 *
 * The host is split by job, one file each, listed from the bottom layer up (a file calls
 * only files listed before it; tests/core/layers checks that no two call each other):
 *   host_ledger.c  the ledger handle and this process as ledger rows name it
 *   plugins.c      one slot per registry alias: load on first use, faulty aliases, plugin info
 *   route.c        plugin states (one init per data source and alias), the routing of an id
 *   call.c         one plugin call: lock when the plugin is not thread-safe, map its errors
 *   alias.c        calls on an alias: list_by_label, backend info, data source checks
 *   files.c        the file ops
 *   pause.c        pause, resume and status
 *   run.c          the one call of execute, resuming a paused sandbox under auto_resume;
 *                  quiet runs (output kept in memory) for jobs.c, which comes next
 *   create.c       sbx_create and sbx_destroy, with their ledger rows
 *   exec.c         sbx_exec
 *   host.c         the host object: sbx_host_new and sbx_host_free, options, state dir
 * session.c and gc.c build on the public functions of these.
 *
 * Locking: host->lock guards the tables and is held while a plugin loads or inits (plugin.h:
 * init is never concurrent with another init); plugin ops run outside it, under the alias's
 * call lock when the plugin is not SBX_PLUGIN_THREAD_SAFE. States live until sbx_host_free,
 * so a routed pointer stays valid without reference counts. */
#ifndef SBX_HOST_INTERNAL_H
#define SBX_HOST_INTERNAL_H

#include "internal.h"
#include "ledger.h"

/* Longest alias, with its NUL. */
#define SBX__ALIAS_MAX 128

/* One alias of the registry. */
typedef struct sbx__slot {
	const sbx__reg_entry *ent;
	uint32_t state; /* SBX_PLUGIN_* */
	int fault_code;
	char *reason;
	const sbx_plugin_desc *desc; /* host-owned copy inside a module */
	pthread_mutex_t call_lock;
} sbx__slot;

/* One init of an alias: the plugin state serving one data source (or a recorded config). */
typedef struct sbx__state {
	size_t slot;
	const sbx__data_source *ds; /* a config block, or &own */
	sbx__data_source own;       /* for an alias no data source names */
	int has_own;
	void *state;
	struct sbx_config *cfg;
	int inited;
	char *recorded; /* made from a ledger row's recorded config (that JSON), else NULL */
} sbx__state;

/* A sandbox this host created, and the state that created it. */
typedef struct sbx__known_id {
	char *id;
	sbx__state *ps;
} sbx__known_id;

struct sbx_host {
	pthread_mutex_t lock;
	sbx__registry *reg;
	sbx__config *cfg;
	char *state_dir;
	char *plugins_dir; /* $state_dir/plugins: the plugins' private files */
	char *run_id;
	char owner[320];
	char hostname[128];
	int64_t self_start;       /* start time of this process, for the ledger's owner check */
	sbx__ledger *ledger;      /* opened on first use */
	int64_t ledger_retention; /* seconds finished rows are kept (gc prunes); < 0: forever */
	char ledger_id[17];       /* label sbx.ledger: which ledger knows the sandbox */
	sbx__slot *slots;
	size_t n_slots;
	sbx__module **mods;
	size_t n_mods;
	sbx__state **states;
	size_t n_states;
	sbx__known_id *ids;
	size_t n_ids;
	uint64_t seq;
	long pid;                 /* the process that made it */
	unsigned fork_generation; /* sbx__fork_generation() then */
};

/* SBX_OK, or SBX_E_INVAL in err when this process is a fork of the one that made h: a host
 * cannot cross a fork (fork.c). */
int sbx__host_forked(const sbx_host *h, sbx_error *err);

/* What a call on one sandbox id goes to. */
typedef struct sbx__route {
	sbx__slot *slot;
	sbx__state *ps;
	const char *backend;
	char alias[SBX__ALIAS_MAX];
} sbx__route;

/* 1 when the route's plugin sets descriptor flag `flag`, which ABI 1.`since` defined: a
 * plugin built against older headers set that bit by accident, if at all. */
static inline int sbx__plugin_flag(const sbx__route *r, uint32_t flag, uint16_t since)
{
	const sbx_plugin_desc *d = r->slot->desc;
	return d->abi_minor >= since && (d->flags & flag);
}

/* ---- host_ledger.c */
/* The host's ledger ($state_dir/ledger.db), opened on first use. Thread-safe. */
int sbx__host_ledger(sbx_host *h, sbx__ledger **out, sbx_error *err);
/* This machine's name as recorded in ledger rows. */
const char *sbx__host_name(const sbx_host *h);
/* Value of the sbx.ledger label this host puts on its sandboxes (host and state dir). */
const char *sbx__host_ledger_id(const sbx_host *h);
/* This process as a ledger actor. */
sbx__ledger_actor sbx__host_actor(const sbx_host *h);
/* Records the state of id's row, best effort (a failure is logged). */
void sbx__host_ledger_state(sbx_host *h, const char *id, const char *state);

/* Seconds a finished ledger row (gone, failed) is kept when the host options say nothing. */
#define SBX__LEDGER_RETENTION_DEFAULT (7 * 24 * 3600)

/* ---- plugins.c */
/* One slot per registry alias, unloaded; and their release. */
int sbx__slots_new(sbx_host *h, sbx_error *err);
void sbx__slots_free(sbx_host *h);
/* The slot of alias; SBX_E_UNKNOWN_ALIAS in err (listing the known ones) and NULL if none. */
sbx__slot *sbx__slot_find(sbx_host *h, const char *alias, sbx_error *err);
/* Loads the plugin of slot s and of every alias sharing its file. Called with h->lock held. */
int sbx__slot_load_locked(sbx_host *h, sbx__slot *s, sbx_error *err);

/* ---- route.c */
/* Fills r for a call on `alias` rather than on a sandbox: the state serving data source ds
 * (NULL: the routing default of the alias), initialised when needed. */
int sbx__route_alias(sbx_host *h, const char *alias, const sbx__data_source *ds, sbx__route *r,
		     sbx_error *err);
/* Calls fini (when init succeeded) and frees ps. */
void sbx__state_free(sbx_host *h, sbx__state *ps);
/* Fills r for the sandbox id: its alias's slot and the state that serves it. */
int sbx__route_id(sbx_host *h, const char *id, sbx__route *r, sbx_error *err);
/* Notes that this host created id from ps. SBX_E_NOMEM. */
int sbx__route_remember(sbx_host *h, const char *id, sbx__state *ps);
/* Drops the note of sbx__route_remember, if any. */
void sbx__route_forget(sbx_host *h, const char *id);
/* The policy of the data source that `id` routes to. */
int sbx__host_policy(sbx_host *h, const char *id, const sbx__policy **out, sbx_error *err);

/* ---- call.c: route -> lock -> call -> unlock -> error mapping, written once */
/* One op of the plugin descriptor. */
typedef struct sbx__op {
	const char *name; /* in messages: "read_file" */
	size_t member;    /* offsetof(sbx_plugin_desc, <op>): NULL there is SBX_E_UNSUPPORTED */
	/* Calls the plugin with args, and checks what it handed back (out-of-range values are
	 * SBX_E_BACKEND in perr). */
	int (*call)(const sbx__route *r, void *args, sbx_error *perr);
} sbx__op;

/* Calls op on the routed sandbox or alias: SBX_E_UNSUPPORTED when the plugin lacks it, the
 * alias's call lock around it when the plugin is not SBX_PLUGIN_THREAD_SAFE, its failure
 * mapped by sbx__plugin_error. */
int sbx__call(const sbx__route *r, const sbx__op *op, void *args, sbx_error *err);
/* sbx__route_id, then sbx__call. */
int sbx__call_id(sbx_host *h, const char *id, const sbx__op *op, void *args, sbx_error *err);

/* ---- alias.c */
/* Runs alias's list_by_label (SBX_E_UNSUPPORTED when the plugin has none). */
int sbx__host_list_by_label(sbx_host *h, const char *alias, const char *key, const char *value,
			    sbx_id_fn fn, void *ctx, sbx_error *err);

/* ---- pause.c */
/* Resumes the routed sandbox id and records it running. */
int sbx__resume(sbx_host *h, const sbx__route *r, const char *id, sbx_error *err);

/* ---- run.c: the one call of a plugin's execute; quiet runs for jobs.c */
/* Sends req to the routed sandbox id, its output to sink(ctx, ...) through an output gate,
 * *oc the outcome (checked). SBX_E_PAUSED from the plugin resumes the sandbox and sends req
 * once more when the policy has auto_resume, else fails naming the fix. `quiet` names the
 * call "job" in messages instead of "exec". */
int sbx__execute(sbx_host *h, const sbx__route *r, const char *id, int quiet, sbx_exec_request *req,
		 sbx_output_fn sink, void *ctx, sbx_exec_outcome *oc, sbx_error *err);

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

/* The argv of a script of the host's that runs a caller's command: the n_head words of head
 * (e.g. "sh", "-c", SCRIPT, $0 and its arguments), then the command, the shell string as one
 * word or every word of argv. NULL-terminated, from sbx__alloc; NULL when out of memory. */
const char **sbx__script_argv(const char *const *head, size_t n_head, const char *shell,
			      const char *const *argv);

#endif

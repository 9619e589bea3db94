/* child.c: what a command's own process does between its birth and its exec, shared by the
 * plugin (a child cloned from the host) and sbx-local-exec (the subreaper helper, a program
 * of its own). Everything here is async-signal-safe: in the plugin it runs in a child that
 * borrows the host's memory. */
#ifndef SBX_LOCAL_CHILD_H
#define SBX_LOCAL_CHILD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where a child's set-up failed, reported to the parent with the errno. */
#define LOCAL_STAGE_SETUP  1
#define LOCAL_STAGE_CGROUP 2
#define LOCAL_STAGE_CHDIR  3
#define LOCAL_STAGE_EXEC   4
#define LOCAL_STAGE_FORK   5
#define LOCAL_STAGE_JOIN   6
#define LOCAL_STAGE_STDOUT 7 /* opening stdout_path */
#define LOCAL_STAGE_STDERR 8
#define LOCAL_STAGE_HELPER 9 /* the exec of sbx-local-exec itself */

typedef struct local_child_report {
	int stage;
	int err;
} local_child_report;

/* What the subreaper helper writes on its status pipe once its command exited. */
typedef struct local_exit_report {
	int status;    /* the command's wait status */
	int leftovers; /* 0: nothing of the command's tree was left at its exit */
} local_exit_report;

/* What an exec needs to join a sandbox of the isolated level: prepared by the parent, used
 * by the child. */
#define LOCAL_JOIN_PROCS 3
typedef struct local_join {
	int active;                  /* 0: the plain level, nothing to join */
	int via_helper;              /* the exec's helper enters (local_join_helper) */
	int pidfd;                   /* the sandbox's init */
	int ns_flags;                /* namespaces the child enters through pidfd */
	int helper_flags;            /* namespaces the helper enters, its children's PID one too */
	int procs[LOCAL_JOIN_PROCS]; /* limit cgroups' cgroup.procs to join (-1 none) */
	int cap_last;
	int self_pidns;
	int64_t oom_before; /* the memory cgroup's OOM kill count before the exec */
	char oom_file[600];
	char dir[1200];  /* the sandbox's folder */
	char root[1100]; /* its lower tree (rootfs: DIR, image), "" for rootfs: host */
} local_join;

/* One command's start. */
typedef struct local_plan {
	char *const *argv;
	char *const *envp;
	const char *cwd;
	int cwd_fd;       /* the cwd opened beneath the work dir, or -1: chdir(cwd) */
	const char *path; /* PATH for the search of argv[0] */
	int in_fd, out_fd, err_fd;
	int report_fd;                   /* where a failed set-up is reported, -1: into `rep` */
	local_child_report *rep;         /* the caller's memory (shared until exec) */
	int cg_fd;                       /* the exec's cgroup folder, -1 for none */
	int placed;                      /* 1: the child was born in that cgroup */
	int ran;                         /* 1: the child ran (set by the child first thing) */
	int status_fd, control_fd;       /* subreaper helper's pipes */
	const local_join *join;          /* the isolated level's namespaces (ns.c) */
	const char *out_path, *err_path; /* stdout_path, stderr_path, or NULL */
	int signals_default;             /* 1: every signal is at its default, none blocked */
} local_plan;

/* Reports a failed set-up (to report_fd, else into *rep) and exits with 127. Not declared
 * noreturn: ASan would call its no-return hook first, on a child stack it does not know. */
void local_child_fail(const local_plan *p, int stage, int err);
/* Every signal back to its default disposition, none blocked. */
void local_child_reset_signals(void);
/* Closes every descriptor from 3 up except the n_keep in keep (sorted in place). */
void local_child_close_others(int *keep, size_t n_keep);
/* The soft open-files limit commands get (the host API's command_nofile, read at init; 0:
 * the inherited one), and, in a child, setting it back just before the exec: libsbx raised
 * the host's. Last, because the child's own descriptors may sit above the limit until it
 * has closed the others. */
void local_child_set_nofile(uint64_t soft);
void local_child_restore_nofile(void);
/* Decimal digits of v into buf (no terminator); returns their count. */
size_t local_child_fmt_long(char *buf, long v);
/* The command itself: session, cgroup, sandbox, descriptors, cwd, exec. Never returns. */
void local_child_run(const local_plan *p);
/* Enters the namespaces (unless the helper did) and the limit cgroups, and drops every
 * capability. Returns 0 or an errno. */
int local_join_child(const local_join *j);

#endif

/* Background jobs (host.h "background jobs"), the same on every backend.
 *
 * A job is started through the plugin's plain execute: a short shell script makes the job's
 * folder .sbx/jobs/<hex> beneath the sandbox's work dir and starts a supervisor in a session
 * of its own, detached from everything of the caller (stdin, stdout and stderr are /dev/null),
 * then returns. The supervisor starts the command with `setsid`, so the command leads its own
 * process group, with stdin from /dev/null or the saved bytes and stdout/stderr to files; it
 * waits for it and writes its exit status. The supervisor is thus no child of the caller and
 * records the status when nobody waits; whatever starts, inspects, waits for or kills a job
 * later is another short script run the same way, from this or any other process.
 *
 * Files of a job (all plain text, one value each): cmd (the command as given), started and
 * ended (the sandbox's clock, seconds with fraction where `date` has %N), sup (the
 * supervisor's pid), pid (the command's pid and process group), stdout, stderr, stdin (given
 * bytes), exit (the status as the shell reports it, 128+N for signal N), killed (the signal
 * sbx_job_kill sent). A job with an exit file is over; one without whose supervisor is gone
 * is lost; otherwise it runs.
 *
 * The scripts use only POSIX sh, `date`, `stat -c`, `tail`, `head` and `grep`, which Debian,
 * Alpine and busybox images have; arguments are passed as argv, never spliced into the text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host_internal.h"

#define HEX_LEN          12
#define CTL_TIMEOUT_MS   60000ull
#define WAIT_CHUNK_S     10.0
#define READ_DEFAULT_MAX (64u << 20)

/* argv: SUP J KIND CWD HASIN CMD ARGV... ; prints "STARTED SUPPID". */
static const char start_script[] =
    "sup=$1 j=$2 kind=$3 cwd=$4 hasin=$5 cmd=$6; shift 6\n"
    "mkdir \".sbx/jobs/$j\" 2>/dev/null || { mkdir -p .sbx/jobs && mkdir \".sbx/jobs/$j\"; } || "
    "exit 90\n"
    "d=$PWD/.sbx/jobs/$j\n"
    "printf '%s\\n' \"$cmd\" > \"$d/cmd\"\n"
    "in=/dev/null\n"
    "if [ \"$hasin\" = 1 ]; then cat > \"$d/stdin\" || exit 91; in=$d/stdin; fi\n"
    "t=$(date +%s.%N 2>/dev/null); case $t in *[!0-9.]*|'') t=$(date +%s);; esac\n"
    "echo \"$t\" > \"$d/started\"\n"
    "if [ \"$kind\" = shell ]; then\n"
    "  if command -v bash >/dev/null 2>&1; then set -- bash -c \"$1\"; else set -- sh -c \"$1\"; "
    "fi\n"
    "fi\n"
    "s=; command -v setsid >/dev/null 2>&1 && s=setsid\n"
    "$s sh -c \"$sup\" sbx-job-sup \"$d\" \"$in\" \"$cwd\" \"$j\" \"$s\" \"$@\" "
    "</dev/null >/dev/null 2>&1 &\n"
    "echo $! > \"$d/sup\"\n"
    "echo \"$t $!\"\n";

/* The supervisor. argv: DIR IN CWD J SETSID ARGV... */
static const char sup_script[] =
    "d=$1 in=$2 cwd=$3 j=$4 s=$5; shift 5\n"
    "stamp() { t=$(date +%s.%N 2>/dev/null); case $t in *[!0-9.]*|'') t=$(date +%s);; esac; }\n"
    "if [ -n \"$cwd\" ] && ! cd \"$cwd\" 2>\"$d/stderr\"; then\n"
    "  : > \"$d/stdout\"; echo 0 > \"$d/pid\"; stamp; echo \"$t\" > \"$d/ended\"; "
    "echo 126 > \"$d/exit\"; exit 0\n"
    "fi\n"
    "SBX_JOB=$j $s \"$@\" < \"$in\" > \"$d/stdout\" 2> \"$d/stderr\" &\n"
    "p=$!\n"
    "echo $p > \"$d/pid\"\n"
    "wait $p; rc=$?\n"
    "stamp; echo \"$t\" > \"$d/ended\"\n"
    "echo $rc > \"$d/exit\"\n";

/* Control. argv: MODE ARGS... Exit 3: no such job. Status lines:
 *   now T
 *   job J PID ALIVE RC KILLED STARTED ENDED OUT ERR CMD   (RC, KILLED, ENDED "-" when none)
 *   none J
 * The job line is written with printf: dash's echo would expand a backslash in CMD. */
static const char ctl_script[] =
    "m=$1; shift\n"
    "cd .sbx/jobs 2>/dev/null || { [ \"$m\" = list ] && exit 0; exit 3; }\n"
    "st() {\n"
    "  j=$1\n"
    "  if [ ! -d \"$j\" ]; then echo \"none $j\"; return; fi\n"
    "  p=0 s= rc=- k=- t0=0 t1=- c= o=0 e=0 a=0\n"
    "  [ -s \"$j/sup\" ] && read -r s < \"$j/sup\"\n"
    "  [ -n \"$s\" ] && kill -0 \"$s\" 2>/dev/null && a=1\n"
    "  [ -s \"$j/exit\" ] && read -r rc < \"$j/exit\"\n"
    "  [ -s \"$j/pid\" ] && read -r p < \"$j/pid\"\n"
    "  [ -s \"$j/killed\" ] && read -r k < \"$j/killed\"\n"
    "  [ -s \"$j/started\" ] && read -r t0 < \"$j/started\"\n"
    "  [ -s \"$j/ended\" ] && read -r t1 < \"$j/ended\"\n"
    "  [ -s \"$j/cmd\" ] && read -r c < \"$j/cmd\"\n"
    "  if [ -f \"$j/stderr\" ]; then set -- $(stat -c %s \"$j/stdout\" \"$j/stderr\" "
    "2>/dev/null); o=${1:-0} e=${2:-0}; fi\n"
    "  printf '%s\\n' \"job $j $p $a $rc $k $t0 $t1 $o $e $c\"\n"
    "}\n"
    "now() { t=$(date +%s.%N 2>/dev/null); case $t in *[!0-9.]*|'') t=$(date +%s);; esac; "
    "echo \"now $t\"; }\n"
    "case $m in\n"
    "status) now; for j in \"$@\"; do st \"$j\"; done;;\n"
    "list) now; for j in *; do [ -d \"$j\" ] && st \"$j\"; done; exit 0;;\n"
    "wait)\n"
    "  j=$1 n=$2 i=0\n"
    "  [ -d \"$j\" ] || exit 3\n"
    "  while [ ! -s \"$j/exit\" ] && [ $i -lt $n ]; do\n"
    "    s=; [ -s \"$j/sup\" ] && read -r s < \"$j/sup\"\n"
    "    [ -n \"$s\" ] && kill -0 \"$s\" 2>/dev/null || break\n"
    "    sleep 0.1; i=$((i + 1))\n"
    "  done\n"
    "  now; st \"$j\";;\n"
    "kill)\n"
    "  j=$1 g=$2\n"
    "  [ -d \"$j\" ] || exit 3\n"
    "  [ -s \"$j/exit\" ] && exit 0\n"
    "  echo \"$g\" > \"$j/killed\"\n"
    "  i=0; while [ ! -s \"$j/pid\" ] && [ $i -lt 100 ]; do sleep 0.02; i=$((i + 1)); done\n"
    "  p=0; [ -s \"$j/pid\" ] && read -r p < \"$j/pid\"\n"
    "  if [ \"$p\" -gt 0 ] 2>/dev/null; then kill -$g -$p 2>/dev/null; kill -$g $p 2>/dev/null; "
    "fi\n"
    "  for f in $(grep -lzx \"SBX_JOB=$j\" /proc/[0-9]*/environ 2>/dev/null); do\n"
    "    f=${f#/proc/}; kill -$g ${f%/environ} 2>/dev/null\n"
    "  done\n"
    "  exit 0;;\n"
    "read) [ -d \"$1\" ] || exit 3; [ -f \"$1/$2\" ] || exit 0\n"
    "  tail -c +$(($3 + 1)) \"$1/$2\" | head -c $4;;\n"
    "tail) [ -d \"$1\" ] || exit 3; [ -f \"$1/$2\" ] || exit 0; tail -n $3 \"$1/$2\";;\n"
    "esac\n";

const char *sbx_job_state_name(uint32_t state)
{
	switch (state) {
	case SBX_JOB_RUNNING:
		return "running";
	case SBX_JOB_EXITED:
		return "exited";
	case SBX_JOB_KILLED:
		return "killed";
	case SBX_JOB_LOST:
		return "lost";
	default:
		return "unknown";
	}
}

static uint32_t state_of(const char *name)
{
	for (uint32_t s = SBX_JOB_RUNNING; s <= SBX_JOB_LOST; s++)
		if (strcmp(name, sbx_job_state_name(s)) == 0)
			return s;
	return SBX_JOB_RUNNING; /* "starting" rows count as live */
}

/* Splits "<hex>@<sandbox>" into hex[HEX_LEN + 1] and the sandbox id. */
static int split_job_id(const char *job_id, char *hex, const char **sandbox, sbx_error *err)
{
	if (!job_id)
		return sbx__set_error(err, SBX_E_INVAL, "job: NULL job id");
	const char *at = strchr(job_id, '@');
	int ok = at && at - job_id == HEX_LEN && at[1] != '\0' && strlen(job_id) < SBX_JOB_ID_MAX;
	for (int i = 0; ok && i < HEX_LEN; i++)
		ok = (job_id[i] >= '0' && job_id[i] <= '9') ||
		     (job_id[i] >= 'a' && job_id[i] <= 'f');
	if (!ok)
		return sbx__set_error(
		    err, SBX_E_INVAL,
		    "job: malformed job id '%.200s' (expected <12 hex>@<sandbox id>)", job_id);
	memcpy(hex, job_id, HEX_LEN);
	hex[HEX_LEN] = '\0';
	*sandbox = at + 1;
	return SBX_OK;
}

static void capture_free(sbx__capture *c)
{
	sbx__free(c->out);
	memset(c, 0, sizeof(*c));
}

/* Runs ctl_script with args in the sandbox; *status gets its exit status (3: no such job). */
static int run_ctl(sbx_host *h, const char *sandbox, const char *const *args, size_t n_args,
		   size_t out_cap, uint64_t timeout_ms, sbx__capture *cap, int *status,
		   sbx_error *err)
{
	const char *argv[16];
	size_t k = 0;
	argv[k++] = "sh";
	argv[k++] = "-c";
	argv[k++] = ctl_script;
	argv[k++] = "sbx-job";
	for (size_t i = 0; i < n_args && k < 15; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	sbx__run_spec spec = {.argv = argv, .timeout_ms = timeout_ms};
	memset(cap, 0, sizeof(*cap));
	cap->out_cap = out_cap;
	sbx_exec_outcome oc;
	int rc = sbx__host_run(h, sandbox, &spec, cap, &oc, err);
	if (rc != SBX_OK) {
		capture_free(cap);
		return rc;
	}
	if (oc.timed_out) {
		capture_free(cap);
		return sbx__set_error(err, SBX_E_TIMEOUT, "%s: job: control script timed out",
				      sandbox);
	}
	*status = oc.exit_code;
	if (oc.exit_code != 0 && oc.exit_code != 3) {
		int code = oc.exit_code;
		sbx__set_error(err, SBX_E_BACKEND, "%s: job: control script failed (exit %d%s%s)",
			       sandbox, oc.signal ? 128 + oc.signal : code,
			       cap->err_len ? "): " : "", cap->err_len ? cap->err : "");
		capture_free(cap);
		return SBX_E_BACKEND;
	}
	return SBX_OK;
}

/* Parses one "job ..." line into info; 0 on success, -1 when malformed. */
static int parse_job_line(char *line, const char *sandbox, double now, sbx_job_info *info)
{
	char *save = NULL;
	char *f[11] = {0};
	int n = 0;
	while (n < 10) {
		char *t = strtok_r(n ? NULL : line, " ", &save);
		if (!t)
			break;
		f[n++] = t;
	}
	if (n < 10 || strcmp(f[0], "job") != 0 || strlen(f[1]) != HEX_LEN)
		return -1;
	char *cmd = save ? save : "";
	memset(info, 0, sizeof(*info));
	SBX_INIT_HEADER(*info);
	snprintf(info->id, sizeof(info->id), "%s@%s", f[1], sandbox);
	snprintf(info->sandbox_id, sizeof(info->sandbox_id), "%s", sandbox);
	info->pid = strtoll(f[2], NULL, 10);
	int alive = strcmp(f[3], "1") == 0;
	info->started = strtod(f[6], NULL);
	info->stdout_bytes = strtoull(f[8], NULL, 10);
	info->stderr_bytes = strtoull(f[9], NULL, 10);
	snprintf(info->command, sizeof(info->command), "%s", cmd);
	info->exit_code = -1;
	double end = now;
	if (strcmp(f[4], "-") != 0) {
		long rc = strtol(f[4], NULL, 10);
		if (strcmp(f[7], "-") != 0)
			end = strtod(f[7], NULL);
		if (strcmp(f[5], "-") != 0 && rc > 128 && rc <= 128 + 64) {
			info->state = SBX_JOB_KILLED;
			info->signal = (int32_t)(rc - 128);
		} else {
			info->state = SBX_JOB_EXITED;
			info->exit_code = (int32_t)rc;
		}
	} else {
		info->state = alive ? SBX_JOB_RUNNING : SBX_JOB_LOST;
	}
	info->duration = end > info->started ? end - info->started : 0.0;
	return 0;
}

static void row_of(const sbx_job_info *info, sbx__job_row *row)
{
	memset(row, 0, sizeof(*row));
	snprintf(row->job_id, sizeof(row->job_id), "%s", info->id);
	snprintf(row->sandbox_id, sizeof(row->sandbox_id), "%s", info->sandbox_id);
	snprintf(row->state, sizeof(row->state), "%s", sbx_job_state_name(info->state));
	row->pid = info->pid;
	row->exit_code = info->exit_code;
	row->signal = info->signal;
	row->started_ms = (int64_t)(info->started * 1000.0);
	row->ended_ms = info->state == SBX_JOB_RUNNING
			    ? 0
			    : (int64_t)((info->started + info->duration) * 1000.0);
	row->stdout_bytes = (int64_t)info->stdout_bytes;
	row->stderr_bytes = (int64_t)info->stderr_bytes;
}

/* Best effort: the sandbox stays the truth when the ledger cannot be written. */
static void remember(sbx_host *h, const sbx_job_info *info)
{
	sbx__ledger *led = NULL;
	if (sbx__host_ledger(h, &led, NULL) != SBX_OK)
		return;
	sbx__job_row row;
	row_of(info, &row);
	sbx__ledger_job_put(led, &row, NULL);
}

/* Walks the lines of a status output: "now T" first, then job and none lines. fn gets each
 * parsed job; `none` lines give a job with state 0. */
typedef int (*line_fn)(void *ctx, const sbx_job_info *info, const char *none_hex);

static int each_line(char *out, const char *sandbox, line_fn fn, void *ctx, sbx_error *err)
{
	double now = 0;
	char *save = NULL;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "now ", 4) == 0) {
			now = strtod(line + 4, NULL);
			continue;
		}
		if (strncmp(line, "none ", 5) == 0) {
			int rc = fn(ctx, NULL, line + 5);
			if (rc)
				return rc;
			continue;
		}
		sbx_job_info info;
		if (parse_job_line(line, sandbox, now, &info) != 0)
			return sbx__set_error(err, SBX_E_BACKEND,
					      "%s: job: unreadable status line '%.100s'", sandbox,
					      line);
		int rc = fn(ctx, &info, NULL);
		if (rc)
			return rc;
	}
	return SBX_OK;
}

typedef struct one_ctx {
	sbx_job_info *info;
	int found;
} one_ctx;

static int take_one(void *ctx, const sbx_job_info *info, const char *none_hex)
{
	(void)none_hex;
	one_ctx *c = ctx;
	if (info) {
		sbx__struct_out(c->info, info, sizeof(*info));
		c->found = 1;
	}
	return 0;
}

/* Runs a status-printing ctl mode for one job and fills info. */
static int status_via(sbx_host *h, const char *job_id, const char *const *args, size_t n_args,
		      uint64_t timeout_ms, sbx_job_info *info, sbx_error *err)
{
	sbx__capture cap;
	int st = 0;
	const char *sandbox = strchr(job_id, '@') + 1;
	int rc = run_ctl(h, sandbox, args, n_args, 1 << 16, timeout_ms, &cap, &st, err);
	if (rc != SBX_OK)
		return rc;
	one_ctx c = {.info = info};
	if (st == 0 && cap.out)
		rc = each_line(cap.out, sandbox, take_one, &c, err);
	capture_free(&cap);
	if (rc != SBX_OK)
		return rc;
	if (!c.found)
		return sbx__set_error(err, SBX_E_NOT_FOUND, "%s: job: no such job in the sandbox",
				      job_id);
	remember(h, info);
	return SBX_OK;
}

static int check_info(const sbx_job_info *info, sbx_error *err)
{
	return sbx__struct_out_check(info, sizeof(*info), "job: info", err);
}

int sbx_job_status(sbx_host *host, const char *job_id, sbx_job_info *info, sbx_error *err)
{
	char hex[HEX_LEN + 1];
	const char *sandbox;
	int rc = check_info(info, err);
	if (rc == SBX_OK)
		rc = split_job_id(job_id, hex, &sandbox, err);
	if (rc != SBX_OK)
		return rc;
	const char *args[] = {"status", hex};
	return status_via(host, job_id, args, 2, CTL_TIMEOUT_MS, info, err);
}

static double mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int sbx_job_wait(sbx_host *host, const char *job_id, double timeout, sbx_job_info *info,
		 sbx_error *err)
{
	char hex[HEX_LEN + 1];
	const char *sandbox;
	int rc = check_info(info, err);
	if (rc == SBX_OK)
		rc = split_job_id(job_id, hex, &sandbox, err);
	if (rc != SBX_OK)
		return rc;
	if (timeout != timeout || timeout > 1e9)
		return sbx__set_error(err, SBX_E_INVAL,
				      "job: wait: timeout %g is not a number of "
				      "seconds up to 1e9",
				      timeout);
	double deadline = mono_now() + (timeout < 0 ? 0 : timeout);
	for (;;) {
		double left = timeout < 0 ? WAIT_CHUNK_S : deadline - mono_now();
		if (left < 0)
			left = 0;
		if (left > WAIT_CHUNK_S)
			left = WAIT_CHUNK_S;
		char tenths[24];
		snprintf(tenths, sizeof(tenths), "%lld", (long long)(left * 10.0 + 0.5));
		const char *args[] = {"wait", hex, tenths};
		rc = status_via(host, job_id, args, 3, (uint64_t)(left * 1000.0) + CTL_TIMEOUT_MS,
				info, err);
		if (rc != SBX_OK || info->state != SBX_JOB_RUNNING)
			return rc;
		if (timeout >= 0 && mono_now() >= deadline)
			return sbx__set_error(err, SBX_E_TIMEOUT,
					      "%s: job: still running after %g s", job_id, timeout);
	}
}

int sbx_job_kill(sbx_host *host, const char *job_id, int sig, sbx_error *err)
{
	char hex[HEX_LEN + 1];
	const char *sandbox;
	int rc = split_job_id(job_id, hex, &sandbox, err);
	if (rc != SBX_OK)
		return rc;
	if (sig == 0)
		sig = 15;
	if (sig < 1 || sig > 64)
		return sbx__set_error(err, SBX_E_INVAL, "%s: job: kill: signal %d is not 1..64",
				      job_id, sig);
	char sigbuf[8];
	snprintf(sigbuf, sizeof(sigbuf), "%d", sig);
	const char *args[] = {"kill", hex, sigbuf};
	sbx__capture cap;
	int st = 0;
	rc = run_ctl(host, sandbox, args, 3, 1024, CTL_TIMEOUT_MS, &cap, &st, err);
	if (rc != SBX_OK)
		return rc;
	capture_free(&cap);
	if (st == 3)
		return sbx__set_error(err, SBX_E_NOT_FOUND, "%s: job: no such job in the sandbox",
				      job_id);
	return SBX_OK;
}

int sbx_job_read(sbx_host *host, const char *job_id, uint32_t stream, uint64_t offset, size_t max,
		 uint32_t tail_lines, void **data, size_t *len, sbx_error *err)
{
	char hex[HEX_LEN + 1];
	const char *sandbox;
	if (!data || !len)
		return sbx__set_error(err, SBX_E_INVAL, "job: read: NULL output");
	*data = NULL;
	*len = 0;
	int rc = split_job_id(job_id, hex, &sandbox, err);
	if (rc != SBX_OK)
		return rc;
	if (stream != SBX_STREAM_STDOUT && stream != SBX_STREAM_STDERR)
		return sbx__set_error(err, SBX_E_INVAL, "%s: job: read: stream %u is not 1 or 2",
				      job_id, (unsigned)stream);
	if (max == 0 || max > READ_DEFAULT_MAX)
		max = READ_DEFAULT_MAX;
	char a[24], b[24];
	const char *name = stream == SBX_STREAM_STDOUT ? "stdout" : "stderr";
	const char *args[5];
	size_t n = 0;
	if (tail_lines > 0) {
		snprintf(a, sizeof(a), "%u", (unsigned)tail_lines);
		args[n++] = "tail";
		args[n++] = hex;
		args[n++] = name;
		args[n++] = a;
	} else {
		snprintf(a, sizeof(a), "%llu", (unsigned long long)offset);
		snprintf(b, sizeof(b), "%zu", max);
		args[n++] = "read";
		args[n++] = hex;
		args[n++] = name;
		args[n++] = a;
		args[n++] = b;
	}
	sbx__capture cap;
	int st = 0;
	rc = run_ctl(host, sandbox, args, n, max, CTL_TIMEOUT_MS, &cap, &st, err);
	if (rc != SBX_OK)
		return rc;
	if (st == 3) {
		capture_free(&cap);
		return sbx__set_error(err, SBX_E_NOT_FOUND, "%s: job: no such job in the sandbox",
				      job_id);
	}
	if (!cap.out) {
		cap.out = sbx__alloc(1);
		if (!cap.out)
			return sbx__set_error(err, SBX_E_NOMEM, "job: read: out of memory");
		cap.out[0] = '\0';
	}
	*data = cap.out;
	*len = cap.out_len;
	return SBX_OK;
}

/* ---- listing */

typedef struct list_ctx {
	sbx_host *h;
	sbx_job_fn fn;
	void *ctx;
	sbx__job_row *rows; /* the ledger's, to find jobs the sandbox no longer has */
	size_t n_rows;
	char *seen; /* one flag per row */
} list_ctx;

static int list_one(void *ctx, const sbx_job_info *info, const char *none_hex)
{
	(void)none_hex;
	list_ctx *c = ctx;
	if (!info)
		return 0;
	for (size_t i = 0; i < c->n_rows; i++)
		if (strcmp(c->rows[i].job_id, info->id) == 0)
			c->seen[i] = 1;
	remember(c->h, info);
	return c->fn(c->ctx, info);
}

static void info_of_row(const sbx__job_row *r, sbx_job_info *info)
{
	memset(info, 0, sizeof(*info));
	SBX_INIT_HEADER(*info);
	snprintf(info->id, sizeof(info->id), "%s", r->job_id);
	snprintf(info->sandbox_id, sizeof(info->sandbox_id), "%s", r->sandbox_id);
	info->state = state_of(r->state);
	info->exit_code = r->exit_code;
	info->signal = r->signal;
	info->pid = r->pid;
	info->started = (double)r->started_ms / 1000.0;
	int64_t end = r->ended_ms;
	if (!end || info->state == SBX_JOB_RUNNING) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		end = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	info->duration = end > r->started_ms ? (double)(end - r->started_ms) / 1000.0 : 0.0;
	info->stdout_bytes = (uint64_t)r->stdout_bytes;
	info->stderr_bytes = (uint64_t)r->stderr_bytes;
}

int sbx_job_list(sbx_host *host, const char *sandbox_id, uint32_t flags, sbx_job_fn fn, void *ctx,
		 sbx_error *err)
{
	if (!sandbox_id || !fn)
		return sbx__set_error(err, SBX_E_INVAL, "job: list: NULL sandbox id or callback");
	sbx__ledger *led = NULL;
	list_ctx c = {.h = host, .fn = fn, .ctx = ctx};
	int rc = SBX_OK;
	if (sbx__host_ledger(host, &led, (flags & SBX_JOB_LIST_CACHED) ? err : NULL) == SBX_OK) {
		rc = sbx__ledger_jobs(led, sandbox_id, &c.rows, &c.n_rows, err);
		if (rc != SBX_OK)
			return rc;
	} else if (flags & SBX_JOB_LIST_CACHED) {
		return err ? err->code : SBX_E_LEDGER;
	}
	if (flags & SBX_JOB_LIST_CACHED) {
		for (size_t i = 0; rc == SBX_OK && i < c.n_rows; i++) {
			sbx_job_info info;
			info_of_row(&c.rows[i], &info);
			rc = fn(ctx, &info);
		}
		sbx__free(c.rows);
		return rc;
	}
	c.seen = sbx__calloc(c.n_rows + 1, 1);
	if (!c.seen) {
		sbx__free(c.rows);
		return sbx__set_error(err, SBX_E_NOMEM, "job: list: out of memory");
	}
	sbx__capture cap;
	int st = 0;
	const char *args[] = {"list"};
	rc = run_ctl(host, sandbox_id, args, 1, 16u << 20, CTL_TIMEOUT_MS, &cap, &st, err);
	if (rc == SBX_OK && cap.out)
		rc = each_line(cap.out, sandbox_id, list_one, &c, err);
	if (rc == SBX_OK)
		capture_free(&cap);
	/* Jobs the ledger knows but the sandbox no longer has (its files were removed). */
	for (size_t i = 0; rc == SBX_OK && i < c.n_rows; i++) {
		if (c.seen[i])
			continue;
		sbx_job_info info;
		info_of_row(&c.rows[i], &info);
		if (info.state == SBX_JOB_RUNNING) {
			info.state = SBX_JOB_LOST;
			remember(host, &info);
		}
		rc = fn(ctx, &info);
	}
	if (rc != SBX_OK)
		capture_free(&cap);
	sbx__free(c.seen);
	sbx__free(c.rows);
	return rc;
}

/* ---- start */

static int live_jobs(sbx__ledger *led, const char *sandbox, uint64_t *n, sbx_error *err)
{
	sbx__job_row *rows = NULL;
	size_t k = 0;
	int rc = sbx__ledger_jobs(led, sandbox, &rows, &k, err);
	*n = 0;
	for (size_t i = 0; rc == SBX_OK && i < k; i++)
		if (state_of(rows[i].state) == SBX_JOB_RUNNING)
			(*n)++;
	sbx__free(rows);
	return rc;
}

static int count_cb(void *ctx, const sbx_job_info *info)
{
	(void)ctx;
	(void)info;
	return 0;
}

static int make_hex(char *hex, sbx_error *err)
{
	int e = sbx__random_hex(hex, HEX_LEN / 2);
	return e ? sbx__set_error(err, SBX_E_IO, "job: no random bytes: %s", strerror(e)) : SBX_OK;
}

/* The absolute path of opts->cwd in the sandbox, resolved by the backend under its own rules
 * for a cwd (a plain exec there), into *out (from sbx__alloc). */
static int resolve_cwd(sbx_host *h, const char *id, const sbx_exec_opts *opts, char **out,
		       sbx_error *err)
{
	*out = NULL;
	const char *argv[] = {"sh", "-c", "pwd -P", NULL};
	sbx__run_spec spec = {.argv = argv,
			      .cwd = opts->cwd,
			      .env = opts->env,
			      .n_env = opts->n_env,
			      .user = opts->user,
			      .timeout_ms = CTL_TIMEOUT_MS};
	sbx__capture cap = {.out_cap = 8192};
	sbx_exec_outcome oc;
	int rc = sbx__host_run(h, id, &spec, &cap, &oc, err);
	if (rc != SBX_OK)
		return rc;
	if (oc.exit_code != 0 || !cap.out || cap.out[0] != '/') {
		rc = sbx__set_error(err, SBX_E_PATH,
				    "%s: exec: background: cannot enter cwd '%.200s'%s%s", id,
				    opts->cwd, cap.err_len ? ": " : "", cap.err);
		capture_free(&cap);
		return rc;
	}
	cap.out[strcspn(cap.out, "\n")] = '\0';
	*out = cap.out;
	return SBX_OK;
}

static char *command_text(const sbx_exec_opts *opts)
{
	if (opts->shell)
		return sbx__strdup(opts->shell);
	size_t n = 1;
	for (size_t i = 0; opts->argv[i]; i++)
		n += strlen(opts->argv[i]) + 1;
	char *s = sbx__alloc(n);
	if (!s)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; opts->argv[i]; i++) {
		size_t k = strlen(opts->argv[i]);
		if (i)
			s[o++] = ' ';
		memcpy(s + o, opts->argv[i], k);
		o += k;
	}
	s[o] = '\0';
	return s;
}

/* SBX_E_LIMIT when the sandbox has max_jobs live jobs; stale rows are refreshed from the
 * sandbox before saying so. */
static int check_cap(sbx_host *h, const char *id, sbx__ledger *led, const sbx__policy *pol,
		     sbx_error *err)
{
	uint64_t live = 0;
	int rc = live_jobs(led, id, &live, err);
	if (rc == SBX_OK && live >= pol->max_jobs) {
		rc = sbx_job_list(h, id, 0, count_cb, NULL, err);
		if (rc == SBX_OK)
			rc = live_jobs(led, id, &live, err);
	}
	if (rc == SBX_OK && live >= pol->max_jobs)
		rc = sbx__set_error(err, SBX_E_LIMIT,
				    "%s: exec: background: the sandbox has %llu live jobs, the "
				    "limit (max_jobs)",
				    id, (unsigned long long)live);
	return rc;
}

/* The start script's argv: supervisor, job, mode, cwd, stdin flag, command text, command. */
static const char **start_argv(const sbx_exec_opts *opts, const char *hex, const char *cwd,
			       const char *cmd)
{
	const char *const head[] = {"sh",
				    "-c",
				    start_script,
				    "sbx-job",
				    sup_script,
				    hex,
				    opts->shell ? "shell" : "argv",
				    cwd ? cwd : "",
				    opts->has_stdin ? "1" : "0",
				    cmd};
	return sbx__script_argv(head, sizeof(head) / sizeof(head[0]), opts->shell, opts->argv);
}

/* Runs the start script; *started gets the job's start time from its answer. */
static int run_start(sbx_host *h, const char *id, const sbx_exec_opts *opts, const char **argv,
		     double *started, sbx_error *err)
{
	sbx__run_spec spec = {.argv = argv,
			      .env = opts->env,
			      .n_env = opts->n_env,
			      .has_stdin = opts->has_stdin,
			      .stdin_data = opts->stdin_data,
			      .stdin_len = opts->stdin_len,
			      .user = opts->user,
			      .timeout_ms = CTL_TIMEOUT_MS};
	sbx__capture cap = {.out_cap = 1024};
	sbx_exec_outcome oc;
	int rc = sbx__host_run(h, id, &spec, &cap, &oc, err);
	long long sup = 0;
	if (rc == SBX_OK &&
	    (oc.exit_code != 0 || !cap.out || sscanf(cap.out, "%lf %lld", started, &sup) != 2))
		rc = sbx__set_error(err, SBX_E_BACKEND,
				    "%s: exec: background: the job did not start (exit %d)%s%.300s",
				    id, (int)oc.exit_code, cap.err_len ? ": " : "", cap.err);
	capture_free(&cap);
	return rc;
}

/* The ledger row of a job just started. */
static int record_start(sbx__ledger *led, const char *job_id, const char *id, double started,
			sbx_error *err)
{
	sbx_job_info info;
	memset(&info, 0, sizeof(info));
	SBX_INIT_HEADER(info);
	snprintf(info.id, sizeof(info.id), "%s", job_id);
	snprintf(info.sandbox_id, sizeof(info.sandbox_id), "%s", id);
	info.state = SBX_JOB_RUNNING;
	info.exit_code = -1;
	info.started = started;
	sbx__job_row row;
	row_of(&info, &row);
	return sbx__ledger_job_put(led, &row, err);
}

int sbx__job_start(sbx_host *h, const char *id, const sbx_exec_opts *opts, char *job_id,
		   sbx_error *err)
{
	const sbx__policy *pol = NULL;
	sbx__ledger *led = NULL;
	char hex[HEX_LEN + 1];
	int rc = sbx__host_policy(h, id, &pol, err);
	if (rc == SBX_OK)
		rc = sbx__host_ledger(h, &led, err);
	if (rc == SBX_OK)
		rc = check_cap(h, id, led, pol, err);
	if (rc == SBX_OK)
		rc = make_hex(hex, err);
	if (rc != SBX_OK)
		return rc;
	char *cwd = NULL, *cmd = command_text(opts);
	const char **argv = NULL;
	if (!cmd)
		rc = sbx__nomem(err, "exec");
	if (rc == SBX_OK && opts->cwd && opts->cwd[0])
		rc = resolve_cwd(h, id, opts, &cwd, err);
	if (rc == SBX_OK && !(argv = start_argv(opts, hex, cwd, cmd)))
		rc = sbx__nomem(err, "exec");
	double started = 0;
	if (rc == SBX_OK)
		rc = run_start(h, id, opts, argv, &started, err);
	if (rc == SBX_OK) {
		snprintf(job_id, SBX_JOB_ID_MAX, "%s@%s", hex, id);
		rc = record_start(led, job_id, id, started, err);
	}
	sbx__free(argv);
	sbx__free(cwd);
	sbx__free(cmd);
	return rc;
}

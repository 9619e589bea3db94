/* sbx job ls | status | logs | wait | kill: background jobs (host.h "background jobs") from
 * any process; `sbx exec --detach` starts them. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "help.h"

json_t *cli_job_json(const sbx_job_info *j)
{
	return json_pack("{s:s,s:s,s:s,s:i,s:i,s:I,s:f,s:f,s:I,s:I,s:s}", "id", j->id, "sandbox_id",
			 j->sandbox_id, "state", sbx_job_state_name(j->state), "exit_code",
			 (int)j->exit_code, "signal", (int)j->signal, "pid", (json_int_t)j->pid,
			 "started", j->started, "duration", j->duration, "stdout_bytes",
			 (json_int_t)j->stdout_bytes, "stderr_bytes", (json_int_t)j->stderr_bytes,
			 "command", j->command);
}

static void print_row(const sbx_job_info *j)
{
	char outcome[32] = "-";
	if (j->state == SBX_JOB_EXITED)
		snprintf(outcome, sizeof(outcome), "exit %d", (int)j->exit_code);
	else if (j->state == SBX_JOB_KILLED)
		snprintf(outcome, sizeof(outcome), "signal %d", (int)j->signal);
	char started[32] = "-";
	time_t t = (time_t)j->started;
	struct tm tm;
	if (j->started > 0 && localtime_r(&t, &tm))
		strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%S", &tm);
	printf("%-40s %-8s %-10s %8lld %-19s %9.1f  %s\n", j->id, sbx_job_state_name(j->state),
	       outcome, (long long)j->pid, started, j->duration, j->command);
}

static void print_header(void)
{
	printf("%-40s %-8s %-10s %8s %-19s %9s  %s\n", "JOB", "STATE", "OUTCOME", "PID", "STARTED",
	       "SECONDS", "COMMAND");
}

typedef struct ls_out {
	int json;
	json_t *rows;
} ls_out;

static int ls_one(void *ctx, const sbx_job_info *info)
{
	ls_out *o = ctx;
	if (o->json)
		json_array_append_new(o->rows, cli_job_json(info));
	else
		print_row(info);
	return 0;
}

/* A subcommand's target (the ID or JOB) and options. */
typedef struct job_args {
	const char *target;
	int json, cached, err_stream, follow;
	const char *tail, *timeout, *signal;
} job_args;

/* Parses argv[2..]; `allowed` lists the options this subcommand takes ("--json --cached"). */
static int parse(const char *sub, const char *allowed, int argc, char **argv, job_args *a)
{
	for (int i = 2; i < argc; i++) {
		const char *s = argv[i];
		const char **val = strcmp(s, "--tail") == 0      ? &a->tail
				   : strcmp(s, "--timeout") == 0 ? &a->timeout
				   : strcmp(s, "--signal") == 0  ? &a->signal
								 : NULL;
		size_t n = strlen(s);
		const char *at = s[0] == '-' ? strstr(allowed, s) : NULL;
		int known = at && (at[n] == ' ' || at[n] == '\0');
		if (s[0] != '-' && !a->target)
			a->target = s;
		else if (!known)
			return cli_usage_error(cli_help_job, sub, "bad argument '%s'", s);
		else if (val && i + 1 < argc)
			*val = argv[++i];
		else if (val)
			return cli_usage_error(cli_help_job, sub, "%s wants a value", s);
		else if (strcmp(s, "--json") == 0)
			a->json = 1;
		else if (strcmp(s, "--cached") == 0)
			a->cached = 1;
		else if (strcmp(s, "--stderr") == 0)
			a->err_stream = 1;
		else
			a->follow = 1;
	}
	if (!a->target)
		return cli_usage_error(cli_help_job, sub, "missing %s",
				       strcmp(sub, "job ls") == 0 ? "sandbox ID" : "JOB");
	return CLI_OK;
}

static int job_ls(sbx_host *h, const job_args *a)
{
	ls_out o = {.json = a->json, .rows = json_array()};
	sbx_error err = {0};
	if (!a->json)
		print_header();
	int st = sbx_job_list(h, a->target, a->cached ? SBX_JOB_LIST_CACHED : 0, ls_one, &o, &err);
	int rc = st == SBX_OK ? CLI_OK : cli_fail("job ls", st, &err);
	if (st == SBX_OK && a->json)
		cli_print_json(o.rows);
	json_decref(o.rows);
	return rc;
}

static int job_status(sbx_host *h, const job_args *a)
{
	sbx_job_info j = {0};
	SBX_INIT_HEADER(j);
	sbx_error err = {0};
	int st = sbx_job_status(h, a->target, &j, &err);
	if (st != SBX_OK)
		return cli_fail("job status", st, &err);
	if (a->json) {
		json_t *v = cli_job_json(&j);
		cli_print_json(v);
		json_decref(v);
	} else {
		print_header();
		print_row(&j);
	}
	return CLI_OK;
}

/* Writes what the job's stream holds from *offset on; advances *offset. */
static int logs_once(sbx_host *h, const char *job, uint32_t stream, uint64_t *offset, uint32_t tail,
		     sbx_error *err)
{
	void *data = NULL;
	size_t len = 0;
	int st = sbx_job_read(h, job, stream, *offset, 0, tail, &data, &len, err);
	if (st != SBX_OK)
		return st;
	fwrite(data, 1, len, stdout);
	fflush(stdout);
	*offset += len;
	sbx_free(data);
	return SBX_OK;
}

static int job_logs(sbx_host *h, const job_args *a)
{
	uint32_t stream = a->err_stream ? SBX_STREAM_STDERR : SBX_STREAM_STDOUT, tail = 0;
	if (a->tail) {
		char *end = NULL;
		unsigned long n = strtoul(a->tail, &end, 10);
		if (!end || *end || !*a->tail || n == 0 || n > 1000000)
			return cli_usage_error(cli_help_job, "job logs",
					       "--tail wants a line count 1..1000000, got '%s'",
					       a->tail);
		tail = (uint32_t)n;
	}
	sbx_error err = {0};
	uint64_t offset = 0;
	int st = SBX_OK;
	if (tail) { /* the last lines, then (with --follow) what comes after them */
		sbx_job_info j = {0};
		SBX_INIT_HEADER(j);
		st = sbx_job_status(h, a->target, &j, &err);
		if (st == SBX_OK)
			st = logs_once(h, a->target, stream, &offset, tail, &err);
		offset = stream == SBX_STREAM_STDOUT ? j.stdout_bytes : j.stderr_bytes;
	} else {
		st = logs_once(h, a->target, stream, &offset, 0, &err);
	}
	while (st == SBX_OK && a->follow) {
		sbx_job_info j = {0};
		SBX_INIT_HEADER(j);
		/* A short wait, not a sleep: it returns as soon as the job ends. */
		st = sbx_job_wait(h, a->target, 1.0, &j, &err);
		int running = st == SBX_E_TIMEOUT;
		if (running)
			st = SBX_OK;
		uint64_t before = offset;
		if (st == SBX_OK)
			st = logs_once(h, a->target, stream, &offset, 0, &err);
		if (st == SBX_OK && !running && offset == before)
			break;
	}
	return st == SBX_OK ? CLI_OK : cli_fail("job logs", st, &err);
}

static int job_wait(sbx_host *h, const job_args *a)
{
	double timeout = -1;
	if (a->timeout && (timeout = cli_parse_seconds(a->timeout)) < 0)
		return cli_usage_error(cli_help_job, "job wait",
				       "--timeout wants seconds >= 0, got '%s'", a->timeout);
	sbx_job_info j = {0};
	SBX_INIT_HEADER(j);
	sbx_error err = {0};
	int st = sbx_job_wait(h, a->target, timeout, &j, &err);
	if (st == SBX_E_TIMEOUT) {
		cli_fail("job wait", st, &err);
		return CLI_TIMEOUT;
	}
	if (st != SBX_OK)
		return cli_fail("job wait", st, &err);
	if (j.state == SBX_JOB_EXITED)
		return j.exit_code & 0xff;
	if (j.state == SBX_JOB_KILLED)
		return 128 + (j.signal & 0x7f);
	char msg[512];
	snprintf(msg, sizeof(msg), "%s: lost: its supervisor is gone without a status", a->target);
	cli_report("job wait", sbx_status_name(SBX_E_BACKEND), msg);
	return CLI_INFRA;
}

/* A signal number (1..64) or name ("TERM", "SIGTERM"); 0 when unknown. */
static int signal_number(const char *s)
{
	static const struct {
		const char *name;
		int num;
	} names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
		     {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},
		     {"CONT", SIGCONT}, {"STOP", SIGSTOP}};
	char *end = NULL;
	long v = strtol(s, &end, 10);
	if (*s && end && !*end)
		return v >= 1 && v <= 64 ? (int)v : 0;
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return names[i].num;
	return 0;
}

static int job_kill(sbx_host *h, const job_args *a)
{
	int sig = SIGTERM;
	if (a->signal && !(sig = signal_number(a->signal)))
		return cli_usage_error(cli_help_job, "job kill",
				       "--signal wants 1..64 or a name such as TERM, got '%s'",
				       a->signal);
	sbx_error err = {0};
	int st = sbx_job_kill(h, a->target, sig, &err);
	return st == SBX_OK ? CLI_OK : cli_fail("job kill", st, &err);
}

int cmd_job(const cli_globals *g, int argc, char **argv)
{
	static const struct {
		const char *name, *full, *allowed;
		int (*fn)(sbx_host *, const job_args *);
	} subs[] = {{"ls", "job ls", "--json --cached", job_ls},
		    {"status", "job status", "--json", job_status},
		    {"logs", "job logs", "--stderr --follow -f --tail", job_logs},
		    {"wait", "job wait", "--timeout", job_wait},
		    {"kill", "job kill", "--signal", job_kill}};
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(cli_help_job, stdout);
			return CLI_OK;
		}
	if (argc < 2)
		return cli_usage_error(cli_help_job, "job", "missing subcommand");
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		if (strcmp(argv[1], subs[i].name) != 0)
			continue;
		job_args a = {0};
		int rc = parse(subs[i].full, subs[i].allowed, argc, argv, &a);
		if (rc != CLI_OK)
			return rc;
		sbx_host *h = NULL;
		if ((rc = cli_open_host(g, &h)) != CLI_OK)
			return rc;
		rc = subs[i].fn(h, &a);
		sbx_host_free(h);
		return rc;
	}
	return cli_usage_error(cli_help_job, "job", "unknown subcommand '%s'", argv[1]);
}

/* sbx rollout: a JSONL file of tasks, one sandbox per task (create -> files -> commands ->
 * delete, the delete on every path), run by a pool of worker threads; one JSONL result per
 * task, infrastructure errors kept apart from command failures. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef struct task {
	json_t *spec;
	json_t *result;
	size_t line;              /* of TASKS */
	char sandbox[SBX_ID_MAX]; /* while the task holds one (under the rollout's lock) */
	int reruns;               /* times it ran again because descriptors ran out */
} task;

typedef struct rollout {
	sbx_host *host;
	task *tasks;
	size_t n, next, done, ok, failed, infra;
	pthread_mutex_t lock;
	pthread_cond_t freed; /* signalled when a worker stops holding a sandbox slot */
	size_t holding;       /* workers between their create attempt and their delete */
	uint64_t generation;  /* bumped with every signal of `freed` */
	FILE *out;
	int progress;
	double started;
	int finished; /* the workers are done: the watcher stops (under lock) */
	/* Tasks running and how many may: --concurrency, lowered (once said on stderr) when
	 * the process runs out of file descriptors. */
	size_t active, limit, conc;
	pthread_cond_t room; /* signalled when `active` drops */
	int fds_said;
	double wait; /* --wait: seconds a create may queue under its data source's caps */
} rollout;

/* A task that met a shortage of descriptors runs again at most this many times. */
#define MAX_RERUNS 8

/* Set by the first SIGINT/SIGTERM: workers start no new task and run no further command, and
 * the watcher thread deletes every sandbox a task holds, which kills the commands running in
 * them. The handler resets itself, so a second signal kills at once (the ledger then lets
 * `sbx gc` reap what was left). */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	static const char msg[] = "\nrollout: interrupted: killing the running commands and "
				  "deleting their sandboxes (interrupt again to abort)\n";
	(void)sig;
	interrupted = 1;
	ssize_t w = write(2, msg, sizeof(msg) - 1); /* async-signal-safe */
	(void)w;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void release_slot_locked(rollout *ro)
{
	ro->holding--;
	ro->generation++;
	pthread_cond_broadcast(&ro->freed);
}

/* {stage, status, message}; the message may quote bytes that are not UTF-8 (a path), so it
 * goes through cli_json_bytes. Never NULL unless memory runs out. */
static json_t *infra(const char *stage, int status, const sbx_error *err)
{
	const char *msg = err->message[0] ? err->message : sbx_status_message(status);
	return json_pack("{s:s,s:s,s:o}", "stage", stage, "status", sbx_status_name(status),
			 "message", cli_json_bytes(msg, strlen(msg)));
}

/* The longest sleep between two tries of a create refused by a cap. */
#define QUEUE_NAP_MAX_MS 200

/* A number in [0, n] from a per-thread xorshift: workers refused together must not try again
 * together. */
static long jitter_ms(long n)
{
	static _Thread_local unsigned long long x;
	if (x == 0) {
		int here;
		x = (unsigned long long)(now() * 1e6) ^ ((unsigned long long)getpid() << 32) ^
		    (unsigned long long)(uintptr_t)&here;
		x |= 1;
	}
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return n > 0 ? (long)(x % (unsigned long long)(n + 1)) : 0;
}

/* The host refuses a create past its data source's caps (max_concurrency, max_starting,
 * create_rate: held across every process of the state dir) with SBX_E_LIMIT, and the rollout
 * queues it: it sleeps until another worker of this rollout gives its sandbox back, or a
 * growing, jittered interval of at most 200 ms passes (for other processes' deletes and the
 * rate's refill to show), and tries again, for at most --wait seconds. Every try asks the host
 * not to wait, so timings.create is the create alone; an interrupt ends the queueing. */
static int create_queued(rollout *ro, const sbx_create_opts *co, char id[SBX_ID_MAX],
			 double *queued, sbx_error *err)
{
	double t0 = now();
	long backoff = 5;
	pthread_mutex_lock(&ro->lock);
	ro->holding++;
	for (;;) {
		uint64_t gen = ro->generation;
		pthread_mutex_unlock(&ro->lock);
		memset(err, 0, sizeof(*err));
		double t1 = now();
		int st = sbx_create(ro->host, co, id, err);
		pthread_mutex_lock(&ro->lock);
		*queued = t1 - t0;
		if (st == SBX_E_LIMIT && interrupted) {
			snprintf(err->message, sizeof(err->message),
				 "rollout: interrupted while waiting for a place under the data "
				 "source's caps");
			st = SBX_E_CANCELLED;
		}
		if (st != SBX_E_LIMIT || now() - t0 >= ro->wait) {
			if (st != SBX_OK)
				release_slot_locked(ro);
			pthread_mutex_unlock(&ro->lock);
			return st;
		}
		long nap = backoff / 2 + jitter_ms(backoff / 2);
		backoff = backoff * 2 > QUEUE_NAP_MAX_MS ? QUEUE_NAP_MAX_MS : backoff * 2;
		double left = ro->wait - (now() - t0);
		if ((double)nap / 1000.0 > left)
			nap = (long)(left * 1000.0) + 1;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += nap / 1000;
		ts.tv_nsec += (nap % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		while (gen == ro->generation && !interrupted &&
		       pthread_cond_timedwait(&ro->freed, &ro->lock, &ts) == 0)
			;
	}
}

/* Progress after each finished task (under the lock). On a terminal one line rewritten in
 * place: done/total, in flight, failures, rate and ETA. Elsewhere (a log file, CI) the same
 * facts as plain lines, at every tenth of the tasks. */
static void progress(rollout *ro)
{
	double elapsed = now() - ro->started;
	double rate = elapsed > 0 ? (double)ro->done / elapsed : 0;
	size_t step = ro->n >= 10 ? ro->n / 10 : 1;
	if (!ro->progress && ro->done % step != 0 && ro->done != ro->n)
		return;
	char eta[32] = "-";
	if (rate > 0 && ro->done < ro->n)
		snprintf(eta, sizeof(eta), "%.0fs", (double)(ro->n - ro->done) / rate);
	fprintf(
	    stderr,
	    "%srollout: %zu/%zu done, %zu in flight, %zu failed, %zu infra errors, %.1f tasks/s, "
	    "ETA %s%s",
	    ro->progress ? "\r\033[K" : "", ro->done, ro->n, ro->next - ro->done, ro->failed,
	    ro->infra, rate, eta, ro->progress ? "" : "\n");
}

/* Says once, on stderr, that descriptors limit the rollout (`why`: what was seen). Under the
 * lock. */
static void say_fds(rollout *ro, const char *why)
{
	if (ro->fds_said++)
		return;
	fprintf(stderr,
		"%srollout: %s (ulimit -n is %zu): running at most %zu tasks at once instead of "
		"%zu; raise %s to run more\n",
		ro->progress ? "\n" : "", why, cli_fds_limit(), ro->limit, ro->conc,
		cli_fds_at_hard() ? "the hard limit ('ulimit -Hn', which sbx raises it to)"
				  : "'ulimit -n'");
}

/* After a task's infrastructure error: if the process ran out of descriptors, fewer tasks
 * run at once from now on and the task runs again (1); otherwise its error stands (0). */
static int rerun_for_fds(rollout *ro, task *t, json_t *infra_err)
{
	const char *msg = json_string_value(json_object_get(infra_err, "message"));
	if (interrupted || t->reruns >= MAX_RERUNS || !cli_fds_short(msg))
		return 0;
	pthread_mutex_lock(&ro->lock);
	size_t was = ro->limit;
	size_t want = ro->active > 1 ? ro->active - 1 : 1;
	if (want < ro->limit)
		ro->limit = want;
	/* Alone and already at one task, there is nothing to give back: the error stands. */
	int again = ro->active > 1 || ro->limit < was;
	if (again) {
		t->reruns++;
		char why[96];
		snprintf(why, sizeof(why),
			 "out of file descriptors with %zu tasks at once (the task cut short runs "
			 "again)",
			 ro->active);
		say_fds(ro, why);
	}
	pthread_mutex_unlock(&ro->lock);
	return again;
}

/* sbx_destroy, again while what fails it is a shortage of descriptors that the other tasks
 * will give back (a sandbox must not be left behind for want of one). */
static int destroy_task_sandbox(rollout *ro, const char *id, sbx_error *err)
{
	int st = SBX_OK;
	for (int k = 0; k < 50; k++) {
		memset(err, 0, sizeof(*err));
		st = sbx_destroy(ro->host, id, err);
		if (st == SBX_OK || !cli_fds_short(err->message))
			break;
		struct timespec ts = {0, 20 * 1000000L * (k < 10 ? k + 1 : 10)};
		nanosleep(&ts, NULL);
	}
	return st;
}

/* Runs one task and writes its result; 1 when, instead, it must run again (out of
 * descriptors, see rerun_for_fds). */
static int run_task(rollout *ro, task *t)
{
	double t0 = now();
	json_t *spec = t->spec, *res = json_object(), *cmds = json_array();
	json_t *idv = json_object_get(spec, "id");
	json_object_set(res, "id", idv);
	json_t *dsv = json_object_get(spec, "data_source");
	char dsbuf[32];
	const char *ds = NULL;
	if (json_is_string(dsv)) {
		ds = json_string_value(dsv);
	} else if (json_is_integer(dsv)) {
		snprintf(dsbuf, sizeof(dsbuf), "%lld", (long long)json_integer_value(dsv));
		ds = dsbuf;
	}
	json_object_set_new(res, "data_source", ds ? json_string(ds) : json_string("default"));
	const char *image = json_string_value(json_object_get(spec, "image"));
	if (!image)
		image = json_string_value(
		    json_object_get(json_object_get(spec, "metadata"), "docker_image"));
	sbx_create_opts co = {0};
	SBX_INIT_HEADER(co);
	co.data_source = ds;
	co.image = image;
	sbx_error err = {0};
	char id[SBX_ID_MAX] = "";
	json_t *infra_err = NULL;
	int had_infra = 0; /* infra_err may be NULL when memory ran out */
	double t_queued = 0;
	int st = create_queued(ro, &co, id, &t_queued, &err);
	double t_create = now() - t0 - t_queued;
	if (st == SBX_OK) {
		pthread_mutex_lock(&ro->lock);
		memcpy(t->sandbox, id, sizeof(t->sandbox));
		pthread_mutex_unlock(&ro->lock);
	}
	int cut = st == SBX_E_CANCELLED && interrupted; /* the interrupt stopped this task */
	int all_ok = st == SBX_OK;
	if (st != SBX_OK) {
		had_infra = 1;
		infra_err = infra("create", st, &err);
	}
	const char *path;
	json_t *v;
	json_object_foreach(st == SBX_OK ? json_object_get(spec, "files") : NULL, path, v)
	{
		const char *content = json_string_value(v);
		st = sbx_write_file(ro->host, id, path, content, json_string_length(v), 0, &err);
		if (st != SBX_OK) {
			had_infra = 1;
			infra_err = infra("files", st, &err);
			all_ok = 0;
			break;
		}
	}
	double dflt_timeout = json_is_number(json_object_get(spec, "timeout"))
				  ? json_number_value(json_object_get(spec, "timeout"))
				  : -1;
	size_t i;
	json_array_foreach(had_infra ? NULL : json_object_get(spec, "commands"), i, v)
	{
		if (interrupted) {
			snprintf(err.message, sizeof(err.message),
				 "rollout: interrupted before command %zu", i + 1);
			cut = 1;
			had_infra = 1;
			infra_err = infra("exec", SBX_E_CANCELLED, &err);
			all_ok = 0;
			break;
		}
		sbx_exec_opts eo = {0};
		SBX_INIT_HEADER(eo);
		eo.timeout = dflt_timeout;
		const char **argv = NULL;
		sbx_kv env[64];
		if (json_is_string(v)) {
			eo.shell = json_string_value(v);
		} else {
			eo.shell = json_string_value(json_object_get(v, "cmd"));
			json_t *av = json_object_get(v, "argv");
			if (av) {
				argv = calloc(json_array_size(av) + 1, sizeof(*argv));
				if (!argv) {
					snprintf(err.message, sizeof(err.message),
						 "rollout: out of memory for an argv");
					had_infra = 1;
					infra_err = infra("exec", SBX_E_NOMEM, &err);
					all_ok = 0;
					break;
				}
				for (size_t k = 0; k < json_array_size(av); k++)
					argv[k] = json_string_value(json_array_get(av, k));
				eo.argv = argv;
			}
			json_t *tv = json_object_get(v, "timeout");
			if (json_is_number(tv))
				eo.timeout = json_number_value(tv);
			eo.cwd = json_string_value(json_object_get(v, "cwd"));
			const char *k;
			json_t *ev;
			json_object_foreach(json_object_get(v, "env"), k, ev)
			{
				if (eo.n_env < 64 && json_is_string(ev)) {
					env[eo.n_env].key = k;
					env[eo.n_env].value = json_string_value(ev);
					eo.n_env++;
				}
			}
			eo.env = env;
		}
		sbx_exec_result *r = NULL;
		st = sbx_exec(ro->host, id, &eo, &r, &err);
		free(argv);
		if (interrupted) {
			/* The watcher deleted the sandbox under the command: what it returned is
			 * the interrupt's doing, not the task's. */
			if (st == SBX_OK)
				sbx_exec_result_free(r);
			memset(&err, 0, sizeof(err));
			snprintf(err.message, sizeof(err.message),
				 "rollout: interrupted during command %zu (killed)", i + 1);
			cut = 1;
			had_infra = 1;
			infra_err = infra("exec", SBX_E_CANCELLED, &err);
			all_ok = 0;
			break;
		}
		if (st != SBX_OK) {
			had_infra = 1;
			infra_err = infra("exec", st, &err);
			all_ok = 0;
			break;
		}
		json_t *cr = cli_exec_result_json(r);
		json_object_set_new(cr, "command",
				    json_is_string(v)
					? json_incref(v)
					: json_incref(json_object_get(v, "cmd")
							  ? json_object_get(v, "cmd")
							  : json_object_get(v, "argv")));
		/* The per-call files go with the sandbox on delete. */
		json_object_set_new(cr, "output_dir", json_null());
		json_object_set_new(cr, "stdout_file", json_null());
		json_object_set_new(cr, "stderr_file", json_null());
		if (r->exit_code != 0 || r->timed_out)
			all_ok = 0;
		json_array_append_new(cmds, cr);
		sbx_exec_result_free(r);
	}
	if (id[0]) {
		sbx_error derr = {0};
		int dst = destroy_task_sandbox(ro, id, &derr);
		pthread_mutex_lock(&ro->lock);
		t->sandbox[0] = '\0';
		pthread_mutex_unlock(&ro->lock);
		if (dst != SBX_OK && !had_infra) {
			had_infra = 1;
			infra_err = infra("delete", dst, &derr);
			all_ok = 0;
		} else if (dst != SBX_OK) {
			/* The result keeps the first error; a sandbox left behind is still said. */
			fprintf(stderr, "sbx: rollout: delete %s: %s\n", id,
				derr.message[0] ? derr.message : sbx_status_message(dst));
		}
		pthread_mutex_lock(&ro->lock);
		release_slot_locked(ro);
		pthread_mutex_unlock(&ro->lock);
	}
	if (had_infra && !cut && rerun_for_fds(ro, t, infra_err)) {
		json_decref(infra_err);
		json_decref(cmds);
		json_decref(res);
		return 1;
	}
	json_object_set_new(res, "sandbox_id", id[0] ? json_string(id) : json_null());
	json_object_set_new(res, "ok", json_boolean(all_ok && !had_infra));
	if (cut)
		json_object_set_new(res, "interrupted", json_true());
	json_object_set_new(res, "infra_error", infra_err ? infra_err : json_null());
	json_object_set_new(res, "commands", cmds);
	json_object_set_new(res, "timings",
			    json_pack("{s:f,s:f,s:f}", "queued", t_queued, "create", t_create,
				      "total", now() - t0));
	t->result = res;
	pthread_mutex_lock(&ro->lock);
	ro->done++;
	if (had_infra)
		ro->infra++;
	else if (all_ok)
		ro->ok++;
	else
		ro->failed++;
	char *line = json_dumps(res, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9));
	if (line) {
		fprintf(ro->out, "%s\n", line);
		fflush(ro->out);
		free(line);
	}
	json_decref(res);
	t->result = NULL;
	progress(ro);
	pthread_mutex_unlock(&ro->lock);
	return 0;
}

/* After an interrupt, deletes every sandbox a task holds (once), which kills the commands
 * running in them; the tasks then see the interrupt and record it. */
static void *watcher(void *arg)
{
	rollout *ro = arg;
	for (;;) {
		pthread_mutex_lock(&ro->lock);
		int fin = ro->finished;
		pthread_mutex_unlock(&ro->lock);
		if (fin)
			return NULL;
		if (interrupted)
			break;
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < ro->n; i++) {
		char id[SBX_ID_MAX];
		pthread_mutex_lock(&ro->lock);
		memcpy(id, ro->tasks[i].sandbox, sizeof(id));
		pthread_mutex_unlock(&ro->lock);
		id[sizeof(id) - 1] = '\0';
		if (!id[0])
			continue;
		sbx_error derr = {0};
		if (sbx_destroy(ro->host, id, &derr) != SBX_OK)
			fprintf(stderr, "sbx: rollout: delete %s: %s\n", id, derr.message);
	}
	return NULL;
}

/* How many tasks the descriptor limit lets run at once, at most `want` (said once when
 * fewer). */
static size_t fds_budget(rollout *ro, size_t want)
{
	size_t limit = cli_fds_limit(), open = cli_fds_open() + CLI_FDS_RESERVE;
	size_t fit = limit > open ? (limit - open) / CLI_FDS_PER_TASK : 0;
	if (fit == 0)
		fit = 1;
	if (fit >= (want < ro->n ? want : ro->n))
		return want;
	ro->limit = fit;
	char why[96];
	snprintf(why, sizeof(why), "each task needs up to %d file descriptors", CLI_FDS_PER_TASK);
	say_fds(ro, why);
	return fit;
}

/* A result line for a task the interrupt kept from starting (under the lock, or alone). */
static void mark_not_started(rollout *ro, task *t)
{
	json_t *spec = t->spec, *dsv = json_object_get(spec, "data_source");
	sbx_error err = {0};
	snprintf(err.message, sizeof(err.message), "rollout: interrupted before the task started");
	json_t *ds = json_is_integer(dsv) ? json_sprintf("%lld", (long long)json_integer_value(dsv))
					  : json_string(dsv ? json_string_value(dsv) : "default");
	json_t *res = json_pack("{s:O,s:o,s:n,s:b,s:b,s:o,s:[]}", "id", json_object_get(spec, "id"),
				"data_source", ds, "sandbox_id", "ok", 0, "interrupted", 1,
				"infra_error", infra("queued", SBX_E_CANCELLED, &err), "commands");
	char *line = res ? json_dumps(res, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	if (line)
		fprintf(ro->out, "%s\n", line);
	free(line);
	json_decref(res);
}

/* Waits (under the lock) until fewer than ro->limit tasks run; 0 when the rollout ended or
 * was interrupted meanwhile. The wait is bounded so an interrupt is seen. */
static int wait_for_room_locked(rollout *ro)
{
	while (ro->active >= ro->limit && !interrupted) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&ro->room, &ro->lock, &ts);
	}
	return !interrupted;
}

static void *worker(void *arg)
{
	rollout *ro = arg;
	pthread_mutex_lock(&ro->lock);
	for (;;) {
		if (ro->next >= ro->n || !wait_for_room_locked(ro) || ro->next >= ro->n)
			break;
		task *t = &ro->tasks[ro->next++];
		ro->active++;
		for (;;) {
			pthread_mutex_unlock(&ro->lock);
			int again = run_task(ro, t);
			pthread_mutex_lock(&ro->lock);
			ro->active--;
			pthread_cond_broadcast(&ro->room);
			if (!again)
				break;
			if (!wait_for_room_locked(ro)) {
				/* Interrupted while waiting to run it again: its first run left
				 * no result, so it is one of those not started. */
				mark_not_started(ro, t);
				break;
			}
			ro->active++;
		}
	}
	pthread_mutex_unlock(&ro->lock);
	return NULL;
}

/* A task's data_source names a configured one (by name, "default", or index); otherwise
 * prints "TASKS:LINE: ..." with the configured names and returns 0. */
static int data_source_known(const sbx_host *h, json_t *dsv, const char *file, size_t line)
{
	size_t n = sbx_data_source_count(h);
	if (!dsv)
		return 1;
	if (json_is_integer(dsv)) {
		json_int_t i = json_integer_value(dsv);
		if (i >= 0 && (size_t)i < n)
			return 1;
	} else {
		const char *want = json_string_value(dsv);
		if (strcmp(want, "default") == 0)
			return 1;
		for (size_t i = 0; i < n; i++) {
			const char *name = NULL;
			if (sbx_data_source_get(h, i, &name, NULL, NULL) == SBX_OK && name &&
			    strcmp(name, want) == 0)
				return 1;
		}
		char *end = NULL;
		unsigned long long idx = strtoull(want, &end, 10);
		if (want[0] >= '0' && want[0] <= '9' && !*end && idx < n)
			return 1;
	}
	char names[400] = "default";
	for (size_t i = 0; i < n; i++) {
		const char *name = NULL;
		size_t used = strlen(names);
		if (sbx_data_source_get(h, i, &name, NULL, NULL) != SBX_OK || !name)
			continue;
		if (used + strlen(name) + 8 >= sizeof(names)) {
			snprintf(names + used, sizeof(names) - used, ", ...");
			break;
		}
		snprintf(names + used, sizeof(names) - used, ", %s", name);
	}
	char *text = json_dumps(dsv, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
	fprintf(stderr, "sbx: rollout: %s:%zu: unknown data_source %s (configured: %s)\n", file,
		line, text ? text : "?", names);
	free(text);
	return 0;
}

/* --resume: rewrites `path` keeping the result lines of tasks that finished (not
 * interrupted, whole JSON) and drops those tasks from the run. A missing file resumes
 * nothing. Nonzero (after a message) when the file cannot be read or rewritten. */
static int keep_finished(rollout *ro, const char *path)
{
	FILE *in = fopen(path, "r");
	if (!in) {
		if (errno == ENOENT)
			return 0;
		fprintf(stderr, "sbx: rollout: cannot read %s: %s\n", path, strerror(errno));
		return 1;
	}
	char *tmp = NULL;
	if (asprintf(&tmp, "%s.resume-%ld", path, (long)getpid()) < 0) {
		fclose(in);
		fprintf(stderr, "sbx: rollout: out of memory\n");
		return 1;
	}
	FILE *outf = fopen(tmp, "w");
	json_t *done = json_object();
	int rc = 0;
	if (!outf || !done) {
		fprintf(stderr, "sbx: rollout: cannot write %s: %s\n", tmp, strerror(errno));
		rc = 1;
		goto out;
	}
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, in) >= 0) {
		json_t *r = json_loads(line, 0, NULL);
		json_t *id = json_object_get(r, "id");
		if (r && (json_is_string(id) || json_is_integer(id)) &&
		    !json_is_true(json_object_get(r, "interrupted"))) {
			json_t *key = json_is_integer(id)
					  ? json_sprintf("#%lld", (long long)json_integer_value(id))
					  : json_sprintf("$%s", json_string_value(id));
			if (key && !json_object_get(done, json_string_value(key))) {
				json_object_set_new(done, json_string_value(key), json_true());
				fputs(line, outf);
				if (line[strlen(line) - 1] != '\n')
					fputc('\n', outf);
			}
			json_decref(key);
		}
		json_decref(r);
	}
	free(line);
	if (fclose(outf) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "sbx: rollout: cannot rewrite %s: %s\n", path, strerror(errno));
		outf = NULL;
		rc = 1;
		goto out;
	}
	outf = NULL;
	size_t k = 0;
	for (size_t i = 0; i < ro->n; i++) {
		json_t *id = json_object_get(ro->tasks[i].spec, "id");
		json_t *key = json_is_integer(id)
				  ? json_sprintf("#%lld", (long long)json_integer_value(id))
				  : json_sprintf("$%s", json_string_value(id));
		int skip = key && json_object_get(done, json_string_value(key));
		json_decref(key);
		if (skip)
			json_decref(ro->tasks[i].spec);
		else
			ro->tasks[k++] = ro->tasks[i];
	}
	fprintf(stderr, "rollout: resuming: %zu of %zu tasks already done\n", ro->n - k, ro->n);
	ro->n = k;
out:
	if (outf) {
		fclose(outf);
		unlink(tmp);
	}
	free(tmp);
	json_decref(done);
	fclose(in);
	return rc;
}

int cmd_rollout(const cli_globals *g, int argc, char **argv)
{
	const char *output = NULL, *tasks_path = NULL;
	int resume = 0;
	cli_globals local = *g;
	long conc = 8;
	double wait = 600;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(cli_help_rollout, stdout);
			return CLI_OK;
		} else if (strcmp(a, "--output") == 0 && i + 1 < argc) {
			output = argv[++i];
		} else if (strcmp(a, "--config") == 0 && i + 1 < argc) {
			local.config = argv[++i];
		} else if (strcmp(a, "--resume") == 0) {
			resume = 1;
		} else if (strcmp(a, "--concurrency") == 0 && i + 1 < argc) {
			char *end = NULL;
			conc = strtol(argv[++i], &end, 10);
			if (*end || conc < 1 || conc > 4096)
				return cli_usage_error(cli_help_rollout, "rollout",
						       "--concurrency wants 1..4096, got '%s'",
						       argv[i]);
		} else if (strcmp(a, "--wait") == 0 && i + 1 < argc) {
			wait = cli_parse_seconds(argv[++i]);
			if (wait < 0)
				return cli_usage_error(cli_help_rollout, "rollout",
						       "--wait wants seconds, got '%s'", argv[i]);
		} else if (a[0] == '-' && a[1]) {
			return cli_usage_error(cli_help_rollout, "rollout", "bad option '%s'", a);
		} else if (!tasks_path) {
			tasks_path = a;
		} else {
			return cli_usage_error(cli_help_rollout, "rollout",
					       "unexpected argument '%s'", a);
		}
	}
	if (!tasks_path)
		return cli_usage_error(cli_help_rollout, "rollout", "missing TASKS.jsonl");
	if (resume && !output)
		return cli_usage_error(cli_help_rollout, "rollout", "--resume needs --output FILE");
	FILE *in = strcmp(tasks_path, "-") == 0 ? stdin : fopen(tasks_path, "r");
	if (!in) {
		fprintf(stderr, "sbx: rollout: cannot open %s: %s\n", tasks_path, strerror(errno));
		return CLI_USAGE;
	}
	rollout ro = {.wait = wait};
	pthread_mutex_init(&ro.lock, NULL);
	pthread_cond_init(&ro.freed, NULL);
	pthread_cond_init(&ro.room, NULL);
	size_t cap = 0, lineno = 0;
	char *line = NULL;
	size_t lcap = 0;
	int bad = 0;
	ssize_t got;
	json_t *seen = json_object();
	if (!seen) {
		fprintf(stderr, "sbx: rollout: out of memory\n");
		if (in != stdin)
			fclose(in);
		return CLI_INFRA;
	}
	while ((got = getline(&line, &lcap, in)) >= 0) {
		lineno++;
		size_t k = 0;
		while (line[k] == ' ' || line[k] == '\t' || line[k] == '\n' || line[k] == '\r')
			k++;
		if (!line[k])
			continue;
		char why[512];
		json_t *t = task_parse(line, (size_t)got, lineno, seen, why, sizeof(why));
		if (!t) {
			fprintf(stderr, "sbx: rollout: %s:%zu: %s\n", tasks_path, lineno, why);
			bad = 1;
			continue;
		}
		if (ro.n == cap) {
			cap = cap ? cap * 2 : 64;
			task *nt = realloc(ro.tasks, cap * sizeof(*nt));
			if (!nt) {
				json_decref(t);
				bad = 1;
				break;
			}
			ro.tasks = nt;
		}
		ro.tasks[ro.n].spec = t;
		ro.tasks[ro.n].result = NULL;
		ro.tasks[ro.n].line = lineno;
		ro.tasks[ro.n].sandbox[0] = '\0';
		ro.n++;
	}
	free(line);
	json_decref(seen);
	if (in != stdin)
		fclose(in);
	int rc = CLI_OK;
	if (bad) {
		rc = CLI_USAGE; /* the whole file is checked before anything runs */
		goto out;
	}
	rc = cli_open_host(&local, &ro.host);
	if (rc != CLI_OK)
		goto out;
	/* Every task's data source must exist before anything runs. */
	for (size_t i = 0; i < ro.n; i++)
		if (!data_source_known(ro.host, json_object_get(ro.tasks[i].spec, "data_source"),
				       tasks_path, ro.tasks[i].line))
			bad = 1;
	if (bad) {
		rc = CLI_USAGE;
		goto out;
	}
	if (resume && keep_finished(&ro, output) != 0) {
		rc = CLI_USAGE;
		goto out;
	}
	ro.out = output ? fopen(output, resume ? "a" : "w") : stdout;
	if (!ro.out) {
		fprintf(stderr, "sbx: rollout: cannot write %s: %s\n", output, strerror(errno));
		rc = CLI_USAGE;
		goto out;
	}
	ro.progress = isatty(2);
	ro.conc = (size_t)conc;
	ro.limit = fds_budget(&ro, (size_t)conc);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = (int)SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ro.started = now();
	pthread_t watch;
	int have_watcher = pthread_create(&watch, NULL, watcher, &ro) == 0;
	size_t nthreads = ro.limit < ro.n ? ro.limit : ro.n;
	pthread_t *th = calloc(nthreads ? nthreads : 1, sizeof(*th));
	size_t started = 0;
	for (size_t i = 0; th && i < nthreads; i++)
		if (pthread_create(&th[i], NULL, worker, &ro) == 0)
			started++;
	if (started == 0 && ro.n)
		worker(&ro);
	for (size_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	free(th);
	pthread_mutex_lock(&ro.lock);
	ro.finished = 1;
	pthread_mutex_unlock(&ro.lock);
	if (have_watcher)
		pthread_join(watch, NULL);
	for (size_t i = ro.next; i < ro.n; i++)
		mark_not_started(&ro, &ro.tasks[i]);
	fflush(ro.out);
	double wall = now() - ro.started;
	if (ro.progress)
		fputc('\n', stderr);
	fprintf(stderr,
		"rollout: %zu tasks: %zu ok, %zu with failing commands, %zu infrastructure errors; "
		"%.2f s, %.1f tasks/s\n",
		ro.n, ro.ok, ro.failed, ro.infra, wall, wall > 0 ? (double)ro.n / wall : 0.0);
	if (output)
		fclose(ro.out);
	rc = ro.infra ? CLI_FAIL : CLI_OK;
	if (interrupted) {
		fprintf(stderr, "rollout: interrupted: %zu of %zu tasks not started\n",
			ro.n - ro.next, ro.n);
		rc = 128 + SIGINT;
	}
out:
	for (size_t i = 0; i < ro.n; i++)
		json_decref(ro.tasks[i].spec);
	free(ro.tasks);
	sbx_host_free(ro.host);
	pthread_cond_destroy(&ro.freed);
	pthread_cond_destroy(&ro.room);
	pthread_mutex_destroy(&ro.lock);
	return rc;
}

/* sbx rollout: a JSONL file of tasks, one sandbox per task (create -> files -> commands ->
 * delete, the delete on every path), run by a pool of worker threads; one JSONL result per
 * task, infrastructure errors kept apart from command failures. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char rollout_usage[] =
    "usage: sbx rollout [--config FILE] [--output RESULTS.jsonl] [--concurrency N] TASKS.jsonl\n"
    "Each line of TASKS is an object: id, optional data_source (name or index), optional\n"
    "image (or metadata.docker_image), commands (shell strings, or objects with cmd or argv\n"
    "and optional timeout, cwd, env), optional files ({path: content}) written first and an\n"
    "optional timeout for every command. Results go to --output (default stdout), one line\n"
    "per task; a summary goes to stderr. Exit status 0 when no task met an infrastructure\n"
    "error, 1 otherwise, 2 for bad input.\n";

typedef struct task {
	json_t *spec;
	json_t *result;
} task;

typedef struct rollout {
	sbx_host *host;
	task *tasks;
	size_t n, next, done, ok, failed, infra;
	pthread_mutex_t lock;
	FILE *out;
	int progress;
	double started;
} rollout;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Checks one task line; on error prints "TASKS:LINE: message" and returns nonzero. */
static int validate(json_t *t, const char *file, size_t line)
{
	const char *why = NULL;
	json_t *cmds = json_object_get(t, "commands");
	json_t *id = json_object_get(t, "id");
	json_t *ds = json_object_get(t, "data_source");
	json_t *files = json_object_get(t, "files");
	json_t *image = json_object_get(t, "image");
	json_t *meta = json_object_get(t, "metadata");
	json_t *timeout = json_object_get(t, "timeout");
	if (!json_is_object(t))
		why = "a task must be a JSON object";
	else if (!id || !(json_is_string(id) || json_is_integer(id)))
		why = "'id' (a string or integer) is required";
	else if (!json_is_array(cmds))
		why = "'commands' must be a list";
	else if (ds && !json_is_string(ds) && !json_is_integer(ds))
		why = "'data_source' must be a name or an index";
	else if (files && !json_is_object(files))
		why = "'files' must be an object {path: content}";
	else if (image && !json_is_string(image))
		why = "'image' must be a string";
	else if (meta && !json_is_object(meta))
		why = "'metadata' must be an object";
	else if (timeout && !json_is_number(timeout))
		why = "'timeout' must be a number of seconds";
	const char *key;
	json_t *v;
	if (!why && files) {
		json_object_foreach(files, key, v) if (!json_is_string(v)) why =
		    "every value of 'files' must be a string";
	}
	size_t i;
	json_array_foreach(why ? NULL : cmds, i, v)
	{
		if (json_is_string(v))
			continue;
		json_t *cmd = json_object_get(v, "cmd"), *argv = json_object_get(v, "argv");
		if (!json_is_object(v) || (!json_is_string(cmd) == !json_is_array(argv))) {
			why = "each command must be a string or an object with 'cmd' or 'argv'";
			break;
		}
	}
	if (!why)
		return 0;
	fprintf(stderr, "sbx: rollout: %s:%zu: %s\n", file, line, why);
	return 1;
}

static json_t *infra(const char *stage, int status, const sbx_error *err)
{
	return json_pack("{s:s,s:s,s:s}", "stage", stage, "status", sbx_status_name(status),
			 "message", err->message[0] ? err->message : sbx_status_message(status));
}

static void run_task(rollout *ro, task *t)
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
	int st = sbx_create(ro->host, &co, id, &err);
	double t_create = now() - t0;
	int all_ok = st == SBX_OK;
	if (st != SBX_OK)
		infra_err = infra("create", st, &err);
	const char *path;
	json_t *v;
	json_object_foreach(st == SBX_OK ? json_object_get(spec, "files") : NULL, path, v)
	{
		const char *content = json_string_value(v);
		st = sbx_write_file(ro->host, id, path, content, json_string_length(v), 0, &err);
		if (st != SBX_OK) {
			infra_err = infra("files", st, &err);
			all_ok = 0;
			break;
		}
	}
	double dflt_timeout = json_is_number(json_object_get(spec, "timeout"))
				  ? json_number_value(json_object_get(spec, "timeout"))
				  : -1;
	size_t i;
	json_array_foreach(infra_err ? NULL : json_object_get(spec, "commands"), i, v)
	{
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
				for (size_t k = 0; argv && k < json_array_size(av); k++)
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
		if (st != SBX_OK) {
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
		int dst = sbx_destroy(ro->host, id, &derr);
		if (dst != SBX_OK && !infra_err) {
			infra_err = infra("delete", dst, &derr);
			all_ok = 0;
		}
	}
	json_object_set_new(res, "sandbox_id", id[0] ? json_string(id) : json_null());
	json_object_set_new(res, "ok", json_boolean(all_ok && !infra_err));
	json_object_set_new(res, "infra_error", infra_err ? infra_err : json_null());
	json_object_set_new(res, "commands", cmds);
	json_object_set_new(res, "timings",
			    json_pack("{s:f,s:f}", "create", t_create, "total", now() - t0));
	t->result = res;
	pthread_mutex_lock(&ro->lock);
	ro->done++;
	if (infra_err)
		ro->infra++;
	else if (all_ok)
		ro->ok++;
	else
		ro->failed++;
	char *line = json_dumps(res, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (line) {
		fprintf(ro->out, "%s\n", line);
		fflush(ro->out);
		free(line);
	}
	json_decref(res);
	t->result = NULL;
	if (ro->progress)
		fprintf(stderr, "\rrollout: %zu/%zu done, %zu ok, %zu failed, %zu infra errors",
			ro->done, ro->n, ro->ok, ro->failed, ro->infra);
	pthread_mutex_unlock(&ro->lock);
}

static void *worker(void *arg)
{
	rollout *ro = arg;
	for (;;) {
		pthread_mutex_lock(&ro->lock);
		size_t i = ro->next < ro->n ? ro->next++ : ro->n;
		pthread_mutex_unlock(&ro->lock);
		if (i >= ro->n)
			return NULL;
		run_task(ro, &ro->tasks[i]);
	}
}

int cmd_rollout(const cli_globals *g, int argc, char **argv)
{
	const char *output = NULL, *tasks_path = NULL;
	cli_globals local = *g;
	long conc = 8;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(rollout_usage, stdout);
			return CLI_OK;
		} else if (strcmp(a, "--output") == 0 && i + 1 < argc) {
			output = argv[++i];
		} else if (strcmp(a, "--config") == 0 && i + 1 < argc) {
			local.config = argv[++i];
		} else if (strcmp(a, "--concurrency") == 0 && i + 1 < argc) {
			char *end = NULL;
			conc = strtol(argv[++i], &end, 10);
			if (*end || conc < 1 || conc > 4096)
				return cli_usage_error(rollout_usage, "rollout",
						       "--concurrency wants 1..4096, got '%s'",
						       argv[i]);
		} else if (a[0] == '-' && a[1]) {
			return cli_usage_error(rollout_usage, "rollout", "bad option '%s'", a);
		} else if (!tasks_path) {
			tasks_path = a;
		} else {
			return cli_usage_error(rollout_usage, "rollout", "unexpected argument '%s'",
					       a);
		}
	}
	if (!tasks_path)
		return cli_usage_error(rollout_usage, "rollout", "missing TASKS.jsonl");
	FILE *in = strcmp(tasks_path, "-") == 0 ? stdin : fopen(tasks_path, "r");
	if (!in) {
		fprintf(stderr, "sbx: rollout: cannot open %s\n", tasks_path);
		return CLI_USAGE;
	}
	rollout ro = {0};
	pthread_mutex_init(&ro.lock, NULL);
	size_t cap = 0, lineno = 0;
	char *line = NULL;
	size_t lcap = 0;
	int bad = 0;
	ssize_t got;
	while ((got = getline(&line, &lcap, in)) >= 0) {
		lineno++;
		size_t k = 0;
		while (line[k] == ' ' || line[k] == '\t' || line[k] == '\n' || line[k] == '\r')
			k++;
		if (!line[k])
			continue;
		json_error_t jerr;
		json_t *t = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
		if (!t) {
			fprintf(stderr, "sbx: rollout: %s:%zu: not valid JSON: %s\n", tasks_path,
				lineno, jerr.text);
			bad = 1;
			continue;
		}
		if (validate(t, tasks_path, lineno)) {
			json_decref(t);
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
		ro.n++;
	}
	free(line);
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
	ro.out = output ? fopen(output, "w") : stdout;
	if (!ro.out) {
		fprintf(stderr, "sbx: rollout: cannot write %s\n", output);
		rc = CLI_USAGE;
		goto out;
	}
	ro.progress = isatty(2);
	ro.started = now();
	size_t nthreads = (size_t)conc < ro.n ? (size_t)conc : ro.n;
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
out:
	for (size_t i = 0; i < ro.n; i++)
		json_decref(ro.tasks[i].spec);
	free(ro.tasks);
	sbx_host_free(ro.host);
	pthread_mutex_destroy(&ro.lock);
	return rc;
}

/* sbx file read|write|ls|stat|mkdir|rm, and sbx ls / sbx gc over the ledger. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char *kind_name(uint32_t k)
{
	return k == SBX_FILE_REGULAR   ? "file"
	       : k == SBX_FILE_DIR     ? "dir"
	       : k == SBX_FILE_SYMLINK ? "symlink"
				       : "other";
}

static json_t *info_json(const sbx_file_info *fi)
{
	/* The name's exact bytes (invalid UTF-8 as U+FFFD): json_pack refuses invalid UTF-8. */
	return json_pack("{s:o,s:s,s:i,s:I,s:I}", "name",
			 cli_json_bytes(fi->name, strlen(fi->name)), "kind", kind_name(fi->kind),
			 "mode", (int)fi->mode, "size", (json_int_t)fi->size, "mtime",
			 (json_int_t)fi->mtime);
}

int cmd_file(const cli_globals *g, int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(cli_help_file, stdout);
		return CLI_OK;
	}
	if (argc < 2)
		return cli_usage_error(cli_help_file, "file", "missing operation");
	const char *op = argv[1];
	int flag = 0, i = 2;
	if (i < argc && (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "-p") == 0 ||
			 strcmp(argv[i], "-r") == 0)) {
		flag = 1;
		i++;
	}
	int want = strcmp(op, "write") == 0 ? -1 : 2;
	int left = argc - i;
	if ((want == 2 && left != 2) || (want == -1 && left != 2 && left != 3))
		return cli_usage_error(cli_help_file, "file", "wrong arguments for '%s'", op);
	const char *id = argv[i], *path = argv[i + 1];
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	sbx_error err = {0};
	int st = SBX_OK;
	if (strcmp(op, "read") == 0) {
		void *data = NULL;
		size_t len = 0;
		st = sbx_read_file(h, id, path, &data, &len, &err);
		if (st == SBX_OK)
			fwrite(data, 1, len, stdout);
		sbx_free(data);
	} else if (strcmp(op, "write") == 0) {
		FILE *f = left == 3 ? fopen(argv[i + 2], "rb") : stdin;
		if (!f) {
			fprintf(stderr, "sbx: file: cannot open %s: %s\n", cli_msg(argv[i + 2]),
				strerror(errno));
			sbx_host_free(h);
			return CLI_USAGE;
		}
		size_t cap = 65536, n = 0, got;
		char *buf = malloc(cap);
		while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
			n += got;
			if (n == cap) {
				char *nb = realloc(buf, cap *= 2);
				if (!nb) {
					free(buf);
					buf = NULL;
				}
				buf = nb;
			}
		}
		if (f != stdin)
			fclose(f);
		st = buf ? sbx_write_file(h, id, path, buf, n, 0, &err) : SBX_E_NOMEM;
		free(buf);
	} else if (strcmp(op, "ls") == 0) {
		sbx_file_info *ents = NULL;
		size_t n = 0;
		st = sbx_list_dir(h, id, path, &ents, &n, &err);
		json_t *arr = json_array();
		for (size_t k = 0; st == SBX_OK && k < n; k++) {
			if (flag)
				json_array_append_new(arr, info_json(&ents[k]));
			else
				printf("%-7s %10llu %s\n", kind_name(ents[k].kind),
				       (unsigned long long)ents[k].size, cli_q(ents[k].name));
		}
		if (st == SBX_OK && flag)
			cli_print_json(arr);
		json_decref(arr);
		sbx_free(ents);
	} else if (strcmp(op, "stat") == 0) {
		sbx_file_info fi = {0};
		SBX_INIT_HEADER(fi);
		st = sbx_stat(h, id, path, &fi, &err);
		if (st == SBX_OK) {
			json_t *j = info_json(&fi);
			if (flag)
				cli_print_json(j);
			else
				printf("%s %s %o %llu\n", cli_q(fi.name), kind_name(fi.kind),
				       fi.mode, (unsigned long long)fi.size);
			json_decref(j);
		}
	} else if (strcmp(op, "mkdir") == 0) {
		st = sbx_mkdir(h, id, path, flag, &err);
	} else if (strcmp(op, "rm") == 0) {
		st = sbx_remove(h, id, path, flag, &err);
	} else {
		sbx_host_free(h);
		return cli_usage_error(cli_help_file, "file", "unknown operation '%s'", op);
	}
	if (st != SBX_OK)
		rc = cli_fail("file", st, &err);
	sbx_host_free(h);
	return rc;
}

typedef struct ls_filter {
	const char *alias, *data_source, *run, *state;
	int all, json, quiet, no_trunc;
	time_t now;
	json_t *rows;
} ls_filter;

/* docker ps's habit: 12 characters of the backend id in the table. */
static void short_id(const char *id, int no_trunc, char *buf, size_t cap)
{
	const char *colon = strchr(id, ':');
	if (no_trunc || !colon || strlen(colon + 1) <= 12)
		snprintf(buf, cap, "%s", id);
	else
		snprintf(buf, cap, "%.*s%.12s", (int)(colon + 1 - id), id, colon + 1);
}

static void age(time_t now, int64_t created, char *buf, size_t cap)
{
	long long s = created > 0 && now > created ? (long long)(now - created) : 0;
	if (s < 120)
		snprintf(buf, cap, "%llds", s);
	else if (s < 7200)
		snprintf(buf, cap, "%lldm", s / 60);
	else if (s < 172800)
		snprintf(buf, cap, "%lldh", s / 3600);
	else
		snprintf(buf, cap, "%lldd", s / 86400);
}

static int ls_row(void *ctx, const sbx_sandbox_record *r)
{
	ls_filter *f = ctx;
	if (!f->all && !f->state &&
	    (strcmp(r->state, "gone") == 0 || strcmp(r->state, "failed") == 0))
		return 0;
	if ((f->alias && strcmp(f->alias, r->alias) != 0) ||
	    (f->data_source && strcmp(f->data_source, r->data_source) != 0) ||
	    (f->run && strcmp(f->run, r->run_id) != 0) ||
	    (f->state && strcmp(f->state, r->state) != 0))
		return 0;
	if (f->quiet) {
		if (r->id[0])
			printf("%s\n", r->id);
	} else if (f->json) {
		json_array_append_new(
		    f->rows,
		    json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:I,s:I,s:s,s:b,s:s}", "id", r->id, "alias",
			      r->alias, "data_source", r->data_source, "owner_host", r->owner_host,
			      "owner_pid", (json_int_t)r->owner_pid, "run_id", r->run_id, "created",
			      (json_int_t)r->created, "expires", (json_int_t)r->expires, "state",
			      r->state, "owner_alive", (int)r->owner_alive, "error",
			      r->error ? r->error : ""));
	} else {
		char owner[64], id[SBX_ID_MAX], ago[32];
		if (r->owner_pid)
			snprintf(owner, sizeof(owner), "%lld%s", (long long)r->owner_pid,
				 r->owner_alive ? "" : " (dead)");
		else
			snprintf(owner, sizeof(owner), "detached");
		short_id(r->id[0] ? r->id : "(creating)", f->no_trunc, id, sizeof(id));
		age(f->now, r->created, ago, sizeof(ago));
		printf("%-*s %-9s %-5s %-12s %-16s %s\n", f->no_trunc ? 40 : 22, cli_q(id),
		       cli_q(r->state), ago, cli_q(r->data_source), owner, cli_q(r->run_id));
	}
	return 0;
}

/* --filter KEY=VALUE, as docker ps takes it. */
static int ls_filter_arg(ls_filter *f, const char *arg)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {{"state=", offsetof(ls_filter, state)},
		    {"data-source=", offsetof(ls_filter, data_source)},
		    {"alias=", offsetof(ls_filter, alias)},
		    {"run=", offsetof(ls_filter, run)}};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (strncmp(arg, keys[k].key, strlen(keys[k].key)) == 0) {
			*(const char **)((char *)f + keys[k].off) = arg + strlen(keys[k].key);
			return 0;
		}
	return -1;
}

static int ls_job(void *ctx, const sbx_job_info *info)
{
	json_array_append_new(ctx, cli_job_json(info));
	return 0;
}

int cmd_ls(const cli_globals *g, int argc, char **argv)
{
	ls_filter f = {.now = time(NULL)};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = strcmp(a, "--alias") == 0         ? &f.alias
				    : strcmp(a, "--data-source") == 0 ? &f.data_source
				    : strcmp(a, "--run") == 0         ? &f.run
				    : strcmp(a, "--state") == 0       ? &f.state
								      : NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(cli_help_ls, stdout);
			return CLI_OK;
		} else if (strcmp(a, "--json") == 0) {
			f.json = 1;
		} else if (strcmp(a, "--all") == 0 || strcmp(a, "-a") == 0) {
			f.all = 1;
		} else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
			f.quiet = 1;
		} else if (strcmp(a, "--no-trunc") == 0) {
			f.no_trunc = 1;
		} else if (strcmp(a, "--filter") == 0 && i + 1 < argc) {
			if (ls_filter_arg(&f, argv[++i]) != 0)
				return cli_usage_error(cli_help_ls, "ls",
						       "bad filter '%s' (state=, data-source=, "
						       "alias= or run=)",
						       argv[i]);
		} else if (slot && i + 1 < argc) {
			*slot = argv[++i];
		} else {
			return cli_usage_error(cli_help_ls, "ls", "bad argument '%s'", a);
		}
	}
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	f.rows = json_array();
	if (!f.json && !f.quiet)
		printf("%-*s %-9s %-5s %-12s %-16s %s\n", f.no_trunc ? 40 : 22, "ID", "STATE",
		       "AGE", "DATA SOURCE", "OWNER", "RUN");
	sbx_error err = {0};
	int st = sbx_ledger_list(h, ls_row, &f, &err);
	/* Jobs after the listing: the ledger is not read again inside its own walk. */
	for (size_t i = 0; st == SBX_OK && f.json && i < json_array_size(f.rows); i++) {
		json_t *row = json_array_get(f.rows, i), *jobs = json_array();
		const char *sid = json_string_value(json_object_get(row, "id"));
		if (sid && *sid)
			st = sbx_job_list(h, sid, SBX_JOB_LIST_CACHED, ls_job, jobs, &err);
		json_object_set_new(row, "jobs", jobs);
	}
	if (st != SBX_OK)
		rc = cli_fail("ls", st, &err);
	else if (f.json && !f.quiet)
		cli_print_json(f.rows);
	json_decref(f.rows);
	sbx_host_free(h);
	return rc;
}

typedef struct gc_out {
	int json, dry, failed;
	unsigned long counts[3];
	json_t *rows;
} gc_out;

static const char *const gc_actions[] = {"deleted", "skipped", "finished"};

static void gc_event(void *ctx, const sbx_gc_event *ev)
{
	gc_out *o = ctx;
	if (ev->status != SBX_OK)
		o->failed = 1;
	uint32_t a = ev->action < 3 ? ev->action : SBX_GC_SKIPPED;
	o->counts[a]++;
	if (o->json) {
		json_array_append_new(o->rows,
				      json_pack("{s:s,s:s,s:s,s:s,s:s}", "action", gc_actions[a],
						"id", ev->id, "token", ev->token, "reason",
						ev->reason, "status", sbx_status_name(ev->status)));
		return;
	}
	const char *verb = a == SBX_GC_DELETED && o->dry ? "would delete" : gc_actions[a];
	if (ev->id[0])
		printf("%s %s: %s", verb, cli_q(ev->id), cli_msg(ev->reason));
	else
		printf("%s create %s: %s", verb, cli_q(ev->token), cli_msg(ev->reason));
	if (ev->status != SBX_OK)
		printf(" -- failed: %s", sbx_status_message(ev->status));
	putchar('\n');
}

int cmd_gc(const cli_globals *g, int argc, char **argv)
{
	gc_out o = {0};
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(cli_help_gc, stdout);
			return CLI_OK;
		} else if (strcmp(argv[i], "--dry-run") == 0) {
			o.dry = 1;
		} else if (strcmp(argv[i], "--json") == 0) {
			o.json = 1;
		} else {
			return cli_usage_error(cli_help_gc, "gc", "bad argument '%s'", argv[i]);
		}
	}
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	o.rows = json_array();
	sbx_error err = {0};
	sbx_gc_opts go;
	memset(&go, 0, sizeof(go));
	SBX_INIT_HEADER(go);
	go.flags = o.dry ? SBX_GC_DRY_RUN : 0;
	go.on_event = gc_event;
	go.ctx = &o;
	int st = sbx_gc_run(h, &go, &err);
	if (st != SBX_OK)
		rc = cli_fail("gc", st, &err);
	else if (o.json)
		cli_print_json(o.rows);
	else
		printf("gc: %lu %s, %lu skipped, %lu finished\n", o.counts[SBX_GC_DELETED],
		       o.dry ? "to delete" : "deleted", o.counts[SBX_GC_SKIPPED],
		       o.counts[SBX_GC_FINISHED]);
	if (rc == CLI_OK && o.failed)
		rc = CLI_INFRA;
	json_decref(o.rows);
	sbx_host_free(h);
	return rc;
}

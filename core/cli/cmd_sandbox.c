/* sbx plugins | config check | create | exec | rm | pause | resume | status */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int wants_help(int argc, char **argv, const char *usage)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return 1;
		}
	}
	return 0;
}

/* --check: whether the backend can be used with the config in force: "ok" (nothing to
 * reach), "reachable", "unreachable" (the backend's info says so), "unusable" (it cannot start
 * with this config; why says why) or "faulty". */
static const char *plugin_check(sbx_host *h, const sbx_plugin_info *info, char *why, size_t cap)
{
	why[0] = '\0';
	if (info->state == SBX_PLUGIN_FAULTY) {
		snprintf(why, cap, "%s", info->reason ? info->reason : "");
		return "faulty";
	}
	char *backend = NULL;
	sbx_error err = {0};
	if (sbx_backend_info(h, info->alias, &backend, &err) != SBX_OK) {
		snprintf(why, cap, "%s", err.message);
		sbx_free(backend);
		return "unusable";
	}
	json_t *j = backend ? json_loads(backend, 0, NULL) : NULL;
	json_t *reach = json_object_get(json_object_get(j, "backend"), "reachable");
	const char *c =
	    json_is_boolean(reach) ? (json_is_true(reach) ? "reachable" : "unreachable") : "ok";
	const char *host =
	    json_string_value(json_object_get(json_object_get(j, "backend"), "host"));
	if (json_is_false(reach))
		snprintf(why, cap, "engine at %s does not answer", host ? host : "?");
	json_decref(j);
	sbx_free(backend);
	return c;
}

int cmd_plugins(const cli_globals *g, int argc, char **argv)
{
	if (wants_help(argc, argv, cli_help_plugins))
		return CLI_OK;
	int json = 0, check = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = 1;
		else if (strcmp(argv[i], "--check") == 0)
			check = 1;
		else
			return cli_usage_error(cli_help_plugins, "plugins", "unknown argument '%s'",
					       argv[i]);
	}
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	json_t *arr = json_array();
	size_t n = sbx_plugin_count(h);
	if (!json)
		printf("%-10s %-9s %-5s %s%s\n", "ALIAS", "STATE", "ABI",
		       check ? "CHECK        " : "", "PATH / REASON");
	for (size_t i = 0; i < n; i++) {
		sbx_plugin_info info = {0};
		SBX_INIT_HEADER(info);
		if (sbx_plugin_get(h, i, &info, NULL) != SBX_OK)
			continue;
		sbx_plugin_load(h, info.alias, NULL);
		sbx_plugin_get(h, i, &info, NULL);
		const char *state = info.state == SBX_PLUGIN_LOADED   ? "loaded"
				    : info.state == SBX_PLUGIN_FAULTY ? "faulty"
								      : "unloaded";
		char abi[16] = "-";
		if (info.state == SBX_PLUGIN_LOADED)
			snprintf(abi, sizeof(abi), "%u.%u", info.plugin_abi_major,
				 info.plugin_abi_minor);
		if (json) {
			json_t *o = json_object();
			json_object_set_new(o, "alias", json_string(info.alias));
			json_object_set_new(o, "path", json_string(info.path));
			json_object_set_new(o, "registry_file", json_string(info.registry_file));
			json_object_set_new(o, "state", json_string(state));
			json_object_set_new(o, "abi",
					    info.state == SBX_PLUGIN_LOADED ? json_string(abi)
									    : json_null());
			json_object_set_new(o, "version",
					    info.version ? json_string(info.version) : json_null());
			json_object_set_new(o, "reason",
					    info.reason ? json_string(info.reason) : json_null());
			char *backend = NULL;
			if (info.state == SBX_PLUGIN_LOADED &&
			    sbx_backend_info(h, info.alias, &backend, NULL) == SBX_OK && backend) {
				json_t *b = json_loads(backend, 0, NULL);
				json_object_set_new(o, "backend", b ? b : json_null());
			}
			sbx_free(backend);
			if (check) {
				char why[512];
				json_object_set_new(
				    o, "check",
				    json_string(plugin_check(h, &info, why, sizeof(why))));
				json_object_set_new(o, "check_reason",
						    why[0] ? json_string(why) : json_null());
			}
			json_array_append_new(arr, o);
		} else if (check) {
			char why[512];
			const char *c = plugin_check(h, &info, why, sizeof(why));
			printf("%-10s %-9s %-5s %-12s %s\n", info.alias, state, abi, c,
			       why[0] ? why : info.path);
		} else {
			printf("%-10s %-9s %-5s %s\n", cli_q(info.alias), state, abi,
			       info.state == SBX_PLUGIN_FAULTY && info.reason ? cli_msg(info.reason)
									      : cli_q(info.path));
		}
	}
	if (json)
		cli_print_json(arr);
	json_decref(arr);
	sbx_host_free(h);
	return CLI_OK;
}

int cmd_config(const cli_globals *g, int argc, char **argv)
{
	if (wants_help(argc, argv, cli_help_config))
		return CLI_OK;
	if (argc != 3 || strcmp(argv[1], "check") != 0)
		return cli_usage_error(cli_help_config, "config", "expected 'config check FILE'");
	sbx_host_options o = {0};
	SBX_INIT_HEADER(o);
	o.registry_path = g->registry;
	o.config_path = argv[2];
	sbx_host *h = NULL;
	sbx_error err = {0};
	int st = sbx_host_new(&o, &h, &err);
	if (st != SBX_OK) {
		cli_fail("config", st, &err);
		return st == SBX_E_CONFIG || st == SBX_E_IO ? CLI_FAIL : cli_exit_for(st);
	}
	size_t n = sbx_data_source_count(h);
	int bad = 0;
	for (size_t i = 0; i <= n; i++) {
		size_t idx = i == 0 ? SIZE_MAX : i - 1;
		const char *name = NULL, *alias = NULL;
		if (sbx_data_source_get(h, idx, &name, &alias, NULL) != SBX_OK)
			continue;
		memset(&err, 0, sizeof(err));
		st = sbx_data_source_check(h, idx, &err);
		printf("%-20s %s\n", cli_q(name), alias ? cli_q(alias) : "(no sandbox)");
		if (st != SBX_OK) {
			cli_fail("config", st, &err);
			bad = 1;
		}
	}
	sbx_host_free(h);
	return bad ? CLI_FAIL : CLI_OK;
}

static int parse_kv(char *s, sbx_kv *kv)
{
	char *eq = strchr(s, '=');
	if (!eq || eq == s)
		return -1;
	*eq = '\0';
	kv->key = s;
	kv->value = eq + 1;
	return 0;
}

int cmd_create(const cli_globals *g, int argc, char **argv)
{
	if (wants_help(argc, argv, cli_help_create))
		return CLI_OK;
	static const struct option opts[] = {
	    {"data-source", required_argument, NULL, 'd'},
	    {"image", required_argument, NULL, 'i'},
	    {"label", required_argument, NULL, 'l'},
	    {"env", required_argument, NULL, 'e'},
	    {"ttl", required_argument, NULL, 't'},
	    {"owner-pid", required_argument, NULL, 'p'},
	    {"wait", required_argument, NULL, 'w'},
	    {"share-dir", required_argument, NULL, 's'},
	    {"json", no_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	sbx_create_opts o = {0};
	SBX_INIT_HEADER(o);
	o.detached = 1;
	sbx_kv labels[64], env[64];
	int json = 0, c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.data_source = optarg;
			break;
		case 'i':
			o.image = optarg;
			break;
		case 'l':
		case 'e': {
			sbx_kv *arr = c == 'l' ? labels : env;
			uint32_t *cnt = c == 'l' ? &o.n_labels : &o.n_env;
			if (*cnt >= 64 || parse_kv(optarg, &arr[*cnt]) != 0)
				return cli_usage_error(
				    cli_help_create, "create",
				    "--%s wants KEY=VALUE (at most 64), got '%s'",
				    c == 'l' ? "label" : "env", optarg);
			(*cnt)++;
			break;
		}
		case 't': {
			double d = cli_parse_seconds(optarg);
			if (d < 0 || d != (double)(int64_t)d)
				return cli_usage_error(cli_help_create, "create",
						       "--ttl wants whole seconds, got '%s'",
						       optarg);
			o.ttl_seconds = (int64_t)d;
			break;
		}
		case 'p': {
			char *end = NULL;
			long long pid = strtoll(optarg, &end, 10);
			if (!*optarg || *end || pid <= 0)
				return cli_usage_error(cli_help_create, "create",
						       "--owner-pid wants a process id, got '%s'",
						       optarg);
			o.owner_pid = pid;
			break;
		}
		case 'w':
			o.wait_seconds = cli_parse_seconds(optarg);
			if (o.wait_seconds < 0)
				return cli_usage_error(cli_help_create, "create",
						       "--wait wants seconds, got '%s'", optarg);
			break;
		case 's':
			o.share_dir = optarg;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return cli_usage_error(cli_help_create, "create", "unknown option '%s'",
					       argv[optind - 1]);
		}
	}
	if (optind != argc)
		return cli_usage_error(cli_help_create, "create", "unexpected argument '%s'",
				       argv[optind]);
	o.labels = labels;
	o.env = env;
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	char id[SBX_ID_MAX];
	sbx_error err = {0};
	int st = sbx_create(h, &o, id, &err);
	if (st != SBX_OK) {
		rc = cli_fail("create", st, &err);
	} else if (json) {
		json_t *j = json_pack("{s:s}", "id", id);
		cli_print_json(j);
		json_decref(j);
	} else {
		printf("%s\n", id);
	}
	sbx_host_free(h);
	return rc;
}

static char *read_all(FILE *f, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
		if (n == cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	*len = n;
	return buf;
}

static void copy_file_to(const char *path, FILE *to)
{
	FILE *f = path ? fopen(path, "rb") : NULL;
	if (!f)
		return;
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, to);
	fclose(f);
	fflush(to);
}

int cmd_exec(const cli_globals *g, int argc, char **argv)
{
	if (wants_help(argc, argv, cli_help_exec))
		return CLI_OK;
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"timeout", required_argument, NULL, 't'},
	    {"cwd", required_argument, NULL, 'w'},
	    {"env", required_argument, NULL, 'e'},
	    {"user", required_argument, NULL, 'u'},
	    {"stdin-file", required_argument, NULL, 'f'},
	    {"full", no_argument, NULL, 'F'},
	    {"detach", no_argument, NULL, 'D'},
	    {"stdout-to", required_argument, NULL, 'O'},
	    {"stderr-to", required_argument, NULL, 'E'},
	    {NULL, 0, NULL, 0},
	};
	sbx_exec_opts o = {0};
	SBX_INIT_HEADER(o);
	o.timeout = -1;
	sbx_kv env[128];
	int json = 0, full = 0, stdin_tty = 0, c;
	const char *stdin_file = NULL;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+ic:", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'F':
			full = 1;
			break;
		case 'D':
			o.background = 1;
			break;
		case 't':
			o.timeout = cli_parse_seconds(optarg);
			if (o.timeout < 0)
				return cli_usage_error(cli_help_exec, "exec",
						       "--timeout wants seconds >= 0, got '%s'",
						       optarg);
			break;
		case 'w':
			o.cwd = optarg;
			break;
		case 'u':
			o.user = optarg;
			break;
		case 'e':
			if (o.n_env >= 128 || parse_kv(optarg, &env[o.n_env]) != 0)
				return cli_usage_error(cli_help_exec, "exec",
						       "--env wants KEY=VALUE, got '%s'", optarg);
			o.n_env++;
			break;
		case 'f':
			stdin_file = optarg;
			break;
		case 'O':
			o.stdout_path = optarg;
			break;
		case 'E':
			o.stderr_path = optarg;
			break;
		case 'i':
			stdin_tty = 1;
			break;
		case 'c':
			o.shell = optarg;
			break;
		default:
			return cli_usage_error(cli_help_exec, "exec", "unknown option '%s'",
					       argv[optind - 1]);
		}
	}
	o.env = env;
	if (optind >= argc)
		return cli_usage_error(cli_help_exec, "exec", "missing sandbox ID");
	const char *id = argv[optind++];
	/* `-c` may also follow the id: sbx exec ID -c 'cmd'. */
	if (!o.shell && optind + 1 < argc && strcmp(argv[optind], "-c") == 0) {
		o.shell = argv[optind + 1];
		optind += 2;
	}
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	if (o.shell && optind < argc)
		return cli_usage_error(cli_help_exec, "exec",
				       "give either -c 'SHELL' or -- ARGV, not both");
	if (!o.shell) {
		if (optind >= argc)
			return cli_usage_error(cli_help_exec, "exec",
					       "missing command: use -- ARGV... or -c 'SHELL'");
		o.argv = (const char *const *)(argv + optind);
	}
	char *stdin_buf = NULL;
	if (stdin_file || stdin_tty) {
		FILE *f = stdin_file ? fopen(stdin_file, "rb") : stdin;
		if (!f) {
			fprintf(stderr, "sbx: exec: cannot open --stdin-file %s: %s\n", stdin_file,
				strerror(errno));
			return CLI_USAGE;
		}
		stdin_buf = read_all(f, &o.stdin_len);
		if (f != stdin)
			fclose(f);
		if (!stdin_buf) {
			fprintf(stderr, "sbx: exec: out of memory reading stdin\n");
			return CLI_INFRA;
		}
		o.has_stdin = 1;
		o.stdin_data = stdin_buf;
	}
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK) {
		free(stdin_buf);
		return rc;
	}
	sbx_exec_result *r = NULL;
	sbx_error err = {0};
	int st = sbx_exec(h, id, &o, &r, &err);
	if (st != SBX_OK) {
		rc = cli_fail("exec", st, &err);
	} else if (o.background) {
		if (json) {
			json_t *j = json_pack("{s:s}", "job_id", r->job_id ? r->job_id : "");
			cli_print_json(j);
			json_decref(j);
		} else {
			printf("%s\n", r->job_id ? r->job_id : "");
		}
		sbx_exec_result_free(r);
	} else {
		if (json) {
			json_t *j = cli_exec_result_json(r);
			cli_print_json(j);
			json_decref(j);
		} else if (full && r->stdout_file && r->stderr_file) {
			copy_file_to(r->stdout_file, stdout);
			copy_file_to(r->stderr_file, stderr);
		} else {
			fwrite(r->stdout_text, 1, r->stdout_text_len, stdout);
			fwrite(r->stderr_text, 1, r->stderr_text_len, stderr);
		}
		fflush(stdout);
		if (r->timed_out) {
			if (!json)
				fprintf(stderr, "sbx: exec: command timed out after %.3f s\n",
					r->duration);
			rc = CLI_TIMEOUT;
		} else if (r->signal) {
			rc = 128 + r->signal;
		} else {
			rc = r->exit_code & 0xff;
		}
		sbx_exec_result_free(r);
	}
	fflush(stdout);
	sbx_host_free(h);
	free(stdin_buf);
	return rc;
}

int cmd_rm(const cli_globals *g, int argc, char **argv)
{
	if (wants_help(argc, argv, cli_help_rm))
		return CLI_OK;
	if (argc < 2)
		return cli_usage_error(cli_help_rm, "rm", "missing sandbox ID");
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	for (int i = 1; i < argc; i++) {
		sbx_error err = {0};
		int st = sbx_destroy(h, argv[i], &err);
		if (st != SBX_OK) {
			int e = cli_fail("rm", st, &err);
			if (e > rc)
				rc = e;
		}
	}
	sbx_host_free(h);
	return rc;
}

int cmd_lifecycle(const cli_globals *g, int argc, char **argv)
{
	if (wants_help(argc, argv, cli_help_lifecycle))
		return CLI_OK;
	const char *cmd = argv[0];
	const char *id = NULL;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 && strcmp(cmd, "status") == 0)
			json = 1;
		else if (argv[i][0] == '-' && argv[i][1])
			return cli_usage_error(cli_help_lifecycle, cmd, "unknown option '%s'",
					       argv[i]);
		else if (id)
			return cli_usage_error(cli_help_lifecycle, cmd, "expected one sandbox ID");
		else
			id = argv[i];
	}
	if (!id)
		return cli_usage_error(cli_help_lifecycle, cmd, "expected one sandbox ID");
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	sbx_error err = {0};
	int st;
	if (strcmp(cmd, "pause") == 0) {
		st = sbx_pause(h, id, &err);
	} else if (strcmp(cmd, "resume") == 0) {
		st = sbx_resume(h, id, &err);
	} else {
		uint32_t state = 0;
		st = sbx_status(h, id, &state, &err);
		static const char *const names[] = {"unknown", "creating", "running", "paused",
						    "gone"};
		const char *name = state < 5 ? names[state] : "unknown";
		char *more = NULL;
		if (st == SBX_OK && json)
			st = sbx_sandbox_info(h, id, &more, &err);
		if (st == SBX_OK && json) {
			json_t *b = json_loads(more, 0, NULL);
			json_t *j = json_pack("{s:s,s:s,s:o}", "id", id, "state", name, "backend",
					      b ? b : json_object());
			cli_print_json(j);
			json_decref(j);
			sbx_free(more);
		} else if (st == SBX_OK) {
			printf("%s\n", name);
		}
	}
	if (st != SBX_OK)
		rc = cli_fail(cmd, st, &err);
	sbx_host_free(h);
	return rc;
}

/* sbx session start | pause | end | show | ls: (user, session) -> sandbox (NexAU sessions). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_ITEMS 64

static const char *outcome_name(uint32_t how)
{
	switch (how) {
	case SBX_SESSION_REUSED:
		return "reused";
	case SBX_SESSION_RESUMED:
		return "resumed";
	case SBX_SESSION_RECREATED:
		return "recreated";
	}
	return "created";
}

static json_t *record_json(const sbx_session_record *r)
{
	json_t *assets = json_array();
	for (uint32_t i = 0; i < r->n_assets; i++)
		json_array_append_new(assets, json_pack("{s:s,s:s}", "host", r->assets[i].key,
							"sandbox", r->assets[i].value));
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o}", "user", r->user_id, "session",
			 r->session_id, "id", r->sandbox_id, "data_source", r->data_source, "image",
			 r->image, "state", r->state, "ttl", (json_int_t)r->ttl_seconds, "created",
			 (json_int_t)r->created, "updated", (json_int_t)r->updated, "assets",
			 assets);
}

typedef struct show_ctx {
	int json;
	json_t *arr; /* ls --json */
} show_ctx;

static int show_one(void *ctx, const sbx_session_record *r)
{
	show_ctx *s = ctx;
	if (s->arr) {
		json_array_append_new(s->arr, record_json(r));
		return 0;
	}
	if (s->json) {
		json_t *j = record_json(r);
		cli_print_json(j);
		json_decref(j);
		return 0;
	}
	printf("user:        %s\nsession:     %s\nid:          %s\nstate:       %s\n"
	       "data source: %s\nimage:       %s\nttl:         %lld\n",
	       cli_q(r->user_id), cli_q(r->session_id), cli_q(r->sandbox_id), cli_q(r->state),
	       r->data_source[0] ? cli_q(r->data_source) : "(default)",
	       r->image[0] ? cli_q(r->image) : "(default)", (long long)r->ttl_seconds);
	for (uint32_t i = 0; i < r->n_assets; i++)
		printf("asset:       %s -> %s\n", cli_q(r->assets[i].key),
		       cli_q(r->assets[i].value));
	return 0;
}

static int list_row(void *ctx, const sbx_session_record *r)
{
	(void)ctx;
	printf("%-16s %-16s %-8s %s\n", cli_q(r->user_id), cli_q(r->session_id), cli_q(r->state),
	       cli_q(r->sandbox_id));
	return 0;
}

static int split_at(char *s, char sep, sbx_kv *kv)
{
	char *p = strchr(s, sep);
	if (!p || p == s || !p[1])
		return -1;
	*p = '\0';
	kv->key = s;
	kv->value = p + 1;
	return 0;
}

int cmd_session(const cli_globals *g, int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(cli_help_session, stdout);
			return CLI_OK;
		}
	if (argc < 2)
		return cli_usage_error(cli_help_session, "session", "missing operation");
	const char *op = argv[1];
	if (strcmp(op, "start") != 0 && strcmp(op, "pause") != 0 && strcmp(op, "end") != 0 &&
	    strcmp(op, "show") != 0 && strcmp(op, "ls") != 0)
		return cli_usage_error(cli_help_session, "session", "unknown operation '%s'", op);
	int starting = strcmp(op, "start") == 0;
	static const struct option opts[] = {
	    {"user", required_argument, NULL, 'u'},
	    {"session", required_argument, NULL, 's'},
	    {"data-source", required_argument, NULL, 'd'},
	    {"image", required_argument, NULL, 'i'},
	    {"ttl", required_argument, NULL, 't'},
	    {"env", required_argument, NULL, 'e'},
	    {"asset", required_argument, NULL, 'a'},
	    {"json", no_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	const char *user = NULL, *session = NULL;
	sbx_create_opts o = {0};
	SBX_INIT_HEADER(o);
	sbx_kv env[MAX_ITEMS], assets[MAX_ITEMS];
	uint32_t n_assets = 0;
	int json = 0, c;
	optind = 2;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (!starting && c != 'u' && c != 's' && c != 'j')
			return cli_usage_error(cli_help_session, "session", "%s does not take '%s'",
					       op, argv[optind - 1]);
		switch (c) {
		case 'u':
			user = optarg;
			break;
		case 's':
			session = optarg;
			break;
		case 'd':
			o.data_source = optarg;
			break;
		case 'i':
			o.image = optarg;
			break;
		case 't': {
			double d = cli_parse_seconds(optarg);
			if (d < 0 || d != (double)(int64_t)d)
				return cli_usage_error(cli_help_session, "session",
						       "--ttl wants whole seconds, got '%s'",
						       optarg);
			o.ttl_seconds = (int64_t)d;
			break;
		}
		case 'e':
			if (o.n_env >= MAX_ITEMS || split_at(optarg, '=', &env[o.n_env]) != 0)
				return cli_usage_error(
				    cli_help_session, "session",
				    "--env wants KEY=VALUE (at most %d), got '%s'", MAX_ITEMS,
				    optarg);
			o.n_env++;
			break;
		case 'a':
			if (n_assets >= MAX_ITEMS || split_at(optarg, ':', &assets[n_assets]) != 0)
				return cli_usage_error(
				    cli_help_session, "session",
				    "--asset wants HOST_PATH:SANDBOX_PATH (at most %d), got '%s'",
				    MAX_ITEMS, optarg);
			n_assets++;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return cli_usage_error(cli_help_session, "session", "unknown option '%s'",
					       argv[optind - 1]);
		}
	}
	if (optind != argc)
		return cli_usage_error(cli_help_session, "session", "unexpected argument '%s'",
				       argv[optind]);
	int listing = strcmp(op, "ls") == 0;
	if (listing && (user || session))
		return cli_usage_error(cli_help_session, "session",
				       "ls takes no --user or --session");
	if (!listing && (!user || !session))
		return cli_usage_error(cli_help_session, "session", "%s needs --user and --session",
				       op);
	o.env = env;
	sbx_host *h = NULL;
	int rc = cli_open_host(g, &h);
	if (rc != CLI_OK)
		return rc;
	sbx_error err = {0};
	char cmd[32];
	snprintf(cmd, sizeof(cmd), "session %s", op);
	int st;
	if (starting) {
		char id[SBX_ID_MAX];
		uint32_t how = 0;
		st = sbx_session_start(h, user, session, &o, assets, n_assets, id, &how, &err);
		if (st == SBX_OK && json) {
			json_t *j = json_pack("{s:s,s:s}", "id", id, "outcome", outcome_name(how));
			cli_print_json(j);
			json_decref(j);
		} else if (st == SBX_OK) {
			printf("%s\n", id);
		}
	} else if (strcmp(op, "pause") == 0) {
		st = sbx_session_pause(h, user, session, &err);
	} else if (strcmp(op, "end") == 0) {
		st = sbx_session_end(h, user, session, &err);
	} else if (!listing) {
		show_ctx s = {json, NULL};
		st = sbx_session_get(h, user, session, show_one, &s, &err);
	} else {
		show_ctx s = {json, json ? json_array() : NULL};
		if (!json)
			printf("%-16s %-16s %-8s %s\n", "USER", "SESSION", "STATE", "ID");
		st = sbx_session_list(h, json ? show_one : list_row, &s, &err);
		if (st == SBX_OK && json)
			cli_print_json(s.arr);
		json_decref(s.arr);
	}
	if (st != SBX_OK)
		rc = st == SBX_E_NOT_FOUND ? (cli_fail(cmd, st, &err), CLI_FAIL)
					   : cli_fail(cmd, st, &err);
	sbx_host_free(h);
	return rc;
}

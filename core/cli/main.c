/* `sbx`: global options, subcommand dispatch, and the helpers every subcommand shares. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_exit_for(int status)
{
	switch (status) {
	case SBX_E_INVAL:
	case SBX_E_BAD_ID:
	case SBX_E_UNKNOWN_ALIAS:
	case SBX_E_CONFIG:
	case SBX_E_REGISTRY:
		return CLI_USAGE;
	}
	return CLI_INFRA;
}

int cli_json_errors;

/* One line, one prefix: "sbx: [cmd: ]message", or the JSON error object. */
void cli_report(const char *cmd, const char *status, const char *msg)
{
	if (strncmp(msg, "sbx: ", 5) == 0)
		msg += 5;
	size_t cl = cmd ? strlen(cmd) : 0;
	if (cmd && strncmp(msg, cmd, cl) == 0 && msg[cl] == ':')
		cmd = NULL;
	if (cli_json_errors) {
		char full[2200];
		snprintf(full, sizeof(full), "%s%s%s", cmd ? cmd : "", cmd ? ": " : "", msg);
		json_t *e = json_pack("{s:{s:s,s:o}}", "error", "status", status, "message",
				      cli_json_bytes(full, strlen(full)));
		cli_print_json(e);
		json_decref(e);
		return;
	}
	fprintf(stderr, "sbx: %s%s%s\n", cmd ? cmd : "", cmd ? ": " : "", cli_msg(msg));
}

int cli_fail(const char *cmd, int status, const sbx_error *err)
{
	const char *msg = err && err->message[0] ? err->message : sbx_status_message(status);
	cli_report(cmd, sbx_status_name(status), msg);
	return cli_exit_for(status);
}

int cli_usage_error(const char *usage, const char *cmd, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_report(strcmp(cmd, "sbx") == 0 ? NULL : cmd, "SBX_E_INVAL", msg);
	if (!cli_json_errors)
		fputs(usage, stderr);
	return CLI_USAGE;
}

int cli_open_host(const cli_globals *g, sbx_host **out)
{
	sbx_host_options o = {0};
	SBX_INIT_HEADER(o);
	o.registry_path = g->registry;
	o.config_path = g->config;
	sbx_error err = {0};
	int rc = sbx_host_new(&o, out, &err);
	if (rc != SBX_OK)
		return cli_fail(NULL, rc, &err); /* its messages name their subject */
	return CLI_OK;
}

double cli_parse_seconds(const char *s)
{
	char *end = NULL;
	errno = 0;
	double d = strtod(s, &end);
	if (!*s || *end || errno || d < 0 || d != d)
		return -1;
	return d;
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	unsigned char c = p[0];
	size_t n;
	unsigned int min;
	if (c < 0x80)
		return 1;
	if ((c & 0xE0) == 0xC0)
		n = 2, min = 0x80;
	else if ((c & 0xF0) == 0xE0)
		n = 3, min = 0x800;
	else if ((c & 0xF8) == 0xF0)
		n = 4, min = 0x10000;
	else
		return 0;
	if (n > left)
		return 0;
	unsigned int cp = c & (0x7F >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

json_t *cli_json_bytes(const char *data, size_t len)
{
	if (!data)
		return json_string("");
	char *buf = malloc(len * 3 + 1);
	if (!buf)
		return NULL;
	size_t o = 0;
	const unsigned char *p = (const unsigned char *)data;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(p + i, len - i);
		if (n == 0) {
			memcpy(buf + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
		} else {
			memcpy(buf + o, p + i, n);
			o += n;
			i += n;
		}
	}
	json_t *s = json_stringn(buf, o);
	free(buf);
	return s;
}

void cli_print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9));
	if (s) {
		fputs(s, stdout);
		fputc('\n', stdout);
		free(s);
	}
}

static json_t *opt_string(const char *s)
{
	return s ? cli_json_bytes(s, strlen(s)) : json_null();
}

json_t *cli_exec_result_json(const sbx_exec_result *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "exit_code", json_integer(r->exit_code));
	json_object_set_new(o, "signal", json_integer(r->signal));
	json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
	json_object_set_new(o, "oom_killed", json_boolean(r->oom_killed));
	json_object_set_new(o, "duration", json_real(r->duration));
	json_object_set_new(o, "stdout", cli_json_bytes(r->stdout_text, r->stdout_text_len));
	json_object_set_new(o, "stderr", cli_json_bytes(r->stderr_text, r->stderr_text_len));
	json_object_set_new(o, "truncated", json_boolean(r->truncated));
	json_object_set_new(o, "original_stdout_length",
			    json_integer((json_int_t)r->original_stdout_length));
	json_object_set_new(o, "original_stderr_length",
			    json_integer((json_int_t)r->original_stderr_length));
	json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)r->stdout_bytes));
	json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)r->stderr_bytes));
	json_object_set_new(o, "stdout_dropped", json_integer((json_int_t)r->stdout_dropped));
	json_object_set_new(o, "stderr_dropped", json_integer((json_int_t)r->stderr_dropped));
	json_object_set_new(o, "output_dir", opt_string(r->output_dir));
	json_object_set_new(o, "stdout_file", opt_string(r->stdout_file));
	json_object_set_new(o, "stderr_file", opt_string(r->stderr_file));
	return o;
}

/* Takes --registry FILE, --config FILE (or --registry=FILE, --config=FILE) at argv[*i] into
 * g, advancing *i past a separate value. Returns 1 when taken, 0 when argv[*i] is another
 * argument, -1 when the FILE is missing. */
static int take_file_option(char **argv, int argc, int *i, cli_globals *g)
{
	static const char *const names[] = {"--registry", "--config"};
	const char **slots[] = {&g->registry, &g->config};
	for (size_t k = 0; k < 2; k++) {
		size_t n = strlen(names[k]);
		if (strncmp(argv[*i], names[k], n) != 0)
			continue;
		if (argv[*i][n] == '=') {
			if (!argv[*i][n + 1])
				return -1;
			*slots[k] = argv[*i] + n + 1;
			return 1;
		}
		if (argv[*i][n] != '\0')
			continue;
		if (*i + 1 >= argc)
			return -1;
		*slots[k] = argv[++*i];
		return 1;
	}
	return 0;
}

/* -v/--verbose (info; twice: debug) and --log-level LEVEL set $SBX_LOG for this run. Returns
 * 1 when argv[*i] was one of them, 0 when not, -1 for a missing or unknown level. */
static int take_log_option(char **argv, int argc, int *i)
{
	const char *a = argv[*i], *level = NULL;
	if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
		const char *cur = getenv("SBX_LOG");
		level = cur && strcmp(cur, "info") == 0 ? "debug" : "info";
	} else if (strcmp(a, "-vv") == 0) {
		level = "debug";
	} else if (strncmp(a, "--log-level=", 12) == 0) {
		level = a + 12;
	} else if (strcmp(a, "--log-level") == 0) {
		if (*i + 1 >= argc)
			return -1;
		level = argv[++*i];
	} else {
		return 0;
	}
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (size_t k = 0; k < 4; k++)
		if (strcmp(level, names[k]) == 0)
			return setenv("SBX_LOG", level, 1) == 0 ? 1 : -1;
	return -1;
}

int main(int argc, char **argv)
{
	cli_globals g = {.registry = NULL, .config = getenv("SBX_CONFIG")};
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			fputs(cli_help_main, stdout);
			return CLI_OK;
		}
		if (strcmp(a, "--version") == 0) {
			printf("sbx %s (plugin ABI %d.%d)\n", sbx_version(), SBX_ABI_MAJOR,
			       SBX_ABI_MINOR);
			return CLI_OK;
		}
		int lv = take_log_option(argv, argc, &i);
		if (lv < 0)
			return cli_usage_error(cli_help_main, "sbx",
					       "%s needs a level: error, warn, info or debug", a);
		if (lv > 0)
			continue;
		int r = take_file_option(argv, argc, &i, &g);
		if (r < 0)
			return cli_usage_error(cli_help_main, "sbx", "%s needs a FILE argument", a);
		if (r == 0)
			return cli_usage_error(cli_help_main, "sbx", "unknown option '%s'", a);
	}
	if (i >= argc)
		return cli_usage_error(cli_help_main, "sbx", "no command given");
	const char *cmd = argv[i];
	int sub_argc = argc - i;
	char **sub_argv = argv + i;
	/* --config and --registry are accepted after the command too (sbx create --config F),
	 * up to the first "--" or "-c", after which everything belongs to the command run. */
	int w = 1;
	for (int r = 1; r < sub_argc; r++) {
		const char *a = sub_argv[r];
		if (strcmp(a, "--") == 0 || strcmp(a, "-c") == 0) {
			while (r < sub_argc)
				sub_argv[w++] = sub_argv[r++];
			break;
		}
		int took = take_file_option(sub_argv, sub_argc, &r, &g);
		if (took < 0)
			return cli_usage_error(cli_help_main, cmd, "%s needs a FILE argument", a);
		if (took > 0)
			continue;
		sub_argv[w++] = sub_argv[r];
	}
	sub_argc = w;
	sub_argv[w] = NULL;
	for (int r = 1; r < sub_argc; r++) {
		if (strcmp(sub_argv[r], "--") == 0 || strcmp(sub_argv[r], "-c") == 0)
			break;
		if (strcmp(sub_argv[r], "--json") == 0)
			cli_json_errors = 1;
	}
	static const struct {
		const char *name;
		int (*fn)(const cli_globals *, int, char **);
	} table[] = {
	    {"plugins", cmd_plugins},
	    {"config", cmd_config},
	    {"create", cmd_create},
	    {"exec", cmd_exec},
	    {"rm", cmd_rm},
	    {"pause", cmd_lifecycle},
	    {"resume", cmd_lifecycle},
	    {"status", cmd_lifecycle},
	    {"file", cmd_file},
	    {"ls", cmd_ls},
	    {"gc", cmd_gc},
	    {"rollout", cmd_rollout},
	    {"session", cmd_session},
	    {"job", cmd_job},
	};
	for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++)
		if (strcmp(cmd, table[t].name) == 0)
			return table[t].fn(&g, sub_argc, sub_argv);
	return cli_usage_error(cli_help_main, "sbx", "unknown command '%s'", cmd);
}

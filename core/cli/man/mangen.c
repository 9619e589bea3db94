/* sbx-mangen DIR: writes the manual pages of the `sbx` command into DIR from the help texts
 * of help.c, the same texts `sbx ... --help` prints: sbx.1, sbx-COMMAND.1 (pause's page also
 * serves resume and status), sbx-config.5 and sbx-plugin.7. Build-time only. */
#include <stdio.h>
#include <string.h>

#include "../help.h"

#ifndef SBX_VERSION
#define SBX_VERSION "unknown"
#endif

/* Text as roff no-fill lines: backslashes escaped, a leading '.' or '\'' made literal. */
static void body(FILE *f, const char *text)
{
	fputs(".nf\n", f);
	int bol = 1;
	for (const char *p = text; *p; p++) {
		if (bol && (*p == '.' || *p == '\''))
			fputs("\\&", f);
		if (*p == '\\')
			fputs("\\e", f);
		else if (*p == '-')
			fputs("\\-", f);
		else
			fputc(*p, f);
		bol = *p == '\n';
	}
	if (!bol)
		fputc('\n', f);
	fputs(".fi\n", f);
}

static int page(const char *dir, const char *name, int section, const char *summary,
		const char *text, const char *see_also)
{
	char path[4096], upper[128];
	snprintf(path, sizeof(path), "%s/%s.%d", dir, name, section);
	size_t i = 0;
	for (; name[i] && i + 1 < sizeof(upper); i++)
		upper[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32 : name[i]);
	upper[i] = '\0';
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, ".TH %s %d \"\" \"sbx %s\" \"sbx manual\"\n.SH NAME\n%s \\- %s\n", upper,
		section, SBX_VERSION, name, summary);
	fputs(".SH DESCRIPTION\n", f);
	body(f, text);
	fprintf(f, ".SH SEE ALSO\n%s\n", see_also);
	return fclose(f) != 0;
}

static int alias(const char *dir, const char *name, const char *target)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s.1", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, ".so man1/%s.1\n", target);
	return fclose(f) != 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: sbx-mangen DIR\n", stderr);
		return 2;
	}
	const char *dir = argv[1];
	static const char see[] = "sbx(1), sbx\\-config(5), sbx\\-plugin(7)";
	int bad = page(dir, "sbx", 1, "run commands in sandboxes of any backend", cli_help_main,
		       "sbx\\-config(5), sbx\\-plugin(7), and sbx\\-COMMAND(1) for each command");
	for (size_t i = 0; i < cli_help_n_pages; i++) {
		char name[64];
		snprintf(name, sizeof(name), "sbx-%s", cli_help_pages[i].name);
		bad |= page(dir, name, 1, cli_help_pages[i].summary, cli_help_pages[i].text, see);
	}
	bad |= alias(dir, "sbx-resume", "sbx-pause");
	bad |= alias(dir, "sbx-status", "sbx-pause");
	bad |= page(dir, "sbx-config", 5, "the sbx configuration file, registry and environment",
		    cli_help_config_file, "sbx(1), sbx\\-plugin(7)");
	bad |= page(dir, "sbx-plugin", 7, "writing a sandbox backend plugin for sbx",
		    cli_help_plugin_author, "sbx(1), sbx\\-config(5)");
	return bad;
}

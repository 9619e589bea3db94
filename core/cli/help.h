/* The help texts of the `sbx` command (help.c): one source for --help and the manual pages. */
#ifndef SBX_CLI_HELP_H
#define SBX_CLI_HELP_H

#include <stddef.h>

/* One command's manual page: sbx-<name>(1), with a one-line summary and the --help text. */
typedef struct cli_help_page {
	const char *name;
	const char *summary;
	const char *text;
} cli_help_page;

extern const cli_help_page cli_help_pages[];
extern const size_t cli_help_n_pages;

extern const char cli_help_main[];
extern const char cli_help_plugins[];
extern const char cli_help_config[];
extern const char cli_help_create[];
extern const char cli_help_exec[];
extern const char cli_help_rm[];
extern const char cli_help_lifecycle[];
extern const char cli_help_file[];
extern const char cli_help_ls[];
extern const char cli_help_job[];
extern const char cli_help_gc[];
extern const char cli_help_rollout[];
extern const char cli_help_session[];
extern const char cli_help_config_file[];   /* sbx-config(5) */
extern const char cli_help_plugin_author[]; /* sbx-plugin(7) */

#endif

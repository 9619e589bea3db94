/* A minimal host table for plugin parsers under a fuzzer (see plugin_host.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <sbx/support/host.h>

#include "plugin_host.h"

static void fuzz_log(int level, const char *alias, const char *fmt, ...)
{
	(void)level;
	(void)alias;
	(void)fmt;
}

static int fuzz_set_error(sbx_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		err->code = code;
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}

static const sbx_host_api fuzz_host = {
    .struct_size = sizeof(sbx_host_api),
    .log = fuzz_log,
    .alloc = malloc,
    .realloc = realloc,
    .free = free,
    .set_error = fuzz_set_error,
};

void fuzz_plugin_host(void)
{
	if (!sbxs_host)
		sbxs_host_set(&fuzz_host);
}

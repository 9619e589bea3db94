/* Structured log lines on stderr: "sbx: LEVEL SUBJECT: message". The level comes from
 * $SBX_LOG (error, warn, info, debug; default warn). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int log_threshold(void)
{
	const char *v = getenv("SBX_LOG");
	if (!v)
		return SBX_LOG_WARN;
	static const char *const names[] = {"error", "warn", "info", "debug"};
	for (int i = 0; i < 4; i++)
		if (strcmp(v, names[i]) == 0)
			return i;
	return SBX_LOG_WARN;
}

void sbx__logv(int level, const char *subject, const char *fmt, va_list ap)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	if (level < 0 || level > SBX_LOG_DEBUG || level > log_threshold())
		return;
	char raw[1024], line[1024];
	vsnprintf(raw, sizeof(raw), fmt, ap);
	sbx__escape_controls(raw, line, sizeof(line));
	/* One fprintf per line keeps lines from concurrent threads whole. */
	fprintf(stderr, "sbx: %s %s: %s\n", names[level], subject ? subject : "host", line);
}

void sbx__log(int level, const char *subject, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sbx__logv(level, subject, fmt, ap);
	va_end(ap);
}

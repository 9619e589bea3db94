/* Status names and messages (from the X-macro list) and the caller-owned sbx_error. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *sbx_status_name(int status)
{
	switch (status) {
#define SBX__NAME(name, value, msg) \
	case value:                 \
		return "SBX_" #name;
		SBX_STATUS_MAP(SBX__NAME)
#undef SBX__NAME
	}
	return "SBX_E_UNKNOWN";
}

const char *sbx_status_message(int status)
{
	switch (status) {
#define SBX__MSG(name, value, msg) \
	case value:                \
		return msg;
		SBX_STATUS_MAP(SBX__MSG)
#undef SBX__MSG
	}
	return "unknown status";
}

const char *sbx_version(void)
{
	return SBX_VERSION_STRING;
}

/* Cuts a message at a UTF-8 character boundary so a truncated message stays valid text. */
static void trim_utf8_tail(char *s, size_t len)
{
	size_t i = len;
	while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
		i--;
	if (i > 0) {
		unsigned char lead = (unsigned char)s[i - 1];
		size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
		if (len - (i - 1) < need)
			s[i - 1] = '\0';
	}
}

int sbx__nomem(sbx_error *err, const char *what)
{
	return sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory", what);
}

int sbx__set_errorv(sbx_error *err, int code, const char *fmt, va_list ap)
{
	if (!err)
		return code;
	err->code = code;
	char raw[sizeof(err->message)];
	int n = vsnprintf(raw, sizeof(raw), fmt, ap);
	if (n < 0)
		raw[0] = '\0';
	else if ((size_t)n >= sizeof(raw))
		trim_utf8_tail(raw, sizeof(raw) - 1);
	/* Messages quote paths, ids and names a sandbox may have chosen: one line, no ESC. */
	sbx__escape_controls(raw, err->message, sizeof(err->message));
	return code;
}

int sbx__set_error(sbx_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sbx__set_errorv(err, code, fmt, ap);
	va_end(ap);
	return code;
}

void sbx__error_prefix(sbx_error *err, const char *fmt, ...)
{
	if (!err)
		return;
	char prefix[256], old[sizeof(err->message)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->message, sizeof(old));
	sbx__set_error(err, err->code, "%s: %s", prefix, old);
}

/* Copies a plugin's error into err, supplying a message when the plugin left none. A status
 * that is not an sbx status (negative, garbage) becomes SBX_E_BACKEND naming the plugin. */
int sbx__plugin_error(sbx_error *err, const sbx_error *pe, int rc, const char *alias,
		      const char *op)
{
	if (rc <= 0 || strcmp(sbx_status_name(rc), "SBX_E_UNKNOWN") == 0)
		return sbx__set_error(
		    err, SBX_E_BACKEND,
		    "%s: %s: plugin returned %d, which is not an sbx failure status", alias, op,
		    rc);
	if (pe->message[0] == '\0')
		return sbx__set_error(err, rc, "%s: %s: %s", alias, op, sbx_status_message(rc));
	return sbx__set_error(err, rc, "%s", pe->message);
}

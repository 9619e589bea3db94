/* Text for the terminal. Names and messages come from sandboxes and callers (a file a command
 * created, a session id, a plugin's reason); printed raw, an ESC sequence would drive the
 * terminal and a newline would forge a line. What is printed for people is escaped as `ls -b`
 * does, with \e for ESC; --json output carries the exact bytes instead. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define RING 8
#define ROOM 16384

/* Length of the valid UTF-8 sequence at p (1..4), 0 when invalid. */
static size_t utf8_seq(const unsigned char *p)
{
	size_t n = p[0] < 0x80             ? 1
		   : (p[0] & 0xE0) == 0xC0 ? 2
		   : (p[0] & 0xF0) == 0xE0 ? 3
		   : (p[0] & 0xF8) == 0xF0 ? 4
					   : 0;
	if (n <= 1)
		return n;
	unsigned cp = p[0] & (0x7Fu >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3Fu);
	}
	static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

static const char *escape(const char *s, int backslash)
{
	static char ring[RING][ROOM];
	static unsigned next;
	char *out = ring[next++ % RING];
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		size_t n = utf8_seq(p);
		char esc[16] = "";
		if (n == 2 && p[0] == 0xC2 && p[1] < 0xA0)
			snprintf(esc, sizeof(esc), "\\xc2\\x%02x", p[1]); /* a C1 control */
		else if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f)))
			snprintf(esc, sizeof(esc), "%s",
				 *p == 0x1b   ? "\\e"
				 : *p == '\n' ? "\\n"
				 : *p == '\r' ? "\\r"
				 : *p == '\t' ? "\\t"
					      : "");
		else if (backslash && *p == '\\')
			snprintf(esc, sizeof(esc), "\\\\");
		if (!esc[0] && (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f))))
			snprintf(esc, sizeof(esc), "\\x%02x", *p);
		if (esc[0] && n == 0)
			n = 1;
		size_t len = esc[0] ? strlen(esc) : n;
		if (k + len + 4 >= ROOM) {
			memcpy(out + k, "...", 4);
			return out;
		}
		memcpy(out + k, esc[0] ? esc : (const char *)p, len);
		k += len;
		p += n;
	}
	out[k] = '\0';
	return out;
}

const char *cli_q(const char *s)
{
	return escape(s, 1);
}

const char *cli_msg(const char *s)
{
	return escape(s, 0);
}

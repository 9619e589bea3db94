/* Control characters out of messages and log lines. A message quotes what a caller or a
 * sandbox gave (a path, an id, a file name); printed raw, an ESC sequence in it would drive the
 * reader's terminal and a newline would forge a second line. Every C0 control, DEL, every C1
 * control (U+0080..U+009F) and every byte that is not UTF-8 is written as an escape: \e, \n,
 * \r, \t or \xNN. Valid UTF-8 otherwise stays as it is. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

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

size_t sbx__escape_controls(const char *in, char *out, size_t cap)
{
	size_t k = 0;
	if (cap == 0)
		return 0;
	for (const unsigned char *p = (const unsigned char *)in; *p;) {
		size_t n = utf8_seq(p);
		int c1 = n == 2 && p[0] == 0xC2 && p[1] < 0xA0;
		char esc[16] = "";
		if (n == 0 || c1 || (n == 1 && (*p < 0x20 || *p == 0x7f))) {
			switch (*p) {
			case 0x1b:
				snprintf(esc, sizeof(esc), "\\e");
				break;
			case '\n':
				snprintf(esc, sizeof(esc), "\\n");
				break;
			case '\r':
				snprintf(esc, sizeof(esc), "\\r");
				break;
			case '\t':
				snprintf(esc, sizeof(esc), "\\t");
				break;
			default:
				snprintf(esc, sizeof(esc), "\\x%02x", *p);
			}
			/* A C1 control is two bytes: escape both. */
			if (c1)
				snprintf(esc, sizeof(esc), "\\xc2\\x%02x", p[1]);
			n = c1 ? 2 : 1;
		}
		size_t len = esc[0] ? strlen(esc) : n;
		if (k + len >= cap)
			break;
		memcpy(out + k, esc[0] ? esc : (const char *)p, len);
		k += len;
		p += n;
	}
	out[k] = '\0';
	return k;
}

/* Base64 (RFC 4648): standard alphabet out; standard or URL-safe alphabet in. */
#include <sbx/support/base64.h>
#include <sbx/types.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t sbxs_base64_encode(const void *in, size_t n, char *out, size_t cap)
{
	const unsigned char *p = in;
	size_t need = SBXS_BASE64_ENCODED_LEN(n), o = 0;
	if (cap < need + 1) {
		if (cap)
			out[0] = '\0';
		return 0;
	}
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		out[o++] = alphabet[(v >> 18) & 63];
		out[o++] = alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

static int is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int sbxs_base64_decode(const char *in, size_t len, void *out, size_t cap, size_t *out_len)
{
	unsigned char *o = out;
	uint32_t acc = 0;
	size_t n = 0, digits = 0, pad = 0;
	int bits = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (is_space(c))
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		int v = value_of(c);
		if (v < 0 || pad)
			return SBX_E_INVAL; /* a stranger, or data after the padding */
		digits++;
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n >= cap)
				return SBX_E_NOMEM;
			o[n++] = (unsigned char)(acc >> bits);
		}
	}
	/* A lone digit in the last group carries fewer than 8 bits: not an encoding. Padding,
	 * when present, must complete the group. */
	if (digits % 4 == 1 || (pad && (digits + pad) % 4 != 0) || pad > 2)
		return SBX_E_INVAL;
	*out_len = n;
	return SBX_OK;
}

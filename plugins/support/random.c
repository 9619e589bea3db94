/* Random tokens from the kernel; jitter from a per-thread xorshift seeded by it. */
#include <stdio.h>
#include <sys/random.h>

#include <sbx/support/random.h>
#include <sbx/types.h>

int sbxs_random(void *buf, size_t n)
{
	unsigned char *p = buf;
	while (n > 0) {
		ssize_t got = getrandom(p, n, 0);
		if (got <= 0)
			return SBX_E_IO;
		p += got;
		n -= (size_t)got;
	}
	return SBX_OK;
}

int sbxs_random_hex(char *buf, size_t cap, size_t bytes)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[64];
	if (bytes > sizeof(raw) || cap < bytes * 2 + 1)
		return SBX_E_INVAL;
	if (sbxs_random(raw, bytes) != SBX_OK)
		return SBX_E_IO;
	for (size_t i = 0; i < bytes; i++) {
		buf[2 * i] = hex[raw[i] >> 4];
		buf[2 * i + 1] = hex[raw[i] & 15];
	}
	buf[2 * bytes] = '\0';
	return SBX_OK;
}

double sbxs_random_unit(void)
{
	static _Thread_local uint64_t s;
	if (!s && (sbxs_random(&s, sizeof(s)) != SBX_OK || !s))
		s = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&s;
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return (double)(s >> 11) / 9007199254740992.0; /* 2^53 */
}

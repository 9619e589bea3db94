/* Sandbox ids: "<alias>:<backend-id>". The alias routes; the backend part is the plugin's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "internal.h"

int sbx__random_hex(char *hex, size_t n_bytes)
{
	unsigned char rnd[32];
	if (n_bytes > sizeof(rnd))
		return EINVAL;
	size_t got = 0;
	while (got < n_bytes) {
		ssize_t k = getrandom(rnd + got, n_bytes - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? errno : EIO;
		got += (size_t)k;
	}
	for (size_t i = 0; i < n_bytes; i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	return 0;
}

static int alias_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.';
}

int sbx__id_split(const char *id, char *alias_buf, size_t alias_cap, const char **backend,
		  sbx_error *err)
{
	if (!id || !*id)
		return sbx__set_error(err, SBX_E_BAD_ID,
				      "sandbox id is empty; expected <alias>:<backend-id>");
	size_t len = strlen(id);
	if (len >= SBX_ID_MAX)
		return sbx__set_error(err, SBX_E_BAD_ID,
				      "sandbox id is %zu bytes long; at most %d are allowed", len,
				      SBX_ID_MAX - 1);
	const char *colon = strchr(id, ':');
	size_t alen = colon ? (size_t)(colon - id) : 0;
	int ok = colon && alen > 0 && colon[1] != '\0' && alen < alias_cap;
	for (size_t i = 0; ok && i < alen; i++)
		ok = alias_char_ok(id[i]);
	for (const char *p = colon ? colon + 1 : id; ok && *p; p++)
		ok = (unsigned char)*p > 0x20 && *p != 0x7f;
	if (!ok)
		return sbx__set_error(
		    err, SBX_E_BAD_ID,
		    "malformed sandbox id '%.200s'; expected <alias>:<backend-id> "
		    "(e.g. local:3f2a9c)",
		    id);
	memcpy(alias_buf, id, alen);
	alias_buf[alen] = '\0';
	*backend = colon + 1;
	return SBX_OK;
}

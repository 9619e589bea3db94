/* Error messages out of JSON answers, and JSON text in host memory. */
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>
#include <sbx/support/json.h>

const char *sbxs_json_message(const char *body, size_t len, char *buf, size_t cap)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(j, "message"));
	if (m && *m)
		snprintf(buf, cap, "%s", m);
	else if (body && len)
		snprintf(buf, cap, "%.*s", (int)(len > 200 ? 200 : len), body);
	else
		snprintf(buf, cap, "(empty body)");
	json_decref(j);
	size_t n = 0;
	for (; buf[n]; n++)
		if (buf[n] == '\n' || buf[n] == '\r')
			buf[n] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
	return buf;
}

char *sbxs_json_dump(const json_t *j)
{
	size_t n = j ? json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
	if (n == 0)
		return NULL;
	char *out = sbxs_host->alloc(n + 1);
	if (!out)
		return NULL;
	if (json_dumpb(j, out, n, JSON_COMPACT | JSON_ENCODE_ANY) != n) {
		sbxs_host->free(out);
		return NULL;
	}
	out[n] = '\0';
	return out;
}

int sbxs_json_info(const json_t *j, const char *alias, char **out, sbx_error *err)
{
	*out = sbxs_json_dump(j);
	return *out ? SBX_OK : sbxs_nomem(err, alias, "info");
}

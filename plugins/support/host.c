/* The plugin's host table and the small allocation helpers over it. */
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>

const sbx_host_api *sbxs_host;

void sbxs_host_set(const sbx_host_api *host)
{
	sbxs_host = host;
}

char *sbxs_strndup(const char *s, size_t n)
{
	if (!s)
		return NULL;
	char *d = sbxs_host->alloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

char *sbxs_strdup(const char *s)
{
	return s ? sbxs_strndup(s, strlen(s)) : NULL;
}

void *sbxs_zalloc(size_t n)
{
	void *p = sbxs_host->alloc(n ? n : 1);
	if (p)
		memset(p, 0, n ? n : 1);
	return p;
}

int sbxs_nomem(sbx_error *err, const char *alias, const char *what)
{
	return sbxs_host->set_error(err, SBX_E_NOMEM, "%s: %s: out of memory", alias, what);
}

/* Where a sandbox lives: <root>/<id>, and the ids that may name one (see folder.h). */
#include <stdio.h>
#include <string.h>

#include <sbx/support/host.h>

#include "folder.h"

int local_id_ok(const char *id)
{
	if (!id || strlen(id) != LOCAL_ID_LEN)
		return 0;
	for (size_t i = 0; i < LOCAL_ID_LEN; i++)
		if (!strchr("0123456789abcdef", id[i]))
			return 0;
	return 1;
}

int local_path(const local_state *st, const char *id, const char *suffix, char *buf, size_t cap,
	       sbx_error *err)
{
	if (!local_id_ok(id))
		return sbxs_host->set_error(
		    err, SBX_E_BAD_ID, "local: '%.64s' is not a local sandbox id (%d hex digits)",
		    id ? id : "", LOCAL_ID_LEN);
	int n = suffix ? snprintf(buf, cap, "%s/%s/%s", st->root, id, suffix)
		       : snprintf(buf, cap, "%s/%s", st->root, id);
	if (n < 0 || (size_t)n >= cap)
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: sandbox path too long");
	return SBX_OK;
}

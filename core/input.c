/* Checks on what callers hand the library, made at the door so a plugin never sees it. An
 * environment key with '=' in it would set another variable than the one named ("A=B" with
 * value "c" becomes A="B=c"), and an empty one is no variable at all. */
#include <string.h>

#include "internal.h"

int sbx__check_kv(const sbx_kv *kv, uint32_t n, const char *op, const char *what, int env,
		  sbx_error *err)
{
	if (n > 0 && !kv)
		return sbx__set_error(err, SBX_E_INVAL, "%s: %u %s given but no array", op, n,
				      what);
	for (uint32_t i = 0; i < n; i++) {
		const char *k = kv[i].key;
		if (!k || !kv[i].value)
			return sbx__set_error(err, SBX_E_INVAL, "%s: %s %u has a NULL key or value",
					      op, what, i);
		if (!k[0])
			return sbx__set_error(err, SBX_E_INVAL, "%s: %s %u has an empty key", op,
					      what, i);
		if (env && strchr(k, '='))
			return sbx__set_error(err, SBX_E_INVAL,
					      "%s: environment variable name '%.200s' contains "
					      "'='; a name cannot",
					      op, k);
	}
	return SBX_OK;
}

/* One plugin call, written once: route -> lock -> call -> unlock -> error mapping.
 *
 * Every op on a sandbox goes through sbx__call_id (or sbx__call once routed): an op that the
 * plugin leaves NULL is SBX_E_UNSUPPORTED naming the alias; a plugin that is not
 * SBX_PLUGIN_THREAD_SAFE is called under its alias's call lock; what the plugin returns is
 * checked by the op's own `call` (out-of-range values become SBX_E_BACKEND there) and its
 * error is mapped by sbx__plugin_error. */
#include <string.h>

#include "host_internal.h"

/* Whether the descriptor's op at byte offset `member` is set. */
static int op_present(const sbx_plugin_desc *d, size_t member)
{
	void (*fn)(void) = NULL;
	memcpy(&fn, (const char *)d + member, sizeof(fn));
	return fn != NULL;
}

int sbx__call(const sbx__route *r, const sbx__op *op, void *args, sbx_error *err)
{
	if (!op_present(r->slot->desc, op->member))
		return sbx__set_error(err, SBX_E_UNSUPPORTED,
				      "%s: %s: not supported by this backend", r->alias, op->name);
	int locked = !(r->slot->desc->flags & SBX_PLUGIN_THREAD_SAFE);
	sbx_error perr = {0};
	if (locked)
		pthread_mutex_lock(&r->slot->call_lock);
	int rc = op->call(r, args, &perr);
	if (locked)
		pthread_mutex_unlock(&r->slot->call_lock);
	return rc == SBX_OK ? SBX_OK : sbx__plugin_error(err, &perr, rc, r->alias, op->name);
}

int sbx__call_id(sbx_host *h, const char *id, const sbx__op *op, void *args, sbx_error *err)
{
	sbx__route r;
	int rc = sbx__route_id(h, id, &r, err);
	return rc == SBX_OK ? sbx__call(&r, op, args, err) : rc;
}

/* The host's ledger ($state_dir/ledger.db), opened on first use, and this process as the
 * ledger's rows name it: owner host, actor (pid and start time) and the sbx.ledger label. */
#include <unistd.h>

#include "host_internal.h"

int sbx__host_ledger(sbx_host *h, sbx__ledger **out, sbx_error *err)
{
	*out = NULL;
	if (sbx__host_forked(h, err) != SBX_OK)
		return SBX_E_INVAL;
	int rc = SBX_OK;
	pthread_mutex_lock(&h->lock);
	if (!h->ledger) {
		char *path = sbx__asprintf("%s/ledger.db", h->state_dir);
		if (!path)
			rc = sbx__nomem(err, "ledger");
		else
			rc = sbx__ledger_open(path, &h->ledger, err);
		sbx__free(path);
	}
	*out = h->ledger;
	pthread_mutex_unlock(&h->lock);
	return rc;
}

const char *sbx__host_name(const sbx_host *h)
{
	return h->hostname;
}

const char *sbx__host_ledger_id(const sbx_host *h)
{
	return h->ledger_id;
}

sbx__ledger_actor sbx__host_actor(const sbx_host *h)
{
	sbx__ledger_actor a = {h->hostname, (int64_t)getpid(), h->self_start};
	return a;
}

void sbx__host_ledger_state(sbx_host *h, const char *id, const char *state)
{
	/* Best effort after the fact: the backend's state is the truth, and gc re-checks it. */
	sbx_error lerr = {0};
	sbx__ledger *led = NULL;
	if (sbx__host_ledger(h, &led, &lerr) == SBX_OK &&
	    sbx__ledger_set_state(led, id, state, &lerr) == SBX_OK)
		return;
	sbx__log(SBX_LOG_WARN, "ledger", "%s: cannot record state %s: %s", id, state, lerr.message);
}

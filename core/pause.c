/* Pause, resume, status and sandbox info, each one plugin call through sbx__call; pause and
 * resume record the new state in the ledger row. */
#include <stddef.h>

#include "host_internal.h"

static int pause_call(const sbx__route *r, void *a, sbx_error *perr)
{
	(void)a;
	return r->slot->desc->pause(r->ps->state, r->backend, perr);
}

static int resume_call(const sbx__route *r, void *a, sbx_error *perr)
{
	(void)a;
	return r->slot->desc->resume(r->ps->state, r->backend, perr);
}

static int status_call(const sbx__route *r, void *a, sbx_error *perr)
{
	uint32_t *state = a;
	int rc = r->slot->desc->status(r->ps->state, r->backend, state, perr);
	if (rc == SBX_OK && *state > SBX_STATE_GONE) {
		rc =
		    sbx__set_error(perr, SBX_E_BACKEND,
				   "%s: status: plugin reported state %u, not an SBX_STATE_* value",
				   r->alias, (unsigned)*state);
		*state = SBX_STATE_UNKNOWN;
	}
	return rc;
}

static int info_call(const sbx__route *r, void *a, sbx_error *perr)
{
	char **json = a;
	int rc = r->slot->desc->sandbox_info(r->ps->state, r->backend, json, perr);
	if (rc == SBX_OK && !*json)
		rc = sbx__set_error(perr, SBX_E_BACKEND, "%s: sandbox_info: no JSON returned",
				    r->alias);
	return rc;
}

static const sbx__op pause_op = {"pause", offsetof(sbx_plugin_desc, pause), pause_call};
static const sbx__op resume_op = {"resume", offsetof(sbx_plugin_desc, resume), resume_call};
static const sbx__op status_op = {"status", offsetof(sbx_plugin_desc, status), status_call};
static const sbx__op info_op = {"sandbox_info", offsetof(sbx_plugin_desc, sandbox_info), info_call};

int sbx_pause(sbx_host *host, const char *id, sbx_error *err)
{
	int rc = sbx__call_id(host, id, &pause_op, NULL, err);
	if (rc == SBX_OK)
		sbx__host_ledger_state(host, id, SBX__LEDGER_PAUSED);
	return rc;
}

int sbx__resume(sbx_host *host, const sbx__route *r, const char *id, sbx_error *err)
{
	int rc = sbx__call(r, &resume_op, NULL, err);
	if (rc == SBX_OK)
		sbx__host_ledger_state(host, id, SBX__LEDGER_RUNNING);
	return rc;
}

int sbx_resume(sbx_host *host, const char *id, sbx_error *err)
{
	sbx__route r;
	int rc = sbx__route_id(host, id, &r, err);
	return rc == SBX_OK ? sbx__resume(host, &r, id, err) : rc;
}

int sbx_status(sbx_host *host, const char *id, uint32_t *state, sbx_error *err)
{
	if (!state)
		return sbx__set_error(err, SBX_E_INVAL, "status: NULL state pointer");
	*state = SBX_STATE_UNKNOWN;
	return sbx__call_id(host, id, &status_op, state, err);
}

int sbx_sandbox_info(sbx_host *host, const char *id, char **json, sbx_error *err)
{
	if (!json)
		return sbx__set_error(err, SBX_E_INVAL, "sandbox info: NULL output");
	*json = NULL;
	sbx__route r;
	int rc = sbx__route_id(host, id, &r, err);
	if (rc != SBX_OK)
		return rc;
	/* A backend with nothing to say about a sandbox says so with an empty object. */
	if (!r.slot->desc->sandbox_info) {
		*json = sbx__strdup("{}");
		return *json ? SBX_OK : sbx__nomem(err, "sandbox info");
	}
	rc = sbx__call(&r, &info_op, json, err);
	if (rc != SBX_OK) {
		sbx__free(*json);
		*json = NULL;
	}
	return rc;
}

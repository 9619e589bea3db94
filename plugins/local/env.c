/* What a command's environment starts from. The harness's own environment holds its API keys
 * and cloud tokens, so commands get a fixed base (PATH, HOME, LANG, TERM, SHELL; exec.c) plus
 * the host variables the config names in env_passthrough; inherit_env: true restores the
 * whole host environment for those who want it. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "env.h"
#include "state.h"

/* A name a variable can have: not empty, no '=' (nor NUL, which JSON text cannot carry). */
static int name_ok(const char *s)
{
	return s[0] && !strchr(s, '=');
}

int local_env_init(local_state *st, const sbx_config *cfg, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	int inherit = 0;
	int rc = h->config_bool(cfg, "inherit_env", &inherit, err);
	if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
		return rc;
	st->inherit_env = inherit != 0;
	const char *text = NULL;
	rc = h->config_json(cfg, "env_passthrough", &text, err);
	if (rc == SBX_E_NOT_FOUND)
		return SBX_OK;
	if (rc != SBX_OK)
		return rc;
	json_t *list = json_loads(text, JSON_DECODE_ANY, NULL);
	size_t n = json_array_size(list);
	st->passthrough = calloc(n + 1, sizeof(*st->passthrough));
	if (!st->passthrough) {
		json_decref(list);
		return h->set_error(err, SBX_E_NOMEM, "local: init: out of memory");
	}
	rc = SBX_OK;
	for (size_t i = 0; i < n && rc == SBX_OK; i++) {
		const char *name = json_string_value(json_array_get(list, i));
		if (!name || !name_ok(name))
			rc = h->set_error(err, SBX_E_CONFIG,
					  "local: env_passthrough[%zu] must be a variable name "
					  "(not empty, no '=')",
					  i);
		else if (!(st->passthrough[i] = strdup(name)))
			rc = h->set_error(err, SBX_E_NOMEM, "local: init: out of memory");
	}
	json_decref(list);
	return rc;
}

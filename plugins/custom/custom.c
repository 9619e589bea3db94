/* The `custom` sandbox plugin: a small, real backend written the way a third party writes
 * one, against the installed SDK only (<sbx/plugin.h> and the plugin-support library). A
 * sandbox is a scratch directory; a command runs in it as its own process group, and a
 * timeout kills that group. It implements only the required ops, so every optional op
 * reports SBX_E_UNSUPPORTED through the host. This file holds the config key, init and fini
 * and the descriptor; lifecycle.c and exec.c hold the ops. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <sbx/support/conf.h>
#include <sbx/support/host.h>

#include "exec.h"
#include "lifecycle.h"
#include "state.h"

static const sbxs_conf rows[] = {
    {.key = {.name = "root", .type = SBX_KEY_STRING, .help = "folder holding the sandboxes"},
     .at = offsetof(custom_state, root_key)},
};

static int custom_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	custom_state *st = NULL;
	int rc = sbxs_conf_new(CUSTOM_ALIAS, cfg, rows, SBXS_COUNT(rows), sizeof(*st), (void **)&st,
			       err);
	if (rc != SBX_OK)
		return rc;
	/* The state folder of the host that made cfg (ABI 1.1); a 1.0 host knows only the
	 * latest host's. */
	const char *dir = SBX_HAS(sbxs_host, sbx_host_api, state_dir_for)
			      ? sbxs_host->state_dir_for(cfg)
			      : sbxs_host->state_dir();
	int n = st->root_key ? snprintf(st->root, sizeof(st->root), "%s", st->root_key)
		: dir        ? snprintf(st->root, sizeof(st->root), "%s/custom", dir)
			     : -1;
	if (n < 0 || (size_t)n >= sizeof(st->root)) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG, "custom: init: root path is too long");
		goto fail;
	}
	if (mkdir(st->root, 0700) != 0 && errno != EEXIST) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "custom: init: cannot create %s: %s",
					  st->root, strerror(errno));
		goto fail;
	}
	*state = st;
	return SBX_OK;
fail:
	sbxs_host->free(st);
	return rc;
}

static void custom_fini(void *state)
{
	sbxs_host->free(state);
}

SBX_EXPORT int sbx_plugin_register(const sbx_host_api *host, sbx_registrar *reg)
{
	static sbx_config_key keys[SBXS_COUNT(rows)];
	sbx_plugin_desc d = {
	    .alias = CUSTOM_ALIAS,
	    .version = "1.0",
	    .description = "scratch-directory sandboxes (third-party plugin example)",
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = custom_init,
	    .fini = custom_fini,
	    .create = custom_create,
	    .execute = custom_execute,
	    .destroy = custom_destroy,
	};
	return sbxs_register(host, reg, &d, rows, keys, SBXS_COUNT(rows));
}

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

static sbx_config_key keys[SBXS_COUNT(rows)];

static int custom_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	custom_state *st = sbxs_zalloc(sizeof(*st));
	if (!st)
		return sbxs_nomem(err, CUSTOM_ALIAS, "init");
	int rc = sbxs_conf_read(CUSTOM_ALIAS, cfg, rows, SBXS_COUNT(rows), st, err);
	if (rc != SBX_OK)
		goto fail;
	int n = st->root_key
		    ? snprintf(st->root, sizeof(st->root), "%s", st->root_key)
		    : snprintf(st->root, sizeof(st->root), "%s/custom", sbxs_host->state_dir());
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
	sbxs_host_set(host);
	sbxs_conf_keys(rows, SBXS_COUNT(rows), keys);
	sbx_plugin_desc d = {
	    .struct_size = sizeof(d),
	    .abi_major = SBX_ABI_MAJOR,
	    .abi_minor = SBX_ABI_MINOR,
	    .alias = CUSTOM_ALIAS,
	    .version = "1.0",
	    .description = "scratch-directory sandboxes (third-party plugin example)",
	    .keys = keys,
	    .n_keys = SBXS_COUNT(keys),
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = custom_init,
	    .fini = custom_fini,
	    .create = custom_create,
	    .execute = custom_execute,
	    .destroy = custom_destroy,
	};
	return host->register_sandbox(reg, &d);
}

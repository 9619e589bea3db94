/* Loader interfaces beyond those in internal.h: what host_api.c and registry.c need from
 * loader.c, the only file that includes <dlfcn.h>. */
#ifndef SBX_LOADER_H
#define SBX_LOADER_H

#include "internal.h"

/* Size of an ABI 1.0 plugin descriptor: the smallest struct_size the loader accepts. */
#define SBX__DESC_SIZE_1_0 (offsetof(sbx_plugin_desc, info) + sizeof(((sbx_plugin_desc *)0)->info))

/* The host->register_sandbox service. Checks desc (ABI version, size, alias, required ops,
 * declared keys, duplicates, alias listed in the registry) before keeping a host-owned copy.
 * Returns SBX_E_ABI, SBX_E_EXISTS, SBX_E_INVAL or SBX_E_NOMEM on failure; the first failure
 * is saved in the registrar and fails the whole load with its message. Only valid while the
 * plugin's entry runs. */
int sbx__registrar_register(sbx_registrar *reg, const sbx_plugin_desc *desc);

/* Real (symlink-free) folder of the object holding libsbx's code: the folder of libsbx.so,
 * or of the executable when linked statically. NULL when it cannot be found. The string is
 * static. Thread-safe. */
const char *sbx__library_dir(void);

/* A module of descriptors the host made (proxies of a runner process): takes descs (n of
 * them, from sbx__alloc) and calls release(owner) when unloaded. SBX_E_NOMEM. */
int sbx__module_wrap(const char *path, sbx_plugin_desc *descs, size_t n, void *owner,
		     void (*release)(void *owner), sbx__module **out);

#endif

/* sbx-support: the host table of the plugin this library is linked into.
 *
 * libsbx-support is a static library for plugin authors (the bundled backends use it, and it
 * is installed beside the headers for third parties, as PAM ships pam_modutil). Each plugin
 * links its own copy with hidden symbols, so two plugins in one process never share its state.
 *
 * sbx_plugin_register calls sbxs_host_set() first; from then on the plugin and every support
 * function reach the services table through `sbxs_host` and nothing else. */
#ifndef SBX_SUPPORT_HOST_H
#define SBX_SUPPORT_HOST_H

#include <stddef.h>

#include <sbx/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Number of elements of an array (not a pointer). */
#define SBXS_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The services table given to sbx_plugin_register; NULL before sbxs_host_set. Read-only
 * afterwards, so any thread may read it. */
extern const sbx_host_api *sbxs_host;

/* Stores the table. Call it once, from sbx_plugin_register, before anything else. */
void sbxs_host_set(const sbx_host_api *host);

/* A copy of s (or of its first n bytes, NUL added) from host->alloc, or NULL when out of
 * memory. The caller frees it with sbxs_host->free. s may be NULL: the result is NULL. */
char *sbxs_strdup(const char *s);
char *sbxs_strndup(const char *s, size_t n);

/* n zeroed bytes from host->alloc (at least one), or NULL. */
void *sbxs_zalloc(size_t n);

/* Fills err with "<alias>: <what>: out of memory" and returns SBX_E_NOMEM. */
int sbxs_nomem(sbx_error *err, const char *alias, const char *what);

#ifdef __cplusplus
}
#endif
#endif

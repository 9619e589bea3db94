/* The host table the plugin parsers reach through sbxs_host, for fuzz targets that link a
 * plugin's parser alone (no libsbx): memory from malloc, errors formatted into sbx_error,
 * logs dropped. */
#ifndef SBX_FUZZ_PLUGIN_HOST_H
#define SBX_FUZZ_PLUGIN_HOST_H

/* Sets sbxs_host (once; later calls do nothing). */
void fuzz_plugin_host(void);

#endif

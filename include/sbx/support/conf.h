/* sbx-support: a plugin's config keys as one table of data.
 *
 * Each row names a key the way the host validates it (an sbx_config_key), where its value
 * goes in the plugin's settings struct, and its default and limits; sbxs_conf_read fills the
 * struct from a config in one call instead of a getter sequence per key, and sbxs_conf_keys
 * gives the descriptor its key list from the same rows, so a key cannot be declared in one
 * place and read differently in another.
 *
 * Where values go, by the key's type:
 *   SBX_KEY_STRING             const char *  (borrowed from the host: valid until fini)
 *   SBX_KEY_INT                int64_t
 *   SBX_KEY_FLOAT              double        (an integer value is accepted)
 *   SBX_KEY_BOOL               int           (0 or 1; the default may be -1 for "unset")
 *   SBX_KEY_LIST, _MAP, _ANY   const char *  (the value as JSON text, borrowed)
 * Thread-safe (it only reads the table and writes the caller's struct). */
#ifndef SBX_SUPPORT_CONF_H
#define SBX_SUPPORT_CONF_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBXS_CONF_ABOVE_MIN 1u /* the range excludes its minimum: (min, max] */
#define SBXS_CONF_RANGE     2u /* check min..max (numbers) */

typedef struct sbxs_conf {
	sbx_config_key key;  /* name, type, secret, help: what the host checks */
	size_t at;           /* offsetof() the value in the settings struct */
	const char *env;     /* strings: the environment variable read when the key is absent */
	const char *def;     /* strings and JSON: the default (NULL: none) */
	const char *choices; /* strings: the only values allowed, separated by '|' */
	double num;          /* numbers and bools: the default */
	double min, max;     /* numbers: the range, with SBXS_CONF_RANGE */
	uint32_t flags;      /* SBXS_CONF_* */
} sbxs_conf;

/* Fills `settings` from cfg, row by row: the key's value, else (strings) the environment
 * variable when set and not empty, else the default. SBX_OK, or the getter's status
 * (SBX_E_CONFIG for a wrong type, err naming the key), or SBX_E_CONFIG for a value outside
 * its range or choices ("<alias>: 'pull' is 'x'; it must be never, missing or always"). */
int sbxs_conf_read(const char *alias, const sbx_config *cfg, const sbxs_conf *rows, size_t n,
		   void *settings, sbx_error *err);

/* As sbxs_conf_read into a new zeroed state of `size` bytes (host memory, *state): the rows
 * point into it. On failure nothing is allocated and *state is untouched. */
int sbxs_conf_new(const char *alias, const sbx_config *cfg, const sbxs_conf *rows, size_t n,
		  size_t size, void **state, sbx_error *err);

/* The host's cap on a file read, max_file_bytes (plugin.h: every plugin config carries it
 * since ABI 1.1); SBXS_MAX_FILE_BYTES when an older host gave none. A file op stops reading
 * past it and fails with SBX_E_LIMIT. */
#define SBXS_MAX_FILE_BYTES (256ull << 20)
uint64_t sbxs_conf_max_file_bytes(const sbx_config *cfg);

/* Copies the rows' keys into keys[n], for sbx_plugin_desc.keys (keep keys alive until the
 * plugin is unloaded: a static array). */
void sbxs_conf_keys(const sbxs_conf *rows, size_t n, sbx_config_key *keys);

/* What sbx_plugin_register does with one descriptor: stores host (sbxs_host_set), gives desc
 * the rows' keys (through keys[n], static storage), fills its header and registers it.
 * Returns what host->register_sandbox returns. */
int sbxs_register(const sbx_host_api *host, sbx_registrar *reg, sbx_plugin_desc *desc,
		  const sbxs_conf *rows, sbx_config_key *keys, size_t n);

#ifdef __cplusplus
}
#endif
#endif

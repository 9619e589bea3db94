/* sbx-support: random bytes for tokens and marker names, and jitter.
 *
 * Thread-safe. Tokens come from getrandom(2); jitter from a per-thread generator seeded from
 * it (good enough to spread retries, never for secrets). */
#ifndef SBX_SUPPORT_RANDOM_H
#define SBX_SUPPORT_RANDOM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fills buf with n random bytes. SBX_OK, or SBX_E_IO when the kernel gives none. */
int sbxs_random(void *buf, size_t n);

/* Writes 2 * bytes lowercase hex digits and a NUL (cap must hold them). SBX_OK, SBX_E_INVAL
 * when cap is too small, SBX_E_IO as sbxs_random. */
int sbxs_random_hex(char *buf, size_t cap, size_t bytes);

/* A number in [0, 1) for jitter. */
double sbxs_random_unit(void);

#ifdef __cplusplus
}
#endif
#endif

/* sbx-support: base64 (RFC 4648), the one codec of every plugin.
 *
 * Encoding uses the standard alphabet with padding. Decoding accepts the standard and the
 * URL-safe alphabet, optional padding, and ignores ASCII whitespace (as kubectl's decoder
 * does for kubeconfig data); any other byte, or data after the padding, is an error.
 * Pure functions: thread-safe, no allocation. */
#ifndef SBX_SUPPORT_BASE64_H
#define SBX_SUPPORT_BASE64_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes the encoding of n bytes takes, without the NUL. */
#define SBXS_BASE64_ENCODED_LEN(n) (((n) + 2) / 3 * 4)
/* Most bytes that decoding n characters can give. */
#define SBXS_BASE64_DECODED_MAX(n) ((n) / 4 * 3 + 3)

/* Encodes n bytes into out (NUL-terminated). Returns the length written, or 0 when cap is
 * smaller than SBXS_BASE64_ENCODED_LEN(n) + 1 (out is then "" if cap > 0). */
size_t sbxs_base64_encode(const void *in, size_t n, char *out, size_t cap);

/* Decodes len characters of in into out[cap]. SBX_OK with *out_len set, SBX_E_INVAL for a
 * byte outside the alphabets, a lone trailing character or data after padding, SBX_E_NOMEM
 * when cap is too small (SBXS_BASE64_DECODED_MAX(len) always suffices). */
int sbxs_base64_decode(const char *in, size_t len, void *out, size_t cap, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif

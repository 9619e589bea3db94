/* sbx-support: a growable byte buffer over host->alloc.
 *
 * The bytes are always followed by a NUL that len does not count, so a buffer of text reads
 * as a C string. A zeroed sbxs_buf is empty and valid. Not thread-safe: one owner at a time. */
#ifndef SBX_SUPPORT_BUF_H
#define SBX_SUPPORT_BUF_H

#include <stddef.h>

#include <sbx/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbxs_buf {
	char *data; /* NULL until the first byte is added */
	size_t len;
	size_t cap;
} sbxs_buf;

/* Appends len bytes (data may be NULL when len is 0). SBX_OK, or SBX_E_NOMEM with the
 * buffer unchanged. */
int sbxs_buf_add(sbxs_buf *b, const void *data, size_t len);

/* Appends a NUL-terminated string. */
int sbxs_buf_adds(sbxs_buf *b, const char *s);

/* Appends printf-style text. SBX_OK or SBX_E_NOMEM (buffer unchanged). */
int sbxs_buf_addf(sbxs_buf *b, const char *fmt, ...) SBX_PRINTF(2, 3);

/* Makes room for `more` bytes past len without adding them. */
int sbxs_buf_reserve(sbxs_buf *b, size_t more);

/* Removes the first n bytes (all when n >= len). */
void sbxs_buf_drop(sbxs_buf *b, size_t n);

/* Empties the buffer, keeping its memory. */
void sbxs_buf_clear(sbxs_buf *b);

/* Releases the memory; the buffer is empty and valid afterwards. */
void sbxs_buf_free(sbxs_buf *b);

/* As sbxs_buf_free, zeroing the memory first: for credentials. */
void sbxs_buf_wipe(sbxs_buf *b);

/* Hands the bytes to the caller (host->alloc memory, NUL-terminated, *len set when len is not
 * NULL) and leaves the buffer empty. An empty buffer gives a one-byte "" allocation. NULL
 * only when out of memory. */
char *sbxs_buf_take(sbxs_buf *b, size_t *len);

#ifdef __cplusplus
}
#endif
#endif

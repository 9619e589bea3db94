/* sbx-support: lexical paths inside a sandbox, for backends that resolve a relative path
 * beneath the work dir themselves (the container's filesystem is not this machine's).
 * Absolute paths only, "/"-separated; nothing touches a filesystem. Pure functions:
 * thread-safe, no allocation. */
#ifndef SBX_SUPPORT_PATH_H
#define SBX_SUPPORT_PATH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Appends component c (n bytes, no '/') to the absolute path in buf[cap]: "" and "." leave it,
 * ".." drops its last component ("/" stays "/"). 1, or 0 when the result would not fit (buf
 * unchanged). */
int sbxs_path_push(char *buf, size_t cap, const char *c, size_t n);

/* The absolute path p, "//", "." and ".." collapsed, into buf[cap]. 1, or 0 when p is not
 * absolute or the result would not fit. p and buf may be the same. */
int sbxs_path_normalize(const char *p, char *buf, size_t cap);

/* Whether the normalized absolute path p is root or lies below it ("/a" is not below "/ab"). */
int sbxs_path_beneath(const char *root, const char *p);

#ifdef __cplusplus
}
#endif
#endif

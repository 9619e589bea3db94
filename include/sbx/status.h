/* Status codes returned by every sbx function, host and plugin alike.
 *
 * One X-macro list defines the enum, the names and the messages, so they cannot drift. The
 * list is append-only: a code, once released, keeps its number forever. */
#ifndef SBX_STATUS_H
#define SBX_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, value, message) */
#define SBX_STATUS_MAP(X)                                              \
	X(OK, 0, "success")                                            \
	X(E_INVAL, 1, "invalid argument")                              \
	X(E_NOMEM, 2, "out of memory")                                 \
	X(E_UNSUPPORTED, 3, "operation not supported by this backend") \
	X(E_NOT_FOUND, 4, "sandbox not found")                         \
	X(E_BAD_ID, 5, "malformed sandbox id")                         \
	X(E_UNKNOWN_ALIAS, 6, "unknown sandbox type alias")            \
	X(E_FAULTY, 7, "plugin is faulty")                             \
	X(E_CONFIG, 8, "bad configuration")                            \
	X(E_REGISTRY, 9, "bad registry")                               \
	X(E_UNREACHABLE, 10, "backend unreachable")                    \
	X(E_BACKEND, 11, "backend error")                              \
	X(E_TIMEOUT, 12, "backend call timed out")                     \
	X(E_IO, 13, "input/output error")                              \
	X(E_PATH, 14, "path refused")                                  \
	X(E_ABI, 15, "plugin ABI mismatch")                            \
	X(E_PAUSED, 16, "sandbox is paused")                           \
	X(E_LIMIT, 17, "limit reached")                                \
	X(E_CANCELLED, 18, "operation cancelled")                      \
	X(E_EXISTS, 19, "already exists")                              \
	X(E_RATE_LIMITED, 20, "backend rate limit")                    \
	X(E_LEDGER, 21, "ledger error")                                \
	X(E_NO_FILE, 22, "no such file in sandbox")                    \
	X(E_PLUGIN_CRASHED, 23, "plugin crashed")

typedef enum {
#define SBX__STATUS_ENUM(name, value, msg) SBX_##name = value,
	SBX_STATUS_MAP(SBX__STATUS_ENUM)
#undef SBX__STATUS_ENUM
} sbx_status_code;

#ifdef __cplusplus
}
#endif
#endif

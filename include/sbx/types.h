/* Types shared by embedders (host.h) and plugin authors (plugin.h).
 *
 * Every struct that crosses the host/plugin boundary starts with SBX_STRUCT_HEADER: its size
 * and the ABI version it was built against. Fields are only ever appended, so a reader tests
 * for a newer member with SBX_HAS(). Only fixed-width integers and pointers appear here: no
 * enums, bools or bitfields, and no third-party type. */
#ifndef SBX_TYPES_H
#define SBX_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_STRUCT_HEADER     \
	uint32_t struct_size; \
	uint16_t abi_major;   \
	uint16_t abi_minor

/* Fills the header of a struct variable `s` for the ABI this code is compiled against. */
#define SBX_INIT_HEADER(s)                                                     \
	((s).struct_size = (uint32_t)sizeof(s), (s).abi_major = SBX_ABI_MAJOR, \
	 (s).abi_minor = SBX_ABI_MINOR)

/* True when the struct pointed to by `p` is large enough to hold `member`. */
#define SBX_HAS(p, type, member) \
	((p)->struct_size >= offsetof(type, member) + sizeof(((type *)0)->member))

/* Longest full sandbox id ("<alias>:<backend-id>") including the terminating NUL. */
#define SBX_ID_MAX 256

/* Caller-owned error detail. `message` is one line, subject first
 * ("docker: create: image 'python:3.12' not found"). Any function taking an sbx_error *
 * accepts NULL. */
typedef struct sbx_error {
	int code;
	char message[512];
} sbx_error;

/* A borrowed key/value pair (labels, environment additions). */
typedef struct sbx_kv {
	const char *key;
	const char *value;
} sbx_kv;

/* Output streams of an exec. */
#define SBX_STREAM_STDOUT 1u
#define SBX_STREAM_STDERR 2u

/* Sandbox states reported by status (sbx_sandbox_state). */
#define SBX_STATE_UNKNOWN  0u
#define SBX_STATE_CREATING 1u
#define SBX_STATE_RUNNING  2u
#define SBX_STATE_PAUSED   3u
#define SBX_STATE_GONE     4u

/* Kinds of file entry. */
#define SBX_FILE_REGULAR 1u
#define SBX_FILE_DIR     2u
#define SBX_FILE_SYMLINK 3u
#define SBX_FILE_OTHER   4u

/* One entry of a stat or a directory listing. */
typedef struct sbx_file_info {
	SBX_STRUCT_HEADER;
	uint32_t kind; /* SBX_FILE_* */
	uint32_t mode; /* permission bits */
	uint64_t size;
	int64_t mtime;  /* seconds since the epoch */
	char name[256]; /* entry name (list) or last path component (stat) */
} sbx_file_info;

#ifdef __cplusplus
}
#endif
#endif

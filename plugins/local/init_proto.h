/* What create (ns.c) hands the sandbox's init program (init/main.c), and what that program
 * reports back over a pipe: fixed-size records, the same build on both sides. */
#ifndef SBX_LOCAL_INIT_PROTO_H
#define SBX_LOCAL_INIT_PROTO_H

#include <stddef.h>

#include "mounts.h"

#define MSG_PID   1 /* the helper: the init's pid */
#define MSG_READY 2 /* the init: built, pivoted, waiting */
#define MSG_FAIL  3 /* either: stage and errno */

#define STAGE_UNSHARE 1
#define STAGE_FORK    2
#define STAGE_CGROUP  3
#define STAGE_MOUNT   4
#define STAGE_NET     5
#define STAGE_USERNS  6
#define STAGE_EXEC    7 /* of sbx-local-init itself */
#define STAGE_PLAN    8 /* reading the plan */

typedef struct init_msg {
	int kind;
	int stage;
	int err;
	int pid;
	size_t op;
} init_msg;

/* The plan, in a memfd: this record, then n_ops local_mount_op records. */
typedef struct init_spec {
	int unshare_flags;
	char hostname[32];
	char uid_map[32], gid_map[32]; /* "0 <uid> 1" with a user namespace, else "" */
	char newroot[1300];
	size_t n_ops;
} init_spec;

#endif

/* What a sandbox's helper and init report to create (ns.c) over a pipe: fixed-size messages,
 * shared with the init program (init/main.c). */
#ifndef SBX_LOCAL_INIT_PROTO_H
#define SBX_LOCAL_INIT_PROTO_H

#include <stddef.h>

#define MSG_PID   1 /* the helper: the init's pid */
#define MSG_READY 2 /* the init: built, pivoted, waiting */
#define MSG_FAIL  3 /* either: stage and errno */

#define STAGE_UNSHARE 1
#define STAGE_FORK    2
#define STAGE_CGROUP  3
#define STAGE_MOUNT   4
#define STAGE_NET     5
#define STAGE_USERNS  6
#define STAGE_EXEC    7

typedef struct init_msg {
	int kind;
	int stage;
	int err;
	int pid;
	size_t op;
} init_msg;

#endif

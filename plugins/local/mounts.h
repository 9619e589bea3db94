/* mounts.c: the plan of a sandbox's mount table as rootfs.c writes it and as the sandbox's init
 * (sbx-local-init, a program of its own) performs it. The plan crosses into that program as
 * bytes (init_proto.h), so every op is a fixed-size record. */
#ifndef SBX_LOCAL_MOUNTS_H
#define SBX_LOCAL_MOUNTS_H

#include <stddef.h>

#define OP_TMPFS    1
#define OP_MKDIR    2 /* every missing component of dst, then dst with mode */
#define OP_BIND     3
#define OP_BIND_RO  4
#define OP_TOUCH    5
#define OP_SYMLINK  6
#define OP_PROC     7
#define OP_OVERLAY  8
#define OP_RDONLY   9 /* make the mount at dst read-only (not its submounts) */
#define OP_DEVPTS   10
#define OP_PIVOT    11
#define OP_HOLD     12    /* open dst and keep it (the writable layer, for its size) */
#define OP_OPTIONAL 0x100 /* a failure of this op is not fatal */

struct local_mount_op {
	int kind;
	unsigned mode;
	char src[1400];
	char dst[1400];
	char data[3200];
};

typedef struct local_mount_op local_mount_op;
typedef struct local_mounts {
	local_mount_op *ops;
	size_t n, cap;
	char newroot[1300];
} local_mounts;

/* Performs the plan and pivots into it (system calls only). 0 or an errno; *failed is the
 * index of the op that failed (m->n for the first step); *held an fd of the capped writable
 * layer (-1 without a cap). */
int local_mounts_apply(const local_mounts *m, size_t *failed, int *held);
/* The fd at which a sandbox's init keeps its capped writable layer open. */
#define LOCAL_RW_FD 100

#endif

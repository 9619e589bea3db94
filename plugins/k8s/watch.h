/* Whether a new pod is ready, judged from its object: Running and Ready, still starting, or
 * failed for good (an image that cannot be pulled, a container that exited, unschedulable,
 * deleted). Watch event lines are parsed here too. Plain functions over bytes and JSON (no
 * I/O), so a fuzz target can link this file with jansson alone. */
#ifndef SBX_K8S_WATCH_H
#define SBX_K8S_WATCH_H

#include <stddef.h>

#include <jansson.h>

/* 1 Running and Ready, 0 keep waiting, -1 failed (why in msg[cap]); last[lcap] describes the
 * state for a timeout's message. */
int k8s_pod_verdict(const json_t *pod, char *msg, size_t cap, char *last, size_t lcap);

/* What a watch has seen so far. */
typedef struct k8s_watch {
	char msg[400];  /* why the pod failed */
	char last[256]; /* its state, for a timeout */
	char rv[64];    /* the resourceVersion to resume from */
	int verdict;    /* as k8s_pod_verdict */
	int expired;    /* the server sent an ERROR event (a too old resourceVersion) */
} k8s_watch;

/* One line of a watch (a JSON event); a k8s_line_fn: nonzero when the watch may stop (a
 * verdict, an ERROR, a DELETED). ctx is a k8s_watch. */
int k8s_watch_line(void *ctx, const char *line, size_t len);

#endif

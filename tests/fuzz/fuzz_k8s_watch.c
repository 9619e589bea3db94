/* Fuzz target: a pod watch's event lines and the pod objects in them (plugins/k8s/watch.c).
 * The objects' status (container states, reasons, messages) is written by what runs in the
 * pod as much as by the cluster. Lines are fed until the watch may stop; every message it
 * keeps stays terminated within its buffer, and a verdict is -1, 0 or 1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const k8s_watch *w)
{
	if (!memchr(w->msg, '\0', sizeof(w->msg)) || !memchr(w->last, '\0', sizeof(w->last)) ||
	    !memchr(w->rv, '\0', sizeof(w->rv)) || w->verdict < -1 || w->verdict > 1)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	k8s_watch w = {0};
	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		int stop = k8s_watch_line(&w, p, len);
		check(&w);
		if (stop)
			break;
		p += len + (nl ? 1 : 0);
	}
	/* The whole input as one pod object, as a create's first GET reads it. */
	json_t *pod = json_loadb((const char *)data, size, 0, NULL);
	if (pod) {
		char msg[400], last[256];
		int v = k8s_pod_verdict(pod, msg, sizeof(msg), last, sizeof(last));
		if (v < -1 || v > 1 || !memchr(msg, '\0', sizeof(msg)) ||
		    !memchr(last, '\0', sizeof(last)))
			abort();
		json_decref(pod);
	}
	return 0;
}

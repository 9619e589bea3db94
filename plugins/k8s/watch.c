/* A pod starting, judged from its object and from watch events (see watch.h). */
#include <stdio.h>
#include <string.h>

#include "watch.h"

int k8s_pod_verdict(const json_t *pod, char *msg, size_t cap, char *last, size_t lcap)
{
	json_t *status = json_object_get(pod, "status");
	const char *phase = json_string_value(json_object_get(status, "phase"));
	if (!phase)
		phase = "Pending";
	snprintf(last, lcap, "phase %s", phase);
	if (json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp")) {
		snprintf(msg, cap, "the pod is being deleted");
		return -1;
	}
	size_t i;
	json_t *c;
	int running = 0;
	json_array_foreach(json_object_get(status, "containerStatuses"), i, c)
	{
		json_t *state = json_object_get(c, "state");
		json_t *w = json_object_get(state, "waiting");
		json_t *t = json_object_get(state, "terminated");
		const char *reason = json_string_value(json_object_get(w ? w : t, "reason"));
		const char *m = json_string_value(json_object_get(w ? w : t, "message"));
		if (w && reason) {
			snprintf(last, lcap, "phase %s, container waiting: %s", phase, reason);
			static const char *const fatal[] = {"ErrImagePull",
							    "ImagePullBackOff",
							    "InvalidImageName",
							    "ErrImageNeverPull",
							    "CreateContainerConfigError",
							    "CreateContainerError",
							    "RunContainerError"};
			for (size_t k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++)
				if (strcmp(reason, fatal[k]) == 0) {
					snprintf(msg, cap, "%s: %s", reason, m ? m : "");
					return -1;
				}
		}
		if (t) {
			snprintf(msg, cap, "the container exited (%s, exit code %lld)%s%s",
				 reason ? reason : "terminated",
				 (long long)json_integer_value(json_object_get(t, "exitCode")),
				 m ? ": " : "", m ? m : "");
			return -1;
		}
		if (json_object_get(state, "running"))
			running = 1;
	}
	if (strcmp(phase, "Failed") == 0 || strcmp(phase, "Succeeded") == 0) {
		const char *r = json_string_value(json_object_get(status, "reason"));
		const char *m = json_string_value(json_object_get(status, "message"));
		snprintf(msg, cap, "phase %s%s%s%s%s", phase, r ? " (" : "", r ? r : "",
			 r ? ")" : "", m ? m : "");
		return -1;
	}
	int ready = 0;
	json_array_foreach(json_object_get(status, "conditions"), i, c)
	{
		const char *type = json_string_value(json_object_get(c, "type"));
		const char *val = json_string_value(json_object_get(c, "status"));
		const char *reason = json_string_value(json_object_get(c, "reason"));
		const char *m = json_string_value(json_object_get(c, "message"));
		if (!type || !val)
			continue;
		if (strcmp(type, "PodScheduled") == 0 && strcmp(val, "False") == 0 && reason &&
		    strcmp(reason, "Unschedulable") == 0) {
			snprintf(msg, cap, "Unschedulable: %s", m ? m : "");
			return -1;
		}
		if (strcmp(type, "Ready") == 0) {
			ready = strcmp(val, "True") == 0;
			if (!ready)
				snprintf(last, lcap, "phase %s, Ready=%s%s%s", phase, val,
					 reason ? " " : "", reason ? reason : "");
		}
	}
	return strcmp(phase, "Running") == 0 && ready && running;
}

int k8s_watch_line(void *ctx, const char *line, size_t len)
{
	k8s_watch *w = ctx;
	json_t *ev = json_loadb(line, len, 0, NULL);
	if (!ev)
		return 0;
	const char *type = json_string_value(json_object_get(ev, "type"));
	json_t *obj = json_object_get(ev, "object");
	const char *rv =
	    json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
	if (rv && type && strcmp(type, "ERROR") != 0)
		snprintf(w->rv, sizeof(w->rv), "%s", rv);
	int stop = 0;
	if (type && strcmp(type, "ERROR") == 0) {
		w->expired = 1;
		stop = 1;
	} else if (type && strcmp(type, "DELETED") == 0) {
		snprintf(w->msg, sizeof(w->msg), "the pod was deleted while starting");
		w->verdict = -1;
		stop = 1;
	} else if (type && (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)) {
		w->verdict = k8s_pod_verdict(obj, w->msg, sizeof(w->msg), w->last, sizeof(w->last));
		stop = w->verdict != 0;
	}
	json_decref(ev);
	return stop;
}

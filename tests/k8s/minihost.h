/* A minimal sbx host services table for driving the k8s plugin directly (tests and the
 * create benchmark), without libsbx. Config values are strings looked up by key. */
#ifndef K8S_MINIHOST_H
#define K8S_MINIHOST_H

#include <sbx/plugin.h>

struct sbx_config {
	const char *keys[16];
	const char *vals[16];
	int n;
};

/* dlopens the plugin at path and fills *desc with its registered descriptor. Returns 0, or
 * -1 with the reason in why. */
int minihost_load(const char *path, sbx_plugin_desc *desc, char *why, size_t cap);

#endif

/* Pod lifecycle ops of the k8s plugin: create (wait until Running and Ready), destroy,
 * status, list by label. */
#ifndef SBX_K8S_LIFECYCLE_H
#define SBX_K8S_LIFECYCLE_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/plugin.h>

int k8s_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
	       sbx_error *err);
int k8s_destroy(void *state, const char *id, sbx_error *err);
int k8s_status(void *state, const char *id, uint32_t *out, sbx_error *err);
int k8s_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
		      sbx_error *err);

#endif

/* Fuzz target: a config file. Loads it as YAML text (LoongSage and NexAU shapes, policies,
 * ${env.NAME} references), then builds each data source's plugin config against a
 * descriptor declaring one key of every type and reads every key back through the host's
 * typed getters, as a plugin would. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const sbx_config_key keys[] = {
    {.name = "image", .type = SBX_KEY_STRING},
    {.name = "workers", .type = SBX_KEY_INT},
    {.name = "ratio", .type = SBX_KEY_FLOAT},
    {.name = "flag", .type = SBX_KEY_BOOL},
    {.name = "list", .type = SBX_KEY_LIST},
    {.name = "map", .type = SBX_KEY_MAP},
    {.name = "any", .type = SBX_KEY_ANY},
    {.name = "token", .type = SBX_KEY_STRING, .secret = 1},
};

static void read_back(const sbx__data_source *ds, const sbx__node *defaults)
{
	sbx_plugin_desc d = {.alias = "fuzz", .keys = keys, .n_keys = 8};
	struct sbx_config *cfg = NULL;
	sbx_error err = {0};
	if (sbx__config_for_plugin(ds, defaults, &d, &cfg, &err) != SBX_OK)
		return;
	const sbx_host_api *api = sbx__host_api();
	for (size_t i = 0; i < 8; i++) {
		const char *s;
		int64_t n;
		double f;
		int b;
		api->config_string(cfg, keys[i].name, &s, &err);
		api->config_int(cfg, keys[i].name, &n, &err);
		api->config_float(cfg, keys[i].name, &f, &err);
		api->config_bool(cfg, keys[i].name, &b, &err);
		api->config_json(cfg, keys[i].name, &s, &err);
	}
	char *rec = sbx__config_record(ds->keys, &d);
	sbx__node *back = NULL;
	if (rec && *rec && sbx__config_recall(rec, &back, &err) == SBX_OK)
		sbx__node_free(back);
	sbx__free(rec);
	sbx__config_obj_free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	setenv("SBX_FUZZ_VAR", "value", 0);
	sbx__config *cfg = NULL;
	sbx_error err = {0};
	if (sbx__config_load(NULL, text, &cfg, &err) == SBX_OK) {
		read_back(&cfg->deflt, NULL);
		for (size_t i = 0; i < cfg->n && i < 16; i++)
			read_back(&cfg->sources[i], cfg->deflt.keys);
		const sbx__data_source *ds = NULL;
		sbx__config_find(cfg, "0", &ds, &err);
		sbx__config_free(cfg);
	}
	sbx__node *root = NULL;
	if (sbx__yaml_load_string(text, "fuzz.yaml", 0, SBX_E_CONFIG, &root, &err) == SBX_OK) {
		sbx__node *copy = sbx__node_dup(root);
		char *json = sbx__node_to_json(copy);
		sbx__free(json);
		sbx__node_free(copy);
		sbx__node_free(root);
	}
	free(text);
	return 0;
}

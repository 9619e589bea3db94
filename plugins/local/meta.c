/* The metadata file beside a sandbox's work dir: created time, labels and environment, so
 * any process can list sandboxes by label and run commands with the create's environment. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "meta.h"
#include "state.h"

int local_id_ok(const char *id)
{
	if (!id || strlen(id) != LOCAL_ID_LEN)
		return 0;
	for (size_t i = 0; i < LOCAL_ID_LEN; i++)
		if (!strchr("0123456789abcdef", id[i]))
			return 0;
	return 1;
}

int local_path(const local_state *st, const char *id, const char *suffix, char *buf, size_t cap,
	       sbx_error *err)
{
	if (!local_id_ok(id))
		return sbxs_host->set_error(
		    err, SBX_E_BAD_ID, "local: '%.64s' is not a local sandbox id (%d hex digits)",
		    id ? id : "", LOCAL_ID_LEN);
	int n = suffix ? snprintf(buf, cap, "%s/%s/%s", st->root, id, suffix)
		       : snprintf(buf, cap, "%s/%s", st->root, id);
	if (n < 0 || (size_t)n >= cap)
		return sbxs_host->set_error(err, SBX_E_INVAL, "local: sandbox path too long");
	return SBX_OK;
}

int local_write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int local_meta_write(const char *dir, const sbx_create_spec *spec, sbx_error *err)
{
	const sbx_host_api *h = sbxs_host;
	char path[1200];
	int rc;
	int n = snprintf(path, sizeof(path), "%s/meta.json", dir);
	if (n < 0 || (size_t)n >= sizeof(path))
		return h->set_error(err, SBX_E_INVAL, "local: create: metadata path too long");
	rc = SBX_E_NOMEM;
	json_t *root = json_object(), *labels = json_object(), *env = json_object();
	if (!root || !labels || !env)
		goto nomem;
	if (json_object_set_new(root, "created", json_integer((json_int_t)time(NULL))) != 0)
		goto nomem;
	if (spec->image && json_object_set_new(root, "image", json_string(spec->image)) != 0)
		goto nomem;
	for (uint32_t i = 0; i < spec->n_labels; i++)
		if (json_object_set_new(labels, spec->labels[i].key,
					json_string(spec->labels[i].value)) != 0)
			goto nomem;
	for (uint32_t i = 0; i < spec->n_env; i++)
		if (json_object_set_new(env, spec->env[i].key, json_string(spec->env[i].value)) !=
		    0)
			goto nomem;
	if (json_object_set(root, "labels", labels) != 0 || json_object_set(root, "env", env) != 0)
		goto nomem;
	/* The environment given at create may hold secrets: owner-only, like the folder. */
	/* One write: jansson's dumpfd writes each token with a system call of its own. */
	char *text = json_dumps(root, JSON_COMPACT);
	if (!text)
		goto nomem;
	/* Written in place: dir is the create's staging folder, which nobody reads before it is
	 * renamed into place whole, so a torn file is never seen as a sandbox's. */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int bad = fd < 0 || local_write_all(fd, text, strlen(text)) != 0;
	int e = errno;
	free(text);
	if (fd >= 0 && close(fd) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad) {
		rc = h->set_error(err, SBX_E_IO, "local: create: cannot write %s: %s", path,
				  strerror(e));
		goto out;
	}
	rc = SBX_OK;
	goto out;
nomem:
	rc = h->set_error(err, SBX_E_NOMEM, "local: create: out of memory");
out:
	json_decref(labels);
	json_decref(env);
	json_decref(root);
	return rc;
}

static json_t *meta_load(const local_state *st, const char *id)
{
	char path[1200];
	if (local_path(st, id, "meta.json", path, sizeof(path), NULL) != SBX_OK)
		return NULL;
	return json_load_file(path, 0, NULL);
}

void local_strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

int local_meta_env(const local_state *st, const char *id, char ***out, sbx_error *err)
{
	*out = NULL;
	json_t *root = meta_load(st, id);
	if (!root)
		return SBX_OK; /* a sandbox without metadata has no saved environment */
	int rc = SBX_OK;
	json_t *env = json_object_get(root, "env");
	size_t n = json_is_object(env) ? json_object_size(env) : 0;
	if (n == 0)
		goto out;
	char **v = calloc(n + 1, sizeof(*v));
	if (!v)
		goto nomem;
	size_t i = 0;
	const char *k;
	json_t *val;
	json_object_foreach(env, k, val)
	{
		const char *s = json_string_value(val);
		if (!s || i >= n)
			continue;
		size_t len = strlen(k) + strlen(s) + 2;
		v[i] = malloc(len);
		if (!v[i]) {
			local_strv_free(v);
			goto nomem;
		}
		snprintf(v[i], len, "%s=%s", k, s);
		i++;
	}
	*out = v;
	goto out;
nomem:
	rc = sbxs_host->set_error(err, SBX_E_NOMEM, "local: exec: out of memory");
out:
	json_decref(root);
	return rc;
}

int local_meta_has_label(const local_state *st, const char *id, const char *key, const char *value)
{
	json_t *root = meta_load(st, id);
	if (!root)
		return 0;
	const char *v = json_string_value(json_object_get(json_object_get(root, "labels"), key));
	int yes = v && (!value || strcmp(v, value) == 0);
	json_decref(root);
	return yes;
}

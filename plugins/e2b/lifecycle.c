/* The sandbox lifecycle through E2B's control plane (see lifecycle.h). */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include <sbx/support/host.h>
#include <sbx/support/json.h>
#include <sbx/support/random.h>

#include "api.h"
#include "envd.h"
#include "lifecycle.h"

typedef struct first_id {
	char id[64];
	int n;
} first_id;

static int take_first(void *ctx, const char *id)
{
	first_id *f = ctx;
	if (f->n++ == 0)
		snprintf(f->id, sizeof(f->id), "%s", id);
	return SBX_OK;
}

/* NeMo Gym's rules: template_map[image], else the image itself when it is a plain template
 * name, else the configured template only when no image was asked for. Never a silent
 * fallback from an image to some other template. */
static int resolve_template(e2b_state *st, const char *image, const char **out, sbx_error *err)
{
	if (!image || !*image) {
		*out = st->set.template_id;
		return SBX_OK;
	}
	const char *m = json_string_value(json_object_get(st->template_map, image));
	if (m && *m) {
		*out = m;
		return SBX_OK;
	}
	for (const char *p = image; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
			return sbxs_host->set_error(
			    err, SBX_E_CONFIG,
			    "e2b: create: image '%.200s' has no template: add it "
			    "to template_map (or name a template: [A-Za-z0-9_-]+)",
			    image);
	*out = image;
	return SBX_OK;
}

int e2b_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
	       sbx_error *err)
{
	e2b_state *st = state;
	sbxs_http_resp resp = {0};
	json_t *req = NULL, *j = NULL;
	char *body = NULL, tok[33], msg[300];
	int rc = SBX_OK;
	const char *tmpl = NULL;
	if ((rc = resolve_template(st, spec->image, &tmpl, err)) != SBX_OK)
		return rc;
	json_t *md = json_deep_copy(st->metadata), *env = json_deep_copy(st->envs);
	int64_t life = spec->ttl_seconds > 0 ? spec->ttl_seconds : st->set.lifetime;
	if (!md || !env)
		goto nomem;
	if (sbxs_random_hex(tok, sizeof(tok), 16) != SBX_OK) {
		rc = sbxs_host->set_error(err, SBX_E_IO, "e2b: create: no randomness for a token");
		goto out;
	}
	for (uint32_t i = 0; i < spec->n_labels; i++)
		if (json_object_set_new(md, spec->labels[i].key,
					json_string(spec->labels[i].value)) != 0)
			goto nomem;
	if (json_object_set_new(md, "sbx.create_token", json_string(tok)) != 0)
		goto nomem;
	for (uint32_t i = 0; i < spec->n_env; i++)
		if (json_object_set_new(env, spec->env[i].key, json_string(spec->env[i].value)) !=
		    0)
			goto nomem;
	req = json_pack("{s:s,s:I,s:O,s:O}", "templateID", tmpl, "timeout", (json_int_t)life,
			"metadata", md, "envVars", env);
	if (!req)
		goto nomem;
	if (st->set.allow_internet >= 0)
		json_object_set_new(req, "allow_internet_access",
				    json_boolean(st->set.allow_internet));
	for (int pass = 0; pass < 2; pass++) {
		int v1 = __atomic_load_n(&st->use_v1, __ATOMIC_RELAXED);
		if (v1)
			json_object_set_new(req, "secure", json_true());
		sbxs_host->free(body);
		body = sbxs_json_dump(req);
		if (!body)
			goto nomem;
		rc = e2b_api(st, "POST", v1 ? "/sandboxes" : "/v2/sandboxes", body, 0, &resp, err);
		if (rc == SBX_OK && resp.status == 404 && !v1) {
			/* An older gateway: no /v2 route. Nothing was created. */
			__atomic_store_n(&st->use_v1, 1, __ATOMIC_RELAXED);
			continue;
		}
		break;
	}
	if (rc != SBX_OK || resp.status >= 500) {
		/* Ambiguous: the sandbox may exist. Never create again; adopt it if it shows. */
		sbx_error e2 = {0};
		first_id f = {0};
		if (rc == SBX_OK)
			e2b_message(&resp, msg, sizeof(msg));
		if (e2b_list_by_label(st, "sbx.create_token", tok, take_first, &f, &e2) == SBX_OK &&
		    f.n > 0) {
			sbxs_host->log(SBX_LOG_WARN, E2B_ALIAS,
				       "create: adopted sandbox %s after an ambiguous failure",
				       f.id);
			rc = SBX_OK;
			if (snprintf(id_buf, id_cap, "%s", f.id) >= (int)id_cap)
				rc = sbxs_host->set_error(err, SBX_E_BACKEND,
							  "e2b: create: id too long");
			goto out;
		}
		if (rc == SBX_OK)
			rc = sbxs_host->set_error(
			    err, SBX_E_BACKEND,
			    "e2b: create: API answered %ld: %s (not retried: the "
			    "sandbox may exist; none carries this create's token)",
			    resp.status, msg);
		goto out;
	}
	if (resp.status != 201 && resp.status != 200) {
		e2b_message(&resp, msg, sizeof(msg));
		int code = resp.status == 401 || resp.status == 403   ? SBX_E_CONFIG
			   : resp.status == 429                       ? SBX_E_RATE_LIMITED
			   : resp.status == 404 || resp.status == 400 ? SBX_E_INVAL
								      : SBX_E_BACKEND;
		rc = sbxs_host->set_error(err, code,
					  "e2b: create: template '%s': API answered %ld: %s", tmpl,
					  resp.status, msg);
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	const char *sid = json_string_value(json_object_get(j, "sandboxID"));
	if (!sid || !*sid || snprintf(id_buf, id_cap, "%s", sid) >= (int)id_cap) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "e2b: create: answer has no usable sandboxID");
		goto out;
	}
	goto out;
nomem:
	rc = sbxs_host->set_error(err, SBX_E_NOMEM, "e2b: create: out of memory");
out:
	json_decref(md);
	json_decref(env);
	json_decref(req);
	json_decref(j);
	sbxs_host->free(body);
	sbxs_http_resp_free(&resp);
	return rc;
}

static int e2b_simple(e2b_state *st, const char *method, const char *fmt, const char *id,
		      const char *body, long *status, const char *what, sbx_error *err)
{
	char path[160], msg[300];
	sbxs_http_resp resp = {0};
	if (snprintf(path, sizeof(path), fmt, id) >= (int)sizeof(path))
		return sbxs_host->set_error(err, SBX_E_BAD_ID, "e2b: %s: id too long", what);
	if (!e2b_id_ok(id))
		return sbxs_host->set_error(err, SBX_E_BAD_ID,
					    "e2b: %s: id '%.64s' is not [a-z0-9]+", what, id);
	int rc = e2b_api(st, method, path, body, 1, &resp, err);
	if (rc == SBX_OK) {
		*status = resp.status;
		if (resp.status >= 300 && resp.status != 404 && resp.status != 409) {
			e2b_message(&resp, msg, sizeof(msg));
			rc = sbxs_host->set_error(err,
						  resp.status == 401   ? SBX_E_CONFIG
						  : resp.status == 429 ? SBX_E_RATE_LIMITED
								       : SBX_E_BACKEND,
						  "e2b: %s '%s': API answered %ld: %s", what, id,
						  resp.status, msg);
		}
	}
	sbxs_http_resp_free(&resp);
	return rc;
}

int e2b_destroy(void *state, const char *id, sbx_error *err)
{
	long status = 0;
	e2b_forget(state, id);
	return e2b_simple(state, "DELETE", "/sandboxes/%s", id, NULL, &status, "destroy", err);
}

int e2b_pause(void *state, const char *id, sbx_error *err)
{
	long status = 0;
	e2b_forget(state, id);
	int rc = e2b_simple(state, "POST", "/sandboxes/%s/pause", id, "{}", &status, "pause", err);
	if (rc == SBX_OK && status == 404)
		rc = sbxs_host->set_error(err, SBX_E_NOT_FOUND,
					  "e2b: pause: sandbox '%s' not found", id);
	return rc; /* 409: already paused */
}

int e2b_resume(void *state, const char *id, sbx_error *err)
{
	e2b_state *st = state;
	long status = 0;
	char body[64];
	snprintf(body, sizeof(body), "{\"timeout\":%lld}", (long long)st->set.lifetime);
	e2b_forget(st, id);
	int rc =
	    e2b_simple(st, "POST",
		       __atomic_load_n(&st->use_v1, __ATOMIC_RELAXED) ? "/sandboxes/%s/connect"
								      : "/v2/sandboxes/%s/connect",
		       id, body, &status, "resume", err);
	if (rc == SBX_OK && status == 404)
		rc = sbxs_host->set_error(err, SBX_E_NOT_FOUND,
					  "e2b: resume: sandbox '%s' not found", id);
	return rc;
}

int e2b_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	char path[160], msg[300];
	sbxs_http_resp resp = {0};
	json_t *j = NULL;
	if (snprintf(path, sizeof(path), "/sandboxes/%s", id) >= (int)sizeof(path))
		return sbxs_host->set_error(err, SBX_E_BAD_ID, "e2b: status: id too long");
	int rc = e2b_api(state, "GET", path, NULL, 1, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		*out = SBX_STATE_GONE;
		goto out;
	}
	if (resp.status != 200) {
		e2b_message(&resp, msg, sizeof(msg));
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "e2b: status '%s': API answered %ld: %s", id, resp.status,
					  msg);
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	const char *s = json_string_value(json_object_get(j, "state"));
	*out = !s                          ? SBX_STATE_UNKNOWN
	       : strcmp(s, "running") == 0 ? SBX_STATE_RUNNING
	       : strcmp(s, "paused") == 0  ? SBX_STATE_PAUSED
					   : SBX_STATE_UNKNOWN;
out:
	json_decref(j);
	sbxs_http_resp_free(&resp);
	return rc;
}

int e2b_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
		      sbx_error *err)
{
	char q[1024], path[1400], msg[300];
	sbxs_http_resp resp = {0};
	json_t *j = NULL;
	char *esc = NULL;
	int rc = SBX_OK;
	int n = snprintf(q, sizeof(q), "%s=%s", key, value ? value : "");
	if (n < 0 || (size_t)n >= sizeof(q))
		return sbxs_host->set_error(err, SBX_E_INVAL, "e2b: list: label is too long");
	esc = curl_easy_escape(NULL, q, 0);
	if (!esc)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "e2b: list: out of memory");
	n = snprintf(path, sizeof(path), "/v2/sandboxes?metadata=%s&state=running,paused", esc);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		rc = sbxs_host->set_error(err, SBX_E_INVAL, "e2b: list: label is too long");
		goto out;
	}
	rc = e2b_api(state, "GET", path, NULL, 1, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status != 200) {
		e2b_message(&resp, msg, sizeof(msg));
		rc = sbxs_host->set_error(err, SBX_E_BACKEND, "e2b: list: API answered %ld: %s",
					  resp.status, msg);
		goto out;
	}
	j = json_loadb(resp.body.data, resp.body.len, 0, NULL);
	size_t i;
	json_t *s;
	json_array_foreach(j, i, s)
	{
		const char *sid = json_string_value(json_object_get(s, "sandboxID"));
		const char *mv =
		    json_string_value(json_object_get(json_object_get(s, "metadata"), key));
		/* Check the label ourselves: a gateway may ignore the filter. */
		if (!sid || !mv || (value && strcmp(mv, value) != 0))
			continue;
		if ((rc = fn(ctx, sid)) != SBX_OK) {
			rc = sbxs_host->set_error(err, rc, "e2b: list: stopped by the caller");
			goto out;
		}
	}
out:
	json_decref(j);
	curl_free(esc);
	sbxs_http_resp_free(&resp);
	return rc;
}

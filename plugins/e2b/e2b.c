/* The e2b backend: sandboxes through E2B's REST control plane (E2B cloud, self-hosted E2B or
 * an E2B-compatible gateway), commands and files through each sandbox's envd. This file holds
 * the configuration and the lifecycle ops. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2b.h"

const sbx_host_api *sbx__e2_host;
#define host sbx__e2_host

static const sbx_config_key e2_keys[] = {
    {.name = "api_key",
     .type = SBX_KEY_STRING,
     .secret = 1,
     .help = "E2B API key (default: $E2B_API_KEY)"},
    {.name = "api_url",
     .type = SBX_KEY_STRING,
     .help = "control plane URL (default: $E2B_API_URL, then https://api.<domain>)"},
    {.name = "sandbox_url",
     .type = SBX_KEY_STRING,
     .help = "one envd URL for every sandbox, routed by header (default: $E2B_SANDBOX_URL)"},
    {.name = "domain",
     .type = SBX_KEY_STRING,
     .help = "E2B domain (default: $E2B_DOMAIN, then e2b.app)"},
    {.name = "template",
     .type = SBX_KEY_STRING,
     .help = "template when the task names no image (base)"},
    {.name = "template_map",
     .type = SBX_KEY_MAP,
     .help = "image -> template; unmapped images must be plain template names"},
    {.name = "timeout", .type = SBX_KEY_INT, .help = "sandbox lifetime in seconds (300)"},
    {.name = "metadata", .type = SBX_KEY_MAP, .help = "metadata added to every sandbox"},
    {.name = "envs", .type = SBX_KEY_MAP, .help = "environment of every sandbox"},
    {.name = "allow_internet_access",
     .type = SBX_KEY_BOOL,
     .help = "let the sandbox reach the internet (the gateway's default when unset)"},
    {.name = "retries",
     .type = SBX_KEY_INT,
     .help = "retries of idempotent calls on 429/5xx/transport errors (3)"},
    {.name = "retry_delay",
     .type = SBX_KEY_FLOAT,
     .help = "seconds, the first retry's backoff, doubled per attempt (0.25)"},
    {.name = "strict_resources",
     .type = SBX_KEY_BOOL,
     .help = "refuse resource requests a template fixes, instead of warning (false)"},
    {.name = "retry_max_delay",
     .type = SBX_KEY_FLOAT,
     .help = "seconds, cap of one retry's backoff or Retry-After (8)"},
    {.name = "request_timeout",
     .type = SBX_KEY_FLOAT,
     .help = "seconds per control-plane or unary envd call (60)"},
};

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = host->alloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

static int opt_string(const sbx_config *cfg, const char *key, const char *env, const char *def,
		      char **dst, sbx_error *err)
{
	const char *v = NULL;
	int rc = host->config_string(cfg, key, &v, err);
	if (rc == SBX_E_NOT_FOUND) {
		rc = SBX_OK;
		v = env ? getenv(env) : NULL;
		if (!v || !*v)
			v = def;
	}
	if (rc != SBX_OK || !v)
		return rc;
	*dst = dup_str(v);
	return *dst ? SBX_OK : host->set_error(err, SBX_E_NOMEM, "e2b: init: out of memory");
}

static int opt_map(const sbx_config *cfg, const char *key, json_t **dst, sbx_error *err)
{
	const char *text = NULL;
	int rc = host->config_json(cfg, key, &text, err);
	if (rc == SBX_E_NOT_FOUND) {
		*dst = json_object();
		return *dst ? SBX_OK : host->set_error(err, SBX_E_NOMEM, "e2b: out of memory");
	}
	if (rc != SBX_OK)
		return rc;
	*dst = json_loads(text, 0, NULL);
	if (!json_is_object(*dst))
		return host->set_error(err, SBX_E_CONFIG, "e2b: key '%s' must be a map", key);
	const char *k;
	json_t *v;
	json_object_foreach(*dst, k, v)
	{
		if (json_is_string(v))
			continue;
		if (json_is_integer(v) || json_is_real(v) || json_is_boolean(v)) {
			char *s = json_dumps(v, JSON_ENCODE_ANY);
			if (!s)
				return host->set_error(err, SBX_E_NOMEM, "e2b: out of memory");
			json_object_set_new(*dst, k, json_string(s));
			free(s);
			continue;
		}
		return host->set_error(err, SBX_E_CONFIG,
				       "e2b: key '%s': value of '%s' must be a scalar", key, k);
	}
	return SBX_OK;
}

static void strip_slash(char *s)
{
	size_t l = s ? strlen(s) : 0;
	while (l > 0 && s[l - 1] == '/')
		s[--l] = '\0';
}

static void e2_fini(void *state)
{
	e2_state *st = state;
	if (!st)
		return;
	if (st->api_key) {
		explicit_bzero(st->api_key, strlen(st->api_key));
		host->free(st->api_key);
	}
	host->free(st->api_url);
	host->free(st->sandbox_url);
	host->free(st->domain);
	host->free(st->template_id);
	json_decref(st->metadata);
	json_decref(st->envs);
	json_decref(st->template_map);
	while (st->targets) {
		e2_target *t = st->targets;
		st->targets = t->next;
		host->free(t);
	}
	pthread_mutex_destroy(&st->lock);
	host->free(st);
}

static int e2_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	e2_state *st = host->alloc(sizeof(*st));
	int rc;
	if (!st)
		return host->set_error(err, SBX_E_NOMEM, "e2b: init: out of memory");
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->lock, NULL);
	st->allow_internet = -1;
	st->lifetime = 300;
	st->retries = 3;
	st->retry_cap = 8;
	st->retry_delay = 0.25;
	st->request_timeout = 60;
	if ((rc = opt_string(cfg, "api_key", "E2B_API_KEY", NULL, &st->api_key, err)) ||
	    (rc = opt_string(cfg, "domain", "E2B_DOMAIN", "e2b.app", &st->domain, err)) ||
	    (rc = opt_string(cfg, "api_url", "E2B_API_URL", NULL, &st->api_url, err)) ||
	    (rc = opt_string(cfg, "sandbox_url", "E2B_SANDBOX_URL", NULL, &st->sandbox_url, err)) ||
	    (rc = opt_string(cfg, "template", NULL, "base", &st->template_id, err)) ||
	    (rc = opt_map(cfg, "metadata", &st->metadata, err)) ||
	    (rc = opt_map(cfg, "envs", &st->envs, err)) ||
	    (rc = opt_map(cfg, "template_map", &st->template_map, err)))
		goto out;
	if (!st->api_key || !*st->api_key) {
		rc = host->set_error(err, SBX_E_CONFIG,
				     "e2b: init: no API key: set api_key or E2B_API_KEY");
		goto out;
	}
	if (!st->api_url) {
		char u[600];
		int n = snprintf(u, sizeof(u), "https://api.%s", st->domain);
		if (n < 0 || (size_t)n >= sizeof(u)) {
			rc = host->set_error(err, SBX_E_CONFIG, "e2b: init: domain is too long");
			goto out;
		}
		if (!(st->api_url = dup_str(u))) {
			rc = host->set_error(err, SBX_E_NOMEM, "e2b: init: out of memory");
			goto out;
		}
	}
	strip_slash(st->api_url);
	strip_slash(st->sandbox_url);
	int b;
	rc = host->config_bool(cfg, "allow_internet_access", &b, err);
	if (rc == SBX_OK)
		st->allow_internet = b != 0;
	else if (rc != SBX_E_NOT_FOUND)
		goto out;
	rc = host->config_bool(cfg, "strict_resources", &b, err);
	if (rc == SBX_OK)
		st->strict_resources = b != 0;
	else if (rc != SBX_E_NOT_FOUND)
		goto out;
	int64_t i;
	rc = host->config_int(cfg, "timeout", &i, err);
	if (rc == SBX_OK && (i < 1 || i > 86400 * 30)) {
		rc = host->set_error(err, SBX_E_CONFIG,
				     "e2b: timeout %lld is out of range: give 1..2592000 seconds",
				     (long long)i);
		goto out;
	}
	if (rc == SBX_OK)
		st->lifetime = i;
	else if (rc != SBX_E_NOT_FOUND)
		goto out;
	rc = host->config_int(cfg, "retries", &i, err);
	if (rc == SBX_OK && (i < 0 || i > 20)) {
		rc = host->set_error(err, SBX_E_CONFIG, "e2b: retries %lld: give 0..20",
				     (long long)i);
		goto out;
	}
	if (rc == SBX_OK)
		st->retries = i;
	else if (rc != SBX_E_NOT_FOUND)
		goto out;
	const char *fk[] = {"retry_max_delay", "request_timeout", "retry_delay"};
	double *fv[] = {&st->retry_cap, &st->request_timeout, &st->retry_delay};
	for (int k = 0; k < 3; k++) {
		double d;
		rc = host->config_float(cfg, fk[k], &d, err);
		if (rc == SBX_E_CONFIG && host->config_int(cfg, fk[k], &i, NULL) == SBX_OK) {
			d = (double)i;
			rc = SBX_OK;
		}
		if (rc == SBX_OK && !(d > 0 && d <= 3600)) {
			rc = host->set_error(err, SBX_E_CONFIG, "e2b: %s: give 0..3600 seconds",
					     fk[k]);
			goto out;
		}
		if (rc == SBX_OK)
			*fv[k] = d;
		else if (rc != SBX_E_NOT_FOUND)
			goto out;
	}
	rc = SBX_OK;
out:
	if (rc != SBX_OK)
		e2_fini(st);
	else
		*state = st;
	return rc;
}

/* A random token naming one create, so an ambiguous failure can be resolved by metadata. */
static void create_token(char out[33])
{
	unsigned char r[16] = {0};
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, r, sizeof(r)) != (ssize_t)sizeof(r))
			memset(r, 0, sizeof(r));
		close(fd);
	}
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[32] = '\0';
}

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

static int e2_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn,
			    void *ctx, sbx_error *err);

/* NeMo Gym's rules: template_map[image], else the image itself when it is a plain template
 * name, else the configured template only when no image was asked for. Never a silent
 * fallback from an image to some other template. */
static int resolve_template(e2_state *st, const char *image, const char **out, sbx_error *err)
{
	if (!image || !*image) {
		*out = st->template_id;
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
			return host->set_error(
			    err, SBX_E_CONFIG,
			    "e2b: create: image '%.200s' has no template: add it "
			    "to template_map (or name a template: [A-Za-z0-9_-]+)",
			    image);
	*out = image;
	return SBX_OK;
}

static int e2_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		     sbx_error *err)
{
	e2_state *st = state;
	e2_resp resp = {0};
	json_t *req = NULL, *j = NULL;
	char *body = NULL, tok[33], msg[300];
	int rc = SBX_OK;
	const char *tmpl = NULL;
	if ((rc = resolve_template(st, spec->image, &tmpl, err)) != SBX_OK)
		return rc;
	json_t *md = json_deep_copy(st->metadata), *env = json_deep_copy(st->envs);
	int64_t life = spec->ttl_seconds > 0 ? spec->ttl_seconds : st->lifetime;
	create_token(tok);
	if (!md || !env)
		goto nomem;
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
	if (st->allow_internet >= 0)
		json_object_set_new(req, "allow_internet_access", json_boolean(st->allow_internet));
	for (int pass = 0; pass < 2; pass++) {
		int v1 = __atomic_load_n(&st->use_v1, __ATOMIC_RELAXED);
		if (v1)
			json_object_set_new(req, "secure", json_true());
		free(body);
		body = json_dumps(req, JSON_COMPACT);
		if (!body)
			goto nomem;
		rc = sbx__e2_api(st, "POST", v1 ? "/sandboxes" : "/v2/sandboxes", body, 0, &resp,
				 err);
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
			sbx__e2_message(&resp, msg, sizeof(msg));
		if (e2_list_by_label(st, "sbx.create_token", tok, take_first, &f, &e2) == SBX_OK &&
		    f.n > 0) {
			host->log(SBX_LOG_WARN, E2_ALIAS,
				  "create: adopted sandbox %s after an ambiguous failure", f.id);
			rc = SBX_OK;
			if (snprintf(id_buf, id_cap, "%s", f.id) >= (int)id_cap)
				rc =
				    host->set_error(err, SBX_E_BACKEND, "e2b: create: id too long");
			goto out;
		}
		if (rc == SBX_OK)
			rc = host->set_error(err, SBX_E_BACKEND,
					     "e2b: create: API answered %ld: %s (not retried: the "
					     "sandbox may exist; none carries this create's token)",
					     resp.status, msg);
		goto out;
	}
	if (resp.status != 201 && resp.status != 200) {
		sbx__e2_message(&resp, msg, sizeof(msg));
		int code = resp.status == 401 || resp.status == 403   ? SBX_E_CONFIG
			   : resp.status == 429                       ? SBX_E_RATE_LIMITED
			   : resp.status == 404 || resp.status == 400 ? SBX_E_INVAL
								      : SBX_E_BACKEND;
		rc = host->set_error(err, code, "e2b: create: template '%s': API answered %ld: %s",
				     tmpl, resp.status, msg);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
	const char *sid = json_string_value(json_object_get(j, "sandboxID"));
	if (!sid || !*sid || snprintf(id_buf, id_cap, "%s", sid) >= (int)id_cap) {
		rc = host->set_error(err, SBX_E_BACKEND,
				     "e2b: create: answer has no usable sandboxID");
		goto out;
	}
	goto out;
nomem:
	rc = host->set_error(err, SBX_E_NOMEM, "e2b: create: out of memory");
out:
	json_decref(md);
	json_decref(env);
	json_decref(req);
	json_decref(j);
	free(body);
	sbx__e2_resp_free(&resp);
	return rc;
}

static int e2_simple(e2_state *st, const char *method, const char *fmt, const char *id,
		     const char *body, long *status, const char *what, sbx_error *err)
{
	char path[160], msg[300];
	e2_resp resp = {0};
	if (snprintf(path, sizeof(path), fmt, id) >= (int)sizeof(path))
		return host->set_error(err, SBX_E_BAD_ID, "e2b: %s: id too long", what);
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			return host->set_error(err, SBX_E_BAD_ID,
					       "e2b: %s: id '%.64s' is not [a-z0-9]+", what, id);
	int rc = sbx__e2_api(st, method, path, body, 1, &resp, err);
	if (rc == SBX_OK) {
		*status = resp.status;
		if (resp.status >= 300 && resp.status != 404 && resp.status != 409) {
			sbx__e2_message(&resp, msg, sizeof(msg));
			rc = host->set_error(err,
					     resp.status == 401   ? SBX_E_CONFIG
					     : resp.status == 429 ? SBX_E_RATE_LIMITED
								  : SBX_E_BACKEND,
					     "e2b: %s '%s': API answered %ld: %s", what, id,
					     resp.status, msg);
		}
	}
	sbx__e2_resp_free(&resp);
	return rc;
}

static int e2_destroy(void *state, const char *id, sbx_error *err)
{
	long status = 0;
	sbx__e2_forget(state, id);
	return e2_simple(state, "DELETE", "/sandboxes/%s", id, NULL, &status, "destroy", err);
}

static int e2_pause(void *state, const char *id, sbx_error *err)
{
	long status = 0;
	sbx__e2_forget(state, id);
	int rc = e2_simple(state, "POST", "/sandboxes/%s/pause", id, "{}", &status, "pause", err);
	if (rc == SBX_OK && status == 404)
		rc =
		    host->set_error(err, SBX_E_NOT_FOUND, "e2b: pause: sandbox '%s' not found", id);
	return rc; /* 409: already paused */
}

static int e2_resume(void *state, const char *id, sbx_error *err)
{
	e2_state *st = state;
	long status = 0;
	char body[64];
	snprintf(body, sizeof(body), "{\"timeout\":%lld}", (long long)st->lifetime);
	sbx__e2_forget(st, id);
	int rc =
	    e2_simple(st, "POST",
		      __atomic_load_n(&st->use_v1, __ATOMIC_RELAXED) ? "/sandboxes/%s/connect"
								     : "/v2/sandboxes/%s/connect",
		      id, body, &status, "resume", err);
	if (rc == SBX_OK && status == 404)
		rc = host->set_error(err, SBX_E_NOT_FOUND, "e2b: resume: sandbox '%s' not found",
				     id);
	return rc;
}

static int e2_status(void *state, const char *id, uint32_t *out, sbx_error *err)
{
	char path[160], msg[300];
	e2_resp resp = {0};
	json_t *j = NULL;
	if (snprintf(path, sizeof(path), "/sandboxes/%s", id) >= (int)sizeof(path))
		return host->set_error(err, SBX_E_BAD_ID, "e2b: status: id too long");
	int rc = sbx__e2_api(state, "GET", path, NULL, 1, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status == 404) {
		*out = SBX_STATE_GONE;
		goto out;
	}
	if (resp.status != 200) {
		sbx__e2_message(&resp, msg, sizeof(msg));
		rc = host->set_error(err, SBX_E_BACKEND, "e2b: status '%s': API answered %ld: %s",
				     id, resp.status, msg);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
	const char *s = json_string_value(json_object_get(j, "state"));
	*out = !s                          ? SBX_STATE_UNKNOWN
	       : strcmp(s, "running") == 0 ? SBX_STATE_RUNNING
	       : strcmp(s, "paused") == 0  ? SBX_STATE_PAUSED
					   : SBX_STATE_UNKNOWN;
out:
	json_decref(j);
	sbx__e2_resp_free(&resp);
	return rc;
}

static int e2_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn,
			    void *ctx, sbx_error *err)
{
	char q[1024], path[1400], msg[300];
	e2_resp resp = {0};
	json_t *j = NULL;
	char *esc = NULL;
	int rc = SBX_OK;
	int n = snprintf(q, sizeof(q), "%s=%s", key, value ? value : "");
	if (n < 0 || (size_t)n >= sizeof(q))
		return host->set_error(err, SBX_E_INVAL, "e2b: list: label is too long");
	esc = curl_easy_escape(NULL, q, 0);
	if (!esc)
		return host->set_error(err, SBX_E_NOMEM, "e2b: list: out of memory");
	n = snprintf(path, sizeof(path), "/v2/sandboxes?metadata=%s&state=running,paused", esc);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		rc = host->set_error(err, SBX_E_INVAL, "e2b: list: label is too long");
		goto out;
	}
	rc = sbx__e2_api(state, "GET", path, NULL, 1, &resp, err);
	if (rc != SBX_OK)
		goto out;
	if (resp.status != 200) {
		sbx__e2_message(&resp, msg, sizeof(msg));
		rc = host->set_error(err, SBX_E_BACKEND, "e2b: list: API answered %ld: %s",
				     resp.status, msg);
		goto out;
	}
	j = json_loadb(resp.body, resp.len, 0, NULL);
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
			rc = host->set_error(err, rc, "e2b: list: stopped by the caller");
			goto out;
		}
	}
out:
	json_decref(j);
	curl_free(esc);
	sbx__e2_resp_free(&resp);
	return rc;
}

static int e2_info(void *state, char **json, sbx_error *err)
{
	e2_state *st = state;
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:I,s:b,s:s,s:s}", "backend", "e2b", "api_url",
			      st->api_url, "sandbox_url", st->sandbox_url ? st->sandbox_url : "",
			      "template", st->template_id, "timeout", (json_int_t)st->lifetime,
			      "strict_resources", st->strict_resources, "exec",
			      "envd process.Process/Start (Connect server stream)", "timeout_kill",
			      "process group of a /bin/sh wrapper, inside the sandbox");
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return host->set_error(err, SBX_E_NOMEM, "e2b: info: out of memory");
	size_t n = strlen(text) + 1;
	*json = host->alloc(n);
	if (*json)
		memcpy(*json, text, n);
	free(text);
	return *json ? SBX_OK : host->set_error(err, SBX_E_NOMEM, "e2b: info: out of memory");
}

int sbx_plugin_register(const sbx_host_api *api, sbx_registrar *reg)
{
	host = api;
	sbx_plugin_desc d = {
	    .alias = E2_ALIAS,
	    .version = "0.1.0",
	    .description = "sandboxes on E2B or an E2B-compatible gateway (REST + envd)",
	    .keys = e2_keys,
	    .n_keys = (uint32_t)(sizeof(e2_keys) / sizeof(e2_keys[0])),
	    .flags = SBX_PLUGIN_THREAD_SAFE,
	    .init = e2_init,
	    .fini = e2_fini,
	    .create = e2_create,
	    .execute = sbx__e2_execute,
	    .destroy = e2_destroy,
	    .read_file = sbx__e2_read_file,
	    .write_file = sbx__e2_write_file,
	    .stat_file = sbx__e2_stat_file,
	    .list_dir = sbx__e2_list_dir,
	    .make_dir = sbx__e2_make_dir,
	    .remove_path = sbx__e2_remove_path,
	    .pause = e2_pause,
	    .resume = e2_resume,
	    .status = e2_status,
	    .list_by_label = e2_list_by_label,
	    .info = e2_info,
	};
	SBX_INIT_HEADER(d);
	return api->register_sandbox(reg, &d);
}

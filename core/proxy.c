/* Proxy descriptors: a plugin that runs in a runner process, seen by the host as a plugin.
 *
 * sbx__plugin_open loads an entry in this process, or starts its runner (link.c) and makes
 * one descriptor per alias the runner loaded: the same alias, version, keys and flags, and ops
 * that carry each call over the link. Nothing above the loader can tell the difference,
 * except that a crash, exit or hang of the plugin becomes SBX_E_PLUGIN_CRASHED.
 *
 * A proxy state is the plugin's state in the runner: the handle its init returned there, and
 * which runner that was. After a runner died, the next call starts a new one (link.c) and
 * runs init there again with the same config before the call itself: plugins keep nothing
 * per sandbox, so the new state reaches every sandbox the old one made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"
#include "loader.h"
#include "runner_conf.h"
#include "wire.h"

typedef struct proxy_plugin {
	sbx__link *link;
	sbx_plugin_desc *descs; /* n of them; the module owns the array */
	size_t n;
	char *strings;        /* the manifest's strings, which descs and keys point into */
	sbx_config_key *keys; /* every alias's keys, one array */
	char (*faults)[480];  /* per alias: "alias: plugin is faulty: ..." once the link is */
	struct proxy_plugin *next;
} proxy_plugin;

typedef struct pstate {
	proxy_plugin *pp;
	uint32_t idx;
	const char *alias;
	const struct sbx_config *cfg; /* the host keeps it until after fini */
	pthread_mutex_t lock;
	uint64_t gen; /* the runner the plugin state lives in; 0: none yet */
	uint64_t handle;
} pstate;

/* Live proxies, to find a descriptor's proxy (init has only the config to go by). */
static pthread_mutex_t proxies_lock = PTHREAD_MUTEX_INITIALIZER;
static proxy_plugin *proxies;

void sbx__proxy_fork_child(void)
{
	pthread_mutex_init(&proxies_lock, NULL);
}

static proxy_plugin *proxy_of(const sbx_plugin_desc *d, uint32_t *idx)
{
	proxy_plugin *found = NULL;
	pthread_mutex_lock(&proxies_lock);
	for (proxy_plugin *pp = proxies; pp && !found; pp = pp->next)
		if (d >= pp->descs && d < pp->descs + pp->n) {
			found = pp;
			*idx = (uint32_t)(d - pp->descs);
		}
	pthread_mutex_unlock(&proxies_lock);
	return found;
}

/* ---- requests and replies */

/* Every request starts with the length of the data that follows it, the alias and the
 * plugin state. */
static void head(sbx__wbuf *b, uint64_t data_len, const pstate *ps)
{
	sbx__wput_u64(b, data_len);
	sbx__wput_u32(b, ps->idx);
	sbx__wput_u64(b, ps->handle);
}

/* The status, error code and message every reply starts with; the plugin's error goes into
 * err as it set it. */
static int reply_status(sbx__rbuf *r, sbx_error *err)
{
	int st = (int)(int32_t)sbx__rget_u32(r);
	int code = (int)(int32_t)sbx__rget_u32(r);
	const char *msg = sbx__rget_str(r);
	if (!r->bad && st != SBX_OK && err) {
		err->code = code;
		snprintf(err->message, sizeof(err->message), "%s", msg ? msg : "");
	}
	return st;
}

static int malformed(sbx__conn *c, const pstate *ps, const char *op, sbx_error *err)
{
	sbx__conn_fail(c, "was killed after it sent a malformed reply");
	return sbx__set_error(err, SBX_E_PLUGIN_CRASHED,
			      "%s: %s: plugin crashed: its runner sent a malformed reply",
			      ps->alias, op);
}

static int remote_init(pstate *ps, sbx__conn *c, sbx_error *err)
{
	sbx__wbuf b = {0};
	sbx__wput_u64(&b, 0);
	sbx__wput_u32(&b, ps->idx);
	sbx__wput_node(&b, ps->cfg ? ps->cfg->map : NULL);
	if (b.oom) {
		sbx__wbuf_free(&b);
		return sbx__set_error(err, SBX_E_NOMEM, "%s: init: out of memory", ps->alias);
	}
	sbx__call call = {.alias = ps->alias, .op = "init"};
	int rc = sbx__conn_call(c, SBX__W_INIT, &b, NULL, 0, 0, &call, err);
	sbx__wbuf_free(&b);
	if (rc != SBX_OK)
		return rc;
	sbx__rbuf r = {.p = call.reply.p, .len = call.reply.len};
	rc = reply_status(&r, err);
	uint64_t handle = sbx__rget_u64(&r);
	if (r.bad)
		rc = malformed(c, ps, "init", err);
	else if (rc == SBX_OK) {
		ps->gen = sbx__conn_gen(c);
		ps->handle = handle;
	}
	sbx__wbuf_free(&call.reply);
	return rc;
}

/* A runner for a call on ps, with ps's plugin state initialised in it. */
static int begin(pstate *ps, const char *op, sbx__conn **c, sbx_error *err)
{
	int rc = sbx__link_acquire(ps->pp->link, ps->alias, op, c, err);
	if (rc != SBX_OK)
		return rc;
	pthread_mutex_lock(&ps->lock);
	if (ps->gen != sbx__conn_gen(*c))
		rc = remote_init(ps, *c, err);
	pthread_mutex_unlock(&ps->lock);
	if (rc != SBX_OK) {
		sbx__conn_release(*c);
		*c = NULL;
	}
	return rc;
}

/* Sends b (and data) as `type` and reads the reply's status into *st, leaving the rest in
 * *r. Returns SBX_OK when a reply came, else why none did. Frees b. */
static int roundtrip(pstate *ps, sbx__conn *c, uint32_t type, sbx__wbuf *b, const void *data,
		     size_t data_len, uint64_t own_timeout_ms, sbx__call *call, int *st,
		     sbx__rbuf *r, sbx_error *err)
{
	int rc;
	if (b->oom)
		rc = sbx__set_error(err, SBX_E_NOMEM, "%s: %s: out of memory", ps->alias, call->op);
	else
		rc = sbx__conn_call(c, type, b, data, data_len, own_timeout_ms, call, err);
	sbx__wbuf_free(b);
	if (rc != SBX_OK)
		return rc;
	*r = (sbx__rbuf){.p = call->reply.p, .len = call->reply.len};
	*st = reply_status(r, err);
	return r->bad ? malformed(c, ps, call->op, err) : SBX_OK;
}

/* The end of an op: the reply's status unless the rest of it was malformed. */
static int finish(pstate *ps, sbx__conn *c, sbx__call *call, int rc, int st, const sbx__rbuf *r,
		  sbx_error *err)
{
	if (rc == SBX_OK && r->bad)
		rc = malformed(c, ps, call->op, err);
	else if (rc == SBX_OK)
		rc = st;
	sbx__wbuf_free(&call->reply);
	sbx__conn_release(c);
	return rc;
}

/* ---- the ops */

static int p_init(const sbx_config *cfg, void **state, sbx_error *err)
{
	*state = NULL;
	uint32_t idx = 0;
	proxy_plugin *pp = cfg ? proxy_of(cfg->desc, &idx) : NULL;
	if (!pp)
		return sbx__set_error(err, SBX_E_INVAL, "runner: init: no proxy for this config");
	pstate *ps = sbx__calloc(1, sizeof(*ps));
	if (!ps || pthread_mutex_init(&ps->lock, NULL) != 0) {
		sbx__free(ps);
		return sbx__set_error(err, SBX_E_NOMEM, "%s: init: out of memory",
				      pp->descs[idx].alias);
	}
	ps->pp = pp;
	ps->idx = idx;
	ps->alias = pp->descs[idx].alias;
	ps->cfg = cfg;
	sbx__conn *c = NULL;
	int rc = begin(ps, "init", &c, err);
	sbx__conn_release(c);
	if (rc != SBX_OK) {
		pthread_mutex_destroy(&ps->lock);
		sbx__free(ps);
		return rc;
	}
	*state = ps;
	return SBX_OK;
}

static void p_fini(void *state)
{
	pstate *ps = state;
	if (!ps)
		return;
	/* A runner that died took the plugin state with it: none is started for this. */
	sbx__conn *c = sbx__link_current(ps->pp->link);
	if (c && sbx__conn_gen(c) == ps->gen) {
		sbx__wbuf b = {0};
		head(&b, 0, ps);
		sbx__call call = {.alias = ps->alias, .op = "fini"};
		sbx__rbuf r;
		sbx_error err = {0};
		int st = SBX_OK;
		int rc = roundtrip(ps, c, SBX__W_FINI, &b, NULL, 0, 0, &call, &st, &r, &err);
		if (rc != SBX_OK)
			sbx__log(SBX_LOG_WARN, ps->alias, "fini: %s", err.message);
		sbx__wbuf_free(&call.reply);
	}
	sbx__conn_release(c);
	pthread_mutex_destroy(&ps->lock);
	sbx__free(ps);
}

static int p_create(void *state, const sbx_create_spec *spec, char *id_buf, size_t id_cap,
		    sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "create", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, spec->image);
	sbx__wput_kvs(&b, spec->labels, spec->n_labels);
	sbx__wput_kvs(&b, spec->env, spec->n_env);
	sbx__wput_i64(&b, spec->ttl_seconds);
	sbx__wput_str(&b, spec->data_source);
	sbx__wput_u64(&b, id_cap);
	sbx__wput_str(&b, spec->share_dir);
	sbx__call call = {.alias = ps->alias, .op = "create"};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_CREATE, &b, NULL, 0, 0, &call, &st, &r, err);
	if (rc == SBX_OK) {
		size_t n = 0;
		const void *id = sbx__rget_bytes(&r, &n);
		if (n > id_cap)
			r.bad = 1;
		else if (!r.bad && n)
			memcpy(id_buf, id, n);
	}
	return finish(ps, c, &call, rc, st, &r, err);
}

static int p_execute(void *state, const char *id, const sbx_exec_request *req,
		     sbx_exec_outcome *out, sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "exec", &c, err);
	if (rc != SBX_OK)
		return rc;
	size_t data_len = req->has_stdin && req->stdin_data ? req->stdin_len : 0;
	sbx__wbuf b = {0};
	head(&b, data_len, ps);
	sbx__wput_str(&b, id);
	sbx__wput_str(&b, req->shell);
	uint32_t argc = 0;
	while (req->argv && req->argv[argc])
		argc++;
	sbx__wput_u32(&b, req->argv ? 1u : 0u);
	sbx__wput_u32(&b, argc);
	for (uint32_t i = 0; i < argc; i++)
		sbx__wput_str(&b, req->argv[i]);
	sbx__wput_u32(&b, req->has_stdin);
	sbx__wput_str(&b, req->cwd);
	sbx__wput_kvs(&b, req->env, req->n_env);
	sbx__wput_u64(&b, req->timeout_ms);
	sbx__wput_str(&b, req->user);
	sbx__wput_str(&b, req->stdout_path);
	sbx__wput_str(&b, req->stderr_path);
	sbx__call call = {
	    .alias = ps->alias, .op = "exec", .output = req->output, .output_ctx = req->output_ctx};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_EXECUTE, &b, req->stdin_data, data_len, req->timeout_ms, &call,
		       &st, &r, err);
	if (rc == SBX_OK) {
		/* Whatever the status: a plugin may fill the outcome and fail. */
		out->exit_code = (int32_t)sbx__rget_u32(&r);
		out->signal = (int32_t)sbx__rget_u32(&r);
		out->timed_out = sbx__rget_u32(&r);
		uint32_t oom = sbx__rget_u32(&r);
		if (SBX_HAS(out, sbx_exec_outcome, oom_killed))
			out->oom_killed = oom;
	}
	return finish(ps, c, &call, rc, st, &r, err);
}

/* destroy, pause, resume, make_dir and remove_path: an id, maybe a path and a flag. */
static int simple(pstate *ps, uint32_t type, const char *op, const char *id, const char *path,
		  uint32_t flag, sbx_error *err)
{
	sbx__conn *c = NULL;
	int rc = begin(ps, op, &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, id);
	sbx__wput_str(&b, path);
	sbx__wput_u32(&b, flag);
	sbx__call call = {.alias = ps->alias, .op = op};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, type, &b, NULL, 0, 0, &call, &st, &r, err);
	return finish(ps, c, &call, rc, st, &r, err);
}

static int p_destroy(void *state, const char *id, sbx_error *err)
{
	return simple(state, SBX__W_DESTROY, "destroy", id, NULL, 0, err);
}

static int p_pause(void *state, const char *id, sbx_error *err)
{
	return simple(state, SBX__W_PAUSE, "pause", id, NULL, 0, err);
}

static int p_resume(void *state, const char *id, sbx_error *err)
{
	return simple(state, SBX__W_RESUME, "resume", id, NULL, 0, err);
}

static int p_make_dir(void *state, const char *id, const char *path, uint32_t parents,
		      sbx_error *err)
{
	return simple(state, SBX__W_MAKE_DIR, "mkdir", id, path, parents, err);
}

static int p_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
			 sbx_error *err)
{
	return simple(state, SBX__W_REMOVE, "remove", id, path, recursive, err);
}

static int p_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
			uint32_t mode, sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "write_file", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, data ? len : 0, ps);
	sbx__wput_str(&b, id);
	sbx__wput_str(&b, path);
	sbx__wput_u32(&b, data ? 1u : 0u);
	sbx__wput_u64(&b, len);
	sbx__wput_u32(&b, mode);
	sbx__call call = {.alias = ps->alias, .op = "write_file"};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_WRITE_FILE, &b, data, data ? len : 0, 0, &call, &st, &r, err);
	return finish(ps, c, &call, rc, st, &r, err);
}

/* Bytes streamed back (read_file, info), kept whole: the caller gets one buffer. */
typedef struct bytes_in {
	unsigned char *p;
	size_t len, cap;
} bytes_in;

static int take_bytes(void *ctx, uint32_t type, const void *data, size_t len)
{
	bytes_in *in = ctx;
	if (type != SBX__W_DATA)
		return -1;
	if (in->len + len + 1 > in->cap) {
		size_t cap = in->cap ? in->cap : 4096;
		while (cap < in->len + len + 1)
			cap *= 2;
		unsigned char *p = sbx__realloc(in->p, cap);
		if (!p)
			return SBX_E_NOMEM;
		in->p = p;
		in->cap = cap;
	}
	memcpy(in->p + in->len, data, len);
	in->len += len;
	in->p[in->len] = '\0';
	return SBX_OK;
}

static int p_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		       sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "read_file", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, id);
	sbx__wput_str(&b, path);
	bytes_in in = {0};
	sbx__call call = {
	    .alias = ps->alias, .op = "read_file", .on_frame = take_bytes, .frame_ctx = &in};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_READ_FILE, &b, NULL, 0, 0, &call, &st, &r, err);
	if (rc == SBX_OK) {
		uint64_t n = sbx__rget_u64(&r);
		uint32_t has_buf = sbx__rget_u32(&r);
		if (!r.bad && has_buf && n != in.len)
			r.bad = 1;
		if (!r.bad && st == SBX_OK && has_buf && !in.p && !(in.p = sbx__alloc(1)))
			rc = sbx__set_error(err, SBX_E_NOMEM, "%s: read_file: out of memory",
					    ps->alias);
		if (!r.bad && rc == SBX_OK) {
			*data = has_buf ? in.p : NULL;
			*len = (size_t)n;
			if (has_buf)
				in.p = NULL;
		}
	}
	sbx__free(in.p);
	return finish(ps, c, &call, rc, st, &r, err);
}

static int p_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		       sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "stat", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, id);
	sbx__wput_str(&b, path);
	sbx__call call = {.alias = ps->alias, .op = "stat"};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_STAT, &b, NULL, 0, 0, &call, &st, &r, err);
	if (rc == SBX_OK) {
		sbx_file_info fi;
		sbx__rget_info(&r, &fi);
		if (!r.bad) {
			info->kind = fi.kind;
			info->mode = fi.mode;
			info->size = fi.size;
			info->mtime = fi.mtime;
			memcpy(info->name, fi.name, sizeof(info->name));
		}
	}
	return finish(ps, c, &call, rc, st, &r, err);
}

typedef struct entries_in {
	sbx_file_info *v;
	size_t n, cap;
} entries_in;

static int take_entries(void *ctx, uint32_t type, const void *data, size_t len)
{
	entries_in *in = ctx;
	sbx__rbuf r = {.p = data, .len = len};
	uint32_t k = sbx__rget_u32(&r);
	if (type != SBX__W_ENTRIES || r.bad || k > len / 8)
		return -1;
	if (in->n + k > in->cap) {
		size_t cap = in->cap ? in->cap : 64;
		while (cap < in->n + k)
			cap *= 2;
		sbx_file_info *v = sbx__realloc(in->v, cap * sizeof(*v));
		if (!v)
			return SBX_E_NOMEM;
		in->v = v;
		in->cap = cap;
	}
	for (uint32_t i = 0; i < k; i++)
		sbx__rget_info(&r, &in->v[in->n + i]);
	if (r.bad)
		return -1;
	in->n += k;
	return SBX_OK;
}

static int p_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		      size_t *n, sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "list_dir", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, id);
	sbx__wput_str(&b, path);
	entries_in in = {0};
	sbx__call call = {
	    .alias = ps->alias, .op = "list_dir", .on_frame = take_entries, .frame_ctx = &in};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_LIST_DIR, &b, NULL, 0, 0, &call, &st, &r, err);
	if (rc == SBX_OK) {
		uint64_t count = sbx__rget_u64(&r);
		uint32_t has_array = sbx__rget_u32(&r);
		if (!r.bad && has_array && count != in.n)
			r.bad = 1;
		if (!r.bad) {
			*entries = has_array ? in.v : NULL;
			*n = (size_t)count;
			if (has_array)
				in.v = NULL;
		}
	}
	sbx__free(in.v);
	return finish(ps, c, &call, rc, st, &r, err);
}

static int p_status(void *state, const char *id, uint32_t *sandbox_state, sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "status", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, id);
	sbx__call call = {.alias = ps->alias, .op = "status"};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_STATUS, &b, NULL, 0, 0, &call, &st, &r, err);
	if (rc == SBX_OK) {
		uint32_t v = sbx__rget_u32(&r);
		if (!r.bad)
			*sandbox_state = v;
	}
	return finish(ps, c, &call, rc, st, &r, err);
}

/* Ids listed by the plugin, kept until the call is over: the caller's callback runs on the
 * caller's thread (it may call the host again), never on the link's reader. */
typedef struct ids_in {
	char **v; /* NULL entries are ids the plugin passed as NULL */
	size_t n, cap;
} ids_in;

static int take_ids(void *ctx, uint32_t type, const void *data, size_t len)
{
	ids_in *in = ctx;
	sbx__rbuf r = {.p = data, .len = len};
	uint32_t k = sbx__rget_u32(&r);
	if (type != SBX__W_IDS || r.bad || k > len / 4)
		return -1;
	for (uint32_t i = 0; i < k; i++) {
		const char *id = sbx__rget_str(&r);
		if (r.bad)
			return -1;
		if (in->n == in->cap) {
			size_t cap = in->cap ? in->cap * 2 : 64;
			char **v = sbx__realloc(in->v, cap * sizeof(*v));
			if (!v)
				return SBX_E_NOMEM;
			in->v = v;
			in->cap = cap;
		}
		in->v[in->n] = NULL;
		if (id && !(in->v[in->n] = sbx__strdup(id)))
			return SBX_E_NOMEM;
		in->n++;
	}
	return SBX_OK;
}

static int p_list_by_label(void *state, const char *key, const char *value, sbx_id_fn fn, void *ctx,
			   sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "list_by_label", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, key);
	sbx__wput_str(&b, value);
	ids_in in = {0};
	sbx__call call = {
	    .alias = ps->alias, .op = "list_by_label", .on_frame = take_ids, .frame_ctx = &in};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_LIST_BY_LABEL, &b, NULL, 0, 0, &call, &st, &r, err);
	rc = finish(ps, c, &call, rc, st, &r, err);
	for (size_t i = 0; i < in.n; i++) {
		if (rc == SBX_OK)
			rc = fn(ctx, in.v[i]);
		sbx__free(in.v[i]);
	}
	sbx__free(in.v);
	return rc;
}

/* The JSON text streamed back for info and sandbox_info: *json takes in's buffer when the
 * reply says the plugin returned one (the empty string when it was empty). */
static int take_json(pstate *ps, sbx__rbuf *r, bytes_in *in, char **json, sbx_error *err)
{
	uint32_t has_json = sbx__rget_u32(r);
	if (r->bad || !has_json)
		return SBX_OK;
	if (!in->p && take_bytes(in, SBX__W_DATA, "", 0) != SBX_OK)
		return sbx__set_error(err, SBX_E_NOMEM, "%s: info: out of memory", ps->alias);
	*json = (char *)in->p;
	in->p = NULL;
	return SBX_OK;
}

static int p_info(void *state, char **json, sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "info", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	bytes_in in = {0};
	sbx__call call = {
	    .alias = ps->alias, .op = "info", .on_frame = take_bytes, .frame_ctx = &in};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_INFO, &b, NULL, 0, 0, &call, &st, &r, err);
	if (rc == SBX_OK)
		rc = take_json(ps, &r, &in, json, err);
	sbx__free(in.p);
	return finish(ps, c, &call, rc, st, &r, err);
}

static int p_sandbox_info(void *state, const char *id, char **json, sbx_error *err)
{
	pstate *ps = state;
	sbx__conn *c = NULL;
	int rc = begin(ps, "sandbox_info", &c, err);
	if (rc != SBX_OK)
		return rc;
	sbx__wbuf b = {0};
	head(&b, 0, ps);
	sbx__wput_str(&b, id);
	bytes_in in = {0};
	sbx__call call = {
	    .alias = ps->alias, .op = "sandbox_info", .on_frame = take_bytes, .frame_ctx = &in};
	sbx__rbuf r = {0};
	int st = SBX_OK;
	rc = roundtrip(ps, c, SBX__W_SANDBOX_INFO, &b, NULL, 0, 0, &call, &st, &r, err);
	if (rc == SBX_OK)
		rc = take_json(ps, &r, &in, json, err);
	sbx__free(in.p);
	return finish(ps, c, &call, rc, st, &r, err);
}

/* ---- opening */

static void proxy_release(void *owner)
{
	proxy_plugin *pp = owner;
	pthread_mutex_lock(&proxies_lock);
	for (proxy_plugin **at = &proxies; *at; at = &(*at)->next)
		if (*at == pp) {
			*at = pp->next;
			break;
		}
	pthread_mutex_unlock(&proxies_lock);
	sbx__link_stop(pp->link);
	sbx__free(pp->strings);
	sbx__free(pp->keys);
	sbx__free(pp->faults);
	sbx__free(pp);
}

/* Copies s into the string area at *at; NULL stays NULL. */
static const char *keep(char **at, const char *s)
{
	if (!s)
		return NULL;
	size_t n = strlen(s) + 1;
	char *d = *at;
	memcpy(d, s, n);
	*at += n;
	return d;
}

/* The descriptors of the manifest (the LOAD reply; see runner/ops.c) as proxies. */
static int make_descs(proxy_plugin *pp, const sbx__wbuf *m, sbx_error *err)
{
	sbx__rbuf r = {.p = m->p, .len = m->len};
	sbx__rget_u32(&r); /* status, code and message: SBX_OK, 0, "" */
	sbx__rget_u32(&r);
	sbx__rget_str(&r);
	uint32_t n = sbx__rget_u32(&r);
	size_t n_keys_total = 0;
	if (r.bad || n == 0 || n > 1024)
		return sbx__set_error(err, SBX_E_ABI, "runner: malformed list of aliases");
	pp->descs = sbx__calloc(n, sizeof(*pp->descs));
	/* Every string of the manifest fits in its length. */
	pp->strings = sbx__alloc(m->len);
	pp->keys = sbx__calloc(m->len / 16 + 1, sizeof(*pp->keys));
	pp->faults = sbx__calloc(n, sizeof(*pp->faults));
	if (!pp->descs || !pp->strings || !pp->keys || !pp->faults)
		return sbx__set_error(err, SBX_E_NOMEM, "runner: out of memory");
	char *at = pp->strings;
	for (uint32_t i = 0; i < n && !r.bad; i++) {
		sbx_plugin_desc *d = &pp->descs[i];
		d->struct_size = (uint32_t)sizeof(*d);
		d->alias = keep(&at, sbx__rget_str(&r));
		d->version = keep(&at, sbx__rget_str(&r));
		d->description = keep(&at, sbx__rget_str(&r));
		d->abi_major = (uint16_t)sbx__rget_u32(&r);
		d->abi_minor = (uint16_t)sbx__rget_u32(&r);
		d->flags = sbx__rget_u32(&r);
		uint32_t ops = sbx__rget_u32(&r);
		d->n_keys = sbx__rget_u32(&r);
		if (r.bad || !d->alias || d->n_keys > m->len / 16 - n_keys_total)
			break;
		d->keys = d->n_keys ? &pp->keys[n_keys_total] : NULL;
		for (uint32_t k = 0; k < d->n_keys && !r.bad; k++) {
			sbx_config_key *key = &pp->keys[n_keys_total++];
			key->name = keep(&at, sbx__rget_str(&r));
			key->type = sbx__rget_u32(&r);
			key->secret = sbx__rget_u32(&r);
			key->help = keep(&at, sbx__rget_str(&r));
		}
		d->init = p_init;
		d->fini = p_fini;
		d->create = p_create;
		d->execute = p_execute;
		d->destroy = p_destroy;
		d->read_file = ops & SBX__OP_READ_FILE ? p_read_file : NULL;
		d->write_file = ops & SBX__OP_WRITE_FILE ? p_write_file : NULL;
		d->stat_file = ops & SBX__OP_STAT_FILE ? p_stat_file : NULL;
		d->list_dir = ops & SBX__OP_LIST_DIR ? p_list_dir : NULL;
		d->make_dir = ops & SBX__OP_MAKE_DIR ? p_make_dir : NULL;
		d->remove_path = ops & SBX__OP_REMOVE_PATH ? p_remove_path : NULL;
		d->pause = ops & SBX__OP_PAUSE ? p_pause : NULL;
		d->resume = ops & SBX__OP_RESUME ? p_resume : NULL;
		d->status = ops & SBX__OP_STATUS ? p_status : NULL;
		d->list_by_label = ops & SBX__OP_LIST_BY_LABEL ? p_list_by_label : NULL;
		d->info = ops & SBX__OP_INFO ? p_info : NULL;
		d->sandbox_info = ops & SBX__OP_SANDBOX_INFO ? p_sandbox_info : NULL;
		pp->n++;
	}
	if (r.bad || pp->n != n)
		return sbx__set_error(err, SBX_E_ABI, "runner: malformed list of aliases");
	return SBX_OK;
}

int sbx__plugin_open(const sbx__reg_entry *ent, const char *state_dir, const char *const *expected,
		     size_t n_expected, sbx__module **out, sbx_error *err)
{
	*out = NULL;
	if (sbx__runner_mode(ent) == SBX__RUNNER_INPROC)
		return sbx__module_load(ent->path, sbx__host_api(), expected, n_expected, out, err);
	proxy_plugin *pp = sbx__calloc(1, sizeof(*pp));
	if (!pp)
		return sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory", ent->path);
	int rc = sbx__link_start(ent->path, state_dir, expected, n_expected, &ent->runner,
				 &pp->link, err);
	if (rc == SBX_OK)
		rc = make_descs(pp, sbx__link_manifest(pp->link), err);
	if (rc == SBX_OK &&
	    sbx__module_wrap(ent->path, pp->descs, pp->n, pp, proxy_release, out) != SBX_OK)
		rc = sbx__set_error(err, SBX_E_NOMEM, "%s: out of memory", ent->path);
	if (rc != SBX_OK) {
		sbx__free(pp->descs);
		proxy_release(pp);
		return rc;
	}
	pthread_mutex_lock(&proxies_lock);
	pp->next = proxies;
	proxies = pp;
	pthread_mutex_unlock(&proxies_lock);
	return SBX_OK;
}

void sbx__proxy_health(const sbx_plugin_desc *desc, uint32_t *state, const char **reason)
{
	uint32_t idx = 0;
	proxy_plugin *pp = desc ? proxy_of(desc, &idx) : NULL;
	char why[420];
	if (!pp || sbx__link_fault(pp->link, why, sizeof(why)) != SBX_E_FAULTY)
		return;
	/* Once faulty a link stays so, with the same reason: the text is written once. */
	pthread_mutex_lock(&proxies_lock);
	if (!pp->faults[idx][0])
		snprintf(pp->faults[idx], sizeof(pp->faults[idx]), "%s: plugin is faulty: %s",
			 pp->descs[idx].alias, why);
	pthread_mutex_unlock(&proxies_lock);
	*state = SBX_PLUGIN_FAULTY;
	*reason = pp->faults[idx];
}

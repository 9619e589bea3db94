/* What sbx-runner does with each request: the plugin op it names, with the request's
 * arguments, and a reply with the op's status, error and results (see proxy.c for the other
 * end). The plugin is loaded through the same loader and checks as in the host, and gets the
 * same services table; its plugin states are kept here, named to the host by handles. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loader.h"
#include "runner.h"

#define IDS_BATCH (SBX__WIRE_CHUNK - 1024) /* bytes of ids per IDS frame */

static sbx__module *mod;
static char *state_dir; /* the host's plugins folder, as LOAD named it; NULL when none */

/* Plugin states by handle (index + 1). */
typedef struct rstate {
	void *state;
	struct sbx_config *cfg;
	uint32_t idx;
	int used;
} rstate;

static pthread_mutex_t states_lock = PTHREAD_MUTEX_INITIALIZER;
static rstate *states;
static size_t n_states;

/* ---- replies */

static void send_or_give_up(uint32_t type, uint64_t call, const sbx__wbuf *b)
{
	if (b->oom) {
		/* The host would wait forever for a reply that cannot be built. */
		sbx__log(SBX_LOG_ERROR, "sbx-runner", "out of memory for a reply");
		_exit(70);
	}
	/* A failed send means the host is gone; the main thread sees that too. */
	sbx__wire_send(sbx__rn_fd, type, 0, call, b->p, b->len, -1);
}

/* A reply's start: the op's status and the error as the plugin set it. */
static void status(sbx__wbuf *b, int rc, const sbx_error *err)
{
	sbx__wput_u32(b, (uint32_t)rc);
	sbx__wput_u32(b, rc == SBX_OK ? 0u : (uint32_t)err->code);
	sbx__wput_str(b, rc == SBX_OK ? "" : err->message);
}

static void reply_status(const sbx__rjob *j, int rc, const sbx_error *err)
{
	sbx__wbuf b = {0};
	status(&b, rc, err);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
}

/* The plugin's state and descriptor a request names (and the state's handle). */
static int target_h(sbx__rbuf *r, const sbx_plugin_desc **d, void **state, uint64_t *h,
		    sbx_error *err)
{
	uint32_t idx = sbx__rget_u32(r);
	uint64_t handle = sbx__rget_u64(r);
	*h = handle;
	int rc = SBX_E_INVAL;
	pthread_mutex_lock(&states_lock);
	if (!r->bad && handle && handle <= n_states && states[handle - 1].used &&
	    states[handle - 1].idx == idx) {
		*state = states[handle - 1].state;
		*d = sbx__module_desc(mod, idx);
		rc = SBX_OK;
	}
	pthread_mutex_unlock(&states_lock);
	if (rc != SBX_OK)
		sbx__set_error(err, rc, "sbx-runner: a request names no plugin state");
	return rc;
}

static int target(sbx__rbuf *r, const sbx_plugin_desc **d, void **state, sbx_error *err)
{
	uint64_t handle;
	return target_h(r, d, state, &handle, err);
}

/* ---- load, init, fini */

static void put_desc(sbx__wbuf *b, const sbx_plugin_desc *d)
{
	uint32_t ops =
	    (d->read_file ? SBX__OP_READ_FILE : 0) | (d->write_file ? SBX__OP_WRITE_FILE : 0) |
	    (d->stat_file ? SBX__OP_STAT_FILE : 0) | (d->list_dir ? SBX__OP_LIST_DIR : 0) |
	    (d->make_dir ? SBX__OP_MAKE_DIR : 0) | (d->remove_path ? SBX__OP_REMOVE_PATH : 0) |
	    (d->pause ? SBX__OP_PAUSE : 0) | (d->resume ? SBX__OP_RESUME : 0) |
	    (d->status ? SBX__OP_STATUS : 0) | (d->list_by_label ? SBX__OP_LIST_BY_LABEL : 0) |
	    (d->info ? SBX__OP_INFO : 0) | (d->sandbox_info ? SBX__OP_SANDBOX_INFO : 0);
	sbx__wput_str(b, d->alias);
	sbx__wput_str(b, d->version);
	sbx__wput_str(b, d->description);
	sbx__wput_u32(b, d->abi_major);
	sbx__wput_u32(b, d->abi_minor);
	sbx__wput_u32(b, d->flags);
	sbx__wput_u32(b, ops);
	sbx__wput_u32(b, d->n_keys);
	for (uint32_t k = 0; k < d->n_keys; k++) {
		sbx__wput_str(b, d->keys[k].name);
		sbx__wput_u32(b, d->keys[k].type);
		sbx__wput_u32(b, d->keys[k].secret);
		sbx__wput_str(b, d->keys[k].help);
	}
}

static void op_load(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	int rc = SBX_OK;
	const char *path = sbx__rget_str(r);
	uint32_t n = sbx__rget_u32(r);
	const char **expected = NULL;
	if (!r->bad && n <= 1024)
		expected = sbx__calloc(n ? n : 1, sizeof(*expected));
	for (uint32_t i = 0; expected && i < n; i++)
		expected[i] = sbx__rget_str(r);
	const char *dir = sbx__rget_str(r);
	if (r->bad || !path || !expected)
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed load request");
	else if (mod)
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: a plugin is already loaded");
	else if (dir && !(state_dir = sbx__strdup(dir)))
		rc = sbx__set_error(&err, SBX_E_NOMEM, "sbx-runner: out of memory");
	if (rc == SBX_OK) {
		/* state_dir() of ABI 1.0 plugins and state_dir_for() name the same folder. */
		sbx__set_state_dir(state_dir);
		rc = sbx__module_load(path, sbx__host_api(), expected, n, &mod, &err);
	}
	sbx__free(expected);
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	if (rc == SBX_OK) {
		sbx__wput_u32(&b, (uint32_t)sbx__module_count(mod));
		for (size_t i = 0; i < sbx__module_count(mod); i++)
			put_desc(&b, sbx__module_desc(mod, i));
	}
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
}

static int keep_state(void *state, struct sbx_config *cfg, uint32_t idx, uint64_t *handle)
{
	int rc = SBX_OK;
	pthread_mutex_lock(&states_lock);
	size_t i = 0;
	while (i < n_states && states[i].used)
		i++;
	if (i == n_states) {
		rstate *v = sbx__realloc(states, (n_states + 1) * sizeof(*v));
		if (!v) {
			rc = SBX_E_NOMEM;
			goto out;
		}
		states = v;
		n_states++;
	}
	states[i] = (rstate){.state = state, .cfg = cfg, .idx = idx, .used = 1};
	*handle = i + 1;
out:
	pthread_mutex_unlock(&states_lock);
	return rc;
}

static void op_init(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	uint32_t idx = sbx__rget_u32(r);
	sbx__node *map = NULL;
	struct sbx_config *cfg = NULL;
	void *state = NULL;
	uint64_t handle = 0;
	const sbx_plugin_desc *d = sbx__module_desc(mod, idx);
	int rc = sbx__rget_node(r, &map);
	if (rc != SBX_OK || !d) {
		rc = sbx__set_error(&err, rc == SBX_E_NOMEM ? rc : SBX_E_INVAL,
				    "sbx-runner: malformed init request");
		goto out;
	}
	/* Checked and converted again, against the descriptor the runner loaded. */
	rc = sbx__config_from_map(map, d, &cfg, &err);
	if (rc != SBX_OK)
		goto out;
	cfg->state_dir = state_dir;
	rc = d->init(cfg, &state, &err);
	if (rc != SBX_OK)
		goto out;
	if (keep_state(state, cfg, idx, &handle) != SBX_OK) {
		d->fini(state);
		rc = sbx__set_error(&err, SBX_E_NOMEM, "%s: init: out of memory", d->alias);
		goto out;
	}
	cfg = NULL;
out:
	sbx__node_free(map);
	sbx__config_obj_free(cfg);
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_u64(&b, handle);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
}

static void op_fini(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	uint64_t handle = 0;
	int rc = target_h(r, &d, &state, &handle, &err);
	if (rc == SBX_OK) {
		struct sbx_config *cfg = NULL;
		d->fini(state);
		pthread_mutex_lock(&states_lock);
		cfg = states[handle - 1].cfg;
		states[handle - 1].used = 0;
		pthread_mutex_unlock(&states_lock);
		sbx__config_obj_free(cfg);
	}
	reply_status(j, rc, &err);
}

/* A host that closed the connection without fini (it crashed, or exited early) leaves its
 * states here: finish them as fini would, so the plugin lets go of what it holds before its
 * code is unloaded. Only called once no call is under way. */
void sbx__rn_unload(void)
{
	for (size_t i = 0; i < n_states; i++) {
		if (!states[i].used)
			continue;
		const sbx_plugin_desc *d = sbx__module_desc(mod, states[i].idx);
		if (d)
			d->fini(states[i].state);
		sbx__config_obj_free(states[i].cfg);
		states[i].used = 0;
	}
	sbx__module_unload(mod);
	mod = NULL;
	sbx__free(states);
	states = NULL;
	n_states = 0;
	sbx__free(state_dir);
	state_dir = NULL;
}

/* ---- sandboxes */

static void op_create(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	sbx_kv *labels = NULL, *env = NULL;
	char *id = NULL;
	size_t id_len = 0;
	sbx_create_spec spec;
	memset(&spec, 0, sizeof(spec));
	SBX_INIT_HEADER(spec);
	int rc = target(r, &d, &state, &err);
	spec.image = sbx__rget_str(r);
	if (rc == SBX_OK)
		rc = sbx__rget_kvs(r, &labels, &spec.n_labels);
	if (rc == SBX_OK)
		rc = sbx__rget_kvs(r, &env, &spec.n_env);
	spec.labels = labels;
	spec.env = env;
	spec.ttl_seconds = sbx__rget_i64(r);
	spec.data_source = sbx__rget_str(r);
	uint64_t cap = sbx__rget_u64(r);
	spec.share_dir = sbx__rget_str(r);
	if (rc == SBX_OK && (r->bad || cap == 0 || cap > 65536))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed create request");
	else if (rc == SBX_OK && !(id = sbx__calloc(1, (size_t)cap)))
		rc = sbx__set_error(&err, SBX_E_NOMEM, "%s: create: out of memory", d->alias);
	if (rc == SBX_OK) {
		rc = d->create(state, &spec, id, (size_t)cap, &err);
		/* The id as written, up to its NUL or the whole buffer: the host checks it. */
		const char *nul = memchr(id, '\0', (size_t)cap);
		id_len = nul ? (size_t)(nul - id) + 1 : (size_t)cap;
	}
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_bytes(&b, id, rc == SBX_OK ? id_len : 0);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
	sbx__free(id);
	sbx__free(labels);
	sbx__free(env);
}

/* The output callback of one execute, behind an output gate like the host's. */
static int send_output(void *ctx, uint32_t stream, const void *data, size_t len)
{
	const sbx__rjob *j = ctx;
	int stop = __atomic_load_n(&j->stop, __ATOMIC_ACQUIRE);
	if (stop != SBX_OK)
		return stop;
	const unsigned char *p = data;
	size_t off = 0;
	do {
		size_t n = len - off < SBX__WIRE_CHUNK ? len - off : SBX__WIRE_CHUNK;
		if (sbx__wire_send(sbx__rn_fd, SBX__W_OUTPUT, stream << 16, j->call, p + off, n,
				   -1) != 0)
			return SBX_E_CANCELLED;
		off += n;
	} while (off < len);
	return SBX_OK;
}

static void op_execute(sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	const char **argv = NULL;
	sbx_kv *env = NULL;
	sbx__outgate *gate = NULL;
	sbx_exec_outcome oc;
	memset(&oc, 0, sizeof(oc));
	SBX_INIT_HEADER(oc);
	sbx_exec_request req;
	memset(&req, 0, sizeof(req));
	SBX_INIT_HEADER(req);
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	req.shell = sbx__rget_str(r);
	uint32_t has_argv = sbx__rget_u32(r);
	req.argc = sbx__rget_u32(r);
	if (rc == SBX_OK && !r->bad && has_argv && req.argc < (r->len - r->off) / 5 + 1 &&
	    !(argv = sbx__calloc(req.argc + 1, sizeof(*argv))))
		rc = sbx__set_error(&err, SBX_E_NOMEM, "%s: exec: out of memory", d->alias);
	for (uint32_t i = 0; argv && i < req.argc; i++)
		argv[i] = sbx__rget_str(r);
	req.argv = argv;
	req.has_stdin = sbx__rget_u32(r);
	req.cwd = sbx__rget_str(r);
	if (rc == SBX_OK)
		rc = sbx__rget_kvs(r, &env, &req.n_env);
	req.env = env;
	req.timeout_ms = sbx__rget_u64(r);
	req.user = sbx__rget_str(r);
	req.stdout_path = sbx__rget_str(r);
	req.stderr_path = sbx__rget_str(r);
	req.stdin_data = req.has_stdin ? (j->data ? (const void *)j->data : "") : NULL;
	req.stdin_len = req.has_stdin ? (size_t)j->data_want : 0;
	if (rc == SBX_OK && (r->bad || !id || (has_argv && !argv)))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed exec request");
	if (rc == SBX_OK && sbx__outgate_open(send_output, j, d->alias, &gate) != SBX_OK)
		rc = sbx__set_error(&err, SBX_E_NOMEM, "%s: exec: out of memory", d->alias);
	if (rc == SBX_OK) {
		req.output = sbx__outgate_output;
		req.output_ctx = sbx__outgate_ctx(gate);
		rc = d->execute(state, id, &req, &oc, &err);
	}
	/* Output after this point is dropped here, like the host drops it in process. */
	sbx__outgate_close(gate);
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_u32(&b, (uint32_t)oc.exit_code);
	sbx__wput_u32(&b, (uint32_t)oc.signal);
	sbx__wput_u32(&b, oc.timed_out);
	sbx__wput_u32(&b, oc.oom_killed);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
	sbx__free(argv);
	sbx__free(env);
}

typedef int (*id_op)(void *state, const char *id, sbx_error *err);

/* destroy, pause, resume, make_dir and remove_path on a known state. */
static int simple_call(const sbx__rjob *j, const sbx_plugin_desc *d, void *state, const char *id,
		       const char *path, uint32_t flag, sbx_error *err)
{
	id_op op = j->type == SBX__W_DESTROY  ? d->destroy
		   : j->type == SBX__W_PAUSE  ? d->pause
		   : j->type == SBX__W_RESUME ? d->resume
					      : NULL;
	if (op)
		return op(state, id, err);
	if (j->type == SBX__W_MAKE_DIR && d->make_dir && path)
		return d->make_dir(state, id, path, flag, err);
	if (j->type == SBX__W_REMOVE && d->remove_path && path)
		return d->remove_path(state, id, path, flag, err);
	return SBX_E_UNSUPPORTED;
}

static void op_simple(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	const char *path = sbx__rget_str(r);
	uint32_t flag = sbx__rget_u32(r);
	if (rc == SBX_OK && (r->bad || !id))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed request");
	if (rc == SBX_OK)
		rc = simple_call(j, d, state, id, path, flag, &err);
	reply_status(j, rc, &err);
}

/* ---- files */

static void op_write_file(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	const char *path = sbx__rget_str(r);
	uint32_t has_data = sbx__rget_u32(r);
	uint64_t len = sbx__rget_u64(r);
	uint32_t mode = sbx__rget_u32(r);
	if (rc == SBX_OK && (r->bad || !id || !path || (has_data && len != j->data_want)))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed write request");
	if (rc == SBX_OK && !d->write_file)
		rc = SBX_E_UNSUPPORTED;
	if (rc == SBX_OK)
		rc = d->write_file(state, id, path,
				   has_data ? (j->data ? (void *)j->data : "") : NULL, (size_t)len,
				   mode, &err);
	reply_status(j, rc, &err);
}

/* Sends len bytes as DATA frames. */
static void send_data(const sbx__rjob *j, const void *p, size_t len)
{
	if (len)
		sbx__wire_send(sbx__rn_fd, SBX__W_DATA, 0, j->call, p, len, -1);
}

static void op_read_file(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	void *data = NULL;
	size_t len = 0;
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	const char *path = sbx__rget_str(r);
	if (rc == SBX_OK && (r->bad || !id || !path))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed read request");
	if (rc == SBX_OK && !d->read_file)
		rc = SBX_E_UNSUPPORTED;
	if (rc == SBX_OK)
		rc = d->read_file(state, id, path, &data, &len, &err);
	if (rc == SBX_OK && data)
		send_data(j, data, len);
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_u64(&b, rc == SBX_OK ? len : 0);
	sbx__wput_u32(&b, rc == SBX_OK && data ? 1u : 0u);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
	sbx__free(data);
}

static void op_stat(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	sbx_file_info fi;
	memset(&fi, 0, sizeof(fi));
	SBX_INIT_HEADER(fi);
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	const char *path = sbx__rget_str(r);
	if (rc == SBX_OK && (r->bad || !id || !path))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed stat request");
	if (rc == SBX_OK && !d->stat_file)
		rc = SBX_E_UNSUPPORTED;
	if (rc == SBX_OK)
		rc = d->stat_file(state, id, path, &fi, &err);
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_info(&b, &fi);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
}

static void op_list_dir(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	sbx_file_info *v = NULL;
	size_t n = 0;
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	const char *path = sbx__rget_str(r);
	if (rc == SBX_OK && (r->bad || !id || !path))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed list request");
	if (rc == SBX_OK && !d->list_dir)
		rc = SBX_E_UNSUPPORTED;
	if (rc == SBX_OK)
		rc = d->list_dir(state, id, path, &v, &n, &err);
	/* An entry takes at most 289 bytes: 200 of them fit in a frame. */
	for (size_t i = 0; rc == SBX_OK && v && i < n; i += 200) {
		size_t k = n - i < 200 ? n - i : 200;
		sbx__wbuf f = {0};
		sbx__wput_u32(&f, (uint32_t)k);
		for (size_t e = 0; e < k; e++)
			sbx__wput_info(&f, &v[i + e]);
		send_or_give_up(SBX__W_ENTRIES, j->call, &f);
		sbx__wbuf_free(&f);
	}
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_u64(&b, rc == SBX_OK ? n : 0);
	sbx__wput_u32(&b, rc == SBX_OK && v ? 1u : 0u);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
	sbx__free(v);
}

/* ---- lifecycle and info */

static void op_status(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	uint32_t st = SBX_STATE_UNKNOWN;
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	if (rc == SBX_OK && (r->bad || !id))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed status request");
	if (rc == SBX_OK && !d->status)
		rc = SBX_E_UNSUPPORTED;
	if (rc == SBX_OK)
		rc = d->status(state, id, &st, &err);
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_u32(&b, st);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
}

/* Ids found by list_by_label, sent in batches as they come. */
typedef struct id_batch {
	const sbx__rjob *j;
	sbx__wbuf ids;
	uint32_t n;
} id_batch;

static void flush_ids(id_batch *ib)
{
	if (!ib->n)
		return;
	sbx__wbuf f = {0};
	sbx__wput_u32(&f, ib->n);
	sbx__wput_raw(&f, ib->ids.p, ib->ids.len);
	send_or_give_up(SBX__W_IDS, ib->j->call, &f);
	sbx__wbuf_free(&f);
	sbx__wbuf_free(&ib->ids);
	ib->n = 0;
}

static int batch_id(void *ctx, const char *id)
{
	id_batch *ib = ctx;
	if (id && strlen(id) > IDS_BATCH / 2) {
		sbx__log(SBX_LOG_WARN, "sbx-runner", "list_by_label: an id of %zu bytes; skipped",
			 strlen(id));
		return SBX_OK;
	}
	if (ib->ids.len + (id ? strlen(id) : 0) + 8 > IDS_BATCH)
		flush_ids(ib);
	sbx__wput_str(&ib->ids, id);
	ib->n++;
	return SBX_OK;
}

static void op_list_by_label(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	int rc = target(r, &d, &state, &err);
	const char *key = sbx__rget_str(r);
	const char *value = sbx__rget_str(r);
	if (rc == SBX_OK && (r->bad || !key || !value))
		rc = sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed list request");
	if (rc == SBX_OK && !d->list_by_label)
		rc = SBX_E_UNSUPPORTED;
	id_batch ib = {.j = j};
	if (rc == SBX_OK)
		rc = d->list_by_label(state, key, value, batch_id, &ib, &err);
	flush_ids(&ib);
	reply_status(j, rc, &err);
}

static void op_info(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	char *json = NULL;
	int rc = target(r, &d, &state, &err);
	if (rc == SBX_OK && !d->info)
		rc = SBX_E_UNSUPPORTED;
	if (rc == SBX_OK)
		rc = d->info(state, &json, &err);
	if (rc == SBX_OK && json)
		send_data(j, json, strlen(json));
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_u32(&b, rc == SBX_OK && json ? 1u : 0u);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
	sbx__free(json);
}

static void op_sandbox_info(const sbx__rjob *j, sbx__rbuf *r)
{
	sbx_error err = {0};
	const sbx_plugin_desc *d = NULL;
	void *state = NULL;
	char *json = NULL;
	int rc = target(r, &d, &state, &err);
	const char *id = sbx__rget_str(r);
	if (rc == SBX_OK && (r->bad || !id))
		rc =
		    sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: malformed sandbox_info request");
	if (rc == SBX_OK && !d->sandbox_info)
		rc = SBX_E_UNSUPPORTED;
	if (rc == SBX_OK)
		rc = d->sandbox_info(state, id, &json, &err);
	if (rc == SBX_OK && json)
		send_data(j, json, strlen(json));
	sbx__wbuf b = {0};
	status(&b, rc, &err);
	sbx__wput_u32(&b, rc == SBX_OK && json ? 1u : 0u);
	send_or_give_up(SBX__W_REPLY, j->call, &b);
	sbx__wbuf_free(&b);
	sbx__free(json);
}

void sbx__rn_run(sbx__rjob *j)
{
	sbx__rbuf r = {.p = j->req.p, .len = j->req.len};
	sbx__rget_u64(&r); /* the data length, already used */
	if (j->type != SBX__W_LOAD && !mod) {
		sbx_error err = {0};
		reply_status(j, sbx__set_error(&err, SBX_E_INVAL, "sbx-runner: nothing loaded"),
			     &err);
		return;
	}
	switch (j->type) {
	case SBX__W_LOAD:
		op_load(j, &r);
		break;
	case SBX__W_INIT:
		op_init(j, &r);
		break;
	case SBX__W_FINI:
		op_fini(j, &r);
		break;
	case SBX__W_CREATE:
		op_create(j, &r);
		break;
	case SBX__W_EXECUTE:
		op_execute(j, &r);
		break;
	case SBX__W_WRITE_FILE:
		op_write_file(j, &r);
		break;
	case SBX__W_READ_FILE:
		op_read_file(j, &r);
		break;
	case SBX__W_STAT:
		op_stat(j, &r);
		break;
	case SBX__W_LIST_DIR:
		op_list_dir(j, &r);
		break;
	case SBX__W_STATUS:
		op_status(j, &r);
		break;
	case SBX__W_LIST_BY_LABEL:
		op_list_by_label(j, &r);
		break;
	case SBX__W_INFO:
		op_info(j, &r);
		break;
	case SBX__W_SANDBOX_INFO:
		op_sandbox_info(j, &r);
		break;
	default:
		op_simple(j, &r);
		break;
	}
}

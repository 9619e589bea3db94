/* The file ops: read, write, stat, list, mkdir, remove, each one plugin call through
 * sbx__call_id. The host checks what a plugin hands back (a buffer for its bytes, an array for
 * its entries) and NUL-terminates what it reads. */
#include <stddef.h>
#include <string.h>

#include "host_internal.h"

/* Arguments and results of one file op, whichever it is. */
typedef struct file_args {
	const char *path;
	const void *data; /* write */
	size_t len;       /* write: bytes; read: bytes read; list: entries */
	uint32_t flag;    /* write: mode; mkdir: parents; remove: recursive */
	void *buf;        /* read: the plugin's buffer; list: its entries */
	sbx_file_info *info;
} file_args;

#define PLUGIN(r) ((r)->slot->desc)

static int read_call(const sbx__route *r, void *a, sbx_error *perr)
{
	file_args *x = a;
	int rc = PLUGIN(r)->read_file(r->ps->state, r->backend, x->path, &x->buf, &x->len, perr);
	if (rc == SBX_OK && !x->buf && x->len > 0)
		rc = sbx__set_error(perr, SBX_E_BACKEND,
				    "%s: read_file: plugin returned %zu bytes but no buffer",
				    r->alias, x->len);
	/* A plugin that ignored the cap it was given (its config's max_file_bytes). */
	uint64_t cap = r->ps->ds->policy.max_file_bytes;
	if (rc == SBX_OK && x->len > cap)
		rc = sbx__set_error(perr, SBX_E_LIMIT,
				    "%s: read_file: '%.300s' is larger than max_file_bytes (%zu > "
				    "%llu bytes)",
				    r->alias, x->path, x->len, (unsigned long long)cap);
	return rc;
}

static int write_call(const sbx__route *r, void *a, sbx_error *perr)
{
	file_args *x = a;
	return PLUGIN(r)->write_file(r->ps->state, r->backend, x->path, x->data, x->len, x->flag,
				     perr);
}

static int stat_call(const sbx__route *r, void *a, sbx_error *perr)
{
	file_args *x = a;
	return PLUGIN(r)->stat_file(r->ps->state, r->backend, x->path, x->info, perr);
}

static int list_call(const sbx__route *r, void *a, sbx_error *perr)
{
	file_args *x = a;
	sbx_file_info *entries = NULL;
	int rc = PLUGIN(r)->list_dir(r->ps->state, r->backend, x->path, &entries, &x->len, perr);
	x->buf = entries;
	if (rc == SBX_OK && !entries && x->len > 0)
		rc = sbx__set_error(perr, SBX_E_BACKEND,
				    "%s: list_dir: plugin returned %zu entries but no array",
				    r->alias, x->len);
	return rc;
}

static int mkdir_call(const sbx__route *r, void *a, sbx_error *perr)
{
	file_args *x = a;
	return PLUGIN(r)->make_dir(r->ps->state, r->backend, x->path, x->flag, perr);
}

static int remove_call(const sbx__route *r, void *a, sbx_error *perr)
{
	file_args *x = a;
	return PLUGIN(r)->remove_path(r->ps->state, r->backend, x->path, x->flag, perr);
}

static const sbx__op read_op = {"read_file", offsetof(sbx_plugin_desc, read_file), read_call};
static const sbx__op write_op = {"write_file", offsetof(sbx_plugin_desc, write_file), write_call};
static const sbx__op stat_op = {"stat", offsetof(sbx_plugin_desc, stat_file), stat_call};
static const sbx__op list_op = {"list_dir", offsetof(sbx_plugin_desc, list_dir), list_call};
static const sbx__op mkdir_op = {"mkdir", offsetof(sbx_plugin_desc, make_dir), mkdir_call};
static const sbx__op remove_op = {"remove", offsetof(sbx_plugin_desc, remove_path), remove_call};

int sbx_read_file(sbx_host *host, const char *id, const char *path, void **data, size_t *len,
		  sbx_error *err)
{
	if (!path || !data || !len)
		return sbx__set_error(err, SBX_E_INVAL, "read_file: NULL path or output");
	*data = NULL;
	*len = 0;
	file_args a = {.path = path};
	int rc = sbx__call_id(host, id, &read_op, &a, err);
	/* The promised terminating NUL, whatever the plugin allocated. */
	char *b = rc == SBX_OK ? sbx__realloc(a.buf, a.len + 1) : NULL;
	if (!b) {
		sbx__free(a.buf);
		return rc == SBX_OK ? sbx__nomem(err, "read_file") : rc;
	}
	b[a.len] = '\0';
	*data = b;
	*len = a.len;
	return SBX_OK;
}

int sbx_write_file(sbx_host *host, const char *id, const char *path, const void *data, size_t len,
		   uint32_t mode, sbx_error *err)
{
	if (!path || (!data && len))
		return sbx__set_error(err, SBX_E_INVAL, "write_file: NULL path or data");
	file_args a = {
	    .path = path, .data = data ? data : "", .len = len, .flag = mode ? mode : 0644};
	return sbx__call_id(host, id, &write_op, &a, err);
}

int sbx_stat(sbx_host *host, const char *id, const char *path, sbx_file_info *info, sbx_error *err)
{
	if (!path || !info)
		return sbx__set_error(err, SBX_E_INVAL, "stat: NULL path or info");
	memset(info, 0, sizeof(*info));
	SBX_INIT_HEADER(*info);
	file_args a = {.path = path, .info = info};
	return sbx__call_id(host, id, &stat_op, &a, err);
}

int sbx_list_dir(sbx_host *host, const char *id, const char *path, sbx_file_info **entries,
		 size_t *n, sbx_error *err)
{
	if (!path || !entries || !n)
		return sbx__set_error(err, SBX_E_INVAL, "list_dir: NULL path or output");
	file_args a = {.path = path};
	int rc = sbx__call_id(host, id, &list_op, &a, err);
	if (rc != SBX_OK) {
		sbx__free(a.buf);
		a.buf = NULL;
		a.len = 0;
	}
	*entries = a.buf;
	*n = a.len;
	return rc;
}

int sbx_mkdir(sbx_host *host, const char *id, const char *path, int parents, sbx_error *err)
{
	if (!path)
		return sbx__set_error(err, SBX_E_INVAL, "mkdir: NULL path");
	file_args a = {.path = path, .flag = parents ? 1u : 0u};
	return sbx__call_id(host, id, &mkdir_op, &a, err);
}

int sbx_remove(sbx_host *host, const char *id, const char *path, int recursive, sbx_error *err)
{
	if (!path)
		return sbx__set_error(err, SBX_E_INVAL, "remove: NULL path");
	file_args a = {.path = path, .flag = recursive ? 1u : 0u};
	return sbx__call_id(host, id, &remove_op, &a, err);
}

/* Sessions (NexAU parity): (user_id, session_id) -> a sandbox that outlives the process.
 *
 * The record lives in the ledger's sessions table (ledger.c, schema version 2). Starting a
 * session asks the backend, not the ledger, whether the recorded sandbox still exists: the
 * backend is the truth and a sandbox may be removed behind the ledger's back. The record is
 * written only after the sandbox exists and its assets are uploaded, with an insert that
 * loses to a concurrent start (or an update that only applies while the record still names
 * the sandbox it replaces), so two processes racing on one session agree on one sandbox and
 * the loser destroys its own. Session sandboxes are created detached: the process that started
 * them may exit, and only a TTL (or owner_pid) makes them reapable. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "host_internal.h"

/* How many times a start retries after losing a race to another process. */
#define SESSION_ATTEMPTS 4

static int check_key(const char *user, const char *session, const char *op, sbx_error *err)
{
	if (!user || !*user || !session || !*session)
		return sbx__set_error(err, SBX_E_INVAL,
				      "session: %s: user_id and session_id must be non-empty", op);
	if (strlen(user) >= 256 || strlen(session) >= 256)
		return sbx__set_error(err, SBX_E_INVAL,
				      "session: %s: user_id and session_id must be shorter than "
				      "256 bytes",
				      op);
	return SBX_OK;
}

static int not_found(const char *user, const char *session, const char *op, sbx_error *err)
{
	return sbx__set_error(err, SBX_E_NOT_FOUND,
			      "session: %s: no session '%.200s' for user '%.200s'; start it first",
			      op, session, user);
}

/* Encodes assets as alternating NUL-terminated paths, the host side made absolute. */
static int encode_assets(const sbx_kv *assets, uint32_t n, char **out, size_t *out_len,
			 sbx_error *err)
{
	*out = NULL;
	*out_len = 0;
	size_t cap = 0, len = 0;
	char *buf = NULL;
	int rc = SBX_OK;
	for (uint32_t i = 0; i < n; i++) {
		const char *src = assets[i].key, *dst = assets[i].value;
		if (!src || !*src || !dst || !*dst) {
			rc = sbx__set_error(
			    err, SBX_E_INVAL,
			    "session: asset %u needs a host path and a sandbox path", i);
			goto out;
		}
		char real[PATH_MAX];
		struct stat st;
		if (!realpath(src, real) || stat(real, &st) != 0) {
			rc = sbx__set_error(err, SBX_E_IO, "session: asset '%.300s': %s", src,
					    strerror(errno));
			goto out;
		}
		if (!S_ISREG(st.st_mode)) {
			rc = sbx__set_error(err, SBX_E_INVAL,
					    "session: asset '%.300s' is not a regular file; list "
					    "each file to upload",
					    src);
			goto out;
		}
		size_t a = strlen(real) + 1, b = strlen(dst) + 1;
		if (len + a + b > cap) {
			size_t ncap = (len + a + b) * 2;
			char *nb = sbx__realloc(buf, ncap);
			if (!nb) {
				rc = sbx__set_error(err, SBX_E_NOMEM, "session: out of memory");
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		memcpy(buf + len, real, a);
		len += a;
		memcpy(buf + len, dst, b);
		len += b;
	}
out:
	if (rc != SBX_OK) {
		sbx__free(buf);
		return rc;
	}
	*out = buf;
	*out_len = len;
	return SBX_OK;
}

/* Decodes the blob into borrowed pairs; *pairs from sbx__alloc. */
static int decode_assets(const char *blob, size_t len, sbx_kv **pairs, uint32_t *n)
{
	*pairs = NULL;
	*n = 0;
	size_t count = 0;
	for (size_t i = 0; i < len; i++)
		count += blob[i] == '\0';
	if (count < 2)
		return SBX_OK;
	sbx_kv *kv = sbx__calloc(count / 2, sizeof(*kv));
	if (!kv)
		return SBX_E_NOMEM;
	const char *p = blob, *end = blob + len;
	uint32_t k = 0;
	while (p < end && k < count / 2) {
		const char *key = p;
		p += strlen(p) + 1;
		if (p >= end)
			break;
		kv[k].key = key;
		kv[k].value = p;
		k++;
		p += strlen(p) + 1;
	}
	*pairs = kv;
	*n = k;
	return SBX_OK;
}

static int read_host_file(const char *path, char **data, size_t *len, uint32_t *mode,
			  sbx_error *err)
{
	*data = NULL;
	*len = 0;
	FILE *f = fopen(path, "rbe");
	if (!f)
		return sbx__set_error(err, SBX_E_IO, "session: asset '%.300s': %s", path,
				      strerror(errno));
	int rc = SBX_OK;
	struct stat st;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	if (fstat(fileno(f), &st) == 0)
		*mode = (uint32_t)(st.st_mode & 07777);
	for (;;) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			char *nb = sbx__realloc(buf, ncap);
			if (!nb) {
				rc =
				    sbx__set_error(err, SBX_E_NOMEM,
						   "session: out of memory reading '%.300s'", path);
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0) {
			if (ferror(f))
				rc = sbx__set_error(err, SBX_E_IO, "session: asset '%.300s': %s",
						    path, strerror(errno));
			break;
		}
	}
out:
	fclose(f);
	if (rc != SBX_OK) {
		sbx__free(buf);
		return rc;
	}
	*data = buf;
	*len = n;
	return SBX_OK;
}

static int upload_assets(sbx_host *host, const char *id, const char *blob, size_t len,
			 sbx_error *err)
{
	sbx_kv *pairs = NULL;
	uint32_t n = 0;
	if (decode_assets(blob, len, &pairs, &n) != SBX_OK)
		return sbx__set_error(err, SBX_E_NOMEM, "session: out of memory");
	int rc = SBX_OK;
	for (uint32_t i = 0; i < n && rc == SBX_OK; i++) {
		char *data = NULL;
		size_t dlen = 0;
		uint32_t mode = 0644;
		rc = read_host_file(pairs[i].key, &data, &dlen, &mode, err);
		if (rc != SBX_OK)
			break;
		rc = sbx_write_file(host, id, pairs[i].value, data, dlen, mode ? mode : 0644, err);
		sbx__free(data);
		if (rc != SBX_OK)
			sbx__error_prefix(err, "session: upload '%.200s' to '%.200s'", pairs[i].key,
					  pairs[i].value);
	}
	sbx__free(pairs);
	return rc;
}

/* Creates a detached sandbox for the session and uploads the assets into it; on an upload
 * failure the sandbox is destroyed again. */
static int make_sandbox(sbx_host *host, const sbx_create_opts *opts, const sbx__session_row *rec,
			const char *blob, size_t blob_len, sbx__session_row *row, sbx_error *err)
{
	sbx_create_opts o;
	memset(&o, 0, sizeof(o));
	if (opts)
		memcpy(&o, opts, sizeof(o));
	SBX_INIT_HEADER(o);
	/* Fall back to what the record says the session was started with. */
	if (rec) {
		if (!o.data_source && rec->data_source[0])
			o.data_source = rec->data_source;
		if (!o.image && rec->image[0])
			o.image = rec->image;
		if (o.ttl_seconds <= 0 && rec->ttl > 0)
			o.ttl_seconds = rec->ttl;
	}
	o.detached = 1;
	snprintf(row->data_source, sizeof(row->data_source), "%s",
		 o.data_source ? o.data_source : "");
	snprintf(row->image, sizeof(row->image), "%s", o.image ? o.image : "");
	row->ttl = o.ttl_seconds > 0 ? o.ttl_seconds : 0;
	int rc = sbx_create(host, &o, row->sandbox_id, err);
	if (rc != SBX_OK)
		return rc;
	rc = upload_assets(host, row->sandbox_id, blob, blob_len, err);
	if (rc != SBX_OK) {
		sbx_error derr = {0};
		sbx_destroy(host, row->sandbox_id, &derr);
		row->sandbox_id[0] = '\0';
	}
	return rc;
}

static void discard(sbx_host *host, const char *id)
{
	sbx_error derr = {0};
	if (sbx_destroy(host, id, &derr) != SBX_OK)
		sbx__log(SBX_LOG_WARN, "session",
			 "%s: cannot destroy the sandbox of a lost race: %s", id, derr.message);
}

/* One sbx_session_start. */
typedef struct starting {
	sbx_host *host;
	sbx__ledger *led;
	const char *user, *session;
	const sbx_create_opts *opts;
	char *given; /* the caller's assets, encoded; NULL: keep the recorded ones */
	size_t given_len;
	char *id;
	uint32_t how; /* SBX_SESSION_* */
} starting;

/* Not a status: the record changed under this start (another process won a race); look
 * again. */
#define LOOK_AGAIN (-1)

/* No record: a new sandbox, recorded unless another start recorded one first. */
static int start_new(starting *s, sbx__session_row *row, sbx_error *err)
{
	int rc = make_sandbox(s->host, s->opts, NULL, s->given, s->given_len, row, err);
	if (rc != SBX_OK)
		return rc;
	row->assets = s->given;
	row->assets_len = s->given_len;
	int inserted = 0;
	rc = sbx__session_insert(s->led, row, &inserted, err);
	if (rc != SBX_OK || !inserted) {
		discard(s->host, row->sandbox_id);
		return rc != SBX_OK ? rc : LOOK_AGAIN;
	}
	snprintf(s->id, SBX_ID_MAX, "%s", row->sandbox_id);
	s->how = SBX_SESSION_CREATED;
	return SBX_OK;
}

/* The recorded sandbox is gone: a new one with the assets uploaded again, recorded unless
 * the record changed meanwhile. */
static int start_again(starting *s, const sbx__session_row *rec, sbx__session_row *row,
		       sbx_error *err)
{
	const char *blob = s->given ? s->given : rec->assets;
	size_t blob_len = s->given ? s->given_len : rec->assets_len;
	int rc = make_sandbox(s->host, s->opts, rec, blob, blob_len, row, err);
	if (rc != SBX_OK)
		return rc;
	row->assets = (char *)blob;
	row->assets_len = blob_len;
	int replaced = 0;
	rc = sbx__session_replace(s->led, row, rec->sandbox_id, &replaced, err);
	if (rc != SBX_OK || !replaced) {
		discard(s->host, row->sandbox_id);
		return rc != SBX_OK ? rc : LOOK_AGAIN;
	}
	snprintf(s->id, SBX_ID_MAX, "%s", row->sandbox_id);
	s->how = SBX_SESSION_RECREATED;
	return SBX_OK;
}

/* The recorded sandbox lives: resumed when paused, the record marked running, new assets
 * uploaded. */
static int reconnect(starting *s, const sbx__session_row *rec, int paused, sbx_error *err)
{
	int rc = SBX_OK;
	s->how = SBX_SESSION_REUSED;
	if (paused) {
		rc = sbx_resume(s->host, rec->sandbox_id, err);
		s->how = SBX_SESSION_RESUMED;
	}
	if (rc == SBX_OK && strcmp(rec->state, SBX__LEDGER_RUNNING) != 0)
		rc = sbx__session_set_state(s->led, s->user, s->session, SBX__LEDGER_RUNNING, err);
	if (rc == SBX_OK && s->given) {
		rc = upload_assets(s->host, rec->sandbox_id, s->given, s->given_len, err);
		if (rc == SBX_OK)
			rc = sbx__session_set_assets(s->led, s->user, s->session, s->given,
						     s->given_len, err);
	}
	if (rc == SBX_OK)
		snprintf(s->id, SBX_ID_MAX, "%s", rec->sandbox_id);
	return rc;
}

/* One look at the record, and what follows from it. */
static int start_once(starting *s, sbx__session_row *rec, sbx_error *err)
{
	sbx__session_row row;
	memset(&row, 0, sizeof(row));
	snprintf(row.user_id, sizeof(row.user_id), "%s", s->user);
	snprintf(row.session_id, sizeof(row.session_id), "%s", s->session);
	int rc = sbx__session_load(s->led, s->user, s->session, rec, err);
	if (rc == SBX_E_NOT_FOUND)
		return start_new(s, &row, err);
	if (rc != SBX_OK)
		return rc;
	/* The backend, not the ledger, says whether the sandbox lives. */
	uint32_t state = SBX_STATE_UNKNOWN;
	sbx_error serr = {0};
	int st = sbx_status(s->host, rec->sandbox_id, &state, &serr);
	int gone = (st == SBX_OK && state == SBX_STATE_GONE) || st == SBX_E_NOT_FOUND;
	if (gone)
		return start_again(s, rec, &row, err);
	if (st != SBX_OK && st != SBX_E_UNSUPPORTED) {
		rc = sbx__set_error(err, st, "%s", serr.message);
		sbx__error_prefix(err, "session: start: status of %s", rec->sandbox_id);
		return rc;
	}
	return reconnect(s, rec, st == SBX_OK && state == SBX_STATE_PAUSED, err);
}

int sbx_session_start(sbx_host *host, const char *user_id, const char *session_id,
		      const sbx_create_opts *opts, const sbx_kv *assets, uint32_t n_assets,
		      char id[SBX_ID_MAX], uint32_t *outcome, sbx_error *err)
{
	if (!host || !id)
		return sbx__set_error(err, SBX_E_INVAL, "session: start: NULL host or id buffer");
	id[0] = '\0';
	if (outcome)
		*outcome = SBX_SESSION_CREATED;
	sbx_create_opts o;
	int rc = check_key(user_id, session_id, "start", err);
	if (rc == SBX_OK)
		rc = sbx__struct_in(opts, &o, sizeof(o),
				    SBX__SIZE_1_0(sbx_create_opts, wait_seconds),
				    "session: start: options", err);
	if (rc == SBX_OK && n_assets && !assets)
		rc = sbx__set_error(err, SBX_E_INVAL, "session: start: NULL assets");
	starting s = {.host = host,
		      .user = user_id,
		      .session = session_id,
		      .opts = opts ? &o : NULL,
		      .id = id};
	if (rc == SBX_OK)
		rc = sbx__host_ledger(host, &s.led, err);
	if (rc == SBX_OK)
		rc = encode_assets(assets, n_assets, &s.given, &s.given_len, err);
	if (rc != SBX_OK)
		return rc;
	sbx__session_row rec;
	memset(&rec, 0, sizeof(rec));
	rc = LOOK_AGAIN;
	for (int attempt = 0; attempt < SESSION_ATTEMPTS && rc == LOOK_AGAIN; attempt++) {
		sbx__session_row_clear(&rec);
		rc = start_once(&s, &rec, err);
	}
	if (rc == LOOK_AGAIN)
		rc = sbx__set_error(err, SBX_E_BACKEND,
				    "session: start: '%.200s' of user '%.200s' kept changing "
				    "under concurrent starts; try again",
				    session_id, user_id);
	if (rc == SBX_OK && outcome)
		*outcome = s.how;
	sbx__session_row_clear(&rec);
	sbx__free(s.given);
	return rc;
}

static int load_existing(sbx_host *host, const char *user, const char *session, const char *op,
			 sbx__ledger **led, sbx__session_row *rec, sbx_error *err)
{
	memset(rec, 0, sizeof(*rec));
	if (!host)
		return sbx__set_error(err, SBX_E_INVAL, "session: %s: NULL host", op);
	int rc = check_key(user, session, op, err);
	if (rc == SBX_OK)
		rc = sbx__host_ledger(host, led, err);
	if (rc == SBX_OK)
		rc = sbx__session_load(*led, user, session, rec, err);
	if (rc == SBX_E_NOT_FOUND)
		return not_found(user, session, op, err);
	return rc;
}

int sbx_session_pause(sbx_host *host, const char *user_id, const char *session_id, sbx_error *err)
{
	sbx__ledger *led = NULL;
	sbx__session_row rec;
	int rc = load_existing(host, user_id, session_id, "pause", &led, &rec, err);
	if (rc == SBX_OK)
		rc = sbx_pause(host, rec.sandbox_id, err);
	if (rc == SBX_OK)
		rc = sbx__session_set_state(led, user_id, session_id, SBX__LEDGER_PAUSED, err);
	sbx__session_row_clear(&rec);
	return rc;
}

int sbx_session_end(sbx_host *host, const char *user_id, const char *session_id, sbx_error *err)
{
	sbx__ledger *led = NULL;
	sbx__session_row rec;
	int rc = load_existing(host, user_id, session_id, "end", &led, &rec, err);
	if (rc == SBX_OK) {
		rc = sbx_destroy(host, rec.sandbox_id, err);
		if (rc == SBX_E_NOT_FOUND)
			rc = SBX_OK; /* already gone: nothing left to destroy */
	}
	int deleted = 0;
	if (rc == SBX_OK)
		rc = sbx__session_delete(led, user_id, session_id, &deleted, err);
	sbx__session_row_clear(&rec);
	return rc;
}

static int call_with(const sbx__session_row *r, sbx_session_fn fn, void *ctx)
{
	sbx_kv *pairs = NULL;
	uint32_t n = 0;
	if (decode_assets(r->assets, r->assets_len, &pairs, &n) != SBX_OK)
		return SBX_E_NOMEM;
	sbx_session_record rec;
	memset(&rec, 0, sizeof(rec));
	SBX_INIT_HEADER(rec);
	rec.user_id = r->user_id;
	rec.session_id = r->session_id;
	rec.sandbox_id = r->sandbox_id;
	rec.data_source = r->data_source;
	rec.image = r->image;
	rec.state = r->state;
	rec.ttl_seconds = r->ttl;
	rec.created = r->created;
	rec.updated = r->updated;
	rec.assets = pairs;
	rec.n_assets = n;
	int rc = fn(ctx, &rec);
	sbx__free(pairs);
	return rc;
}

int sbx_session_get(sbx_host *host, const char *user_id, const char *session_id, sbx_session_fn fn,
		    void *ctx, sbx_error *err)
{
	if (!fn)
		return sbx__set_error(err, SBX_E_INVAL, "session: get: NULL callback");
	sbx__ledger *led = NULL;
	sbx__session_row rec;
	int rc = load_existing(host, user_id, session_id, "get", &led, &rec, err);
	if (rc == SBX_OK) {
		rc = call_with(&rec, fn, ctx);
		if (rc == SBX_E_NOMEM)
			sbx__set_error(err, rc, "session: get: out of memory");
	}
	sbx__session_row_clear(&rec);
	return rc;
}

int sbx_session_list(sbx_host *host, sbx_session_fn fn, void *ctx, sbx_error *err)
{
	if (!host || !fn)
		return sbx__set_error(err, SBX_E_INVAL, "session: list: NULL host or callback");
	sbx__ledger *led = NULL;
	int rc = sbx__host_ledger(host, &led, err);
	if (rc != SBX_OK)
		return rc;
	sbx__session_row *rows = NULL;
	size_t n = 0;
	rc = sbx__session_all(led, &rows, &n, err);
	for (size_t i = 0; rc == SBX_OK && i < n; i++) {
		rc = call_with(&rows[i], fn, ctx);
		if (rc == SBX_E_NOMEM)
			sbx__set_error(err, rc, "session: list: out of memory");
	}
	sbx__session_rows_free(rows, n);
	return rc;
}

/* Internals of the docker plugin shared between its files. Nothing here is exported: the
 * plugin's only public symbol is sbx_plugin_register (docker.c). */
#ifndef SBX_DOCKER_H
#define SBX_DOCKER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <jansson.h>

#include <sbx/plugin.h>

#define DK_ALIAS       "docker"
#define DK_API_VERSION "1.41" /* the newest Engine API this plugin speaks */

extern const sbx_host_api *sbx__dk_host;

typedef struct dk_state {
	/* Transport: one share (connection cache, DNS) for every easy handle of this state. */
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	char base_url[512];    /* http://localhost or http://host:port */
	char socket_path[256]; /* empty for tcp */
	char host_desc[600];   /* as configured, for messages */
	pthread_mutex_t version_lock;
	int negotiated;
	char api_version[16];    /* the version used in request paths */
	char server_version[16]; /* the engine's ApiVersion */
	char engine[128];        /* the engine's name and version */
	long request_timeout_ms;

	/* Container settings. */
	char *image;
	char *pull; /* never, missing, always */
	char *working_dir;
	char *user;
	char *network;
	double cpu;
	int64_t memory_mb;
	int64_t pids_limit;
	int read_only;
	json_t *cap_drop; /* array of strings */
	json_t *ulimits;  /* array of {Name, Soft, Hard} */
	json_t *env;      /* array of "K=V" */
	int64_t ready_timeout_ms;
} dk_state;

/* One HTTP answer. body is NUL-terminated (not counted in len); free with sbx__dk_resp_free. */
typedef struct dk_resp {
	long status;
	char *body;
	size_t len;
	size_t cap;
	char *path_stat;      /* X-Docker-Container-Path-Stat, if the answer had one */
	int oom;              /* an allocation for the answer failed */
	char api_version[16]; /* Api-Version header (/_ping) */
	char server[128];     /* Server header */
} dk_resp;

int sbx__dk_transport_init(dk_state *st, const char *host_key, sbx_error *err);
void sbx__dk_transport_fini(dk_state *st);
/* Negotiates the API version once (thread-safe). */
int sbx__dk_negotiate(dk_state *st, sbx_error *err);
/* Prepares an easy handle for METHOD on versioned PATH (which starts with '/'). */
int sbx__dk_easy(dk_state *st, const char *method, const char *path, CURL **out, sbx_error *err);
/* A whole request: body may be NULL; content_type defaults to application/json. Statuses
 * only for transport failures; HTTP errors are in resp->status. */
int sbx__dk_request(dk_state *st, const char *method, const char *path, const char *content_type,
		    const void *body, size_t len, dk_resp *resp, sbx_error *err);
/* As sbx__dk_request with a JSON body (not consumed). */
int sbx__dk_request_json(dk_state *st, const char *method, const char *path, json_t *body,
			 dk_resp *resp, sbx_error *err);
void sbx__dk_resp_free(dk_resp *resp);
/* The engine's message of an error answer, or a placeholder; one line, at most cap-1 bytes. */
void sbx__dk_resp_message(const dk_resp *resp, char *buf, size_t cap);
/* Maps a curl failure to a status with detail. */
int sbx__dk_curl_error(dk_state *st, const char *what, CURLcode code, sbx_error *err);
/* Write callback appending to a dk_resp. */
size_t sbx__dk_collect(char *data, size_t size, size_t n, void *ctx);

/* A hijacked connection: after the engine's 200 (or 101) answer the socket carries the raw
 * stream both ways. */
typedef struct dk_conn {
	CURL *easy;       /* owns the socket */
	int fd;           /* non-blocking */
	char early[8192]; /* stream bytes that came in the same read as the answer's head */
	size_t early_len;
} dk_conn;
/* POSTs the JSON text body to versioned PATH on a connection of its own (which the engine
 * hijacks for a raw stream, as for the docker CLI) and reads the answer's head (waiting at
 * most api_timeout). On 200 or 101, *conn is open (close it with sbx__dk_conn_close); on
 * another status resp holds it and the error body, and conn is closed. Statuses only for
 * transport failures. No `Upgrade: tcp` is asked for: Podman then holds the stream open for a
 * second or more after the command ended. */
int sbx__dk_upgrade(dk_state *st, const char *path, const char *body, dk_conn *conn, dk_resp *resp,
		    sbx_error *err);
void sbx__dk_conn_close(dk_conn *conn);

/* Backend ids are container ids (or names); anything else is SBX_E_BAD_ID. */
int sbx__dk_id_check(const char *id, const char *op, sbx_error *err);
/* The common mapping of an error answer about container `id`. */
int sbx__dk_http_error(const dk_resp *resp, const char *op, const char *id, sbx_error *err);

/* Runs argv inside the container with stdin /dev/null, collecting at most cap bytes of each
 * stream (both may be NULL). */
typedef struct dk_capture {
	char out[4096];
	size_t out_len;
	char err[1024];
	size_t err_len;
	int exit_code;
} dk_capture;
int sbx__dk_run(dk_state *st, const char *id, const char *const *argv, dk_capture *cap,
		sbx_error *err);

int sbx__dk_execute(void *state, const char *id, const sbx_exec_request *req, sbx_exec_outcome *out,
		    sbx_error *err);

/* Files. */
int sbx__dk_read_file(void *state, const char *id, const char *path, void **data, size_t *len,
		      sbx_error *err);
int sbx__dk_write_file(void *state, const char *id, const char *path, const void *data, size_t len,
		       uint32_t mode, sbx_error *err);
int sbx__dk_stat_file(void *state, const char *id, const char *path, sbx_file_info *info,
		      sbx_error *err);
int sbx__dk_list_dir(void *state, const char *id, const char *path, sbx_file_info **entries,
		     size_t *n, sbx_error *err);
int sbx__dk_make_dir(void *state, const char *id, const char *path, uint32_t parents,
		     sbx_error *err);
int sbx__dk_remove_path(void *state, const char *id, const char *path, uint32_t recursive,
			sbx_error *err);
/* Puts one regular file (dir/name) into the container through the archive endpoint. */
int sbx__dk_put_file(dk_state *st, const char *id, const char *dir, const char *name,
		     const void *data, size_t len, uint32_t mode, dk_resp *resp, sbx_error *err);

/* Resolves a sandbox path: absolute, or relative beneath the work dir; ".." in a relative
 * path is refused (SBX_E_PATH). */
int sbx__dk_path(const dk_state *st, const char *path, char *buf, size_t cap, const char *op,
		 sbx_error *err);

/* As sbx__dk_path, and a relative path is walked through the container's symlinks: one that
 * leads out of the work dir is SBX_E_PATH. follow_final: also follow the last component. */
int sbx__dk_resolve(dk_state *st, const char *id, const char *path, int follow_final, char *buf,
		    size_t cap, const char *op, sbx_error *err);
/* The entry itself (no symlink followed); SBX_E_NO_FILE without detail when absent. */
int sbx__dk_stat_raw(dk_state *st, const char *id, const char *full, sbx_file_info *info,
		     char *link, size_t link_cap, sbx_error *err);

/* Tar helpers on libarchive (tarball.c). */
int sbx__dk_tar_one(const char *name, const void *data, size_t len, uint32_t mode, void **tar,
		    size_t *tar_len, sbx_error *err);
/* Extracts the first entry of a tar as a regular file (host->alloc buffer, NUL-terminated).
 * A symlink gives SBX_E_EXISTS with its target in link[link_cap]. */
int sbx__dk_tar_first(const void *tar, size_t tar_len, const char *path, void **data, size_t *len,
		      char *link, size_t link_cap, sbx_error *err);
/* Lists the entries directly below the tar's top directory. */
int sbx__dk_tar_list(const void *tar, size_t tar_len, const char *path, sbx_file_info **entries,
		     size_t *n, sbx_error *err);

/* Random lowercase hex (2*bytes digits) into buf. */
int sbx__dk_token(char *buf, size_t cap, size_t bytes);

#endif

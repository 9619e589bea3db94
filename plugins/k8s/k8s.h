/* Internal interfaces between the files of the k8s plugin. Nothing here is exported: the
 * version script keeps sbx_plugin_register the only visible symbol. */
#ifndef SBX_K8S_H
#define SBX_K8S_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include <sbx/plugin.h>

extern const sbx_host_api *k8s__host;

#define K8S_CONTAINER "sandbox"

/* A growable byte buffer (malloc-owned, always NUL-terminated when len > 0 is read as text). */
typedef struct k8s_buf {
	char *data;
	size_t len;
	size_t cap;
} k8s_buf;

int k8s__buf_add(k8s_buf *b, const void *data, size_t len);
void k8s__buf_free(k8s_buf *b);

/* An exec credential plugin and its cached credential (credential.c). */
typedef struct k8s_cred k8s_cred;

/* Connection settings shared by REST and exec handles. */
typedef struct k8s_conn {
	char *server; /* https://host:port, no trailing slash */
	char *ca_pem; /* certificate-authority data, NULL: system store */
	size_t ca_len;
	char *cert_pem; /* client certificate, NULL: none */
	size_t cert_len;
	char *key_pem;
	size_t key_len;
	char *token;      /* bearer token (secret), NULL: none */
	char *token_file; /* re-read on every request when set */
	int insecure;     /* insecure-skip-tls-verify */
	k8s_cred *cred;   /* exec credential plugin, used when none of the above is set */
	/* What was resolved, for `info` (no secrets). */
	char *context, *cluster, *user;
	const char *auth;   /* token, tokenFile, client-certificate, exec or none */
	char ca_sha256[65]; /* of the CA bytes, "" when the system store is used */
} k8s_conn;

typedef struct k8s_state {
	k8s_conn conn;
	char *ns;
	char *image;
	char *cpu;
	char *memory;
	char *node_selector_json; /* a JSON object or NULL */
	char *tolerations_json;   /* a JSON array or NULL */
	char *service_account;
	char *runtime_class;
	char *work_dir;
	int64_t active_deadline_seconds;
	int64_t create_timeout_ms;
	int force_v4; /* exec_protocol: v4 */
	/* Client-side token bucket. */
	pthread_mutex_t bucket_lock;
	double qps;
	double burst;
	double tokens;
	int64_t bucket_last_us;
	int max_retries;
} k8s_state;

/* Reads kubeconfig into conn as kubectl does: `paths` is one file, or when is_list a
 * $KUBECONFIG list (':'-separated, merged by client-go's rules); `context` NULL means the
 * current-context. Sets *ns_out to the context's namespace (malloc-owned) when it names one. */
int k8s__load_kubeconfig(k8s_conn *conn, const char *paths, int is_list, const char *context,
			 char **ns_out, sbx_error *err);
int k8s__load_incluster(k8s_conn *conn, char **ns_out, sbx_error *err);
void k8s__conn_free(k8s_conn *conn);

/* Exec credential plugins (credential.c). k8s__cred_parse reads a kubeconfig user's `exec`
 * block (command relative to dir when it has a slash; cd/cl the cluster, for
 * provideClusterInfo). k8s__cred_get returns malloc'd copies of the credential (token, or
 * certificate and key PEM; absent ones NULL), running the command when nothing fresh is
 * cached; thread-safe. k8s__cred_expire drops the cached credential if it is still
 * generation `gen` (the one a request that got 401 used). */
int k8s__cred_parse(k8s_cred **out, yaml_document_t *d, yaml_node_t *exec, const char *dir,
		    const char *user, yaml_document_t *cd, yaml_node_t *cl, const k8s_conn *conn,
		    sbx_error *err);
int k8s__cred_get(k8s_cred *c, char **token, char **cert, char **key, sbx_error *err);
unsigned k8s__cred_generation(k8s_cred *c);
void k8s__cred_expire(k8s_cred *c, unsigned gen);
unsigned k8s__cred_runs(k8s_cred *c); /* how often the command ran, for `info` */
void k8s__cred_free(k8s_cred *c);

/* Applies the TLS and auth settings to a curl easy handle. `headers` receives the
 * Authorization header (caller frees the list). */
struct curl_slist;
int k8s__conn_setup(const k8s_conn *conn, void *curl, struct curl_slist **headers, sbx_error *err);

/* One REST call with the token bucket and Retry-After handling. body may be NULL.
 * *http gets the final HTTP status; resp receives the body. */
int k8s__request(k8s_state *st, const char *method, const char *path, const char *body,
		 int64_t deadline_us, long *http, k8s_buf *resp, sbx_error *err);

/* A streaming GET (watch): calls line_fn for every newline-terminated line until it returns
 * nonzero (stop), the stream ends or the deadline passes. *http gets the status. */
typedef int (*k8s_line_fn)(void *ctx, const char *line, size_t len);
int k8s__stream(k8s_state *st, const char *path, int64_t deadline_us, k8s_line_fn fn, void *ctx,
		long *http, k8s_buf *errbody, sbx_error *err);

/* Waits for a token of the client-side bucket. */
void k8s__bucket_take(k8s_state *st);

int64_t k8s__now_us(void);
void k8s__sleep_us(int64_t us);

/* The message of a Status body (or the raw body), for error text; never NULL. */
const char *k8s__status_message(const k8s_buf *body, char *tmp, size_t cap);

/* ---- WebSocket (RFC 6455 client over a libcurl CONNECT_ONLY connection) ---- */
typedef struct k8s_ws k8s_ws;

/* Opens the connection and performs the upgrade, offering `protocols` (comma-separated, in
 * order). On a non-101 answer returns SBX_E_BACKEND (or NOT_FOUND for 404) with the server's
 * message. *chosen is the subprotocol the server picked (owned by ws). */
int k8s__ws_open(k8s_state *st, const char *path, const char *protocols, k8s_ws **out,
		 const char **chosen, sbx_error *err);
void k8s__ws_close(k8s_ws *ws);
/* Queues a message (binary opcode 2 for data; 8 close; 9 ping). */
int k8s__ws_queue(k8s_ws *ws, int opcode, const void *data, size_t len);
/* Runs I/O until a complete message arrives or the deadline passes. Returns 1 with op, msg
 * and len set (msg valid until the next call), 0 on deadline, -1 on EOF or a transport error
 * (err filled). */
int k8s__ws_pump(k8s_ws *ws, int64_t deadline_us, int *op, const unsigned char **msg, size_t *len,
		 sbx_error *err);
size_t k8s__ws_pending(const k8s_ws *ws);

/* ---- exec ---- */
typedef struct k8s_exec_io {
	const char *const *argv;      /* the full argv to run in the container */
	const char *const *kill_argv; /* run on timeout to kill the command's tree, or NULL */
	const void *stdin_data;
	size_t stdin_len;
	int has_stdin;
	uint64_t timeout_ms; /* 0: none */
	sbx_output_fn output;
	void *output_ctx;
	/* Results. */
	int exit_code;
	int completed; /* a status arrived */
	int timed_out;
	int protocol; /* 4 or 5 */
} k8s_exec_io;

/* Runs argv in the pod's sandbox container. Returns SBX_OK when the command ran (exit_code
 * set) or timed out; an error when the exec could not be started or the stream broke. */
int k8s__exec(k8s_state *st, const char *pod, k8s_exec_io *io, sbx_error *err);

#endif

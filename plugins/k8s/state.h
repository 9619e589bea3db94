/* The k8s plugin's state: its settings as read from config (k8s.c's key table), how to
 * reach the apiserver, and the client-side token bucket. Types only. */
#ifndef SBX_K8S_STATE_H
#define SBX_K8S_STATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define K8S_ALIAS     "k8s"
#define K8S_CONTAINER "sandbox"

/* An exec credential plugin and its cached credential (credential.c). */
typedef struct k8s_cred k8s_cred;

/* Connection settings shared by REST and exec handles (host memory). */
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

/* Values of the config keys (strings borrowed from the host until fini). */
typedef struct k8s_settings {
	const char *kubeconfig;
	const char *context;
	int in_cluster;
	const char *ns;
	const char *image;
	const char *cpu;
	const char *memory;
	const char *node_selector_json; /* a JSON object or NULL */
	const char *tolerations_json;   /* a JSON array or NULL */
	const char *service_account;
	const char *runtime_class;
	const char *work_dir;
	int64_t active_deadline_seconds;
	int64_t create_timeout_seconds;
	double qps;
	int64_t burst;
	int64_t max_retries;
	const char *exec_protocol; /* auto, v4 */
} k8s_settings;

typedef struct k8s_state {
	k8s_settings set;
	k8s_conn conn;
	char *ns; /* the namespace used: set.ns, the context's, or "default" (host memory) */
	int force_v4;
	uint64_t max_file_bytes; /* the host's cap on a file read */
	/* Client-side token bucket. */
	pthread_mutex_t bucket_lock;
	double tokens;
	int64_t bucket_last_us;
} k8s_state;

#endif

/* Connection settings from a kubeconfig file (current or named context) or from the pod's
 * service account when running in a cluster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include <sbx/support/base64.h>
#include <sbx/support/buf.h>
#include <sbx/support/host.h>

#include "kubeconfig.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

void k8s_conn_free(k8s_conn *c)
{
	sbxs_host->free(c->server);
	sbxs_host->free(c->ca_pem);
	sbxs_host->free(c->cert_pem);
	if (c->key_pem)
		explicit_bzero(c->key_pem, c->key_len);
	sbxs_host->free(c->key_pem);
	if (c->token)
		explicit_bzero(c->token, strlen(c->token));
	sbxs_host->free(c->token);
	sbxs_host->free(c->token_file);
	memset(c, 0, sizeof(*c));
}

static int read_file(const char *path, char **out, size_t *len)
{
	FILE *f = fopen(path, "rbe");
	if (!f)
		return SBX_E_IO;
	sbxs_buf b = {0};
	char tmp[8192];
	size_t n;
	int rc = SBX_OK;
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		if ((rc = sbxs_buf_add(&b, tmp, n)) != SBX_OK)
			break;
	fclose(f);
	explicit_bzero(tmp, sizeof(tmp));
	if (rc != SBX_OK) {
		sbxs_buf_wipe(&b);
		return rc;
	}
	*out = sbxs_buf_take(&b, len);
	return *out ? SBX_OK : SBX_E_NOMEM;
}

static int b64_decode(const char *in, char **out, size_t *len)
{
	size_t n = strlen(in);
	char *buf = sbxs_host->alloc(SBXS_BASE64_DECODED_MAX(n) + 1);
	if (!buf)
		return SBX_E_NOMEM;
	if (sbxs_base64_decode(in, n, buf, SBXS_BASE64_DECODED_MAX(n), len) != SBX_OK) {
		sbxs_host->free(buf);
		return SBX_E_CONFIG;
	}
	buf[*len] = '\0';
	*out = buf;
	return SBX_OK;
}

/* Minimal accessors over a libyaml document. */
static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	if (!m || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		if (k && k->type == YAML_SCALAR_NODE &&
		    strcmp((char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(d, p->value);
	}
	return NULL;
}

static const char *map_str(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	yaml_node_t *v = map_get(d, m, key);
	return v && v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : NULL;
}

/* The `inner` mapping of the entry named `name` in the sequence `list` (clusters, users,
 * contexts). */
static yaml_node_t *named(yaml_document_t *d, yaml_node_t *root, const char *list, const char *name,
			  const char *inner)
{
	yaml_node_t *seq = map_get(d, root, list);
	if (!seq || seq->type != YAML_SEQUENCE_NODE || !name)
		return NULL;
	for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top;
	     i++) {
		yaml_node_t *e = yaml_document_get_node(d, *i);
		const char *n = map_str(d, e, "name");
		if (n && strcmp(n, name) == 0)
			return map_get(d, e, inner);
	}
	return NULL;
}

/* Loads `data` (base64) or the file `file` (relative to dir) into *out. */
static int load_blob(const char *data, const char *file, const char *dir, char **out, size_t *len,
		     const char *what, sbx_error *err)
{
	if (data) {
		int rc = b64_decode(data, out, len);
		if (rc != SBX_OK)
			return sbxs_host->set_error(err, rc,
						    "k8s: kubeconfig: %s-data is not base64", what);
		return SBX_OK;
	}
	if (!file)
		return SBX_OK;
	char path[4096];
	int n = file[0] == '/' ? snprintf(path, sizeof(path), "%s", file)
			       : snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(path))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: kubeconfig: %s path too long",
					    what);
	if (read_file(path, out, len) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: kubeconfig: cannot read %s '%s'", what, path);
	return SBX_OK;
}

static char *abs_path(const char *file, const char *dir)
{
	char path[4096];
	int n = file[0] == '/' ? snprintf(path, sizeof(path), "%s", file)
			       : snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(path))
		return NULL;
	return sbxs_strdup(path);
}

int k8s_load_kubeconfig(k8s_conn *conn, const char *path, const char *context, char **ns_out,
			sbx_error *err)
{
	int rc = SBX_OK;
	char *text = NULL;
	size_t len = 0;
	yaml_parser_t parser;
	yaml_document_t doc;
	int have_doc = 0;
	char dir[4096];
	const char *slash = strrchr(path, '/');
	int n = slash ? snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path)
		      : snprintf(dir, sizeof(dir), ".");
	if (n < 0 || (size_t)n >= sizeof(dir))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: kubeconfig path too long");
	if (read_file(path, &text, &len) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: kubeconfig '%s' cannot be read (set the "
					    "`kubeconfig` key or $KUBECONFIG)",
					    path);
	if (!yaml_parser_initialize(&parser)) {
		sbxs_host->free(text);
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "k8s: kubeconfig '%s': YAML error at line "
					  "%zu: %s",
					  path, parser.problem_mark.line + 1,
					  parser.problem ? parser.problem : "unknown");
		goto out;
	}
	have_doc = 1;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	const char *ctx_name = context ? context : map_str(&doc, root, "current-context");
	yaml_node_t *ctx = named(&doc, root, "contexts", ctx_name, "context");
	if (!ctx) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "k8s: kubeconfig '%s' has no context "
					  "'%s'",
					  path, ctx_name ? ctx_name : "(no current-context)");
		goto out;
	}
	const char *cl_name = map_str(&doc, ctx, "cluster");
	const char *user_name = map_str(&doc, ctx, "user");
	const char *ns = map_str(&doc, ctx, "namespace");
	yaml_node_t *cl = named(&doc, root, "clusters", cl_name, "cluster");
	yaml_node_t *user = named(&doc, root, "users", user_name, "user");
	const char *server = map_str(&doc, cl, "server");
	if (!server) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "k8s: kubeconfig '%s': cluster '%s' has "
					  "no server",
					  path, cl_name ? cl_name : "");
		goto out;
	}
	size_t sl = strlen(server);
	conn->server = sbxs_strdup(server);
	if (!conn->server)
		goto nomem;
	while (sl && conn->server[sl - 1] == '/')
		conn->server[--sl] = '\0';
	const char *insecure = map_str(&doc, cl, "insecure-skip-tls-verify");
	conn->insecure = insecure && strcmp(insecure, "true") == 0;
	rc = load_blob(map_str(&doc, cl, "certificate-authority-data"),
		       map_str(&doc, cl, "certificate-authority"), dir, &conn->ca_pem,
		       &conn->ca_len, "certificate-authority", err);
	if (rc == SBX_OK)
		rc = load_blob(map_str(&doc, user, "client-certificate-data"),
			       map_str(&doc, user, "client-certificate"), dir, &conn->cert_pem,
			       &conn->cert_len, "client-certificate", err);
	if (rc == SBX_OK)
		rc = load_blob(map_str(&doc, user, "client-key-data"),
			       map_str(&doc, user, "client-key"), dir, &conn->key_pem,
			       &conn->key_len, "client-key", err);
	if (rc != SBX_OK)
		goto out;
	const char *tok = map_str(&doc, user, "token");
	const char *tf = map_str(&doc, user, "tokenFile");
	if (tok && !(conn->token = sbxs_strdup(tok)))
		goto nomem;
	if (tf && !(conn->token_file = abs_path(tf, dir)))
		goto nomem;
	if (map_get(&doc, user, "exec") && !tok && !tf && !conn->cert_pem) {
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "k8s: kubeconfig '%s': user '%s' uses an exec credential "
					  "plugin, which this backend does not run; use a token, "
					  "tokenFile or client certificate",
					  path, user_name ? user_name : "");
		goto out;
	}
	if (ns && ns_out && !(*ns_out = sbxs_strdup(ns)))
		goto nomem;
	goto out;
nomem:
	rc = sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
out:
	if (have_doc)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (text) {
		explicit_bzero(text, len);
		sbxs_host->free(text);
	}
	return rc;
}

int k8s_load_incluster(k8s_conn *conn, char **ns_out, sbx_error *err)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (!host || !*host)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: in_cluster: KUBERNETES_SERVICE_HOST is not set "
					    "(not running in a pod?)");
	char url[512];
	int v6 = strchr(host, ':') != NULL;
	int n = snprintf(url, sizeof(url), "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
			 port && *port ? port : "443");
	if (n < 0 || (size_t)n >= sizeof(url))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: in_cluster: host too long");
	const char *sa = getenv("SBX_K8S_SERVICEACCOUNT_DIR");
	if (!sa || !*sa)
		sa = SA_DIR;
	char path[1024];
	conn->server = sbxs_strdup(url);
	snprintf(path, sizeof(path), "%s/token", sa);
	conn->token_file = sbxs_strdup(path);
	if (!conn->server || !conn->token_file)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	snprintf(path, sizeof(path), "%s/ca.crt", sa);
	if (read_file(path, &conn->ca_pem, &conn->ca_len) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: in_cluster: cannot read %s",
					    path);
	snprintf(path, sizeof(path), "%s/namespace", sa);
	char *ns = NULL;
	size_t nl = 0;
	if (ns_out && read_file(path, &ns, &nl) == SBX_OK) {
		while (nl && (ns[nl - 1] == '\n' || ns[nl - 1] == ' '))
			ns[--nl] = '\0';
		*ns_out = ns;
	}
	return SBX_OK;
}

/* Connection settings as kubectl reads them: one kubeconfig file, or the merged files of a
 * $KUBECONFIG list; the current or a named context; token, tokenFile, client certificates and
 * exec credential plugins (credential.c runs those). Or the pod's service account when
 * running in a cluster.
 *
 * Merging follows client-go's loading rules: files missing from the list are skipped, the
 * first file to set current-context wins, and a cluster, user or context is taken whole from
 * the first file that defines that name (a later file's entry of the same name is ignored,
 * even its fields the first one lacks). Relative paths in an entry resolve against the folder
 * of the file that holds it. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include <sbx/support/base64.h>
#include <sbx/support/buf.h>
#include <sbx/support/host.h>

#include "credential.h"
#include "kubeconfig.h"

#define SA_DIR    "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_FILES 64

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
	sbxs_host->free(c->context);
	sbxs_host->free(c->cluster);
	sbxs_host->free(c->user);
	k8s_cred_free(c->cred);
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

/* One file of the list, parsed. */
typedef struct kc_file {
	char *path;
	char dir[4096];
	yaml_document_t doc;
} kc_file;

typedef struct kc_set {
	kc_file files[MAX_FILES];
	size_t n;
} kc_set;

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

/* A string that is set and not empty (client-go treats "" as unset). */
static const char *map_set(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	const char *s = map_str(d, m, key);
	return s && *s ? s : NULL;
}

/* An entry found in the merged files: its `inner` mapping and the file it came from. */
typedef struct kc_entry {
	yaml_node_t *node;
	kc_file *file;
} kc_entry;

/* The `inner` mapping of the first entry named `name` in the sequence `list` (clusters,
 * users, contexts) over the files in order. */
static kc_entry named(kc_set *set, const char *list, const char *name, const char *inner)
{
	kc_entry none = {0};
	for (size_t f = 0; name && f < set->n; f++) {
		yaml_document_t *d = &set->files[f].doc;
		yaml_node_t *seq = map_get(d, yaml_document_get_root_node(d), list);
		if (!seq || seq->type != YAML_SEQUENCE_NODE)
			continue;
		for (yaml_node_item_t *i = seq->data.sequence.items.start;
		     i < seq->data.sequence.items.top; i++) {
			yaml_node_t *e = yaml_document_get_node(d, *i);
			const char *n = map_str(d, e, "name");
			if (n && strcmp(n, name) == 0)
				return (kc_entry){map_get(d, e, inner), &set->files[f]};
		}
	}
	return none;
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
	char *path = abs_path(file, dir);
	if (!path)
		return sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: kubeconfig: %s path too long",
					    what);
	int rc = read_file(path, out, len);
	if (rc != SBX_OK)
		rc = sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: kubeconfig: cannot read %s '%s'",
					  what, path);
	sbxs_host->free(path);
	return rc;
}

static void set_free(kc_set *set)
{
	for (size_t i = 0; i < set->n; i++) {
		yaml_document_delete(&set->files[i].doc);
		sbxs_host->free(set->files[i].path);
	}
	set->n = 0;
}

/* Parses path into the next slot of set. A missing file is skipped when `optional`. */
static int set_add(kc_set *set, const char *path, int optional, sbx_error *err)
{
	char *text = NULL;
	size_t len = 0;
	yaml_parser_t parser;
	for (size_t i = 0; i < set->n; i++)
		if (strcmp(set->files[i].path, path) == 0)
			return SBX_OK; /* listed twice: the first counts */
	if (set->n == MAX_FILES)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: $KUBECONFIG lists more than %d files", MAX_FILES);
	kc_file *f = &set->files[set->n];
	const char *slash = strrchr(path, '/');
	int n = slash ? snprintf(f->dir, sizeof(f->dir), "%.*s", (int)(slash - path), path)
		      : snprintf(f->dir, sizeof(f->dir), ".");
	if (n < 0 || (size_t)n >= sizeof(f->dir))
		return sbxs_host->set_error(err, SBX_E_CONFIG, "k8s: kubeconfig path too long");
	if (slash == path)
		snprintf(f->dir, sizeof(f->dir), "/");
	if (read_file(path, &text, &len) != SBX_OK) {
		if (optional)
			return SBX_OK;
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: kubeconfig '%s' cannot be read (set the "
					    "`kubeconfig` key or $KUBECONFIG)",
					    path);
	}
	if (!yaml_parser_initialize(&parser)) {
		sbxs_host->free(text);
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int rc = SBX_OK;
	if (!yaml_parser_load(&parser, &f->doc)) {
		rc = sbxs_host->set_error(
		    err, SBX_E_CONFIG, "k8s: kubeconfig '%s': YAML error at line %zu: %s", path,
		    parser.problem_mark.line + 1, parser.problem ? parser.problem : "unknown");
	} else if (!(f->path = sbxs_strdup(path))) {
		yaml_document_delete(&f->doc);
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	} else {
		set->n++;
	}
	yaml_parser_delete(&parser);
	explicit_bzero(text, len);
	sbxs_host->free(text);
	return rc;
}

/* The files: `list` split at ':' when is_list (kubectl's $KUBECONFIG: empty and repeated
 * entries ignored, missing files skipped), else the one file it names. */
static int set_load(kc_set *set, const char *list, int is_list, sbx_error *err)
{
	if (!is_list)
		return set_add(set, list, 0, err);
	for (const char *p = list; *p;) {
		size_t l = strcspn(p, ":");
		char path[4096];
		if (l >= sizeof(path))
			return sbxs_host->set_error(err, SBX_E_CONFIG,
						    "k8s: a $KUBECONFIG entry is too long");
		memcpy(path, p, l);
		path[l] = '\0';
		int rc = l ? set_add(set, path, 1, err) : SBX_OK;
		if (rc != SBX_OK)
			return rc;
		p += l + (p[l] == ':');
	}
	if (set->n == 0)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: none of the files in $KUBECONFIG (%.300s) exists",
					    list);
	return SBX_OK;
}

/* The first current-context set in the files. */
static const char *current_context(kc_set *set)
{
	for (size_t f = 0; f < set->n; f++) {
		yaml_document_t *d = &set->files[f].doc;
		const char *c = map_set(d, yaml_document_get_root_node(d), "current-context");
		if (c)
			return c;
	}
	return NULL;
}

static int fill_names(k8s_conn *conn, const char *ctx, const char *cl, const char *user)
{
	conn->context = sbxs_strdup(ctx);
	conn->cluster = sbxs_strdup(cl ? cl : "");
	conn->user = sbxs_strdup(user ? user : "");
	return conn->context && conn->cluster && conn->user ? SBX_OK : SBX_E_NOMEM;
}

static int fill_cluster(k8s_conn *conn, kc_entry cl, const char *cl_name, sbx_error *err)
{
	yaml_document_t *d = cl.node ? &cl.file->doc : NULL;
	const char *server = d ? map_set(d, cl.node, "server") : NULL;
	if (!server)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: kubeconfig: cluster '%s' has no server",
					    cl_name ? cl_name : "");
	size_t sl = strlen(server);
	conn->server = sbxs_strdup(server);
	if (!conn->server)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	while (sl && conn->server[sl - 1] == '/')
		conn->server[--sl] = '\0';
	const char *insecure = map_str(d, cl.node, "insecure-skip-tls-verify");
	conn->insecure = insecure && strcmp(insecure, "true") == 0;
	int rc = load_blob(map_set(d, cl.node, "certificate-authority-data"),
			   map_set(d, cl.node, "certificate-authority"), cl.file->dir,
			   &conn->ca_pem, &conn->ca_len, "certificate-authority", err);
	if (rc == SBX_OK && conn->ca_pem) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int ml = 0;
		EVP_Digest(conn->ca_pem, conn->ca_len, md, &ml, EVP_sha256(), NULL);
		for (unsigned int i = 0; i < ml && i < 32; i++)
			snprintf(conn->ca_sha256 + 2 * i, 3, "%02x", md[i]);
	}
	return rc;
}

static int fill_user(k8s_conn *conn, kc_entry user, kc_entry cl, const char *user_name,
		     sbx_error *err)
{
	conn->auth = "none";
	if (!user.node)
		return SBX_OK;
	yaml_document_t *d = &user.file->doc;
	const char *dir = user.file->dir;
	int rc = load_blob(map_set(d, user.node, "client-certificate-data"),
			   map_set(d, user.node, "client-certificate"), dir, &conn->cert_pem,
			   &conn->cert_len, "client-certificate", err);
	if (rc == SBX_OK)
		rc = load_blob(map_set(d, user.node, "client-key-data"),
			       map_set(d, user.node, "client-key"), dir, &conn->key_pem,
			       &conn->key_len, "client-key", err);
	if (rc != SBX_OK)
		return rc;
	if (conn->cert_pem && conn->key_pem)
		conn->auth = "client-certificate";
	const char *tok = map_set(d, user.node, "token");
	const char *tf = map_set(d, user.node, "tokenFile");
	if (tok && !(conn->token = sbxs_strdup(tok)))
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	if (tf && !(conn->token_file = abs_path(tf, dir)))
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	if (tok || tf)
		conn->auth = tf ? "tokenFile" : "token"; /* the file wins when both are set */
	yaml_node_t *exec = map_get(d, user.node, "exec");
	if (exec && !tok && !tf && !conn->cert_pem) {
		rc = k8s_cred_parse(&conn->cred, d, exec, dir, user_name,
				    cl.node ? &cl.file->doc : NULL, cl.node, conn, err);
		if (rc == SBX_OK)
			conn->auth = "exec";
	}
	return rc;
}

int k8s_load_kubeconfig(k8s_conn *conn, const char *paths, int is_list, const char *context,
			char **ns_out, sbx_error *err)
{
	kc_set *set = sbxs_zalloc(sizeof(*set));
	if (!set)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	int rc = set_load(set, paths, is_list, err);
	if (rc != SBX_OK)
		goto out;
	const char *ctx_name = context && *context ? context : current_context(set);
	kc_entry ctx = named(set, "contexts", ctx_name, "context");
	if (!ctx.node) {
		rc = sbxs_host->set_error(
		    err, SBX_E_CONFIG, "k8s: kubeconfig %s has no context '%s'",
		    is_list ? "$KUBECONFIG" : paths, ctx_name ? ctx_name : "(no current-context)");
		goto out;
	}
	const char *cl_name = map_set(&ctx.file->doc, ctx.node, "cluster");
	const char *user_name = map_set(&ctx.file->doc, ctx.node, "user");
	const char *ns = map_set(&ctx.file->doc, ctx.node, "namespace");
	kc_entry cl = named(set, "clusters", cl_name, "cluster");
	kc_entry user = named(set, "users", user_name, "user");
	if (fill_names(conn, ctx_name, cl_name, user_name) != SBX_OK) {
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	if ((rc = fill_cluster(conn, cl, cl_name, err)) != SBX_OK ||
	    (rc = fill_user(conn, user, cl, user_name, err)) != SBX_OK)
		goto out;
	if (ns && ns_out && !(*ns_out = sbxs_strdup(ns)))
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
out:
	set_free(set);
	sbxs_host->free(set);
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
	conn->auth = "tokenFile";
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

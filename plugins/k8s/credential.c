/* Exec credential plugins (client.authentication.k8s.io/v1 and v1beta1), as client-go runs
 * them: the configured command with its args as argv (never a shell string), the caller's
 * environment plus the configured env and KUBERNETES_EXEC_INFO, stdin the caller's terminal
 * only in interactive mode, and the ExecCredential it prints on stdout cached until its
 * expirationTimestamp (for the life of the plugin state when it has none). A 401 from the
 * apiserver drops the cached credential (k8s_cred_expire), so the next request runs the
 * command again. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#include <sbx/support/base64.h>
#include <sbx/support/buf.h>
#include <sbx/support/host.h>
#include <sbx/support/json.h>

#include "credential.h"

extern char **environ;

#define V1      "client.authentication.k8s.io/v1"
#define V1BETA1 "client.authentication.k8s.io/v1beta1"

enum { MODE_NEVER, MODE_IF_AVAILABLE, MODE_ALWAYS };

struct k8s_cred {
	char **argv;   /* command and args, NULL-terminated */
	char **env;    /* "NAME=value" from the config, NULL-terminated */
	char *command; /* as the kubeconfig gives it, for messages */
	char *api_version;
	char *install_hint;
	char *user;         /* the kubeconfig user's name, for messages */
	char *cluster_json; /* spec.cluster when provideClusterInfo, else NULL */
	int mode;
	pthread_mutex_t lock;
	/* The cached credential. */
	int have;
	unsigned gen;
	time_t expires; /* 0: does not expire */
	char *token;
	char *cert_pem;
	char *key_pem;
	unsigned runs;
};

static void wipe(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		sbxs_host->free(s);
	}
}

static void drop_cached(k8s_cred *c)
{
	wipe(c->token);
	wipe(c->cert_pem);
	wipe(c->key_pem);
	c->token = c->cert_pem = c->key_pem = NULL;
	c->have = 0;
}

static void free_list(char **l)
{
	for (size_t i = 0; l && l[i]; i++)
		sbxs_host->free(l[i]);
	sbxs_host->free(l);
}

void k8s_cred_free(k8s_cred *c)
{
	if (!c)
		return;
	drop_cached(c);
	free_list(c->argv);
	free_list(c->env);
	sbxs_host->free(c->command);
	sbxs_host->free(c->api_version);
	sbxs_host->free(c->install_hint);
	sbxs_host->free(c->user);
	sbxs_host->free(c->cluster_json);
	pthread_mutex_destroy(&c->lock);
	sbxs_host->free(c);
}

/* ---- the kubeconfig's exec block ---- */

static const char *scalar(yaml_document_t *d, yaml_node_t *m, const char *key)
{
	if (!m || m->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		yaml_node_t *v = yaml_document_get_node(d, p->value);
		if (k && k->type == YAML_SCALAR_NODE &&
		    strcmp((char *)k->data.scalar.value, key) == 0)
			return v && v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value
								: NULL;
	}
	return NULL;
}

static yaml_node_t *child(yaml_document_t *d, yaml_node_t *m, const char *key)
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

/* A YAML node as JSON, scalars typed as YAML 1.2's core schema types them. */
static json_t *to_json(yaml_document_t *d, yaml_node_t *n)
{
	if (!n)
		return json_null();
	if (n->type == YAML_SCALAR_NODE) {
		const char *s = (const char *)n->data.scalar.value;
		if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
			return json_string(s);
		if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)
			return json_boolean(s[0] == 't');
		if (strcmp(s, "null") == 0 || strcmp(s, "~") == 0 || !*s)
			return json_null();
		char *end;
		long long v = strtoll(s, &end, 10);
		if (*s && !*end)
			return json_integer(v);
		double f = strtod(s, &end);
		if (*s && !*end)
			return json_real(f);
		return json_string(s);
	}
	if (n->type == YAML_SEQUENCE_NODE) {
		json_t *a = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     a && i < n->data.sequence.items.top; i++)
			json_array_append_new(a, to_json(d, yaml_document_get_node(d, *i)));
		return a;
	}
	json_t *o = json_object();
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o && p < n->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(d, p->key);
		if (k && k->type == YAML_SCALAR_NODE)
			json_object_set_new(o, (const char *)k->data.scalar.value,
					    to_json(d, yaml_document_get_node(d, p->value)));
	}
	return o;
}

static char *b64(const char *data, size_t len)
{
	size_t cap = SBXS_BASE64_ENCODED_LEN(len) + 1;
	char *out = sbxs_host->alloc(cap);
	if (out)
		sbxs_base64_encode(data, len, out, cap);
	return out;
}

/* spec.cluster of KUBERNETES_EXEC_INFO: the cluster's connection details and the config of
 * its client.authentication.k8s.io/exec extension. */
static char *cluster_info(yaml_document_t *cd, yaml_node_t *cl, const k8s_conn *conn)
{
	json_t *o = json_pack("{ss}", "server", scalar(cd, cl, "server"));
	if (!o)
		return NULL;
	const char *v;
	if ((v = scalar(cd, cl, "tls-server-name")) && *v)
		json_object_set_new(o, "tls-server-name", json_string(v));
	if (conn->insecure)
		json_object_set_new(o, "insecure-skip-tls-verify", json_true());
	if (conn->ca_pem) {
		char *ca = b64(conn->ca_pem, conn->ca_len);
		json_object_set_new(o, "certificate-authority-data", ca ? json_string(ca) : NULL);
		sbxs_host->free(ca);
	}
	if ((v = scalar(cd, cl, "proxy-url")) && *v)
		json_object_set_new(o, "proxy-url", json_string(v));
	if ((v = scalar(cd, cl, "disable-compression")) && strcmp(v, "true") == 0)
		json_object_set_new(o, "disable-compression", json_true());
	yaml_node_t *ext = child(cd, cl, "extensions");
	for (yaml_node_item_t *i =
		 ext && ext->type == YAML_SEQUENCE_NODE ? ext->data.sequence.items.start : NULL;
	     i && i < ext->data.sequence.items.top; i++) {
		yaml_node_t *e = yaml_document_get_node(cd, *i);
		const char *name = scalar(cd, e, "name");
		if (name && strcmp(name, "client.authentication.k8s.io/exec") == 0)
			json_object_set_new(o, "config", to_json(cd, child(cd, e, "extension")));
	}
	char *s = sbxs_json_dump(o);
	json_decref(o);
	return s;
}

static int parse_list(yaml_document_t *d, yaml_node_t *seq, const char *first, char ***out)
{
	size_t n = seq && seq->type == YAML_SEQUENCE_NODE
		       ? (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start)
		       : 0;
	char **l = sbxs_zalloc((n + 2) * sizeof(char *));
	if (!l)
		return SBX_E_NOMEM;
	size_t k = 0;
	if (first && !(l[k++] = sbxs_strdup(first)))
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *e = yaml_document_get_node(d, seq->data.sequence.items.start[i]);
		const char *s = NULL, *name = NULL, *value = NULL;
		if (e && e->type == YAML_SCALAR_NODE)
			s = (const char *)e->data.scalar.value;
		else if (e && e->type == YAML_MAPPING_NODE) {
			name = scalar(d, e, "name");
			value = scalar(d, e, "value");
		}
		if (first && !s) {
			free_list(l);
			return SBX_E_CONFIG; /* args are strings */
		}
		if (!first && (!name || !*name || !value)) {
			free_list(l);
			return SBX_E_CONFIG; /* env entries are {name, value} */
		}
		size_t kv = s ? 0 : strlen(name) + strlen(value) + 2;
		if (s)
			l[k] = sbxs_strdup(s);
		else if ((l[k] = sbxs_host->alloc(kv)))
			snprintf(l[k], kv, "%s=%s", name, value);
		if (!l[k++])
			goto nomem;
	}
	*out = l;
	return SBX_OK;
nomem:
	free_list(l);
	return SBX_E_NOMEM;
}

int k8s_cred_parse(k8s_cred **out, yaml_document_t *d, yaml_node_t *exec, const char *dir,
		   const char *user, yaml_document_t *cd, yaml_node_t *cl, const k8s_conn *conn,
		   sbx_error *err)
{
	const char *api = scalar(d, exec, "apiVersion");
	const char *cmd = scalar(d, exec, "command");
	const char *mode = scalar(d, exec, "interactiveMode");
	const char *hint = scalar(d, exec, "installHint");
	const char *pci = scalar(d, exec, "provideClusterInfo");
	user = user ? user : "";
	if (!api || (strcmp(api, V1) != 0 && strcmp(api, V1BETA1) != 0))
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: kubeconfig: user '%s': exec apiVersion '%s' is "
					    "not supported (" V1 " or " V1BETA1 ")",
					    user, api ? api : "");
	if (!cmd || !*cmd)
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG, "k8s: kubeconfig: user '%s': exec has no command", user);
	int m = MODE_IF_AVAILABLE;
	if (mode && strcmp(mode, "Never") == 0)
		m = MODE_NEVER;
	else if (mode && strcmp(mode, "Always") == 0)
		m = MODE_ALWAYS;
	else if (mode && strcmp(mode, "IfAvailable") != 0)
		return sbxs_host->set_error(err, SBX_E_CONFIG,
					    "k8s: kubeconfig: user '%s': exec interactiveMode '%s' "
					    "is not Never, IfAvailable or Always",
					    user, mode);
	else if (!mode && strcmp(api, V1) == 0) /* v1 has no default, as client-go says */
		return sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "k8s: kubeconfig: interactiveMode must be specified for "
		    "%s to use exec authentication plugin",
		    user);
	k8s_cred *c = sbxs_zalloc(sizeof(*c));
	if (!c)
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	pthread_mutex_init(&c->lock, NULL);
	c->mode = m;
	/* A command with a slash is a path, relative to the kubeconfig's folder; a bare name
	 * is looked up in $PATH. */
	char path[4096];
	int n = strchr(cmd, '/') && cmd[0] != '/' ? snprintf(path, sizeof(path), "%s/%s", dir, cmd)
						  : snprintf(path, sizeof(path), "%s", cmd);
	int rc = n < 0 || (size_t)n >= sizeof(path) ? SBX_E_CONFIG : SBX_OK;
	if (rc == SBX_OK)
		rc = parse_list(d, child(d, exec, "args"), path, &c->argv);
	if (rc == SBX_OK)
		rc = parse_list(d, child(d, exec, "env"), NULL, &c->env);
	if (rc != SBX_OK) {
		k8s_cred_free(c);
		return rc == SBX_E_NOMEM
			   ? sbxs_host->set_error(err, rc, "k8s: out of memory")
			   : sbxs_host->set_error(err, rc,
						  "k8s: kubeconfig: user '%s': exec args must be "
						  "strings and env entries {name, value}",
						  user);
	}
	c->command = sbxs_strdup(cmd);
	c->api_version = sbxs_strdup(api);
	c->user = sbxs_strdup(user);
	c->install_hint = hint && *hint ? sbxs_strdup(hint) : NULL;
	if (pci && strcmp(pci, "true") == 0 && cl)
		c->cluster_json = cluster_info(cd, cl, conn);
	if (!c->command || !c->api_version || !c->user || (hint && *hint && !c->install_hint) ||
	    (pci && strcmp(pci, "true") == 0 && cl && !c->cluster_json)) {
		k8s_cred_free(c);
		return sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	}
	*out = c;
	return SBX_OK;
}

/* ---- running the command ---- */

/* The environment of the command: ours, then the configured entries, then
 * KUBERNETES_EXEC_INFO; a later entry replaces an earlier one of the same name. */
static char **command_env(const k8s_cred *c, const char *info)
{
	size_t n = 0, extra = 0;
	while (environ[n])
		n++;
	while (c->env[extra])
		extra++;
	char **e = sbxs_zalloc((n + extra + 2) * sizeof(char *));
	if (!e)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		size_t nl = strcspn(environ[i], "=");
		int replaced = strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21) == 0;
		for (size_t j = 0; j < extra && !replaced; j++)
			replaced = strncmp(environ[i], c->env[j], nl + 1) == 0;
		if (!replaced)
			e[k++] = environ[i];
	}
	for (size_t j = 0; j < extra; j++)
		e[k++] = c->env[j];
	e[k] = (char *)info;
	return e;
}

/* Reads stdout (at most 1 MiB) and stderr (its first 4 KiB) until both close. */
static int collect(int out_fd, int err_fd, sbxs_buf *out, sbxs_buf *errb)
{
	struct pollfd p[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
	char buf[8192];
	int rc = SBX_OK;
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return SBX_E_IO;
		}
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			ssize_t r = read(p[i].fd, buf, sizeof(buf));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				p[i].fd = -1;
				continue;
			}
			sbxs_buf *b = i == 0 ? out : errb;
			size_t cap = i == 0 ? 1 << 20 : 4096;
			size_t take = b->len + (size_t)r > cap ? cap - b->len : (size_t)r;
			if (take && sbxs_buf_add(b, buf, take) != SBX_OK)
				rc = SBX_E_NOMEM;
		}
	}
	return rc;
}

/* The first line of the command's stderr, for a message. */
static const char *first_line(sbxs_buf *b, char *tmp, size_t cap)
{
	size_t l = b->data ? strcspn(b->data, "\n") : 0;
	snprintf(tmp, cap, "%.*s", (int)(l < cap - 1 ? l : cap - 1), b->data ? b->data : "");
	return tmp;
}

static int run(k8s_cred *c, int interactive, sbxs_buf *out, sbx_error *err)
{
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, rc = SBX_OK, status = 0;
	char *info = NULL, **env = NULL;
	pid_t pid = -1;
	sbxs_buf errb = {0};
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	int ilen =
	    asprintf(&info,
		     "KUBERNETES_EXEC_INFO={\"kind\":\"ExecCredential\",\"apiVersion\":\"%s\","
		     "\"spec\":{%s%s%s\"interactive\":%s}}",
		     c->api_version, c->cluster_json ? "\"cluster\":" : "",
		     c->cluster_json ? c->cluster_json : "", c->cluster_json ? "," : "",
		     interactive ? "true" : "false");
	if (ilen < 0 || !(env = command_env(c, info)) || pipe2(po, O_CLOEXEC) != 0 ||
	    pipe2(pe, O_CLOEXEC) != 0) {
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: exec credential: out of memory");
		goto out;
	}
	if (!interactive)
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	/* In interactive mode prompts go to the caller's stderr, as kubectl lets them. */
	if (!interactive)
		posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	int e = posix_spawnp(&pid, c->argv[0], &fa, NULL, c->argv, env);
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;
	if (e != 0) {
		pid = -1;
		rc = sbxs_host->set_error(
		    err, SBX_E_CONFIG,
		    "k8s: exec credential plugin for user '%s': cannot run '%s': %s%s%s", c->user,
		    c->command, strerror(e), c->install_hint ? "; " : "",
		    c->install_hint ? c->install_hint : "");
		goto out;
	}
	rc = collect(po[0], pe[0], out, &errb);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	pid = -1;
	if (rc != SBX_OK) {
		rc = sbxs_host->set_error(err, rc, "k8s: exec credential plugin for user '%s': %s",
					  c->user,
					  rc == SBX_E_NOMEM ? "out of memory" : "read failed");
		goto out;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char line[300];
		rc = sbxs_host->set_error(
		    err, SBX_E_CONFIG, "k8s: exec credential plugin for user '%s': '%s' %s %d: %s",
		    c->user, c->command,
		    WIFEXITED(status) ? "exited with status" : "died of signal",
		    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
		    first_line(&errb, line, sizeof(line)));
	}
out:
	posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	sbxs_host->free(env);
	sbxs_host->free(info);
	sbxs_buf_wipe(&errb);
	return rc;
}

/* RFC 3339 as Kubernetes writes it (2024-05-01T10:00:00Z, with optional fraction and offset)
 * to unix seconds; -1 if malformed. */
static time_t parse_rfc3339(const char *s)
{
	struct tm tm = {0};
	int used = 0;
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6 ||
	    used != 19)
		return -1;
	const char *p = s + used;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm, n = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5)
			return -1;
		off = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return timegm(&tm) - off;
}

static char *dup_str(json_t *v)
{
	const char *s = json_string_value(v);
	return s && *s ? sbxs_strdup(s) : NULL;
}

/* Takes the ExecCredential the command printed into the cache. */
static int accept(k8s_cred *c, const sbxs_buf *out, sbx_error *err)
{
	json_error_t je;
	json_t *j = json_loadb(out->data ? out->data : "", out->len, 0, &je);
	const char *why = NULL;
	json_t *st = json_object_get(j, "status");
	const char *kind = json_string_value(json_object_get(j, "kind"));
	const char *api = json_string_value(json_object_get(j, "apiVersion"));
	const char *exp = json_string_value(json_object_get(st, "expirationTimestamp"));
	char msg[200];
	if (!json_is_object(j))
		why = "its output is not a JSON object";
	else if (!kind || strcmp(kind, "ExecCredential") != 0)
		why = "its output is not an ExecCredential";
	else if (!api || strcmp(api, c->api_version) != 0) {
		snprintf(msg, sizeof(msg), "it returned apiVersion '%.64s', not %s", api ? api : "",
			 c->api_version);
		why = msg;
	} else if (!json_is_object(st))
		why = "it returned no status";
	int rc = SBX_OK;
	if (!why) {
		c->token = dup_str(json_object_get(st, "token"));
		c->cert_pem = dup_str(json_object_get(st, "clientCertificateData"));
		c->key_pem = dup_str(json_object_get(st, "clientKeyData"));
		c->expires = exp && *exp ? parse_rfc3339(exp) : 0;
		if ((!c->cert_pem) != (!c->key_pem))
			why = "it returned only one of clientCertificateData and clientKeyData";
		else if (!c->token && !c->cert_pem)
			why = "it returned neither a token nor a client certificate and key";
		else if (c->expires < 0)
			why = "its expirationTimestamp is not RFC 3339";
	}
	if (why) {
		drop_cached(c);
		rc = sbxs_host->set_error(err, SBX_E_CONFIG,
					  "k8s: exec credential plugin for user '%s': %s", c->user,
					  why);
	} else {
		c->have = 1;
		c->gen++;
	}
	json_decref(j);
	return rc;
}

static int fresh(const k8s_cred *c)
{
	return c->have && (c->expires == 0 || time(NULL) < c->expires);
}

int k8s_cred_get(k8s_cred *c, char **token, char **cert, char **key, sbx_error *err)
{
	int rc = SBX_OK;
	*token = *cert = *key = NULL;
	pthread_mutex_lock(&c->lock);
	if (!fresh(c)) {
		drop_cached(c);
		int tty = isatty(0);
		if (c->mode == MODE_ALWAYS && !tty) {
			rc = sbxs_host->set_error(
			    err, SBX_E_CONFIG,
			    "k8s: exec credential plugin for user '%s' needs "
			    "interactiveMode Always, but standard input is not "
			    "a terminal",
			    c->user);
			goto out;
		}
		sbxs_buf out = {0};
		rc = run(c, c->mode != MODE_NEVER && tty, &out, err);
		c->runs++;
		if (rc == SBX_OK)
			rc = accept(c, &out, err);
		sbxs_buf_wipe(&out);
		if (rc != SBX_OK)
			goto out;
	}
	if ((c->token && !(*token = sbxs_strdup(c->token))) ||
	    (c->cert_pem && !(*cert = sbxs_strdup(c->cert_pem))) ||
	    (c->key_pem && !(*key = sbxs_strdup(c->key_pem)))) {
		wipe(*token);
		wipe(*cert);
		*token = *cert = NULL;
		rc = sbxs_host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	}
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

unsigned k8s_cred_generation(k8s_cred *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned g = c->gen;
	pthread_mutex_unlock(&c->lock);
	return g;
}

void k8s_cred_expire(k8s_cred *c, unsigned gen)
{
	pthread_mutex_lock(&c->lock);
	if (c->gen == gen)
		drop_cached(c);
	pthread_mutex_unlock(&c->lock);
}

unsigned k8s_cred_runs(k8s_cred *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned r = c->runs;
	pthread_mutex_unlock(&c->lock);
	return r;
}

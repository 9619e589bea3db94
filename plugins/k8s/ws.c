/* The WebSocket client connection (see ws.h). Client frames are masked with fresh random
 * keys; pings are answered. */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sbx/support/base64.h>
#include <sbx/support/buf.h>
#include <sbx/support/clock.h>
#include <sbx/support/host.h>
#include <sbx/support/http.h>
#include <sbx/support/random.h>

#include "http.h"
#include "ws.h"
#include "wsframe.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct k8s_ws {
	CURL *c;
	curl_socket_t fd;
	sbxs_buf in;
	size_t in_off;
	sbxs_buf out;
	size_t out_off;
	k8s_wsframe frames;
	char proto[64];
};

size_t k8s_ws_pending(const k8s_ws *ws)
{
	return ws->out.len - ws->out_off;
}

void k8s_ws_close(k8s_ws *ws)
{
	if (!ws)
		return;
	curl_easy_cleanup(ws->c);
	sbxs_buf_free(&ws->in);
	sbxs_buf_free(&ws->out);
	k8s_wsframe_free(&ws->frames);
	sbxs_host->free(ws);
}

static int wait_fd(k8s_ws *ws, short events, int64_t deadline_us)
{
	int64_t left = (deadline_us - sbxs_now_us()) / 1000;
	if (left <= 0)
		return 0;
	struct pollfd p = {.fd = ws->fd, .events = events};
	int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
	return r < 0 ? 0 : 1;
}

/* Sends what it can of the queue. -1 on a transport error. */
static int flush_some(k8s_ws *ws)
{
	while (ws->out_off < ws->out.len) {
		size_t n = 0;
		CURLcode cc = curl_easy_send(ws->c, ws->out.data + ws->out_off,
					     ws->out.len - ws->out_off, &n);
		if (cc == CURLE_AGAIN)
			return 0;
		if (cc != CURLE_OK)
			return -1;
		ws->out_off += n;
	}
	sbxs_buf_clear(&ws->out);
	ws->out_off = 0;
	return 0;
}

/* Receives what is available. 1 = got bytes, 0 = would block, -1 = EOF or error. */
static int recv_some(k8s_ws *ws)
{
	char tmp[65536];
	size_t n = 0;
	CURLcode cc = curl_easy_recv(ws->c, tmp, sizeof(tmp), &n);
	if (cc == CURLE_AGAIN)
		return 0;
	if (cc != CURLE_OK || n == 0)
		return -1;
	/* Drop consumed bytes first, so the buffer stays about one message long however much
	 * output streams through. */
	sbxs_buf_drop(&ws->in, ws->in_off);
	ws->in_off = 0;
	return sbxs_buf_add(&ws->in, tmp, n) == SBX_OK ? 1 : -1;
}

int k8s_ws_queue(k8s_ws *ws, int opcode, const void *data, size_t len)
{
	unsigned char mask[4];
	if (sbxs_random(mask, sizeof(mask)) != SBX_OK)
		return SBX_E_IO;
	if (ws->out_off && ws->out_off == ws->out.len) {
		sbxs_buf_clear(&ws->out);
		ws->out_off = 0;
	}
	return k8s_wsframe_write(&ws->out, opcode, data, len, mask);
}

/* The next message or close in the received bytes: 1 (op set), 0 need more, -1 error. */
static int next_message(k8s_ws *ws, int *op)
{
	for (;;) {
		size_t used = 0;
		int r =
		    k8s_wsframe_parse(&ws->frames, (const unsigned char *)ws->in.data + ws->in_off,
				      ws->in.len - ws->in_off, &used);
		ws->in_off += used;
		switch (r) {
		case K8S_WS_MESSAGE:
			*op = ws->frames.op;
			return 1;
		case K8S_WS_CLOSE:
			*op = 8;
			return 1;
		case K8S_WS_PING:
			if (k8s_ws_queue(ws, 10, ws->frames.ctl.data, ws->frames.ctl.len) != SBX_OK)
				return -1;
			continue;
		case K8S_WS_PONG:
			continue;
		case K8S_WS_MORE:
			if (used)
				continue;
			return 0;
		default:
			return -1;
		}
	}
}

int k8s_ws_pump(k8s_ws *ws, int64_t deadline_us, int *op, const unsigned char **msg, size_t *len,
		sbx_error *err)
{
	for (;;) {
		int r = next_message(ws, op);
		if (r < 0)
			return sbxs_host->set_error(err, SBX_E_BACKEND,
						    "k8s: exec: WebSocket protocol error from the "
						    "server"),
			       -1;
		if (r > 0) {
			const sbxs_buf *m = *op == 8 ? &ws->frames.ctl : &ws->frames.msg;
			*msg = (const unsigned char *)(m->data ? m->data : "");
			*len = m->len;
			return 1;
		}
		if (flush_some(ws) < 0)
			return sbxs_host->set_error(err, SBX_E_UNREACHABLE,
						    "k8s: exec: connection lost while sending"),
			       -1;
		r = recv_some(ws);
		if (r > 0)
			continue;
		if (r < 0)
			return sbxs_host->set_error(err, SBX_E_UNREACHABLE,
						    "k8s: exec: connection closed by the server "
						    "before the command's status arrived"),
			       -1;
		if (sbxs_now_us() >= deadline_us)
			return 0;
		wait_fd(ws, (short)(POLLIN | (k8s_ws_pending(ws) ? POLLOUT : 0)), deadline_us);
	}
}

static const char *find_header(const char *hdrs, const char *name, size_t *vlen)
{
	size_t nl = strlen(name);
	for (const char *p = strstr(hdrs, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;
		if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
			const char *v = line + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			const char *e = strstr(v, "\r\n");
			*vlen = e ? (size_t)(e - v) : strlen(v);
			while (*vlen && (v[*vlen - 1] == ' ' || v[*vlen - 1] == '\t'))
				(*vlen)--;
			return v;
		}
	}
	return NULL;
}

/* libcurl turns on SSL_MODE_RELEASE_BUFFERS, which frees and reallocates OpenSSL's 16 KiB
 * read buffer for every record: on a stream of output that is one malloc/free pair per
 * record. An exec connection is busy by nature, so it keeps its buffers. */
static CURLcode keep_tls_buffers(CURL *c, void *ssl_ctx, void *ud)
{
	(void)c;
	(void)ud;
	SSL_CTX_clear_mode((SSL_CTX *)ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
	return CURLE_OK;
}

/* A CONNECT_ONLY connection to the server with REST's TLS and credentials; the
 * Authorization line (if any) into *auth. */
static int connect_only(k8s_state *st, k8s_ws *ws, const char *path, struct curl_slist **auth,
			sbx_error *err)
{
	sbxs_buf url = {0};
	if (!(ws->c = curl_easy_init()) || sbxs_buf_addf(&url, "%s%s", st->conn.server, path))
		return sbxs_nomem(err, K8S_ALIAS, "exec");
	int rc = k8s_conn_setup(&st->conn, ws->c, auth, err);
	if (rc != SBX_OK) {
		sbxs_buf_free(&url);
		return rc;
	}
	curl_easy_setopt(ws->c, CURLOPT_URL, url.data);
	curl_easy_setopt(ws->c, CURLOPT_CONNECT_ONLY, 1L);
	/* An h2-capable apiserver would otherwise pick h2 in ALPN, and an HTTP/1.1 Upgrade
	 * cannot be written into an HTTP/2 connection. */
	curl_easy_setopt(ws->c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(ws->c, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(ws->c, CURLOPT_SSL_CTX_FUNCTION, keep_tls_buffers);
	CURLcode cc = curl_easy_perform(ws->c);
	sbxs_buf_free(&url);
	if (cc != CURLE_OK)
		return sbxs_host->set_error(err, SBX_E_UNREACHABLE,
					    "k8s: exec: cannot connect to %s: %s", st->conn.server,
					    curl_easy_strerror(cc));
	curl_easy_getinfo(ws->c, CURLINFO_ACTIVESOCKET, &ws->fd);
	return SBX_OK;
}

/* Queues the upgrade request with a fresh Sec-WebSocket-Key (into key). */
static int queue_upgrade(k8s_state *st, k8s_ws *ws, const char *path, const char *protocols,
			 const struct curl_slist *auth, char key[32], sbx_error *err)
{
	unsigned char raw[16];
	if (sbxs_random(raw, sizeof(raw)) != SBX_OK)
		return sbxs_host->set_error(err, SBX_E_IO, "k8s: exec: no randomness");
	sbxs_base64_encode(raw, sizeof(raw), key, 32);
	const char *hp = strstr(st->conn.server, "://");
	hp = hp ? hp + 3 : st->conn.server;
	if (sbxs_buf_addf(&ws->out,
			  "GET %s HTTP/1.1\r\nHost: %s\r\n%s%sUpgrade: websocket\r\n"
			  "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
			  "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n"
			  "User-Agent: sbx-k8s\r\n\r\n",
			  path, hp, auth ? auth->data : "", auth ? "\r\n" : "", key,
			  protocols) != SBX_OK)
		return sbxs_nomem(err, K8S_ALIAS, "exec");
	return SBX_OK;
}

/* Sends the upgrade and reads the answer's head; *head_len is its length with the blank
 * line, and the head is NUL-terminated in place. */
static int read_head(k8s_ws *ws, int64_t deadline, size_t *head_len, const char *server,
		     sbx_error *err)
{
	char *end = NULL;
	while (!end) {
		if (flush_some(ws) < 0 || sbxs_now_us() > deadline)
			return sbxs_host->set_error(err, SBX_E_UNREACHABLE,
						    "k8s: exec: upgrade to %s failed", server);
		int r = recv_some(ws);
		if (r < 0)
			return sbxs_host->set_error(err, SBX_E_UNREACHABLE,
						    "k8s: exec: connection closed during the "
						    "upgrade");
		if (r == 0)
			wait_fd(ws, (short)(POLLIN | (k8s_ws_pending(ws) ? POLLOUT : 0)), deadline);
		if (ws->in.data)
			end = strstr(ws->in.data, "\r\n\r\n");
	}
	/* The request carried the credentials: gone from memory once sent. */
	sbxs_buf_wipe(&ws->out);
	ws->out_off = 0;
	*head_len = (size_t)(end - ws->in.data) + 4;
	end[2] = '\0';
	return SBX_OK;
}

/* The server's refusal (any status but 101), with the body's message. */
static int refused(k8s_ws *ws, int status, size_t head_len, const char *protocols, int64_t deadline,
		   sbx_error *err)
{
	size_t vl = 0;
	const char *cl = find_header(ws->in.data, "Content-Length", &vl);
	size_t want = cl ? (size_t)strtoul(cl, NULL, 10) : 65536;
	if (want > 65536)
		want = 65536;
	while (ws->in.len - head_len < want && sbxs_now_us() < deadline) {
		int r = recv_some(ws);
		if (r < 0)
			break;
		if (r == 0)
			wait_fd(ws, POLLIN, deadline);
	}
	sbxs_buf body = {.data = ws->in.data + head_len, .len = ws->in.len - head_len};
	char tmp[300];
	if (status == 403 && body.len == 0)
		return sbxs_host->set_error(err, SBX_E_BACKEND,
					    "k8s: exec: the apiserver accepts none of the "
					    "subprotocols %s (HTTP 403 with an empty body)",
					    protocols);
	return sbxs_host->set_error(err, status == 404 ? SBX_E_NOT_FOUND : SBX_E_BACKEND,
				    "k8s: exec: HTTP %d: %s", status,
				    k8s_status_message(&body, tmp, sizeof(tmp)));
}

/* Sec-WebSocket-Accept must be base64(SHA-1(key + GUID)). */
static int accepted(const char *head, const char *key)
{
	char cat[128], want[64];
	unsigned char sha[EVP_MAX_MD_SIZE];
	unsigned int shalen = 0;
	size_t vl = 0;
	const char *acc = find_header(head, "Sec-WebSocket-Accept", &vl);
	snprintf(cat, sizeof(cat), "%s%s", key, WS_GUID);
	EVP_Digest(cat, strlen(cat), sha, &shalen, EVP_sha1(), NULL);
	sbxs_base64_encode(sha, shalen, want, sizeof(want));
	return acc && vl == strlen(want) && memcmp(acc, want, vl) == 0;
}

int k8s_ws_open(k8s_state *st, const char *path, const char *protocols, k8s_ws **out,
		const char **chosen, sbx_error *err)
{
	struct curl_slist *auth = NULL;
	char key[32];
	size_t head_len = 0, vl = 0;
	int status = 0;
	int64_t deadline = sbxs_now_us() + 30000000;
	k8s_ws *ws = sbxs_zalloc(sizeof(*ws));
	if (!ws)
		return sbxs_nomem(err, K8S_ALIAS, "exec");
	int rc = connect_only(st, ws, path, &auth, err);
	if (rc == SBX_OK)
		rc = queue_upgrade(st, ws, path, protocols, auth, key, err);
	if (rc == SBX_OK)
		rc = read_head(ws, deadline, &head_len, st->conn.server, err);
	if (rc != SBX_OK)
		goto out;
	if (sscanf(ws->in.data, "HTTP/1.%*d %d", &status) != 1)
		status = 0;
	if (status != 101) {
		rc = refused(ws, status, head_len, protocols, deadline, err);
		goto out;
	}
	if (!accepted(ws->in.data, key)) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "k8s: exec: bad Sec-WebSocket-Accept from the server");
		goto out;
	}
	const char *pr = find_header(ws->in.data, "Sec-WebSocket-Protocol", &vl);
	if (!pr || vl == 0 || vl >= sizeof(ws->proto)) {
		rc = sbxs_host->set_error(err, SBX_E_BACKEND,
					  "k8s: exec: the server chose no subprotocol (offered %s)",
					  protocols);
		goto out;
	}
	memcpy(ws->proto, pr, vl);
	ws->proto[vl] = '\0';
	ws->in_off = head_len;
	*chosen = ws->proto;
	*out = ws;
	ws = NULL;
out:
	if (ws)
		sbxs_buf_wipe(&ws->out);
	sbxs_http_headers_free(auth);
	k8s_ws_close(ws);
	return rc;
}

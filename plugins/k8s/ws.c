/* A small RFC 6455 client over a libcurl CONNECT_ONLY connection: libcurl does DNS, TCP, TLS
 * (with the same CA, client cert and proxy settings as REST), this file does the HTTP/1.1
 * upgrade and the framing. Client frames are masked with fresh random keys; server frames
 * must be unmasked and carry no RSV bits; fragmented messages are reassembled; pings are
 * answered. */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "k8s.h"

#define WS_GUID    "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_MAX_MSG (64u << 20)

struct k8s_ws {
	CURL *c;
	curl_socket_t fd;
	k8s_buf in;
	size_t in_off;
	k8s_buf out;
	size_t out_off;
	k8s_buf msg;
	int msg_op; /* opcode of the message being reassembled, 0 if none */
	char proto[64];
};

size_t k8s__ws_pending(const k8s_ws *ws)
{
	return ws->out.len - ws->out_off;
}

void k8s__ws_close(k8s_ws *ws)
{
	if (!ws)
		return;
	curl_easy_cleanup(ws->c);
	k8s__buf_free(&ws->in);
	k8s__buf_free(&ws->out);
	k8s__buf_free(&ws->msg);
	free(ws);
}

static int wait_fd(k8s_ws *ws, short events, int64_t deadline_us)
{
	int64_t left = (deadline_us - k8s__now_us()) / 1000;
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
	ws->out.len = ws->out_off = 0;
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
	if (ws->in_off) {
		memmove(ws->in.data, ws->in.data + ws->in_off, ws->in.len - ws->in_off);
		ws->in.len -= ws->in_off;
		ws->in_off = 0;
	}
	return k8s__buf_add(&ws->in, tmp, n) == SBX_OK ? 1 : -1;
}

int k8s__ws_queue(k8s_ws *ws, int opcode, const void *data, size_t len)
{
	unsigned char hdr[14];
	size_t h = 0;
	hdr[h++] = (unsigned char)(0x80 | (opcode & 0x0f));
	if (len < 126) {
		hdr[h++] = (unsigned char)(0x80 | len);
	} else if (len < 65536) {
		hdr[h++] = 0x80 | 126;
		hdr[h++] = (unsigned char)(len >> 8);
		hdr[h++] = (unsigned char)len;
	} else {
		hdr[h++] = 0x80 | 127;
		for (int i = 7; i >= 0; i--)
			hdr[h++] = (unsigned char)((uint64_t)len >> (8 * i));
	}
	unsigned char mask[4];
	if (getrandom(mask, sizeof(mask), 0) != (ssize_t)sizeof(mask))
		return SBX_E_IO;
	memcpy(hdr + h, mask, 4);
	h += 4;
	if (ws->out_off && ws->out_off == ws->out.len)
		ws->out.len = ws->out_off = 0;
	size_t start = ws->out.len;
	if (k8s__buf_add(&ws->out, hdr, h) != SBX_OK || k8s__buf_add(&ws->out, data, len) != SBX_OK)
		return SBX_E_NOMEM;
	unsigned char *p = (unsigned char *)ws->out.data + start + h;
	for (size_t i = 0; i < len; i++)
		p[i] ^= mask[i & 3];
	return SBX_OK;
}

/* Parses one frame from the input. 1 = a complete message is in ws->msg (*op set), 0 = need
 * more bytes, -1 = protocol error. Control frames are handled here (ping -> pong). */
static int parse_frame(k8s_ws *ws, int *op)
{
	for (;;) {
		const unsigned char *b = (const unsigned char *)ws->in.data + ws->in_off;
		size_t avail = ws->in.len - ws->in_off;
		if (avail < 2)
			return 0;
		int fin = b[0] & 0x80, opcode = b[0] & 0x0f;
		if (b[0] & 0x70 || b[1] & 0x80)
			return -1; /* RSV bits or a masked server frame */
		uint64_t len = b[1] & 0x7f;
		size_t off = 2;
		if (len == 126) {
			if (avail < 4)
				return 0;
			len = (uint64_t)b[2] << 8 | b[3];
			off = 4;
		} else if (len == 127) {
			if (avail < 10)
				return 0;
			len = 0;
			for (int i = 0; i < 8; i++)
				len = len << 8 | b[2 + i];
			off = 10;
		}
		if (len > WS_MAX_MSG)
			return -1;
		if (avail < off + len)
			return 0;
		const unsigned char *payload = b + off;
		ws->in_off += off + (size_t)len;
		if (opcode >= 8) {
			if (!fin || len > 125)
				return -1;
			if (opcode == 9) {
				if (k8s__ws_queue(ws, 10, payload, (size_t)len) != SBX_OK)
					return -1;
				continue;
			}
			if (opcode == 10)
				continue;
			if (opcode == 8) {
				ws->msg.len = 0;
				if (k8s__buf_add(&ws->msg, payload, (size_t)len) != SBX_OK)
					return -1;
				*op = 8;
				return 1;
			}
			return -1;
		}
		if (opcode == 0) {
			if (!ws->msg_op)
				return -1;
		} else {
			if (ws->msg_op)
				return -1;
			ws->msg_op = opcode;
			ws->msg.len = 0;
		}
		if (ws->msg.len + len > WS_MAX_MSG ||
		    k8s__buf_add(&ws->msg, payload, (size_t)len) != SBX_OK)
			return -1;
		if (fin) {
			*op = ws->msg_op;
			ws->msg_op = 0;
			return 1;
		}
	}
}

int k8s__ws_pump(k8s_ws *ws, int64_t deadline_us, int *op, const unsigned char **msg, size_t *len,
		 sbx_error *err)
{
	if (!ws->msg_op)
		ws->msg.len = 0;
	for (;;) {
		int r = parse_frame(ws, op);
		if (r < 0)
			return k8s__host->set_error(err, SBX_E_BACKEND,
						    "k8s: exec: WebSocket protocol error from the "
						    "server"),
			       -1;
		if (r > 0) {
			*msg = (const unsigned char *)(ws->msg.data ? ws->msg.data : "");
			*len = ws->msg.len;
			return 1;
		}
		if (flush_some(ws) < 0)
			return k8s__host->set_error(err, SBX_E_UNREACHABLE,
						    "k8s: exec: connection lost while sending"),
			       -1;
		r = recv_some(ws);
		if (r > 0)
			continue;
		if (r < 0)
			return k8s__host->set_error(err, SBX_E_UNREACHABLE,
						    "k8s: exec: connection closed by the server "
						    "before the command's status arrived"),
			       -1;
		if (k8s__now_us() >= deadline_us)
			return 0;
		wait_fd(ws, (short)(POLLIN | (k8s__ws_pending(ws) ? POLLOUT : 0)), deadline_us);
	}
}

static void b64(const unsigned char *in, size_t n, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
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

int k8s__ws_open(k8s_state *st, const char *path, const char *protocols, k8s_ws **out,
		 const char **chosen, sbx_error *err)
{
	int rc = SBX_OK;
	struct curl_slist *auth = NULL;
	char *req = NULL;
	k8s_ws *ws = calloc(1, sizeof(*ws));
	if (!ws)
		return k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
	ws->c = curl_easy_init();
	if (!ws->c) {
		rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	rc = k8s__conn_setup(&st->conn, ws->c, &auth, err);
	if (rc != SBX_OK)
		goto out;
	size_t ul = strlen(st->conn.server) + strlen(path) + 1;
	char *url = malloc(ul);
	if (!url) {
		rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	snprintf(url, ul, "%s%s", st->conn.server, path);
	curl_easy_setopt(ws->c, CURLOPT_URL, url);
	curl_easy_setopt(ws->c, CURLOPT_CONNECT_ONLY, 1L);
	/* An h2-capable apiserver would otherwise pick h2 in ALPN, and an HTTP/1.1 Upgrade
	 * cannot be written into an HTTP/2 connection. */
	curl_easy_setopt(ws->c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(ws->c, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(ws->c, CURLOPT_SSL_CTX_FUNCTION, keep_tls_buffers);
	CURLcode cc = curl_easy_perform(ws->c);
	free(url);
	if (cc != CURLE_OK) {
		rc = k8s__host->set_error(err, SBX_E_UNREACHABLE,
					  "k8s: exec: cannot connect to %s: %s", st->conn.server,
					  curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(ws->c, CURLINFO_ACTIVESOCKET, &ws->fd);
	unsigned char raw[16];
	char key[32], accept[64];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		rc = k8s__host->set_error(err, SBX_E_IO, "k8s: exec: no randomness");
		goto out;
	}
	b64(raw, sizeof(raw), key);
	const char *hp = strstr(st->conn.server, "://");
	hp = hp ? hp + 3 : st->conn.server;
	size_t rl =
	    strlen(path) + strlen(hp) + strlen(protocols) + 512 + (auth ? strlen(auth->data) : 0);
	req = malloc(rl);
	if (!req) {
		rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	int n = snprintf(req, rl,
			 "GET %s HTTP/1.1\r\nHost: %s\r\n%s%sUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
			 "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n"
			 "User-Agent: sbx-k8s\r\n\r\n",
			 path, hp, auth ? auth->data : "", auth ? "\r\n" : "", key, protocols);
	if (n < 0 || (size_t)n >= rl) {
		rc = k8s__host->set_error(err, SBX_E_INVAL, "k8s: exec: request too long");
		goto out;
	}
	if (k8s__buf_add(&ws->out, req, (size_t)n) != SBX_OK) {
		rc = k8s__host->set_error(err, SBX_E_NOMEM, "k8s: out of memory");
		goto out;
	}
	memset(req, 0, (size_t)n);
	int64_t deadline = k8s__now_us() + 30000000;
	/* Send the upgrade, read the response head. */
	char *end = NULL;
	while (!end) {
		if (flush_some(ws) < 0 || k8s__now_us() > deadline) {
			rc = k8s__host->set_error(err, SBX_E_UNREACHABLE,
						  "k8s: exec: upgrade to %s failed",
						  st->conn.server);
			goto out;
		}
		int r = recv_some(ws);
		if (r < 0) {
			rc =
			    k8s__host->set_error(err, SBX_E_UNREACHABLE,
						 "k8s: exec: connection closed during the upgrade");
			goto out;
		}
		if (r == 0)
			wait_fd(ws, (short)(POLLIN | (k8s__ws_pending(ws) ? POLLOUT : 0)),
				deadline);
		if (ws->in.data)
			end = strstr(ws->in.data, "\r\n\r\n");
	}
	size_t head_len = (size_t)(end - ws->in.data) + 4;
	end[2] = '\0';
	int status = 0;
	if (sscanf(ws->in.data, "HTTP/1.%*d %d", &status) != 1)
		status = 0;
	size_t vl = 0;
	if (status != 101) {
		const char *cl = find_header(ws->in.data, "Content-Length", &vl);
		size_t want = cl ? (size_t)strtoul(cl, NULL, 10) : 65536;
		if (want > 65536)
			want = 65536;
		while (ws->in.len - head_len < want && k8s__now_us() < deadline) {
			int r = recv_some(ws);
			if (r < 0)
				break;
			if (r == 0)
				wait_fd(ws, POLLIN, deadline);
		}
		k8s_buf body = {.data = ws->in.data + head_len, .len = ws->in.len - head_len};
		char tmp[300];
		if (status == 403 && body.len == 0)
			rc = k8s__host->set_error(err, SBX_E_BACKEND,
						  "k8s: exec: the apiserver accepts none of the "
						  "subprotocols %s (HTTP 403 with an empty body)",
						  protocols);
		else
			rc = k8s__host->set_error(err,
						  status == 404 ? SBX_E_NOT_FOUND : SBX_E_BACKEND,
						  "k8s: exec: HTTP %d: %s", status,
						  k8s__status_message(&body, tmp, sizeof(tmp)));
		goto out;
	}
	const char *acc = find_header(ws->in.data, "Sec-WebSocket-Accept", &vl);
	char cat[128];
	unsigned char sha[EVP_MAX_MD_SIZE];
	unsigned int shalen = 0;
	snprintf(cat, sizeof(cat), "%s%s", key, WS_GUID);
	EVP_Digest(cat, strlen(cat), sha, &shalen, EVP_sha1(), NULL);
	b64(sha, shalen, accept);
	if (!acc || vl != strlen(accept) || memcmp(acc, accept, vl) != 0) {
		rc = k8s__host->set_error(err, SBX_E_BACKEND,
					  "k8s: exec: bad Sec-WebSocket-Accept from the server");
		goto out;
	}
	const char *pr = find_header(ws->in.data, "Sec-WebSocket-Protocol", &vl);
	if (!pr || vl == 0 || vl >= sizeof(ws->proto)) {
		rc = k8s__host->set_error(err, SBX_E_BACKEND,
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
	if (req)
		free(req);
	if (auth) {
		memset(auth->data, 0, strlen(auth->data));
		curl_slist_free_all(auth);
	}
	k8s__ws_close(ws);
	return rc;
}

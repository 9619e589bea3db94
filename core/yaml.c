/* YAML to node tree (libyaml's document API), ${env.NAME} interpolation, and JSON output of
 * a node for plugins that read lists and maps. Registry and config share this parser. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "internal.h"

void sbx__node_free(sbx__node *node)
{
	if (!node)
		return;
	for (size_t i = 0; i < node->n; i++) {
		if (node->keys)
			sbx__free(node->keys[i]);
		if (node->items)
			sbx__node_free(node->items[i]);
	}
	sbx__free(node->keys);
	sbx__free(node->items);
	sbx__free(node->scalar);
	sbx__free(node->raw);
	sbx__free(node->file);
	sbx__free(node);
}

/* Appends a growable string buffer. */
typedef struct strbuf {
	char *s;
	size_t len, cap;
	int oom;
} strbuf;

static void sb_add(strbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *ns = sbx__realloc(b->s, cap);
		if (!ns) {
			b->oom = 1;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

/* Expands ${env.NAME}; "$${" stays a literal "${". */
static int interpolate(const char *in, const char *file, int line, char **out, sbx_error *err)
{
	strbuf b = {0};
	sb_add(&b, "", 0);
	for (const char *p = in; *p;) {
		if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
			sb_add(&b, "${", 2);
			p += 3;
			continue;
		}
		if (p[0] == '$' && p[1] == '{') {
			const char *end = strchr(p, '}');
			if (!end || strncmp(p + 2, "env.", 4) != 0) {
				sbx__free(b.s);
				return sbx__set_error(err, SBX_E_CONFIG,
						      "%s:%d: bad interpolation '%.60s'; expected "
						      "${env.NAME} (write $${ for a literal ${)",
						      file, line, p);
			}
			char name[256];
			size_t nlen = (size_t)(end - (p + 6));
			if (nlen == 0 || nlen >= sizeof(name)) {
				sbx__free(b.s);
				return sbx__set_error(
				    err, SBX_E_CONFIG,
				    "%s:%d: bad environment variable name in '%.60s'", file, line,
				    p);
			}
			memcpy(name, p + 6, nlen);
			name[nlen] = '\0';
			const char *val = getenv(name);
			if (!val) {
				sbx__free(b.s);
				return sbx__set_error(
				    err, SBX_E_CONFIG,
				    "%s:%d: environment variable %s is not set (used "
				    "as ${env.%s})",
				    file, line, name, name);
			}
			sb_add(&b, val, strlen(val));
			p = end + 1;
			continue;
		}
		sb_add(&b, p, 1);
		p++;
	}
	if (b.oom) {
		sbx__free(b.s);
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	}
	*out = b.s;
	return SBX_OK;
}

#define MAX_DEPTH 64

/* One mapping or sequence being filled. */
typedef struct frame {
	sbx__node *node; /* already attached to its parent, so freeing the root frees it */
	size_t cap;      /* slots allocated in node->items (and node->keys) */
	char *key;       /* MAP: the key whose value comes next; NULL when a key comes next */
	int key_line;
	sbx__nameset seen; /* MAP: key -> line of its first occurrence */
} frame;

typedef struct anchor {
	char *name;
	int line;
} anchor;

/* The tree is built from libyaml's events rather than its document API: the nesting limit
 * then stops the parser at the 65th level, where libyaml's scanner would otherwise do work
 * proportional to the depth for every token (100,000 levels took minutes). */
typedef struct builder {
	const char *file;
	int interp;
	int bad_status;
	sbx__node *root;
	frame stack[MAX_DEPTH];
	int depth;
	anchor *anchors;
	size_t n_anchors, cap_anchors;
} builder;

static int event_line(const yaml_event_t *ev)
{
	return (int)ev->start_mark.line + 1;
}

static int nomem(sbx_error *err)
{
	return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
}

static int new_node(const builder *b, int kind, int line, sbx__node **out, sbx_error *err)
{
	sbx__node *n = sbx__calloc(1, sizeof(*n));
	if (!n || !(n->file = sbx__strdup(b->file))) {
		sbx__free(n);
		return nomem(err);
	}
	n->kind = kind;
	n->line = line;
	*out = n;
	return SBX_OK;
}

/* Remembers where an anchor was set, for the message when it is used. */
static int note_anchor(builder *b, const yaml_char_t *name, int line, sbx_error *err)
{
	if (!name)
		return SBX_OK;
	if (b->n_anchors == b->cap_anchors) {
		size_t cap = b->cap_anchors ? b->cap_anchors * 2 : 8;
		anchor *v = sbx__realloc(b->anchors, cap * sizeof(*v));
		if (!v)
			return nomem(err);
		b->anchors = v;
		b->cap_anchors = cap;
	}
	if (!(b->anchors[b->n_anchors].name = sbx__strdup((const char *)name)))
		return nomem(err);
	b->anchors[b->n_anchors++].line = line;
	return SBX_OK;
}

/* Refusing aliases keeps one source line per value and rules out alias bombs. */
static int refuse_alias(const builder *b, const yaml_event_t *ev, sbx_error *err)
{
	const char *name = (const char *)ev->data.alias.anchor;
	int anchored = 0;
	for (size_t i = b->n_anchors; i > 0 && !anchored; i--)
		if (name && strcmp(b->anchors[i - 1].name, name) == 0)
			anchored = b->anchors[i - 1].line;
	const frame *top = b->depth ? &b->stack[b->depth - 1] : NULL;
	int line = top && top->key ? top->key_line : event_line(ev);
	return sbx__set_error(err, b->bad_status,
			      "%s:%d: YAML aliases are not supported (the value anchored at line "
			      "%d is used again); write the value out",
			      b->file, line, anchored ? anchored : line);
}

/* Hangs n under the open collection (or makes it the root). Takes n in every case. */
static int attach(builder *b, sbx__node *n, sbx_error *err)
{
	if (b->depth == 0) {
		b->root = n;
		return SBX_OK;
	}
	frame *f = &b->stack[b->depth - 1];
	sbx__node *p = f->node;
	if (p->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 4;
		sbx__node **items = sbx__realloc(p->items, cap * sizeof(*items));
		if (items)
			p->items = items;
		char **keys = NULL;
		if (items && p->kind == SBX__NODE_MAP &&
		    (keys = sbx__realloc(p->keys, cap * sizeof(*keys))))
			p->keys = keys;
		if (!items || (p->kind == SBX__NODE_MAP && !keys)) {
			sbx__node_free(n);
			return nomem(err);
		}
		f->cap = cap;
	}
	if (p->kind == SBX__NODE_MAP) {
		p->keys[p->n] = f->key;
		f->key = NULL;
	}
	p->items[p->n++] = n;
	return SBX_OK;
}

static int scalar_value(builder *b, const yaml_event_t *ev, sbx_error *err)
{
	int line = event_line(ev);
	if (b->depth + 1 > MAX_DEPTH)
		return sbx__set_error(err, b->bad_status, "%s:%d: nesting deeper than %d levels",
				      b->file, line, MAX_DEPTH);
	sbx__node *n = NULL;
	int rc = new_node(b, SBX__NODE_SCALAR, line, &n, err);
	if (rc != SBX_OK)
		return rc;
	yaml_scalar_style_t style = ev->data.scalar.style;
	n->quoted = style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
		    style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
		    style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE;
	size_t len = ev->data.scalar.length;
	char *raw = sbx__strndup((const char *)ev->data.scalar.value, len);
	if (!raw) {
		rc = nomem(err);
	} else if (strlen(raw) != len) {
		rc =
		    sbx__set_error(err, b->bad_status, "%s:%d: NUL byte in a value", b->file, line);
	} else if (b->interp && strchr(raw, '$')) {
		rc = interpolate(raw, b->file, line, &n->scalar, err);
		if (rc == SBX_OK) {
			n->raw = raw; /* kept so a secret can be recorded as its reference */
			raw = NULL;
		}
	} else {
		n->scalar = raw;
		raw = NULL;
	}
	sbx__free(raw);
	if (rc != SBX_OK) {
		sbx__node_free(n);
		return rc;
	}
	return attach(b, n, err);
}

static int scalar_key(builder *b, frame *f, const yaml_event_t *ev, sbx_error *err)
{
	int line = event_line(ev);
	size_t len = ev->data.scalar.length;
	char *key = sbx__strndup((const char *)ev->data.scalar.value, len);
	if (!key)
		return nomem(err);
	if (strlen(key) != len) {
		sbx__free(key);
		return sbx__set_error(err, b->bad_status, "%s:%d: NUL byte in a key", b->file,
				      line);
	}
	size_t first = 0;
	int r = sbx__nameset_add(&f->seen, key, (size_t)line, &first);
	if (r != 0) {
		int rc = r < 0 ? nomem(err)
			       : sbx__set_error(err, b->bad_status,
						"%s:%d: duplicate key '%s' (first at line %d)",
						b->file, line, key, (int)first);
		sbx__free(key);
		return rc;
	}
	f->key = key;
	f->key_line = line;
	return SBX_OK;
}

static int open_collection(builder *b, const yaml_event_t *ev, int kind, sbx_error *err)
{
	int line = event_line(ev);
	if (b->depth + 1 > MAX_DEPTH)
		return sbx__set_error(err, b->bad_status, "%s:%d: nesting deeper than %d levels",
				      b->file, line, MAX_DEPTH);
	sbx__node *n = NULL;
	int rc = new_node(b, kind, line, &n, err);
	if (rc == SBX_OK)
		rc = attach(b, n, err);
	if (rc != SBX_OK)
		return rc;
	frame *f = &b->stack[b->depth++];
	memset(f, 0, sizeof(*f));
	f->node = n;
	return SBX_OK;
}

static void close_collection(builder *b)
{
	frame *f = &b->stack[--b->depth];
	sbx__free(f->key);
	sbx__nameset_clear(&f->seen);
	memset(f, 0, sizeof(*f));
}

/* One event; *done set at the end of the first document (later documents are not read). */
static int on_event(builder *b, const yaml_event_t *ev, int *done, sbx_error *err)
{
	frame *top = b->depth ? &b->stack[b->depth - 1] : NULL;
	int wants_key = top && top->node->kind == SBX__NODE_MAP && !top->key;
	int rc = SBX_OK;
	switch (ev->type) {
	case YAML_DOCUMENT_END_EVENT:
	case YAML_STREAM_END_EVENT:
		*done = 1;
		return SBX_OK;
	case YAML_ALIAS_EVENT:
		return refuse_alias(b, ev, err);
	case YAML_SCALAR_EVENT:
		if (wants_key)
			return scalar_key(b, top, ev, err);
		rc = note_anchor(b, ev->data.scalar.anchor, event_line(ev), err);
		return rc != SBX_OK ? rc : scalar_value(b, ev, err);
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		if (wants_key)
			return sbx__set_error(err, b->bad_status,
					      "%s:%d: mapping keys must be plain strings", b->file,
					      event_line(ev));
		rc = note_anchor(b,
				 ev->type == YAML_SEQUENCE_START_EVENT
				     ? ev->data.sequence_start.anchor
				     : ev->data.mapping_start.anchor,
				 event_line(ev), err);
		if (rc != SBX_OK)
			return rc;
		return open_collection(
		    b, ev, ev->type == YAML_SEQUENCE_START_EVENT ? SBX__NODE_LIST : SBX__NODE_MAP,
		    err);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (b->depth)
			close_collection(b);
		return SBX_OK;
	default:
		return SBX_OK;
	}
}

static void builder_free(builder *b)
{
	while (b->depth)
		close_collection(b);
	for (size_t i = 0; i < b->n_anchors; i++)
		sbx__free(b->anchors[i].name);
	sbx__free(b->anchors);
	sbx__node_free(b->root);
	b->root = NULL;
}

static int empty_map(const char *name, sbx__node **out, sbx_error *err)
{
	sbx__node *n = sbx__calloc(1, sizeof(*n));
	if (!n || !(n->file = sbx__strdup(name))) {
		sbx__free(n);
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	}
	n->kind = SBX__NODE_MAP;
	n->line = 1;
	*out = n;
	return SBX_OK;
}

static int load(yaml_parser_t *parser, const char *name, int interp, int bad_status,
		sbx__node **out, sbx_error *err)
{
	builder b = {.file = name, .interp = interp, .bad_status = bad_status};
	int rc = SBX_OK, done = 0;
	*out = NULL;
	while (!done && rc == SBX_OK) {
		yaml_event_t ev;
		if (!yaml_parser_parse(parser, &ev)) {
			if (parser->error == YAML_MEMORY_ERROR)
				rc = nomem(err);
			else
				rc = sbx__set_error(err, bad_status, "%s:%d: %s%s%s", name,
						    (int)parser->problem_mark.line + 1,
						    parser->problem ? parser->problem
								    : "YAML syntax error",
						    parser->context ? " " : "",
						    parser->context ? parser->context : "");
			break;
		}
		rc = on_event(&b, &ev, &done, err);
		yaml_event_delete(&ev);
	}
	if (rc == SBX_OK && (!b.root || (b.root->kind == SBX__NODE_SCALAR && b.root->scalar &&
					 !b.root->scalar[0] && !b.root->raw))) {
		rc = empty_map(name, out, err);
	} else if (rc == SBX_OK) {
		*out = b.root;
		b.root = NULL;
	}
	builder_free(&b);
	return rc;
}

int sbx__yaml_load_string(const char *text, const char *name, int interp, int bad_status,
			  sbx__node **out, sbx_error *err)
{
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser))
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
	int rc = load(&parser, name, interp, bad_status, out, err);
	yaml_parser_delete(&parser);
	return rc;
}

int sbx__yaml_load_file(const char *path, int interp, int bad_status, sbx__node **out,
			sbx_error *err)
{
	FILE *f = NULL;
	int rc = sbx__open_regular(path, &f, err);
	if (rc != SBX_OK)
		return rc;
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		fclose(f);
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	}
	yaml_parser_set_input_file(&parser, f);
	rc = load(&parser, path, interp, bad_status, out, err);
	yaml_parser_delete(&parser);
	fclose(f);
	return rc;
}

const sbx__node *sbx__node_get(const sbx__node *map, const char *key)
{
	if (!map || map->kind != SBX__NODE_MAP)
		return NULL;
	for (size_t i = 0; i < map->n; i++)
		if (strcmp(map->keys[i], key) == 0)
			return map->items[i];
	return NULL;
}

sbx__node *sbx__node_dup(const sbx__node *node)
{
	if (!node)
		return NULL;
	sbx__node *n = sbx__calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->kind = node->kind;
	n->quoted = node->quoted;
	n->line = node->line;
	n->file = sbx__strdup(node->file);
	if (node->file && !n->file)
		goto fail;
	if (node->scalar && !(n->scalar = sbx__strdup(node->scalar)))
		goto fail;
	if (node->raw && !(n->raw = sbx__strdup(node->raw)))
		goto fail;
	if (node->kind != SBX__NODE_SCALAR) {
		n->items = sbx__calloc(node->n ? node->n : 1, sizeof(*n->items));
		if (!n->items)
			goto fail;
		if (node->kind == SBX__NODE_MAP &&
		    !(n->keys = sbx__calloc(node->n ? node->n : 1, sizeof(*n->keys))))
			goto fail;
		for (size_t i = 0; i < node->n; i++) {
			if (n->keys && !(n->keys[i] = sbx__strdup(node->keys[i]))) {
				n->n = i;
				goto fail_items;
			}
			if (!(n->items[i] = sbx__node_dup(node->items[i]))) {
				n->n = i + 1;
				goto fail;
			}
		}
		n->n = node->n;
	}
	return n;
fail_items:
	if (n->keys)
		sbx__free(n->keys[n->n]);
fail:
	sbx__node_free(n);
	return NULL;
}

/* A JSON number (RFC 8259 grammar) that strtod reads without overflow. */
static int is_number(const char *s)
{
	const char *p = s;
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (*p >= '0' && *p <= '9')
			p++;
	else
		return 0;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return 0;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(*p >= '0' && *p <= '9'))
			return 0;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p)
		return 0;
	errno = 0;
	double d = strtod(s, NULL);
	return !(errno == ERANGE && d != 0);
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 if invalid. */
static size_t utf8_len(const unsigned char *p)
{
	static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
	size_t n = p[0] < 0x80             ? 1
		   : (p[0] & 0xE0) == 0xC0 ? 2
		   : (p[0] & 0xF0) == 0xE0 ? 3
		   : (p[0] & 0xF8) == 0xF0 ? 4
					   : 0;
	if (n <= 1)
		return n;
	unsigned cp = p[0] & (0x7Fu >> n);
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3Fu);
	}
	if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

/* A JSON string; control characters escaped, invalid UTF-8 bytes become U+FFFD. */
static void json_string(strbuf *b, const char *s)
{
	sb_add(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		char esc[8];
		size_t n = utf8_len(p);
		if (n == 0) {
			sb_add(b, "\\ufffd", 6);
			p++;
			continue;
		}
		if (n > 1) {
			sb_add(b, (const char *)p, n);
			p += n;
			continue;
		}
		switch (*p) {
		case '"':
			sb_add(b, "\\\"", 2);
			break;
		case '\\':
			sb_add(b, "\\\\", 2);
			break;
		case '\n':
			sb_add(b, "\\n", 2);
			break;
		case '\r':
			sb_add(b, "\\r", 2);
			break;
		case '\t':
			sb_add(b, "\\t", 2);
			break;
		default:
			if (*p < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", *p);
				sb_add(b, esc, 6);
			} else {
				sb_add(b, (const char *)p, 1);
			}
		}
		p++;
	}
	sb_add(b, "\"", 1);
}

static int one_of(const char *s, const char *a, const char *b, const char *c)
{
	return strcmp(s, a) == 0 || strcmp(s, b) == 0 || strcmp(s, c) == 0;
}

static void to_json(strbuf *b, const sbx__node *n)
{
	if (n->kind == SBX__NODE_SCALAR) {
		const char *s = n->scalar ? n->scalar : "";
		if (n->quoted)
			json_string(b, s);
		else if (!*s || strcmp(s, "~") == 0 || one_of(s, "null", "Null", "NULL"))
			sb_add(b, "null", 4);
		else if (one_of(s, "true", "True", "TRUE"))
			sb_add(b, "true", 4);
		else if (one_of(s, "false", "False", "FALSE"))
			sb_add(b, "false", 5);
		else if (is_number(s))
			sb_add(b, s, strlen(s));
		else
			json_string(b, s);
		return;
	}
	int map = n->kind == SBX__NODE_MAP;
	sb_add(b, map ? "{" : "[", 1);
	for (size_t i = 0; i < n->n; i++) {
		if (i)
			sb_add(b, ",", 1);
		if (map) {
			json_string(b, n->keys[i]);
			sb_add(b, ":", 1);
		}
		to_json(b, n->items[i]);
	}
	sb_add(b, map ? "}" : "]", 1);
}

char *sbx__node_to_json(const sbx__node *node)
{
	if (!node)
		return sbx__strdup("null");
	strbuf b = {0};
	to_json(&b, node);
	if (b.oom) {
		sbx__free(b.s);
		return NULL;
	}
	return b.s;
}

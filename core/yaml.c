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

typedef struct conv_ctx {
	yaml_document_t *doc;
	const char *file;
	int interp;
	int bad_status;
	int depth;
	unsigned char *seen; /* one flag per document node: a second visit is an alias */
} conv_ctx;

/* Converts node `id`; `use_line` is where the parent refers to it (0: unknown). */
static int convert(conv_ctx *c, int id, int use_line, sbx__node **out, sbx_error *err)
{
	*out = NULL;
	yaml_node_t *yn = yaml_document_get_node(c->doc, id);
	if (!yn)
		return sbx__set_error(err, c->bad_status, "%s:%d: unresolved YAML node", c->file,
				      use_line);
	/* Refusing aliases keeps one source line per value and rules out alias bombs. */
	if (c->seen[id - 1])
		return sbx__set_error(err, c->bad_status,
				      "%s:%d: YAML aliases are not supported (the value anchored "
				      "at line %d is used again); write the value out",
				      c->file, use_line ? use_line : (int)yn->start_mark.line + 1,
				      (int)yn->start_mark.line + 1);
	c->seen[id - 1] = 1;
	if (++c->depth > 64) {
		c->depth--;
		return sbx__set_error(err, c->bad_status, "%s:%d: nesting deeper than 64 levels",
				      c->file, (int)yn->start_mark.line + 1);
	}
	int rc = SBX_OK;
	int *key_lines = NULL;
	sbx__node *n = sbx__calloc(1, sizeof(*n));
	if (!n || !(n->file = sbx__strdup(c->file))) {
		rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
		goto out;
	}
	n->line = (int)yn->start_mark.line + 1;
	if (yn->type == YAML_SCALAR_NODE) {
		n->kind = SBX__NODE_SCALAR;
		n->quoted = yn->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
			    yn->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
			    yn->data.scalar.style == YAML_LITERAL_SCALAR_STYLE ||
			    yn->data.scalar.style == YAML_FOLDED_SCALAR_STYLE;
		char *raw =
		    sbx__strndup((const char *)yn->data.scalar.value, yn->data.scalar.length);
		if (!raw) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
			goto out;
		}
		if (strlen(raw) != yn->data.scalar.length) {
			sbx__free(raw);
			rc = sbx__set_error(err, c->bad_status, "%s:%d: NUL byte in a value",
					    c->file, n->line);
			goto out;
		}
		if (c->interp && strchr(raw, '$')) {
			rc = interpolate(raw, c->file, n->line, &n->scalar, err);
			if (rc != SBX_OK) {
				sbx__free(raw);
				goto out;
			}
			n->raw = raw; /* kept so a secret can be recorded as its reference */
		} else {
			n->scalar = raw;
		}
	} else if (yn->type == YAML_SEQUENCE_NODE) {
		n->kind = SBX__NODE_LIST;
		size_t cnt = (size_t)(yn->data.sequence.items.top - yn->data.sequence.items.start);
		n->items = sbx__calloc(cnt ? cnt : 1, sizeof(*n->items));
		if (!n->items) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < cnt; i++) {
			rc = convert(c, yn->data.sequence.items.start[i], 0, &n->items[i], err);
			if (rc != SBX_OK)
				goto out;
			n->n++;
		}
	} else if (yn->type == YAML_MAPPING_NODE) {
		n->kind = SBX__NODE_MAP;
		size_t cnt = (size_t)(yn->data.mapping.pairs.top - yn->data.mapping.pairs.start);
		n->items = sbx__calloc(cnt ? cnt : 1, sizeof(*n->items));
		n->keys = sbx__calloc(cnt ? cnt : 1, sizeof(*n->keys));
		key_lines = sbx__calloc(cnt ? cnt : 1, sizeof(*key_lines));
		if (!n->items || !n->keys || !key_lines) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < cnt; i++) {
			yaml_node_pair_t *pair = &yn->data.mapping.pairs.start[i];
			yaml_node_t *k = yaml_document_get_node(c->doc, pair->key);
			if (!k || k->type != YAML_SCALAR_NODE) {
				rc = sbx__set_error(
				    err, c->bad_status, "%s:%d: mapping keys must be plain strings",
				    c->file, k ? (int)k->start_mark.line + 1 : n->line);
				goto out;
			}
			int kline = (int)k->start_mark.line + 1;
			char *key =
			    sbx__strndup((const char *)k->data.scalar.value, k->data.scalar.length);
			if (!key) {
				rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
				goto out;
			}
			for (size_t j = 0; j < n->n; j++) {
				if (strcmp(n->keys[j], key) == 0) {
					rc = sbx__set_error(
					    err, c->bad_status,
					    "%s:%d: duplicate key '%s' (first at line %d)", c->file,
					    kline, key, key_lines[j]);
					sbx__free(key);
					goto out;
				}
			}
			n->keys[i] = key;
			key_lines[i] = kline;
			rc = convert(c, pair->value, kline, &n->items[i], err);
			if (rc != SBX_OK) {
				n->n++; /* the key is owned now; free it with the rest */
				goto out;
			}
			n->n++;
		}
	}
out:
	c->depth--;
	sbx__free(key_lines);
	if (rc != SBX_OK) {
		sbx__node_free(n);
		return rc;
	}
	*out = n;
	return SBX_OK;
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
	yaml_document_t doc;
	*out = NULL;
	if (!yaml_parser_load(parser, &doc)) {
		return sbx__set_error(
		    err, bad_status, "%s:%d: %s%s%s", name, (int)parser->problem_mark.line + 1,
		    parser->problem ? parser->problem : "YAML syntax error",
		    parser->context ? " " : "", parser->context ? parser->context : "");
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	int rc;
	if (!root || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) {
		rc = empty_map(name, out, err);
	} else {
		size_t nodes = (size_t)(doc.nodes.top - doc.nodes.start);
		conv_ctx c = {.doc = &doc,
			      .file = name,
			      .interp = interp,
			      .bad_status = bad_status,
			      .seen = sbx__calloc(nodes ? nodes : 1, 1)};
		if (!c.seen)
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
		else
			rc = convert(&c, 1, 0, out, err);
		sbx__free(c.seen);
	}
	yaml_document_delete(&doc);
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
	FILE *f = fopen(path, "rbe");
	if (!f)
		return sbx__set_error(err, SBX_E_IO, "%s: cannot open: %s", path, strerror(errno));
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		fclose(f);
		return sbx__set_error(err, SBX_E_NOMEM, "out of memory");
	}
	yaml_parser_set_input_file(&parser, f);
	int rc = load(&parser, path, interp, bad_status, out, err);
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

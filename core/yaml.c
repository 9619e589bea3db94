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
} conv_ctx;

static int convert(conv_ctx *c, yaml_node_t *yn, sbx__node **out, sbx_error *err)
{
	*out = NULL;
	if (++c->depth > 64) {
		c->depth--;
		return sbx__set_error(err, c->bad_status, "%s:%d: nesting deeper than 64 levels",
				      c->file, (int)yn->start_mark.line + 1);
	}
	int rc = SBX_OK;
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
			sbx__free(raw);
			if (rc != SBX_OK)
				goto out;
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
			yaml_node_t *child =
			    yaml_document_get_node(c->doc, yn->data.sequence.items.start[i]);
			rc = convert(c, child, &n->items[i], err);
			if (rc != SBX_OK)
				goto out;
			n->n++;
		}
	} else if (yn->type == YAML_MAPPING_NODE) {
		n->kind = SBX__NODE_MAP;
		size_t cnt = (size_t)(yn->data.mapping.pairs.top - yn->data.mapping.pairs.start);
		n->items = sbx__calloc(cnt ? cnt : 1, sizeof(*n->items));
		n->keys = sbx__calloc(cnt ? cnt : 1, sizeof(*n->keys));
		if (!n->items || !n->keys) {
			rc = sbx__set_error(err, SBX_E_NOMEM, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < cnt; i++) {
			yaml_node_pair_t *pair = &yn->data.mapping.pairs.start[i];
			yaml_node_t *k = yaml_document_get_node(c->doc, pair->key);
			if (k->type != YAML_SCALAR_NODE) {
				rc = sbx__set_error(err, c->bad_status,
						    "%s:%d: mapping keys must be plain strings",
						    c->file, (int)k->start_mark.line + 1);
				goto out;
			}
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
					    (int)k->start_mark.line + 1, key, n->items[j]->line);
					sbx__free(key);
					goto out;
				}
			}
			n->keys[i] = key;
			rc = convert(c, yaml_document_get_node(c->doc, pair->value), &n->items[i],
				     err);
			if (rc != SBX_OK) {
				n->n++; /* the key is owned now; free it with the rest */
				goto out;
			}
			n->n++;
		}
	}
out:
	c->depth--;
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
		conv_ctx c = {
		    .doc = &doc, .file = name, .interp = interp, .bad_status = bad_status};
		rc = convert(&c, root, out, err);
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

static int is_number(const char *s)
{
	if (!*s)
		return 0;
	char *end = NULL;
	errno = 0;
	strtod(s, &end);
	if (*end != '\0' || errno != 0)
		return 0;
	/* JSON has no hex, inf, nan, leading '+' or leading zeros. */
	const char *p = s[0] == '-' ? s + 1 : s;
	if (!(*p >= '0' && *p <= '9'))
		return 0;
	if (p[0] == '0' && p[1] >= '0' && p[1] <= '9')
		return 0;
	for (; *p; p++)
		if (!strchr("0123456789.eE+-", *p))
			return 0;
	return 1;
}

static void json_string(strbuf *b, const char *s)
{
	sb_add(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			sb_add(b, esc, 2);
		} else if (*p < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", *p);
			sb_add(b, esc, 6);
		} else {
			sb_add(b, (const char *)p, 1);
		}
	}
	sb_add(b, "\"", 1);
}

static void to_json(strbuf *b, const sbx__node *n)
{
	if (n->kind == SBX__NODE_SCALAR) {
		const char *s = n->scalar ? n->scalar : "";
		if (n->quoted)
			json_string(b, s);
		else if (!*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0)
			sb_add(b, "null", 4);
		else if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0 || is_number(s))
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

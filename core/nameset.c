/* A set of borrowed names, each with a number: open addressing on FNV-1a, doubled at half
 * full. It is what keeps duplicate checks (mapping keys, data source names, registry aliases)
 * linear in the size of the input: a scan of everything seen before made a 200,000-source
 * config take minutes. */
#include <string.h>

#include "internal.h"

static size_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		h ^= *p;
		h *= 1099511628211ull;
	}
	return (size_t)h;
}

/* The slot holding name, or the empty slot where it would go. cap is a power of two. */
static size_t slot_of(const char *const *names, size_t cap, const char *name)
{
	size_t i = hash(name) & (cap - 1);
	while (names[i] && strcmp(names[i], name) != 0)
		i = (i + 1) & (cap - 1);
	return i;
}

static int grow(sbx__nameset *s)
{
	size_t cap = s->cap ? s->cap * 2 : 16;
	const char **names = sbx__calloc(cap, sizeof(*names));
	size_t *values = sbx__calloc(cap, sizeof(*values));
	if (!names || !values) {
		sbx__free(names);
		sbx__free(values);
		return -1;
	}
	for (size_t i = 0; i < s->cap; i++) {
		if (!s->names[i])
			continue;
		size_t j = slot_of(names, cap, s->names[i]);
		names[j] = s->names[i];
		values[j] = s->values[i];
	}
	sbx__free(s->names);
	sbx__free(s->values);
	s->names = names;
	s->values = values;
	s->cap = cap;
	return 0;
}

int sbx__nameset_add(sbx__nameset *s, const char *name, size_t value, size_t *found)
{
	if (s->cap) {
		size_t i = slot_of(s->names, s->cap, name);
		if (s->names[i]) {
			if (found)
				*found = s->values[i];
			return 1;
		}
	}
	if ((s->n + 1) * 2 > s->cap && grow(s) != 0)
		return -1;
	size_t i = slot_of(s->names, s->cap, name);
	s->names[i] = name;
	s->values[i] = value;
	s->n++;
	return 0;
}

int sbx__nameset_get(const sbx__nameset *s, const char *name, size_t *value)
{
	if (!s->cap)
		return 0;
	size_t i = slot_of(s->names, s->cap, name);
	if (!s->names[i])
		return 0;
	if (value)
		*value = s->values[i];
	return 1;
}

void sbx__nameset_clear(sbx__nameset *s)
{
	sbx__free(s->names);
	sbx__free(s->values);
	memset(s, 0, sizeof(*s));
}

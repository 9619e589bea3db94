/* The embedder's side of the append-only promise: a struct a caller passes in is read
 * zero-extended, whatever minor it was built against, the way the loader reads a plugin's
 * descriptor. An older (smaller) struct reads its missing members as zero; a newer (larger)
 * one is accepted when every member this library does not know is zero, and refused
 * otherwise, since it asks for something this library cannot do. Output structs the caller
 * provides get the members their size holds. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The header every ABI struct starts with. */
typedef struct header {
	SBX_STRUCT_HEADER;
} header;

int sbx__struct_in(const void *src, void *dst, size_t size, size_t min_size, const char *what,
		   sbx_error *err)
{
	memset(dst, 0, size);
	if (!src)
		return SBX_OK;
	size_t have = ((const header *)src)->struct_size;
	if (have < min_size)
		return sbx__set_error(err, SBX_E_INVAL,
				      "%s struct has size %zu, expected at least %zu (use "
				      "SBX_INIT_HEADER)",
				      what, have, min_size);
	for (size_t i = size; i < have; i++)
		if (((const unsigned char *)src)[i] != 0)
			return sbx__set_error(err, SBX_E_INVAL,
					      "%s struct has size %zu and sets members past the "
					      "%zu bytes libsbx %s knows; upgrade libsbx",
					      what, have, size, SBX_VERSION_STRING);
	memcpy(dst, src, have < size ? have : size);
	return SBX_OK;
}

int sbx__struct_out_check(const void *dst, size_t min_size, const char *what, sbx_error *err)
{
	size_t have = dst ? ((const header *)dst)->struct_size : 0;
	if (!dst || have < min_size)
		return sbx__set_error(err, SBX_E_INVAL,
				      "%s struct %s, expected at least %zu bytes (use "
				      "SBX_INIT_HEADER)",
				      what, dst ? "is too small" : "is missing", min_size);
	return SBX_OK;
}

void sbx__struct_out(void *dst, const void *src, size_t size)
{
	header h = *(const header *)dst;
	memcpy(dst, src, h.struct_size < size ? h.struct_size : size);
	*(header *)dst = h;
}

/* Cutting a fuzz input into pieces the way reads cut a stream: the piece sizes come from a
 * small generator seeded by the input itself, so a finding replays exactly. Targets of
 * stream parsers feed the input whole and in pieces and require the same result: a parser
 * that depends on where reads end is a bug the fuzzer can then see. */
#ifndef SBX_FUZZ_SPLIT_H
#define SBX_FUZZ_SPLIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fuzz_split {
	uint64_t state;
} fuzz_split;

static inline void fuzz_split_init(fuzz_split *s, const uint8_t *data, size_t size)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a over the input */
	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 1099511628211ull;
	s->state = h | 1;
}

/* The next piece's length, 1..left (left > 0): mostly short, sometimes the rest. */
static inline size_t fuzz_split_next(fuzz_split *s, size_t left)
{
	s->state ^= s->state << 13;
	s->state ^= s->state >> 7;
	s->state ^= s->state << 17;
	uint64_t r = s->state;
	size_t n = (r & 7) == 0 ? left : (size_t)(r >> 8) % 17 + 1;
	return n < left ? n : left;
}

#endif

/*
 * hash.c — kiln's one hash of bytes (hash.h). It sits below every layer,
 * the port's on-disk cache included, and depends on nothing.
 */
#include <string.h>

#include "hash.h"

/* Each word is mixed in by a multiply (its high half folded back), then a
 * finaliser spreads every bit into the low ones, which the tables index by. */
uint64_t kn_hash(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n, w;
    for (; n >= 8; b += 8, n -= 8) {
        memcpy(&w, b, 8); /* a constant size: one load */
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    if (n) {
        w = 0;
        memcpy(&w, b, n);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
    }
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ h >> 33;
}

uint64_t kn_hash_more(uint64_t h, const void *p, size_t n)
{
    h = (h ^ kn_hash(p, n)) * 0x9e3779b97f4a7c15ull; /* the multiply makes the order count */
    return h ^ h >> 32;
}

/*
 * hash.h — kiln's one hash of bytes (hash.c), for the interning tables, the
 * caches' keys and checksums, and seeds derived from names. Declared apart
 * from core.h so that a port's on-disk cache uses it too.
 */
#ifndef KN_HASH_H
#define KN_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A hash of n bytes taken 8 at a time, for the interning tables (whole nodes
 * of ~200 bytes, hashed on every graph_add: a byte at a time would dominate
 * it) and the caches. Depends on the byte order: for tables in memory, or files that only
 * this build of kiln (or this machine) reads. */
uint64_t kn_hash(const void *p, size_t n);

/* h (0 to start), then n more bytes: a hash of several fields in turn,
 *     h = kn_hash_more(kn_hash_more(0, name, strlen(name) + 1), &size, sizeof size); */
uint64_t kn_hash_more(uint64_t h, const void *p, size_t n);

#endif

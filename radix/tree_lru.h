/*
 * radix/tree_lru.h -- the LRU lists of evictable leaves and the
 * path touch (radix/tree_lru.c).
 * Internal to the library (radix/ and the layers above it); the types are
 * in radix/tree_core.h.
 */
#ifndef RKV_RADIX_TREE_LRU_H
#define RKV_RADIX_TREE_LRU_H

#include <stdint.h>

#include "radix/tree_core.h"

/* The node device eviction takes next when need more blocks are wanted,
 * or RKV_NIL. */
uint32_t rkv_lru_first(const rkv_tree *t, uint32_t need);
/* Plain LRU over every bucket: the least recently used head, or RKV_NIL
 * (an eviction-order hook's fallback). */
uint32_t rkv_lru_first_any(const rkv_tree *t);
void rkv_lru_unlink(rkv_tree *t, uint32_t id);
void rkv_lru_push_tail(rkv_tree *t, uint32_t id);
/* Places a node by its last_access (two-ended walk; steps counted). */
void rkv_lru_place(rkv_tree *t, uint32_t id);
/* Path from id up to its namespace root becomes most recently used. */
void rkv_tree_touch(rkv_tree *t, uint32_t id);
/* Frees a namespace root that has no child and no lock (its handles go
 * stale; a later non-peek match or insert creates it again). */
void rkv_tree_free_root(rkv_tree *t, uint32_t root);

#endif

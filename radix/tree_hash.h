/*
 * radix/tree_hash.h -- the pages' chained hashes, computed lazily
 * (radix/tree_hash.c).
 * Internal to the library (radix/ and the layers above it); the types are
 * in radix/tree_core.h.
 */
#ifndef RKV_RADIX_TREE_HASH_H
#define RKV_RADIX_TREE_HASH_H

#include <stdint.h>

#include "radix/tree_core.h"

/* Node id's pages (a device node) and every lazy ancestor's get their
 * chained hashes; no-op when id's are there already. No allocation. */
void rkv_tree_hash_node(rkv_tree *t, uint32_t id);
/* Every lazy page of the tree gets its hash (a snapshot reads them all). */
void rkv_tree_hash_all(rkv_tree *t);
/* The pool's hook (pool->tree_hash): block id's chained hash, computed
 * first when it is lazy; with all, every lazy page of the tree gets its
 * hash first when id is cached (before a caller overrides id's hash, so
 * the pages below it keep the hashes they chained from at insert).
 * Logically const: only the cache of hashes moves. */
uint64_t rkv_tree_block_hash_of(const rkv_tree *t, rkv_block_id id, int all);
/* The chained hash after h of node x's stored page i (either token layout:
 * radix/tree_tokens.h). */
uint64_t rkv_tree_page_hash(const rkv_tree *t, uint64_t h, uint64_t ns,
                            const rkv_tnode *x, uint32_t i);
/* Node id's lazy pages name it again (after a split moved them). */
void rkv_tree_lazy_renumber(rkv_tree *t, uint32_t id);

#endif

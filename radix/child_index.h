/*
 * radix/child_index.h -- the one open-addressing table that finds a
 * node's child by its first page, or a namespace root (radix/child_index.c).
 * Internal to the library (radix/ and the layers above it); the types are
 * in radix/tree_core.h.
 */
#ifndef RKV_RADIX_CHILD_INDEX_H
#define RKV_RADIX_CHILD_INDEX_H

#include <stdint.h>

#include "radix/tree_core.h"

/* Key of the child of parent whose first page is page (int32 ids, in
 * either storage layout: radix/tree_tokens.h). */
uint64_t rkv_child_index_key_page(const rkv_tree *t, uint32_t parent,
                           const int32_t *page);
/* Key of node x (its stored first page) under parent. */
uint64_t rkv_child_index_key_stored(const rkv_tree *t, uint32_t parent,
                                    const rkv_tnode *x);
uint64_t rkv_child_index_key_ns(uint64_t ns);
/* Key of an existing node (its first page or its ns). */
uint64_t rkv_child_index_key_node(const rkv_tree *t, uint32_t id);
/* Child of parent whose first page equals page, or RKV_NIL. */
uint32_t rkv_child_index_find(const rkv_tree *t, uint32_t parent, const int32_t *page);
/* Namespace root of ns, or RKV_NIL. */
uint32_t rkv_child_index_find_ns(const rkv_tree *t, uint64_t ns);
/* Capacity must have been ensured (rkv_tree_prepare). */
void rkv_child_index_insert(rkv_tree *t, uint64_t key, uint32_t id);
/* Entry (key, old_id) now names new_id. */
void rkv_child_index_replace(rkv_tree *t, uint64_t key, uint32_t old_id,
                      uint32_t new_id);
void rkv_child_index_remove(rkv_tree *t, uint64_t key, uint32_t id);
/* Marks every entry of tab[0..cap) empty. */
void rkv_child_index_clear(rkv_child_index_entry *tab, uint32_t cap);
/* Moves every entry into `fresh` (cap entries, power of two), which
 * becomes the table; the old one is freed. */
void rkv_child_index_rehash(rkv_tree *t, rkv_child_index_entry *fresh, uint32_t cap);
/* Smallest power-of-two capacity (>= 64) holding count entries at load
 * <= 3/4. */
uint32_t rkv_child_index_cap_for(uint64_t count);

#endif

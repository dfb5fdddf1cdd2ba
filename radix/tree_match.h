/*
 * radix/tree_match.h -- what radix/tree_match.c offers the rest of
 * the tree: the read-only walk, a new namespace root and the split.
 * Internal to the library (radix/ and the layers above it); the types are
 * in radix/tree_core.h.
 */
#ifndef RKV_RADIX_TREE_MATCH_H
#define RKV_RADIX_TREE_MATCH_H

#include <stdint.h>

#include "radix/tree_core.h"

typedef struct rkv_walk {
    uint32_t node;          /* deepest fully matched node                   */
    uint32_t pages;         /* pages matched in total                       */
    uint32_t partial;       /* node matched only in part, or RKV_NIL        */
    uint32_t partial_pages; /* its matched pages (0 < . < its num_pages)    */
    uint32_t num_dups;
} rkv_walk;
/* Read-only walk from node `from` at depth from_pages over tokens[0..
 * npages pages). Matched block ids go to blocks_out[from_pages..) (may be
 * NULL). With `given` (insert), a matched page whose cached block differs
 * from given[i] is a duplicate: given[i] goes to dups_out (may be NULL) and
 * is counted. */
void rkv_tree_walk(const rkv_tree *t, uint32_t from, uint32_t from_pages,
                   const int32_t *tokens, uint32_t npages,
                   rkv_block_id *blocks_out, const rkv_block_id *given,
                   rkv_block_id *dups_out, rkv_walk *w);
/* Chained hash of the page before a new child of parent: RKV_HASH_ROOT
 * under a namespace root, else the hash of parent's last block. */
uint64_t rkv_tree_prev_hash(const rkv_tree *t, uint32_t parent);


/* Makes the root of namespace ns (a slot and an index entry
 * already prepared; cannot fail); returns its id. */
uint32_t rkv_tree_new_root(rkv_tree *t, uint64_t ns);
/* Splits node xid after k pages using prepared head/tail
 * arrays of k and num_pages-k pages; returns the new head node. */
uint32_t rkv_tree_split(rkv_tree *t, uint32_t xid, uint32_t k, void *head,
                        void *tail);

#endif

/*
 * radix/tree.h -- the core's life cycle and the memory a call
 * prepares before it changes anything (radix/tree.c).
 * Internal to the library (radix/ and the layers above it); the types are
 * in radix/tree_core.h.
 */
#ifndef RKV_RADIX_TREE_H
#define RKV_RADIX_TREE_H

#include <stdint.h>

#include "radix/tree_core.h"

/* Life cycle of the core (the public create/destroy/reset assemble the
 * layers around these: treeapi/tree_api.c). core_create allocates the
 * tree's own tables from an already validated config (RKV_ERR_NOMEM
 * leaves nothing); core_publish makes it the pool's tree (last step of a
 * create that cannot fail any more); core_clear drops every device node,
 * its pages and its slot (layers drop their own nodes first); core_destroy
 * frees what core_create made (after core_clear, or right after create). */
rkv_status rkv_tree_core_create(rkv_pool *pool, const rkv_tree_config *cfg,
                                rkv_tree **out);
/* block_hash: the pool's hook for a block's hash (radix/tree_hash.h's
 * rkv_tree_block_hash_of; passed in so that this file does not name the
 * hashing file, which builds on it). */
void rkv_tree_core_publish(rkv_tree *t,
                           uint64_t (*block_hash)(const rkv_tree *tree, rkv_block_id id,
                                                  int all));
void rkv_tree_core_clear(rkv_tree *t);
void rkv_tree_core_destroy(rkv_tree *t);

/* Memory a call prepares before it changes anything. */
typedef struct rkv_tree_prep {
    rkv_tnode *nodes;       /* new slot table, or NULL                      */
    uint32_t nodes_cap;
    rkv_child_index_entry *idx;    /* new child index, or NULL                     */
    uint32_t idx_cap;
    rkv_node_retention *meta;        /* grown meta (with nodes, when t->retain.meta exists) */
    rkv_node_residency *tn;            /* grown tn (with nodes, when t->tiers.tn exists)     */
    int ndata;
    void *data[16];         /* node arrays (retain: up to 3 splits; insert:
                               pieces cut at lowered pins + a lower split) */
    uint32_t data_pages[16];
} rkv_tree_prep;

/* Allocates what adding add_nodes nodes (each with an index entry) and
 * ndata node arrays of pages[i] pages need. Nothing in t changes except the
 * allocator's counters; on failure nothing stays allocated (RKV_ERR_NOMEM,
 * message names fn). */
rkv_status rkv_tree_prepare(rkv_tree *t, uint32_t add_nodes, int ndata,
                            const uint32_t *pages, rkv_tree_prep *p,
                            const char *fn);
/* Installs the grown slot table and index (no semantic change); the node
 * arrays stay in p for the commit. */
void rkv_tree_prep_install(rkv_tree *t, rkv_tree_prep *p);
/* Frees everything prepared (a later step failed). */
void rkv_tree_prep_abort(rkv_tree *t, rkv_tree_prep *p);

#endif

/*
 * radix/tree.c -- the tree core's life cycle and memory: config defaults,
 * the core's create, clear and destroy (the public create/destroy/reset
 * assemble the layers around them: treeapi/tree_api.c), the slot table and
 * prepared allocations. Data structures and invariants: radix/tree_core.h;
 * match/insert/split live in radix/tree_match.c, recency/eviction in
 * radix/tree_lru.c, locks in radix/tree_lease.c. A pool serves at most one
 * live tree (pool->tree, set by rkv_tree_core_publish, the last step).
 *
 * Failure atomicity: every call validates its arguments, walks the tree
 * read-only, then prepares ALL the memory it may need (a larger slot table,
 * a larger child index, node arrays) into an rkv_tree_prep without touching
 * the tree (rkv_tree_prepare). If any allocation fails, the prepared pieces
 * are freed and the tree is exactly as before. Only then does the commit
 * phase run, which cannot fail; rkv_tree_prep_install swaps in grown tables
 * first (no semantic change).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree.h"
#include "radix/tree_core.h"
#include "radix/tree_lease.h"
#include "radix/tree_tokens.h"

void rkv_tree_config_init(rkv_tree_config *cfg)
{
    if (cfg == NULL)
        return;
    cfg->initial_nodes = 0;
    cfg->evict_policy = RKV_EVICT_LRU;
    cfg->max_pinned_pct = 50;
    cfg->use_jemalloc = rkv_node_mem_has_jemalloc();
    cfg->event_ring = 0;
    cfg->event_tokens = 0;
    cfg->token_bytes = 4;
}

rkv_pool *rkv_tree_pool(const rkv_tree *tree)
{
    return tree ? tree->pool : NULL;
}

/* ---- slots --------------------------------------------------------------- */

/* ---- prepared memory ------------------------------------------------------- */

void rkv_tree_prep_abort(rkv_tree *t, rkv_tree_prep *p)
{
    for (int i = 0; i < p->ndata; i++)
        rkv_node_mem_free(&t->mem, p->data[i],
                          rkv_tree_data_bytes(t, p->data_pages[i]));
    rkv_node_mem_free(&t->mem, p->idx, (size_t)p->idx_cap * sizeof *p->idx);
    rkv_node_mem_free(&t->mem, p->nodes,
                      (size_t)p->nodes_cap * sizeof *p->nodes);
    rkv_node_mem_free(&t->mem, p->meta, (size_t)p->nodes_cap * sizeof *p->meta);
    rkv_node_mem_free(&t->mem, p->tn, (size_t)p->nodes_cap * sizeof *p->tn);
    memset(p, 0, sizeof *p);
}

rkv_status rkv_tree_prepare(rkv_tree *t, uint32_t add_nodes, int ndata,
                                   const uint32_t *pages, rkv_tree_prep *p,
                                   const char *fn)
{
    memset(p, 0, sizeof *p);
    uint64_t avail = (uint64_t)(t->nodes_cap - t->nodes_used) + t->free_count;
    if (avail < add_nodes) {
        uint64_t need = (uint64_t)t->nodes_used + add_nodes;
        uint64_t cap = (uint64_t)t->nodes_cap * 2;
        while (cap < need)
            cap *= 2;
        if (cap >= RKV_NIL)
            cap = RKV_NIL - 1;
        if (cap < need)
            return rkv_set_error(RKV_ERR_NOMEM, "%s: node id space exhausted", fn);
        p->nodes = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *p->nodes);
        if (p->nodes == NULL)
            goto nomem;
        p->nodes_cap = (uint32_t)cap;
        if (t->retain.meta != NULL) {
            p->meta = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *p->meta);
            if (p->meta == NULL)
                goto nomem;
        }
        if (t->tiers.tn != NULL) {
            p->tn = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *p->tn);
            if (p->tn == NULL)
                goto nomem;
        }
    }
    if ((uint64_t)(t->idx_count + add_nodes) * 4 > (uint64_t)t->idx_cap * 3) {
        uint32_t cap = rkv_child_index_cap_for((uint64_t)t->idx_count + add_nodes);
        if ((uint64_t)(t->idx_count + add_nodes) * 4 > (uint64_t)cap * 3) {
            rkv_tree_prep_abort(t, p);
            return rkv_set_error(RKV_ERR_NOMEM, "%s: child index is full", fn);
        }
        p->idx = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *p->idx);
        if (p->idx == NULL)
            goto nomem;
        p->idx_cap = cap;
    }
    for (int i = 0; i < ndata; i++) {
        p->data[i] = rkv_node_mem_alloc(&t->mem, rkv_tree_data_bytes(t, pages[i]));
        if (p->data[i] == NULL)
            goto nomem;
        p->data_pages[i] = pages[i];
        p->ndata = i + 1;
    }
    return RKV_OK;
nomem:
    rkv_tree_prep_abort(t, p);
    return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory for tree nodes", fn);
}

/* Moves a per-node array (elem bytes a node) into its grown copy `to`:
 * the used nodes are copied, the old array (still nodes_cap long) freed. */
static void *rkv_tree_move_nodes(rkv_tree *t, void *to, void *from, size_t elem)
{
    memcpy(to, from, (size_t)t->nodes_used * elem);
    rkv_node_mem_free(&t->mem, from, (size_t)t->nodes_cap * elem);
    return to;
}

void rkv_tree_prep_install(rkv_tree *t, rkv_tree_prep *p)
{
    if (p->nodes != NULL) {
        t->nodes = rkv_tree_move_nodes(t, p->nodes, t->nodes, sizeof *t->nodes);
        if (p->meta != NULL) {
            t->retain.meta = rkv_tree_move_nodes(t, p->meta, t->retain.meta,
                                                 sizeof *t->retain.meta);
            p->meta = NULL;
        }
        if (p->tn != NULL) {
            t->tiers.tn = rkv_tree_move_nodes(t, p->tn, t->tiers.tn, sizeof *t->tiers.tn);
            p->tn = NULL;
        }
        t->nodes_cap = p->nodes_cap;
        p->nodes = NULL;
    }
    if (p->idx != NULL) {
        rkv_child_index_rehash(t, p->idx, p->idx_cap);
        p->idx = NULL;
    }
}

/* ---- create / destroy ------------------------------------------------------ */

rkv_status rkv_tree_core_create(rkv_pool *pool, const rkv_tree_config *cfg,
                                rkv_tree **out)
{
    rkv_tree *t = calloc(1, sizeof *t);
    if (t == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_create: tree struct");
    t->pool = pool;
    t->P = pool->cfg.page_size;
    t->tok_bytes = cfg->token_bytes == 3 ? 3 : 4;
    t->page_bytes = (size_t)t->P * t->tok_bytes;
    t->tok_simd = rkv_tok_simd_available();
    rkv_status st = rkv_node_mem_init(&t->mem, cfg->use_jemalloc);
    if (st != RKV_OK) {
        free(t);
        return st;
    }
    if (pool->tree_fail_at > 0) { /* tests: radix/tree_debug.h */
        t->mem.fail_after = pool->tree_fail_at - 1;
        pool->tree_fail_at = 0;
    }
    uint32_t want = cfg->initial_nodes ? cfg->initial_nodes + 1 : 64;
    if (want < 64)
        want = 64;
    t->nodes_cap = want;
    t->idx_cap = rkv_child_index_cap_for(want);
    t->owned_bytes = ((size_t)pool->cfg.num_blocks + 7) / 8;
    t->nodes = rkv_node_mem_alloc(&t->mem, (size_t)t->nodes_cap * sizeof *t->nodes);
    t->idx = rkv_node_mem_alloc(&t->mem, (size_t)t->idx_cap * sizeof *t->idx);
    /* one allocation: the owned bits, then the lazy-hash bits */
    t->owned = rkv_node_mem_alloc(&t->mem, 2 * t->owned_bytes);
    if (t->nodes == NULL || t->idx == NULL || t->owned == NULL) {
        rkv_tree_core_destroy(t);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_create: tree tables");
    }
    memset(t->owned, 0, 2 * t->owned_bytes);
    t->lazy = t->owned + t->owned_bytes;
    rkv_child_index_clear(t->idx, t->idx_cap);
    /* slot 0: the super-root; it is never "in use" as a handle target */
    t->nodes[0].gen = 0;
    rkv_tnode_clear(&t->nodes[0]);
    t->nodes_used = 1;
    t->free_head = RKV_NIL;
    for (uint32_t b = 0; b < RKV_LRU_BUCKETS; b++)
        t->lru_head[b] = t->lru_tail[b] = RKV_NIL;
    t->policy = cfg->evict_policy;
    *out = t;
    return RKV_OK;
}

void rkv_tree_core_publish(rkv_tree *t,
                           uint64_t (*block_hash)(const rkv_tree *tree, rkv_block_id id,
                                                  int all))
{
    rkv_lease_init(t);
    t->pool->tree = t;
    t->pool->tree_hash = block_hash;
    t->pool->trees_made++;
}

void rkv_tree_core_clear(rkv_tree *t)
{
    rkv_pool *pool = t->pool;
    for (uint32_t id = t->nodes_used; id-- > 1;) {
        rkv_tnode *x = &t->nodes[id];
        if (x->parent == RKV_NIL)
            continue;
        if (x->parent != 0) {
            rkv_block_id *b = rkv_tnode_blocks(t, x);
            for (uint32_t i = 0; i < x->num_pages; i++) {
                rkv_tree_clear_owned(t, b[i]);
                if (b[i] < pool->cfg.num_blocks && pool->refcount[b[i]] > 0)
                    (void)rkv_pool_drop_ref(pool, b[i]);
            }
            rkv_node_mem_free(&t->mem, x->u.tok8,
                              rkv_tree_data_bytes(t, x->cap_pages));
        }
        rkv_tnode_clear(x);
        rkv_tnode_bump_gen(x);
    }
    memset(t->lazy, 0, t->owned_bytes); /* no page is cached any more */
    t->lazy_live = 0;
    /* rebuild the free list so low ids are reused first */
    t->free_head = RKV_NIL;
    t->free_count = 0;
    for (uint32_t id = t->nodes_used; id-- > 1;) {
        t->nodes[id].next_sib = t->free_head;
        t->free_head = id;
        t->free_count++;
    }
    rkv_child_index_clear(t->idx, t->idx_cap);
    t->idx_count = 0;
    for (uint32_t b = 0; b < RKV_LRU_BUCKETS; b++)
        t->lru_head[b] = t->lru_tail[b] = RKV_NIL;
    t->lru_nonempty[0] = t->lru_nonempty[1] = 0;
    t->lock_total = 0;
    t->cached_blocks = t->evictable_blocks = t->locked_blocks = 0;
    t->num_nodes = t->num_namespaces = 0;
}

void rkv_tree_core_destroy(rkv_tree *t)
{
    rkv_lease_fini(t);
    if (t->pool->tree == t) {
        t->pool->tree = NULL;
        t->pool->tree_hash = NULL;
    }
    rkv_node_mem_free(&t->mem, t->nodes,
                      (size_t)t->nodes_cap * sizeof *t->nodes);
    rkv_node_mem_free(&t->mem, t->idx, (size_t)t->idx_cap * sizeof *t->idx);
    rkv_node_mem_free(&t->mem, t->owned, 2 * t->owned_bytes);
    rkv_node_mem_fini(&t->mem);
    free(t);
}

/*
 * radix/tree_check.c -- rkv_tree_check (every invariant of
 * radix/tree_core.h, recomputed from scratch; the layers' own invariants
 * through the check hooks: lower nodes first, then every layer's), node
 * info and the debug hooks of radix/tree_debug.h. (rkv_tree_get_stats
 * gathers the core's and the layers' counters in the facade,
 * treeapi/tree_api.c.)
 *
 * The check walks each namespace subtree depth-first through the sibling
 * links (no stack: up via parent pointers), so it knows each node's
 * namespace and the hash of the page before it, and verifies every page's
 * chained hash in the pool. Each node's lock count must equal the live
 * leases naming it plus its children's counts (the lease table is checked
 * first and counted per node). Scratch memory (a bitmap of blocks seen,
 * per-node lease counts) comes from calloc, not the tree allocator, so OOM
 * injection never hits it.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree_core.h"
#include "radix/tree_debug.h"
#include "radix/tree_lease.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: " __VA_ARGS__)

/* ---- debug hooks ------------------------------------------------------------- */

void rkv_tree_debug_fail_alloc_after(rkv_tree *t, int64_t k)
{
    if (t != NULL)
        t->mem.fail_after = k < 0 ? -1 : k;
}

void rkv_tree_debug_fail_create_after(rkv_pool *pool, int64_t k)
{
    if (pool != NULL)
        pool->tree_fail_at = k < 0 ? 0 : k + 1;
}

int rkv_tree_debug_mem_report(const rkv_tree *t, rkv_node_mem_report *r)
{
    return rkv_node_mem_report_get(&t->mem, r);
}

int rkv_tree_debug_tok_simd(rkv_tree *t, int on)
{
    t->tok_simd = on && rkv_tok_simd_available();
    return t->tok_simd;
}

uint64_t rkv_tree_debug_alloc_calls(const rkv_tree *t)
{
    return t ? t->mem.calls : 0;
}

int64_t rkv_tree_debug_live_allocs(const rkv_tree *t)
{
    return t ? t->mem.live : 0;
}

/* ---- stats and node info -------------------------------------------------- */

rkv_status rkv_tree_node_info(const rkv_tree *tree, rkv_node node,
                              rkv_node_info *out)
{
    if (tree == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_node_info: NULL");
    if (!rkv_tree_handle_ok(tree, node))
        return rkv_tree_stale(node, "rkv_tree_node_info");
    const rkv_tree *t = tree;
    const rkv_tnode *x = &t->nodes[node.id];
    memset(out, 0, sizeof *out);
    if (x->parent != 0) {
        out->parent.id = x->parent;
        out->parent.gen = t->nodes[x->parent].gen;
    }
    out->num_pages = x->num_pages;
    for (uint32_t c = x->first_child; c != RKV_NIL; c = t->nodes[c].next_sib)
        out->num_children++;
    out->lock_count = x->lock_count;
    out->last_access = x->last_access;
    out->children_epoch = x->children_epoch;
    size_t pages = 0;
    uint32_t y = node.id;
    while (t->nodes[y].parent != 0) {
        pages += t->nodes[y].num_pages;
        y = t->nodes[y].parent;
    }
    out->ns = t->nodes[y].u.ns;
    out->depth_tokens = pages * t->P;
    return RKV_OK;
}

/* ---- check -------------------------------------------------------------------- */

typedef struct rkv_check_acc {
    uint64_t pages, evictable, locked, nodes, lru_members;
    uint8_t *seen; /* blocks met in the tree */
    uint32_t *own; /* live leases per node (from the lease table) */
} rkv_check_acc;

/* Verifies one non-root node (its links, index entry, pages, hashes). */
static rkv_status rkv_check_node(const rkv_tree *t, uint32_t id, uint64_t ns,
                                 rkv_check_acc *a)
{
    const rkv_tnode *x = &t->nodes[id];
    const rkv_pool *pool = t->pool;
    const rkv_tnode *p = &t->nodes[x->parent];
    if (x->num_pages == 0 || x->num_pages > x->cap_pages)
        return CORRUPT("node %u has %u pages (capacity %u)", id, x->num_pages,
                       x->cap_pages);
    if (x->gen == 0)
        return CORRUPT("node %u has generation 0", id);
    int32_t pg[RKV_MAX_PAGE_SIZE]; /* a page's ids, unpacked */
    rkv_tok_load(t, pg, rkv_tok_page(t, x, 0), t->P);
    if (rkv_child_index_find(t, x->parent, pg) != id)
        return CORRUPT("node %u is not found by its first page under %u", id,
                       x->parent);
    if ((x->prev_sib == RKV_NIL ? p->first_child : t->nodes[x->prev_sib].next_sib) != id)
        return CORRUPT("node %u: broken previous-sibling link", id);
    if (x->next_sib != RKV_NIL && (t->nodes[x->next_sib].prev_sib != id ||
                                   t->nodes[x->next_sib].parent != x->parent))
        return CORRUPT("node %u: broken next-sibling link", id);
    if (x->last_access > p->last_access)
        return CORRUPT("node %u used at %llu after its parent (%llu)", id,
                       (unsigned long long)x->last_access,
                       (unsigned long long)p->last_access);
    uint64_t below = 0, nchild = 0;
    for (uint32_t c = x->first_child; c != RKV_NIL; c = t->nodes[c].next_sib) {
        if (++nchild > t->nodes_used)
            return CORRUPT("node %u: cycle in its children", id);
        if (t->nodes[c].parent != id)
            return CORRUPT("child %u of %u names parent %u", c, id,
                           t->nodes[c].parent);
        below += t->nodes[c].lock_count;
    }
    if (x->lock_count != below + a->own[id])
        return CORRUPT("node %u lock count %u != its leases %u + children's "
                       "%llu", id, x->lock_count, a->own[id],
                       (unsigned long long)below);
    const rkv_block_id *xb = rkv_tnode_blocks(t, x);
    /* lazy pages (tree_hash.c): all of the node's or none, only where the
     * tree hashes lazily, naming their node and index; a node with hashes
     * has a parent with hashes */
    const int lazy = rkv_tree_hash_lazily(t) && x->num_pages > 0 &&
                     xb[0] < pool->cfg.num_blocks && rkv_tree_lazy(t, xb[0]);
    if (lazy && (!rkv_tree_hash_lazily(t) || !t->lazy_live))
        return CORRUPT("node %u has lazy pages in a tree that hashes eagerly "
                       "or counts none", id);
    if (!lazy && rkv_tree_hash_lazily(t) && x->parent != 0 &&
        t->nodes[x->parent].parent != 0) {
        const rkv_tnode *px = &t->nodes[x->parent];
        rkv_block_id pb = rkv_tnode_blocks(t, px)[px->num_pages - 1];
        if (pb < pool->cfg.num_blocks && rkv_tree_lazy(t, pb))
            return CORRUPT("node %u has hashes below lazy parent %u", id,
                           x->parent);
    }
    uint64_t h = lazy ? 0 : rkv_tree_prev_hash(t, x->parent);
    for (uint32_t i = 0; i < x->num_pages; i++) {
        rkv_block_id b = xb[i];
        if (b >= pool->cfg.num_blocks)
            return CORRUPT("node %u page %u: block %u out of range", id, i, b);
        if (pool->refcount[b] == 0)
            return CORRUPT("node %u page %u: block %u is free in the pool", id,
                           i, b);
        if (a->seen[b >> 3] & (1u << (b & 7)))
            return CORRUPT("block %u is cached twice (node %u page %u)", b, id, i);
        a->seen[b >> 3] |= (uint8_t)(1u << (b & 7));
        if (!rkv_tree_owned(t, b))
            return CORRUPT("block %u of node %u is not marked owned", b, id);
        rkv_tok_load(t, pg, rkv_tok_page(t, x, i), t->P);
        if (!rkv_tokens_valid(pg, t->P))
            return CORRUPT("node %u page %u holds a negative token", id, i);
        if (rkv_tree_hash_lazily(t) && rkv_tree_lazy(t, b) != lazy)
            return CORRUPT("node %u page %u: block %u lazy %d, its node's "
                           "first page %d", id, i, b, !lazy, lazy);
        if (lazy) {
            if (pool->hash[b] != (((uint64_t)id << 32) | i))
                return CORRUPT("node %u page %u: lazy block %u names %llu", id,
                               i, b, (unsigned long long)pool->hash[b]);
            continue;
        }
        h = rkv_block_hash(h, ns, pg, t->P);
        if (pool->hash[b] != h)
            return CORRUPT("node %u page %u: block %u hash does not chain", id,
                           i, b);
    }
    a->pages += x->num_pages;
    if (x->lock_count == 0)
        a->evictable += x->num_pages;
    else
        a->locked += x->num_pages;
    a->nodes++;
    if (rkv_tree_in_lru(x))
        a->lru_members++;
    return RKV_OK;
}

/* Depth-first over a namespace subtree without a stack. */
static rkv_status rkv_check_subtree(const rkv_tree *t, uint32_t root,
                                    rkv_check_acc *a)
{
    uint64_t ns = t->nodes[root].u.ns;
    uint32_t y = t->nodes[root].first_child;
    uint64_t steps = 0;
    while (y != RKV_NIL) {
        if (++steps > t->nodes_used)
            return CORRUPT("namespace root %u: cycle in the tree", root);
        if (y >= t->nodes_used || t->nodes[y].parent == RKV_NIL)
            return CORRUPT("namespace root %u reaches free slot %u", root, y);
        rkv_status st = rkv_check_node(t, y, ns, a);
        if (st != RKV_OK)
            return st;
        if (t->nodes[y].first_child != RKV_NIL) {
            y = t->nodes[y].first_child;
            continue;
        }
        while (y != root && t->nodes[y].next_sib == RKV_NIL)
            y = t->nodes[y].parent;
        y = y == root ? RKV_NIL : t->nodes[y].next_sib;
    }
    return RKV_OK;
}

static rkv_status rkv_check_lru(const rkv_tree *t, uint64_t members)
{
    uint64_t n = 0;
    for (uint32_t b = 0; b < RKV_LRU_BUCKETS; b++) {
        uint64_t last = 0;
        uint32_t prev = RKV_NIL;
        int bit = (int)((t->lru_nonempty[b >> 6] >> (b & 63)) & 1);
        if (bit != (t->lru_head[b] != RKV_NIL))
            return CORRUPT("LRU bucket %u: non-empty bit %d, head %u", b, bit,
                           t->lru_head[b]);
        if (t->policy == RKV_EVICT_LRU && b > 0 && b != RKV_ENDED_BUCKET &&
            t->lru_head[b] != RKV_NIL)
            return CORRUPT("LRU bucket %u is used under the LRU policy", b);
        for (uint32_t y = t->lru_head[b]; y != RKV_NIL; y = t->nodes[y].lru_next) {
            if (++n > members)
                return CORRUPT("LRU lists longer than the %llu evictable leaves",
                               (unsigned long long)members);
            const rkv_tnode *x = &t->nodes[y];
            if (!rkv_tree_in_lru(x))
                return CORRUPT("node %u is listed in the LRU but is not an "
                               "unlocked leaf", y);
            if (rkv_lru_bucket(t, y) != b)
                return CORRUPT("node %u is in LRU bucket %u, its priority says "
                               "%u", y, b, rkv_lru_bucket(t, y));
            if (x->lru_prev != prev)
                return CORRUPT("LRU back link of node %u", y);
            if (x->last_access < last)
                return CORRUPT("LRU out of order at node %u (%llu < %llu)", y,
                               (unsigned long long)x->last_access,
                               (unsigned long long)last);
            last = x->last_access;
            prev = y;
        }
        if (t->lru_tail[b] != prev)
            return CORRUPT("LRU bucket %u tail is %u, list ends at %u", b,
                           t->lru_tail[b], prev);
    }
    if (n != members)
        return CORRUPT("LRU lists %llu nodes, %llu evictable leaves exist",
                       (unsigned long long)n, (unsigned long long)members);
    return RKV_OK;
}

static rkv_status rkv_check_slots(const rkv_tree *t, rkv_check_acc *a,
                                  uint64_t *roots, uint64_t *in_use)
{
    if (t->nodes_used == 0 || t->nodes_used > t->nodes_cap)
        return CORRUPT("%u slots used of %u", t->nodes_used, t->nodes_cap);
    uint64_t free_n = 0, lock_sum = 0;
    for (uint32_t y = t->free_head; y != RKV_NIL; y = t->nodes[y].next_sib) {
        if (y == 0 || y >= t->nodes_used || t->nodes[y].parent != RKV_NIL)
            return CORRUPT("free list holds slot %u that is not free", y);
        if (++free_n > t->nodes_used)
            return CORRUPT("cycle in the free slot list");
    }
    if (free_n != t->free_count)
        return CORRUPT("free list has %llu slots, count says %u",
                       (unsigned long long)free_n, t->free_count);
    *roots = *in_use = 0;
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        const rkv_tnode *x = &t->nodes[y];
        if (x->parent == RKV_NIL) {
            free_n--;
            continue;
        }
        ++*in_use;
        if (x->parent >= t->nodes_used)
            return CORRUPT("node %u has parent %u out of range", y, x->parent);
        if (x->last_access > t->clock || x->children_epoch > t->epoch)
            return CORRUPT("node %u stamps are ahead of the clocks", y);
        if (x->parent != 0)
            continue;
        /* a namespace root */
        ++*roots;
        lock_sum += x->lock_count;
        if (x->num_pages != 0 || x->prev_sib != RKV_NIL || x->next_sib != RKV_NIL)
            return CORRUPT("namespace root %u has pages or siblings", y);
        if (rkv_child_index_find_ns(t, x->u.ns) != y)
            return CORRUPT("namespace root %u is not found by its value", y);
        uint64_t below = 0;
        for (uint32_t c = x->first_child; c != RKV_NIL; c = t->nodes[c].next_sib) {
            if (c >= t->nodes_used || t->nodes[c].parent != y)
                return CORRUPT("child %u of root %u names another parent", c, y);
            below += t->nodes[c].lock_count;
        }
        if (x->lock_count != below + a->own[y])
            return CORRUPT("root %u lock count %u != its leases %u + "
                           "children's %llu", y, x->lock_count, a->own[y],
                           (unsigned long long)below);
        rkv_status st = rkv_check_subtree(t, y, a);
        if (st != RKV_OK)
            return st;
    }
    if (free_n != 0)
        return CORRUPT("free slots and the free list disagree");
    if (lock_sum != t->lock_total)
        return CORRUPT("roots hold %llu locks, %llu were taken",
                       (unsigned long long)lock_sum,
                       (unsigned long long)t->lock_total);
    return RKV_OK;
}

static rkv_status rkv_check_index(const rkv_tree *t, uint64_t in_use)
{
    if (t->idx_cap < 64 || (t->idx_cap & (t->idx_cap - 1)) != 0)
        return CORRUPT("index capacity %u is not a power of two >= 64",
                       t->idx_cap);
    uint64_t n = 0;
    for (uint32_t i = 0; i < t->idx_cap; i++) {
        uint32_t id = t->idx[i].id;
        if (id == RKV_NIL)
            continue;
        n++;
        if (id == 0 || id >= t->nodes_used || t->nodes[id].parent == RKV_NIL)
            return CORRUPT("index entry %u names slot %u, not a node", i, id);
        if (t->idx[i].tag != (uint32_t)(rkv_child_index_key_node(t, id) >> 32))
            return CORRUPT("index entry %u has a wrong key for node %u", i, id);
    }
    if (n != t->idx_count || n != in_use)
        return CORRUPT("index holds %llu entries, count %u, nodes %llu",
                       (unsigned long long)n, t->idx_count,
                       (unsigned long long)in_use);
    if ((uint64_t)n * 4 > (uint64_t)t->idx_cap * 3)
        return CORRUPT("index load above 3/4");
    return RKV_OK;
}

rkv_status rkv_tree_check(const rkv_tree *tree)
{
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_check: NULL tree");
    const rkv_tree *t = tree;
    rkv_check_acc a;
    memset(&a, 0, sizeof a);
    a.seen = calloc(t->owned_bytes + 1, 1);
    a.own = calloc(t->nodes_used, sizeof *a.own);
    if (a.seen == NULL || a.own == NULL) {
        free(a.seen);
        free(a.own);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_check: scratch memory");
    }
    uint64_t roots = 0, in_use = 0;
    rkv_status st = RKV_OK;
    if (t->pool->tree != t)
        st = CORRUPT("the pool names another tree as its own");
    if (st == RKV_OK && t->nodes_used > 0 && t->nodes_used <= t->nodes_cap)
        st = rkv_lease_check(t, a.own);
    if (st == RKV_OK)
        st = rkv_check_slots(t, &a, &roots, &in_use);
    uint64_t lower_nodes = 0;
    if (st == RKV_OK && t->hooks.check_off_tree != NULL)
        st = t->hooks.check_off_tree(t, &lower_nodes);
    if (st == RKV_OK && in_use != roots + a.nodes + lower_nodes)
        st = CORRUPT("%llu nodes in use, %llu reachable from %llu roots",
                     (unsigned long long)in_use, (unsigned long long)a.nodes,
                     (unsigned long long)roots);
    if (st == RKV_OK)
        st = rkv_check_index(t, in_use);
    if (st == RKV_OK)
        st = rkv_check_lru(t, a.lru_members);
    if (st == RKV_OK && t->hooks.check != NULL)
        st = t->hooks.check(t); /* the layers' own invariants */
    if (st == RKV_OK) {
        uint64_t owned = 0;
        for (size_t i = 0; i < t->owned_bytes; i++)
            owned += (uint64_t)__builtin_popcount(t->owned[i]);
        if (owned != a.pages)
            st = CORRUPT("%llu blocks marked owned, %llu pages cached",
                         (unsigned long long)owned, (unsigned long long)a.pages);
    }
    if (st == RKV_OK &&
        (a.pages != t->cached_blocks || a.evictable != t->evictable_blocks ||
         a.locked != t->locked_blocks || a.nodes != t->num_nodes ||
         roots != t->num_namespaces))
        st = CORRUPT("stats disagree: cached %llu/%llu evictable %llu/%llu "
                     "locked %llu/%llu nodes %llu/%llu namespaces %llu/%llu",
                     (unsigned long long)a.pages,
                     (unsigned long long)t->cached_blocks,
                     (unsigned long long)a.evictable,
                     (unsigned long long)t->evictable_blocks,
                     (unsigned long long)a.locked,
                     (unsigned long long)t->locked_blocks,
                     (unsigned long long)a.nodes,
                     (unsigned long long)t->num_nodes, (unsigned long long)roots,
                     (unsigned long long)t->num_namespaces);
    if (st == RKV_OK && t->mem.bytes == 0)
        st = CORRUPT("allocator reports no live bytes");
    free(a.seen);
    free(a.own);
    return st;
}

int64_t rkv_debug_live_tree_allocs_global(void)
{
    return rkv_node_mem_live_global();
}

/*
 * radix/tree_hash.c -- chained block hashes computed when first read.
 *
 * A block's chained hash (rkv_block_hash over its parent's hash, the
 * namespace and its tokens) is what KV events, tiers, the learned eviction
 * and a server's own keys read; the tree itself matches by tokens and
 * never needs one. When no layer reads hashes as pages arrive
 * (rkv_tree_hash_lazily), an insert caches its pages LAZY: their lazy bit
 * is set and pool->hash[b] holds (node id << 32 | page index) instead of
 * the hash. The first reader of a lazy block's hash (rkv_pool_block_hash,
 * rkv_pool_set_block_hash, a snapshot) computes the hashes of its node and
 * of every lazy ancestor, top down, and clears their bits; a page evicted
 * before anyone asked is never hashed at all.
 * Invariants: a device node's pages are all lazy or none; a node with its
 * hashes never hangs below a lazy one (hashing goes top down, and an
 * insert under a lazy parent is itself lazy); a lazy page's pool->hash
 * names its node and index (a split renumbers both pieces).
 */
#include "alloc/pool_internal.h"
#include "radix/tree_core.h"
#include "radix/tree_hash.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"

static int rkv_node_lazy(const rkv_tree *t, uint32_t id)
{
    const rkv_tnode *n = &t->nodes[id];
    return n->num_pages > 0 && rkv_tree_lazy(t, rkv_tnode_blocks(t, n)[0]);
}

/* A packed page's hash: of its int32 form (hashes never depend on the
 * layout). Not inlined: its buffer stays off the callers' frames. */
static __attribute__((noinline)) uint64_t
rkv_tree_packed_hash(const rkv_tree *t, uint64_t h, uint64_t ns, const uint8_t *s)
{
    int32_t page[RKV_MAX_PAGE_SIZE];
    rkv_tok_load(t, page, s, t->P);
    return rkv_block_hash(h, ns, page, t->P);
}

uint64_t rkv_tree_page_hash(const rkv_tree *t, uint64_t h, uint64_t ns,
                            const rkv_tnode *x, uint32_t i)
{
    if (t->tok_bytes == 4)
        return rkv_block_hash(h, ns, x->u.tokens + (size_t)i * t->P, t->P);
    return rkv_tree_packed_hash(t, h, ns, rkv_tok_page(t, x, i));
}

void rkv_tree_hash_node(rkv_tree *t, uint32_t id)
{
    uint64_t *hash = t->pool->hash;
    /* Up: each lazy node on the path is linked to the one below it through
     * its first page's hash slot (its lazy value is rebuilt from the node
     * anyway), so the way down needs no stack. x ends at the first node
     * with hashes, or the namespace root. */
    uint32_t below = RKV_NIL, x = id;
    while (t->nodes[x].parent != 0 && rkv_node_lazy(t, x)) {
        hash[rkv_tnode_blocks(t, &t->nodes[x])[0]] = below;
        below = x;
        x = t->nodes[x].parent;
    }
    if (below == RKV_NIL)
        return;
    uint32_t r = x;
    while (t->nodes[r].parent != 0)
        r = t->nodes[r].parent;
    const uint64_t ns = t->nodes[r].u.ns;
    uint64_t h = rkv_tree_prev_hash(t, x);
    for (uint32_t y = below; y != RKV_NIL;) {
        const rkv_tnode *n = &t->nodes[y];
        const rkv_block_id *b = rkv_tnode_blocks(t, n);
        uint32_t next = (uint32_t)hash[b[0]];
        for (uint32_t i = 0; i < n->num_pages; i++) {
            h = rkv_tree_page_hash(t, h, ns, n, i);
            hash[b[i]] = h;
            rkv_tree_clear_lazy(t, b[i]);
        }
        y = next;
    }
}

void rkv_tree_hash_all(rkv_tree *t)
{
    if (!t->lazy_live)
        return;
    for (uint32_t id = 1; id < t->nodes_used; id++) {
        const rkv_tnode *n = &t->nodes[id];
        if (n->parent != RKV_NIL && n->parent != 0 && rkv_node_lazy(t, id))
            rkv_tree_hash_node(t, id);
    }
    t->lazy_live = 0;
}

uint64_t rkv_tree_block_hash_of(const rkv_tree *t, rkv_block_id id, int all)
{
    rkv_tree *w = (rkv_tree *)t;
    if (!rkv_tree_hash_lazily(t))
        return t->pool->hash[id]; /* nothing is lazy */
    if (all && rkv_tree_owned(t, id))
        rkv_tree_hash_all(w);
    else if (rkv_tree_lazy(t, id))
        rkv_tree_hash_node(w, (uint32_t)(t->pool->hash[id] >> 32));
    return t->pool->hash[id];
}

void rkv_tree_lazy_renumber(rkv_tree *t, uint32_t id)
{
    /* with tiers nothing is lazy (and a split may cut an off-device node,
     * whose block ids mean nothing) */
    if (!rkv_tree_hash_lazily(t) || !rkv_node_lazy(t, id))
        return;
    const rkv_tnode *n = &t->nodes[id];
    const rkv_block_id *b = rkv_tnode_blocks(t, n);
    for (uint32_t i = 0; i < n->num_pages; i++)
        t->pool->hash[b[i]] = ((uint64_t)id << 32) | i;
}

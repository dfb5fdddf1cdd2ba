/*
 * residency/tier_tail.c -- the device tail that a partial demotion moves
 * down: device leaf x keeps its first k pages where they are, and its last
 * m - k pages move to a new device leaf under it, which the tier then
 * demotes whole (residency/tier.c, rkv_tier_evict_node).
 *
 * Why not rkv_tree_split. A split gives both pieces new memory and copies
 * all m pages (tokens, blocks, per-page tier data), so demoting a few pages
 * off a long leaf -- the usual case, eviction asks for what an allocation
 * lacks -- cost O(m) bytes copied per eviction, over and over as the same
 * leaf shrinks (on the conversation trace 1.3 G of the replay's 11.4 G
 * instructions, and their cache misses). Here only the tail is copied;
 * the head keeps its allocation and capacity, as a device eviction without
 * tiers (rkv_tree_drop_tail) trims a leaf in place.
 *
 * The result is the tree the split would give (same pages, parents, LRU
 * order, counters); only the ids differ: x stays the head (its generation
 * bumped, as a trimmed node's), the new id is the tail. So a node that
 * something outside the tier refers to by id as a path's end -- a pin
 * (meta[].pin_count) or a lowered pin (tn[].lpin) -- is not cut here: the
 * caller splits it as before.
 *
 * Invariants kept: x's LOWER children (they hang below x's last page) move
 * under the tail, re-keyed in the child index; queued stores of the moved
 * pages name the tail; the tail takes x's place on the device LRU (x has a
 * device child now), so the demotion that follows unlinks it from there.
 */
#include <string.h>

#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree.h"
#include "radix/tree_lru.h"
#include "radix/tree_tokens.h"
#include "residency/tier.h"

int rkv_tier_can_cut_tail(const rkv_tree *t, uint32_t xid)
{
    return t->tiers.tn[xid].lpin == 0 &&
           (t->retain.meta == NULL || t->retain.meta[xid].pin_count == 0);
}

uint32_t rkv_tier_cut_tail(rkv_tree *t, uint32_t xid, uint32_t k)
{
    const uint32_t n = t->nodes[xid].num_pages - k;
    rkv_tree_prep prep;
    if (rkv_tree_prepare(t, 1, 1, &n, &prep, "rkv_tree_evict") != RKV_OK)
        return RKV_NIL;
    rkv_tree_prep_install(t, &prep);
    uint32_t nid = rkv_tree_slot_take(t);
    rkv_tnode *x = &t->nodes[xid], *y = &t->nodes[nid];

    y->u.tokens = prep.data[0];
    y->cap_pages = y->num_pages = n;
    memcpy(y->u.tok8, rkv_tok_page(t, x, k), (size_t)n * t->page_bytes);
    memcpy(rkv_tnode_blocks(t, y), rkv_tnode_blocks(t, x) + k, (size_t)n * sizeof(rkv_block_id));
    memcpy(rkv_tnode_tpages(t, y), rkv_tnode_tpages(t, x) + k,
           (size_t)n * sizeof(rkv_page_residency));
    x->num_pages = k;
    rkv_tnode_bump_gen(x); /* trimmed: its end moved */

    /* the tail below x, on the device, in x's place on the LRU */
    rkv_lru_unlink(t, xid);
    y->parent = xid;
    x->first_child = nid;
    y->last_access = x->last_access;
    if (t->retain.meta != NULL)
        t->retain.meta[nid] = t->retain.meta[xid];
    x->children_epoch = ++t->epoch;
    y->children_epoch = ++t->epoch;
    rkv_child_index_insert(t, rkv_child_index_key_node(t, nid), nid);
    t->num_nodes++;
    t->splits++;
    rkv_lru_push_tail(t, nid);

    /* x's lower children hang below its last page: the tail's now */
    rkv_node_residency *tx = &t->tiers.tn[xid], *ty = &t->tiers.tn[nid];
    ty->hits = tx->hits;
    ty->lchild = tx->lchild;
    tx->lchild = RKV_NIL;
    for (uint32_t c = ty->lchild; c != RKV_NIL; c = t->nodes[c].next_sib) {
        rkv_tnode *cx = &t->nodes[c];
        rkv_child_index_remove(t, rkv_child_index_key_stored(t, xid, cx), c);
        cx->parent = nid;
        rkv_child_index_insert(t, rkv_child_index_key_stored(t, nid, cx), c);
    }

    /* queued stores of the moved pages */
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t q = 0; q < tr->qlen; q++) {
        rkv_queued_store *op = &tr->q[(tr->qhead + q) % tr->qcap];
        if (op->block != RKV_NIL && op->node == xid && op->page >= k) {
            op->node = nid;
            op->page -= k;
        }
    }
    return nid;
}

/*
 * residency/tier_prefetch.c -- rkv_tree_prefetch: the disk part of a
 * path's lower continuation moves up to the host (disk -> host, store to
 * store), so that a later rkv_tree_load of it reads host memory instead of
 * the disk. The scheduler calls it for a request when it is queued (the
 * HiCache prefetch of L3 into L2 while the request waits).
 *
 * A node moves whole (a node's pages share one medium): its host slots
 * are taken first, each disk record copied into its host slot (verified
 * as it leaves the disk), and only when every page has arrived do the
 * disk slots go and the node stop being DISK. Nodes move top-down, so the
 * host part of the path stays prefix-closed ("a LOWER host node never
 * hangs under a DISK node"). Taking host slots may push the host's
 * frontier down to the disk and make the disk LRU drop pages; the node
 * moving and its LOWER parent are kept off both LRUs meanwhile
 * (tier->rising: rkv_host_lru_place skips them), so neither is written
 * down or dropped under the move. A node that cannot move (no host slot
 * can be made, a failed copy) stays on the disk as it was and ends the
 * prefetch; a record that fails verification leaves the tree with
 * everything below it, as on a load.
 *
 * Synchronous, like the tier's other store-to-store moves (host -> disk
 * write-back): the caller's clock decides when the bytes count as
 * arrived (sched/sched_tier.c models the disk's time).
 */
#include <string.h>

#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree_lru.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"
#include "residency/tier.h"

/* Undoes a move of node y that took slots h[0..k): the host slots go back,
 * y and its parent return to their LRUs. */
static void rkv_tier_rise_abort(rkv_tree *t, uint32_t y, const uint32_t *h,
                                uint32_t k)
{
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t i = 0; i < k; i++)
        rkv_tier_free_slot(t, 0, h[i]);
    uint32_t p = tr->rising[1];
    tr->rising[0] = tr->rising[1] = RKV_NIL;
    rkv_host_lru_place(t, y);
    if (p != RKV_NIL)
        rkv_host_lru_place(t, p);
}

/* Moves DISK node y (its parent on the device or a LOWER host node) to
 * the host. 1: moved; 0: it stays on the disk (or left the tree:
 * corrupt). */
static int rkv_tier_rise(rkv_tree *t, uint32_t y)
{
    rkv_tier *tr = t->tiers.tier;
    uint32_t m = t->nodes[y].num_pages, p = t->nodes[y].parent;
    size_t hb = (size_t)m * sizeof(uint32_t);
    uint32_t *h = rkv_node_mem_alloc(&t->mem, hb);
    if (h == NULL)
        return 0;
    rkv_host_lru_unlink(t, y);
    tr->rising[0] = y;
    tr->rising[1] = RKV_NIL;
    if (l_is_lower(t, p)) {
        rkv_host_lru_unlink(t, p);
        tr->rising[1] = p;
    }
    uint64_t ns = rkv_tier_node_ns(t, y);
    for (uint32_t i = 0; i < m; i++) {
        if (!rkv_tier_take_slot(t, 0, &h[i])) {
            tr->st.stores_skipped++;
            rkv_tier_rise_abort(t, y, h, i);
            rkv_node_mem_free(&t->mem, h, hb);
            return 0;
        }
        /* the pages in place: making room never touches y's own */
        const rkv_tnode *x = &t->nodes[y];
        const rkv_page_residency *tp = rkv_tnode_tpages(t, x);
        rkv_status st = rkv_store_copy_slot(tr->host, h[i], tr->disk, tp[i].slot,
                                            rkv_tier_page_hash(t, x, i), ns);
        if (st != RKV_OK) {
            tr->st.failed_stores++;
            rkv_tier_rise_abort(t, y, h, i + 1);
            rkv_node_mem_free(&t->mem, h, hb);
            if (st == RKV_ERR_CORRUPT) { /* that copy was the last one */
                tr->st.corrupt_blocks++;
                rkv_tier_drop_lower_from(t, y, i, 1);
            }
            return 0;
        }
    }
    /* every page arrived: the disk copies go, y is a host node */
    rkv_lowered_pin_acct(t, y, 0);
    rkv_page_residency *tp = rkv_tnode_tpages(t, &t->nodes[y]);
    for (uint32_t i = 0; i < m; i++) {
        rkv_tier_ev_host(t, y, i, 0);
        rkv_tier_free_slot(t, 1, tp[i].slot);
        tp[i].slot = h[i];
    }
    t->tiers.tn[y].flags &= (uint8_t)~RKV_TN_DISK;
    for (uint32_t i = 0; i < m; i++)
        rkv_tier_ev_host(t, y, i, 1);
    rkv_lowered_pin_acct(t, y, 1);
    tr->st.stores_blocks[RKV_MEDIUM_HOST] += m;
    tr->st.stores_bytes[RKV_MEDIUM_HOST] += (uint64_t)m * tr->block_bytes;
    rkv_node_mem_free(&t->mem, h, hb);
    tr->rising[0] = tr->rising[1] = RKV_NIL;
    /* y: the host frontier when its children are all on disk; its parent
     * has a host child now, so it stays off the host LRU */
    rkv_host_lru_place(t, y);
    rkv_lowered_pin_enforce(t, y);
    return 1;
}

/* The path top..last was just announced as used: it becomes the newest
 * (a child is never newer than its parent), so the host LRU writes the
 * pages brought up for it down last. last is the only host-LRU node of
 * the lower part (every node above it has a host child). */
static void rkv_tier_prefetch_touch(rkv_tree *t, uint32_t top, uint32_t last)
{
    rkv_tree_touch(t, top);
    uint64_t c = t->nodes[top].last_access;
    rkv_host_lru_unlink(t, last);
    for (uint32_t y = last; y != top; y = t->nodes[y].parent)
        t->nodes[y].last_access = c;
    rkv_host_lru_place(t, last);
}

rkv_status rkv_tree_prefetch(rkv_tree *tree, rkv_namespace ns,
                             const int32_t *tokens, size_t n, uint32_t max_pages,
                             uint32_t *pages_out)
{
    static const char fn[] = "rkv_tree_prefetch";
    if (pages_out != NULL)
        *pages_out = 0;
    if (tree == NULL || pages_out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : "pages_out");
    if (n > 0 && tokens == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tokens", fn);
    rkv_tree *t = tree;
    if (n / t->P >= RKV_NIL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: n=%zu too large", fn, n);
    rkv_tier *tr = t->tiers.tier;
    if (tr == NULL || tr->disk == NULL)
        return RKV_OK; /* no disk below a host: nothing to bring up */
    const uint32_t P = t->P, npages = (uint32_t)(n / P);
    uint32_t root = rkv_child_index_find_ns(t, ns);
    if (root == RKV_NIL)
        return RKV_OK;
    rkv_walk w;
    rkv_tree_walk(t, root, 0, tokens, npages, NULL, NULL, NULL, &w);
    if (w.partial != RKV_NIL)
        return RKV_OK;
    uint32_t cur = w.node, d = w.pages, moved = 0, last = RKV_NIL;
    while (d < npages) {
        const int32_t *q = tokens + (size_t)d * P;
        uint32_t c = rkv_child_index_find(t, cur, q);
        if (c == RKV_NIL || !l_is_lower(t, c))
            break;
        const rkv_tnode *x = &t->nodes[c];
        uint32_t m = x->num_pages < npages - d ? x->num_pages : npages - d;
        uint32_t k = rkv_tok_pages_equal(t, x, q, m);
        if (l_is_disk(t, c)) {
            /* whole nodes, while they fit in max_pages */
            if (x->num_pages > max_pages - moved)
                break;
            uint32_t np = x->num_pages;
            if (!rkv_tier_rise(t, c))
                break;
            moved += np;
            last = c;
        }
        d += k;
        if (k < t->nodes[c].num_pages)
            break;
        cur = c;
    }
    if (last != RKV_NIL)
        rkv_tier_prefetch_touch(t, w.node, last);
    *pages_out = moved;
    return RKV_OK;
}

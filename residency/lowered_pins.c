/*
 * residency/lowered_pins.c -- pins that live on in the lower tiers:
 * a pin that device pressure would revoke is LOWERED instead when a lower
 * tier is attached (and drop_pinned is off): it gives its lease back, so
 * its pages become ordinary evictable device pages and are demoted like
 * any other, but the pin itself (owner, deadline, heap entry) stays and
 * its path is counted in tn[].lpin. The lowest tier's LRU (the disk of a
 * host + disk chain, else the single lower store) does not list nodes with
 * lpin > 0, so it never drops a pinned page; the host of a chain may still
 * write them down to the disk (a demotion, not a drop).
 *
 * Why a separate count and not pin_count: pin_count <= lock_count is what
 * keeps pinned DEVICE pages out of eviction and what yield_blocks and the
 * device cap count; a lowered pin holds no lock, so every device counter
 * (locked/evictable/yield/pinned_blocks) stays exactly as it was when a
 * pin was revoked, and nothing that relies on "a LOWER node is never
 * locked" changes.
 *
 * A lowered pin ends when it expires, when its session releases it, or when
 * it is revoked (pins_revoked): its medium's pinned pages would exceed
 * max_pinned_pct of that store's capacity (checked when pages enter a
 * lower medium), or its pages leave the tree anyway (a failed copy or no
 * slot on demotion or host -> disk, a corrupt read at load, an insert that
 * diverges from its prefix inside the lower copy it replaces, or needs more
 * than RKV_INSERT_MAX_CUTS cuts: every drop of lower pages revokes the pins
 * through them first, rkv_tier_drop_lower_from). Extension works as for
 * leased pins. A load brings the pages back to the device and the pin
 * stays lowered (the pages are evictable there and go down pinned again).
 * So does an insert of the prefix over its lower copy (the scheduler
 * recomputed it instead of loading): rkv_tree_insert moves the pins it
 * covers whole to the new device nodes, cut where each ends
 * (rkv_lowered_pin_keep_scan), and, for pins that go on past the insert's end
 * (chunked prefill inserts chunk by chunk), detaches the lower part past
 * that end and re-hangs it under the new device pages
 * (rkv_lowered_pin_tail_plan/detach/attach), and, for lower branches that leave
 * the insert's path at a node boundary inside it (another continuation of
 * a shared prefix: not overwritten by the insert), cuts the new device
 * path there too and re-hangs the branch under it (rkv_lowered_pin_branch_scan/
 * detach, the same attach), before the rest of the lower copy is dropped. Staying lowered rather than taking a lease there keeps every
 * device counter and the device pin cap untouched, as after a load. A
 * retain of the same prefix by the same owner takes it over as a leased
 * pin (retain/pins.c).
 *
 * Counted on the device too: a lowered pin's pages on the device (loaded
 * back or inserted again) or LOADING are in neither pinned_blocks (no
 * lease: that count, the device cap and pinned_by_medium[DEVICE] keep
 * meaning "leased pins") nor a lower medium's count; tier->lpinned[DEVICE]
 * counts them (reported as pinned_lowered_on_device). rkv_lowered_pin_acct
 * charges a node with lpin > 0 to [DEVICE] or to its lower medium by its
 * flags, so every place that changes a node's class (demotion, LOWER ->
 * LOADING -> LOWER) or its lpin (rkv_lowered_pin_path) moves it; a split keeps
 * the sum (both halves carry the old lpin), LOADING -> DEVICE changes no
 * class. Such pages are evictable: evicted, they are demoted like any
 * page (rkv_tier_demote) and counted in their lower medium again; one that
 * gets no slot there (a tier full of pinned pages) revokes the pin first.
 *
 * Invariants (rkv_lowered_pin_check, from rkv_tree_check):
 *   - tn[y].lpin == lowered pins ending at y + the lpin of y's children
 *     (both child lists);
 *   - tier->lpinned[m] == pages of LOWER nodes of medium m with lpin > 0,
 *     and lpinned[m] <= lpin_cap[m] (m HOST, DISK); lpinned[DEVICE] ==
 *     pages of DEVICE and LOADING nodes with lpin > 0 (no cap);
 *   - npins_lowered == live pins without a lease.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree_lease.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"
#include "residency/tier.h"

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: lowered pins: " __VA_ARGS__)

int rkv_lowered_pin_enabled(const rkv_tree *t)
{
    const rkv_tier *tr = t->tiers.tier;
    return tr != NULL && !tr->drop_pinned && tr->lpin_cap[tr->medium] > 0;
}

void rkv_lowered_pin_path(rkv_tree *t, uint32_t node, int delta)
{
    for (uint32_t y = node; y != 0; y = t->nodes[y].parent) {
        rkv_lowered_pin_acct(t, y, 0);
        t->tiers.tn[y].lpin = (uint32_t)((int64_t)t->tiers.tn[y].lpin + delta);
        rkv_lowered_pin_acct(t, y, 1);
        if (!l_is_lower(t, y))
            continue;
        /* the lowest tier's LRU lists only unpinned nodes */
        if (rkv_tier_lru_wants(t, y))
            rkv_host_lru_place(t, y);
        else
            rkv_host_lru_unlink(t, y);
    }
}

void rkv_lowered_pin_lower(rkv_tree *t, uint32_t p)
{
    rkv_pin *e = &t->retain.pins[p];
    uint32_t slot = rkv_lease_find(t, e->lease.id);
    /* the device side exactly as rkv_pin_drop leaves it */
    for (uint32_t y = e->node; y != 0; y = t->nodes[y].parent) {
        t->retain.yield_blocks -= rkv_yield_pages(t, y);
        if (--t->retain.meta[y].pin_count == 0)
            t->retain.pinned_blocks -= t->nodes[y].num_pages;
        t->retain.yield_blocks += rkv_yield_pages(t, y);
    }
    memset(&e->lease, 0, sizeof e->lease);
    rkv_lowered_pin_path(t, e->node, +1);
    t->retain.npins_lowered++;
    t->retain.pins_demoted++;
    rkv_lease_unlock_slot(t, slot, 0);
}

void rkv_lowered_pin_revoke_through(rkv_tree *t, uint32_t id)
{
    for (uint32_t p = 0; p < t->retain.pins_used && t->tiers.tn[id].lpin > 0; p++) {
        const rkv_pin *e = &t->retain.pins[p];
        if (e->node == 0 || e->lease.id != 0)
            continue;
        for (uint32_t y = e->node; y != 0; y = t->nodes[y].parent)
            if (y == id) {
                rkv_pin_drop(t, p);
                t->retain.pins_revoked++;
                break;
            }
    }
}

void rkv_lowered_pin_enforce(rkv_tree *t, uint32_t id)
{
    if (!l_is_lower(t, id) || t->tiers.tn[id].lpin == 0)
        return;
    int m = rkv_tier_node_medium(t, id);
    if (t->tiers.tier->lpinned[m] > t->tiers.tier->lpin_cap[m])
        rkv_lowered_pin_revoke_through(t, id);
}

/* ---- a lowered prefix inserted again ---------------------------------- */

/* Where lowered pin p ends (pages from its namespace root) if its path runs
 * through LOWER node c and the insert of tokens[0..npages) -- whose device
 * walk matched d pages and stopped before c -- covers all of it (the same
 * tokens up to its end); else 0 (such a pin loses pages when c goes, so it
 * is revoked as before). */
static uint32_t rkv_lowered_pin_covered(const rkv_tree *t, uint32_t p, uint32_t c,
                                 uint32_t d, const int32_t *tokens,
                                 uint32_t npages)
{
    const rkv_pin *e = &t->retain.pins[p];
    if (e->node == 0 || e->lease.id != 0)
        return 0;
    uint32_t below = 0, y = e->node;
    for (; y != 0 && y != c; y = t->nodes[y].parent)
        below += t->nodes[y].num_pages;
    if (y != c || d + below + t->nodes[c].num_pages > npages)
        return 0;
    uint32_t end = d + below + t->nodes[c].num_pages, at = end;
    for (y = e->node;; y = t->nodes[y].parent) {
        const rkv_tnode *x = &t->nodes[y];
        at -= x->num_pages;
        if (!rkv_tok_eq(t, x->u.tok8, tokens + (size_t)at * t->P,
                        (size_t)x->num_pages * t->P))
            return 0;
        if (y == c)
            return end;
    }
}

uint32_t rkv_lowered_pin_keep_scan(const rkv_tree *t, uint32_t c, uint32_t d,
                            const int32_t *tokens, uint32_t npages,
                            uint32_t *cuts, uint32_t *ncuts, uint32_t *keep)
{
    uint32_t n = 0;
    if (t->tiers.tn[c].lpin == 0)
        return 0;
    for (uint32_t p = 0; p < t->retain.pins_used; p++) {
        uint32_t end = rkv_lowered_pin_covered(t, p, c, d, tokens, npages);
        if (end == 0)
            continue;
        uint32_t i = 0;
        while (i < *ncuts && cuts[i] < end)
            i++;
        if (end < npages && (i == *ncuts || cuts[i] != end)) {
            if (keep != NULL || *ncuts == RKV_INSERT_MAX_CUTS)
                continue; /* no node will end there: revoked */
            memmove(cuts + i + 1, cuts + i, (*ncuts - i) * sizeof *cuts);
            cuts[i] = end;
            (*ncuts)++;
        }
        if (keep != NULL) {
            keep[2 * n] = p;
            keep[2 * n + 1] = end;
        }
        n++;
    }
    return n;
}

uint32_t rkv_lowered_pin_tail_plan(const rkv_tree *t, uint32_t c, uint32_t d,
                            const int32_t *tokens, uint32_t npages,
                            uint32_t *split_k)
{
    *split_k = 0;
    if (t->tiers.tn[c].lpin == 0)
        return RKV_NIL;
    uint32_t y = c, s = d;
    for (;;) {
        const rkv_tnode *x = &t->nodes[y];
        uint32_t e = s + x->num_pages, upto = e < npages ? e : npages;
        if (!rkv_tok_eq(t, x->u.tok8, tokens + (size_t)s * t->P,
                        (size_t)(upto - s) * t->P))
            return RKV_NIL; /* diverges inside the insert: nothing to keep */
        if (e > npages) {
            /* pins through y end at its end or below: all in the tail */
            *split_k = npages - s;
            return y;
        }
        if (e == npages) {
            for (uint32_t ch = x->first_child; ch != RKV_NIL;
                 ch = t->nodes[ch].next_sib)
                if (t->tiers.tn[ch].lpin > 0)
                    return y;
            return RKV_NIL;
        }
        s = e;
        y = rkv_child_index_find(t, y, tokens + (size_t)s * t->P);
        if (y == RKV_NIL || t->tiers.tn[y].lpin == 0)
            return RKV_NIL;
    }
}

uint32_t rkv_lowered_pin_branch_scan(const rkv_tree *t, uint32_t c, uint32_t d,
                              const int32_t *tokens, uint32_t npages,
                              uint32_t *cuts, uint32_t *ncuts, uint32_t *br)
{
    uint32_t n = 0, y = c, s = d;
    if (t->tiers.tn[c].lpin == 0)
        return 0;
    for (;;) {
        const rkv_tnode *x = &t->nodes[y];
        uint32_t e = s + x->num_pages;
        if (e >= npages) /* the tail's business (rkv_lowered_pin_tail_plan) */
            break;
        if (!rkv_tok_eq(t, x->u.tok8, tokens + (size_t)s * t->P,
                        (size_t)x->num_pages * t->P))
            break; /* diverges inside y: what hangs below loses pages */
        const int32_t *next = tokens + (size_t)e * t->P;
        int branch = 0;
        for (uint32_t ch = x->first_child; ch != RKV_NIL && !branch;
             ch = t->nodes[ch].next_sib)
            branch = t->tiers.tn[ch].lpin > 0 &&
                     !rkv_tok_eq(t, t->nodes[ch].u.tok8, next, t->P);
        if (branch) {
            uint32_t i = 0;
            while (i < *ncuts && cuts[i] < e)
                i++;
            if (i < *ncuts && cuts[i] == e) {
                br[2 * n] = y;
                br[2 * n + 1] = e;
                n++;
            } else if (*ncuts < RKV_INSERT_MAX_CUTS) {
                memmove(cuts + i + 1, cuts + i, (*ncuts - i) * sizeof *cuts);
                cuts[i] = e;
                (*ncuts)++;
                br[2 * n] = y;
                br[2 * n + 1] = e;
                n++;
            } /* else no node will end there: its pins are revoked */
        }
        s = e;
        y = rkv_child_index_find(t, y, next);
        if (y == RKV_NIL || t->tiers.tn[y].lpin == 0)
            break;
    }
    return n;
}

/* Takes LOWER node id off its parent (index, sibling list, the path's
 * lpin) and parks it on `park` (so that no walk from below passes through
 * the nodes about to be dropped); pushes it on *list (by next_sib). */
static void rkv_lowered_pin_tail_take(rkv_tree *t, uint32_t id, uint32_t park,
                               uint32_t *list)
{
    rkv_tnode *x = &t->nodes[id];
    uint32_t p = x->parent;
    rkv_lowered_pin_path(t, p, -(int)t->tiers.tn[id].lpin);
    rkv_child_index_remove(t, rkv_child_index_key_stored(t, p, x), id);
    rkv_tier_unlink_sib(t, id);
    t->nodes[p].children_epoch = ++t->epoch;
    x->parent = park;
    x->next_sib = *list;
    *list = id;
}

uint32_t rkv_lowered_pin_tail_detach(rkv_tree *t, uint32_t y, int whole,
                              uint32_t park)
{
    uint32_t list = RKV_NIL;
    if (whole) {
        rkv_lowered_pin_tail_take(t, y, park, &list);
        return list;
    }
    for (uint32_t ch = t->nodes[y].first_child, next; ch != RKV_NIL; ch = next) {
        next = t->nodes[ch].next_sib;
        if (t->tiers.tn[ch].lpin > 0)
            rkv_lowered_pin_tail_take(t, ch, park, &list);
    }
    return list;
}

uint32_t rkv_lowered_pin_branch_detach(rkv_tree *t, uint32_t y,
                                const int32_t *on_path, uint32_t park)
{
    uint32_t list = RKV_NIL;
    for (uint32_t ch = t->nodes[y].first_child, next; ch != RKV_NIL; ch = next) {
        next = t->nodes[ch].next_sib;
        if (t->tiers.tn[ch].lpin > 0 &&
            !rkv_tok_eq(t, t->nodes[ch].u.tok8, on_path, t->P))
            rkv_lowered_pin_tail_take(t, ch, park, &list);
    }
    return list;
}

void rkv_lowered_pin_tail_attach(rkv_tree *t, uint32_t list, uint32_t parent)
{
    for (uint32_t id = list, next; id != RKV_NIL; id = next) {
        rkv_tnode *x = &t->nodes[id];
        next = x->next_sib;
        rkv_tier_link_sib(t, parent, id); /* on tn[parent].lchild */
        rkv_child_index_insert(t, rkv_child_index_key_stored(t, parent, x), id);
        rkv_lowered_pin_path(t, parent, (int)t->tiers.tn[id].lpin);
    }
    t->nodes[parent].children_epoch = ++t->epoch;
}

void rkv_lowered_pin_stats(const rkv_tree *t, rkv_retention_stats *out)
{
    const rkv_tier *tr = t->tiers.tier;
    if (tr == NULL)
        return;
    for (int m = RKV_MEDIUM_HOST; m < RKV_MEDIUM_COUNT; m++) {
        out->pinned_by_medium[m] = tr->lpinned[m];
        out->pin_cap_by_medium[m] = tr->lpin_cap[m];
    }
    out->pinned_lowered_on_device = tr->lpinned[RKV_MEDIUM_DEVICE];
}

rkv_status rkv_lowered_pin_check(const rkv_tree *t, const uint32_t *lown)
{
    if (t->tiers.tn == NULL)
        return t->retain.npins_lowered == 0 ? RKV_OK
                                     : CORRUPT("%u without lower tiers",
                                               t->retain.npins_lowered);
    uint64_t *below = calloc(t->nodes_used, sizeof *below);
    if (below == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_check: scratch memory");
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        uint32_t p = t->nodes[y].parent;
        if (p != RKV_NIL && p != 0)
            below[p] += t->tiers.tn[y].lpin;
    }
    rkv_status st = RKV_OK;
    uint64_t pages[RKV_MEDIUM_COUNT] = {0, 0, 0};
    for (uint32_t y = 1; y < t->nodes_used && st == RKV_OK; y++) {
        const rkv_tnode *x = &t->nodes[y];
        uint64_t mine = lown != NULL ? lown[y] : 0;
        if (x->parent == RKV_NIL) {
            if (t->tiers.tn[y].lpin != 0)
                st = CORRUPT("free slot %u has lpin %u", y, t->tiers.tn[y].lpin);
            continue;
        }
        if (t->tiers.tn[y].lpin != mine + below[y]) {
            st = CORRUPT("node %u lpin %u != its lowered pins %llu + children's "
                         "%llu", y, t->tiers.tn[y].lpin, (unsigned long long)mine,
                         (unsigned long long)below[y]);
            break;
        }
        if (!l_is_lower(t, y) && t->tiers.tn[y].lpin > 0)
            pages[RKV_MEDIUM_DEVICE] += x->num_pages;
        if (l_is_lower(t, y) && t->tiers.tn[y].lpin > 0) {
            pages[rkv_tier_node_medium(t, y)] += x->num_pages;
            if (rkv_tier_is_lowest(t, y) && t->nodes[y].lru_prev != RKV_NIL)
                st = CORRUPT("pinned node %u is on the lowest tier's LRU", y);
        }
    }
    for (int m = 0; m < RKV_MEDIUM_COUNT && st == RKV_OK; m++) {
        if (pages[m] != t->tiers.tier->lpinned[m])
            st = CORRUPT("medium %d: %llu pages under lowered pins, %llu counted", m,
                         (unsigned long long)pages[m],
                         (unsigned long long)t->tiers.tier->lpinned[m]);
        else if (m != RKV_MEDIUM_DEVICE && pages[m] > t->tiers.tier->lpin_cap[m])
            st = CORRUPT("medium %d: %llu pinned pages exceed the cap %llu", m,
                         (unsigned long long)pages[m],
                         (unsigned long long)t->tiers.tier->lpin_cap[m]);
    }
    free(below);
    return st;
}

/* ---- the core's insert hooks --------------------------------------------------- */

void rkv_lowered_pin_insert_plan(rkv_tree *t, uint32_t parent, uint32_t d,
                                 const int32_t *tokens, uint32_t *npages,
                                 rkv_insert_plan *p)
{
    p->keep = NULL;
    p->nkeep = p->nbr = 0;
    p->tails = RKV_NIL;
    uint32_t c = rkv_child_index_find(t, parent, tokens + (size_t)d * t->P);
    if (c == RKV_NIL)
        return;
    if (t->tiers.tn[c].flags & RKV_TN_LOADING) {
        *npages = d; /* its pages arrive by the load */
        return;
    }
    p->conflict = c;
    uint32_t n = *npages;
    p->nkeep = rkv_lowered_pin_keep_scan(t, c, d, tokens, n, p->cuts,
                                         &p->ncuts, NULL);
    if (p->nkeep > 0) {
        /* scratch: the pins' old nodes are freed before the new ones exist.
         * Without it the insert still succeeds, and the pins are revoked
         * (counted) as they were before pins survived a re-insert. */
        p->keep = rkv_node_mem_alloc(&t->mem,
                                     (size_t)p->nkeep * 2 * sizeof *p->keep);
        if (p->keep == NULL)
            p->nkeep = p->ncuts = 0;
        else
            (void)rkv_lowered_pin_keep_scan(t, c, d, tokens, n, p->cuts,
                                            &p->ncuts, p->keep);
    }
    p->tail = rkv_lowered_pin_tail_plan(t, c, d, tokens, n, &p->tail_k);
    p->nbr = rkv_lowered_pin_branch_scan(t, c, d, tokens, n, p->cuts,
                                         &p->ncuts, p->br);
}

void rkv_lowered_pin_insert_abort(rkv_tree *t, rkv_insert_plan *p)
{
    rkv_node_mem_free(&t->mem, p->keep, (size_t)p->nkeep * 2 * sizeof *p->keep);
    p->keep = NULL;
}

void rkv_lowered_pin_insert_detach(rkv_tree *t, rkv_insert_plan *p,
                                   const int32_t *tokens, void *head,
                                   void *tail)
{
    uint32_t park = t->nodes[p->conflict].parent;
    if (p->tail_k > 0) {
        uint32_t h = rkv_tree_split(t, p->tail, p->tail_k, head, tail);
        if (p->tail == p->conflict)
            p->conflict = h;
    }
    if (p->tail != RKV_NIL)
        p->tails = rkv_lowered_pin_tail_detach(t, p->tail, p->tail_k > 0, park);
    for (uint32_t i = 0; i < p->nbr; i++) /* br[2i] is no tail node */
        p->br[2 * i] = rkv_lowered_pin_branch_detach(
            t, p->br[2 * i], tokens + (size_t)p->br[2 * i + 1] * t->P, park);
    /* off the LOWER path first (uncounted there, and parked on the device
     * node above it), so dropping it does not revoke them */
    for (uint32_t i = 0; i < p->nkeep; i++) {
        rkv_pin *e = &t->retain.pins[p->keep[2 * i]];
        rkv_lowered_pin_path(t, e->node, -1);
        e->node = t->nodes[p->conflict].parent;
    }
    (void)rkv_tier_insert_conflict(t, p->conflict);
}

void rkv_lowered_pin_insert_attach(rkv_tree *t, rkv_insert_plan *p,
                                   const uint32_t *piece, uint32_t node)
{
    for (uint32_t i = 0; i < p->nkeep; i++) {
        uint32_t k = 0;
        while (k < p->ncuts && p->cuts[k] != p->keep[2 * i + 1])
            k++;
        t->retain.pins[p->keep[2 * i]].node = piece[k];
        rkv_lowered_pin_path(t, piece[k], +1);
    }
    if (p->tails != RKV_NIL)
        rkv_lowered_pin_tail_attach(t, p->tails, node);
    for (uint32_t i = 0; i < p->nbr; i++) {
        uint32_t k = 0;
        while (p->cuts[k] != p->br[2 * i + 1]) /* a cut ends there */
            k++;
        if (p->br[2 * i] != RKV_NIL)
            rkv_lowered_pin_tail_attach(t, p->br[2 * i], piece[k]);
    }
    rkv_lowered_pin_insert_abort(t, p); /* frees the scratch */
}

/* ---- what retention calls of the tiers (retain/retain.h) ------------------------ */

static int rkv_lowered_pin_node_is_lower(const rkv_tree *t, uint32_t id)
{
    return l_is_lower(t, id);
}

static void rkv_lowered_pin_relist(rkv_tree *t, uint32_t id, int rejoin)
{
    if (rejoin)
        rkv_host_lru_place(t, id);
    else
        rkv_host_lru_unlink(t, id);
}

const rkv_pin_tier_ops rkv_lowered_pin_ops = {
    .can_lower = rkv_lowered_pin_enabled,
    .lower = rkv_lowered_pin_lower,
    .path = rkv_lowered_pin_path,
    .node_is_lower = rkv_lowered_pin_node_is_lower,
    .relist = rkv_lowered_pin_relist,
    .check = rkv_lowered_pin_check,
    .stats = rkv_lowered_pin_stats,
};

/*
 * residency/tier.c -- residency of pages below the device inside the radix
 * tree: attach, device eviction that demotes, the host tier's
 * LRU, the store queue, poll, stats and check. Loads, match_tiers and
 * store_prefix: residency/tier_load.c. Stores (bytes, slots): tier/.
 *
 * Layer: above the tree core (radix/), events/ and retain/; below the
 * facade (treeapi/). Attaching tiers registers the core's residency hooks
 * (rkv_tier_hooks_set: victim handling = demotion, new leaf, split, sibling
 * heads, off-tree check, snapshot, inserts over lower nodes); detaching
 * clears them, so a tree without tiers runs the core's own paths.
 *
 * Design. Read before writing it: SGLang's HiCache design
 * (docs/advanced_features/hicache_design.md), TensorRT-LLM's KV cache
 * docs (docs/source/features/kvcache.md) and vLLM's v1/kv_offload/.
 *   Taken: from HiCache and TensorRT-LLM, ONE radix tree whose nodes record
 *   where their KV lives (device, host), evicted device pages written to
 *   the host and kept in the tree, write-back / write-through / selective
 *   write-through (HiCache's policies, "selective" = copy once hit k
 *   times), loads that allocate device blocks first and complete later;
 *   from vLLM's offloading connector, stores bounded per step and a
 *   completion poll that reports finished transfers (its get_finished);
 *   from TensorRT-LLM, demotion of an evicted block instead of a drop and
 *   "offload only what is worth it" (its secondary-pool priority gate is
 *   our selective policy).
 *   Different: (1) residency is recorded per NODE for the device (a node is
 *   DEVICE, LOADING or LOWER) and per PAGE for the host slot, and lower
 *   nodes hang on a SEPARATE child list (tn[].lchild) of a device node, so
 *   every device-only algorithm (walk, LRU, locks, pins, events, check) sees
 *   exactly the device tree it saw before and pays one predictable branch
 *   when no tier is attached; HiCache keeps host/device state per node in
 *   one child map. (2) Demotion moves the whole victim node (it cannot
 *   split without allocating, and eviction must not allocate): a device
 *   eviction may free more blocks than asked; they go to the host, nothing
 *   is lost. (3) Under write-back the tiers are EXCLUSIVE: a completed load
 *   frees the host copy (demotion writes it again), so device + host hold
 *   device + host capacity of distinct pages -- this is what lets a 1M
 *   device + 9M host cache hit like one 10M cache. Write-through and
 *   selective keep the host copy (inclusive), as HiCache does. (4) Stores
 *   made by demotion run at once and SYNCHRONOUSLY on every pool (the
 *   device block must be free when the eviction returns), as do host ->
 *   disk write-backs and disk -> host moves (store to store); queued stores
 *   (write-through, selective, swap-out) and loads run in
 *   rkv_tree_tier_poll. On a host pool they complete in that poll
 *   (memcpy / pread). On a CUDA pool they are ASYNCHRONOUS
 *   (residency/tier_copy.c): a poll queues them on a stream and records an
 *   event, a later poll that finds the event complete finishes them
 *   (stores into a disk-only tier and loads whose disk pages find no
 *   pinned staging stay synchronous). A demotion that finds a page's
 *   store still queued runs that store first, or, in flight, waits for
 *   its event. (5) Lower tiers: a host store, a
 *   disk store directly below the device (tr->host names whichever is
 *   first, tr->medium which), or a host with a disk below it (tr->disk):
 *   the chain device -> host -> disk, as HiCache's L1/L2/L3 and Dynamo
 *   KVBM's G1/G2/G3. Disk residency is per NODE (RKV_TN_DISK on a LOWER
 *   node: its tpage slots are disk slots), so a lower path is host pages
 *   then disk pages and the host part is prefix-closed like the device
 *   part. The host evicts its FRONTIER (LOWER host nodes with no host
 *   child) oldest first (lowest priority first under RKV_EVICT_PRIORITY:
 *   point (7)), and writes each such node to the disk as a whole
 *   (its own write-back; a page that cannot be written -- no slot the
 *   disk LRU can free, a failed copy -- and everything after it leave the
 *   tree); only the lowest tier's LRU (disk leaves, or the single store's
 *   leaves) drops pages, tail first, never a page with cached pages under
 *   it (again by priority first under RKV_EVICT_PRIORITY). Unlike HiCache, the disk copy is exclusive: a load from the disk
 *   frees it under every policy (device pages' copies are host copies, so
 *   "already on disk" never arises when the host writes back); a page
 *   promoted from the disk goes down through the host again. (6) Pins
 *   (residency/lowered_pins.c): a pin holds a lease, and locked
 *   pages are never demoted, so while device memory allows a pin keeps
 *   its pages on the device. Under device pressure rkv_tree_alloc_blocks
 *   takes pins in the old order (earliest deadline first, only pins
 *   nothing else locks) but, with a tier attached and drop_pinned off,
 *   LOWERS them instead of revoking: the lease goes (so every device
 *   counter -- locked/evictable/yield/pinned_blocks -- moves exactly as on
 *   a revocation, and "a LOWER node is never locked" still holds) while
 *   the pin entry stays and its path counts it in tn[].lpin. The pages are
 *   then demoted like any other; the lowest tier's LRU does not list nodes
 *   with lpin > 0, so it never drops them (the host of a chain may still
 *   write them down to the disk). Pinned lower pages are counted per
 *   medium (tier->lpinned, adjusted wherever a node's flags, pages or lpin
 *   change: demotion, host -> disk, LOADING and back, revocation) and
 *   capped at max_pinned_pct of each store; pins through a node that
 *   would pass its medium's cap, or whose pages leave the tree (failed
 *   copy, corrupt read, an insert conflict that diverges from the pinned
 *   prefix: rkv_tier_drop_lower_from) are revoked first; an insert along
 *   it moves the pin to the new device copy, still lowered, and keeps its
 *   lower part past the insert's end and lower branches that leave the
 *   insert's path at a node boundary (rkv_tree_insert). This was preferred to locked LOWER nodes (a pin that
 *   keeps its lease below the device), which would have made every lock
 *   user (tree_lease.c, yield_blocks, the device LRU, loads) learn LOWER
 *   nodes. drop_pinned = 1 keeps the old behaviour: pressure revokes.
 *   (7) Priorities: a page keeps its node's meta[].prio in every
 *   medium (demotion, loads and host -> disk keep the node's id; a split
 *   copies the entry), and under RKV_EVICT_PRIORITY each lower LRU is
 *   ordered as the device's: one oldest-first list per priority (0..100)
 *   and a bit mask of the non-empty ones, so the host's frontier and the
 *   lowest tier's leaves go lowest priority first, least recently used
 *   among equals; the victim is found in O(1) (first set bit), a node is
 *   placed by a walk from both ends of its bucket (the usual places, a new
 *   tail or a parent whose last child left, are near one end). Otherwise every node
 *   is in bucket 0: under lru and learned the tiers keep plain LRU, their
 *   order before priorities reached them (the learned classes are trained
 *   on device reuse; using them below the device is not measured). The
 *   links are the
 *   node's lru_prev/lru_next (a LOWER node is never on a device list), so a
 *   node stays 64 bytes; the tier holds 2 x 101 head/tail pairs.
 *   (8) Token ids: a LOWER node keeps them in the tree's layout (3 or 4
 *   bytes, radix/tree_tokens.h) like any node, and every tier file reads
 *   them through its accessors; what leaves the tree -- a record's chain,
 *   an event -- takes int32 ids (rkv_tier_page_ids), and a page's hash
 *   is rkv_tree_page_hash's, so records and the disk format do not depend
 *   on the layout.
 *
 * Invariants (rkv_tier_check verifies them):
 *   - device nodes (flags 0) and LOADING nodes hang on their parent's
 *     first_child list, whose nodes are all device/LOADING unless the
 *     parent is LOWER; LOWER nodes hang on tn[parent].lchild of a device
 *     parent, or on first_child of a LOWER parent: the device part of any
 *     path is a prefix (device residency is prefix-closed);
 *   - every page of a LOWER node has a lower slot and its chained hash in
 *     rkv_page_residency; LOWER nodes are never locked and own no device block;
 *   - a LOADING node is locked (by the load's lease) and owns device blocks
 *     whose bytes arrive at poll;
 *   - every host slot in use is owned by exactly one page (lower page, a
 *     device page's copy, or a queued store's page); used == host_used;
 *     every disk slot by exactly one page of a DISK node; used == disk_used;
 *   - DISK only on LOWER/LOADING nodes of a host + disk chain; a LOWER host
 *     node never hangs under a DISK node;
 *   - the host LRU lists exactly the LOWER host nodes the host may evict
 *     (leaves; with a disk below, nodes with no host child), the disk LRU
 *     exactly the DISK leaves, each node in its bucket (rkv_lower_lru_bucket),
 *     each bucket oldest first, a bucket's mask bit set iff it is
 *     non-empty; the lowest tier's LRU
 *     lists no node a lowered pin passes through (lpin > 0; the counters:
 *     rkv_lowered_pin_check).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree.h"
#include "radix/tree_hash.h"
#include "radix/tree_lru.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"
#include "residency/tier.h"

/* ---- small helpers --------------------------------------------------------- */

uint64_t rkv_tier_node_ns(const rkv_tree *t, uint32_t id)
{
    while (t->nodes[id].parent != 0)
        id = t->nodes[id].parent;
    return t->nodes[id].u.ns;
}

uint32_t *rkv_tier_sib_head(rkv_tree *t, uint32_t parent, uint32_t child)
{
    if ((t->tiers.tn[child].flags & RKV_TN_LOWER) &&
        !(t->tiers.tn[parent].flags & RKV_TN_LOWER))
        return &t->tiers.tn[parent].lchild;
    return &t->nodes[parent].first_child;
}

void rkv_tier_unlink_sib(rkv_tree *t, uint32_t id)
{
    rkv_tnode *x = &t->nodes[id];
    if (x->prev_sib != RKV_NIL)
        t->nodes[x->prev_sib].next_sib = x->next_sib;
    else
        *rkv_tier_sib_head(t, x->parent, id) = x->next_sib;
    if (x->next_sib != RKV_NIL)
        t->nodes[x->next_sib].prev_sib = x->prev_sib;
    x->prev_sib = x->next_sib = RKV_NIL;
}

/* Links id (flags already set) first on the list of parent it belongs to. */
void rkv_tier_link_sib(rkv_tree *t, uint32_t parent, uint32_t id)
{
    rkv_tnode *x = &t->nodes[id];
    uint32_t *head = rkv_tier_sib_head(t, parent, id);
    x->parent = parent;
    x->prev_sib = RKV_NIL;
    x->next_sib = *head;
    if (*head != RKV_NIL)
        t->nodes[*head].prev_sib = id;
    *head = id;
}

uint64_t rkv_tier_page_hash(const rkv_tree *t, const rkv_tnode *x, uint32_t i)
{
    const rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    return (uint64_t)tp[i].hlo | ((uint64_t)tp[i].hhi << 32);
}

static void rkv_tier_set_hash(rkv_page_residency *tp, uint64_t h)
{
    tp->hlo = (uint32_t)h;
    tp->hhi = (uint32_t)(h >> 32);
}

/* Page i of node x as int32 ids (what records and events take):
 * the node's own memory under 4-byte ids, else unpacked into buf (P ids). */
static const int32_t *rkv_tier_page_ids(const rkv_tree *t, const rkv_tnode *x,
                                        uint32_t i, int32_t *buf)
{
    if (t->tok_bytes == 4)
        return x->u.tokens + (size_t)i * t->P;
    rkv_tok_load(t, buf, rkv_tok_page(t, x, i), t->P);
    return buf;
}

/* Hash of the page before id's first page. */
uint64_t rkv_tier_prev_hash(const rkv_tree *t, uint32_t parent)
{
    const rkv_tnode *p = &t->nodes[parent];
    if (p->parent == 0)
        return RKV_HASH_ROOT;
    if (t->tiers.tn[parent].flags != 0)
        return rkv_tier_page_hash(t, p, p->num_pages - 1);
    return t->pool->hash[rkv_tnode_blocks(t, p)[p->num_pages - 1]];
}

void rkv_tier_set_chain(rkv_tree *t, rkv_store *s, uint32_t slot, uint32_t id,
                        uint32_t i)
{
    if (rkv_store_page_tokens(s) != t->P)
        return;
    const rkv_tnode *x = &t->nodes[id];
    uint64_t prev;
    if (i == 0)
        prev = rkv_tier_prev_hash(t, x->parent);
    else if (t->tiers.tn[id].flags != 0)
        prev = rkv_tier_page_hash(t, x, i - 1);
    else
        prev = t->pool->hash[rkv_tnode_blocks(t, x)[i - 1]];
    int32_t buf[RKV_MAX_PAGE_SIZE]; /* records keep int32 ids */
    rkv_store_set_chain(s, slot, prev, rkv_tier_page_ids(t, x, i, buf), t->P);
}

/* KV event for page i of node id entering (stored) or leaving `medium`. */
static void rkv_tier_ev_at(rkv_tree *t, uint32_t id, uint32_t i, int stored,
                           int medium)
{
    if (RKV_LIKELY(t->events->cap == 0))
        return;
    const rkv_tnode *x = &t->nodes[id];
    uint64_t ns = rkv_tier_node_ns(t, id);
    uint64_t h = rkv_tier_page_hash(t, x, i);
    uint64_t ph = 0;
    if (stored)
        ph = i > 0 ? rkv_tier_page_hash(t, x, i - 1)
                   : rkv_tier_prev_hash(t, x->parent);
    int32_t buf[RKV_MAX_PAGE_SIZE]; /* events carry int32 ids */
    rkv_ev_medium(t, stored ? RKV_EVENT_BLOCK_STORED : RKV_EVENT_BLOCK_REMOVED,
                  medium, ns, ph, &h,
                  stored ? rkv_tier_page_ids(t, x, i, buf) : NULL, 1);
}

/* The same in the node's own lower medium (host, or disk for a disk node). */
void rkv_tier_ev_host(rkv_tree *t, uint32_t id, uint32_t i, int stored)
{
    rkv_tier_ev_at(t, id, i, stored, rkv_tier_node_medium(t, id));
}

/* ---- the host and disk LRUs over LOWER frontier nodes ------------------- */

/* A LOWER node is on the LRU of its medium (a DISK node on the disk LRU,
 * any other on the host LRU), in its bucket (rkv_lower_lru_bucket); its DISK
 * flag and its priority never change while listed. */
static int rkv_host_lru_listed(const rkv_tree *t, uint32_t id)
{
    return t->tiers.tier->lru_head[l_is_disk(t, id)][rkv_lower_lru_bucket(t, id)] == id ||
           t->nodes[id].lru_prev != RKV_NIL;
}

void rkv_host_lru_clear(rkv_tier *tr)
{
    for (int d = 0; d < 2; d++) {
        for (uint32_t b = 0; b < RKV_TLRU_BUCKETS; b++)
            tr->lru_head[d][b] = tr->lru_tail[d][b] = RKV_NIL;
        tr->lru_nonempty[d][0] = tr->lru_nonempty[d][1] = 0;
    }
}

uint32_t rkv_host_lru_first(const rkv_tier *tr, int disk)
{
    const uint64_t *ne = tr->lru_nonempty[disk];
    if (ne[0] != 0)
        return tr->lru_head[disk][__builtin_ctzll(ne[0])];
    if (ne[1] != 0)
        return tr->lru_head[disk][64 + __builtin_ctzll(ne[1])];
    return RKV_NIL;
}

/* Keeps bucket b's bit of lru_nonempty[d] equal to "list [d][b] is
 * non-empty" after a link or an unlink. */
static void rkv_host_lru_mark(rkv_tier *tr, int d, uint32_t b)
{
    uint64_t bit = (uint64_t)1 << (b & 63);
    if (tr->lru_head[d][b] != RKV_NIL)
        tr->lru_nonempty[d][b >> 6] |= bit;
    else
        tr->lru_nonempty[d][b >> 6] &= ~bit;
}

/* Whether LOWER node id belongs on its LRU: the lowest tier evicts leaves
 * (no child at all); with a disk below it, the host evicts its frontier: a
 * host node with no host child (its children, if any, are on disk). */
int rkv_tier_lru_wants(const rkv_tree *t, uint32_t id)
{
    const rkv_tnode *x = &t->nodes[id];
    if (!l_is_lower(t, id))
        return 0;
    /* the lowest tier never drops a pinned page (drop_pinned: pins are
     * never lowered, so lpin stays 0) */
    if (t->tiers.tn[id].lpin > 0 && rkv_tier_is_lowest(t, id))
        return 0;
    if (t->tiers.tier->disk == NULL || l_is_disk(t, id))
        return x->first_child == RKV_NIL;
    for (uint32_t c = x->first_child; c != RKV_NIL; c = t->nodes[c].next_sib)
        if (!l_is_disk(t, c))
            return 0;
    return 1;
}

void rkv_host_lru_unlink(rkv_tree *t, uint32_t id)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tnode *x = &t->nodes[id];
    if (!rkv_host_lru_listed(t, id))
        return;
    int d = l_is_disk(t, id);
    uint32_t b = rkv_lower_lru_bucket(t, id);
    if (x->lru_prev != RKV_NIL)
        t->nodes[x->lru_prev].lru_next = x->lru_next;
    else
        tr->lru_head[d][b] = x->lru_next;
    if (x->lru_next != RKV_NIL)
        t->nodes[x->lru_next].lru_prev = x->lru_prev;
    else
        tr->lru_tail[d][b] = x->lru_prev;
    x->lru_prev = x->lru_next = RKV_NIL;
    rkv_host_lru_mark(tr, d, b);
}

/* Places a LOWER leaf by its last_access within its bucket: after the
 * last node no newer than it. The walk goes from both ends at once (the
 * same place either way: the bucket is sorted), so the common cases are
 * O(1): a demoted node is usually the newest, a parent that just lost its
 * last child often the oldest. */
void rkv_host_lru_place(rkv_tree *t, uint32_t id)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tnode *x = &t->nodes[id];
    if (id == tr->busy || id == tr->rising[0] || id == tr->rising[1] ||
        rkv_host_lru_listed(t, id) || !rkv_tier_lru_wants(t, id))
        return;
    int d = l_is_disk(t, id);
    uint32_t b = rkv_lower_lru_bucket(t, id);
    uint32_t *head = &tr->lru_head[d][b], *tail = &tr->lru_tail[d][b];
    uint64_t s = x->last_access;
    uint32_t after = *tail, fwd = *head;
    while (after != RKV_NIL && t->nodes[after].last_access > s) {
        /* a node newer than s exists, so fwd meets one before the end */
        if (t->nodes[fwd].last_access > s) {
            after = t->nodes[fwd].lru_prev;
            break;
        }
        fwd = t->nodes[fwd].lru_next;
        after = t->nodes[after].lru_prev;
    }
    x->lru_prev = after;
    if (after == RKV_NIL) {
        x->lru_next = *head;
        *head = id;
    } else {
        x->lru_next = t->nodes[after].lru_next;
        t->nodes[after].lru_next = id;
    }
    if (x->lru_next != RKV_NIL)
        t->nodes[x->lru_next].lru_prev = id;
    else
        *tail = id;
    rkv_host_lru_mark(tr, d, b);
}

/* ---- slots ------------------------------------------------------------------ */

void rkv_tier_free_slot(rkv_tree *t, int disk, uint32_t slot)
{
    if (disk) {
        (void)rkv_store_slot_free(t->tiers.tier->disk, slot);
        t->tiers.tier->disk_used--;
    } else {
        (void)rkv_store_slot_free(t->tiers.tier->host, slot);
        t->tiers.tier->host_used--;
    }
}

/* Removes a LOWER node whose pages are gone (num_pages 0 or all slots
 * freed by the caller) and that has no child. free_root: an emptied
 * unlocked namespace root goes too. */
static void rkv_tier_remove_lower(rkv_tree *t, uint32_t id, int free_root)
{
    rkv_tnode *x = &t->nodes[id];
    uint32_t p = x->parent;
    rkv_host_lru_unlink(t, id);
    rkv_child_index_remove(t, rkv_child_index_key_stored(t, p, x), id);
    rkv_tier_unlink_sib(t, id);
    rkv_node_mem_free(&t->mem, x->u.tokens, rkv_tree_data_bytes(t, x->cap_pages));
    rkv_tree_slot_free(t, id);
    t->tiers.tier->lower_nodes--;
    rkv_tnode *px = &t->nodes[p];
    px->children_epoch = ++t->epoch;
    if (t->tiers.tn[p].flags & RKV_TN_LOWER) {
        rkv_host_lru_place(t, p); /* a leaf now, or a host frontier */
    } else if (free_root && px->parent == 0 && px->first_child == RKV_NIL &&
               t->tiers.tn[p].lchild == RKV_NIL && px->lock_count == 0) {
        rkv_tree_free_root(t, p);
    }
}

/* Drops pages from..num_pages-1 of a LOWER node and everything under it
 * (all LOWER); from == 0 removes the node. Counts host evictions. */
void rkv_tier_drop_lower_from(rkv_tree *t, uint32_t id, uint32_t from,
                              int free_root)
{
    rkv_tier *tr = t->tiers.tier;
    /* pins through the pages that go are revoked first (their pages leave
     * the tree: a failed copy, a corrupt read, an insert conflict -- whose
     * covered pins rkv_tree_insert moved off first), so every node dropped
     * below has lpin 0 */
    if (t->tiers.tn[id].lpin > 0) {
        if (from < t->nodes[id].num_pages)
            rkv_lowered_pin_revoke_through(t, id);
        else
            for (uint32_t c = t->nodes[id].first_child; c != RKV_NIL;
                 c = t->nodes[c].next_sib)
                rkv_lowered_pin_revoke_through(t, c);
    }
    /* the subtree first, a leaf at a time */
    while (t->nodes[id].first_child != RKV_NIL) {
        uint32_t y = t->nodes[id].first_child;
        while (t->nodes[y].first_child != RKV_NIL)
            y = t->nodes[y].first_child;
        rkv_tnode *yx = &t->nodes[y];
        rkv_page_residency *tp = rkv_tnode_tpages(t, yx);
        int yd = l_is_disk(t, y);
        for (uint32_t i = 0; i < yx->num_pages; i++) {
            rkv_tier_ev_host(t, y, i, 0);
            rkv_tier_free_slot(t, yd, tp[i].slot);
            tr->st.evictions[rkv_tier_node_medium(t, y)]++;
        }
        yx->num_pages = 0;
        rkv_tier_remove_lower(t, y, 0);
    }
    rkv_tnode *x = &t->nodes[id];
    rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    for (uint32_t i = from; i < x->num_pages; i++) {
        if (tp[i].slot == RKV_NO_TSLOT)
            continue;
        rkv_tier_ev_host(t, id, i, 0);
        rkv_tier_free_slot(t, l_is_disk(t, id), tp[i].slot);
        tp[i].slot = RKV_NO_TSLOT;
        tr->st.evictions[rkv_tier_node_medium(t, id)]++;
    }
    if (from == 0) {
        x->num_pages = 0;
        rkv_tier_remove_lower(t, id, free_root);
        return;
    }
    if (from < x->num_pages) {
        x->num_pages = from;
        rkv_tnode_bump_gen(x);
    }
    rkv_host_lru_place(t, id);
}

/* Frees one slot of the LOWEST tier (the disk when disk != 0, else the
 * single lower store) by its LRU: the oldest leaf loses its tail page, and
 * the page leaves the tree. 0: nothing to take. */
static int rkv_tier_lowest_pass_slot(rkv_tree *t, int disk, uint32_t *slot);
static int rkv_tier_lowest_make_room(rkv_tree *t, int disk)
{
    uint32_t slot;
    if (!rkv_tier_lowest_pass_slot(t, disk, &slot))
        return 0;
    rkv_tier_free_slot(t, disk, slot); /* the dropped page's slot, freed */
    return 1;
}

/* rkv_tier_lowest_make_room and the slot takes after it in one step: up
 * to max tail pages of the LRU victim leave the tree, last page first, and
 * their slots pass straight to the caller in that order
 * (rkv_store_slot_recycle: the state a free and a take leave), so a slot's
 * metadata is touched once, not freed and taken again, each slot is the
 * one the free stack would have handed out, and the victim's lookup, count
 * and generation are paid once, not once a page. Returns the slots taken
 * (0: nothing to take). */
static uint32_t rkv_tier_lowest_pass_slots(rkv_tree *t, int disk, uint32_t max,
                                           uint32_t *slots)
{
    rkv_tier *tr = t->tiers.tier;
    uint32_t id = rkv_host_lru_first(tr, disk);
    if (id == RKV_NIL)
        return 0;
    rkv_tnode *x = &t->nodes[id];
    const rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    uint32_t k = x->num_pages < max ? x->num_pages : max;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t i = x->num_pages - 1 - j;
        rkv_tier_ev_host(t, id, i, 0);
        slots[j] = tp[i].slot;
        (void)rkv_store_slot_recycle(disk ? tr->disk : tr->host, tp[i].slot);
    }
    tr->st.evictions[rkv_tier_node_medium(t, id)] += k;
    x->num_pages -= k;
    if (x->num_pages == 0)
        rkv_tier_remove_lower(t, id, 1);
    else
        rkv_tnode_bump_gen(x);
    return k;
}

static int rkv_tier_lowest_pass_slot(rkv_tree *t, int disk, uint32_t *slot)
{
    return rkv_tier_lowest_pass_slots(t, disk, 1, slot) != 0;
}

/* A slot on the host (disk 0) or on the disk (disk 1: host and disk
 * attached), making room by that tier's LRU while it is full. */
int rkv_tier_take_slot(rkv_tree *t, int disk, uint32_t *slot)
{
    rkv_tier *tr = t->tiers.tier;
    for (;;) {
        if (rkv_store_slot_take(disk ? tr->disk : tr->host, slot) == RKV_OK) {
            if (disk)
                tr->disk_used++;
            else
                tr->host_used++;
            return 1;
        }
        if (disk || tr->disk == NULL) /* the lowest tier: its LRU drops a page */
            return rkv_tier_lowest_pass_slot(t, disk, slot);
        if (!rkv_tier_host_make_room(t))
            return 0;
    }
}

/* The host's own write-back: host frontier node id (every child on disk)
 * moves to the disk as a whole (a node's pages share one medium) and
 * becomes DISK; the pages that cannot be written (no disk slot to be made,
 * a failed copy) and everything after them leave the tree. */
static void rkv_tier_host_to_disk(rkv_tree *t, uint32_t id)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_host_lru_unlink(t, id);
    rkv_lowered_pin_acct(t, id, 0); /* its pinned pages move host -> disk */
    tr->busy = id; /* the disk LRU may drop its children meanwhile */
    uint64_t ns = rkv_tier_node_ns(t, id);
    uint32_t m = t->nodes[id].num_pages, j = m;
    rkv_page_residency *tp = rkv_tnode_tpages(t, &t->nodes[id]);
    for (uint32_t i = 0; i < m; i++) {
        uint32_t d;
        if (!rkv_tier_take_slot(t, 1, &d)) {
            tr->st.stores_skipped++;
            j = i;
            break;
        }
        rkv_tier_set_chain(t, tr->disk, d, id, i);
        rkv_status st = rkv_store_copy_slot(tr->disk, d, tr->host, tp[i].slot,
                                            rkv_tier_page_hash(t, &t->nodes[id], i),
                                            ns);
        if (st != RKV_OK) {
            tr->st.failed_stores++;
            rkv_tier_free_slot(t, 1, d);
            j = i;
            break;
        }
        tr->st.stores_blocks[RKV_MEDIUM_DISK]++;
        tr->st.stores_bytes[RKV_MEDIUM_DISK] += tr->block_bytes;
        rkv_store_log_add(t, RKV_NO_BLOCK, rkv_tier_page_hash(t, &t->nodes[id], i), RKV_MEDIUM_HOST, RKV_MEDIUM_DISK, 0);
        rkv_tier_ev_at(t, id, i, 1, RKV_MEDIUM_DISK);
        rkv_tier_ev_at(t, id, i, 0, RKV_MEDIUM_HOST);
        rkv_tier_free_slot(t, 0, tp[i].slot);
        tr->st.evictions[RKV_MEDIUM_HOST]++;
        tp[i].slot = d;
    }
    for (uint32_t i = j; i < m; i++) {
        rkv_tier_ev_at(t, id, i, 0, RKV_MEDIUM_HOST);
        rkv_tier_free_slot(t, 0, tp[i].slot);
        tr->st.evictions[RKV_MEDIUM_HOST]++;
        tp[i].slot = RKV_NO_TSLOT;
    }
    t->tiers.tn[id].flags |= RKV_TN_DISK;
    rkv_lowered_pin_acct(t, id, 1);
    tr->busy = RKV_NIL;
    uint32_t p = t->nodes[id].parent;
    if (j < m) {
        rkv_tier_drop_lower_from(t, id, j, 1); /* places id or its parent */
    } else {
        rkv_host_lru_place(t, id);
        rkv_lowered_pin_enforce(t, id);
    }
    if (j > 0 && l_is_lower(t, p))
        rkv_host_lru_place(t, p); /* may have lost its last host child */
}

/* Frees one host slot: by the host LRU, to the disk below (or out of the
 * tree when the host is the lowest tier). 0: nothing to take. */
int rkv_tier_host_make_room(rkv_tree *t)
{
    rkv_tier *tr = t->tiers.tier;
    if (tr->disk == NULL)
        return rkv_tier_lowest_make_room(t, 0);
    uint32_t id = rkv_host_lru_first(tr, 0);
    if (id == RKV_NIL)
        return 0;
    rkv_tier_host_to_disk(t, id);
    return 1;
}

/* ---- the store queue --------------------------------------------------------- */

/* Queues a store of device page i of node id into a new host slot.
 * 1: queued; 0: skipped (queue full, or no slot could be made). */
int rkv_tier_queue_store(rkv_tree *t, uint32_t id, uint32_t i, uint64_t ns,
                         uint64_t ticket)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tnode *x = &t->nodes[id];
    rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    if (tp[i].slot != RKV_NO_TSLOT)
        return 0;
    uint32_t slot;
    if (tr->qlen >= tr->qcap || !rkv_tier_take_slot(t, 0, &slot)) {
        tr->st.stores_skipped++;
        return 0;
    }
    rkv_block_id b = rkv_tnode_blocks(t, x)[i];
    rkv_queued_store *op = &tr->q[(tr->qhead + tr->qlen++) % tr->qcap];
    op->slot = slot;
    op->block = b;
    op->hash = t->pool->hash[b];
    op->ns = ns;
    op->ticket = ticket;
    op->batch = 0;
    op->node = id;
    op->page = i;
    tp[i].slot = slot;
    if (ticket == 0) /* swap-outs are listed by rkv_tree_store_prefix */
        rkv_store_log_add(t, b, op->hash, RKV_MEDIUM_DEVICE, tr->medium, 1);
    rkv_tier_ev_host(t, id, i, 1);
    return 1;
}

/* The page (node, index) holding slot, by a scan (only after a failed
 * queued store: rare). */
static void rkv_tier_disown_slot(rkv_tree *t, uint32_t slot)
{
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        rkv_tnode *x = &t->nodes[y];
        if (x->parent == RKV_NIL || x->parent == 0 || l_is_disk(t, y))
            continue;
        rkv_page_residency *tp = rkv_tnode_tpages(t, x);
        for (uint32_t i = 0; i < x->num_pages; i++)
            if (tp[i].slot == slot) {
                rkv_tier_ev_host(t, y, i, 0);
                tp[i].slot = RKV_NO_TSLOT;
                return;
            }
    }
}

static void rkv_tier_swap_done(rkv_tree *t, uint64_t ticket, int ok)
{
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t s = 0; s < tr->nswaps; s++) {
        rkv_tswap *w = &tr->swaps[s];
        if (w->ticket != ticket)
            continue;
        w->left--;
        if (ok)
            w->done_pages++;
        else
            w->failed = 1;
        return;
    }
}

void rkv_tier_store_done(rkv_tree *t, rkv_queued_store *op, rkv_status st)
{
    rkv_tier *tr = t->tiers.tier;
    if (st == RKV_OK && op->batch != 0) /* asynchronous: the bytes arrived */
        st = rkv_store_write_end(tr->host, op->slot, op->hash, op->ns);
    if (st == RKV_OK) {
        tr->st.stores_blocks[tr->medium]++;
        tr->st.stores_bytes[tr->medium] += tr->block_bytes;
    } else {
        tr->st.failed_stores++;
        rkv_tier_disown_slot(t, op->slot);
        rkv_tier_free_slot(t, 0, op->slot);
    }
    if (op->ticket != 0)
        rkv_tier_swap_done(t, op->ticket, st == RKV_OK);
    else if (op->batch == 0) /* an issued one left "queued" when issued */
        rkv_store_log_taken(t, op->block, op->hash);
    op->block = RKV_NIL;
}

void rkv_tier_run_op(rkv_tree *t, rkv_queued_store *op)
{
    if (op->block == RKV_NIL)
        return;
    /* a disk store below the device alone: the record carries the page's
     * chain when the hint still names the page (same block, same slot) */
    uint32_t id = op->node;
    if (rkv_store_page_tokens(t->tiers.tier->host) == t->P && id < t->nodes_used &&
        t->nodes[id].parent != RKV_NIL && t->nodes[id].parent != 0 &&
        t->tiers.tn[id].flags == 0 && op->page < t->nodes[id].num_pages &&
        rkv_tnode_blocks(t, &t->nodes[id])[op->page] == op->block &&
        rkv_tnode_tpages(t, &t->nodes[id])[op->page].slot == op->slot)
        rkv_tier_set_chain(t, t->tiers.tier->host, op->slot, id, op->page);
    rkv_tier_store_done(t, op,
                        rkv_store_write_from_pool(t->tiers.tier->host, op->slot, t->pool,
                                                  op->block, op->hash, op->ns));
}

/* A demotion met a page whose store is queued: run it now (in flight on a
 * CUDA pool: wait for it), as the device block is about to be freed. */
static void rkv_tier_run_store_of(rkv_tree *t, uint32_t slot)
{
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t k = 0; k < tr->qlen; k++) {
        rkv_queued_store *op = &tr->q[(tr->qhead + k) % tr->qcap];
        if (op->block != RKV_NIL && op->slot == slot) {
            if (op->batch != 0)
                rkv_tier_copy_wait_store(t, op);
            else
                rkv_tier_run_op(t, op);
            return;
        }
    }
}

static void rkv_tier_run_queue(rkv_tree *t)
{
    rkv_tier *tr = t->tiers.tier;
    while (tr->qlen > 0) {
        rkv_queued_store *op = &tr->q[tr->qhead];
        rkv_tier_run_op(t, op);
        tr->qhead = (tr->qhead + 1) % tr->qcap;
        tr->qlen--;
    }
    tr->qhead = 0;
}

static uint32_t rkv_tier_qlive(const rkv_tier *tr)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < tr->qlen; k++)
        n += tr->q[(tr->qhead + k) % tr->qcap].block != RKV_NIL;
    return n;
}

/* ---- insert hook --------------------------------------------------------- */

void rkv_tier_on_insert(rkv_tree *t, uint32_t id, uint64_t ns)
{
    rkv_tnode *x = &t->nodes[id];
    rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    const rkv_block_id *xb = rkv_tnode_blocks(t, x);
    for (uint32_t i = 0; i < x->num_pages; i++) {
        tp[i].slot = RKV_NO_TSLOT;
        rkv_tier_set_hash(&tp[i], t->pool->hash[xb[i]]);
    }
    if (t->tiers.tier->policy == RKV_WRITE_THROUGH)
        for (uint32_t i = 0; i < x->num_pages; i++)
            (void)rkv_tier_queue_store(t, id, i, ns, 0);
}

/* ---- split hook ---------------------------------------------------------- */

void rkv_tier_on_split(rkv_tree *t, uint32_t xid, uint32_t nid,
                       const void *old, uint32_t old_cap, uint32_t k)
{
    const rkv_page_residency *otp =
        (const rkv_page_residency *)((const char *)old + rkv_tree_tok_area(t, old_cap) +
                                     (size_t)old_cap * sizeof(rkv_block_id));
    rkv_tnode *x = &t->nodes[xid], *n = &t->nodes[nid];
    memcpy(rkv_tnode_tpages(t, n), otp, (size_t)k * sizeof *otp);
    memcpy(rkv_tnode_tpages(t, x), otp + k, (size_t)x->num_pages * sizeof *otp);
    t->tiers.tn[nid].flags = t->tiers.tn[xid].flags;
    t->tiers.tn[nid].hits = t->tiers.tn[xid].hits;
    t->tiers.tn[nid].lpin = t->tiers.tn[xid].lpin; /* the head is on every pin's path */
    t->tiers.tn[nid].lchild = RKV_NIL;
    /* queued stores of x's pages: the head's are nid's now */
    rkv_tier *tr = t->tiers.tier;
    for (uint32_t q = 0; q < tr->qlen; q++) {
        rkv_queued_store *op = &tr->q[(tr->qhead + q) % tr->qcap];
        if (op->block == RKV_NIL || op->node != xid)
            continue;
        if (op->page < k)
            op->node = nid;
        else
            op->page -= k;
    }
    if (t->tiers.tn[xid].flags & RKV_TN_LOWER) {
        t->tiers.tier->lower_nodes++;
        t->num_nodes--; /* the split counts a device node; modular */
    }
}

/* ---- insert conflict --------------------------------------------------------- */

int rkv_tier_insert_conflict(rkv_tree *t, uint32_t c)
{
    if (t->tiers.tn[c].flags & RKV_TN_LOADING)
        return 0;
    rkv_tier_drop_lower_from(t, c, 0, 0);
    return 1;
}

/* ---- device eviction: demotion --------------------------------------------- */

/* Host copy of device page i of id made now. 1: it has one. */
static int rkv_tier_store_now(rkv_tree *t, uint32_t id, uint32_t i, uint64_t ns)
{
    rkv_tier *tr = t->tiers.tier;
    uint32_t slot;
    if ((tr->qlen >= tr->qcap && rkv_tier_qlive(tr) >= tr->qcap) ||
        !rkv_tier_take_slot(t, 0, &slot)) {
        tr->st.stores_skipped++;
        return 0;
    }
    rkv_tnode *x = &t->nodes[id];
    rkv_block_id b = rkv_tnode_blocks(t, x)[i];
    rkv_tier_set_chain(t, tr->host, slot, id, i);
    rkv_status st = rkv_store_write_from_pool(tr->host, slot, t->pool, b,
                                              t->pool->hash[b], ns);
    if (st != RKV_OK) {
        tr->st.failed_stores++;
        rkv_tier_free_slot(t, 0, slot);
        return 0;
    }
    tr->st.stores_blocks[tr->medium]++;
    tr->st.stores_bytes[tr->medium] += tr->block_bytes;
    rkv_store_log_add(t, b, t->pool->hash[b], RKV_MEDIUM_DEVICE, tr->medium, 0);
    rkv_tnode_tpages(t, x)[i].slot = slot;
    rkv_tier_ev_host(t, id, i, 1);
    return 1;
}

/* Up to n host slots for pages about to be stored, as n calls of
 * rkv_tier_take_slot would make them (the same slots, the same pages
 * dropped, in the same order), but a victim's tail pages leave in one pass
 * (rkv_tier_lowest_pass_slots). Returns how many it got (fewer: nothing
 * left to take). */
static uint32_t rkv_tier_take_host_slots(rkv_tree *t, uint32_t n, uint32_t *slots)
{
    rkv_tier *tr = t->tiers.tier;
    uint32_t got = 0;
    if (tr->disk != NULL) { /* the host's room is made by moves to the disk */
        while (got < n && rkv_tier_take_slot(t, 0, &slots[got]))
            got++;
        return got;
    }
    while (got < n) {
        if (rkv_store_slot_take(tr->host, &slots[got]) == RKV_OK) {
            tr->host_used++;
            got++;
            continue;
        }
        uint32_t k = rkv_tier_lowest_pass_slots(t, 0, n - got, slots + got);
        if (k == 0)
            break;
        got += k;
    }
    return got;
}

/* Host copies of every device page of id that has none, made now in
 * chunks of RKV_STORE_BATCH: the chunk's slots taken (making room), then
 * one rkv_store_write_from_pool_n (one batched copy on a CUDA pool, on the
 * tier's stream), then each page's record. Returns the first page left
 * without a host copy (num_pages: none). */
static uint32_t rkv_tier_store_node(rkv_tree *t, uint32_t id, uint64_t ns)
{
    rkv_tier *tr = t->tiers.tier;
    const uint32_t m = t->nodes[id].num_pages;
    void *stream = rkv_tier_copy_sync_stream(t);
    const int chain = rkv_store_page_tokens(tr->host) == t->P; /* records carry tokens */
    uint32_t idx[RKV_STORE_BATCH], slots[RKV_STORE_BATCH];
    rkv_block_id blocks[RKV_STORE_BATCH];
    uint64_t hashes[RKV_STORE_BATCH];
    for (uint32_t i = 0; i < m;) {
        uint32_t c = 0, fail = m;
        const rkv_page_residency *tp0 = rkv_tnode_tpages(t, &t->nodes[id]);
        for (; i < m && c < RKV_STORE_BATCH; i++)
            if (tp0[i].slot == RKV_NO_TSLOT)
                idx[c++] = i;
        if (c > 0 && tr->qlen >= tr->qcap && rkv_tier_qlive(tr) >= tr->qcap) {
            fail = idx[0]; /* as rkv_tier_store_now: the queue is full of live stores */
            c = 0;
        } else {
            uint32_t got = rkv_tier_take_host_slots(t, c, slots);
            if (got < c) {
                fail = idx[got];
                c = got;
            }
            for (uint32_t k = 0; k < c; k++) {
                if (chain)
                    rkv_tier_set_chain(t, tr->host, slots[k], id, idx[k]);
                blocks[k] = rkv_tnode_blocks(t, &t->nodes[id])[idx[k]];
                hashes[k] = t->pool->hash[blocks[k]];
            }
        }
        if (fail < m)
            tr->st.stores_skipped++;
        uint32_t done = 0;
        rkv_status st = c == 0 ? RKV_OK
                               : rkv_store_write_from_pool_n(tr->host, c, slots, t->pool,
                                                             blocks, hashes, ns, stream,
                                                             &done);
        rkv_page_residency *tp = rkv_tnode_tpages(t, &t->nodes[id]);
        for (uint32_t k = 0; k < done; k++) {
            tr->st.stores_blocks[tr->medium]++;
            tr->st.stores_bytes[tr->medium] += tr->block_bytes;
            rkv_store_log_add(t, blocks[k], hashes[k], RKV_MEDIUM_DEVICE, tr->medium, 0);
            tp[idx[k]].slot = slots[k];
            rkv_tier_ev_host(t, id, idx[k], 1);
        }
        if (st != RKV_OK) {
            tr->st.failed_stores++;
            for (uint32_t k = done; k < c; k++)
                rkv_tier_free_slot(t, 0, slots[k]);
            return idx[done];
        }
        if (fail < m)
            return fail;
    }
    return m;
}

/* Demotes device leaf id (unlocked, no device child): its pages go to the
 * host (write-back) and it becomes LOWER; pages that cannot be stored and
 * everything after them leave the tree. Returns blocks freed. */
static uint32_t rkv_tier_demote(rkv_tree *t, uint32_t id)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_pool *pool = t->pool;
    rkv_tnode *x = &t->nodes[id];
    rkv_block_id *xb = rkv_tnode_blocks(t, x);
    rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    uint32_t m = x->num_pages, j = m, freed = 0;
    uint64_t ns = rkv_tier_node_ns(t, id);
    if (tr->qlen > 0)
        for (uint32_t i = 0; i < m; i++)
            if (tp[i].slot != RKV_NO_TSLOT)
                rkv_tier_run_store_of(t, tp[i].slot);
    for (uint32_t i = 0; i < m; i++)
        rkv_tier_set_hash(&tp[i], pool->hash[xb[i]]);
    if (tr->medium == RKV_MEDIUM_HOST) {
        j = rkv_tier_store_node(t, id, ns);
    } else {
        for (uint32_t i = 0; i < m; i++)
            if (tp[i].slot == RKV_NO_TSLOT && !rkv_tier_store_now(t, id, i, ns)) {
                j = i;
                break;
            }
    }
    /* the device copies go */
    const int events = t->events->cap != 0;
    uint64_t gone[RKV_EVENT_MAX_HASHES];
    uint32_t ngone = 0;
    for (uint32_t i = 0; i < m; i++) {
        rkv_block_id b = xb[i];
        if (RKV_UNLIKELY(events)) {
            gone[ngone++] = pool->hash[b];
            if (ngone == RKV_EVENT_MAX_HASHES) {
                rkv_ev_removed(t, ns, gone, ngone);
                ngone = 0;
            }
        }
        rkv_tree_clear_owned(t, b);
        freed += (uint32_t)rkv_pool_drop_ref(pool, b);
        xb[i] = RKV_NIL;
    }
    if (ngone > 0)
        rkv_ev_removed(t, ns, gone, ngone);
    t->cached_blocks -= m;
    t->evictable_blocks -= m;
    t->evicted_blocks += m;
    tr->st.evictions[RKV_MEDIUM_DEVICE] += m;
    rkv_lru_unlink(t, id);
    uint32_t p = x->parent;
    rkv_tier_unlink_sib(t, id); /* from the device list */
    t->num_nodes--;
    t->evicted_nodes++;
    /* x is LOWER from here (children: its former lower list) */
    rkv_lowered_pin_acct(t, id, 0); /* a lowered pin's pages leave the device */
    t->tiers.tn[id].flags = RKV_TN_LOWER;
    rkv_lowered_pin_acct(t, id, 1); /* a lowered pin's pages reach the host */
    x->first_child = t->tiers.tn[id].lchild;
    t->tiers.tn[id].lchild = RKV_NIL;
    rkv_tier_link_sib(t, p, id);
    tr->lower_nodes++;
    rkv_tnode_bump_gen(x);
    if (j < m) {
        /* failures counted where they happened; pins through the pages
         * that go are revoked there */
        rkv_tier_drop_lower_from(t, id, j, 0);
    } else {
        rkv_host_lru_place(t, id); /* a leaf, or (disk below) a host frontier */
        rkv_lowered_pin_enforce(t, id);
    }
    rkv_tnode *px = &t->nodes[p];
    px->children_epoch = ++t->epoch;
    if (px->first_child == RKV_NIL && px->lock_count == 0) {
        if (px->parent != 0)
            rkv_lru_place(t, p); /* the new device frontier */
        else if (t->tiers.tn[p].lchild == RKV_NIL)
            rkv_tree_free_root(t, p);
    }
    return freed;
}

/* The core's victim hook (its one eviction loop, radix/tree_lru.c, picks
 * the victim): demotes leaf id instead of dropping its pages. */
static uint32_t rkv_tier_evict_node(rkv_tree *t, uint32_t id, uint32_t need,
                                    uint32_t room, int *capped)
{
    uint32_t m = t->nodes[id].num_pages;
    if (need < m) {
        /* demote only the tail that is needed: cut it off (the head stays
         * on the device, in place: residency/tier_tail.c; a node pins name
         * as their end is split instead) when memory allows, else the
         * whole node goes down (more is freed than asked, nothing is lost:
         * the device would only stay partly empty for a while) */
        uint32_t pages[2] = {m - need, need};
        rkv_tree_prep prep;
        if (rkv_tier_can_cut_tail(t, id)) {
            uint32_t tail = rkv_tier_cut_tail(t, id, m - need); /* copies the tail only */
            if (tail != RKV_NIL)
                return rkv_tier_demote(t, tail);
            if (m > room) {
                *capped = 1;
                return 0;
            }
        } else if (rkv_tree_prepare(t, 1, 2, pages, &prep, "rkv_tree_evict") == RKV_OK) {
            rkv_tree_prep_install(t, &prep);
            (void)rkv_tree_split(t, id, m - need, prep.data[0], prep.data[1]);
        } else if (m > room) {
            *capped = 1; /* the caller has room for max ids only */
            return 0;
        }
    }
    return rkv_tier_demote(t, id);
}

/* The core's hooks while tiers are attached (cleared by rkv_tier_fini). */
static void rkv_tier_hooks_set(rkv_tree *t, int on)
{
    t->hooks.evict_node = on ? rkv_tier_evict_node : NULL;
    t->hooks.leaf_added = on ? rkv_tier_on_insert : NULL;
    t->hooks.split = on ? rkv_tier_on_split : NULL;
    t->hooks.sib_head = on ? rkv_tier_sib_head : NULL;
    t->hooks.check_off_tree = on ? rkv_tier_check : NULL;
    t->hooks.snapshot = on ? rkv_tier_snapshot : NULL;
    t->hooks.insert_plan = on ? rkv_lowered_pin_insert_plan : NULL;
    t->hooks.insert_abort = on ? rkv_lowered_pin_insert_abort : NULL;
    t->hooks.insert_detach = on ? rkv_lowered_pin_insert_detach : NULL;
    t->hooks.insert_attach = on ? rkv_lowered_pin_insert_attach : NULL;
    t->retain.tier_ops = on ? &rkv_lowered_pin_ops : NULL;
}

/* ---- config, attach ------------------------------------------------------- */

void rkv_tier_config_init(rkv_tier_config *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->write_policy = RKV_WRITE_BACK;
    cfg->selective_hits = 2;
    cfg->store_queue = 1024;
}

#define RKV_TIER_MAX_QUEUE (1u << 20)

void rkv_tier_fini(rkv_tree *t)
{
    rkv_tier *tr = t->tiers.tier;
    if (tr == NULL)
        return;
    rkv_tier_copy_fini(t); /* no copy may run into a slot or block freed next */
    if (tr->host != NULL)
        rkv_store_detach(tr->host, t);
    if (tr->disk != NULL)
        rkv_store_detach(tr->disk, t);
    rkv_node_mem_free(&t->mem, tr->q, (size_t)tr->qcap * sizeof *tr->q);
    rkv_node_mem_free(&t->mem, tr->jobs, (size_t)tr->jobs_cap * sizeof *tr->jobs);
    rkv_node_mem_free(&t->mem, tr->swaps, (size_t)tr->swaps_cap * sizeof *tr->swaps);
    rkv_node_mem_free(&t->mem, t->tiers.tn, (size_t)t->nodes_cap * sizeof *t->tiers.tn);
    rkv_node_mem_free(&t->mem, tr, sizeof *tr);
    t->tiers.tier = NULL;
    t->tiers.tn = NULL;
    t->tpage_bytes = 0;
    rkv_tier_hooks_set(t, 0);
}

rkv_status rkv_tree_attach_tiers(rkv_tree *tree, const rkv_tier_config *cfg)
{
    static const char fn[] = "rkv_tree_attach_tiers";
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tree", fn);
    rkv_tree *t = tree;
    if (t->cached_blocks != 0 || t->num_nodes != 0 || t->lock_total != 0 ||
        (t->tiers.tier != NULL && t->tiers.tier->lower_nodes != 0))
        return rkv_set_error(RKV_ERR_BUSY, "%s: the tree is not empty (reset "
                             "it and release every lease first)", fn);
    if (cfg == NULL || (cfg->host == NULL && cfg->disk == NULL)) {
        rkv_tier_fini(t);
        return RKV_OK;
    }
    rkv_store *low = cfg->host != NULL ? cfg->host : cfg->disk;
    rkv_store *low2 = cfg->host != NULL ? cfg->disk : NULL;
    if (low2 != NULL && (low2 == low || rkv_store_medium(low2) != RKV_MEDIUM_DISK))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: cfg->disk is not a disk "
                             "store", fn);
    if (low2 != NULL && rkv_store_block_bytes(low2) != rkv_store_block_bytes(low))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: host blocks of %zu bytes, "
                             "disk blocks of %zu", fn, rkv_store_block_bytes(low),
                             rkv_store_block_bytes(low2));
    int medium = cfg->host != NULL ? RKV_MEDIUM_HOST : RKV_MEDIUM_DISK;
    if (rkv_store_medium(low) != medium)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: cfg->%s is not a %s "
                             "store", fn, cfg->host != NULL ? "host" : "disk",
                             cfg->host != NULL ? "host" : "disk");
    rkv_store *lowest = low2 != NULL ? low2 : low;
    if (rkv_store_page_tokens(lowest) != 0 && rkv_store_page_tokens(lowest) != t->P)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: the disk store's records "
                             "carry pages of %u tokens, the tree's pages have %u "
                             "(rkv_store_config.page_tokens)", fn,
                             rkv_store_page_tokens(lowest), t->P);
    size_t bb = rkv_store_block_bytes(low);
    if (bb != 0 && bb != rkv_pool_bytes_per_block(t->pool))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: host blocks of %zu bytes, "
                             "the pool's are %zu", fn, bb,
                             rkv_pool_bytes_per_block(t->pool));
    if (bb == 0 && rkv_pool_bytes_per_block(t->pool) != 0 &&
        t->pool->kv_bytes != 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: a metadata-only host "
                             "store needs a metadata-only pool", fn);
    if (cfg->write_policy < RKV_WRITE_BACK || cfg->write_policy > RKV_WRITE_SELECTIVE)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: unknown write_policy %d",
                             fn, cfg->write_policy);
    if (cfg->write_policy == RKV_WRITE_SELECTIVE && cfg->selective_hits == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: selective_hits 0", fn);
    if (cfg->store_queue == 0 || cfg->store_queue > RKV_TIER_MAX_QUEUE)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: store_queue %u (1..%u)",
                             fn, cfg->store_queue, RKV_TIER_MAX_QUEUE);
    rkv_tier *tr = rkv_node_mem_alloc(&t->mem, sizeof *tr);
    rkv_queued_store *q = rkv_node_mem_alloc(&t->mem, (size_t)cfg->store_queue * sizeof *q);
    rkv_node_residency *tn = rkv_node_mem_alloc(&t->mem, (size_t)t->nodes_cap * sizeof *tn);
    if (tr == NULL || q == NULL || tn == NULL) {
        rkv_node_mem_free(&t->mem, tr, sizeof *tr);
        rkv_node_mem_free(&t->mem, q, (size_t)cfg->store_queue * sizeof *q);
        rkv_node_mem_free(&t->mem, tn, (size_t)t->nodes_cap * sizeof *tn);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    }
    /* attach what is not ours yet (a store of the old tiers stays ours) */
    int new1 = rkv_store_owner(low) != (const void *)t;
    rkv_status st = new1 ? rkv_store_attach(low, t) : RKV_OK;
    if (st == RKV_OK && low2 != NULL && rkv_store_owner(low2) != (const void *)t) {
        st = rkv_store_attach(low2, t);
        if (st != RKV_OK && new1)
            rkv_store_detach(low, t);
    }
    if (st != RKV_OK) {
        rkv_node_mem_free(&t->mem, tr, sizeof *tr);
        rkv_node_mem_free(&t->mem, q, (size_t)cfg->store_queue * sizeof *q);
        rkv_node_mem_free(&t->mem, tn, (size_t)t->nodes_cap * sizeof *tn);
        return st;
    }
    if (t->tiers.tier != NULL) {
        /* kept attached: handed to the new tier */
        rkv_tier *old = t->tiers.tier;
        if (old->host == low || (low2 != NULL && old->host == low2))
            old->host = NULL;
        if (old->disk == low || (low2 != NULL && old->disk == low2))
            old->disk = NULL;
    }
    rkv_tier_fini(t);
    memset(tr, 0, sizeof *tr);
    tr->host = low;
    tr->medium = medium;
    tr->disk = low2;
    rkv_host_lru_clear(tr);
    tr->busy = tr->rising[0] = tr->rising[1] = RKV_NIL;
    tr->block_bytes = bb;
    tr->policy = cfg->write_policy;
    tr->k = cfg->selective_hits;
    tr->qcap = cfg->store_queue;
    tr->q = q;
    tr->drop_pinned = cfg->drop_pinned;
    /* each lower medium's pinned pages: the tree's pin percentage of it */
    tr->lpin_cap[medium] = rkv_store_capacity_blocks(low) * t->retain.pin_pct / 100;
    if (low2 != NULL)
        tr->lpin_cap[RKV_MEDIUM_DISK] =
            rkv_store_capacity_blocks(low2) * t->retain.pin_pct / 100;
    tr->next_ticket = 1;
    for (uint32_t i = 0; i < t->nodes_cap; i++)
        tn[i] = RKV_NODE_RESIDENCY_EMPTY;
    t->tiers.tier = tr;
    t->tiers.tn = tn;
    t->tpage_bytes = sizeof(rkv_page_residency);
    rkv_tier_hooks_set(t, 1);
    rkv_tier_copy_init(t);
    rkv_tier_warm_rebuild(t);
    return RKV_OK;
}

/* ---- reset ------------------------------------------------------------------ */

void rkv_tier_drop_all(rkv_tree *t)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_tier_copy_drain(t); /* copies in flight land before their memory goes */
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        rkv_tnode *x = &t->nodes[y];
        if (x->parent == RKV_NIL || x->parent == 0)
            continue;
        rkv_page_residency *tp = rkv_tnode_tpages(t, x);
        for (uint32_t i = 0; i < x->num_pages; i++)
            if (tp[i].slot != RKV_NO_TSLOT)
                rkv_tier_free_slot(t, l_is_disk(t, y), tp[i].slot);
    }
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        rkv_tnode *x = &t->nodes[y];
        if (x->parent == RKV_NIL || !(t->tiers.tn[y].flags & RKV_TN_LOWER))
            continue;
        rkv_node_mem_free(&t->mem, x->u.tokens,
                          rkv_tree_data_bytes(t, x->cap_pages));
        x->parent = RKV_NIL; /* tree.c's drop clears the slot */
        x->num_pages = 0;
    }
    for (uint32_t y = 0; y < t->nodes_cap; y++)
        t->tiers.tn[y] = RKV_NODE_RESIDENCY_EMPTY;
    tr->lower_nodes = 0;
    memset(tr->lpinned, 0, sizeof tr->lpinned); /* pins went first */
    rkv_host_lru_clear(tr);
    tr->qhead = tr->qlen = 0;
    tr->njobs = 0;
    tr->nswaps = 0;
}

/* ---- stats ------------------------------------------------------------------ */

rkv_status rkv_tree_tier_stats(const rkv_tree *tree, rkv_tier_stats *out)
{
    if (tree == NULL || out == NULL)
        return rkv_null_arg("rkv_tree_tier_stats", tree, "tree", "out");
    memset(out, 0, sizeof *out);
    out->resident_pages[RKV_MEDIUM_DEVICE] = tree->cached_blocks;
    const rkv_tier *tr = tree->tiers.tier;
    if (tr == NULL)
        return RKV_OK;
    *out = tr->st;
    out->resident_pages[RKV_MEDIUM_DEVICE] = tree->cached_blocks;
    out->resident_pages[tr->medium] = tr->host_used;
    if (tr->disk != NULL)
        out->resident_pages[RKV_MEDIUM_DISK] = tr->disk_used;
    out->pending_stores = rkv_tier_qlive(tr);
    uint64_t pl = 0;
    for (uint32_t j = 0; j < tr->njobs; j++)
        pl += tr->jobs[j].npages;
    out->pending_loads = pl;
    return RKV_OK;
}

/* ---- poll ------------------------------------------------------------------- */

rkv_status rkv_tree_tier_poll(rkv_tree *tree, rkv_transfer_done *out,
                              uint32_t max, uint32_t *n_out)
{
    if (n_out != NULL)
        *n_out = 0;
    if (tree == NULL || n_out == NULL || (out == NULL && max > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_tier_poll: NULL "
                             "argument");
    rkv_tree *t = tree;
    rkv_tier *tr = t->tiers.tier;
    if (tr == NULL)
        return RKV_OK;
    if (tr->cp.on)
        rkv_tier_copy_poll(t); /* CUDA pool: two phases (residency/tier_copy.c) */
    else
        rkv_tier_run_queue(t);
    uint32_t n = 0;
    /* loads, oldest first, as long as there is room to report them (on a
     * CUDA pool: those whose batch completed, or that read synchronously) */
    uint32_t j = 0;
    while (j < tr->njobs && n < max) {
        int state = tr->jobs[j].state;
        if (state == RKV_TLOAD_INFLIGHT ||
            (tr->cp.on && state == RKV_TLOAD_QUEUED)) {
            j++;
            continue;
        }
        rkv_load_job job = tr->jobs[j];
        memmove(&tr->jobs[j], &tr->jobs[j + 1],
                (size_t)(tr->njobs - j - 1) * sizeof *tr->jobs);
        tr->njobs--;
        out[n++] = state == RKV_TLOAD_READY
                       ? rkv_tier_complete_load(t, &job, job.st, job.bad_node,
                                                job.bad_page)
                       : rkv_tier_finish_load(t, &job);
    }
    /* swap-outs whose stores all ran */
    uint32_t s = 0;
    while (s < tr->nswaps && n < max) {
        rkv_tswap *w = &tr->swaps[s];
        if (w->left != 0) {
            s++;
            continue;
        }
        out[n].ticket = w->ticket;
        out[n].kind = RKV_TRANSFER_SWAP_OUT;
        out[n].status = w->failed ? RKV_ERR_IO : RKV_OK;
        out[n].num_pages = w->done_pages;
        n++;
        tr->swaps[s] = tr->swaps[--tr->nswaps];
    }
    *n_out = n;
    return RKV_OK;
}

/* ---- check ------------------------------------------------------------------ */

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: tiers: " __VA_ARGS__)

static rkv_status rkv_tier_check_node(const rkv_tree *t, uint32_t y,
                                      uint8_t *seen_all[2],
                                      const uint64_t cap_all[2],
                                      uint64_t slots_all[2])
{
    const rkv_tnode *x = &t->nodes[y];
    const rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    uint8_t f = t->tiers.tn[y].flags;
    uint8_t pf = t->tiers.tn[x->parent].flags;
    int d = (f & RKV_TN_DISK) != 0;
    uint8_t *seen = seen_all[d];
    uint64_t cap = cap_all[d], *slots = &slots_all[d];
    if ((f & RKV_TN_LOWER) && (f & RKV_TN_LOADING))
        return CORRUPT("node %u is LOWER and LOADING", y);
    if (d && (t->tiers.tier->disk == NULL || !(f & (RKV_TN_LOWER | RKV_TN_LOADING))))
        return CORRUPT("node %u is DISK but not a lower node of a host + disk "
                       "chain", y);
    if ((f & RKV_TN_LOWER) && !d && (pf & RKV_TN_DISK))
        return CORRUPT("host node %u under disk node %u (the host part of a "
                       "lower path must come first)", y, x->parent);
    if (!(f & RKV_TN_LOWER) && (pf & RKV_TN_LOWER))
        return CORRUPT("device node %u under LOWER node %u (device residency "
                       "must be prefix-closed)", y, x->parent);
    if ((f & RKV_TN_LOADING) && x->lock_count == 0)
        return CORRUPT("LOADING node %u is not locked", y);
    if ((f & RKV_TN_LOWER) && (x->lock_count != 0 || t->tiers.tn[y].lchild != RKV_NIL))
        return CORRUPT("LOWER node %u is locked or has a lower list", y);
    if ((f & RKV_TN_LOWER) && (x->num_pages == 0 || x->num_pages > x->cap_pages))
        return CORRUPT("LOWER node %u has %u pages", y, x->num_pages);
    uint64_t ns = rkv_tier_node_ns(t, y);
    uint64_t h = rkv_tier_prev_hash(t, x->parent);
    for (uint32_t i = 0; i < x->num_pages; i++) {
        uint32_t s = tp[i].slot;
        if (f & RKV_TN_LOWER) {
            if (s == RKV_NO_TSLOT)
                return CORRUPT("LOWER node %u page %u has no medium", y, i);
            h = rkv_tree_page_hash(t, h, ns, x, i);
            if (rkv_tier_page_hash(t, x, i) != h)
                return CORRUPT("LOWER node %u page %u: hash does not chain", y, i);
        }
        if (s == RKV_NO_TSLOT)
            continue;
        if (s >= cap)
            return CORRUPT("node %u page %u: %s slot %u out of range", y, i,
                           d ? "disk" : "host", s);
        if (seen[s >> 3] & (1u << (s & 7)))
            return CORRUPT("%s slot %u is owned twice (node %u page %u)",
                           d ? "disk" : "host", s, y, i);
        seen[s >> 3] |= (uint8_t)(1u << (s & 7));
        ++*slots;
    }
    return RKV_OK;
}

rkv_status rkv_tier_check(const rkv_tree *t, uint64_t *lower_nodes)
{
    const rkv_tier *tr = t->tiers.tier;
    /* slots past a store's span were never handed out (tier/store.h): a
     * node owning one is corrupt, and the bitmaps stay the size of what
     * the stores hold, not of their capacity (up to 2^32 - 2 slots) */
    uint64_t cap[2] = {rkv_store_slot_span(tr->host),
                       tr->disk ? rkv_store_slot_span(tr->disk) : 0};
    uint8_t *seen[2] = {calloc(cap[0] / 8 + 1, 1), calloc(cap[1] / 8 + 1, 1)};
    if (seen[0] == NULL || seen[1] == NULL) {
        free(seen[0]);
        free(seen[1]);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_check: scratch memory");
    }
    rkv_status st = RKV_OK;
    uint64_t lower = 0, slots[2] = {0, 0}, listable[2] = {0, 0}, on_lists = 0,
             nonroot = 0;
    for (uint32_t y = 1; st == RKV_OK && y < t->nodes_used; y++) {
        const rkv_tnode *x = &t->nodes[y];
        if (x->parent == RKV_NIL) {
            if (t->tiers.tn[y].flags != 0 || t->tiers.tn[y].lchild != RKV_NIL)
                st = CORRUPT("free slot %u has tier data", y);
            continue;
        }
        /* lists of y's children */
        uint32_t heads[2] = {x->first_child, t->tiers.tn[y].lchild};
        for (int l = 0; l < 2 && st == RKV_OK; l++) {
            uint64_t steps = 0;
            for (uint32_t c = heads[l]; c != RKV_NIL; c = t->nodes[c].next_sib) {
                if (++steps > t->nodes_used) {
                    st = CORRUPT("cycle under node %u", y);
                    break;
                }
                int lowc = (t->tiers.tn[c].flags & RKV_TN_LOWER) != 0;
                int want = l == 1 || (t->tiers.tn[y].flags & RKV_TN_LOWER);
                if (t->nodes[c].parent != y || lowc != want) {
                    st = CORRUPT("node %u is on the wrong list of %u", c, y);
                    break;
                }
                on_lists++;
            }
        }
        if (st != RKV_OK || x->parent == 0)
            continue;
        nonroot++;
        if (l_is_lower(t, y)) {
            lower++;
            if (rkv_tier_lru_wants(t, y))
                listable[l_is_disk(t, y)]++;
            if (x->last_access > t->nodes[x->parent].last_access)
                st = CORRUPT("LOWER node %u used after its parent", y);
        }
        if (st == RKV_OK)
            st = rkv_tier_check_node(t, y, seen, cap, slots);
    }
    if (st == RKV_OK && on_lists != nonroot)
        st = CORRUPT("%llu nodes on child lists, %llu in use",
                     (unsigned long long)on_lists, (unsigned long long)nonroot);
    if (st == RKV_OK && lower != tr->lower_nodes)
        st = CORRUPT("%llu LOWER nodes, count says %llu",
                     (unsigned long long)lower,
                     (unsigned long long)tr->lower_nodes);
    for (int d = 0; d < 2 && st == RKV_OK; d++) {
        rkv_store *s = d ? tr->disk : tr->host;
        uint64_t used = d ? tr->disk_used : tr->host_used;
        if (s == NULL) {
            if (slots[d] != 0 || used != 0)
                st = CORRUPT("%llu disk slots owned without a disk",
                             (unsigned long long)slots[d]);
            continue;
        }
        if (slots[d] != used || slots[d] != rkv_store_used_blocks(s))
            st = CORRUPT("%llu %s slots owned by pages, tree counts %llu, "
                         "store %llu", (unsigned long long)slots[d],
                         d ? "disk" : "host", (unsigned long long)used,
                         (unsigned long long)rkv_store_used_blocks(s));
    }
    /* each lower LRU: every bucket's list in order, in its bucket, its bit
     * set iff non-empty, and all buckets together list exactly the nodes
     * that belong (counted above) */
    for (int d = 0; d < 2 && st == RKV_OK; d++) {
        uint64_t n = 0;
        for (uint32_t b = 0; b < RKV_TLRU_BUCKETS && st == RKV_OK; b++) {
            uint64_t last = 0;
            uint32_t prev = RKV_NIL;
            int bit = (int)((tr->lru_nonempty[d][b >> 6] >> (b & 63)) & 1);
            if (bit != (tr->lru_head[d][b] != RKV_NIL)) {
                st = CORRUPT("%s LRU bucket %u: bit %d, head %u",
                             d ? "disk" : "host", b, bit, tr->lru_head[d][b]);
                break;
            }
            for (uint32_t y = tr->lru_head[d][b]; y != RKV_NIL;
                 y = t->nodes[y].lru_next) {
                if (++n > listable[d]) {
                    st = CORRUPT("%s LRU longer than the %llu nodes it may list",
                                 d ? "disk" : "host",
                                 (unsigned long long)listable[d]);
                    break;
                }
                const rkv_tnode *x = &t->nodes[y];
                if (!rkv_tier_lru_wants(t, y) || l_is_disk(t, y) != d ||
                    rkv_lower_lru_bucket(t, y) != b || x->lru_prev != prev ||
                    x->last_access < last) {
                    st = CORRUPT("%s LRU bucket %u broken at node %u",
                                 d ? "disk" : "host", b, y);
                    break;
                }
                last = x->last_access;
                prev = y;
            }
            if (st == RKV_OK && tr->lru_tail[d][b] != prev)
                st = CORRUPT("%s LRU bucket %u: tail %u, last node %u",
                             d ? "disk" : "host", b, tr->lru_tail[d][b], prev);
        }
        if (st == RKV_OK && ((tr->lru_nonempty[d][1] >> (RKV_TLRU_BUCKETS - 64)) != 0))
            st = CORRUPT("%s LRU: bits set past bucket %u", d ? "disk" : "host",
                         RKV_TLRU_BUCKETS - 1);
        if (st == RKV_OK && n != listable[d])
            st = CORRUPT("%s LRU lists %llu nodes, %llu belong on it",
                         d ? "disk" : "host", (unsigned long long)n,
                         (unsigned long long)listable[d]);
    }
    if (st == RKV_OK)
        st = rkv_tier_copy_check(t);
    for (uint32_t j = 0; st == RKV_OK && j < tr->njobs; j++) {
        uint32_t y = tr->jobs[j].node;
        if (y >= t->nodes_used || !(t->tiers.tn[y].flags & RKV_TN_LOADING))
            st = CORRUPT("load %llu names node %u, which is not LOADING",
                         (unsigned long long)tr->jobs[j].ticket, y);
    }
    free(seen[0]);
    free(seen[1]);
    if (st == RKV_OK)
        *lower_nodes += lower;
    return st;
}

/* ---- snapshot ---------------------------------------------------------------- */

static uint32_t rkv_tier_first_kid(const rkv_tree *t, uint32_t y)
{
    if (t->nodes[y].first_child != RKV_NIL)
        return t->nodes[y].first_child;
    return (t->tiers.tn[y].flags & RKV_TN_LOWER) ? RKV_NIL : t->tiers.tn[y].lchild;
}

/* The node after x among its parent's children (device list, then the
 * lower list). */
static uint32_t rkv_tier_next_kid(const rkv_tree *t, uint32_t x)
{
    if (t->nodes[x].next_sib != RKV_NIL)
        return t->nodes[x].next_sib;
    uint32_t p = t->nodes[x].parent;
    if (!(t->tiers.tn[x].flags & RKV_TN_LOWER) && !(t->tiers.tn[p].flags & RKV_TN_LOWER))
        return t->tiers.tn[p].lchild;
    return RKV_NIL;
}

rkv_status rkv_tier_snapshot(const rkv_tree *t, rkv_block_entry *out,
                             size_t cap, size_t *n_out, uint64_t *seq_out)
{
    if (seq_out != NULL)
        *seq_out = t->events->next_seq - 1;
    size_t k = 0;
    for (int pass = out == NULL ? 1 : 0; pass < 2; pass++) {
        k = 0;
        for (uint32_t root = 1; root < t->nodes_used; root++) {
            if (t->nodes[root].parent != 0)
                continue;
            uint64_t ns = t->nodes[root].u.ns;
            uint32_t x = rkv_tier_first_kid(t, root);
            while (x != RKV_NIL) {
                const rkv_tnode *nx = &t->nodes[x];
                const rkv_page_residency *tp = rkv_tnode_tpages(t, nx);
                uint64_t parent = rkv_tier_prev_hash(t, nx->parent);
                int dev = t->tiers.tn[x].flags == 0;
                for (uint32_t i = 0; i < nx->num_pages; i++) {
                    uint64_t h = rkv_tier_page_hash(t, nx, i);
                    for (int m = 0; m < 2; m++) {
                        if (m == 0 ? !dev : tp[i].slot == RKV_NO_TSLOT)
                            continue;
                        if (pass == 1 && out != NULL && k < cap) {
                            out[k].ns = ns;
                            out[k].hash = h;
                            out[k].parent_hash = parent;
                            out[k].medium = m == 0 ? RKV_MEDIUM_DEVICE
                                                   : (uint32_t)rkv_tier_node_medium(t, x);
                            out[k].reserved = 0;
                        }
                        k++;
                    }
                    parent = h;
                }
                uint32_t c = rkv_tier_first_kid(t, x);
                if (c != RKV_NIL) {
                    x = c;
                    continue;
                }
                for (;;) {
                    uint32_t nk = rkv_tier_next_kid(t, x);
                    if (nk != RKV_NIL) {
                        x = nk;
                        break;
                    }
                    x = t->nodes[x].parent;
                    if (x == root) {
                        x = RKV_NIL;
                        break;
                    }
                }
            }
        }
        if (pass == 0 && k > cap) {
            *n_out = k;
            return rkv_set_error(RKV_ERR_NO_SPACE, "rkv_tree_snapshot: %zu "
                                 "entries given, %zu cached (page, medium)",
                                 cap, k);
        }
    }
    *n_out = k;
    return RKV_OK;
}

/*
 * residency/tier.h -- the tier state of a radix tree, shared by
 * residency/tier.c (attach, demotion, host LRU, store queue, poll, stats,
 * check), residency/tier_load.c (match_tiers, load, store_prefix) and
 * residency/tier_copy.c (the asynchronous copies of a CUDA pool).
 * Design and invariants: residency/tier.c.
 */
#ifndef RKV_RADIX_TREE_TIER_H
#define RKV_RADIX_TREE_TIER_H

#include "residency/tier_copy.h"
#include "radix/tree_core.h"
#include "retain/retain.h"
#include "events/kv_events.h"
#include "events/store_log.h"
#include "tier/store.h"

/* A queued store: device block -> host slot. Dead once block == RKV_NIL. */
typedef struct rkv_queued_store {
    uint32_t slot;
    rkv_block_id block;
    uint64_t hash, ns;
    uint64_t ticket;  /* swap-out ticket, or 0 */
    uint64_t batch;   /* CUDA pool: the in-flight copy batch carrying it
                         (residency/tier_copy.c), or 0 while not issued    */
    uint32_t node, page; /* where the page was queued from (kept through
                         splits): a hint for its record's chain, checked
                         against the node's block and slot before use  */
} rkv_queued_store;

/* A load in flight: the LOADING path from node up to (not including) top. */
typedef struct rkv_load_job {
    uint64_t ticket;
    uint64_t lease_id; /* the caller's lease on node */
    uint64_t ns;
    uint32_t node, top, npages;
    int kind;          /* RKV_TRANSFER_LOAD */
    /* CUDA pool (residency/tier_copy.c): where its copies are. */
    int state;         /* rkv_load_job_state                                 */
    uint64_t batch;    /* INFLIGHT: its batch                             */
    rkv_status st;     /* READY: how the copies ended                     */
    uint32_t bad_node, bad_page; /* READY failed by verification: where */
} rkv_load_job;

/* A load's copies: QUEUED (the host backend's only state: read at the
 * poll that reports it), INFLIGHT in a batch, READY (the batch completed:
 * bytes valid unless st says otherwise), SYNC (no staging memory for its
 * disk pages: read synchronously when reported). */
enum rkv_load_job_state {
    RKV_TLOAD_QUEUED = 0,
    RKV_TLOAD_INFLIGHT = 1,
    RKV_TLOAD_READY = 2,
    RKV_TLOAD_SYNC = 3
};

typedef struct rkv_tswap {
    uint64_t ticket;
    uint32_t left, done_pages;
    int failed;
} rkv_tswap;

#define RKV_TLRU_BUCKETS (RKV_PRIORITY_MAX + 1) /* at most 128 (2 words) */

typedef struct rkv_tier {
    rkv_store *host;         /* the lower store: the host tier, or the disk
                                tier when no host is attached ("host" below
                                means this store)                         */
    int medium;              /* its rkv_medium                            */
    rkv_store *disk;         /* the disk below the host, or NULL          */
    uint32_t busy;           /* node moving host -> disk (not relisted)   */
    uint32_t rising[2];      /* node moving disk -> host and its LOWER
                                parent (residency/tier_prefetch.c): not
                                relisted meanwhile, so neither leaves     */
    uint64_t disk_used;      /* disk slots this tree allocated            */
    size_t block_bytes;
    int policy;
    uint32_t k;              /* selective hits                            */
    int drop_pinned;
    /* The host [0] and disk [1] LRUs (header of residency/tier.c): one
     * list per bucket, oldest first; bucket = the node's priority under
     * RKV_EVICT_PRIORITY (so a tier evicts lowest priority first, oldest
     * among equals, as the device does), else always 0 (plain LRU: the
     * order before priorities reached the tiers). lru_nonempty[d] has bit
     * b set iff list [d][b] is non-empty: the victim is found in O(1). */
    uint32_t lru_head[2][RKV_TLRU_BUCKETS], lru_tail[2][RKV_TLRU_BUCKETS];
    uint64_t lru_nonempty[2][2];
    rkv_queued_store *q;           /* ring of qcap queued stores                */
    uint32_t qcap, qhead, qlen;
    rkv_load_job *jobs;
    uint32_t njobs, jobs_cap;
    rkv_tswap *swaps;
    uint32_t nswaps, swaps_cap;
    uint64_t next_ticket;
    uint64_t lower_nodes;
    uint64_t host_used;      /* host slots this tree allocated            */
    uint64_t lpinned[RKV_MEDIUM_COUNT]; /* pages of nodes with lpin > 0:
                                [HOST]/[DISK] LOWER ones by their medium,
                                [DEVICE] DEVICE and LOADING ones (a
                                lowered pin's pages loaded back or inserted
                                again; no lease, evictable; no cap)       */
    uint64_t lpin_cap[RKV_MEDIUM_COUNT]; /* max_pinned_pct of each lower
                                store's capacity; lpinned <= lpin_cap     */
    rkv_tier_stats st;
    rkv_tcopy cp;            /* asynchronous copies (CUDA pool)           */
} rkv_tier;

static inline int l_is_lower(const rkv_tree *t, uint32_t id)
{
    return (t->tiers.tn[id].flags & RKV_TN_LOWER) != 0;
}

/* Whether node id's slots are disk slots (a LOWER or LOADING node below
 * the host, host and disk both attached). */
static inline int l_is_disk(const rkv_tree *t, uint32_t id)
{
    return (t->tiers.tn[id].flags & RKV_TN_DISK) != 0;
}

/* The medium and store of node id's lower copies (tpage slot). */
static inline int rkv_tier_node_medium(const rkv_tree *t, uint32_t id)
{
    return l_is_disk(t, id) ? RKV_MEDIUM_DISK : t->tiers.tier->medium;
}
static inline rkv_store *rkv_tier_node_store(const rkv_tree *t, uint32_t id)
{
    return l_is_disk(t, id) ? t->tiers.tier->disk : t->tiers.tier->host;
}

/* The lower LRU list (of its medium) that LOWER node id belongs to: its
 * priority under RKV_EVICT_PRIORITY (meta[] NULL: every node has the
 * default), else 0. A node's priority changes only through rkv_set_prio,
 * which relists it, so a listed node is always on this bucket's list. */
static inline uint32_t rkv_lower_lru_bucket(const rkv_tree *t, uint32_t id)
{
    if (t->policy != RKV_EVICT_PRIORITY)
        return 0;
    return t->retain.meta != NULL ? t->retain.meta[id].prio : RKV_PRIORITY_DEFAULT;
}

/* Node id's share of tier->lpinned (its pages when a lowered pin passes
 * through it: in its medium's entry when it is LOWER, else in [DEVICE]).
 * Callers subtract it before and add it after changing id's flags, pages
 * or lpin (residency/lowered_pins.c). */
static inline void rkv_lowered_pin_acct(rkv_tree *t, uint32_t id, int add)
{
    if (t->tiers.tn[id].lpin == 0)
        return;
    uint64_t *c = &t->tiers.tier->lpinned[(t->tiers.tn[id].flags & RKV_TN_LOWER)
                                        ? rkv_tier_node_medium(t, id)
                                        : RKV_MEDIUM_DEVICE];
    if (add)
        *c += t->nodes[id].num_pages;
    else
        *c -= t->nodes[id].num_pages;
}
/* Whether LOWER node id is in the tier that drops pages (the disk of a
 * host + disk chain, else the single lower store). */
static inline int rkv_tier_is_lowest(const rkv_tree *t, uint32_t id)
{
    return t->tiers.tier->disk == NULL || l_is_disk(t, id);
}
/* After node id became LOWER in a medium (demotion, host -> disk, a failed
 * load): lowered pins through it are revoked if that medium's pinned pages
 * now exceed its cap. */
void rkv_lowered_pin_enforce(rkv_tree *t, uint32_t id);

uint64_t rkv_tier_node_ns(const rkv_tree *t, uint32_t id);
void rkv_tier_unlink_sib(rkv_tree *t, uint32_t id);
void rkv_tier_link_sib(rkv_tree *t, uint32_t parent, uint32_t id);
uint64_t rkv_tier_page_hash(const rkv_tree *t, const rkv_tnode *x, uint32_t i);
uint64_t rkv_tier_prev_hash(const rkv_tree *t, uint32_t parent);
void rkv_host_lru_unlink(rkv_tree *t, uint32_t id);
void rkv_host_lru_place(rkv_tree *t, uint32_t id);
/* The next victim of the host (disk = 0) or disk (1) LRU: the oldest node
 * of the lowest non-empty bucket, or RKV_NIL. */
uint32_t rkv_host_lru_first(const rkv_tier *tr, int disk);
/* Empties both lower LRUs (attach, reset). */
void rkv_host_lru_clear(rkv_tier *tr);
int rkv_tier_lru_wants(const rkv_tree *t, uint32_t id);
void rkv_tier_free_slot(rkv_tree *t, int disk, uint32_t slot);
void rkv_tier_ev_host(rkv_tree *t, uint32_t id, uint32_t i, int stored);
void rkv_tier_drop_lower_from(rkv_tree *t, uint32_t id, uint32_t from,
                              int free_root);
int rkv_tier_queue_store(rkv_tree *t, uint32_t id, uint32_t i, uint64_t ns,
                         uint64_t ticket);
/* Completes (or fails) a load at poll, reading its bytes now; returns its
 * report. */
rkv_transfer_done rkv_tier_finish_load(rkv_tree *t, const rkv_load_job *job);
/* The same for a load whose bytes arrived already (st == RKV_OK) or whose
 * copies failed with st (at bad_node / bad_page when verification failed:
 * RKV_ERR_CORRUPT drops that copy). */
rkv_transfer_done rkv_tier_complete_load(rkv_tree *t, const rkv_load_job *job,
                                         rkv_status st, uint32_t bad_node,
                                         uint32_t bad_page);
/* A queued store ended with st (its bytes in the slot, or failed): counts
 * it, commits or frees the slot, tells its swap-out; op is dead after. */
void rkv_tier_store_done(rkv_tree *t, rkv_queued_store *op, rkv_status st);
/* Runs queued store *op now, synchronously (it is dead afterwards; a dead
 * op is left alone). */
void rkv_tier_run_op(rkv_tree *t, rkv_queued_store *op);
/* A slot of the host (disk 0) or the disk (1), made room for by that
 * tier's LRU while full. 0: none could be made. */
int rkv_tier_take_slot(rkv_tree *t, int disk, uint32_t *slot);
/* Frees one host slot by the host LRU: to the disk below, or out of the
 * tree when the host is the lowest tier. 0: nothing to take. */
int rkv_tier_host_make_room(rkv_tree *t);
/* residency/tier_tail.c: device leaf xid (unlocked, no device child)
 * keeps its first k pages in place; the rest move to a new device leaf
 * under it, returned (the caller demotes it), or RKV_NIL when memory for
 * it could not be had (nothing changed). Only where can_cut_tail: no pin
 * or lowered pin ends at or below xid (they name it as their end). */
int rkv_tier_can_cut_tail(const rkv_tree *t, uint32_t xid);
uint32_t rkv_tier_cut_tail(rkv_tree *t, uint32_t xid, uint32_t k);
/* residency/tier_warm.c: after attach, the records of a disk store
 * reopened warm become LOWER (disk) nodes; best effort, cannot fail. */
void rkv_tier_warm_rebuild(rkv_tree *t);
/* Hands page i of node id (device or LOWER) to store s as the chain of
 * the record about to be written into slot (no-op unless s carries
 * tokens of the tree's page size). */
void rkv_tier_set_chain(rkv_tree *t, rkv_store *s, uint32_t slot, uint32_t id,
                        uint32_t i);

/* residency/tier*.c: what the core and the facade call --------------------- */
/* New device pages of node id (insert): slots cleared, write-through. */
void rkv_tier_on_insert(rkv_tree *t, uint32_t id, uint64_t ns);
/* split: copies the per-page tier data of x (old memory, cap old_cap) into
 * head (k pages) and tail, and gives n x's class. */
void rkv_tier_on_split(rkv_tree *t, uint32_t xid, uint32_t nid,
                       const void *old, uint32_t old_cap, uint32_t k);
/* The head of the sibling list that child (of parent) is on. */
uint32_t *rkv_tier_sib_head(rkv_tree *t, uint32_t parent, uint32_t child);
/* insert met a LOWER or LOADING child c where it would add a leaf: a LOWER
 * subtree is dropped (1 returned: go on), a LOADING one stops (0). */
int rkv_tier_insert_conflict(rkv_tree *t, uint32_t c);
/* Frees every lower node, slot and queued transfer (reset, destroy). */
void rkv_tier_drop_all(rkv_tree *t);
/* Verifies residency, lower links, slots, stats; adds the lower nodes to
 * *lower_nodes. */
rkv_status rkv_tier_check(const rkv_tree *t, uint64_t *lower_nodes);
void rkv_tier_fini(rkv_tree *t);
/* rkv_tree_snapshot with tiers: one entry per (page, medium); LOADING
 * pages are listed by their host copy only. */
rkv_status rkv_tier_snapshot(const rkv_tree *t, rkv_block_entry *out,
                             size_t cap, size_t *n_out, uint64_t *seq_out);

/* residency/lowered_pins.c: pins that live on in the lower tiers -------- */
/* Whether device pressure lowers pins instead of revoking them (a lower
 * tier, drop_pinned off, a non-zero cap on the first lower tier). */
int rkv_lowered_pin_enabled(const rkv_tree *t);
/* Leased pin p gives its lease back and is counted on its path in
 * tn[].lpin instead of meta[].pin_count (pins_demoted). */
void rkv_lowered_pin_lower(rkv_tree *t, uint32_t p);
/* Adds delta (+1/-1) to tn[].lpin along the path node..root, keeping the
 * per-medium counters and the lowest tier's LRU membership. */
void rkv_lowered_pin_path(rkv_tree *t, uint32_t node, int delta);
/* Revokes (pins_revoked) every lowered pin whose path passes through id. */
void rkv_lowered_pin_revoke_through(rkv_tree *t, uint32_t id);
/* An insert whose walk matched d device pages replaces LOWER node c (and
 * its subtree) with device pages for tokens[0..npages). The lowered pins
 * through c that it covers whole survive on the new device path, still
 * lowered; the new pages are cut into nodes where they end (at most
 * RKV_INSERT_MAX_CUTS cuts, so that the insert's node arrays stay in
 * rkv_tree_prep; a pin that would need one more is revoked with c).
 * keep == NULL: plans -- adds the cuts (ascending, strictly inside
 * (d, npages)) to cuts[*ncuts] and returns how many pins survive;
 * else fills keep[2i] = pin, keep[2i+1] = the page its path ends at, for
 * the same pins given the planned cuts. */
uint32_t rkv_lowered_pin_keep_scan(const rkv_tree *t, uint32_t c, uint32_t d,
                            const int32_t *tokens, uint32_t npages,
                            uint32_t *cuts, uint32_t *ncuts, uint32_t *keep);
/* The same insert covering only the start of a lowered pin's prefix: the
 * lower copy past the insert's end is kept, re-hung under the new device
 * pages, so the pin loses nothing. Plan (read-only): the LOWER node y of
 * the insert's lower path (from c, tokens equal) that reaches page npages,
 * if lowered pins continue past npages through it, else RKV_NIL;
 * *split_k > 0: y goes on past npages and must be split after split_k
 * pages (its tail is then kept whole); 0: y ends at npages and its
 * children with lowered pins are kept. */
uint32_t rkv_lowered_pin_tail_plan(const rkv_tree *t, uint32_t c, uint32_t d,
                            const int32_t *tokens, uint32_t npages,
                            uint32_t *split_k);
/* Before the lower path is dropped: detaches y itself (whole) or y's
 * children with lowered pins, parked on device node park; returns them as
 * a list linked by next_sib. */
uint32_t rkv_lowered_pin_tail_detach(rkv_tree *t, uint32_t y, int whole,
                              uint32_t park);
/* The same insert passing LOWER nodes of its lower path (from c, tokens
 * equal, ending before npages) that have children with lowered pins off
 * the insert's path (a branch that leaves it at a node boundary): those
 * branches are not overwritten, so they are kept, re-hung under the new
 * device node that ends there. Plan (read-only but for cuts): adds the
 * cut each needs to cuts (as rkv_lowered_pin_keep_scan; a branch point that
 * would need a cut past RKV_INSERT_MAX_CUTS is dropped with c, its pins
 * revoked) and fills br[2i] = y, br[2i+1] = the page y ends at (br holds
 * 2 * RKV_INSERT_MAX_CUTS); returns how many. Call it after both
 * rkv_lowered_pin_keep_scan calls (a cut it adds must not change their count). */
uint32_t rkv_lowered_pin_branch_scan(const rkv_tree *t, uint32_t c, uint32_t d,
                              const int32_t *tokens, uint32_t npages,
                              uint32_t *cuts, uint32_t *ncuts, uint32_t *br);
/* Before the lower path is dropped: detaches y's children with lowered
 * pins whose first page is not on_path's, parked on device node park;
 * returns them as a list linked by next_sib. */
uint32_t rkv_lowered_pin_branch_detach(rkv_tree *t, uint32_t y,
                                const int32_t *on_path, uint32_t park);
/* Hangs the detached list under device node parent (its last page is the
 * page before theirs: same tokens, same chained hashes). */
void rkv_lowered_pin_tail_attach(rkv_tree *t, uint32_t list, uint32_t parent);
/* Lowered pins' share of the check: lown[y] = lowered pins ending at y. */
rkv_status rkv_lowered_pin_check(const rkv_tree *t, const uint32_t *lown);
/* Fills the lower media's entries of pinned_by_medium / pin_cap_by_medium. */
void rkv_lowered_pin_stats(const rkv_tree *t, rkv_retention_stats *out);

/* The core's insert hooks (rkv_tree_hooks.insert_*): an insert over a
 * LOWER child keeps the lowered pins it covers (the scans above), the lower
 * tail past its end and the branches that leave its path. */
void rkv_lowered_pin_insert_plan(rkv_tree *t, uint32_t parent, uint32_t d,
                                 const int32_t *tokens, uint32_t *npages,
                                 rkv_insert_plan *p);
void rkv_lowered_pin_insert_abort(rkv_tree *t, rkv_insert_plan *p);
void rkv_lowered_pin_insert_detach(rkv_tree *t, rkv_insert_plan *p,
                                   const int32_t *tokens, void *head,
                                   void *tail);
void rkv_lowered_pin_insert_attach(rkv_tree *t, rkv_insert_plan *p,
                                   const uint32_t *piece, uint32_t node);

/* Retention's view of the tiers (retain/retain.h), registered in
 * t->retain.tier_ops while tiers are attached. */
extern const rkv_pin_tier_ops rkv_lowered_pin_ops;

#endif

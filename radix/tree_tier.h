/*
 * radix/tree_tier.h -- the tier state of a radix tree, shared by
 * radix/tree_tier.c (attach, demotion, host LRU, store queue, poll, stats,
 * check) and radix/tree_tier_load.c (match_tiers, load, store_prefix).
 * Design and invariants: radix/tree_tier.c.
 */
#ifndef RKV_RADIX_TREE_TIER_H
#define RKV_RADIX_TREE_TIER_H

#include "radix/tree_internal.h"
#include "radix/tree_tier_stored.h"
#include "tier/store.h"

/* A queued store: device block -> host slot. Dead once block == RKV_NIL. */
typedef struct rkv_tstore {
    uint32_t slot;
    rkv_block_id block;
    uint64_t hash, ns;
    uint64_t ticket;  /* swap-out ticket, or 0 */
} rkv_tstore;

/* A load in flight: the LOADING path from node up to (not including) top. */
typedef struct rkv_tload {
    uint64_t ticket;
    uint64_t lease_id; /* the caller's lease on node */
    uint64_t ns;
    uint32_t node, top, npages;
    int kind;          /* RKV_TRANSFER_LOAD */
} rkv_tload;

typedef struct rkv_tswap {
    uint64_t ticket;
    uint32_t left, done_pages;
    int failed;
} rkv_tswap;

typedef struct rkv_tier {
    rkv_store *host;         /* the lower store: the host tier, or the disk
                                tier when no host is attached ("host" below
                                means this store)                         */
    int medium;              /* its rkv_medium                            */
    rkv_store *disk;         /* the disk below the host, or NULL          */
    uint32_t dlru_head, dlru_tail; /* disk LRU: DISK leaves, oldest first */
    uint32_t busy;           /* node moving host -> disk (not relisted)   */
    uint64_t disk_used;      /* disk slots this tree allocated            */
    size_t block_bytes;
    int policy;
    uint32_t k;              /* selective hits                            */
    int drop_pinned;
    uint32_t lru_head, lru_tail; /* host LRU: LOWER leaves, oldest first  */
    rkv_tstore *q;           /* ring of qcap queued stores                */
    uint32_t qcap, qhead, qlen;
    rkv_tload *jobs;
    uint32_t njobs, jobs_cap;
    rkv_tswap *swaps;
    uint32_t nswaps, swaps_cap;
    uint64_t next_ticket;
    uint64_t lower_nodes;
    uint64_t host_used;      /* host slots this tree allocated            */
    rkv_tier_stats st;
} rkv_tier;

static inline int l_is_lower(const rkv_tree *t, uint32_t id)
{
    return (t->tn[id].flags & RKV_TN_LOWER) != 0;
}

/* Whether node id's slots are disk slots (a LOWER or LOADING node below
 * the host, host and disk both attached). */
static inline int l_is_disk(const rkv_tree *t, uint32_t id)
{
    return (t->tn[id].flags & RKV_TN_DISK) != 0;
}

/* The medium and store of node id's lower copies (tpage slot). */
static inline int rkv_tier_node_medium(const rkv_tree *t, uint32_t id)
{
    return l_is_disk(t, id) ? RKV_MEDIUM_DISK : t->tier->medium;
}
static inline rkv_store *rkv_tier_node_store(const rkv_tree *t, uint32_t id)
{
    return l_is_disk(t, id) ? t->tier->disk : t->tier->host;
}

uint64_t rkv_tier_node_ns(const rkv_tree *t, uint32_t id);
void rkv_tier_unlink_sib(rkv_tree *t, uint32_t id);
void rkv_tier_link_sib(rkv_tree *t, uint32_t parent, uint32_t id);
uint64_t rkv_tier_page_hash(const rkv_tree *t, const rkv_tnode *x, uint32_t i);
uint64_t rkv_tier_prev_hash(const rkv_tree *t, uint32_t parent);
void rkv_hlru_unlink(rkv_tree *t, uint32_t id);
void rkv_hlru_place(rkv_tree *t, uint32_t id);
int rkv_tier_lru_wants(const rkv_tree *t, uint32_t id);
void rkv_tier_free_slot(rkv_tree *t, int disk, uint32_t slot);
void rkv_tier_ev_host(rkv_tree *t, uint32_t id, uint32_t i, int stored);
void rkv_tier_drop_lower_from(rkv_tree *t, uint32_t id, uint32_t from,
                              int free_root);
int rkv_tier_queue_store(rkv_tree *t, uint32_t id, uint32_t i, uint64_t ns,
                         uint64_t ticket);
/* Completes (or fails) a load at poll; returns its report. */
rkv_transfer_done rkv_tier_finish_load(rkv_tree *t, const rkv_tload *job);

#endif

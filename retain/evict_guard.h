/*
 * retain/evict_guard.h -- the guard that keeps a non-LRU eviction order
 * from losing to LRU: a shadow LRU of the device pool's pages, fed by the
 * same matches and inserts, counts what plain LRU would have hit; when
 * the policy falls behind it, eviction becomes LRU (see
 * retain/evict_guard.c for the rule and why it has this shape).
 */
#ifndef RKV_RADIX_EVICT_GUARD_H
#define RKV_RADIX_EVICT_GUARD_H

#include <stdint.h>

#include "radixkv.h"

/* One shadow page: its chained hash and its place in the shadow's LRU
 * list (entry indices; RKV_GUARD_NIL ends). */
typedef struct rkv_gpage {
    uint64_t hash;
    uint32_t prev, next;
} rkv_gpage;

typedef struct rkv_guard {
    rkv_gpage *pages;     /* cap entries; free ones chained through next  */
    uint32_t *slot;       /* open addressing, slots_cap entries: page idx */
    uint32_t cap;         /* the pool's blocks: the most the shadow holds */
    uint32_t slots_cap;   /* power of two >= 2 * cap                      */
    uint32_t size, free_head, head, tail; /* head: least recently used   */
    uint32_t anchor;      /* match: the page the next deeper one goes before */
    uint64_t queried_pages, real_hit_pages, lru_hit_pages;
    uint64_t fallbacks;   /* times the policy fell behind               */
    uint64_t q_trip;      /* queried_pages when it last fell back         */
    uint64_t next_snap;   /* queried_pages of the next window snapshot    */
    uint64_t snap_q[4], snap_real[4], snap_lru[4]; /* ring, every cap/4 */
    uint32_t snap_n;      /* snapshots taken                              */
    int fallback;         /* 1: the policy lost; eviction is LRU          */
    int off;              /* tests: never falls back                      */
} rkv_guard;

struct rkv_tree;
/* Allocates the guard (RKV_ERR_NOMEM leaves nothing allocated). */
rkv_status rkv_guard_init(struct rkv_tree *t);
void rkv_guard_fini(struct rkv_tree *t);
/* Empties the shadow (rkv_tree_reset); the counts and the verdict stay. */
void rkv_guard_clear(struct rkv_tree *t);
/* A non-peek match of npages full pages of tokens in ns that hit
 * real_pages on the device: counts both caches' hits, touches the
 * shadow's, and decides. */
void rkv_guard_on_match(struct rkv_tree *t, uint64_t ns, const int32_t *tokens,
                        uint32_t npages, uint32_t real_pages);
/* An insert ended at device node `node`: its path becomes the shadow's
 * most recent pages (added when absent), then the shadow is cut to what
 * the pool can hold beside blocks held outside the tree. */
void rkv_guard_on_insert(struct rkv_tree *t, uint32_t node);
rkv_status rkv_guard_check(const struct rkv_tree *t);

/* Tests only (RKV_EVICT_LEARNED): the guard keeps counting but never falls back to
 * LRU (tests that check the learned order itself). */
void rkv_tree_debug_guard_off(rkv_tree *t);

#endif

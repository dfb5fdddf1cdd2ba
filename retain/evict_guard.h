/*
 * retain/evict_guard.h -- the guard that keeps a non-LRU eviction order
 * from losing to LRU: a shadow LRU of the device pool's pages, fed by the
 * same matches and inserts, counts what plain LRU would have hit and
 * which of its pages the device lacks; a victim of the policy whose loss
 * could pass the allowed margin is replaced by LRU's (see
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
    uint8_t *gone;        /* cap entries: 1 when the device lacks the page */
    uint32_t cap;         /* the pool's blocks: the most the shadow holds */
    uint32_t slots_cap;   /* power of two >= 2 * cap                      */
    uint32_t size, free_head, head, tail; /* head: least recently used   */
    uint32_t anchor;      /* match: the page the next deeper one goes before */
    uint64_t missing;     /* listed pages with gone set                   */
    uint64_t missing_div; /* of which the policy dropped (LRU held them)  */
    uint64_t conv, waste; /* such pages lost / not lost later (decaying)  */
    uint8_t marking;      /* what the next evicted pages are gone as      */
    uint64_t recent[256]; /* signatures of recent queries (repeats count once) */
    uint64_t queried_pages, real_hit_pages, lru_hit_pages;
    uint64_t fallbacks;   /* victims of the policy the guard overruled    */
    int64_t peak_lead;    /* best real - LRU hits since the policy ran    */
    uint64_t q_trip;      /* queried_pages when it last held the lead     */
    uint32_t trips;       /* times it held the lead                       */
    int unfaithful;       /* the shadow missed the tree's LRU in warm-up  */
    int hold;             /* 1: keeping the lead: every victim is LRU's   */
    int fallback;         /* 1: the last victim was LRU's (overruled)     */
    int off;              /* tests: never overrules                       */
} rkv_guard;

struct rkv_tree;
/* Allocates the guard (RKV_ERR_NOMEM leaves nothing allocated). */
rkv_status rkv_guard_init(struct rkv_tree *t);
void rkv_guard_fini(struct rkv_tree *t);
/* Empties the shadow (rkv_tree_reset); the counts and the verdict stay. */
void rkv_guard_clear(struct rkv_tree *t);
/* A non-peek match of npages full pages of tokens in ns that hit
 * real_pages on the device: counts both caches' hits and touches the
 * shadow's. */
void rkv_guard_on_match(struct rkv_tree *t, uint64_t ns, const int32_t *tokens,
                        uint32_t npages, uint32_t real_pages);
/* An insert ended at device node `node`: its path becomes the shadow's
 * most recent pages (added when absent), then the shadow is cut to what
 * the pool can hold beside blocks held outside the tree. */
void rkv_guard_on_insert(struct rkv_tree *t, uint32_t node);
/* Eviction dropped these device pages (chained hashes). */
void rkv_guard_on_evicted(struct rkv_tree *t, const uint64_t *hashes,
                          uint32_t n);
/* The victim eviction takes when need more blocks are wanted: the
 * policy's, or LRU's (the head of every list, lru) when taking the
 * policy's could make the hit rate fall more than the allowed margin
 * below LRU's. With tiers attached (whole leaves leave the device) the
 * victim's pages are counted gone here. */
uint32_t rkv_guard_victim(const struct rkv_tree *t, uint32_t policy,
                          uint32_t lru, uint32_t need);
rkv_status rkv_guard_check(const struct rkv_tree *t);

/* Tests only (RKV_EVICT_LEARNED): the guard keeps counting but never
 * overrules the policy (tests that check the learned order itself). */
void rkv_tree_debug_guard_off(rkv_tree *t);

#endif

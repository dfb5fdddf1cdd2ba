/*
 * tests/support/router_util.h -- the router tests' (tests/test_router*.c)
 * shorthands: a router, an event, and rkv_router_check as an assertion
 * (called after every operation).
 */
#ifndef RKV_TESTS_ROUTER_UTIL_H
#define RKV_TESTS_ROUTER_UTIL_H

#include "radixkv_router.h"

/* A router with the default config; the test fails if it cannot be made. */
rkv_router *rt_mk(void);

/* rt_mk with instances 1..n registered. */
rkv_router *rt_mk_instances(uint64_t n);

/* A router with config c; the test fails if it cannot be made. */
rkv_router *rt_mk_with(const rkv_router_config *c);

/* rt_mk_with(c) with instances 1..n registered. */
rkv_router *rt_mk_with_instances(const rkv_router_config *c, uint64_t n);

/* An event of kind with n hashes (copied from h) chained under parent, in
 * namespace 0 on the device medium, pages of page_size tokens. */
rkv_event rt_event(uint64_t seq, uint8_t kind, uint32_t page_size,
                   uint64_t parent, const uint64_t *h, uint32_t n);

/* Asserts that records a and b (of query q, named in the messages) are
 * equal bit for bit: instance, pages per medium, score, resync flag. */
void rt_same_record(const rkv_router_overlap *a, const rkv_router_overlap *b, int q);

/* Chains of pages that share prefixes (the search tests' model): page j
 * of chain b is chain 0's page j while j < share[b], chain b's own after. */
uint64_t rt_chain_hash(const uint32_t *share, uint32_t b, uint32_t j);
/* The pages chains b and c share, each of len pages. */
uint32_t rt_chain_common(const uint32_t *share, uint32_t len, uint32_t b, uint32_t c);

/* The search tests' check of one query (hashes h[0..n), namespace 0) on
 * twin routers: all[0..k) are tw[1]'s overlaps; rkv_router_route on
 * tw[0] must give what rkv_router_choose picks over them, and
 * rkv_router_route_top (room for 5) on tw[2] what choose picks over
 * tw[3]'s overlaps (written into all: room for RKV_ROUTER_MAX_INSTANCES),
 * bit for bit. */
void rt_same_choice(rkv_router *const *tw, const uint64_t *h, uint32_t n,
                    rkv_router_overlap *all, uint32_t k, int q);

/* Asserts rkv_router_check(r) (its message on failure). */
void rt_ok(const rkv_router *r);

/* rt_ok(r), then destroys r: a test's last check. */
void rt_done(rkv_router *r);

#endif

/*
 * router/route_search.h -- the router's walk over a request's chain
 * (router/route_search.c), as router/route.c (the queries and the choice)
 * uses it: every live instance's leading run of the request's pages, per
 * medium, optionally bounded to what the best score needs.
 */
#ifndef RKV_ROUTER_ROUTE_SEARCH_H
#define RKV_ROUTER_ROUTE_SEARCH_H

#include <stdint.h>

#include "router/router_internal.h"

/* What one walk over a request's chain finds, per slot. held[g]: group
 * g's live slots with at least its first page (lead[s] is set for those
 * only; dlead[s] only in groups with pages off the device); offs[g]:
 * those of them with pages off the device in their leading run (off[s]
 * counted). */
typedef struct rkv_index_scan {
    uint32_t n; /* the request's pages */
    uint64_t held[RKV_INDEX_GROUPS];
    uint64_t offs[RKV_INDEX_GROUPS];
    uint32_t lead[RKV_INDEX_SLOTS], dlead[RKV_INDEX_SLOTS];
    uint32_t off[RKV_INDEX_SLOTS][2]; /* host, disk pages in the leading run */
} rkv_index_scan;

/* Branch and bound for a query that needs only the best score's
 * instances (rkv_router_route; not a list, a softmax draw or tiers): a
 * score is pt * (wd * lead) + base, nondecreasing in the lead and the
 * base (the weights are >= 0), so the bits leaving A inside a span
 * (lo, hi] of group g score at most pt * (wd * hi) + gmax[g]. Where that
 * is below lb, a score some instance is known to reach, none of them can
 * be the best nor tie with it: their leads are left at lo + 1 (a score no
 * higher than their own) instead of being searched for. */
typedef struct rkv_index_bound {
    double pt, wd;
    double lb;                      /* some instance scores at least this   */
    double gmax[RKV_INDEX_GROUPS];  /* >= every instance's base in group g */
} rkv_index_bound;

/* Sets up the bound for a request of n pages; 0 where it does not apply
 * (see route_search.c). */
int rkv_index_bound_init(const rkv_router *r, uint32_t n, rkv_index_bound *bd);

/* Walks the chain hashes[0..n) (namespace mix nsmix) into sc; with bd,
 * only as far as the best score needs (bd->lb rises as it goes). */
void rkv_index_scan_chain(rkv_router *r, rkv_index_bound *bd, uint64_t nsmix,
                          const uint64_t *hashes, uint32_t n, rkv_index_scan *sc);

#endif

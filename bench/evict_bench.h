/*
 * bench/evict_bench.h -- what the files of the evict_bench program share
 * (internal to it; no other bench includes this):
 *   evict_pages.c    the page sequence of a workload, the page-level models
 *                    that replay it (leaf LRU, Belady, ever-LRU, and any
 *                    order a caller supplies), the library replay they are
 *                    set beside, and the exit-on-error helpers;
 *   evict_explain.c  --explain's learned-classes AUC;
 *   evict_bound.c    --bound: the imperfect-oracle and feature tables;
 *   evict_bench.c    arguments, the main table, main.
 * Invariants: PAGE tokens per page everywhere; a page id is never 0 (0
 * marks an empty slot in the open-addressing tables keyed by id); the
 * models and the library replay share one set of conventions (see
 * evict_bench.c's header), so ref-lru equals the library's lru column.
 */
#ifndef RKV_EVICT_BENCH_H
#define RKV_EVICT_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "sim/workload.h"
#include "radixkv.h"

#define PAGE 512

/* ---- evict_pages.c: helpers ----------------------------------------------- */

/* Prints "evict_bench: what: <status> (<last error>)" and exits 1. */
void evict_die(const char *what, rkv_status st);
/* malloc that exits 1 on failure (n 0 allocates 1 byte). */
void *evict_xmalloc(size_t n);

/* ---- evict_pages.c: the page sequence --------------------------------------- */

typedef struct pages {
    size_t nreq;
    uint64_t *off;       /* request i's pages: ids[off[i] .. off[i+1])    */
    uint64_t *ids;       /* chained hash of the page's tokens (never 0)   */
    uint32_t *next;      /* next request that has this page, or UINT32_MAX */
    uint8_t *kind;       /* KIND_FIRST / KIND_SHARED / KIND_CHAIN          */
    uint64_t prompt_tokens;
    uint64_t distinct;   /* distinct pages: what an unbounded cache holds */
} pages;

enum { KIND_FIRST, KIND_SHARED, KIND_CHAIN, KINDS };
extern const char *const kind_name[KINDS];

/* Slot of h in an open-addressing table of cap (a power of two) 64-bit
 * keys, 0 meaning empty: h's slot if present, else the empty one to use. */
uint64_t slot_of(const uint64_t *key, uint64_t cap, uint64_t h);

/* Builds pg from wl's prompts (full pages only); pages_free releases it. */
void pages_build(pages *pg, const rkv_workload *wl);
void pages_free(pages *pg);

/* ---- evict_pages.c: page-level models --------------------------------------- */

/* The built-in eviction orders: leaf LRU, Belady (farthest next use),
 * ever-LRU (never-used-again first, then LRU). */
enum { M_LRU, M_BELADY, M_EVER };

/* An eviction key for page access g (index into pg->ids) of request req at
 * request clock clock: lowest key among evictable leaves goes first. */
typedef uint64_t (*model_key_fn)(const pages *pg, uint64_t g, size_t req,
                                 uint64_t clock, const void *ctx);

/* Replays the pages with cap_pages of capacity under the order of mode.
 * Returns hit tokens; by_kind[KINDS] (may be NULL) gets them split by page
 * kind. */
uint64_t model_run(const pages *pg, uint64_t cap_pages, int mode,
                   uint64_t *by_kind);
/* The same under the order key(pg, g, req, clock, ctx). */
uint64_t model_run_keyed(const pages *pg, uint64_t cap_pages,
                         model_key_fn key, const void *ctx);

/* ---- evict_pages.c: the library replay -------------------------------------- */

/* Hit rate of library policy policy through the real tree (file order,
 * page PAGE, cap_tokens of capacity); *us_per_req gets the tree's mean
 * match + alloc/evict + insert time per request. */
/* fell_back (may be NULL): the learned policy's guard fell back to LRU */
double library_run(const rkv_workload *wl, uint64_t cap_tokens, int policy,
                   double *us_per_req, int *fell_back);

/* ---- evict_explain.c ----------------------------------------------------------- */

/* Prints how well the learned policy's classes rank leaf ends by return. */
void explain_classes(const pages *pg);

/* ---- evict_bound.c -------------------------------------------------------------- */

/* Prints --bound's tables for wl at the first two of caps. */
void bound_tables(const rkv_workload *wl, const uint64_t *caps, int ncaps);

#endif

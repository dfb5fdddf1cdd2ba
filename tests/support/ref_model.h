/*
 * tests/support/ref_model.h -- a naive reference model of the token radix
 * tree (radix/), for the randomized differential test.
 *
 * The model knows nothing of nodes, splits or LRU lists. It is a set of
 * cached PAGES, each identified by (namespace, full page-aligned prefix):
 * a page is stored with its own tokens and a link to the page before it, so
 * two pages are equal iff their namespaces, their parents and their tokens
 * are equal. Each page has a block id, a last-access stamp, a lock cover
 * count and an incarnation number (new every time a page is created).
 *
 * Semantics it implements (radixkv.h):
 *   - match walks pages while they exist; without PEEK the matched pages get
 *     one new stamp, and the queried/hit stats grow.
 *   - insert walks, then creates the missing pages with the given blocks; a
 *     walked page cached under another block is a duplicate; every page of
 *     the key gets one new stamp.
 *   - lock names a position (a page, or the namespace root) and creates a
 *     lease, identified by the opaque id the implementation handed out; a
 *     lock covers every page from the root to the position. unlock names a
 *     lease: one that is not held (zero, released, forged) is RKV_ERR_STATE
 *     and changes nothing; a held one releases exactly its lock and stamps
 *     the path.
 *   - evict(n) removes n pages, one at a time: among pages with no cached
 *     extension and no lock cover, the one with the oldest stamp, ties
 *     broken deepest first; under RKV_EVICT_PRIORITY (policy), the lowest
 *     priority first, then that order.
 *   - priorities (rkv_tree_retain): each page has one, 35 when created; a
 *     retain sets it on the cached pages wholly inside its token range and
 *     changes nothing else (no stamp).
 *   - pins: a pin covers the pages of its cached prefix like a lock (they
 *     count as locked, are never evicted) until now >= its deadline; then
 *     it goes without stamping anything. Pinned pages = pages under at
 *     least one pin, never above the cap (a pin that would go above is
 *     RKV_ERR_PIN_CAP). The same owner pinning the same prefix renews
 *     (deadline = max); release/extend act on all of an owner's pins.
 *     Allocation that free + evictable pages cannot serve revokes pins,
 *     earliest deadline first (oldest first among equal deadlines) among
 *     those whose end page nothing else covers, then among those whose end
 *     page only pins cover; never one under a lock (it would free
 *     nothing); only if the pages that only pins hold would be enough. A namespace root disappears when its last page
 *     is evicted and it holds no lock, or when its last lock is released
 *     and it has no page.
 *   - a handle is (page, incarnation) or (namespace root, incarnation): it
 *     is valid while that exact page (root) exists.
 * Everything is O(pages) scans or short hash walks: slow, but obviously
 * right, on the small pools the test uses.
 */
#ifndef RKV_TESTS_REF_MODEL_H
#define RKV_TESTS_REF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define REF_NIL UINT32_MAX
#define REF_MAX_PAGE 16u /* largest page size the model stores inline */
#define REF_MAX_NS 8u

typedef struct ref_page {
    int used;
    uint64_t ns;
    uint32_t parent;     /* slot of the page before, or REF_NIL          */
    uint32_t depth;      /* 1-based page index in its prefix             */
    int32_t tokens[REF_MAX_PAGE];
    rkv_block_id block;
    int prio;            /* retention priority 0..100                    */
    uint64_t stamp;
    uint64_t inc;        /* incarnation                                  */
    uint32_t children;   /* cached pages extending this one              */
    uint32_t own_locks;  /* locks taken at exactly this position         */
    uint32_t cover;      /* locks and pins at this position or below     */
    uint32_t pin_cover;  /* pins at this position or below               */
    uint32_t hnext;      /* hash chain                                   */
    uint64_t hash;
} ref_page;

typedef struct ref_root {
    int exists;
    uint64_t ns;
    uint64_t inc;
    uint32_t own_locks;
    uint32_t children;
} ref_root;

/* A model handle: page slot (or REF_NIL for a root) and incarnation. */
typedef struct ref_handle {
    int null;       /* a zeroed implementation handle: never valid      */
    uint64_t ns;
    uint32_t slot;  /* REF_NIL: the namespace root                      */
    uint64_t inc;
} ref_handle;

/* A held lease: the implementation's id and the position it locks. */
typedef struct ref_lease {
    uint64_t id;
    ref_handle h;
} ref_lease;

typedef struct ref_model {
    uint32_t P;
    int policy;          /* rkv_evict_policy (set after init)            */
    uint32_t cap;        /* page slots (= pool blocks)                   */
    ref_page *pages;
    uint32_t *buckets;   /* hash heads, nbuckets (power of two)          */
    uint32_t nbuckets;
    uint32_t free_head;  /* free slots chained through hnext             */
    ref_root roots[REF_MAX_NS];
    uint64_t clock, next_inc;
    uint64_t cached, locked_pages, lock_total;
    uint64_t queried_tokens, hit_tokens;
    uint64_t inserted_pages, evicted_pages;
    ref_lease *leases;   /* held leases, unordered                       */
    uint32_t nleases, lease_cap;
    struct ref_pin *pins; /* live pins, unordered                        */
    uint32_t npins, pins_cap;
    uint64_t now, pin_seq, pinned_pages, pin_cap;
} ref_model;

typedef struct ref_pin {
    uint64_t owner, deadline, seq;
    uint32_t slot;       /* the deepest pinned page                      */
} ref_pin;

typedef struct ref_insert_result {
    uint32_t prefix_pages, new_pages, num_dups;
    ref_handle handle;
} ref_insert_result;

/* page_size <= REF_MAX_PAGE; cap = maximum number of cached pages. */
int ref_model_init(ref_model *m, uint32_t page_size, uint32_t cap);
void ref_model_fini(ref_model *m);

/* Pages matched; block ids to blocks_out (may be NULL); *handle the deepest
 * matched page (or root; null when the namespace has no root and peek). */
uint32_t ref_match(ref_model *m, uint64_t ns, const int32_t *tokens, size_t n,
                   rkv_block_id *blocks_out, int peek, ref_handle *handle);
/* The handle of the page at `depth` pages along tokens (depth <= matched). */
ref_handle ref_handle_at(ref_model *m, uint64_t ns, const int32_t *tokens,
                         uint32_t depth);
void ref_insert(ref_model *m, uint64_t ns, const int32_t *tokens, size_t n,
                const rkv_block_id *blocks, rkv_block_id *dups_out,
                ref_insert_result *out);
int ref_handle_valid(const ref_model *m, ref_handle h);
/* Depth in pages of a valid handle. */
uint32_t ref_handle_depth(const ref_model *m, ref_handle h);
/* Locks h's position under the lease id the implementation returned
 * (nonzero and not held: check with ref_lease_held first). STALE_HANDLE
 * (nothing recorded) for an invalid handle. */
rkv_status ref_lock(ref_model *m, ref_handle h, uint64_t lease);
/* RKV_ERR_STATE if lease is not held; else releases its lock. */
rkv_status ref_unlock(ref_model *m, uint64_t lease);
int ref_lease_held(const ref_model *m, uint64_t lease);
#define REF_MAX_TOKENS 128u /* longest prefix an evicted record holds */
typedef struct ref_evicted {
    uint64_t ns;
    uint32_t depth;                 /* pages                             */
    rkv_block_id block;
    int32_t tokens[REF_MAX_TOKENS]; /* depth * P tokens (if they fit)    */
} ref_evicted;

/* Evicts n pages (RKV_ERR_NO_SPACE, nothing changed, if fewer are
 * evictable); each evicted page is described in evicted_out[i] (capacity
 * n; may be NULL), in eviction order. */
rkv_status ref_evict(ref_model *m, uint32_t n, ref_evicted *evicted_out);
rkv_status ref_reset(ref_model *m);
/* Sets prio on the cached pages of tokens[0..n) wholly inside tokens
 * [begin, end); returns how many. */
uint32_t ref_set_priority(ref_model *m, uint64_t ns, const int32_t *tokens,
                          size_t n, size_t begin, size_t end, int prio);
/* Moves the time to now (>= the model's) and drops expired pins. */
void ref_set_time(ref_model *m, uint64_t now);
/* rkv_tree_retain's pin part at time now (after ref_set_time): RKV_OK or
 * RKV_ERR_PIN_CAP; *pinned gets the pages the pin covers. */
rkv_status ref_pin_prefix(ref_model *m, uint64_t ns, const int32_t *tokens,
                          size_t n, size_t pin_tokens, uint64_t ttl,
                          uint64_t owner, uint32_t *pinned);
uint32_t ref_pins_release(ref_model *m, uint64_t owner);
uint32_t ref_pins_extend(ref_model *m, uint64_t owner, uint64_t ttl);
/* Before evicting need pages for an allocation: RKV_ERR_NO_SPACE if
 * evictable + pin-only pages < need (nothing changes), else revokes pins
 * (in the order above) until evictable >= need. */
rkv_status ref_make_room(ref_model *m, uint64_t need);
uint64_t ref_evictable(const ref_model *m);
uint32_t ref_namespaces(const ref_model *m);
/* Writes the full prefix of a page (depth * P tokens) and its blocks
 * (depth entries); returns depth. */
uint32_t ref_page_prefix(const ref_model *m, uint32_t slot, int32_t *tokens,
                         rkv_block_id *blocks);

#endif

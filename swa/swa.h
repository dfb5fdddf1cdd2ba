/*
 * swa/swa.h -- the sliding-window layers' KV of a hybrid tree (the layer
 * behind include/radixkv/swa.h): which SWA page each cached page holds,
 * the release order, and the SWA leases.
 *
 * State (t->swa, NULL on a tree that is not hybrid), indexed by the tree
 * pool's block id b of a cached page -- a cached page keeps its block for
 * its whole life in the device tree (splits move ids between nodes, never
 * change them), and the core tells this layer through the page_dropped hook
 * whenever the tree's reference on b goes, so no node id or split is
 * tracked here:
 *   - of[b]: the page's SWA block, or RKV_NO_BLOCK (a tombstone, or b not
 *     cached). of[b] != NO ⇒ the tree owns b; owner[of[b]] == b; the tree
 *     holds one reference on of[b] in the SWA pool. owner[s] != NO ⇒
 *     of[owner[s]] == s. attached == #{b : of[b] != NO}.
 *   - pin[b]: SWA leases whose window holds b (each lease lists its pages
 *     in lease_blocks; pin[b] == how many list b). Only a page on a locked
 *     path is pinned, so a pinned page is never dropped, except when the
 *     tree is destroyed or an SWA lease was (wrongly) released by
 *     rkv_tree_unlock, which rkv_swa_check reports.
 *   - The release list: doubly linked through prev/next (head oldest),
 *     holding exactly the pages with of[b] != NO and pin[b] == 0 (listed
 *     of them), so a release is O(1).
 *   - Leases: nleases entries, each a core lease id (the SWA lease's id)
 *     and up to wp pinned blocks; lookup is a scan (SWA leases are the
 *     running requests of one engine).
 * Memory comes from the tree's allocator (radix/node_mem.c), so the
 * tree's out-of-memory injection reaches it.
 */
#ifndef RKV_SWA_SWA_H
#define RKV_SWA_SWA_H

#include <stdint.h>

#include "radix/tree_core.h"

typedef struct rkv_swa_lease_ent {
    uint64_t id;   /* the core lease held for it                          */
    uint32_t n;    /* pinned blocks (<= wp), in lease_blocks[i * wp ..)   */
    uint32_t pad;
} rkv_swa_lease_ent;

typedef struct rkv_swa {
    rkv_pool *pool;      /* the SWA pool (the caller's)                    */
    uint32_t window;     /* W tokens                                       */
    uint32_t wp;         /* ceil(W / P)                                    */
    uint32_t nmain;      /* the tree pool's blocks                         */
    uint32_t nswa;       /* the SWA pool's blocks                          */
    uint32_t *of;        /* [nmain]                                        */
    uint32_t *pin;       /* [nmain]                                        */
    uint32_t *prev;      /* [nmain] release list links                     */
    uint32_t *next;      /* [nmain]                                        */
    uint32_t *owner;     /* [nswa]                                         */
    uint32_t *seen;      /* [nswa] insert's duplicate check (stamps)       */
    uint32_t seen_stamp;
    uint32_t head, tail; /* release list, RKV_NO_BLOCK when empty          */
    uint64_t attached, listed;
    rkv_block_id *path;  /* scratch: a match's blocks (path_cap entries)   */
    uint32_t path_cap;
    rkv_swa_lease_ent *leases;
    rkv_block_id *lease_blocks; /* leases_cap * wp                         */
    uint32_t nleases, leases_cap;
    uint64_t released, revived, truncated;
} rkv_swa;

/* Frees the layer's state (tree destroy, after the core dropped every
 * page). */
void rkv_swa_fini(rkv_tree *t);
/* The layer's invariants (above); RKV_OK on a tree that is not hybrid. */
rkv_status rkv_swa_check(const rkv_tree *t);

/* swa.c, for swa_lease.c: grows the path scratch to pages entries. */
rkv_status rkv_swa_path_reserve(rkv_tree *t, uint32_t pages, const char *fn);
/* Release list (swa.c). */
void rkv_swa_list_unlink(rkv_swa *s, rkv_block_id b);
void rkv_swa_list_push(rkv_swa *s, rkv_block_id b);

#endif

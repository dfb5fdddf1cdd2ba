/*
 * radixkv/swa.h -- hybrid models (full and sliding-window layers, such as gpt-oss and Gemma 3): the sliding layers' KV of cached pages, released where no window needs it while the full layers keep theirs (swa/).
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_SWA_H
#define RADIXKV_SWA_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/tree.h"

RKV_BEGIN_DECLS

/*
 * A hybrid model keeps two kinds of KV per token: the full-attention
 * layers', which every later token reads, and the sliding-window layers',
 * which only the next W tokens read (W = the attention's window_left,
 * rkv_attn_params). The tree's own pool holds the full layers' pages as
 * always; a second pool, the SWA pool (same page size, the sliding layers'
 * shape), holds the sliding layers' page for each cached page that still
 * has one. A cached page whose sliding KV was released is a TOMBSTONE: its
 * full KV is still cached.
 *
 *   - A match is usable only up to a point whose last W tokens' sliding KV
 *     is cached: the ceil(W / page_size) pages before it (all pages when
 *     fewer) must hold their SWA page. rkv_tree_swa_match returns the
 *     deepest such point (tombstones further up do not matter: no window
 *     reaches them), so a tombstone costs hits only where it falls into
 *     the last window of a match.
 *   - Sliding KV is released (rkv_tree_swa_evict, rkv_tree_swa_alloc when
 *     the SWA pool is short) in one order, whatever a page's place in its
 *     node: out-of-window pages in the middle of cached paths go while the
 *     full layers keep the path. The last window of a non-peek match and of
 *     an insert become the most recently used (a later match likely ends
 *     there); the other pages an insert gives sliding KV for go to the
 *     front (first released, the shallowest first): they keep it only
 *     while nothing needs the room.
 *   - An SWA lease (rkv_tree_swa_lock) locks the node like rkv_tree_lock
 *     and also keeps the SWA pages of the last window before the node's
 *     end. Pages further up a locked path may still lose their sliding KV:
 *     the request reading them only needs its window.
 *   - When the tree drops a page (eviction, demotion to a lower tier,
 *     reset, destroy) its SWA page goes with it. Lower tiers carry the
 *     full layers only: a page loaded back is a tombstone until an insert
 *     gives its sliding KV again.
 *   - Insert of a path whose cached pages are tombstones revives them with
 *     the sliding KV the caller gives (the tree takes a reference on it).
 *   - Plain rkv_tree_match / rkv_tree_insert still work on a hybrid tree
 *     and ignore the sliding KV (a plain insert caches tombstones).
 *
 * Block ownership is the tree's protocol (include/radixkv/tree.h) for both
 * pools: the caller holds one reference on each block it allocated, the
 * tree takes its own on each page (and SWA page) it keeps, and the caller
 * drops its own afterwards. The SWA pool is the caller's (it outlives the
 * tree); create no tree on it.
 */

typedef struct rkv_swa_lease {
    uint64_t id; /* opaque; all-zero = none; not an rkv_lease              */
} rkv_swa_lease;

typedef struct rkv_swa_stats {
    uint32_t window_tokens;    /* W                                        */
    uint32_t window_pages;     /* ceil(W / page_size)                      */
    uint64_t attached_pages;   /* cached pages holding their SWA page      */
    uint64_t tombstone_pages;  /* cached pages without it                  */
    uint64_t kept_pages;       /* SWA pages kept by SWA leases             */
    uint64_t leases;           /* SWA leases held                          */
    uint64_t released_pages;   /* cumulative: SWA pages released by
                                  rkv_tree_swa_evict / _alloc              */
    uint64_t revived_pages;    /* cumulative: tombstones given their SWA
                                  page again by an insert                  */
    uint64_t truncated_tokens; /* cumulative, non-peek matches: cached
                                  tokens a match could not use because a
                                  window's sliding KV was gone             */
} rkv_swa_stats;

/* Makes tree hybrid: swa_pool (page size equal to the tree pool's, no tree
 * on it, not the tree's pool) holds the sliding layers' KV of windows of
 * window_tokens (1..2^24) tokens. The tree must be empty: no cached page
 * and no lease (RKV_ERR_BUSY); once only (RKV_ERR_STATE); RKV_ERR_NOMEM
 * leaves it as it was. The state is freed with the tree. */
rkv_status rkv_tree_swa_attach(rkv_tree *tree, rkv_pool *swa_pool,
                               uint32_t window_tokens);

/* rkv_tree_insert with swa_blocks[i] (n / page_size entries) the SWA page
 * of page i, a block of the SWA pool the caller holds a reference on, or
 * RKV_NO_BLOCK where the request already released it (out of every
 * window). For each page the call leaves cached whose SWA page is missing
 * (new pages, tombstones) the tree takes its own reference on swa_blocks[i];
 * a page that has one keeps it (the caller's block is then not taken).
 * Release order (above): of the pages given an SWA block, those in the
 * last ceil(W / page_size) pages of the cached path become the most
 * recently used, the others the first to go.
 * An SWA block that is free, out of range, given twice, or held for
 * another page is RKV_ERR_INVALID_ARG; on any failure nothing changes. */
rkv_status rkv_tree_swa_insert(rkv_tree *tree, rkv_namespace ns,
                               const int32_t *tokens, size_t n,
                               const rkv_block_id *blocks,
                               const rkv_block_id *swa_blocks,
                               rkv_block_id *dups_out, rkv_insert_result *out);

/* rkv_tree_match cut to the deepest usable point (above): out and
 * blocks_out as rkv_tree_match's for that many tokens, swa_out[i] (may be
 * NULL; capacity n / page_size) the SWA page of matched page i or
 * RKV_NO_BLOCK (a tombstone outside the last window). No reference moves.
 * Non-peek: the last window's SWA pages become the most recently used and
 * the tree's queried_tokens counts all n tokens. Cost: two walks of the
 * matched path (a peek to find the usable end, then rkv_tree_match). */
rkv_status rkv_tree_swa_match(rkv_tree *tree, rkv_namespace ns,
                              const int32_t *tokens, size_t n,
                              rkv_block_id *blocks_out, rkv_block_id *swa_out,
                              unsigned flags, rkv_match *out);

/* rkv_tree_lock that also keeps the SWA pages of the last ceil(W /
 * page_size) pages up to node's end from being released (those the path
 * has; a tombstone there stays one). Release it with rkv_tree_swa_unlock
 * only (passing its id to rkv_tree_unlock is a misuse rkv_tree_check
 * reports). Statuses: rkv_tree_lock's; *out zeroed on failure. */
rkv_status rkv_tree_swa_lock(rkv_tree *tree, rkv_node node,
                             rkv_swa_lease *out);
/* Releases an SWA lease and zeroes it; one not held is RKV_ERR_STATE
 * (rkv_tree_unlock's other statuses pass through; nothing changes). The
 * SWA pages it kept become the most recently used. */
rkv_status rkv_tree_swa_unlock(rkv_tree *tree, rkv_swa_lease *lease);

/* Releases the SWA pages of cached pages, least recently used first,
 * until n SWA blocks are free (the full layers' pages stay cached).
 * RKV_ERR_NO_SPACE, nothing released, when fewer than n are releasable;
 * RKV_ERR_NO_SPACE after releasing all of them when blocks the caller
 * references kept some from freeing. freed_out (may be NULL): blocks
 * freed. */
rkv_status rkv_tree_swa_evict(rkv_tree *tree, uint32_t n, uint32_t *freed_out);

/* rkv_pool_alloc_n on the SWA pool that releases SWA pages when it is
 * short; all or nothing (RKV_ERR_NO_SPACE when free + releasable < n). */
rkv_status rkv_tree_swa_alloc(rkv_tree *tree, uint32_t n, rkv_block_id *out);

/* RKV_ERR_STATE when the tree is not hybrid. */
rkv_status rkv_tree_swa_get_stats(const rkv_tree *tree, rkv_swa_stats *out);

RKV_END_DECLS

#endif /* RADIXKV_SWA_H */

/*
 * radixkv/tree.h -- the token radix tree (radix/): match, insert, leases (locks), eviction, reset, stats and the invariant check.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_TREE_H
#define RADIXKV_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/pool.h"

RKV_BEGIN_DECLS

typedef struct rkv_tree rkv_tree;

/* Isolation key (tenant, LoRA adapter, cache salt). Two namespaces never
 * share a hit: each has its own subtree, found by exact comparison of the
 * 64-bit value, never by mixing it into tokens. */
typedef uint64_t rkv_namespace;

/* A node handle is a value: an index plus a generation. It stays valid while
 * the node's prefix is cached with the same pages; eviction of the node (or
 * of any of its pages) and rkv_tree_reset() make it stale, and every call
 * that takes it then returns RKV_ERR_STALE_HANDLE. A zeroed handle is never
 * valid. */
typedef struct rkv_node {
    uint32_t id;
    uint32_t gen;
} rkv_node;

/* Which unlocked, unpinned leaf eviction takes first. */
typedef enum rkv_evict_policy {
    RKV_EVICT_LRU = 0,      /* least recently used (default)                */
    RKV_EVICT_PRIORITY = 1, /* lowest retention priority, then least
                               recently used (TensorRT-LLM's priority LRU) */
    RKV_EVICT_LEARNED = 2   /* predicts reuse online from the tree's
                               structure (continuation depth, new pages)
                               and the learned return time of each class;
                               priorities other than the default still
                               order eviction first (retain/evict_learned.c).
                               Guarded: a shadow LRU counts what LRU would
                               hit, and once the policy falls behind it
                               eviction is LRU (retain/evict_guard.c), so it
                               never loses to LRU by more than ~0.2 point */
} rkv_evict_policy;
/* A policy's name ("lru", "priority", "learned") and back, from one table
 * (retain/evict_names.c). from_name: RKV_ERR_INVALID_ARG for an unknown name
 * (the message lists the known ones; *out unchanged). name: NULL for a value
 * that is no policy. */
rkv_status rkv_evict_policy_from_name(const char *name, int *out);
const char *rkv_evict_policy_name(int policy);

typedef struct rkv_tree_config {
    uint32_t initial_nodes; /* capacity hint; 0 = default                   */
    int use_jemalloc;       /* 1 (default when built with jemalloc): node
                               memory from a dedicated jemalloc arena; only
                               the static library has it (libradixkv.so
                               uses malloc, so it loads by dlopen: there
                               the default is 0 and 1 is ignored)           */
    uint32_t event_ring;    /* KV events (rkv_tree_events_drain): ring
                               capacity in events, 2..2^24; 0 (default) =
                               off, and events cost nothing                 */
    int evict_policy;       /* rkv_evict_policy; default RKV_EVICT_LRU      */
    uint32_t max_pinned_pct; /* pinned pages <= this % of the pool's blocks
                               (0..100; default 50; 0: no pins)             */
    uint32_t event_tokens;  /* token ids on BLOCK_STORED events
                               (rkv_tree_events_drain_tokens): capacity of
                               the token ring in token ids, 0 (default) =
                               off, else RKV_EVENT_MAX_HASHES * page_size
                               .. 2^28 and event_ring > 0               */
    uint32_t token_bytes;   /* bytes per cached token id: 4 (default) or 3,
                               for vocabularies below 2^24 (25 % less host
                               memory per token; insert then refuses ids
                               >= 2^24; lower tiers as with 4):
                               docs/embedding.md                          */
} rkv_tree_config;
void rkv_tree_config_init(rkv_tree_config *cfg);

/* The tree keeps a pointer to the pool (which must outlive it) and takes
 * pool references on the blocks it caches. cfg may be NULL.
 * One tree per pool: the pool stores one chained hash per block, which two
 * trees would overwrite in each other, so rkv_tree_create on a pool that
 * already has a live tree is RKV_ERR_BUSY (nothing changes). After
 * rkv_tree_destroy the pool takes a new tree. */
rkv_status rkv_tree_create(rkv_pool *pool, const rkv_tree_config *cfg,
                           rkv_tree **out);
/* Drops the tree's block references. Locked paths are released too: every
 * lease of the tree dies with it. The pool is free for another tree. */
void rkv_tree_destroy(rkv_tree *tree);
rkv_pool *rkv_tree_pool(const rkv_tree *tree);

/*
 * Block ownership protocol (the one place it is written down).
 *
 * A block is allocated while its pool ref count is >= 1 and is freed when
 * the count reaches 0. Each reference has exactly one holder, who drops it
 * exactly once:
 *   - rkv_pool_alloc / rkv_pool_alloc_n / rkv_tree_alloc_blocks: the
 *     CALLER holds one reference on each block returned. rkv_pool_ref adds
 *     one more, held by the caller.
 *   - The TREE holds one reference on each page it caches, taken by
 *     rkv_tree_insert and dropped by eviction, rkv_tree_reset and
 *     rkv_tree_destroy. No other call moves references between caller and
 *     tree.
 *   - The SCHEDULER holds its requests' references (and leases) itself;
 *     rkv_sched_abort and rkv_sched_destroy release them. A batch plan's
 *     block ids are the scheduler's, valid until the next step or commit.
 *
 * What each tree call leaves the caller:
 *   - rkv_tree_match: the block ids of the matched pages, and NO reference.
 *     They are the tree's pages. They stay allocated with their KV while a
 *     lease on out->node (from a non-peek match) is held; without a lease,
 *     only until the next call that can evict (rkv_tree_evict,
 *     rkv_tree_alloc_blocks, rkv_tree_reset, rkv_tree_destroy, and
 *     rkv_sched_step of a scheduler on the same tree), which may hand the
 *     same ids out again as fresh blocks. So lock out->node before
 *     allocating.
 *     A PEEK match's node may end above matched_tokens: its lease protects
 *     only the node's own depth. The caller never unrefs matched blocks.
 *   - rkv_tree_lock / rkv_tree_unlock: no reference changes; a lease only
 *     keeps the path's pages from eviction.
 *   - rkv_tree_insert(blocks): blocks[i] is either page i's cached block
 *     (as a match returned it: nothing happens) or a block the caller
 *     holds a reference on. For each new page the tree takes ITS OWN
 *     reference on blocks[i] (the block now has the caller's reference and
 *     the tree's). A page that was already cached under another block is a
 *     duplicate: the tree takes nothing, and dups_out lists the caller's
 *     block, whose KV the cached page already holds. The caller's own
 *     references are untouched in every case, duplicates included.
 *   - Afterwards the caller drops its own reference on EVERY block it
 *     allocated for the request, once (rkv_pool_unref_n over them):
 *     blocks the tree kept stay allocated under the tree's reference, and
 *     duplicates are freed. Do NOT also unref the ids in dups_out: they are
 *     among the blocks already released (a second unref is the error "block
 *     is free or listed more times than it is referenced"). To keep using
 *     the KV after dropping those references (decoding on), lock the node
 *     insert returned and read the cached path's blocks (a PEEK match), as
 *     the scheduler does; or keep the references until done.
 *   - On failure insert changes nothing: the caller still holds its
 *     references. Aborting a request: unref the blocks it allocated,
 *     unlock its lease; matched blocks need nothing.
 *   - Eviction drops only the tree's reference: a block the caller still
 *     references stays allocated (no longer cached), which is why
 *     rkv_tree_evict / rkv_tree_alloc_blocks can free fewer blocks than
 *     they unlinked.
 */

typedef struct rkv_match {
    size_t matched_tokens; /* multiple of page_size                        */
    uint32_t num_blocks;   /* matched_tokens / page_size                    */
    rkv_node node;         /* deepest node of the match (root of the
                              namespace if nothing matched); lockable       */
} rkv_match;

#define RKV_MATCH_PEEK 1u /* no recency update, no stats, no split; the
                             handle is the deepest fully matched node, and
                             matched_tokens may reach into its child        */

/* Longest cached prefix of tokens[0..n) in namespace ns. Writes the block ids
 * of the matched pages to blocks_out (capacity n / page_size; may be NULL).
 * Without PEEK the matched path becomes most recently used and a match that
 * ends inside a node splits it there, so out->node ends exactly at the
 * match (a split needs memory: RKV_ERR_NOMEM leaves the tree unchanged).
 * A non-peek match in a namespace not seen before creates its (empty) root
 * so the returned handle is lockable (that too may give RKV_ERR_NOMEM); a
 * PEEK in an unknown namespace matches nothing and returns a zeroed handle.
 * An empty root is freed (its handles go stale) when its last page is
 * evicted or its last lease released, whichever comes last; one that is
 * never locked nor filled stays until reset, so probe with PEEK.
 * Match reads tokens only up to the first page it cannot match (its cost
 * follows the matched part, not n) and does not reject negative ids: they
 * are never cached (insert refuses them), so one simply ends the match. */
rkv_status rkv_tree_match(rkv_tree *tree, rkv_namespace ns,
                          const int32_t *tokens, size_t n,
                          rkv_block_id *blocks_out, unsigned flags,
                          rkv_match *out);

/* Continue a PEEK match below a node found earlier for the same tokens:
 * `from` with depth `from_tokens`. Only blocks from index from_tokens /
 * page_size on are written. Always a peek. Cost is O(new part).
 * from_tokens must be the node's depth (rkv_node_info.depth_tokens); it is
 * checked for page alignment and <= n only. */
rkv_status rkv_tree_match_from(rkv_tree *tree, rkv_node from,
                               size_t from_tokens, const int32_t *tokens,
                               size_t n, rkv_block_id *blocks_out,
                               rkv_match *out);

typedef struct rkv_insert_result {
    size_t prefix_tokens;  /* tokens that were already cached               */
    size_t cached_tokens;  /* tokens cached for this key after the call:
                              floor(n / page_size) * page_size, except with
                              tiers when the path runs into pages another
                              call is loading (rkv_tree_load): the insert
                              ends there, those pages arrive by the load,
                              and cached_tokens says where it ended (the
                              caller's blocks past it were not taken)      */
    uint32_t new_pages;    /* pages the tree took from `blocks`             */
    uint32_t num_dups;     /* given blocks not kept: their page was already
                              cached under another block                    */
    rkv_node node;         /* deepest node of the key (lockable)            */
} rkv_insert_result;

/* Caches the full pages of tokens[0..n) with blocks[i] holding page i
 * (n / page_size entries; every block must be allocated). The tree takes one
 * reference on each block it keeps and never touches the caller's own
 * references. A page that was already cached under a different block is a
 * duplicate: its given block id is written to dups_out (capacity n /
 * page_size; may be NULL); the tree did not keep it, so the caller's own
 * reference is its last (see the block ownership protocol above: the
 * caller drops its reference on every block it allocated, once, and that
 * frees the duplicates). A page cached under the same block id is not a
 * duplicate. The path becomes most recently used. A partial last page is
 * ignored. A block given for a new page that the tree already caches (for
 * another page), or given for two new pages, is RKV_ERR_INVALID_ARG.
 * On any error the tree and the pool are unchanged, but dups_out may
 * already hold entries for the matched prefix: read it only after
 * RKV_OK. */
rkv_status rkv_tree_insert(rkv_tree *tree, rkv_namespace ns,
                           const int32_t *tokens, size_t n,
                           const rkv_block_id *blocks, rkv_block_id *dups_out,
                           rkv_insert_result *out);

/*
 * Locks are owned: each rkv_tree_lock() creates one lock and hands back the
 * lease that owns it; only rkv_tree_unlock() of that lease releases it. A
 * lease is a value the caller keeps (copying it copies the right to
 * release; release it once). Nobody can release a lock through a node
 * handle, and nobody but the scheduler holds the scheduler's leases, so
 * an embedder's mistakes cannot unpin a running request's prefix.
 *
 *   - A node with a live lease on it or below it is never evicted, trimmed
 *     or split away from its handle: its handle stays valid while the lease
 *     lives. Locks of one node nest: each lock is its own lease.
 *   - lock: RKV_ERR_STALE_HANDLE (stale or zeroed handle), RKV_ERR_NOMEM
 *     (the lease table could not grow), RKV_ERR_STATE (2^24 leases already
 *     held in this tree); on any failure nothing changes and *out is zeroed.
 *   - unlock releases exactly that lock, zeroes *lease and makes the path
 *     most recently used (it was in use until now); a namespace root left
 *     with no page and no lease is freed (its handles go stale). A lease
 *     that is not held -- all-zero, already released, forged, or from
 *     another tree -- is RKV_ERR_STATE and nothing changes. (A released
 *     lease stays refused until its table slot has been released about
 *     2^40 more times.)
 *   - Forgery: a lease id is its table slot and generation enciphered
 *     with a 64-bit block cipher (Speck64/128) under a 128-bit key drawn
 *     per tree from getrandom(2). A value that is not a held lease --
 *     guessed, or computed from any number of leases the caller holds --
 *     is taken with probability about (leases held) / 2^64 per try, so a
 *     caller holding leases cannot release the scheduler's. Where
 *     getrandom fails (no kernel support, a sandbox, before the kernel's
 *     pool is ready) the key is derived from addresses instead: leases
 *     then guard against mistakes only, not against a caller that sets
 *     out to derive the key. Leases are not a boundary inside a process:
 *     code in it can read the tree's memory.
 *   - rkv_tree_reset() refuses (RKV_ERR_BUSY) while any lease is held;
 *     rkv_tree_destroy() releases every lock, and its leases die with it.
 *   - Leases live in the tree's memory: rkv_tree_stats.host_bytes counts
 *     the table, which grows to the most leases held at once.
 * Cost: O(depth of the node) for both, plus an amortized table growth.
 */
typedef struct rkv_lease {
    uint64_t id; /* opaque; all-zero = no lease                             */
} rkv_lease;

/* Locks node's path; *out receives the lease that owns this lock. */
rkv_status rkv_tree_lock(rkv_tree *tree, rkv_node node, rkv_lease *out);
/* Releases exactly the lock *lease owns and zeroes *lease. */
rkv_status rkv_tree_unlock(rkv_tree *tree, rkv_lease *lease);

/* Frees at least n blocks by removing unlocked, unpinned leaves in the
 * tree's eviction order (rkv_evict_policy) page by page from their tail (a
 * parent that becomes a leaf joins the LRU lists). Never revokes a pin. RKV_ERR_NO_SPACE, changing nothing, if fewer than n blocks are
 * evictable. freed_out (may be NULL) gets the number of blocks freed.
 * A block counts as freed when its pool ref count reaches 0: if the caller
 * holds references to cached blocks outside the tree without a lock,
 * evicting every evictable page may free fewer than n; then the call
 * returns RKV_ERR_NO_SPACE after that eviction (freed_out says how many). */
rkv_status rkv_tree_evict(rkv_tree *tree, uint32_t n, uint32_t *freed_out);

/* rkv_tree_evict that also says WHICH blocks it freed, for an embedder
 * whose own allocator must release exactly the freed KV (a server's
 * evict(num_tokens) that frees the evicted slots): ids_out[0 ..
 * *freed_out) get the blocks whose pool ref count reached 0, in the order
 * they were freed (a node's tail first). A block evicted while the caller
 * still references it is not freed and not listed. cap (room in ids_out)
 * must be >= n; the call never frees more than cap blocks. Without tiers
 * it frees at most n. With tiers a demotion frees at most n too, except
 * that when splitting a node's tail off needs memory that is not there,
 * the whole node goes down, freeing more than n; if that would pass cap
 * the call stops instead and returns RKV_ERR_NOMEM after the evictions it
 * made (listed). Otherwise the statuses and the partial-eviction case are
 * rkv_tree_evict's (RKV_ERR_NO_SPACE: nothing evicted when fewer than n
 * blocks are evictable; evicted and listed when blocks referenced outside
 * the tree made it free fewer). Never revokes a pin. */
rkv_status rkv_tree_evict_ids(rkv_tree *tree, uint32_t n, rkv_block_id *ids_out,
                              uint32_t cap, uint32_t *freed_out);

/* rkv_pool_alloc_n() that evicts through the tree when the pool is short.
 * All or nothing: RKV_ERR_NO_SPACE if free + evictable < n (nothing
 * evicted). Evicts only n - free blocks' worth; with blocks held outside
 * the tree without a lock it can evict and still fail (see rkv_tree_evict). */
rkv_status rkv_tree_alloc_blocks(rkv_tree *tree, uint32_t n,
                                 rkv_block_id *out);

/* Drops every cached prefix. RKV_ERR_BUSY (nothing changes) while any lease
 * is held. Every handle from before becomes stale. Cumulative counters
 * (queried/hit tokens, inserted, evicted, splits) are kept. */
rkv_status rkv_tree_reset(rkv_tree *tree);

typedef struct rkv_tree_stats {
    uint64_t cached_blocks;    /* pages held by the tree                    */
    uint64_t evictable_blocks; /* pages in unlocked nodes                   */
    uint64_t locked_blocks;    /* pages in locked nodes (pins included)     */
    uint64_t nodes;            /* excluding the namespace roots             */
    uint64_t namespaces;
    uint64_t queried_tokens;   /* sum of n over non-peek matches            */
    uint64_t hit_tokens;       /* sum of matched_tokens over them           */
    uint64_t inserted_pages;
    uint64_t evicted_blocks;   /* pages removed by eviction                 */
    uint64_t evicted_nodes;
    uint64_t splits;
    uint64_t lru_reorder_steps; /* list steps taken to place a node that
                                   became a leaf (0 in the common case)     */
    uint64_t host_bytes;       /* node metadata + tokens + child index      */
    /* RKV_EVICT_LEARNED's guard (0 under other policies): what plain LRU
     * would have hit on the same matches (a shadow LRU of the device
     * pool), how many victims of the policy it replaced by LRU's (the
     * policy's could have cost more than its lead allows), and 1 when the
     * last victim was such a replacement */
    uint64_t guard_lru_hit_tokens;
    uint64_t guard_fallbacks;
    uint32_t guard_on_lru;
} rkv_tree_stats;
rkv_status rkv_tree_get_stats(const rkv_tree *tree, rkv_tree_stats *out);

typedef struct rkv_node_info {
    rkv_node parent;         /* zeroed for a namespace root                 */
    rkv_namespace ns;
    size_t depth_tokens;     /* tokens from the namespace root to node end  */
    uint32_t num_pages;      /* pages on the node's own edge                */
    uint32_t num_children;
    uint32_t lock_count;     /* live leases on this node and below it       */
    uint64_t last_access;    /* logical clock                               */
    uint64_t children_epoch; /* changes whenever a child is added, removed,
                                trimmed or split; with a valid handle, an
                                unchanged epoch means a PEEK match that ended
                                at or below this node is unchanged          */
} rkv_node_info;
rkv_status rkv_tree_node_info(const rkv_tree *tree, rkv_node node,
                              rkv_node_info *out);

/* Verifies every invariant: parent/child links, page alignment, child index
 * entries, ref counts against the pool, LRU list = unlocked leaves, lock
 * counts, stats. RKV_ERR_CORRUPT with a message. O(size of tree). */
rkv_status rkv_tree_check(const rkv_tree *tree);

/*
 * Server slot tables: the KV slots a server's own allocator gave each
 * cached page (SGLang's token-to-KV pool hands out one int64 slot index per
 * token), kept per block so that a match, an insert and an eviction are one
 * call each that also reads or writes those slots: the embedder does no
 * per-page or per-token work of its own.
 *
 * A table belongs to one pool (which must outlive it) and follows the tree
 * of that pool through the *_slots calls below: rkv_tree_insert_slots
 * records the pages the tree took, rkv_tree_evict_slots forgets the blocks
 * it freed. Pages the tree caches or drops through other calls are not
 * recorded by themselves (rkv_slot_table_set / _drop / _clear keep the
 * table in step then: tier loads, rkv_tree_reset).
 *   - A slot table (flags 0) stands beside a metadata-only pool whose
 *     blocks stand for the server's pages: insert allocates the blocks and
 *     records the server's slots of each new page. A page whose slots are
 *     s, s+1, .., s+P-1 with s >= 0 (what a paged allocator hands out)
 *     takes 8 bytes; another page P * 8 bytes more.
 *   - An identity table (RKV_SLOTS_IDENTITY) is for a pool that holds the
 *     server's KV itself: page b's slots are b*P .. b*P+P-1, so slots name
 *     the blocks, and the table only records which blocks the tree caches.
 * Host memory: 8 bytes per block of the pool plus 4 of scratch, touched
 * only where used.
 */
typedef struct rkv_slot_table rkv_slot_table;

#define RKV_SLOTS_IDENTITY 1u /* rkv_slot_table_create: slots are blocks'  */

/* A table for pool's blocks, holding nothing. flags: 0 or
 * RKV_SLOTS_IDENTITY. RKV_ERR_NOMEM if its arrays cannot be had. */
rkv_status rkv_slot_table_create(rkv_pool *pool, unsigned flags,
                                 rkv_slot_table **out);
/* Frees the table (NULL: nothing). The pool and its tree are untouched. */
void rkv_slot_table_destroy(rkv_slot_table *table);
/* Records blocks[0..n) as held, with slots[i*P .. i*P+P) as block i's
 * slots (a slot table; any values). An identity table takes slots NULL.
 * A block already held gets the new slots. RKV_ERR_INVALID_ARG (nothing
 * changes) for a block id past the pool, or slots NULL in a slot table. */
rkv_status rkv_slot_table_set(rkv_slot_table *table, uint32_t n,
                              const rkv_block_id *blocks, const int64_t *slots);
/* Forgets blocks[0..n) (one not held: nothing). RKV_ERR_INVALID_ARG
 * (nothing changes) for a block id past the pool. */
rkv_status rkv_slot_table_drop(rkv_slot_table *table, uint32_t n,
                               const rkv_block_id *blocks);
/* Forgets every block (after rkv_tree_reset). */
void rkv_slot_table_clear(rkv_slot_table *table);
/* Blocks held. */
uint64_t rkv_slot_table_count(const rkv_slot_table *table);
/* The held blocks in ascending order: out[0 .. *n_out), at most cap of
 * them (*n_out = rkv_slot_table_count when cap allows). */
rkv_status rkv_slot_table_blocks(const rkv_slot_table *table, rkv_block_id *out,
                                 uint64_t cap, uint64_t *n_out);
/* The slots of blocks[0..n), P per block, to out[0 .. n*P); a block not
 * held gives P slots of -1. RKV_ERR_INVALID_ARG for a block past the
 * pool (out unspecified). */
rkv_status rkv_slot_table_gather(const rkv_slot_table *table, uint32_t n,
                                 const rkv_block_id *blocks, int64_t *out);

/* rkv_tree_match (same flags, statuses and effects on the tree) that
 * writes the matched pages' slots instead of their block ids:
 * slots_out[0 .. out->matched_tokens), room for n / page_size * page_size.
 * A matched page the table holds no slots for reads as -1s (it was cached
 * by a call that bypassed the table). table must be of the tree's pool. */
rkv_status rkv_tree_match_slots(rkv_tree *tree, rkv_slot_table *table,
                                rkv_namespace ns, const int32_t *tokens,
                                size_t n, unsigned flags, int64_t *slots_out,
                                rkv_match *out);

/* Caches the full pages of tokens[0..n), slots[0 .. n / P * P) being their
 * KV slots, and records the pages the tree takes; *out (may be NULL) as
 * rkv_tree_insert (out->prefix_tokens: the tokens that were cached
 * already, whose given slots the tree does not take -- the caller frees
 * those, as SGLang's RadixCache contract has it). The path becomes most
 * recently used.
 *   - Slot table: each page past the cached prefix gets a block of the
 *     pool (allocated here; the tree's reference is its only one). If the
 *     pool has fewer free blocks than that, RKV_ERR_NO_SPACE and nothing
 *     changes: evict (rkv_tree_evict_slots) and call again.
 *   - Identity table: page i's slots must be b*P .. b*P+P-1 of an
 *     allocated block b (RKV_ERR_INVALID_ARG, nothing changed, if any page
 *     is not), which the caller holds a reference on; page i's block is
 *     blocks[i] of rkv_tree_insert. The caller's reference on the block of
 *     every page past the cached prefix passes to this call, which drops
 *     it: a page the tree took stays allocated under the tree's reference,
 *     one it did not take (tiers: the insert ended at pages being loaded)
 *     is freed. The blocks given for the cached prefix are not touched
 *     (the caller frees its duplicates).
 * On failure nothing changes. */
rkv_status rkv_tree_insert_slots(rkv_tree *tree, rkv_slot_table *table,
                                 rkv_namespace ns, const int32_t *tokens,
                                 size_t n, const int64_t *slots,
                                 rkv_insert_result *out);

/* rkv_tree_evict_ids(n) (same statuses, same eviction) that forgets the
 * freed blocks in the table and writes the slots they held, P per freed
 * block the table held, to slots_out[0 .. *nslots_out) in the order they
 * were freed -- for the server's allocator to free (one call). cap (room
 * in slots_out) must be >= n * page_size; slots_out NULL with cap 0 writes
 * none (an identity table's blocks are back in the pool already).
 * freed_out (may be NULL): blocks freed. */
rkv_status rkv_tree_evict_slots(rkv_tree *tree, rkv_slot_table *table,
                                uint32_t n, int64_t *slots_out, size_t cap,
                                uint32_t *freed_out, size_t *nslots_out);

/* rkv_tree_lock / rkv_tree_unlock that also report how many pages the
 * call moved from evictable to locked (lock) or back (unlock): *moved (may
 * be NULL; 0 on failure), what SGLang's inc_lock_ref / dec_lock_ref
 * return. Statuses and effects are those of the plain calls. */
rkv_status rkv_tree_lock_counted(rkv_tree *tree, rkv_node node, rkv_lease *out,
                                 uint64_t *moved);
rkv_status rkv_tree_unlock_counted(rkv_tree *tree, rkv_lease *lease,
                                   uint64_t *moved);

RKV_END_DECLS

#endif /* RADIXKV_TREE_H */

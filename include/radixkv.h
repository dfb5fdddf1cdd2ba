/*
 * radixkv.h -- the one public header of radixkv, a prefix-cache engine for
 * LLM serving: a paged KV block pool (alloc/), a token radix tree over it
 * (radix/), a cache-aware scheduler (sched/) and paged attention (attention/).
 *
 * Conventions every function follows:
 *   - Handles are opaque; names are rkv_<noun>_<verb>().
 *   - Every call that can fail returns rkv_status. On failure nothing the call
 *     was given is changed: the pool, tree and scheduler are exactly as before.
 *     rkv_last_error() returns a sentence naming what was wrong (thread-local).
 *   - The library never aborts, never prints, and never calls exit().
 *   - Threads: an object is not thread-safe. Use each pool, tree, scheduler
 *     and attention context from one thread at a time, counting what it
 *     uses (a tree uses its pool, a scheduler its tree and pool): one
 *     thread per object group, or a lock of your own around it. Separate
 *     groups are safe on separate threads (the library keeps no shared
 *     mutable state). rkv_last_error() is per thread.
 *   - Locks on tree paths are owned (rkv_lease, see rkv_tree_lock): only
 *     the lease that took a lock releases it.
 *   - Tokens are int32 ids (negative ids are invalid). Block ids are uint32.
 */
#ifndef RADIXKV_H
#define RADIXKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with -fvisibility=hidden: what this header declares
 * is exactly what libradixkv exports (tests/scripts/check_exports.sh verifies it). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* RKV_VERSION_MAJOR, _MINOR, _PATCH and RKV_VERSION_STRING ("0.1.0"),
 * generated from the build's project(VERSION): the version compiled
 * against. rkv_version() gives the version of the library running. */
#include "radixkv_version.h"

const char *rkv_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */
/* ------------------------------------------------------------------------ */

typedef enum rkv_status {
    RKV_OK = 0,
    RKV_ERR_INVALID_ARG = 1,  /* NULL, out of range, wrong length, bad token  */
    RKV_ERR_NOMEM = 2,        /* host memory allocation failed                */
    RKV_ERR_NO_SPACE = 3,     /* no free KV block, even after eviction        */
    RKV_ERR_STATE = 4,        /* not valid now: unlock without lock, unref of
                                 a free block, commit without a step ...      */
    RKV_ERR_STALE_HANDLE = 5, /* node handle from before a reset or eviction  */
    RKV_ERR_BUSY = 6,         /* refused while paths are locked / requests
                                 run, or the pool already has a tree        */
    RKV_ERR_NOT_FOUND = 7,    /* unknown request id                           */
    RKV_ERR_DUPLICATE = 8,    /* request id already submitted                 */
    RKV_ERR_CUDA = 9,         /* a CUDA runtime or cuBLAS call failed         */
    RKV_ERR_NO_DEVICE = 10,   /* built without CUDA, or no usable GPU         */
    RKV_ERR_UNSUPPORTED = 11, /* valid but not supported (e.g. head_dim 96
                                 on the GPU path)                             */
    RKV_ERR_FORMAT = 12,      /* malformed input data (e.g. a trace line)     */
    RKV_ERR_IO = 13,          /* file could not be read or written            */
    RKV_ERR_CORRUPT = 14,     /* a *_check() found a broken invariant         */
    RKV_ERR_PIN_CAP = 15      /* a pin would take pinned pages past the
                                 tree's cap (rkv_tree_config.max_pinned_pct) */
} rkv_status;

/* Short fixed text for a status ("invalid argument"). Never NULL. */
const char *rkv_strerror(rkv_status status);

/* Detail of the last failing call on this thread ("rkv_tree_unlock: lease
 * ... is not held in this tree"). Empty string if none. Valid until the
 * next failing call. */
const char *rkv_last_error(void);

/* ------------------------------------------------------------------------ */
/* alloc/: the KV block pool                                                */
/* ------------------------------------------------------------------------ */

typedef struct rkv_pool rkv_pool;
typedef uint32_t rkv_block_id;
#define RKV_NO_BLOCK ((rkv_block_id)UINT32_MAX)

typedef enum rkv_dtype {
    RKV_DTYPE_F16 = 0,
    RKV_DTYPE_BF16 = 1,
    RKV_DTYPE_F32 = 2
} rkv_dtype;

typedef enum rkv_device {
    RKV_DEVICE_HOST = 0, /* aligned host memory                            */
    RKV_DEVICE_CUDA = 1  /* one cudaMalloc; RKV_ERR_NO_DEVICE without CUDA */
} rkv_device;

/* Largest page a pool accepts. The tree and scheduler work at any size up to
 * this (the Mooncake trace uses 512-token blocks); the attention kernels are
 * tested at 1..256. */
#define RKV_MAX_PAGE_SIZE 4096u

typedef struct rkv_pool_config {
    uint32_t num_blocks;   /* >= 1, < UINT32_MAX                             */
    uint32_t page_size;    /* tokens per block, 1..RKV_MAX_PAGE_SIZE (16)   */
    uint32_t num_layers;   /* 0 = metadata only: no KV memory is allocated  */
    uint32_t num_kv_heads; /* ignored when num_layers == 0                  */
    uint32_t head_dim;     /* ignored when num_layers == 0                  */
    rkv_dtype dtype;       /* element type of K and V                       */
    rkv_device device;
    int cuda_device;       /* device ordinal when device == RKV_DEVICE_CUDA  */
} rkv_pool_config;

/* Fills defaults: page_size 16, num_layers 0, F16, host. num_blocks is 0 and
 * must be set. */
void rkv_pool_config_init(rkv_pool_config *cfg);

/*
 * KV memory layout (one allocation for the whole pool):
 *   for each layer l: K[l] then V[l], each laid out as
 *     [num_blocks][page_size][num_kv_heads][head_dim]   (FlashInfer's "NHD")
 *   so token t of block b, head h, dim d of K in layer l sits at element
 *     ((l*2 + 0) * num_blocks * page_size + b*page_size + t) * H*D + h*D + d.
 * bytes_per_block = num_layers * 2 * page_size * num_kv_heads * head_dim *
 * sizeof(dtype). A token's slot is block * page_size + offset.
 */
rkv_status rkv_pool_create(const rkv_pool_config *cfg, rkv_pool **out);
void rkv_pool_destroy(rkv_pool *pool); /* NULL is fine */

rkv_status rkv_pool_get_config(const rkv_pool *pool, rkv_pool_config *out);
uint32_t rkv_pool_num_blocks(const rkv_pool *pool);
uint32_t rkv_pool_num_free(const rkv_pool *pool);
uint32_t rkv_pool_page_size(const rkv_pool *pool);
size_t rkv_pool_bytes_per_block(const rkv_pool *pool);
/* Host bytes the pool itself uses for metadata (not KV memory). */
size_t rkv_pool_host_metadata_bytes(const rkv_pool *pool);

/* K and V base pointers of one layer (device pointers for a CUDA pool; a
 * server-owned pool's: the buffers it was given). RKV_ERR_STATE for a
 * metadata-only pool. */
rkv_status rkv_pool_layer_kv(const rkv_pool *pool, uint32_t layer, void **k,
                             void **v);

/*
 * Server-owned KV memory: a pool over K and V buffers the caller
 * allocated (an SGLang token pool, vLLM's per-layer KV tensors), so that
 * block copies, the tiers and attention read and write the server's own
 * bytes. Each layer's K and each layer's V is one buffer with its own
 * base pointer; in all of them element d of kv head h, token t of block b
 * sits at
 *     base + b * block_stride + t * token_stride + h * head_stride
 *          + d * sizeof(dtype)
 * (the head_dim elements of a head are contiguous; the strides are bytes,
 * the same for every layer and for K and V). Examples, es = dtype size:
 *   - SGLang MHATokenToKVPool, per layer [num_slots][H][D] with slot =
 *     block * page_size + t: block_stride = P*H*D*es, token_stride =
 *     H*D*es, head_stride = D*es;
 *   - vLLM, per layer [2][num_blocks][block_size][H][D] (flash-attn): the
 *     same strides, k = &kv[0], v = &kv[1];
 *   - vLLM's FlashInfer HND, per layer [num_blocks][2][H][block_size][D]:
 *     block_stride = 2*H*P*D*es, token_stride = D*es, head_stride =
 *     P*D*es, v = k + H*P*D*es.
 * The pool's own layout (rkv_pool_create) is the first with the layers
 * in one allocation; rkv_pool_kv_strides reports either.
 *
 * Where: cfg->device RKV_DEVICE_HOST: any strides whose elements do not
 * alias (each stride, in increasing order, at least the extent of the
 * dims inside it; a stride of a dim of size 1 is ignored). CUDA
 * (RKV_DEVICE_CUDA, device pointers on cfg->cuda_device): only buffers
 * that are each a contiguous [num_blocks][page_size][num_kv_heads]
 * [head_dim] array, as the kernels read (the first two examples); other
 * strides are RKV_ERR_UNSUPPORTED, checked before the CUDA backend is
 * loaded (RKV_ERR_NO_DEVICE without it). Block copies of a server-owned
 * CUDA pool take one copy per layer's K and V (the pool-owned layout one
 * per block).
 *
 * Ownership: the caller keeps every buffer allocated, and does not move
 * it, until rkv_pool_destroy (and until every tree, store, scheduler and
 * attention context using the pool is gone); the pool only reads and
 * writes its blocks' bytes there and never frees them. The pointer arrays
 * k and v are copied: they may go once the call returns. The caller's own
 * writes into the buffers are the server's business (the pool does not
 * zero them). Buffers of different layers must not share bytes (not
 * checked: the interleaved example above shares none).
 * Errors: NULL pointers, a base not aligned to the element size, strides
 * that alias or overflow, num_layers 0: RKV_ERR_INVALID_ARG; nothing is
 * created.
 */
typedef struct rkv_kv_buffers {
    void *const *k;        /* [cfg->num_layers] layer l's K buffer           */
    void *const *v;        /* [cfg->num_layers] layer l's V buffer           */
    size_t block_stride;   /* bytes from block b to block b + 1             */
    size_t token_stride;   /* bytes from token t to t + 1 of a block        */
    size_t head_stride;    /* bytes from kv head h to h + 1                 */
} rkv_kv_buffers;
rkv_status rkv_pool_create_external(const rkv_pool_config *cfg,
                                    const rkv_kv_buffers *kv, rkv_pool **out);
/* Strides of the pool's KV addressing (above), pool-owned or not; each
 * pointer may be NULL. RKV_ERR_STATE for a metadata-only pool. */
rkv_status rkv_pool_kv_strides(const rkv_pool *pool, size_t *block_stride,
                               size_t *token_stride, size_t *head_stride);
/* 1 for a pool over server-owned buffers, else 0 (NULL: 0). */
int rkv_pool_kv_external(const rkv_pool *pool);

/* O(1). A new block has ref count 1. alloc_n gives all n blocks or none
 * (RKV_ERR_NO_SPACE, nothing taken). The pool never evicts: use
 * rkv_tree_alloc_blocks() to evict cached prefixes as needed. */
rkv_status rkv_pool_alloc(rkv_pool *pool, rkv_block_id *out);
rkv_status rkv_pool_alloc_n(rkv_pool *pool, uint32_t n, rkv_block_id *out);

/* ref adds one reference to an allocated block; unref drops one and frees the
 * block at zero. Either on a free or out-of-range block: RKV_ERR_STATE /
 * RKV_ERR_INVALID_ARG and nothing changes. unref_n validates all ids first
 * (a free block, or one listed more times than it has references, refuses
 * the whole call). */
rkv_status rkv_pool_ref(rkv_pool *pool, rkv_block_id id);
rkv_status rkv_pool_unref(rkv_pool *pool, rkv_block_id id);
rkv_status rkv_pool_unref_n(rkv_pool *pool, uint32_t n, const rkv_block_id *ids);
uint32_t rkv_pool_refcount(const rkv_pool *pool, rkv_block_id id); /* 0 = free */

/* Chained block hash: h(i) = XXH3-64 over (h(i-1), namespace, the page's
 * tokens); h(-1) = RKV_HASH_ROOT. Equal hashes mean equal full prefixes (up
 * to 64-bit collisions; the tree itself always confirms with tokens). */
#define RKV_HASH_ROOT ((uint64_t)0)
uint64_t rkv_block_hash(uint64_t parent_hash, uint64_t ns,
                        const int32_t *page_tokens, uint32_t page_size);
uint64_t rkv_pool_block_hash(const rkv_pool *pool, rkv_block_id id);
rkv_status rkv_pool_set_block_hash(rkv_pool *pool, rkv_block_id id,
                                   uint64_t hash);

/* Copies whole blocks (all layers, K and V). Device to device within the
 * pool, or between the pool and a host buffer of n * bytes_per_block bytes
 * (block i of the buffer <-> ids[i]). Works on host pools too. The host
 * buffer's format does not depend on the pool's layout: block i holds its
 * segments K[0], V[0], K[1], ... each [page_size][num_kv_heads][head_dim]
 * (so a server-owned pool's blocks copy to the same bytes as a pool-owned
 * one's, and the tiers store them alike). */
rkv_status rkv_pool_copy_blocks(rkv_pool *pool, uint32_t n,
                                const rkv_block_id *src,
                                const rkv_block_id *dst);
rkv_status rkv_pool_copy_to_host(rkv_pool *pool, uint32_t n,
                                 const rkv_block_id *ids, void *host_buf);
rkv_status rkv_pool_copy_from_host(rkv_pool *pool, uint32_t n,
                                   const rkv_block_id *ids,
                                   const void *host_buf);

/* Verifies every invariant (free + used = total, free stack holds exactly the
 * blocks with ref count 0, no duplicates). RKV_ERR_CORRUPT with a message. */
rkv_status rkv_pool_check(const rkv_pool *pool);

/* ------------------------------------------------------------------------ */
/* radix/: the token radix tree                                             */
/* ------------------------------------------------------------------------ */

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
                               order eviction first (radix/evict_learned.c).
                               Guarded: a shadow LRU counts what LRU would
                               hit, and once the policy falls behind it
                               eviction is LRU (radix/evict_guard.c), so it
                               never loses to LRU by more than ~0.2 point */
} rkv_evict_policy;
/* A policy's name ("lru", "priority", "learned") and back, from one table
 * (radix/evict_names.c). from_name: RKV_ERR_INVALID_ARG for an unknown name
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
 * another page), or given for two new pages, is RKV_ERR_INVALID_ARG. */
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

/*
 * Retention (radix/tree_retain.c): priorities and TTL pins for agentic
 * serving. Time is the caller's: every call that needs it takes now_ms
 * (any monotonic millisecond clock; it must never go back) and the library
 * never reads a clock. Calls without now_ms (match, insert, evict,
 * alloc_blocks) use the time of the last call that had one.
 *
 *   - Priority (0..100, default 35; TensorRT-LLM's semantics: higher is
 *     evicted later) belongs to cached pages; with RKV_EVICT_PRIORITY,
 *     eviction takes the lowest-priority leaf first, least recently used
 *     among equals (101 LRU lists, O(1) per eviction). RKV_EVICT_LRU keeps
 *     priorities but ignores them. New pages get 35; a split keeps them.
 *   - A pin keeps tokens[0..pin_tokens) (full pages) cached until its
 *     deadline, now_ms + ttl_ms; a later retain of the same prefix by the
 *     same owner, or rkv_tree_pins_extend, pushes the deadline out (never
 *     in): each use of the prefix should renew it ("t ms after last use").
 *     Pinned pages are out of eviction like locked ones (they count in
 *     stats.locked_blocks). A pin whose deadline is <= now_ms expires at the
 *     next call with now_ms and its pages return to ordinary eviction with
 *     their last-use order (expiry is not a use). Deadlines saturate at
 *     UINT64_MAX (a pin made then lasts until the time reaches UINT64_MAX);
 *     a pin at now_ms == UINT64_MAX, which could only be born expired, is
 *     refused (RKV_ERR_INVALID_ARG, nothing changes).
 *   - Cap: pages under pins (counted once, the whole prefix) never exceed
 *     max_pinned_pct of the pool; a pin that would is refused
 *     (RKV_ERR_PIN_CAP, nothing changes; retry without the pin).
 *   - Progress: rkv_tree_alloc_blocks evicts unpinned pages first; only
 *     when free + unpinned-evictable blocks cannot serve it does it revoke
 *     pins, earliest deadline first, just enough (stats pins_revoked), so a
 *     pin never makes a running request fail for space. With a lower tier
 *     attached (rkv_tree_attach_tiers, drop_pinned 0) such a pin is
 *     LOWERED instead (stats pins_demoted): it gives up its hold on the
 *     device, its pages are demoted like any other, and it keeps them in
 *     the lower tiers until its deadline: the lowest tier never drops a
 *     pinned page. Lowered pins expire, extend and release like others;
 *     each lower tier holds at most max_pinned_pct of its capacity in
 *     pinned pages, and a lowered pin is revoked (pins_revoked) when that
 *     cap would be passed or when its pages leave the tree anyway (a
 *     failed copy, a corrupt read, an insert that diverges from the
 *     prefix inside a node). Loaded back, or inserted again by
 *     rkv_tree_insert (whole or its start: the lower rest stays; a branch
 *     that leaves the insert's path at a node boundary stays too), its pages are ordinary device
 *     pages (evictable, demoted again when evicted) and the pin stays
 *     lowered: they count in pinned_lowered_on_device, not in
 *     pinned_blocks nor pinned_by_medium[]; a retain
 *     of the same prefix by the same owner makes it a device pin again. A pin on pages a
 *     running request also locks is not revoked (that frees nothing). rkv_tree_evict never
 *     revokes a leased pin (a lowered one whose device pages it evicts
 *     and cannot demote, no lower slot to be had, is revoked as above).
 *   - Owners: any 64-bit session id. rkv_tree_pins_release drops all of an
 *     owner's pins (session ended); rkv_tree_pins_extend renews them (a
 *     tool call started; expected back in ttl_ms). Both are O(pins held).
 *   - rkv_tree_reset drops every pin (it still refuses while leases are
 *     held); rkv_tree_destroy drops them with the tree.
 *   - A priority may last a while (priority_duration_ms, TensorRT-LLM's
 *     retention duration): its deadline is kept per node (a split copies
 *     it) and checked at every call with now_ms, like pin deadlines: once
 *     the deadline is <= now_ms the node's priority is
 *     RKV_PRIORITY_DEFAULT again and it is evicted among default pages in
 *     its last-use order (a revert is not a use). The check scans the
 *     nodes only when the earliest such deadline has passed (O(nodes) per
 *     time move that reverts something, nothing otherwise). A later
 *     priority on the node replaces both priority and deadline.
 *   - Namespace TTL (rkv_tree_set_namespace_ttl): a per-namespace (SGLang
 *     salt) default pin lifetime for retentions that give no ttl_ms.
 */
#define RKV_PRIORITY_MAX 100
#define RKV_NS_TTL_MAX 64
#define RKV_PRIORITY_DEFAULT 35

typedef struct rkv_retention {
    int priority;        /* 0..100 for pages wholly inside
                            [prio_begin, prio_end) tokens; -1: unchanged   */
    size_t prio_begin, prio_end;
    size_t pin_tokens;   /* pin tokens[0..pin_tokens) (rounded down to full
                            pages, <= n); 0: no pin                        */
    uint64_t ttl_ms;     /* pin deadline = now_ms + ttl_ms, saturated at
                            UINT64_MAX; 0 with a pin: the namespace's TTL
                            (rkv_tree_set_namespace_ttl), refused if it
                            has none                                       */
    uint64_t owner;      /* session that owns the pin                      */
    int session_end;     /* rkv_request_desc: non-zero on a session's last
                            request (its answer ends without a tool call):
                            when it finishes, rkv_tree_session_end(owner)
                            over its prompt + output. rkv_tree_retain
                            ignores it (call rkv_tree_session_end)       */
    uint64_t priority_duration_ms; /* priority >= 0: after now_ms + this
                            (saturated) the range's pages go back to
                            RKV_PRIORITY_DEFAULT; 0: the priority stays
                            (until set again). Needs priority >= 0     */
} rkv_retention;
/* priority -1, no pin. */
void rkv_retention_init(rkv_retention *r);

typedef struct rkv_retain_result {
    uint32_t prio_pages;   /* cached pages whose priority was set          */
    uint32_t pinned_pages; /* cached pages the pin covers (0: no pin made) */
    uint32_t new_pinned_pages; /* of those, pages not pinned before        */
} rkv_retain_result;

/* Applies r to the cached part of tokens[0..n) in ns (pages not cached are
 * ignored: insert first). Advances the time to now_ms first, expiring pins
 * as rkv_tree_set_time does; that part stays even when the rest fails
 * (RKV_ERR_INVALID_ARG, RKV_ERR_NOMEM, RKV_ERR_PIN_CAP), which changes
 * nothing else. May split nodes at range ends (handles stay valid). out may
 * be NULL. */
rkv_status rkv_tree_retain(rkv_tree *tree, rkv_namespace ns,
                           const int32_t *tokens, size_t n,
                           const rkv_retention *r, uint64_t now_ms,
                           rkv_retain_result *out);
/* Default pin TTL of namespace ns: a pin in ns whose retention has
 * ttl_ms == 0 lasts ttl_ms of this (a retention's own ttl_ms > 0 wins).
 * ttl_ms 0 removes ns's default (such pins are refused again). Pins
 * already made keep their deadlines. Up to RKV_NS_TTL_MAX namespaces
 * have one: another is RKV_ERR_NO_SPACE (nothing changes). The table
 * survives rkv_tree_reset. O(RKV_NS_TTL_MAX). */
rkv_status rkv_tree_set_namespace_ttl(rkv_tree *tree, rkv_namespace ns,
                                      uint64_t ttl_ms);
/* *ttl_ms = ns's default pin TTL, 0 if none. */
rkv_status rkv_tree_namespace_ttl(const rkv_tree *tree, rkv_namespace ns,
                                  uint64_t *ttl_ms);
/* Sets the tree's time; pins with deadline <= now_ms expire.
 * RKV_ERR_INVALID_ARG if now_ms is before the tree's time. */
rkv_status rkv_tree_set_time(rkv_tree *tree, uint64_t now_ms);
/* Every pin of owner gets deadline max(deadline, now_ms + ttl_ms) (after
 * the time moved to now_ms). count (may be NULL): pins extended. */
rkv_status rkv_tree_pins_extend(rkv_tree *tree, uint64_t owner,
                                uint64_t ttl_ms, uint64_t now_ms,
                                uint32_t *count);
/* Drops every pin of owner now; count (may be NULL): pins dropped. */
rkv_status rkv_tree_pins_release(rkv_tree *tree, uint64_t owner,
                                 uint32_t *count);
/* A session ended (its agent answered without a tool call): releases
 * owner's pins, then marks the pages of the cached context tokens[0..n)
 * in ns that only this session used -- from the context's end up to the
 * first node someone else also uses (another branch, a lock, a pin) --
 * so that they are evicted first, under every policy (least recently
 * used first among them). A later match or insert through a marked page
 * makes it ordinary again. Nothing is marked when the cached path goes on
 * past n (another context extends it). pages_out (may be NULL): pages
 * marked. RKV_ERR_NOMEM only when no retention call made the tree's
 * retention table yet (nothing changes then). */
rkv_status rkv_tree_session_end(rkv_tree *tree, rkv_namespace ns,
                                const int32_t *tokens, size_t n,
                                uint64_t owner, uint32_t *pages_out);
/* *blocks = pinned pages that only pins hold (no lock under them): what
 * rkv_tree_alloc_blocks may revoke once free + evictable blocks fall short.
 * A scheduler counts them as available. O(1) (a counter the tree keeps). */
rkv_status rkv_tree_pins_yieldable(const rkv_tree *tree, uint64_t *blocks);

typedef struct rkv_retention_stats {
    uint64_t pins;          /* pins held (lowered ones included)            */
    uint64_t pinned_blocks; /* DEVICE pages under at least one leased pin
                               (as before: lowered pins hold no device page)*/
    uint64_t pin_cap_blocks; /* the cap on pinned_blocks                    */
    uint64_t now_ms;        /* the tree's time                              */
    uint64_t pins_made, pins_renewed, pins_expired, pins_released,
             pins_revoked, pins_refused;
    uint64_t pins_demoted;  /* pins that device pressure lowered instead of
                               revoking (cumulative)                        */
    uint64_t pins_lowered;  /* of `pins`, lowered ones now                  */
    /* by rkv_medium: [DEVICE] = pinned_blocks / pin_cap_blocks; [HOST],
     * [DISK] = pages of that lower tier under a lowered pin, and their cap
     * (max_pinned_pct of the store's capacity); 0 without that tier */
    uint64_t pinned_by_medium[3];
    uint64_t pin_cap_by_medium[3];
    /* DEVICE pages (LOADING ones included) under a lowered pin: loaded
     * back or inserted again. Not leased and evictable (demoted, pinned
     * again, when evicted), so in neither pinned_blocks nor its cap nor
     * pinned_by_medium[]; 0 without a lower tier */
    uint64_t pinned_lowered_on_device;
    uint64_t prio_reverted; /* nodes whose priority went back to the default
                               when its priority_duration_ms ran out
                               (cumulative)                                 */
} rkv_retention_stats;
rkv_status rkv_tree_retention_stats(const rkv_tree *tree,
                                    rkv_retention_stats *out);
/* A cached node's priority. */
rkv_status rkv_tree_node_priority(const rkv_tree *tree, rkv_node node,
                                  int *priority);

/* Drops every cached prefix. RKV_ERR_BUSY (nothing changes) while any lease
 * is held. Every handle from before becomes stale. Cumulative counters
 * (queried/hit tokens, inserted, evicted, splits) are kept. */
rkv_status rkv_tree_reset(rkv_tree *tree);

/*
 * KV events: what the tree caches and drops, for an embedder that tells a
 * fleet router (router/, include/radixkv_router.h) or any other consumer.
 * Off unless rkv_tree_config.event_ring > 0; then the ring of that many
 * events is allocated at create time and recording never allocates, so it
 * cannot make a call fail.
 *
 *   BLOCK_STORED   pages became cached: hashes[] are their chained block
 *                  hashes (rkv_block_hash) in chain order, parent_hash is
 *                  the hash before hashes[0] (RKV_HASH_ROOT at the
 *                  namespace root), ns and page_size say what they cover.
 *   BLOCK_REMOVED  pages were evicted: hashes[] in the order dropped (a
 *                  node's tail first); ns is set, parent_hash is 0.
 *   ALL_CLEARED    rkv_tree_reset dropped everything.
 *   RESYNC         events were lost (the ring was full): `lost` events
 *                  starting at seq were dropped. The consumer must rebuild
 *                  its view from rkv_tree_snapshot().
 *
 * Every event has a sequence number, per tree, from 1, strictly increasing;
 * dropped events use up theirs too, so the next event after a RESYNC has
 * seq == resync.seq + resync.lost. A long store or eviction is split into
 * events of at most RKV_EVENT_MAX_HASHES hashes (each with its own seq and
 * the right parent_hash). medium says where: with lower tiers attached
 * (rkv_tree_attach_tiers) a page entering the host tier is a BLOCK_STORED
 * with medium RKV_MEDIUM_HOST and leaving it a BLOCK_REMOVED with that
 * medium; device events are unchanged (a demoted page is a device
 * BLOCK_REMOVED, a loaded page a device BLOCK_STORED when its load
 * completes).
 *
 * Exactness: replaying the events in order into a set of (ns, hash, parent)
 * gives rkv_tree_snapshot() after every call. A call that fails records
 * nothing, with one documented exception: rkv_tree_evict and
 * rkv_tree_alloc_blocks can evict and then fail (blocks referenced outside
 * the tree; see rkv_tree_evict), and record the evictions that happened.
 *
 * Overflow: an event is recorded only while it leaves one slot free; when
 * it would not, a RESYNC marker takes that slot at the point of loss and
 * every later event is dropped (counted in the marker) until the marker is
 * drained. Nothing is lost silently.
 *
 * Token ids (rkv_tree_config.event_tokens > 0; off by default): every
 * BLOCK_STORED event (any medium) also carries the token ids of its pages,
 * num_hashes * page_size of them (page i's at [i * page_size, (i + 1) *
 * page_size)), what vLLM-style consumers put in their BlockStored. They
 * are kept in a second ring of event_tokens ids, also allocated at create;
 * an event whose ids do not fit there is lost like one that finds the
 * event ring full (a RESYNC marker). Read them with
 * rkv_tree_events_drain_tokens; rkv_tree_events_drain drops them. Cost:
 * one copy of the stored pages' tokens per stored page (bench/RESULTS.md).
 */
#define RKV_EVENT_MAX_HASHES 16u

typedef enum rkv_event_kind {
    RKV_EVENT_BLOCK_STORED = 1,
    RKV_EVENT_BLOCK_REMOVED = 2,
    RKV_EVENT_ALL_CLEARED = 3,
    RKV_EVENT_RESYNC = 4
} rkv_event_kind;

typedef enum rkv_medium {
    RKV_MEDIUM_DEVICE = 0, /* the pool's memory (GPU or host pool)         */
    RKV_MEDIUM_HOST = 1,   /* the host tier (rkv_tree_attach_tiers)         */
    RKV_MEDIUM_DISK = 2,   /* the disk tier                                 */
    RKV_MEDIUM_COUNT = 3
} rkv_medium;

typedef struct rkv_event {
    uint64_t seq;
    uint8_t kind;          /* rkv_event_kind                                */
    uint8_t medium;        /* rkv_medium                                    */
    uint16_t num_hashes;   /* 0..RKV_EVENT_MAX_HASHES                       */
    uint32_t page_size;    /* tokens per block                              */
    rkv_namespace ns;
    uint64_t parent_hash;  /* BLOCK_STORED: hash before hashes[0]           */
    uint64_t lost;         /* RESYNC: events dropped from seq on            */
    uint64_t hashes[RKV_EVENT_MAX_HASHES];
} rkv_event;

/* Moves up to max of the oldest recorded events into out[] (caller-owned
 * memory; nothing in it points into the tree, so it stays valid for as
 * long as the caller keeps it) and frees their ring slots. *n_out gets the
 * count (0: none pending). Draining a RESYNC marker re-arms recording.
 * RKV_ERR_STATE when the tree was created with events off. */
rkv_status rkv_tree_events_drain(rkv_tree *tree, rkv_event *out, uint32_t max,
                                 uint32_t *n_out);
/* The same, with token ids: each drained BLOCK_STORED event's num_hashes *
 * page_size ids are written to tokens[] one event after another, in event
 * order (other kinds carry none), *ntokens_out gets how many. Stops before
 * an event whose ids would not fit in tokens_cap (they stay queued);
 * RKV_ERR_NO_SPACE, nothing drained, when even the first does not
 * (tokens_cap >= RKV_EVENT_MAX_HASHES * page_size always fits one).
 * Caller-owned memory, as drain. RKV_ERR_STATE when the tree was created
 * with event_ring or event_tokens 0. */
rkv_status rkv_tree_events_drain_tokens(rkv_tree *tree, rkv_event *out,
                                        uint32_t max, int32_t *tokens,
                                        size_t tokens_cap, uint32_t *n_out,
                                        size_t *ntokens_out);

/* One cached block, as a snapshot lists it. */
typedef struct rkv_block_entry {
    rkv_namespace ns;
    uint64_t hash;
    uint64_t parent_hash;  /* RKV_HASH_ROOT for a namespace's first page    */
    uint32_t medium;       /* rkv_medium                                    */
    uint32_t reserved;     /* 0                                             */
} rkv_block_entry;

/* Every cached block (parents before children) into out[0..cap), one entry
 * per (block, medium) with lower tiers (a LOADING page by its host copy
 * only): the full
 * state for a consumer that must resync. *n_out gets the number of cached
 * blocks; out == NULL (cap 0) only counts. cap too small: RKV_ERR_NO_SPACE
 * (nothing written; *n_out says how many are needed). *seq_out (may be
 * NULL) gets the seq of the last event recorded or dropped so far (0 if
 * none, or events off): the snapshot is the state after that event, so a
 * consumer applies it and then only events with a larger seq. Read-only;
 * works with events off too. O(cached blocks + nodes). */
rkv_status rkv_tree_snapshot(const rkv_tree *tree, rkv_block_entry *out,
                             size_t cap, size_t *n_out, uint64_t *seq_out);

/* rkv_tree_snapshot in bounded pieces, for a tree too large to list in one
 * message. Zero a cursor (rkv_snapshot_cursor_init), then call until *done:
 * each call writes the next up to cap entries (same order and content as
 * rkv_tree_snapshot) and sets *n_out; the first call fills cur->seq (the
 * snapshot is the state after that event, as seq_out above) and
 * cur->total (blocks in all chunks). The tree must not change between the
 * first and the last call: a change is RKV_ERR_STATE (start a new cursor);
 * with events on every change is detected (the seq moves), with events off
 * only one that changes the block count or the cursor's node. A call
 * after *done writes nothing and says done again. On failure the cursor is
 * unchanged. O(cap + nodes walked) per call, no allocation. */
typedef struct rkv_snapshot_cursor {
    uint64_t seq;       /* out: the snapshot is after this event           */
    uint64_t total;     /* out: blocks in the whole snapshot               */
    uint64_t done;      /* out: entries written so far                     */
    uint32_t root, node, node_gen, page, state, reserved; /* private       */
} rkv_snapshot_cursor;
void rkv_snapshot_cursor_init(rkv_snapshot_cursor *cur);
rkv_status rkv_tree_snapshot_chunk(const rkv_tree *tree,
                                   rkv_snapshot_cursor *cur,
                                   rkv_block_entry *out, size_t cap,
                                   size_t *n_out, int *done);

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
     * pool), how many times the policy fell behind it (eviction became
     * LRU until the allowed deficit had doubled), and 1 while eviction is
     * LRU for that reason */
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

/* ------------------------------------------------------------------------ */
/* tier/: host and disk tiers below the device pool                         */
/* ------------------------------------------------------------------------ */

/*
 * A page evicted from the device pool can be kept in a lower tier -- host
 * memory, then a disk file -- and its node stays in the tree with its
 * residency recorded; only the lowest tier's eviction drops it. Each
 * lower tier evicts least recently used first; under RKV_EVICT_PRIORITY
 * lowest priority first, least recently used among equals (a page keeps
 * its priority below the device), as the device does. Design
 * notes (what was taken from SGLang HiCache, TensorRT-LLM and vLLM, and
 * what differs) are in tier/README.md and radix/tree_tier.c.
 *
 * Residency invariant (rkv_tree_check verifies it):
 *   - every cached page is resident in at least one medium;
 *   - DEVICE residency is prefix-closed: a page on the device has its
 *     parent page on the device, so the device part of any path is a
 *     prefix of it and matching works exactly as without tiers;
 *   - below the device frontier a path continues in host and/or disk pages
 *     (in any mix); a page is dropped from the tree only when it leaves its
 *     last medium, and then only as a leaf (a page with cached children is
 *     demoted to the next tier down instead, or kept).
 *   - a page in a lower tier carries its chained hash and namespace with
 *     its KV bytes; a disk block records both and is verified when read
 *     back (a mismatch or short read is a miss, never wrong KV).
 *
 * Ownership: stores are created by the caller, attached to one tree
 * (rkv_tree_attach_tiers) which borrows them (they must outlive it) and
 * owns their slots from then on. One tree per store (RKV_ERR_BUSY).
 */
typedef struct rkv_store rkv_store;

typedef enum rkv_write_policy {
    RKV_WRITE_BACK = 0,      /* copy down when evicted from the device
                                (default)                                 */
    RKV_WRITE_THROUGH = 1,   /* copy down when inserted                   */
    RKV_WRITE_SELECTIVE = 2  /* copy down once a page was hit k times (a
                                hit: a non-peek rkv_tree_match_tiers that
                                matches it on the device; the scheduler's
                                admission is one)                         */
} rkv_write_policy;

typedef struct rkv_store_config {
    int medium;               /* RKV_MEDIUM_HOST or RKV_MEDIUM_DISK        */
    uint64_t capacity_blocks; /* blocks the tier holds, >= 1 (or 0 and
                                 capacity_bytes set)                       */
    uint64_t capacity_bytes;  /* alternative: blocks = bytes / block_bytes;
                                 when both are set the smaller wins         */
    size_t block_bytes;       /* KV bytes per block: must equal the pool's
                                 rkv_pool_bytes_per_block; 0 = metadata
                                 only (a simulation: no memory, no file)   */
    const char *path;         /* DISK: a file, or a directory in which the
                                 file radixkv-tier.blocks is made; copied  */
    int pinned;               /* HOST: 1 (default) = page-locked memory via
                                 the CUDA backend when it is loaded, else
                                 aligned host memory; 0 = always aligned   */
    int direct_io;            /* DISK: 1 (default) = O_DIRECT where the
                                 filesystem allows it, buffered otherwise  */
    int io_uring;             /* DISK: 1 (default) = io_uring when built
                                 with liburing, pread/pwrite otherwise     */
    const unsigned char *mac_key; /* DISK: NULL (default) = records carry
                                 XXH3 checksums, which catch accidents but
                                 not tampering; else RKV_STORE_MAC_KEY_BYTES
                                 secret bytes: every record carries a keyed
                                 BLAKE2b MAC and one that fails it (forged,
                                 or from another file) is a miss. Copied at
                                 create (the caller may wipe its buffer
                                 then; the store wipes its copy at destroy).
                                 Needs libsodium at build time, else
                                 RKV_ERR_UNSUPPORTED; on a HOST store
                                 RKV_ERR_INVALID_ARG                       */
    int warm_restart;         /* DISK: 0 (default) = the file is started
                                 afresh at create and removed at destroy;
                                 1 = a file of the same identity (below)
                                 left by an earlier store is reopened and
                                 its valid records are re-indexed when the
                                 store is attached to a tree (the tree's
                                 paths hit again); a file of another
                                 identity is refused (RKV_ERR_INVALID_ARG,
                                 the field in the message) and kept at
                                 destroy. Needs page_tokens >= 1        */
    uint32_t page_tokens;     /* DISK: tokens per page (the tree's page
                                 size): records then carry their token ids
                                 and parent hash, which a warm restart
                                 rebuilds the tree from; 0 (default) =
                                 records carry none                       */
    uint64_t layout_id;       /* DISK: the embedder's fingerprint of the KV
                                 layout (layers, heads, head_dim, dtype;
                                 rkv_pool_layout_id gives one), kept in the
                                 file header and compared at warm restart */
    uint64_t model_id;        /* DISK: the embedder's model / namespace id,
                                 kept and compared likewise              */
} rkv_store_config;
#define RKV_STORE_MAC_KEY_BYTES 32
#define RKV_STORE_MAX_PAGE_TOKENS 65536u
/* A fingerprint of the pool's KV layout (page size, layers, KV heads,
 * head_dim, dtype, bytes per block) for rkv_store_config.layout_id: the
 * same layout gives the same id on every host. 0 for NULL. */
uint64_t rkv_pool_layout_id(const rkv_pool *pool);
/* medium's defaults; capacities are 0 and must be set. */
void rkv_store_config_init(rkv_store_config *cfg, int medium);
rkv_status rkv_store_create(const rkv_store_config *cfg, rkv_store **out);
void rkv_store_destroy(rkv_store *store); /* NULL is fine; not while attached */
uint64_t rkv_store_capacity_blocks(const rkv_store *store);
uint64_t rkv_store_used_blocks(const rkv_store *store);
rkv_status rkv_store_check(const rkv_store *store);
/* What a store is using now, for logs and reports. */
typedef struct rkv_store_info {
    int medium;               /* RKV_MEDIUM_HOST or RKV_MEDIUM_DISK        */
    uint64_t capacity_blocks, used_blocks;
    size_t block_bytes;       /* 0: metadata only                          */
    int pinned;               /* HOST: page-locked memory from the CUDA
                                 backend (0: aligned host memory)          */
    int direct_io;            /* DISK: O_DIRECT in use (0: buffered, as
                                 asked or after the filesystem refused it) */
    int io_uring;             /* DISK: io_uring in use (0: pread/pwrite, as
                                 asked, without liburing at build time, or
                                 when the kernel refuses a ring)           */
    const char *path;         /* DISK: the file (valid while the store
                                 lives); NULL otherwise                    */
    uint64_t file_bytes;      /* DISK: the file's size as sized at create  */
    int file_origin;          /* DISK: rkv_store_file_origin: how the store
                                 came by its file                           */
    int keyed;                /* DISK: records carry a keyed MAC           */
    uint64_t reads, writes;   /* DISK: records read / written so far       */
    uint64_t warm_records;    /* DISK, warm restart: records re-indexed
                                 into the tree at attach                  */
    uint64_t warm_skipped;    /* ... records that failed verification or
                                 could not be read (torn, corrupt, I/O)   */
    uint64_t warm_dropped;    /* ... valid records the tree did not take
                                 (orphans whose parent is missing,
                                 duplicates, no token ids)                */
} rkv_store_info;
rkv_status rkv_store_get_info(const rkv_store *store, rkv_store_info *out);
/* rkv_store_info.file_origin. An existing file is taken only when it is a
 * regular file (not a link), owned by the caller's user, readable and
 * writable by no one else, with one name, and empty or a tier file (an
 * intact, torn or zeroed header); anything else is refused
 * (RKV_ERR_INVALID_ARG) and left as it is. A file the store created or
 * took over from an earlier store is removed at destroy; an empty file
 * given by the caller stays. */
typedef enum rkv_store_file_origin {
    RKV_STORE_FILE_CREATED = 0,   /* made by this store                     */
    RKV_STORE_FILE_EMPTY = 1,     /* an empty file the caller made          */
    RKV_STORE_FILE_REUSED = 2,    /* left by an earlier store (intact
                                     header): started afresh                */
    RKV_STORE_FILE_RECREATED = 3, /* left by a crash (torn or zeroed
                                     header, or an older format): started
                                     afresh                                 */
    RKV_STORE_FILE_WARM = 4       /* warm_restart: an intact file of the
                                     same identity, records kept            */
} rkv_store_file_origin;

typedef struct rkv_tier_config {
    rkv_store *host;          /* may be NULL                               */
    rkv_store *disk;          /* may be NULL; below host (or directly below
                                 the device when host is NULL)             */
    int write_policy;         /* rkv_write_policy                           */
    uint32_t selective_hits;  /* k for RKV_WRITE_SELECTIVE (default 2)      */
    uint32_t store_queue;     /* stores in flight at most (blocks; default
                                 1024); a store that finds it full is not
                                 made (a write-back eviction then drops the
                                 page instead of blocking)                 */
    int drop_pinned;          /* 0 (default): a pinned page may be demoted
                                 but is never dropped from the lowest tier
                                 while pinned (device pressure lowers
                                 pins, see Retention); 1: pins hold on the
                                 device only and device pressure revokes
                                 them (the behaviour before issue 13)     */
} rkv_tier_config;
void rkv_tier_config_init(rkv_tier_config *cfg);

/* Attaches lower tiers to an EMPTY tree (nothing cached, no lease:
 * RKV_ERR_BUSY otherwise); NULL cfg or both stores NULL detaches. The
 * stores' block_bytes must match the pool (RKV_ERR_INVALID_ARG). Lower
 * tiers: a host store, a disk store alone (then "host" in the calls below
 * means that store: store_prefix swaps out to the disk), or both: the chain
 * device -> host -> disk, where the host's LRU writes what it evicts to the
 * disk (a node's pages at a time; on disk it stays in the tree) and only
 * the disk's LRU (leaves first, tail first) drops pages from the tree; a
 * load from the disk reads and verifies the records and frees the disk
 * copies (under every policy: a device page's copy is a host copy). With a tier attached, rkv_tree_evict /
 * rkv_tree_alloc_blocks demote instead of dropping: the least recently used
 * device-frontier page's KV goes to the host (write-back: unless already
 * there; the copy is made at once, as the device block must be free when
 * the call returns) and its node stays; the tail of a node is split off to
 * demote just what is needed when memory allows (else the whole node goes
 * down: more is freed than asked, nothing is lost). Under write-back the
 * tiers are exclusive (a completed load frees the host copy); through and
 * selective keep it. The lowest tier evicts least recently used leaf
 * pages, tail first (under RKV_EVICT_PRIORITY the host and the disk take
 * the lowest priority first, least recently used among equals, as the
 * device does). Pinned and locked pages are never demoted; a pin that
 * device pressure would revoke is lowered instead (drop_pinned 0): its
 * pages may then be demoted but the lowest tier never drops them while the
 * pin lives (see Retention). */
rkv_status rkv_tree_attach_tiers(rkv_tree *tree, const rkv_tier_config *cfg);

/* For a clean stop before a warm restart (rkv_store_config.warm_restart):
 * demotes every evictable device page (write-back, as rkv_tree_evict) and,
 * with a host store above the disk, writes every host page down to the
 * disk, so that the paths survive in the one tier that outlives the
 * process (without it a restart finds the disk's pages without their
 * parents, which were on the device or the host, and drops them). Locked
 * pages stay where they are. No tier: RKV_ERR_STATE. */
rkv_status rkv_tree_tier_flush(rkv_tree *tree);

/* Residency of a match: rkv_tree_match's matched_tokens / blocks_out are
 * the DEVICE prefix (as without tiers); rkv_tree_match_tiers also says how
 * far the path goes on in lower tiers. A non-peek call counts device hits
 * and lower hits separately in rkv_tier_stats. */
typedef struct rkv_tier_match {
    size_t host_tokens;  /* after matched_tokens: tokens whose page is in
                            host (maybe also on disk)                      */
    size_t disk_tokens;  /* of the lower part, pages only on disk          */
    size_t lower_tokens; /* host_tokens + disk_tokens: the pages right after
                            the device prefix that a load can promote      */
    uint64_t loading_ticket; /* the pages right after the device prefix are
                            being promoted by a load in flight (another
                            caller's rkv_tree_load): its ticket, else 0;
                            they match on the device once it completes
                            (lower_tokens is then 0: they are not lower) */
    size_t loading_tokens; /* the tokens of that load this match covers   */
} rkv_tier_match;
rkv_status rkv_tree_match_tiers(rkv_tree *tree, rkv_namespace ns,
                                const int32_t *tokens, size_t n,
                                rkv_block_id *blocks_out, unsigned flags,
                                rkv_match *out, rkv_tier_match *tiers_out);

/*
 * Loads (promotion). rkv_tree_load promotes up to max_pages lower-tier
 * pages that follow the device prefix of tokens[0..n): it allocates device
 * blocks (evicting other pages, never this path), queues the copies and
 * returns a ticket and an owned lease on the path's deepest loading node
 * (the caller unlocks it once the ticket completed). The pages are LOADING until the
 * ticket completes: not matchable on the device, not evictable. Copies run
 * in rkv_tree_tier_poll (host backend: memcpy / pread; CUDA backend:
 * copies on a stream, completion by event). A request waits for its own
 * ticket, never for others'.
 * A load that fails (copy error, I/O error, verification failure, injected
 * fault) leaves each page where it was (a page whose disk copy failed
 * verification leaves that tier; if it was its last copy the page and the
 * lower-only pages under it leave the tree), frees the device blocks, and
 * the caller computes those tokens; nothing is lost or double-freed.
 * The load's lease cannot be released before its ticket completes
 * (rkv_tree_unlock: RKV_ERR_BUSY); after a failure it is on the node just
 * above the path (the device prefix the caller had). Poll reports a load
 * only when out[] has room for it (it stays queued otherwise).
 * Nothing to load: *out zeroed, RKV_OK.
 * blocks_out (may be NULL; room for min(max_pages, n / page_size) ids)
 * gets the num_pages DEVICE blocks the load copies into, in token order
 * (host pages before disk pages): the destinations an engine's copy
 * kernels write, and, once the ticket completed, the blocks a match
 * returns for those pages. They are the tree's blocks, valid while the
 * load's lease is held (a failed load frees them at poll).
 */
typedef struct rkv_load {
    uint64_t ticket;      /* 0: nothing queued                              */
    uint32_t num_pages;   /* pages being promoted                           */
    uint32_t disk_pages;  /* of them, read from disk                        */
    size_t device_tokens; /* the device prefix once the ticket completes   */
    rkv_lease lease;      /* on the deepest loading node; caller releases  */
} rkv_load;
rkv_status rkv_tree_load(rkv_tree *tree, rkv_namespace ns,
                         const int32_t *tokens, size_t n, uint32_t max_pages,
                         rkv_block_id *blocks_out, rkv_load *out);

/* Swap instead of recompute: copies the cached DEVICE pages of
 * tokens[0..n) that have no host copy yet down to the host tier now, ahead
 * of the write policy (a preempted request's context, inserted by the
 * scheduler, so that when device eviction takes it the host still has it
 * and a later rkv_tree_load restores it). Bounded by the store queue like
 * any store (pages that do not fit are skipped). *ticket gets a
 * RKV_TRANSFER_SWAP_OUT ticket reported by rkv_tree_tier_poll, or 0 when
 * nothing was queued; *pages (may be NULL) the pages queued. blocks_out
 * (may be NULL; room for n / page_size ids; its contents are undefined on
 * failure) gets the *pages queued pages' SOURCE device blocks, in token
 * order: the tree's blocks, cached pages an engine must not overwrite
 * before the ticket completes. No host tier: RKV_ERR_STATE. */
rkv_status rkv_tree_store_prefix(rkv_tree *tree, rkv_namespace ns,
                                 const int32_t *tokens, size_t n,
                                 rkv_block_id *blocks_out, uint64_t *ticket,
                                 uint32_t *pages);

typedef enum rkv_transfer_kind {
    RKV_TRANSFER_LOAD = 1,   /* lower tier -> device                         */
    RKV_TRANSFER_STORE = 2,  /* device -> host/disk, host -> disk            */
    RKV_TRANSFER_SWAP_OUT = 3, /* a preempted request's blocks -> host      */
    RKV_TRANSFER_SWAP_IN = 4   /* and back                                  */
} rkv_transfer_kind;

/* One completed ticket (loads and swaps; stores complete silently). */
typedef struct rkv_transfer_done {
    uint64_t ticket;
    int kind;            /* rkv_transfer_kind                               */
    rkv_status status;   /* RKV_OK or why it failed                         */
    uint32_t num_pages;  /* pages that arrived: 0 for a failed load; a
                            failed swap-out counts the pages whose store
                            succeeded (they are in the host tier)          */
} rkv_transfer_done;

/* Runs queued copies and reports completed tickets into out[0..max);
 * *n_out gets the count. Pending stores finish here too. Host pool: the
 * copies run (memcpy / pread) and complete in this call. CUDA pool: two
 * phases (tier/README.md, "Asynchronous copies"): a poll queues the copies
 * of the loads and stores queued since the last one on a stream and
 * records an event; a LATER poll that finds the event complete finishes
 * them (a load's ticket is reported then, a store's host copy counts from
 * then), so poll once per step and a load's ticket completes a poll or
 * more after rkv_tree_load. At most 32 batches are in flight (a poll that
 * finds them all running queues nothing new). rkv_tree_reset and detaching
 * the tiers forget swap-out tickets not yet reported (no later poll
 * reports them; their pages are gone with the rest): a caller that waits
 * for one treats the reset as its end. */
rkv_status rkv_tree_tier_poll(rkv_tree *tree, rkv_transfer_done *out,
                              uint32_t max, uint32_t *n_out);

/* The CUDA stream (a cudaStream_t) the tier's copies of a CUDA pool run
 * on; NULL (the default) = the library's own stream, a blocking stream it
 * creates on first use and destroys with the tiers (so it is ordered with
 * work on the legacy default stream only). Set the stream on which your
 * kernels write and read the KV blocks, so that a store copies a block
 * only after it was written and a load's block is not overwritten while
 * an earlier kernel still reads it. Ownership: the stream stays the
 * caller's and must live until the tree is destroyed or another stream is
 * set; the tree never destroys it. The setting belongs to the tree (kept
 * across attaching / detaching tiers). Copies in flight on the old stream
 * are waited for before this returns, so the caller may then destroy the
 * old stream. Ignored on a host pool. RKV_ERR_CUDA if waiting for the old
 * stream failed (the stream is then not changed). */
rkv_status rkv_tree_tier_set_stream(rkv_tree *tree, void *cuda_stream);

typedef struct rkv_tier_stats {
    uint64_t resident_pages[RKV_MEDIUM_COUNT]; /* pages per medium         */
    uint64_t hit_tokens[RKV_MEDIUM_COUNT];     /* non-peek match_tiers hits,
                                                  by the fastest medium     */
    uint64_t loads_blocks[RKV_MEDIUM_COUNT];   /* promoted from the medium */
    uint64_t loads_bytes[RKV_MEDIUM_COUNT];
    uint64_t stores_blocks[RKV_MEDIUM_COUNT];  /* written into the medium  */
    uint64_t stores_bytes[RKV_MEDIUM_COUNT];
    uint64_t failed_loads;                     /* pages                    */
    uint64_t failed_stores;
    uint64_t stores_skipped;                   /* store queue full         */
    uint64_t evictions[RKV_MEDIUM_COUNT];      /* pages leaving the medium */
    uint64_t corrupt_blocks;                   /* disk reads that failed
                                                  verification              */
    uint64_t pending_stores, pending_loads;    /* in flight now (blocks)   */
} rkv_tier_stats;
rkv_status rkv_tree_tier_stats(const rkv_tree *tree, rkv_tier_stats *out);

/*
 * Store log: the blocks the tree's OWN stores read, for an engine that
 * issues the copies itself (the scheduler drains it into its plans' STORE
 * entries, see rkv_batch_plan.copies). Recorded, in order: a write-through
 * or selective store when it is queued (queued = 1: it runs in the next
 * rkv_tree_tier_poll, and its device block keeps the page's bytes until
 * then -- a demotion that meets it runs it first); a device eviction's
 * demotion store when it is made (queued = 0: the copy is done and the
 * block was freed right after, so it may hold another page by now); the
 * host tier's own writes to the disk below (from = HOST, block
 * RKV_NO_BLOCK). Not recorded: rkv_tree_store_prefix's swap-outs (its
 * blocks_out lists them) and stores skipped before they were queued or
 * made (rkv_tier_stats.stores_skipped); a queued store that fails at poll
 * stays recorded (rkv_tier_stats.failed_stores counts it).
 * Bounded: a record that finds the log full is dropped and counted in
 * lost[medium written]; recording never fails or blocks a store. Off by
 * default; one reader. A scheduler with use_tiers on a tree with tiers
 * attached owns it: it enables it at create (or at its first step after
 * the tiers are attached), drains it every step and turns it off at
 * destroy; the caller must not use it meanwhile.
 */
typedef struct rkv_store_record {
    uint64_t hash;       /* the page's chained block hash                   */
    rkv_block_id block;  /* from == RKV_MEDIUM_DEVICE: the device block read;
                            else RKV_NO_BLOCK                               */
    uint8_t from;        /* RKV_MEDIUM_DEVICE, or RKV_MEDIUM_HOST (host ->
                            disk)                                           */
    uint8_t medium;      /* written into: RKV_MEDIUM_HOST or RKV_MEDIUM_DISK */
    uint8_t queued;      /* 1: queued, runs at a later poll (its block holds
                            the page until then); 0: made, or taken since
                            (run, failed, or issued on the copy stream, at
                            a poll or by a demotion): the tree clears it
                            in place when the store is taken             */
    uint8_t reserved;
} rkv_store_record;
typedef struct rkv_store_log {
    const rkv_store_record *records; /* [num_records], oldest first; owned
                            by the tree, valid until the next clear, enable
                            or rkv_tree_destroy (stores append records and
                            clear a record's `queued` when taken)          */
    uint32_t num_records;
    uint64_t lost[RKV_MEDIUM_COUNT]; /* records dropped (log full) since the
                            last full clear, by medium written              */
} rkv_store_log;
/* capacity records (1 .. 2^24; 0 turns the log off and frees it). A new
 * capacity starts an empty log; RKV_ERR_NOMEM keeps the old one. */
rkv_status rkv_tree_store_log_enable(rkv_tree *tree, uint32_t capacity);
/* RKV_ERR_STATE while the log is off (*out zeroed). */
rkv_status rkv_tree_store_log_read(const rkv_tree *tree, rkv_store_log *out);
/* Drops the first n records (all of them, and the lost counts, when n >=
 * num_records). Nothing happens while the log is off. */
void rkv_tree_store_log_clear(rkv_tree *tree, uint32_t n);

/* ------------------------------------------------------------------------ */
/* sched/: the cache-aware scheduler                                        */
/* ------------------------------------------------------------------------ */

typedef struct rkv_sched rkv_sched;

typedef enum rkv_policy {
    RKV_POLICY_FCFS = 0,     /* arrival order                               */
    RKV_POLICY_LPM = 1,      /* longest cached prefix first                 */
    RKV_POLICY_DFS = 2,      /* SGLang's DFS-weight order over the tree     */
    RKV_POLICY_PRIORITY = 3, /* priority, with aging                        */
    RKV_POLICY_BOUNDED = 4   /* lpm with a bound on any request's wait      */
} rkv_policy;

/* Parses "fcfs", "lpm", "dfs", "priority", "bounded". */
rkv_status rkv_policy_from_name(const char *name, rkv_policy *out);
const char *rkv_policy_name(rkv_policy policy);

/* Largest max_batch_tokens: a plan's token rows are indexed by uint32 with
 * room to spare. */
#define RKV_SCHED_MAX_BATCH_TOKENS 0x7fffffffu

/* rkv_sched_create refuses any field outside its range with
 * RKV_ERR_INVALID_ARG and a message naming the field and the range. No
 * field sizes an allocation: memory follows the live requests. */
typedef struct rkv_sched_config {
    rkv_policy policy;          /* RKV_POLICY_FCFS .. RKV_POLICY_BOUNDED   */
    uint32_t max_batch_tokens;  /* new tokens per step (prefill chunks +
                                   decodes); 1 .. RKV_SCHED_MAX_BATCH_TOKENS;
                                   default 8192                            */
    uint32_t max_running;       /* requests running at once; 1 ..
                                   UINT32_MAX; default 256                 */
    uint32_t dedup_min_tokens;  /* in-batch de-duplication: hold a request
                                   whose uncached prefix shares at least
                                   this many tokens with a prefill in
                                   flight; 0 disables; any value;
                                   default 256                             */
    double max_wait_ms;         /* bounded policy: a request waiting longer
                                   goes first; >= 0, +INFINITY allowed
                                   (never overdue), NaN refused;
                                   default 10000                           */
    double aging_per_s;         /* priority policy: priority gained per
                                   second of waiting; finite, >= 0;
                                   default 1.0                             */
    /* Tiers (rkv_tree_attach_tiers on the scheduler's tree; see "Tiers in
     * the scheduler" below). Costs are finite and >= 0, in the caller's
     * units (ms for the simulator); only their ratios matter. */
    int use_tiers;              /* 1 (default): consult lower tiers at
                                   admission and for ordering; 0: ignore
                                   them (device hits only)                 */
    int swap;                   /* 1: swap a preempted request's computed
                                   pages to host when cheaper than
                                   recomputing them; default 0             */
    double compute_ms_per_token; /* prefill cost of one token; default 0  */
    double host_load_ms_per_page; /* host -> device copy of one page      */
    double disk_load_ms_per_page; /* disk -> device copy of one page      */
} rkv_sched_config;

/*
 * Tiers in the scheduler. With use_tiers and lower tiers attached to the
 * tree, a waiting request's cached prefix is its device prefix plus its
 * host/disk continuation (rkv_tree_match_tiers). For ordering (lpm,
 * bounded) a lower page counts as cached minus its load time, converted to
 * tokens at compute_ms_per_token: credit = P - load_ms_per_page /
 * compute_ms_per_token tokens per page, at least 0 (all costs 0: a lower
 * page counts as a full page; compute 0 and load > 0: 0). dfs groups by the
 * device node and fcfs / priority ignore the cache, as without tiers.
 * Admission: a request whose continuation is worth loading (total credit
 * > 0), and whose whole need fits beside what the running and loading
 * requests will need, gets rkv_tree_load instead of being admitted; it stays WAITING, holds the load's lease, takes a running slot
 * (max_running counts it) but no batch tokens, and is skipped by
 * admission until its own ticket completes. A request whose continuation
 * another request is loading (rkv_tier_match.loading_ticket) waits for
 * that ticket instead of computing those tokens: it is skipped (holding
 * nothing, stats.load_waits) until the load completes, then matches the
 * pages on the device (a failed load: it loads or computes them itself).
 * rkv_sched_step calls
 * rkv_tree_tier_poll first (so the caller must not poll a tree the
 * scheduler uses: the tickets are the scheduler's). A completed load makes
 * the request admissible with the loaded pages on the device (they count
 * in cached_tokens, and in cached_tokens_by_medium under the medium they
 * came from); a failed load makes it compute those tokens. When nothing
 * runs and the next admission does not fit, completed loads let go of
 * their pages (they stay cached; stats.loads_released), so loads never
 * hold the pool against each other. Swap (swap = 1
 * and a host tier): a preempted request's computed full pages are
 * inserted, then copied to host with rkv_tree_store_prefix when restoring
 * them (pages * host_load_ms_per_page) costs less than recomputing them
 * (tokens * compute_ms_per_token); on resume the ordinary load path brings
 * back whatever device eviction took. Without swap a write-back tier still
 * demotes evicted pages; swap stores them at once, ahead of the write
 * policy.
 */
void rkv_sched_config_init(rkv_sched_config *cfg);

/* The scheduler uses the tree (and its pool) and must not outlive them. */
rkv_status rkv_sched_create(rkv_tree *tree, const rkv_sched_config *cfg,
                            rkv_sched **out);
/* Aborts whatever is still waiting or running, releasing every block. */
void rkv_sched_destroy(rkv_sched *sched);

typedef struct rkv_request_desc {
    uint64_t id;             /* unique among live requests                  */
    rkv_namespace ns;
    const int32_t *prompt;   /* copied                                      */
    uint32_t prompt_len;     /* >= 1                                        */
    uint32_t max_new_tokens; /* >= 1                                        */
    int32_t priority;        /* larger runs first under RKV_POLICY_PRIORITY */
    double arrival_ms;
    const rkv_retention *retention; /* NULL: none. Copied at submit and
                                applied (rkv_tree_retain) to the request's
                                cached pages each time the scheduler inserts
                                its computed pages: the priority range and
                                pin_tokens count from the prompt's first
                                token over prompt + output. The pin is made
                                once its pin_tokens are inserted, or at the
                                request's end with what was computed (fewer
                                tokens); deadline = the time of the step or
                                commit + ttl_ms, renewed at every such
                                insert. A pin refused for the cap keeps the
                                priority (stats.pins_refused); nothing the
                                retention does fails a step. With
                                session_end, the request's finish ends its
                                session (owner's pins released, the pages
                                only it used evicted first; stats
                                sessions_ended).                          */
} rkv_request_desc;

/* Refused, changing nothing: RKV_ERR_DUPLICATE for a live id (finished or
 * aborted ids may be reused); RKV_ERR_INVALID_ARG for prompt_len 0, a
 * negative token, max_new_tokens 0, or a retention that rkv_tree_retain
 * would refuse (priority outside -1..100, prio_begin > prio_end,
 * priority_duration_ms without a priority, a pin with ttl_ms 0 in a
 * namespace without a default TTL at submit); RKV_ERR_NO_SPACE for a request that
 * could not fit the pool even alone: ceil((prompt_len + max_new_tokens - 1)
 * / page_size) > num_blocks (the KV never holds the last sampled token). */
rkv_status rkv_sched_submit(rkv_sched *sched, const rkv_request_desc *req);

/* One entry of rkv_batch_plan.copies: `pages` pages of one transfer. */
typedef struct rkv_plan_copy {
    uint64_t req_id;  /* the request it serves (0 for write-policy stores) */
    uint64_t ticket;  /* the tree's ticket (0 for write-policy stores)     */
    int kind;         /* rkv_transfer_kind: LOAD / SWAP_IN (lower -> device),
                         SWAP_OUT / STORE (device or host -> lower)          */
    int medium;       /* the lower medium read from (loads) or written to
                         (stores)                                           */
    uint32_t pages;
    int done;         /* STORE: 1 when the tree already made the copy (a
                         device eviction's demotion, or a store queued
                         before this step's poll, which ran it -- issued
                         it, on a CUDA pool: its source blocks may have
                         been freed since and hold other pages by now; or
                         the host's write to the disk); 0 when queued
                         after this step's poll: it runs in the next
                         rkv_sched_step's poll and its source blocks hold
                         the pages until then. Other kinds: 0 (they
                         complete by ticket)                                */
} rkv_plan_copy;

/*
 * A batch plan: what the attention kernels consume for one step. Request r's
 * new tokens are rows qo_indptr[r]..qo_indptr[r+1] (a prefill chunk, or one
 * decode token); they sit at positions prefix_len[r] .. prefix_len[r] +
 * q_len - 1, and their K/V go to slots[row] (block * page_size + offset).
 * The block table is in CSR form, after the new tokens are appended:
 * kv_indices[kv_indptr[r] .. kv_indptr[r+1]) with kv_last_page_len[r] tokens
 * in the last page (1..page_size). All arrays are host memory owned by the
 * scheduler, valid until the next step or commit.
 */
typedef struct rkv_batch_plan {
    uint32_t num_reqs;
    uint32_t num_prefill;          /* requests 0..num_prefill-1 prefill     */
    uint32_t num_tokens;           /* qo_indptr[num_reqs]                   */
    const uint64_t *req_ids;
    const uint32_t *qo_indptr;     /* [num_reqs + 1]                        */
    const uint32_t *prefix_len;    /* [num_reqs] KV tokens before this step */
    const uint32_t *cached_len;    /* [num_reqs] of prefix_len, tokens that
                                      came from the cache at admission      */
    const uint32_t *kv_indptr;     /* [num_reqs + 1]                        */
    const uint32_t *kv_indices;    /* [kv_indptr[num_reqs]]                 */
    const uint32_t *kv_last_page_len; /* [num_reqs]                         */
    const uint32_t *slots;         /* [num_tokens]                          */
    const int32_t *input_tokens;   /* [num_tokens] token ids to run         */
    const uint8_t *emits_token;    /* [num_reqs] 1 if this step samples a
                                      token for the request (decode, or the
                                      last prefill chunk)                   */
    /* Block copies this step queued between tiers (loads for admissions,
     * swap-outs of preempted requests, and the stores the tree queued or
     * made since the previous step: its write policy's, device eviction's
     * demotions, the host's writes to the disk), for an engine to overlap
     * with the step's compute. They run in rkv_tree_tier_poll, which the
     * next rkv_sched_step calls first. Same lifetime as the arrays above;
     * a plan with num_reqs == 0 may still list copies. */
    uint32_t num_copies;
    const rkv_plan_copy *copies;        /* [num_copies]                    */
    /* Copy c's device blocks, in CSR form like kv_indices:
     * copy_blocks[copy_indptr[c] .. copy_indptr[c+1]) -- for LOAD / SWAP_IN
     * the destination blocks, `pages` of them in token order (the blocks
     * the request's kv_indices use once it is admitted); for SWAP_OUT the
     * `pages` source blocks (rkv_tree_store_prefix's blocks_out); for a
     * STORE from the device (write-through, selective, or a demotion by
     * device eviction; see `done`) its `pages` source device blocks, in
     * the order the tree recorded them (rkv_tree_store_log_read); for a
     * STORE from the host to the disk below, or one the tree's store log
     * dropped when full, none (a count only).
     * copy_indptr[0] is 0; both may be NULL when no step listed a copy. */
    const uint32_t *copy_indptr;        /* [num_copies + 1]                */
    const uint32_t *copy_blocks;        /* [copy_indptr[num_copies]]       */
} rkv_batch_plan;


/* Plans the next step at time now_ms. An empty plan (num_reqs == 0) means
 * nothing can run now and needs no commit. The plan is valid until the next
 * step/commit. RKV_ERR_STATE while a non-empty plan awaits its commit. */
rkv_status rkv_sched_step(rkv_sched *sched, double now_ms,
                          const rkv_batch_plan **plan_out);

/* Reports the step's results: next_tokens[r] for each plan request r with
 * emits_token[r] (other entries ignored), and finished[r] != 0 for a request
 * that stopped (EOS); finished may be NULL. A request also finishes at
 * max_new_tokens. A finished request's prompt + generated tokens are
 * inserted into the tree and its locks released; rkv_sched_request_info()
 * then reports it finished, until the next step. RKV_ERR_STATE when no
 * plan awaits a commit; a negative next token (RKV_ERR_INVALID_ARG)
 * changes nothing. */
rkv_status rkv_sched_commit(rkv_sched *sched, const int32_t *next_tokens,
                            const uint8_t *finished, double now_ms);

/* Removes a waiting or running request, releasing everything it holds (its
 * computed full pages stay cached in the tree). Allowed between step and
 * commit: commit then ignores that request's entry. A request whose load
 * is still queued lets go of it when the tree completes the ticket (the
 * next step's poll): the tree holds a loading path until then. */
rkv_status rkv_sched_abort(rkv_sched *sched, uint64_t id);

typedef enum rkv_req_state {
    RKV_REQ_WAITING = 0,
    RKV_REQ_RUNNING = 1,
    RKV_REQ_FINISHED = 2  /* finished or aborted: holds nothing any more   */
} rkv_req_state;

typedef enum rkv_finish_reason {
    RKV_FINISH_NONE = 0,   /* not finished (waiting or running)            */
    RKV_FINISH_STOP = 1,   /* commit's finished[r] was set (EOS, stop word);
                              wins over LENGTH when both hold              */
    RKV_FINISH_LENGTH = 2, /* reached max_new_tokens                       */
    RKV_FINISH_ABORT = 3   /* rkv_sched_abort()                            */
} rkv_finish_reason;

typedef struct rkv_request_info {
    uint64_t id;
    rkv_req_state state;
    rkv_finish_reason finish;
    uint32_t prompt_len;
    uint32_t max_new_tokens;
    uint32_t generated_tokens; /* sampled tokens committed so far (a
                                  pending plan's are not counted yet)      */
    uint32_t cached_tokens;    /* tokens the cache served at the latest
                                  admission (prompt plus, after a
                                  preemption, generated tokens); 0 before
                                  the first admission                      */
    uint32_t kv_tokens;        /* tokens whose KV it holds now, cached or
                                  computed (RUNNING; a pending plan's not
                                  counted; 0 while waiting, once finished) */
    uint32_t preemptions;      /* times it was preempted back to waiting   */
    uint32_t cached_host_tokens; /* of cached_tokens, loaded for it from the
                                  host tier / from disk (see "Tiers in the
                                  scheduler")                               */
    uint32_t cached_disk_tokens;
    int loading;               /* WAITING for its own load (queued or done,
                                  not admitted yet)                         */
} rkv_request_info;

/* What a server needs to follow a request: its state, why it finished,
 * and its token counts. Live requests (waiting, running) are found in
 * O(1). A request that finished (at a commit) or was aborted stays
 * queryable as RKV_REQ_FINISHED, with its final counts and finish reason,
 * until the next rkv_sched_step(): a step forgets it (one that fails may
 * or may not), and its id is then unknown. So the pattern is: commit, then
 * query the plan's ids (or the aborted id) to learn which finished. The
 * requests ended since the last step are searched linearly (few). If an
 * id was reused (an ended id submitted again), the live request is
 * reported, else the most recently ended one. An id never submitted or
 * already forgotten: RKV_ERR_NOT_FOUND, *out unchanged. Read-only. */
rkv_status rkv_sched_request_info(const rkv_sched *sched, uint64_t id,
                                  rkv_request_info *out);

typedef struct rkv_sched_stats {
    uint64_t waiting, running, finished, aborted;
    uint64_t preemptions;
    uint64_t steps;
    uint64_t prompt_tokens;       /* of admitted requests                   */
    uint64_t cached_tokens;       /* prompt tokens served from the cache    */
    uint64_t computed_tokens;     /* prefill tokens computed                */
    uint64_t dedup_holds;         /* times a request was held for dedup     */
    uint64_t peak_blocks_used;
    /* retention (rkv_request_desc.retention) */
    uint64_t retains;             /* rkv_tree_retain calls that succeeded   */
    uint64_t pins_refused;        /* pins refused for the tree's cap (the
                                     priority was applied without them)     */
    uint64_t retain_failed;       /* retains that failed otherwise (out of
                                     memory): skipped, the step went on    */
    uint64_t sessions_ended;      /* finished requests with session_end   */
    /* tiers (see "Tiers in the scheduler") */
    uint64_t cached_tokens_by_medium[RKV_MEDIUM_COUNT]; /* of cached_tokens:
                                     on the device at admission, or loaded
                                     from host / disk for it                */
    uint64_t loading;             /* requests waiting for their load now    */
    uint64_t loads;               /* rkv_tree_load tickets taken            */
    uint64_t load_pages, load_disk_pages; /* pages they promote (of them,
                                     from disk)                             */
    uint64_t failed_loads;        /* tickets that failed (computed instead) */
    uint64_t swap_outs, swap_out_pages; /* preemptions that swapped, pages  */
    uint64_t swap_ins, swap_in_pages;   /* loads of swapped-out requests    */
    uint64_t loads_released;      /* completed loads let go unadmitted: the
                                     pool was full with nothing running    */
    uint64_t load_waits;          /* admissions deferred a step: the
                                     request's continuation was another
                                     request's load in flight              */
} rkv_sched_stats;
rkv_status rkv_sched_get_stats(const rkv_sched *sched, rkv_sched_stats *out);

/* Verifies the scheduler's invariants (queues, block ownership, locks,
 * budgets) and calls rkv_tree_check(). */
rkv_status rkv_sched_check(const rkv_sched *sched);

/* ------------------------------------------------------------------------ */
/* attention/: paged attention (CPU reference and CUDA)                     */
/* ------------------------------------------------------------------------ */
/*
 * One rkv_attn context serves one pool (which must outlive it). Every
 * operation runs where the pool's KV lives: a CUDA pool -> CUDA kernels on
 * the context's stream (asynchronous; rkv_attn_sync waits), a host pool ->
 * the CPU reference (synchronous). Both have the same semantics.
 *
 * Memory: q, k, v, out, lse, merge states are device pointers for a CUDA
 * pool and host pointers for a host pool. Index arrays (slots, block tables,
 * qo_indptr, shared pages) are always host memory; the CUDA path uploads
 * them into a device workspace the context owns (grown on demand), so the
 * caller may reuse them as soon as the call returns.
 *
 * Shapes (row-major, element type = the pool's dtype unless noted):
 *   q, out    [num_rows][num_qo_heads][head_dim]
 *   k, v      [num_tokens][num_kv_heads][head_dim]            (append)
 *   lse       [num_rows][num_qo_heads] float, may be NULL: the natural-log
 *             log-sum-exp of the SCALED scores (sm_scale * q.k) of the row,
 *             so two partial states merge by log-sum-exp.
 * Arithmetic: fp32 accumulation; outputs are rounded once to the dtype
 * (round-to-nearest-even). GQA: q head h reads kv head h / (num_qo_heads /
 * num_kv_heads). The CPU path supports any head_dim and f16/bf16/f32; the
 * CUDA path head_dim 64 and 128 (else RKV_ERR_UNSUPPORTED), f16/bf16/f32.
 *
 * Block table (CSR, as FlashInfer): request r owns the pages
 * indices[indptr[r] .. indptr[r+1]) (at least one), the last holding
 * last_page_len[r] tokens (1..page_size): kv_len(r) = (pages - 1) *
 * page_size + last_page_len[r]. Every page must be an allocated block.
 *
 * Validation: every input is checked (ranges, lengths, ids allocated,
 * qo lengths <= kv lengths) before any memory is touched; on failure
 * nothing is written and the status says what was wrong.
 */
typedef struct rkv_attn rkv_attn;

typedef struct rkv_attn_params {
    uint32_t layer;        /* < num_layers                                   */
    uint32_t num_qo_heads; /* a positive multiple of num_kv_heads            */
    float sm_scale;        /* > 0; 0 means 1 / sqrt(head_dim)                */
} rkv_attn_params;

typedef struct rkv_paged_kv {
    uint32_t num_reqs;              /* >= 1                                  */
    const uint32_t *indptr;         /* [num_reqs + 1], indptr[0] == 0        */
    const uint32_t *indices;        /* [indptr[num_reqs]] block ids          */
    const uint32_t *last_page_len;  /* [num_reqs], 1..page_size              */
} rkv_paged_kv;

/* RKV_ERR_STATE for a metadata-only pool (num_layers == 0). The CUDA
 * resources (stream, workspace, cuBLAS handle) are created on first use. */
rkv_status rkv_attn_create(rkv_pool *pool, rkv_attn **out);
void rkv_attn_destroy(rkv_attn *attn); /* NULL is fine */
/* cudaStream_t to run on (NULL: the default stream). Host pool: only NULL. */
rkv_status rkv_attn_set_stream(rkv_attn *attn, void *cuda_stream);
/* Waits for the context's queued work; reports a failed kernel. */
rkv_status rkv_attn_sync(rkv_attn *attn);
rkv_status rkv_attn_check(const rkv_attn *attn);

/* Writes token i's K and V (k, v rows i) of layer `layer` at slot slots[i]
 * = block * page_size + offset; the block must be allocated and slots
 * distinct. */
rkv_status rkv_attn_append(rkv_attn *attn, uint32_t layer, uint32_t num_tokens,
                           const uint32_t *slots, const void *k,
                           const void *v);

/* One query row per request (num_rows = kv->num_reqs) over all of the
 * request's KV. CUDA: split along the KV length (flash-decoding) and merged
 * by log-sum-exp. */
rkv_status rkv_attn_decode(rkv_attn *attn, const rkv_attn_params *p,
                           const rkv_paged_kv *kv, const void *q, void *out,
                           float *lse);

/* Prefill / extend: request r's rows qo_indptr[r] .. qo_indptr[r+1] (q_len
 * may be 0) are its newest tokens, at positions kv_len - q_len .. kv_len - 1
 * (their KV already appended); row i attends to KV positions 0 .. its own
 * (the cached prefix, then causally). q_len <= kv_len. */
rkv_status rkv_attn_prefill(rkv_attn *attn, const rkv_attn_params *p,
                            const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                            const void *q, void *out, float *lse);

/* Shared-prefix (cascade) attention: every row of every request attends to
 * the num_shared_pages full pages of `shared_pages` (a prefix the group
 * shares; may be 0 pages), then to its own suffix `kv` causally as in
 * rkv_attn_prefill (positions counted after the shared prefix); the two
 * partial states are merged by log-sum-exp. Same result as rkv_attn_prefill
 * over the concatenated tables. CUDA: the shared part is two cuBLAS GEMMs
 * (dtype in, fp32 out) over all rows at once, reading the prefix once. */
rkv_status rkv_attn_cascade(rkv_attn *attn, const rkv_attn_params *p,
                            uint32_t num_shared_pages,
                            const uint32_t *shared_pages,
                            const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                            const void *q, void *out, float *lse);

/* Merges n partial states of head_dim values each (pool dtype) with their
 * lse (natural log, -INFINITY = empty): out = (e^a v_a + e^b v_b) / (e^a +
 * e^b), lse_out = log(e^a + e^b). out may alias v_a or v_b; lse_out may
 * alias lse_a or lse_b or be NULL. Two empty states give 0 and -INFINITY. */
rkv_status rkv_attn_merge(rkv_attn *attn, uint32_t n, const void *v_a,
                          const float *lse_a, const void *v_b,
                          const float *lse_b, void *v_out, float *lse_out);

/* Plan / run: a batch's rows planned once, then run per layer.
 * rkv_attn_plan_create validates a decode (qo_indptr NULL: one row per
 * request) or prefill batch as rkv_attn_decode / rkv_attn_prefill do,
 * chooses the work partition and KV split and, on a CUDA pool, uploads the
 * rows and block table once (queued on the context's stream) into
 * `workspace`: device memory the caller owns, 256-byte aligned, of at
 * least rkv_attn_plan_workspace_size bytes, left alone while the plan is
 * used (host pool: the size is 0 and workspace may be NULL). The host
 * arrays may be reused when plan returns; the pages must stay allocated
 * and the plan be used only with the context it was made for.
 * rkv_attn_run then attends one layer with the plan: on a CUDA pool it
 * only launches kernels on the context's stream (no host-device copy, no
 * allocation, no synchronisation), so it can be captured in a CUDA graph.
 * The results equal rkv_attn_decode / rkv_attn_prefill on the same inputs.
 * sm_scale as in rkv_attn_params. */
typedef struct rkv_attn_plan rkv_attn_plan;
rkv_status rkv_attn_plan_workspace_size(rkv_attn *attn, uint32_t num_qo_heads,
                                        const uint32_t *qo_indptr,
                                        const rkv_paged_kv *kv, size_t *bytes);
rkv_status rkv_attn_plan_create(rkv_attn *attn, uint32_t num_qo_heads,
                                const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                                void *workspace, size_t workspace_bytes,
                                rkv_attn_plan **out);
rkv_status rkv_attn_run(rkv_attn *attn, const rkv_attn_plan *plan, uint32_t layer,
                        float sm_scale, const void *q, void *out, float *lse);
void rkv_attn_plan_destroy(rkv_attn_plan *plan); /* NULL is fine */

/* fp16 / bf16 <-> fp32 on the host (round-to-nearest-even; NaN stays NaN). */
uint16_t rkv_f32_to_f16(float x);
float rkv_f16_to_f32(uint16_t h);
uint16_t rkv_f32_to_bf16(float x);
float rkv_bf16_to_f32(uint16_t h);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* RADIXKV_H */

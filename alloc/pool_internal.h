/*
 * alloc/pool_internal.h -- the block pool's structure, for modules that need
 * O(1) access without the public API's argument checks (the radix tree's hot
 * paths). Only alloc/ changes these fields, except `tree` and `trees_made`,
 * which belong to radix/tree.c (one tree per pool: see rkv_tree_create).
 *
 * Invariants (verified by rkv_pool_check):
 *   - The free blocks form an intrusive LIFO list (a stack) threaded
 *     through the hash array: a free block's hash slot holds the id of the
 *     next free block (RKV_POOL_END ends it). The list holds exactly the
 *     blocks with refcount 0, each once, and num_free of them; num_free +
 *     (blocks with refcount >= 1) == num_blocks. Why not a separate array
 *     of free ids: a free block has no hash, so the slot is reused and the
 *     pool's metadata is 12 bytes per block (0.75 byte per token at page
 *     size 16) instead of 16.
 *   - kv_bytes == num_blocks * bytes_per_block, 0 iff metadata-only
 *     (num_layers == 0). A pool-owned KV memory (external == 0) is kv, one
 *     allocation of kv_bytes bytes, host (256-byte aligned) or device
 *     (cudaMalloc, by the CUDA backend); a server-owned one (external ==
 *     1, rkv_pool_create_external) is the caller's buffers, never freed
 *     here, and kv is NULL.
 *   - With KV memory, seg[] has 2 * num_layers entries (K of layer l at
 *     2l, V at 2l + 1; an MLA pool: num_layers, the latent plane of layer
 *     l at l, and cfg holds num_kv_heads 1, head_dim rank + rope) and element d of kv head h, token t of block b in
 *     segment s is at seg[s] + b * blk_stride + t * tok_stride + h *
 *     head_stride + d * dtype size. A pool-owned pool is laid out as
 *     radixkv.h says (the NHD planes of kv); dense is 1 when blk_stride ==
 *     P * tok_stride, tok_stride == H * head_stride and head_stride ==
 *     head_dim * dtype size (one block's segment is then one run of
 *     bytes_per_block / (2 L) bytes), which a CUDA pool always is.
 *   - cuda.be is non-NULL iff cfg.device is RKV_DEVICE_CUDA: a CUDA pool
 *     holds the backend loaded for as long as it lives.
 */
#ifndef RKV_ALLOC_POOL_INTERNAL_H
#define RKV_ALLOC_POOL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/cuda_loader.h"
#include "radixkv.h"

#define RKV_POOL_END UINT32_MAX

/* Bytes of one element of d; 0 for a value that is not an rkv_dtype. */
size_t rkv_pool_dtype_size(rkv_dtype d);

/* The backend table of a CUDA pool (alloc/pool.c); NULL for a host pool
 * or a NULL pool. */
const rkv_cuda_backend *rkv_pool_cuda_backend(const rkv_pool *pool);

struct rkv_pool {
    rkv_pool_config cfg;
    size_t bytes_per_block;
    size_t kv_bytes;          /* num_blocks * bytes_per_block (0 if none) */
    void *kv;                 /* pool-owned host or device memory, or NULL */
    char **seg;               /* [2 * num_layers] segment bases, or NULL  */
    size_t blk_stride, tok_stride, head_stride; /* bytes                  */
    int external;             /* KV memory is the caller's                */
    int dense;                /* see above                                */
    uint32_t num_free;
    uint32_t free_head;       /* top of the free stack, or RKV_POOL_END    */
    uint32_t *refcount;       /* [num_blocks]                             */
    uint64_t *hash;           /* [num_blocks] chained hash of a used block;
                                 next free id of a free block             */
    void *meta;               /* the one allocation holding both arrays   */
    size_t meta_bytes;
    /* A pool stores one hash per block, so it can serve one tree only.   */
    const rkv_tree *tree;     /* the live tree on this pool, or NULL      */
    /* The tree's chained hash of block id (NULL without a tree): a tree
     * may cache a block before computing its hash (radix/tree_hash.c),
     * and then hash[id] is not the hash yet. */
    uint64_t (*tree_hash)(const rkv_tree *tree, rkv_block_id id, int all);
    uint64_t trees_made;      /* trees created on it so far (lease keys)  */
    int64_t tree_fail_at;     /* tests (radix/tree_debug.h): k + 1 arms the
                                 next tree's allocator at rkv_tree_create
                                 to fail its (k+1)-th allocation; 0 = off  */
    rkv_cuda_lib cuda;        /* the CUDA backend of a CUDA pool (its table
                                 owns kv); zeroed for a host pool          */
};

/* Segments of a layer: K and V, or an MLA pool's one latent plane. */
static inline size_t rkv_pool_segs_per_layer(const rkv_pool_config *cfg)
{
    return cfg->layout == RKV_LAYOUT_MLA ? 1 : 2;
}

/* Pushes a block whose count just reached 0 on the free stack. */
static inline void rkv_pool_push_free(rkv_pool *pool, uint32_t id)
{
    pool->hash[id] = pool->free_head;
    pool->free_head = id;
    pool->num_free++;
}

/* Drops one reference of a referenced block; returns 1 if it became free.
 * For modules that already know the block is referenced (the tree). */
static inline int rkv_pool_drop_ref(rkv_pool *pool, uint32_t id)
{
    if (--pool->refcount[id] != 0)
        return 0;
    rkv_pool_push_free(pool, id);
    return 1;
}

/* The k blocks freed last, oldest first, into out[0..k): the top of the
 * free stack, valid while nothing was allocated since they were freed
 * (rkv_tree_evict_ids reads the blocks its eviction freed this way). */
static inline void rkv_pool_freed_top(const rkv_pool *pool, uint32_t k,
                                      rkv_block_id *out)
{
    uint32_t id = pool->free_head;
    for (uint32_t i = k; i-- > 0;) {
        out[i] = id;
        id = (uint32_t)pool->hash[id];
    }
}

#endif

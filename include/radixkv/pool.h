/*
 * radixkv/pool.h -- the KV block pool (alloc/): paged, ref-counted K/V blocks on the host or a CUDA device, or in memory the server owns.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_POOL_H
#define RADIXKV_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/status.h"

RKV_BEGIN_DECLS

typedef struct rkv_pool rkv_pool;
typedef uint32_t rkv_block_id;
#define RKV_NO_BLOCK ((rkv_block_id)UINT32_MAX)

typedef enum rkv_dtype {
    RKV_DTYPE_F16 = 0,
    RKV_DTYPE_BF16 = 1,
    RKV_DTYPE_F32 = 2,
    /* Quantized KV (pool dtype only; see "Quantized KV" below). */
    RKV_DTYPE_FP8_E4M3 = 3, /* OCP E4M3: max 448, no infinity           */
    RKV_DTYPE_FP8_E5M2 = 4, /* OCP E5M2: IEEE-like, max 57344           */
    RKV_DTYPE_INT8 = 5,     /* symmetric, codes -127..127               */
    RKV_DTYPE_INT4 = 6      /* symmetric per group, codes -7..7         */
} rkv_dtype;

typedef enum rkv_device {
    RKV_DEVICE_HOST = 0, /* aligned host memory                            */
    RKV_DEVICE_CUDA = 1  /* one cudaMalloc; RKV_ERR_NO_DEVICE without CUDA */
} rkv_device;

/* Largest page a pool accepts. The tree and scheduler work at any size up to
 * this (the Mooncake trace uses 512-token blocks); the attention kernels are
 * tested at 1..256. */
#define RKV_MAX_PAGE_SIZE 4096u

/* What a token's KV is, per layer (see the layouts below). */
typedef enum rkv_kv_layout {
    RKV_LAYOUT_MHA = 0, /* K and V, num_kv_heads x head_dim each (MHA/GQA) */
    RKV_LAYOUT_MLA = 1  /* one latent row: c_kv[kv_lora_rank] then
                           k_pe[qk_rope_dim], shared by all heads; no V   */
} rkv_kv_layout;

typedef struct rkv_pool_config {
    uint32_t num_blocks;   /* >= 1, < UINT32_MAX                             */
    uint32_t page_size;    /* tokens per block, 1..RKV_MAX_PAGE_SIZE (16)   */
    uint32_t num_layers;   /* 0 = metadata only: no KV memory is allocated  */
    uint32_t num_kv_heads; /* ignored when num_layers == 0                  */
    uint32_t head_dim;     /* ignored when num_layers == 0                  */
    rkv_dtype dtype;       /* element type of K and V                       */
    rkv_device device;
    int cuda_device;       /* device ordinal when device == RKV_DEVICE_CUDA  */
    rkv_kv_layout layout;  /* RKV_LAYOUT_MHA (0, the default)               */
    uint32_t kv_lora_rank; /* MLA only: latent width, e.g. 512              */
    uint32_t qk_rope_dim;  /* MLA only: decoupled RoPE key width, e.g. 64   */
    uint32_t quant_group;  /* INT4: elements per scale, even, divides
                              head_dim (default 32); else ignored          */
    rkv_dtype act_dtype;   /* quantized dtype: element type of q, out and of
                              the K/V given to rkv_attn_append (F16, BF16 or
                              F32; default BF16); else ignored (= dtype)    */
} rkv_pool_config;

/* Fills defaults: page_size 16, num_layers 0, F16, host, MHA, quant_group
 * 32, act_dtype BF16. num_blocks is 0 and must be set. */
void rkv_pool_config_init(rkv_pool_config *cfg);

/* KV bytes one token takes in a pool of this configuration, all layers:
 * MHA 2 * num_layers * num_kv_heads * row_bytes (head_dim * sizeof(dtype),
 * or a quantized row's codes and scales, see below), MLA num_layers *
 * (kv_lora_rank + qk_rope_dim) * sizeof(dtype) (e.g. DeepSeek-V3 in bf16:
 * 61 * 576 * 2 = 70272). 0 for a metadata-only or invalid configuration
 * (rkv_pool_create says why). */
size_t rkv_pool_config_bytes_per_token(const rkv_pool_config *cfg);

/*
 * KV memory layout (one allocation for the whole pool):
 *   for each layer l: K[l] then V[l], each laid out as
 *     [num_blocks][page_size][num_kv_heads][head_dim]   (FlashInfer's "NHD")
 *   so token t of block b, head h, dim d of K in layer l sits at element
 *     ((l*2 + 0) * num_blocks * page_size + b*page_size + t) * H*D + h*D + d.
 * bytes_per_block = num_layers * 2 * page_size * num_kv_heads * row_bytes,
 * row_bytes = head_dim * sizeof(dtype) for F16/BF16/F32 (so the formula
 * above). A token's slot is block * page_size + offset.
 *
 * Quantized KV (FP8_E4M3, FP8_E5M2, INT8, INT4): each (token, kv head) row
 * of K or V is head_dim codes plus f32 scales, value = decode(code) *
 * scale. 8-bit: one byte per code and one scale per row, the row's absmax /
 * the format's largest code (448, 57344, 127); FP8 codes round to nearest
 * even, INT8 codes are rint(x / scale). INT4: two codes per byte (element
 * 2i in the low nibble, 2i + 1 in the high one, two's complement), one
 * scale per quant_group elements, absmax / 7. So row_bytes = head_dim
 * (8-bit) or head_dim / 2 (INT4) code bytes + 4 * (1 or head_dim /
 * quant_group) scale bytes. Each block's segment of a layer's K (and V)
 * holds its codes [page_size][num_kv_heads][code bytes], then their scales
 * [page_size][num_kv_heads][scales]: the scales live inside the block's
 * bytes, so block copies, the tiers and warm restart carry them, and
 * rkv_pool_kv_strides reports the codes' strides (block stride = the whole
 * segment, page_size * num_kv_heads * row_bytes). Why f32 scales: exact
 * over the whole f32 range of absmax (f16 would flush rows with absmax
 * below ~1e-3 towards zero and overflow above 65504 * 127) at 3% of an
 * 8-bit row of 128 (INT4 groups of 32: 20% of the row, 5 bits an element).
 * Constraints (else RKV_ERR_INVALID_ARG with the reason): head_dim a
 * multiple of 4 (8-bit) or 8 (INT4), so scales stay 4-byte aligned; INT4's
 * quant_group even and dividing head_dim; act_dtype F16, BF16 or F32.
 * Server-owned pools (rkv_pool_create_external) are not quantized
 * (RKV_ERR_UNSUPPORTED). Block hashes do not depend on the dtype.
 *
 * MLA layout (layout RKV_LAYOUT_MLA, the absorbed form of multi-head latent
 * attention, as DeepSeek-V2/V3): per layer one plane
 *     [num_blocks][page_size][kv_lora_rank + qk_rope_dim]
 * a token's row being its compressed KV c_kv (kv_lora_rank elements) then
 * its RoPE key k_pe (qk_rope_dim), shared by every query head; there is no
 * V plane (the values are c_kv itself). num_kv_heads and head_dim are
 * ignored on input and reported as 1 and kv_lora_rank + qk_rope_dim by
 * rkv_pool_get_config, so the strides read as a one-head pool's;
 * rkv_pool_layer_kv gives the layer's plane as k and NULL as v. Both widths
 * must be >= 1 (else RKV_ERR_INVALID_ARG); dtypes f16, bf16 and f32 only
 * (others RKV_ERR_UNSUPPORTED); pool-owned memory only (a server-owned MLA
 * pool is RKV_ERR_UNSUPPORTED). Block copies and the tiers move the
 * num_layers planes of a block in layer order. Only the rkv_attn_mla_*
 * calls attend over it; the K/V calls refuse it (RKV_ERR_UNSUPPORTED).
 */
rkv_status rkv_pool_create(const rkv_pool_config *cfg, rkv_pool **out);
void rkv_pool_destroy(rkv_pool *pool); /* NULL is fine */

/* The pool's configuration, as created, and its sizes. */
rkv_status rkv_pool_get_config(const rkv_pool *pool, rkv_pool_config *out);
uint32_t rkv_pool_num_blocks(const rkv_pool *pool);
uint32_t rkv_pool_num_free(const rkv_pool *pool);
uint32_t rkv_pool_page_size(const rkv_pool *pool);
size_t rkv_pool_bytes_per_block(const rkv_pool *pool);
/* For a configuration (no pool needed; cost models size memory with it):
 * the bytes of one (token, kv head) row of one layer's K or V, codes and
 * scales (row_bytes above; an MLA pool's latent row). 0 for a
 * configuration rkv_pool_create refuses, or one without KV (num_layers 0).
 * The KV bytes of a token are rkv_pool_config_bytes_per_token. */
size_t rkv_pool_config_row_bytes(const rkv_pool_config *cfg);
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
 * that alias or overflow, num_layers 0: RKV_ERR_INVALID_ARG; an MLA layout:
 * RKV_ERR_UNSUPPORTED; nothing is created.
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
/* The chained hash of a used block (RKV_HASH_ROOT for a free one). A tree
 * without KV events, tiers or learned eviction caches pages without
 * hashing them and computes a block's hash (and the never-hashed pages
 * above it) when it is first asked for here or by a snapshot: same value,
 * paid once, and never for pages evicted unasked. Setting a cached block's
 * hash first computes every such pending hash of its tree. */
uint64_t rkv_pool_block_hash(const rkv_pool *pool, rkv_block_id id);
rkv_status rkv_pool_set_block_hash(rkv_pool *pool, rkv_block_id id,
                                   uint64_t hash);

/* Copies whole blocks (all layers, K and V). Device to device within the
 * pool, or between the pool and a host buffer of n * bytes_per_block bytes
 * (block i of the buffer <-> ids[i]). Works on host pools too. The host
 * buffer's format does not depend on the pool's layout: block i holds its
 * segments K[0], V[0], K[1], ... each [page_size][num_kv_heads][head_dim]
 * (an MLA pool: latent[0], latent[1], ... each [page_size][kv_lora_rank +
 * qk_rope_dim]; a quantized pool's: its codes, then their scales, as above)
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

RKV_END_DECLS

#endif /* RADIXKV_POOL_H */

/*
 * attention/attn_internal.h -- what the attention front end (attn.c), the
 * CPU reference (attn_cpu.c) and the CUDA backend (attn_cuda.cu) share.
 *
 * The front end validates a call completely, then lowers every attention
 * operation to "rows": query row i belongs to request row_req[i] of a block
 * table and attends to the first row_len[i] KV tokens of that request
 * (decode: the whole request; prefill: causal prefix). A backend only ever
 * sees validated rows, so it never checks ranges.
 */
#ifndef RKV_ATTENTION_ATTN_INTERNAL_H
#define RKV_ATTENTION_ATTN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "radixkv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rkv_attn_geom {
    uint32_t num_blocks;
    uint32_t page_size;
    uint32_t num_kv_heads;
    uint32_t head_dim;
    uint32_t num_qo_heads; /* 0 for operations without queries */
    rkv_dtype dtype;       /* q, out, merge states, append's input: the
                              pool's act_dtype when quantized, else its dtype */
    size_t elem_size;      /* of dtype */
    /* How K and V are stored: kv_dtype is the pool's dtype; for a
     * quantized one a segment's scales (nsc f32 per row, quant_group
     * elements each) start scale_off bytes after the block's codes. */
    rkv_dtype kv_dtype;
    uint32_t quant_group;
    uint32_t nsc;
    size_t scale_off;
    /* Sliding window of the call (rkv_attn_params; 0 = full attention):
     * the CUDA rows kernel masks by it (the CPU takes rkv_attn_mask). */
    uint32_t window, sinks;
} rkv_attn_geom;


/* Which keys a row sees besides causality (rkv_attn_params): key position
 * j (koff + the key's index in the part attended) is visible from query
 * position q iff j <= q and (window == 0 or j + window >= q or j < sinks).
 * qpos[i]: row i's query position; NULL: row_len[i] - 1 + koff. */
typedef struct rkv_attn_mask {
    uint32_t window, sinks, koff;
    const uint32_t *qpos;
} rkv_attn_mask;

typedef struct rkv_attn_rows {
    uint32_t num_rows;
    uint32_t num_reqs;
    const uint32_t *row_req;   /* [num_rows] */
    const uint32_t *row_len;   /* [num_rows], >= 1 */
    const uint32_t *kv_indptr; /* [num_reqs + 1] */
    const uint32_t *kv_indices;
    uint32_t max_len;          /* max of row_len */
} rkv_attn_rows;

/* The shared prefix of a cascade call: len = num_pages * page_size tokens
 * that every row attends to before its own rows. */
typedef struct rkv_attn_shared {
    uint32_t num_pages;
    const uint32_t *pages;
} rkv_attn_shared;

#define RKV_ATTN_CASCADE_BUDGET ((size_t)256 << 20)
/* Internal tunable (tests): the device memory a CUDA cascade's shared-
 * prefix split states may take (fewer splits when lower; one at least);
 * 0 restores the default. No effect on host pools. */
void rkv_attn_set_cascade_budget(rkv_attn *attn, size_t bytes);

/* Byte strides of a pool's KV (rkv_pool_kv_strides): head h of token t of
 * block b of a layer's K is at kbase + b * block + t * token + h * head. */
typedef struct rkv_attn_strides {
    size_t block, token, head;
} rkv_attn_strides;

/* CPU reference. o32 / lse32: fp32 partial state of every (row, head). */
/* mask NULL: causal only. A row that sees no key of this part gets lse
 * -INFINITY and output 0 (an empty partial state). */
void rkv_attn_cpu_rows(const rkv_attn_geom *g, const void *kbase,
                       const void *vbase, const rkv_attn_strides *kst,
                       const rkv_attn_rows *rows, const rkv_attn_mask *mask,
                       const void *q, float sm_scale, float *scratch,
                       float *o32, float *lse32);
/* Quantizes one (token, head) row of f32 values into its codes and scales
 * (rkv_attn_append of a quantized host pool). */
void rkv_attn_cpu_quant_row(const rkv_attn_geom *g, const float *x, void *codes,
                            void *scales);
/* Floats of scratch rkv_attn_cpu_rows needs. */
size_t rkv_attn_cpu_scratch(const rkv_attn_geom *g, uint32_t max_len);
void rkv_attn_cpu_store(rkv_dtype dt, void *dst, size_t i, float x);
float rkv_attn_cpu_load(rkv_dtype dt, const void *src, size_t i);
/* K or V row (block byte offset `at` within a layer's segment base,
 * token-in-page t, head h) as head_dim f32 values: converted, or
 * dequantized from its codes and scales. */
void rkv_attn_cpu_load_kv(const rkv_attn_geom *g, const char *base, size_t at,
                          const rkv_attn_strides *kst, uint32_t t, uint32_t h,
                          float *dst);

/* The CUDA backend (attn_cuda.cu, in libradixkv_cuda). The core never
 * calls these directly: it reaches them through the backend table
 * (common/cuda_backend.h, filled in attention/cuda_backend.cu). */
typedef struct rkv_attn_cuda rkv_attn_cuda;
rkv_status rkv_attn_cuda_create(int device, rkv_attn_cuda **out);
void rkv_attn_cuda_destroy(rkv_attn_cuda *c);
rkv_status rkv_attn_cuda_set_stream(rkv_attn_cuda *c, void *stream);
rkv_status rkv_attn_cuda_sync(rkv_attn_cuda *c);
rkv_status rkv_attn_cuda_append(rkv_attn_cuda *c, const rkv_attn_geom *g,
                                void *kbase, void *vbase, uint32_t n,
                                const uint32_t *slots, const void *k,
                                const void *v);
/* shared may be NULL (plain decode / prefill). */
rkv_status rkv_attn_cuda_rows(rkv_attn_cuda *c, const rkv_attn_geom *g,
                              const void *kbase, const void *vbase,
                              const rkv_attn_rows *rows,
                              const rkv_attn_shared *shared, const void *q,
                              float sm_scale, void *out, float *lse);
/* Plan / run (rkv_attn_plan_create, rkv_attn_run): the partition of a
 * batch of rows and where its parts live in the caller's workspace. */
typedef struct rkv_attn_plan_layout {
    size_t ws_bytes; /* workspace the plan needs */
    size_t off_req, off_len, off_ind, off_idx, off_po, off_pl, off_t;
    size_t ntiles;  /* tensor-core prefill tiles */
    uint32_t num_rows, splits, chunk, ng, hpw;
    int direct; /* one split: the rows kernel writes the output */
    int tiled; /* prefill/extend over unquantized KV: the tile kernel */
} rkv_attn_plan_layout;
/* ws NULL: fills only the sizes (out->ws_bytes). Else uploads the rows'
 * index arrays into ws (>= out->ws_bytes, 256-byte aligned) on the
 * context's stream. */
rkv_status rkv_attn_cuda_plan(rkv_attn_cuda *c, const rkv_attn_geom *g,
                              const rkv_attn_rows *rows, void *ws,
                              size_t ws_bytes, rkv_attn_plan_layout *out);
/* Kernel launches only: no copy, allocation or synchronisation. */
rkv_status rkv_attn_cuda_run(rkv_attn_cuda *c, const rkv_attn_geom *g,
                             const rkv_attn_plan_layout *p, void *ws,
                             const void *kbase, const void *vbase,
                             const void *q, float sm_scale, void *out,
                             float *lse);
/* Bytes the cascade's shared-prefix split states may take (default
 * RKV_ATTN_CASCADE_BUDGET). */
void rkv_attn_cuda_set_cascade_budget(rkv_attn_cuda *c, size_t bytes);
rkv_status rkv_attn_cuda_merge(rkv_attn_cuda *c, const rkv_attn_geom *g,
                               uint32_t n, const void *v_a, const float *lse_a,
                               const void *v_b, const float *lse_b,
                               void *v_out, float *lse_out);
/* ---- MLA (mla.c front end, mla_cpu.c reference, mla_cuda.cu kernels) ---
 * A pool of the MLA layout: per layer one plane [num_blocks][page_size]
 * [rank + rope], a token's row c_kv then k_pe. Rows as above. */
typedef struct rkv_mla_geom {
    uint32_t num_blocks;
    uint32_t page_size;
    uint32_t rank;      /* kv_lora_rank: c_kv and o_latent width */
    uint32_t rope;      /* qk_rope_dim */
    uint32_t num_heads; /* 0 for append */
    rkv_dtype dtype;
    size_t elem_size;
} rkv_mla_geom;

/* CPU reference: fp32 state of every (row, head) into o32 [rows][H][rank]
 * and lse32 [rows][H]; scratch of rkv_mla_cpu_scratch floats. */
size_t rkv_mla_cpu_scratch(const rkv_mla_geom *g, uint32_t max_len);
void rkv_mla_cpu_rows(const rkv_mla_geom *g, const void *base,
                      const rkv_attn_rows *rows, const void *q_latent,
                      const void *q_pe, float sm_scale, float *scratch,
                      float *o32, float *lse32);

/* CUDA (libradixkv_cuda, reached through the backend table). Work is
 * queued on `stream` (the rkv_attn context's); the context owns a device
 * workspace that only grows. */
typedef struct rkv_mla_cuda rkv_mla_cuda;
rkv_status rkv_mla_cuda_create(int device, rkv_mla_cuda **out);
void rkv_mla_cuda_destroy(rkv_mla_cuda *c);
rkv_status rkv_mla_cuda_append(rkv_mla_cuda *c, void *stream, const rkv_mla_geom *g,
                               void *base, uint32_t n, const uint32_t *slots,
                               const void *c_kv, const void *k_pe);
rkv_status rkv_mla_cuda_rows(rkv_mla_cuda *c, void *stream, const rkv_mla_geom *g,
                             const void *base, const rkv_attn_rows *rows,
                             const void *q_latent, const void *q_pe, float sm_scale,
                             void *out, float *lse);

/* What attn.c lends mla.c (it owns struct rkv_attn): the lowering of a
 * block table to rows (*mem: free() it), the slot checks of append, the
 * pool, and the CUDA backend's MLA context, made on first use. */
struct rkv_cuda_backend;
rkv_status rkv_attn_lower_rows(const rkv_attn *a, const char *fn,
                               const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                               rkv_attn_rows *rows, uint32_t **mem);
rkv_status rkv_attn_check_slots(const rkv_attn *a, const char *fn, uint32_t n,
                                const uint32_t *slots);
const rkv_pool_config *rkv_attn_pool_config(const rkv_attn *a);
rkv_pool *rkv_attn_pool(const rkv_attn *a);
/* What the token-eviction front end (kv_evict.c) borrows: the checks of
 * an rkv_attn_params (K/V pool, layer, heads; *scale: the effective
 * sm_scale), the call geometry, and whether the pool is a CUDA one. */
rkv_status rkv_attn_check_params(const rkv_attn *a, const char *fn,
                                 const rkv_attn_params *p, float *scale);
rkv_attn_geom rkv_attn_geom_for(const rkv_attn *a, uint32_t num_qo_heads);
int rkv_attn_is_cuda(const rkv_attn *a);
rkv_status rkv_attn_mla_backend(rkv_attn *a, const struct rkv_cuda_backend **be,
                                rkv_mla_cuda **c, void **stream);

#ifdef __cplusplus
}
#endif

#endif

/*
 * radixkv/attention.h -- paged attention (attention/): the CPU reference and the CUDA backend, plan once per batch and run per layer.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_ATTENTION_H
#define RADIXKV_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/pool.h"

RKV_BEGIN_DECLS

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
 * Quantized pools (FP8/INT8/INT4): q, out, merge states and append's k, v
 * are in the pool's act_dtype instead; append quantizes each (token, head)
 * row (radixkv/pool.h), and every attention call dequantizes K and V on
 * load into the same fp32 arithmetic, so results match an unquantized pool
 * holding the dequantized values. On a CUDA pool append quantizes on the
 * device (the same codes as the host's), and decode, prefill and plan/run
 * dequantize into the decode kernel's tiles, rounded to act_dtype (so
 * prefill of a quantized pool does not use the tensor-core kernel); a
 * cascade with a shared prefix is RKV_ERR_UNSUPPORTED there for now.
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
    /* Sliding window (per call, so per layer: full and sliding layers mix
     * in one model). window_left W > 0: the query at position p sees the
     * keys at p - W .. p (W + 1 of them, FlashInfer's window_left) plus
     * the first num_sink_tokens positions (attention sinks, StreamingLLM),
     * positions counted from the start of the request's KV (a cascade's
     * shared prefix first). W == 0: full causal attention (sinks unused).
     * CUDA: decode, prefill (then on the decode kernel, not the tensor-
     * core one) and decode plans; RKV_ERR_UNSUPPORTED for a window over a
     * cascade's shared prefix or run on a tensor-core prefill plan. */
    uint32_t window_left;
    uint32_t num_sink_tokens;
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
/* rkv_attn_run with every rkv_attn_params field (the window and sinks of
 * this layer); p->num_qo_heads must be the plan's. */
rkv_status rkv_attn_run_params(rkv_attn *attn, const rkv_attn_plan *plan,
                               const rkv_attn_params *p, const void *q, void *out,
                               float *lse);
void rkv_attn_plan_destroy(rkv_attn_plan *plan); /* NULL is fine */

/*
 * Multi-head latent attention (MLA, DeepSeek-V2/V3) over a pool of the MLA
 * layout (pool.h), in the absorbed form: the caller folds the key
 * up-projection into the query and the value up-projection into the
 * output, so attention runs over the latent cache as multi-query
 * attention with one shared "head" of kv_lora_rank + qk_rope_dim (keys)
 * and kv_lora_rank (values). With R = kv_lora_rank, E = qk_rope_dim and
 * H = num_heads:
 *   q_latent [num_rows][H][R]  the no-RoPE query already multiplied by
 *                              W_UK: q_latent[h] = W_UK[h]^T q_nope[h]
 *   q_pe     [num_rows][H][E]  the RoPE part of the query (RoPE applied)
 *   c_kv     [num_tokens][R], k_pe [num_tokens][E]      (append)
 *   out      [num_rows][H][R]  o_latent; the caller applies W_UV
 *                              (o[h] = W_UV[h] o_latent[h]) and W_O
 *   lse      [num_rows][H] float, may be NULL (as rkv_attn_decode's)
 * score(h, t) = sm_scale * (q_latent[h] . c_kv[t] + q_pe[h] . k_pe[t]),
 * o_latent[h] = sum_t softmax_t(score(h, t)) c_kv[t]. This equals the
 * explicit form with k[h] = [W_UK[h] c_kv, k_pe] and v[h] = W_UV[h] c_kv
 * up to rounding. sm_scale has no default (it depends on the model's query
 * head width before absorption, e.g. 1 / sqrt(128 + 64) for DeepSeek-V3):
 * it must be > 0. Elements are the pool's dtype (f16, bf16, f32); fp32
 * accumulation, outputs rounded once. CUDA: R <= 512 and R + E <= 576 (else
 * RKV_ERR_UNSUPPORTED); every page of the latent is read once per group of
 * up to 16 heads (8 in f32), so once in all for up to 16 heads. Block tables, validation and
 * memory rules are those of the K/V calls above. Any of these calls on a
 * K/V pool, and the K/V calls on an MLA pool: RKV_ERR_UNSUPPORTED.
 */
typedef struct rkv_mla_params {
    uint32_t layer;     /* < num_layers                                      */
    uint32_t num_heads; /* query heads, >= 1                                 */
    float sm_scale;     /* > 0                                               */
} rkv_mla_params;

/* Writes token i's c_kv and k_pe (rows i) of layer `layer` at slot
 * slots[i], as rkv_attn_append. */
rkv_status rkv_attn_mla_append(rkv_attn *attn, uint32_t layer, uint32_t num_tokens,
                               const uint32_t *slots, const void *c_kv,
                               const void *k_pe);
/* One query row per request over all of its KV (flash-decoding on CUDA). */
rkv_status rkv_attn_mla_decode(rkv_attn *attn, const rkv_mla_params *p,
                               const rkv_paged_kv *kv, const void *q_latent,
                               const void *q_pe, void *out, float *lse);
/* Prefill / extend, rows as rkv_attn_prefill (causal over the cached
 * prefix and the new tokens, whose KV is already appended). */
rkv_status rkv_attn_mla_prefill(rkv_attn *attn, const rkv_mla_params *p,
                                const uint32_t *qo_indptr, const rkv_paged_kv *kv,
                                const void *q_latent, const void *q_pe, void *out,
                                float *lse);

/* fp16 / bf16 <-> fp32 on the host (round-to-nearest-even; NaN stays NaN). */
uint16_t rkv_f32_to_f16(float x);
float rkv_f16_to_f32(uint16_t h);
uint16_t rkv_f32_to_bf16(float x);
float rkv_bf16_to_f32(uint16_t h);

RKV_END_DECLS

#endif /* RADIXKV_ATTENTION_H */

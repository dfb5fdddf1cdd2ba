/*
 * sim/costmodel.h -- the simulated GPU that advances the replay's clock in
 * `--order sched` mode. No kernel runs; a step's time is computed from the
 * batch plan with a roofline model:
 *
 *   step_ms = overhead_ms + max(compute_ms, memory_ms)
 *   compute_ms = FLOPs / (peak_tflops * 1e12 * mfu)
 *   memory_ms  = bytes / (bandwidth_tbs * 1e12 * mbu)
 *
 *   FLOPs = 2 * params * (new tokens in the step)            (weight GEMMs)
 *         + 4 * layers * q_heads * head_dim * sum over new tokens of the
 *           keys each attends to                  (QK^T and PV, causal)
 *   bytes = params * weight_bytes                       (weights, once)
 *         + kv_bytes_per_token * (context tokens read by decode requests)
 *   kv_bytes_per_token = 2 (K and V) * layers * kv_heads * head_dim
 *                        * kv_dtype_bytes
 *   or, for a quantized kv_dtype (FP8, INT8, INT4), the pool's own size of
 *   a token with its scales (rkv_pool_config_bytes_per_token), so the same GPU
 *   memory holds ~1.9x the tokens at 8 bits and ~3.2x at INT4 (groups of
 *   32), and a decode step reads that many fewer KV bytes.
 *
 * MLA models (kv_lora_rank > 0, DeepSeek-V2/V3): the cache holds one
 * latent row a token a layer, so kv_bytes_per_token = layers *
 * (kv_lora_rank + qk_rope_dim) * kv_dtype_bytes, and attention in the
 * absorbed form costs 2 * layers * q_heads * (2 * kv_lora_rank +
 * qk_rope_dim) FLOPs per key (scores over rank + rope, values over rank),
 * q_heads = hidden / head_dim. MoE models multiply only active_params per
 * token (weight FLOPs) but hold and read all params (memory, bytes).
 *
 * Hybrid models (sliding_layers > 0, e.g. gpt-oss, Gemma 3): in a step
 * built with the _model adders (what the replay does), the sliding layers'
 * share (sliding_layers / layers) of the attention FLOPs and of the decode
 * KV bytes counts each token's keys up to sliding_window + 1 only.
 *
 * A prefill-only step is compute-bound: time per uncomputed token is the
 * weight FLOPs plus its attention FLOPs over the context at the achieved
 * fraction of peak. A decode-only step is memory-bound: (weight bytes + KV
 * bytes of every decoding request) / achieved bandwidth. Mixed steps take
 * the larger of the two. Prefill attention reads of cached KV are ignored
 * (compute dominates), and so are sampling and CPU time other than the
 * fixed per-step overhead.
 *
 * Defaults: an 8B Llama-3-like model (32 layers, hidden 4096, 32 query
 * heads, 8 KV heads, head_dim 128, 8.03e9 parameters, bf16 weights and KV)
 * on one H100 SXM (989 TFLOP/s dense bf16, 3.35 TB/s HBM3, 80 GB), with
 * 50 % of peak FLOPs and 80 % of peak bandwidth achieved, 0.1 ms per step.
 */
#ifndef RKV_SIM_COSTMODEL_H
#define RKV_SIM_COSTMODEL_H

#include <stdint.h>

#include "radixkv.h"

typedef struct rkv_cost_model {
    /* model */
    uint32_t layers;
    uint32_t hidden;        /* q_heads * head_dim                           */
    uint32_t kv_heads;
    uint32_t head_dim;
    double params;          /* parameter count                              */
    double weight_bytes;    /* bytes per parameter (2 = bf16)               */
    double kv_dtype_bytes;  /* bytes per K or V element (2 = bf16)          */
    uint32_t kv_lora_rank;  /* MLA latent width; 0 = a K/V (MHA/GQA) cache  */
    uint32_t qk_rope_dim;   /* MLA RoPE key width (with kv_lora_rank)       */
    double active_params;   /* parameters a token multiplies (MoE); 0 =
                               params                                       */
    rkv_dtype kv_dtype;     /* BF16 (default: kv_dtype_bytes rules), or a
                               quantized dtype (then its pool size rules)  */
    uint32_t kv_quant_group; /* INT4 group (default 32)                     */
    uint32_t sliding_layers; /* hybrid models: layers (of `layers`) with a
                               sliding window; 0 (default): all full     */
    uint32_t sliding_window; /* their window in tokens (with sliding_layers) */
    /* GPU */
    double peak_tflops;     /* dense tensor-core peak at the weight dtype   */
    double bandwidth_tbs;   /* HBM bandwidth, TB/s (1e12 bytes/s)           */
    double memory_gb;       /* HBM size, GB (1e9 bytes)                      */
    double mfu;             /* achieved fraction of peak FLOPs               */
    double mbu;             /* achieved fraction of peak bandwidth           */
    double overhead_ms;     /* fixed time per step (launches, sampling)      */
    /* tiers */
    double pcie_gbps;       /* host <-> device, GB/s per direction (default
                               50: PCIe 5 x16)                              */
    double disk_gbps;       /* disk read/write, GB/s (default 6: NVMe)       */
} rkv_cost_model;

void rkv_cost_model_init(rkv_cost_model *m);
/* Sets the model fields (not the GPU's) to a named model: "llama3-8b" (the
 * default), "llama3-70b", "llama3-405b" (GQA, bf16 weights) or
 * "deepseek-v3" (MLA 512 + 64, 61 layers, 128 heads, 671e9 parameters of
 * which 37e9 active, fp8 weights). RKV_ERR_INVALID_ARG naming the presets
 * for another name; m unchanged. */
rkv_status rkv_cost_model_preset(rkv_cost_model *m, const char *name);
/* The hybrid presets (full and sliding-window layers, swa/):
 * "gpt-oss-120b" (36 layers alternating full / sliding, window 128, 8 KV
 * heads of 64, MoE 116.8e9 parameters, 5.1e9 active, MXFP4 weights) and
 * "gemma3-27b" (62 layers, 52 of them sliding with window 1024, 16 KV
 * heads of 128, bf16). A cache that keeps every layer's KV for every
 * cached token pays rkv_cost_kv_bytes_per_token; a hybrid tree keeps the
 * sliding layers' share (rkv_cost_kv_sliding_bytes_per_token) only for
 * the pages some window still needs. */
/* "llama3-8b, llama3-70b, llama3-405b, deepseek-v3, gpt-oss-120b,
 * gemma3-27b" */
const char *rkv_cost_model_preset_names(void);
/* RKV_ERR_INVALID_ARG naming the first bad parameter. */
rkv_status rkv_cost_model_validate(const rkv_cost_model *m);

/* Bytes of KV per cached token (all layers): K and V (scales included
 * for a quantized kv_dtype), or MLA's latent. */
double rkv_cost_kv_bytes_per_token(const rkv_cost_model *m);

/* Of that, the sliding-window layers' bytes (0 for a model without). */
double rkv_cost_kv_sliding_bytes_per_token(const rkv_cost_model *m);

/* KV tokens that fit in the GPU beside the weights: (memory_gb * 0.9 *
 * 1e9 - params * weight_bytes) / kv_bytes_per_token (10 % kept for
 * activations and the runtime); 0 if the weights do not fit. */
uint64_t rkv_cost_default_capacity_tokens(const rkv_cost_model *m);

/* "bf16", "fp8" (E4M3), "fp8-e5m2", "int8", "int4" (the --kv-dtype
 * names); 1 and *out set on a known name. */
int rkv_cost_kv_dtype_parse(const char *name, rkv_dtype *out);
const char *rkv_cost_kv_dtype_name(rkv_dtype d);

/* Accumulates one step's work, then gives its time. */
typedef struct rkv_cost_step {
    double new_tokens;   /* prefill chunk tokens + decode tokens          */
    double attn_keys;    /* sum over new tokens of keys attended          */
    double decode_kv_tokens; /* KV tokens read by decode requests         */
    /* the same two sums with each token's keys capped at a sliding
     * window's sliding_window + 1 (the _model adders; windowed = 1) */
    double attn_win_keys;
    double decode_win_tokens;
    int windowed;
} rkv_cost_step;

/* A prefill chunk of q tokens after prefix tokens of context. */
void rkv_cost_add_prefill(rkv_cost_step *s, double prefix, double q);
/* One decode token whose context (including itself) is ctx tokens. */
void rkv_cost_add_decode(rkv_cost_step *s, double ctx);
/* The same for model m: a hybrid model's sliding layers attend to (and a
 * decode reads) at most sliding_window + 1 keys a token, so a step made
 * only with these costs them that much; the plain adders count every
 * layer over the whole context. */
void rkv_cost_add_prefill_model(rkv_cost_step *s, const rkv_cost_model *m,
                                double prefix, double q);
void rkv_cost_add_decode_model(rkv_cost_step *s, const rkv_cost_model *m,
                               double ctx);
double rkv_cost_step_ms(const rkv_cost_model *m, const rkv_cost_step *s);

/* Tiers. Prefill time of one token from its weight FLOPs alone (attention
 * ignored: a lower bound, so loads are chosen only when clearly cheaper),
 * what the scheduler weighs loads against (rkv_sched_config
 * compute_ms_per_token). */
double rkv_cost_prefill_ms_per_token(const rkv_cost_model *m);
/* Time to move the KV of `tokens` tokens between a lower medium and the
 * device: RKV_MEDIUM_HOST at pcie_gbps; RKV_MEDIUM_DISK at the slower of
 * disk_gbps and pcie_gbps (disk -> host -> device, pipelined). */
double rkv_cost_copy_ms(const rkv_cost_model *m, int medium, double tokens);

#endif

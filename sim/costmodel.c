/*
 * sim/costmodel.c -- the roofline step-time model documented in
 * costmodel.h. Pure arithmetic, no state.
 */
#include "sim/costmodel.h"

#include <math.h>
#include <string.h>

#include "common/dtype.h"
#include "common/status.h"

static const struct { const char *name; rkv_dtype d; } kv_names[] = {
    {"bf16", RKV_DTYPE_BF16},          {"fp8", RKV_DTYPE_FP8_E4M3},
    {"fp8-e5m2", RKV_DTYPE_FP8_E5M2}, {"int8", RKV_DTYPE_INT8},
    {"int4", RKV_DTYPE_INT4},
};

int rkv_cost_kv_dtype_parse(const char *name, rkv_dtype *out)
{
    for (size_t i = 0; name && i < sizeof kv_names / sizeof kv_names[0]; i++)
        if (!strcmp(name, kv_names[i].name)) {
            *out = kv_names[i].d;
            return 1;
        }
    return 0;
}

const char *rkv_cost_kv_dtype_name(rkv_dtype d)
{
    for (size_t i = 0; i < sizeof kv_names / sizeof kv_names[0]; i++)
        if (kv_names[i].d == d)
            return kv_names[i].name;
    return "bf16";
}

void rkv_cost_model_init(rkv_cost_model *m)
{
    /* The fields not named here are 0. */
    *m = (rkv_cost_model){.layers = 32, .hidden = 4096, .kv_heads = 8, .head_dim = 128,
                          .params = 8.03e9, .weight_bytes = 2.0, .kv_dtype_bytes = 2.0,
                          .kv_dtype = RKV_DTYPE_BF16, .kv_quant_group = 32,
                          .peak_tflops = 989.0, .bandwidth_tbs = 3.35, .memory_gb = 80.0,
                          .mfu = 0.5, .mbu = 0.8, .overhead_ms = 0.1, .pcie_gbps = 50.0,
                          .disk_gbps = 6.0};
}

/* Model shapes from the models' published configurations. hidden is
 * q_heads * head_dim (what the attention FLOPs count), not the residual
 * width. */
typedef struct preset {
    const char *name;
    uint32_t layers, hidden, kv_heads, head_dim, rank, rope;
    double params, active, weight_bytes;
    uint32_t sliding_layers, sliding_window;
} preset;

static const preset presets[] = {
    {"llama3-8b", 32, 4096, 8, 128, 0, 0, 8.03e9, 0, 2.0, 0, 0},
    {"llama3-70b", 80, 8192, 8, 128, 0, 0, 70.6e9, 0, 2.0, 0, 0},
    {"llama3-405b", 126, 16384, 8, 128, 0, 0, 405.8e9, 0, 2.0, 0, 0},
    /* 128 heads of v_head_dim 128; kv_heads unused by an MLA cache */
    {"deepseek-v3", 61, 16384, 128, 128, 512, 64, 671e9, 37e9, 1.0, 0, 0},
    /* hybrid: 64 query heads of 64; MXFP4 MoE weights, ~0.55 byte a
     * parameter over the checkpoint; every other layer slides over 128 */
    {"gpt-oss-120b", 36, 4096, 8, 64, 0, 0, 116.8e9, 5.1e9, 0.55, 18, 128},
    /* hybrid: 5 local layers (window 1024) to 1 global, 62 layers */
    {"gemma3-27b", 62, 4096, 16, 128, 0, 0, 27.4e9, 0, 2.0, 52, 1024},
};

const char *rkv_cost_model_preset_names(void)
{
    return "llama3-8b, llama3-70b, llama3-405b, deepseek-v3, gpt-oss-120b, "
           "gemma3-27b";
}

rkv_status rkv_cost_model_preset(rkv_cost_model *m, const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        if (strcmp(name, p->name) != 0)
            continue;
        m->layers = p->layers;
        m->hidden = p->hidden;
        m->kv_heads = p->kv_heads;
        m->head_dim = p->head_dim;
        m->kv_lora_rank = p->rank;
        m->qk_rope_dim = p->rope;
        m->params = p->params;
        m->active_params = p->active;
        m->weight_bytes = p->weight_bytes;
        m->kv_dtype_bytes = 2.0;
        m->sliding_layers = p->sliding_layers;
        m->sliding_window = p->sliding_window;
        return RKV_OK;
    }
    return rkv_set_error(RKV_ERR_INVALID_ARG, "cost model: no model '%s' (%s)",
                         name ? name : "(null)", rkv_cost_model_preset_names());
}

rkv_status rkv_cost_model_validate(const rkv_cost_model *m)
{
    const char *bad = NULL;
    if (!m)
        bad = "model is NULL";
    else if (m->layers == 0)
        bad = "layers must be >= 1";
    else if (m->hidden == 0)
        bad = "hidden must be >= 1";
    else if (m->kv_heads == 0)
        bad = "kv_heads must be >= 1";
    else if (m->head_dim == 0)
        bad = "head_dim must be >= 1";
    else if (!(m->params > 0) || !isfinite(m->params))
        bad = "params must be > 0";
    else if (!(m->active_params >= 0 && m->active_params <= m->params))
        bad = "active params must be in 0 (all) .. params";
    else if ((m->kv_lora_rank == 0) != (m->qk_rope_dim == 0))
        bad = "an MLA cache needs both kv_lora_rank and qk_rope_dim";
    else if (m->kv_lora_rank > 0 && rkv_dtype_quantized(m->kv_dtype))
        bad = "an MLA cache is f16, bf16 or f32 (as the pool's MLA layout): no "
              "quantized KV dtype";
    else if (!(m->weight_bytes > 0) || !isfinite(m->weight_bytes))
        bad = "weight bytes must be > 0";
    else if (!(m->kv_dtype_bytes > 0) || !isfinite(m->kv_dtype_bytes))
        bad = "KV bytes must be > 0";
    else if (rkv_dtype_quantized(m->kv_dtype) && rkv_cost_kv_bytes_per_token(m) == 0)
        bad = "the KV dtype's scales need head_dim a multiple of 4 (8-bit) or 8 "
              "(int4) and an even INT4 group dividing it";
    else if (m->sliding_layers > m->layers ||
             (m->sliding_layers == 0) != (m->sliding_window == 0))
        bad = "sliding layers must be <= layers, with a window of >= 1 token";
    else if (m->sliding_layers > 0 && m->kv_lora_rank > 0)
        bad = "sliding layers need a K/V (MHA/GQA) cache";
    else if (!(m->peak_tflops > 0) || !isfinite(m->peak_tflops))
        bad = "peak TFLOP/s must be > 0";
    else if (!(m->bandwidth_tbs > 0) || !isfinite(m->bandwidth_tbs))
        bad = "bandwidth must be > 0";
    else if (!(m->memory_gb >= 0) || !isfinite(m->memory_gb))
        bad = "GPU memory must be >= 0";
    else if (!(m->mfu > 0 && m->mfu <= 1))
        bad = "mfu must be in (0, 1]";
    else if (!(m->mbu > 0 && m->mbu <= 1))
        bad = "mbu must be in (0, 1]";
    else if (!(m->overhead_ms >= 0) || !isfinite(m->overhead_ms))
        bad = "step overhead must be >= 0";
    else if (!(m->pcie_gbps > 0) || !isfinite(m->pcie_gbps))
        bad = "PCIe bandwidth must be > 0";
    else if (!(m->disk_gbps > 0) || !isfinite(m->disk_gbps))
        bad = "disk bandwidth must be > 0";
    if (bad)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "cost model: %s", bad);
    return RKV_OK;
}

double rkv_cost_kv_bytes_per_token(const rkv_cost_model *m)
{
    if (m->kv_lora_rank > 0) /* one latent row: c_kv and k_pe, no V */
        return (double)m->layers * (m->kv_lora_rank + m->qk_rope_dim) *
               m->kv_dtype_bytes;
    if (rkv_dtype_quantized(m->kv_dtype)) {
        rkv_pool_config c;
        rkv_pool_config_init(&c);
        c.num_blocks = 1;
        c.num_layers = m->layers;
        c.num_kv_heads = m->kv_heads;
        c.head_dim = m->head_dim;
        c.dtype = m->kv_dtype;
        c.quant_group = m->kv_quant_group;
        return (double)rkv_pool_config_bytes_per_token(&c);
    }
    return 2.0 * m->layers * m->kv_heads * m->head_dim * m->kv_dtype_bytes;
}

double rkv_cost_kv_sliding_bytes_per_token(const rkv_cost_model *m)
{
    return m->layers == 0 ? 0.0
                          : rkv_cost_kv_bytes_per_token(m) * m->sliding_layers /
                                m->layers;
}

/* Attention FLOPs of one query token per key it attends to. */
static double attn_flops_per_key(const rkv_cost_model *m)
{
    if (m->kv_lora_rank > 0) {
        double q_heads = (double)m->hidden / m->head_dim;
        return 2.0 * m->layers * q_heads * (2.0 * m->kv_lora_rank + m->qk_rope_dim);
    }
    return 4.0 * m->layers * (double)m->hidden;
}

static double active_params(const rkv_cost_model *m)
{
    return m->active_params > 0 ? m->active_params : m->params;
}

uint64_t rkv_cost_default_capacity_tokens(const rkv_cost_model *m)
{
    double free_bytes = m->memory_gb * 0.9e9 - m->params * m->weight_bytes;
    if (free_bytes <= 0)
        return 0;
    return (uint64_t)(free_bytes / rkv_cost_kv_bytes_per_token(m));
}

void rkv_cost_add_prefill(rkv_cost_step *s, double prefix, double q)
{
    /* Token i of the chunk (0-based) sits at position prefix + i and
     * attends to prefix + i + 1 keys (causal, itself included). */
    s->new_tokens += q;
    s->attn_keys += q * prefix + q * (q + 1) / 2;
}

void rkv_cost_add_decode(rkv_cost_step *s, double ctx)
{
    s->new_tokens += 1;
    s->attn_keys += ctx;
    s->decode_kv_tokens += ctx;
}

/* Sum over i in [0, q) of min(a + i, c): keys of q consecutive tokens
 * whose first sees a, capped at c. */
static double capped_run(double a, double q, double c)
{
    if (a >= c)
        return q * c;
    double u = c - a < q ? c - a : q; /* tokens below the cap */
    return u * a + u * (u - 1) / 2 + (q - u) * c;
}

void rkv_cost_add_prefill_model(rkv_cost_step *s, const rkv_cost_model *m,
                                double prefix, double q)
{
    rkv_cost_add_prefill(s, prefix, q);
    s->windowed = 1;
    s->attn_win_keys += m->sliding_layers > 0
                            ? capped_run(prefix + 1, q, m->sliding_window + 1.0)
                            : q * prefix + q * (q + 1) / 2;
}

void rkv_cost_add_decode_model(rkv_cost_step *s, const rkv_cost_model *m,
                               double ctx)
{
    rkv_cost_add_decode(s, ctx);
    double w = m->sliding_layers > 0 && ctx > m->sliding_window + 1.0
                   ? m->sliding_window + 1.0 : ctx;
    s->windowed = 1;
    s->attn_win_keys += w;
    s->decode_win_tokens += w;
}

double rkv_cost_step_ms(const rkv_cost_model *m, const rkv_cost_step *s)
{
    if (s->new_tokens <= 0)
        return 0.0;
    /* the sliding layers' share reads the windowed sums when the step has
     * them (f = 0 for a model without sliding layers) */
    double f = s->windowed && m->layers > 0 ? (double)m->sliding_layers / m->layers : 0.0;
    double keys = (1.0 - f) * s->attn_keys + f * s->attn_win_keys;
    double kv = (1.0 - f) * s->decode_kv_tokens + f * s->decode_win_tokens;
    double flops = 2.0 * active_params(m) * s->new_tokens +
                   attn_flops_per_key(m) * keys;
    double bytes = m->params * m->weight_bytes +
                   rkv_cost_kv_bytes_per_token(m) * kv;
    double compute_ms = flops / (m->peak_tflops * 1e12 * m->mfu) * 1e3;
    double memory_ms = bytes / (m->bandwidth_tbs * 1e12 * m->mbu) * 1e3;
    return m->overhead_ms + (compute_ms > memory_ms ? compute_ms : memory_ms);
}

double rkv_cost_prefill_ms_per_token(const rkv_cost_model *m)
{
    return 2.0 * active_params(m) / (m->peak_tflops * 1e12 * m->mfu) * 1e3;
}

double rkv_cost_copy_ms(const rkv_cost_model *m, int medium, double tokens)
{
    double gbps = m->pcie_gbps;
    if (medium == RKV_MEDIUM_DISK && m->disk_gbps < gbps)
        gbps = m->disk_gbps;
    return tokens * rkv_cost_kv_bytes_per_token(m) / (gbps * 1e9) * 1e3;
}

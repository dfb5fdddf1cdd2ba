/*
 * attention/attn_cpu.c -- the CPU reference of paged attention: the
 * semantics every backend must match, written for clarity first.
 *
 * For one query row and one kv head (all G = Hq / Hkv query heads that read
 * it at once, so each K/V row is converted once): scores s_t = sm_scale *
 * q.k_t in fp32, m = max s, p_t = exp(s_t - m), l = sum p, o = sum p_t v_t
 * / l, lse = m + log(l) (natural log of the scaled scores). Two passes
 * (scores, then values); the fp32 state goes to o32 / lse32, and the front
 * end rounds it once into the output dtype. Deterministic: the same inputs
 * give the same bits, whatever the batch around a row (the end-to-end test
 * relies on this for exact reuse). KV rows are addressed through the
 * pool's strides, so a server-owned layout reads the same way; a
 * quantized pool's rows are dequantized to f32 on load (kv_codec.h), so
 * its results equal an f32 pool holding the dequantized values. Keys a
 * sliding window hides (rkv_attn_mask) score -inf and are skipped; a row
 * that sees no key of the part is an empty state (lse -inf, output 0).
 */
#include <math.h>
#include <string.h>

#include "attention/attn_internal.h"
#include "attention/cpu_softmax.h"
#include "attention/kv_codec.h"

float rkv_attn_cpu_load(rkv_dtype dt, const void *src, size_t i)
{
    switch (dt) {
    case RKV_DTYPE_F16: return rkv_f16_to_f32(((const uint16_t *)src)[i]);
    case RKV_DTYPE_BF16: return rkv_bf16_to_f32(((const uint16_t *)src)[i]);
    case RKV_DTYPE_F32: return ((const float *)src)[i];
    default: return 0.0f; /* quantized rows go through load_kv */
    }
}

void rkv_attn_cpu_store(rkv_dtype dt, void *dst, size_t i, float x)
{
    switch (dt) {
    case RKV_DTYPE_F16: ((uint16_t *)dst)[i] = rkv_f32_to_f16(x); break;
    case RKV_DTYPE_BF16: ((uint16_t *)dst)[i] = rkv_f32_to_bf16(x); break;
    case RKV_DTYPE_F32: ((float *)dst)[i] = x; break;
    default: break; /* never an output dtype */
    }
}

size_t rkv_attn_cpu_scratch(const rkv_attn_geom *g, uint32_t max_len)
{
    size_t gq = g->num_qo_heads / g->num_kv_heads;
    return gq * (size_t)max_len + g->head_dim + 2 * gq * g->head_dim;
}

/* Converts n elements starting at element i of src into dst. */
static void load_row(rkv_dtype dt, const void *src, size_t i, uint32_t n,
                     float *dst)
{
    for (uint32_t d = 0; d < n; d++)
        dst[d] = rkv_attn_cpu_load(dt, src, i + d);
}

void rkv_attn_cpu_quant_row(const rkv_attn_geom *g, const float *x, void *codes,
                            void *scales)
{
    /* scales are 4-byte aligned: the pool's constraints (radixkv/pool.h) */
    rkv_kvq_quant_row((int)g->kv_dtype, g->quant_group, x, g->head_dim, codes,
                      (float *)scales);
}

/* K or V row of (block offset `at` within a segment, token-in-page t, head
 * h) as f32: converted, or dequantized from its codes and scales. */
void rkv_attn_cpu_load_kv(const rkv_attn_geom *g, const char *base, size_t at,
                          const rkv_attn_strides *kst, uint32_t t, uint32_t h,
                          float *dst)
{
    const char *row = base + at + t * kst->token + h * kst->head;
    if (!rkv_dtype_quantized(g->kv_dtype)) {
        load_row(g->kv_dtype, row, 0, g->head_dim, dst);
        return;
    }
    float sc[1] = {0.0f}; /* set at d == 0: grp divides head_dim */
    const char *sp = base + at + g->scale_off +
                     ((size_t)t * g->num_kv_heads + h) * g->nsc * sizeof(float);
    const uint32_t grp = g->kv_dtype == RKV_DTYPE_INT4 ? g->quant_group : g->head_dim;
    for (uint32_t d = 0; d < g->head_dim; d++) {
        if (d % grp == 0)
            memcpy(sc, sp + (d / grp) * sizeof(float), sizeof(float));
        dst[d] = g->kv_dtype == RKV_DTYPE_INT4
                     ? rkv_kvq_dec4((const uint8_t *)row, d, sc[0])
                     : rkv_kvq_dec8((int)g->kv_dtype, ((const uint8_t *)row)[d], sc[0]);
    }
}

static int visible(const rkv_attn_mask *m, uint32_t qpos, uint32_t t)
{
    if (m == NULL || m->window == 0)
        return 1;
    uint64_t j = (uint64_t)m->koff + t;
    return j < m->sinks || j + m->window >= qpos;
}

void rkv_attn_cpu_rows(const rkv_attn_geom *g, const void *kbase,
                       const void *vbase, const rkv_attn_strides *kst,
                       const rkv_attn_rows *rows, const rkv_attn_mask *mask,
                       const void *q, float sm_scale, float *scratch,
                       float *o32, float *lse32)
{
    const uint32_t P = g->page_size, Hkv = g->num_kv_heads, D = g->head_dim;
    const uint32_t Hq = g->num_qo_heads, G = Hq / Hkv;
    float *scores = scratch;                       /* [G][max_len] */
    float *kv = scores + (size_t)G * rows->max_len; /* [D] */
    float *qf = kv + D;                             /* [G][D] */
    float *acc = qf + (size_t)G * D;                /* [G][D] */

    for (uint32_t r = 0; r < rows->num_rows; r++) {
        const uint32_t req = rows->row_req[r], len = rows->row_len[r];
        const uint32_t *pages = rows->kv_indices + rows->kv_indptr[req];
        const uint32_t koff = mask ? mask->koff : 0;
        const uint32_t qpos = mask && mask->qpos ? mask->qpos[r] : len - 1 + koff;
        for (uint32_t h = 0; h < Hkv; h++) {
            for (uint32_t gi = 0; gi < G; gi++)
                load_row(g->dtype, q, ((size_t)r * Hq + h * G + gi) * D, D,
                         qf + (size_t)gi * D);
            for (uint32_t t = 0; t < len; t++) {
                if (!visible(mask, qpos, t)) {
                    for (uint32_t gi = 0; gi < G; gi++)
                        scores[(size_t)gi * len + t] = -INFINITY;
                    continue;
                }
                rkv_attn_cpu_load_kv(g, kbase, pages[t / P] * kst->block, kst, t % P, h, kv);
                for (uint32_t gi = 0; gi < G; gi++) {
                    const float *qq = qf + (size_t)gi * D;
                    float s = 0.0f;
                    for (uint32_t d = 0; d < D; d++)
                        s += qq[d] * kv[d];
                    scores[(size_t)gi * len + t] = s * sm_scale;
                }
            }
            for (uint32_t gi = 0; gi < G; gi++) {
                memset(acc + (size_t)gi * D, 0, sizeof(float) * D);
                lse32[(size_t)r * Hq + h * G + gi] =
                    rkv_attn_cpu_softmax(scores + (size_t)gi * len, len);
            }
            for (uint32_t t = 0; t < len; t++) {
                if (!visible(mask, qpos, t))
                    continue;
                rkv_attn_cpu_load_kv(g, vbase, pages[t / P] * kst->block, kst, t % P, h, kv);
                for (uint32_t gi = 0; gi < G; gi++) {
                    float p = scores[(size_t)gi * len + t];
                    float *a = acc + (size_t)gi * D;
                    for (uint32_t d = 0; d < D; d++)
                        a[d] += p * kv[d];
                }
            }
            for (uint32_t gi = 0; gi < G; gi++)
                memcpy(o32 + ((size_t)r * Hq + h * G + gi) * D,
                       acc + (size_t)gi * D, sizeof(float) * D);
        }
    }
}

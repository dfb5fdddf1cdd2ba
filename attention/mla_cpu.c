/*
 * attention/mla_cpu.c -- the CPU reference of multi-head latent attention
 * in the absorbed form (radixkv/attention.h): the semantics the CUDA
 * kernel (mla_cuda.cu) must match, written for clarity first.
 *
 * For one query row: each latent row (c_kv then k_pe) is converted once and
 * scored by every head, s(h, t) = sm_scale * (q_latent[h] . c_kv[t] +
 * q_pe[h] . k_pe[t]) in fp32; then per head m = max s, p = exp(s - m),
 * l = sum p, o_latent = sum_t p_t c_kv[t] / l, lse = m + log(l). The
 * latent is shared by all heads (multi-query attention over it), so it is
 * read twice per row (scores, then values) whatever the head count.
 * Deterministic: the same inputs give the same bits whatever the batch.
 */
#include <string.h>

#include "attention/attn_internal.h"
#include "attention/cpu_softmax.h"

size_t rkv_mla_cpu_scratch(const rkv_mla_geom *g, uint32_t max_len)
{
    const size_t H = g->num_heads, W = (size_t)g->rank + g->rope;
    /* scores [H][max_len], one latent row [W], queries [H][W] */
    return H * (size_t)max_len + W + H * W;
}

void rkv_mla_cpu_rows(const rkv_mla_geom *g, const void *base,
                      const rkv_attn_rows *rows, const void *q_latent,
                      const void *q_pe, float sm_scale, float *scratch,
                      float *o32, float *lse32)
{
    const uint32_t P = g->page_size, H = g->num_heads, R = g->rank, E = g->rope;
    const size_t W = (size_t)R + E;
    float *scores = scratch;                       /* [H][max_len] */
    float *lat = scores + (size_t)H * rows->max_len; /* [W] */
    float *qf = lat + W;                           /* [H][W]: q_latent, q_pe */

    for (uint32_t r = 0; r < rows->num_rows; r++) {
        const uint32_t req = rows->row_req[r], len = rows->row_len[r];
        const uint32_t *pages = rows->kv_indices + rows->kv_indptr[req];
        for (uint32_t h = 0; h < H; h++) {
            const size_t qi = (size_t)r * H + h;
            for (uint32_t d = 0; d < R; d++)
                qf[h * W + d] = rkv_attn_cpu_load(g->dtype, q_latent, qi * R + d);
            for (uint32_t d = 0; d < E; d++)
                qf[h * W + R + d] = rkv_attn_cpu_load(g->dtype, q_pe, qi * E + d);
        }
        for (uint32_t t = 0; t < len; t++) {
            size_t row = (size_t)pages[t / P] * P + t % P;
            for (size_t d = 0; d < W; d++)
                lat[d] = rkv_attn_cpu_load(g->dtype, base, row * W + d);
            for (uint32_t h = 0; h < H; h++) {
                const float *q = qf + h * W;
                float s = 0.0f;
                for (size_t d = 0; d < W; d++)
                    s += q[d] * lat[d];
                scores[(size_t)h * len + t] = s * sm_scale;
            }
        }
        for (uint32_t h = 0; h < H; h++) {
            /* p normalised now: o32 is then final */
            lse32[(size_t)r * H + h] = rkv_attn_cpu_softmax(scores + (size_t)h * len, len);
            memset(o32 + ((size_t)r * H + h) * R, 0, sizeof(float) * R);
        }
        for (uint32_t t = 0; t < len; t++) {
            size_t row = (size_t)pages[t / P] * P + t % P;
            for (uint32_t d = 0; d < R; d++)
                lat[d] = rkv_attn_cpu_load(g->dtype, base, row * W + d);
            for (uint32_t h = 0; h < H; h++) {
                float p = scores[(size_t)h * len + t];
                float *o = o32 + ((size_t)r * H + h) * R;
                for (uint32_t d = 0; d < R; d++)
                    o[d] += p * lat[d];
            }
        }
    }
}

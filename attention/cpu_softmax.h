/*
 * attention/cpu_softmax.h -- the CPU references' (attn_cpu.c, mla_cpu.c)
 * one softmax over a row of scores: the normalisation both must do
 * identically, bit for bit, so that a change to one is a change to both.
 *
 * Invariant: sc[0..len) is overwritten by p_t = exp(s_t - m) / l, and the
 * return is lse = m + log(l), with m = max s and l = sum exp(s - m), in
 * this order of fp32 operations (the CUDA kernels are tested against it);
 * a row whose every score is -inf gives p = 0 and lse = -inf.
 */
#ifndef RKV_ATTENTION_CPU_SOFTMAX_H
#define RKV_ATTENTION_CPU_SOFTMAX_H

#include <math.h>
#include <stdint.h>

/* Normalises sc[0..len) in place; returns its log-sum-exp. A row with no
 * visible key (every score -inf: all masked) is the empty state: p = 0
 * everywhere and lse = -inf, not the NaN that exp(-inf - -inf) would give. */
static inline float rkv_attn_cpu_softmax(float *sc, uint32_t len)
{
    float mx = -INFINITY, l = 0.0f;
    for (uint32_t t = 0; t < len; t++)
        mx = sc[t] > mx ? sc[t] : mx;
    if (mx == -INFINITY) {
        for (uint32_t t = 0; t < len; t++)
            sc[t] = 0.0f;
        return -INFINITY;
    }
    for (uint32_t t = 0; t < len; t++) {
        sc[t] = expf(sc[t] - mx);
        l += sc[t];
    }
    /* normalise p now, so the weighted sum is the final output */
    float inv = 1.0f / l;
    for (uint32_t t = 0; t < len; t++)
        sc[t] *= inv;
    return mx + logf(l);
}

#endif

/*
 * attention/kv_codec.h -- the quantized KV formats' element codecs (FP8
 * E4M3 / E5M2, INT8, INT4) and the quantization of one row, as inline
 * functions that compile both in C (the CPU reference and append) and in
 * CUDA / the simulator (RKV_KVQ_FN adds __host__ __device__), so the host
 * and the device produce and read exactly the same codes.
 *
 * Invariants: every conversion is exact integer / bit arithmetic, or one
 * IEEE f32 operation (x / scale, code * scale, absmax / max), which rounds
 * the same on any IEEE machine (CUDA's '/' is IEEE-correct unless built
 * with fast math, which this project does not use). FP8 encode rounds to
 * nearest even and saturates finite values to the largest finite code (no
 * infinity from a finite input, either format); infinity stays infinity
 * in E5M2 and saturates in E4M3 (which has none); NaN stays NaN. Decoding
 * is exact. A row of zeros has scale 0 and decodes to zeros.
 */
#ifndef RKV_ATTENTION_KV_CODEC_H
#define RKV_ATTENTION_KV_CODEC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define RKV_KVQ_FN static __host__ __device__ __forceinline__
#else
#define RKV_KVQ_FN static inline
#endif

#define RKV_KVQ_E4M3_MAX 448.0f
#define RKV_KVQ_E5M2_MAX 57344.0f
#define RKV_KVQ_INT8_MAX 127.0f
#define RKV_KVQ_INT4_MAX 7.0f

RKV_KVQ_FN uint32_t rkv_kvq_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

RKV_KVQ_FN float rkv_kvq_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* f32 -> an 8-bit float of `mb` mantissa bits and exponent bias `bias`,
 * whose largest finite code (sign cleared) is `maxc`. */
RKV_KVQ_FN uint8_t rkv_kvq_fp8_enc(float x, int mb, int bias, uint32_t maxc)
{
    uint32_t u = rkv_kvq_bits(x);
    uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint8_t)(sign | 0x7fu); /* NaN in both formats */
    if (a == 0x7f800000u && maxc == 0x7bu)
        return (uint8_t)(sign | 0x7cu); /* E5M2 keeps infinity (IEEE-like) */
    int e = (int)(a >> 23) - 127;   /* unbiased f32 exponent */
    uint32_t q;
    if (e < 1 - bias) {
        /* fp8 subnormal or zero: units of 2^(1 - bias - mb); a * 2^(bias +
         * mb - 1) is exact (a power-of-two scale of a small number) */
        if (e < -bias - mb - 1)
            return (uint8_t)sign; /* below half the smallest subnormal */
        uint32_t m = (a & 0x7fffffu) | 0x800000u; /* f32 subnormals returned above */
        /* value = m * 2^(e - 23); in units: m * 2^(e - 23 + bias + mb - 1) */
        uint32_t shift = (uint32_t)(23 - (e + bias + mb - 1));
        q = shift >= 32 ? 0u : m >> shift;
        uint32_t rem = shift >= 32 ? m : m & ((1u << shift) - 1u);
        uint32_t half = shift >= 33 ? 0u : 1u << (shift - 1u);
        if (rem > half || (rem == half && half != 0u && (q & 1u)))
            q++; /* may carry into the smallest normal: the right code */
    } else if (e > (int)(maxc >> mb) - bias) {
        q = maxc; /* far above the range (and infinity): saturate */
    } else {
        uint32_t shift = (uint32_t)(23 - mb);
        q = ((uint32_t)(e + bias) << mb) | ((a & 0x7fffffu) >> shift);
        uint32_t rem = a & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
    }
    if (q > maxc)
        q = maxc;
    return (uint8_t)(sign | q);
}

RKV_KVQ_FN float rkv_kvq_fp8_dec(uint8_t c, int mb, int bias, int e4m3)
{
    uint32_t sign = (uint32_t)(c & 0x80u) << 24;
    uint32_t mmask = (1u << mb) - 1u;
    uint32_t e = ((uint32_t)c & 0x7fu) >> mb, m = (uint32_t)c & mmask;
    uint32_t emax = 0x7fu >> mb;
    if (e4m3 ? (c & 0x7fu) == 0x7fu : e == emax)
        return rkv_kvq_float(sign | 0x7f800000u | (e4m3 || m ? 0x400000u : 0u));
    if (e == 0) {
        /* m * 2^(1 - bias - mb), an exact f32 product */
        float unit = rkv_kvq_float((uint32_t)(127 + 1 - bias - mb) << 23);
        float v = (float)m * unit;
        return sign ? -v : v;
    }
    return rkv_kvq_float(sign | ((e - (uint32_t)bias + 127u) << 23) | (m << (23 - mb)));
}

RKV_KVQ_FN uint8_t rkv_kvq_e4m3_enc(float x) { return rkv_kvq_fp8_enc(x, 3, 7, 0x7eu); }
RKV_KVQ_FN float rkv_kvq_e4m3_dec(uint8_t c) { return rkv_kvq_fp8_dec(c, 3, 7, 1); }
RKV_KVQ_FN uint8_t rkv_kvq_e5m2_enc(float x) { return rkv_kvq_fp8_enc(x, 2, 15, 0x7bu); }
RKV_KVQ_FN float rkv_kvq_e5m2_dec(uint8_t c) { return rkv_kvq_fp8_dec(c, 2, 15, 0); }

RKV_KVQ_FN int32_t rkv_kvq_int_enc(float x, float scale, int32_t maxq)
{
    if (scale == 0.0f || x != x)
        return 0;
    float r = x / scale;
    if (r != r)
        return 0; /* a NaN scale (a row holding NaN) */
    if (r > (float)maxq)
        return maxq;
    if (r < (float)-maxq)
        return -maxq;
    return (int32_t)rintf(r); /* ties to even in the default rounding mode */
}

/* Largest code of a quantized dtype (the scale is absmax / this). */
RKV_KVQ_FN float rkv_kvq_qmax(int dtype)
{
    switch (dtype) {
    case 3: return RKV_KVQ_E4M3_MAX; /* RKV_DTYPE_FP8_E4M3 */
    case 4: return RKV_KVQ_E5M2_MAX; /* RKV_DTYPE_FP8_E5M2 */
    case 5: return RKV_KVQ_INT8_MAX; /* RKV_DTYPE_INT8 */
    default: return RKV_KVQ_INT4_MAX;
    }
}

RKV_KVQ_FN float rkv_kvq_absmax(const float *x, uint32_t n)
{
    float m = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        float a = x[i] < 0.0f ? -x[i] : x[i];
        m = a > m || a != a ? a : m; /* NaN propagates into the scale */
    }
    return m;
}

/* One 8-bit element of an 8-bit dtype (3, 4, 5). */
RKV_KVQ_FN uint8_t rkv_kvq_enc8(int dtype, float x, float scale)
{
    if (dtype == 5)
        return (uint8_t)(int8_t)rkv_kvq_int_enc(x, scale, 127);
    float r = scale == 0.0f ? 0.0f : x / scale;
    return dtype == 3 ? rkv_kvq_e4m3_enc(r) : rkv_kvq_e5m2_enc(r);
}

RKV_KVQ_FN float rkv_kvq_dec8(int dtype, uint8_t c, float scale)
{
    if (dtype == 5)
        return (float)(int8_t)c * scale;
    return (dtype == 3 ? rkv_kvq_e4m3_dec(c) : rkv_kvq_e5m2_dec(c)) * scale;
}

/* Element i of an INT4 row's packed codes. */
RKV_KVQ_FN float rkv_kvq_dec4(const uint8_t *codes, uint32_t i, float scale)
{
    uint32_t b = codes[i / 2];
    int32_t v = (int32_t)((i & 1u) ? b >> 4 : b & 0xfu);
    v = v >= 8 ? v - 16 : v;
    return (float)v * scale;
}

/* Quantizes one row of n = head_dim f32 values into codes and scales
 * (nsc = 1, or n / group for INT4). */
RKV_KVQ_FN void rkv_kvq_quant_row(int dtype, uint32_t group, const float *x, uint32_t n,
                                  uint8_t *codes, float *scales)
{
    if (dtype != 6) {
        float s = rkv_kvq_absmax(x, n) / rkv_kvq_qmax(dtype);
        scales[0] = s;
        for (uint32_t i = 0; i < n; i++)
            codes[i] = rkv_kvq_enc8(dtype, x[i], s);
        return;
    }
    for (uint32_t g0 = 0; g0 < n; g0 += group) {
        float s = rkv_kvq_absmax(x + g0, group) / RKV_KVQ_INT4_MAX;
        scales[g0 / group] = s;
        for (uint32_t i = g0; i < g0 + group; i += 2) {
            uint32_t lo = (uint32_t)rkv_kvq_int_enc(x[i], s, 7) & 0xfu;
            uint32_t hi = (uint32_t)rkv_kvq_int_enc(x[i + 1], s, 7) & 0xfu;
            codes[i / 2] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* Dequantizes element i of a row. */
RKV_KVQ_FN float rkv_kvq_dec(int dtype, uint32_t group, const uint8_t *codes,
                             const float *scales, uint32_t i)
{
    if (dtype == 6)
        return rkv_kvq_dec4(codes, i, scales[i / group]);
    return rkv_kvq_dec8(dtype, codes[i], scales[0]);
}

#endif

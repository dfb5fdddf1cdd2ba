/*
 * attention/dtype.c -- fp16 / bf16 <-> fp32 conversions on the host, by bit
 * manipulation (no compiler half types, so any C11 compiler builds it).
 *
 * Invariants: float -> half rounds to nearest, ties to even, including into
 * and out of the subnormal range; overflow gives infinity; NaN stays a
 * (quiet) NaN with its sign. half -> float is exact.
 */
#include "attention/kv_codec.h"
#include "radixkv.h"

uint16_t rkv_f32_to_f16(float x)
{
    uint32_t u = rkv_kvq_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xffu) /* inf or NaN (NaN keeps a nonzero quiet mantissa) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0u));
    int e = (int)exp - 127 + 15; /* biased half exponent */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        /* Subnormal half (or zero): value = man24 * 2^(exp-150); the half
         * subnormal unit is 2^-24, so shift right by 126 - exp. */
        if (e < -10)
            return sign; /* below half the smallest subnormal: rounds to 0 */
        uint32_t m = man | 0x800000u;
        uint32_t shift = (uint32_t)(14 - e); /* 14..24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q); /* q may carry into the exponent: fine */
    }
    uint32_t q = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u)))
        q++; /* a carry into exponent 31 gives infinity, as it should */
    return (uint16_t)(sign | q);
}

float rkv_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t exp = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t man = (uint32_t)h & 0x3ffu;
    if (exp == 0x1fu)
        return rkv_kvq_float(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return rkv_kvq_float(sign);
        /* subnormal: normalise */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while ((man & 0x400u) == 0);
        man &= 0x3ffu;
        return rkv_kvq_float(sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13));
    }
    return rkv_kvq_float(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t rkv_f32_to_bf16(float x)
{
    uint32_t u = rkv_kvq_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu))
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb; /* ties to even; overflow rounds to infinity */
    return (uint16_t)(u >> 16);
}

float rkv_bf16_to_f32(uint16_t h)
{
    return rkv_kvq_float((uint32_t)h << 16);
}

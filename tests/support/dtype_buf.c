/*
 * tests/support/dtype_buf.c -- see dtype_buf.h.
 */
#include "tests/support/dtype_buf.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

size_t tu_dtype_size(rkv_dtype dt) { return dt == RKV_DTYPE_F32 ? 4 : 2; }

float tu_ld(rkv_dtype dt, const void *p, size_t i)
{
    if (dt == RKV_DTYPE_F32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == RKV_DTYPE_F16 ? rkv_f16_to_f32(h) : rkv_bf16_to_f32(h);
}

void tu_st(rkv_dtype dt, void *p, size_t i, float x)
{
    if (dt == RKV_DTYPE_F32)
        ((float *)p)[i] = x;
    else
        ((uint16_t *)p)[i] = dt == RKV_DTYPE_F16 ? rkv_f32_to_f16(x) : rkv_f32_to_bf16(x);
}

void tu_fill_random(rkv_rng *rng, rkv_dtype dt, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tu_st(dt, p, i, (float)(rkv_rng_unit(rng) * 2.0 - 1.0));
}

void *tu_rand_buf(rkv_rng *rng, rkv_dtype dt, size_t n)
{
    void *p = malloc(n * tu_dtype_size(dt) + 1);
    cr_assert(p);
    tu_fill_random(rng, dt, p, n);
    return p;
}

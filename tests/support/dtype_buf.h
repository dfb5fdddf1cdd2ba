/*
 * tests/support/dtype_buf.h -- element access and random fills for KV and
 * query buffers in any of the pool's dtypes, shared by the attention tests
 * (CPU, CUDA, MLA). One place knows how a dtype is stored, so a new dtype
 * is added here once and every table-driven attention test can list it.
 * Random values are uniform in [-1, 1), drawn one rkv_rng_unit per element
 * in index order (seeded runs replay exactly), rounded once to the dtype.
 */
#ifndef RKV_TEST_DTYPE_BUF_H
#define RKV_TEST_DTYPE_BUF_H

#include <stddef.h>

#include "radixkv.h"
#include "tests/support/test_util.h"

/* Bytes of one element. */
size_t tu_dtype_size(rkv_dtype dt);
/* Element i of p, widened to float. */
float tu_ld(rkv_dtype dt, const void *p, size_t i);
/* Stores x, rounded to the dtype, as element i of p. */
void tu_st(rkv_dtype dt, void *p, size_t i, float x);
/* n random elements into p. */
void tu_fill_random(rkv_rng *rng, rkv_dtype dt, void *p, size_t n);
/* A new malloc'd buffer of n random elements (asserts on allocation). */
void *tu_rand_buf(rkv_rng *rng, rkv_dtype dt, size_t n);

#endif

/*
 * tests/sim/test_key_weights.cu -- the per-key weights kernels
 * (attention/key_weights.cu) on the CUDA simulator against the CPU
 * reference (rkv_attn_key_weights on a host pool): f16, bf16 and f32, GQA,
 * decode (one row) and observation windows of several rows, full causal
 * attention and a window with sinks, several page sizes. The host pool's
 * K plane is copied to device memory byte for byte, so both read the same
 * layout through the same strides. Agreement: 2e-5 absolute per key plus
 * 1e-4 relative (the block reduction sums in another order); the weights
 * start non-zero, so accumulation is checked too.
 */
#include <criterion/criterion.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/key_weights_cuda.h"
#include "radixkv.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define CU(expr) cr_assert_eq((expr), cudaSuccess, "%s", #expr)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float unit(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

static void put(rkv_dtype dt, void *a, size_t i, float x)
{
    if (dt == RKV_DTYPE_F16)
        ((uint16_t *)a)[i] = rkv_f32_to_f16(x);
    else if (dt == RKV_DTYPE_BF16)
        ((uint16_t *)a)[i] = rkv_f32_to_bf16(x);
    else
        ((float *)a)[i] = x;
}

static void one_case(rkv_dtype dt, uint32_t P, uint32_t Hkv, uint32_t G, uint32_t D,
                     uint32_t n, uint32_t rows, uint32_t W, uint32_t S)
{
    const uint32_t Hq = Hkv * G, np = (n + P - 1) / P;
    const size_t es = dt == RKV_DTYPE_F32 ? 4 : 2;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = np + 3;
    pc.page_size = P;
    pc.num_layers = 1;
    pc.num_kv_heads = Hkv;
    pc.head_dim = D;
    pc.dtype = dt;
    rkv_pool *pool;
    rkv_attn *attn;
    OK(rkv_pool_create(&pc, &pool));
    OK(rkv_attn_create(pool, &attn));
    uint32_t *pages = (uint32_t *)malloc(np * sizeof *pages);
    uint32_t *slots = (uint32_t *)malloc(n * sizeof *slots);
    rkv_block_id pad[3];
    OK(rkv_pool_alloc_n(pool, 2, pad)); /* the request's blocks are not 0.. */
    OK(rkv_pool_alloc_n(pool, np, pages));
    void *k = malloc((size_t)n * Hkv * D * es), *v = malloc((size_t)n * Hkv * D * es);
    for (size_t i = 0; i < (size_t)n * Hkv * D; i++) {
        put(dt, k, i, unit() * 4 - 2);
        put(dt, v, i, unit() * 2 - 1);
    }
    for (uint32_t t = 0; t < n; t++)
        slots[t] = pages[t / P] * P + t % P;
    OK(rkv_attn_append(attn, 0, n, slots, k, v));
    void *q = malloc((size_t)rows * Hq * D * es);
    for (size_t i = 0; i < (size_t)rows * Hq * D; i++)
        put(dt, q, i, unit() * 2 - 1);
    float *ref = (float *)malloc(n * sizeof(float)), *got = (float *)malloc(n * sizeof(float));
    for (uint32_t t = 0; t < n; t++)
        ref[t] = got[t] = (float)(t % 3); /* accumulated into */
    uint32_t indptr[2] = {0, np}, last = n - (np - 1) * P;
    rkv_paged_kv kv = {1, indptr, pages, &last};
    rkv_attn_params p = {0, Hq, 0.0f, W, S};
    OK(rkv_attn_key_weights(attn, &p, &kv, rows, q, ref));

    /* the same bytes on the device */
    void *kb, *vb;
    OK(rkv_pool_layer_kv(pool, 0, &kb, &vb));
    rkv_kw_geom g;
    memset(&g, 0, sizeof g);
    OK(rkv_pool_kv_strides(pool, &g.block_stride, &g.token_stride, &g.head_stride));
    size_t kbytes = (size_t)pc.num_blocks * g.block_stride;
    g.dtype = dt;
    g.page_size = P;
    g.num_kv_heads = Hkv;
    g.num_qo_heads = Hq;
    g.head_dim = D;
    g.kv_len = n;
    g.num_rows = rows;
    g.window = W;
    g.sinks = S;
    g.scale = 1.0f / sqrtf((float)D);
    void *dk, *dq;
    uint32_t *dp;
    float *ds, *dw;
    CU(cudaMalloc(&dk, kbytes));
    CU(cudaMalloc(&dq, (size_t)rows * Hq * D * es));
    CU(cudaMalloc((void **)&dp, np * sizeof(uint32_t)));
    CU(cudaMalloc((void **)&ds, rkv_kw_scratch_floats(&g) * sizeof(float)));
    CU(cudaMalloc((void **)&dw, n * sizeof(float)));
    CU(cudaMemcpy(dk, kb, kbytes, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dq, q, (size_t)rows * Hq * D * es, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dp, pages, np * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dw, got, n * sizeof(float), cudaMemcpyHostToDevice));
    OK(rkv_kw_cuda_launch(&g, dk, dp, dq, ds, dw, NULL));
    CU(cudaDeviceSynchronize());
    CU(cudaMemcpy(got, dw, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (uint32_t t = 0; t < n; t++)
        cr_assert(fabsf(got[t] - ref[t]) <= 2e-5f + 1e-4f * fabsf(ref[t]),
                  "dtype %d P %u G %u rows %u W %u: key %u device %g cpu %g", (int)dt, P,
                  G, rows, W, t, (double)got[t], (double)ref[t]);
    CU(cudaFree(dk));
    CU(cudaFree(dq));
    CU(cudaFree(dp));
    CU(cudaFree(ds));
    CU(cudaFree(dw));
    free(k);
    free(v);
    free(q);
    free(ref);
    free(got);
    free(slots);
    OK(rkv_pool_unref_n(pool, np, pages));
    OK(rkv_pool_unref_n(pool, 2, pad));
    free(pages);
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
}

Test(key_weights_gpu, matches_cpu_reference)
{
    static const rkv_dtype dts[] = {RKV_DTYPE_F32, RKV_DTYPE_F16, RKV_DTYPE_BF16};
    for (unsigned i = 0; i < 3; i++) {
        one_case(dts[i], 16, 2, 4, 64, 300, 1, 0, 0);    /* decode, > 2 lines */
        one_case(dts[i], 4, 1, 2, 32, 77, 9, 0, 0);      /* observation window */
        one_case(dts[i], 1, 2, 1, 16, 40, 3, 11, 2);     /* window and sinks */
        one_case(dts[i], 8, 2, 2, 128, 129, 1, 31, 4);
    }
}

Test(key_weights_gpu, refuses_quantized_and_bad_geometry)
{
    rkv_kw_geom g;
    memset(&g, 0, sizeof g);
    g.dtype = RKV_DTYPE_INT8;
    g.page_size = 4;
    g.num_kv_heads = 1;
    g.num_qo_heads = 1;
    g.head_dim = 16;
    g.kv_len = 4;
    g.num_rows = 1;
    cr_assert_eq(rkv_kw_cuda_launch(&g, NULL, NULL, NULL, NULL, NULL, NULL),
                 RKV_ERR_UNSUPPORTED);
    g.num_rows = 5;
    cr_assert_eq(rkv_kw_cuda_launch(&g, NULL, NULL, NULL, NULL, NULL, NULL),
                 RKV_ERR_INVALID_ARG);
}

/*
 * bench/mla_bench.c -- multi-head latent attention on the CPU: the absorbed
 * form the library runs (rkv_attn_mla_decode over the latent cache, W_UK
 * folded into the query, W_UV applied to o_latent here) against the
 * explicit form (per-head keys and values materialised from the latent with
 * random up-projections, double precision: tests/support/mla_ref.c), at
 * DeepSeek-V3's widths, for f32 and bf16 pools; prints the largest error
 * relative to the head's largest |output| and the CPU time of one decode.
 *   mla_bench [--heads N] [--seed N]
 * The bf16 run rounds the latent, the RoPE key and the absorbed query to
 * bf16 (what a bf16 server stores and sends); the explicit reference sees
 * the same rounded latent and RoPE key but the unrounded query.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "radixkv.h"
#include "tests/support/mla_ref.h"
#include "tests/support/pool_config.h"

static uint64_t rng_state;
static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *p, size_t n, float amp)
{
    for (size_t i = 0; i < n; i++)
        p[i] = urand() * amp;
}

static void to_dtype(rkv_dtype dt, const float *src, void *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == RKV_DTYPE_F32)
            ((float *)dst)[i] = src[i];
        else
            ((uint16_t *)dst)[i] = rkv_f32_to_bf16(src[i]);
    }
}

static float from_dtype(rkv_dtype dt, const void *p, size_t i)
{
    return dt == RKV_DTYPE_F32 ? ((const float *)p)[i] : rkv_bf16_to_f32(((const uint16_t *)p)[i]);
}

static int run(rkv_dtype dt, uint32_t H, uint32_t T)
{
    const mla_dims d = {H, 128, 64, 128, 512}; /* qk_nope, rope, v, rank */
    const uint32_t P = 64, R = d.R, E = d.E, npages = (T + P - 1) / P;
    const size_t es = dt == RKV_DTYPE_F32 ? 4 : 2;
    float *W_UK = calloc(H * d.Dn * R, sizeof(float)), *W_UV = calloc(H * d.Dv * R, sizeof(float));
    float *ckv = calloc(T * R, sizeof(float)), *kpe = calloc(T * E, sizeof(float));
    float *qn = calloc(H * d.Dn, sizeof(float)), *qp = calloc(H * E, sizeof(float));
    float *ql = calloc(H * R, sizeof(float)), *ol = calloc(H * R, sizeof(float));
    void *ckv_d = calloc(T * R, es), *kpe_d = calloc(T * E, es);
    void *ql_d = calloc(H * R, es), *qp_d = calloc(H * E, es), *ol_d = calloc(H * R, es);
    double *want = calloc(H * d.Dv, sizeof(double)), *got = calloc(H * d.Dv, sizeof(double));
    double lse[256];
    uint32_t *slots = calloc(T, 4), *blocks = calloc(npages, 4);
    if (!W_UK || !W_UV || !ckv || !kpe || !qn || !qp || !ql || !ol || !ckv_d || !kpe_d ||
        !ql_d || !qp_d || !ol_d || !want || !got || !slots || !blocks || H > 256)
        return 1;
    fill(W_UK, (size_t)H * d.Dn * R, 0.05f);
    fill(W_UV, (size_t)H * d.Dv * R, 0.05f);
    fill(ckv, (size_t)T * R, 1.0f);
    fill(kpe, (size_t)T * E, 1.0f);
    fill(qn, (size_t)H * d.Dn, 1.0f);
    fill(qp, (size_t)H * E, 1.0f);
    to_dtype(dt, ckv, ckv_d, (size_t)T * R);
    to_dtype(dt, kpe, kpe_d, (size_t)T * E);
    for (size_t i = 0; i < (size_t)T * R; i++) /* the reference sees the stored latent */
        ckv[i] = from_dtype(dt, ckv_d, i);
    for (size_t i = 0; i < (size_t)T * E; i++)
        kpe[i] = from_dtype(dt, kpe_d, i);
    mla_absorb_q(&d, W_UK, qn, ql);
    to_dtype(dt, ql, ql_d, (size_t)H * R);
    to_dtype(dt, qp, qp_d, (size_t)H * E);

    rkv_pool_config pc = tu_mla_config(npages, P, 1, R, E, dt, RKV_DEVICE_HOST);
    rkv_pool *pool;
    rkv_attn *attn;
    if (rkv_pool_create(&pc, &pool) != RKV_OK || rkv_attn_create(pool, &attn) != RKV_OK ||
        rkv_pool_alloc_n(pool, npages, blocks) != RKV_OK)
        return 1;
    for (uint32_t t = 0; t < T; t++)
        slots[t] = blocks[t / P] * P + t % P;
    if (rkv_attn_mla_append(attn, 0, T, slots, ckv_d, kpe_d) != RKV_OK)
        return 1;
    uint32_t indptr[2] = {0, npages}, last = T - (npages - 1) * P;
    rkv_paged_kv kv = {1, indptr, blocks, &last};
    const double scale = 1.0 / sqrt((double)(d.Dn + E));
    rkv_mla_params mp = {0, H, (float)scale};
    double t0 = rkv_bench_now_ns();
    const int reps = 5;
    for (int i = 0; i < reps; i++)
        if (rkv_attn_mla_decode(attn, &mp, &kv, ql_d, qp_d, ol_d, NULL) != RKV_OK)
            return 1;
    double ms = (rkv_bench_now_ns() - t0) / reps / 1e6;
    for (size_t i = 0; i < (size_t)H * R; i++)
        ol[i] = from_dtype(dt, ol_d, i);
    mla_up_v(&d, W_UV, ol, got);
    mla_explicit(&d, T, W_UK, W_UV, ckv, kpe, qn, qp, scale, want, lse);
    double worst = 0;
    for (uint32_t h = 0; h < H; h++) {
        double mag = 1e-30, e = 0;
        for (uint32_t j = 0; j < d.Dv; j++)
            mag = fmax(mag, fabs(want[(size_t)h * d.Dv + j]));
        for (uint32_t j = 0; j < d.Dv; j++)
            e = fmax(e, fabs(want[(size_t)h * d.Dv + j] - got[(size_t)h * d.Dv + j]));
        worst = fmax(worst, e / mag);
    }
    printf("%-5s heads %3u ctx %5u  max rel err %.2e  absorbed CPU decode %.2f ms\n",
           dt == RKV_DTYPE_F32 ? "f32" : "bf16", H, T, worst, ms);
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
    free(W_UK); free(W_UV); free(ckv); free(kpe); free(qn); free(qp); free(ql); free(ol);
    free(ckv_d); free(kpe_d); free(ql_d); free(qp_d); free(ol_d); free(want); free(got);
    free(slots); free(blocks);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t heads = 16, seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--heads") && rkv_bench_parse_u64(argv[i + 1], &heads) == 1 &&
            heads >= 1 && heads <= 256)
            continue;
        if (!strcmp(argv[i], "--seed") && rkv_bench_parse_u64(argv[i + 1], &seed) == 1)
            continue;
        fprintf(stderr, "usage: mla_bench [--heads 1..256] [--seed N]\n");
        return 2;
    }
    rng_state = seed;
    printf("MLA absorbed vs explicit (DeepSeek-V3 widths: rank 512, rope 64, "
           "qk_nope 128, v 128; page 64)\n");
    static const uint32_t ctx[] = {64, 256, 1024};
    for (int dt = 0; dt < 2; dt++)
        for (size_t i = 0; i < sizeof ctx / sizeof ctx[0]; i++)
            if (run(dt ? RKV_DTYPE_BF16 : RKV_DTYPE_F32, (uint32_t)heads, ctx[i]) != 0) {
                fprintf(stderr, "mla_bench: %s\n", rkv_last_error());
                return 1;
            }
    return 0;
}

/*
 * bench/kv_quant_bench.c -- accuracy of the quantized KV formats (FP8
 * E4M3 / E5M2, INT8, INT4) against f32, on random and on outlier-heavy
 * K/V: per format the max and mean absolute error of the stored K/V
 * elements (relative to the data's RMS), and of the decode attention
 * output against the same decode on an f32 pool holding the original
 * values (relative to the output's RMS). Host pools, CPU reference: the
 * CUDA kernels dequantize the same codes.
 *
 *   kv_quant_bench [--seed N] [--tokens N] [--head-dim N] [--group N]
 *
 * Data: K and V uniform in [-1, 1] ("random"); "outliers" multiplies
 * every 17th channel by 40 (the fixed outlier channels seen in real K)
 * and one element in 200 by 1000 (rare spikes). q uniform in [-1, 1],
 * sm_scale 1/sqrt(head_dim), 8 query heads over 2 KV heads.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/kv_codec.h"
#include "bench/bench_util.h"
#include "radixkv.h"
#include "tests/support/pool_config.h"

enum { H = 2, HQ = 8, P = 16 };

typedef struct stats {
    double max, sum, sq;
    size_t n;
} stats;

static void st_add(stats *s, double err)
{
    s->max = err > s->max ? err : s->max;
    s->sum += err;
    s->n++;
}

static uint64_t rng_state;
static double unit(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static int make(rkv_dtype dt, uint32_t D, uint32_t group, uint32_t blocks, rkv_pool **pool,
                rkv_attn **attn)
{
    rkv_pool_config pc = tu_kv_config(blocks, P, 1, H, D, RKV_DEVICE_HOST);
    pc.dtype = dt;
    pc.quant_group = group;
    pc.act_dtype = RKV_DTYPE_F32;
    if (rkv_pool_create(&pc, pool) != RKV_OK || rkv_attn_create(*pool, attn) != RKV_OK) {
        fprintf(stderr, "kv_quant_bench: %s\n", rkv_last_error());
        return 0;
    }
    return 1;
}

/* Decodes element d of (token slot, head h) of a quantized segment, as
 * radixkv/pool.h lays it out. */
static float stored(rkv_dtype dt, uint32_t D, uint32_t group, const char *seg,
                    uint32_t slot, uint32_t h, uint32_t d)
{
    size_t cb = dt == RKV_DTYPE_INT4 ? D / 2 : D;
    size_t ns = dt == RKV_DTYPE_INT4 ? D / group : 1;
    size_t blk = (size_t)P * H * (cb + 4 * ns);
    uint32_t b = slot / P, t = slot % P;
    const char *codes = seg + b * blk + ((size_t)t * H + h) * cb;
    const float *sc = (const float *)(seg + b * blk + (size_t)P * H * cb +
                                      ((size_t)t * H + h) * ns * 4);
    return rkv_kvq_dec((int)dt, dt == RKV_DTYPE_INT4 ? group : D,
                       (const uint8_t *)codes, sc, d);
}

static void run(const char *data, int outliers, uint32_t n, uint32_t D, uint32_t group)
{
    static const rkv_dtype dts[] = {RKV_DTYPE_FP8_E4M3, RKV_DTYPE_FP8_E5M2,
                                    RKV_DTYPE_INT8, RKV_DTYPE_INT4};
    static const char *names[] = {"fp8-e4m3", "fp8-e5m2", "int8", "int4"};
    const uint32_t pages = (n + P - 1) / P;
    size_t nkv = (size_t)n * H * D;
    float *k = malloc(nkv * 4), *v = malloc(nkv * 4), *q = malloc((size_t)HQ * D * 4);
    float *o32 = malloc((size_t)HQ * D * 4), *oq = malloc((size_t)HQ * D * 4);
    uint32_t *slots = malloc(n * 4), *ids = malloc(pages * 4);
    if (!k || !v || !q || !o32 || !oq || !slots || !ids) {
        fprintf(stderr, "kv_quant_bench: out of memory\n");
        exit(1);
    }
    double rms = 0;
    for (size_t i = 0; i < nkv; i++) {
        for (int s = 0; s < 2; s++) {
            float x = (float)(unit() * 2 - 1);
            if (outliers && (i % D) % 17 == 3)
                x *= 40.0f;
            if (outliers && unit() < 0.005)
                x *= 1000.0f;
            (s ? v : k)[i] = x;
            rms += (double)x * x;
        }
    }
    rms = sqrt(rms / (2.0 * nkv));
    for (size_t i = 0; i < (size_t)HQ * D; i++)
        q[i] = (float)(unit() * 2 - 1);
    for (uint32_t t = 0; t < n; t++)
        slots[t] = t; /* a fresh pool hands out blocks 0, 1, ... */
    uint32_t indptr[2] = {0, pages}, last = n - (pages - 1) * P;
    rkv_paged_kv tab = {1, indptr, ids, &last};
    rkv_attn_params prm = {0, HQ, 0.0f, 0, 0};

    rkv_pool *pool;
    rkv_attn *attn;
    if (!make(RKV_DTYPE_F32, D, group, pages, &pool, &attn) ||
        rkv_pool_alloc_n(pool, pages, ids) != RKV_OK ||
        rkv_attn_append(attn, 0, n, slots, k, v) != RKV_OK ||
        rkv_attn_decode(attn, &prm, &tab, q, o32, NULL) != RKV_OK) {
        fprintf(stderr, "kv_quant_bench: f32: %s\n", rkv_last_error());
        exit(1);
    }
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
    double orms = 0;
    for (size_t i = 0; i < (size_t)HQ * D; i++)
        orms += (double)o32[i] * o32[i];
    orms = sqrt(orms / (HQ * D));

    for (size_t f = 0; f < sizeof dts / sizeof dts[0]; f++) {
        if (!make(dts[f], D, group, pages, &pool, &attn) ||
            rkv_pool_alloc_n(pool, pages, ids) != RKV_OK ||
            rkv_attn_append(attn, 0, n, slots, k, v) != RKV_OK ||
            rkv_attn_decode(attn, &prm, &tab, q, oq, NULL) != RKV_OK) {
            fprintf(stderr, "kv_quant_bench: %s: %s\n", names[f], rkv_last_error());
            exit(1);
        }
        void *kb, *vb;
        rkv_pool_layer_kv(pool, 0, &kb, &vb);
        stats e = {0}, o = {0};
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t h = 0; h < H; h++)
                for (uint32_t d = 0; d < D; d++) {
                    size_t i = ((size_t)t * H + h) * D + d;
                    st_add(&e, fabs(stored(dts[f], D, group, kb, t, h, d) - k[i]) / rms);
                    st_add(&e, fabs(stored(dts[f], D, group, vb, t, h, d) - v[i]) / rms);
                }
        for (size_t i = 0; i < (size_t)HQ * D; i++)
            st_add(&o, fabs((double)oq[i] - o32[i]) / orms);
        rkv_pool_config pc;
        rkv_pool_get_config(pool, &pc);
        printf("%-9s %-8s %6.3f  %10.2e %10.2e   %10.2e %10.2e\n", data, names[f],
               (double)rkv_pool_config_row_bytes(&pc) * 8.0 / D, e.max, e.sum / e.n,
               o.max, o.sum / o.n);
        rkv_attn_destroy(attn);
        rkv_pool_destroy(pool);
    }
    free(k); free(v); free(q); free(o32); free(oq); free(slots); free(ids);
}

int main(int argc, char **argv)
{
    uint64_t seed = 1, n = 4096, D = 128, group = 32;
    for (int i = 1; i + 1 < argc; i += 2) {
        uint64_t *dst = !strcmp(argv[i], "--seed") ? &seed
                        : !strcmp(argv[i], "--tokens") ? &n
                        : !strcmp(argv[i], "--head-dim") ? &D
                        : !strcmp(argv[i], "--group") ? &group : NULL;
        if (dst == NULL || !rkv_bench_parse_u64(argv[i + 1], dst) || *dst == 0 ||
            *dst > (1u << 20)) {
            fprintf(stderr, "usage: kv_quant_bench [--seed N] [--tokens N] "
                            "[--head-dim N] [--group N]\n");
            return 2;
        }
    }
    if (argc % 2 == 0) {
        fprintf(stderr, "kv_quant_bench: a flag without its value\n");
        return 2;
    }
    rng_state = seed;
    printf("kv_quant_bench: %llu tokens, %d kv heads (%d q heads), head_dim %llu, "
           "int4 group %llu, seed %llu\n", (unsigned long long)n, H, HQ,
           (unsigned long long)D, (unsigned long long)group, (unsigned long long)seed);
    printf("errors relative to the RMS of the f32 K/V (elements) and of the f32 "
           "decode output (attention)\n");
    printf("%-9s %-8s %6s  %10s %10s   %10s %10s\n", "data", "format", "bits",
           "K/V max", "K/V mean", "attn max", "attn mean");
    run("random", 0, (uint32_t)n, (uint32_t)D, (uint32_t)group);
    run("outliers", 1, (uint32_t)n, (uint32_t)D, (uint32_t)group);
    return 0;
}

/*
 * attention/sim/attn_traffic.c -- device-memory traffic of the CUDA
 * attention kernels, measured on the CPU simulator's meter (rkvsim_meter_*,
 * attention/sim/cudasim.h). Built only with -DRKV_CUDA=SIM; run by
 * scripts/attn-traffic, which checks the figures against
 * .ci/attn-traffic-budget.
 *
 * For each shape (decode per GQA group size, prefill, extend, cascade, and
 * a decode batch planned once and run with rkv_attn_run, and MLA decode
 * over a latent pool: run_mla) it
 * runs the operation once to warm the context (workspace growth), then
 * meters a second, identical call and prints:
 *   SHAPE <name> kv <x> all <y> h2d <n> malloc <n> sync <n> kvb <z>
 * followed by one "  <kernel> launches read written" line per kernel, where
 *   kv   = bytes read from the pool's K and V of the layer / the K and V
 *          bytes the call needs (each distinct token of each kv head once,
 *          in the pool's format, codes and scales for a quantized one):
 *          1.00 means every K/V byte crossed the memory bus once;
 *   kvb  = the same bytes read / those the f16 K/V of the same tokens would
 *          be: below 1 where a quantized format reads fewer bytes (2 for
 *          f32, whose shapes also take f32 activations);
 *   all  = every byte kernels, GEMMs, device copies and memsets read or
 *          wrote / the minimum (distinct K/V + q read + out and lse written);
 *   h2d, malloc, sync = host-to-device copies, cudaMalloc calls and host-
 *          blocking synchronisations the metered call made.
 * The figures are exact counts of what the kernels ask for, not a model of
 * caches: a GPU's L2 may absorb part of a re-read.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"

#define TRY(x)                                                                           \
    do {                                                                                 \
        rkv_status s_ = (x);                                                             \
        if (s_ != RKV_OK) {                                                              \
            fprintf(stderr, "attn_traffic: %s: %s\n", #x, rkv_last_error());            \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define CU(x)                                                                            \
    do {                                                                                 \
        if ((x) != cudaSuccess) {                                                        \
            fprintf(stderr, "attn_traffic: %s: %s\n", #x, rkvsim_last_message());       \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

enum { DECODE, PREFILL, CASCADE, RUN /* decode by plan once, run per layer */ };

typedef struct shape {
    const char *name;
    int op;
    uint32_t reqs, G, Hkv, D;
    uint32_t ctx;    /* tokens of each request's own KV (cached + new) */
    uint32_t qlen;   /* rows per request (prefill/cascade; decode: 1) */
    uint32_t shared; /* cascade: tokens of the shared prefix */
    rkv_dtype kv;    /* the pool's dtype (activations are f16) */
} shape;

static void *dmalloc(size_t n, int fill)
{
    void *p = NULL;
    CU(cudaMalloc(&p, n));
    CU(cudaMemset(p, fill, n));
    return p;
}

/* Prints a metered call's kernels, one line each. */
static void print_kernels(void)
{
    for (size_t i = 0;; i++) {
        const char *n = rkvsim_meter_name(i);
        if (n == NULL)
            break;
        printf("  %-28s launches %6llu read %12llu written %12llu\n", n,
               (unsigned long long)rkvsim_meter_get(n, -1, RKVSIM_METER_LAUNCHES),
               (unsigned long long)rkvsim_meter_get(n, -1, RKVSIM_METER_READ),
               (unsigned long long)rkvsim_meter_get(n, -1, RKVSIM_METER_WRITE));
    }
}

/* The metered call's own host events (read before the sync that follows
 * it): host-to-device copies, cudaMalloc calls, host-blocking syncs. */
typedef struct host_events {
    unsigned long long h2d, mal, syn;
} host_events;

static host_events host_events_now(void)
{
    host_events h;
    h.h2d = rkvsim_meter_get("[H2D]", -1, RKVSIM_METER_LAUNCHES);
    h.mal = rkvsim_meter_get("[malloc]", -1, RKVSIM_METER_LAUNCHES);
    h.syn = rkvsim_meter_get("[sync]", -1, RKVSIM_METER_LAUNCHES);
    return h;
}

/* A shape's SHAPE line (the format scripts/attn-traffic reads), then its
 * kernels. */
/* kvb: K/V bytes read over those of the same shape in f16 (below 1 for a
 * quantized pool; 0 where it does not apply). */
static void report(const char *name, double kv, double all, double kvb,
                   const host_events *h)
{
    printf("SHAPE %s kv %.2f all %.2f h2d %llu malloc %llu sync %llu kvb %.2f\n", name,
           kv, all, h->h2d, h->mal, h->syn, kvb);
    print_kernels();
}

/* Every byte kernels, GEMMs, device copies and memsets read or wrote in
 * the metered call (host copies are counted as h2d instead). */
static double device_bytes(void)
{
    double all = 0;
    for (size_t i = 0;; i++) {
        const char *n = rkvsim_meter_name(i);
        if (n == NULL)
            break;
        if (strcmp(n, "[H2D]") == 0 || strcmp(n, "[D2H]") == 0 || strcmp(n, "[H2H]") == 0)
            continue;
        all += (double)rkvsim_meter_get(n, -1, RKVSIM_METER_READ) +
               (double)rkvsim_meter_get(n, -1, RKVSIM_METER_WRITE);
    }
    return all;
}

/* The end of a run: the context, then its pool and the paged-KV tables. */
static void run_free(rkv_attn *a, rkv_pool *pool, uint32_t *ids, uint32_t *indptr,
                     uint32_t *last)
{
    rkv_attn_destroy(a);
    rkv_pool_destroy(pool);
    free(ids);
    free(indptr);
    free(last);
}

static void run_shape(const shape *s)
{
    /* activations are f16, but f32 for an f32 pool */
    const int f32 = s->kv == RKV_DTYPE_F32;
    const uint32_t P = 16, es = f32 ? 4 : 2, Hq = s->Hkv * s->G;
    const uint32_t own_pages = (s->ctx + P - 1) / P, sh_pages = s->shared / P;
    const uint32_t nb = s->reqs * own_pages + sh_pages + 1;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = nb;
    pc.page_size = P;
    pc.num_layers = 1;
    pc.num_kv_heads = s->Hkv;
    pc.head_dim = s->D;
    pc.dtype = s->kv;
    pc.act_dtype = f32 ? RKV_DTYPE_F32 : RKV_DTYPE_F16;
    pc.device = RKV_DEVICE_CUDA;
    rkv_pool *pool;
    TRY(rkv_pool_create(&pc, &pool));
    uint32_t *ids = malloc(4 * (size_t)nb);
    if (ids == NULL)
        exit(1);
    TRY(rkv_pool_alloc_n(pool, nb, ids));
    void *kb, *vb;
    TRY(rkv_pool_layer_kv(pool, 0, &kb, &vb));
    const size_t row = rkv_pool_config_row_bytes(&pc); /* codes + scales */
    const size_t layer_bytes = (size_t)nb * P * s->Hkv * row;
    CU(cudaMemset(kb, 0x11, layer_bytes)); /* small finite values */
    CU(cudaMemset(vb, 0x22, layer_bytes));
    rkv_attn *a;
    TRY(rkv_attn_create(pool, &a));

    uint32_t *indptr = calloc(s->reqs + 1, 4), *last = calloc(s->reqs, 4);
    uint32_t *qo = calloc(s->reqs + 1, 4), *idx = malloc(4 * (size_t)nb);
    uint32_t *shp = malloc(4 * (size_t)(sh_pages + 1));
    if (!indptr || !last || !qo || !idx || !shp)
        exit(1);
    uint32_t next = 0;
    for (uint32_t i = 0; i < sh_pages; i++)
        shp[i] = next++;
    for (uint32_t r = 0; r < s->reqs; r++) {
        indptr[r + 1] = indptr[r] + own_pages;
        last[r] = s->ctx - (own_pages - 1) * P;
        qo[r + 1] = qo[r] + (s->op == DECODE ? 1 : s->qlen);
        for (uint32_t i = 0; i < own_pages; i++)
            idx[indptr[r] + i] = next++;
    }
    const uint32_t rows = qo[s->reqs];
    const size_t qbytes = (size_t)rows * Hq * s->D * es, lbytes = (size_t)rows * Hq * 4;
    void *q = dmalloc(qbytes, 0x11), *out = dmalloc(qbytes, 0xff);
    float *lse = dmalloc(lbytes, 0xff);
    rkv_attn_params p = {0, Hq, 0.0f, 0, 0};
    rkv_paged_kv t = {s->reqs, indptr, idx, last};
    rkv_attn_plan *plan = NULL;
    void *ws = NULL;
    if (s->op == RUN) {
        size_t wb = 0;
        TRY(rkv_attn_plan_workspace_size(a, Hq, NULL, &t, &wb));
        ws = dmalloc(wb, 0);
        TRY(rkv_attn_plan_create(a, Hq, NULL, &t, ws, wb, &plan));
    }

    for (int pass = 0; pass < 2; pass++) {
        TRY(rkv_attn_sync(a));
        if (pass == 1) {
            rkvsim_meter_reset();
            rkvsim_meter_region(kb, layer_bytes);
            rkvsim_meter_region(vb, layer_bytes);
            rkvsim_meter_enable(1);
        }
        if (s->op == RUN)
            TRY(rkv_attn_run(a, plan, 0, 0.0f, q, out, lse));
        else if (s->op == DECODE)
            TRY(rkv_attn_decode(a, &p, &t, q, out, lse));
        else if (s->op == PREFILL)
            TRY(rkv_attn_prefill(a, &p, qo, &t, q, out, lse));
        else
            TRY(rkv_attn_cascade(a, &p, sh_pages, shp, qo, &t, q, out, lse));
        if (pass == 1) {
            /* host events of the call itself, before the sync below */
            const host_events he = host_events_now();
            TRY(rkv_attn_sync(a));
            rkvsim_meter_enable(0);
            const double toks = ((double)s->reqs * s->ctx + s->shared) * s->Hkv;
            const double kv_min = 2.0 * toks * (double)row;
            const double kv_f16 = 2.0 * toks * s->D * 2;
            const double kv_rd = (double)rkvsim_meter_get(NULL, 1, RKVSIM_METER_READ) +
                                 (double)rkvsim_meter_get(NULL, 2, RKVSIM_METER_READ);
            const double all = device_bytes();
            const double ideal = kv_min + 2.0 * (double)qbytes + (double)lbytes;
            report(s->name, kv_rd / kv_min, all / ideal, kv_rd / kv_f16, &he);
        }
    }
    rkvsim_meter_reset();
    rkv_attn_plan_destroy(plan);
    if (ws != NULL)
        CU(cudaFree(ws));
    CU(cudaFree(q));
    CU(cudaFree(out));
    CU(cudaFree(lse));
    run_free(a, pool, ids, indptr, last);
    free(qo);
    free(idx);
    free(shp);
}

/* MLA decode (rkv_attn_mla_decode) over a bf16 latent pool of page 64 with
 * DeepSeek-V3's widths (512 + 64): kv = latent bytes read / the latent
 * bytes of the requests (each token's row once, for all heads); all =
 * every byte / (latent + q_latent + q_pe read, o_latent and lse written). */
static void run_mla(const char *name, uint32_t reqs, uint32_t H, uint32_t ctx)
{
    const uint32_t P = 64, R = 512, E = 64, W = R + E, es = 2;
    const uint32_t pages = (ctx + P - 1) / P, nb = reqs * pages;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = nb;
    pc.page_size = P;
    pc.num_layers = 1;
    pc.layout = RKV_LAYOUT_MLA;
    pc.kv_lora_rank = R;
    pc.qk_rope_dim = E;
    pc.dtype = RKV_DTYPE_BF16;
    pc.device = RKV_DEVICE_CUDA;
    rkv_pool *pool;
    TRY(rkv_pool_create(&pc, &pool));
    uint32_t *ids = malloc(4 * (size_t)nb), *indptr = calloc(reqs + 1, 4);
    uint32_t *last = calloc(reqs, 4);
    if (!ids || !indptr || !last)
        exit(1);
    TRY(rkv_pool_alloc_n(pool, nb, ids));
    void *lat;
    TRY(rkv_pool_layer_kv(pool, 0, &lat, NULL));
    const size_t layer_bytes = (size_t)nb * P * W * es;
    CU(cudaMemset(lat, 0x11, layer_bytes));
    rkv_attn *a;
    TRY(rkv_attn_create(pool, &a));
    for (uint32_t r = 0; r < reqs; r++) {
        indptr[r + 1] = indptr[r] + pages;
        last[r] = ctx - (pages - 1) * P;
    }
    const size_t nst = (size_t)reqs * H;
    void *ql = dmalloc(nst * R * es, 0x11), *qp = dmalloc(nst * E * es, 0x11);
    void *out = dmalloc(nst * R * es, 0xff);
    float *lse = dmalloc(nst * 4, 0xff);
    rkv_mla_params p = {0, H, 0.07f};
    rkv_paged_kv t = {reqs, indptr, ids, last};
    for (int pass = 0; pass < 2; pass++) {
        TRY(rkv_attn_sync(a));
        if (pass == 1) {
            rkvsim_meter_reset();
            rkvsim_meter_region(lat, layer_bytes);
            rkvsim_meter_enable(1);
        }
        TRY(rkv_attn_mla_decode(a, &p, &t, ql, qp, out, lse));
        if (pass == 1) {
            const host_events he = host_events_now();
            TRY(rkv_attn_sync(a));
            rkvsim_meter_enable(0);
            const double kv_min = (double)reqs * ctx * W * es;
            const double kv_rd = (double)rkvsim_meter_get(NULL, 1, RKVSIM_METER_READ);
            const double all = device_bytes();
            const double ideal = kv_min + (double)nst * (W + R) * es + (double)nst * 4;
            report(name, kv_rd / kv_min, all / ideal, 0.0, &he);
        }
    }
    rkvsim_meter_reset();
    CU(cudaFree(ql));
    CU(cudaFree(qp));
    CU(cudaFree(out));
    CU(cudaFree(lse));
    run_free(a, pool, ids, indptr, last);
}

int main(int argc, char **argv)
{
    static const shape shapes[] = {
        {"decode_G1", DECODE, 4, 1, 2, 128, 512, 1, 0, RKV_DTYPE_F16},
        {"decode_G3", DECODE, 4, 3, 2, 128, 512, 1, 0, RKV_DTYPE_F16},
        {"decode_G4", DECODE, 4, 4, 2, 128, 512, 1, 0, RKV_DTYPE_F16},
        {"decode_G7", DECODE, 4, 7, 2, 128, 512, 1, 0, RKV_DTYPE_F16},
        {"decode_G8", DECODE, 4, 8, 2, 128, 512, 1, 0, RKV_DTYPE_F16},
        {"decode_G16", DECODE, 4, 16, 1, 128, 512, 1, 0, RKV_DTYPE_F16},
        {"decode_G4_D64", DECODE, 4, 4, 2, 64, 512, 1, 0, RKV_DTYPE_F16},
        {"decode_G4_run", RUN, 4, 4, 2, 128, 512, 1, 0, RKV_DTYPE_F16},
        {"prefill_N256", PREFILL, 1, 1, 1, 128, 256, 256, 0, RKV_DTYPE_F16},
        {"extend_512+64", PREFILL, 1, 4, 1, 128, 576, 64, 0, RKV_DTYPE_F16},
        {"cascade_B32_S256", CASCADE, 32, 4, 1, 128, 16, 1, 256, RKV_DTYPE_F16},
        {"cascade_B64_S256", CASCADE, 64, 4, 1, 128, 16, 1, 256, RKV_DTYPE_F16},
        {"cascade_f32_B16", CASCADE, 16, 4, 1, 128, 16, 1, 256, RKV_DTYPE_F32},
        {"prefill_f32_N256", PREFILL, 1, 1, 1, 128, 256, 256, 0, RKV_DTYPE_F32},
        {"decode_G4_int8", DECODE, 4, 4, 2, 128, 512, 1, 0, RKV_DTYPE_INT8},
        {"decode_G4_fp8", DECODE, 4, 4, 2, 128, 512, 1, 0, RKV_DTYPE_FP8_E4M3},
        {"decode_G4_int4", DECODE, 4, 4, 2, 128, 512, 1, 0, RKV_DTYPE_INT4},
        {"extend_int8", PREFILL, 1, 4, 1, 128, 576, 64, 0, RKV_DTYPE_INT8},
        {"cascade_int8_B32", CASCADE, 32, 4, 1, 128, 16, 1, 256, RKV_DTYPE_INT8},
    };
    const char *only = argc > 1 ? argv[1] : NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (only == NULL || strcmp(only, shapes[i].name) == 0)
            run_shape(&shapes[i]);
    /* MLA: 16 heads (DeepSeek-V3 at 8-way tensor parallelism) fill one
     * block's group, so the latent is read once; 128 heads (all of them on
     * one GPU) take 8 groups, each reading it */
    static const struct { const char *name; uint32_t reqs, H, ctx; } mla[] = {
        {"mla_decode_H16", 4, 16, 512},
        {"mla_decode_H128", 2, 128, 256},
    };
    for (size_t i = 0; i < sizeof mla / sizeof mla[0]; i++)
        if (only == NULL || strcmp(only, mla[i].name) == 0)
            run_mla(mla[i].name, mla[i].reqs, mla[i].H, mla[i].ctx);
    return 0;
}

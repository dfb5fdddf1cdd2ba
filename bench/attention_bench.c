/*
 * bench/attention_bench.c -- paged attention throughput, as ratios to
 * reference rates measured in the same run (never pass/fail).
 *
 * With a GPU (a CUDA pool can be created):
 *   1. device copy bandwidth (cudaMemcpy D2D of 1 GiB, counted read+write)
 *      and the cuBLAS bf16 GEMM rate (8192^3, fp32 accumulate): the
 *      roofline every figure below is held against;
 *   2. decode, the shapes of FlashInfer's batch-decode benchmark: context
 *      512..32k x batch 1..256 at G = Hq / Hkv 4 (Hkv 8, Hq 32), and G 1
 *      and 8 at batch 64, D 128, bf16, page 16 (configurations needing
 *      more than 16 GiB of KV are skipped); one-shot calls and plan once /
 *      run per layer;
 *   3. prefill (FlashInfer's single/batch prefill): causal, q_len = kv_len
 *      512..16k, batch 1 and 4;
 *   4. cascade: 32k-token shared prefix, batch 256 decodes: time of
 *      rkv_attn_cascade vs rkv_attn_decode over the full tables.
 * Every GPU line prints the time, the achieved GB/s (the minimum bytes:
 * K/V once, q read, out written) and TFLOP/s, and the roofline ratio:
 * max(bytes / copy bandwidth, FLOPs / GEMM rate) / time (100 % = at the
 * roofline of this device as measured here).
 * Without a GPU: says so and reports the CPU reference's decode GB/s (and a
 * memcpy GB/s for context), prefill GFLOP/s and the cascade ratio on small
 * sizes (whole run well under a minute).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "radixkv.h"
#include "tests/support/pool_config.h"

#if defined(RKV_HAVE_CUDA) && !defined(RKV_CUDASIM) /* no GPU figures from the simulator */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#define HKV 8u
#define HQ 32u
#define HD 128u
#define PAGE 16u
#define REPEATS 5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

#define TRY(call)                                                                  \
    do {                                                                           \
        rkv_status s_ = (call);                                                    \
        if (s_ != RKV_OK) {                                                        \
            printf("error: %s: %s\n", #call, rkv_last_error());                    \
            return 1;                                                              \
        }                                                                          \
    } while (0)

/* A batch of n requests of ctx tokens each over distinct pages (or, with
 * shared_pages > 0, all starting with pages 0..shared_pages-1 and then
 * own_pages distinct pages each). */
typedef struct tables {
    uint32_t *indptr, *indices, *last, *qo;
} tables;

static int tables_make(tables *t, uint32_t n, uint32_t shared_pages, uint32_t own_pages,
                       uint32_t first_own, uint32_t last_len, uint32_t q_len)
{
    uint32_t per = shared_pages + own_pages;
    t->indptr = malloc(4 * ((size_t)n + 1));
    t->qo = malloc(4 * ((size_t)n + 1));
    t->last = malloc(4 * (size_t)n);
    t->indices = malloc(4 * (size_t)n * per + 4);
    if (!t->indptr || !t->qo || !t->last || !t->indices)
        return 1;
    t->indptr[0] = t->qo[0] = 0;
    for (uint32_t r = 0; r < n; r++) {
        for (uint32_t i = 0; i < shared_pages; i++)
            t->indices[(size_t)r * per + i] = i;
        for (uint32_t i = 0; i < own_pages; i++)
            t->indices[(size_t)r * per + shared_pages + i] = first_own + r * own_pages + i;
        t->indptr[r + 1] = t->indptr[r] + per;
        t->qo[r + 1] = t->qo[r] + q_len;
        t->last[r] = last_len;
    }
    return 0;
}

static void tables_free(tables *t)
{
    free(t->indptr);
    free(t->indices);
    free(t->last);
    free(t->qo);
}

static int make_pool(rkv_device dev, rkv_dtype dt, uint32_t nblocks, rkv_pool **pool,
                     rkv_attn **attn)
{
    rkv_pool_config pc = tu_kv_config(nblocks, PAGE, 1, HKV, HD, dev);
    pc.dtype = dt;
    rkv_status s = rkv_pool_create(&pc, pool);
    if (s != RKV_OK)
        return (int)s;
    uint32_t *ids = malloc(4 * (size_t)nblocks);
    if (ids == NULL || rkv_pool_alloc_n(*pool, nblocks, ids) != RKV_OK ||
        rkv_attn_create(*pool, attn) != RKV_OK) {
        free(ids);
        rkv_pool_destroy(*pool);
        return -1;
    }
    free(ids);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* CPU                                                                      */
/* ------------------------------------------------------------------------ */

static int cpu_bench(void)
{
    printf("no CUDA device: GPU figures not measured; CPU reference figures follow\n");
    printf("(one thread, bf16 KV, Hkv %u, Hq %u, head_dim %u, page %u)\n\n", HKV, HQ, HD,
           PAGE);
    /* memcpy bandwidth for context (read + write counted) */
    size_t mb = (size_t)256 << 20;
    char *a = malloc(mb), *b = malloc(mb);
    if (!a || !b)
        return 1;
    memset(a, 1, mb);
    memset(b, 2, mb);
    double ts[REPEATS];
    for (int i = 0; i < REPEATS; i++) {
        double t0 = now_s();
        memcpy(b, a, mb);
        ts[i] = now_s() - t0;
    }
    double cp_bw = 2.0 * (double)mb / median(ts, REPEATS) / 1e9;
    printf("memcpy 256 MiB: %.2f GB/s (read+write)\n\n", cp_bw);
    free(a);
    free(b);

    const uint32_t ctxs[] = {512, 2048, 8192};
    const uint32_t batches[] = {1, 4, 16};
    uint32_t maxblocks = 16 * 8192 / PAGE + 8;
    rkv_pool *pool;
    rkv_attn *attn;
    if (make_pool(RKV_DEVICE_HOST, RKV_DTYPE_BF16, maxblocks, &pool, &attn) != 0) {
        printf("error: host pool: %s\n", rkv_last_error());
        return 1;
    }
    void *kb, *vb;
    TRY(rkv_pool_layer_kv(pool, 0, &kb, &vb));
    /* some nonzero bf16 data */
    size_t nel = (size_t)maxblocks * PAGE * HKV * HD;
    for (size_t i = 0; i < nel; i++) {
        ((uint16_t *)kb)[i] = rkv_f32_to_bf16((float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f);
        ((uint16_t *)vb)[i] = rkv_f32_to_bf16((float)((i * 40503u) % 1000) / 1000.0f - 0.5f);
    }
    size_t qmax = (size_t)4096 * HQ * HD;
    uint16_t *q = malloc(qmax * 2), *out = malloc(qmax * 2);
    if (!q || !out)
        return 1;
    for (size_t i = 0; i < qmax; i++)
        q[i] = rkv_f32_to_bf16((float)(i % 97) / 97.0f - 0.5f);
    rkv_attn_params p = {0, HQ, 0.0f, 0, 0};
    printf("decode (CPU reference)\n%8s %6s %12s %10s %12s\n", "context", "batch", "ms",
           "GB/s", "vs memcpy");
    for (size_t ci = 0; ci < 3; ci++)
        for (size_t bi = 0; bi < 3; bi++) {
            uint32_t ctx = ctxs[ci], n = batches[bi];
            tables t;
            if (tables_make(&t, n, 0, ctx / PAGE, 0, PAGE, 1))
                return 1;
            rkv_paged_kv kv = {n, t.indptr, t.indices, t.last};
            int reps = ctx * n >= 65536 ? 1 : 3;
            for (int i = 0; i < reps; i++) {
                double t0 = now_s();
                TRY(rkv_attn_decode(attn, &p, &kv, q, out, NULL));
                ts[i] = now_s() - t0;
            }
            double tm = median(ts, reps);
            double bytes = (double)n * ctx * HKV * HD * 2 * 2;
            printf("%8u %6u %12.3f %10.3f %11.1f%%\n", ctx, n, tm * 1e3, bytes / tm / 1e9,
                   100.0 * bytes / tm / 1e9 / cp_bw);
            tables_free(&t);
        }
    /* prefill */
    {
        uint32_t L = 1024;
        tables t;
        if (tables_make(&t, 1, 0, L / PAGE, 0, PAGE, L))
            return 1;
        rkv_paged_kv kv = {1, t.indptr, t.indices, t.last};
        double t0 = now_s();
        TRY(rkv_attn_prefill(attn, &p, t.qo, &kv, q, out, NULL));
        double tm = now_s() - t0;
        double flops = 2.0 * 2.0 * HQ * HD * ((double)L * (L + 1) / 2);
        printf("\nprefill (CPU reference) 1 x %u tokens causal: %.1f ms, %.2f GFLOP/s\n", L,
               tm * 1e3, flops / tm / 1e9);
        tables_free(&t);
    }
    /* cascade vs decode over full tables */
    {
        uint32_t S = 4096, n = 16, sp = S / PAGE;
        tables full, suf;
        if (tables_make(&full, n, sp, 1, sp, 8, 1) || tables_make(&suf, n, 0, 1, sp, 8, 1))
            return 1;
        rkv_paged_kv kf = {n, full.indptr, full.indices, full.last};
        rkv_paged_kv ks = {n, suf.indptr, suf.indices, suf.last};
        uint32_t *shared = malloc(4 * sp);
        if (!shared)
            return 1;
        for (uint32_t i = 0; i < sp; i++)
            shared[i] = i;
        double t0 = now_s();
        TRY(rkv_attn_decode(attn, &p, &kf, q, out, NULL));
        double td = now_s() - t0;
        t0 = now_s();
        TRY(rkv_attn_cascade(attn, &p, sp, shared, suf.qo, &ks, q, out, NULL));
        double tc = now_s() - t0;
        printf("cascade (CPU reference) %u-token shared prefix, batch %u: decode %.1f ms, "
               "cascade %.1f ms, ratio %.2fx\n(the CPU reference computes the shared part "
               "per row, so no gain is expected here; the GPU runs the prefix once for "
               "all rows)\n",
               S, n, td * 1e3, tc * 1e3, td / tc);
        free(shared);
        tables_free(&full);
        tables_free(&suf);
    }
    free(q);
    free(out);
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* GPU                                                                      */
/* ------------------------------------------------------------------------ */

#if defined(RKV_HAVE_CUDA) && !defined(RKV_CUDASIM) /* no GPU figures from the simulator */
#define CK(call)                                                                   \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        if (e_ != cudaSuccess) {                                                   \
            printf("error: %s: %s\n", #call, cudaGetErrorString(e_));              \
            return 1;                                                              \
        }                                                                          \
    } while (0)

typedef rkv_status (*op_fn)(void *ctx);

/* Median over REPEATS of one op (after a warm-up), in seconds. */
static int time_op(op_fn fn, void *ctx, double *out_s)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double ts[REPEATS];
    if (fn(ctx) != RKV_OK) {
        printf("error: %s\n", rkv_last_error());
        return 1;
    }
    for (int i = 0; i < REPEATS; i++) {
        CK(cudaEventRecord(e0, 0));
        if (fn(ctx) != RKV_OK) {
            printf("error: %s\n", rkv_last_error());
            return 1;
        }
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts[i] = ms * 1e-3;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    *out_s = median(ts, REPEATS);
    return 0;
}

typedef struct op_ctx {
    rkv_attn *attn;
    rkv_attn_params p;
    rkv_paged_kv kv;
    const uint32_t *qo, *shared;
    uint32_t nshared;
    void *q, *out;
    rkv_attn_plan *plan; /* op_run */
} op_ctx;

static rkv_status op_decode(void *c)
{
    op_ctx *o = c;
    return rkv_attn_decode(o->attn, &o->p, &o->kv, o->q, o->out, NULL);
}
static rkv_status op_prefill(void *c)
{
    op_ctx *o = c;
    return rkv_attn_prefill(o->attn, &o->p, o->qo, &o->kv, o->q, o->out, NULL);
}
static rkv_status op_cascade(void *c)
{
    op_ctx *o = c;
    return rkv_attn_cascade(o->attn, &o->p, o->nshared, o->shared, o->qo, &o->kv, o->q,
                            o->out, NULL);
}

static rkv_status op_run(void *c)
{
    op_ctx *o = c;
    return rkv_attn_run(o->attn, o->plan, o->p.layer, o->p.sm_scale, o->q, o->out, NULL);
}

/* This device's roofline as measured above: copy GB/s, GEMM TFLOP/s. */
typedef struct roof {
    double gbs, tfs;
} roof;

static void roof_header(const char *what)
{
    printf("%-22s %10s %9s %9s %9s\n", what, "us", "GB/s", "TFLOP/s", "roofline");
}

/* A measured time t against the roofline: achieved GB/s and TFLOP/s, and
 * max(bytes / bandwidth, flops / GEMM rate) / t. */
static void roof_line(const char *label, double t, double bytes, double flops, const roof *r)
{
    const double floor_s = fmax(bytes / (r->gbs * 1e9), flops / (r->tfs * 1e12));
    printf("%-22s %10.1f %9.1f %9.2f %8.1f%%\n", label, t * 1e6, bytes / t / 1e9,
           flops / t / 1e12, 100.0 * floor_s / t);
}

/* One decode shape (G query heads a kv head, n requests of ctx tokens),
 * one-shot or planned once and timed per run. */
static int decode_line(op_ctx *o, const roof *r, uint32_t nblocks, uint32_t G, uint32_t ctx,
                       uint32_t n, int planned)
{
    char label[64];
    snprintf(label, sizeof label, "%u %u %u", G, ctx, n);
    if ((size_t)n * (ctx / PAGE) > nblocks) {
        printf("%-22s skipped (KV > 16 GiB)\n", label);
        return 0;
    }
    tables t;
    if (tables_make(&t, n, 0, ctx / PAGE, 0, PAGE, 1))
        return 1;
    rkv_paged_kv kv = {n, t.indptr, t.indices, t.last};
    o->kv = kv;
    o->p.num_qo_heads = HKV * G;
    void *ws = NULL;
    int rc = 0;
    double tm = 0;
    if (planned) {
        size_t wb = 0;
        if (rkv_attn_plan_workspace_size(o->attn, HKV * G, NULL, &kv, &wb) != RKV_OK ||
            cudaMalloc(&ws, wb) != cudaSuccess ||
            rkv_attn_plan_create(o->attn, HKV * G, NULL, &kv, ws, wb, &o->plan) != RKV_OK) {
            printf("error: plan: %s\n", rkv_last_error());
            rc = 1;
        }
    }
    if (rc == 0)
        rc = time_op(planned ? op_run : op_decode, o, &tm);
    if (rc == 0) {
        const double bytes = (double)n * ctx * HKV * HD * 2 * 2 +
                             (double)n * HKV * G * HD * 2 * 2;
        roof_line(label, tm, bytes, 4.0 * n * HKV * G * HD * (double)ctx, r);
    }
    rkv_attn_plan_destroy(o->plan);
    o->plan = NULL;
    if (ws != NULL)
        cudaFree(ws);
    tables_free(&t);
    return rc;
}

static int gpu_bench(void)
{
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("GPU: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
    /* 1a. copy bandwidth */
    size_t cb = (size_t)1 << 30;
    void *da, *db;
    CK(cudaMalloc(&da, cb));
    CK(cudaMalloc(&db, cb));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double ts[REPEATS];
    CK(cudaMemcpy(db, da, cb, cudaMemcpyDeviceToDevice));
    for (int i = 0; i < REPEATS; i++) {
        float ms;
        CK(cudaEventRecord(e0, 0));
        CK(cudaMemcpy(db, da, cb, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts[i] = ms * 1e-3;
    }
    double cp_bw = 2.0 * (double)cb / median(ts, REPEATS) / 1e9;
    printf("cudaMemcpy D2D 1 GiB: %.1f GB/s (read+write)\n", cp_bw);
    CK(cudaFree(da));
    CK(cudaFree(db));
    /* 1b. cuBLAS bf16 GEMM */
    int N = 8192;
    void *ga, *gb, *gc;
    CK(cudaMalloc(&ga, (size_t)N * N * 2));
    CK(cudaMalloc(&gb, (size_t)N * N * 2));
    CK(cudaMalloc(&gc, (size_t)N * N * 4));
    CK(cudaMemset(ga, 0, (size_t)N * N * 2));
    CK(cudaMemset(gb, 0, (size_t)N * N * 2));
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        printf("error: cublasCreate\n");
        return 1;
    }
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i <= REPEATS; i++) {
        float ms;
        CK(cudaEventRecord(e0, 0));
        if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, ga, CUDA_R_16BF, N, gb,
                         CUDA_R_16BF, N, &zero, gc, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
            printf("error: cublasGemmEx\n");
            return 1;
        }
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i > 0)
            ts[i - 1] = ms * 1e-3;
    }
    double gemm_tf = 2.0 * N * (double)N * N / median(ts, REPEATS) / 1e12;
    printf("cuBLAS bf16 GEMM %d^3 (fp32 out): %.1f TFLOP/s\n\n", N, gemm_tf);
    cublasDestroy(h);
    CK(cudaFree(ga));
    CK(cudaFree(gb));
    CK(cudaFree(gc));

    /* a pool of 16 GiB of KV, one layer */
    size_t bpb = (size_t)PAGE * HKV * HD * 2 * 2;
    uint32_t nblocks = (uint32_t)(((size_t)16 << 30) / bpb);
    rkv_pool *pool;
    rkv_attn *attn;
    int rc = make_pool(RKV_DEVICE_CUDA, RKV_DTYPE_BF16, nblocks, &pool, &attn);
    if (rc != 0) {
        printf("error: CUDA pool of %u blocks: %s\n", nblocks, rkv_last_error());
        return 1;
    }
    size_t qbytes = (size_t)32768 * HQ * HD * 2;
    void *dq, *dout;
    CK(cudaMalloc(&dq, qbytes));
    CK(cudaMalloc(&dout, qbytes));
    CK(cudaMemset(dq, 0, qbytes));
    op_ctx o = {attn, {0, HQ, 0.0f, 0, 0}, {0, NULL, NULL, NULL}, NULL, NULL, 0, dq, dout, NULL};
    const roof rf = {cp_bw, gemm_tf};
    /* 2. decode */
    const uint32_t ctxs[] = {512, 2048, 8192, 32768};
    const uint32_t batches[] = {1, 16, 64, 256};
    printf("decode (Hkv %u, D %u, bf16, page %u)\n", HKV, HD, PAGE);
    roof_header("G context batch");
    for (size_t ci = 0; ci < 4; ci++)
        for (size_t bi = 0; bi < 4; bi++)
            if (decode_line(&o, &rf, nblocks, 4, ctxs[ci], batches[bi], 0))
                return 1;
    for (uint32_t G = 1; G <= 8; G += 7) /* G 1 and 8 at batch 64 */
        for (size_t ci = 1; ci < 4; ci++)
            if (decode_line(&o, &rf, nblocks, G, ctxs[ci], 64, 0))
                return 1;
    printf("decode, planned once (rkv_attn_plan_create), timed per rkv_attn_run\n");
    roof_header("G context batch");
    for (size_t ci = 1; ci < 4; ci++)
        if (decode_line(&o, &rf, nblocks, 4, ctxs[ci], 64, 1))
            return 1;
    o.p.num_qo_heads = HQ;
    /* 3. prefill */
    printf("\nprefill (causal, q_len = kv_len, Hq %u, Hkv %u)\n", HQ, HKV);
    roof_header("tokens batch");
    const uint32_t plens[] = {512, 2048, 8192, 16384};
    for (size_t li = 0; li < 4; li++)
        for (uint32_t n = 1; n <= 4; n += 3) {
            const uint32_t L = plens[li];
            if ((size_t)n * L > 32768)
                continue;
            tables t;
            if (tables_make(&t, n, 0, L / PAGE, 0, PAGE, L))
                return 1;
            rkv_paged_kv kv = {n, t.indptr, t.indices, t.last};
            o.kv = kv;
            o.qo = t.qo;
            double tm;
            if (time_op(op_prefill, &o, &tm))
                return 1;
            const double flops = n * 4.0 * HQ * HD * ((double)L * (L + 1) / 2);
            const double bytes = (double)n * L * (HKV * HD * 2.0 * 2 + HQ * HD * 2.0 * 2);
            char label[64];
            snprintf(label, sizeof label, "%u %u", L, n);
            roof_line(label, tm, bytes, flops, &rf);
            tables_free(&t);
        }
    /* 4. cascade */
    {
        uint32_t S = 32768, n = 256, sp = S / PAGE;
        tables full, suf;
        if (tables_make(&full, n, sp, 1, sp, 8, 1) || tables_make(&suf, n, 0, 1, sp, 8, 1))
            return 1;
        uint32_t *shared = malloc(4 * sp);
        if (!shared)
            return 1;
        for (uint32_t i = 0; i < sp; i++)
            shared[i] = i;
        rkv_paged_kv kf = {n, full.indptr, full.indices, full.last};
        rkv_paged_kv ks = {n, suf.indptr, suf.indices, suf.last};
        double td, tc;
        o.kv = kf;
        if (time_op(op_decode, &o, &td))
            return 1;
        o.kv = ks;
        o.qo = suf.qo;
        o.shared = shared;
        o.nshared = sp;
        if (time_op(op_cascade, &o, &tc))
            return 1;
        printf("\ncascade: %u-token shared prefix, batch %u decodes: decode over full "
               "tables %.2f ms, cascade %.2f ms, speedup %.1fx\n",
               S, n, td * 1e3, tc * 1e3, td / tc);
        /* the minimum: the prefix's and the rows' own K/V once each */
        const double kvb = ((double)S + (double)n * 8) * HKV * HD * 2 * 2;
        const double flops = 4.0 * n * HQ * HD * ((double)S + 8);
        roof_header("cascade");
        roof_line("shared prefix", tc, kvb + (double)n * HQ * HD * 2 * 2, flops, &rf);
        free(shared);
        tables_free(&full);
        tables_free(&suf);
    }
    CK(cudaFree(dq));
    CK(cudaFree(dout));
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
    return 0;
}
#endif

int main(void)
{
    rkv_pool *probe = NULL;
    rkv_pool_config pc = tu_kv_config(1, 0, 1, 1, 64, RKV_DEVICE_CUDA);
    rkv_status s = rkv_pool_create(&pc, &probe);
    rkv_pool_destroy(probe);
#if defined(RKV_HAVE_CUDA) && !defined(RKV_CUDASIM) /* no GPU figures from the simulator */
    if (s == RKV_OK)
        return gpu_bench();
#endif
    if (s != RKV_ERR_NO_DEVICE && s != RKV_OK)
        printf("CUDA pool: %s\n", rkv_last_error());
    return cpu_bench();
}

/*
 * tests/test_attention_gpu.c -- every CUDA attention operation against the
 * CPU reference on the same inputs: a CUDA pool and a host pool with the
 * same contents (copied through rkv_pool_copy_from_host), the same q.
 *
 * Where no GPU is present (rkv_pool_create with RKV_DEVICE_CUDA returns
 * RKV_ERR_NO_DEVICE, or radixkv was built without CUDA) every test reports
 * itself skipped: "no CUDA device: GPU attention tests skipped". In the
 * simulator build (-DRKV_CUDA=SIM, RKV_CUDASIM) every test runs on the CPU
 * simulator, with smaller sizes; a few tests use its controls (deferred
 * work, device memory and grid limits) and skip on a real GPU.
 * Besides the GPU-vs-CPU comparisons: known-answer tests of both backends,
 * stream and pinned-memory tests, and the regression tests of issue 11.
 *
 * Bounds (GPU vs CPU, both rounded once to the dtype; the GPU uses __expf
 * and, in cascade, P rounded to the dtype before the P.V GEMM): per element
 * relative to the head vector's max |value|: f32 1e-4, f16 4e-3, bf16 2e-2;
 * lse 1e-3 * (1 + |lse|).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attn_internal.h"
#include "radixkv.h"
#include "tests/support/dtype_buf.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#ifdef RKV_HAVE_CUDA
#include <cuda_runtime.h>

#include "tests/support/cuda_buf.h"
#endif

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define SKIP_MSG "no CUDA device: GPU attention tests skipped"

/* Skips the calling test unless a CUDA pool can be created. */
static void need_gpu(void)
{
    rkv_pool_config pc = tu_kv_config(1, 0, 1, 1, 64, RKV_DEVICE_CUDA);
    tu_need_device_pool(&pc, SKIP_MSG);
}

#ifdef RKV_HAVE_CUDA

typedef struct pair {
    rkv_pool *hp, *dp;
    rkv_attn *ha, *da;
    rkv_pool_config cfg;
    size_t es;
} pair;

/* A host and a CUDA pool with identical random contents, all blocks
 * allocated. */
static void pair_open(pair *pr, rkv_rng *rng, uint32_t P, uint32_t Hkv, uint32_t D,
                      rkv_dtype dt, uint32_t nblocks)
{
    rkv_pool_config_init(&pr->cfg);
    pr->cfg.num_blocks = nblocks;
    pr->cfg.page_size = P;
    pr->cfg.num_layers = 2;
    pr->cfg.num_kv_heads = Hkv;
    pr->cfg.head_dim = D;
    pr->cfg.dtype = dt;
    pr->es = tu_dtype_size(dt);
    OK(rkv_pool_create(&pr->cfg, &pr->hp));
    rkv_pool_config dc = pr->cfg;
    dc.device = RKV_DEVICE_CUDA;
    OK(rkv_pool_create(&dc, &pr->dp));
    uint32_t *ids = malloc(4 * nblocks);
    cr_assert(ids);
    OK(rkv_pool_alloc_n(pr->hp, nblocks, ids));
    OK(rkv_pool_alloc_n(pr->dp, nblocks, ids));
    for (uint32_t i = 0; i < nblocks; i++)
        ids[i] = i;
    for (uint32_t l = 0; l < 2; l++) {
        void *k, *v;
        OK(rkv_pool_layer_kv(pr->hp, l, &k, &v));
        size_t n = (size_t)nblocks * P * Hkv * D;
        tu_fill_random(rng, dt, k, n);
        tu_fill_random(rng, dt, v, n);
    }
    size_t bpb = rkv_pool_bytes_per_block(pr->hp);
    void *buf = malloc(bpb * nblocks);
    cr_assert(buf);
    OK(rkv_pool_copy_to_host(pr->hp, nblocks, ids, buf));
    OK(rkv_pool_copy_from_host(pr->dp, nblocks, ids, buf));
    free(buf);
    free(ids);
    OK(rkv_attn_create(pr->hp, &pr->ha));
    OK(rkv_attn_create(pr->dp, &pr->da));
}

static void pair_close(pair *pr)
{
    OK(rkv_attn_check(pr->ha));
    OK(rkv_attn_check(pr->da));
    rkv_attn_destroy(pr->ha);
    rkv_attn_destroy(pr->da);
    rkv_pool_destroy(pr->hp);
    rkv_pool_destroy(pr->dp);
}

static void compare(rkv_dtype dt, uint32_t D, size_t nvec, const void *got, const void *want,
                    const float *gl, const float *wl, const char *what)
{
    double tol = dt == RKV_DTYPE_F32 ? 1e-4 : dt == RKV_DTYPE_F16 ? 4e-3 : 2e-2;
    for (size_t i = 0; i < nvec; i++) {
        double mx = 1e-30;
        for (uint32_t d = 0; d < D; d++)
            mx = fmax(mx, fabs(tu_ld(dt, want, i * D + d)));
        for (uint32_t d = 0; d < D; d++) {
            double g = tu_ld(dt, got, i * D + d), w = tu_ld(dt, want, i * D + d);
            cr_assert(fabs(g - w) <= tol * mx, "%s: vec %zu dim %u: gpu %g cpu %g", what, i,
                      d, g, w);
        }
        if (gl != NULL)
            cr_assert(fabs(gl[i] - wl[i]) <= 1e-3 * (1 + fabs(wl[i])),
                      "%s: lse %zu: gpu %g cpu %g", what, i, gl[i], wl[i]);
    }
}

/* Merges ns states (values va/vb of vbytes each, lse la/lb) on the host
 * pool's handle into oh/lh and on the CUDA one into og/lg (copied back). */
static void merge_both(pair *pr, uint32_t ns, const void *va, const float *la, const void *vb,
                       const float *lb, size_t vbytes, void *oh, float *lh, void *og, float *lg)
{
    void *dva = tu_dev_copy(va, vbytes), *dvb = tu_dev_copy(vb, vbytes);
    void *dvo = tu_dev_copy(NULL, vbytes);
    float *dla = tu_dev_copy(la, 4 * (size_t)ns), *dlb = tu_dev_copy(lb, 4 * (size_t)ns);
    float *dlo = tu_dev_copy(NULL, 4 * (size_t)ns);
    OK(rkv_attn_merge(pr->ha, ns, va, la, vb, lb, oh, lh));
    OK(rkv_attn_merge(pr->da, ns, dva, dla, dvb, dlb, dvo, dlo));
    OK(rkv_attn_sync(pr->da));
    tu_host_of(og, dvo, vbytes);
    tu_host_of(lg, dlo, 4 * (size_t)ns);
    cudaFree(dva);
    cudaFree(dvb);
    cudaFree(dvo);
    cudaFree(dla);
    cudaFree(dlb);
    cudaFree(dlo);
}

typedef enum { OP_DECODE, OP_PREFILL, OP_CASCADE } op_kind;

/* Cascade budget given to the CUDA context of the next run_case (0: the
 * default); a small one makes the shared prefix run in many chunks. */
static size_t case_budget;
/* Max query rows per request of the next run_case (0: the default). */
static uint32_t case_qmax;

static void run_case(rkv_rng *rng, uint32_t P, uint32_t G, uint32_t D, rkv_dtype dt,
                     op_kind op, uint32_t max_ctx)
{
    const uint32_t Hkv = 2, Hq = Hkv * G;
    uint32_t nreq = 1 + (uint32_t)rkv_rng_below(rng, 6);
#ifdef RKV_CUDASIM
    uint32_t qmax = op == OP_DECODE ? 1 : max_ctx > 1000 ? 4 : 12; /* simulation time */
#else
    uint32_t qmax = op == OP_DECODE ? 1 : 50;
#endif
    if (case_qmax != 0 && op != OP_DECODE)
        qmax = case_qmax;
    uint32_t maxpages = (max_ctx + qmax) / P + 2;
    uint32_t nshared = op == OP_CASCADE ? (uint32_t)rkv_rng_below(rng, max_ctx / P + 2) : 0;
    uint32_t nblocks = nreq * maxpages + nshared + 1;
    pair pr;
    pair_open(&pr, rng, P, Hkv, D, dt, nblocks);
    rkv_attn_set_cascade_budget(pr.da, case_budget);
    uint32_t *qo = calloc(nreq + 1, 4), *kvp = calloc(nreq + 1, 4), *last = calloc(nreq, 4);
    uint32_t *idx = malloc(4 * nblocks), *shared = malloc(4 * (nshared + 1));
    cr_assert(qo && kvp && last && idx && shared);
    uint32_t next = 0;
    for (uint32_t i = 0; i < nshared; i++)
        shared[i] = next++;
    for (uint32_t r = 0; r < nreq; r++) {
        uint32_t ql = 1 + (uint32_t)rkv_rng_below(rng, qmax);
        uint32_t len = (uint32_t)rkv_rng_below(rng, max_ctx) + ql;
        uint32_t pages = (len + P - 1) / P;
        last[r] = len - (pages - 1) * P;
        kvp[r + 1] = kvp[r] + pages;
        qo[r + 1] = qo[r] + ql;
        for (uint32_t i = 0; i < pages; i++) /* reversed: a scattered table */
            idx[kvp[r] + i] = nblocks - 1 - (next++ - nshared);
    }
    uint32_t rows = qo[nreq];
    size_t qn = (size_t)rows * Hq * D, ob = qn * pr.es;
    void *q = malloc(ob), *oh = malloc(ob), *og = malloc(ob);
    float *lh = malloc(4 * (size_t)rows * Hq), *lg = malloc(4 * (size_t)rows * Hq);
    cr_assert(q && oh && og && lh && lg);
    tu_fill_random(rng, dt, q, qn);
    void *dq = tu_dev_copy(q, ob), *dout = tu_dev_copy(NULL, ob);
    float *dl = tu_dev_copy(NULL, 4 * (size_t)rows * Hq);
    /* a random softmax scale (log-uniform in [1/64, 1]) in three cases of
     * four, the default 1/sqrt(D) in the fourth: a kernel that ignores or
     * misapplies the scale fails the sweep, not one test */
    float scale = rkv_rng_below(rng, 4) == 0 ? 0.0f
                                             : (float)pow(2.0, -6.0 * rkv_rng_unit(rng));
    rkv_attn_params p = {1, Hq, scale, 0, 0};
    rkv_paged_kv t = {nreq, kvp, idx, last};
    const char *what = op == OP_DECODE ? "decode" : op == OP_PREFILL ? "prefill" : "cascade";
    if (op == OP_DECODE) {
        OK(rkv_attn_decode(pr.ha, &p, &t, q, oh, lh));
        OK(rkv_attn_decode(pr.da, &p, &t, dq, dout, dl));
    } else if (op == OP_PREFILL) {
        OK(rkv_attn_prefill(pr.ha, &p, qo, &t, q, oh, lh));
        OK(rkv_attn_prefill(pr.da, &p, qo, &t, dq, dout, dl));
    } else {
        OK(rkv_attn_cascade(pr.ha, &p, nshared, shared, qo, &t, q, oh, lh));
        OK(rkv_attn_cascade(pr.da, &p, nshared, shared, qo, &t, dq, dout, dl));
    }
    OK(rkv_attn_sync(pr.da));
    tu_host_of(og, dout, ob);
    tu_host_of(lg, dl, 4 * (size_t)rows * Hq);
    cr_log_info("%s P=%u G=%u D=%u dt=%d rows=%u scale=%g", what, P, G, D, (int)dt, rows,
                (double)scale);
    compare(dt, D, (size_t)rows * Hq, og, oh, lg, lh, what);
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dl);
    free(q);
    free(oh);
    free(og);
    free(lh);
    free(lg);
    free(qo);
    free(kvp);
    free(last);
    free(idx);
    free(shared);
    pair_close(&pr);
}

static const rkv_dtype DTS[] = {RKV_DTYPE_F16, RKV_DTYPE_BF16, RKV_DTYPE_F32};
static const uint32_t PAGES[] = {1, 16, 64, 256};
static const uint32_t GQA[] = {1, 3, 4, 8};

/* On a GPU: every (dtype, page size, GQA, head dim) with contexts up to 700
 * tokens, and one long context per dtype. In the simulator (RKV_CUDASIM)
 * every (page size, GQA, head dim) once with the dtype rotating, so each
 * value of each parameter still runs, with shorter contexts; with
 * RKV_TEST_QUICK=1 (the sanitizer leg) a quarter of those. The long
 * contexts keep several KV splits in every mode. */
static void sweep(rkv_rng *rng, op_kind op)
{
#ifdef RKV_CUDASIM
    const char *quick = getenv("RKV_TEST_QUICK");
    const int reduced = 1;
    const size_t every = quick != NULL && strcmp(quick, "1") == 0 ? 4 : 1;
    const uint32_t ctx = 200, long_ctx = every > 1 ? 1200 : 2500;
#else
    const int reduced = 0;
    const size_t every = 1;
    const uint32_t ctx = 700, long_ctx = 9000;
#endif
    size_t n = 0;
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t pi = 0; pi < 4; pi++)
            for (size_t gi = 0; gi < 4; gi++)
                for (uint32_t D = 64; D <= 128; D += 64) {
                    if (reduced && (ti != (pi + gi + D / 64) % 3 || n++ % every != 0))
                        continue;
                    run_case(rng, PAGES[pi], GQA[gi], D, DTS[ti], op, ctx);
                }
    /* long contexts exercise the split-KV path */
    for (size_t ti = 0; ti < 3; ti++)
        run_case(rng, 16, 4, 128, DTS[ti], op, long_ctx);
}

static void gpu_decode(rkv_rng *rng) { sweep(rng, OP_DECODE); }

static void gpu_prefill(rkv_rng *rng) { sweep(rng, OP_PREFILL); }

static void gpu_cascade(rkv_rng *rng) { sweep(rng, OP_CASCADE); }

/* GQA group sizes the sweep does not draw: 7 (odd, under 8 heads per
 * warp pair), 16 (the most one block serves) and 20 (two blocks per kv
 * head, the second with 4 heads). */
static void gpu_gqa_groups_up_to_and_past_16(rkv_rng *rng)
{
    const uint32_t gs[3] = {7, 16, 20};
    for (size_t i = 0; i < 3; i++) {
        run_case(rng, 16, gs[i], i == 1 ? 64 : 128, DTS[i], OP_DECODE, 300);
        run_case(rng, 16, gs[i], 128, DTS[(i + 1) % 3], OP_PREFILL, 100);
    }
}

/* Plan once, run per layer: the same bytes as rkv_attn_decode /
 * rkv_attn_prefill on the CUDA pool (the run launches the same kernels),
 * CPU and CUDA runs within the sweep's bounds; in the simulator, a run
 * makes no host-device copy, memset, allocation or synchronisation (what a
 * CUDA graph capture needs). Misuse fails cleanly. */
static void plan_case(rkv_rng *rng, uint32_t G, rkv_dtype dt, int prefill)
{
    const uint32_t P = 16, Hkv = 2, Hq = Hkv * G, D = 64, nreq = 3;
    pair pr;
    pair_open(&pr, rng, P, Hkv, D, dt, 64);
    uint32_t kvp[4] = {0}, last[3], qo[4] = {0}, idx[64], next = 0;
    for (uint32_t r = 0; r < nreq; r++) {
        uint32_t len = 20 + (uint32_t)rkv_rng_below(rng, 300);
        uint32_t pages = (len + P - 1) / P;
        kvp[r + 1] = kvp[r] + pages;
        last[r] = len - (pages - 1) * P;
        qo[r + 1] = qo[r] + (prefill ? 1 + (uint32_t)rkv_rng_below(rng, 5) : 1);
        for (uint32_t i = 0; i < pages; i++)
            idx[kvp[r] + i] = 63 - next++;
    }
    uint32_t kvp_keep[4], idx_keep[64];
    memcpy(kvp_keep, kvp, sizeof kvp);
    memcpy(idx_keep, idx, sizeof idx);
    const uint32_t *qop = prefill ? qo : NULL;
    const size_t rows = prefill ? qo[nreq] : nreq, nv = rows * Hq, ob = nv * D * pr.es;
    rkv_paged_kv t = {nreq, kvp, idx, last};
    size_t hbytes = 1, dbytes = 0;
    OK(rkv_attn_plan_workspace_size(pr.ha, Hq, qop, &t, &hbytes));
    cr_assert_eq(hbytes, 0);
    OK(rkv_attn_plan_workspace_size(pr.da, Hq, qop, &t, &dbytes));
    cr_assert(dbytes > 0);
    void *ws = tu_dev_copy(NULL, dbytes);
    rkv_attn_plan *hp = NULL, *dp = NULL;
    cr_assert_eq(rkv_attn_plan_create(pr.da, Hq, qop, &t, ws, dbytes - 1, &dp),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_attn_plan_create(pr.da, Hq, qop, &t, NULL, dbytes, &dp),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_attn_plan_create(pr.da, Hq + 1, qop, &t, ws, dbytes, &dp),
                 RKV_ERR_INVALID_ARG);
    OK(rkv_attn_plan_create(pr.ha, Hq, qop, &t, NULL, 0, &hp));
    OK(rkv_attn_plan_create(pr.da, Hq, qop, &t, ws, dbytes, &dp));
    memset(idx, 0xff, sizeof idx); /* the plan keeps its own copy */
    memset(kvp, 0xff, sizeof kvp);
    void *q = malloc(ob), *oh = malloc(ob), *og = malloc(ob), *o1 = malloc(ob);
    float *lh = malloc(4 * nv), *lg = malloc(4 * nv), *l1 = malloc(4 * nv);
    cr_assert(q && oh && og && o1 && lh && lg && l1);
    void *dq = tu_dev_copy(NULL, ob), *dout = tu_dev_copy(NULL, ob), *dout1 = tu_dev_copy(NULL, ob);
    float *dl = tu_dev_copy(NULL, 4 * nv), *dl1 = tu_dev_copy(NULL, 4 * nv);
    cr_assert_eq(rkv_attn_run(pr.ha, dp, 0, 0.0f, q, oh, lh), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_attn_run(pr.da, dp, 2, 0.0f, dq, dout, dl), RKV_ERR_INVALID_ARG);
    rkv_paged_kv tk = {nreq, kvp_keep, idx_keep, last};
    for (uint32_t layer = 0; layer < 2; layer++) {
        tu_fill_random(rng, dt, q, nv * D);
        cr_assert_eq(cudaMemcpy(dq, q, ob, cudaMemcpyHostToDevice), cudaSuccess);
        const float scale = 0.05f + 0.1f * (float)layer;
        OK(rkv_attn_run(pr.ha, hp, layer, scale, q, oh, lh));
        OK(rkv_attn_sync(pr.da));
#ifdef RKV_CUDASIM
        rkvsim_meter_reset();
        rkvsim_meter_enable(1);
#endif
        OK(rkv_attn_run(pr.da, dp, layer, scale, dq, dout, dl));
#ifdef RKV_CUDASIM
        rkvsim_meter_enable(0);
        cr_assert_eq(rkvsim_meter_get("[H2D]", -1, RKVSIM_METER_LAUNCHES), 0);
        cr_assert_eq(rkvsim_meter_get("[memset]", -1, RKVSIM_METER_LAUNCHES), 0);
        cr_assert_eq(rkvsim_meter_get("[malloc]", -1, RKVSIM_METER_LAUNCHES), 0);
        cr_assert_eq(rkvsim_meter_get("[sync]", -1, RKVSIM_METER_LAUNCHES), 0);
        rkvsim_meter_reset();
#endif
        rkv_attn_params p = {layer, Hq, scale, 0, 0};
        if (prefill)
            OK(rkv_attn_prefill(pr.da, &p, qo, &tk, dq, dout1, dl1));
        else
            OK(rkv_attn_decode(pr.da, &p, &tk, dq, dout1, dl1));
        OK(rkv_attn_sync(pr.da));
        tu_host_of(og, dout, ob);
        tu_host_of(lg, dl, 4 * nv);
        tu_host_of(o1, dout1, ob);
        tu_host_of(l1, dl1, 4 * nv);
        cr_assert(memcmp(og, o1, ob) == 0, "plan/run and the one-shot call differ");
        cr_assert(memcmp(lg, l1, 4 * nv) == 0, "plan/run and the one-shot lse differ");
        compare(dt, D, nv, og, oh, lg, lh, "plan/run");
    }
    rkv_attn_plan_destroy(hp);
    rkv_attn_plan_destroy(dp);
    rkv_attn_plan_destroy(NULL);
    cudaFree(ws);
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dout1);
    cudaFree(dl);
    cudaFree(dl1);
    free(q);
    free(oh);
    free(og);
    free(o1);
    free(lh);
    free(lg);
    free(l1);
    pair_close(&pr);
}

static void gpu_plan_once_run_per_layer(rkv_rng *rng)
{
    for (size_t ti = 0; ti < 3; ti++) {
        plan_case(rng, ti == 0 ? 1 : 4, DTS[ti], 0);
        plan_case(rng, ti == 2 ? 1 : 3, DTS[ti], 1);
    }
}

/* Long prompts: many 64-row tiles per request on the tensor-core prefill
 * (f16/bf16), partial last tiles, GQA groups packed into a tile's rows. */
static void gpu_prefill_long_prompts(rkv_rng *rng)
{
    case_qmax = 150;
    run_case(rng, 16, 1, 128, RKV_DTYPE_F16, OP_PREFILL, 60);
    run_case(rng, 64, 3, 64, RKV_DTYPE_BF16, OP_PREFILL, 100);
    run_case(rng, 1, 4, 64, RKV_DTYPE_F16, OP_PREFILL, 30);
    case_qmax = 0;
}

static void gpu_append_merge_copy(rkv_rng *rng)
{
    for (size_t ti = 0; ti < 3; ti++) {
        rkv_dtype dt = DTS[ti];
        pair pr;
        pair_open(&pr, rng, 16, 2, 128, dt, 8);
        const size_t row = 2 * 128 * pr.es, bpb = rkv_pool_bytes_per_block(pr.hp);
        /* append the same tokens to both pools, then compare all KV bytes */
        uint32_t n = 40, slots[40];
        for (uint32_t i = 0; i < n; i++)
            slots[i] = (uint32_t)(i * 3 % 128);
        void *k = malloc(n * row), *v = malloc(n * row);
        cr_assert(k && v);
        tu_fill_random(rng, dt, k, n * row / pr.es);
        tu_fill_random(rng, dt, v, n * row / pr.es);
        void *dk = tu_dev_copy(k, n * row), *dv = tu_dev_copy(v, n * row);
        OK(rkv_attn_append(pr.ha, 1, n, slots, k, v));
        OK(rkv_attn_append(pr.da, 1, n, slots, dk, dv));
        OK(rkv_attn_sync(pr.da));
        uint32_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        char *bh = malloc(8 * bpb), *bd = malloc(8 * bpb);
        cr_assert(bh && bd);
        OK(rkv_pool_copy_to_host(pr.hp, 8, ids, bh));
        OK(rkv_pool_copy_to_host(pr.dp, 8, ids, bd));
        cr_assert(memcmp(bh, bd, 8 * bpb) == 0, "append differs");
        /* device block copy */
        uint32_t s3[3] = {0, 1, 2}, d3[3] = {5, 6, 7};
        OK(rkv_pool_copy_blocks(pr.hp, 3, s3, d3));
        OK(rkv_pool_copy_blocks(pr.dp, 3, s3, d3));
        OK(rkv_pool_copy_to_host(pr.hp, 8, ids, bh));
        OK(rkv_pool_copy_to_host(pr.dp, 8, ids, bd));
        cr_assert(memcmp(bh, bd, 8 * bpb) == 0, "copy_blocks differs");
        /* merge */
        const uint32_t ns = 30;
        size_t vb = (size_t)ns * 128 * pr.es;
        void *va = malloc(vb), *vbb = malloc(vb), *oh = malloc(vb), *og = malloc(vb);
        float la[30], lb[30], lh[30], lg[30];
        cr_assert(va && vbb && oh && og);
        tu_fill_random(rng, dt, va, vb / pr.es);
        tu_fill_random(rng, dt, vbb, vb / pr.es);
        for (uint32_t i = 0; i < ns; i++) {
            la[i] = (float)(rkv_rng_unit(rng) * 10 - 5);
            lb[i] = (float)(rkv_rng_unit(rng) * 10 - 5);
        }
        la[2] = -INFINITY;
        la[4] = lb[4] = -INFINITY;
        merge_both(&pr, ns, va, la, vbb, lb, vb, oh, lh, og, lg);
        cr_assert(lg[4] == -INFINITY);
        lg[4] = lh[4] = 0; /* compared above */
        compare(dt, 128, ns, og, oh, lg, lh, "merge");
        cudaFree(dk);
        cudaFree(dv);
        free(k);
        free(v);
        free(bh);
        free(bd);
        free(va);
        free(vbb);
        free(oh);
        free(og);
        pair_close(&pr);
    }
}

static void gpu_unsupported_head_dim(rkv_rng *rng)
{
    (void)rng; /* no random input */
    rkv_pool_config pc = tu_kv_config(2, 0, 1, 1, 96, RKV_DEVICE_CUDA);
    rkv_pool *p;
    rkv_attn *a = tu_attn_pool(&pc, &p);
    uint32_t b;
    OK(rkv_pool_alloc(p, &b));
    uint32_t indptr[2] = {0, 1}, last[1] = {3};
    rkv_paged_kv t = {1, indptr, &b, last};
    rkv_attn_params prm = {0, 1, 0.0f, 0, 0};
    void *dq = tu_dev_copy(NULL, 96 * 2), *dout = tu_dev_copy(NULL, 96 * 2);
    cr_assert_eq(rkv_attn_decode(a, &prm, &t, dq, dout, NULL), RKV_ERR_UNSUPPORTED);
    cudaFree(dq);
    cudaFree(dout);
    rkv_attn_destroy(a);
    rkv_pool_destroy(p);
}

/* Quantized KV: the device's append writes the same codes and scales as
 * the host's, bit for bit (one codec, attention/kv_codec.h); decode,
 * prefill and plan/run (with and without a window) on the device match the
 * CPU reference within the activation dtype's bound (the device rounds
 * dequantized K/V to it, as its 16-bit path reads its own elements), and
 * so does a cascade over a shared prefix (16-bit activations; refused with
 * f32 ones); block copies carry the scales. */
static void quant_case(rkv_rng *rng, rkv_dtype kdt, rkv_dtype act, uint32_t D,
                       uint32_t group)
{
    enum { NB = 12, P = 16, H = 2, HQ = 4 };
    rkv_pool_config pc = tu_quant_config(NB, P, 2, H, D, kdt, group, act);
    rkv_pool *hp, *dp;
    OK(rkv_pool_create(&pc, &hp));
    pc.device = RKV_DEVICE_CUDA;
    OK(rkv_pool_create(&pc, &dp));
    rkv_attn *ha, *da;
    OK(rkv_attn_create(hp, &ha));
    OK(rkv_attn_create(dp, &da));
    uint32_t ids[NB], slots[NB * P];
    OK(rkv_pool_alloc_n(hp, NB, ids));
    OK(rkv_pool_alloc_n(dp, NB, ids));
    for (uint32_t i = 0; i < NB * P; i++)
        slots[i] = i;
    const size_t es = act == RKV_DTYPE_F32 ? 4 : 2, nkv = (size_t)NB * P * H * D;
    void *k = malloc(nkv * es), *v = malloc(nkv * es);
    cr_assert(k && v);
    tu_fill_random(rng, act, k, nkv);
    tu_fill_random(rng, act, v, nkv);
    OK(rkv_attn_append(ha, 1, NB * P, slots, k, v));
    void *dk = tu_dev_copy(k, nkv * es), *dv = tu_dev_copy(v, nkv * es);
    OK(rkv_attn_append(da, 1, NB * P, slots, dk, dv));
    OK(rkv_attn_sync(da));
    size_t bpb = rkv_pool_bytes_per_block(hp);
    char *bh = malloc(bpb * NB), *bd = malloc(bpb * NB);
    cr_assert(bh && bd);
    OK(rkv_pool_copy_to_host(hp, NB, ids, bh));
    OK(rkv_pool_copy_to_host(dp, NB, ids, bd));
    cr_assert_arr_eq(bh, bd, bpb * NB, "dtype %d act %d: device codes differ", (int)kdt,
                     (int)act);

    uint32_t indptr[4] = {0, 4, 8, 12}, last[3] = {12, 16, 2}, qo[4] = {0, 5, 9, 12};
    rkv_paged_kv t = {3, indptr, ids, last};
    const size_t nq = (size_t)12 * HQ * D;
    void *q = malloc(nq * es), *ho = malloc(nq * es), *go = malloc(nq * es);
    float hl[12 * HQ], gl[12 * HQ];
    cr_assert(q && ho && go);
    tu_fill_random(rng, act, q, nq);
    void *dq = tu_dev_copy(q, nq * es), *dout = tu_dev_copy(NULL, nq * es);
    float *dlse = tu_dev_copy(NULL, sizeof gl);
    rkv_attn_params prm = {1, HQ, 0.0f, 0, 0};
    char what[80];
    /* decode */
    OK(rkv_attn_decode(ha, &prm, &t, q, ho, hl));
    OK(rkv_attn_decode(da, &prm, &t, dq, dout, dlse));
    tu_host_of(go, dout, 3 * HQ * D * es);
    tu_host_of(gl, dlse, 3 * HQ * sizeof(float));
    snprintf(what, sizeof what, "decode dtype %d act %d D %u", (int)kdt, (int)act, D);
    compare(act, D, 3 * HQ, go, ho, gl, hl, what);
    /* prefill, one-shot and planned */
    OK(rkv_attn_prefill(ha, &prm, qo, &t, q, ho, hl));
    OK(rkv_attn_prefill(da, &prm, qo, &t, dq, dout, dlse));
    tu_host_of(go, dout, nq * es);
    tu_host_of(gl, dlse, sizeof gl);
    snprintf(what, sizeof what, "prefill dtype %d act %d D %u", (int)kdt, (int)act, D);
    compare(act, D, 12 * HQ, go, ho, gl, hl, what);
    size_t wsb = 0;
    OK(rkv_attn_plan_workspace_size(da, HQ, qo, &t, &wsb));
    void *ws = tu_dev_copy(NULL, wsb);
    rkv_attn_plan *plan;
    OK(rkv_attn_plan_create(da, HQ, qo, &t, ws, wsb, &plan));
    cr_assert_eq(cudaMemset(dout, 0xff, nq * es), cudaSuccess);
    OK(rkv_attn_run_params(da, plan, &prm, dq, dout, dlse));
    tu_host_of(go, dout, nq * es);
    tu_host_of(gl, dlse, sizeof gl);
    snprintf(what, sizeof what, "plan/run dtype %d act %d D %u", (int)kdt, (int)act, D);
    compare(act, D, 12 * HQ, go, ho, gl, hl, what);
    /* a window over quantized KV, planned (tile kernel; rows kernel at f32) */
    rkv_attn_params win = prm;
    win.window_left = 9;
    win.num_sink_tokens = 2;
    OK(rkv_attn_prefill(ha, &win, qo, &t, q, ho, hl));
    OK(rkv_attn_run_params(da, plan, &win, dq, dout, dlse));
    tu_host_of(go, dout, nq * es);
    tu_host_of(gl, dlse, sizeof gl);
    snprintf(what, sizeof what, "window dtype %d act %d D %u", (int)kdt, (int)act, D);
    compare(act, D, 12 * HQ, go, ho, gl, hl, what);
    rkv_attn_plan_destroy(plan);
    /* a shared prefix over quantized KV (its 16-bit tiles dequantized on
     * load); refused on the device with f32 activations */
    OK(rkv_attn_cascade(ha, &prm, 1, &ids[0], qo, &t, q, ho, hl));
    if (act == RKV_DTYPE_F32) {
        cr_assert_eq(rkv_attn_cascade(da, &prm, 1, &ids[0], qo, &t, dq, dout, dlse),
                     RKV_ERR_UNSUPPORTED);
    } else {
        OK(rkv_attn_cascade(da, &prm, 1, &ids[0], qo, &t, dq, dout, dlse));
        tu_host_of(go, dout, nq * es);
        tu_host_of(gl, dlse, sizeof gl);
        snprintf(what, sizeof what, "cascade dtype %d act %d D %u", (int)kdt, (int)act, D);
        compare(act, D, 12 * HQ, go, ho, gl, hl, what);
    }
    /* the copies of a quantized device pool carry codes and scales */
    OK(rkv_pool_copy_blocks(dp, 1, &ids[0], &ids[11]));
    OK(rkv_pool_copy_to_host(dp, 1, &ids[11], bd));
    cr_assert_arr_eq(bh, bd, bpb, "a device block copy lost bytes");
    cudaFree(ws);
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dlse);
    cudaFree(dk);
    cudaFree(dv);
    free(q);
    free(ho);
    free(go);
    free(k);
    free(v);
    free(bh);
    free(bd);
    rkv_attn_destroy(ha);
    rkv_attn_destroy(da);
    rkv_pool_destroy(hp);
    rkv_pool_destroy(dp);
}

static void gpu_quantized_kv_matches_the_cpu_reference(rkv_rng *rng)
{
    static const rkv_dtype Q[4] = {RKV_DTYPE_FP8_E4M3, RKV_DTYPE_FP8_E5M2, RKV_DTYPE_INT8,
                                   RKV_DTYPE_INT4};
    for (int i = 0; i < 4; i++) {
        quant_case(rng, Q[i], RKV_DTYPE_BF16, 64, 32);
        quant_case(rng, Q[i], RKV_DTYPE_F32, 128, 16);
    }
    quant_case(rng, RKV_DTYPE_INT8, RKV_DTYPE_F16, 128, 32);
    quant_case(rng, RKV_DTYPE_INT4, RKV_DTYPE_BF16, 64, 2);
    quant_case(rng, RKV_DTYPE_INT4, RKV_DTYPE_F16, 128, 128);
}

/* Sliding windows with sinks on the device (decode, prefill, decode and
 * prefill plans) against the CPU reference; a window over a shared prefix
 * is refused. */
static void window_case(rkv_rng *rng, rkv_dtype dt, uint32_t W, uint32_t S)
{
    enum { H = 2, G = 3, HQ = H * G, NB = 16, D = 64 };
    const uint32_t P = 16;
    pair pr;
    pair_open(&pr, rng, P, H, D, dt, NB);
    /* 3 requests of 70, 33 and 100 tokens; prefill rows 6, 1, 9 */
    uint32_t ids[NB], indptr[4] = {0, 5, 8, 15}, last[3] = {6, 1, 4}, qo[4] = {0, 6, 7, 16};
    for (uint32_t i = 0; i < NB; i++)
        ids[i] = i;
    rkv_paged_kv t = {3, indptr, ids, last};
    const size_t nq = (size_t)16 * HQ * D;
    void *q = malloc(nq * pr.es), *ho = malloc(nq * pr.es), *go = malloc(nq * pr.es);
    float hl[16 * HQ], gl[16 * HQ];
    cr_assert(q && ho && go);
    tu_fill_random(rng, dt, q, nq);
    void *dq = tu_dev_copy(q, nq * pr.es), *dout = tu_dev_copy(NULL, nq * pr.es);
    float *dlse = tu_dev_copy(NULL, sizeof gl);
    rkv_attn_params prm = {1, HQ, 0.0f, W, S};
    char what[80];
    OK(rkv_attn_decode(pr.ha, &prm, &t, q, ho, hl));
    OK(rkv_attn_decode(pr.da, &prm, &t, dq, dout, dlse));
    tu_host_of(go, dout, 3 * HQ * D * pr.es);
    tu_host_of(gl, dlse, 3 * HQ * sizeof(float));
    snprintf(what, sizeof what, "window decode dt %d W %u S %u", (int)dt, W, S);
    compare(dt, D, 3 * HQ, go, ho, gl, hl, what);
    size_t wsb = 0;
    OK(rkv_attn_plan_workspace_size(pr.da, HQ, NULL, &t, &wsb));
    void *ws = tu_dev_copy(NULL, wsb);
    rkv_attn_plan *plan;
    OK(rkv_attn_plan_create(pr.da, HQ, NULL, &t, ws, wsb, &plan));
    cr_assert_eq(cudaMemset(dout, 0xff, nq * pr.es), cudaSuccess);
    OK(rkv_attn_run_params(pr.da, plan, &prm, dq, dout, dlse));
    tu_host_of(go, dout, 3 * HQ * D * pr.es);
    tu_host_of(gl, dlse, 3 * HQ * sizeof(float));
    snprintf(what, sizeof what, "window decode plan dt %d W %u S %u", (int)dt, W, S);
    compare(dt, D, 3 * HQ, go, ho, gl, hl, what);
    rkv_attn_plan_destroy(plan);
    OK(rkv_attn_prefill(pr.ha, &prm, qo, &t, q, ho, hl));
    OK(rkv_attn_prefill(pr.da, &prm, qo, &t, dq, dout, dlse));
    tu_host_of(go, dout, nq * pr.es);
    tu_host_of(gl, dlse, sizeof gl);
    snprintf(what, sizeof what, "window prefill dt %d W %u S %u", (int)dt, W, S);
    compare(dt, D, 16 * HQ, go, ho, gl, hl, what);
    /* a prefill plan (the tile kernel) takes the window at run time */
    OK(rkv_attn_plan_workspace_size(pr.da, HQ, qo, &t, &wsb));
    void *ws2 = tu_dev_copy(NULL, wsb);
    OK(rkv_attn_plan_create(pr.da, HQ, qo, &t, ws2, wsb, &plan));
    cr_assert_eq(cudaMemset(dout, 0xff, nq * pr.es), cudaSuccess);
    OK(rkv_attn_run_params(pr.da, plan, &prm, dq, dout, dlse));
    tu_host_of(go, dout, nq * pr.es);
    tu_host_of(gl, dlse, sizeof gl);
    snprintf(what, sizeof what, "window prefill plan dt %d W %u S %u", (int)dt, W, S);
    compare(dt, D, 16 * HQ, go, ho, gl, hl, what);
    rkv_attn_plan_destroy(plan);
    cudaFree(ws2);
    if (W != 0)
        cr_assert_eq(rkv_attn_cascade(pr.da, &prm, 1, &ids[15], qo, &t, dq, dout, dlse),
                     RKV_ERR_UNSUPPORTED);
    cudaFree(ws);
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dlse);
    free(q);
    free(ho);
    free(go);
    pair_close(&pr);
}

static void gpu_sliding_window_with_sinks(rkv_rng *rng)
{
    static const uint32_t ws[5][2] = {{1, 0}, {7, 2}, {31, 4}, {40, 0}, {1000, 3}};
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < 5; i++)
            window_case(rng, DTS[d], ws[i][0], ws[i][1]);
}

/* ---- stream, pinned-memory and defect regression tests ------------------ */

#ifdef RKV_CUDASIM
/* Deferred mode: asynchronous work waits until a synchronisation, and
 * pinned host memory is read when a copy runs, as DMA does. */
#define SIM_DEFER(on) rkvsim_set_deferred(on)
#else
#define SIM_DEFER(on) ((void)0)
#endif

/* Bytes that differ between the host and the CUDA pool of a pair. */
static size_t pool_diff(pair *pr)
{
    uint32_t nb = pr->cfg.num_blocks;
    size_t bpb = rkv_pool_bytes_per_block(pr->hp), diff = 0;
    uint32_t *ids = malloc(4 * nb);
    char *bh = malloc(nb * bpb), *bd = malloc(nb * bpb);
    cr_assert(ids && bh && bd);
    for (uint32_t i = 0; i < nb; i++)
        ids[i] = i;
    OK(rkv_pool_copy_to_host(pr->hp, nb, ids, bh));
    OK(rkv_pool_copy_to_host(pr->dp, nb, ids, bd));
    for (size_t i = 0; i < nb * bpb; i++)
        diff += bh[i] != bd[i];
    free(ids);
    free(bh);
    free(bd);
    return diff;
}

/* rkv_attn_append may return before its copies ran; the header lets the
 * caller reuse `slots` at once. With pinned slots the upload used to read
 * them late and write K/V where the next batch's slots point. */
static void gpu_append_slots_reused_at_once(rkv_rng *rng)
{
    SIM_DEFER(1);
    pair pr;
    pair_open(&pr, rng, 16, 2, 128, RKV_DTYPE_F32, 8);
    const uint32_t n = 40;
    const size_t row = 2 * 128 * pr.es;
    uint32_t *slots = NULL;
    cr_assert_eq(cudaHostAlloc((void **)&slots, n * 4, cudaHostAllocDefault), cudaSuccess);
    for (uint32_t i = 0; i < n; i++)
        slots[i] = i * 3 % 128;
    void *k = malloc(n * row), *v = malloc(n * row);
    cr_assert(k && v);
    tu_fill_random(rng, pr.cfg.dtype, k, n * row / pr.es);
    tu_fill_random(rng, pr.cfg.dtype, v, n * row / pr.es);
    void *dk = tu_dev_copy(k, n * row), *dv = tu_dev_copy(v, n * row);
    OK(rkv_attn_append(pr.ha, 1, n, slots, k, v));
    OK(rkv_attn_append(pr.da, 1, n, slots, dk, dv));
    for (uint32_t i = 0; i < n; i++)
        slots[i] = 127 - i; /* the caller's next batch */
    OK(rkv_attn_sync(pr.da));
    size_t diff = pool_diff(&pr);
    cr_assert_eq(diff, 0, "%zu pool bytes differ after append", diff);
    SIM_DEFER(0);
    cudaFreeHost(slots);
    cudaFree(dk);
    cudaFree(dv);
    free(k);
    free(v);
    pair_close(&pr);
}

/* One decode row of Hq heads over `np` pages (last page full) on both
 * pools; the device result lands in dout / dl, the host one in oh / lh. */
static void decode_both(pair *pr, uint32_t Hq, uint32_t np, uint32_t *pages, const void *q,
                        const void *dq, void *oh, float *lh, void *dout, float *dl)
{
    static uint32_t indptr[2];
    uint32_t last = pr->cfg.page_size;
    indptr[0] = 0;
    indptr[1] = np;
    rkv_paged_kv t = {1, indptr, pages, &last};
    rkv_attn_params p = {1, Hq, 0.0f, 0, 0};
    OK(rkv_attn_decode(pr->ha, &p, &t, q, oh, lh));
    OK(rkv_attn_decode(pr->da, &p, &t, dq, dout, dl));
}

/* Switching streams waits for work queued on the old one, on the
 * context's device even when the caller has another device current:
 * the workspace is reused in stream order. */
static void gpu_set_stream_with_another_device_current(rkv_rng *rng)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2)
        cr_skip_test("needs two CUDA devices");
    SIM_DEFER(1);
    pair pr;
    pair_open(&pr, rng, 16, 2, 128, RKV_DTYPE_F32, 16);
    const uint32_t Hq = 4, D = 128;
    const size_t ob = (size_t)Hq * D * 4;
    uint32_t pa[4] = {0, 1, 2, 3}, pb[4] = {8, 9, 10, 11};
    void *q = malloc(ob), *oha = malloc(ob), *ohb = malloc(ob), *oga = malloc(ob),
         *ogb = malloc(ob);
    float lha[4], lhb[4], lga[4], lgb[4];
    cr_assert(q && oha && ohb && oga && ogb);
    tu_fill_random(rng, RKV_DTYPE_F32, q, ob / 4);
    void *dq = tu_dev_copy(q, ob), *da = tu_dev_copy(NULL, ob), *db = tu_dev_copy(NULL, ob);
    float *dla = tu_dev_copy(NULL, sizeof lga), *dlb = tu_dev_copy(NULL, sizeof lgb);
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    decode_both(&pr, Hq, 4, pa, q, dq, oha, lha, da, dla); /* on the default stream */
    cr_assert_eq(cudaSetDevice(1), cudaSuccess);
    OK(rkv_attn_set_stream(pr.da, s));
    cr_assert_eq(cudaSetDevice(0), cudaSuccess);
    decode_both(&pr, Hq, 4, pb, q, dq, ohb, lhb, db, dlb); /* on s */
    OK(rkv_attn_sync(pr.da));
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
    tu_host_of(oga, da, ob);
    tu_host_of(ogb, db, ob);
    tu_host_of(lga, dla, sizeof lga);
    tu_host_of(lgb, dlb, sizeof lgb);
    compare(RKV_DTYPE_F32, D, Hq, oga, oha, lga, lha, "decode queued before the switch");
    compare(RKV_DTYPE_F32, D, Hq, ogb, ohb, lgb, lhb, "decode after the switch");
    OK(rkv_attn_set_stream(pr.da, NULL));
    SIM_DEFER(0);
    cudaStreamDestroy(s);
    cudaFree(dq);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dla);
    cudaFree(dlb);
    free(q);
    free(oha);
    free(ohb);
    free(oga);
    free(ogb);
    pair_close(&pr);
}

/* An empty state (lse -inf) contributes nothing, whatever its values hold:
 * the header promises merge(empty, x) = x and two empty states give 0. */
static void merge_empty_case(rkv_rng *rng, rkv_dtype dt)
{
    pair pr;
    pair_open(&pr, rng, 16, 1, 64, dt, 1);
    const uint32_t D = 64;
    const size_t vb = 3 * D * pr.es;
    char *va = malloc(vb), *vbb = malloc(vb), *oh = malloc(vb), *og = malloc(vb);
    cr_assert(va && vbb && oh && og);
    tu_fill_random(rng, dt, va, 3 * D);
    tu_fill_random(rng, dt, vbb, 3 * D);
    memset(va, 0xff, D * pr.es);                   /* state 0: a empty, NaN */
    memset(vbb + D * pr.es, 0xff, D * pr.es);      /* state 1: b empty, NaN */
    memset(va + 2 * D * pr.es, 0xff, D * pr.es);  /* state 2: both empty, NaN */
    memset(vbb + 2 * D * pr.es, 0xff, D * pr.es);
    float la[3] = {-INFINITY, 1.0f, -INFINITY}, lb[3] = {0.25f, -INFINITY, -INFINITY};
    float lh[3], lg[3];
    merge_both(&pr, 3, va, la, vbb, lb, vb, oh, lh, og, lg);
    const char *out[2] = {oh, og};
    const float *ls[2] = {lh, lg};
    for (int b = 0; b < 2; b++) {
        const char *who = b ? "cuda" : "host";
        for (uint32_t d = 0; d < D; d++) {
            cr_assert_eq(tu_ld(dt, out[b], d), tu_ld(dt, vbb, d), "%s: merge(empty, b)", who);
            cr_assert_eq(tu_ld(dt, out[b], D + d), tu_ld(dt, va, D + d), "%s: merge(a, empty)",
                         who);
            cr_assert_eq(tu_ld(dt, out[b], 2 * D + d), 0.0f, "%s: two empty states: %g", who,
                         tu_ld(dt, out[b], 2 * D + d));
        }
        cr_assert(fabsf(ls[b][0] - 0.25f) < 1e-6f && fabsf(ls[b][1] - 1.0f) < 1e-6f &&
                      ls[b][2] == -INFINITY,
                  "%s: lse %g %g %g", who, ls[b][0], ls[b][1], ls[b][2]);
    }
    free(va);
    free(vbb);
    free(oh);
    free(og);
    pair_close(&pr);
}

static void gpu_merge_ignores_empty_states(rkv_rng *rng)
{
    for (size_t ti = 0; ti < 3; ti++)
        merge_empty_case(rng, DTS[ti]);
}

/* ---- known answers: every backend against arithmetic, not each other ---- */

/* Copies the host pool of a pair into its CUDA pool. */
static void pair_sync(pair *pr)
{
    uint32_t nb = pr->cfg.num_blocks;
    size_t bpb = rkv_pool_bytes_per_block(pr->hp);
    uint32_t *ids = malloc(4 * nb);
    void *buf = malloc(nb * bpb);
    cr_assert(ids && buf);
    for (uint32_t i = 0; i < nb; i++)
        ids[i] = i;
    OK(rkv_pool_copy_to_host(pr->hp, nb, ids, buf));
    OK(rkv_pool_copy_from_host(pr->dp, nb, ids, buf));
    free(ids);
    free(buf);
}

static double kat_tol(rkv_dtype dt)
{
    return dt == RKV_DTYPE_F32 ? 2e-5 : dt == RKV_DTYPE_F16 ? 2e-3 : 1.6e-2;
}

/* Runs op on both pools (same inputs) and returns host and device results
 * in oh[0..1] / lh[0..1]. */
static void run_both(pair *pr, op_kind op, const rkv_attn_params *p, const rkv_paged_kv *t,
                     const uint32_t *qo, uint32_t nshared, const uint32_t *shared,
                     const void *q, size_t rows, void *o[2], float *l[2])
{
    const size_t nv = rows * p->num_qo_heads, ob = nv * pr->cfg.head_dim * pr->es;
    void *dq = tu_dev_copy(q, ob), *dout = tu_dev_copy(NULL, ob);
    float *dl = tu_dev_copy(NULL, 4 * nv);
    rkv_attn *as[2] = {pr->ha, pr->da};
    for (int b = 0; b < 2; b++) {
        const void *qq = b ? dq : q;
        void *oo = b ? dout : o[0];
        float *ll = b ? dl : l[0];
        if (op == OP_DECODE)
            OK(rkv_attn_decode(as[b], p, t, qq, oo, ll));
        else if (op == OP_PREFILL)
            OK(rkv_attn_prefill(as[b], p, qo, t, qq, oo, ll));
        else
            OK(rkv_attn_cascade(as[b], p, nshared, shared, qo, t, qq, oo, ll));
    }
    OK(rkv_attn_sync(pr->da));
    tu_host_of(o[1], dout, ob);
    tu_host_of(l[1], dl, 4 * nv);
    cudaFree(dq);
    cudaFree(dout);
    cudaFree(dl);
}

/* Frees a KAT's query and both backends' outputs and lse. */
static void free_outs(void *q, void *o[2], float *l[2])
{
    free(q);
    free(o[0]);
    free(o[1]);
    free(l[0]);
    free(l[1]);
}

/* Lays nreq requests of lens[] tokens out on consecutive pages from `next`
 * (kvp, last, qo with qper query rows each, idx); returns the next page. */
static uint32_t lay_out(uint32_t P, uint32_t nreq, const uint32_t *lens, uint32_t qper,
                        uint32_t next, uint32_t *kvp, uint32_t *last, uint32_t *qo,
                        uint32_t *idx)
{
    for (uint32_t r = 0; r < nreq; r++) {
        uint32_t pages = (lens[r] + P - 1) / P;
        kvp[r + 1] = kvp[r] + pages;
        last[r] = lens[r] - (pages - 1) * P;
        qo[r + 1] = qo[r] + qper;
        for (uint32_t i = 0; i < pages; i++)
            idx[kvp[r] + i] = next++;
    }
    return next;
}

/* Pool slot of token i of a request whose pages are pages[]. */
static size_t slot_of(const pair *pr, const uint32_t *pages, size_t i)
{
    uint32_t P = pr->cfg.page_size;
    return (size_t)pages[i / P] * P + i % P;
}

/* q = 0: every token scores 0, so lse = log(n) and the output is the mean
 * of V over the n tokens a row sees: the front end's row lengths (decode,
 * causal prefill, shared prefix plus own tokens) checked by arithmetic on
 * both backends. */
static void kat_mean(rkv_rng *rng, op_kind op, rkv_dtype dt)
{
    const uint32_t P = 16, Hkv = 2, G = 2, Hq = Hkv * G, D = 64, nreq = 2;
    const uint32_t nshared = op == OP_CASCADE ? 3 : 0, S = nshared * P;
    pair pr;
    pair_open(&pr, rng, P, Hkv, D, dt, 24);
    uint32_t shared[3] = {0, 1, 2}, kvp[3] = {0}, last[2], qo[3] = {0}, idx[24];
    uint32_t lens[2] = {37, 90}, next = 3;
    next = lay_out(P, nreq, lens, op == OP_DECODE ? 1 : 5, next, kvp, last, qo, idx);
    const uint32_t rows = op == OP_DECODE ? nreq : qo[nreq];
    const size_t nv = (size_t)rows * Hq, ob = nv * D * pr.es;
    void *q = calloc(1, ob), *o[2] = {malloc(ob), malloc(ob)};
    float *l[2] = {malloc(4 * nv), malloc(4 * nv)};
    cr_assert(q && o[0] && o[1] && l[0] && l[1]);
    rkv_attn_params p = {1, Hq, 0.3f, 0, 0};
    rkv_paged_kv t = {nreq, kvp, idx, last};
    run_both(&pr, op, &p, &t, qo, nshared, shared, q, rows, o, l);
    void *kb, *vb;
    OK(rkv_pool_layer_kv(pr.hp, 1, &kb, &vb));
    for (uint32_t r = 0, row = 0; r < nreq; r++)
        for (uint32_t j = 0; j < qo[r + 1] - qo[r]; j++, row++) {
            uint32_t ql = qo[r + 1] - qo[r], own = lens[r] - ql + j + 1;
            for (uint32_t h = 0; h < Hq; h++)
                for (uint32_t d = 0; d < D; d++) {
                    double sum = 0;
                    for (uint32_t i = 0; i < S + own; i++) {
                        size_t sl = i < S ? slot_of(&pr, shared, i)
                                          : slot_of(&pr, idx + kvp[r], i - S);
                        sum += tu_ld(dt, vb, (sl * Hkv + h / G) * D + d);
                    }
                    double want = sum / (S + own);
                    for (int b = 0; b < 2; b++) {
                        double got = tu_ld(dt, o[b], ((size_t)row * Hq + h) * D + d);
                        cr_assert(fabs(got - want) <= kat_tol(dt),
                                  "%s op %d row %u head %u dim %u: %g, mean of V is %g",
                                  b ? "cuda" : "host", (int)op, row, h, d, got, want);
                    }
                }
            for (int b = 0; b < 2; b++)
                for (uint32_t h = 0; h < Hq; h++)
                    cr_assert(fabs(l[b][row * Hq + h] - log((double)(S + own))) < 1e-4,
                              "%s op %d row %u: lse %g, log(%u) = %g", b ? "cuda" : "host",
                              (int)op, row, l[b][row * Hq + h], S + own, log((double)(S + own)));
        }
    free_outs(q, o, l);
    pair_close(&pr);
}

static void gpu_known_answer_zero_query(rkv_rng *rng)
{
    for (size_t ti = 0; ti < 3; ti++) {
        kat_mean(rng, OP_DECODE, DTS[ti]);
        kat_mean(rng, OP_PREFILL, DTS[ti]);
        kat_mean(rng, OP_CASCADE, DTS[ti]);
    }
}

/* One token of a long context carries a spike (q.k = 32, the rest 0): the
 * output is that token's V and lse ~ 32, wherever it sits -- first and
 * last token, both sides of every page boundary and of every multiple of
 * 64 (the KV split granularity). A token a split or page loop drops or
 * reads twice shows. */
static void gpu_known_answer_spikes(rkv_rng *rng)
{
    const rkv_dtype dts[2] = {RKV_DTYPE_F32, RKV_DTYPE_F16};
    for (size_t ti = 0; ti < 2; ti++) {
        const rkv_dtype dt = dts[ti];
        const uint32_t P = 64, Hkv = 1, Hq = 2, D = 64, L = 777;
        const uint32_t np = (L + P - 1) / P;
        pair pr;
        pair_open(&pr, rng, P, Hkv, D, dt, np + 1);
        void *kb, *vb;
        OK(rkv_pool_layer_kv(pr.hp, 1, &kb, &vb));
        uint32_t pages[16], kvp[2] = {0, np}, last = L - (np - 1) * P;
        for (uint32_t i = 0; i < np; i++)
            pages[i] = np - i; /* scattered */
        memset(kb, 0, (size_t)(np + 1) * P * Hkv * D * pr.es);
        const size_t ob = (size_t)Hq * D * pr.es;
        void *q = calloc(1, ob), *o[2] = {malloc(ob), malloc(ob)};
        float lh[2], lg[2], *l[2] = {lh, lg};
        cr_assert(q && o[0] && o[1]);
        for (uint32_t h = 0; h < Hq; h++)
            rkv_attn_cpu_store(dt, q, (size_t)h * D, 4.0f);
        rkv_attn_params p = {1, Hq, 1.0f, 0, 0};
        rkv_paged_kv t = {1, kvp, pages, &last};
        uint32_t pos[64], npos = 0;
        pos[npos++] = 0;
        pos[npos++] = L - 1;
        for (uint32_t b = 64; b < L && npos + 2 <= 64; b += 64) {
            pos[npos++] = b - 1;
            pos[npos++] = b;
        }
        for (uint32_t pi = 0; pi < npos; pi++) {
            size_t sl = slot_of(&pr, pages, pos[pi]);
            rkv_attn_cpu_store(dt, kb, sl * Hkv * D, 8.0f);
            pair_sync(&pr);
            run_both(&pr, OP_DECODE, &p, &t, NULL, 0, NULL, q, 1, o, l);
            for (int b = 0; b < 2; b++) {
                for (uint32_t h = 0; h < Hq; h++) {
                    cr_assert(fabs(l[b][h] - 32.0) < 1e-3, "%s spike at %u: lse %g",
                              b ? "cuda" : "host", pos[pi], l[b][h]);
                    for (uint32_t d = 0; d < D; d++) {
                        double got = tu_ld(dt, o[b], (size_t)h * D + d);
                        double want = tu_ld(dt, vb, sl * Hkv * D + d);
                        cr_assert(fabs(got - want) <= kat_tol(dt),
                                  "%s spike at %u: dim %u: %g, V of the token %g",
                                  b ? "cuda" : "host", pos[pi], d, got, want);
                    }
                }
            }
            rkv_attn_cpu_store(dt, kb, sl * Hkv * D, 0.0f);
        }
        free(q);
        free(o[0]);
        free(o[1]);
        pair_close(&pr);
    }
}

/* The nearest value of dtype dt (f16 or bf16) to x in [1, 2], ties to
 * even, worked out here in double (not by the code under test): *lo and
 * *hi are the two candidates when x lies within margin of a tie (either is
 * then accepted), else both are the nearest. */
static void rne_ref(rkv_dtype dt, double x, double margin, double *lo, double *hi)
{
    const double ulp = dt == RKV_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
    double k = floor(x / ulp), frac = x / ulp - k;
    double down = k * ulp, up = (k + 1) * ulp;
    if (fabs(frac - 0.5) * ulp <= margin) {
        *lo = down;
        *hi = up;
    } else if (frac == 0.5) {
        *lo = *hi = fmod(k, 2.0) == 0 ? down : up;
    } else {
        *lo = *hi = frac < 0.5 ? down : up;
    }
}

/* Stores into f16/bf16 round to nearest even, bit for bit. With q = 0 the
 * output is the mean of V; with V in [1, 2) the sum is exact in fp32, so
 * for short rows (one KV split) the kernel's fp32 value is the correctly
 * rounded mean and its 16-bit store must equal the nearest-even rounding
 * of it -- ties (means of 2 and 4 tokens) included. A store that truncates
 * (round toward zero) or rounds ties away passes every tolerance test but
 * fails here. Long rows (KV splits, finalize, cascade) carry fp32 error, so
 * there only values within 2^-16 of a tie may take either neighbour. */
static void rounding_case(rkv_rng *rng, op_kind op, rkv_dtype dt, const uint32_t lens[2],
                          double margin)
{
    const uint32_t P = 16, Hkv = 2, G = 2, Hq = Hkv * G, D = 64, nreq = 2;
    const uint32_t nshared = op == OP_CASCADE ? 2 : 0, S = nshared * P, nb = 64;
    pair pr;
    pair_open(&pr, rng, P, Hkv, D, dt, nb);
    void *kb, *vb;
    OK(rkv_pool_layer_kv(pr.hp, 1, &kb, &vb));
    for (size_t i = 0; i < (size_t)nb * P * Hkv * D; i++)
        rkv_attn_cpu_store(dt, vb, i, (float)(1.0 + rkv_rng_unit(rng)));
    pair_sync(&pr);
    uint32_t shared[2] = {0, 1}, kvp[3] = {0}, last[2], qo[3] = {0}, idx[60], next = 2;
    next = lay_out(P, nreq, lens, op == OP_DECODE ? 1 : 2, next, kvp, last, qo, idx);
    cr_assert(next <= nb);
    const uint32_t rows = qo[nreq];
    const size_t ob = (size_t)rows * Hq * D * pr.es;
    void *q = calloc(1, ob), *o[2] = {malloc(ob), malloc(ob)};
    float *l[2] = {malloc(4 * (size_t)rows * Hq), malloc(4 * (size_t)rows * Hq)};
    cr_assert(q && o[0] && o[1] && l[0] && l[1]);
    rkv_attn_params p = {1, Hq, 0.5f, 0, 0};
    rkv_paged_kv t = {nreq, kvp, idx, last};
    run_both(&pr, op, &p, &t, qo, nshared, shared, q, rows, o, l);
    for (uint32_t r = 0, row = 0; r < nreq; r++)
        for (uint32_t j = 0; j < qo[r + 1] - qo[r]; j++, row++) {
            uint32_t n = S + lens[r] - (qo[r + 1] - qo[r]) + j + 1;
            for (uint32_t h = 0; h < Hq; h++)
                for (uint32_t d = 0; d < D; d++) {
                    double sum = 0;
                    for (uint32_t i = 0; i < n; i++) {
                        size_t sl = i < S ? slot_of(&pr, shared, i)
                                          : slot_of(&pr, idx + kvp[r], i - S);
                        sum += tu_ld(dt, vb, (sl * Hkv + h / G) * D + d);
                    }
                    double lo, hi;
                    rne_ref(dt, sum / n, margin, &lo, &hi);
                    for (int b = 0; b < 2; b++) {
                        double got = tu_ld(dt, o[b], ((size_t)row * Hq + h) * D + d);
                        cr_assert(got == lo || got == hi,
                                  "%s op %d dt %d row %u head %u dim %u: stored %.9g, mean "
                                  "%.9g rounds to nearest even %.9g",
                                  b ? "cuda" : "host", (int)op, (int)dt, row, h, d, got,
                                  sum / n, lo);
                    }
                }
        }
    free_outs(q, o, l);
    pair_close(&pr);
}

static void gpu_stores_round_to_nearest_even(rkv_rng *rng)
{
    const rkv_dtype dts[2] = {RKV_DTYPE_F16, RKV_DTYPE_BF16};
    const uint32_t short_lens[2] = {4, 7}, long_lens[2] = {37, 300};
    for (size_t ti = 0; ti < 2; ti++) {
        rounding_case(rng, OP_DECODE, dts[ti], short_lens, 0.0); /* exact: ties too */
        rounding_case(rng, OP_PREFILL, dts[ti], short_lens, 0.0);
        rounding_case(rng, OP_DECODE, dts[ti], long_lens, 1.0 / 65536);
        rounding_case(rng, OP_PREFILL, dts[ti], long_lens, 1.0 / 65536);
        rounding_case(rng, OP_CASCADE, dts[ti], long_lens, 1.0 / 65536);
    }
}

/* A shared prefix of 2112 tokens runs in splits of at least 1024 tokens
 * (three of 704 here), their fp32 states merged with the rows' own part; a
 * budget of 1 byte leaves one split. Every dtype, against the CPU. */
static void cascade_splits_case(rkv_rng *rng, rkv_dtype dt, size_t budget)
{
    enum { P = 64, HKV = 1, HQ = 4, D = 64, NSH = 33, ROWS = 3 };
    pair pr;
    pair_open(&pr, rng, P, HKV, D, dt, NSH + 2);
    rkv_attn_set_cascade_budget(pr.da, budget);
    uint32_t shared[NSH], kvp[2] = {0, 2}, idx[2] = {NSH, NSH + 1}, last = 20;
    uint32_t qo[2] = {0, ROWS};
    for (uint32_t i = 0; i < NSH; i++)
        shared[i] = i;
    const size_t ob = (size_t)ROWS * HQ * D * pr.es;
    void *q = malloc(ob), *o[2] = {malloc(ob), malloc(ob)};
    float lh[ROWS * HQ], lg[ROWS * HQ], *l[2] = {lh, lg};
    cr_assert(q && o[0] && o[1]);
    tu_fill_random(rng, dt, q, (size_t)ROWS * HQ * D);
    rkv_attn_params p = {1, HQ, 0.0f, 0, 0};
    rkv_paged_kv t = {1, kvp, idx, &last};
    run_both(&pr, OP_CASCADE, &p, &t, qo, NSH, shared, q, ROWS, o, l);
    char what[64];
    snprintf(what, sizeof what, "cascade, prefix splits, dt %d budget %zu", (int)dt, budget);
    compare(dt, D, ROWS * HQ, o[1], o[0], lg, lh, what);
    free(q);
    free(o[0]);
    free(o[1]);
    pair_close(&pr);
}

static void gpu_cascade_prefix_splits(rkv_rng *rng)
{
    for (size_t ti = 0; ti < 3; ti++)
        cascade_splits_case(rng, DTS[ti], 0);
    cascade_splits_case(rng, RKV_DTYPE_BF16, 1);
}

#ifdef RKV_CUDASIM /* the simulator's controls: device memory, grid limits */
/* A long shared prefix needs no copy of it: with a 256 KiB budget and a
 * device that has 1 MiB to spare, a 4096-token prefix (4 MiB of K and V)
 * still runs, and matches the CPU. */
static void gpu_cascade_long_prefix_within_budget(rkv_rng *rng)
{
    const uint32_t P = 64, Hkv = 1, Hq = 4, D = 128, nshared = 64;
    pair pr;
    pair_open(&pr, rng, P, Hkv, D, RKV_DTYPE_F32, nshared + 2);
    rkv_attn_set_cascade_budget(pr.da, (size_t)256 << 10);
    uint32_t shared[64], kvp[2] = {0, 2}, idx[2] = {nshared, nshared + 1}, last = 20;
    uint32_t qo[2] = {0, 3};
    for (uint32_t i = 0; i < nshared; i++)
        shared[i] = i;
    const size_t ob = (size_t)3 * Hq * D * 4;
    void *q = malloc(ob), *o[2] = {malloc(ob), malloc(ob)};
    float lh[12], lg[12], *l[2] = {lh, lg};
    cr_assert(q && o[0] && o[1]);
    tu_fill_random(rng, RKV_DTYPE_F32, q, ob / 4);
    rkv_attn_params p = {1, Hq, 0.0f, 0, 0};
    rkv_paged_kv t = {1, kvp, idx, &last};
    rkvsim_set_mem_limit(rkvsim_mem_in_use(0) + ((size_t)1 << 20));
    run_both(&pr, OP_CASCADE, &p, &t, qo, nshared, shared, q, 3, o, l);
    rkvsim_set_mem_limit(0);
    compare(RKV_DTYPE_F32, D, 3 * Hq, o[1], o[0], lg, lh, "cascade, long prefix");
    free(q);
    free(o[0]);
    free(o[1]);
    pair_close(&pr);
}

/* Grids are sized in 64 bits and split to the device's limits: with a
 * (simulated) device whose grid x is at most 7 blocks, every operation
 * still runs and matches the CPU. */
static void gpu_grids_split_to_the_device_limit(rkv_rng *rng)
{
    rkvsim_set_max_grid_x(7);
    run_case(rng, 16, 4, 64, RKV_DTYPE_F16, OP_DECODE, 300);
    run_case(rng, 16, 2, 128, RKV_DTYPE_F32, OP_PREFILL, 300);
    case_budget = 1; /* one prefix split */
    run_case(rng, 16, 3, 64, RKV_DTYPE_BF16, OP_CASCADE, 300);
    case_budget = 0;
    pair pr;
    pair_open(&pr, rng, 16, 2, 64, RKV_DTYPE_F32, 8);
    const uint32_t n = 40;
    const size_t row = 2 * 64 * 4;
    uint32_t slots[40];
    for (uint32_t i = 0; i < n; i++)
        slots[i] = i * 3 % 128;
    void *k = malloc(n * row), *v = malloc(n * row);
    cr_assert(k && v);
    tu_fill_random(rng, RKV_DTYPE_F32, k, n * row / 4);
    tu_fill_random(rng, RKV_DTYPE_F32, v, n * row / 4);
    void *dk = tu_dev_copy(k, n * row), *dv = tu_dev_copy(v, n * row);
    OK(rkv_attn_append(pr.ha, 1, n, slots, k, v));
    OK(rkv_attn_append(pr.da, 1, n, slots, dk, dv));
    OK(rkv_attn_sync(pr.da));
    cr_assert_eq(pool_diff(&pr), 0);
    float la[40], lb[40], lh[40], lg[40];
    for (uint32_t i = 0; i < n; i++) {
        la[i] = (float)rkv_rng_unit(rng);
        lb[i] = (float)rkv_rng_unit(rng);
    }
    void *oh = malloc(n * 64 * 4), *og = malloc(n * 64 * 4);
    cr_assert(oh && og);
    void *dvo = tu_dev_copy(NULL, n * 64 * 4);
    float *dla = tu_dev_copy(la, sizeof la), *dlb = tu_dev_copy(lb, sizeof lb),
          *dlo = tu_dev_copy(NULL, sizeof lg);
    OK(rkv_attn_merge(pr.ha, n, k, la, v, lb, oh, lh));
    OK(rkv_attn_merge(pr.da, n, dk, dla, dv, dlb, dvo, dlo));
    OK(rkv_attn_sync(pr.da));
    tu_host_of(og, dvo, n * 64 * 4);
    tu_host_of(lg, dlo, sizeof lg);
    compare(RKV_DTYPE_F32, 64, n, og, oh, lg, lh, "merge");
    rkvsim_set_max_grid_x(0);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dvo);
    cudaFree(dla);
    cudaFree(dlb);
    cudaFree(dlo);
    free(k);
    free(v);
    free(oh);
    free(og);
    pair_close(&pr);
}
#endif

#define GPU_BODY(name) gpu_##name
#ifdef RKV_CUDASIM
#define SIM_BODY(name) gpu_##name
#else
/* Tests of the simulator's controls skip on a real GPU. */
static void gpu_sim_only(rkv_rng *rng)
{
    (void)rng;
    cr_skip_test("needs the simulator's device memory and grid limits");
}
#define SIM_BODY(name) gpu_sim_only
#endif
#else
#define GPU_BODY(name) NULL
#define SIM_BODY(name) NULL
#endif

/* Every test: skipped without a device, else its body with an rng seeded
 * (and printed) under the test's name. */
static void gpu_test(const char *name, void (*body)(rkv_rng *))
{
    need_gpu();
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    if (body != NULL)
        body(&rng);
}

#define GPU_TEST(name) \
    Test(attention_gpu, name) { gpu_test("attention_gpu." #name, GPU_BODY(name)); }
#define SIM_TEST(name) \
    Test(attention_gpu, name) { gpu_test("attention_gpu." #name, SIM_BODY(name)); }

GPU_TEST(decode)
GPU_TEST(prefill)
GPU_TEST(cascade)
GPU_TEST(gqa_groups_up_to_and_past_16)
GPU_TEST(plan_once_run_per_layer)
GPU_TEST(prefill_long_prompts)
GPU_TEST(append_merge_copy)
GPU_TEST(unsupported_head_dim)
GPU_TEST(append_slots_reused_at_once)
GPU_TEST(set_stream_with_another_device_current)
GPU_TEST(merge_ignores_empty_states)
GPU_TEST(cascade_prefix_splits)
GPU_TEST(known_answer_zero_query)
GPU_TEST(known_answer_spikes)
GPU_TEST(stores_round_to_nearest_even)
GPU_TEST(quantized_kv_matches_the_cpu_reference)
GPU_TEST(sliding_window_with_sinks)
SIM_TEST(cascade_long_prefix_within_budget)
SIM_TEST(grids_split_to_the_device_limit)

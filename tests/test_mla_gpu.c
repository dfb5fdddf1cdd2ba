/*
 * tests/test_mla_gpu.c -- the CUDA kernels of multi-head latent attention
 * (attention/mla_cuda.cu) against the CPU reference (mla_cpu.c): a host and
 * a CUDA pool of the MLA layout get the same latent rows through their own
 * rkv_attn_mla_append, then decode and prefill run on both. In CI these run
 * on the CUDA simulator (-DRKV_CUDA=SIM); without a device they skip.
 *
 * Covered: f16, bf16, f32; page sizes 1, 16, 64; DeepSeek-V3's widths
 * (512 + 64) and smaller ones; head counts below, at and above a block's
 * group (16, or 8 in f32) so partial groups run; one split (the rows
 * kernel writes the output) and many (the combine kernel merges them);
 * appended bytes equal the host pool's bit for bit.
 * Bounds, relative to the largest |value| of the head's vector: f32 1e-4,
 * f16 4e-3, bf16 2e-2 (the GPU sums in another order, then rounds once);
 * lse 1e-3 * (1 + |lse|). Outputs are poisoned before each call.
 * Seeds are printed; RKV_TEST_SEED replays a run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/dtype_buf.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#ifdef RKV_HAVE_CUDA
#include <cuda_runtime.h>

#include "tests/support/cuda_buf.h"
#endif

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define SKIP_MSG "no CUDA device: GPU MLA tests skipped"

static void need_gpu(void)
{
    rkv_pool_config pc = tu_mla_config(1, 0, 1, 64, 16, RKV_DTYPE_F16, RKV_DEVICE_CUDA);
    tu_need_device_pool(&pc, SKIP_MSG);
}

#ifdef RKV_HAVE_CUDA

typedef struct mcase {
    rkv_dtype dt;
    uint32_t P, R, E, H, nreq, max_len, qmax; /* qmax 0: decode */
} mcase;

static void run(rkv_rng *rng, const mcase *c)
{
    const size_t es = tu_dtype_size(c->dt), W = (size_t)c->R + c->E;
    uint32_t *len = malloc(4 * c->nreq), *qn = malloc(4 * c->nreq);
    uint32_t *indptr = malloc(4 * (c->nreq + 1)), *last = malloc(4 * c->nreq);
    uint32_t *qo = malloc(4 * (c->nreq + 1));
    uint32_t npages = 0, ntok = 0, nrows = 0;
    indptr[0] = qo[0] = 0;
    for (uint32_t r = 0; r < c->nreq; r++) {
        len[r] = 1 + (uint32_t)rkv_rng_below(rng, c->max_len);
        if (r == 0)
            len[r] = c->max_len; /* the longest sets the split */
        uint32_t pg = (len[r] + c->P - 1) / c->P;
        last[r] = len[r] - (pg - 1) * c->P;
        npages += pg;
        indptr[r + 1] = npages;
        ntok += len[r];
        qn[r] = c->qmax ? 1 + (uint32_t)rkv_rng_below(rng, c->qmax < len[r] ? c->qmax : len[r]) : 1;
        nrows += qn[r];
        qo[r + 1] = nrows;
    }
    rkv_pool_config pc = tu_mla_config(npages + 2, c->P, 2, c->R, c->E, c->dt, RKV_DEVICE_HOST);
    rkv_pool *hp, *dp;
    rkv_attn *ha, *da;
    OK(rkv_pool_create(&pc, &hp));
    pc.device = RKV_DEVICE_CUDA;
    OK(rkv_pool_create(&pc, &dp));
    OK(rkv_attn_create(hp, &ha));
    OK(rkv_attn_create(dp, &da));
    uint32_t *ids = malloc(4 * (npages + 2)), *slots = malloc(4 * ntok);
    OK(rkv_pool_alloc_n(hp, npages + 2, ids));
    OK(rkv_pool_alloc_n(dp, npages + 2, ids));
    for (uint32_t i = npages + 1; i > 0; i--) { /* pages out of order */
        uint32_t j = (uint32_t)rkv_rng_below(rng, i + 1), x = ids[i];
        ids[i] = ids[j];
        ids[j] = x;
    }
    for (uint32_t r = 0, t0 = 0; r < c->nreq; t0 += len[r], r++)
        for (uint32_t t = 0; t < len[r]; t++)
            slots[t0 + t] = ids[indptr[r] + t / c->P] * c->P + t % c->P;
    void *ckv = tu_rand_buf(rng, c->dt, (size_t)ntok * c->R);
    void *kpe = tu_rand_buf(rng, c->dt, (size_t)ntok * c->E);
    OK(rkv_attn_mla_append(ha, 1, ntok, slots, ckv, kpe));
    void *dckv = tu_dev_copy(ckv, (size_t)ntok * c->R * es), *dkpe = tu_dev_copy(kpe, (size_t)ntok * c->E * es);
    OK(rkv_attn_mla_append(da, 1, ntok, slots, dckv, dkpe));
    OK(rkv_attn_sync(da));
    /* the appended rows, bit for bit */
    size_t bpb = rkv_pool_bytes_per_block(hp);
    char *hb = malloc(bpb * npages), *db = malloc(bpb * npages);
    OK(rkv_pool_copy_to_host(hp, npages, ids, hb));
    OK(rkv_pool_copy_to_host(dp, npages, ids, db));
    for (uint32_t i = 0; i < npages; i++) /* layer 1's plane of each block */
        cr_assert_eq(memcmp(hb + i * bpb + bpb / 2, db + i * bpb + bpb / 2, bpb / 2), 0,
                     "appended page %u differs", i);

    const size_t nst = (size_t)nrows * c->H;
    void *ql = tu_rand_buf(rng, c->dt, nst * c->R), *qp = tu_rand_buf(rng, c->dt, nst * c->E);
    void *dql = tu_dev_copy(ql, nst * c->R * es), *dqp = tu_dev_copy(qp, nst * c->E * es);
    void *ho = malloc(nst * c->R * es), *go = malloc(nst * c->R * es);
    float *hl = malloc(4 * nst), *gl = malloc(4 * nst);
    void *dout = tu_dev_copy(NULL, nst * c->R * es);
    float *dlse = tu_dev_copy(NULL, 4 * nst);
    rkv_paged_kv kv = {c->nreq, indptr, ids, last};
    rkv_mla_params mp = {1, c->H, 1.0f / sqrtf((float)W)};
    if (c->qmax) {
        OK(rkv_attn_mla_prefill(ha, &mp, qo, &kv, ql, qp, ho, hl));
        OK(rkv_attn_mla_prefill(da, &mp, qo, &kv, dql, dqp, dout, dlse));
    } else {
        OK(rkv_attn_mla_decode(ha, &mp, &kv, ql, qp, ho, hl));
        OK(rkv_attn_mla_decode(da, &mp, &kv, dql, dqp, dout, dlse));
    }
    OK(rkv_attn_sync(da));
    tu_host_of(go, dout, nst * c->R * es);
    tu_host_of(gl, dlse, 4 * nst);
    const double tol = c->dt == RKV_DTYPE_F32 ? 1e-4 : c->dt == RKV_DTYPE_F16 ? 4e-3 : 2e-2;
    for (size_t i = 0; i < nst; i++) {
        double mx = 1e-30;
        for (uint32_t d = 0; d < c->R; d++)
            mx = fmax(mx, fabs(tu_ld(c->dt, ho, i * c->R + d)));
        for (uint32_t d = 0; d < c->R; d++) {
            double g = tu_ld(c->dt, go, i * c->R + d), w = tu_ld(c->dt, ho, i * c->R + d);
            cr_assert(fabs(g - w) <= tol * mx, "dt %d P %u H %u: state %zu dim %u: gpu %g cpu %g",
                      (int)c->dt, c->P, c->H, i, d, g, w);
        }
        cr_assert(fabs(gl[i] - hl[i]) <= 1e-3 * (1 + fabs(hl[i])), "lse %zu: gpu %g cpu %g",
                  i, gl[i], hl[i]);
    }
    cudaFree(dckv); cudaFree(dkpe); cudaFree(dql); cudaFree(dqp); cudaFree(dout); cudaFree(dlse);
    free(ckv); free(kpe); free(ql); free(qp); free(ho); free(go); free(hl); free(gl);
    free(hb); free(db); free(ids); free(slots);
    free(len); free(qn); free(indptr); free(last); free(qo);
    OK(rkv_attn_check(da));
    rkv_attn_destroy(ha);
    rkv_attn_destroy(da);
    rkv_pool_destroy(hp);
    rkv_pool_destroy(dp);
}

static const rkv_dtype dts[3] = {RKV_DTYPE_F16, RKV_DTYPE_BF16, RKV_DTYPE_F32};

/* Runs c (its dt aside) once per dtype of dts, in order, on one rng seeded under seed;
 * page_first (nonzero) replaces c's page size for the first dtype. */
static void per_dtype(const char *seed, mcase c, uint32_t page_first)
{
    need_gpu();
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(seed));
    const uint32_t P = c.P;
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        c.dt = dts[i];
        c.P = i == 0 && page_first != 0 ? page_first : P;
        run(&rng, &c);
    }
}

/* DeepSeek-V3's latent at page 64: three splits of the longest request;
 * the shorter requests leave later splits empty */
Test(mla_gpu, decode_deepseek_widths_split)
{
    per_dtype("mla_gpu_decode_split", (mcase){0, 64, 512, 64, 16, 3, 700, 0}, 0);
}

/* many rows and a partial second head group, so one split writes the
 * output directly; page sizes 1 and 16 */
Test(mla_gpu, decode_batch_partial_groups)
{
    per_dtype("mla_gpu_decode_batch", (mcase){0, 16, 128, 32, 20, 40, 24, 0}, 1);
}

Test(mla_gpu, prefill_page64)
{
    per_dtype("mla_gpu_prefill", (mcase){0, 64, 256, 64, 5, 3, 150, 6}, 0);
}

Test(mla_gpu, unsupported_widths_refused)
{
    need_gpu();
    rkv_pool_config pc = tu_mla_config(2, 0, 1, 1024, 64, RKV_DTYPE_F16, RKV_DEVICE_CUDA);
    rkv_pool *p;
    rkv_attn *a;
    OK(rkv_pool_create(&pc, &p));
    OK(rkv_attn_create(p, &a));
    uint32_t blk, slot;
    OK(rkv_pool_alloc(p, &blk));
    slot = blk * pc.page_size;
    void *d = tu_dev_copy(NULL, 4096);
    cr_assert_eq(rkv_attn_mla_append(a, 0, 1, &slot, d, d), RKV_ERR_UNSUPPORTED);
    cr_assert(strstr(rkv_last_error(), "on the GPU") != NULL, "%s", rkv_last_error());
    cudaFree(d);
    rkv_attn_destroy(a);
    rkv_pool_destroy(p);
}

#else

Test(mla_gpu, skipped)
{
    need_gpu();
    cr_assert_fail("a CUDA pool was created without the CUDA backend linked");
}

#endif

/*
 * tests/test_attn_window.c -- sliding-window attention with sinks
 * (rkv_attn_params.window_left, num_sink_tokens) on the CPU reference:
 * decode, prefill, cascade and plan/run against a brute-force f64
 * attention over exactly the keys the mask lets through, enumerated here
 * from the definition (the query at position p sees key j iff j <= p and
 * (W == 0 or j >= p - W or j < sinks)).
 *
 * Bound: outputs are f32, so 2e-5 relative to the head's largest |value|
 * (fp32 accumulation over <= ~200 keys), lse 1e-4 * (1 + |lse|).
 * Seeds are printed; RKV_TEST_SEED replays a run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

enum { H = 2, G = 2, HQ = H * G, D = 16, NB = 128 };

typedef struct env {
    rkv_pool *pool;
    rkv_attn *attn;
    uint32_t P;
    float *kv[2]; /* layer 0's K and V: [NB][P][H][D] */
} env;

static void env_open(env *e, rkv_rng *rng)
{
    static const uint32_t ps[3] = {1, 4, 16};
    e->P = ps[rkv_rng_below(rng, 3)];
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = NB;
    pc.page_size = e->P;
    pc.num_layers = 1;
    pc.num_kv_heads = H;
    pc.head_dim = D;
    pc.dtype = RKV_DTYPE_F32;
    OK(rkv_pool_create(&pc, &e->pool));
    OK(rkv_attn_create(e->pool, &e->attn));
    void *k, *v;
    OK(rkv_pool_layer_kv(e->pool, 0, &k, &v));
    e->kv[0] = k;
    e->kv[1] = v;
    for (size_t i = 0; i < (size_t)NB * e->P * H * D; i++) {
        e->kv[0][i] = (float)(rkv_rng_unit(rng) * 4 - 2); /* peaky scores */
        e->kv[1][i] = (float)(rkv_rng_unit(rng) * 2 - 1);
    }
}

static void env_close(env *e)
{
    OK(rkv_attn_check(e->attn));
    rkv_attn_destroy(e->attn);
    rkv_pool_destroy(e->pool);
}

static int sees(uint32_t W, uint32_t S, uint32_t p, uint32_t j)
{
    return j <= p && (W == 0 || j + W >= p || j < S);
}

/* f64 attention of query row q (HQ x D) at position p over the keys of
 * `pages` (positions 0..p) that the mask lets through. */
static void ref_row(const env *e, const uint32_t *pages, uint32_t p, uint32_t W,
                    uint32_t S, const float *q, double *o, double *lse)
{
    const double scale = 1.0 / sqrt((double)D);
    for (uint32_t hq = 0; hq < HQ; hq++) {
        uint32_t h = hq / G;
        double mx = -INFINITY, l = 0, acc[D] = {0};
        for (int pass = 0; pass < 2; pass++)
            for (uint32_t j = 0; j <= p; j++) {
                if (!sees(W, S, p, j))
                    continue;
                size_t at = (((size_t)pages[j / e->P] * e->P + j % e->P) * H + h) * D;
                double s = 0;
                for (uint32_t d = 0; d < D; d++)
                    s += (double)q[hq * D + d] * e->kv[0][at + d];
                s *= scale;
                if (pass == 0) {
                    mx = fmax(mx, s);
                    continue;
                }
                double w = exp(s - mx);
                l += w;
                for (uint32_t d = 0; d < D; d++)
                    acc[d] += w * e->kv[1][at + d];
            }
        for (uint32_t d = 0; d < D; d++)
            o[hq * D + d] = acc[d] / l;
        lse[hq] = mx + log(l);
    }
}

static void check_rows(uint32_t nrows, const float *out, const float *lse,
                       const double *ro, const double *rl, const char *what)
{
    for (uint32_t r = 0; r < nrows; r++)
        for (uint32_t hq = 0; hq < HQ; hq++) {
            const double *o = ro + ((size_t)r * HQ + hq) * D;
            double m = 0;
            for (uint32_t d = 0; d < D; d++)
                m = fmax(m, fabs(o[d]));
            for (uint32_t d = 0; d < D; d++) {
                double got = out[((size_t)r * HQ + hq) * D + d];
                cr_assert(fabs(got - o[d]) <= 2e-5 * (m + 1e-3),
                          "%s row %u head %u d %u: %g vs %g", what, r, hq, d, got, o[d]);
            }
            double gl = lse[(size_t)r * HQ + hq], wl = rl[(size_t)r * HQ + hq];
            cr_assert(fabs(gl - wl) <= 1e-4 * (1 + fabs(wl)), "%s row %u lse %g vs %g",
                      what, r, gl, wl);
        }
}

/* A window and sink count: full, tiny, wider than the request, sinks
 * beyond the window, sinks larger than the request. */
static void draw_mask(rkv_rng *rng, uint32_t *W, uint32_t *S)
{
    static const uint32_t ws[6] = {0, 1, 3, 7, 20, 1000};
    *W = ws[rkv_rng_below(rng, 6)];
    *S = (uint32_t)rkv_rng_below(rng, 6);
    if (rkv_rng_below(rng, 8) == 0)
        *S = 500;
}

Test(attn_window, decode_prefill_cascade_plan_match_brute_force)
{
    uint64_t seed = rkv_test_seed("attn_window::decode_prefill_cascade_plan_match_brute_force");
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    for (int round = 0; round < (int)rkv_test_scaled(40); round++) {
        env e;
        env_open(&e, &rng);
        const uint32_t P = e.P;
        uint32_t W, S;
        draw_mask(&rng, &W, &S);
        /* shared prefix (cascade only) + 3 requests, each a suffix of 1..40
         * tokens of which the last 1..qn are queries */
        uint32_t nsh = (uint32_t)rkv_rng_below(&rng, 3) * (P == 1 ? 5 : 1);
        uint32_t nreq = 3, shared[16], ind[NB], indptr[4] = {0}, last[3], qo[4] = {0};
        uint32_t full[3][NB], klen[3];
        uint32_t next = 0;
        for (uint32_t i = 0; i < nsh; i++)
            shared[i] = next++;
        for (uint32_t r = 0; r < nreq; r++) {
            uint32_t len = 1 + (uint32_t)rkv_rng_below(&rng, 40 / (P == 1 ? 2 : 1));
            uint32_t pages = (len + P - 1) / P;
            klen[r] = len;
            last[r] = len - (pages - 1) * P;
            for (uint32_t i = 0; i < nsh; i++)
                full[r][i] = shared[i];
            for (uint32_t i = 0; i < pages; i++) {
                ind[indptr[r] + i] = next;
                full[r][nsh + i] = next++;
            }
            indptr[r + 1] = indptr[r] + pages;
            qo[r + 1] = qo[r] + 1 + (uint32_t)rkv_rng_below(&rng, len);
        }
        cr_assert(next <= NB);
        rkv_block_id ids[NB];
        OK(rkv_pool_alloc_n(e.pool, next, ids)); /* fresh pool: ids 0..next-1 */
        const uint32_t nrows = qo[nreq];
        float *q = malloc((size_t)nrows * HQ * D * 4), *out = malloc((size_t)nrows * HQ * D * 4);
        float *lse = malloc((size_t)nrows * HQ * 4);
        double *ro = malloc((size_t)nrows * HQ * D * 8), *rl = malloc((size_t)nrows * HQ * 8);
        cr_assert(q && out && lse && ro && rl);
        for (size_t i = 0; i < (size_t)nrows * HQ * D; i++)
            q[i] = (float)(rkv_rng_unit(&rng) * 2 - 1);
        rkv_paged_kv tab = {nreq, indptr, ind, last};
        rkv_attn_params p = {0, HQ, 0.0f, W, S};
        char what[96];

        /* decode: one row per request at its last position */
        OK(rkv_attn_decode(e.attn, &p, &tab, q, out, lse));
        for (uint32_t r = 0; r < nreq; r++)
            ref_row(&e, full[r] + nsh, klen[r] - 1, W, S, q + (size_t)r * HQ * D,
                    ro + (size_t)r * HQ * D, rl + (size_t)r * HQ);
        snprintf(what, sizeof what, "decode P=%u W=%u S=%u", P, W, S);
        check_rows(nreq, out, lse, ro, rl, what);

        /* prefill, and plan/run of the same batch */
        for (uint32_t r = 0; r < nreq; r++)
            for (uint32_t i = qo[r]; i < qo[r + 1]; i++)
                ref_row(&e, full[r] + nsh, klen[r] - (qo[r + 1] - i), W, S,
                        q + (size_t)i * HQ * D, ro + (size_t)i * HQ * D, rl + (size_t)i * HQ);
        OK(rkv_attn_prefill(e.attn, &p, qo, &tab, q, out, lse));
        snprintf(what, sizeof what, "prefill P=%u W=%u S=%u", P, W, S);
        check_rows(nrows, out, lse, ro, rl, what);
        rkv_attn_plan *plan;
        OK(rkv_attn_plan_create(e.attn, HQ, qo, &tab, NULL, 0, &plan));
        memset(out, 0xff, (size_t)nrows * HQ * D * 4);
        OK(rkv_attn_run_params(e.attn, plan, &p, q, out, lse));
        snprintf(what, sizeof what, "plan/run P=%u W=%u S=%u", P, W, S);
        check_rows(nrows, out, lse, ro, rl, what);
        rkv_attn_params wrong = p;
        wrong.num_qo_heads = H;
        cr_assert_eq(rkv_attn_run_params(e.attn, plan, &wrong, q, out, lse),
                     RKV_ERR_INVALID_ARG);
        rkv_attn_plan_destroy(plan);

        /* cascade: positions count from the start of the shared prefix */
        if (nsh > 0) {
            for (uint32_t r = 0; r < nreq; r++)
                for (uint32_t i = qo[r]; i < qo[r + 1]; i++)
                    ref_row(&e, full[r], nsh * P + klen[r] - (qo[r + 1] - i), W, S,
                            q + (size_t)i * HQ * D, ro + (size_t)i * HQ * D,
                            rl + (size_t)i * HQ);
            OK(rkv_attn_cascade(e.attn, &p, nsh, shared, qo, &tab, q, out, lse));
            snprintf(what, sizeof what, "cascade P=%u W=%u S=%u shared=%u", P, W, S, nsh);
            check_rows(nrows, out, lse, ro, rl, what);
        }
        free(q);
        free(out);
        free(lse);
        free(ro);
        free(rl);
        OK(rkv_pool_unref_n(e.pool, next, ids));
        env_close(&e);
    }
}

Test(attn_window, a_window_wider_than_the_request_is_full_attention)
{
    uint64_t seed = rkv_test_seed("attn_window::a_window_wider_than_the_request_is_full_attention");
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    env e;
    env_open(&e, &rng);
    const uint32_t len = 3 * e.P + 1, pages = 4;
    rkv_block_id ids[4];
    OK(rkv_pool_alloc_n(e.pool, pages, ids));
    uint32_t indptr[2] = {0, pages}, last = 1;
    rkv_paged_kv tab = {1, indptr, ids, &last};
    float q[HQ * D], a[HQ * D], b[HQ * D], la[HQ], lb[HQ];
    for (int i = 0; i < HQ * D; i++)
        q[i] = (float)(rkv_rng_unit(&rng) * 2 - 1);
    rkv_attn_params full = {0, HQ, 0.0f, 0, 7};
    rkv_attn_params wide = {0, HQ, 0.0f, len - 1, 0};
    rkv_attn_params narrow = {0, HQ, 0.0f, 1, 0};
    OK(rkv_attn_decode(e.attn, &full, &tab, q, a, la));
    OK(rkv_attn_decode(e.attn, &wide, &tab, q, b, lb));
    cr_assert_arr_eq(a, b, sizeof a);
    cr_assert_arr_eq(la, lb, sizeof la);
    /* and one a token narrower differs (the mask is not ignored) */
    OK(rkv_attn_decode(e.attn, &narrow, &tab, q, b, lb));
    cr_assert(memcmp(a, b, sizeof a) != 0);
    OK(rkv_pool_unref_n(e.pool, pages, ids));
    env_close(&e);
}

/*
 * tests/test_kv_evict.c -- a request's own KV made smaller
 * (include/radixkv/kv_evict.h): StreamingLLM's release leaves decode with
 * the same window and sinks bit for bit unchanged and never touches a
 * shared page; the per-key weights are the decode's own softmax (checked
 * against rkv_attn_decode: sum_t w_t v_t is its output); H2O / SnapKV
 * selections on hand-made scores; compaction equals a request built from
 * the kept tokens alone (f32, bf16 and quantized pools), and refuses to
 * drop a token of a shared page.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/pool_config.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

enum { H = 2, G = 2, HQ = H * G, D = 16, NB = 96, L = 2 };

typedef struct env {
    rkv_pool *pool;
    rkv_attn *attn;
    uint32_t P;
    rkv_dtype dt;
} env;

static void env_open(env *e, uint32_t P, rkv_dtype dt)
{
    rkv_pool_config pc = tu_kv_config(NB, P, L, H, D, RKV_DEVICE_HOST);
    pc.dtype = dt;
    pc.quant_group = 8;
    pc.act_dtype = RKV_DTYPE_F32;
    OK(rkv_pool_create(&pc, &e->pool));
    OK(rkv_attn_create(e->pool, &e->attn));
    e->P = P;
    e->dt = dt == RKV_DTYPE_F32 || dt == RKV_DTYPE_BF16 ? dt : RKV_DTYPE_F32;
}

static void env_close(env *e)
{
    OK(rkv_attn_check(e->attn));
    rkv_attn_destroy(e->attn);
    OK(rkv_pool_check(e->pool));
    rkv_pool_destroy(e->pool);
}

/* Element i of an activation array of dtype dt (f32 or bf16). */
static void put(rkv_dtype dt, void *a, size_t i, float x)
{
    if (dt == RKV_DTYPE_BF16)
        ((uint16_t *)a)[i] = rkv_f32_to_bf16(x);
    else
        ((float *)a)[i] = x;
}
static float get(rkv_dtype dt, const void *a, size_t i)
{
    return dt == RKV_DTYPE_BF16 ? rkv_bf16_to_f32(((const uint16_t *)a)[i])
                                : ((const float *)a)[i];
}

/* Appends token rows kv[t] (all layers) at positions pos[t] of pages. */
static void append_rows(env *e, const uint32_t *pages, uint32_t n,
                        const uint32_t *pos, float *const *k, float *const *v)
{
    size_t es = e->dt == RKV_DTYPE_BF16 ? 2 : 4;
    void *kb = malloc((size_t)n * H * D * es), *vb = malloc((size_t)n * H * D * es);
    uint32_t *slots = malloc(n * sizeof *slots);
    for (uint32_t l = 0; l < L; l++) {
        for (uint32_t t = 0; t < n; t++) {
            slots[t] = pages[pos[t] / e->P] * e->P + pos[t] % e->P;
            for (uint32_t i = 0; i < H * D; i++) {
                put(e->dt, kb, (size_t)t * H * D + i, k[l][(size_t)t * H * D + i]);
                put(e->dt, vb, (size_t)t * H * D + i, v[l][(size_t)t * H * D + i]);
            }
        }
        OK(rkv_attn_append(e->attn, l, n, slots, kb, vb));
    }
    free(kb);
    free(vb);
    free(slots);
}

typedef struct req {
    uint32_t n, np;
    uint32_t pages[64];
    float *k[L], *v[L]; /* [n][H][D] */
} req;

static void req_make(env *e, req *r, uint32_t n, rkv_rng *rng)
{
    r->n = n;
    r->np = (n + e->P - 1) / e->P;
    OK(rkv_pool_alloc_n(e->pool, r->np, r->pages));
    uint32_t *pos = malloc(n * sizeof *pos);
    for (uint32_t t = 0; t < n; t++)
        pos[t] = t;
    for (uint32_t l = 0; l < L; l++) {
        r->k[l] = malloc((size_t)n * H * D * sizeof(float));
        r->v[l] = malloc((size_t)n * H * D * sizeof(float));
        for (size_t i = 0; i < (size_t)n * H * D; i++) {
            r->k[l][i] = (float)(rkv_rng_unit(rng) * 4 - 2);
            r->v[l][i] = (float)(rkv_rng_unit(rng) * 2 - 1);
        }
    }
    append_rows(e, r->pages, n, pos, r->k, r->v);
    free(pos);
}

static void req_free(req *r)
{
    for (uint32_t l = 0; l < L; l++) {
        free(r->k[l]);
        free(r->v[l]);
    }
}

static void decode(env *e, const uint32_t *pages, uint32_t np, uint32_t n,
                   uint32_t layer, uint32_t W, uint32_t S, const void *q, void *out)
{
    uint32_t indptr[2] = {0, np}, last = n - (np - 1) * e->P;
    rkv_paged_kv kv = {1, indptr, pages, &last};
    rkv_attn_params p = {layer, HQ, 0.0f, W, S};
    OK(rkv_attn_decode(e->attn, &p, &kv, q, out, NULL));
}

static void *rand_q(env *e, uint32_t rows, rkv_rng *rng)
{
    size_t es = e->dt == RKV_DTYPE_BF16 ? 2 : 4;
    void *q = malloc((size_t)rows * HQ * D * es);
    for (size_t i = 0; i < (size_t)rows * HQ * D; i++)
        put(e->dt, q, i, (float)(rkv_rng_unit(rng) * 2 - 1));
    return q;
}

Test(kv_evict, streaming_release_keeps_decode_exact)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("kv_evict.streaming"));
    env e;
    env_open(&e, 4, RKV_DTYPE_F32);
    req r;
    req_make(&e, &r, 40, &rng); /* 10 pages */
    /* pages 0, 1: the cached prefix (the tree's reference too) */
    OK(rkv_pool_ref(e.pool, r.pages[0]));
    OK(rkv_pool_ref(e.pool, r.pages[1]));
    rkv_block_id filler;
    OK(rkv_pool_alloc(e.pool, &filler));
    void *q = rand_q(&e, 1, &rng);
    float before[HQ * D], after[HQ * D];
    decode(&e, r.pages, r.np, r.n, 1, 7, 4, q, before);
    uint32_t orig[10], rel = 0;
    memcpy(orig, r.pages, sizeof orig);
    uint32_t freeb = rkv_pool_num_free(e.pool);
    cr_assert_eq(rkv_kv_streaming_release(e.pool, r.pages, r.np, r.n, 4, 0, filler,
                                          &rel), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_kv_streaming_release(e.pool, r.pages, r.np, r.n, 4, 7,
                                          NB - 1, &rel), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_kv_streaming_release(e.pool, r.pages, r.np, r.n + 4, 4, 7,
                                          filler, &rel), RKV_ERR_INVALID_ARG);
    cr_assert_eq(memcmp(orig, r.pages, sizeof orig), 0);
    OK(rkv_kv_streaming_release(e.pool, r.pages, r.np, r.n, 4, 7, filler, &rel));
    /* live from 40 - 1 - 7 = 32: pages 2..7 (tokens 8..31); page 0 holds
     * the sinks, page 1 is shared */
    cr_assert_eq(rel, 6);
    cr_assert_eq(rkv_pool_num_free(e.pool), freeb + 6);
    for (uint32_t i = 0; i < 10; i++)
        cr_assert_eq(r.pages[i], i >= 2 && i <= 7 ? filler : orig[i], "page %u", i);
    cr_assert_eq(rkv_pool_refcount(e.pool, orig[1]), 2);
    decode(&e, r.pages, r.np, r.n, 1, 7, 4, q, after);
    cr_assert_eq(memcmp(before, after, sizeof before), 0);
    /* again: nothing more (the filler and kept pages stay) */
    OK(rkv_kv_streaming_release(e.pool, r.pages, r.np, r.n, 4, 7, filler, &rel));
    cr_assert_eq(rel, 0);
    OK(rkv_pool_unref(e.pool, orig[0]));
    OK(rkv_pool_unref(e.pool, orig[1]));
    for (uint32_t i = 0; i < 10; i++)
        if (r.pages[i] != filler)
            OK(rkv_pool_unref(e.pool, r.pages[i]));
    OK(rkv_pool_unref(e.pool, filler));
    cr_assert_eq(rkv_pool_num_free(e.pool), NB);
    free(q);
    req_free(&r);
    env_close(&e);
}

/* With one query head per kv head, decode's output is sum_t p_t v_t: the
 * weights must be that p (and every row's probabilities sum to 1). */
Test(kv_evict, key_weights_are_the_decode_softmax)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("kv_evict.weights"));
    env e;
    env_open(&e, 4, RKV_DTYPE_F32);
    req r;
    req_make(&e, &r, 37, &rng);
    uint32_t indptr[2] = {0, r.np}, last = r.n - (r.np - 1) * e.P;
    rkv_paged_kv kv = {1, indptr, r.pages, &last};
    static const uint32_t win[][2] = {{0, 0}, {9, 3}};
    for (int wi = 0; wi < 2; wi++) {
        uint32_t W = win[wi][0], S = win[wi][1];
        float *q = rand_q(&e, 1, &rng);
        rkv_attn_params p1 = {0, H, 0.0f, W, S}; /* one q head per kv head */
        float out[H * D];
        OK(rkv_attn_decode(e.attn, &p1, &kv, q, out, NULL));
        float w[37] = {0};
        OK(rkv_attn_key_weights(e.attn, &p1, &kv, 1, q, w));
        double sum = 0, o[D] = {0};
        for (uint32_t t = 0; t < r.n; t++) {
            sum += w[t];
            if (W != 0 && t >= S && t + W < r.n - 1)
                cr_assert_eq(w[t], 0.0f, "masked key %u has weight", t);
        }
        cr_assert_float_eq(sum, (double)H, 1e-5);
        /* the weights sum both heads; with head 1's query zero its
         * probabilities are uniform over the visible keys, so head 0's are
         * the rest, and decode's head 0 must be sum_t p_t v_t */
        float *q0 = malloc(HQ * D * sizeof(float));
        memcpy(q0, q, H * D * sizeof(float));
        memset(q0 + D, 0, D * sizeof(float));
        float w0[37] = {0};
        OK(rkv_attn_key_weights(e.attn, &p1, &kv, 1, q0, w0));
        uint32_t vis = 0;
        for (uint32_t t = 0; t < r.n; t++)
            vis += W == 0 || t < S || t + W >= r.n - 1;
        OK(rkv_attn_decode(e.attn, &p1, &kv, q0, out, NULL));
        for (uint32_t t = 0; t < r.n; t++) {
            int seen = W == 0 || t < S || t + W >= r.n - 1;
            float p0 = w0[t] - (seen ? 1.0f / (float)vis : 0.0f);
            for (uint32_t d = 0; d < D; d++)
                o[d] += p0 * r.v[0][(size_t)t * H * D + d]; /* layer 0, head 0 */
        }
        for (uint32_t d = 0; d < D; d++)
            cr_assert_float_eq(o[d], out[d], 1e-5, "W %u dim %u", W, d);
        free(q0);
        free(q);
    }
    /* several rows (an observation window): each row sums to 1 per head */
    float *q = rand_q(&e, 5, &rng);
    rkv_attn_params p = {1, HQ, 0.0f, 0, 0};
    float w[37] = {0};
    OK(rkv_attn_key_weights(e.attn, &p, &kv, 5, q, w));
    double sum = 0;
    for (uint32_t t = 0; t < r.n; t++)
        sum += w[t];
    cr_assert_float_eq(sum, 5.0 * HQ, 1e-4);
    cr_assert_eq(rkv_attn_key_weights(e.attn, &p, &kv, 38, q, w),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_attn_key_weights(e.attn, &p, &kv, 0, q, w),
                 RKV_ERR_INVALID_ARG);
    free(q);
    OK(rkv_pool_unref_n(e.pool, r.np, r.pages));
    req_free(&r);
    env_close(&e);
}

Test(kv_evict, selections)
{
    /*                 0    1    2    3    4    5    6    7    8    9 */
    float s[10] = {9.0f, 1.0f, 5.0f, 0.5f, 5.0f, 7.0f, 0.1f, 2.0f, 3.0f, 8.0f};
    uint8_t keep[10];
    /* protect 1, recent 2, heavy 3 of tokens 1..7: 5 (7), 2 (5), 4 (5) */
    cr_assert_eq(rkv_kv_select_h2o(s, 10, 1, 3, 2, keep), 6);
    uint8_t want[10] = {1, 0, 1, 0, 1, 1, 0, 0, 1, 1};
    cr_assert_eq(memcmp(keep, want, 10), 0);
    /* everything fits: all kept */
    cr_assert_eq(rkv_kv_select_h2o(s, 10, 4, 9, 4, keep), 10);
    /* SnapKV: obs 2 (8, 9), protect 0, budget 2, kernel 3 over 0..7:
     * pooled = 9 9 5 5 7 7 7 2 -> 0, 1 (ties: earlier) */
    cr_assert_eq(rkv_kv_select_snapkv(s, 10, 0, 2, 2, 3, keep), 4);
    uint8_t want2[10] = {1, 1, 0, 0, 0, 0, 0, 0, 1, 1};
    cr_assert_eq(memcmp(keep, want2, 10), 0);
    /* kernel 1 is no pooling: 0 (9), 5 (7) */
    cr_assert_eq(rkv_kv_select_snapkv(s, 10, 0, 2, 2, 1, keep), 4);
    uint8_t want3[10] = {1, 0, 0, 0, 0, 1, 0, 0, 1, 1};
    cr_assert_eq(memcmp(keep, want3, 10), 0);
}

/* Compaction equals a request appended from the kept tokens alone. */
static void compact_case(rkv_dtype dt, uint64_t seed)
{
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    env e;
    env_open(&e, 4, dt);
    req r;
    req_make(&e, &r, 45, &rng); /* 12 pages */
    OK(rkv_pool_ref(e.pool, r.pages[0])); /* shared: tokens 0..3 */
    uint8_t keep[45];
    uint32_t nk = 0, kpos[45];
    for (uint32_t t = 0; t < 45; t++) {
        keep[t] = t < 4 || rkv_rng_below(&rng, 3) != 0;
        if (keep[t])
            kpos[nk++] = t;
    }
    float carry[45];
    for (uint32_t t = 0; t < 45; t++)
        carry[t] = (float)t;
    /* dropping a token of the shared page is refused */
    uint8_t bad[45];
    memcpy(bad, keep, 45);
    bad[2] = 0;
    uint32_t np = r.np, n = r.n, pages[12];
    memcpy(pages, r.pages, sizeof pages);
    cr_assert_eq(rkv_kv_compact(e.attn, pages, &np, &n, bad, carry),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(np, 12);
    cr_assert_eq(n, 45);
    uint32_t freeb = rkv_pool_num_free(e.pool);
    OK(rkv_kv_compact(e.attn, pages, &np, &n, keep, carry));
    cr_assert_eq(n, nk);
    cr_assert_eq(np, (nk + 3) / 4);
    cr_assert_eq(rkv_pool_num_free(e.pool), freeb + 12 - np);
    for (uint32_t i = 0; i < nk; i++)
        cr_assert_eq(carry[i], (float)kpos[i]);
    /* the reference: the kept rows appended to fresh pages */
    req ref;
    ref.n = nk;
    ref.np = np;
    OK(rkv_pool_alloc_n(e.pool, ref.np, ref.pages));
    float *k[L], *v[L];
    uint32_t *pos = malloc(nk * sizeof *pos);
    for (uint32_t l = 0; l < L; l++) {
        k[l] = malloc((size_t)nk * H * D * sizeof(float));
        v[l] = malloc((size_t)nk * H * D * sizeof(float));
        for (uint32_t i = 0; i < nk; i++) {
            memcpy(k[l] + (size_t)i * H * D, r.k[l] + (size_t)kpos[i] * H * D,
                   H * D * sizeof(float));
            memcpy(v[l] + (size_t)i * H * D, r.v[l] + (size_t)kpos[i] * H * D,
                   H * D * sizeof(float));
        }
    }
    for (uint32_t i = 0; i < nk; i++)
        pos[i] = i;
    append_rows(&e, ref.pages, nk, pos, k, v);
    void *q = rand_q(&e, 1, &rng);
    float a[HQ * D], b[HQ * D];
    for (uint32_t l = 0; l < L; l++) {
        decode(&e, pages, np, n, l, 0, 0, q, a);
        decode(&e, ref.pages, ref.np, nk, l, 0, 0, q, b);
        for (uint32_t i = 0; i < HQ * D; i++)
            cr_assert_eq(get(e.dt, a, i), get(e.dt, b, i), "dtype %d layer %u elem %u",
                         (int)dt, l, i);
    }
    OK(rkv_pool_unref(e.pool, pages[0])); /* the "tree's" reference */
    OK(rkv_pool_unref_n(e.pool, np, pages));
    OK(rkv_pool_unref_n(e.pool, ref.np, ref.pages));
    cr_assert_eq(rkv_pool_num_free(e.pool), NB);
    for (uint32_t l = 0; l < L; l++) {
        free(k[l]);
        free(v[l]);
    }
    free(pos);
    free(q);
    req_free(&r);
    env_close(&e);
}

Test(kv_evict, compact_equals_kept_tokens_alone)
{
    static const rkv_dtype dts[] = {RKV_DTYPE_F32, RKV_DTYPE_BF16, RKV_DTYPE_INT8,
                                    RKV_DTYPE_FP8_E4M3, RKV_DTYPE_INT4};
    for (unsigned i = 0; i < sizeof dts / sizeof dts[0]; i++)
        compact_case(dts[i], rkv_test_seed("kv_evict.compact") + i);
}

/* H2O over a decode loop: each step appends a token, adds its query's
 * weights to the accumulated ones (carried through every compaction),
 * and keeps the protected prefix + heavy + recent once past the budget.
 * After every step, decode over the compacted KV equals decode over the
 * kept tokens (by their original index) appended afresh, bit for bit, and
 * the shared first page is never touched. */
Test(kv_evict, h2o_decode_loop)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("kv_evict.h2o_loop"));
    env e;
    env_open(&e, 4, RKV_DTYPE_F32);
    enum { N0 = 24, STEPS = 30, HEAVY = 6, RECENT = 6, PROTECT = 4, MAXT = N0 + STEPS };
    req r;
    req_make(&e, &r, N0, &rng); /* 6 pages; page 0 shared */
    OK(rkv_pool_ref(e.pool, r.pages[0]));
    rkv_block_id shared = r.pages[0];
    /* every token's K/V, by original index, for the reference */
    float *allk[L], *allv[L];
    for (uint32_t l = 0; l < L; l++) {
        allk[l] = malloc((size_t)MAXT * H * D * sizeof(float));
        allv[l] = malloc((size_t)MAXT * H * D * sizeof(float));
        memcpy(allk[l], r.k[l], (size_t)N0 * H * D * sizeof(float));
        memcpy(allv[l], r.v[l], (size_t)N0 * H * D * sizeof(float));
    }
    uint32_t orig[MAXT], n = N0, np = r.np, total = N0;
    for (uint32_t t = 0; t < N0; t++)
        orig[t] = t;
    float acc[MAXT] = {0};
    for (uint32_t s = 0; s < STEPS; s++) {
        /* append token `total` at position n */
        if (n == np * e.P)
            OK(rkv_pool_alloc(e.pool, &r.pages[np++]));
        float *k1[L], *v1[L];
        for (uint32_t l = 0; l < L; l++) {
            k1[l] = allk[l] + (size_t)total * H * D;
            v1[l] = allv[l] + (size_t)total * H * D;
            for (uint32_t i = 0; i < H * D; i++) {
                k1[l][i] = (float)(rkv_rng_unit(&rng) * 4 - 2);
                v1[l][i] = (float)(rkv_rng_unit(&rng) * 2 - 1);
            }
        }
        uint32_t pos = n;
        append_rows(&e, r.pages, 1, &pos, k1, v1);
        orig[n] = total++;
        acc[n] = 0.0f;
        n++;
        float *q = rand_q(&e, 1, &rng);
        uint32_t indptr[2] = {0, np}, last = n - (np - 1) * e.P;
        rkv_paged_kv kv = {1, indptr, r.pages, &last};
        rkv_attn_params p = {0, HQ, 0.0f, 0, 0};
        OK(rkv_attn_key_weights(e.attn, &p, &kv, 1, q, acc));
        if (n > PROTECT + HEAVY + RECENT) {
            uint8_t keep[MAXT];
            cr_assert_eq(rkv_kv_select_h2o(acc, n, PROTECT, HEAVY, RECENT, keep),
                         PROTECT + HEAVY + RECENT);
            uint32_t w = 0;
            for (uint32_t j = 0; j < n; j++)
                if (keep[j])
                    orig[w++] = orig[j];
            OK(rkv_kv_compact(e.attn, r.pages, &np, &n, keep, acc));
            cr_assert_eq(n, w);
        }
        cr_assert_eq(r.pages[0], shared);
        cr_assert_eq(rkv_pool_refcount(e.pool, shared), 2);
        /* the reference: the kept tokens appended afresh */
        uint32_t rnp = (n + e.P - 1) / e.P, rpages[64], rpos[MAXT];
        OK(rkv_pool_alloc_n(e.pool, rnp, rpages));
        float *rk[L], *rv[L];
        for (uint32_t l = 0; l < L; l++) {
            rk[l] = malloc((size_t)n * H * D * sizeof(float));
            rv[l] = malloc((size_t)n * H * D * sizeof(float));
            for (uint32_t j = 0; j < n; j++) {
                memcpy(rk[l] + (size_t)j * H * D, allk[l] + (size_t)orig[j] * H * D,
                       H * D * sizeof(float));
                memcpy(rv[l] + (size_t)j * H * D, allv[l] + (size_t)orig[j] * H * D,
                       H * D * sizeof(float));
            }
        }
        for (uint32_t j = 0; j < n; j++)
            rpos[j] = j;
        append_rows(&e, rpages, n, rpos, rk, rv);
        float a[HQ * D], b[HQ * D];
        for (uint32_t l = 0; l < L; l++) {
            decode(&e, r.pages, np, n, l, 0, 0, q, a);
            decode(&e, rpages, rnp, n, l, 0, 0, q, b);
            cr_assert_eq(memcmp(a, b, sizeof a), 0, "step %u layer %u", s, l);
        }
        OK(rkv_pool_unref_n(e.pool, rnp, rpages));
        for (uint32_t l = 0; l < L; l++) {
            free(rk[l]);
            free(rv[l]);
        }
        free(q);
    }
    OK(rkv_pool_unref(e.pool, shared));
    OK(rkv_pool_unref_n(e.pool, np, r.pages));
    cr_assert_eq(rkv_pool_num_free(e.pool), NB);
    for (uint32_t l = 0; l < L; l++) {
        free(allk[l]);
        free(allv[l]);
    }
    req_free(&r);
    env_close(&e);
}

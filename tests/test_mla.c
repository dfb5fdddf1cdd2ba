/*
 * tests/test_mla.c -- multi-head latent attention on the CPU: the absorbed
 * form (rkv_attn_mla_decode over the latent pool, W_UK folded into the
 * query, W_UV applied to o_latent here) against the explicit form with
 * per-head keys and values materialised from random up-projections
 * (tests/support/mla_ref.c, double precision) and against the K/V decode
 * of an MHA pool holding those materialised keys and values; the MLA pool
 * layout, its block copies and sizes; prefill against decode; and the
 * refusals (bad layouts, MLA on K/V calls and the reverse), which must
 * leave outputs and the pool untouched.
 *
 * Bounds: f32 everywhere 2e-4 relative to the head's largest |value| (the
 * absorbed form sums in a different order over R = 64..512 terms); lse
 * 1e-4 * (1 + |lse|). Seeds are printed; RKV_TEST_SEED replays a run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/mla_ref.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

static float *rnd(rkv_rng *rng, size_t n, float amp)
{
    float *p = malloc(n * sizeof(float));
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((rkv_rng_unit(rng) * 2.0 - 1.0) * amp);
    return p;
}

static rkv_pool *mla_pool(uint32_t nblocks, uint32_t P, uint32_t layers, uint32_t R,
                          uint32_t E, rkv_dtype dt)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = nblocks;
    pc.page_size = P;
    pc.num_layers = layers;
    pc.layout = RKV_LAYOUT_MLA;
    pc.kv_lora_rank = R;
    pc.qk_rope_dim = E;
    pc.dtype = dt;
    rkv_pool *pool = NULL;
    OK(rkv_pool_create(&pc, &pool));
    return pool;
}

static void max_err(const double *want, const double *got, uint32_t H, uint32_t D,
                    double tol, const char *what)
{
    for (uint32_t h = 0; h < H; h++) {
        double mag = 1e-6;
        for (uint32_t j = 0; j < D; j++)
            mag = fmax(mag, fabs(want[(size_t)h * D + j]));
        for (uint32_t j = 0; j < D; j++) {
            double e = fabs(want[(size_t)h * D + j] - got[(size_t)h * D + j]) / mag;
            cr_assert(e <= tol, "%s: head %u dim %u: want %g got %g (rel %g > %g)", what,
                      h, j, want[(size_t)h * D + j], got[(size_t)h * D + j], e, tol);
        }
    }
}

/* One request of T tokens on pages of P (shuffled block ids), layer 1 of 2:
 * absorbed MLA == explicit MLA (double) == K/V decode of the materialised
 * per-head keys and values (Dv == Dn + E so an MHA pool holds both). */
static void absorbed_vs_explicit(uint32_t T, uint32_t P, uint32_t H, uint32_t R,
                                 uint32_t Dn, uint32_t E)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("absorbed_vs_explicit"));
    const mla_dims d = {H, Dn, E, Dn + E, R};
    const uint32_t Dv = d.Dv, npages = (T + P - 1) / P, nblocks = npages + 3;
    float *W_UK = rnd(&rng, (size_t)H * Dn * R, 0.125f);
    float *W_UV = rnd(&rng, (size_t)H * Dv * R, 0.125f);
    float *c_kv = rnd(&rng, (size_t)T * R, 1.0f), *k_pe = rnd(&rng, (size_t)T * E, 1.0f);
    float *q_nope = rnd(&rng, (size_t)H * Dn, 1.0f), *q_pe = rnd(&rng, (size_t)H * E, 1.0f);
    const double scale = 1.0 / sqrt((double)(Dn + E));

    rkv_pool *pool = mla_pool(nblocks, P, 2, R, E, RKV_DTYPE_F32);
    rkv_attn *attn;
    OK(rkv_attn_create(pool, &attn));
    uint32_t *blocks = malloc(sizeof(uint32_t) * nblocks), *slots = malloc(sizeof(uint32_t) * T);
    OK(rkv_pool_alloc_n(pool, nblocks, blocks));
    for (uint32_t i = nblocks - 1; i > 0; i--) { /* pages out of order */
        uint32_t j = (uint32_t)rkv_rng_below(&rng, i + 1), x = blocks[i];
        blocks[i] = blocks[j];
        blocks[j] = x;
    }
    for (uint32_t t = 0; t < T; t++)
        slots[t] = blocks[t / P] * P + t % P;
    OK(rkv_attn_mla_append(attn, 1, T, slots, c_kv, k_pe));
    uint32_t indptr[2] = {0, npages}, last = T - (npages - 1) * P;
    rkv_paged_kv kv = {1, indptr, blocks, &last};

    float *q_lat = malloc(sizeof(float) * H * R), *o_lat = malloc(sizeof(float) * H * R);
    float lse[64];
    cr_assert(H <= 64);
    mla_absorb_q(&d, W_UK, q_nope, q_lat);
    rkv_mla_params mp = {1, H, (float)scale};
    OK(rkv_attn_mla_decode(attn, &mp, &kv, q_lat, q_pe, o_lat, lse));
    double *got = malloc(sizeof(double) * H * Dv), *want = malloc(sizeof(double) * H * Dv);
    double wlse[64];
    mla_up_v(&d, W_UV, o_lat, got);
    mla_explicit(&d, T, W_UK, W_UV, c_kv, k_pe, q_nope, q_pe, scale, want, wlse);
    max_err(want, got, H, Dv, 2e-4, "absorbed vs explicit");
    for (uint32_t h = 0; h < H; h++)
        cr_assert(fabs(lse[h] - wlse[h]) <= 1e-4 * (1 + fabs(wlse[h])),
                  "lse head %u: %g vs %g", h, lse[h], wlse[h]);

    /* the same keys and values materialised into an MHA pool, K/V decode */
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = nblocks;
    pc.page_size = P;
    pc.num_layers = 1;
    pc.num_kv_heads = H;
    pc.head_dim = Dv;
    pc.dtype = RKV_DTYPE_F32;
    rkv_pool *mha;
    rkv_attn *ma;
    OK(rkv_pool_create(&pc, &mha));
    OK(rkv_attn_create(mha, &ma));
    uint32_t *mb = malloc(sizeof(uint32_t) * nblocks);
    OK(rkv_pool_alloc_n(mha, nblocks, mb));
    float *k = malloc(sizeof(float) * T * H * Dv), *v = malloc(sizeof(float) * T * H * Dv);
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < H; h++) {
            float *kr = k + ((size_t)t * H + h) * Dv, *vr = v + ((size_t)t * H + h) * Dv;
            for (uint32_t i = 0; i < Dv; i++) {
                double x = 0, y = 0;
                for (uint32_t r = 0; r < R; r++) {
                    x += i < Dn ? (double)W_UK[((size_t)h * Dn + i) * R + r] * c_kv[(size_t)t * R + r] : 0;
                    y += (double)W_UV[((size_t)h * Dv + i) * R + r] * c_kv[(size_t)t * R + r];
                }
                kr[i] = i < Dn ? (float)x : k_pe[(size_t)t * E + i - Dn];
                vr[i] = (float)y;
            }
        }
    OK(rkv_attn_append(ma, 0, T, slots, k, v));
    float *q = malloc(sizeof(float) * H * Dv), *o = malloc(sizeof(float) * H * Dv);
    for (uint32_t h = 0; h < H; h++)
        for (uint32_t i = 0; i < Dv; i++)
            q[(size_t)h * Dv + i] = i < Dn ? q_nope[(size_t)h * Dn + i] : q_pe[(size_t)h * E + i - Dn];
    rkv_attn_params ap = {0, H, (float)scale, 0, 0};
    OK(rkv_attn_decode(ma, &ap, &kv, q, o, NULL));
    for (size_t i = 0; i < (size_t)H * Dv; i++)
        got[i] = o[i];
    max_err(want, got, H, Dv, 2e-4, "explicit K/V decode vs explicit reference");

    free(q); free(o); free(k); free(v); free(mb);
    rkv_attn_destroy(ma);
    rkv_pool_destroy(mha);
    free(got); free(want); free(q_lat); free(o_lat); free(blocks); free(slots);
    free(W_UK); free(W_UV); free(c_kv); free(k_pe); free(q_nope); free(q_pe);
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
}

Test(mla, absorbed_equals_explicit_page64)
{
    absorbed_vs_explicit(200, 64, 8, 128, 32, 16);
}

Test(mla, absorbed_equals_explicit_deepseek_widths)
{
    /* DeepSeek-V3's latent and RoPE widths (512 + 64), 4 heads, page 64 */
    absorbed_vs_explicit(130, 64, 4, 512, 64, 64);
}

Test(mla, absorbed_equals_explicit_small_pages)
{
    absorbed_vs_explicit(37, 1, 3, 64, 16, 8);
    absorbed_vs_explicit(37, 16, 5, 64, 16, 8);
}

/* The pool: sizes, reported shape, planes, block copies through a host
 * buffer in the documented format. */
Test(mla, pool_layout_and_copies)
{
    const uint32_t P = 64, R = 512, E = 64, L = 3;
    rkv_pool *pool = mla_pool(4, P, L, R, E, RKV_DTYPE_BF16);
    cr_assert_eq(rkv_pool_bytes_per_block(pool), (size_t)L * P * (R + E) * 2);
    rkv_pool_config c;
    OK(rkv_pool_get_config(pool, &c));
    cr_assert_eq(c.layout, RKV_LAYOUT_MLA);
    cr_assert_eq(c.num_kv_heads, 1u);
    cr_assert_eq(c.head_dim, R + E);
    cr_assert_eq(rkv_pool_config_bytes_per_token(&c), (size_t)L * (R + E) * 2);
    void *k = NULL, *v = (void *)1;
    OK(rkv_pool_layer_kv(pool, 2, &k, &v));
    cr_assert_not_null(k);
    cr_assert_null(v);
    size_t bs, ts, hs;
    OK(rkv_pool_kv_strides(pool, &bs, &ts, &hs));
    cr_assert_eq(ts, (size_t)(R + E) * 2);
    cr_assert_eq(bs, (size_t)P * (R + E) * 2);

    rkv_attn *attn;
    OK(rkv_attn_create(pool, &attn));
    uint32_t b[2];
    OK(rkv_pool_alloc_n(pool, 2, b));
    uint16_t *ckv = malloc(2 * P * R * 2), *kpe = malloc(2 * P * E * 2);
    for (size_t i = 0; i < 2 * P * R; i++)
        ckv[i] = rkv_f32_to_bf16((float)i);
    for (size_t i = 0; i < 2 * P * E; i++)
        kpe[i] = rkv_f32_to_bf16(-(float)i);
    uint32_t slots[2 * 64];
    for (uint32_t t = 0; t < P; t++)
        slots[t] = b[0] * P + t;
    for (uint32_t l = 0; l < L; l++)
        OK(rkv_attn_mla_append(attn, l, P, slots, ckv, kpe));
    size_t bpb = rkv_pool_bytes_per_block(pool);
    uint16_t *host = malloc(bpb);
    OK(rkv_pool_copy_to_host(pool, 1, &b[0], host));
    /* host: latent[0], latent[1], ... each [P][R + E], c_kv then k_pe */
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t t = 0; t < P; t++) {
            const uint16_t *row = host + ((size_t)l * P + t) * (R + E);
            cr_assert_eq(row[0], ckv[(size_t)t * R]);
            cr_assert_eq(row[R - 1], ckv[(size_t)t * R + R - 1]);
            cr_assert_eq(row[R], kpe[(size_t)t * E]);
            cr_assert_eq(row[R + E - 1], kpe[(size_t)t * E + E - 1]);
        }
    OK(rkv_pool_copy_blocks(pool, 1, &b[0], &b[1]));
    uint16_t *host2 = malloc(bpb);
    OK(rkv_pool_copy_to_host(pool, 1, &b[1], host2));
    cr_assert_eq(memcmp(host, host2, bpb), 0);
    memset(host2, 0, bpb);
    OK(rkv_pool_copy_from_host(pool, 1, &b[1], host2));
    OK(rkv_pool_copy_to_host(pool, 1, &b[1], host));
    cr_assert_eq(memcmp(host, host2, bpb), 0);
    OK(rkv_pool_check(pool));
    free(host); free(host2); free(ckv); free(kpe);
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
}

Test(mla, bytes_per_token)
{
    rkv_pool_config c;
    rkv_pool_config_init(&c);
    c.num_blocks = 1;
    c.num_layers = 61;
    c.layout = RKV_LAYOUT_MLA;
    c.kv_lora_rank = 512;
    c.qk_rope_dim = 64;
    c.dtype = RKV_DTYPE_BF16;
    cr_assert_eq(rkv_pool_config_bytes_per_token(&c), (size_t)61 * 576 * 2);
    c.layout = RKV_LAYOUT_MHA;
    c.num_layers = 32;
    c.num_kv_heads = 8;
    c.head_dim = 128;
    cr_assert_eq(rkv_pool_config_bytes_per_token(&c), (size_t)2 * 32 * 8 * 128 * 2);
    c.num_layers = 0;
    cr_assert_eq(rkv_pool_config_bytes_per_token(&c), 0u);
    c.num_layers = 2;
    c.layout = RKV_LAYOUT_MLA;
    c.qk_rope_dim = 0;
    cr_assert_eq(rkv_pool_config_bytes_per_token(&c), 0u);
    cr_assert_eq(rkv_pool_config_bytes_per_token(NULL), 0u);
}

Test(mla, bad_configs_refused)
{
    rkv_pool_config c;
    rkv_pool_config_init(&c);
    c.num_blocks = 4;
    c.num_layers = 1;
    c.layout = RKV_LAYOUT_MLA;
    c.kv_lora_rank = 0;
    c.qk_rope_dim = 64;
    rkv_pool *p = NULL;
    cr_assert_eq(rkv_pool_create(&c, &p), RKV_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(rkv_last_error(), "kv_lora_rank 0"), "%s", rkv_last_error());
    cr_assert_null(p);
    c.kv_lora_rank = 512;
    c.qk_rope_dim = 0;
    cr_assert_eq(rkv_pool_create(&c, &p), RKV_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(rkv_last_error(), "qk_rope_dim 0"), "%s", rkv_last_error());
    c.qk_rope_dim = 64;
    c.layout = (rkv_kv_layout)7;
    cr_assert_eq(rkv_pool_create(&c, &p), RKV_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(rkv_last_error(), "layout 7"), "%s", rkv_last_error());
    /* server-owned MLA buffers */
    c.layout = RKV_LAYOUT_MLA;
    void *kb[1] = {malloc(4 * 16 * 576 * 2)}, *vb[1] = {kb[0]};
    rkv_kv_buffers kv = {kb, vb, 16 * 576 * 2, 576 * 2, 576 * 2};
    cr_assert_eq(rkv_pool_create_external(&c, &kv, &p), RKV_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(rkv_last_error(), "MLA"), "%s", rkv_last_error());
    cr_assert_null(p);
    free(kb[0]);
    /* an MHA pool with MLA widths set ignores them */
    c.layout = RKV_LAYOUT_MHA;
    c.num_kv_heads = 2;
    c.head_dim = 8;
    OK(rkv_pool_create(&c, &p));
    rkv_pool_config got;
    OK(rkv_pool_get_config(p, &got));
    cr_assert_eq(got.kv_lora_rank, 0u);
    cr_assert_eq(rkv_pool_bytes_per_block(p), (size_t)2 * 16 * 2 * 8 * 2);
    rkv_pool_destroy(p);
}

/* MLA calls on a K/V pool and K/V calls on an MLA pool are refused, and a
 * refused or invalid call writes nothing. */
Test(mla, wrong_layout_and_bad_args_change_nothing)
{
    const uint32_t P = 16, R = 64, E = 16, H = 2;
    rkv_pool *pool = mla_pool(4, P, 1, R, E, RKV_DTYPE_F16);
    rkv_attn *attn;
    OK(rkv_attn_create(pool, &attn));
    uint32_t blk;
    OK(rkv_pool_alloc(pool, &blk));
    uint16_t ckv[16 * 64] = {0}, kpe[16 * 16] = {0}, q[2 * 64] = {0}, qp[2 * 16] = {0};
    uint16_t out[2 * 64];
    float lse[2];
    uint32_t slots[16];
    for (uint32_t t = 0; t < P; t++)
        slots[t] = blk * P + t;
    OK(rkv_attn_mla_append(attn, 0, P, slots, ckv, kpe));
    uint32_t indptr[2] = {0, 1}, last = P;
    rkv_paged_kv kv = {1, indptr, &blk, &last};
    rkv_attn_params ap = {0, 2, 0.0f, 0, 0};
    cr_assert_eq(rkv_attn_decode(attn, &ap, &kv, q, out, NULL), RKV_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(rkv_last_error(), "MLA layout"), "%s", rkv_last_error());
    cr_assert_eq(rkv_attn_append(attn, 0, 1, slots, ckv, ckv), RKV_ERR_UNSUPPORTED);
    cr_assert_eq(rkv_attn_prefill(attn, &ap, indptr, &kv, q, out, NULL), RKV_ERR_UNSUPPORTED);
    cr_assert_eq(rkv_attn_merge(attn, 1, q, lse, q, lse, out, NULL), RKV_ERR_UNSUPPORTED);
    size_t ws;
    cr_assert_eq(rkv_attn_plan_workspace_size(attn, 2, NULL, &kv, &ws), RKV_ERR_UNSUPPORTED);

    memset(out, 0x5a, sizeof out);
    rkv_mla_params mp = {0, H, 0.0f};
    cr_assert_eq(rkv_attn_mla_decode(attn, &mp, &kv, q, qp, out, lse), RKV_ERR_INVALID_ARG);
    cr_assert_not_null(strstr(rkv_last_error(), "sm_scale"), "%s", rkv_last_error());
    mp.sm_scale = 0.1f;
    mp.layer = 1;
    cr_assert_eq(rkv_attn_mla_decode(attn, &mp, &kv, q, qp, out, lse), RKV_ERR_INVALID_ARG);
    mp.layer = 0;
    mp.num_heads = 0;
    cr_assert_eq(rkv_attn_mla_decode(attn, &mp, &kv, q, qp, out, lse), RKV_ERR_INVALID_ARG);
    mp.num_heads = H;
    last = P + 1;
    cr_assert_eq(rkv_attn_mla_decode(attn, &mp, &kv, q, qp, out, lse), RKV_ERR_INVALID_ARG);
    last = P;
    cr_assert_eq(rkv_attn_mla_decode(attn, &mp, &kv, q, NULL, out, lse), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_attn_mla_prefill(attn, &mp, NULL, &kv, q, qp, out, lse),
                 RKV_ERR_INVALID_ARG);
    for (size_t i = 0; i < sizeof out / 2; i++)
        cr_assert_eq(out[i], 0x5a5a);
    uint32_t dup[2] = {slots[0], slots[0]};
    cr_assert_eq(rkv_attn_mla_append(attn, 0, 2, dup, ckv, kpe), RKV_ERR_INVALID_ARG);
    uint32_t free_slot = (blk + 1) * P;
    cr_assert_eq(rkv_attn_mla_append(attn, 0, 1, &free_slot, ckv, kpe), RKV_ERR_INVALID_ARG);
    OK(rkv_attn_mla_decode(attn, &mp, &kv, q, qp, out, lse));
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);

    /* an MLA call on a K/V pool */
    rkv_pool_config c;
    rkv_pool_config_init(&c);
    c.num_blocks = 2;
    c.num_layers = 1;
    c.num_kv_heads = 1;
    c.head_dim = 80;
    OK(rkv_pool_create(&c, &pool));
    OK(rkv_attn_create(pool, &attn));
    cr_assert_eq(rkv_attn_mla_append(attn, 0, 1, slots, ckv, kpe), RKV_ERR_UNSUPPORTED);
    cr_assert_eq(rkv_attn_mla_decode(attn, &mp, &kv, q, qp, out, lse), RKV_ERR_UNSUPPORTED);
    cr_assert_not_null(strstr(rkv_last_error(), "RKV_LAYOUT_MLA"), "%s", rkv_last_error());
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
}

/* Prefill row i of a request equals a decode over its first kv_len - q_len
 * + i + 1 tokens (causal), over two requests sharing nothing. */
Test(mla, prefill_matches_decode_prefixes)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("mla_prefill"));
    const uint32_t P = 64, R = 64, E = 16, H = 3, T0 = 100, T1 = 70, Q0 = 5, Q1 = 3;
    rkv_pool *pool = mla_pool(8, P, 1, R, E, RKV_DTYPE_F32);
    rkv_attn *attn;
    OK(rkv_attn_create(pool, &attn));
    uint32_t b[4];
    OK(rkv_pool_alloc_n(pool, 4, b));
    uint32_t slots[170];
    for (uint32_t t = 0; t < T0; t++)
        slots[t] = b[t / P] * P + t % P;
    for (uint32_t t = 0; t < T1; t++)
        slots[T0 + t] = b[2 + t / P] * P + t % P;
    float *ckv = rnd(&rng, 170 * R, 1.0f), *kpe = rnd(&rng, 170 * E, 1.0f);
    OK(rkv_attn_mla_append(attn, 0, T0 + T1, slots, ckv, kpe));
    float *ql = rnd(&rng, (Q0 + Q1) * H * R, 1.0f), *qp = rnd(&rng, (Q0 + Q1) * H * E, 1.0f);
    float out[8 * 3 * 64], lse[8 * 3], o1[3 * 64], l1[3];
    uint32_t indptr[3] = {0, 2, 4}, last[2] = {T0 - P, T1 - P}, qo[3] = {0, Q0, Q0 + Q1};
    rkv_paged_kv kv = {2, indptr, b, last};
    rkv_mla_params mp = {0, H, 0.125f};
    OK(rkv_attn_mla_prefill(attn, &mp, qo, &kv, ql, qp, out, lse));
    for (uint32_t row = 0; row < Q0 + Q1; row++) {
        uint32_t req = row < Q0 ? 0 : 1, T = req ? T1 : T0, Q = req ? Q1 : Q0;
        uint32_t len = T - Q + (row - qo[req]) + 1;
        uint32_t ip[2] = {0, (len + P - 1) / P}, lp = len - (ip[1] - 1) * P;
        rkv_paged_kv one = {1, ip, b + 2 * req, &lp};
        OK(rkv_attn_mla_decode(attn, &mp, &one, ql + (size_t)row * H * R,
                               qp + (size_t)row * H * E, o1, l1));
        cr_assert_eq(memcmp(o1, out + (size_t)row * H * R, sizeof(float) * H * R), 0,
                     "row %u", row);
        cr_assert_eq(memcmp(l1, lse + (size_t)row * H, sizeof(float) * H), 0);
    }
    free(ckv); free(kpe); free(ql); free(qp);
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
}

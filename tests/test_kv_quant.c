/*
 * tests/test_kv_quant.c -- quantized KV pools (FP8 E4M3 / E5M2, INT8,
 * INT4): the FP8 codecs against a brute-force reference, the configuration
 * rules and size formulas, and append + attention on host pools.
 *
 * Independence: FP8 codes are decoded here by their definition (sign,
 * exponent, mantissa, ldexp) and encoding is checked against the nearest
 * of all 256 codes (ties to the even code), never against the library's
 * own functions. The pool's codes and scales are read back through the
 * layout radixkv/pool.h documents and decoded here.
 *
 * Error bounds come from each format's precision, for a row whose scale
 * is s = absmax / qmax (per element, before f32 rounding slack):
 *   INT8  s / 2          INT4  s_group / 2
 *   E4M3  max(|x| 2^-4, s 2^-10)   (3 mantissa bits; subnormal step s 2^-9)
 *   E5M2  max(|x| 2^-3, s 2^-17)   (2 mantissa bits; subnormal step s 2^-16)
 * and attention output, with dk, dv the largest K/V errors of a row's keys
 * and d = sm_scale * sum_d |q_d| * dk: |o - o_ref| <= (e^(2d) - 1) max|v|
 * + dv (softmax weights move by at most e^(+-2d) each).
 * Seeds are printed; RKV_TEST_SEED replays a run.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention/kv_codec.h"
#include "radixkv.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

/* ---- FP8 by definition -------------------------------------------------- */

typedef struct fp8fmt {
    int mb, bias, e4m3;
    double max;
} fp8fmt;

static const fp8fmt E4M3 = {3, 7, 1, 448.0}, E5M2 = {2, 15, 0, 57344.0};

/* NAN / INFINITY for the non-finite codes. */
static double fp8_value(const fp8fmt *f, unsigned c)
{
    int sign = (c >> 7) & 1, e = (int)((c & 0x7f) >> f->mb);
    int m = (int)(c & ((1u << f->mb) - 1));
    int emax = (int)(0x7fu >> f->mb);
    double v;
    if (f->e4m3 && (c & 0x7f) == 0x7f)
        return NAN;
    if (!f->e4m3 && e == emax)
        return m ? NAN : (sign ? -INFINITY : INFINITY);
    if (e == 0)
        v = ldexp((double)m, 1 - f->bias - f->mb);
    else
        v = ldexp(1.0 + ldexp((double)m, -f->mb), e - f->bias);
    return sign ? -v : v;
}

/* Nearest finite code to x, ties to the even code, saturating. */
static unsigned fp8_nearest(const fp8fmt *f, double x)
{
    x = fmin(fmax(x, -f->max), f->max);
    unsigned best = 0;
    double bd = INFINITY;
    for (unsigned c = 0; c < 256; c++) {
        double v = fp8_value(f, c);
        if (!isfinite(v) || (v == 0.0 && signbit(v) != signbit(x)))
            continue;
        double d = fabs(v - x);
        if (d < bd || (d == bd && (c & 1) == 0 && (best & 1) == 1)) {
            bd = d;
            best = c;
        }
    }
    return best;
}

/* ---- a quantized host pool ---------------------------------------------- */

static rkv_status make_pool(rkv_dtype dt, uint32_t D, uint32_t group, uint32_t H,
                            uint32_t P, uint32_t nblocks, rkv_pool **out)
{
    rkv_pool_config pc = tu_quant_config(nblocks, P, 2, H, D, dt, group, RKV_DTYPE_F32);
    return rkv_pool_create(&pc, out);
}

static int code_bytes(rkv_dtype dt, uint32_t D) { return dt == RKV_DTYPE_INT4 ? (int)D / 2 : (int)D; }
static uint32_t nscales(rkv_dtype dt, uint32_t D, uint32_t g) { return dt == RKV_DTYPE_INT4 ? D / g : 1; }
static double qmax(rkv_dtype dt)
{
    return dt == RKV_DTYPE_FP8_E4M3 ? 448.0 : dt == RKV_DTYPE_FP8_E5M2 ? 57344.0
           : dt == RKV_DTYPE_INT8 ? 127.0 : 7.0;
}

/* Element d of (block b, token t, head h) of a segment base, decoded here
 * from the documented layout; *scale gets its scale. */
static double read_back(rkv_dtype dt, uint32_t D, uint32_t g, uint32_t H, uint32_t P,
                        const char *seg, uint32_t b, uint32_t t, uint32_t h, uint32_t d,
                        double *scale)
{
    size_t cb = (size_t)code_bytes(dt, D), ns = nscales(dt, D, g);
    size_t blk = (size_t)P * H * (cb + 4 * ns);
    const unsigned char *codes = (const unsigned char *)seg + b * blk + ((size_t)t * H + h) * cb;
    const char *sp = seg + b * blk + (size_t)P * H * cb + ((size_t)t * H + h) * ns * 4;
    float s;
    memcpy(&s, sp + (dt == RKV_DTYPE_INT4 ? d / g : 0) * 4, 4);
    *scale = s;
    switch (dt) {
    case RKV_DTYPE_FP8_E4M3: return fp8_value(&E4M3, codes[d]) * s;
    case RKV_DTYPE_FP8_E5M2: return fp8_value(&E5M2, codes[d]) * s;
    case RKV_DTYPE_INT8: return (double)(signed char)codes[d] * s;
    default: {
        int v = (codes[d / 2] >> ((d & 1) * 4)) & 0xf;
        return (double)(v >= 8 ? v - 16 : v) * s;
    }
    }
}

static double elem_bound(rkv_dtype dt, double x, double s)
{
    double b;
    switch (dt) {
    case RKV_DTYPE_FP8_E4M3: b = fmax(fabs(x) * 0x1p-4, s * 0x1p-10); break;
    case RKV_DTYPE_FP8_E5M2: b = fmax(fabs(x) * 0x1p-3, s * 0x1p-17); break;
    default: b = s / 2; break;
    }
    return b * (1 + 1e-5) + fabs(x) * 1e-6 + 1e-30; /* f32 rounding slack */
}

/* Random values in [-1, 1); outliers: a few channels x 40 and rare x 1000. */
static void fill_kv(rkv_rng *rng, float *x, size_t n, uint32_t D, int outliers)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)(rkv_rng_unit(rng) * 2.0 - 1.0);
        if (outliers && (i % D) % 17 == 3)
            v *= 40.0f;
        if (outliers && rkv_rng_below(rng, 200) == 0)
            v *= 1000.0f;
        x[i] = v;
    }
}

static const rkv_dtype QDT[4] = {RKV_DTYPE_FP8_E4M3, RKV_DTYPE_FP8_E5M2, RKV_DTYPE_INT8,
                                 RKV_DTYPE_INT4};

/* ---- tests ----------------------------------------------------------------- */

Test(kv_quant, fp8_codes_by_brute_force)
{
    uint64_t seed = rkv_test_seed("kv_quant::fp8_codes_by_brute_force");
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    /* E4M3 through a pool: write a row, read the codes back. A row whose
     * absmax is 448 has scale exactly 1, so codes are the values' own. */
    const fp8fmt *fm[2] = {&E4M3, &E5M2};
    const rkv_dtype dts[2] = {RKV_DTYPE_FP8_E4M3, RKV_DTYPE_FP8_E5M2};
    for (int fi = 0; fi < 2; fi++) {
        const uint32_t D = 64;
        rkv_pool *pool;
        OK(make_pool(dts[fi], D, 32, 1, 1, 1, &pool));
        rkv_attn *attn;
        OK(rkv_attn_create(pool, &attn));
        rkv_block_id b;
        OK(rkv_pool_alloc(pool, &b));
        float k[64], v[64];
        for (int round = 0; round < 200; round++) {
            k[0] = (float)fm[fi]->max; /* scale 1 */
            for (uint32_t d = 1; d < D; d++) {
                double x;
                switch (rkv_rng_below(&rng, 4)) {
                case 0: /* a code's value or a midpoint between two */
                {
                    unsigned c = (unsigned)rkv_rng_below(&rng, 256), c2 = c ^ 1u;
                    double a = fp8_value(fm[fi], c), bb = fp8_value(fm[fi], c2);
                    x = rkv_rng_below(&rng, 2) && isfinite(a) && isfinite(bb) ? (a + bb) / 2 : a;
                    if (!isfinite(x))
                        x = 0.5;
                    break;
                }
                case 1: x = ldexp(rkv_rng_unit(&rng) - 0.5, -(int)rkv_rng_below(&rng, 24)); break;
                case 2: x = (rkv_rng_unit(&rng) - 0.5) * 2 * fm[fi]->max; break;
                default: x = (rkv_rng_unit(&rng) - 0.5) * 4; break;
                }
                k[d] = (float)x;
                v[d] = 0.0f;
            }
            v[0] = 1.0f;
            uint32_t slot = b * 1;
            OK(rkv_attn_append(attn, 0, 1, &slot, k, v));
            void *kb;
            OK(rkv_pool_layer_kv(pool, 0, &kb, NULL));
            float s;
            memcpy(&s, (char *)kb + D, 4);
            cr_assert_eq(s, 1.0f, "scale %g", (double)s);
            for (uint32_t d = 0; d < D; d++) {
                unsigned got = ((unsigned char *)kb)[d];
                unsigned want = fp8_nearest(fm[fi], (double)k[d]);
                /* +0 and -0 both decode to zero: compare values there */
                if (fp8_value(fm[fi], got) == 0.0 && fp8_value(fm[fi], want) == 0.0)
                    continue;
                cr_assert_eq(got, want, "fmt %d: x=%a -> code 0x%02x (%g), want 0x%02x (%g)",
                             fi, (double)k[d], got, fp8_value(fm[fi], got), want,
                             fp8_value(fm[fi], want));
            }
        }
        rkv_attn_destroy(attn);
        rkv_pool_destroy(pool);
    }
}

/* Values a scaled row never produces but the codecs define: overflow,
 * infinity, NaN, signed zero; and every code decodes to its definition. */
Test(kv_quant, fp8_special_values)
{
    for (unsigned c = 0; c < 256; c++) {
        double w4 = fp8_value(&E4M3, c), w5 = fp8_value(&E5M2, c);
        float g4 = rkv_kvq_e4m3_dec((uint8_t)c), g5 = rkv_kvq_e5m2_dec((uint8_t)c);
        cr_assert(isnan(w4) ? isnan(g4) : (double)g4 == w4, "e4m3 0x%02x: %g vs %g", c,
                  (double)g4, w4);
        cr_assert(isnan(w5) ? isnan(g5) : (double)g5 == w5, "e5m2 0x%02x: %g vs %g", c,
                  (double)g5, w5);
    }
    cr_assert_eq(rkv_kvq_e4m3_enc(1e6f), 0x7e);       /* saturates to 448 */
    cr_assert_eq(rkv_kvq_e4m3_enc(-INFINITY), 0xfe);  /* no infinity in E4M3 */
    cr_assert_eq(rkv_kvq_e4m3_enc(464.0f), 0x7e);     /* above 448: saturates */
    cr_assert_eq(rkv_kvq_e5m2_enc(1e6f), 0x7b);       /* finite: 57344 */
    cr_assert_eq(rkv_kvq_e5m2_enc(INFINITY), 0x7c);   /* IEEE-like infinity */
    cr_assert_eq(rkv_kvq_e5m2_enc(-INFINITY), 0xfc);
    cr_assert(isnan(rkv_kvq_e4m3_dec(rkv_kvq_e4m3_enc(NAN))));
    cr_assert(isnan(rkv_kvq_e5m2_dec(rkv_kvq_e5m2_enc(NAN))));
    cr_assert_eq(rkv_kvq_e4m3_enc(-0.0f), 0x80);
    cr_assert_eq(rkv_kvq_e4m3_enc(0x1p-10f), 0x00);   /* half the smallest: even */
    cr_assert_eq(rkv_kvq_e4m3_enc(0x1.8p-10f), 0x01); /* 0.75 of it: rounds up */
    /* INT codes clamp and round half to even */
    cr_assert_eq(rkv_kvq_int_enc(2.5f, 1.0f, 7), 2);
    cr_assert_eq(rkv_kvq_int_enc(-3.5f, 1.0f, 7), -4);
    cr_assert_eq(rkv_kvq_int_enc(100.0f, 1.0f, 7), 7);
    cr_assert_eq(rkv_kvq_int_enc(NAN, 1.0f, 127), 0);
}

Test(kv_quant, bad_configs_refused_with_reason)
{
    rkv_pool *p = NULL;
    struct { rkv_dtype dt; uint32_t D, g; const char *why; } bad[] = {
        {RKV_DTYPE_INT4, 64, 24, "quant_group"},  /* does not divide 64 */
        {RKV_DTYPE_INT4, 64, 3, "quant_group"},   /* odd */
        {RKV_DTYPE_INT4, 64, 0, "quant_group"},
        {RKV_DTYPE_INT4, 60, 30, "multiple of 8"}, /* odd bytes of codes */
        {RKV_DTYPE_INT8, 30, 32, "multiple of 4"},
        {RKV_DTYPE_FP8_E4M3, 6, 32, "multiple of 4"},
        {(rkv_dtype)99, 64, 32, "dtype"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(make_pool(bad[i].dt, bad[i].D, bad[i].g, 2, 16, 4, &p),
                     RKV_ERR_INVALID_ARG, "case %zu", i);
        cr_assert_null(p);
        cr_assert(strstr(rkv_last_error(), bad[i].why) != NULL, "case %zu: %s", i,
                  rkv_last_error());
    }
    rkv_pool_config pc = tu_kv_config(4, 0, 1, 1, 64, RKV_DEVICE_HOST);
    pc.dtype = RKV_DTYPE_INT8;
    pc.act_dtype = RKV_DTYPE_INT4;
    cr_assert_eq(rkv_pool_create(&pc, &p), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "act_dtype") != NULL, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_config_bytes_per_token(&pc), 0);
    /* server-owned buffers are never quantized */
    pc.act_dtype = RKV_DTYPE_BF16;
    static char buf[4 * 16 * 64];
    void *kv[1] = {buf};
    rkv_kv_buffers kb = {kv, kv, 16 * 64, 64, 64};
    cr_assert_eq(rkv_pool_create_external(&pc, &kb, &p), RKV_ERR_UNSUPPORTED);
}

Test(kv_quant, sizes_follow_the_formula)
{
    const uint32_t L = 3, H = 4, P = 16, D = 128;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 8;
    pc.page_size = P;
    pc.num_layers = L;
    pc.num_kv_heads = H;
    pc.head_dim = D;
    struct { rkv_dtype dt; uint32_t g; size_t row; } c[] = {
        {RKV_DTYPE_BF16, 32, 256},          {RKV_DTYPE_F32, 32, 512},
        {RKV_DTYPE_FP8_E4M3, 32, 128 + 4},  {RKV_DTYPE_FP8_E5M2, 32, 128 + 4},
        {RKV_DTYPE_INT8, 32, 128 + 4},      {RKV_DTYPE_INT4, 32, 64 + 16},
        {RKV_DTYPE_INT4, 128, 64 + 4},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        pc.dtype = c[i].dt;
        pc.quant_group = c[i].g;
        cr_assert_eq(rkv_pool_config_row_bytes(&pc), c[i].row, "case %zu", i);
        cr_assert_eq(rkv_pool_config_bytes_per_token(&pc), c[i].row * 2 * L * H, "case %zu", i);
        rkv_pool *p;
        OK(rkv_pool_create(&pc, &p));
        cr_assert_eq(rkv_pool_bytes_per_block(p), c[i].row * 2 * L * H * P);
        size_t bs, ts, hs;
        OK(rkv_pool_kv_strides(p, &bs, &ts, &hs));
        cr_assert_eq(bs, c[i].row * H * P);
        rkv_pool_destroy(p);
    }
    /* the capacity the command's cost model relies on: 8 bits ~2x, 4 ~3-4x */
    pc.dtype = RKV_DTYPE_BF16;
    size_t bf = rkv_pool_config_bytes_per_token(&pc);
    pc.dtype = RKV_DTYPE_INT8;
    cr_assert(bf > 19 * rkv_pool_config_bytes_per_token(&pc) / 10);
    pc.dtype = RKV_DTYPE_INT4;
    pc.quant_group = 32;
    cr_assert(bf >= 3 * rkv_pool_config_bytes_per_token(&pc));
    pc.num_layers = 0;
    cr_assert_eq(rkv_pool_config_bytes_per_token(&pc), 0);
}

/* A disk store's warm restart accepts records only under the same layout
 * id: two formats of the same size (INT8 and FP8 rows are alike in
 * bytes) or INT4 groups must not read each other's records. */
Test(kv_quant, warm_restart_layout_ids_tell_formats_apart)
{
    struct { rkv_dtype dt; uint32_t g; } c[] = {
        {RKV_DTYPE_BF16, 32}, {RKV_DTYPE_FP8_E4M3, 32}, {RKV_DTYPE_FP8_E5M2, 32},
        {RKV_DTYPE_INT8, 32}, {RKV_DTYPE_INT4, 32},     {RKV_DTYPE_INT4, 16},
    };
    uint64_t id[6];
    for (size_t i = 0; i < 6; i++) {
        rkv_pool *p;
        OK(make_pool(c[i].dt, 64, c[i].g, 2, 16, 2, &p));
        id[i] = rkv_pool_layout_id(p);
        rkv_pool_destroy(p);
        for (size_t j = 0; j < i; j++)
            cr_assert_neq(id[i], id[j], "formats %zu and %zu share a layout id", i, j);
    }
}

/* f64 attention of one query row over n keys (all visible). */
static void ref_attn(const double *q, const double *k, const double *v, uint32_t n,
                     uint32_t D, double scale, double *o)
{
    double *s = malloc(n * sizeof *s), mx = -INFINITY, l = 0;
    cr_assert_not_null(s);
    for (uint32_t t = 0; t < n; t++) {
        double a = 0;
        for (uint32_t d = 0; d < D; d++)
            a += q[d] * k[(size_t)t * D + d];
        s[t] = a * scale;
        mx = fmax(mx, s[t]);
    }
    for (uint32_t d = 0; d < D; d++)
        o[d] = 0;
    for (uint32_t t = 0; t < n; t++) {
        double p = exp(s[t] - mx);
        l += p;
        for (uint32_t d = 0; d < D; d++)
            o[d] += p * v[(size_t)t * D + d];
    }
    for (uint32_t d = 0; d < D; d++)
        o[d] /= l;
    free(s);
}

/* Appends random K/V to one request of npages pages, checks every element
 * against its format bound (read back through the documented layout),
 * then decode attention against (a) f64 attention over the dequantized
 * values (the reference must read exactly these codes) and (b) f64
 * attention over the original values, within the derived bound. */
static void accuracy_case(rkv_dtype dt, uint32_t group, int outliers, rkv_rng *rng)
{
    const uint32_t D = 64, H = 2, G = 2, Hq = H * G, P = 16, npages = 5;
    const uint32_t n = npages * P - 7;
    rkv_pool *pool;
    OK(make_pool(dt, D, group, H, P, npages + 2, &pool));
    rkv_attn *attn;
    OK(rkv_attn_create(pool, &attn));
    rkv_block_id junk, pages[5];
    OK(rkv_pool_alloc(pool, &junk)); /* pages do not start at block 0 */
    OK(rkv_pool_alloc_n(pool, npages, pages));
    uint32_t *slots = malloc(n * sizeof *slots);
    float *k = malloc((size_t)n * H * D * 4), *v = malloc((size_t)n * H * D * 4);
    double *kd = malloc((size_t)n * H * D * 8), *vd = malloc((size_t)n * H * D * 8);
    double *ek = calloc(n, 8), *ev = calloc(n, 8);
    cr_assert(slots && k && v && kd && vd && ek && ev);
    for (uint32_t t = 0; t < n; t++)
        slots[t] = pages[t / P] * P + t % P;
    fill_kv(rng, k, (size_t)n * H * D, D, outliers);
    fill_kv(rng, v, (size_t)n * H * D, D, outliers);
    OK(rkv_attn_append(attn, 1, n, slots, k, v));
    void *kb, *vb;
    OK(rkv_pool_layer_kv(pool, 1, &kb, &vb));
    for (int s = 0; s < 2; s++) {
        const float *x = s ? v : k;
        double *xd = s ? vd : kd, *e = s ? ev : ek;
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t h = 0; h < H; h++) {
                double amax = 0;
                for (uint32_t d = 0; d < D; d++)
                    amax = fmax(amax, fabs(x[((size_t)t * H + h) * D + d]));
                for (uint32_t d = 0; d < D; d++) {
                    size_t i = ((size_t)t * H + h) * D + d;
                    double sc;
                    xd[i] = read_back(dt, D, group, H, P, s ? vb : kb, pages[t / P],
                                      t % P, h, d, &sc);
                    if (dt != RKV_DTYPE_INT4)
                        cr_assert_float_eq(sc, (double)(float)(amax / qmax(dt)),
                                           fabs(sc) * 1e-6 + 1e-30, "row scale");
                    double err = fabs(xd[i] - x[i]), b = elem_bound(dt, x[i], sc);
                    cr_assert(err <= b, "dtype %d %s t=%u h=%u d=%u: %g -> %g (err %g > %g)",
                              (int)dt, s ? "V" : "K", t, h, d, (double)x[i], xd[i], err, b);
                    e[t] = fmax(e[t], err);
                }
            }
    }
    /* decode over the whole request */
    float *q = malloc((size_t)Hq * D * 4), *out = malloc((size_t)Hq * D * 4);
    cr_assert(q && out);
    for (size_t i = 0; i < (size_t)Hq * D; i++)
        q[i] = (float)(rkv_rng_unit(rng) * 2.0 - 1.0);
    uint32_t indptr[2] = {0, npages}, last = n - (npages - 1) * P;
    rkv_paged_kv tab = {1, indptr, pages, &last};
    rkv_attn_params p = {1, Hq, 0.0f, 0, 0};
    OK(rkv_attn_decode(attn, &p, &tab, q, out, NULL));
    double scale = 1.0 / sqrt((double)D);
    double *qd = malloc(D * 8), *kh = malloc((size_t)n * D * 8), *vh = malloc((size_t)n * D * 8);
    double *kq = malloc((size_t)n * D * 8), *vq = malloc((size_t)n * D * 8);
    double o_q[64], o_f[64];
    cr_assert(qd && kh && vh && kq && vq);
    for (uint32_t hq = 0; hq < Hq; hq++) {
        uint32_t h = hq / G;
        double qabs = 0, dk = 0, dv = 0, vmax = 0;
        for (uint32_t d = 0; d < D; d++) {
            qd[d] = q[(size_t)hq * D + d];
            qabs += fabs(qd[d]);
        }
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t d = 0; d < D; d++) {
                size_t i = ((size_t)t * H + h) * D + d;
                kh[(size_t)t * D + d] = k[i];
                vh[(size_t)t * D + d] = v[i];
                kq[(size_t)t * D + d] = kd[i];
                vq[(size_t)t * D + d] = vd[i];
                vmax = fmax(vmax, fabs(v[i]));
            }
        for (uint32_t t = 0; t < n; t++) {
            dk = fmax(dk, ek[t]);
            dv = fmax(dv, ev[t]);
        }
        ref_attn(qd, kq, vq, n, D, scale, o_q);
        ref_attn(qd, kh, vh, n, D, scale, o_f);
        double omax = 0, sabs = 0;
        for (uint32_t d = 0; d < D; d++)
            omax = fmax(omax, fabs(o_q[d]));
        for (uint32_t t = 0; t < n; t++) {
            double a = 0;
            for (uint32_t d = 0; d < D; d++)
                a += fabs(qd[d] * kq[(size_t)t * D + d]);
            sabs = fmax(sabs, a * scale);
        }
        double bound = (exp(2 * scale * qabs * dk) - 1) * vmax + dv;
        /* the kernel sums in f32: a score is off by up to D eps |q||k|
         * (outliers make that large), which moves a softmax weight by the
         * same relative amount, and n weighted rows add n eps each */
        double f32_tol = 2e-5 * (omax + 1) + (D + n) * FLT_EPSILON * (sabs + 1) * vmax;
        for (uint32_t d = 0; d < D; d++) {
            double got = out[(size_t)hq * D + d];
            cr_assert(fabs(got - o_q[d]) <= f32_tol,
                      "dtype %d head %u d %u: %g vs dequantized reference %g", (int)dt, hq,
                      d, got, o_q[d]);
            cr_assert(fabs(got - o_f[d]) <= bound * 1.001 + f32_tol,
                      "dtype %d head %u d %u: %g vs f32 %g beyond %g", (int)dt, hq, d, got,
                      o_f[d], bound);
        }
    }
    /* block copies carry the scales: a copy of the pages reads the same */
    rkv_block_id cp;
    OK(rkv_pool_unref(pool, junk));
    OK(rkv_pool_alloc(pool, &cp));
    OK(rkv_pool_copy_blocks(pool, 1, &pages[2], &cp));
    void *hostbuf = malloc(rkv_pool_bytes_per_block(pool));
    cr_assert_not_null(hostbuf);
    OK(rkv_pool_copy_to_host(pool, 1, &pages[2], hostbuf));
    OK(rkv_pool_copy_from_host(pool, 1, &pages[3], hostbuf));
    uint32_t one[2] = {0, 1}, full = P;
    rkv_block_id a3[3] = {pages[2], cp, pages[3]};
    float o3[3][4 * 64];
    for (int i = 0; i < 3; i++) {
        rkv_paged_kv t1 = {1, one, &a3[i], &full};
        OK(rkv_attn_decode(attn, &p, &t1, q, o3[i], NULL));
    }
    cr_assert_arr_eq(o3[0], o3[1], sizeof o3[0]);
    cr_assert_arr_eq(o3[0], o3[2], sizeof o3[0]);
    OK(rkv_pool_unref(pool, cp));
    free(hostbuf);
    free(qd); free(kh); free(vh); free(kq); free(vq);
    free(q); free(out);
    free(slots); free(k); free(v); free(kd); free(vd); free(ek); free(ev);
    OK(rkv_attn_check(attn));
    rkv_attn_destroy(attn);
    OK(rkv_pool_unref_n(pool, npages, pages));
    OK(rkv_pool_check(pool));
    rkv_pool_destroy(pool);
}

/* accuracy_case for each format at group 32, then INT4 at each group of
 * int4_groups (0-terminated), on one rng seeded under name. */
static void per_format(const char *name, int outliers, const uint32_t *int4_groups)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    for (int i = 0; i < 4; i++)
        accuracy_case(QDT[i], 32, outliers, &rng);
    for (const uint32_t *g = int4_groups; *g != 0; g++)
        accuracy_case(RKV_DTYPE_INT4, *g, outliers, &rng);
}

Test(kv_quant, append_and_decode_per_format_random)
{
    static const uint32_t groups[] = {16, 64, 0};
    per_format("kv_quant::append_and_decode_per_format_random", 0, groups);
}

Test(kv_quant, append_and_decode_per_format_outliers)
{
    static const uint32_t groups[] = {8, 0};
    per_format("kv_quant::append_and_decode_per_format_outliers", 1, groups);
}

Test(kv_quant, zero_rows_and_bf16_activations)
{
    /* an all-zero row has scale 0 and reads back zeros; a bf16 act dtype
     * takes bf16 input and gives bf16 output */
    rkv_pool_config pc = tu_kv_config(2, 4, 1, 1, 8, RKV_DEVICE_HOST);
    for (int i = 0; i < 4; i++) {
        pc.dtype = QDT[i];
        pc.quant_group = 8;
        rkv_pool *pool;
        rkv_attn *attn = tu_attn_pool(&pc, &pool);
        rkv_block_id b;
        OK(rkv_pool_alloc(pool, &b));
        uint16_t k[8] = {0}, v[8], q[8], out[8];
        for (int d = 0; d < 8; d++) {
            v[d] = rkv_f32_to_bf16((float)(d + 1) * 0.25f);
            q[d] = rkv_f32_to_bf16(1.0f);
        }
        uint32_t slot = b * 4;
        OK(rkv_attn_append(attn, 0, 1, &slot, k, v));
        uint32_t ip[2] = {0, 1}, last = 1;
        rkv_paged_kv t = {1, ip, &b, &last};
        rkv_attn_params p = {0, 1, 0.0f, 0, 0};
        OK(rkv_attn_decode(attn, &p, &t, q, out, NULL));
        for (int d = 0; d < 8; d++) {
            /* one key: the output is its V, within the format's bound and
             * one bf16 rounding; the row's absmax is 2 */
            double want = (d + 1) * 0.25, got = rkv_bf16_to_f32(out[d]);
            double bd = elem_bound(QDT[i], want, 2.0 / qmax(QDT[i])) + want * 0x1p-8;
            cr_assert(fabs(got - want) <= bd, "dtype %d d %d: %g", (int)QDT[i], d, got);
        }
        void *kb;
        OK(rkv_pool_layer_kv(pool, 0, &kb, NULL));
        double sc;
        for (uint32_t d = 0; d < 8; d++)
            cr_assert_eq(read_back(QDT[i], 8, 8, 1, 4, kb, b, 0, 0, d, &sc), 0.0);
        cr_assert_eq(sc, 0.0);
        rkv_attn_destroy(attn);
        rkv_pool_destroy(pool);
    }
}

/*
 * tests/test_attention_cpu.c -- the CPU reference of attention/ against a
 * dense double-precision attention computed here, independently, from the
 * same (already rounded) inputs read back out of the pool.
 *
 * Error bounds (per output element, relative to the largest |value| of its
 * head vector, so tiny components do not dominate):
 *   f32 inputs/outputs:   2e-5   (fp32 accumulation over <= ~1000 tokens)
 *   f16 outputs:          2e-3   (one f16 rounding, 2^-11, plus fp32 sums)
 *   bf16 outputs:         1e-2   (one bf16 rounding, 2^-8)
 *   lse (always fp32):    1e-4 * (1 + |lse|)
 * Outputs are poisoned (all bytes 0xff: NaN in every dtype) before each
 * call, so an element the code forgets to write fails. Invalid inputs must
 * be refused with a status and leave outputs and the pool byte-identical.
 * Seeds are printed; RKV_TEST_SEED replays a run.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/handles.h"
#include "tests/support/dtype_buf.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

typedef struct cfg {
    uint32_t P, Hkv, G, D, layers, nblocks;
    rkv_dtype dt;
} cfg;

typedef struct fix {
    cfg c;
    rkv_pool *pool;
    rkv_attn *attn;
    size_t es;
} fix;

static void fix_open(fix *f, const cfg *c, rkv_rng *rng)
{
    f->c = *c;
    f->es = tu_dtype_size(c->dt);
    rkv_pool_config pc = tu_kv_config(c->nblocks, c->P, c->layers,
                                      c->Hkv, c->D, RKV_DEVICE_HOST);
    pc.dtype = c->dt;
    OK(rkv_pool_create(&pc, &f->pool));
    OK(rkv_attn_create(f->pool, &f->attn));
    OK(rkv_attn_check(f->attn));
    for (uint32_t l = 0; l < c->layers; l++) {
        void *k, *v;
        OK(rkv_pool_layer_kv(f->pool, l, &k, &v));
        size_t n = (size_t)c->nblocks * c->P * c->Hkv * c->D;
        tu_fill_random(rng, c->dt, k, n);
        tu_fill_random(rng, c->dt, v, n);
    }
}

static fix fix_of(cfg c, rkv_rng *rng)
{
    fix f;
    fix_open(&f, &c, rng);
    return f;
}

/* A malloc'd copy of layer 0's K bytes (all blocks): *kb0 is where they
 * live, *total their size. */
static char *k0_snapshot(const fix *f, void **kb0, size_t *total)
{
    void *vb0;
    OK(rkv_pool_layer_kv(f->pool, 0, kb0, &vb0));
    *total = rkv_pool_bytes_per_block(f->pool) * f->c.nblocks;
    char *copy = malloc(*total);
    cr_assert(copy);
    memcpy(copy, *kb0, *total);
    return copy;
}

static void fix_close(fix *f)
{
    OK(rkv_attn_check(f->attn));
    OK(rkv_pool_check(f->pool));
    rkv_attn_destroy(f->attn);
    rkv_pool_destroy(f->pool);
}

/* A random ragged batch; pages drawn from the pool in shuffled order. */
typedef struct batch {
    uint32_t n;
    uint32_t *qo, *kvp, *idx, *last, *kvlen, *qlen;
    uint32_t rows;
} batch;

static void batch_make(fix *f, rkv_rng *rng, uint32_t n, uint32_t max_prefix_pages,
                       uint32_t qmax, batch *b)
{
    const uint32_t P = f->c.P;
    b->n = n;
    b->qo = calloc(n + 1, 4);
    b->kvp = calloc(n + 1, 4);
    b->last = calloc(n, 4);
    b->kvlen = calloc(n, 4);
    b->qlen = calloc(n, 4);
    uint32_t total = 0;
    for (uint32_t r = 0; r < n; r++) {
        uint32_t prefix = (uint32_t)rkv_rng_below(rng, (uint64_t)max_prefix_pages * P + 2);
        b->qlen[r] = 1 + (uint32_t)rkv_rng_below(rng, qmax);
        b->kvlen[r] = prefix + b->qlen[r];
        uint32_t pages = (b->kvlen[r] + P - 1) / P;
        b->last[r] = b->kvlen[r] - (pages - 1) * P;
        b->kvp[r + 1] = b->kvp[r] + pages;
        b->qo[r + 1] = b->qo[r] + b->qlen[r];
        total += pages;
    }
    b->rows = b->qo[n];
    b->idx = calloc(total ? total : 1, 4);
    cr_assert(b->qo && b->kvp && b->last && b->kvlen && b->qlen && b->idx);
    OK(rkv_pool_alloc_n(f->pool, total, b->idx));
    for (uint32_t i = total; i > 1; i--) { /* scatter the table */
        uint32_t j = (uint32_t)rkv_rng_below(rng, i), t = b->idx[i - 1];
        b->idx[i - 1] = b->idx[j];
        b->idx[j] = t;
    }
}

static void batch_free(fix *f, batch *b)
{
    OK(rkv_pool_unref_n(f->pool, b->kvp[b->n], b->idx));
    free(b->qo);
    free(b->kvp);
    free(b->idx);
    free(b->last);
    free(b->kvlen);
    free(b->qlen);
}

static rkv_paged_kv table_of(const batch *b)
{
    rkv_paged_kv t = {b->n, b->kvp, b->idx, b->last};
    return t;
}

/* Dense double attention of one (row, q head) over a list of KV tokens
 * given by slot (block * P + offset). */
static void ref_head(const fix *f, uint32_t layer, const void *q, size_t qoff,
                     uint32_t qh, const uint32_t *slots, uint32_t n, double scale,
                     double *o, double *lse)
{
    const uint32_t D = f->c.D, Hkv = f->c.Hkv, h = qh / f->c.G;
    void *kb, *vb;
    OK(rkv_pool_layer_kv(f->pool, layer, &kb, &vb));
    double *s = malloc(sizeof(double) * n);
    cr_assert(s);
    double m = -INFINITY;
    for (uint32_t t = 0; t < n; t++) {
        size_t base = ((size_t)slots[t] * Hkv + h) * D;
        double acc = 0;
        for (uint32_t d = 0; d < D; d++)
            acc += (double)tu_ld(f->c.dt, q, qoff + d) * (double)tu_ld(f->c.dt, kb, base + d);
        s[t] = acc * scale;
        m = s[t] > m ? s[t] : m;
    }
    double l = 0;
    for (uint32_t d = 0; d < D; d++)
        o[d] = 0;
    for (uint32_t t = 0; t < n; t++) {
        double p = exp(s[t] - m);
        l += p;
        size_t base = ((size_t)slots[t] * Hkv + h) * D;
        for (uint32_t d = 0; d < D; d++)
            o[d] += p * (double)tu_ld(f->c.dt, vb, base + d);
    }
    for (uint32_t d = 0; d < D; d++)
        o[d] /= l;
    *lse = m + log(l);
    free(s);
}

static double tol_of(rkv_dtype dt)
{
    return dt == RKV_DTYPE_F32 ? 2e-5 : dt == RKV_DTYPE_F16 ? 2e-3 : 1e-2;
}

/* Checks out / lse of every row of b (queries at the end of each request,
 * causal), optionally after `shared` full pages every row also sees. */
static void verify(const fix *f, uint32_t layer, const batch *b, uint32_t nshared,
                   const uint32_t *shared, const void *q, const void *out,
                   const float *lse, double scale, const char *what)
{
    const uint32_t P = f->c.P, D = f->c.D, Hq = f->c.Hkv * f->c.G;
    const double tol = tol_of(f->c.dt);
    uint32_t maxlen = nshared * P;
    for (uint32_t r = 0; r < b->n; r++)
        maxlen = b->kvlen[r] + nshared * P > maxlen ? b->kvlen[r] + nshared * P : maxlen;
    uint32_t *slots = malloc(sizeof(uint32_t) * (maxlen + 1));
    double *o = malloc(sizeof(double) * D);
    cr_assert(slots && o);
    for (uint32_t r = 0; r < b->n; r++) {
        for (uint32_t i = 0; i < b->qo[r + 1] - b->qo[r]; i++) {
            uint32_t row = b->qo[r] + i;
            uint32_t pos = b->kvlen[r] - (b->qo[r + 1] - b->qo[r]) + i;
            uint32_t n = 0;
            for (uint32_t t = 0; t < nshared * P; t++)
                slots[n++] = shared[t / P] * P + t % P;
            for (uint32_t t = 0; t <= pos; t++)
                slots[n++] = b->idx[b->kvp[r] + t / P] * P + t % P;
            for (uint32_t h = 0; h < Hq; h++) {
                double rl;
                size_t off = ((size_t)row * Hq + h) * D;
                ref_head(f, layer, q, off, h, slots, n, scale, o, &rl);
                /* the error scales with the values (uniform in [-1, 1]), not
                 * with an output that cancels: a head_dim-1 row of -1.45e-4
                 * from values of order 1 kept an f32 error of 4e-9, past a
                 * bound taken from |out| alone; floor the scale at 1e-2 */
                double mx = 1e-2;
                for (uint32_t d = 0; d < D; d++)
                    mx = fabs(o[d]) > mx ? fabs(o[d]) : mx;
                for (uint32_t d = 0; d < D; d++) {
                    double got = tu_ld(f->c.dt, out, off + d);
                    cr_assert(fabs(got - o[d]) <= tol * mx,
                              "%s: P=%u G=%u D=%u dt=%d req %u row %u head %u dim %u: "
                              "got %.8g want %.8g (bound %.3g)",
                              what, P, f->c.G, D, (int)f->c.dt, r, row, h, d, got, o[d],
                              tol * mx);
                }
                if (lse != NULL) {
                    double gl = lse[(size_t)row * Hq + h];
                    cr_assert(fabs(gl - rl) <= 1e-4 * (1 + fabs(rl)),
                              "%s: lse row %u head %u: got %.8g want %.8g", what, row, h,
                              gl, rl);
                }
            }
        }
    }
    free(slots);
    free(o);
}

static void *poisoned(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    cr_assert(p);
    memset(p, 0xff, bytes);
    return p;
}

static const uint32_t PAGES[] = {1, 3, 16, 64, 256};
static const uint32_t GQA[] = {1, 2, 4, 8};
static const uint32_t DIMS[] = {64, 128, 24};
static const rkv_dtype DTS[] = {RKV_DTYPE_F32, RKV_DTYPE_F16, RKV_DTYPE_BF16};

/* A test whose case runs once per dtype of DTS, in order, with one rng
 * seeded (and printed) under the test's name: a dtype added to DTS runs in
 * every such test. */
static void per_dtype(const char *name, void (*one)(rkv_rng *, rkv_dtype))
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    for (size_t ti = 0; ti < sizeof DTS / sizeof DTS[0]; ti++)
        one(&rng, DTS[ti]);
}

/* A test with one rng seeded (and printed) under the test's name. */
#define RNG_TEST(name)                                                       \
    static void name##_body(rkv_rng *rng);                                   \
    Test(attention_cpu, name)                                                \
    {                                                                        \
        rkv_rng rng;                                                         \
        rkv_rng_init(&rng, rkv_test_seed("attention_cpu." #name));           \
        name##_body(&rng);                                                   \
    }                                                                        \
    static void name##_body(rkv_rng *rng)

#define DTYPE_TEST(name)                                                     \
    static void name##_case(rkv_rng *rng, rkv_dtype dt);                     \
    Test(attention_cpu, name) { per_dtype("attention_cpu." #name, name##_case); } \
    static void name##_case(rkv_rng *rng, rkv_dtype dt)


typedef enum { OP_DECODE, OP_PREFILL, OP_CASCADE } op_kind;

/* One randomized configuration of op. */
static void run_case(rkv_rng *rng, uint32_t P, uint32_t G, uint32_t D, rkv_dtype dt,
                     op_kind op)
{
    cfg c = {P, 1 + (uint32_t)rkv_rng_below(rng, 2), G, D, 2, 0, dt};
    uint32_t max_prefix_pages = P >= 64 ? 2 : 4;
    uint32_t nreq = 1 + (uint32_t)rkv_rng_below(rng, 4);
    uint32_t qmax = op == OP_DECODE ? 1 : (P >= 64 ? 40 : 2 * P + 5);
    uint32_t nshared = op == OP_CASCADE ? (uint32_t)rkv_rng_below(rng, P >= 64 ? 3 : 5) : 0;
    c.nblocks = nreq * (max_prefix_pages + 2 + qmax / P + 1) + nshared + 4;
    fix f = fix_of(c, rng);
    batch b;
    batch_make(&f, rng, nreq, max_prefix_pages, qmax, &b);
    uint32_t *shared = calloc(nshared + 1, 4);
    cr_assert(shared);
    if (nshared)
        OK(rkv_pool_alloc_n(f.pool, nshared, shared));
    const uint32_t Hq = c.Hkv * G;
    size_t qn = (size_t)b.rows * Hq * D;
    void *q = malloc(qn * f.es);
    cr_assert(q);
    tu_fill_random(rng, dt, q, qn);
    void *out = poisoned(qn * f.es);
    float *lse = poisoned((size_t)b.rows * Hq * 4);
    rkv_attn_params p = {(uint32_t)rkv_rng_below(rng, 2), Hq, 0.0f, 0, 0};
    double scale = 1.0 / sqrt((double)D);
    if (rkv_rng_below(rng, 2)) {
        p.sm_scale = 0.7f;
        scale = (double)0.7f;
    }
    rkv_paged_kv t = table_of(&b);
    const char *what = op == OP_DECODE ? "decode" : op == OP_PREFILL ? "prefill" : "cascade";
    if (op == OP_DECODE)
        OK(rkv_attn_decode(f.attn, &p, &t, q, out, lse));
    else if (op == OP_PREFILL)
        OK(rkv_attn_prefill(f.attn, &p, b.qo, &t, q, out, lse));
    else
        OK(rkv_attn_cascade(f.attn, &p, nshared, shared, b.qo, &t, q, out, lse));
    OK(rkv_attn_check(f.attn));
    verify(&f, p.layer, &b, nshared, shared, q, out, lse, scale, what);
    /* without lse: same outputs, lse optional */
    memset(out, 0xff, qn * f.es);
    if (op == OP_PREFILL)
        OK(rkv_attn_prefill(f.attn, &p, b.qo, &t, q, out, NULL));
    else if (op == OP_DECODE)
        OK(rkv_attn_decode(f.attn, &p, &t, q, out, NULL));
    else
        OK(rkv_attn_cascade(f.attn, &p, nshared, shared, b.qo, &t, q, out, NULL));
    verify(&f, p.layer, &b, nshared, shared, q, out, NULL, scale, what);
    if (nshared)
        OK(rkv_pool_unref_n(f.pool, nshared, shared));
    free(shared);
    free(q);
    free(out);
    free(lse);
    batch_free(&f, &b);
    fix_close(&f);
}

static void sweep(const char *name, op_kind op)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    for (size_t pi = 0; pi < sizeof PAGES / sizeof *PAGES; pi++)
        for (size_t gi = 0; gi < sizeof GQA / sizeof *GQA; gi++)
            for (size_t di = 0; di < sizeof DIMS / sizeof *DIMS; di++)
                for (size_t ti = 0; ti < sizeof DTS / sizeof *DTS; ti++)
                    run_case(&rng, PAGES[pi], GQA[gi], DIMS[di], DTS[ti], op);
}

Test(attention_cpu, decode) { sweep("attention_cpu.decode", OP_DECODE); }
Test(attention_cpu, prefill) { sweep("attention_cpu.prefill", OP_PREFILL); }
Test(attention_cpu, cascade) { sweep("attention_cpu.cascade", OP_CASCADE); }

RNG_TEST(prefill_long_prefix_odd_dim)
{
    for (int i = 0; i < 6; i++)
        run_case(rng, 1 + (uint32_t)rkv_rng_below(rng, 20), 1 + (uint32_t)rkv_rng_below(rng, 6),
                 1 + (uint32_t)rkv_rng_below(rng, 100), DTS[rkv_rng_below(rng, 3)],
                 (op_kind)rkv_rng_below(rng, 3));
}

/* Cascade equals prefill over the concatenated table (both within bounds
 * of the dense reference; here directly against each other). */
RNG_TEST(cascade_matches_prefill)
{
    fix f = fix_of((cfg){16, 2, 4, 64, 1, 64, RKV_DTYPE_F32}, rng);
    uint32_t shared[3], own[2][2];
    OK(rkv_pool_alloc_n(f.pool, 3, shared));
    OK(rkv_pool_alloc_n(f.pool, 2, own[0]));
    OK(rkv_pool_alloc_n(f.pool, 2, own[1]));
    /* request r: shared (48 tokens) + own pages, kv 48 + 20, q_len 5 */
    uint32_t qo[3] = {0, 5, 10}, last[2] = {4, 4};
    uint32_t sptr[3] = {0, 2, 4}, sidx[4] = {own[0][0], own[0][1], own[1][0], own[1][1]};
    uint32_t fptr[3] = {0, 5, 10};
    uint32_t fidx[10] = {shared[0], shared[1], shared[2], own[0][0], own[0][1],
                         shared[0], shared[1], shared[2], own[1][0], own[1][1]};
    const uint32_t Hq = 8, D = 64, rows = 10;
    float *q = malloc(sizeof(float) * rows * Hq * D);
    float *o1 = poisoned(sizeof(float) * rows * Hq * D), *o2 = poisoned(sizeof(float) * rows * Hq * D);
    float l1[80], l2[80];
    memset(l1, 0xff, sizeof l1); /* NaN: an unwritten lse fails the compare */
    memset(l2, 0xff, sizeof l2);
    cr_assert(q);
    tu_fill_random(rng, RKV_DTYPE_F32, q, (size_t)rows * Hq * D);
    rkv_attn_params p = {0, Hq, 0.0f, 0, 0};
    rkv_paged_kv ts = {2, sptr, sidx, last}, tf = {2, fptr, fidx, last};
    OK(rkv_attn_cascade(f.attn, &p, 3, shared, qo, &ts, q, o1, l1));
    OK(rkv_attn_prefill(f.attn, &p, qo, &tf, q, o2, l2));
    for (size_t i = 0; i < (size_t)rows * Hq * D; i++)
        cr_assert(fabsf(o1[i] - o2[i]) <= 1e-5f, "elem %zu: %g vs %g", i, o1[i], o2[i]);
    for (size_t i = 0; i < rows * Hq; i++)
        cr_assert(fabsf(l1[i] - l2[i]) <= 1e-5f * (1 + fabsf(l2[i])));
    free(q);
    free(o1);
    free(o2);
    OK(rkv_pool_unref_n(f.pool, 3, shared));
    OK(rkv_pool_unref_n(f.pool, 2, own[0]));
    OK(rkv_pool_unref_n(f.pool, 2, own[1]));
    fix_close(&f);
}

DTYPE_TEST(merge)
{
    fix f = fix_of((cfg){4, 1, 1, 1 + (uint32_t)rkv_rng_below(rng, 130), 1, 2, dt}, rng);
    const uint32_t n = 50, D = f.c.D;
    size_t bytes = (size_t)n * D * f.es;
    void *va = malloc(bytes), *vb = malloc(bytes), *vo = poisoned(bytes);
    float la[50], lb[50], lo[50];
    cr_assert(va && vb);
    tu_fill_random(rng, f.c.dt, va, (size_t)n * D);
    tu_fill_random(rng, f.c.dt, vb, (size_t)n * D);
    for (uint32_t i = 0; i < n; i++) {
        la[i] = (float)(rkv_rng_unit(rng) * 20 - 10);
        lb[i] = (float)(rkv_rng_unit(rng) * 20 - 10);
    }
    la[3] = -INFINITY; /* one side empty */
    lb[7] = -INFINITY;
    la[9] = lb[9] = -INFINITY; /* both empty */
    memset(lo, 0xff, sizeof lo);
    OK(rkv_attn_merge(f.attn, n, va, la, vb, lb, vo, lo));
    for (uint32_t i = 0; i < n; i++) {
        double a = la[i], b = lb[i];
        double m = a > b ? a : b;
        double wa = m == -INFINITY ? 0 : exp(a - m), wb = m == -INFINITY ? 0 : exp(b - m);
        double want_l = m == -INFINITY ? -INFINITY : m + log(wa + wb);
        if (m == -INFINITY)
            cr_assert(lo[i] == -INFINITY);
        else
            cr_assert(fabs(lo[i] - want_l) <= 1e-5 * (1 + fabs(want_l)));
        for (uint32_t d = 0; d < D; d++) {
            size_t e = (size_t)i * D + d;
            double want = m == -INFINITY ? 0
                          : (wa * tu_ld(f.c.dt, va, e) + wb * tu_ld(f.c.dt, vb, e)) / (wa + wb);
            double got = tu_ld(f.c.dt, vo, e);
            cr_assert(fabs(got - want) <= tol_of(f.c.dt) * (fabs(want) + 0.1),
                      "merge %u.%u: %g vs %g", i, d, got, want);
        }
    }
    /* in place: out aliases a */
    OK(rkv_attn_merge(f.attn, n, va, la, vb, lb, va, la));
    cr_assert(memcmp(va, vo, bytes) == 0);
    cr_assert(memcmp(la, lo, sizeof lo) == 0);
    free(va);
    free(vb);
    free(vo);
    fix_close(&f);
}

/* An empty state (lse -inf) contributes nothing whatever it holds (issue
 * 11 defect 5: its NaN values were multiplied by a weight of 0). */
DTYPE_TEST(merge_empty_state_holding_nan)
{
    fix f = fix_of((cfg){4, 1, 1, 16, 1, 2, dt}, rng);
    const uint32_t D = 16;
    const size_t bytes = 3 * D * f.es;
    char *va = malloc(bytes), *vb = malloc(bytes), *vo = poisoned(bytes);
    cr_assert(va && vb);
    tu_fill_random(rng, f.c.dt, va, 3 * D);
    tu_fill_random(rng, f.c.dt, vb, 3 * D);
    memset(va, 0xff, D * f.es);              /* 0: a empty, NaN */
    memset(vb + D * f.es, 0xff, D * f.es);   /* 1: b empty, NaN */
    memset(va + 2 * D * f.es, 0xff, D * f.es);     /* 2: both empty */
    memset(vb + 2 * D * f.es, 0xff, D * f.es);
    float la[3] = {-INFINITY, 0.5f, -INFINITY}, lb[3] = {2.0f, -INFINITY, -INFINITY};
    float lo[3];
    OK(rkv_attn_merge(f.attn, 3, va, la, vb, lb, vo, lo));
    for (uint32_t d = 0; d < D; d++) {
        cr_assert_eq(tu_ld(f.c.dt, vo, d), tu_ld(f.c.dt, vb, d), "merge(empty, b) dim %u", d);
        cr_assert_eq(tu_ld(f.c.dt, vo, D + d), tu_ld(f.c.dt, va, D + d), "merge(a, empty) dim %u", d);
        cr_assert_eq(tu_ld(f.c.dt, vo, 2 * D + d), 0.0f, "two empty states dim %u: %g", d,
                     tu_ld(f.c.dt, vo, 2 * D + d));
    }
    cr_assert(lo[0] == 2.0f && lo[1] == 0.5f && lo[2] == -INFINITY, "lse %g %g %g", lo[0],
              lo[1], lo[2]);
    free(va);
    free(vb);
    free(vo);
    fix_close(&f);
}

DTYPE_TEST(append)
{
    fix f = fix_of((cfg){PAGES[rkv_rng_below(rng, 4)], 2, 1, 64, 3, 12, dt}, rng);
    uint32_t blocks[8];
    OK(rkv_pool_alloc_n(f.pool, 8, blocks));
    const uint32_t nslots = 8 * f.c.P, n = 1 + (uint32_t)rkv_rng_below(rng, nslots);
    uint32_t *slots = malloc(4 * nslots);
    cr_assert(slots);
    for (uint32_t i = 0; i < nslots; i++)
        slots[i] = blocks[i / f.c.P] * f.c.P + i % f.c.P;
    for (uint32_t i = nslots; i > 1; i--) {
        uint32_t j = (uint32_t)rkv_rng_below(rng, i), t = slots[i - 1];
        slots[i - 1] = slots[j];
        slots[j] = t;
    }
    size_t row = (size_t)f.c.Hkv * f.c.D * f.es;
    void *k = malloc(n * row), *v = malloc(n * row);
    cr_assert(k && v);
    tu_fill_random(rng, f.c.dt, k, n * row / f.es);
    tu_fill_random(rng, f.c.dt, v, n * row / f.es);
    size_t total;
    void *kb0;
    char *before = k0_snapshot(&f, &kb0, &total);
    uint32_t layer = (uint32_t)rkv_rng_below(rng, 3);
    OK(rkv_attn_append(f.attn, layer, n, slots, k, v));
    void *kb, *vb;
    OK(rkv_pool_layer_kv(f.pool, layer, &kb, &vb));
    char *expect = malloc(total);
    cr_assert(expect);
    memcpy(expect, before, total);
    for (uint32_t i = 0; i < n; i++) {
        memcpy(expect + ((char *)kb - (char *)kb0) + (size_t)slots[i] * row,
               (char *)k + i * row, row);
        memcpy(expect + ((char *)vb - (char *)kb0) + (size_t)slots[i] * row,
               (char *)v + i * row, row);
    }
    cr_assert(memcmp(expect, kb0, total) == 0, "append wrote the wrong bytes");
    /* invalid: duplicate slot, out of range, free block -> nothing moves */
    uint32_t bad[3] = {slots[0], slots[0], 0};
    cr_assert_eq(rkv_attn_append(f.attn, layer, 2, bad, k, v), RKV_ERR_INVALID_ARG);
    bad[1] = f.c.nblocks * f.c.P;
    cr_assert_eq(rkv_attn_append(f.attn, layer, 2, bad, k, v), RKV_ERR_INVALID_ARG);
    uint32_t fr;
    OK(rkv_pool_alloc(f.pool, &fr));
    OK(rkv_pool_unref(f.pool, fr));
    bad[1] = fr * f.c.P;
    cr_assert_eq(rkv_attn_append(f.attn, layer, 2, bad, k, v), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_attn_append(f.attn, 3, 1, slots, k, v), RKV_ERR_INVALID_ARG);
    cr_assert(memcmp(expect, kb0, total) == 0, "a refused append changed the pool");
    OK(rkv_pool_unref_n(f.pool, 8, blocks));
    free(slots);
    free(k);
    free(v);
    free(before);
    free(expect);
    fix_close(&f);
}

/* Every invalid input is refused; outputs and pool stay byte-identical. */
RNG_TEST(invalid_inputs)
{
    fix f = fix_of((cfg){4, 2, 2, 64, 2, 16, RKV_DTYPE_F16}, rng);
    uint32_t blk[4];
    OK(rkv_pool_alloc_n(f.pool, 4, blk));
    uint32_t fr;
    OK(rkv_pool_alloc(f.pool, &fr));
    OK(rkv_pool_unref(f.pool, fr));
    size_t total;
    void *kb0;
    char *snap = k0_snapshot(&f, &kb0, &total);
    const uint32_t Hq = 4, rows = 3;
    size_t ob = (size_t)rows * Hq * 64 * 2;
    void *q = malloc(ob), *out = poisoned(ob);
    float lse[12];
    memset(lse, 0xff, sizeof lse);
    cr_assert(q);
    tu_fill_random(rng, f.c.dt, q, ob / 2);
    uint32_t indptr[3] = {0, 2, 4}, idx[4] = {blk[0], blk[1], blk[2], blk[3]};
    uint32_t last[2] = {4, 1}, qo[3] = {0, 2, 3};
    rkv_attn_params p = {0, Hq, 0.0f, 0, 0};
    rkv_paged_kv t = {2, indptr, idx, last};
#define REFUSED(call)                                                              \
    do {                                                                           \
        rkv_status s_ = (call);                                                    \
        cr_assert_eq(s_, RKV_ERR_INVALID_ARG, "%s gave %d", #call, (int)s_);       \
        cr_assert(strlen(rkv_last_error()) > 0);                                   \
    } while (0)
    /* sanity: the valid call works (on a copy of out) */
    void *out2 = poisoned(ob);
    OK(rkv_attn_prefill(f.attn, &p, qo, &t, q, out2, NULL));
    free(out2);
    idx[1] = f.c.nblocks;
    REFUSED(rkv_attn_decode(f.attn, &p, &t, q, out, lse));
    idx[1] = fr;
    REFUSED(rkv_attn_prefill(f.attn, &p, qo, &t, q, out, lse));
    idx[1] = blk[1];
    last[1] = 0;
    REFUSED(rkv_attn_decode(f.attn, &p, &t, q, out, lse));
    last[1] = 5;
    REFUSED(rkv_attn_decode(f.attn, &p, &t, q, out, lse));
    last[1] = 1;
    indptr[1] = 4; /* request 1 empty */
    REFUSED(rkv_attn_decode(f.attn, &p, &t, q, out, lse));
    indptr[1] = 2;
    indptr[0] = 1;
    REFUSED(rkv_attn_decode(f.attn, &p, &t, q, out, lse));
    indptr[0] = 0;
    uint32_t qbad[3] = {0, 0, 7}; /* request 1: 7 queries > 5 kv tokens */
    REFUSED(rkv_attn_prefill(f.attn, &p, qbad, &t, q, out, lse));
    uint32_t qdec[3] = {0, 2, 1};
    REFUSED(rkv_attn_prefill(f.attn, &p, qdec, &t, q, out, lse));
    rkv_attn_params pb = p;
    pb.layer = 2;
    REFUSED(rkv_attn_decode(f.attn, &pb, &t, q, out, lse));
    pb = p;
    pb.num_qo_heads = 3;
    REFUSED(rkv_attn_decode(f.attn, &pb, &t, q, out, lse));
    pb.num_qo_heads = 0;
    REFUSED(rkv_attn_decode(f.attn, &pb, &t, q, out, lse));
    pb = p;
    pb.sm_scale = -1.0f;
    REFUSED(rkv_attn_decode(f.attn, &pb, &t, q, out, lse));
    pb.sm_scale = NAN;
    REFUSED(rkv_attn_decode(f.attn, &pb, &t, q, out, lse));
    REFUSED(rkv_attn_decode(f.attn, &p, &t, NULL, out, lse));
    REFUSED(rkv_attn_decode(f.attn, &p, NULL, q, out, lse));
    REFUSED(rkv_attn_prefill(f.attn, &p, NULL, &t, q, out, lse));
    uint32_t sh_bad[1] = {fr};
    REFUSED(rkv_attn_cascade(f.attn, &p, 1, sh_bad, qo, &t, q, out, lse));
    REFUSED(rkv_attn_cascade(f.attn, &p, 1, NULL, qo, &t, q, out, lse));
    rkv_paged_kv t0 = {0, indptr, idx, last};
    REFUSED(rkv_attn_decode(f.attn, &p, &t0, q, out, lse));
    cr_assert_eq(rkv_attn_set_stream(f.attn, (void *)1), RKV_ERR_INVALID_ARG);
    for (size_t i = 0; i < ob; i++)
        cr_assert_eq(((unsigned char *)out)[i], 0xff, "a refused call wrote out[%zu]", i);
    for (size_t i = 0; i < sizeof lse; i++)
        cr_assert_eq(((unsigned char *)lse)[i], 0xff);
    cr_assert(memcmp(snap, kb0, total) == 0, "a refused call changed the pool");
    /* a metadata-only pool has no attention */
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 4;
    rkv_pool *meta;
    OK(rkv_pool_create(&pc, &meta));
    rkv_attn *a2 = NULL;
    cr_assert_eq(rkv_attn_create(meta, &a2), RKV_ERR_STATE);
    cr_assert_null(a2);
    rkv_pool_destroy(meta);
    free(q);
    free(out);
    free(snap);
    OK(rkv_pool_unref_n(f.pool, 4, blk));
    fix_close(&f);
}

/* Every *_check() refuses NULL the same way: an invalid argument, not a
 * corrupt object (issue 10, item 9: rkv_attn_check said CORRUPT). */
Test(attention_cpu, check_null_is_invalid_arg)
{
    cr_assert_eq(rkv_attn_check(NULL), RKV_ERR_INVALID_ARG, "%s",
                 rkv_last_error());
    cr_assert_eq(rkv_pool_check(NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_tree_check(NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_sched_check(NULL), RKV_ERR_INVALID_ARG);
}

DTYPE_TEST(block_copy)
{
    fix f = fix_of((cfg){PAGES[rkv_rng_below(rng, 5)], 2, 1, 64, 3, 10, dt}, rng);
    uint32_t b[8];
    OK(rkv_pool_alloc_n(f.pool, 8, b));
    size_t bpb = rkv_pool_bytes_per_block(f.pool);
    /* host copies of blocks b[0..3], then copy b[0..3] -> b[4..7] */
    char *h = malloc(4 * bpb), *h2 = malloc(4 * bpb);
    cr_assert(h && h2);
    OK(rkv_pool_copy_to_host(f.pool, 4, b, h));
    OK(rkv_pool_copy_blocks(f.pool, 4, b, b + 4));
    OK(rkv_pool_copy_to_host(f.pool, 4, b + 4, h2));
    cr_assert(memcmp(h, h2, 4 * bpb) == 0);
    /* the layout of a host block: K[l], V[l] pages in order */
    size_t seg = (size_t)f.c.P * f.c.Hkv * f.c.D * f.es;
    for (uint32_t l = 0; l < f.c.layers; l++) {
        void *k, *v;
        OK(rkv_pool_layer_kv(f.pool, l, &k, &v));
        cr_assert(memcmp(h + (2 * l) * seg, (char *)k + b[0] * seg, seg) == 0);
        cr_assert(memcmp(h + (2 * l + 1) * seg, (char *)v + b[0] * seg, seg) == 0);
    }
    /* from_host round trip into other blocks */
    tu_fill_random(rng, f.c.dt, h2, 4 * bpb / f.es);
    OK(rkv_pool_copy_from_host(f.pool, 4, b + 4, h2));
    OK(rkv_pool_copy_to_host(f.pool, 4, b + 4, h));
    cr_assert(memcmp(h, h2, 4 * bpb) == 0);
    /* refusals leave everything as it was */
    void *k0, *v0;
    OK(rkv_pool_layer_kv(f.pool, 0, &k0, &v0));
    size_t total = bpb * f.c.nblocks;
    char *snap = malloc(total);
    cr_assert(snap);
    memcpy(snap, k0, total);
    uint32_t fr;
    OK(rkv_pool_alloc(f.pool, &fr));
    OK(rkv_pool_unref(f.pool, fr));
    uint32_t s2[2] = {b[0], b[1]}, d2[2] = {b[2], b[2]};
    cr_assert_eq(rkv_pool_copy_blocks(f.pool, 2, s2, d2), RKV_ERR_INVALID_ARG);
    d2[0] = b[1];
    d2[1] = b[3];
    cr_assert_eq(rkv_pool_copy_blocks(f.pool, 2, s2, d2), RKV_ERR_INVALID_ARG);
    d2[0] = fr;
    cr_assert_eq(rkv_pool_copy_blocks(f.pool, 2, s2, d2), RKV_ERR_INVALID_ARG);
    d2[0] = f.c.nblocks;
    cr_assert_eq(rkv_pool_copy_blocks(f.pool, 2, s2, d2), RKV_ERR_INVALID_ARG);
    uint32_t dup[2] = {b[5], b[5]};
    cr_assert_eq(rkv_pool_copy_from_host(f.pool, 2, dup, h), RKV_ERR_INVALID_ARG);
    uint32_t fb[2] = {b[5], fr};
    cr_assert_eq(rkv_pool_copy_from_host(f.pool, 2, fb, h), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_pool_copy_to_host(f.pool, 2, fb, h), RKV_ERR_INVALID_ARG);
    cr_assert(memcmp(snap, k0, total) == 0, "a refused copy changed the pool");
    OK(rkv_pool_unref_n(f.pool, 8, b));
    free(h);
    free(h2);
    free(snap);
    fix_close(&f);
}

/* fp16 against the compiler's _Float16 (an independent RNE conversion),
 * bf16 against a nearest-even search done in double. */
RNG_TEST(dtype_conversions)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float x = rkv_f16_to_f32((uint16_t)h);
        _Float16 hf;
        uint16_t bits = (uint16_t)h;
        memcpy(&hf, &bits, 2);
        float want = (float)hf;
        if (isnan(want)) {
            cr_assert(isnan(x));
            continue;
        }
        cr_assert(x == want && signbit(x) == signbit(want), "f16 %04x", h);
        cr_assert_eq(rkv_f32_to_f16(x), (uint16_t)h, "f16 round trip %04x", h);
        cr_assert_eq(rkv_bf16_to_f32(rkv_f32_to_bf16(rkv_bf16_to_f32((uint16_t)h))),
                     rkv_bf16_to_f32((uint16_t)h));
    }
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rkv_rng_next(rng);
        if (i % 4 == 0) /* concentrate on the f16 range, ties included */
            u = (u & 0x8000ffffu) | ((uint32_t)(100 + rkv_rng_below(rng, 50)) << 23);
        if (i % 8 == 1)
            u = (u & 0xffff0000u) | 0x8000u; /* bf16 tie */
        if (i % 8 == 3)
            u = (u & 0xffffe000u) | 0x1000u; /* f16 tie */
        float x;
        memcpy(&x, &u, 4);
        if (isnan(x)) {
            cr_assert(isnan(rkv_f16_to_f32(rkv_f32_to_f16(x))));
            cr_assert(isnan(rkv_bf16_to_f32(rkv_f32_to_bf16(x))));
            continue;
        }
        _Float16 hf = (_Float16)x;
        uint16_t want;
        memcpy(&want, &hf, 2);
        cr_assert_eq(rkv_f32_to_f16(x), want, "f16 of %a (%08x)", (double)x, u);
        /* bf16: nearest of the two neighbours, ties to even */
        uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
        float flo, fhi;
        memcpy(&flo, &lo, 4);
        memcpy(&fhi, &hi, 4);
        double dfhi = (double)fhi;
        if (isinf(fhi)) /* the neighbour past the largest finite bf16 */
            dfhi = copysign(ldexp(1.0, 128), (double)x);
        double dl = fabs((double)x - (double)flo), dh = fabs(dfhi - (double)x);
        uint16_t wb = (uint16_t)(lo >> 16);
        if (isinf(x))
            wb = (uint16_t)(u >> 16);
        else if (dh < dl || (dh == dl && ((lo >> 16) & 1u)))
            wb = (uint16_t)(hi >> 16);
        cr_assert_eq(rkv_f32_to_bf16(x), wb, "bf16 of %a (%08x)", (double)x, u);
    }
}

/* Plan once, run per layer on a host pool: the same bytes as the one-shot
 * calls for every layer, from the plan's own copy of the table (the
 * caller's is clobbered after planning); misuse is rejected. */
RNG_TEST(plan_once_run_per_layer)
{
    cfg c = {16, 2, 3, 64, 3, 96, RKV_DTYPE_F16};
    fix f = fix_of(c, rng), g = fix_of(c, rng);
    for (int prefill = 0; prefill < 2; prefill++) {
        batch b;
        batch_make(&f, rng, 4, 4, prefill ? 6 : 1, &b);
        const uint32_t Hq = c.Hkv * c.G, rows = prefill ? b.rows : b.n;
        const size_t nv = (size_t)rows * Hq, ob = nv * c.D * f.es;
        rkv_paged_kv t = table_of(&b);
        const uint32_t *qo = prefill ? b.qo : NULL;
        size_t ws = 1;
        OK(rkv_attn_plan_workspace_size(f.attn, Hq, qo, &t, &ws));
        cr_assert_eq(ws, 0);
        rkv_attn_plan *pl = NULL;
        cr_assert_eq(rkv_attn_plan_create(f.attn, Hq + 1, qo, &t, NULL, 0, &pl),
                     RKV_ERR_INVALID_ARG);
        cr_assert_null(pl);
        OK(rkv_attn_plan_create(f.attn, Hq, qo, &t, NULL, 0, &pl));
        uint32_t *idx_keep = malloc(4 * (size_t)b.kvp[b.n] + 4);
        cr_assert(idx_keep);
        memcpy(idx_keep, b.idx, 4 * (size_t)b.kvp[b.n]);
        memset(b.idx, 0xff, 4 * (size_t)b.kvp[b.n]);
        void *q = malloc(ob), *o1 = poisoned(ob), *o2 = poisoned(ob);
        float *l1 = poisoned(4 * nv), *l2 = poisoned(4 * nv);
        cr_assert(q);
        cr_assert_eq(rkv_attn_run(g.attn, pl, 0, 0.0f, q, o1, l1), RKV_ERR_INVALID_ARG);
        cr_assert_eq(rkv_attn_run(f.attn, pl, c.layers, 0.0f, q, o1, l1),
                     RKV_ERR_INVALID_ARG);
        cr_assert_eq(rkv_attn_run(f.attn, pl, 0, -1.0f, q, o1, l1), RKV_ERR_INVALID_ARG);
        for (uint32_t layer = 0; layer < c.layers; layer++) {
            tu_fill_random(rng, c.dt, q, nv * c.D);
            const float scale = 0.1f * (float)(layer + 1);
            OK(rkv_attn_run(f.attn, pl, layer, scale, q, o1, l1));
            memcpy(b.idx, idx_keep, 4 * (size_t)b.kvp[b.n]);
            rkv_attn_params p = {layer, Hq, scale, 0, 0};
            rkv_paged_kv tk = table_of(&b);
            if (prefill)
                OK(rkv_attn_prefill(f.attn, &p, b.qo, &tk, q, o2, l2));
            else
                OK(rkv_attn_decode(f.attn, &p, &tk, q, o2, l2));
            memset(b.idx, 0xff, 4 * (size_t)b.kvp[b.n]);
            cr_assert(memcmp(o1, o2, ob) == 0, "layer %u: run and one-shot differ", layer);
            cr_assert(memcmp(l1, l2, 4 * nv) == 0, "layer %u: lse differ", layer);
        }
        memcpy(b.idx, idx_keep, 4 * (size_t)b.kvp[b.n]);
        rkv_attn_plan_destroy(pl);
        free(idx_keep);
        free(q);
        free(o1);
        free(o2);
        free(l1);
        free(l2);
        batch_free(&f, &b);
    }
    fix_close(&f);
    fix_close(&g);
}

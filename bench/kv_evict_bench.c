/*
 * bench/kv_evict_bench.c -- the quality trade-off of making a request's KV
 * smaller (include/radixkv/kv_evict.h): decode output error against full
 * attention for StreamingLLM (sinks + window), H2O (heavy hitters by the
 * prompt's accumulated attention + recent), SnapKV (what the last 32
 * prompt rows attend to, at most half the budget, max-pooled over 7) and a random choice, at
 * budgets of 1/16 .. 1/2 of the prompt.
 *
 *   kv_evict_bench [--tokens N] [--steps M] [--seed S]
 *
 * One layer, 2 KV heads, 8 query heads, head_dim 64, 16-token pages, f32,
 * on the CPU reference. Data:
 *   random      K, V, q uniform in [-1, 1]: no token matters more than
 *               another, the hardest case for any selection;
 *   structured  K carries a slowly turning "topic" direction r(t) (recent
 *               keys resemble recent queries) and 32 scattered tokens
 *               carry a strong shared direction u every query also has
 *               (heavy hitters); V random.
 * The prompt's queries (what H2O and SnapKV score with) and the M decode
 * queries after it come from the same model; each decode query attends to
 * the prompt's KV (no new tokens, so every method sees the same keys).
 * Error: ||o - o_full|| / ||o_full|| per (step, head), mean and max.
 * Deterministic (no clock).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "radixkv.h"
#include "tests/support/pool_config.h"

enum { HKV = 2, HQ = 8, D = 64, P = 16 };

static uint64_t rs;
static double unit(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}
static float sym(void) { return (float)(unit() * 2 - 1); }

static void die(const char *what, rkv_status st)
{
    fprintf(stderr, "kv_evict_bench: %s: %s (%s)\n", what, rkv_strerror(st),
            rkv_last_error());
    exit(1);
}
#define TRY(what, call)                                                        \
    do {                                                                       \
        rkv_status st_ = (call);                                               \
        if (st_ != RKV_OK)                                                     \
            die(what, st_);                                                    \
    } while (0)

static void *xcalloc(size_t n, size_t s)
{
    void *p = calloc(n ? n : 1, s);
    if (p == NULL) {
        fprintf(stderr, "kv_evict_bench: out of memory\n");
        exit(1);
    }
    return p;
}

typedef struct data {
    uint32_t n, m;
    float *k, *v;   /* [n][HKV][D] */
    float *qp;      /* prompt queries [n][HQ][D] */
    float *qd;      /* decode queries [m][HQ][D] */
} data;

/* The topic direction at position t: a unit vector turning slowly. */
static void topic(const float *a, const float *b, double t, float *out)
{
    double c = cos(t / 200.0), s = sin(t / 200.0);
    for (int d = 0; d < D; d++)
        out[d] = (float)(c * a[d] + s * b[d]);
}

static void make(data *x, uint32_t n, uint32_t m, int structured)
{
    x->n = n;
    x->m = m;
    x->k = xcalloc((size_t)n * HKV * D, sizeof(float));
    x->v = xcalloc((size_t)n * HKV * D, sizeof(float));
    x->qp = xcalloc((size_t)n * HQ * D, sizeof(float));
    x->qd = xcalloc((size_t)m * HQ * D, sizeof(float));
    float a[D], b[D], u[D], r[D];
    for (int d = 0; d < D; d++) {
        a[d] = sym() * 0.5f;
        b[d] = sym() * 0.5f;
        u[d] = sym() * 0.5f;
    }
    uint8_t *heavy = xcalloc(n, 1);
    for (int i = 0; i < 32; i++)
        heavy[(uint32_t)(unit() * n)] = 1;
    for (uint32_t t = 0; t < n; t++) {
        topic(a, b, t, r);
        for (int h = 0; h < HKV; h++)
            for (int d = 0; d < D; d++) {
                size_t i = ((size_t)t * HKV + h) * D + d;
                float kk = sym();
                if (structured)
                    kk = 0.3f * kk + r[d] + (heavy[t] ? 2.0f * u[d] : 0.0f);
                x->k[i] = kk;
                x->v[i] = sym();
            }
    }
    for (uint32_t t = 0; t < n + m; t++) {
        float *q = t < n ? x->qp + (size_t)t * HQ * D : x->qd + (size_t)(t - n) * HQ * D;
        topic(a, b, t, r);
        for (int h = 0; h < HQ; h++)
            for (int d = 0; d < D; d++) {
                float qq = sym();
                if (structured)
                    qq = 0.3f * qq + 4.0f * r[d] + 4.0f * u[d];
                q[h * D + d] = qq;
            }
    }
    free(heavy);
}

static void unmake(data *x)
{
    free(x->k);
    free(x->v);
    free(x->qp);
    free(x->qd);
}

typedef struct req {
    uint32_t pages[4096], np, n;
} req;

static void load(rkv_pool *pool, rkv_attn *attn, const data *x, req *r)
{
    r->n = x->n;
    r->np = (x->n + P - 1) / P;
    TRY("alloc", rkv_pool_alloc_n(pool, r->np, r->pages));
    uint32_t *slots = xcalloc(x->n, sizeof *slots);
    for (uint32_t t = 0; t < x->n; t++)
        slots[t] = r->pages[t / P] * P + t % P;
    TRY("append", rkv_attn_append(attn, 0, x->n, slots, x->k, x->v));
    free(slots);
}

static void decode_all(rkv_attn *attn, const data *x, const req *r, float *out)
{
    uint32_t indptr[2] = {0, r->np}, last = r->n - (r->np - 1) * P;
    rkv_paged_kv kv = {1, indptr, r->pages, &last};
    rkv_attn_params p = {0, HQ, 0.0f, 0, 0};
    for (uint32_t s = 0; s < x->m; s++)
        TRY("decode", rkv_attn_decode(attn, &p, &kv, x->qd + (size_t)s * HQ * D,
                                      out + (size_t)s * HQ * D, NULL));
}

enum { M_STREAM, M_H2O, M_SNAP, M_RANDOM, NMETHODS };
static const char *const mname[NMETHODS] = {"StreamingLLM", "H2O", "SnapKV", "random"};

/* keep[] for method at budget b (tokens kept). */
static void choose(rkv_attn *attn, const data *x, const req *r, int method,
                   uint32_t b, uint8_t *keep)
{
    uint32_t n = x->n;
    uint32_t indptr[2] = {0, r->np}, last = n - (r->np - 1) * P;
    rkv_paged_kv kv = {1, indptr, r->pages, &last};
    rkv_attn_params p = {0, HQ, 0.0f, 0, 0};
    float *w = xcalloc(n, sizeof *w);
    switch (method) {
    case M_STREAM:
        for (uint32_t t = 0; t < n; t++)
            keep[t] = t < 4 || t >= n - (b - 4);
        break;
    case M_H2O: /* the prompt's cumulative attention (every row) */
        TRY("weights", rkv_attn_key_weights(attn, &p, &kv, n, x->qp, w));
        rkv_kv_select_h2o(w, n, 0, b / 2, b - b / 2, keep);
        break;
    case M_SNAP: { /* the last 32 prompt rows vote */
        uint32_t obs = 32 < b / 2 ? 32 : b / 2;
        TRY("weights", rkv_attn_key_weights(attn, &p, &kv, obs,
                                            x->qp + (size_t)(n - obs) * HQ * D, w));
        rkv_kv_select_snapkv(w, n, 0, b - obs, obs, 7, keep);
        break;
    }
    default: {
        memset(keep, 0, n);
        uint32_t got = 0;
        while (got < b) {
            uint32_t t = (uint32_t)(unit() * n);
            if (!keep[t]) {
                keep[t] = 1;
                got++;
            }
        }
    }
    }
    free(w);
}

static void run(const char *title, int structured, uint32_t n, uint32_t m)
{
    data x;
    make(&x, n, m, structured);
    rkv_pool_config pc = tu_kv_config(3 * ((n + P - 1) / P) + 4, P, 1, HKV, D, RKV_DEVICE_HOST);
    pc.dtype = RKV_DTYPE_F32;
    rkv_pool *pool;
    rkv_attn *attn;
    TRY("pool", rkv_pool_create(&pc, &pool));
    TRY("attn", rkv_attn_create(pool, &attn));
    req full, r;
    load(pool, attn, &x, &full);
    float *of = xcalloc((size_t)m * HQ * D, sizeof(float));
    float *oe = xcalloc((size_t)m * HQ * D, sizeof(float));
    decode_all(attn, &x, &full, of);
    uint8_t *keep = xcalloc(n, 1);
    printf("\n%s: %u prompt tokens, %u decode queries; relative L2 error of "
           "the output, mean / max over (query, head)\n", title, n, m);
    printf("%-14s", "kept");
    for (int me = 0; me < NMETHODS; me++)
        printf(" %21s", mname[me]);
    printf("\n");
    static const uint32_t frac[] = {16, 8, 4, 2};
    for (int fi = 0; fi < 4; fi++) {
        uint32_t b = n / frac[fi];
        printf("1/%-2u (%5u)   ", frac[fi], b);
        for (int me = 0; me < NMETHODS; me++) {
            choose(attn, &x, &full, me, b, keep);
            load(pool, attn, &x, &r);
            TRY("compact", rkv_kv_compact(attn, r.pages, &r.np, &r.n, keep, NULL));
            decode_all(attn, &x, &r, oe);
            double sum = 0, mx = 0;
            for (size_t i = 0; i < (size_t)m * HQ; i++) {
                double e = 0, f = 0;
                for (int d = 0; d < D; d++) {
                    double dd = oe[i * D + d] - of[i * D + d];
                    e += dd * dd;
                    f += (double)of[i * D + d] * of[i * D + d];
                }
                double rel = sqrt(e / (f > 0 ? f : 1e-30));
                sum += rel;
                mx = rel > mx ? rel : mx;
            }
            printf(" %10.4f / %8.4f", sum / ((double)m * HQ), mx);
            TRY("unref", rkv_pool_unref_n(pool, r.np, r.pages));
        }
        printf("\n");
    }
    TRY("unref", rkv_pool_unref_n(pool, full.np, full.pages));
    free(keep);
    free(of);
    free(oe);
    rkv_attn_destroy(attn);
    rkv_pool_destroy(pool);
    unmake(&x);
}

int main(int argc, char **argv)
{
    uint64_t n = 1024, m = 32, seed = 1;
    for (int i = 1; i < argc; i++) {
        uint64_t *dst = strcmp(argv[i], "--tokens") == 0  ? &n
                        : strcmp(argv[i], "--steps") == 0 ? &m
                        : strcmp(argv[i], "--seed") == 0  ? &seed
                                                          : NULL;
        if (dst == NULL || i + 1 >= argc || !rkv_bench_parse_u64(argv[++i], dst) ||
            (dst != &seed && (*dst == 0 || *dst > 65536))) {
            fprintf(stderr, "usage: kv_evict_bench [--tokens N (64..65536)] "
                            "[--steps M] [--seed S]\n");
            return 2;
        }
    }
    if (n < 64) {
        fprintf(stderr, "kv_evict_bench: --tokens must be >= 64\n");
        return 2;
    }
    rs = seed * 0x9E3779B97F4A7C15ull | 1;
    run("random K/V", 0, (uint32_t)n, (uint32_t)m);
    run("structured K/V (heavy hitters + drifting topic)", 1, (uint32_t)n, (uint32_t)m);
    return 0;
}

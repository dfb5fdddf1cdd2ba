/*
 * examples/serve_loop.c -- the scheduler API driving a real (tiny) model.
 *
 * A deterministic transformer (3 layers, model width 64, 4 query heads
 * sharing 2 KV heads of 16 dims, fixed pseudo-random weights) runs on the
 * CPU attention path: its K and V live in a host pool, written by
 * rkv_attn_append and read by rkv_attn_prefill through the scheduler's
 * block tables. The server loop is what an engine does:
 *
 *   submit   requests as they arrive (a follow-up turn once the previous
 *            turn of its conversation finished);
 *   step     for a batch plan (prefill chunks and decodes);
 *   run      the model over the plan's tokens; sample greedily;
 *   commit   the sampled tokens (and EOS);
 *   query    rkv_sched_request_info for each planned request: the ones
 *            that finished are returned to their clients.
 *
 * Six conversations of two turns share a system prompt. The workload runs
 * twice: with the cache, and without it (every request in a namespace of
 * its own, so nothing is ever shared). Every sampled token and the bits of
 * every logit vector must be the same in both runs -- reusing cached KV
 * must not change a single output -- and the program prints how much real
 * prefill time the cache saved. Exit status: 0 when the outputs are equal
 * and every call succeeded, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <radixkv.h>

#define EXAMPLE_NAME "serve_loop"
#include "check.h"

/* ---- the model --------------------------------------------------------- */

enum {
    VOCAB = 256,
    DIM = 64,          /* model width                                     */
    LAYERS = 3,
    QO_HEADS = 4,
    KV_HEADS = 2,      /* grouped-query attention: 2 query heads per KV  */
    HEAD_DIM = 16,
    FFN = 128,
    EOS = 0,           /* sampling it ends the request                    */
    MAX_BATCH = 128    /* tokens per step: long prompts take two chunks   */
};

typedef struct layer_w {
    float wq[DIM * QO_HEADS * HEAD_DIM];
    float wk[DIM * KV_HEADS * HEAD_DIM];
    float wv[DIM * KV_HEADS * HEAD_DIM];
    float wo[QO_HEADS * HEAD_DIM * DIM];
    float w1[DIM * FFN];
    float w2[FFN * DIM];
} layer_w;

typedef struct model {
    float emb[VOCAB * DIM];
    float unembed[DIM * VOCAB];
    layer_w layer[LAYERS];
} model;

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n weights uniform in [-1, 1) / sqrt(fan_in), from (seed, i) only. */
static void init_weights(float *w, size_t n, size_t fan_in, uint64_t seed)
{
    float scale = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < n; i++) {
        double u = (double)(mix64(seed * 0x100000001B3ull + i) >> 11) /
                   9007199254740992.0;
        w[i] = (float)(2.0 * u - 1.0) * scale;
    }
}

static void model_init(model *m)
{
    init_weights(m->emb, VOCAB * DIM, 1, 1);
    init_weights(m->unembed, DIM * VOCAB, DIM, 2);
    for (int l = 0; l < LAYERS; l++) {
        layer_w *w = &m->layer[l];
        uint64_t s = 100 + 10 * (uint64_t)l;
        init_weights(w->wq, sizeof w->wq / sizeof *w->wq, DIM, s + 1);
        init_weights(w->wk, sizeof w->wk / sizeof *w->wk, DIM, s + 2);
        init_weights(w->wv, sizeof w->wv / sizeof *w->wv, DIM, s + 3);
        init_weights(w->wo, sizeof w->wo / sizeof *w->wo, QO_HEADS * HEAD_DIM,
                     s + 4);
        init_weights(w->w1, sizeof w->w1 / sizeof *w->w1, DIM, s + 5);
        init_weights(w->w2, sizeof w->w2 / sizeof *w->w2, FFN, s + 6);
    }
}

/* y[n][out] (+)= x[n][in] . w[in][out] */
static void matmul(float *y, const float *x, const float *w, uint32_t n,
                   uint32_t in, uint32_t out, int accumulate)
{
    for (uint32_t r = 0; r < n; r++) {
        float *yr = y + (size_t)r * out;
        if (!accumulate)
            memset(yr, 0, out * sizeof *yr);
        for (uint32_t i = 0; i < in; i++) {
            float xi = x[(size_t)r * in + i];
            const float *wi = w + (size_t)i * out;
            for (uint32_t o = 0; o < out; o++)
                yr[o] += xi * wi[o];
        }
    }
}

static void rms_norm(float *y, const float *x, uint32_t n)
{
    for (uint32_t r = 0; r < n; r++) {
        float ss = 0.0f;
        for (uint32_t d = 0; d < DIM; d++)
            ss += x[r * DIM + d] * x[r * DIM + d];
        float k = 1.0f / sqrtf(ss / DIM + 1e-6f);
        for (uint32_t d = 0; d < DIM; d++)
            y[r * DIM + d] = x[r * DIM + d] * k;
    }
}

/* Activations for up to MAX_BATCH rows. */
typedef struct acts {
    float x[MAX_BATCH * DIM], h[MAX_BATCH * DIM];
    float q[MAX_BATCH * QO_HEADS * HEAD_DIM];
    float o[MAX_BATCH * QO_HEADS * HEAD_DIM];
    float k[MAX_BATCH * KV_HEADS * HEAD_DIM];
    float v[MAX_BATCH * KV_HEADS * HEAD_DIM];
    float u[MAX_BATCH * FFN];
    uint32_t qo[MAX_BATCH + 1], kv_indptr[MAX_BATCH + 1];
} acts;

/*
 * Runs the model over plan requests [r0, r1): their new tokens sit at
 * positions prefix_len[r] ..; their K and V are appended at the plan's
 * slots, then every row attends to its request's whole KV (the cached
 * prefix, earlier chunks, and causally its own chunk). Writes the logits of
 * each request's last row to logits[r] (VOCAB floats) for requests that
 * sample a token.
 */
static int forward(const model *m, rkv_attn *attn, const rkv_batch_plan *pl,
                   uint32_t r0, uint32_t r1, acts *a, float *logits)
{
    if (r0 == r1)
        return 0;
    const uint32_t row0 = pl->qo_indptr[r0];
    const uint32_t n = pl->qo_indptr[r1] - row0;
    /* the requests' slice of the plan, re-based to start at 0 */
    for (uint32_t r = r0; r <= r1; r++) {
        a->qo[r - r0] = pl->qo_indptr[r] - row0;
        a->kv_indptr[r - r0] = pl->kv_indptr[r] - pl->kv_indptr[r0];
    }
    rkv_paged_kv kv = {r1 - r0, a->kv_indptr,
                       pl->kv_indices + pl->kv_indptr[r0],
                       pl->kv_last_page_len + r0};
    /* embedding plus a sinusoidal position code */
    for (uint32_t r = r0; r < r1; r++) {
        for (uint32_t j = pl->qo_indptr[r]; j < pl->qo_indptr[r + 1]; j++) {
            uint32_t pos = pl->prefix_len[r] + (j - pl->qo_indptr[r]);
            const float *e = m->emb + (size_t)pl->input_tokens[j] * DIM;
            float *x = a->x + (size_t)(j - row0) * DIM;
            for (uint32_t d = 0; d < DIM; d++) {
                float f = powf(10000.0f, -(float)(d & ~1u) / DIM);
                x[d] = e[d] + ((d & 1) ? cosf((float)pos * f)
                                       : sinf((float)pos * f));
            }
        }
    }
    for (uint32_t l = 0; l < LAYERS; l++) {
        const layer_w *w = &m->layer[l];
        rms_norm(a->h, a->x, n);
        matmul(a->q, a->h, w->wq, n, DIM, QO_HEADS * HEAD_DIM, 0);
        matmul(a->k, a->h, w->wk, n, DIM, KV_HEADS * HEAD_DIM, 0);
        matmul(a->v, a->h, w->wv, n, DIM, KV_HEADS * HEAD_DIM, 0);
        CHECK(rkv_attn_append(attn, l, n, pl->slots + row0, a->k, a->v));
        rkv_attn_params p = {l, QO_HEADS, 0.0f, 0, 0};
        CHECK(rkv_attn_prefill(attn, &p, a->qo, &kv, a->q, a->o, NULL));
        matmul(a->x, a->o, w->wo, n, QO_HEADS * HEAD_DIM, DIM, 1);
        rms_norm(a->h, a->x, n);
        matmul(a->u, a->h, w->w1, n, DIM, FFN, 0);
        for (uint32_t i = 0; i < n * FFN; i++)
            a->u[i] = a->u[i] > 0.0f ? a->u[i] : 0.0f;
        matmul(a->x, a->u, w->w2, n, FFN, DIM, 1);
    }
    for (uint32_t r = r0; r < r1; r++) {
        if (!pl->emits_token[r])
            continue;
        uint32_t last = pl->qo_indptr[r + 1] - 1 - row0; /* its last row */
        const float *x = a->x + (size_t)last * DIM;
        float h[DIM];
        rms_norm(h, x, 1);
        matmul(logits + (size_t)r * VOCAB, h, m->unembed, 1, DIM, VOCAB, 0);
    }
    return 0;
}

/* ---- the workload ------------------------------------------------------ */

enum {
    CONVS = 6,
    TURNS = 2,
    SYSTEM_LEN = 120,
    MAX_NEW = 12,
    MAX_PROMPT = SYSTEM_LEN + TURNS * (40 + MAX_NEW),
    NREQ = CONVS * TURNS
};

/* What one run produced, per request (id = conversation * TURNS + turn). */
typedef struct outputs {
    int32_t tokens[NREQ][MAX_NEW];
    uint32_t generated[NREQ];
    uint64_t logit_hash[NREQ]; /* FNV-1a over the bits of every logit    */
    rkv_request_info info[NREQ];
    double prefill_ms, decode_ms;
    uint64_t prefill_tokens, steps;
} outputs;

static int32_t token_of(uint64_t stream, uint32_t i)
{
    return (int32_t)(mix64(stream * 7919 + i) % (VOCAB - 1)) + 1; /* no EOS */
}

/* The user's question of turn t of conversation c: 12..39 tokens. */
static uint32_t question(uint32_t c, uint32_t t, int32_t *out)
{
    uint32_t n = 12 + (uint32_t)(mix64(c * 31 + t) % 28);
    for (uint32_t i = 0; i < n; i++)
        out[i] = token_of(1000 + c * 10 + t, i);
    return n;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

typedef struct server {
    const model *m;
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *sched;
    rkv_attn *attn;
    int use_cache;
    acts *a;
    float *logits;                           /* [MAX_BATCH][VOCAB]        */
    int32_t history[CONVS][MAX_PROMPT + MAX_NEW]; /* each conversation    */
    uint32_t history_len[CONVS];
} server;

/* Submits turn t of conversation c: everything said so far + a question. */
static int submit_turn(server *sv, uint32_t c, uint32_t t, double now)
{
    int32_t *h = sv->history[c];
    sv->history_len[c] += question(c, t, h + sv->history_len[c]);
    uint64_t id = (uint64_t)c * TURNS + t;
    rkv_request_desc d;
    memset(&d, 0, sizeof d);
    d.id = id;
    /* without the cache every request is alone in its namespace */
    d.ns = sv->use_cache ? 0 : 1 + id;
    d.prompt = h;
    d.prompt_len = sv->history_len[c];
    d.max_new_tokens = MAX_NEW;
    d.arrival_ms = now;
    CHECK(rkv_sched_submit(sv->sched, &d));
    return 0;
}

/* ANCHOR: loop */
static int serve(server *sv, outputs *out)
{
    for (uint32_t c = 0; c < CONVS; c++)
        if (submit_turn(sv, c, 0, 0.0) != 0)
            return 1;
    uint32_t live = CONVS;
    int32_t next[MAX_BATCH];
    uint8_t finished[MAX_BATCH];
    for (uint64_t step = 1; live > 0; step++) {
        double step_no = (double)step; /* the scheduler's clock: steps */
        const rkv_batch_plan *pl;
        CHECK(rkv_sched_step(sv->sched, step_no, &pl));
        if (pl->num_reqs == 0) {
            fprintf(stderr, "serve_loop: nothing runnable, %u live\n", live);
            return 1;
        }
        /* prefill chunks first, then decodes; timed apart */
        double t0 = now_ms();
        if (forward(sv->m, sv->attn, pl, 0, pl->num_prefill, sv->a,
                    sv->logits) != 0)
            return 1;
        double t1 = now_ms();
        if (forward(sv->m, sv->attn, pl, pl->num_prefill, pl->num_reqs, sv->a,
                    sv->logits) != 0)
            return 1;
        out->prefill_ms += t1 - t0;
        out->decode_ms += now_ms() - t1;
        out->prefill_tokens += pl->qo_indptr[pl->num_prefill];
        out->steps++;
        /* greedy sampling */
        for (uint32_t r = 0; r < pl->num_reqs; r++) {
            next[r] = 0;
            finished[r] = 0;
            if (!pl->emits_token[r])
                continue;
            const float *lg = sv->logits + (size_t)r * VOCAB;
            int32_t best = 0;
            for (int32_t t = 1; t < VOCAB; t++)
                if (lg[t] > lg[best])
                    best = t;
            next[r] = best;
            finished[r] = best == EOS;
            uint64_t id = pl->req_ids[r];
            out->tokens[id][out->generated[id]++] = best;
            out->logit_hash[id] = fnv(out->logit_hash[id], lg,
                                      VOCAB * sizeof *lg);
        }
        /* the plan is invalid after the commit: keep its ids */
        uint64_t ids[MAX_BATCH];
        uint32_t n = pl->num_reqs;
        memcpy(ids, pl->req_ids, n * sizeof *ids);
        CHECK(rkv_sched_commit(sv->sched, next, finished, step_no));
        CHECK(rkv_sched_check(sv->sched)); /* cheap at this size */

        /* which requests finished? (queryable until the next step) */
        for (uint32_t r = 0; r < n; r++) {
            rkv_request_info info;
            CHECK(rkv_sched_request_info(sv->sched, ids[r], &info));
            if (info.state != RKV_REQ_FINISHED)
                continue;
            out->info[ids[r]] = info;
            live--;
            uint32_t c = (uint32_t)(ids[r] / TURNS);
            uint32_t t = (uint32_t)(ids[r] % TURNS);
            /* the answer joins the conversation; the user asks again */
            memcpy(sv->history[c] + sv->history_len[c], out->tokens[ids[r]],
                   info.generated_tokens * sizeof(int32_t));
            sv->history_len[c] += info.generated_tokens;
            if (t + 1 < TURNS) {
                if (submit_turn(sv, c, t + 1, step_no) != 0)
                    return 1;
                live++;
            }
        }
    }
    return 0;
}
/* ANCHOR_END: loop */

static int run(const model *m, int use_cache, outputs *out)
{
    memset(out, 0, sizeof *out);
    static server sv;
    memset(&sv, 0, sizeof sv);
    sv.m = m;
    sv.use_cache = use_cache;
    for (uint32_t i = 0; i < NREQ; i++)
        out->logit_hash[i] = 1469598103934665603ull;
    for (uint32_t c = 0; c < CONVS; c++) { /* the shared system prompt */
        for (uint32_t i = 0; i < SYSTEM_LEN; i++)
            sv.history[c][i] = token_of(1, i);
        sv.history_len[c] = SYSTEM_LEN;
    }
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 256;
    pc.page_size = 16;
    pc.num_layers = LAYERS;
    pc.num_kv_heads = KV_HEADS;
    pc.head_dim = HEAD_DIM;
    pc.dtype = RKV_DTYPE_F32;
    pc.device = RKV_DEVICE_HOST; /* the CPU attention path */
    rkv_sched_config sc;
    rkv_sched_config_init(&sc);
    sc.max_batch_tokens = MAX_BATCH;
    sc.max_running = MAX_BATCH;
    sv.a = malloc(sizeof *sv.a);
    sv.logits = malloc((size_t)MAX_BATCH * VOCAB * sizeof *sv.logits);
    int rc = 1;
    rkv_status st;
    if (sv.a == NULL || sv.logits == NULL)
        fprintf(stderr, "serve_loop: out of memory\n");
    else if ((st = rkv_pool_create(&pc, &sv.pool)) != RKV_OK)
        failed("rkv_pool_create", st);
    else if ((st = rkv_tree_create(sv.pool, NULL, &sv.tree)) != RKV_OK)
        failed("rkv_tree_create", st);
    else if ((st = rkv_sched_create(sv.tree, &sc, &sv.sched)) != RKV_OK)
        failed("rkv_sched_create", st);
    else if ((st = rkv_attn_create(sv.pool, &sv.attn)) != RKV_OK)
        failed("rkv_attn_create", st);
    else
        rc = serve(&sv, out);
    rkv_attn_destroy(sv.attn);
    rkv_sched_destroy(sv.sched);
    rkv_tree_destroy(sv.tree);
    rkv_pool_destroy(sv.pool);
    free(sv.a);
    free(sv.logits);
    return rc;
}

static const char *finish_name(rkv_finish_reason f)
{
    switch (f) {
    case RKV_FINISH_STOP: return "eos";
    case RKV_FINISH_LENGTH: return "length";
    case RKV_FINISH_ABORT: return "abort";
    case RKV_FINISH_NONE: break;
    }
    return "-";
}

int main(void)
{
    static model m;
    static outputs cached, uncached;
    model_init(&m);
    if (run(&m, 1, &cached) != 0 || run(&m, 0, &uncached) != 0)
        return 1;
    int same = 1;
    printf("request  prompt  cached  generated  finish  output\n");
    for (uint32_t id = 0; id < NREQ; id++) {
        const rkv_request_info *a = &cached.info[id], *b = &uncached.info[id];
        int eq = cached.generated[id] == uncached.generated[id] &&
                 memcmp(cached.tokens[id], uncached.tokens[id],
                        cached.generated[id] * sizeof(int32_t)) == 0 &&
                 cached.logit_hash[id] == uncached.logit_hash[id] &&
                 a->finish == b->finish;
        if (!eq || b->cached_tokens != 0 || a->state != RKV_REQ_FINISHED)
            same = 0;
        printf("%7u  %6u  %6u  %9u  %6s  %s", id, a->prompt_len,
               a->cached_tokens, a->generated_tokens, finish_name(a->finish),
               eq ? "same as without cache:" : "DIFFERS from no-cache run:");
        for (uint32_t i = 0; i < cached.generated[id]; i++)
            printf(" %d", (int)cached.tokens[id][i]);
        printf("\n");
    }
    printf("prefill with the cache:    %6" PRIu64 " tokens, %8.2f ms "
           "(%" PRIu64 " steps)\n",
           cached.prefill_tokens, cached.prefill_ms, cached.steps);
    printf("prefill without the cache: %6" PRIu64 " tokens, %8.2f ms "
           "(%" PRIu64 " steps)\n",
           uncached.prefill_tokens, uncached.prefill_ms, uncached.steps);
    printf("the cache saved %" PRIu64 " prefill tokens and %.2f ms of prefill "
           "time (%.0f%%); decode took %.2f vs %.2f ms\n",
           uncached.prefill_tokens - cached.prefill_tokens,
           uncached.prefill_ms - cached.prefill_ms,
           100.0 * (uncached.prefill_ms - cached.prefill_ms) /
               uncached.prefill_ms,
           cached.decode_ms, uncached.decode_ms);
    if (!same) {
        fprintf(stderr, "serve_loop: outputs with the cache differ from the "
                        "outputs without it\n");
        return 1;
    }
    printf("outputs with the cache are identical to those without it\n");
    return 0;
}

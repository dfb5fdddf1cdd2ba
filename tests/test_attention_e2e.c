/*
 * tests/test_attention_e2e.c -- end to end on the CPU: the scheduler's batch
 * plans for a small workload (shared prefixes, several requests arriving
 * over time, chunked prefill, decode steps, cache hits on finished turns)
 * fed to append + prefill (prefill requests) + decode (decode requests) with
 * a deterministic fake model, give the same attention outputs, bit for bit,
 * as computing every request from scratch with no cache.
 *
 * The fake model: q, k, v of a token at a position in a layer are pseudo-
 * random values derived from (token id, position, layer) only, so a cached
 * prefix holds exactly the KV the request would have computed itself. The
 * CPU reference computes each row independently of the batch around it, in
 * the same order, so exact reuse means identical bits (memcmp), for f32 and
 * for bf16 KV.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

#define NL 2u
#define HKV 2u
#define HQ 4u
#define HD 32u
#define PG 4u
#define NREQ 10u
#define MAXLEN 256u

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* element e of kind (0 q, 1 k, 2 v) for (token, pos, layer) */
static float fake(uint64_t seed, int32_t tok, uint32_t pos, uint32_t layer, uint32_t kind,
                  uint32_t e)
{
    uint64_t h = mix(seed ^ mix(((uint64_t)(uint32_t)tok << 32) ^ pos) ^
                     mix(((uint64_t)layer << 40) ^ ((uint64_t)kind << 32) ^ e));
    return (float)((double)(h >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

static void put(rkv_dtype dt, void *p, size_t i, float x)
{
    if (dt == RKV_DTYPE_F32)
        ((float *)p)[i] = x;
    else
        ((uint16_t *)p)[i] = rkv_f32_to_bf16(x);
}

/* rows [n][heads*HD] of kind for tokens/positions */
static void fake_rows(uint64_t seed, rkv_dtype dt, const int32_t *tok, const uint32_t *pos,
                      uint32_t n, uint32_t layer, uint32_t kind, uint32_t heads, void *out)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t e = 0; e < heads * HD; e++)
            put(dt, out, (size_t)i * heads * HD + e, fake(seed, tok[i], pos[i], layer, kind, e));
}

typedef struct hist {
    int32_t tok[MAXLEN];
    uint32_t len;
} hist;

/* From scratch: a fresh pool holding only this request's KV for positions
 * 0..kv_len-1, then prefill of its q_len newest rows. */
static void scratch_rows(uint64_t seed, rkv_dtype dt, const hist *h, uint32_t kv_len,
                         uint32_t q_len, uint32_t layer, const void *q, void *out, float *lse)
{
    rkv_pool_config pc = tu_kv_config((kv_len + PG - 1) / PG, PG, NL,
                                      HKV, HD, RKV_DEVICE_HOST);
    pc.dtype = dt;
    rkv_pool *pool;
    rkv_attn *a;
    OK(rkv_pool_create(&pc, &pool));
    OK(rkv_attn_create(pool, &a));
    uint32_t *ids = malloc(4 * pc.num_blocks), *slots = malloc(4 * kv_len);
    uint32_t *pos = malloc(4 * kv_len);
    size_t es = dt == RKV_DTYPE_F32 ? 4 : 2;
    void *k = malloc((size_t)kv_len * HKV * HD * es), *v = malloc((size_t)kv_len * HKV * HD * es);
    cr_assert(ids && slots && pos && k && v);
    OK(rkv_pool_alloc_n(pool, pc.num_blocks, ids));
    for (uint32_t t = 0; t < kv_len; t++) {
        slots[t] = ids[t / PG] * PG + t % PG;
        pos[t] = t;
    }
    fake_rows(seed, dt, h->tok, pos, kv_len, layer, 1, HKV, k);
    fake_rows(seed, dt, h->tok, pos, kv_len, layer, 2, HKV, v);
    OK(rkv_attn_append(a, layer, kv_len, slots, k, v));
    uint32_t indptr[2] = {0, pc.num_blocks}, last[1] = {kv_len - (pc.num_blocks - 1) * PG};
    uint32_t qo[2] = {0, q_len};
    rkv_paged_kv t = {1, indptr, ids, last};
    rkv_attn_params p = {layer, HQ, 0.0f, 0, 0};
    OK(rkv_attn_prefill(a, &p, qo, &t, q, out, lse));
    free(ids);
    free(slots);
    free(pos);
    free(k);
    free(v);
    rkv_attn_destroy(a);
    rkv_pool_destroy(pool);
}

static void run_workload(const char *name, rkv_dtype dt)
{
    uint64_t seed = rkv_test_seed(name);
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    const size_t es = dt == RKV_DTYPE_F32 ? 4 : 2;
    rkv_pool_config pc = tu_kv_config(400, PG, NL, HKV, HD, RKV_DEVICE_HOST);
    pc.dtype = dt;
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *s;
    rkv_attn *attn;
    OK(rkv_pool_create(&pc, &pool));
    OK(rkv_tree_create(pool, NULL, &tree));
    rkv_sched_config sc;
    rkv_sched_config_init(&sc);
    sc.max_batch_tokens = 24; /* forces chunked prefill */
    sc.max_running = 6;
    sc.dedup_min_tokens = 8;
    OK(rkv_sched_create(tree, &sc, &s));
    OK(rkv_attn_create(pool, &attn));

    /* two shared system prompts; requests 6.. extend earlier requests' prompts */
    int32_t sys[2][30];
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < 30; i++)
            sys[g][i] = (int32_t)rkv_rng_below(&rng, 1000);
    hist *H = calloc(NREQ, sizeof *H);
    uint32_t max_new[NREQ];
    double arrive[NREQ];
    cr_assert(H);
    for (uint32_t r = 0; r < NREQ; r++) {
        uint32_t sl = 17 + (uint32_t)rkv_rng_below(&rng, 14);
        const int32_t *base = sys[r % 2];
        if (r >= 6) /* agentic: the previous turn's prompt plus new tokens */
            base = H[r - 6].tok, sl = H[r - 6].len;
        memcpy(H[r].tok, base, sl * 4);
        H[r].len = sl;
        uint32_t extra = 1 + (uint32_t)rkv_rng_below(&rng, 20);
        for (uint32_t i = 0; i < extra; i++)
            H[r].tok[H[r].len++] = (int32_t)rkv_rng_below(&rng, 1000);
        max_new[r] = 2 + (uint32_t)rkv_rng_below(&rng, 5);
        arrive[r] = r < 6 ? 0.0 : 40.0 + r;
    }
    uint32_t submitted = 0, plans_checked = 0, decode_rows = 0, chunked = 0;
    double now = 0;
    size_t qcap = (size_t)64 * HQ * HD * es;
    void *q = malloc(qcap), *out = malloc(qcap), *ref = malloc(qcap);
    void *k = malloc(qcap), *v = malloc(qcap);
    float *lse = malloc(64 * HQ * 4), *rlse = malloc(64 * HQ * 4);
    cr_assert(q && out && ref && k && v && lse && rlse);
    for (int step = 0; step < 2000; step++) {
        while (submitted < NREQ && arrive[submitted] <= now) {
            rkv_request_desc d = {.id = submitted,
                                  .prompt = H[submitted].tok,
                                  .prompt_len = H[submitted].len,
                                  .max_new_tokens = max_new[submitted],
                                  .arrival_ms = now};
            OK(rkv_sched_submit(s, &d));
            submitted++;
        }
        const rkv_batch_plan *pl;
        OK(rkv_sched_step(s, now, &pl));
        OK(rkv_sched_check(s));
        if (pl->num_reqs == 0) {
            rkv_sched_stats st;
            OK(rkv_sched_get_stats(s, &st));
            if (submitted == NREQ && st.finished == NREQ)
                break;
            now += 1.0;
            continue;
        }
        cr_assert(pl->num_tokens <= 64);
        uint32_t *pos = malloc(4 * pl->num_tokens);
        cr_assert(pos);
        for (uint32_t r = 0; r < pl->num_reqs; r++) {
            uint64_t id = pl->req_ids[r];
            for (uint32_t i = pl->qo_indptr[r]; i < pl->qo_indptr[r + 1]; i++) {
                pos[i] = pl->prefix_len[r] + (i - pl->qo_indptr[r]);
                cr_assert(pos[i] < H[id].len, "row past the request's tokens");
                cr_assert_eq(pl->input_tokens[i], H[id].tok[pos[i]]);
            }
            if (r < pl->num_prefill && (pl->prefix_len[r] > pl->cached_len[r]))
                chunked++;
        }
        for (uint32_t l = 0; l < NL; l++) {
            fake_rows(seed, dt, pl->input_tokens, pos, pl->num_tokens, l, 0, HQ, q);
            fake_rows(seed, dt, pl->input_tokens, pos, pl->num_tokens, l, 1, HKV, k);
            fake_rows(seed, dt, pl->input_tokens, pos, pl->num_tokens, l, 2, HKV, v);
            OK(rkv_attn_append(attn, l, pl->num_tokens, pl->slots, k, v));
            memset(out, 0xff, qcap);
            rkv_attn_params p = {l, HQ, 0.0f, 0, 0};
            uint32_t np = pl->num_prefill, nd = pl->num_reqs - np;
            if (np > 0) {
                rkv_paged_kv t = {np, pl->kv_indptr, pl->kv_indices, pl->kv_last_page_len};
                OK(rkv_attn_prefill(attn, &p, pl->qo_indptr, &t, q, out, lse));
            }
            if (nd > 0) {
                /* decode requests: their table rebased to start at 0 */
                uint32_t *ip = malloc(4 * (nd + 1));
                cr_assert(ip);
                for (uint32_t r = 0; r <= nd; r++)
                    ip[r] = pl->kv_indptr[np + r] - pl->kv_indptr[np];
                for (uint32_t r = np; r < pl->num_reqs; r++)
                    cr_assert_eq(pl->qo_indptr[r + 1] - pl->qo_indptr[r], 1u);
                rkv_paged_kv t = {nd, ip, pl->kv_indices + pl->kv_indptr[np],
                                  pl->kv_last_page_len + np};
                size_t row0 = pl->qo_indptr[np];
                OK(rkv_attn_decode(attn, &p, &t, (char *)q + row0 * HQ * HD * es,
                                   (char *)out + row0 * HQ * HD * es, lse + row0 * HQ));
                free(ip);
                decode_rows += nd;
            }
            /* every request from scratch */
            for (uint32_t r = 0; r < pl->num_reqs; r++) {
                uint64_t id = pl->req_ids[r];
                uint32_t r0 = pl->qo_indptr[r], qn = pl->qo_indptr[r + 1] - r0;
                uint32_t kvl = pl->prefix_len[r] + qn;
                size_t off = (size_t)r0 * HQ * HD * es;
                scratch_rows(seed, dt, &H[id], kvl, qn, l, (char *)q + off, ref, rlse);
                cr_assert(memcmp((char *)out + off, ref, (size_t)qn * HQ * HD * es) == 0,
                          "step %d layer %u request %llu: output differs from scratch", step,
                          l, (unsigned long long)id);
                cr_assert(memcmp(lse + (size_t)r0 * HQ, rlse, (size_t)qn * HQ * 4) == 0,
                          "lse differs from scratch");
            }
        }
        free(pos);
        plans_checked++;
        /* sample: depends only on (seed, id, length) */
        int32_t *next = calloc(pl->num_reqs, 4);
        cr_assert(next);
        for (uint32_t r = 0; r < pl->num_reqs; r++) {
            uint64_t id = pl->req_ids[r];
            if (pl->emits_token[r]) {
                next[r] = (int32_t)(mix(seed ^ (id << 20) ^ H[id].len) % 1000);
                cr_assert(H[id].len < MAXLEN);
            }
        }
        /* record the sampled tokens before the plan goes stale */
        uint64_t *ids = malloc(8 * pl->num_reqs);
        uint8_t *em = malloc(pl->num_reqs);
        uint32_t nr = pl->num_reqs;
        cr_assert(ids && em);
        memcpy(ids, pl->req_ids, 8 * nr);
        memcpy(em, pl->emits_token, nr);
        OK(rkv_sched_commit(s, next, NULL, now));
        OK(rkv_sched_check(s));
        for (uint32_t r = 0; r < nr; r++)
            if (em[r])
                H[ids[r]].tok[H[ids[r]].len++] = next[r];
        free(ids);
        free(em);
        free(next);
        now += 1.0;
    }
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(s, &st));
    cr_assert_eq(st.finished, NREQ, "workload did not finish");
    cr_assert(st.cached_tokens > 0, "no prefix was reused: the test would prove nothing");
    cr_assert(decode_rows > 0);
    cr_assert_gt(chunked, 0, "%s: max_batch_tokens 24 must chunk the prompts", name);
    cr_log_info("%s: %u plans, %u decode rows, %llu cached tokens, %u chunked prefill "
                "chunks, all bit-identical to scratch",
                name, plans_checked, decode_rows, (unsigned long long)st.cached_tokens,
                chunked);
    free(q);
    free(out);
    free(ref);
    free(k);
    free(v);
    free(lse);
    free(rlse);
    free(H);
    OK(rkv_attn_check(attn));
    rkv_attn_destroy(attn);
    rkv_sched_destroy(s);
    rkv_tree_destroy(tree);
    OK(rkv_pool_check(pool));
    rkv_pool_destroy(pool);
}

Test(attention_e2e, plans_match_scratch_f32) { run_workload("attention_e2e.f32", RKV_DTYPE_F32); }
Test(attention_e2e, plans_match_scratch_bf16) { run_workload("attention_e2e.bf16", RKV_DTYPE_BF16); }

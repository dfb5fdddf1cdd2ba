/*
 * tests/test_replay.c -- the replay (sim/replay*.c) against an independent
 * model, on a slice of the real trace.
 *
 * The model knows nothing of tokens, trees or pools: a prompt is a list of
 * page keys (block id, page within the block), a cached page is a node of a
 * trie of such keys with a last-use time (the index of the request that
 * last used it), and eviction removes the cached page with no cached child,
 * not used by the current request, with the oldest last-use time, one page
 * at a time, until the current request's new pages fit. Only full pages
 * count. File-order replay must give exactly the same hit tokens, request
 * by request.
 *
 * Plus a scheduler-mode smoke test on small synthetic workloads.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "tests/support/test_util.h"
#include "tests/support/test_workload.h"

#define TRACE_PATH RKV_SOURCE_DIR "/bench/traces/mooncake_conversation_trace.jsonl"

/* ---- the model ----------------------------------------------------------- */

typedef struct mnode {
    uint32_t parent;
    uint64_t key;
    uint64_t last_use;
    uint32_t cached_children;
    uint8_t cached;
} mnode;

typedef struct mheap_item {
    uint64_t t;
    uint32_t node;
} mheap_item;

typedef struct model {
    mnode *nodes;
    size_t num_nodes, cap_nodes;
    /* (parent, key) -> node: open addressing, never deleted */
    uint32_t *table;
    size_t table_cap;
    mheap_item *heap;
    size_t heap_n, heap_cap;
    uint64_t cached;
    uint64_t capacity;
} model;

static uint64_t mhash(uint32_t parent, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)parent << 17 | parent);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    return h ^ (h >> 32);
}

static void model_init(model *m, uint64_t capacity)
{
    memset(m, 0, sizeof *m);
    m->capacity = capacity;
    m->cap_nodes = 1024;
    m->nodes = calloc(m->cap_nodes, sizeof *m->nodes);
    m->table_cap = 4096;
    m->table = malloc(m->table_cap * sizeof *m->table);
    cr_assert(m->nodes && m->table);
    memset(m->table, 0xff, m->table_cap * sizeof *m->table);
    m->num_nodes = 1; /* node 0: the root */
    m->nodes[0].cached = 1;
}

static void model_free(model *m)
{
    free(m->nodes);
    free(m->table);
    free(m->heap);
}

static uint32_t *model_slot(model *m, uint32_t parent, uint64_t key)
{
    size_t mask = m->table_cap - 1;
    for (size_t i = mhash(parent, key) & mask;; i = (i + 1) & mask) {
        uint32_t id = m->table[i];
        if (id == UINT32_MAX ||
            (m->nodes[id].parent == parent && m->nodes[id].key == key))
            return &m->table[i];
    }
}

static uint32_t model_child(model *m, uint32_t parent, uint64_t key, int create)
{
    uint32_t *slot = model_slot(m, parent, key);
    if (*slot != UINT32_MAX || !create)
        return *slot;
    if (m->num_nodes == m->cap_nodes) {
        m->cap_nodes *= 2;
        m->nodes = realloc(m->nodes, m->cap_nodes * sizeof *m->nodes);
        cr_assert_not_null(m->nodes);
    }
    uint32_t id = (uint32_t)m->num_nodes++;
    memset(&m->nodes[id], 0, sizeof m->nodes[id]);
    m->nodes[id].parent = parent;
    m->nodes[id].key = key;
    *slot = id;
    if (m->num_nodes * 2 > m->table_cap) { /* grow and rehash */
        free(m->table);
        m->table_cap *= 2;
        m->table = malloc(m->table_cap * sizeof *m->table);
        cr_assert_not_null(m->table);
        memset(m->table, 0xff, m->table_cap * sizeof *m->table);
        for (uint32_t n = 1; n < m->num_nodes; n++)
            *model_slot(m, m->nodes[n].parent, m->nodes[n].key) = n;
    }
    return id;
}

static void heap_push(model *m, uint64_t t, uint32_t node)
{
    if (m->heap_n == m->heap_cap) {
        m->heap_cap = m->heap_cap ? m->heap_cap * 2 : 1024;
        m->heap = realloc(m->heap, m->heap_cap * sizeof *m->heap);
        cr_assert_not_null(m->heap);
    }
    size_t i = m->heap_n++;
    m->heap[i] = (mheap_item){t, node};
    while (i && m->heap[(i - 1) / 2].t > m->heap[i].t) {
        mheap_item x = m->heap[i];
        m->heap[i] = m->heap[(i - 1) / 2];
        m->heap[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
}

static mheap_item heap_pop(model *m)
{
    mheap_item top = m->heap[0];
    m->heap[0] = m->heap[--m->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < m->heap_n && m->heap[l].t < m->heap[s].t)
            s = l;
        if (r < m->heap_n && m->heap[r].t < m->heap[s].t)
            s = r;
        if (s == i)
            break;
        mheap_item x = m->heap[i];
        m->heap[i] = m->heap[s];
        m->heap[s] = x;
        i = s;
    }
    return top;
}

/* Evicts the least recently used leaf not used at time `now`; 0 if none. */
static int model_evict_one(model *m, uint64_t now)
{
    while (m->heap_n) {
        mheap_item it = m->heap[0];
        mnode *x = &m->nodes[it.node];
        if (!x->cached || x->cached_children || x->last_use != it.t) {
            heap_pop(m); /* stale entry */
            continue;
        }
        if (it.t >= now)
            return 0; /* only the current request's pages are left */
        heap_pop(m);
        x->cached = 0;
        m->cached--;
        mnode *p = &m->nodes[x->parent];
        if (x->parent && --p->cached_children == 0)
            heap_push(m, p->last_use, x->parent);
        else if (!x->parent)
            p->cached_children--;
        return 1;
    }
    return 0;
}

/* Serves one request of page keys; returns the pages hit. */
static uint32_t model_serve(model *m, const uint64_t *keys, uint32_t n,
                            uint64_t now)
{
    uint32_t node = 0, hit = 0;
    while (hit < n) {
        uint32_t c = model_child(m, node, keys[hit], 0);
        if (c == UINT32_MAX || !m->nodes[c].cached)
            break;
        node = c;
        m->nodes[c].last_use = now;
        heap_push(m, now, c);
        hit++;
    }
    uint32_t need = n - hit;
    while (m->cached + need > m->capacity && model_evict_one(m, now))
        ;
    if (m->cached + need > m->capacity)
        need = (uint32_t)(m->capacity - m->cached); /* cache what fits */
    for (uint32_t j = hit; j < hit + need; j++) {
        uint32_t c = model_child(m, node, keys[j], 1);
        mnode *x = &m->nodes[c];
        cr_assert(!x->cached);
        x->cached = 1;
        x->last_use = now;
        x->cached_children = 0;
        m->nodes[node].cached_children++;
        m->cached++;
        heap_push(m, now, c);
        node = c;
    }
    return hit;
}

/* Page keys of a trace request at page size P (P divides 512): page j lies
 * in block j*P/512; the key names the block id and the page within it. */
static uint32_t page_keys(const rkv_workload *wl, size_t i, uint32_t P,
                          uint64_t *keys)
{
    const rkv_wl_request *q = &wl->reqs[i];
    uint32_t per_block = RKV_TRACE_BLOCK_TOKENS / P;
    uint32_t n = q->input_length / P;
    for (uint32_t j = 0; j < n; j++) {
        uint64_t id = wl->seg_keys[q->seg_begin + (uint64_t)j * P / RKV_TRACE_BLOCK_TOKENS];
        keys[j] = id * per_block + j % per_block;
    }
    return n;
}

/* The trace's first n requests (it has that many). */
static void load_slice(rkv_workload *wl, size_t n)
{
    rkv_test_trace_slice(wl, TRACE_PATH, n);
    cr_assert_eq(wl->num_reqs, n);
}

/* Replays wl in file order at (P, capacity) and compares with the model,
 * request by request. Returns the hit tokens. */
static uint64_t compare(const rkv_workload *wl, uint32_t P,
                        uint64_t capacity_tokens, uint32_t check_every)
{
    rkv_replay_config cfg =
        rkv_test_replay_config(P, capacity_tokens, check_every);
    cfg.per_request = calloc(wl->num_reqs, sizeof *cfg.per_request);
    cr_assert_not_null(cfg.per_request);
    rkv_replay_result res;
    rkv_status st = rkv_replay_file_order(wl, &cfg, &res);
    cr_assert_eq(st, RKV_OK, "P=%u cap=%llu: %s", P,
                 (unsigned long long)capacity_tokens, rkv_last_error());

    model m;
    model_init(&m, capacity_tokens / P);
    uint64_t *keys = malloc((rkv_workload_max_input(wl) / P + 1) * sizeof *keys);
    cr_assert_not_null(keys);
    uint64_t hit = 0, prompt = 0;
    for (size_t i = 0; i < wl->num_reqs; i++) {
        uint32_t n = page_keys(wl, i, P, keys);
        uint32_t h = model_serve(&m, keys, n, i + 1);
        cr_assert_eq((uint64_t)h * P, cfg.per_request[i].hit_tokens,
                     "P=%u cap=%llu request %zu (line %llu): model hits %u "
                     "pages, replay %u tokens",
                     P, (unsigned long long)capacity_tokens, i,
                     (unsigned long long)wl->reqs[i].line, h,
                     cfg.per_request[i].hit_tokens);
        hit += (uint64_t)h * P;
        prompt += wl->reqs[i].input_length;
    }
    cr_assert_eq(res.hit_tokens, hit);
    cr_assert_eq(res.prompt_tokens, prompt);
    cr_assert_eq(res.requests, wl->num_reqs);
    cr_assert_float_eq(res.hit_rate, (double)hit / (double)prompt, 1e-12);
    cr_assert_eq(res.capacity_blocks, capacity_tokens / P);
    cr_assert_leq(res.peak_blocks, res.capacity_blocks);
    fprintf(stderr, "[replay] P=%u capacity=%llu: hit rate %.4f%% (%llu tokens), "
                    "evicted %llu blocks, %llu prompts cached in part\n",
            P, (unsigned long long)capacity_tokens, 100.0 * res.hit_rate,
            (unsigned long long)res.hit_tokens,
            (unsigned long long)res.evicted_blocks,
            (unsigned long long)res.truncated_requests);
    free(keys);
    model_free(&m);
    free(cfg.per_request);
    return hit;
}

/* The reference convention needs 512-token pages (RKV_MAX_PAGE_SIZE allows
 * up to 4096). */
static int pool_supports(uint32_t P)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 4;
    pc.page_size = P;
    rkv_pool *pool = NULL;
    if (rkv_pool_create(&pc, &pool) != RKV_OK)
        return 0;
    rkv_pool_destroy(pool);
    return 1;
}

Test(replay, file_order_page512_matches_model, .timeout = 600)
{
    cr_assert(pool_supports(512), "the pool must accept the trace's 512-token "
              "blocks: %s", rkv_last_error());
    rkv_workload wl;
    load_slice(&wl, 2000);
    /* Small capacities evict constantly; a large one hardly. */
    uint64_t small = compare(&wl, 512, 200000, 250);
    uint64_t mid = compare(&wl, 512, 1000000, 500);
    uint64_t big = compare(&wl, 512, 100000000, 0);
    cr_assert_lt(small, mid, "more room, more hits");
    cr_assert_leq(mid, big);
    rkv_workload_free(&wl);
}

/* The first n requests replayed at page P against the model, with a small
 * capacity (checked every check_small requests) and a big one: the big
 * one hits more. */
static void small_and_big(size_t n, uint32_t P, uint64_t small_cap, uint32_t check_small,
                          uint64_t big_cap)
{
    rkv_workload wl;
    load_slice(&wl, n);
    uint64_t small = compare(&wl, P, small_cap, check_small);
    uint64_t big = compare(&wl, P, big_cap, 0);
    cr_assert_lt(small, big);
    rkv_workload_free(&wl);
}

/* Half the trace's block: every trace block spans two pages. */
Test(replay, file_order_page256_matches_model, .timeout = 600)
{
    small_and_big(2000, 256, 200000, 250, 100000000);
}

Test(replay, file_order_page16_matches_model, .timeout = 600)
{
    small_and_big(1000, 16, 150000, 0, 20000000);
}

Test(replay, file_order_random_page_and_capacity, .timeout = 600)
{
    uint64_t seed = rkv_test_seed("replay.file_order_random_page_and_capacity");
    rkv_rng g;
    rkv_rng_init(&g, seed);
    rkv_workload wl;
    load_slice(&wl, 300);
    static const uint32_t sizes[] = {1, 2, 8, 32, 64, 128, 256, 512};
    for (int it = 0; it < 3; it++) {
        uint32_t P = sizes[rkv_rng_below(&g, sizeof sizes / sizeof sizes[0])];
        if (P == 1 && it) /* page size 1 is slow; once is enough */
            P = 64;
        cr_assert(pool_supports(P), "page size %u: %s", P, rkv_last_error());
        /* Tiny capacities included: prompts that do not fit are cached in
         * part, the same way in the model. */
        uint64_t cap = 5000 + rkv_rng_below(&g, 400000);
        compare(&wl, P, cap, 50);
    }
    /* A cache smaller than many prompts: they are cached in part. */
    compare(&wl, 64, 8192, 25);
    rkv_workload_free(&wl);
}

Test(replay, bad_capacity_is_an_error)
{
    rkv_workload wl;
    load_slice(&wl, 10);
    rkv_replay_config cfg = rkv_test_replay_config(16, 15, 0);
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_file_order(&wl, &cfg, &res), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "capacity") != NULL, "%s", rkv_last_error());
    rkv_workload_free(&wl);
}

/* ---- scheduler mode -------------------------------------------------------- */

static void sched_smoke(rkv_workload *wl, rkv_policy policy, uint64_t capacity,
                        uint32_t P, rkv_replay_result *res,
                        rkv_replay_request_stats *per)
{
    rkv_replay_config cfg = rkv_test_replay_config(P, capacity, 7);
    cfg.sched.policy = policy;
    cfg.per_request = per;
    rkv_status st = rkv_replay_sched(wl, &cfg, res);
    cr_assert_eq(st, RKV_OK, "%s: %s", rkv_policy_name(policy), rkv_last_error());
    uint64_t out = 0;
    for (size_t i = 0; i < wl->num_reqs; i++) {
        cr_assert(per[i].finished, "request %zu finished", i);
        cr_assert_geq(per[i].ttft_ms, 0.0);
        cr_assert_geq(per[i].latency_ms, per[i].ttft_ms);
        cr_assert_leq(per[i].hit_tokens, wl->reqs[i].input_length);
        out += wl->reqs[i].output_length ? wl->reqs[i].output_length : 1;
    }
    cr_assert_eq(res->requests, wl->num_reqs);
    cr_assert_eq(res->rejected_requests, 0);
    cr_assert_eq(res->output_tokens, out, "one emitted token per output token");
    cr_assert_eq(res->prompt_tokens, wl->prompt_tokens);
    cr_assert_leq(res->ttft_ms.p50, res->ttft_ms.p90);
    cr_assert_leq(res->ttft_ms.p90, res->ttft_ms.p99);
    cr_assert_leq(res->latency_ms.p50, res->latency_ms.p99);
    cr_assert_gt(res->sim_ms, 0.0);
    cr_assert_gt(res->steps, 0);
    cr_assert_leq(res->peak_pool_blocks, res->capacity_blocks);
    /* Every prompt token is either served from the cache or computed. */
    cr_assert_geq(res->prefill_tokens + res->hit_tokens, wl->prompt_tokens);
}

Test(replay, sched_agentic_turns_hit_their_history, .timeout = 600)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 10, 8, "replay.sched_agentic");
    rkv_replay_request_stats *per = calloc(wl.num_reqs, sizeof *per);
    cr_assert_not_null(per);
    static const rkv_policy pols[] = {RKV_POLICY_FCFS, RKV_POLICY_LPM,
                                      RKV_POLICY_DFS, RKV_POLICY_PRIORITY,
                                      RKV_POLICY_BOUNDED};
    for (size_t k = 0; k < sizeof pols / sizeof pols[0]; k++) {
        rkv_replay_result res;
        /* Ample room: nothing the history needs is evicted. */
        sched_smoke(&wl, pols[k], RKV_REPLAY_UNBOUNDED, 16, &res, per);
        for (size_t i = 0; i < wl.num_reqs; i++) {
            uint64_t p = wl.reqs[i].parent;
            if (p == RKV_WL_NO_PARENT)
                continue;
            /* A turn is sent after its parent finished, so at least the
             * parent's whole prompt (full pages) is cached by then. */
            uint32_t want = wl.reqs[p].input_length / 16 * 16;
            cr_assert_geq(per[i].hit_tokens, want,
                          "%s: turn %zu hit %u tokens, its parent's prompt has "
                          "%u cached",
                          rkv_policy_name(pols[k]), i, per[i].hit_tokens, want);
        }
        cr_assert_gt(res.hit_rate, 0.5, "%s: agentic hit rate %.3f",
                     rkv_policy_name(pols[k]), res.hit_rate);
    }
    free(per);
    rkv_workload_free(&wl);
}

/* Turns too large for the whole pool are refused; the session's later
 * turns must still arrive (and be served or refused), not wait forever. */
Test(replay, sched_refused_turn_releases_the_next)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 6, 0, "replay.sched_refused_turn");
    uint64_t capacity = 8000;
    size_t too_big = 0, refused_parent = 0;
    for (size_t i = 0; i < wl.num_reqs; i++) {
        const rkv_wl_request *q = &wl.reqs[i];
        too_big += (uint64_t)q->input_length + q->output_length > capacity;
        refused_parent += q->parent != RKV_WL_NO_PARENT &&
                          (uint64_t)wl.reqs[q->parent].input_length +
                                  wl.reqs[q->parent].output_length > capacity;
    }
    cr_assert_gt(refused_parent, 0, "seed must give a turn after a refused one");
    rkv_replay_config cfg = rkv_test_replay_config(0, capacity, 5);
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_sched(&wl, &cfg, &res), RKV_OK, "%s",
                 rkv_last_error());
    /* every request ends: served, or refused for its size */
    cr_assert_eq(res.requests + res.rejected_requests, wl.num_reqs);
    cr_assert_gt(res.rejected_requests, 0);
    cr_assert_leq(res.rejected_requests, too_big);
    cr_assert_gt(res.requests, 0);
    rkv_workload_free(&wl);
}

Test(replay, sched_small_pool_and_fewshot, .timeout = 600)
{
    rkv_workload wl;
    rkv_test_fewshot(&wl, 200, "replay.sched_small_pool_and_fewshot");
    rkv_fewshot_config fc; /* the defaults it was made with */
    rkv_fewshot_config_init(&fc);
    rkv_replay_request_stats *per = calloc(wl.num_reqs, sizeof *per);
    cr_assert_not_null(per);
    rkv_replay_result res;
    sched_smoke(&wl, RKV_POLICY_LPM, 2000000, 16, &res, per);
    /* All but a few requests find the shared header cached. */
    size_t with_header = 0;
    for (size_t i = 0; i < wl.num_reqs; i++)
        with_header += per[i].hit_tokens >= fc.header_tokens / 16 * 16;
    cr_assert_geq(with_header, wl.num_reqs - 8, "%zu of %zu hit the header",
                  with_header, wl.num_reqs);

    /* An undersized pool: requests still all finish (preemption/eviction). */
    sched_smoke(&wl, RKV_POLICY_FCFS, 12000, 16, &res, per);
    free(per);
    rkv_workload_free(&wl);
}

Test(replay, sched_trace_slice, .timeout = 600)
{
    rkv_workload wl;
    load_slice(&wl, 300);
    rkv_replay_request_stats *per = calloc(wl.num_reqs, sizeof *per);
    cr_assert_not_null(per);
    rkv_replay_result res;
    sched_smoke(&wl, RKV_POLICY_LPM, 1000000, 16, &res, per);
    free(per);
    rkv_workload_free(&wl);
}

/* ---- cost model and percentiles, against the documented formulas --------- */

Test(replay, cost_model_follows_its_documentation)
{
    rkv_cost_model m;
    rkv_cost_model_init(&m);
    cr_assert_eq(rkv_cost_model_validate(&m), RKV_OK);
    /* 8B Llama-3-like, bf16: 2 * 32 layers * 8 heads * 128 dims * 2 bytes. */
    double kv = 2.0 * 32 * 8 * 128 * 2;
    cr_assert_float_eq(rkv_cost_kv_bytes_per_token(&m), kv, 1e-9);
    /* H100 80 GB: 90 % of it minus 8.03e9 bf16 weights, in KV tokens. */
    uint64_t cap = (uint64_t)((80e9 * 0.9 - 8.03e9 * 2) / kv);
    cr_assert_eq(rkv_cost_default_capacity_tokens(&m), cap);

    /* Decode only: memory-bound, (weights + KV of the context) / (bw * mbu). */
    rkv_cost_step s;
    memset(&s, 0, sizeof s);
    rkv_cost_add_decode(&s, 1000);
    double want = 0.1 + (8.03e9 * 2 + 1000 * kv) / (3.35e12 * 0.8) * 1e3;
    cr_assert_float_eq(rkv_cost_step_ms(&m, &s), want, 1e-9);

    /* Prefill of 4096 tokens after 1000 cached: compute-bound. */
    memset(&s, 0, sizeof s);
    rkv_cost_add_prefill(&s, 1000, 4096);
    double keys = 0;
    for (int i = 0; i < 4096; i++)
        keys += 1000 + i + 1; /* causal: position 1000 + i sees itself too */
    double flops = 2 * 8.03e9 * 4096 + 4.0 * 32 * 4096 * keys;
    want = 0.1 + flops / (989e12 * 0.5) * 1e3;
    cr_assert_float_eq(rkv_cost_step_ms(&m, &s), want, 1e-6);
    /* ... and more than the weights' read time, so the max picked compute. */
    cr_assert_gt(want - 0.1, 8.03e9 * 2 / (3.35e12 * 0.8) * 1e3);

    /* An empty step costs nothing; bad parameters are refused by name. */
    memset(&s, 0, sizeof s);
    cr_assert_eq(rkv_cost_step_ms(&m, &s), 0.0);
    m.mfu = 1.5;
    cr_assert_eq(rkv_cost_model_validate(&m), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "mfu") != NULL);
}

Test(replay, percentiles_interpolate)
{
    double v[100];
    for (int i = 0; i < 100; i++)
        v[i] = 100 - i; /* 100..1, unsorted on purpose */
    rkv_latency_summary l;
    rkv_latency_summarize(v, 100, &l);
    /* Linear interpolation between order statistics (x_k = k + 1). */
    cr_assert_float_eq(l.p50, 50.5, 1e-9);
    cr_assert_float_eq(l.p90, 90.1, 1e-9);
    cr_assert_float_eq(l.p99, 99.01, 1e-9);
    cr_assert_float_eq(l.mean, 50.5, 1e-9);
    cr_assert_float_eq(l.max, 100.0, 1e-9);
    double one = 7;
    rkv_latency_summarize(&one, 1, &l);
    cr_assert_float_eq(l.p99, 7.0, 1e-12);
    rkv_latency_summarize(NULL, 0, &l);
    cr_assert_eq(l.p50, 0.0);
}

/* File order with a host tier (residency/tier.c, sim/replay_tiers.c): a
 * host that never fills keeps every page the device evicts, so each
 * request hits exactly what an unbounded single cache hits, the hits split
 * into device and host (the host part loaded), and rkv_tree_check (the
 * residency invariant included) passes every 100 requests. Write-through
 * and selective keep host copies of device pages (inclusive tiers), so
 * they hit at most that much, and more than the device alone. */
static rkv_replay_result tiered(const rkv_workload *wl, uint64_t dev,
                                uint64_t host, int policy)
{
    rkv_replay_config cfg = rkv_test_replay_config(512, dev, 100);
    cfg.host_capacity_tokens = host;
    cfg.write_policy = policy;
    rkv_replay_result res;
    cr_assert_eq(rkv_replay_file_order(wl, &cfg, &res), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(res.hit_tokens_by_medium[RKV_MEDIUM_DEVICE] +
                     res.hit_tokens_by_medium[RKV_MEDIUM_HOST],
                 res.hit_tokens);
    cr_assert_eq(res.hit_tokens_by_medium[RKV_MEDIUM_HOST],
                 res.load_blocks * 512);
    cr_assert_eq(res.failed_loads, 0);
    fprintf(stderr, "[replay] tiers %llu + %llu, policy %d: hit rate %.4f%% "
                    "(device %llu, host %llu tokens)\n",
            (unsigned long long)dev, (unsigned long long)host, policy,
            100.0 * res.hit_rate,
            (unsigned long long)res.hit_tokens_by_medium[RKV_MEDIUM_DEVICE],
            (unsigned long long)res.hit_tokens_by_medium[RKV_MEDIUM_HOST]);
    return res;
}

Test(replay, file_order_host_tier, .timeout = 600)
{
    rkv_workload wl;
    load_slice(&wl, 2000);
    uint64_t unbounded = compare(&wl, 512, 100000000, 0);
    uint64_t device = compare(&wl, 512, 1000000, 0);
    rkv_replay_result r = tiered(&wl, 1000000, 100000000, RKV_WRITE_BACK);
    cr_assert_eq(r.hit_tokens, unbounded);
    cr_assert_gt(r.hit_tokens_by_medium[RKV_MEDIUM_HOST], 0);
    for (int p = RKV_WRITE_THROUGH; p <= RKV_WRITE_SELECTIVE; p++) {
        r = tiered(&wl, 1000000, 2000000, p);
        cr_assert_leq(r.hit_tokens, unbounded);
        cr_assert_gt(r.hit_tokens, device);
    }
    /* no host tier: the replay is the device alone */
    r = tiered(&wl, 1000000, 0, RKV_WRITE_BACK);
    cr_assert_eq(r.hit_tokens, device);
    cr_assert_eq(r.hit_tokens_by_medium[RKV_MEDIUM_HOST], 0);
    rkv_replay_config cfg = rkv_test_replay_config(512, 1000000, 100);
    cfg.disk_capacity_tokens = 100000000;
    /* a disk tier alone (metadata-only store) behaves as the host one */
    cr_assert_eq(rkv_replay_file_order(&wl, &cfg, &r), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(r.hit_tokens, unbounded);
    cr_assert_eq(r.hit_tokens_by_medium[RKV_MEDIUM_DISK], r.load_blocks * 512);
    cr_assert_gt(r.hit_tokens_by_medium[RKV_MEDIUM_DISK], 0);
    /* the chain device -> host -> disk: a small host writes back to the
     * large disk, nothing is lost, hits come from both */
    cfg.host_capacity_tokens = 1000000;
    cr_assert_eq(rkv_replay_file_order(&wl, &cfg, &r), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(r.hit_tokens, unbounded);
    cr_assert_gt(r.hit_tokens_by_medium[RKV_MEDIUM_HOST], 0);
    cr_assert_gt(r.hit_tokens_by_medium[RKV_MEDIUM_DISK], 0);
    cr_assert_eq(r.hit_tokens_by_medium[RKV_MEDIUM_HOST] +
                     r.hit_tokens_by_medium[RKV_MEDIUM_DISK],
                 r.load_blocks * 512);
    rkv_workload_free(&wl);
}

/*
 * tests/test_sched.c -- the scheduler (sched/) driven by the fake engine of
 * tests/test_sched_engine.h, which checks every plan (budgets, CSR arrays,
 * slots, exact KV contents) and calls rkv_sched_check after every step.
 * Expected figures come from the workload's construction (prefix lengths,
 * pool sizes), never from the scheduler.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "sched/sched_debug.h"
#include "tests/test_sched_engine.h"

static rkv_sched_config base_cfg(rkv_policy pol)
{
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    c.policy = pol;
    return c;
}

/* base_cfg with request dedup off (dedup_min_tokens 0). */
static rkv_sched_config nodedup_cfg(rkv_policy pol)
{
    rkv_sched_config c = base_cfg(pol);
    c.dedup_min_tokens = 0;
    return c;
}

/* ---- bad input, lifecycle errors ------------------------------------------ */

Test(sched, bad_input_rejected_state_intact)
{
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM);
    c.max_running = 4;
    eng e;
    eng_init(&e, 16, 4, &c, 16);
    int32_t p[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    OK(eng_submit(&e, 1, 0, p, 8, 4, 0));
    rkv_sched_stats before, after;
    OK(rkv_sched_get_stats(e.s, &before));
    cr_assert_eq(eng_submit(&e, 1, 0, p, 8, 4, 0), RKV_ERR_DUPLICATE);
    cr_assert_eq(eng_submit(&e, 2, 0, p, 0, 4, 0), RKV_ERR_INVALID_ARG);
    cr_assert_eq(eng_submit(&e, 2, 0, NULL, 8, 4, 0), RKV_ERR_INVALID_ARG);
    cr_assert_eq(eng_submit(&e, 2, 0, p, 8, 0, 0), RKV_ERR_INVALID_ARG);
    int32_t bad[3] = {1, -5, 2};
    cr_assert_eq(eng_submit(&e, 2, 0, bad, 3, 4, 0), RKV_ERR_INVALID_ARG);
    /* 16 blocks of 4 tokens = 64 KV tokens; 60 + 6 - 1 = 65 cannot fit */
    int32_t big[60];
    fill_tokens(big, 60, 3);
    cr_assert_eq(eng_submit(&e, 3, 0, big, 60, 6, 0), RKV_ERR_NO_SPACE);
    cr_assert_eq(rkv_sched_submit(e.s, NULL), RKV_ERR_INVALID_ARG);
    OK(rkv_sched_get_stats(e.s, &after));
    cr_assert_eq(after.waiting, before.waiting);
    cr_assert_eq(after.running, before.running);
    OK(rkv_sched_check(e.s));
    /* exactly fitting: 60 + 5 - 1 = 64 */
    OK(eng_submit(&e, 3, 0, big, 60, 5, 0));
    /* commit without step, unknown abort */
    int32_t t = 1;
    cr_assert_eq(rkv_sched_commit(e.s, &t, NULL, 0), RKV_ERR_STATE);
    cr_assert_eq(rkv_sched_abort(e.s, 99), RKV_ERR_NOT_FOUND);
    /* step twice without commit */
    const rkv_batch_plan *pl;
    OK(rkv_sched_step(e.s, 0, &pl));
    cr_assert_gt(pl->num_reqs, 0);
    cr_assert_eq(rkv_sched_step(e.s, 0, &pl), RKV_ERR_STATE);
    /* a negative sampled token is refused, nothing changes */
    int32_t neg[4] = {-1, -1, -1, -1};
    cr_assert_eq(rkv_sched_commit(e.s, neg, NULL, 0), RKV_ERR_INVALID_ARG);
    OK(rkv_sched_check(e.s));
    int32_t good[4] = {1, 1, 1, 1};
    OK(rkv_sched_commit(e.s, good, NULL, 1));
    OK(rkv_sched_check(e.s));
    eng_fini(&e);
}

Test(sched, policy_names_roundtrip)
{
    for (int i = 0; i <= RKV_POLICY_BOUNDED; i++) {
        rkv_policy p;
        OK(rkv_policy_from_name(rkv_policy_name((rkv_policy)i), &p));
        cr_assert_eq((int)p, i);
    }
    rkv_policy p;
    cr_assert_eq(rkv_policy_from_name("sjf", &p), RKV_ERR_INVALID_ARG);
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM);
    c.max_running = 0;
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 4;
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *s = NULL;
    OK(rkv_pool_create(&pc, &pool));
    OK(rkv_tree_create(pool, NULL, &tree));
    cr_assert_eq(rkv_sched_create(tree, &c, &s), RKV_ERR_INVALID_ARG);
    cr_assert_null(s);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
}

/* ---- configuration ranges (radixkv.h), memory that follows requests ------- */

/* Each field just outside its documented range is refused with
 * INVALID_ARG, a message naming the field, and *out untouched; the edges
 * of each range are accepted. */
Test(sched, config_out_of_range_refused)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 4;
    rkv_pool *pool;
    rkv_tree *tree;
    OK(rkv_pool_create(&pc, &pool));
    OK(rkv_tree_create(pool, NULL, &tree));
    static const struct {
        const char *field;
        int which;
        double v;
    } bad[] = {
        {"policy", 0, -1},
        {"policy", 0, RKV_POLICY_BOUNDED + 1},
        {"max_batch_tokens", 1, 0},
        {"max_batch_tokens", 1, RKV_SCHED_MAX_BATCH_TOKENS + 1.0},
        {"max_batch_tokens", 1, UINT32_MAX},
        {"max_running", 2, 0},
        {"max_wait_ms", 3, -1e-9},
        {"max_wait_ms", 3, NAN},
        {"max_wait_ms", 3, -INFINITY},
        {"aging_per_s", 4, -1},
        {"aging_per_s", 4, NAN},
        {"aging_per_s", 4, INFINITY},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rkv_sched_config c = base_cfg(RKV_POLICY_LPM);
        switch (bad[i].which) {
        case 0: c.policy = (rkv_policy)(int)bad[i].v; break;
        case 1: c.max_batch_tokens = (uint32_t)bad[i].v; break;
        case 2: c.max_running = (uint32_t)bad[i].v; break;
        case 3: c.max_wait_ms = bad[i].v; break;
        default: c.aging_per_s = bad[i].v; break;
        }
        rkv_sched *const sentinel = (rkv_sched *)&pc;
        rkv_sched *s = sentinel;
        cr_assert_eq(rkv_sched_create(tree, &c, &s), RKV_ERR_INVALID_ARG,
                     "%s = %g accepted", bad[i].field, bad[i].v);
        cr_assert_eq(s, sentinel);
        cr_assert_not_null(strstr(rkv_last_error(), bad[i].field),
                           "message does not name %s: %s", bad[i].field,
                           rkv_last_error());
        cr_assert_not_null(strstr(rkv_last_error(), "range"),
                           "message gives no range: %s", rkv_last_error());
    }
    /* the edges of every range */
    rkv_sched_config edge[3];
    for (int i = 0; i < 3; i++)
        edge[i] = base_cfg(RKV_POLICY_BOUNDED);
    edge[0].max_batch_tokens = 1;
    edge[0].max_running = 1;
    edge[0].dedup_min_tokens = 0;
    edge[0].max_wait_ms = 0;
    edge[0].aging_per_s = 0;
    edge[1].max_batch_tokens = RKV_SCHED_MAX_BATCH_TOKENS;
    edge[1].max_running = UINT32_MAX;
    edge[1].dedup_min_tokens = UINT32_MAX;
    edge[1].max_wait_ms = INFINITY;
    edge[1].aging_per_s = DBL_MAX;
    edge[2].policy = RKV_POLICY_FCFS;
    for (int i = 0; i < 3; i++) {
        rkv_sched *s = NULL;
        OK(rkv_sched_create(tree, &edge[i], &s));
        OK(rkv_sched_check(s));
        rkv_sched_destroy(s);
    }
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
}

/* max_running UINT32_MAX once wrapped max_running + 1 to 0 and the first
 * step stored through NULL; 1e9 allocated 8 GB of running slots for two
 * requests. Both must serve a 2-request workload, under every policy,
 * without any scheduler allocation larger than 64 KiB. */
Test(sched, huge_max_running_small_memory)
{
    static const uint32_t limits[] = {UINT32_MAX, 1000000000u};
    for (int li = 0; li < 2; li++) {
        for (int pol = 0; pol <= RKV_POLICY_BOUNDED; pol++) {
            rkv_sched_config c = base_cfg((rkv_policy)pol);
            c.max_running = limits[li];
            rkv_sched_debug_reset_largest_alloc();
            eng e;
            eng_init(&e, 64, 4, &c, 2);
            int32_t p[20];
            fill_tokens(p, 20, 11);
            OK(eng_submit(&e, 0, 0, p, 20, 5, 0));
            p[19] = 7;
            OK(eng_submit(&e, 1, 0, p, 20, 5, 0));
            for (int guard = 0; e.live > 0; guard++) {
                cr_assert_lt(guard, 100, "no progress");
                eng_step(&e);
            }
            size_t big = rkv_sched_debug_largest_alloc();
            cr_assert_lt(big, 64 * 1024, "max_running %u, %s: an allocation "
                         "of %zu bytes", limits[li],
                         rkv_policy_name((rkv_policy)pol), big);
            eng_done(&e);
        }
    }
}

/* A request's token array follows what it generated, not max_new_tokens:
 * a million-token limit ended early by EOS allocates little. */
Test(sched, large_max_new_tokens_small_memory)
{
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM);
    rkv_sched_debug_reset_largest_alloc();
    eng e;
    const uint32_t max_new = 1000000, P = 64;
    eng_init_seeded(&e, (max_new + 64) / P + 1, P, &c, 2, 5);
    e.eos_mod = 29; /* a token divisible by 29 ends the request */
    int32_t p[40];
    fill_tokens(p, 40, 3);
    OK(eng_submit(&e, 0, 0, p, 40, max_new, 0));
    OK(eng_submit(&e, 1, 0, p, 33, max_new, 0));
    for (int guard = 0; e.live > 0; guard++) {
        cr_assert_lt(guard, 5000, "no EOS in 5000 steps");
        eng_step(&e);
    }
    size_t big = rkv_sched_debug_largest_alloc();
    cr_assert_lt(big, 64 * 1024, "an allocation of %zu bytes", big);
    cr_assert_gt(e.reqs[0].gen + e.reqs[1].gen, 2, "too short to mean anything");
    eng_done(&e);
}

/* ---- random workloads: budgets, CSR, exact KV, no leaks ------------------ */

static void random_workload(rkv_policy pol, const char *name)
{
    uint64_t seed = rkv_test_seed(name);
    rkv_rng g;
    rkv_rng_init(&g, seed);
    uint64_t rounds = rkv_test_scaled(6);
    uint64_t preempt = 0, holds = 0, cached = 0, steps = 0;
    for (uint64_t round = 0; round < rounds; round++) {
        static const uint32_t Ps[] = {1, 2, 4, 16};
        uint32_t P = Ps[rkv_rng_below(&g, 4)];
        uint32_t maxlen = 12 * 16; /* prompt + output tokens at most */
        /* from one largest request to a few: preemption must happen */
        uint32_t nblocks = (maxlen + P - 1) / P + (uint32_t)rkv_rng_below(&g, 2 * maxlen / P + 1);
        rkv_sched_config c = base_cfg(pol);
        c.max_batch_tokens = 1 + (uint32_t)rkv_rng_below(&g, 96);
        c.max_running = 1 + (uint32_t)rkv_rng_below(&g, 12);
        c.dedup_min_tokens = rkv_rng_below(&g, 2) ? 0 : P * (1 + (uint32_t)rkv_rng_below(&g, 3));
        c.max_wait_ms = (double)rkv_rng_below(&g, 40);
        c.aging_per_s = (double)rkv_rng_below(&g, 100);
        uint32_t nreq = 40;
        eng e;
        eng_init_seeded(&e, nblocks, P, &c, nreq, rkv_rng_next(&g));
        e.eos_mod = rkv_rng_below(&g, 2) ? 0 : 29;
        /* a few prefix families so matches are non-trivial */
        int32_t fam[4][128];
        for (int f = 0; f < 4; f++)
            fill_tokens(fam[f], 128, seed * 7 + (uint64_t)f + round * 31);
        uint32_t next_id = 0;
        uint64_t guard = 0;
        while (next_id < nreq || e.live > 0) {
            cr_assert_lt(guard++, 20000, "no progress");
            uint32_t arrivals = (uint32_t)rkv_rng_below(&g, 4);
            for (uint32_t a = 0; a < arrivals && next_id < nreq; a++) {
                int32_t prompt[12 * 16];
                uint32_t max_new = 1 + (uint32_t)rkv_rng_below(
                                           &g, rkv_rng_below(&g, 2) ? 24 : maxlen / 2);
                uint32_t len = 1 + (uint32_t)rkv_rng_below(&g, maxlen - max_new);
                uint32_t f = (uint32_t)rkv_rng_below(&g, 4);
                uint32_t share = (uint32_t)rkv_rng_below(&g, len + 1);
                if (share > 128)
                    share = 128;
                memcpy(prompt, fam[f], share * sizeof *prompt);
                fill_tokens(prompt + share, len - share, rkv_rng_next(&g));
                uint64_t ns = rkv_rng_below(&g, 5) == 0 ? 9 : 0;
                OK(eng_submit(&e, next_id, ns, prompt, len, max_new,
                              (int32_t)rkv_rng_below(&g, 3)));
                OK(rkv_sched_check(e.s));
                next_id++;
            }
            if (rkv_rng_below(&g, 25) == 0 && e.live > 0) {
                uint32_t id = (uint32_t)rkv_rng_below(&g, next_id);
                if (e.reqs[id].live)
                    eng_abort(&e, id);
            }
            uint32_t n = eng_step(&e);
            if (n == 0)
                cr_assert(e.live == 0 || next_id < nreq,
                          "deadlock: empty plan with %llu live",
                          (unsigned long long)e.live);
        }
        rkv_sched_stats st;
        OK(rkv_sched_get_stats(e.s, &st));
        cr_assert_eq(st.finished + st.aborted, nreq);
        preempt += st.preemptions;
        holds += st.dedup_holds;
        cached += st.cached_tokens;
        steps += st.steps;
        eng_done(&e);
    }
    /* what the rounds exercised (information, not asserted) */
    fprintf(stderr, "[info] %s: %llu steps, %llu preemptions, %llu dedup "
            "holds, %llu cached tokens\n", name, (unsigned long long)steps,
            (unsigned long long)preempt, (unsigned long long)holds,
            (unsigned long long)cached);
}

Test(sched, random_fcfs) { random_workload(RKV_POLICY_FCFS, "sched.random_fcfs"); }
Test(sched, random_lpm) { random_workload(RKV_POLICY_LPM, "sched.random_lpm"); }
Test(sched, random_dfs) { random_workload(RKV_POLICY_DFS, "sched.random_dfs"); }
Test(sched, random_priority) { random_workload(RKV_POLICY_PRIORITY, "sched.random_priority"); }
Test(sched, random_bounded) { random_workload(RKV_POLICY_BOUNDED, "sched.random_bounded"); }

/* ---- preemption under an undersized pool ----------------------------------- */

Test(sched, preemption_completes_everything)
{
    for (int pol = 0; pol <= RKV_POLICY_BOUNDED; pol++) {
        rkv_sched_config c = base_cfg((rkv_policy)pol);
        c.max_running = 8;
        c.max_batch_tokens = 64;
        /* each request: 4 prompt + 60 out - 1 = 63 KV tokens = 16 blocks
         * of 4, in a pool of 26: two fit at admission (the headroom
         * estimate counts 70% of the outputs) but not at the end, so
         * decodes must preempt */
        eng e;
        eng_init_seeded(&e, 26, 4, &c, 12, 1234);
        for (uint32_t i = 0; i < 12; i++) {
            int32_t p[4];
            fill_tokens(p, 4, 100 + i);
            OK(eng_submit(&e, i, 0, p, 4, 60, (int32_t)(i % 3)));
        }
        eng_drain(&e, 5000);
        rkv_sched_stats st;
        OK(rkv_sched_get_stats(e.s, &st));
        cr_assert_eq(st.finished, 12);
        cr_assert_gt(st.preemptions, 0, "policy %s: the pool was meant to "
                     "force preemption", rkv_policy_name((rkv_policy)pol));
        for (uint32_t i = 0; i < 12; i++)
            cr_assert_eq(e.reqs[i].gen, 60, "request %u generated %u", i,
                         e.reqs[i].gen);
        eng_done(&e);
    }
}

/* ---- in-batch de-duplication --------------------------------------------------- */

/* The engine of the de-duplication runs: 512 pages of P tokens, up to 16
 * requests running, ids below n, KV written from seed. */
static void dedup_eng(eng *e, rkv_policy pol, uint32_t dedup_min,
                      uint32_t max_batch, uint32_t P, uint32_t n, uint64_t seed)
{
    rkv_sched_config c = base_cfg(pol);
    c.dedup_min_tokens = dedup_min;
    c.max_batch_tokens = max_batch;
    c.max_running = 16;
    eng_init(e, 512, P, &c, n);
    e->seed = seed;
}

/* Submits n requests for one new token each: an x-token prefix they share
 * (fill_tokens key prefix_key) then a suffix of sl[i] tokens of its own
 * (key suffix_key + i); drains them and checks the scheduler's computed
 * tokens against the shadow's. Returns the scheduler's stats. */
static rkv_sched_stats dedup_serve(eng *e, uint32_t n, uint32_t x,
                                   uint64_t prefix_key, const uint32_t *sl,
                                   uint64_t suffix_key)
{
    int32_t p[256];
    fill_tokens(p, x, prefix_key);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_leq(x + sl[i], 256);
        fill_tokens(p + x, sl[i], suffix_key + i);
        OK(eng_submit(e, i, 0, p, x + sl[i], 1, 0));
    }
    eng_drain(e, 1000);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e->s, &st));
    uint64_t shadow = 0;
    for (uint32_t i = 0; i < n; i++)
        shadow += e->reqs[i].computed;
    cr_assert_eq(shadow, st.computed_tokens);
    return st;
}

static uint64_t dedup_run(rkv_policy pol, uint32_t dedup_min,
                          uint32_t max_batch, uint32_t *expect_once,
                          uint32_t *expect_each)
{
    enum { N = 6, X = 128, P = 8 };
    eng e;
    dedup_eng(&e, pol, dedup_min, max_batch, P, N, 99);
    uint32_t sl[N], suffixes = 0;
    for (uint32_t i = 0; i < N; i++) {
        sl[i] = 5 + 7 * i; /* distinct suffix lengths, not page-aligned */
        suffixes += sl[i];
    }
    rkv_sched_stats st = dedup_serve(&e, N, X, 4242, sl, 9000);
    *expect_once = X + suffixes;
    *expect_each = N * X + suffixes;
    if (dedup_min)
        cr_assert_gt(st.dedup_holds, 0, "min %u batch %u: computed %llu",
                     dedup_min, max_batch,
                     (unsigned long long)st.computed_tokens);
    eng_done(&e);
    return st.computed_tokens;
}

Test(sched, dedup_computes_shared_prefix_once)
{
    uint32_t once, each;
    for (int pol = 0; pol <= RKV_POLICY_BOUNDED; pol++) {
        rkv_policy p = (rkv_policy)pol;
        /* whole prompts in one step, and chunked prefill (several chunks) */
        uint64_t got = dedup_run(p, 16, 4096, &once, &each);
        cr_assert_eq(got, once, "%s: computed %llu, expected %u",
                     rkv_policy_name(p), (unsigned long long)got, once);
        got = dedup_run(p, 24, 40, &once, &each);
        cr_assert_eq(got, once, "%s chunked: computed %llu, expected %u",
                     rkv_policy_name(p), (unsigned long long)got, once);
        /* without dedup the prefix is computed by every admitted request */
        got = dedup_run(p, 0, 4096, &once, &each);
        cr_assert_eq(got, each, "%s no dedup: computed %llu, expected %u",
                     rkv_policy_name(p), (unsigned long long)got, each);
    }
}

/* ---- bounded wait -------------------------------------------------------------- */

/* One request with no cache hit amid a stream of high-hit requests that
 * arrive faster than they run. Returns the step at which it first ran. */
static double starve_run(rkv_policy pol, double max_wait, double horizon)
{
    rkv_sched_config c = nodedup_cfg(pol);
    c.max_running = 1;
    c.max_wait_ms = max_wait;
    eng e;
    eng_init_seeded(&e, 4096, 4, &c, 2000, 5);
    int32_t hot[64];
    fill_tokens(hot, 64, 777);
    uint32_t id = 0;
    int32_t p[72];
    memcpy(p, hot, sizeof hot);
    fill_tokens(p + 64, 8, 1);
    OK(eng_submit(&e, id++, 0, p, 72, 1, 0));
    eng_step(&e); /* caches the hot prefix */
    int32_t cold[40];
    fill_tokens(cold, 40, 31337);
    uint32_t cold_id = id++;
    OK(eng_submit(&e, cold_id, 0, cold, 40, 1, 0));
    double arrival = e.now;
    while (e.now - arrival < horizon && e.reqs[cold_id].first_plan_ms < 0) {
        for (int k = 0; k < 2 && id < 2000; k++) {
            fill_tokens(p + 64, 8, 1000 + id);
            OK(eng_submit(&e, id++, 0, p, 72, 1, 0));
        }
        eng_step(&e);
    }
    double waited = e.reqs[cold_id].first_plan_ms < 0
                        ? -1.0
                        : e.reqs[cold_id].first_plan_ms - arrival;
    eng_fini(&e);
    return waited;
}

Test(sched, bounded_does_not_starve)
{
    /* each step advances the clock by 1 ms and serves one request */
    double w = starve_run(RKV_POLICY_BOUNDED, 20.0, 200.0);
    cr_assert_geq(w, 0, "bounded: the cold request never ran");
    cr_assert_leq(w, 20.0 + 2.0, "bounded: waited %g ms for a bound of 20", w);
    /* the same workload starves it under plain lpm: the test can fail */
    double l = starve_run(RKV_POLICY_LPM, 20.0, 200.0);
    cr_assert(l < 0 || l > 22.0, "lpm ran the cold request after %g ms", l);
}

/* ---- abort leaks nothing --------------------------------------------------------- */

Test(sched, abort_waiting_and_running_leaks_nothing)
{
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM);
    c.max_running = 3;
    c.max_batch_tokens = 24; /* chunked: aborts land mid-prefill */
    eng e;
    eng_init_seeded(&e, 64, 4, &c, 10, 3);
    int32_t shared[32];
    fill_tokens(shared, 32, 55);
    for (uint32_t i = 0; i < 10; i++) {
        int32_t p[60];
        memcpy(p, shared, sizeof shared);
        fill_tokens(p + 32, 28, 60 + i);
        OK(eng_submit(&e, i, 0, p, 60, 8, 0));
    }
    eng_step(&e);
    eng_step(&e);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_gt(st.running, 0);
    cr_assert_gt(st.waiting, 0);
    /* one running (mid-prefill) and one waiting */
    uint32_t run_id = UINT32_MAX, wait_id = UINT32_MAX;
    for (uint32_t i = 0; i < 10; i++) {
        if (e.reqs[i].first_plan_ms >= 0 && run_id == UINT32_MAX)
            run_id = i;
        if (e.reqs[i].first_plan_ms < 0 && wait_id == UINT32_MAX)
            wait_id = i;
    }
    cr_assert_neq(run_id, UINT32_MAX);
    cr_assert_neq(wait_id, UINT32_MAX);
    eng_abort(&e, run_id);
    eng_abort(&e, wait_id);
    /* abort between step and commit */
    const rkv_batch_plan *pl;
    OK(rkv_sched_step(e.s, e.now, &pl));
    cr_assert_gt(pl->num_reqs, 0);
    uint64_t victim = pl->req_ids[0];
    int32_t toks[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    eng_abort(&e, victim);
    OK(rkv_sched_commit(e.s, toks, NULL, e.now));
    OK(rkv_sched_check(e.s));
    /* shadow: the commit may have sampled for the others; re-sync by
     * aborting everything left */
    for (uint32_t i = 0; i < 10; i++) {
        if (e.reqs[i].live)
            eng_abort(&e, i);
    }
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.aborted + st.finished, 10);
    eng_done(&e);
}

Test(sched, destroy_with_live_requests_releases_all)
{
    rkv_sched_config c = base_cfg(RKV_POLICY_DFS);
    c.max_running = 2;
    eng e;
    eng_init(&e, 64, 4, &c, 6);
    for (uint32_t i = 0; i < 6; i++) {
        int32_t p[30];
        fill_tokens(p, 30, i);
        OK(eng_submit(&e, i, 0, p, 30, 4, 0));
    }
    eng_step(&e);
    rkv_sched_destroy(e.s);
    e.s = NULL;
    OK(rkv_tree_reset(e.tree));
    cr_assert_eq(rkv_pool_num_free(e.pool), 64);
    OK(rkv_sched_create(e.tree, &c, &e.s)); /* for eng_fini */
    eng_fini(&e);
}

/* ---- cache semantics ------------------------------------------------------------ */

Test(sched, finished_turn_is_cached_for_the_next)
{
    enum { P = 4, L = 37, M = 9 };
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM);
    eng e;
    eng_init_seeded(&e, 256, P, &c, 2, 8);
    int32_t p[L + M + 10];
    fill_tokens(p, L, 1);
    OK(eng_submit(&e, 0, 0, p, L, M, 0));
    eng_drain(&e, 100);
    /* next turn: prompt + all generated tokens + new user tokens */
    memcpy(p, e.reqs[0].tok, (L + M) * sizeof *p);
    fill_tokens(p + L + M, 10, 2);
    OK(eng_submit(&e, 1, 0, p, L + M + 10, 2, 0));
    eng_drain(&e, 100);
    /* KV exists for prompt + generated[0..M-2]: L + M - 1 tokens */
    uint32_t expect = (L + M - 1) / P * P;
    cr_assert_eq(e.reqs[1].first_cached, expect, "cached %u, expected %u",
                 e.reqs[1].first_cached, expect);
    eng_done(&e);
}

Test(sched, chunk_pages_visible_while_running)
{
    /* a long prompt prefilled in chunks: a request sharing its first chunk,
     * submitted after that chunk committed, hits it while the first still
     * runs */
    enum { P = 4 };
    rkv_sched_config c = nodedup_cfg(RKV_POLICY_FCFS);
    c.max_batch_tokens = 16;
    eng e;
    eng_init_seeded(&e, 256, P, &c, 2, 9);
    int32_t a[64], b[40];
    fill_tokens(a, 64, 10);
    OK(eng_submit(&e, 0, 0, a, 64, 2, 0));
    eng_step(&e); /* 16 tokens */
    eng_step(&e); /* 32 tokens */
    memcpy(b, a, 24 * sizeof *b);
    fill_tokens(b + 24, 16, 11);
    OK(eng_submit(&e, 1, 0, b, 40, 2, 0));
    cr_assert(e.reqs[0].live);
    eng_drain(&e, 100);
    cr_assert_eq(e.reqs[1].first_cached, 24);
    eng_done(&e);
}

/* ---- orders ------------------------------------------------------------------------- */

/* Caches `warm` tokens of a family, then submits requests (in the given
 * arrival order) and returns the admission order (ids) with max_running 1. */
static void admission_order(rkv_policy pol, uint32_t n, const uint32_t *share,
                            const int32_t *prio, uint32_t *order_out)
{
    enum { P = 4 };
    rkv_sched_config c = nodedup_cfg(pol);
    c.max_running = 1;
    c.aging_per_s = 0;
    eng e;
    eng_init_seeded(&e, 1024, P, &c, n + 2, 1);
    int32_t fam[64], other[64];
    fill_tokens(fam, 64, 5);
    /* warm-up: the family (64 tokens), and a sibling sharing its first 32
     * tokens, so the tree splits at 32 */
    memcpy(other, fam, 32 * sizeof *other);
    fill_tokens(other + 32, 32, 6);
    OK(eng_submit(&e, n, 0, fam, 64, 1, 0));
    eng_drain(&e, 10);
    OK(eng_submit(&e, n + 1, 0, other, 64, 1, 0));
    eng_drain(&e, 10);
    for (uint32_t i = 0; i < n; i++) {
        int32_t p[80];
        memcpy(p, fam, share[i] * sizeof *p);
        fill_tokens(p + share[i], 80 - share[i], 50 + i);
        OK(eng_submit(&e, i, 0, p, 80, 1, prio ? prio[i] : 0));
    }
    uint32_t k = 0;
    while (e.live > 0) {
        const rkv_batch_plan *pl;
        OK(rkv_sched_step(e.s, e.now, &pl));
        cr_assert_eq(pl->num_reqs, 1);
        order_out[k++] = (uint32_t)pl->req_ids[0];
        /* commit through the shadow path */
        int32_t t = eng_token(&e, pl->req_ids[0], e.reqs[pl->req_ids[0]].len);
        uint64_t id = pl->req_ids[0];
        OK(rkv_sched_commit(e.s, &t, NULL, e.now));
        e.reqs[id].live = 0;
        e.live--;
        OK(rkv_sched_check(e.s));
    }
    eng_done(&e);
}

Test(sched, lpm_prefers_longest_cached_prefix)
{
    uint32_t share[4] = {0, 16, 60, 32}, got[4];
    admission_order(RKV_POLICY_LPM, 4, share, NULL, got);
    uint32_t expect[4] = {2, 3, 1, 0};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(got[i], expect[i], "lpm position %d: %u", i, got[i]);
    admission_order(RKV_POLICY_FCFS, 4, share, NULL, got);
    for (uint32_t i = 0; i < 4; i++)
        cr_assert_eq(got[i], i);
}

Test(sched, priority_order)
{
    uint32_t share[4] = {0, 0, 0, 0}, got[4];
    int32_t prio[4] = {1, 5, -2, 5};
    admission_order(RKV_POLICY_PRIORITY, 4, share, prio, got);
    uint32_t expect[4] = {1, 3, 0, 2};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(got[i], expect[i], "priority position %d: %u", i, got[i]);
}

Test(sched, dfs_groups_shared_prefixes)
{
    /* requests 1, 3, 4 match the whole 64-token family (their match ends at
     * the node of depth 64); 0 and 2 share only 32 tokens (node of depth
     * 32, the parent). DFS: the heavier, deeper subtree first, in arrival
     * order, then the parent's own requests. */
    uint32_t share[5] = {32, 64, 32, 64, 64}, got[5];
    admission_order(RKV_POLICY_DFS, 5, share, NULL, got);
    uint32_t expect[5] = {1, 3, 4, 0, 2};
    for (int i = 0; i < 5; i++)
        cr_assert_eq(got[i], expect[i], "dfs position %d: %u", i, got[i]);
}

/* lpm's cached matches must follow the tree. Requests 3 (64 tokens cached)
 * and 4 (32 cached) wait while a long request holds the only slot, then:
 * LPM_EVICT: 3's cached prefix is evicted, so 4 goes first; LPM_GROW:
 * another user of the tree caches all of 4's prompt below the node where
 * its match ended (the refresh looks only at the requests a new child can
 * move, sched_watch.c), so 4 goes first; LPM_SAME: nothing, 3 goes first.
 * Returns 3's first plan time less 4's. */
enum { LPM_SAME, LPM_EVICT, LPM_GROW };
static int64_t lpm_after_change(int change)
{
    enum { P = 4 };
    rkv_sched_config c = nodedup_cfg(RKV_POLICY_LPM);
    c.max_running = 1;
    eng e;
    eng_init_seeded(&e, 256, P, &c, 5, 2);
    int32_t a[64], b[32], x[8], ra[80], rb[80];
    fill_tokens(a, 64, 21);
    fill_tokens(b, 32, 22);
    fill_tokens(x, 8, 23);
    OK(eng_submit(&e, 0, 0, a, 64, 1, 0));
    eng_drain(&e, 10);
    OK(eng_submit(&e, 1, 0, b, 32, 1, 0));
    eng_drain(&e, 10);
    /* a long request holds the only slot while the others wait */
    OK(eng_submit(&e, 2, 0, x, 8, 40, 0));
    eng_step(&e);
    memcpy(ra, a, sizeof a);
    fill_tokens(ra + 64, 16, 24);
    memcpy(rb, b, sizeof b);
    fill_tokens(rb + 32, 48, 25);
    OK(eng_submit(&e, 3, 0, ra, 80, 1, 0));
    OK(eng_submit(&e, 4, 0, rb, 80, 1, 0));
    eng_step(&e); /* both matched and ordered: 3 (64 cached) before 4 */
    if (change == LPM_EVICT) {
        /* a's pages are the least recently used unlocked ones */
        uint32_t freed = 0;
        OK(rkv_tree_evict(e.tree, 16, &freed));
        OK(rkv_sched_check(e.s));
    } else if (change == LPM_GROW) {
        rkv_block_id blk[20];
        rkv_match m;
        OK(rkv_tree_match(e.tree, 0, rb, 80, blk, RKV_MATCH_PEEK, &m));
        cr_assert_eq(m.num_blocks, 8);
        OK(rkv_tree_alloc_blocks(e.tree, 12, blk + 8));
        /* the KV those pages would hold (the engine checks cached KV) */
        for (uint32_t pos = 32; pos < 80; pos++)
            e.kv[blk[pos / P] * P + pos % P] = e.reqs[4].ph[pos];
        rkv_insert_result ir;
        OK(rkv_tree_insert(e.tree, 0, rb, 80, blk, NULL, &ir));
        cr_assert_eq(ir.new_pages, 12);
        OK(rkv_pool_unref_n(e.pool, 12, blk + 8));
        eng_step(&e);
        OK(rkv_sched_check(e.s)); /* 4's cached match is the tree's */
    }
    eng_drain(&e, 200);
    int64_t d = (int64_t)(e.reqs[3].first_plan_ms - e.reqs[4].first_plan_ms);
    eng_done(&e);
    return d;
}

Test(sched, lpm_matches_follow_tree_changes)
{
    cr_assert_lt(lpm_after_change(LPM_SAME), 0, "without a change 3 goes first");
    cr_assert_gt(lpm_after_change(LPM_EVICT), 0, "after eviction 4 goes first");
    cr_assert_gt(lpm_after_change(LPM_GROW), 0,
                 "after 4's pages are cached below its match 4 goes first");
}

/* ---- issue 10 item 3: the scheduler's locks are its own ------------------- */

/* An embedder locks the path a running request holds, unlocks, and unlocks
 * again. With bare lock counts the second unlock released the scheduler's
 * lock, and the eviction below removed the running request's prefix
 * (rkv_sched_check: "request 1 lock node is stale"). With leases the second
 * unlock is RKV_ERR_STATE and changes nothing. */
Test(sched, embedder_double_unlock_keeps_running_prefix)
{
    enum { P = 4, L = 32 };
    rkv_sched_config c = base_cfg(RKV_POLICY_FCFS);
    eng e;
    eng_init_seeded(&e, 64, P, &c, 2, 3);
    int32_t a[L + 1];
    fill_tokens(a, L + 1, 21);
    OK(eng_submit(&e, 0, 0, a, L, 1, 0)); /* caches a[0..L) */
    eng_drain(&e, 10);
    /* request 1 hits all of a[0..L) and runs its one new token: its lock
     * stays on the node at depth L while it decodes */
    OK(eng_submit(&e, 1, 0, a, L + 1, 8, 0));
    eng_step(&e);
    cr_assert(e.reqs[1].live);
    cr_assert_eq(e.reqs[1].first_cached, L);
    rkv_match m;
    OK(rkv_tree_match(e.tree, 0, a, L, NULL, 0, &m));
    cr_assert_eq(m.matched_tokens, L);
    rkv_node_info info;
    OK(rkv_tree_node_info(e.tree, m.node, &info));
    cr_assert_eq(info.lock_count, 1, "the scheduler's lock");
    rkv_lease mine;
    OK(rkv_tree_lock(e.tree, m.node, &mine));
    rkv_lease again = mine;
    OK(rkv_tree_unlock(e.tree, &mine));
    cr_assert_eq(rkv_tree_unlock(e.tree, &again), RKV_ERR_STATE);
    cr_assert_eq(rkv_tree_unlock(e.tree, &mine), RKV_ERR_STATE);
    OK(rkv_tree_node_info(e.tree, m.node, &info));
    cr_assert_eq(info.lock_count, 1, "the scheduler's lock is still held");
    OK(rkv_sched_check(e.s));
    /* evict everything evictable: the running request's prefix stays */
    rkv_tree_stats ts;
    OK(rkv_tree_get_stats(e.tree, &ts));
    cr_assert_geq(ts.locked_blocks, L / P);
    uint32_t freed = 0;
    if (ts.evictable_blocks > 0)
        OK(rkv_tree_evict(e.tree, (uint32_t)ts.evictable_blocks, &freed));
    OK(rkv_tree_match(e.tree, 0, a, L, NULL, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.matched_tokens, L, "the running request's prefix went");
    OK(rkv_sched_check(e.s));
    eng_drain(&e, 100); /* the fake engine verifies every KV position */
    eng_done(&e);
}

/* issue 10 item 4 from the scheduler's side: its tree's pool takes no
 * second tree, and a destroyed tree frees the pool for a new one. */
Test(sched, second_tree_on_a_pool_is_busy)
{
    rkv_sched_config c = base_cfg(RKV_POLICY_LPM);
    eng e;
    eng_init(&e, 32, 4, &c, 1);
    int32_t p[12];
    fill_tokens(p, 12, 4);
    OK(eng_submit(&e, 0, 0, p, 12, 2, 0));
    eng_drain(&e, 10);
    rkv_tree *t2 = NULL;
    cr_assert_eq(rkv_tree_create(e.pool, NULL, &t2), RKV_ERR_BUSY);
    cr_assert_null(t2);
    OK(rkv_sched_check(e.s));
    rkv_sched_destroy(e.s);
    rkv_tree_destroy(e.tree);
    OK(rkv_tree_create(e.pool, NULL, &e.tree));
    OK(rkv_sched_create(e.tree, &c, &e.s));
    OK(eng_submit(&e, 0, 0, p, 12, 2, 0));
    eng_drain(&e, 10);
    cr_assert_eq(e.reqs[0].first_cached, 0, "a new tree starts empty");
    eng_done(&e);
}

/* A request in a fresh namespace that caches no page (aborted while its
 * prompt is shorter than a page) leaves no empty namespace root behind. */
Test(sched, aborted_request_leaves_no_empty_namespace)
{
    rkv_sched_config c = base_cfg(RKV_POLICY_FCFS);
    eng e;
    eng_init(&e, 16, 4, &c, 4);
    rkv_tree_stats ts;
    for (uint64_t id = 0; id < 3; id++) {
        int32_t p[3];
        fill_tokens(p, 3, 70 + id);
        OK(eng_submit(&e, id, 1000 + id, p, 3, 4, 0)); /* own namespace */
        eng_step(&e); /* admitted: its (empty) root is locked */
        OK(rkv_tree_get_stats(e.tree, &ts));
        cr_assert_eq(ts.namespaces, 1);
        eng_abort(&e, id);
        OK(rkv_tree_get_stats(e.tree, &ts));
        cr_assert_eq(ts.namespaces, 0, "empty root of namespace %llu stayed",
                     (unsigned long long)(1000 + id));
    }
    eng_done(&e);
}

/* ---- admission counters ------------------------------------------------------ */

/* An admission undone for lack of headroom (the running request's future
 * blocks do not fit beside it) and redone later counts its cached tokens
 * once. W caches a 16-token prefix; A runs with a long output; B shares W's
 * prefix and is admitted, undone, and admitted again as A's need shrinks
 * (somewhere in the range of pool sizes: the test does not depend on the
 * exact headroom formula). The engine's own sums check every admission. */
Test(sched, undone_admission_counts_its_cached_tokens_once)
{
    enum { P = 4, X = 16 };
    uint32_t hits = 0;
    for (uint32_t nblocks = 11; nblocks <= 24; nblocks++) {
        rkv_sched_config c = nodedup_cfg(RKV_POLICY_FCFS);
        eng e;
        eng_init_seeded(&e, nblocks, P, &c, 3, 17);
        int32_t w[X + P], a[P];
        fill_tokens(w, X + P, 900);
        fill_tokens(a, P, 901);
        OK(eng_submit(&e, 0, 0, w, X, 1, 0)); /* W: caches X tokens */
        eng_drain(&e, 10);
        rkv_sched_stats st;
        OK(rkv_sched_get_stats(e.s, &st));
        cr_assert_eq(st.cached_tokens, 0);
        OK(eng_submit(&e, 1, 0, a, P, 40, 0)); /* A: 11 blocks at its end */
        eng_step(&e);
        OK(eng_submit(&e, 2, 0, w, X + P, 1, 0)); /* B: X tokens cached */
        eng_drain(&e, 200);
        OK(rkv_sched_get_stats(e.s, &st));
        /* in the smallest pools A's growth evicts some of W's pages first */
        cr_assert(e.reqs[2].first_cached <= X && e.reqs[2].first_cached % P == 0,
                  "pool %u: B found %u cached", nblocks, e.reqs[2].first_cached);
        hits += e.reqs[2].first_cached == X;
        if (st.preemptions == 0) /* each admitted for good once */
            cr_assert_eq(st.cached_tokens, e.reqs[2].first_cached,
                         "pool %u: cached_tokens %llu, B found %u", nblocks,
                         (unsigned long long)st.cached_tokens, e.reqs[2].first_cached);
        eng_assert_no_leak(&e); /* the sums over every admission */
        eng_fini(&e);
    }
    cr_assert_gt(hits, 0, "B never found W's prefix cached");
}

/* ---- de-duplication with a page-aligned shared part ------------------------- */

/* N requests share an X-token prefix; request 0's prompt is exactly the
 * prefix (page-aligned, so its last page is a full page in flight), the
 * others add whole pages. dedup_min_tokens = X: a follower is held only if
 * the leader's in-flight range covers the whole prefix, last page
 * included. The prefix is computed once. */
static void dedup_aligned(rkv_policy pol, uint32_t max_batch)
{
    enum { N = 5, X = 64, P = 8 };
    eng e;
    dedup_eng(&e, pol, X, max_batch, P, N, 5);
    uint32_t sl[N], suffixes = 0;
    for (uint32_t i = 0; i < N; i++) {
        sl[i] = i * P;
        suffixes += sl[i];
    }
    rkv_sched_stats st = dedup_serve(&e, N, X, 777, sl, 800);
    cr_assert_gt(st.dedup_holds, 0, "%s batch %u: nobody was held",
                 rkv_policy_name(pol), max_batch);
    /* the prefix once, each suffix once; the leader's last prompt token is
     * its own (it samples), the followers find all X tokens cached */
    cr_assert_eq(st.computed_tokens, X + suffixes, "%s batch %u: computed %llu, "
                 "expected %u", rkv_policy_name(pol), max_batch,
                 (unsigned long long)st.computed_tokens, X + suffixes);
    for (uint32_t i = 1; i < N; i++)
        cr_assert_eq(e.reqs[i].first_cached, X, "%s: request %u cached %u",
                     rkv_policy_name(pol), i, e.reqs[i].first_cached);
    eng_done(&e);
}

Test(sched, dedup_holds_for_a_page_aligned_last_page)
{
    for (int pol = 0; pol <= RKV_POLICY_BOUNDED; pol++) {
        dedup_aligned((rkv_policy)pol, 4096); /* whole prompts in a step */
        dedup_aligned((rkv_policy)pol, 24);   /* chunked prefill */
    }
}

/* ---- priority aging ----------------------------------------------------------- */

/* Admission order (max_running 1) of requests submitted at given times
 * with given priorities, all waiting when the first step runs. */
static void aged_order(double aging, uint32_t n, const double *at,
                       const int32_t *prio, uint32_t *order)
{
    rkv_sched_config c = nodedup_cfg(RKV_POLICY_PRIORITY);
    c.max_running = 1;
    c.aging_per_s = aging;
    eng e;
    eng_init_seeded(&e, 256, 4, &c, n, 3);
    for (uint32_t i = 0; i < n; i++) {
        int32_t p[8];
        fill_tokens(p, 8, 600 + i);
        e.now = at[i];
        OK(eng_submit(&e, i, 0, p, 8, 1, prio[i]));
    }
    for (uint32_t k = 0; k < n; k++) {
        const rkv_batch_plan *pl = eng_sched_step(e.s, e.now, 0, NULL);
        cr_assert_eq(pl->num_reqs, 1);
        order[k] = (uint32_t)pl->req_ids[0];
        int32_t t = eng_token(&e, pl->req_ids[0], e.reqs[pl->req_ids[0]].len);
        e.reqs[pl->req_ids[0]].live = 0;
        e.live--;
        e.now += 1.0;
        eng_sched_commit(e.s, &t, NULL, e.now, 0, NULL);
    }
    cr_assert_eq(e.live, 0);
    eng_done(&e);
}

Test(sched, priority_aging_lets_an_old_request_overtake)
{
    /* aging 1 per second. 0: priority 0 at t=0; 1: priority 3 at t=5 s
     * (effective 3 - 5 = -2 against 0's 0: the older one first); 2:
     * priority 8 at t=5 s (8 - 5 = 3: still ahead of 0). */
    double at[3] = {0.0, 5000.0, 5000.0};
    int32_t prio[3] = {0, 3, 8};
    uint32_t got[3];
    aged_order(1.0, 3, at, prio, got);
    uint32_t expect[3] = {2, 0, 1};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got[i], expect[i], "aged position %d: %u", i, got[i]);
    /* the same arrivals without aging: priority alone */
    aged_order(0.0, 3, at, prio, got);
    uint32_t plain[3] = {2, 1, 0};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got[i], plain[i], "unaged position %d: %u", i, got[i]);
    /* a faster rate: 0 has waited long enough to pass 2 as well
     * (8 - 2 * 5 = -2 and 3 - 10 = -7 against 0) */
    aged_order(2.0, 3, at, prio, got);
    uint32_t fast[3] = {0, 2, 1};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got[i], fast[i], "fast-aged position %d: %u", i, got[i]);
}

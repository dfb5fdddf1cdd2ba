/*
 * tests/test_sched_tiers.c -- the scheduler over a tree with a host tier
 * (issue 12, "Tiers in the scheduler" in radixkv.h).
 *
 * The engine of tests/support/sched_tier_kv.h (shared with
 * tests/test_sched_tier_cuda.c) drives the scheduler as a server does, on
 * a host pool with real KV memory (one layer, one head, head_dim 2, f32: a
 * token's K is 8 bytes) and a host store of the same block size, so loads
 * and swaps move real bytes: every token's K holds a hash of its
 * request's prefix (namespace included), written when the plan computes
 * it, and every position a plan attends to must hold its own prefix hash
 * -- so a page loaded from the host with the wrong bytes, in the wrong
 * block or too early fails the test. rkv_sched_check and rkv_tree_check
 * run after every step and commit; every plan's copy list is checked
 * (kinds, media, pages, requests named) and recorded.
 *
 * Covered: lower-tier hits ordered as cached under lpm (with one running
 * slot the loading request goes before an older request fcfs would
 * take); a request waits only for its own load (others run in the step
 * that queues it); a failed load (injected copy error) falls back to
 * computing; swap on preemption and back; the plan's copy lists (every
 * STORE from the device lists source blocks that hold a page the engine
 * computed, checked on every plan of every test); selective write-through
 * storing hit pages; the scheduler's own allocations failing one by one
 * with tiers on.
 * While the tree's tiers are placeholders (attach refuses), every test
 * skips with a message.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "radix/tree_debug.h"
#include "sched/sched_debug.h"
#include "sched/sched_internal.h"
#include "tier/store.h"
#include "tests/support/sched_tier_kv.h"
#include "tests/test_sched_engine.h"

#define P STK_P


/* 1 when the tree's tiers work; 0: skipped (placeholders). */
static int tsetup(stk_env *e, uint32_t nblocks, uint32_t host_blocks,
                  const rkv_sched_config *cfg, int write_policy)
{
    return stk_setup(e, RKV_DEVICE_HOST, nblocks, host_blocks, 0, cfg,
                     write_policy) == STK_READY;
}

#define SETUP_OR_SKIP(e, nb, hb, cfg, wp)                                     \
    do {                                                                      \
        if (!tsetup((e), (nb), (hb), (cfg), (wp)))                            \
            cr_skip_test("the tree's tiers are not built (placeholders)");   \
    } while (0)

/* tsetup as a stk_setup_fn (skips while the tiers are placeholders). */
static void setup_host(stk_env *e, uint32_t nblocks, uint32_t host_blocks,
                       const rkv_sched_config *cfg, int write_policy)
{
    SETUP_OR_SKIP(e, nblocks, host_blocks, cfg, write_policy);
}

/* A host pool's loads are done by the next step's poll. */
static const stk_tier host_tier = {setup_host, 1, 1};

/* The shared prefix warmed (lpm, 2 running, 12 blocks), then request 6 on
 * it: its first step only starts its load. */
static void warm_loading(stk_env *e, int32_t shared[28])
{
    stk_warm_base(e, setup_host, RKV_POLICY_LPM, 2, 12, shared);
    OK(stk_submit(e, 6, shared, 28, 2));
    cr_assert_eq(stk_step(e), 0);
    cr_assert_eq(e->r[6].loads_seen, 1);
}

/* With one slot, lpm admits the request whose prefix is on the host (its
 * load takes the slot) before an older unrelated one; the loaded pages
 * are then served from the host, with the right KV. */
Test(sched_tiers, host_hits_ordered_as_cached)
{
    stk_env e;
    int32_t shared[28], other[20];
    stk_warm_base(&e, setup_host, RKV_POLICY_LPM, 1, 12, shared);
    fill_tokens(other, 20, 777);
    OK(stk_submit(&e, 5, other, 20, 2));  /* older */
    e.now += 1;
    OK(stk_submit(&e, 6, shared, 28, 2)); /* shares 24 tokens, on host */
    int64_t s0 = e.steps;
    cr_assert_eq(stk_step(&e), 0, "the load holds the only slot");
    rkv_request_info info;
    OK(rkv_sched_request_info(e.s, 6, &info));
    cr_assert_eq(info.state, RKV_REQ_WAITING);
    cr_assert_eq(info.loading, 1);
    cr_assert_eq(e.r[6].loads_seen, 1);
    stk_drain(&e, 400);
    cr_assert_lt(e.r[6].first_step, e.r[5].first_step,
                 "lpm must take the host hit first (steps %lld vs %lld)",
                 (long long)e.r[6].first_step, (long long)e.r[5].first_step);
    cr_assert_eq(e.r[6].first_step, s0 + 1, "admitted right after its load");
    cr_assert_gt(e.r[6].first_host, 0);
    cr_assert_geq(e.r[6].first_cached, e.r[6].first_host);
    rkv_sched_stats st = stk_expect_loads(&e, 1, 0);
    cr_assert_eq(st.cached_tokens_by_medium[RKV_MEDIUM_HOST], e.r[6].first_host);
    /* the plan listed the load's destination blocks; run_plan found them
     * in request 6's block table at its admission */
    cr_assert_eq(e.r[6].nload_blocks * P, e.r[6].first_host);
    cr_assert_eq(e.r[6].load_blocks_used, 1);
    stk_finish(&e);
}

/* fcfs ignores the cache: the older request goes first, no load ahead. */
Test(sched_tiers, fcfs_does_not_reorder)
{
    stk_env e;
    int32_t shared[28], other[20];
    stk_warm_base(&e, setup_host, RKV_POLICY_FCFS, 1, 12, shared);
    fill_tokens(other, 20, 777);
    OK(stk_submit(&e, 5, other, 20, 2));
    e.now += 1;
    OK(stk_submit(&e, 6, shared, 28, 2));
    stk_drain(&e, 400);
    cr_assert_lt(e.r[5].first_step, e.r[6].first_step);
    stk_finish(&e);
}

/* A request waits for its own load only: the step that queues it runs the
 * other request, and the loading one runs once its ticket is done. */
Test(sched_tiers, waits_only_for_own_load)
{
    stk_others_run_while_one_loads(&host_tier, 12, 3);
}

/* Two requests continue the same host prefix and arrive together: the
 * second does not load the pages the first is loading (while LOADING they
 * are neither matchable nor a lower continuation) and does not compute
 * them either: it waits for the first one's ticket and is admitted with
 * the loaded pages on the device. Both finish with the right KV; the
 * prefix is loaded once. */
Test(sched_tiers, shared_prefix_loaded_once)
{
    stk_shared_prefix_loaded_once(&host_tier);
}

/* Aborting a request whose load is queued: the tree holds the loading
 * node's lease until the copy completes; the scheduler lets go of it at
 * the next step's poll. Nothing leaks, rkv_sched_check holds throughout. */
Test(sched_tiers, abort_while_loading)
{
    stk_env e;
    int32_t shared[28];
    warm_loading(&e, shared);
    OK(rkv_sched_abort(e.s, 6));
    e.r[6].live = 0;
    e.live--;
    OK(rkv_sched_check(e.s));
    (void)stk_step(&e); /* its ticket completes: the lease goes */
    stk_finish(&e);
}

/* Loads counted as not worth it (load slower than compute) are not made:
 * the request computes and nothing is loaded. */
Test(sched_tiers, load_not_worth_it_computes)
{
    stk_env e;
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, 2);
    c.compute_ms_per_token = 0.01;
    c.host_load_ms_per_page = 1.0; /* 25x the compute of its 4 tokens */
    int32_t shared[28];
    stk_warm_shared(&e, setup_host, &c, 12, shared);
    OK(stk_submit(&e, 6, shared, 28, 2));
    stk_drain(&e, 400);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.loads, 0);
    cr_assert_eq(e.r[6].first_host, 0);
    stk_finish(&e);
}

/* Swap instead of recompute: a small pool preempts; the victim's computed
 * pages go to host (SWAP_OUT in the plan), device eviction takes them, and
 * its resumption loads them back (SWAP_IN) with the right KV. */
Test(sched_tiers, swap_on_preempt_round_trip)
{
    stk_swap_round_trip(setup_host);
}

/* Write-through lists its stores in the plans (STORE copies), and the
 * pages the tree stored equal the pages listed. */
Test(sched_tiers, plan_lists_stores)
{
    stk_env e;
    int32_t t[24];
    stk_store_through(&e, setup_host, 12, 55, t);
    (void)stk_step(&e); /* an empty step lists the last commit's stores */
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_gt(ts.stores_blocks[RKV_MEDIUM_HOST], 0);
    cr_assert_eq(e.store_copies, ts.stores_blocks[RKV_MEDIUM_HOST]);
    stk_finish(&e);
}

/* Issue 12: write-through STORE entries name their source device blocks
 * (they were a count only). Every listed block held a computed page when
 * listed (check_store_blocks); here the listed blocks are exactly the
 * request's cached pages, and the host copies made from them carry the
 * right bytes: with the device KV overwritten, a second request loads the
 * prefix back and attends to the right KV (run_plan). */
Test(sched_tiers, store_copies_list_source_blocks)
{
    stk_env e;
    int32_t t[24];
    stk_store_through(&e, setup_host, 16, 56, t);
    /* lists the last commit's stores and runs the rest */
    rkv_tier_stats ts = stk_stores_done(&e, 2, 0);
    /* queued at a commit, taken by the next step's poll: that step's plan
     * lists them done (their blocks may be evicted later in the step) */
    cr_assert_eq(e.store_queued_pages, 0);
    cr_assert_eq(e.store_done_pages, ts.stores_blocks[RKV_MEDIUM_HOST]);
    cr_assert_eq(e.nlisted, e.store_done_pages);
    stk_reload_from_host(&e, t);
    stk_finish(&e);
}

/* Write-back: a device eviction's demotion lists its source blocks as
 * done STORE entries, one page each time the tree copied one down. */
Test(sched_tiers, demotions_list_source_blocks)
{
    stk_demotions_list_source_blocks(setup_host);
}

/* Selective write-through (k = 2) under the scheduler: a prompt admitted
 * three times has its cached pages hit twice by admission, so they are
 * copied down. Admission's match must count the hits (it once used a match
 * that never did, and selective stored nothing). */
Test(sched_tiers, selective_stores_hit_pages)
{
    stk_env e;
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, 2);
    SETUP_OR_SKIP(&e, 24, 64, &c, RKV_WRITE_SELECTIVE);
    int32_t t[24];
    fill_tokens(t, 24, 66);
    rkv_tier_stats ts;
    for (uint64_t id = 0; id < 3; id++) {
        OK(stk_submit(&e, id, t, 24, 2));
        stk_drain(&e, 200);
        OK(rkv_tree_check(e.tree));
        OK(rkv_tree_tier_stats(e.tree, &ts));
        if (id < 2) /* hit fewer than k times: nothing copied down yet */
            cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_HOST] +
                             ts.pending_stores, 0);
    }
    (void)stk_step(&e); /* polls: the queued stores run */
    OK(rkv_tree_check(e.tree));
    OK(rkv_tree_tier_stats(e.tree, &ts));
    /* the 23 tokens admission may match: 5 full pages */
    cr_assert_geq(ts.stores_blocks[RKV_MEDIUM_HOST], 5, "selective stored "
                  "%llu pages", (unsigned long long)ts.stores_blocks[RKV_MEDIUM_HOST]);
    cr_assert_gt(ts.hit_tokens[RKV_MEDIUM_DEVICE], 0);
    stk_finish(&e);
}

/* The host store fails its next copy: the load fails, the request
 * computes those tokens and finishes with the right KV; nothing leaks. */
Test(sched_tiers, failed_load_falls_back_to_compute)
{
    stk_env e;
    int32_t shared[28];
    warm_loading(&e, shared);
    rkv_store_fail_after(e.host, 1);
    stk_drain(&e, 400);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.failed_loads, 1);
    cr_assert_eq(e.r[6].first_host, 0, "a failed load serves nothing");
    stk_finish(&e);
}

/* Failure injection in a tiers scenario (host hits, loads, preemption
 * with swap): each of the scheduler's own allocations (SCHED), each of the
 * tree's node-memory allocations (TREE) and each of the host store's
 * copies (STORE) fails in turn. A failed call surfaces as NOMEM with the
 * scheduler consistent and the retry succeeds; a failed copy is a failed
 * load (computed instead) or a store not made; every request finishes with
 * the right KV (run_plan checks every attended position) and nothing
 * leaks. */
enum { SCHED_ALLOCS, TREE_ALLOCS, STORE_COPIES };

/* 1: the scenario's ids near 2^24 (2^24 - 1 - fill_tokens's), for the
 * runs on 3-byte trees (stk_token_bytes). */
static int g_ids3;

static void ids3(int32_t *t, uint32_t n)
{
    for (uint32_t i = 0; g_ids3 && i < n; i++)
        t[i] = 0xffffff - t[i];
}

static uint64_t oom_scenario(int which, int64_t fail_k, uint64_t *surfaced)
{
    stk_env e;
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, 3);
    c.swap = 1;
    if (!tsetup(&e, 16, 64, &c, RKV_WRITE_BACK))
        return 0;
    e.tolerate_nomem = 1;
    int32_t shared[28];
    fill_tokens(shared, 28, 4242);
    ids3(shared, 28);
    stk_warm_host(&e, shared, 24);
    uint64_t tree0 = rkv_tree_debug_alloc_calls(e.tree);
    if (which == SCHED_ALLOCS)
        rkv_sched_debug_fail_alloc_after(fail_k < 0 ? INT64_MAX / 2 : fail_k);
    else if (which == TREE_ALLOCS && fail_k >= 0)
        rkv_tree_debug_fail_alloc_after(e.tree, fail_k);
    else if (which == STORE_COPIES && fail_k >= 0)
        rkv_store_fail_after(e.host, (uint32_t)fail_k + 1);
    int32_t t[40];
    for (uint64_t id = 4; id < 10; id++) {
        memcpy(t, shared, sizeof shared);
        fill_tokens(t + 24, 8, 300 + id);
        ids3(t + 24, 8);
        rkv_status st = stk_submit(&e, id, id % 2 ? t : t + 8, 24, 20);
        if (st == RKV_ERR_NOMEM) {
            OK(rkv_sched_check(e.s));
            e.nomem_seen++;
            st = stk_submit(&e, id, id % 2 ? t : t + 8, 24, 20);
        }
        OK(st);
    }
    stk_drain(&e, 4000);
    uint64_t used = 0;
    if (which == SCHED_ALLOCS) {
        used = (uint64_t)(INT64_MAX / 2 - rkv_sched_debug_alloc_countdown());
        rkv_sched_debug_fail_alloc_after(-1);
    } else if (which == TREE_ALLOCS) {
        used = rkv_tree_debug_alloc_calls(e.tree) - tree0;
        rkv_tree_debug_fail_alloc_after(e.tree, -1);
    } else {
        rkv_tier_stats ts;
        OK(rkv_tree_tier_stats(e.tree, &ts));
        used = ts.failed_loads + ts.failed_stores; /* the failure happened */
        rkv_store_fail_after(e.host, 0);
    }
    *surfaced += e.nomem_seen;
    stk_finish(&e);
    return used;
}

/* Every allocation of `which` fails in turn over the scenario: each failure
 * surfaces from the scheduler at most once, none without one; the
 * allocations counted, *surfaced the failures that surfaced. */
static uint64_t fail_each(int which, uint64_t *surfaced)
{
    *surfaced = 0;
    uint64_t n = oom_scenario(which, -1, surfaced);
    if (n == 0)
        cr_skip_test("the tree's tiers are not built (placeholders)");
    cr_assert_eq(*surfaced, 0);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t before = *surfaced;
        oom_scenario(which, (int64_t)k, surfaced);
        cr_assert_leq(*surfaced, before + 1);
    }
    return n;
}

Test(sched_tiers, sched_allocations_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced;
    (void)fail_each(SCHED_ALLOCS, &surfaced);
    cr_assert_gt(surfaced, 0);
}

Test(sched_tiers, tree_allocations_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced;
    uint64_t n = fail_each(TREE_ALLOCS, &surfaced);
    cr_log_info("%llu tree allocations, each failed once; %llu surfaced",
                (unsigned long long)n, (unsigned long long)surfaced);
}

/* Every copy of the host store fails in turn, until the scenario makes
 * fewer copies than the failure's position. */
Test(sched_tiers, store_copies_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced = 0;
    if (oom_scenario(SCHED_ALLOCS, -1, &surfaced) == 0)
        cr_skip_test("the tree's tiers are not built (placeholders)");
    uint64_t k = 0, failed = 0;
    for (; k < 400; k++) {
        uint64_t f = oom_scenario(STORE_COPIES, (int64_t)k, &surfaced);
        if (f == 0)
            break; /* past the last copy */
        failed++;
    }
    cr_assert_gt(failed, 0, "no copy failed: the injection did not reach");
    cr_assert_lt(k, 400, "copies kept failing past 400");
    cr_assert_eq(surfaced, 0, "a failed copy surfaced from the scheduler");
}

/* The same on a tree of 3-byte ids (ids near 2^24): each of the tree's
 * allocations and each host copy fails in turn, with every request's KV
 * checked; the tree makes as many allocations as a 4-byte one. */
Test(sched_tiers, tok3_tree_allocations_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced;
    g_ids3 = 1;
    uint64_t n4 = oom_scenario(TREE_ALLOCS, -1, &surfaced);
    stk_token_bytes = 3;
    uint64_t n3 = fail_each(TREE_ALLOCS, &surfaced);
    cr_assert_eq(n3, n4, "3-byte tree: %llu allocations, 4-byte %llu",
                 (unsigned long long)n3, (unsigned long long)n4);
    stk_token_bytes = 4;
}

Test(sched_tiers, tok3_store_copies_fail_one_by_one, .timeout = 300)
{
    uint64_t surfaced = 0, k = 0, failed = 0;
    g_ids3 = 1;
    stk_token_bytes = 3;
    for (; k < 400; k++) {
        uint64_t f = oom_scenario(STORE_COPIES, (int64_t)k, &surfaced);
        if (f == 0)
            break;
        failed++;
    }
    cr_assert_gt(failed, 0, "no copy failed: the injection did not reach");
    cr_assert_lt(k, 400);
    cr_assert_eq(surfaced, 0);
    stk_token_bytes = 4;
}

/* Config ranges of the tier fields. */
Test(sched_tiers, config_ranges)
{
    rkv_pool *pool;
    rkv_tree *tree;
    eng_pool_tree(8, P, &pool, &tree);
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    cr_assert_eq(c.use_tiers, 1);
    cr_assert_eq(c.swap, 0);
    rkv_sched *s = NULL;
    double bad[] = {-1.0, 1.0 / 0.0, 0.0 / 0.0};
    for (int f = 0; f < 3; f++) {
        for (int b = 0; b < 3; b++) {
            rkv_sched_config x = c;
            double *fld = f == 0 ? &x.compute_ms_per_token
                          : f == 1 ? &x.host_load_ms_per_page
                                   : &x.disk_load_ms_per_page;
            *fld = bad[b];
            cr_assert_eq(rkv_sched_create(tree, &x, &s), RKV_ERR_INVALID_ARG);
            cr_assert_null(s);
        }
    }
    /* without tiers: no copies, no loads, swap is a no-op */
    c.swap = 1;
    OK(rkv_sched_create(tree, &c, &s));
    int32_t t[10];
    fill_tokens(t, 10, 1);
    rkv_request_desc d = tu_request(1, t, 10, 1);
    OK(rkv_sched_submit(s, &d));
    const rkv_batch_plan *p;
    OK(rkv_sched_step(s, 0, &p));
    cr_assert_eq(p->num_reqs, 1);
    cr_assert_eq(p->num_copies, 0);
    OK(rkv_sched_check(s));
    rkv_sched_destroy(s);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
}

/* The ordering credit of lower pages ("Tiers in the scheduler"): per page
 * P - load_ms_per_page / compute_ms_per_token tokens, at least 0, at the
 * load cost of the medium the page is on (host and disk apart); all costs
 * 0: a full page; compute 0 with a load cost: nothing. */
Test(sched_tiers, lower_pages_credited_at_their_medium_cost)
{
    static const struct { double compute, host, disk; } c[] = {
        {1.0, 0.5, 3.0}, {1.0, 3.0, 0.5}, {0.25, 0.5, 2.0}, {1.0, 0.0, 6.0},
        {0.0, 0.0, 0.0}, {0.0, 1.0, 2.0}};
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        rkv_sched_config cfg;
        rkv_sched_config_init(&cfg);
        cfg.compute_ms_per_token = c[k].compute;
        cfg.host_load_ms_per_page = c[k].host;
        cfg.disk_load_ms_per_page = c[k].disk;
        rkv_pool *pool;
        rkv_tree *tree;
        eng_pool_tree(16, P, &pool, &tree);
        rkv_sched *s = NULL;
        OK(rkv_sched_create(tree, &cfg, &s));
        double per_host, per_disk;
        if (c[k].compute == 0) {
            per_host = c[k].host == 0 ? P : 0;
            per_disk = c[k].disk == 0 ? P : 0;
        } else {
            per_host = P - c[k].host / c[k].compute;
            per_disk = P - c[k].disk / c[k].compute;
        }
        per_host = per_host > 0 ? per_host : 0;
        per_disk = per_disk > 0 ? per_disk : 0;
        for (uint32_t hp = 0; hp <= 3; hp++)
            for (uint32_t dp = 0; dp <= 3; dp++) {
                double got = rkv_sched_tier_credit(s, (size_t)hp * P, (size_t)dp * P);
                double want = hp * per_host + dp * per_disk;
                cr_assert(fabs(got - want) < 1e-9, "costs %g/%g/%g: %u host + %u disk "
                          "pages credited %g tokens, expected %g", c[k].compute,
                          c[k].host, c[k].disk, hp, dp, got, want);
            }
        rkv_sched_destroy(s);
        rkv_tree_destroy(tree);
        rkv_pool_destroy(pool);
    }
}

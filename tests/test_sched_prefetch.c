/*
 * tests/test_sched_prefetch.c -- prefetch of a queued request's disk pages
 * to the host tier (rkv_sched_config.prefetch, rkv_tree_prefetch).
 *
 * The engine of tests/support/sched_tier_kv.h on a host pool with real KV
 * memory, a host store and a disk store (a file): every token's K holds a
 * hash of its prefix and every position a plan attends to is checked, so
 * pages that moved disk -> host -> device with the wrong bytes fail, and
 * rkv_sched_check / rkv_tree_check run after every step and commit.
 *
 * The scenario: a 24-token prefix pushed down to the disk (a host of 8
 * blocks under a pool of 12, three other requests after it), then a
 * request on it. The clock moves 1 ms a step; a disk page costs 2 ms, a
 * host page 0.25 ms, a token 1 ms (loads are worth it from either). Without
 * prefetch its load reads the disk; with WAIT it is held until the disk
 * is done (12 ms for 6 pages) and its load reads the host only; with
 * BEST_EFFORT it goes at once and the pages not arrived are read from
 * disk; TIMEOUT holds it for the timeout only. Each mode runs again on a
 * tree of 3-byte ids (ids near 2^24) and must do what a 4-byte tree does.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "radixkv.h"
#include "tier/store.h"
#include "tests/support/sched_tier_kv.h"
#include "tests/test_sched_engine.h"

#define P STK_P

typedef struct pf_result {
    uint32_t host, disk;     /* its cached tokens by medium at admission */
    int64_t wait_steps;      /* steps from its submission to its first plan */
    rkv_sched_stats st;
} pf_result;

/* 1: the prefix's ids near 2^24 (2^24 - 1 - fill_tokens's). */
static int g_ids3;

static pf_result run_prefetch_fail(int mode, double timeout_ms, double disk_ms,
                                   uint32_t fail_k)
{
    stk_env e;
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, 2);
    c.compute_ms_per_token = 1.0;
    c.host_load_ms_per_page = 0.25;
    c.disk_load_ms_per_page = disk_ms;
    c.prefetch = mode;
    c.prefetch_timeout_ms = timeout_ms;
    int got = stk_setup(&e, RKV_DEVICE_HOST, 12, 8, 64, &c, RKV_WRITE_BACK);
    cr_assert_eq(got, STK_READY, "setup: %s", rkv_last_error());
    int32_t shared[28];
    fill_tokens(shared, 28, 4242);
    for (uint32_t i = 0; g_ids3 && i < 28; i++)
        shared[i] = 0xffffff - shared[i];
    rkv_tier_match tm;
    stk_warm_lower(&e, shared, 24, 3, &tm);
    cr_assert(tm.host_tokens == 0 && tm.disk_tokens == 20, "the prefix must be "
              "on disk alone (host %zu, disk %zu tokens)", tm.host_tokens,
              tm.disk_tokens);
    int64_t s0 = e.steps;
    if (fail_k > 0) /* the fail_k-th disk I/O from here fails */
        rkv_store_fail_after(e.disk, fail_k);
    OK(stk_submit(&e, 6, shared, 28, 2));
    stk_drain(&e, 400);
    pf_result r;
    r.host = e.r[6].first_host;
    r.disk = e.r[6].first_disk;
    r.wait_steps = e.r[6].first_step - s0;
    OK(rkv_sched_get_stats(e.s, &r.st));
    stk_finish(&e);
    return r;
}

static pf_result run_prefetch(int mode, double timeout_ms, double disk_ms)
{
    return run_prefetch_fail(mode, timeout_ms, disk_ms, 0);
}

/* The control: without prefetch the prefix is read from the disk. */
Test(sched_prefetch, off_reads_the_disk)
{
    pf_result r = run_prefetch(RKV_PREFETCH_OFF, 0, 2.0);
    cr_assert_eq(r.disk, 24, "host %u disk %u", r.host, r.disk);
    cr_assert_eq(r.st.prefetches, 0);
}

/* WAIT: held until the disk is done with its 6 pages (12 ms = 12 steps),
 * then loaded from the host alone. */
Test(sched_prefetch, wait_loads_from_host)
{
    pf_result r = run_prefetch(RKV_PREFETCH_WAIT, 0, 2.0);
    cr_assert_eq(r.st.prefetches, 1);
    cr_assert_eq(r.st.prefetch_pages, 6);
    cr_assert_eq(r.host, 24, "host %u disk %u", r.host, r.disk);
    cr_assert_eq(r.disk, 0);
    cr_assert_eq(r.st.prefetch_late_pages, 0);
    cr_assert_gt(r.st.prefetch_waits, 0);
    cr_assert_geq(r.wait_steps, 12, "admitted after %lld steps, before its "
                  "prefetch arrived", (long long)r.wait_steps);
}

/* BEST_EFFORT: not held; the pages still on their way are disk reads. */
Test(sched_prefetch, best_effort_does_not_wait)
{
    pf_result r = run_prefetch(RKV_PREFETCH_BEST_EFFORT, 0, 2.0);
    cr_assert_eq(r.st.prefetch_pages, 6);
    cr_assert_eq(r.st.prefetch_waits, 0);
    cr_assert_lt(r.wait_steps, 12);
    cr_assert_gt(r.st.prefetch_late_pages, 0);
    cr_assert_eq(r.disk, r.st.prefetch_late_pages * P);
    cr_assert_eq(r.host + r.disk, 24);
}

/* TIMEOUT: held 5 ms, not 12; then what arrived is host, the rest disk. */
Test(sched_prefetch, timeout_holds_until_the_timeout)
{
    pf_result r = run_prefetch(RKV_PREFETCH_TIMEOUT, 5.0, 2.0);
    cr_assert_gt(r.st.prefetch_waits, 0);
    cr_assert_geq(r.wait_steps, 5);
    cr_assert_lt(r.wait_steps, 12);
    cr_assert_gt(r.host, 0, "host %u disk %u", r.host, r.disk);
    cr_assert_gt(r.disk, 0);
    cr_assert_eq(r.host + r.disk, 24);
}

/* A disk page costs more than computing it (5 ms > 4 tokens at 1 ms):
 * without prefetch the prefix is computed; BEST_EFFORT admits it before
 * any page arrived and computes what has not (never a disk read that is
 * not worth it); WAIT gets it all from the host. */
Test(sched_prefetch, slow_disk_late_pages_are_computed)
{
    pf_result off = run_prefetch(RKV_PREFETCH_OFF, 0, 5.0);
    cr_assert_eq(off.host + off.disk, 0, "host %u disk %u", off.host, off.disk);
    pf_result be = run_prefetch(RKV_PREFETCH_BEST_EFFORT, 0, 5.0);
    cr_assert_eq(be.st.prefetch_pages, 6);
    cr_assert_eq(be.disk, 0, "host %u disk %u", be.host, be.disk);
    cr_assert_eq(be.st.prefetch_late_pages, 0);
    pf_result w = run_prefetch(RKV_PREFETCH_WAIT, 0, 5.0);
    cr_assert_eq(w.host, 24, "host %u disk %u", w.host, w.disk);
    cr_assert_geq(w.wait_steps, 30);
}

/* A disk I/O that fails from the request's submission on, the k-th for
 * each k in turn (a write of the host's frontier going down to make room,
 * or the prefetch's own read): every run ends with the trees checked at
 * every step and the right KV; where the prefetch's read failed, that
 * node stayed on the disk whole (its host slots went back) and the
 * prefetch stopped there: nothing prefetched and the request not held,
 * or only the nodes above it on the host. */
Test(sched_prefetch, failed_prefetch_leaves_the_disk_copy)
{
    int read_failed = 0;
    for (uint32_t k = 1; k <= 40; k++) {
        pf_result r = run_prefetch_fail(RKV_PREFETCH_WAIT, 0, 2.0, k);
        cr_assert_eq(r.host + r.disk, 24, "k=%u: host %u disk %u", k, r.host,
                     r.disk);
        if (r.st.prefetches == 0) {
            read_failed |= 1;
            cr_assert_eq(r.st.prefetch_waits, 0);
            cr_assert_eq(r.host, 0, "k=%u: host %u disk %u", k, r.host, r.disk);
        } else if (r.st.prefetch_pages < 6) {
            /* a later node's read failed: the nodes above it moved */
            read_failed |= 2;
            cr_assert_eq(r.host, r.st.prefetch_pages * P, "k=%u: host %u disk %u",
                         k, r.host, r.disk);
        }
    }
    cr_assert_eq(read_failed, 3, "no k made the prefetch's first (1) or a "
                 "later (2) read fail: %d", read_failed);
}

/* Every mode on a 3-byte tree: the same admissions, media and prefetch
 * figures as a 4-byte tree given the same ids (near 2^24). */
static void pf_tok3(int mode, double timeout_ms, double disk_ms, uint32_t fail_k)
{
    g_ids3 = 1;
    stk_token_bytes = 3;
    pf_result a = run_prefetch_fail(mode, timeout_ms, disk_ms, fail_k);
    stk_token_bytes = 4;
    pf_result b = run_prefetch_fail(mode, timeout_ms, disk_ms, fail_k);
    cr_assert_eq(a.host, b.host, "mode %d k %u", mode, fail_k);
    cr_assert_eq(a.disk, b.disk, "mode %d k %u", mode, fail_k);
    cr_assert_eq(a.wait_steps, b.wait_steps);
    cr_assert_eq(a.st.prefetches, b.st.prefetches);
    cr_assert_eq(a.st.prefetch_pages, b.st.prefetch_pages);
    cr_assert_eq(a.st.prefetch_late_pages, b.st.prefetch_late_pages);
    cr_assert_eq(a.st.prefetch_waits, b.st.prefetch_waits);
    cr_assert_eq(a.st.loads, b.st.loads);
    cr_assert_eq(a.st.load_pages, b.st.load_pages);
    cr_assert_eq(a.st.load_disk_pages, b.st.load_disk_pages);
    cr_assert_eq(a.st.failed_loads, b.st.failed_loads);
}

Test(sched_prefetch, tok3_as_tok4)
{
    pf_tok3(RKV_PREFETCH_OFF, 0, 2.0, 0);
    pf_tok3(RKV_PREFETCH_WAIT, 0, 2.0, 0);
    pf_tok3(RKV_PREFETCH_BEST_EFFORT, 0, 2.0, 0);
    pf_tok3(RKV_PREFETCH_TIMEOUT, 5.0, 2.0, 0);
    pf_tok3(RKV_PREFETCH_BEST_EFFORT, 0, 5.0, 0);
    for (uint32_t k = 1; k <= 40; k += 3)
        pf_tok3(RKV_PREFETCH_WAIT, 0, 2.0, k);
    /* and the prefetch did happen on the 3-byte tree */
    stk_token_bytes = 3;
    pf_result r = run_prefetch(RKV_PREFETCH_WAIT, 0, 2.0);
    cr_assert_eq(r.st.prefetch_pages, 6);
    cr_assert_eq(r.host, 24, "host %u disk %u", r.host, r.disk);
    stk_token_bytes = 4;
}

/* rkv_tree_prefetch's arguments, and no disk below a host: nothing. */
Test(sched_prefetch, tree_prefetch_arguments)
{
    rkv_pool *pool;
    rkv_tree *tree;
    eng_pool_tree(16, P, &pool, &tree);
    int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint32_t pages = 7;
    cr_assert_eq(rkv_tree_prefetch(NULL, 0, t, 8, 4, &pages), RKV_ERR_INVALID_ARG);
    cr_assert_eq(pages, 0);
    cr_assert_eq(rkv_tree_prefetch(tree, 0, t, 8, 4, NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_tree_prefetch(tree, 0, NULL, 8, 4, &pages), RKV_ERR_INVALID_ARG);
    pages = 7;
    OK(rkv_tree_prefetch(tree, 0, t, 8, 4, &pages)); /* no tiers */
    cr_assert_eq(pages, 0);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
}

Test(sched_prefetch, config_ranges)
{
    rkv_pool *pool;
    rkv_tree *tree;
    eng_pool_tree(16, P, &pool, &tree);
    rkv_sched_config c;
    rkv_sched_config_init(&c);
    cr_assert_eq(c.prefetch, RKV_PREFETCH_OFF);
    rkv_sched *s = NULL;
    c.prefetch = 4;
    cr_assert_eq(rkv_sched_create(tree, &c, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "prefetch") != NULL);
    c.prefetch = RKV_PREFETCH_TIMEOUT;
    c.prefetch_timeout_ms = -1;
    cr_assert_eq(rkv_sched_create(tree, &c, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "prefetch_timeout_ms") != NULL);
    c.prefetch_timeout_ms = 1.0 / 0.0;
    cr_assert_eq(rkv_sched_create(tree, &c, &s), RKV_ERR_INVALID_ARG);
    c.prefetch_timeout_ms = 10;
    OK(rkv_sched_create(tree, &c, &s));
    cr_assert_eq(rkv_sched_prefetch_ready_ms(s), 0);
    cr_assert_eq(rkv_sched_prefetch_ready_ms(NULL), 0);
    rkv_sched_destroy(s);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
}

/*
 * tests/test_sched_tier_cuda.c -- the scheduler end to end over a CUDA pool
 * (simulated) with a host tier, and with the host -> disk chain, where tier
 * copies are asynchronous (tier/README.md "Asynchronous copies"): a load
 * queued at admission is issued by one step's poll and completes on a
 * later one, so a request waits several steps for its own ticket.
 *
 * The engine is tests/support/sched_tier_kv.h's, shared with
 * tests/test_sched_tiers.c (one layer, one head, head_dim 2, f32: a
 * token's K is 8 bytes), but the KV lives in device memory and is read
 * and written through rkv_pool_copy_to_host / _from_host: every
 * computed token's K holds a hash of its request's prefix, and every
 * position a plan's kv_indices point to must hold its own prefix hash, so
 * a page loaded too early, into the wrong block or with the wrong bytes
 * fails the test. rkv_tree_check and rkv_sched_check run after every step
 * and commit; every plan's copy list is checked (a STORE's source blocks
 * hold a computed page; a load's destination blocks are the ones the
 * request is admitted with).
 *
 * Covered: a host load spanning several steps (exactly how many, per
 * simulator mode); other requests running while one loads; a prefix two
 * requests share loaded once; abort with a batch in flight; swap on
 * preemption and back; a failed copy at issue and at the event query
 * (the request computes, nothing is lost), then every copy call of
 * each kind failed in turn over a busy scenario (host, and host -> disk
 * chain); STORE source blocks under write-through and write-back, and
 * under device pressure (a STORE listed queued must still own its
 * source blocks: they are read through the pool, which refuses a free
 * block; done STOREs' and swap-outs' blocks, possibly freed, are read
 * straight from device memory); loads from the disk of a host -> disk
 * chain; the scheduler destroyed with loads in flight (its leases must
 * not outlive it). TS_DEBUG=1 prints each step.
 *
 * Built in every configuration; it runs where a CUDA pool can be created
 * (-DRKV_CUDA=SIM: .ci/run runs it in forward, reverse and deferred mode,
 * or a GPU). Elsewhere every test reports itself skipped ("no CUDA device:
 * scheduler tier CUDA tests skipped").
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "radixkv.h"
#include "radix/tree_debug.h"
#include "residency/tier_debug.h"
#include "tests/support/sched_tier_kv.h"
#include "tests/test_sched_engine.h"

#ifdef RKV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define SKIP_MSG "no CUDA device: scheduler tier CUDA tests skipped"
#define P STK_P


/* Device block b's P K values read straight from device memory, whether
 * the block is allocated or not (the engine's peek: a done STORE's or a
 * swap-out's source block may be free already, and the pool's copy
 * refuses free blocks). Layer 0's K is the first num_blocks * P tokens of
 * 8 bytes at rkv_pool_layer_kv's K pointer. */
static void kv_peek(stk_env *e, uint32_t b, uint64_t out[P])
{
#ifdef RKV_HAVE_CUDA
    void *k = NULL, *v = NULL;
    OK(rkv_pool_layer_kv(e->pool, 0, &k, &v));
    cr_assert_eq(cudaMemcpy(out, (const uint64_t *)k + (size_t)b * P,
                            P * sizeof *out, cudaMemcpyDeviceToHost),
                 cudaSuccess);
#else
    (void)e;
    (void)b;
    memset(out, 0, P * sizeof *out);
#endif
}

/* Every device block's K overwritten, allocated or not (the engine's
 * clobber hook). */
static void kv_clobber(stk_env *e)
{
#ifdef RKV_HAVE_CUDA
    void *k = NULL, *v = NULL;
    OK(rkv_pool_layer_kv(e->pool, 0, &k, &v));
    cr_assert_eq(cudaMemset(k, 0xee, (size_t)e->nblocks * P * sizeof(uint64_t)),
                 cudaSuccess);
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess);
#else
    (void)e;
#endif
}

/* Host store (host_blocks, or none when 0) and disk store (disk_blocks,
 * or none when 0) under a CUDA pool; skips without a CUDA device. */
static void tsetup(stk_env *e, uint32_t nblocks, uint32_t host_blocks,
                   uint32_t disk_blocks, const rkv_sched_config *cfg,
                   int write_policy)
{
    int st = stk_setup(e, RKV_DEVICE_CUDA, nblocks, host_blocks, disk_blocks,
                       cfg, write_policy);
    if (st == STK_NO_DEVICE)
        cr_skip_test(SKIP_MSG);
    cr_assert_eq(st, STK_READY);
    e->peek = kv_peek;
    e->clobber = kv_clobber;
    cr_assert(rkv_tree_debug_copy_async(e->tree), "a CUDA pool copies asynchronously");
}

/* tsetup with stk_base_cfg(lpm, max_running), write-back. */
static void tsetup_lpm(stk_env *e, uint32_t max_running, uint32_t nblocks,
                       uint32_t host_blocks, uint32_t disk_blocks)
{
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, max_running);
    tsetup(e, nblocks, host_blocks, disk_blocks, &c, RKV_WRITE_BACK);
}

static int deferred(void)
{
    const char *d = getenv("RKV_CUDASIM_DEFER");
    return d != NULL && atoi(d) != 0;
}

/* tsetup with a host store only (stk_setup_fn). */
static void setup_cuda(stk_env *e, uint32_t nblocks, uint32_t host_blocks,
                       const rkv_sched_config *cfg, int write_policy)
{
    tsetup(e, nblocks, host_blocks, 0, cfg, write_policy);
}

/* Steps a load takes from the step that queues it to the request's
 * admission: the next step's poll issues the batch, a later one finds its
 * event done (deferred: one query more, "not ready" first). */
static int64_t load_steps(void)
{
    return deferred() ? 3 : 2;
}

/* The CUDA pool's load timing: exact on the simulator, whose copies are
 * done by the first query that may see them; at or after on a GPU, where
 * a copy may still run at that poll. */
static stk_tier cuda_tier(void)
{
#ifdef RKV_CUDASIM
    stk_tier t = {setup_cuda, load_steps(), 1};
#else
    stk_tier t = {setup_cuda, load_steps(), 0};
#endif
    return t;
}

static void admitted_at(const stk_env *e, uint64_t id, int64_t want)
{
    stk_tier t = cuda_tier();
    stk_admitted_at(e, &t, id, want);
}

/* A request whose prefix is on the host waits, loading, through the
 * steps its ticket takes (LOADING, not admitted, its slot held), then
 * runs on the loaded pages with the right KV. */
Test(sched_tier_cuda, host_load_spans_steps)
{
    stk_env e;
    int32_t shared[28];
    stk_warm_base(&e, setup_cuda, RKV_POLICY_LPM, 1, 12, shared);
    OK(stk_submit(&e, 6, shared, 28, 2));
    int64_t s0 = e.steps;
    for (int64_t k = 0; k < load_steps(); k++) {
        cr_assert_eq(stk_step(&e), 0, "step %lld runs nothing: the load holds "
                     "the only slot", (long long)k);
        rkv_request_info info;
        OK(rkv_sched_request_info(e.s, 6, &info));
        cr_assert_eq(info.state, RKV_REQ_WAITING);
        cr_assert_eq(info.loading, 1, "step %lld: still loading", (long long)k);
        if (k == 0)
            cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), 0,
                         "queued by admission, issued by the next poll");
        else
            cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), 1);
    }
    cr_assert_eq(e.r[6].loads_seen, 1);
    stk_drain(&e, 400);
    admitted_at(&e, 6, s0 + load_steps()); /* the poll completing the load */
    cr_assert_gt(e.r[6].first_host, 0);
    cr_assert_geq(e.r[6].first_cached, e.r[6].first_host);
    cr_assert_eq(e.r[6].nload_blocks * P, e.r[6].first_host);
    cr_assert_eq(e.r[6].load_blocks_used, 1);
    (void)stk_expect_loads(&e, 1, 0);
    stk_finish(&e);
}

/* The other request runs in every step of the load: nobody waits for a
 * load that is not theirs. */
Test(sched_tier_cuda, others_run_while_one_loads)
{
    stk_tier t = cuda_tier();
    stk_others_run_while_one_loads(&t, 16, 8);
}

/* Two requests on one host prefix: loaded once, the second waits for the
 * first one's ticket across the steps it takes and gets the pages. */
Test(sched_tier_cuda, shared_prefix_loaded_once)
{
    stk_tier t = cuda_tier();
    stk_shared_prefix_loaded_once(&t);
}

/* Aborted while its batch is in flight: the completion is ignored, the
 * lease goes, nothing leaks. */
Test(sched_tier_cuda, abort_with_the_load_in_flight)
{
    stk_env e;
    int32_t shared[28];
    stk_warm_base(&e, setup_cuda, RKV_POLICY_LPM, 2, 12, shared);
    OK(stk_submit(&e, 6, shared, 28, 2));
    cr_assert_eq(stk_step(&e), 0); /* queued */
    cr_assert_eq(stk_step(&e), 0); /* issued */
    cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), 1);
    OK(rkv_sched_abort(e.s, 6));
    OK(rkv_sched_check(e.s));
    OK(rkv_tree_check(e.tree));
    e.r[6].live = 0;
    e.live--;
    stk_steps(&e, 3);
    /* the prefix is on the device now and serves the next request */
    OK(stk_submit(&e, 7, shared, 28, 2));
    stk_drain(&e, 100);
    cr_assert_geq(e.r[7].first_cached, 24);
    stk_finish(&e);
}

/* The first copy of the load's batch fails (which/k as in
 * rkv_tree_debug_copy_fail): the ticket fails, the request computes those
 * tokens with the right KV, the host copy is still there for the next
 * request, nothing leaks. */
static void failed_load(int which, uint32_t k)
{
    stk_env e;
    int32_t shared[28];
    stk_warm_base(&e, setup_cuda, RKV_POLICY_LPM, 2, 12, shared);
    OK(stk_submit(&e, 6, shared, 28, 2));
    cr_assert_eq(stk_step(&e), 0); /* admission queues the load */
    cr_assert_eq(e.r[6].loads_seen, 1);
    rkv_tree_debug_copy_fail(e.tree, which, k);
    stk_drain(&e, 400);
    (void)stk_expect_loads(&e, 1, 1);
    cr_assert_eq(e.r[6].first_host, 0, "a failed load serves nothing");
    cr_assert_geq(e.r[6].first_step, 0);
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_gt(ts.failed_loads, 0);
    /* nothing lost: the prefix 6 computed is served from the device (or
     * the host) to the next request with the right KV (run_plan) */
    OK(stk_submit(&e, 7, shared, 28, 2));
    stk_drain(&e, 400);
    cr_assert_geq(e.r[7].first_cached, 24);
    stk_finish(&e);
}

Test(sched_tier_cuda, failed_load_at_issue_computes)
{
    failed_load(RKV_DEBUG_COPY_ISSUE, 1); /* the first block copy */
    failed_load(RKV_DEBUG_COPY_ISSUE, 3); /* a later one: some queued */
}

Test(sched_tier_cuda, failed_load_at_event_query_computes)
{
    failed_load(RKV_DEBUG_COPY_QUERY, 1);
}

/* Swap on preemption: the victim's computed pages go to the host
 * (SWAP_OUT, asynchronous store), its resumption loads them back
 * (SWAP_IN, across steps) with the right KV. */
Test(sched_tier_cuda, swap_on_preempt_round_trip)
{
    stk_swap_round_trip(setup_cuda);
}

/* Write-through: the plan's STORE entries name the request's cached
 * blocks (holding the pages' bytes in device memory, checked when
 * listed). Stores queued at a commit are taken by the next step's poll,
 * so that step's plan lists them done; the asynchronous host copies made
 * from them carry the right bytes: with the device copy gone, a second
 * request loads them back. */
Test(sched_tier_cuda, store_copies_list_source_blocks)
{
    stk_env e;
    int32_t t[24];
    stk_store_through(&e, setup_cuda, 16, 56, t);
    /* the last stores listed, issued, done; a GPU may take longer (settle):
     * no loads pending to miss */
    rkv_tier_stats ts = stk_stores_done(&e, 3, 1);
    cr_assert_eq(e.store_queued_pages + e.store_done_pages,
                 ts.stores_blocks[RKV_MEDIUM_HOST]);
    cr_assert_eq(e.nlisted, ts.stores_blocks[RKV_MEDIUM_HOST]);
    stk_reload_from_host(&e, t);
    stk_finish(&e);
}

/* Write-back: demotions (synchronous stores at eviction) list their
 * source blocks as done STORE entries, each holding the stored page. */
Test(sched_tier_cuda, demotions_list_source_blocks)
{
    stk_demotions_list_source_blocks(setup_cuda);
}

/* The host -> disk chain: a small host store pushes the shared prefix on
 * to the disk; a request on it loads from the disk (verified records,
 * pinned staging, asynchronous copies) across steps, with the right KV;
 * the others run meanwhile. */
Test(sched_tier_cuda, host_disk_chain_loads_from_disk)
{
    stk_env e;
    tsetup_lpm(&e, 2, 12, 4, 64);
    int32_t shared[28], other[12];
    fill_tokens(shared, 28, 4242);
    rkv_match m;
    rkv_tier_match tm;
    stk_warm_lower(&e, shared, 24, 4, &tm);
    OK(rkv_tree_match_tiers(e.tree, 0, shared, 27, NULL, RKV_MATCH_PEEK,
                            &m, &tm));
    cr_assert_gt(tm.disk_tokens, 0, "nothing reached the disk (host %zu)",
                 (size_t)tm.host_tokens);
    stk_submit_beside(&e, shared, other, 8);
    int64_t s0 = e.steps;
    cr_assert_eq(stk_step(&e), 1, "the other request runs beside the load");
    stk_drain(&e, 400);
    cr_assert_geq(e.r[6].first_step, s0 + 2, "a disk load spans steps too");
    cr_assert_gt(e.r[6].first_disk, 0);
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_eq(st.failed_loads, 0);
    stk_finish(&e);
}

/* Failure injection over a busy scenario (host hits loaded by several
 * requests, preemption with swap-out and swap-in, write-back demotions):
 * the k-th asynchronous copy call of a kind (rkv_tree_debug_copy_fail:
 * a block copy or event record at issue, an event query at completion)
 * fails, for every k until the scenario makes fewer. Each time every
 * request finishes with the right KV (run_plan checks every attended
 * position), a failed load is computed instead, nothing leaks. Returns
 * the failed loads + stores the tree counted (0: the injection did not
 * reach). k = 0: no failure. */
static uint64_t busy_scenario(int which, uint32_t k, int chain, int policy)
{
    stk_env e;
    rkv_sched_config c = stk_base_cfg(RKV_POLICY_LPM, 3);
    c.swap = 1;
    tsetup(&e, 16, chain ? 6 : 64, chain ? 64 : 0, &c, policy);
    int32_t shared[28];
    fill_tokens(shared, 28, 4242);
    rkv_tier_match tm;
    stk_warm_lower(&e, shared, 24, 3, &tm);
    if (k > 0)
        rkv_tree_debug_copy_fail(e.tree, which, k);
    int32_t t[40];
    for (uint64_t id = 4; id < 10; id++) {
        memcpy(t, shared, sizeof shared);
        fill_tokens(t + 24, 8, 300 + id);
        OK(stk_submit(&e, id, id % 2 ? t : t + 8, 24, 20));
    }
    stk_drain(&e, 4000);
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    uint64_t failed = ts.failed_loads + ts.failed_stores;
    rkv_sched_stats st;
    OK(rkv_sched_get_stats(e.s, &st));
    cr_assert_leq(st.failed_loads, ts.failed_loads);
    if (k == 0) {
        cr_assert_eq(failed, 0);
        cr_assert_gt(st.loads, 0, "the scenario loads");
        cr_assert_gt(st.swap_outs, 0, "the scenario swaps out");
        cr_log_info("scenario%s: loads %llu swap-ins %llu, cached from host %llu disk %llu",
                    chain ? " (chain)" : "", (unsigned long long)st.loads,
                    (unsigned long long)st.swap_ins,
                    (unsigned long long)st.cached_tokens_by_medium[RKV_MEDIUM_HOST],
                    (unsigned long long)st.cached_tokens_by_medium[RKV_MEDIUM_DISK]);
    }
    rkv_tree_debug_copy_fail(e.tree, which, 0);
    stk_finish(&e);
    return failed;
}

static void copy_fail_sweep(int which, int chain)
{
    (void)busy_scenario(which, 0, chain, RKV_WRITE_BACK);
    /* a call whose failure the stats do not count (none known) must not
     * end the sweep early: it ends after 3 runs in a row without one */
    uint32_t k = 1, hit = 0, misses = 0;
    for (; k < 400 && misses < 3; k++) {
        if (busy_scenario(which, k, chain, RKV_WRITE_BACK) == 0)
            misses++;
        else {
            hit++;
            misses = 0;
        }
    }
    cr_assert_gt(hit, 0, "no copy failed: the injection did not reach");
    cr_assert_lt(k, 400, "copies kept failing past 400");
    cr_log_info("%s%s: %u injections", which == RKV_DEBUG_COPY_ISSUE ? "issue" : "query",
                chain ? " (chain)" : "", hit);
}

Test(sched_tier_cuda, copy_failures_at_issue_one_by_one, .timeout = 600)
{
    copy_fail_sweep(RKV_DEBUG_COPY_ISSUE, 0);
    copy_fail_sweep(RKV_DEBUG_COPY_ISSUE, 1);
}

Test(sched_tier_cuda, copy_failures_at_query_one_by_one, .timeout = 600)
{
    copy_fail_sweep(RKV_DEBUG_COPY_QUERY, 0);
    copy_fail_sweep(RKV_DEBUG_COPY_QUERY, 1);
}

/* The scheduler destroyed with one load in flight and one queued: the
 * tree is left consistent, the copies complete on its later polls, and
 * then nothing holds a device block (the scheduler's leases went with
 * it); a new scheduler on the same tree serves the prefix. */
Test(sched_tier_cuda, destroy_with_loads_in_flight)
{
    stk_env e;
    tsetup_lpm(&e, 4, 24, 64, 0);
    int32_t a[28], b[28];
    fill_tokens(a, 28, 4242);
    fill_tokens(b, 28, 4343);
    OK(stk_submit(&e, 0, a, 24, 1));
    OK(stk_submit(&e, 1, b, 24, 1));
    stk_drain(&e, 100);
    uint32_t freed = 0; /* both demoted to the host */
    while (rkv_tree_evict(e.tree, 1, &freed) == RKV_OK)
        OK(rkv_tree_check(e.tree));
    OK(stk_submit(&e, 6, a, 28, 2));
    cr_assert_eq(stk_step(&e), 0); /* 6 queued */
    OK(stk_submit(&e, 7, b, 28, 2));
    cr_assert_eq(stk_step(&e), 0); /* 6 issued, 7 queued */
    cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), 1);
    rkv_sched_destroy(e.s);
    e.s = NULL;
    OK(rkv_tree_check(e.tree));
    stk_settle(&e); /* the orphaned loads complete on the tree's polls */
    /* no lease left behind: every device page can be evicted */
    while (rkv_tree_evict(e.tree, 1, &freed) == RKV_OK)
        OK(rkv_tree_check(e.tree));
    cr_assert_eq(rkv_pool_num_free(e.pool), e.nblocks, "a lease outlived "
                 "its scheduler: %u of %u blocks free",
                 rkv_pool_num_free(e.pool), e.nblocks);
    OK(rkv_sched_create(e.tree, &e.cfg, &e.s));
    e.live = 0;
    OK(stk_submit(&e, 8, a, 28, 2));
    stk_drain(&e, 100);
    cr_assert_geq(e.r[8].first_cached, 24);
    stk_finish(&e);
}

/* Write-through under device pressure: stores queued at a commit are
 * taken by the next step's poll, and admission in that step may evict
 * their pages; the plan must not list them as queued (a queued STORE's
 * source blocks hold the pages until the next poll, check_store_blocks
 * reads them as allocated blocks). It did: the test failed with
 * "STORE queued: block 2 is free" before sched_tier.c counted the
 * records the poll took as done. Host, and host -> disk chain. */
Test(sched_tier_cuda, write_through_under_pressure)
{
    cr_assert_eq(busy_scenario(RKV_DEBUG_COPY_ISSUE, 0, 0, RKV_WRITE_THROUGH), 0);
    cr_assert_eq(busy_scenario(RKV_DEBUG_COPY_ISSUE, 0, 1, RKV_WRITE_THROUGH), 0);
    cr_assert_eq(busy_scenario(RKV_DEBUG_COPY_ISSUE, 0, 0, RKV_WRITE_SELECTIVE), 0);
}

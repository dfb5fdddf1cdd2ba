/*
 * tests/test_tier_cuda.c -- the tier's asynchronous copies on a CUDA pool
 * (residency/tier_copy.c, alloc/pool_copy.cu): a load completes only on a
 * later poll, with the page's real KV bytes; a request's ticket waits for
 * its own batch only; an injected failure at issue or at the event query
 * of a load or a store fails that ticket and leaves everything else as it
 * was; a demotion waits for a store of its page in flight; reset and
 * destroy with copies in flight; a full in-flight table; disk loads
 * through pinned staging, also behind a disk load still in flight after
 * the staging ring moved; a caller's stream. rkv_tree_check, the pool's
 * and the store's checks run after every operation.
 *
 * Built in every configuration; it runs where a CUDA pool can be created:
 * the simulator build (-DRKV_CUDA=SIM: .ci/run runs it in forward,
 * reverse and deferred mode -- deferred, every event reports "not ready"
 * once, so the two phases really are two) or a GPU. Elsewhere every test
 * reports itself skipped ("no CUDA device: tier CUDA tests skipped").
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "radix/tree_debug.h"
#include "residency/tier_debug.h"
#include "radixkv.h"
#include "tests/support/handles.h"

#ifdef RKV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define SKIP_MSG "no CUDA device: tier CUDA tests skipped"
#define TP 4u
#define NSEQ 40u
#define MAXP 3u

typedef struct env {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_store *host;
    char dir[64];
    size_t bb;
    uint8_t *buf, *want;
    int32_t tok[NSEQ][MAXP * TP];
} env;

/* Skips unless a CUDA pool can be created; fills e (host or disk tier). */
static void setup(env *e, uint32_t blocks, int disk, int policy)
{
    memset(e, 0, sizeof *e);
#ifndef RKV_HAVE_CUDA
    (void)blocks;
    (void)disk;
    (void)policy;
    cr_skip_test(SKIP_MSG);
#else
    rkv_pool_config pc = tu_kv_config(blocks, TP, 2, 1, 16, RKV_DEVICE_CUDA);
    rkv_status s = rkv_pool_create(&pc, &e->pool);
    if (s == RKV_ERR_NO_DEVICE)
        cr_skip_test(SKIP_MSG);
    cr_assert_eq(s, RKV_OK, "CUDA pool: %s", rkv_last_error());
    e->bb = rkv_pool_bytes_per_block(e->pool);
    e->buf = malloc(e->bb);
    e->want = malloc(e->bb);
    cr_assert(e->buf != NULL && e->want != NULL);
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    OK(rkv_tree_create(e->pool, &tc, &e->tree));
    int medium = disk ? RKV_MEDIUM_DISK : RKV_MEDIUM_HOST;
    rkv_store_config sc = tu_store_config(medium, 128, e->bb, NULL);
    if (disk) {
        strcpy(e->dir, "/tmp/rkv_tier_cuda_XXXXXX");
        cr_assert(mkdtemp(e->dir) != NULL);
        sc.path = e->dir;
    }
    OK(rkv_store_create(&sc, &e->host));
    rkv_tier_config cfg;
    rkv_tier_config_init(&cfg);
    if (disk)
        cfg.disk = e->host;
    else
        cfg.host = e->host;
    cfg.write_policy = policy;
    OK(rkv_tree_attach_tiers(e->tree, &cfg));
    cr_assert(rkv_tree_debug_copy_async(e->tree), "a CUDA pool copies asynchronously");
    for (uint32_t i = 0; i < NSEQ; i++)
        for (uint32_t j = 0; j < MAXP * TP; j++)
            e->tok[i][j] = (int32_t)(1000 * i + j);
#endif
}

static void teardown(env *e)
{
    rkv_tree_destroy(e->tree);
    rkv_store_destroy(e->host);
    if (e->pool != NULL)
        cr_assert_eq(rkv_pool_num_free(e->pool), rkv_pool_num_blocks(e->pool),
                     "every block back in the pool");
    rkv_pool_destroy(e->pool);
    if (e->dir[0] != '\0')
        (void)rmdir(e->dir);
    free(e->buf);
    free(e->want);
}

static void check(env *e)
{
    OK(rkv_tree_check(e->tree));
    OK(rkv_pool_check(e->pool));
    OK(rkv_store_check(e->host));
}

static void pattern(const env *e, uint64_t h, uint8_t *out)
{
    for (size_t j = 0; j < e->bb; j++)
        out[j] = (uint8_t)((h >> ((j % 8) * 8)) ^ (j * 131));
}

static uint64_t page_hash(const env *e, uint32_t s, uint32_t k)
{
    uint64_t h = RKV_HASH_ROOT;
    for (uint32_t i = 0; i <= k; i++)
        h = rkv_block_hash(h, 1, e->tok[s] + (size_t)i * TP, TP);
    return h;
}

/* Sequence s (np pages) computed and cached on the device, with bytes. */
static void put(env *e, uint32_t s, uint32_t np)
{
    rkv_block_id b[MAXP];
    OK(rkv_tree_alloc_blocks(e->tree, np, b));
    for (uint32_t k = 0; k < np; k++) {
        pattern(e, page_hash(e, s, k), e->buf);
        OK(rkv_pool_copy_from_host(e->pool, 1, &b[k], e->buf));
    }
    rkv_insert_result ir;
    OK(rkv_tree_insert(e->tree, 1, e->tok[s], (size_t)np * TP, b, NULL, &ir));
    OK(rkv_pool_unref_n(e->pool, np, b));
    check(e);
}

/* Pages of s on the device / in the lower tier now. */
static void where(env *e, uint32_t s, uint32_t np, uint32_t *dev, uint32_t *low)
{
    rkv_match m;
    rkv_tier_match tm;
    OK(rkv_tree_match_tiers(e->tree, 1, e->tok[s], (size_t)np * TP, NULL,
                            RKV_MATCH_PEEK, &m, &tm));
    *dev = (uint32_t)(m.matched_tokens / TP);
    *low = (uint32_t)(tm.lower_tokens / TP);
}

/* The device pages of s hold their own KV bytes. */
static void verify(env *e, uint32_t s, uint32_t np)
{
    rkv_block_id b[MAXP];
    rkv_match m;
    OK(rkv_tree_match(e->tree, 1, e->tok[s], (size_t)np * TP, b, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.num_blocks, np, "all %u pages on the device", np);
    for (uint32_t k = 0; k < np; k++) {
        OK(rkv_pool_copy_to_host(e->pool, 1, &b[k], e->buf));
        pattern(e, page_hash(e, s, k), e->want);
        cr_assert(memcmp(e->buf, e->want, e->bb) == 0,
                  "sequence %u page %u: wrong KV bytes", s, k);
    }
}

/* Demotes every evictable device page (a page at a time). */
static void evict_all(env *e)
{
    rkv_status st;
    uint32_t freed = 0;
    while ((st = rkv_tree_evict(e->tree, 1, &freed)) == RKV_OK)
        check(e);
    cr_assert_eq(st, RKV_ERR_NO_SPACE, "%s", rkv_last_error());
    check(e);
}

static uint32_t poll(env *e, rkv_transfer_done *out, uint32_t max)
{
    uint32_t n = 0;
    OK(rkv_tree_tier_poll(e->tree, out, max, &n));
    check(e);
    return n;
}

/* Polls until ticket is reported (at most 8 polls); returns its report
 * and, in *polls, how many polls it took. */
static rkv_transfer_done wait_for(env *e, uint64_t ticket, uint32_t *polls)
{
    rkv_transfer_done d[8];
    for (uint32_t p = 1; p <= 8; p++) {
        uint32_t n = poll(e, d, 8);
        for (uint32_t i = 0; i < n; i++)
            if (d[i].ticket == ticket) {
                if (polls != NULL)
                    *polls = p;
                return d[i];
            }
    }
    cr_assert_fail("ticket %llu never completed", (unsigned long long)ticket);
    return d[0];
}

static rkv_load load(env *e, uint32_t s, uint32_t np)
{
    rkv_load ld;
    OK(rkv_tree_load(e->tree, 1, e->tok[s], (size_t)np * TP, UINT32_MAX, NULL, &ld));
    check(e);
    cr_assert(ld.ticket != 0 && ld.num_pages == np);
    rkv_lease tmp = ld.lease;
    cr_assert_eq(rkv_tree_unlock(e->tree, &tmp), RKV_ERR_BUSY,
                 "the lease is held until the load completes");
    return ld;
}

static void unlock(env *e, rkv_lease *l)
{
    OK(rkv_tree_unlock(e->tree, l));
    check(e);
}

/* s (np pages) holds its bytes on the device; its lease goes. */
static void verify_unlock(env *e, uint32_t s, uint32_t np, rkv_lease *l)
{
    verify(e, s, np);
    unlock(e, l);
}

/* s (np pages) is demoted, loaded back and verified. */
static void round_trip(env *e, uint32_t s, uint32_t np)
{
    rkv_load ld = load(e, s, np);
    rkv_transfer_done d = wait_for(e, ld.ticket, NULL);
    cr_assert_eq(d.status, RKV_OK, "reload: %d", d.status);
    verify_unlock(e, s, np, &ld.lease);
}

/* 8 blocks, write-back, the host tier (or the disk): sequence 0 of np0
 * pages and 1 of np1 (none when 0) put, then every page demoted. */
static void setup_demoted(env *e, int disk, uint32_t np0, uint32_t np1)
{
    setup(e, 8, disk, RKV_WRITE_BACK);
    put(e, 0, np0);
    if (np1 > 0)
        put(e, 1, np1);
    evict_all(e);
}

/* All np pages of s are on a lower tier, none on the device. */
static void all_lower(env *e, uint32_t s, uint32_t np, const char *why)
{
    uint32_t dev, low;
    where(e, s, np, &dev, &low);
    cr_assert(dev == 0 && low == np, "%s: %u + %u", why, dev, low);
}

/* load, then the poll that issues its copies (reporting nothing). */
static rkv_load load_issued(env *e, uint32_t s, uint32_t np)
{
    rkv_load ld = load(e, s, np);
    rkv_transfer_done d[4];
    cr_assert_eq(poll(e, d, 4), 0, "the poll that issues the copies reports nothing");
    return ld;
}

/* A store of s (np pages) issued and held in flight (stalled). */
static uint64_t store_stalled(env *e, uint32_t s, uint32_t np)
{
    uint64_t tk = 0;
    OK(rkv_tree_store_prefix(e->tree, 1, e->tok[s], (size_t)np * TP, NULL, &tk, NULL));
    rkv_tree_debug_copy_stall(e->tree, 1);
    rkv_transfer_done d[4];
    cr_assert_eq(poll(e, d, 4), 0);
    cr_assert_eq(rkv_tree_debug_copy_inflight(e->tree), 1, "the store is in flight");
    return tk;
}

Test(tier_cuda, load_completes_on_a_later_poll_with_the_bytes)
{
    env e;
    setup_demoted(&e, 0, 3, 0);
    all_lower(&e, 0, 3, "demoted");
    rkv_load ld = load_issued(&e, 0, 3);
    cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), 1);
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.pending_loads, 3);
    uint32_t polls = 0;
    rkv_transfer_done r = wait_for(&e, ld.ticket, &polls);
    cr_assert_eq(r.status, RKV_OK);
    cr_assert_eq(r.num_pages, 3);
    /* one poll issued; here the first finishes it (its event completed)
     * -- deferred, the first query says "not ready" and the next one does */
    const char *defer = getenv("RKV_CUDASIM_DEFER");
    if (defer != NULL && atoi(defer) != 0)
        cr_assert_eq(polls, 2, "deferred: one poll finds the copies not ready");
    else
        cr_assert(polls >= 1);
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.loads_blocks[RKV_MEDIUM_HOST], 3);
    cr_assert_eq(ts.pending_loads, 0);
    verify_unlock(&e, 0, 3, &ld.lease);
    teardown(&e);
}

Test(tier_cuda, a_request_waits_for_its_own_ticket_only)
{
    env e;
    setup_demoted(&e, 0, 2, 2);
    rkv_load a = load_issued(&e, 0, 2); /* a's batch issued */
    rkv_load b = load(&e, 1, 2);
    rkv_transfer_done d[4];
    int a_done = 0, b_done = 0;
    for (uint32_t p = 0; p < 8 && !(a_done && b_done); p++) {
        uint32_t n = poll(&e, d, 4);
        for (uint32_t i = 0; i < n; i++) {
            cr_assert_eq(d[i].status, RKV_OK);
            if (d[i].ticket == a.ticket) {
                cr_assert(!b_done, "a completed after b");
                a_done = 1;
                /* a's pages are usable while b is still in flight */
                cr_assert(!b_done && rkv_tree_debug_copy_inflight(e.tree) >= 1 &&
                          n == 1, "b completed in a's poll: it waited for nothing");
                verify(&e, 0, 2);
            } else {
                cr_assert_eq(d[i].ticket, b.ticket);
                b_done = 1;
            }
        }
    }
    cr_assert(a_done && b_done);
    unlock(&e, &a.lease);
    verify_unlock(&e, 1, 2, &b.lease);
    teardown(&e);
}

/* A failed load: ticket failed with RKV_ERR_CUDA, its pages in the lower
 * tier as before, its device blocks free; then it loads fine. */
static void failed_load(int which, uint32_t k)
{
    env e;
    setup_demoted(&e, 0, 3, 0);
    uint32_t free0 = rkv_pool_num_free(e.pool);
    rkv_load ld = load(&e, 0, 3);
    rkv_tree_debug_copy_fail(e.tree, which, k);
    rkv_transfer_done r = wait_for(&e, ld.ticket, NULL);
    cr_assert_eq(r.status, RKV_ERR_CUDA, "status %d", r.status);
    cr_assert_eq(r.num_pages, 0);
    all_lower(&e, 0, 3, "pages stay where they were");
    cr_assert_eq(rkv_pool_num_free(e.pool), free0, "device blocks freed");
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.failed_loads, 3);
    unlock(&e, &ld.lease); /* on the node above the path */
    round_trip(&e, 0, 3);
    teardown(&e);
}

Test(tier_cuda, load_fails_at_issue)
{
    failed_load(RKV_DEBUG_COPY_ISSUE, 1); /* the first block copy */
    failed_load(RKV_DEBUG_COPY_ISSUE, 2); /* the second: one copy queued */
    failed_load(RKV_DEBUG_COPY_ISSUE, 4); /* the event record */
}

/* One poll with two loads (6 pages) and a swap-out (2 pages) queued issues
 * ONE copy call per direction, not one per page; every byte arrives. On
 * the simulator the backend's calls are metered: one cudaMemcpyBatchAsync
 * ("[batch]") per direction, carrying each page's 2 * layers segments. */
Test(tier_cuda, one_copy_call_per_direction_per_batch)
{
    env e;
    setup_demoted(&e, 0, 3, 3);
    put(&e, 2, 2); /* the 8 blocks: 2 here, 6 for the loads */
    rkv_load a = load(&e, 0, 3), b = load(&e, 1, 3);
    uint64_t tk = 0;
    uint32_t pages = 0;
    OK(rkv_tree_store_prefix(e.tree, 1, e.tok[2], 2 * TP, NULL, &tk, &pages));
    cr_assert(tk != 0 && pages == 2);
    uint64_t calls0, pages0, calls, moved;
    rkv_tree_debug_copy_calls(e.tree, &calls0, &pages0);
#ifdef RKV_CUDASIM
    rkvsim_meter_reset();
    rkvsim_meter_enable(1);
#endif
    rkv_transfer_done d[8];
    cr_assert_eq(poll(&e, d, 8), 0, "the poll that issues reports nothing");
#ifdef RKV_CUDASIM
    rkvsim_meter_enable(0);
    cr_assert_eq(rkvsim_meter_get("[batch]", -1, RKVSIM_METER_LAUNCHES), 2,
                 "one batched call per direction");
    cr_assert_eq(rkvsim_meter_get("[batch]", -1, RKVSIM_METER_READ), 0);
    cr_assert_eq(rkvsim_meter_get("[D2H]", -1, RKVSIM_METER_READ), 2 * e.bb);
    cr_assert_eq(rkvsim_meter_get("[H2D]", -1, RKVSIM_METER_WRITE), 6 * e.bb);
#endif
    rkv_tree_debug_copy_calls(e.tree, &calls, &moved);
    cr_assert_eq(calls - calls0, 2, "stores and loads: one call each");
    cr_assert_eq(moved - pages0, 8);
    uint32_t got = 0;
    for (int p = 0; p < 8 && got < 3; p++) {
        uint32_t n = poll(&e, d, 8);
        for (uint32_t i = 0; i < n; i++) {
            cr_assert_eq(d[i].status, RKV_OK, "ticket %llu: %d",
                         (unsigned long long)d[i].ticket, d[i].status);
            got++;
        }
    }
    cr_assert_eq(got, 3, "both loads and the swap-out reported");
    verify_unlock(&e, 0, 3, &a.lease);
    verify_unlock(&e, 1, 3, &b.lease);
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_HOST], 2, "the swap-out's host copies");
    evict_all(&e);
    round_trip(&e, 2, 2); /* the stored bytes are the pages' */
    teardown(&e);
}

/* A demotion of a 3-page node stores its pages with one batched copy
 * (synchronous: the device blocks are free when the eviction returns),
 * and the bytes come back. */
Test(tier_cuda, demotion_stores_a_node_in_one_copy_call)
{
    env e;
    setup(&e, 8, 0, RKV_WRITE_BACK);
    put(&e, 0, 3);
#ifdef RKV_CUDASIM
    rkvsim_meter_reset();
    rkvsim_meter_enable(1);
#endif
    uint32_t freed = 0;
    OK(rkv_tree_evict(e.tree, 3, &freed));
    cr_assert_eq(freed, 3);
#ifdef RKV_CUDASIM
    rkvsim_meter_enable(0);
    cr_assert_eq(rkvsim_meter_get("[batch]", -1, RKVSIM_METER_LAUNCHES), 1,
                 "the node's three pages in one call");
    cr_assert_eq(rkvsim_meter_get("[D2H]", -1, RKVSIM_METER_READ), 3 * e.bb);
#endif
    check(&e);
    all_lower(&e, 0, 3, "demoted");
    round_trip(&e, 0, 3);
    teardown(&e);
}

Test(tier_cuda, load_fails_at_event_query)
{
    failed_load(RKV_DEBUG_COPY_QUERY, 1);
}

/* A failed swap-out store: the ticket fails, no host copy, the device
 * pages intact; the next store works and its bytes come back. Both pages'
 * copies go in one batched call: a failure at issue (at its first block,
 * or at its second after the first was queued) fails the call, so both
 * stores; one at the event query fails the batch. */
static void failed_store(int which, uint32_t k)
{
    env e;
    setup(&e, 8, 0, RKV_WRITE_BACK);
    put(&e, 0, 2);
    uint64_t tk = 0;
    uint32_t pages = 0;
    OK(rkv_tree_store_prefix(e.tree, 1, e.tok[0], 2 * TP, NULL, &tk, &pages));
    check(&e);
    cr_assert(tk != 0 && pages == 2);
    rkv_tree_debug_copy_fail(e.tree, which, k);
    rkv_transfer_done r = wait_for(&e, tk, NULL);
    cr_assert_neq(r.status, RKV_OK);
    cr_assert_eq(r.num_pages, 0u, "the batched call failed as a whole");
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.failed_stores, 2u);
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_HOST], 0, "no slot kept");
    cr_assert_eq(ts.pending_stores, 0);
    verify(&e, 0, 2); /* the device copy is untouched */
    /* again, without a fault: the host copies are made */
    OK(rkv_tree_store_prefix(e.tree, 1, e.tok[0], 2 * TP, NULL, &tk, &pages));
    check(&e);
    if (tk != 0) {
        r = wait_for(&e, tk, NULL);
        cr_assert_eq(r.status, RKV_OK);
    }
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.resident_pages[RKV_MEDIUM_HOST], 2);
    uint64_t stored = ts.stores_blocks[RKV_MEDIUM_HOST];
    evict_all(&e); /* demotion finds the host copies: no new store */
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_HOST], stored);
    round_trip(&e, 0, 2); /* the stored bytes are the pages' */
    teardown(&e);
}

Test(tier_cuda, store_fails_at_issue)
{
    failed_store(RKV_DEBUG_COPY_ISSUE, 1); /* the call's first block */
    failed_store(RKV_DEBUG_COPY_ISSUE, 2); /* mid-batch: one block queued */
}

Test(tier_cuda, store_fails_at_event_query) { failed_store(RKV_DEBUG_COPY_QUERY, 1); }

Test(tier_cuda, demotion_waits_for_a_store_in_flight)
{
    for (int fail = 0; fail < 2; fail++) {
        env e;
        setup(&e, 8, 0, RKV_WRITE_BACK);
        put(&e, 0, 3);
        uint64_t tk = store_stalled(&e, 0, 3);
        if (fail) /* the wait itself fails: the demotion stores at once */
            rkv_tree_debug_copy_fail(e.tree, RKV_DEBUG_COPY_QUERY, 1);
        evict_all(&e);
        all_lower(&e, 0, 3, "demoted, nothing lost");
        rkv_tree_debug_copy_stall(e.tree, 0);
        rkv_transfer_done r = wait_for(&e, tk, NULL);
        cr_assert_eq(r.status, fail ? RKV_ERR_IO : RKV_OK);
        cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), 0);
        rkv_tier_stats ts;
        OK(rkv_tree_tier_stats(e.tree, &ts));
        cr_assert_eq(ts.stores_blocks[RKV_MEDIUM_HOST], 3, "each page stored once");
        round_trip(&e, 0, 3);
        teardown(&e);
    }
}

Test(tier_cuda, reset_and_destroy_with_copies_in_flight)
{
    env e;
    setup(&e, 8, 0, RKV_WRITE_BACK);
    put(&e, 0, 2);
    put(&e, 1, 2);
    (void)store_stalled(&e, 0, 2);
    OK(rkv_tree_reset(e.tree));
    check(&e);
    cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), 0);
    cr_assert_eq(rkv_store_used_blocks(e.host), 0);
    cr_assert_eq(rkv_pool_num_free(e.pool), rkv_pool_num_blocks(e.pool));
    /* the tree works after it, and is destroyed with a load and a store
     * in flight (teardown: every block back, no leak) */
    rkv_tree_debug_copy_stall(e.tree, 0);
    put(&e, 0, 2);
    evict_all(&e);
    put(&e, 1, 2);
    rkv_load ld = load(&e, 0, 2);
    (void)store_stalled(&e, 1, 2);
    (void)ld;
    teardown(&e);
}

Test(tier_cuda, a_full_in_flight_table_waits)
{
    env e;
    setup(&e, 64, 0, RKV_WRITE_BACK);
    const uint32_t n = 34; /* > 32 batches */
    for (uint32_t s = 0; s < n; s++)
        put(&e, s, 1);
    evict_all(&e);
    rkv_tree_debug_copy_stall(e.tree, 1);
    rkv_load ld[34];
    rkv_transfer_done d[40];
    for (uint32_t s = 0; s < n; s++) {
        ld[s] = load(&e, s, 1);
        cr_assert_eq(poll(&e, d, 40), 0);
        uint32_t want = s + 1 < 32 ? s + 1 : 32;
        cr_assert_eq(rkv_tree_debug_copy_inflight(e.tree), want);
    }
    rkv_tier_stats ts;
    OK(rkv_tree_tier_stats(e.tree, &ts));
    cr_assert_eq(ts.pending_loads, n, "the loads past the table wait, queued");
    rkv_tree_debug_copy_stall(e.tree, 0);
    uint32_t got = 0;
    /* deferred, every event says "not ready" once and batches complete in
     * order: about one batch per poll */
    for (uint32_t p = 0; p < 4 * n && got < n; p++) {
        uint32_t k = poll(&e, d, 40);
        for (uint32_t i = 0; i < k; i++)
            cr_assert_eq(d[i].status, RKV_OK);
        got += k;
    }
    cr_assert_eq(got, n);
    for (uint32_t s = 0; s < n; s++)
        verify_unlock(&e, s, 1, &ld[s].lease);
    teardown(&e);
}

Test(tier_cuda, disk_loads_through_pinned_staging)
{
    env e;
    setup_demoted(&e, 1, 3, 2);
    all_lower(&e, 0, 3, "demoted");
    rkv_load a = load_issued(&e, 0, 3);
    cr_assert_eq(a.disk_pages, 3);
    rkv_load b = load(&e, 1, 2); /* the disk buffer is reused meanwhile */
    cr_assert_eq(wait_for(&e, a.ticket, NULL).status, RKV_OK);
    cr_assert_eq(wait_for(&e, b.ticket, NULL).status, RKV_OK);
    verify_unlock(&e, 0, 3, &a.lease);
    verify_unlock(&e, 1, 2, &b.lease);
    teardown(&e);
}

/* Polls (at most 8 times) until every ticket of tk[0..n) is reported OK,
 * marking done[]; stops at the first poll that completes them all. */
static void wait_all(env *e, const uint64_t *tk, int *done, uint32_t n)
{
    rkv_transfer_done d[8];
    for (uint32_t p = 0; p < 8; p++) {
        uint32_t all = 1;
        for (uint32_t k = 0; k < n; k++)
            all &= (uint32_t)done[k];
        if (all)
            return;
        uint32_t got = poll(e, d, 8);
        for (uint32_t i = 0; i < got; i++) {
            cr_assert_eq(d[i].status, RKV_OK);
            int known = 0;
            for (uint32_t k = 0; k < n; k++)
                if (d[i].ticket == tk[k]) {
                    cr_assert(!done[k], "ticket %llu reported twice",
                              (unsigned long long)tk[k]);
                    done[k] = known = 1;
                }
            cr_assert(known, "unexpected ticket %llu", (unsigned long long)d[i].ticket);
        }
    }
    cr_assert_fail("tickets never completed");
}

/* Disk loads go through a ring of pinned staging pages released in FIFO
 * order with their batch, so the ring's head moves. Here b and c are
 * staged one behind the other; b completes (head moves past it) while c is
 * still in flight; d is staged then: its pages must go after c's, not over
 * them. Deferred (RKV_CUDASIM_DEFER=1: a copy from pinned memory reads it
 * when it runs, at the second query of its event), a page staged over one
 * still in flight delivers d's bytes to c; on a GPU it is a race. */
Test(tier_cuda, disk_load_staged_behind_one_in_flight)
{
    env e;
    setup(&e, 12, 1, RKV_WRITE_BACK);
    put(&e, 0, 2);
    put(&e, 1, 3);
    put(&e, 2, 2);
    put(&e, 3, 2);
    evict_all(&e);
    for (uint32_t s = 0; s < 4; s++)
        all_lower(&e, s, s == 1 ? 3 : 2, "demoted to disk");
    round_trip(&e, 0, 2); /* the ring's head moves past its 2 pages */
    rkv_load b = load_issued(&e, 1, 3);
    rkv_load c = load(&e, 2, 2);
    cr_assert(b.disk_pages == 3 && c.disk_pages == 2);
    uint64_t tk[3] = {b.ticket, c.ticket, 0};
    int done[3] = {0, 0, 0};
    wait_all(&e, tk, done, 1); /* b; c issued by then, maybe done too */
    const char *defer = getenv("RKV_CUDASIM_DEFER");
    if (defer != NULL && atoi(defer) != 0) /* its event said "not ready" once */
        cr_assert(!done[1], "deferred: c is still in flight when b completes");
    /* d is issued while c (if not done yet) stays in flight */
    rkv_tree_debug_copy_stall(e.tree, 1);
    rkv_load d = load_issued(&e, 3, 2);
    cr_assert_eq(d.disk_pages, 2);
    tk[2] = d.ticket;
    rkv_tree_debug_copy_stall(e.tree, 0);
    wait_all(&e, tk, done, 3);
    verify_unlock(&e, 1, 3, &b.lease);
    verify_unlock(&e, 2, 2, &c.lease);
    verify_unlock(&e, 3, 2, &d.lease);
    teardown(&e);
}

Test(tier_cuda, copies_on_the_callers_stream)
{
    env e;
    setup(&e, 8, 0, RKV_WRITE_BACK);
#ifdef RKV_HAVE_CUDA
    cudaStream_t s = NULL;
    cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
    OK(rkv_tree_tier_set_stream(e.tree, (void *)s));
    put(&e, 0, 2);
    evict_all(&e);
    rkv_load ld = load_issued(&e, 0, 2);
    /* back to the library's stream with the batch in flight: it is waited
     * for, so the caller may destroy its stream now */
    OK(rkv_tree_tier_set_stream(e.tree, NULL));
    cr_assert_eq(cudaStreamDestroy(s), cudaSuccess);
    cr_assert_eq(wait_for(&e, ld.ticket, NULL).status, RKV_OK);
    verify_unlock(&e, 0, 2, &ld.lease);
    cr_assert_eq(rkv_tree_tier_set_stream(NULL, NULL), RKV_ERR_INVALID_ARG);
#endif
    teardown(&e);
}

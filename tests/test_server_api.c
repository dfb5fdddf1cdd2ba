/*
 * tests/test_server_api.c -- what a server's prefix-cache adapter needs
 * from the tree: rkv_tree_evict_ids (exactly the blocks an eviction freed)
 * and token ids on BLOCK_STORED events (rkv_tree_events_drain_tokens).
 *
 * evict_ids is checked against the pool itself: every listed block is free
 * afterwards, was cached and allocated before, is listed once, and the
 * count equals the rise in the pool's free count (so nothing freed is
 * missing); a block the caller still references is evicted but not listed.
 * With a host tier (demotion) the same holds, and a cap that leaves no
 * room for a whole node when a split fails is refused mid-way with the
 * evictions made so far listed.
 *
 * Event tokens are checked by re-hashing: each BLOCK_STORED event's token
 * ids, chained from its parent_hash, must give its hashes (rkv_block_hash),
 * for device and host-tier events, through a random workload with a ring
 * small enough to overflow (a RESYNC then, never a wrong id).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/support/check.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"


typedef struct env {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_store *host;
    uint32_t P, nb;
} env;

static void env_open(env *e, uint32_t nb, uint32_t P, uint32_t ring,
                     uint32_t tokens, uint64_t host_blocks)
{
    memset(e, 0, sizeof *e);
    e->P = P;
    e->nb = nb;
    e->pool = tu_pool(nb, P);
    e->tree = tu_event_tree(e->pool, ring, tokens);
    if (host_blocks > 0) {
        rkv_store_config sc;
        rkv_store_config_init(&sc, RKV_MEDIUM_HOST);
        sc.capacity_blocks = host_blocks;
        sc.block_bytes = 0; /* metadata only, as the pool */
        OK(rkv_store_create(&sc, &e->host));
        rkv_tier_config tc2;
        rkv_tier_config_init(&tc2);
        tc2.host = e->host;
        OK(rkv_tree_attach_tiers(e->tree, &tc2));
    }
}

static void env_close(env *e)
{
    rkv_tree_destroy(e->tree);
    rkv_store_destroy(e->host);
    rkv_pool_destroy(e->pool);
}

/* Caches tokens[0..n) with fresh blocks, dropping the caller's refs. */
static void put(env *e, uint64_t ns, const int32_t *tokens, size_t n)
{
    uint32_t np = (uint32_t)(n / e->P);
    rkv_block_id *b = calloc(np + 1, sizeof *b);
    OK(rkv_tree_alloc_blocks(e->tree, np, b));
    rkv_insert_result ir;
    OK(rkv_tree_insert(e->tree, ns, tokens, n, b, NULL, &ir));
    OK(rkv_pool_unref_n(e->pool, np, b));
    free(b);
}

/* ---- rkv_tree_evict_ids ----------------------------------------------------- */

/* Evicts n with evict_ids and checks the list against the pool. */
static uint32_t evict_checked(env *e, uint32_t n, uint32_t cap, rkv_status want)
{
    uint8_t *was = calloc(e->nb, 1);
    for (uint32_t b = 0; b < e->nb; b++)
        was[b] = rkv_pool_refcount(e->pool, b) > 0;
    uint32_t free0 = rkv_pool_num_free(e->pool);
    rkv_block_id *ids = calloc(cap + 1, sizeof *ids);
    uint32_t freed = 12345;
    rkv_status st = rkv_tree_evict_ids(e->tree, n, ids, cap, &freed);
    cr_assert_eq(st, want, "evict_ids(%u): %d %s", n, st, rkv_last_error());
    cr_assert(freed <= cap);
    cr_assert_eq(rkv_pool_num_free(e->pool), free0 + freed,
                 "listed %u, the pool freed %u", freed,
                 rkv_pool_num_free(e->pool) - free0);
    uint8_t *seen = calloc(e->nb, 1);
    for (uint32_t i = 0; i < freed; i++) {
        cr_assert(ids[i] < e->nb);
        cr_assert(was[ids[i]], "block %u listed but was free", ids[i]);
        cr_assert_eq(rkv_pool_refcount(e->pool, ids[i]), 0);
        cr_assert_not(seen[ids[i]], "block %u listed twice", ids[i]);
        seen[ids[i]] = 1;
    }
    OK(rkv_tree_check(e->tree));
    OK(rkv_pool_check(e->pool));
    free(seen);
    free(ids);
    free(was);
    return freed;
}

Test(server_api, evict_ids_lists_exactly_the_freed_blocks)
{
    env e;
    env_open(&e, 64, 4, 0, 0, 0);
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("server_api.evict_ids"));
    int32_t tok[64];
    for (int round = 0; round < 200; round++) {
        size_t n = 4 * (1 + rkv_rng_below(&rng, 12));
        uint32_t shared = (uint32_t)rkv_rng_below(&rng, 3);
        for (size_t i = 0; i < n; i++)
            tok[i] = i < 4 * shared ? (int32_t)i
                                    : (int32_t)rkv_rng_below(&rng, 1000);
        rkv_tree_stats ts;
        OK(rkv_tree_get_stats(e.tree, &ts));
        if (rkv_pool_num_free(e.pool) + ts.evictable_blocks >= n / 4)
            put(&e, rkv_rng_below(&rng, 2), tok, n);
        OK(rkv_tree_get_stats(e.tree, &ts));
        uint32_t k = (uint32_t)rkv_rng_below(&rng, ts.evictable_blocks + 1);
        uint32_t got = evict_checked(&e, k, k + (uint32_t)rkv_rng_below(&rng, 3),
                                     RKV_OK);
        cr_assert_eq(got, k, "without tiers evict_ids frees exactly n");
    }
    /* refused before anything changes */
    rkv_tree_stats ts;
    OK(rkv_tree_get_stats(e.tree, &ts));
    rkv_block_id one;
    uint32_t freed = 7;
    cr_assert_eq(rkv_tree_evict_ids(e.tree, 2, &one, 1, &freed), RKV_ERR_INVALID_ARG);
    cr_assert_eq(freed, 0);
    cr_assert_eq(rkv_tree_evict_ids(NULL, 0, NULL, 0, &freed), RKV_ERR_INVALID_ARG);
    rkv_block_id many[64];
    cr_assert_eq(rkv_tree_evict_ids(e.tree, (uint32_t)ts.evictable_blocks + 1,
                                    many, 64, &freed), RKV_ERR_NO_SPACE);
    rkv_tree_stats ts2;
    OK(rkv_tree_get_stats(e.tree, &ts2));
    cr_assert_eq(ts2.cached_blocks, ts.cached_blocks);
    env_close(&e);
}

/* A block the caller still references is evicted (no longer cached) but
 * not freed, so not listed; the call then reports the shortfall. */
Test(server_api, evict_ids_skips_blocks_referenced_outside)
{
    env e;
    env_open(&e, 16, 2, 0, 0, 0);
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    rkv_block_id b[4];
    OK(rkv_tree_alloc_blocks(e.tree, 4, b));
    rkv_insert_result ir;
    OK(rkv_tree_insert(e.tree, 9, tok, 8, b, NULL, &ir));
    rkv_block_id keep = b[3];
    OK(rkv_pool_unref_n(e.pool, 3, b)); /* keeps its own ref on b[3] */
    /* the tail (b[3]) goes first but stays allocated */
    uint32_t got = evict_checked(&e, 4, 4, RKV_ERR_NO_SPACE);
    cr_assert_eq(got, 3);
    cr_assert_eq(rkv_pool_refcount(e.pool, keep), 1);
    OK(rkv_pool_unref(e.pool, keep));
    env_close(&e);
}

/* With a host tier eviction demotes; the freed device blocks are listed. A
 * node whose split fails (injected OOM) goes down whole, unless that
 * would pass cap: then the call stops (RKV_ERR_NOMEM) with what it freed. */
Test(server_api, evict_ids_with_tiers)
{
    env e;
    env_open(&e, 32, 2, 0, 0, 64);
    int32_t tok[16];
    for (int i = 0; i < 16; i++)
        tok[i] = 100 + i;
    put(&e, 1, tok, 16); /* one node of 8 pages */
    cr_assert_eq(evict_checked(&e, 3, 3, RKV_OK), 3); /* split: the tail */
    rkv_tier_stats st;
    OK(rkv_tree_tier_stats(e.tree, &st));
    cr_assert_eq(st.resident_pages[RKV_MEDIUM_HOST], 3);
    /* the next split fails: with room for the node it goes down whole */
    rkv_tree_debug_fail_alloc_after(e.tree, 0);
    cr_assert_eq(evict_checked(&e, 1, 5, RKV_OK), 5);
    rkv_tree_debug_fail_alloc_after(e.tree, -1);
    put(&e, 2, tok, 16);
    rkv_tree_debug_fail_alloc_after(e.tree, 0);
    cr_assert_eq(evict_checked(&e, 2, 4, RKV_ERR_NOMEM), 0,
                 "an 8-page node cannot go down within 4 ids");
    rkv_tree_debug_fail_alloc_after(e.tree, -1);
    OK(rkv_tree_tier_stats(e.tree, &st));
    cr_assert_eq(st.resident_pages[RKV_MEDIUM_DEVICE], 8, "nothing was demoted");
    cr_assert_eq(evict_checked(&e, 8, 8, RKV_OK), 8);
    env_close(&e);
}

/* ---- token ids on events ------------------------------------------------------ */

typedef struct tok_check {
    uint64_t stored, removed, resyncs, pages, tokens;
} tok_check;

/* Drains everything with token ids (a small token buffer: several calls)
 * and re-hashes each stored event's ids against its hashes. */
static void drain_verify(env *e, tok_check *c, size_t tcap)
{
    rkv_event ev[5];
    int32_t *tk = malloc(tcap * sizeof *tk);
    for (;;) {
        uint32_t n = 0;
        size_t nt = 0;
        OK(rkv_tree_events_drain_tokens(e->tree, ev, 5, tk, tcap, &n, &nt));
        if (n == 0)
            break;
        size_t at = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (ev[i].kind == RKV_EVENT_RESYNC)
                c->resyncs++;
            if (ev[i].kind == RKV_EVENT_BLOCK_REMOVED)
                c->removed++;
            if (ev[i].kind != RKV_EVENT_BLOCK_STORED)
                continue;
            c->stored++;
            uint64_t h = ev[i].parent_hash;
            for (uint32_t j = 0; j < ev[i].num_hashes; j++) {
                cr_assert(at + e->P <= nt);
                h = rkv_block_hash(h, ev[i].ns, tk + at, e->P);
                cr_assert_eq(h, ev[i].hashes[j],
                             "event %llu page %u: ids do not hash to the page",
                             (unsigned long long)ev[i].seq, j);
                at += e->P;
                c->pages++;
            }
        }
        cr_assert_eq(at, nt, "every id belongs to a stored event");
        c->tokens += nt;
    }
    free(tk);
    OK(rkv_tree_check(e->tree));
}

static void run_tokens(const char *name, uint64_t host_blocks, uint32_t ring,
                       uint32_t tokens, int expect_resync)
{
    env e;
    const uint32_t P = 3;
    env_open(&e, 40, P, ring, tokens, host_blocks);
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    tok_check c;
    memset(&c, 0, sizeof c);
    int32_t tok[60];
    uint64_t steps = rkv_test_scaled(600);
    for (uint64_t s = 0; s < steps; s++) {
        size_t n = P * (1 + rkv_rng_below(&rng, 19));
        for (size_t i = 0; i < n; i++)
            tok[i] = i < 6 ? (int32_t)i : (int32_t)rkv_rng_below(&rng, 50);
        rkv_tree_stats ts;
        OK(rkv_tree_get_stats(e.tree, &ts));
        if (rkv_pool_num_free(e.pool) + ts.evictable_blocks >= n / P)
            put(&e, rkv_rng_below(&rng, 3), tok, n);
        if (host_blocks > 0 && rkv_rng_below(&rng, 3) == 0) {
            rkv_load ld;
            OK(rkv_tree_load(e.tree, rkv_rng_below(&rng, 3), tok, n, 64, NULL, &ld));
            rkv_transfer_done done[4];
            uint32_t nd;
            OK(rkv_tree_tier_poll(e.tree, done, 4, &nd));
            if (ld.ticket != 0)
                OK(rkv_tree_unlock(e.tree, &ld.lease));
        }
        if (rkv_rng_below(&rng, 4) == 0)
            drain_verify(&e, &c, 1 + rkv_rng_below(&rng, 3) == 1
                                     ? RKV_EVENT_MAX_HASHES * P
                                     : 200);
    }
    drain_verify(&e, &c, RKV_EVENT_MAX_HASHES * P);
    cr_assert(c.stored > 50 && c.removed > 10, "stored %llu removed %llu",
              (unsigned long long)c.stored, (unsigned long long)c.removed);
    cr_assert_eq(c.tokens, c.pages * P);
    if (expect_resync)
        cr_assert(c.resyncs > 0, "the token ring never overflowed");
    env_close(&e);
}

Test(server_api, event_tokens_rehash)
{
    run_tokens("server_api.event_tokens_rehash", 0, 4096, 1u << 16, 0);
}

Test(server_api, event_tokens_rehash_host_tier)
{
    run_tokens("server_api.event_tokens_rehash_host_tier", 24, 4096, 1u << 16, 0);
}

/* A token ring of one event's worth overflows long before the event ring. */
Test(server_api, event_tokens_overflow_resyncs)
{
    run_tokens("server_api.event_tokens_overflow_resyncs", 24, 4096,
               RKV_EVENT_MAX_HASHES * 3, 1);
}

Test(server_api, event_tokens_config_and_drain_errors)
{
    rkv_pool *pool = tu_pool(8, 4);
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    cr_assert_eq(tc.event_tokens, 0, "off by default");
    rkv_tree *t = NULL;
    tc.event_tokens = 1024; /* without an event ring */
    cr_assert_eq(rkv_tree_create(pool, &tc, &t), RKV_ERR_INVALID_ARG);
    tc.event_ring = 64;
    tc.event_tokens = RKV_EVENT_MAX_HASHES * 4 - 1; /* cannot hold one event */
    cr_assert_eq(rkv_tree_create(pool, &tc, &t), RKV_ERR_INVALID_ARG);
    tc.event_tokens = 0;
    OK(rkv_tree_create(pool, &tc, &t));
    rkv_event ev[2];
    int32_t tk[64];
    uint32_t n;
    size_t nt;
    cr_assert_eq(rkv_tree_events_drain_tokens(t, ev, 2, tk, 64, &n, &nt), RKV_ERR_STATE);
    rkv_tree_destroy(t);
    tc.event_tokens = RKV_EVENT_MAX_HASHES * 4;
    OK(rkv_tree_create(pool, &tc, &t));
    int32_t tok[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    rkv_block_id b[3];
    OK(rkv_tree_alloc_blocks(t, 3, b));
    rkv_insert_result ir;
    OK(rkv_tree_insert(t, 0, tok, 12, b, NULL, &ir));
    OK(rkv_pool_unref_n(pool, 3, b));
    /* 12 ids pending: 11 do not fit, nothing is drained */
    cr_assert_eq(rkv_tree_events_drain_tokens(t, ev, 2, tk, 11, &n, &nt),
                 RKV_ERR_NO_SPACE);
    cr_assert_eq(n, 0);
    OK(rkv_tree_events_drain_tokens(t, ev, 2, tk, 12, &n, &nt));
    cr_assert_eq(n, 1);
    cr_assert_eq(nt, 12);
    cr_assert_arr_eq(tk, tok, sizeof tok);
    /* plain drain drops the ids: the ring stays consistent */
    OK(rkv_tree_evict(t, 3, NULL));
    OK(rkv_tree_alloc_blocks(t, 3, b));
    OK(rkv_tree_insert(t, 0, tok, 12, b, NULL, &ir));
    OK(rkv_pool_unref_n(pool, 3, b));
    OK(rkv_tree_events_drain(t, ev, 2, &n));
    cr_assert_eq(n, 2);
    OK(rkv_tree_check(t));
    OK(rkv_tree_events_drain_tokens(t, ev, 2, tk, 64, &n, &nt));
    cr_assert_eq(n, 0);
    rkv_tree_destroy(t);
    rkv_pool_destroy(pool);
}

/*
 * tests/test_tree_mixed.c -- leases, retention (priorities, TTL pins, pin
 * expiry, release, revocation under space pressure), KV events and resets
 * mixed at random on one tree, the features that were written separately.
 *
 * Every step runs one operation of tests/support/event_driver.c (requests
 * with eviction, matches, lock/unlock, evict, alloc_blocks, reset, OOM
 * injection) or a retention call, then rkv_tree_check and rkv_pool_check;
 * drained events are replayed into the model of tests/support/
 * event_model.c and compared with rkv_tree_snapshot. A retention call that
 * fails (pin cap, injected out-of-memory) must leave the cache, its events,
 * the stats and the pins exactly as they were; retention never records an
 * event (it caches and removes nothing).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/support/event_driver.h"
#include "tests/support/event_model.h"
#include "tests/support/test_util.h"

typedef struct mixed {
    evd d;
    evm m;
    uint64_t now;
    uint64_t retains, pins_made, refused, oom_hits, revoked;
} mixed;

typedef struct state {
    rkv_tree_stats ts;
    rkv_retention_stats rs;
    size_t n;
    uint64_t seq;
    rkv_block_entry *snap;
} state;

static void state_get(mixed *x, state *s)
{
    cr_assert_eq(rkv_tree_get_stats(x->d.tree, &s->ts), RKV_OK);
    cr_assert_eq(rkv_tree_retention_stats(x->d.tree, &s->rs), RKV_OK);
    s->snap = evd_snapshot(&x->d, &s->n, &s->seq);
}

/* The tree after a failed call equals the one before (the lease table and
 * the refusal counter may grow: they are no state to undo). */
static void state_same(mixed *x, state *a, const char *what)
{
    state b;
    state_get(x, &b);
    a->ts.host_bytes = b.ts.host_bytes = 0;
    a->rs.pins_refused = b.rs.pins_refused = 0;
    cr_assert(memcmp(&a->ts, &b.ts, sizeof a->ts) == 0, "%s changed the stats",
              what);
    cr_assert(memcmp(&a->rs, &b.rs, sizeof a->rs) == 0,
              "%s changed the pins (%llu -> %llu pins, %llu -> %llu pinned)",
              what, (unsigned long long)a->rs.pins,
              (unsigned long long)b.rs.pins,
              (unsigned long long)a->rs.pinned_blocks,
              (unsigned long long)b.rs.pinned_blocks);
    cr_assert_eq(a->seq, b.seq, "%s recorded events", what);
    cr_assert_eq(a->n, b.n);
    cr_assert(a->n == 0 || memcmp(a->snap, b.snap, a->n * sizeof *a->snap) == 0,
              "%s changed the cached blocks", what);
    free(a->snap);
    free(b.snap);
}

static void retain_step(mixed *x, rkv_rng *rng)
{
    rkv_tree *t = x->d.tree;
    int32_t tok[EVD_MAX_TOK];
    uint64_t ns;
    uint32_t n = evd_tokens(rng, tok, &ns);
    uint64_t owner = 1 + rkv_rng_below(rng, 3);
    uint64_t op = rkv_rng_below(rng, 100);
    uint64_t s0 = evd_last_seq(&x->d);
    x->now += rkv_rng_below(rng, 4);
    if (op < 60) {
        rkv_retention r;
        rkv_retention_init(&r);
        if (rkv_rng_below(rng, 2)) {
            r.priority = (int)rkv_rng_below(rng, RKV_PRIORITY_MAX + 1);
            r.prio_begin = rkv_rng_below(rng, n + 1);
            r.prio_end = r.prio_begin + rkv_rng_below(rng, n + 1 - r.prio_begin);
        }
        if (rkv_rng_below(rng, 4) != 0) {
            r.pin_tokens = rkv_rng_below(rng, n + 1);
            r.ttl_ms = 1 + rkv_rng_below(rng, 150);
            r.owner = owner;
        }
        int oom = rkv_rng_below(rng, 6) == 0;
        /* the time moves (and pins expire) before a failure can happen:
         * move it first so that the failed call must change nothing */
        cr_assert_eq(rkv_tree_set_time(t, x->now), RKV_OK);
        state before;
        state_get(x, &before);
        if (oom)
            rkv_tree_debug_fail_alloc_after(t, (int64_t)rkv_rng_below(rng, 3));
        rkv_retain_result res;
        rkv_status st = rkv_tree_retain(t, ns, tok, n, &r, x->now, &res);
        rkv_tree_debug_fail_alloc_after(t, -1);
        x->retains++;
        if (st == RKV_OK) {
            if (res.pinned_pages > 0)
                x->pins_made++;
            cr_assert_eq(evd_last_seq(&x->d), s0, "retain recorded events");
            free(before.snap);
        } else {
            cr_assert(st == RKV_ERR_NOMEM || st == RKV_ERR_PIN_CAP, "%s: %s",
                      rkv_strerror(st), rkv_last_error());
            cr_assert(rkv_last_error()[0] != '\0');
            if (st == RKV_ERR_NOMEM)
                x->oom_hits++;
            else
                x->refused++;
            state_same(x, &before, st == RKV_ERR_NOMEM ? "a retain that ran "
                       "out of memory" : "a retain over the pin cap");
        }
    } else if (op < 75) {
        uint32_t c;
        cr_assert_eq(rkv_tree_pins_extend(t, owner, 1 + rkv_rng_below(rng, 40),
                                          x->now, &c), RKV_OK);
    } else if (op < 85) {
        uint32_t c;
        cr_assert_eq(rkv_tree_pins_release(t, owner, &c), RKV_OK);
    } else if (op < 88) {
        /* space pressure just past what is free and evictable: pins yield
         * (and what they release is evicted, with events) */
        rkv_tree_stats ts;
        cr_assert_eq(rkv_tree_get_stats(t, &ts), RKV_OK);
        uint64_t k = rkv_pool_num_free(x->d.pool) + ts.evictable_blocks + 1 +
                     rkv_rng_below(rng, 3);
        rkv_block_id b[256];
        if (k <= 256) {
            uint64_t revoked0 = 0;
            rkv_retention_stats rs;
            cr_assert_eq(rkv_tree_retention_stats(t, &rs), RKV_OK);
            revoked0 = rs.pins_revoked;
            rkv_status st = rkv_tree_alloc_blocks(t, (uint32_t)k, b);
            if (st == RKV_OK) {
                cr_assert_eq(rkv_tree_retention_stats(t, &rs), RKV_OK);
                cr_assert(rs.pins_revoked > revoked0, "alloc beyond free + "
                          "evictable succeeded without revoking a pin");
                cr_assert_eq(rkv_pool_unref_n(x->d.pool, (uint32_t)k, b), RKV_OK);
                x->revoked++;
            } else {
                cr_assert_eq(st, RKV_ERR_NO_SPACE, "%s", rkv_last_error());
                cr_assert_eq(evd_last_seq(&x->d), s0, "a refused alloc recorded");
            }
            s0 = evd_last_seq(&x->d); /* eviction records, retention not */
        }
    } else if (op < 95) {
        x->now += rkv_rng_below(rng, 60);
        cr_assert_eq(rkv_tree_set_time(t, x->now), RKV_OK);
    } else {
        /* time cannot go back */
        rkv_retention_stats rs;
        cr_assert_eq(rkv_tree_retention_stats(t, &rs), RKV_OK);
        if (rs.now_ms > 0)
            cr_assert_eq(rkv_tree_set_time(t, rs.now_ms - 1), RKV_ERR_INVALID_ARG);
    }
    /* pins and priorities cache and remove nothing */
    cr_assert_eq(evd_last_seq(&x->d), s0, "a retention call recorded events");
    cr_assert_eq(rkv_tree_check(t), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_check(x->d.pool), RKV_OK, "%s", rkv_last_error());
}

static void run_mixed(const char *name, int policy, uint32_t P, uint32_t blocks,
                      uint32_t ring, int lazy, uint64_t steps)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    mixed x;
    memset(&x, 0, sizeof x);
    evd_open(&x.d, blocks, P, 0);
    /* the driver's tree, with the policy asked for (one tree per pool) */
    rkv_tree_destroy(x.d.tree);
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.event_ring = ring;
    tc.evict_policy = policy;
    tc.max_pinned_pct = 40;
    cr_assert_eq(rkv_tree_create(x.d.pool, &tc, &x.d.tree), RKV_OK, "%s",
                 rkv_last_error());
    x.m.next_seq = 1;
    steps = rkv_test_scaled(steps);
    for (uint64_t i = 0; i < steps; i++) {
        if (rkv_rng_below(&rng, 5) < 2)
            retain_step(&x, &rng);
        else
            evd_step(&x.d, &rng, 1);
        if (!lazy || rkv_rng_below(&rng, 4) == 0) {
            if (lazy && rkv_rng_below(&rng, 2))
                evm_drain(&x.d, &x.m, (uint32_t)rkv_rng_below(&rng, 4), 3);
            evm_drain(&x.d, &x.m, UINT32_MAX, 1 + (uint32_t)rkv_rng_below(&rng, 8));
            evm_compare(&x.d, &x.m);
        }
    }
    evm_drain(&x.d, &x.m, UINT32_MAX, 8);
    evm_compare(&x.d, &x.m);
    rkv_retention_stats rs;
    cr_assert_eq(rkv_tree_retention_stats(x.d.tree, &rs), RKV_OK);
    /* the generator reached what the test is about */
    cr_assert(x.pins_made > 0 && rs.pins_expired > 0 && rs.pins_released > 0);
    cr_assert(rs.pins_revoked > 0, "no pin was revoked under space pressure");
    cr_assert(x.refused > 0 && x.oom_hits > 0);
    cr_assert(x.d.resets > 0 && x.d.oom_hits > 0);
    cr_assert(x.m.events > 0);
    free(x.m.e);
    evd_close(&x.d);
}

Test(tree_mixed, lru_policy_p2)
{
    run_mixed("tree_mixed.lru_policy_p2", RKV_EVICT_LRU, 2, 48, 4096, 0, 4000);
}

Test(tree_mixed, priority_policy_p1)
{
    run_mixed("tree_mixed.priority_policy_p1", RKV_EVICT_PRIORITY, 1, 40, 4096,
              0, 4000);
}

Test(tree_mixed, priority_policy_overflow)
{
    run_mixed("tree_mixed.priority_policy_overflow", RKV_EVICT_PRIORITY, 4, 32,
              6, 1, 4000);
}

/*
 * tests/test_tree_retain.c -- retention (retain/pins.c): priorities,
 * TTL pins with owners, the pin cap, pins yielding to running requests,
 * the eviction policies against slow reference implementations, and OOM
 * injection over every allocation retention adds.
 *
 * rkv_pool_check() and rkv_tree_check() run after every operation (CHECK).
 * Expected values come from the scenario or from the slow references in
 * this file (a full scan of the nodes for the next victim, a set of pinned
 * prefixes for the pin accounting), never from the code under test.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "radix/tree_debug.h"
#include "radix/tree_core.h"
#include "radixkv.h"
#include "tests/support/test_util.h"
#include "tests/support/tree_fixture.h"

static void setup_with(uint32_t nblocks, uint32_t page, int policy,
                       uint32_t pct)
{
    rkv_tree_config tc = tu_tree_config(policy, pct);
    tf_open(nblocks, page, &tc);
}

/* Caches n tokens of a, b and c (c may be NULL) in namespace 1, in this
 * order (a the least recently used), from bases 1000, 2000 and 3000. */
static void cache_abc(size_t n, int32_t *a, int32_t *b, int32_t *c)
{
    tf_cache_seq(1, a, n, 1000);
    tf_cache_seq(1, b, n, 2000);
    if (c != NULL)
        tf_cache_seq(1, c, n, 3000);
}

static void touch(rkv_namespace ns, const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(g_tree, ns, tok, n, NULL, 0, &m));
    CHECK();
}

static rkv_retain_result pin(rkv_namespace ns, const int32_t *tok, size_t n,
                             size_t pin_tokens, uint64_t ttl, uint64_t owner,
                             uint64_t now)
{
    rkv_retention r = tu_pin(pin_tokens, ttl, owner);
    rkv_retain_result out;
    OK(rkv_tree_retain(g_tree, ns, tok, n, &r, now, &out));
    CHECK();
    return out;
}

/* Pins all n tokens of three cached sequences in namespace 1 at time 0, in
 * the order given, each with the same ttl and its own owner. */
static void pin_three(size_t n, uint64_t ttl, const int32_t *const seq[3],
                      const uint64_t owner[3])
{
    for (int i = 0; i < 3; i++)
        pin(1, seq[i], n, n, ttl, owner[i], 0);
}

static void prio(rkv_namespace ns, const int32_t *tok, size_t n, size_t b,
                 size_t e, int p, uint64_t now)
{
    rkv_retention r = tu_prio(p, b, e);
    OK(rkv_tree_retain(g_tree, ns, tok, n, &r, now, NULL));
    CHECK();
}

/* ---- pins -------------------------------------------------------------------- */

TestSuite(retain, .fini = tf_close);

Test(retain, pin_is_honoured_until_expiry_then_evicted_by_recency)
{
    setup_with(16, 4, RKV_EVICT_LRU, 50);
    int32_t a[16], b[16];
    tf_cache_seq(1, a, 16, 1000); /* a is the oldest */
    tf_cache_seq(1, b, 16, 2000);
    cr_assert_eq(pin(1, a, 16, 16, 100, 7, 0).new_pinned_pages, 4);
    cr_assert_eq(tf_rstats().pinned_blocks, 4);
    /* everything evictable goes, a stays */
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 5, NULL));
    OK(rkv_tree_evict(g_tree, 4, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 16), 4);
    cr_assert_eq(tf_cached_pages(1, b, 16), 0);
    OK(rkv_tree_set_time(g_tree, 99));
    CHECK();
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 1, NULL));
    OK(rkv_tree_set_time(g_tree, 100)); /* deadline reached: expired */
    CHECK();
    cr_assert_eq(tf_rstats().pins, 0);
    cr_assert_eq(tf_rstats().pins_expired, 1);
    cr_assert_eq(tf_rstats().pinned_blocks, 0);
    OK(rkv_tree_evict(g_tree, 4, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 16), 0);
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_set_time(g_tree, 99)); /* backwards */
}

Test(retain, expiry_is_not_a_use)
{
    setup_with(16, 4, RKV_EVICT_LRU, 50);
    int32_t a[8], b[8];
    tf_cache_seq(1, a, 8, 1000);
    tf_cache_seq(1, b, 8, 2000); /* b newer than a */
    pin(1, a, 8, 8, 10, 1, 0);
    OK(rkv_tree_set_time(g_tree, 10));
    CHECK();
    /* a's pin expired: a is still the least recently used */
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 8), 0);
    cr_assert_eq(tf_cached_pages(1, b, 8), 2);
}

Test(retain, cap_refuses_and_counts_shared_prefixes_once)
{
    setup_with(16, 4, RKV_EVICT_LRU, 50); /* cap 8 pages */
    int32_t a[32], c[20];
    tf_seq(a, 32, 1000);
    memcpy(c, a, 12 * sizeof *c); /* c shares a's first 3 pages */
    tf_seq(c + 12, 8, 5000);
    tf_insert_free(1, a, 24);
    tf_insert_free(1, c, 20);
    cr_assert_eq(tf_rstats().pin_cap_blocks, 8);
    cr_assert_eq(pin(1, a, 24, 24, 50, 1, 0).new_pinned_pages, 6);
    /* c adds only its 2 own pages: 8 <= 8 */
    rkv_retain_result r = pin(1, c, 20, 20, 50, 2, 0);
    cr_assert_eq(r.pinned_pages, 5);
    cr_assert_eq(r.new_pinned_pages, 2);
    cr_assert_eq(tf_rstats().pinned_blocks, 8);
    /* a third pin adding one more page is refused, nothing changes */
    int32_t d[8];
    tf_cache_seq(2, d, 8, 7000);
    rkv_tree_stats s0;
    OK(rkv_tree_get_stats(g_tree, &s0));
    rkv_retention r2 = tu_pin(4, 10, 0);
    r2.priority = 90;
    r2.prio_end = 8;
    ERR(RKV_ERR_PIN_CAP, rkv_tree_retain(g_tree, 2, d, 8, &r2, 1, NULL));
    CHECK();
    rkv_tree_stats s1;
    OK(rkv_tree_get_stats(g_tree, &s1));
    cr_assert(memcmp(&s0, &s1, sizeof s0) == 0);
    cr_assert_eq(tf_rstats().pins, 2);
    cr_assert_eq(tf_rstats().pins_refused, 1);
    /* a renewal of an existing pin needs no room */
    cr_assert_eq(pin(1, c, 20, 20, 100, 2, 1).new_pinned_pages, 0);
    cr_assert_eq(tf_rstats().pins, 2);
    cr_assert_eq(tf_rstats().pins_renewed, 1);
    /* releasing frees the cap: now d fits */
    uint32_t n = 0;
    OK(rkv_tree_pins_release(g_tree, 1, &n));
    CHECK();
    cr_assert_eq(n, 1);
    cr_assert_eq(tf_rstats().pinned_blocks, 5);
    OK(rkv_tree_retain(g_tree, 2, d, 8, &r2, 2, NULL));
    CHECK();
    cr_assert_eq(tf_rstats().pinned_blocks, 6);
}

Test(retain, zero_cap_means_no_pins)
{
    setup_with(16, 4, RKV_EVICT_LRU, 0);
    int32_t a[8];
    tf_cache_seq(1, a, 8, 1);
    rkv_retention r = tu_pin(8, 5, 0);
    ERR(RKV_ERR_PIN_CAP, rkv_tree_retain(g_tree, 1, a, 8, &r, 0, NULL));
    CHECK();
}

Test(retain, release_and_extend_by_owner)
{
    setup_with(32, 4, RKV_EVICT_LRU, 50);
    int32_t a[8], b[8], c[8];
    cache_abc(8, a, b, c);
    pin_three(8, 100, (const int32_t *const[]){a, b, c},
              (const uint64_t[]){11, 11, 22});
    uint32_t n = 0;
    /* session 11 starts a tool call at t=50, back within 200 ms */
    OK(rkv_tree_pins_extend(g_tree, 11, 200, 50, &n));
    CHECK();
    cr_assert_eq(n, 2);
    OK(rkv_tree_set_time(g_tree, 100)); /* c's pin expires, a and b stay */
    CHECK();
    cr_assert_eq(tf_rstats().pins, 2);
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 3, NULL));
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, c, 8), 0);
    /* an extension never shortens */
    OK(rkv_tree_pins_extend(g_tree, 11, 1, 100, &n));
    OK(rkv_tree_set_time(g_tree, 249));
    cr_assert_eq(tf_rstats().pins, 2);
    /* session 11 ends */
    OK(rkv_tree_pins_release(g_tree, 11, &n));
    CHECK();
    cr_assert_eq(n, 2);
    cr_assert_eq(tf_rstats().pins, 0);
    cr_assert_eq(tf_rstats().pins_released, 2);
    OK(rkv_tree_pins_release(g_tree, 11, &n));
    cr_assert_eq(n, 0);
    OK(rkv_tree_evict(g_tree, 4, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 8) + tf_cached_pages(1, b, 8), 0);
}

Test(retain, pin_of_a_prefix_splits_and_keeps_only_the_prefix)
{
    setup_with(32, 4, RKV_EVICT_LRU, 50);
    int32_t a[24];
    tf_cache_seq(1, a, 24, 1);
    rkv_tree_stats s0;
    OK(rkv_tree_get_stats(g_tree, &s0));
    /* 2 pages and a half: the pin covers the 2 full pages */
    cr_assert_eq(pin(1, a, 24, 10, 100, 1, 0).pinned_pages, 2);
    rkv_tree_stats s1;
    OK(rkv_tree_get_stats(g_tree, &s1));
    cr_assert_eq(s1.splits, s0.splits + 1);
    OK(rkv_tree_evict(g_tree, 4, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 24), 2);
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 1, NULL));
}

Test(retain, reset_drops_pins_but_not_leases)
{
    setup_with(32, 4, RKV_EVICT_LRU, 50);
    int32_t a[8];
    tf_cache_seq(1, a, 8, 1);
    pin(1, a, 8, 8, 100, 1, 0);
    rkv_match m;
    OK(rkv_tree_match(g_tree, 1, a, 8, NULL, 0, &m));
    rkv_lease l;
    OK(rkv_tree_lock(g_tree, m.node, &l));
    ERR(RKV_ERR_BUSY, rkv_tree_reset(g_tree));
    CHECK();
    OK(rkv_tree_unlock(g_tree, &l));
    OK(rkv_tree_reset(g_tree));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 0);
    cr_assert_eq(tf_cached_pages(1, a, 8), 0);
}

Test(retain, bad_arguments_change_nothing)
{
    setup_with(32, 4, RKV_EVICT_LRU, 50);
    int32_t a[8];
    tf_cache_seq(1, a, 8, 1);
    rkv_retention r;
    rkv_retention_init(&r);
    r.priority = 101;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, a, 8, &r, 0, NULL));
    r.priority = 5;
    r.prio_begin = 8;
    r.prio_end = 4;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, a, 8, &r, 0, NULL));
    rkv_retention_init(&r);
    r.pin_tokens = 8; /* no ttl */
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, a, 8, &r, 0, NULL));
    r.ttl_ms = 3;
    r.pin_tokens = 12; /* > n */
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, a, 8, &r, 0, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, NULL, 8, &r, 0, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(NULL, 1, a, 8, &r, 0, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, a, 8, NULL, 0, NULL));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 0);
    /* unknown namespace: nothing cached, nothing pinned */
    r.pin_tokens = 8;
    rkv_retain_result out;
    OK(rkv_tree_retain(g_tree, 9, a, 8, &r, 0, &out));
    cr_assert_eq(out.pinned_pages, 0);
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    cr_assert_eq(tc.max_pinned_pct, 50);
    cr_assert_eq(tc.evict_policy, RKV_EVICT_LRU);
    tc.evict_policy = 7;
    rkv_pool *pool2 = tu_pool(4, 4);
    rkv_tree *t2 = NULL;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_create(pool2, &tc, &t2));
    tc.evict_policy = RKV_EVICT_PRIORITY;
    tc.max_pinned_pct = 101;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_create(pool2, &tc, &t2));
    rkv_pool_destroy(pool2);
}

/* Deadlines at the end of time: now_ms + ttl_ms saturates at UINT64_MAX,
 * a pin lives while its deadline is after the time, and at now_ms ==
 * UINT64_MAX (no later instant) a pin is refused rather than made already
 * expired (rkv_tree_check called that CORRUPT). */
Test(retain, deadlines_saturate_at_the_end_of_time)
{
    setup_with(32, 4, RKV_EVICT_LRU, 50);
    int32_t a[8], b[8];
    cache_abc(8, a, b, NULL);
    const uint64_t end = UINT64_MAX;
    /* ttl past the end: deadline = the end, the pin lives until then */
    pin(1, a, 8, 8, 100, 7, end - 10);
    OK(rkv_tree_pins_extend(g_tree, 7, end, end - 5, NULL));
    CHECK();
    OK(rkv_tree_set_time(g_tree, end - 1));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 1);
    OK(rkv_tree_set_time(g_tree, end));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 0);
    cr_assert_eq(tf_rstats().pins_expired, 1);

    /* at the end, a pin is refused and nothing changes */
    rkv_retention r = tu_pin(8, 1000, 9);
    r.priority = 3;
    r.prio_end = 8;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, b, 8, &r, end, NULL));
    cr_assert(strstr(rkv_last_error(), "UINT64_MAX") != NULL, "%s",
              rkv_last_error());
    CHECK();
    cr_assert_eq(tf_rstats().pins, 0);
    cr_assert_eq(tf_rstats().pins_made, 1);
    /* without a pin the same call is fine, and extending finds nothing */
    r.pin_tokens = 0;
    rkv_retain_result out;
    OK(rkv_tree_retain(g_tree, 1, b, 8, &r, end, &out));
    cr_assert_eq(out.prio_pages, 2);
    uint32_t n = 1;
    OK(rkv_tree_pins_extend(g_tree, 9, 1000, end, &n));
    cr_assert_eq(n, 0);
    CHECK();
}

/* ---- progress: pins yield to running requests ------------------------------ */

Test(retain, running_request_always_gets_its_blocks)
{
    setup_with(16, 4, RKV_EVICT_LRU, 50);
    int32_t a[16], b[16], r[16];
    tf_seq(r, 16, 3000);
    cache_abc(16, a, b, NULL);
    pin(1, a, 16, 16, 1000, 1, 0);
    pin(1, b, 16, 16, 2000, 2, 0); /* cap reached: 8 of 16 pinned */
    /* a running request: its 4 pages are cached and locked */
    tf_insert_free(1, r, 16);
    rkv_match m;
    OK(rkv_tree_match(g_tree, 1, r, 16, NULL, 0, &m));
    rkv_lease l;
    OK(rkv_tree_lock(g_tree, m.node, &l));
    CHECK();
    /* 4 free + 0 evictable + 8 pinned: 5 blocks need one pin to go, the
     * earliest deadline (a) first, and only that one */
    rkv_block_id got[12];
    OK(rkv_tree_alloc_blocks(g_tree, 5, got));
    CHECK();
    cr_assert_eq(tf_rstats().pins_revoked, 1);
    cr_assert_eq(tf_rstats().pins, 1);
    cr_assert_eq(tf_cached_pages(1, b, 16), 4);
    cr_assert_eq(tf_cached_pages(1, a, 16), 3);
    /* more than free + evictable + pinned: refused, nothing revoked */
    ERR(RKV_ERR_NO_SPACE, rkv_tree_alloc_blocks(g_tree, 12, got + 5));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 1);
    /* rkv_tree_evict never revokes */
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 4, NULL));
    cr_assert_eq(tf_rstats().pins, 1);
    OK(rkv_pool_unref_n(g_pool, 5, got));
    OK(rkv_tree_unlock(g_tree, &l));
    CHECK();
}

Test(retain, pins_and_locks_on_one_path_yield_only_the_pin_part)
{
    setup_with(8, 4, RKV_EVICT_LRU, 50);
    int32_t a[16];
    tf_cache_seq(1, a, 16, 1000); /* 4 pages */
    pin(1, a, 16, 8, 100, 1, 0); /* first 2 pages pinned */
    rkv_match m;
    OK(rkv_tree_match(g_tree, 1, a, 8, NULL, 0, &m));
    rkv_lease l;
    OK(rkv_tree_lock(g_tree, m.node, &l)); /* same 2 pages locked */
    CHECK();
    /* 4 free + 2 evictable; the pinned pages are locked too: 7 is refused */
    rkv_block_id got[8];
    ERR(RKV_ERR_NO_SPACE, rkv_tree_alloc_blocks(g_tree, 7, got));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 1);
    OK(rkv_tree_alloc_blocks(g_tree, 6, got));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 1);
    OK(rkv_pool_unref_n(g_pool, 6, got));
    OK(rkv_tree_unlock(g_tree, &l));
    CHECK();
}

/* A pin whose pages a running request also locks frees nothing when it is
 * revoked: revocation skips it even though its deadline is the earliest,
 * and takes the later pin that does free pages ("just enough"). It used to
 * revoke both, so a's session lost its pin for no space at all. */
Test(retain, revocation_skips_a_pin_that_frees_nothing)
{
    setup_with(16, 4, RKV_EVICT_LRU, 50);
    int32_t a[16], b[16];
    cache_abc(16, a, b, NULL);
    pin(1, a, 16, 16, 100, 1, 0); /* earliest deadline */
    pin(1, b, 16, 16, 200, 2, 0);
    /* a running request locks a's pages: a's pin holds nothing on its own */
    rkv_match m;
    OK(rkv_tree_match(g_tree, 1, a, 16, NULL, 0, &m));
    rkv_lease l;
    OK(rkv_tree_lock(g_tree, m.node, &l));
    CHECK();
    /* 8 free + 0 evictable + b's 4 pages: 10 blocks need b's pin only */
    rkv_block_id got[12];
    OK(rkv_tree_alloc_blocks(g_tree, 10, got));
    CHECK();
    cr_assert_eq(tf_rstats().pins_revoked, 1, "%llu pins revoked for 2 pages",
                 (unsigned long long)tf_rstats().pins_revoked);
    cr_assert_eq(tf_rstats().pins, 1);
    /* a is still pinned: after the request ends its pages stay out of
     * eviction */
    OK(rkv_tree_unlock(g_tree, &l));
    CHECK();
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 3, NULL));
    cr_assert_eq(tf_cached_pages(1, a, 16), 4);
    OK(rkv_pool_unref_n(g_pool, 10, got));
    CHECK();
}

/* Two owners pin the same pages: neither pin alone frees anything, both
 * together do, so both go (earliest first). */
Test(retain, revocation_takes_pins_that_free_only_together)
{
    setup_with(8, 4, RKV_EVICT_LRU, 50);
    int32_t a[16];
    tf_cache_seq(1, a, 16, 1000);
    pin(1, a, 16, 16, 100, 1, 0);
    pin(1, a, 16, 16, 200, 2, 0);
    rkv_block_id got[8];
    OK(rkv_tree_alloc_blocks(g_tree, 5, got));
    CHECK();
    cr_assert_eq(tf_rstats().pins_revoked, 2);
    cr_assert_eq(tf_rstats().pins, 0);
    OK(rkv_pool_unref_n(g_pool, 5, got));
    CHECK();
}

/* Pins with equal deadlines are revoked oldest first (creation order, not
 * node order or owner): pinned b, then c, then a, all to expire at the
 * same time; pressure for one pin's pages takes b's, then c's. */
Test(retain, equal_deadlines_revoke_the_oldest_pin_first)
{
    setup_with(16, 4, RKV_EVICT_LRU, 80);
    int32_t a[16], b[16], c[16];
    cache_abc(16, a, b, c);
    pin_three(16, 100, (const int32_t *const[]){b, c, a},
              (const uint64_t[]){7, 5, 9});
    cr_assert_eq(tf_rstats().pins, 3);
    rkv_block_id got[8];
    OK(rkv_tree_alloc_blocks(g_tree, 8, got)); /* 4 free + one pin's 4 */
    CHECK();
    cr_assert_eq(tf_rstats().pins_revoked, 1);
    cr_assert_eq(tf_cached_pages(1, b, 16), 0, "b, pinned first, goes first");
    cr_assert_eq(tf_cached_pages(1, c, 16), 4);
    cr_assert_eq(tf_cached_pages(1, a, 16), 4);
    rkv_block_id more[4];
    OK(rkv_tree_alloc_blocks(g_tree, 4, more));
    CHECK();
    cr_assert_eq(tf_rstats().pins_revoked, 2);
    cr_assert_eq(tf_cached_pages(1, c, 16), 0, "then c");
    cr_assert_eq(tf_cached_pages(1, a, 16), 4, "a, pinned last, stays");
    OK(rkv_pool_unref_n(g_pool, 8, got));
    OK(rkv_pool_unref_n(g_pool, 4, more));
    CHECK();
}

/* ---- priorities -------------------------------------------------------------- */

static void three_sequences(int policy, int32_t (*s)[8])
{
    setup_with(64, 4, policy, 50);
    for (int i = 0; i < 3; i++) {
        tf_seq(s[i], 8, 1000 * (i + 1));
        tf_insert_free(1, s[i], 8);
    }
    prio(1, s[0], 8, 0, 8, 80, 0);
    prio(1, s[1], 8, 0, 8, 10, 0);
    /* s[2] keeps 35; recency: s[1] newest, then s[2], s[0] oldest */
    touch(1, s[0], 8);
    touch(1, s[2], 8);
    touch(1, s[1], 8);
}

Test(retain, priorities_order_eviction)
{
    int32_t s[3][8];
    three_sequences(RKV_EVICT_PRIORITY, s);
    const int order[3] = {1, 2, 0}; /* priority 10, 35, 80 */
    for (int k = 0; k < 3; k++) {
        OK(rkv_tree_evict(g_tree, 2, NULL));
        CHECK();
        for (int i = 0; i < 3; i++) {
            int gone = 0;
            for (int j = 0; j <= k; j++)
                gone |= order[j] == i;
            cr_assert_eq(tf_cached_pages(1, s[i], 8), gone ? 0u : 2u,
                         "after %d evictions, sequence %d", k + 1, i);
        }
    }
}

Test(retain, lru_policy_ignores_priorities)
{
    int32_t s[3][8];
    three_sequences(RKV_EVICT_LRU, s);
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, s[0], 8), 0); /* the oldest */
    cr_assert_eq(tf_cached_pages(1, s[1], 8), 2);
}

/* A range that starts past the tokens sets nothing, however large its
 * ends: rounding prio_begin up to a page must not wrap around to page 0
 * (it did, and SIZE_MAX - 1 gave every cached page the priority). */
Test(retain, priority_range_past_the_end_sets_nothing)
{
    setup_with(64, 4, RKV_EVICT_PRIORITY, 50);
    int32_t a[16];
    tf_cache_seq(1, a, 16, 1);
    rkv_retention r = tu_prio(90, SIZE_MAX - 1, SIZE_MAX);
    rkv_retain_result out;
    OK(rkv_tree_retain(g_tree, 1, a, 16, &r, 0, &out));
    CHECK();
    cr_assert_eq(out.prio_pages, 0);
    rkv_match m;
    OK(rkv_tree_match(g_tree, 1, a, 16, NULL, RKV_MATCH_PEEK, &m));
    int p = -1;
    OK(rkv_tree_node_priority(g_tree, m.node, &p));
    cr_assert_eq(p, RKV_PRIORITY_DEFAULT);
}

Test(retain, priority_range_splits_nodes)
{
    setup_with(64, 4, RKV_EVICT_PRIORITY, 50);
    int32_t a[16];
    tf_cache_seq(1, a, 16, 1);
    /* [3, 13) tokens: pages wholly inside are 1 and 2 */
    rkv_retention r = tu_prio(90, 3, 13);
    rkv_retain_result out;
    OK(rkv_tree_retain(g_tree, 1, a, 16, &r, 0, &out));
    CHECK();
    cr_assert_eq(out.prio_pages, 2);
    /* nodes now end after pages 1, 3 and 4 (a peek names the deepest node
     * it matched whole) */
    const uint32_t ends[3] = {1, 3, 4};
    const int expect[3] = {35, 90, 35};
    for (uint32_t i = 0; i < 3; i++) {
        rkv_match m;
        OK(rkv_tree_match(g_tree, 1, a, ends[i] * 4, NULL, RKV_MATCH_PEEK, &m));
        rkv_node_info info;
        OK(rkv_tree_node_info(g_tree, m.node, &info));
        cr_assert_eq(info.depth_tokens, ends[i] * 4);
        int p = -1;
        OK(rkv_tree_node_priority(g_tree, m.node, &p));
        cr_assert_eq(p, expect[i], "node ending at page %u", ends[i]);
    }
    /* eviction trims the tail leaf (35), then the 90 node, never mixing */
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 16), 2);
}

/* ---- random operations against slow references ----------------------------- */

#define RMAX_PINS 64

typedef struct model_pin {
    uint64_t owner, deadline;
    rkv_namespace ns;
    int32_t tok[64];
    uint32_t pages;
    int live;
} model_pin;

/* Slow reference of both policies: scan every node for the evictable
 * leaf with the smallest (bucket, last use). */
static uint32_t ref_victim(int policy)
{
    const rkv_tree *t = g_tree;
    uint32_t best = RKV_NIL;
    uint64_t bk = 0, bl = 0;
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        const rkv_tnode *x = &t->nodes[y];
        if (x->parent == RKV_NIL || x->parent == 0 || x->first_child != RKV_NIL ||
            x->lock_count != 0)
            continue;
        uint64_t b = policy == RKV_EVICT_PRIORITY
                         ? (t->retain.meta ? t->retain.meta[y].prio : RKV_PRIORITY_DEFAULT)
                         : 0;
        if (best == RKV_NIL || b < bk || (b == bk && x->last_access < bl)) {
            best = y;
            bk = b;
            bl = x->last_access;
        }
    }
    return best;
}

/* Slow reference of pin accounting: distinct (ns, page prefix) pairs over
 * live pins, with one more pin optionally. */
static uint64_t ref_pinned(const model_pin *pins, uint32_t np,
                           const model_pin *extra)
{
    uint64_t n = 0;
    const model_pin *all[RMAX_PINS + 1];
    uint32_t na = 0;
    for (uint32_t i = 0; i < np; i++)
        if (pins[i].live)
            all[na++] = &pins[i];
    if (extra != NULL)
        all[na++] = extra;
    for (uint32_t i = 0; i < na; i++) {
        for (uint32_t k = 1; k <= all[i]->pages; k++) {
            int seen = 0;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = all[j]->ns == all[i]->ns && all[j]->pages >= k &&
                       memcmp(all[j]->tok, all[i]->tok, k * g_page * sizeof(int32_t)) == 0;
            n += !seen;
        }
    }
    return n;
}

static void random_run(int policy, const char *name)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    setup_with(48, 2, policy, 15); /* cap 7 pages */
    model_pin pins[RMAX_PINS];
    uint32_t npins = 0;
    uint64_t now = 0;
    rkv_lease leases[8] = {{0}};
    uint64_t steps = rkv_test_scaled(4000);
    for (uint64_t step = 0; step < steps; step++) {
        /* sequences over a tiny alphabet share prefixes */
        int32_t tok[64];
        uint32_t np = 1 + (uint32_t)rkv_rng_below(&rng, 10);
        size_t n = (size_t)np * g_page + rkv_rng_below(&rng, g_page);
        for (size_t i = 0; i < n; i++)
            tok[i] = (int32_t)rkv_rng_below(&rng, 2);
        rkv_namespace ns = rkv_rng_below(&rng, 2);
        uint32_t op = (uint32_t)rkv_rng_below(&rng, 100);
        if (op < 25) {
            if (rkv_pool_num_free(g_pool) >= np)
                tf_insert_free(ns, tok, n);
        } else if (op < 35) {
            touch(ns, tok, n);
        } else if (op < 50) {
            prio(ns, tok, n, rkv_rng_below(&rng, n + 1) / 2,
                 n / 2 + rkv_rng_below(&rng, n / 2 + 1),
                 (int)rkv_rng_below(&rng, 101), now);
        } else if (op < 62 && npins < RMAX_PINS) {
            model_pin mp;
            memset(&mp, 0, sizeof mp);
            mp.ns = ns;
            mp.owner = rkv_rng_below(&rng, 4);
            memcpy(mp.tok, tok, n * sizeof *tok);
            size_t pt = rkv_rng_below(&rng, n + 1);
            uint32_t cached = tf_cached_pages(ns, tok, n);
            mp.pages = (uint32_t)(pt / g_page) < cached ? (uint32_t)(pt / g_page) : cached;
            mp.deadline = now + 1 + rkv_rng_below(&rng, 50);
            rkv_retention r = tu_pin(pt, mp.deadline - now, mp.owner);
            /* a renewal: same owner, same prefix */
            int renew = -1;
            for (uint32_t i = 0; i < npins; i++)
                if (pins[i].live && pins[i].owner == mp.owner && pins[i].ns == ns &&
                    pins[i].pages == mp.pages && mp.pages > 0 &&
                    memcmp(pins[i].tok, tok, mp.pages * g_page * sizeof *tok) == 0)
                    renew = (int)i;
            uint64_t cap = tf_rstats().pin_cap_blocks;
            int refuse = mp.pages > 0 && renew < 0 &&
                         ref_pinned(pins, npins, &mp) > cap;
            rkv_status st = rkv_tree_retain(g_tree, ns, tok, n, &r, now, NULL);
            CHECK();
            cr_assert_eq(st, refuse ? RKV_ERR_PIN_CAP : RKV_OK,
                         "step %llu: %s", (unsigned long long)step, rkv_last_error());
            if (st == RKV_OK && renew >= 0) {
                if (mp.deadline > pins[renew].deadline)
                    pins[renew].deadline = mp.deadline;
            } else if (st == RKV_OK && mp.pages > 0) {
                mp.live = 1;
                pins[npins++] = mp;
            }
        } else if (op < 66) {
            uint64_t owner = rkv_rng_below(&rng, 4);
            uint32_t cnt = 0, want = 0;
            if (rkv_rng_below(&rng, 2)) {
                uint64_t ttl = rkv_rng_below(&rng, 60);
                OK(rkv_tree_pins_extend(g_tree, owner, ttl, now, &cnt));
                for (uint32_t i = 0; i < npins; i++)
                    if (pins[i].live && pins[i].owner == owner) {
                        want++;
                        if (now + ttl > pins[i].deadline)
                            pins[i].deadline = now + ttl;
                    }
            } else {
                OK(rkv_tree_pins_release(g_tree, owner, &cnt));
                for (uint32_t i = 0; i < npins; i++)
                    if (pins[i].live && pins[i].owner == owner) {
                        want++;
                        pins[i].live = 0;
                    }
            }
            CHECK();
            cr_assert_eq(cnt, want);
        } else if (op < 74) {
            now += rkv_rng_below(&rng, 8);
            OK(rkv_tree_set_time(g_tree, now));
            CHECK();
        } else if (op < 82) {
            uint32_t i = (uint32_t)rkv_rng_below(&rng, 8);
            if (leases[i].id != 0) {
                OK(rkv_tree_unlock(g_tree, &leases[i]));
            } else {
                rkv_match m;
                OK(rkv_tree_match(g_tree, ns, tok, n, NULL, 0, &m));
                if (m.node.id != 0)
                    OK(rkv_tree_lock(g_tree, m.node, &leases[i]));
            }
            CHECK();
        } else {
            /* evict one page: the victim must be the reference's */
            uint32_t v = ref_victim(policy);
            uint32_t gen = v == RKV_NIL ? 0 : g_tree->nodes[v].gen;
            uint32_t pages = v == RKV_NIL ? 0 : g_tree->nodes[v].num_pages;
            rkv_status st = rkv_tree_evict(g_tree, 1, NULL);
            CHECK();
            if (v == RKV_NIL) {
                cr_assert_eq(st, RKV_ERR_NO_SPACE);
            } else {
                cr_assert_eq(st, RKV_OK, "%s", rkv_last_error());
                const rkv_tnode *x = &g_tree->nodes[v];
                cr_assert(x->gen != gen &&
                          (x->parent == RKV_NIL || x->num_pages == pages - 1),
                          "step %llu: evicted another node than %u",
                          (unsigned long long)step, v);
            }
        }
        /* pins: model expiry, honoured, accounted */
        for (uint32_t i = 0; i < npins; i++)
            if (pins[i].live && pins[i].deadline <= now)
                pins[i].live = 0;
        uint32_t live = 0;
        for (uint32_t i = 0; i < npins; i++) {
            if (!pins[i].live)
                continue;
            live++;
            cr_assert_geq(tf_cached_pages(pins[i].ns, pins[i].tok, pins[i].pages * g_page),
                          pins[i].pages, "step %llu: pin %u lost pages",
                          (unsigned long long)step, i);
        }
        rkv_retention_stats rs = tf_rstats();
        cr_assert_eq(rs.pins, live, "step %llu", (unsigned long long)step);
        cr_assert_eq(rs.pinned_blocks, ref_pinned(pins, npins, NULL),
                     "step %llu", (unsigned long long)step);
        cr_assert_leq(rs.pinned_blocks, rs.pin_cap_blocks);
        /* compact the model */
        uint32_t k = 0;
        for (uint32_t i = 0; i < npins; i++)
            if (pins[i].live)
                pins[k++] = pins[i];
        npins = k;
    }
    for (uint32_t i = 0; i < 8; i++)
        if (leases[i].id != 0)
            OK(rkv_tree_unlock(g_tree, &leases[i]));
    CHECK();
    /* the run reached every path it is meant to compare */
    rkv_retention_stats rs = tf_rstats();
    rkv_tree_stats ts;
    OK(rkv_tree_get_stats(g_tree, &ts));
    cr_assert(rs.pins_made > 0 && rs.pins_renewed > 0 && rs.pins_expired > 0 &&
              rs.pins_released > 0 && rs.pins_refused > 0 && ts.evicted_blocks > 0,
              "made %llu renewed %llu expired %llu released %llu refused %llu "
              "evicted %llu", (unsigned long long)rs.pins_made,
              (unsigned long long)rs.pins_renewed,
              (unsigned long long)rs.pins_expired,
              (unsigned long long)rs.pins_released,
              (unsigned long long)rs.pins_refused,
              (unsigned long long)ts.evicted_blocks);
}

Test(retain_random, lru_against_reference, .fini = tf_close)
{
    random_run(RKV_EVICT_LRU, "retain_random::lru_against_reference");
}

Test(retain_random, priority_against_reference, .fini = tf_close)
{
    random_run(RKV_EVICT_PRIORITY, "retain_random::priority_against_reference");
}

/* ---- OOM injection ------------------------------------------------------------ */

typedef struct oom_snap {
    rkv_tree_stats st;
    rkv_retention_stats rs;
    int64_t live;
    uint32_t matched[40];
} oom_snap;

static void oom_take(oom_snap *s, int32_t (*seqs)[24], uint32_t nseq)
{
    memset(s, 0, sizeof *s);
    OK(rkv_tree_get_stats(g_tree, &s->st));
    OK(rkv_tree_retention_stats(g_tree, &s->rs));
    s->live = rkv_tree_debug_live_allocs(g_tree);
    for (uint32_t i = 0; i < nseq; i++)
        s->matched[i] = tf_cached_pages(1, seqs[i], 24);
}

/* A scenario whose calls make every allocation retention adds: meta at the
 * first retain, split arrays, the slot table, the child index and meta
 * growing together, the pin table and its heap growing, the lease table
 * growing. Run once per k with the k-th allocation failing: every NOMEM
 * must leave the tree as it was; the call is then repeated to go on. */
static uint64_t oom_run(int64_t k)
{
    setup_with(1024, 4, RKV_EVICT_PRIORITY, 50);
    int32_t seqs[40][24];
    rkv_tree_debug_fail_alloc_after(g_tree, k);
    uint64_t fired = 0;
    for (uint32_t i = 0; i < 40; i++) {
        tf_seq(seqs[i], 24, 0);
        seqs[i][4] = (int32_t)(1000 + i); /* share page 0, then diverge */
        rkv_block_id b[6];
        OK(rkv_pool_alloc_n(g_pool, 6, b));
        oom_snap s0, s1;
        oom_take(&s0, seqs, i);
        rkv_status st;
        while ((st = rkv_tree_insert(g_tree, 1, seqs[i], 24, b, NULL, NULL)) ==
               RKV_ERR_NOMEM) {
            CHECK();
            oom_take(&s1, seqs, i);
            cr_assert(memcmp(&s0, &s1, sizeof s0) == 0, "k=%lld insert %u",
                      (long long)k, i);
            fired++;
        }
        OK(st);
        OK(rkv_pool_unref_n(g_pool, 6, b));
        CHECK();
        rkv_retention r = tu_pin((i % 4 == 1) ? 0 : 4 * (2 + i % 4), 1000, i);
        r.priority = (int)(i % 101);
        r.prio_begin = 4 * (i % 3);
        r.prio_end = 4 * (3 + i % 3);
        oom_take(&s0, seqs, i + 1);
        while ((st = rkv_tree_retain(g_tree, 1, seqs[i], 24, &r, 0, NULL)) ==
               RKV_ERR_NOMEM) {
            CHECK();
            oom_take(&s1, seqs, i + 1);
            cr_assert(memcmp(&s0, &s1, sizeof s0) == 0, "k=%lld retain %u",
                      (long long)k, i);
            fired++;
        }
        OK(st);
        CHECK();
    }
    cr_assert_geq(tf_rstats().pins, 9); /* the pin table grew at least once */
    rkv_tree_debug_fail_alloc_after(g_tree, -1);
    tf_close();
    return fired;
}

Test(retain_oom, every_allocation_of_retention)
{
    /* allocation k fails, for every k until the scenario runs clean */
    int64_t k = 0;
    for (;; k++) {
        uint64_t fired = oom_run(k);
        if (fired == 0)
            break;
        cr_assert_eq(fired, 1, "k=%lld: one injected failure, %llu seen",
                     (long long)k, (unsigned long long)fired);
    }
    cr_assert_gt(k, 40, "only %lld allocations in the scenario", (long long)k);
}

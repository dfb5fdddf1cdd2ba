/*
 * tests/test_retain_ttl.c -- the timed parts of retention v2: a default pin
 * TTL per namespace (retain/ns_ttl.c) and priorities that revert to the
 * default after priority_duration_ms (retain/pins.c).
 *
 * rkv_pool_check() and rkv_tree_check() run after every operation (CHECK).
 * Expected deadlines and eviction victims follow from each scenario's
 * insertion order and times, not from the code under test.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "tests/support/tree_fixture.h"

static void setup_with(uint32_t nblocks, int policy)
{
    rkv_tree_config tc = tu_tree_config(policy, 100);
    tf_open(nblocks, 4, &tc);
}

static int node_prio(rkv_namespace ns, const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(g_tree, ns, tok, n, NULL, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.matched_tokens, n, "the path is cached whole");
    int p;
    OK(rkv_tree_node_priority(g_tree, m.node, &p));
    return p;
}

static void set_time(uint64_t now)
{
    OK(rkv_tree_set_time(g_tree, now));
    CHECK();
}

/* Moves the time to now, then expects n live pins. */
static void pins_at(uint64_t now, uint64_t n)
{
    set_time(now);
    cr_assert_eq(tf_rstats().pins, n, "%llu pins at %llu",
                 (unsigned long long)tf_rstats().pins, (unsigned long long)now);
}

/* n pins until just before t; one of them expires at t. */
static void expires_at(uint64_t t, uint64_t n)
{
    pins_at(t - 1, n);
    pins_at(t, n - 1);
}

/* Evicting 2 pages takes gone's 8 tokens (in namespace gns), not kept's. */
static void evicts_first(rkv_namespace gns, const int32_t *gone, rkv_namespace kns,
                         const int32_t *kept)
{
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(gns, gone, 8), 0);
    cr_assert_eq(tf_cached_pages(kns, kept, 8), 2);
}

TestSuite(ns_ttl, .fini = tf_close);

Test(ns_ttl, pins_expire_at_their_namespace_ttl_and_own_ttl_wins)
{
    setup_with(32, RKV_EVICT_LRU);
    OK(rkv_tree_set_namespace_ttl(g_tree, 1, 100));
    OK(rkv_tree_set_namespace_ttl(g_tree, 2, 300));
    uint64_t ttl;
    OK(rkv_tree_namespace_ttl(g_tree, 2, &ttl));
    cr_assert_eq(ttl, 300);
    OK(rkv_tree_namespace_ttl(g_tree, 3, &ttl));
    cr_assert_eq(ttl, 0);
    int32_t a[8], b[8], c[8];
    tf_cache_seq(1, a, 8, 1000);
    tf_cache_seq(2, b, 8, 2000);
    tf_cache_seq(1, c, 8, 3000);
    rkv_retention r;
    rkv_retention_init(&r);
    r.pin_tokens = 8; /* ttl_ms 0: the namespace's */
    OK(rkv_tree_retain(g_tree, 1, a, 8, &r, 10, NULL));
    CHECK();
    OK(rkv_tree_retain(g_tree, 2, b, 8, &r, 10, NULL));
    CHECK();
    r.ttl_ms = 500; /* its own TTL wins over namespace 1's 100 */
    OK(rkv_tree_retain(g_tree, 1, c, 8, &r, 10, NULL));
    CHECK();
    cr_assert_eq(tf_rstats().pins, 3);
    expires_at(110, 3); /* a: 10 + 100 */
    evicts_first(1, a, 2, b);
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 1, NULL));
    expires_at(310, 2); /* b: 10 + 300 */
    evicts_first(2, b, 1, c);
    expires_at(510, 1); /* c: 10 + 500 */
    cr_assert_eq(tf_rstats().pins_expired, 3);
}

Test(ns_ttl, renewal_uses_the_namespace_ttl_and_removal_refuses_again)
{
    setup_with(32, RKV_EVICT_LRU);
    OK(rkv_tree_set_namespace_ttl(g_tree, 5, 100));
    int32_t a[8];
    tf_cache_seq(5, a, 8, 1000);
    rkv_retention r;
    rkv_retention_init(&r);
    r.pin_tokens = 8;
    OK(rkv_tree_retain(g_tree, 5, a, 8, &r, 0, NULL));
    CHECK();
    OK(rkv_tree_retain(g_tree, 5, a, 8, &r, 60, NULL)); /* renewed to 160 */
    CHECK();
    cr_assert_eq(tf_rstats().pins_renewed, 1);
    pins_at(159, 1);
    /* removing the default keeps made pins, refuses new TTL-less ones */
    OK(rkv_tree_set_namespace_ttl(g_tree, 5, 0));
    CHECK();
    rkv_retention_stats before = tf_rstats();
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 5, a, 8, &r, 159, NULL));
    cr_assert(strstr(rkv_last_error(), "ttl_ms") != NULL, "%s", rkv_last_error());
    CHECK();
    rkv_retention_stats after = tf_rstats();
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "state intact");
    pins_at(160, 0);
}

Test(ns_ttl, table_is_bounded_and_full_changes_nothing)
{
    setup_with(8, RKV_EVICT_LRU);
    for (uint32_t i = 0; i < RKV_NS_TTL_MAX; i++) {
        OK(rkv_tree_set_namespace_ttl(g_tree, 1000 + i, 10 + i));
        CHECK();
    }
    ERR(RKV_ERR_NO_SPACE, rkv_tree_set_namespace_ttl(g_tree, 7, 5));
    cr_assert(strstr(rkv_last_error(), "namespaces") != NULL, "%s",
              rkv_last_error());
    CHECK();
    uint64_t ttl;
    OK(rkv_tree_namespace_ttl(g_tree, 7, &ttl));
    cr_assert_eq(ttl, 0);
    /* updating a present one and removing an absent one need no room */
    OK(rkv_tree_set_namespace_ttl(g_tree, 1000, 77));
    OK(rkv_tree_set_namespace_ttl(g_tree, 8, 0));
    CHECK();
    OK(rkv_tree_namespace_ttl(g_tree, 1000, &ttl));
    cr_assert_eq(ttl, 77);
    OK(rkv_tree_set_namespace_ttl(g_tree, 1005, 0)); /* frees a slot */
    CHECK();
    OK(rkv_tree_set_namespace_ttl(g_tree, 7, 5));
    CHECK();
    for (uint32_t i = 0; i < RKV_NS_TTL_MAX; i++) {
        OK(rkv_tree_namespace_ttl(g_tree, 1000 + i, &ttl));
        cr_assert_eq(ttl, i == 0 ? 77 : i == 5 ? 0 : 10 + i, "ns %u", 1000 + i);
    }
    OK(rkv_tree_reset(g_tree)); /* configuration, not cached state */
    CHECK();
    OK(rkv_tree_namespace_ttl(g_tree, 7, &ttl));
    cr_assert_eq(ttl, 5);
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_set_namespace_ttl(NULL, 1, 1));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_namespace_ttl(g_tree, 1, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_namespace_ttl(NULL, 1, &ttl));
}

/* ---- priority duration ------------------------------------------------------ */

TestSuite(prio_duration, .fini = tf_close);

static void prio_for(rkv_namespace ns, const int32_t *tok, size_t n, int p,
                     uint64_t dur, uint64_t now)
{
    rkv_retention r = tu_prio(p, 0, n);
    r.priority_duration_ms = dur;
    OK(rkv_tree_retain(g_tree, ns, tok, n, &r, now, NULL));
    CHECK();
}

Test(prio_duration, outlives_lru_pressure_then_evicted_in_lru_order)
{
    setup_with(32, RKV_EVICT_PRIORITY);
    int32_t a[8], b[8], c[8], d[8];
    tf_cache_seq(1, a, 8, 1000); /* a is the least recently used throughout */
    tf_cache_seq(1, b, 8, 2000);
    tf_cache_seq(1, c, 8, 3000);
    tf_cache_seq(1, d, 8, 4000);
    prio_for(1, a, 8, 90, 100, 0);
    cr_assert_eq(node_prio(1, a, 8), 90);
    set_time(99);
    /* before its duration: a outlives b and c, older than them */
    OK(rkv_tree_evict(g_tree, 4, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 8), 2);
    cr_assert_eq(tf_cached_pages(1, b, 8), 0);
    cr_assert_eq(tf_cached_pages(1, c, 8), 0);
    cr_assert_eq(tf_rstats().prio_reverted, 0);
    set_time(100); /* 0 + 100: back to the default */
    cr_assert_eq(node_prio(1, a, 8), RKV_PRIORITY_DEFAULT);
    cr_assert_eq(tf_rstats().prio_reverted, 1);
    /* now plain LRU among defaults: a (older) goes before d */
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(tf_cached_pages(1, a, 8), 0);
    cr_assert_eq(tf_cached_pages(1, d, 8), 2);
}

Test(prio_duration, zero_is_forever_and_a_later_priority_replaces_the_deadline)
{
    setup_with(32, RKV_EVICT_PRIORITY);
    int32_t a[8], b[8];
    tf_cache_seq(1, a, 8, 1000);
    tf_cache_seq(1, b, 8, 2000);
    prio_for(1, a, 8, 80, 0, 0);   /* today's behaviour: stays */
    prio_for(1, b, 8, 70, 50, 0);
    prio_for(1, b, 8, 60, 0, 10);  /* replaces: no deadline any more */
    set_time(1000000);
    cr_assert_eq(node_prio(1, a, 8), 80);
    cr_assert_eq(node_prio(1, b, 8), 60);
    cr_assert_eq(tf_rstats().prio_reverted, 0);
    prio_for(1, a, 8, 20, 30, 1000000); /* a forever priority, now timed */
    set_time(1000029);
    cr_assert_eq(node_prio(1, a, 8), 20);
    set_time(1000030);
    cr_assert_eq(node_prio(1, a, 8), RKV_PRIORITY_DEFAULT);
}

Test(prio_duration, a_split_keeps_the_deadline_on_both_halves)
{
    setup_with(32, RKV_EVICT_PRIORITY);
    int32_t a[16];
    tf_cache_seq(1, a, 16, 1000);
    prio_for(1, a, 16, 90, 40, 0);
    /* a pin on the first half splits the node */
    rkv_retention r = tu_pin(8, 1000, 0);
    OK(rkv_tree_retain(g_tree, 1, a, 16, &r, 5, NULL));
    CHECK();
    cr_assert_eq(node_prio(1, a, 8), 90);
    cr_assert_eq(node_prio(1, a, 16), 90);
    set_time(40);
    cr_assert_eq(node_prio(1, a, 8), RKV_PRIORITY_DEFAULT);
    cr_assert_eq(node_prio(1, a, 16), RKV_PRIORITY_DEFAULT);
    cr_assert_eq(tf_rstats().prio_reverted, 2);
}

Test(prio_duration, a_freed_node_does_not_carry_its_deadline)
{
    setup_with(8, RKV_EVICT_PRIORITY);
    int32_t a[8], b[8];
    tf_seq(b, 8, 2000);
    tf_cache_seq(1, a, 8, 1000);
    prio_for(1, a, 8, 90, 50, 0);
    OK(rkv_tree_evict(g_tree, 2, NULL)); /* a goes with its deadline */
    CHECK();
    tf_insert_free(1, b, 8); /* may reuse a's slot */
    cr_assert_eq(node_prio(1, b, 8), RKV_PRIORITY_DEFAULT);
    set_time(50);
    cr_assert_eq(tf_rstats().prio_reverted, 0);
    cr_assert_eq(node_prio(1, b, 8), RKV_PRIORITY_DEFAULT);
}

Test(prio_duration, bad_arguments_change_nothing)
{
    setup_with(32, RKV_EVICT_PRIORITY);
    int32_t a[8];
    tf_cache_seq(1, a, 8, 1000);
    rkv_retention_stats before = tf_rstats();
    rkv_retention r;
    rkv_retention_init(&r); /* priority -1 */
    r.priority_duration_ms = 10;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 1, a, 8, &r, 0, NULL));
    cr_assert(strstr(rkv_last_error(), "priority_duration_ms") != NULL, "%s",
              rkv_last_error());
    CHECK();
    r.priority = 90;
    r.prio_end = 8;
    ERR(RKV_ERR_INVALID_ARG,
        rkv_tree_retain(g_tree, 1, a, 8, &r, UINT64_MAX, NULL));
    cr_assert(strstr(rkv_last_error(), "UINT64_MAX") != NULL, "%s",
              rkv_last_error());
    CHECK();
    cr_assert_eq(node_prio(1, a, 8), RKV_PRIORITY_DEFAULT);
    rkv_retention_stats after = tf_rstats();
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "state intact");
    /* a duration past the end of time saturates: the priority stays */
    r.priority_duration_ms = UINT64_MAX;
    OK(rkv_tree_retain(g_tree, 1, a, 8, &r, 5, NULL));
    CHECK();
    set_time(UINT64_MAX - 1);
    cr_assert_eq(node_prio(1, a, 8), 90);
}

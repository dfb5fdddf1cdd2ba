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

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define ERR(code, expr) \
    cr_assert_eq((expr), (code), "%s: expected %d (%s)", #expr, (int)(code), \
                 rkv_last_error())

static rkv_pool *g_pool;
static rkv_tree *g_tree;
static const uint32_t P = 4;

#define CHECK()                                 \
    do {                                        \
        OK(rkv_pool_check(g_pool));             \
        OK(rkv_tree_check(g_tree));             \
    } while (0)

static void setup_with(uint32_t nblocks, int policy)
{
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = nblocks;
    cfg.page_size = P;
    OK(rkv_pool_create(&cfg, &g_pool));
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.evict_policy = policy;
    tc.max_pinned_pct = 100;
    OK(rkv_tree_create(g_pool, &tc, &g_tree));
    CHECK();
}

static void teardown(void)
{
    if (g_tree != NULL)
        OK(rkv_tree_check(g_tree));
    rkv_tree_destroy(g_tree);
    g_tree = NULL;
    if (g_pool != NULL) {
        OK(rkv_pool_check(g_pool));
        rkv_pool_destroy(g_pool);
    }
    g_pool = NULL;
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), 0, "tree memory leaked");
}

static void seq(int32_t *tok, size_t n, int32_t base)
{
    for (size_t i = 0; i < n; i++)
        tok[i] = base + (int32_t)i;
}

static void insert_free(rkv_namespace ns, const int32_t *tok, size_t n)
{
    uint32_t np = (uint32_t)(n / P);
    rkv_block_id b[16];
    cr_assert(np <= 16);
    OK(rkv_pool_alloc_n(g_pool, np, b));
    OK(rkv_tree_insert(g_tree, ns, tok, n, b, NULL, NULL));
    OK(rkv_pool_unref_n(g_pool, np, b));
    CHECK();
}

static uint32_t cached_pages(rkv_namespace ns, const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(g_tree, ns, tok, n, NULL, RKV_MATCH_PEEK, &m));
    return m.num_blocks;
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

static rkv_retention_stats rstats(void)
{
    rkv_retention_stats s;
    OK(rkv_tree_retention_stats(g_tree, &s));
    return s;
}

static void set_time(uint64_t now)
{
    OK(rkv_tree_set_time(g_tree, now));
    CHECK();
}

TestSuite(ns_ttl, .fini = teardown);

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
    seq(a, 8, 1000);
    seq(b, 8, 2000);
    seq(c, 8, 3000);
    insert_free(1, a, 8);
    insert_free(2, b, 8);
    insert_free(1, c, 8);
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
    cr_assert_eq(rstats().pins, 3);
    set_time(109);
    cr_assert_eq(rstats().pins, 3);
    set_time(110); /* a: 10 + 100 */
    cr_assert_eq(rstats().pins, 2);
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(cached_pages(1, a, 8), 0);
    cr_assert_eq(cached_pages(2, b, 8), 2);
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict(g_tree, 1, NULL));
    set_time(309);
    cr_assert_eq(rstats().pins, 2);
    set_time(310); /* b: 10 + 300 */
    cr_assert_eq(rstats().pins, 1);
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(cached_pages(2, b, 8), 0);
    cr_assert_eq(cached_pages(1, c, 8), 2);
    set_time(509);
    cr_assert_eq(rstats().pins, 1);
    set_time(510); /* c: 10 + 500 */
    cr_assert_eq(rstats().pins, 0);
    cr_assert_eq(rstats().pins_expired, 3);
}

Test(ns_ttl, renewal_uses_the_namespace_ttl_and_removal_refuses_again)
{
    setup_with(32, RKV_EVICT_LRU);
    OK(rkv_tree_set_namespace_ttl(g_tree, 5, 100));
    int32_t a[8];
    seq(a, 8, 1000);
    insert_free(5, a, 8);
    rkv_retention r;
    rkv_retention_init(&r);
    r.pin_tokens = 8;
    OK(rkv_tree_retain(g_tree, 5, a, 8, &r, 0, NULL));
    CHECK();
    OK(rkv_tree_retain(g_tree, 5, a, 8, &r, 60, NULL)); /* renewed to 160 */
    CHECK();
    cr_assert_eq(rstats().pins_renewed, 1);
    set_time(159);
    cr_assert_eq(rstats().pins, 1);
    /* removing the default keeps made pins, refuses new TTL-less ones */
    OK(rkv_tree_set_namespace_ttl(g_tree, 5, 0));
    CHECK();
    rkv_retention_stats before = rstats();
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_retain(g_tree, 5, a, 8, &r, 159, NULL));
    cr_assert(strstr(rkv_last_error(), "ttl_ms") != NULL, "%s", rkv_last_error());
    CHECK();
    rkv_retention_stats after = rstats();
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "state intact");
    set_time(160);
    cr_assert_eq(rstats().pins, 0);
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

TestSuite(prio_duration, .fini = teardown);

static void prio_for(rkv_namespace ns, const int32_t *tok, size_t n, int p,
                     uint64_t dur, uint64_t now)
{
    rkv_retention r;
    rkv_retention_init(&r);
    r.priority = p;
    r.prio_begin = 0;
    r.prio_end = n;
    r.priority_duration_ms = dur;
    OK(rkv_tree_retain(g_tree, ns, tok, n, &r, now, NULL));
    CHECK();
}

Test(prio_duration, outlives_lru_pressure_then_evicted_in_lru_order)
{
    setup_with(32, RKV_EVICT_PRIORITY);
    int32_t a[8], b[8], c[8], d[8];
    seq(a, 8, 1000);
    seq(b, 8, 2000);
    seq(c, 8, 3000);
    seq(d, 8, 4000);
    insert_free(1, a, 8); /* a is the least recently used throughout */
    insert_free(1, b, 8);
    insert_free(1, c, 8);
    insert_free(1, d, 8);
    prio_for(1, a, 8, 90, 100, 0);
    cr_assert_eq(node_prio(1, a, 8), 90);
    set_time(99);
    /* before its duration: a outlives b and c, older than them */
    OK(rkv_tree_evict(g_tree, 4, NULL));
    CHECK();
    cr_assert_eq(cached_pages(1, a, 8), 2);
    cr_assert_eq(cached_pages(1, b, 8), 0);
    cr_assert_eq(cached_pages(1, c, 8), 0);
    cr_assert_eq(rstats().prio_reverted, 0);
    set_time(100); /* 0 + 100: back to the default */
    cr_assert_eq(node_prio(1, a, 8), RKV_PRIORITY_DEFAULT);
    cr_assert_eq(rstats().prio_reverted, 1);
    /* now plain LRU among defaults: a (older) goes before d */
    OK(rkv_tree_evict(g_tree, 2, NULL));
    CHECK();
    cr_assert_eq(cached_pages(1, a, 8), 0);
    cr_assert_eq(cached_pages(1, d, 8), 2);
}

Test(prio_duration, zero_is_forever_and_a_later_priority_replaces_the_deadline)
{
    setup_with(32, RKV_EVICT_PRIORITY);
    int32_t a[8], b[8];
    seq(a, 8, 1000);
    seq(b, 8, 2000);
    insert_free(1, a, 8);
    insert_free(1, b, 8);
    prio_for(1, a, 8, 80, 0, 0);   /* today's behaviour: stays */
    prio_for(1, b, 8, 70, 50, 0);
    prio_for(1, b, 8, 60, 0, 10);  /* replaces: no deadline any more */
    set_time(1000000);
    cr_assert_eq(node_prio(1, a, 8), 80);
    cr_assert_eq(node_prio(1, b, 8), 60);
    cr_assert_eq(rstats().prio_reverted, 0);
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
    seq(a, 16, 1000);
    insert_free(1, a, 16);
    prio_for(1, a, 16, 90, 40, 0);
    /* a pin on the first half splits the node */
    rkv_retention r;
    rkv_retention_init(&r);
    r.pin_tokens = 8;
    r.ttl_ms = 1000;
    OK(rkv_tree_retain(g_tree, 1, a, 16, &r, 5, NULL));
    CHECK();
    cr_assert_eq(node_prio(1, a, 8), 90);
    cr_assert_eq(node_prio(1, a, 16), 90);
    set_time(40);
    cr_assert_eq(node_prio(1, a, 8), RKV_PRIORITY_DEFAULT);
    cr_assert_eq(node_prio(1, a, 16), RKV_PRIORITY_DEFAULT);
    cr_assert_eq(rstats().prio_reverted, 2);
}

Test(prio_duration, a_freed_node_does_not_carry_its_deadline)
{
    setup_with(8, RKV_EVICT_PRIORITY);
    int32_t a[8], b[8];
    seq(a, 8, 1000);
    seq(b, 8, 2000);
    insert_free(1, a, 8);
    prio_for(1, a, 8, 90, 50, 0);
    OK(rkv_tree_evict(g_tree, 2, NULL)); /* a goes with its deadline */
    CHECK();
    insert_free(1, b, 8); /* may reuse a's slot */
    cr_assert_eq(node_prio(1, b, 8), RKV_PRIORITY_DEFAULT);
    set_time(50);
    cr_assert_eq(rstats().prio_reverted, 0);
    cr_assert_eq(node_prio(1, b, 8), RKV_PRIORITY_DEFAULT);
}

Test(prio_duration, bad_arguments_change_nothing)
{
    setup_with(32, RKV_EVICT_PRIORITY);
    int32_t a[8];
    seq(a, 8, 1000);
    insert_free(1, a, 8);
    rkv_retention_stats before = rstats();
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
    rkv_retention_stats after = rstats();
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0, "state intact");
    /* a duration past the end of time saturates: the priority stays */
    r.priority_duration_ms = UINT64_MAX;
    OK(rkv_tree_retain(g_tree, 1, a, 8, &r, 5, NULL));
    CHECK();
    set_time(UINT64_MAX - 1);
    cr_assert_eq(node_prio(1, a, 8), 90);
}

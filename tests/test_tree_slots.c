/*
 * tests/test_tree_slots.c -- server slot tables (treeapi/slot_table.c,
 * treeapi/tree_slots.c; include/radixkv/tree.h "Server slot tables"):
 * the table's own calls, and match / insert / eviction / lock through it,
 * against what the plain tree calls and the pool's ref counts say.
 * Page size 4, 16 blocks, so pools run dry in a few inserts.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/tree_fixture.h"

static void setup(void) { tf_open(16, 4, NULL); }

TestSuite(slots, .init = setup, .fini = tf_close);

/* A paged allocator's slots: page i of the key is slots base + 4 * i ... */
static void run_slots(int64_t *s, uint32_t pages, int64_t base)
{
    for (uint32_t i = 0; i < pages * 4; i++)
        s[i] = base + i;
}

static uint64_t stat_cached(void)
{
    rkv_tree_stats st;
    OK(rkv_tree_get_stats(g_tree, &st));
    return st.cached_blocks;
}

Test(slots, table_calls_round_trip_runs_and_scattered_pages)
{
    rkv_slot_table *t;
    ERR(RKV_ERR_INVALID_ARG, rkv_slot_table_create(g_pool, 4, &t));
    OK(rkv_slot_table_create(g_pool, 0, &t));
    rkv_block_id b[3] = {7, 2, 9};
    int64_t s[12] = {100, 101, 102, 103, /* a run */
                     5, 9, 1, 0,         /* scattered: a row */
                     -8, -7, -6, -5};    /* consecutive but negative: a row */
    OK(rkv_slot_table_set(t, 3, b, s));
    cr_assert_eq(rkv_slot_table_count(t), 3);
    int64_t got[16];
    rkv_block_id q[4] = {9, 7, 3, 2};
    OK(rkv_slot_table_gather(t, 4, q, got));
    int64_t want[16] = {-8, -7, -6, -5, 100, 101, 102, 103, -1, -1, -1, -1,
                        5, 9, 1, 0};
    cr_assert_arr_eq(got, want, sizeof want);
    rkv_block_id held[4];
    uint64_t n;
    OK(rkv_slot_table_blocks(t, held, 4, &n));
    cr_assert_eq(n, 3);
    cr_assert(held[0] == 2 && held[1] == 7 && held[2] == 9);
    /* a bad id anywhere changes nothing */
    rkv_block_id bad[2] = {3, 16};
    ERR(RKV_ERR_INVALID_ARG, rkv_slot_table_set(t, 2, bad, s));
    ERR(RKV_ERR_INVALID_ARG, rkv_slot_table_drop(t, 2, bad));
    ERR(RKV_ERR_INVALID_ARG, rkv_slot_table_set(t, 1, bad, NULL));
    cr_assert_eq(rkv_slot_table_count(t), 3);
    OK(rkv_slot_table_drop(t, 1, &b[0]));
    OK(rkv_slot_table_drop(t, 1, &b[0])); /* not held: nothing */
    cr_assert_eq(rkv_slot_table_count(t), 2);
    OK(rkv_slot_table_gather(t, 1, &b[0], got));
    cr_assert(got[0] == -1 && got[3] == -1);
    rkv_slot_table_clear(t);
    cr_assert_eq(rkv_slot_table_count(t), 0);
    rkv_slot_table_destroy(t);

    OK(rkv_slot_table_create(g_pool, RKV_SLOTS_IDENTITY, &t));
    ERR(RKV_ERR_INVALID_ARG, rkv_slot_table_set(t, 1, b, s)); /* takes none */
    OK(rkv_slot_table_set(t, 1, &b[1], NULL));
    OK(rkv_slot_table_gather(t, 1, &b[1], got));
    cr_assert(got[0] == 8 && got[1] == 9 && got[2] == 10 && got[3] == 11);
    rkv_slot_table_destroy(t);
}

Test(slots, insert_match_evict_carry_the_slots)
{
    rkv_slot_table *t;
    OK(rkv_slot_table_create(g_pool, 0, &t));
    int32_t a[13], b[16];
    tf_seq(a, 13, 0);
    tf_seq(b, 16, 0);
    b[8] = 999; /* shares a's first two pages */
    int64_t sa[12], sb[16], got[16];
    run_slots(sa, 3, 400);
    for (int i = 0; i < 16; i++)
        sb[i] = 1000 - i; /* not runs: rows */
    rkv_insert_result r;
    OK(rkv_tree_insert_slots(g_tree, t, 1, a, 13, sa, &r)); /* partial page ignored */
    cr_assert_eq(r.prefix_tokens, 0);
    cr_assert_eq(rkv_slot_table_count(t), 3);
    cr_assert_eq(stat_cached(), 3);
    OK(rkv_tree_insert_slots(g_tree, t, 1, b, 16, sb, &r));
    cr_assert_eq(r.prefix_tokens, 8, "a's first two pages were cached");
    cr_assert_eq(rkv_slot_table_count(t), 5);
    CHECK();
    /* every cached block: the tree's reference only */
    rkv_block_id held[16];
    uint64_t n;
    OK(rkv_slot_table_blocks(t, held, 16, &n));
    for (uint64_t i = 0; i < n; i++)
        cr_assert_eq(rkv_pool_refcount(g_pool, held[i]), 1);
    cr_assert_eq(rkv_pool_num_free(g_pool), 11);

    rkv_match m;
    memset(got, 0x55, sizeof got);
    OK(rkv_tree_match_slots(g_tree, t, 1, b, 16, 0, got, &m));
    cr_assert_eq(m.matched_tokens, 16);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(got[i], sa[i], "the cached prefix keeps a's slots");
    for (int i = 8; i < 16; i++)
        cr_assert_eq(got[i], sb[i], "new pages take b's");
    OK(rkv_tree_match_slots(g_tree, t, 1, a, 12, RKV_MATCH_PEEK, got, &m));
    cr_assert_eq(m.matched_tokens, 12);
    cr_assert_arr_eq(got, sa, sizeof sa);
    OK(rkv_tree_match_slots(g_tree, t, 2, a, 12, 0, got, &m)); /* other ns */
    cr_assert_eq(m.matched_tokens, 0);

    /* a's tail was used least recently: the first victim */
    int64_t ev[8];
    uint32_t freed;
    size_t ns;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_evict_slots(g_tree, t, 2, ev, 7, &freed, &ns));
    OK(rkv_tree_evict_slots(g_tree, t, 1, ev, 8, &freed, &ns));
    cr_assert(freed == 1 && ns == 4);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ev[i], sa[8 + i]);
    cr_assert_eq(rkv_slot_table_count(t), 4);
    cr_assert_eq(rkv_pool_num_free(g_pool), 12);
    OK(rkv_tree_evict_slots(g_tree, t, 2, ev, 8, &freed, &ns));
    cr_assert(freed == 2 && ns == 8);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(ev[i], sb[15 - i / 4 * 4 - (3 - i % 4)], "tail first");
    ERR(RKV_ERR_NO_SPACE, rkv_tree_evict_slots(g_tree, t, 3, ev, 12, &freed, &ns));
    cr_assert(freed == 0 && ns == 0 && rkv_slot_table_count(t) == 2);
    OK(rkv_tree_evict_slots(g_tree, t, 2, NULL, 0, &freed, &ns));
    cr_assert(freed == 2 && ns == 0 && rkv_slot_table_count(t) == 0);
    CHECK();
    rkv_slot_table_destroy(t);
}

Test(slots, insert_short_of_blocks_changes_nothing)
{
    rkv_slot_table *t;
    OK(rkv_slot_table_create(g_pool, 0, &t));
    int32_t k[64];
    int64_t s[64];
    tf_seq(k, 48, 0);
    run_slots(s, 12, 0);
    OK(rkv_tree_insert_slots(g_tree, t, 0, k, 48, s, NULL));
    tf_seq(k, 24, 5000);
    run_slots(s, 6, 4000);
    ERR(RKV_ERR_NO_SPACE, rkv_tree_insert_slots(g_tree, t, 0, k, 24, s, NULL));
    cr_assert_eq(rkv_slot_table_count(t), 12);
    cr_assert_eq(stat_cached(), 12);
    cr_assert_eq(rkv_pool_num_free(g_pool), 4);
    /* bad tokens: refused after the blocks were taken, which go back */
    k[5] = -1;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, t, 0, k, 8, s, NULL));
    cr_assert_eq(rkv_pool_num_free(g_pool), 4);
    cr_assert_eq(rkv_slot_table_count(t), 12);
    /* more pages than the pool has */
    int32_t big[72];
    int64_t bs[72];
    tf_seq(big, 72, 0);
    run_slots(bs, 18, 0);
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, t, 0, big, 72, bs, NULL));
    CHECK();
    rkv_slot_table_destroy(t);
}

Test(slots, identity_insert_hands_the_callers_pages_to_the_tree)
{
    rkv_slot_table *t;
    OK(rkv_slot_table_create(g_pool, RKV_SLOTS_IDENTITY, &t));
    rkv_block_id b[3];
    OK(rkv_pool_alloc_n(g_pool, 3, b));
    int32_t k[12];
    tf_seq(k, 12, 0);
    int64_t s[12];
    for (int i = 0; i < 12; i++)
        s[i] = (int64_t)b[i / 4] * 4 + i % 4;
    /* not whole pages of the pool: refused, nothing changes */
    int64_t bad[12];
    memcpy(bad, s, sizeof s);
    bad[5] += 1;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, t, 0, k, 12, bad, NULL));
    memcpy(bad, s, sizeof s);
    for (int i = 4; i < 8; i++)
        bad[i] += 2; /* consecutive, not page-aligned */
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, t, 0, k, 12, bad, NULL));
    memcpy(bad, s, sizeof s);
    for (int i = 8; i < 12; i++)
        bad[i] = 64 + i % 4; /* block 16: past the pool */
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, t, 0, k, 12, bad, NULL));
    rkv_block_id fb = 0;
    while (rkv_pool_refcount(g_pool, fb) != 0)
        fb++;
    for (int i = 8; i < 12; i++)
        bad[i] = 4 * (int64_t)fb + i % 4; /* a free block */
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, t, 0, k, 12, bad, NULL));
    cr_assert_eq(stat_cached(), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rkv_pool_refcount(g_pool, b[i]), 1, "still the caller's");

    rkv_insert_result r;
    OK(rkv_tree_insert_slots(g_tree, t, 0, k, 12, s, &r));
    cr_assert_eq(r.prefix_tokens, 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rkv_pool_refcount(g_pool, b[i]), 1, "now the tree's only");
    cr_assert_eq(rkv_slot_table_count(t), 3);

    /* the same first two pages again on copies the caller computed, and a
     * new third page: the copies stay the caller's, the new page is taken */
    rkv_block_id c[3];
    OK(rkv_pool_alloc_n(g_pool, 3, c));
    k[8] = 777;
    for (int i = 0; i < 12; i++)
        s[i] = (int64_t)c[i / 4] * 4 + i % 4;
    OK(rkv_tree_insert_slots(g_tree, t, 0, k, 12, s, &r));
    cr_assert_eq(r.prefix_tokens, 8);
    cr_assert_eq(rkv_pool_refcount(g_pool, c[0]), 1);
    cr_assert_eq(rkv_pool_refcount(g_pool, c[1]), 1);
    cr_assert_eq(rkv_pool_refcount(g_pool, c[2]), 1);
    cr_assert_eq(rkv_slot_table_count(t), 4);
    OK(rkv_pool_unref_n(g_pool, 2, c)); /* the caller frees its duplicates */
    rkv_match m;
    int64_t got[12];
    OK(rkv_tree_match_slots(g_tree, t, 0, k, 12, 0, got, &m));
    cr_assert_eq(m.matched_tokens, 12);
    cr_assert_eq(got[0], (int64_t)b[0] * 4);
    cr_assert_eq(got[8], (int64_t)c[2] * 4);
    /* an identity eviction writes no slots; the blocks are free again */
    uint32_t freed;
    size_t ns;
    OK(rkv_tree_evict_slots(g_tree, t, 4, NULL, 0, &freed, &ns));
    cr_assert(freed == 4 && ns == 0 && rkv_slot_table_count(t) == 0);
    cr_assert_eq(rkv_pool_num_free(g_pool), 16);
    CHECK();
    rkv_slot_table_destroy(t);
}

Test(slots, match_reads_pages_cached_around_the_table_as_minus_one)
{
    rkv_slot_table *t;
    OK(rkv_slot_table_create(g_pool, 0, &t));
    int32_t k[8];
    tf_cache_seq(0, k, 8, 0); /* the plain insert: the table knows nothing */
    int64_t got[8];
    rkv_match m;
    OK(rkv_tree_match_slots(g_tree, t, 0, k, 8, 0, got, &m));
    cr_assert_eq(m.matched_tokens, 8);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(got[i], -1);
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match_slots(g_tree, t, 0, k, 8, 0, NULL, &m));
    rkv_slot_table_destroy(t);
}

Test(slots, a_table_of_another_pool_is_refused)
{
    rkv_pool *other = tu_pool(16, 4);
    rkv_slot_table *t;
    OK(rkv_slot_table_create(other, 0, &t));
    int32_t k[4] = {1, 2, 3, 4};
    int64_t s[4] = {0, 1, 2, 3};
    rkv_match m;
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_match_slots(g_tree, t, 0, k, 4, 0, s, &m));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, t, 0, k, 4, s, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_evict_slots(g_tree, t, 1, NULL, 0, NULL, NULL));
    ERR(RKV_ERR_INVALID_ARG, rkv_tree_insert_slots(g_tree, NULL, 0, k, 4, s, NULL));
    cr_assert_eq(stat_cached(), 0);
    rkv_slot_table_destroy(t);
    rkv_pool_destroy(other);
}

Test(slots, counted_locks_report_the_pages_they_move)
{
    int32_t a[12], b[12];
    tf_cache_seq(0, a, 12, 0);
    memcpy(b, a, sizeof a);
    b[8] = 999;
    tf_insert_free(0, b, 12); /* a and b share two pages, then fork */
    rkv_match m;
    OK(rkv_tree_match(g_tree, 0, a, 12, NULL, 0, &m));
    rkv_lease l1, l2, l3;
    uint64_t moved;
    OK(rkv_tree_lock_counted(g_tree, m.node, &l1, &moved));
    cr_assert_eq(moved, 3);
    OK(rkv_tree_lock_counted(g_tree, m.node, &l2, &moved));
    cr_assert_eq(moved, 0, "already locked");
    OK(rkv_tree_match(g_tree, 0, b, 12, NULL, 0, &m));
    OK(rkv_tree_lock_counted(g_tree, m.node, &l3, &moved));
    cr_assert_eq(moved, 1, "only b's own page");
    OK(rkv_tree_unlock_counted(g_tree, &l1, &moved));
    cr_assert_eq(moved, 0);
    OK(rkv_tree_unlock_counted(g_tree, &l2, &moved));
    cr_assert_eq(moved, 1, "a's own page; the shared two stay locked by b");
    OK(rkv_tree_unlock_counted(g_tree, &l3, &moved));
    cr_assert_eq(moved, 3);
    ERR(RKV_ERR_STATE, rkv_tree_unlock_counted(g_tree, &l3, &moved));
    cr_assert_eq(moved, 0);
    rkv_node stale = {12345, 1};
    ERR(RKV_ERR_STALE_HANDLE, rkv_tree_lock_counted(g_tree, stale, &l1, &moved));
    cr_assert_eq(moved, 0);
    CHECK();
}

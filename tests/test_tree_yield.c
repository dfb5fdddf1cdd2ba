/*
 * tests/test_tree_yield.c -- rkv_tree_pins_yieldable is a counter the tree
 * keeps (retain/pins.c yield_blocks): its value follows locks, pins,
 * splits, expiry, release and revocation exactly (a hand-checked
 * scenario), and rkv_tree_check recomputes it after every operation of a
 * random sequence of inserts, locks, pins, releases, time and
 * allocations under pressure (an O(nodes) scan against the counter).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/check.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"


static rkv_pool *pool;
static rkv_tree *tree;

static void make(uint32_t blocks, uint32_t page, uint32_t pct)
{
    pool = tu_pool(blocks, page);
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.max_pinned_pct = pct;
    tree = tu_tree(pool, &tc);
}

static void done(void)
{
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
    tree = NULL;
    pool = NULL;
}

static uint64_t yieldable(void)
{
    uint64_t y = 0;
    OK(rkv_tree_pins_yieldable(tree, &y));
    OK(rkv_tree_check(tree));
    return y;
}

static void insert(const int32_t *tok, size_t n)
{
    uint32_t np = (uint32_t)(n / rkv_pool_page_size(pool));
    rkv_block_id b[64];
    OK(rkv_tree_alloc_blocks(tree, np, b));
    OK(rkv_tree_insert(tree, 0, tok, n, b, NULL, NULL));
    OK(rkv_pool_unref_n(pool, np, b));
    OK(rkv_tree_check(tree));
}

static void pin(const int32_t *tok, size_t n, uint64_t ttl, uint64_t owner,
                uint64_t now)
{
    rkv_retention r = tu_pin(n, ttl, owner);
    OK(rkv_tree_retain(tree, 0, tok, n, &r, now, NULL));
}

static rkv_lease lock(const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(tree, 0, tok, n, NULL, 0, &m));
    rkv_lease l;
    OK(rkv_tree_lock(tree, m.node, &l));
    return l;
}

Test(yield, follows_locks_pins_and_splits, .fini = done)
{
    make(16, 4, 100);
    int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t b[8] = {1, 2, 3, 4, 9, 9, 9, 9}; /* shares a's first page */
    insert(a, 8);
    cr_assert_eq(yieldable(), 0, "no pin");
    pin(a, 8, 1000, 7, 10);
    cr_assert_eq(yieldable(), 2, "both pages only pinned");
    rkv_lease la = lock(a, 8);
    cr_assert_eq(yieldable(), 0, "a request also locks them");
    OK(rkv_tree_unlock(tree, &la));
    cr_assert_eq(yieldable(), 2);
    insert(b, 8); /* splits a's node after its first page */
    cr_assert_eq(yieldable(), 2, "a split keeps the count");
    rkv_lease lb = lock(b, 8);
    cr_assert_eq(yieldable(), 1, "the shared page is locked by b's request");
    pin(b, 8, 1000, 8, 20);
    cr_assert_eq(yieldable(), 1, "b's pages are locked by its request too");
    OK(rkv_tree_unlock(tree, &lb));
    cr_assert_eq(yieldable(), 3, "a's two pages and b's own");
    uint32_t n = 0;
    OK(rkv_tree_pins_release(tree, 7, &n));
    cr_assert_eq(n, 1);
    cr_assert_eq(yieldable(), 2, "b's pin holds the shared page and its own");
    OK(rkv_tree_set_time(tree, 2000)); /* b's pin expires */
    cr_assert_eq(yieldable(), 0);
    /* revocation under pressure empties it too */
    pin(a, 8, 1000, 9, 2000);
    cr_assert_eq(yieldable(), 2);
    rkv_block_id got[16];
    OK(rkv_tree_alloc_blocks(tree, 16, got)); /* every block: pins revoked */
    cr_assert_eq(yieldable(), 0);
    OK(rkv_pool_unref_n(pool, 16, got));
}

/* Random operations; rkv_tree_check compares the counter with a scan
 * after each one. */
Test(yield, random_operations_keep_the_counter, .fini = done, .timeout = 120)
{
    uint64_t seed = rkv_test_seed("yield.random");
    make(48, 2, 60);
    enum { SEQS = 12, LEN = 12, LEASES = 8 };
    int32_t seqs[SEQS][LEN];
    uint64_t s = seed;
    for (int i = 0; i < SEQS; i++)
        for (int j = 0; j < LEN; j++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            /* a small alphabet near the root: shared prefixes, splits */
            seqs[i][j] = j < 4 ? (int32_t)((s >> 33) % 2) : (int32_t)((s >> 33) % 50);
        }
    rkv_lease leases[LEASES];
    memset(leases, 0, sizeof leases);
    uint64_t now = 0;
    for (int it = 0; it < 4000; it++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t r = (uint32_t)(s >> 33);
        int q = (int)(r % SEQS);
        size_t n = 2 * (1 + (r >> 8) % (LEN / 2));
        switch ((r >> 4) % 7) {
        case 0:
        case 1: {
            uint32_t np = (uint32_t)(n / 2);
            rkv_block_id b[LEN];
            if (rkv_tree_alloc_blocks(tree, np, b) == RKV_OK) {
                OK(rkv_tree_insert(tree, 0, seqs[q], n, b, NULL, NULL));
                OK(rkv_pool_unref_n(pool, np, b));
            }
            break;
        }
        case 2: {
            int k = (int)((r >> 12) % LEASES);
            if (leases[k].id) {
                OK(rkv_tree_unlock(tree, &leases[k]));
            } else {
                rkv_match m;
                OK(rkv_tree_match(tree, 0, seqs[q], n, NULL, 0, &m));
                if (m.num_blocks)
                    OK(rkv_tree_lock(tree, m.node, &leases[k]));
            }
            break;
        }
        case 3: {
            rkv_retention ret = tu_pin(n, 1 + (r >> 12) % 50, (r >> 20) % 4);
            rkv_status st = rkv_tree_retain(tree, 0, seqs[q], n, &ret, now, NULL);
            cr_assert(st == RKV_OK || st == RKV_ERR_PIN_CAP, "%s",
                      rkv_last_error());
            break;
        }
        case 4:
            OK(rkv_tree_pins_release(tree, (r >> 12) % 4, NULL));
            break;
        case 5:
            now += (r >> 12) % 8;
            OK(rkv_tree_set_time(tree, now));
            break;
        default: {
            /* pressure: ask for what free + evictable + yieldable can give */
            uint64_t y = 0;
            OK(rkv_tree_pins_yieldable(tree, &y));
            rkv_tree_stats ts;
            OK(rkv_tree_get_stats(tree, &ts));
            uint64_t can = rkv_pool_num_free(pool) + ts.evictable_blocks + y;
            uint32_t want = (uint32_t)(can < 6 ? can : 6);
            rkv_block_id b[6];
            if (want && rkv_tree_alloc_blocks(tree, want, b) == RKV_OK)
                OK(rkv_pool_unref_n(pool, want, b));
            break;
        }
        }
        OK(rkv_tree_check(tree));
    }
    for (int k = 0; k < LEASES; k++)
        if (leases[k].id)
            OK(rkv_tree_unlock(tree, &leases[k]));
    yieldable();
}

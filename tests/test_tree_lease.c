/*
 * tests/test_tree_lease.c -- what a lease guards against (radix/
 * tree_lease.c, include/radixkv.h "Locks are owned"): a value that is not
 * a held lease of this tree is refused -- guessed, derived from a lease the
 * caller holds, or from another tree -- and the lock it would name stays.
 *
 * The attack of the first test is the one the old design fell to: ids were
 * a public bijection of (gen << 24 | slot) XOR a per-tree key, so one held
 * lease gave the key (a guess of its small slot and generation) and with
 * it every other lease. It is reproduced here with that bijection's
 * published constants; it must get nowhere now.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radix/tree_core.h"
#include "radix/tree_lease.h"
#include "radixkv.h"
#include "tests/support/tree_fixture.h"

static void setup(void) { tf_open(64, 4, NULL); }

TestSuite(lease, .init = setup, .fini = tf_close);

/* The cipher is Speck64/128 (its published vector), keyed per tree from
 * the OS (getrandom works wherever the tests run). */
Test(lease, ids_are_enciphered_with_a_random_key)
{
    cr_assert(rkv_lease_cipher_selftest());
    cr_assert(g_tree->lease_key_random, "no key from getrandom");
}

/* A cached path of 2 pages; its node. */
static rkv_node cached_path(int32_t base)
{
    int32_t tok[8];
    for (int i = 0; i < 8; i++)
        tok[i] = base + i;
    rkv_block_id b[2];
    OK(rkv_pool_alloc_n(g_pool, 2, b));
    rkv_insert_result r;
    OK(rkv_tree_insert(g_tree, 1, tok, 8, b, NULL, &r));
    OK(rkv_pool_unref_n(g_pool, 2, b));
    return r.node;
}

static uint64_t locked_blocks(void)
{
    rkv_tree_stats s;
    OK(rkv_tree_get_stats(g_tree, &s));
    return s.locked_blocks;
}

/* the old design's public bijection (its inverse and forward map) */
static uint64_t old_unscramble(uint64_t x)
{
    x ^= x >> 32;
    x *= UINT64_C(0x319642B2D24D8EC3);
    x ^= x >> 32;
    return x * UINT64_C(0x96DE1B173F119089);
}

static uint64_t old_scramble(uint64_t x)
{
    x *= UINT64_C(0xBF58476D1CE4E5B9);
    x ^= x >> 32;
    x *= UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 32);
}

/* Tries to release id; 1 if the tree took it as a held lease. */
static int tried(uint64_t id)
{
    rkv_lease f = {id};
    rkv_status st = rkv_tree_unlock(g_tree, &f);
    cr_assert(st == RKV_OK || st == RKV_ERR_STATE, "%s", rkv_last_error());
    return st == RKV_OK;
}

/* The scheduler holds a lease on one path; the caller holds one lease of
 * its own. Every key guessed from the caller's lease (slot < 64, gen < 8)
 * and every lease forged with it (the same ranges) is refused: the
 * scheduler's path stays locked. (The old design released it.) */
Test(lease, one_held_lease_does_not_give_the_others)
{
    rkv_node theirs_node = cached_path(100);
    rkv_node mine_node = cached_path(200);
    rkv_lease theirs, mine;
    OK(rkv_tree_lock(g_tree, theirs_node, &theirs));
    OK(rkv_tree_lock(g_tree, mine_node, &mine));
    cr_assert_eq(locked_blocks(), 4);
    uint64_t accepted = 0;
    for (uint64_t gen = 1; gen < 8; gen++) {
        for (uint64_t slot = 0; slot < 64; slot++) {
            uint64_t key = old_unscramble(mine.id) ^ (gen << 24 | slot);
            for (uint64_t g2 = 1; g2 < 8; g2++)
                for (uint64_t s2 = 0; s2 < 64; s2++) {
                    uint64_t id = old_scramble((g2 << 24 | s2) ^ key);
                    if (id != mine.id)
                        accepted += (uint64_t)tried(id);
                }
        }
    }
    cr_assert_eq(accepted, 0, "%llu forged leases were taken",
                 (unsigned long long)accepted);
    cr_assert_eq(locked_blocks(), 4, "a forged lease released a lock");
    OK(rkv_tree_check(g_tree));
    OK(rkv_tree_unlock(g_tree, &theirs));
    OK(rkv_tree_unlock(g_tree, &mine));
    cr_assert_eq(locked_blocks(), 0);
}

/* splitmix64: the test's own stream of guesses */
static uint64_t next_guess(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* With 4096 leases held, a guess names one with probability 4096 / 2^64 =
 * 2^-52 (the header's promise): 2^18 random values, and 2^18 values near
 * held ids (bit flips, small differences, xors of two held ids), are all
 * refused -- the expected count of accepted guesses is 2^-33. */
Test(lease, guessed_values_are_refused)
{
    enum { HELD = 4096 };
    rkv_node n = cached_path(300);
    rkv_lease *held = malloc(HELD * sizeof *held);
    uint64_t *ids = malloc(HELD * sizeof *ids);
    cr_assert(held && ids);
    for (int i = 0; i < HELD; i++) {
        OK(rkv_tree_lock(g_tree, n, &held[i]));
        ids[i] = held[i].id;
    }
    qsort(ids, HELD, sizeof *ids, cmp_u64);
    uint64_t s = 42, accepted = 0;
    for (int i = 0; i < (1 << 18); i++)
        accepted += (uint64_t)tried(next_guess(&s));
    for (int i = 0; i < (1 << 18); i++) {
        uint64_t r = next_guess(&s);
        uint64_t a = held[r % HELD].id, b = held[(r >> 20) % HELD].id;
        uint64_t id;
        switch ((r >> 40) % 4) {
        case 0: id = a ^ (UINT64_C(1) << ((r >> 50) % 64)); break;
        case 1: id = a + ((r >> 50) % 2048) - 1024; break;
        case 2: id = a ^ b ^ held[(r >> 32) % HELD].id; break;
        default: id = a ^ ((r >> 44) & 0xffffff); break;
        }
        if (!bsearch(&id, ids, HELD, sizeof *ids, cmp_u64))
            accepted += (uint64_t)tried(id);
    }
    cr_assert_eq(accepted, 0, "%llu guessed leases were taken",
                 (unsigned long long)accepted);
    cr_assert_eq(locked_blocks(), 2);
    for (int i = 0; i < HELD; i++)
        OK(rkv_tree_unlock(g_tree, &held[i]));
    free(held);
    free(ids);
}

/* A lease of a destroyed tree is refused by the next tree made on the same
 * pool (likely at the same address) and its lock is not released. */
Test(lease, a_lease_of_an_earlier_tree_is_refused)
{
    rkv_node n = cached_path(400);
    rkv_lease old;
    OK(rkv_tree_lock(g_tree, n, &old));
    rkv_tree_destroy(g_tree);
    OK(rkv_tree_create(g_pool, NULL, &g_tree));
    n = cached_path(400);
    rkv_lease now;
    OK(rkv_tree_lock(g_tree, n, &now));
    ERR(RKV_ERR_STATE, rkv_tree_unlock(g_tree, &old));
    cr_assert_eq(locked_blocks(), 2);
    OK(rkv_tree_unlock(g_tree, &now));
}

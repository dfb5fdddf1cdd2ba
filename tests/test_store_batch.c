/*
 * tests/test_store_batch.c -- the batched block copies between a pool and
 * a store (tier/store.h rkv_store_write_from_pool_n / _read_to_pool_n over
 * alloc/pool_copy.h rkv_pool_copy_pairs) on a host pool: the bytes of
 * every block arrive; a failure at any injection point (a slot's checks,
 * the batched copy, a record) returns its status and leaves exactly the
 * slots before it written, the rest allocated but empty, the pool and the
 * store consistent; bad arguments change nothing.
 *
 * Expected bytes come from the test's own buffers; rkv_store_check and
 * rkv_pool_check run after every call.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_copy.h"
#include "support/handles.h"
#include "support/kv_pool.h"
#include "tier/store.h"
#include "radixkv.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define N 5u

typedef struct env {
    rkv_pool *pool;
    rkv_store *s;
    size_t bb;
    rkv_block_id b[2 * N];
    uint32_t slot[N];
    uint64_t hash[N];
    unsigned char *want; /* N blocks */
} env;

static void fill(const env *e, uint32_t i, unsigned char *out)
{
    for (size_t j = 0; j < e->bb; j++)
        out[j] = (unsigned char)(i * 37 + j * 11 + (j >> 8));
}

/* A host pool of 2N blocks, the first N holding known bytes; a host store
 * with N allocated slots. */
static void setup(env *e)
{
    memset(e, 0, sizeof *e);
    rkv_pool_config cfg;
    rkv_test_kv_pool_config(&cfg, 2 * N, 2);
    OK(rkv_pool_create(&cfg, &e->pool));
    e->bb = rkv_pool_bytes_per_block(e->pool);
    e->want = malloc(N * e->bb);
    cr_assert(e->want != NULL);
    OK(rkv_pool_alloc_n(e->pool, 2 * N, e->b));
    for (uint32_t i = 0; i < N; i++) {
        fill(e, i, e->want + i * e->bb);
        OK(rkv_pool_copy_from_host(e->pool, 1, &e->b[i], e->want + i * e->bb));
        e->hash[i] = 0x1000 + i;
    }
    rkv_store_config sc = tu_store_config(RKV_MEDIUM_HOST, 16, e->bb, NULL);
    OK(rkv_store_create(&sc, &e->s));
    for (uint32_t i = 0; i < N; i++)
        OK(rkv_store_slot_alloc(e->s, &e->slot[i]));
}

static void teardown(env *e)
{
    OK(rkv_pool_unref_n(e->pool, 2 * N, e->b));
    rkv_store_destroy(e->s);
    rkv_pool_destroy(e->pool);
    free(e->want);
}

static void check(const env *e)
{
    OK(rkv_store_check(e->s));
    OK(rkv_pool_check(e->pool));
    cr_assert_eq(rkv_store_free_slots(e->s), 16 - N, "no slot freed or taken");
}

/* Slots 0..done-1 hold their block, the others nothing. */
static void holds(const env *e, uint32_t done)
{
    for (uint32_t i = 0; i < N; i++)
        cr_assert_eq(rkv_store_slot_holds(e->s, e->slot[i], e->hash[i], 7), i < done,
                     "slot of block %u: holds %d, %u written", i,
                     rkv_store_slot_holds(e->s, e->slot[i], e->hash[i], 7), done);
}

/* Reads the N slots back into blocks N..2N-1 (one batched call) and
 * compares their bytes with what was written. */
static void read_back(env *e)
{
    uint32_t bad = 99;
    OK(rkv_store_read_to_pool_n(e->s, N, e->slot, e->pool, e->b + N, e->hash, 7, NULL,
                                &bad));
    cr_assert_eq(bad, N);
    unsigned char *got = malloc(e->bb);
    cr_assert(got != NULL);
    for (uint32_t i = 0; i < N; i++) {
        OK(rkv_pool_copy_to_host(e->pool, 1, &e->b[N + i], got));
        cr_assert(memcmp(got, e->want + i * e->bb, e->bb) == 0, "block %u: wrong bytes", i);
    }
    free(got);
}

Test(store_batch, write_then_read_moves_every_block)
{
    env e;
    setup(&e);
    uint32_t done = 0;
    OK(rkv_store_write_from_pool_n(e.s, N, e.slot, e.pool, e.b, e.hash, 7, NULL, &done));
    cr_assert_eq(done, N);
    check(&e);
    holds(&e, N);
    read_back(&e);
    check(&e);
    teardown(&e);
}

/* Injection points of a write of N: N slot checks ("pool copy"), then N
 * records ("commit"). At check k (1-based) the k-1 before it are written;
 * at record j the j-1 before it are. Either way the status is the
 * injected RKV_ERR_IO and the rest hold nothing. */
Test(store_batch, write_fails_at_every_point_and_keeps_state)
{
    for (uint32_t k = 1; k <= 2 * N; k++) {
        env e;
        setup(&e);
        rkv_store_fail_after(e.s, k);
        uint32_t done = 99;
        rkv_status st =
            rkv_store_write_from_pool_n(e.s, N, e.slot, e.pool, e.b, e.hash, 7, NULL, &done);
        cr_assert_eq(st, RKV_ERR_IO, "point %u: %d (%s)", k, st, rkv_last_error());
        cr_assert(strstr(rkv_last_error(), "injected") != NULL, "point %u: %s", k,
                  rkv_last_error());
        uint32_t want = k <= N ? k - 1 : k - N - 1;
        cr_assert_eq(done, want, "point %u: %u written", k, done);
        check(&e);
        holds(&e, done);
        /* again without a fault: everything arrives */
        OK(rkv_store_write_from_pool_n(e.s, N, e.slot, e.pool, e.b, e.hash, 7, NULL, &done));
        holds(&e, N);
        read_back(&e);
        teardown(&e);
    }
}

/* A read names the wrong record for block 2: RKV_ERR_CORRUPT, *bad = 2,
 * the store unchanged (the records still readable). */
Test(store_batch, read_stops_at_a_record_that_does_not_verify)
{
    env e;
    setup(&e);
    uint32_t done = 0, bad = 0;
    OK(rkv_store_write_from_pool_n(e.s, N, e.slot, e.pool, e.b, e.hash, 7, NULL, &done));
    uint64_t h[N];
    memcpy(h, e.hash, sizeof h);
    h[2] ^= 1;
    cr_assert_eq(rkv_store_read_to_pool_n(e.s, N, e.slot, e.pool, e.b + N, h, 7, NULL, &bad),
                 RKV_ERR_CORRUPT);
    cr_assert_eq(bad, 2);
    check(&e);
    holds(&e, N);
    read_back(&e);
    teardown(&e);
}

/* More than RKV_STORE_BATCH, an unallocated block, a block listed twice
 * as a destination: refused, nothing written. */
Test(store_batch, bad_arguments_change_nothing)
{
    env e;
    setup(&e);
    uint32_t done = 99;
    cr_assert_eq(rkv_store_write_from_pool_n(e.s, RKV_STORE_BATCH + 1, e.slot, e.pool, e.b,
                                             e.hash, 7, NULL, &done),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(done, 0);
    check(&e);
    holds(&e, 0);
    /* the pool-level call: an unallocated block, a duplicate destination */
    rkv_block_id ids[2] = {e.b[0], 2 * N + 5};
    void *host[2] = {e.want, e.want + e.bb};
    unsigned char *copy = malloc(2 * e.bb);
    cr_assert(copy != NULL);
    memcpy(copy, e.want, 2 * e.bb);
    cr_assert_eq(rkv_pool_copy_pairs(e.pool, NULL, 2, ids, host, 1), RKV_ERR_INVALID_ARG);
    cr_assert(memcmp(copy, e.want, 2 * e.bb) == 0, "nothing copied");
    ids[1] = e.b[0];
    cr_assert_eq(rkv_pool_copy_pairs(e.pool, NULL, 2, ids, host, 0), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "twice") != NULL, "%s", rkv_last_error());
    free(copy);
    check(&e);
    teardown(&e);
}

/*
 * tests/test_tree_store_log.c -- the tree's store log (issue 12,
 * rkv_tree_store_log_* in radixkv.h; events/store_log.c): off by
 * default, the records of queued (write-through) stores with their source
 * device blocks, demotions' records (done), the host's writes to the disk
 * (no device block), bounded (a full log counts what it drops), partial
 * and full clears. rkv_tree_check after every tree operation.
 */
#include <criterion/criterion.h>

#include "radixkv.h"
#include "tests/support/tree_tier_fixture.h"

#define TP 4u

#define OKT(x) cr_assert_eq((x), RKV_OK, "%s: %s", #x, rkv_last_error())

typedef tt_fixture lenv; /* pool, tree, host (and disk) stores */

/* A 16-block F32 pool, a host of host_blocks, a buffered disk of
 * disk_blocks (0: none) below it, the write policy `policy`. */
static void lsetup(lenv *e, uint32_t host_blocks, uint32_t disk_blocks,
                   int policy)
{
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.write_policy = policy;
    tt_open(e, &(tt_spec){.pool_blocks = 16, .page_size = TP,
                          .dtype = RKV_DTYPE_F32, .host_blocks = host_blocks,
                          .disk_blocks = disk_blocks, .disk_buffered = 1,
                          .tier = &tc});
    OKT(rkv_tree_check(e->tree));
}

/* Caches n pages of tokens seeded by `seed`; their blocks in b[]. */
static void put(lenv *e, uint32_t n, int32_t seed, rkv_block_id *b)
{
    int32_t tok[8 * TP];
    cr_assert_leq(n, 8);
    for (uint32_t i = 0; i < n * TP; i++)
        tok[i] = seed * 1000 + (int32_t)i + 1;
    OKT(tt_try_cache(e, 0, tok, n, b));
    OKT(rkv_tree_check(e->tree));
}

/* lsetup with the store log on at `capacity` records. */
static void lsetup_logged(lenv *e, uint32_t host_blocks, uint32_t disk_blocks,
                          int policy, uint32_t capacity)
{
    lsetup(e, host_blocks, disk_blocks, policy);
    OKT(rkv_tree_store_log_enable(e->tree, capacity));
}

/* An 8-block host, no disk, the log on at `capacity`; then n pages of
 * tokens seeded by `seed` cached, their blocks in b[]. */
static void lsetup_cached(lenv *e, int policy, uint32_t capacity, uint32_t n,
                          int32_t seed, rkv_block_id *b)
{
    lsetup_logged(e, 8, 0, policy, capacity);
    put(e, n, seed, b);
}

/* The log as it stands (it must be on). */
static rkv_store_log lread(const lenv *e)
{
    rkv_store_log lg;
    OKT(rkv_tree_store_log_read(e->tree, &lg));
    return lg;
}

/* Drops the log's first n records; the log after. */
static rkv_store_log lclear(lenv *e, uint32_t n)
{
    rkv_tree_store_log_clear(e->tree, n);
    return lread(e);
}

/* Evicts up to n pages from the device; how many were freed. */
static uint32_t levict(lenv *e, uint32_t n)
{
    uint32_t freed = 0;
    OKT(rkv_tree_evict(e->tree, n, &freed));
    OKT(rkv_tree_check(e->tree));
    return freed;
}

static rkv_tier_stats ltier_stats(const lenv *e)
{
    rkv_tier_stats ts;
    OKT(rkv_tree_tier_stats(e->tree, &ts));
    return ts;
}

/* A record of a store from the device: its source block, and whether it
 * was queued (write-through) or made at once (a demotion). */
static void assert_from_device(const rkv_store_record *r, rkv_block_id block,
                               int queued)
{
    cr_assert_eq(r->block, block);
    cr_assert_eq(r->from, RKV_MEDIUM_DEVICE);
    cr_assert_eq(r->medium, RKV_MEDIUM_HOST);
    cr_assert_eq(r->queued, queued);
}

Test(store_log, off_by_default_and_ranges)
{
    lenv e;
    lsetup(&e, 8, 0, RKV_WRITE_THROUGH);
    rkv_store_log lg;
    cr_assert_eq(rkv_tree_store_log_read(e.tree, &lg), RKV_ERR_STATE);
    cr_assert_eq(lg.num_records, 0);
    cr_assert_eq(rkv_tree_store_log_enable(e.tree, (1u << 24) + 1),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_tree_store_log_enable(NULL, 4), RKV_ERR_INVALID_ARG);
    rkv_block_id b[2];
    put(&e, 2, 1, b); /* off: nothing recorded, nothing breaks */
    OKT(rkv_tree_store_log_enable(e.tree, 4));
    cr_assert_eq(lread(&e).num_records, 0);
    rkv_tree_store_log_clear(e.tree, 9); /* empty: fine */
    OKT(rkv_tree_store_log_enable(e.tree, 0));
    cr_assert_eq(rkv_tree_store_log_read(e.tree, &lg), RKV_ERR_STATE);
    rkv_tree_store_log_clear(e.tree, 1); /* off: nothing happens */
    tt_close(&e);
}

/* Write-through: one queued record per page, in insert order, naming the
 * page's device block and hash; a later eviction stores nothing more. */
Test(store_log, write_through_records_source_blocks)
{
    lenv e;
    rkv_block_id b[3];
    lsetup_cached(&e, RKV_WRITE_THROUGH, 16, 3, 2, b);
    rkv_store_log lg = lread(&e);
    cr_assert_eq(lg.num_records, 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_from_device(&lg.records[i], b[i], 1);
        cr_assert_neq(lg.records[i].hash, 0);
    }
    uint32_t n = 0;
    OKT(rkv_tree_tier_poll(e.tree, NULL, 0, &n));
    OKT(rkv_tree_check(e.tree));
    cr_assert_eq(levict(&e, 3), 3);
    lg = lread(&e);
    cr_assert_eq(lg.num_records, 3, "already on the host: no demotion store");
    /* partial clear keeps the newest, in order */
    rkv_block_id third = lg.records[2].block;
    lg = lclear(&e, 2);
    cr_assert_eq(lg.num_records, 1);
    cr_assert_eq(lg.records[0].block, third);
    cr_assert_eq(lclear(&e, 1).num_records, 0);
    tt_close(&e);
}

/* Write-back: demotions are recorded when made (queued 0), one per page
 * stored; a full log drops and counts the rest. */
/* A queued store's record stops saying "queued" once the store is taken:
 * at the poll, or early when an eviction meets it before the poll (then
 * its source block is freed in the same call: a reader must not take it as
 * still holding the page). */
Test(store_log, taken_stores_are_no_longer_queued)
{
    lenv e;
    rkv_block_id b[3];
    lsetup_cached(&e, RKV_WRITE_THROUGH, 16, 3, 4, b);
    cr_assert_eq(levict(&e, 3), 3, "the demotions run the queued stores");
    rkv_store_log lg = lread(&e);
    cr_assert_eq(lg.num_records, 3, "no second record for a store run early");
    for (uint32_t i = 0; i < 3; i++)
        assert_from_device(&lg.records[i], b[i], 0);
    cr_assert_eq(ltier_stats(&e).stores_blocks[RKV_MEDIUM_HOST], 3);
    tt_close(&e);

    lsetup_cached(&e, RKV_WRITE_THROUGH, 16, 3, 5, b);
    uint32_t n = 0;
    OKT(rkv_tree_tier_poll(e.tree, NULL, 0, &n));
    OKT(rkv_tree_check(e.tree));
    lg = lread(&e);
    cr_assert_eq(lg.num_records, 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_from_device(&lg.records[i], b[i], 0);
    tt_close(&e);
}

Test(store_log, demotions_recorded_and_bounded)
{
    lenv e;
    rkv_block_id b[4];
    lsetup_cached(&e, RKV_WRITE_BACK, 2, 4, 3, b);
    cr_assert_eq(lread(&e).num_records, 0,
                 "write-back stores nothing at insert");
    levict(&e, 4);
    cr_assert_eq(ltier_stats(&e).stores_blocks[RKV_MEDIUM_HOST], 4);
    rkv_store_log lg = lread(&e);
    cr_assert_eq(lg.num_records, 2);
    cr_assert_eq(lg.lost[RKV_MEDIUM_HOST], 2);
    for (uint32_t i = 0; i < 2; i++)
        assert_from_device(&lg.records[i], b[i], 0); /* in page order */
    lg = lclear(&e, 2);
    cr_assert_eq(lg.num_records + lg.lost[RKV_MEDIUM_HOST], 0);
    /* a new capacity starts empty */
    OKT(rkv_tree_store_log_enable(e.tree, 8));
    cr_assert_eq(lread(&e).num_records, 0);
    tt_close(&e);
}

/* Host over disk: the host's writes to the disk are recorded from the
 * host, without a device block; every store is recorded once. */
Test(store_log, host_to_disk_records)
{
    lenv e;
    lsetup_logged(&e, 2, 16, RKV_WRITE_BACK, 64);
    for (int32_t s = 0; s < 4; s++) {
        rkv_block_id b[2];
        put(&e, 2, 10 + s, b);
        levict(&e, 2);
    }
    rkv_tier_stats ts = ltier_stats(&e);
    cr_assert_gt(ts.stores_blocks[RKV_MEDIUM_DISK], 0);
    rkv_store_log lg = lread(&e);
    uint64_t dev = 0, disk = 0;
    for (uint32_t i = 0; i < lg.num_records; i++) {
        const rkv_store_record *r = &lg.records[i];
        if (r->from == RKV_MEDIUM_HOST) {
            cr_assert_eq(r->medium, RKV_MEDIUM_DISK);
            cr_assert_eq(r->block, RKV_NO_BLOCK);
            disk++;
        } else {
            cr_assert_eq(r->medium, RKV_MEDIUM_HOST);
            cr_assert_lt(r->block, 16);
            dev++;
        }
    }
    cr_assert_eq(dev, ts.stores_blocks[RKV_MEDIUM_HOST]);
    cr_assert_eq(disk, ts.stores_blocks[RKV_MEDIUM_DISK]);
    tt_close(&e);
}

/*
 * tests/test_router_budget.c -- the router index's memory budget
 * (rkv_router_config.max_entries / max_table_bytes): a store or snapshot
 * that does not fit is refused and counted, the instance that made it
 * resyncs (holds nothing), every other instance is untouched, entries
 * shared with other instances cost nothing more, and a flood of distinct
 * blocks never grows the table past max_table_bytes. rkv_router_check
 * after every step.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/router_util.h"

static rkv_router_stats stats(const rkv_router *r)
{
    rkv_router_stats s;
    cr_assert_eq(rkv_router_get_stats(r, &s), RKV_OK);
    return s;
}

static uint64_t hash_of(uint64_t k)
{
    return (k + 1) * 0x9E3779B97F4A7C15ull;
}

/* A STORED event of hashes k0..k0+n-1 chained under k0-1 (root for 0). */
static rkv_event chain(uint64_t seq, uint64_t k0, uint32_t n)
{
    uint64_t h[RKV_EVENT_MAX_HASHES];
    cr_assert_leq(n, RKV_EVENT_MAX_HASHES);
    for (uint32_t i = 0; i < n; i++)
        h[i] = hash_of(k0 + i);
    return rt_event(seq, RKV_EVENT_BLOCK_STORED, 16,
                    k0 ? hash_of(k0 - 1) : RKV_HASH_ROOT, h, n);
}

static int needs_resync(const rkv_router *r, uint64_t id)
{
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, id, &in), RKV_OK);
    return in.needs_resync;
}

static rkv_router *mk(uint64_t max_entries, uint64_t max_table_bytes)
{
    rkv_router_config c;
    rkv_router_config_init(&c);
    c.max_entries = max_entries;
    c.max_table_bytes = max_table_bytes;
    return rt_mk_with(&c);
}

Test(router_budget, stores_past_the_budget_resync_their_instance_only)
{
    rkv_router *r = mk(100, 0);
    cr_assert_eq(stats(r).entries_limit, 100);
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 2), RKV_OK);
    /* instance 2: 40 blocks of its own (keys 1000..) */
    for (uint64_t k = 0; k < 40; k += 10) {
        rkv_event e = chain(k / 10 + 1, 1000 + k, 10);
        if (k == 0)
            e.parent_hash = RKV_HASH_ROOT;
        cr_assert_eq(rkv_router_apply(r, 2, &e, 1), RKV_OK);
    }
    /* instance 1: 60 fit, the 7th event of 10 does not */
    uint64_t seq = 0;
    for (uint64_t k = 0; k < 60; k += 10) {
        rkv_event e = chain(++seq, k, 10);
        cr_assert_eq(rkv_router_apply(r, 1, &e, 1), RKV_OK);
    }
    rt_ok(r);
    cr_assert_eq(stats(r).entries, 100);
    rkv_event more[2] = {chain(seq + 1, 60, 10), chain(seq + 2, 70, 10)};
    cr_assert_eq(rkv_router_apply(r, 1, more, 2), RKV_ERR_NO_SPACE);
    rt_ok(r);
    rkv_router_stats st = stats(r);
    cr_assert_eq(st.events_over_budget, 1);
    cr_assert_eq(st.events_skipped, 1, "the batch's rest is skipped");
    cr_assert(needs_resync(r, 1));
    cr_assert(!needs_resync(r, 2));
    cr_assert_eq(st.entries, 40, "instance 1 holds nothing, 2 all of its own");
    cr_assert(rkv_router_holds(r, 2, 0, hash_of(1039)));

    /* a snapshot larger than the room left is refused, nothing changes */
    rkv_block_entry b[120];
    memset(b, 0, sizeof b);
    for (uint32_t i = 0; i < 120; i++)
        b[i].hash = hash_of(i);
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, b, 61, 9), RKV_ERR_NO_SPACE);
    rt_ok(r);
    st = stats(r);
    cr_assert_eq(st.snapshots_over_budget, 1);
    cr_assert_eq(st.entries, 40);
    cr_assert(needs_resync(r, 1));
    /* one that fits applies; blocks 2 also holds share its entries */
    for (uint32_t i = 0; i < 40; i++)
        b[60 + i].hash = hash_of(1000 + i);
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, b, 100, 9), RKV_OK, "%s",
                 rkv_last_error());
    rt_ok(r);
    cr_assert_eq(stats(r).entries, 100);
    cr_assert(!needs_resync(r, 1));
    /* and the chunked protocol refuses the same way, chunk by chunk */
    cr_assert_eq(rkv_router_remove_instance(r, 1), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_begin(r, 1, 3), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, b, 50), RKV_OK);
    rkv_block_entry d[20];
    memset(d, 0, sizeof d);
    for (uint32_t i = 0; i < 20; i++)
        d[i].hash = hash_of(5000 + i);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, d, 20), RKV_ERR_NO_SPACE);
    rt_ok(r);
    cr_assert_eq(stats(r).entries, 90, "the refused chunk added nothing");
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, d, 10), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_end(r, 1), RKV_OK);
    rt_ok(r);
    cr_assert_eq(stats(r).snapshots_over_budget, 2);
    rkv_router_destroy(r);
}

Test(router_budget, a_flood_never_grows_the_table_past_max_table_bytes)
{
    const uint64_t budget = 1u << 20;
    rkv_router *r = mk(0, budget);
    rkv_router_stats st0 = stats(r);
    cr_assert_eq(st0.entries_limit, budget / 16 / 2); /* 16-byte entries, load <= 1/2 */
    uint64_t fixed = st0.host_bytes - 64 * 16; /* all but the initial table */
    cr_assert_eq(rkv_router_add_instance(r, 7), RKV_OK);
    uint64_t refused = 0, seq = 0;
    /* 100000 distinct blocks, 16 per event, each chain from the root so a
     * resynced instance takes stores again at once */
    for (uint64_t k = 0; k < 100000; k += 16) {
        rkv_event e = chain(++seq, k, 16);
        e.parent_hash = RKV_HASH_ROOT;
        rkv_status s = rkv_router_apply(r, 7, &e, 1);
        cr_assert(s == RKV_OK || s == RKV_ERR_NO_SPACE);
        if (s == RKV_ERR_NO_SPACE) {
            refused++;
            /* what the daemon does: a snapshot (empty here) after the refusal */
            cr_assert_eq(rkv_router_apply_snapshot(r, 7, NULL, 0, seq), RKV_OK);
        }
        cr_assert_leq(stats(r).host_bytes, fixed + budget);
    }
    rt_ok(r);
    rkv_router_stats st = stats(r);
    cr_assert_gt(refused, 0);
    cr_assert_eq(st.events_over_budget, refused);
    cr_assert_leq(st.entries, st.entries_limit);
    rkv_router_destroy(r);
}

/* A budget past the largest power of two that fits it: the table grows by
 * doubling, then to an exact size, then by half up to the budget (three
 * kinds of rehash), and every block stored before each growth is still
 * found after it. */
Test(router_budget, an_exactly_sized_table_grows_in_steps_and_keeps_every_block)
{
    const uint64_t budget = 1000000; /* 62,500 entries; powers of two up to 32,768 */
    rkv_router *r = mk(0, budget);
    uint64_t fixed = stats(r).host_bytes - 64 * 16;
    cr_assert_eq(rkv_router_add_instance(r, 7), RKV_OK);
    uint64_t sizes[32], nsizes = 0, seq = 0, k = 0;
    for (; k + 16 <= 32000; k += 16) {
        rkv_event e = chain(++seq, k, 16);
        e.parent_hash = RKV_HASH_ROOT;
        cr_assert_eq(rkv_router_apply(r, 7, &e, 1), RKV_OK, "%llu", (unsigned long long)k);
        uint64_t b = stats(r).host_bytes - fixed;
        cr_assert_leq(b, budget);
        if (nsizes == 0 || sizes[nsizes - 1] != b) {
            cr_assert_lt(nsizes, 32);
            sizes[nsizes++] = b;
            rt_ok(r);
        }
    }
    rt_ok(r);
    /* the last two sizes are not powers of two: grown exactly, twice */
    cr_assert_geq(nsizes, 3);
    for (uint64_t i = nsizes - 2; i < nsizes; i++)
        cr_assert_neq(sizes[i] / 16 & (sizes[i] / 16 - 1), 0, "%llu", (unsigned long long)sizes[i]);
    for (uint64_t c = 0; c < k; c += 16) {
        uint64_t h[16];
        for (uint32_t i = 0; i < 16; i++)
            h[i] = hash_of(c + i);
        rkv_router_overlap o[1];
        uint32_t n = 0;
        cr_assert_eq(rkv_router_overlaps(r, 0, h, 16, o, 1, &n), RKV_OK);
        cr_assert_eq(n, 1);
        cr_assert_eq(o[0].pages, 16, "chain at %llu: %u pages", (unsigned long long)c,
                     o[0].pages);
    }
    rkv_router_destroy(r);
}

Test(router_budget, a_table_budget_below_the_smallest_table_is_refused)
{
    rkv_router_config c;
    rkv_router_config_init(&c);
    c.max_table_bytes = 100;
    rkv_router *r = NULL;
    cr_assert_eq(rkv_router_create(&c, &r), RKV_ERR_INVALID_ARG);
    cr_assert_null(r);
    cr_assert_str_neq(rkv_last_error(), "");
}

/*
 * tests/test_router_ingest.c -- rkv_router_apply on whole batches against
 * the same events applied one call each, and the table's size.
 *
 * A batch is applied with its lookups started ahead across events and a
 * store's parent taken as held when the event before it in the same call
 * stored it; one event per call does neither. Random streams (stores
 * chained or not, across two namespaces and three media, removals,
 * clears, resync markers, stale and out-of-sequence events, malformed
 * events) go to router A one event per call and to router B in random
 * batches; B's table starts smaller, so it grows through sizes that are
 * not powers of two and wraps probes at its end. After every batch both
 * must hold the same (instance, namespace, hash, medium) set, the same
 * per-instance state and counters, and pass rkv_router_check.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/router_util.h"

#define NH 48    /* hashes per namespace */
#define NSN 2    /* namespaces */
#define NI 70    /* instances: 1..70, two slot groups */
static const uint64_t ids[] = {1, 2, 65, 70}; /* the ones that get events */
#define NIDS (sizeof ids / sizeof ids[0])

static uint64_t hash_of(uint32_t k)
{
    return (k + 1) * 0x9E3779B97F4A7C15ull;
}

static uint64_t rng_state = 0x1234567;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static rkv_router *mk(uint32_t initial, uint64_t max_table_bytes)
{
    rkv_router_config c;
    rkv_router_config_init(&c);
    c.initial_blocks = initial;
    c.max_table_bytes = max_table_bytes;
    return rt_mk_with_instances(&c, NI);
}

/* A hash (index) that instance id holds in ns (on medium m; 3: any) or,
 * with want 0, does not hold on any medium, and not in used[0..n); -1 if
 * none. */
static int pick(const rkv_router *r, uint64_t id, uint64_t ns, uint32_t m,
                int want, const uint64_t *used, uint32_t n)
{
    uint32_t start = rnd(NH);
    for (uint32_t d = 0; d < NH; d++) {
        uint32_t k = (start + d) % NH;
        int h = m < 3 ? rkv_router_holds_medium(r, id, ns, hash_of(k), m)
                      : rkv_router_holds(r, id, ns, hash_of(k));
        int dup = 0;
        for (uint32_t i = 0; i < n; i++)
            dup |= used[i] == hash_of(k);
        if (h == want && !dup)
            return (int)k;
    }
    return -1;
}

/* One random event for instance id; *next is the seq it expects next
 * (from router A, which the generator reads to make stores that fit). */
static rkv_event gen(const rkv_router *a, uint64_t id, uint64_t *next,
                     const rkv_event *prev)
{
    rkv_event e;
    memset(&e, 0, sizeof e);
    e.page_size = 16;
    uint32_t c = rnd(100);
    e.seq = *next;
    if (c < 3 && e.seq > 1)
        e.seq = e.seq - 1 - rnd((uint32_t)(e.seq - 1)); /* stale */
    else if (c < 4)
        e.seq = e.seq + 1; /* a gap */
    if (e.seq >= *next)
        *next = e.seq + 1;
    e.ns = rnd(NSN);
    e.medium = (uint8_t)rnd(3);
    uint32_t k = rnd(200);
    if (k < 130) {
        e.kind = RKV_EVENT_BLOCK_STORED;
        uint32_t p = rnd(10);
        if (p < 5 && prev != NULL && prev->kind == RKV_EVENT_BLOCK_STORED &&
            prev->num_hashes > 0 && prev->num_hashes <= RKV_EVENT_MAX_HASHES) {
            /* chained under the previous event's last page, in its
             * namespace mostly, sometimes in the other one */
            e.parent_hash = prev->hashes[prev->num_hashes - 1];
            e.ns = rnd(16) ? prev->ns : prev->ns ^ 1;
        } else if (p < 9) {
            int h = pick(a, id, e.ns, 3, 1, NULL, 0);
            e.parent_hash = h < 0 ? RKV_HASH_ROOT : hash_of((uint32_t)h);
        } else {
            e.parent_hash = rnd(4) ? RKV_HASH_ROOT : hash_of(rnd(NH));
        }
        e.num_hashes = (uint16_t)rnd(RKV_EVENT_MAX_HASHES + 1);
        for (uint32_t j = 0; j < e.num_hashes; j++) {
            /* pages it does not hold yet, now and then one it does */
            int h = rnd(50) ? pick(a, id, e.ns, 3, 0, e.hashes, j) : -1;
            e.hashes[j] = hash_of(h < 0 ? rnd(NH) : (uint32_t)h);
        }
    } else if (k < 185) {
        e.kind = RKV_EVENT_BLOCK_REMOVED;
        e.num_hashes = (uint16_t)(1 + rnd(4));
        for (uint32_t j = 0; j < e.num_hashes; j++) {
            int h = rnd(50) ? pick(a, id, e.ns, e.medium, 1, e.hashes, j) : -1;
            e.hashes[j] = hash_of(h < 0 ? rnd(NH) : (uint32_t)h);
        }
    } else if (k < 190) {
        e.kind = RKV_EVENT_ALL_CLEARED;
    } else if (k < 192) {
        e.kind = RKV_EVENT_RESYNC;
    } else if (k < 195) { /* malformed: too many hashes, a bad medium */
        e.kind = RKV_EVENT_BLOCK_STORED;
        e.parent_hash = RKV_HASH_ROOT;
        e.num_hashes = rnd(2) ? RKV_EVENT_MAX_HASHES + 1 + rnd(100) : 1;
        if (e.num_hashes == 1)
            e.medium = (uint8_t)(3 + rnd(250));
        e.hashes[0] = hash_of(rnd(NH));
    } else {
        e.kind = RKV_EVENT_BLOCK_STORED; /* at the root, fresh pages */
        e.parent_hash = RKV_HASH_ROOT;
        e.num_hashes = (uint16_t)(1 + rnd(RKV_EVENT_MAX_HASHES));
        for (uint32_t j = 0; j < e.num_hashes; j++) {
            int h = pick(a, id, e.ns, 3, 0, e.hashes, j);
            e.hashes[j] = hash_of(h < 0 ? rnd(NH) : (uint32_t)h);
        }
    }
    return e;
}

static void same(const rkv_router *a, const rkv_router *b)
{
    rt_ok(a);
    rt_ok(b);
    rkv_router_stats sa, sb;
    cr_assert_eq(rkv_router_get_stats(a, &sa), RKV_OK);
    cr_assert_eq(rkv_router_get_stats(b, &sb), RKV_OK);
    cr_assert_eq(sa.entries, sb.entries);
    cr_assert_eq(sa.events_applied, sb.events_applied);
    cr_assert_eq(sa.events_stale, sb.events_stale);
    cr_assert_eq(sa.events_skipped, sb.events_skipped);
    cr_assert_eq(sa.events_bad, sb.events_bad);
    cr_assert_eq(sa.gaps, sb.gaps);
    cr_assert_eq(sa.resync_markers, sb.resync_markers);
    for (size_t i = 0; i < NIDS; i++) {
        rkv_router_instance_info ia, ib;
        cr_assert_eq(rkv_router_instance_info_get(a, ids[i], &ia), RKV_OK);
        cr_assert_eq(rkv_router_instance_info_get(b, ids[i], &ib), RKV_OK);
        cr_assert_eq(ia.last_seq, ib.last_seq);
        cr_assert_eq(ia.blocks, ib.blocks);
        cr_assert_eq(ia.needs_resync, ib.needs_resync);
        for (uint64_t ns = 0; ns < NSN; ns++)
            for (uint32_t k = 0; k < NH; k++)
                for (uint32_t m = 0; m < 3; m++)
                    cr_assert_eq(rkv_router_holds_medium(a, ids[i], ns,
                                                         hash_of(k), m),
                                 rkv_router_holds_medium(b, ids[i], ns,
                                                         hash_of(k), m),
                                 "instance %llu ns %llu hash %u medium %u",
                                 (unsigned long long)ids[i],
                                 (unsigned long long)ns, k, m);
    }
}

/* A (one event per call) and B (batches) from the same stream; B's table
 * starts smaller. */
static void differential(uint64_t max_table_bytes)
{
    rkv_router *a = mk(4096, max_table_bytes), *b = mk(50, max_table_bytes);
    uint64_t next[NIDS];
    for (size_t i = 0; i < NIDS; i++)
        next[i] = 1;
    uint64_t applied = 0, chained = 0;
    for (int round = 0; round < 2000; round++) {
        size_t w = rnd(NIDS);
        uint64_t id = ids[w];
        rkv_router_instance_info in;
        cr_assert_eq(rkv_router_instance_info_get(a, id, &in), RKV_OK);
        if (in.needs_resync) {
            /* what the daemon does: a snapshot (empty here) */
            cr_assert_eq(rkv_router_apply_snapshot(a, id, NULL, 0, next[w] - 1), RKV_OK);
            cr_assert_eq(rkv_router_apply_snapshot(b, id, NULL, 0, next[w] - 1), RKV_OK);
        }
        rkv_event ev[40];
        uint32_t n = 1 + rnd(40);
        int refused = 0; /* the budget refused one of A's events */
        /* A one event per call, each generated from A's state so far */
        for (uint32_t k = 0; k < n; k++) {
            ev[k] = gen(a, id, &next[w], k ? &ev[k - 1] : NULL);
            rkv_status st = rkv_router_apply(a, id, &ev[k], 1);
            cr_assert(st == RKV_OK || st == RKV_ERR_NO_SPACE);
            refused |= st == RKV_ERR_NO_SPACE;
            chained += k && ev[k].kind == RKV_EVENT_BLOCK_STORED &&
                       ev[k - 1].kind == RKV_EVENT_BLOCK_STORED &&
                       ev[k - 1].num_hashes > 0 &&
                       ev[k - 1].num_hashes <= RKV_EVENT_MAX_HASHES &&
                       ev[k].parent_hash == ev[k - 1].hashes[ev[k - 1].num_hashes - 1];
        }
        cr_assert_eq(rkv_router_apply(b, id, ev, n),
                     refused ? RKV_ERR_NO_SPACE : RKV_OK);
        same(a, b);
        rkv_router_stats s;
        cr_assert_eq(rkv_router_get_stats(a, &s), RKV_OK);
        applied = s.events_applied;
    }
    /* the streams reached the paths under test */
    cr_assert_gt(applied, 3000);
    cr_assert_gt(chained, 1000);
    rkv_router_stats s;
    cr_assert_eq(rkv_router_get_stats(b, &s), RKV_OK);
    cr_assert_gt(s.events_bad, 100);
    cr_assert_gt(s.events_stale, 100);
    cr_assert_eq(s.events_over_budget > 0, max_table_bytes > 0);
    rt_done(a);
    rt_done(b);
}

Test(router_ingest, a_batch_applies_as_its_events_one_call_each)
{
    differential(0); /* power-of-two tables, 128 to 8192 entries */
}

/* 2,000 bytes: 124 entries at most, not a power of two, so B's table
 * starts at 96 entries and grows to 124 (A's starts there), both homed
 * by a multiply, and the budget (65 entries) refuses some stores */
Test(router_ingest, a_batch_applies_as_its_events_one_call_each_in_a_bounded_table)
{
    differential(2000);
}

/* The shortcut for a store chained under the previous event's last page
 * holds only within that event's namespace: in another one the parent is
 * not held and the store resyncs the instance. */
Test(router_ingest, a_parent_stored_by_the_previous_event_counts_in_its_namespace_only)
{
    rkv_router *r = rt_mk_instances(1);
    uint64_t h1[2] = {hash_of(1), hash_of(2)}, h2[1] = {hash_of(3)};
    rkv_event ev[2];
    ev[0] = rt_event(1, RKV_EVENT_BLOCK_STORED, 16, RKV_HASH_ROOT, h1, 2);
    ev[1] = rt_event(2, RKV_EVENT_BLOCK_STORED, 16, hash_of(2), h2, 1);
    ev[1].ns = 5;
    cr_assert_eq(rkv_router_apply(r, 1, ev, 2), RKV_OK);
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, 1, &in), RKV_OK);
    cr_assert(in.needs_resync);
    cr_assert_eq(in.blocks, 0);
    rt_ok(r);
    /* in the same namespace it is held: both apply */
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, NULL, 0, 2), RKV_OK);
    ev[0].seq = 3;
    ev[1].seq = 4;
    ev[1].ns = 0;
    cr_assert_eq(rkv_router_apply(r, 1, ev, 2), RKV_OK);
    cr_assert_eq(rkv_router_instance_info_get(r, 1, &in), RKV_OK);
    cr_assert(!in.needs_resync);
    cr_assert_eq(in.blocks, 3);
    cr_assert(rkv_router_holds(r, 1, 0, hash_of(3)));
    rt_done(r);
}

/* A store whose parent the previous event removed is refused, however
 * the batch is cut. */
Test(router_ingest, a_parent_removed_by_the_previous_event_is_not_held)
{
    rkv_router *r = rt_mk_instances(1);
    uint64_t h1[2] = {hash_of(1), hash_of(2)}, h2[1] = {hash_of(3)};
    uint64_t gone[1] = {hash_of(2)};
    rkv_event ev[3];
    ev[0] = rt_event(1, RKV_EVENT_BLOCK_STORED, 16, RKV_HASH_ROOT, h1, 2);
    ev[1] = rt_event(2, RKV_EVENT_BLOCK_REMOVED, 16, 0, gone, 1);
    ev[2] = rt_event(3, RKV_EVENT_BLOCK_STORED, 16, hash_of(2), h2, 1);
    cr_assert_eq(rkv_router_apply(r, 1, ev, 3), RKV_OK);
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, 1, &in), RKV_OK);
    cr_assert(in.needs_resync);
    rt_done(r);
}

/* Past the bytes budget a power of two is not taken: the table holds
 * what it must at load <= 17/32, so a fleet of 1,024 instances of 1M
 * tokens (64M pages) fits 2e9 bytes. Checked at 1/64 of that (1M entries,
 * 2e9 / 64 bytes), the sizes scaled the same way; without a budget the
 * table is the power of two it always was. */
Test(router_ingest, a_table_held_to_its_bytes_budget_is_not_a_power_of_two)
{
    rkv_router_config c;
    rkv_router_config_init(&c);
    c.initial_blocks = 1000000;
    rkv_router *free_size = rt_mk_with(&c);
    c.max_table_bytes = 2000000000ull / 64;
    rkv_router *r = rt_mk_with(&c);
    rkv_router_config_init(&c);
    rkv_router *small = rt_mk_with(&c);
    rkv_router_stats s, s0, sf;
    cr_assert_eq(rkv_router_get_stats(r, &s), RKV_OK);
    cr_assert_eq(rkv_router_get_stats(small, &s0), RKV_OK);
    cr_assert_eq(rkv_router_get_stats(free_size, &sf), RKV_OK);
    uint64_t fixed = s0.host_bytes - 64 * 16; /* all but the table */
    cr_assert_eq(sf.host_bytes - fixed, (1u << 21) * 16);
    /* the smallest multiple of 4 entries with 17/32 of it >= 1M */
    uint64_t table = s.host_bytes - fixed;
    cr_assert_eq(table, 1882356 * 16);
    cr_assert_lt(64 * table + fixed, 2000000000ull);
    cr_assert_geq(s.entries_limit, 1000000);
    rkv_router_destroy(small);
    rkv_router_destroy(free_size);
    rt_done(r);
}

/* A batch that grows the table several times: the lookups started ahead
 * of each store were homed in the table before it grew. */
Test(router_ingest, a_batch_that_grows_the_table_finds_what_it_stored)
{
    rkv_router *r = rt_mk_instances(1);
    rkv_event ev[60];
    uint64_t parent = RKV_HASH_ROOT;
    for (uint32_t k = 0; k < 60; k++) {
        uint64_t h[RKV_EVENT_MAX_HASHES];
        for (uint32_t j = 0; j < RKV_EVENT_MAX_HASHES; j++)
            h[j] = hash_of(k * RKV_EVENT_MAX_HASHES + j);
        ev[k] = rt_event(k + 1, RKV_EVENT_BLOCK_STORED, 16, parent, h,
                         RKV_EVENT_MAX_HASHES);
        parent = h[RKV_EVENT_MAX_HASHES - 1];
    }
    cr_assert_eq(rkv_router_apply(r, 1, ev, 60), RKV_OK);
    rt_ok(r);
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, 1, &in), RKV_OK);
    cr_assert(!in.needs_resync);
    cr_assert_eq(in.blocks, 60 * RKV_EVENT_MAX_HASHES);
    for (uint32_t k = 0; k < 60 * RKV_EVENT_MAX_HASHES; k++)
        cr_assert(rkv_router_holds(r, 1, 0, hash_of(k)));
    rt_done(r);
}

/*
 * tests/test_router_snapshot.c -- snapshots into the router
 * (rkv_router_apply_snapshot, the chunked rkv_router_snapshot_begin /
 * _chunk / _end / _abort) and the tree's chunked snapshot
 * (rkv_tree_snapshot_chunk).
 *
 * - A refused snapshot (a block listed twice on one medium, a bad medium)
 *   leaves the instance exactly as it was: same blocks, same
 *   seq, same resync state (before the fix the instance was cleared).
 * - Chunked: queries see the old entries until end, then exactly the new
 *   ones; a bad chunk adds nothing (duplicates across chunks included);
 *   abort, restart, removal while staging, misuse; an instance whose
 *   staging slot is in another group (64 instances registered) moves
 *   there and still answers right.
 * - The tree's chunks, at random sizes, concatenate to rkv_tree_snapshot
 *   exactly (same seq, same total), across random tree operations; a tree
 *   changed between chunks is refused.
 * rkv_router_check after every router call.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/event_driver.h"
#include "tests/support/router_util.h"
#include "tests/support/test_util.h"

static rkv_router_instance_info info(const rkv_router *r, uint64_t id)
{
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, id, &in), RKV_OK);
    return in;
}

static uint64_t entries(const rkv_router *r)
{
    rkv_router_stats s;
    cr_assert_eq(rkv_router_get_stats(r, &s), RKV_OK);
    return s.entries;
}

/* n chained blocks of ns 0 starting at hash base, on medium m */
static void chain(rkv_block_entry *b, size_t n, uint64_t base, uint32_t m)
{
    for (size_t i = 0; i < n; i++) {
        b[i].ns = 0;
        b[i].hash = base + i;
        b[i].parent_hash = i == 0 ? RKV_HASH_ROOT : base + i - 1;
        b[i].medium = m;
        b[i].reserved = 0;
    }
}

Test(router_snapshot, refused_snapshot_changes_nothing)
{
    rkv_router *r = rt_mk_instances(2);
    rkv_block_entry old[3];
    chain(old, 3, 100, RKV_MEDIUM_DEVICE);
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, old, 3, 9), RKV_OK);
    rt_ok(r);
    /* a duplicate late in the array, after entries the old code had
     * already applied over a cleared instance */
    rkv_block_entry dup[5];
    chain(dup, 4, 500, RKV_MEDIUM_DEVICE);
    dup[4] = dup[1];
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, dup, 5, 20),
                 RKV_ERR_INVALID_ARG);
    rt_ok(r);
    rkv_router_instance_info in = info(r, 1);
    cr_assert_eq(in.blocks, 3, "the instance lost its entries");
    cr_assert_eq(in.last_seq, 9);
    cr_assert(!in.needs_resync);
    for (int i = 0; i < 3; i++)
        cr_assert(rkv_router_holds(r, 1, 0, 100 + (uint64_t)i));
    cr_assert(!rkv_router_holds(r, 1, 0, 500));
    cr_assert_eq(entries(r), 3);
    /* one hash in two namespaces is two blocks; listed twice in one
     * namespace (a later chunk of the array), a duplicate */
    rkv_block_entry two_ns[3];
    chain(two_ns, 3, 700, RKV_MEDIUM_DEVICE);
    two_ns[1].hash = 700;
    two_ns[1].parent_hash = RKV_HASH_ROOT;
    two_ns[1].ns = 5;
    two_ns[2].hash = 700;
    two_ns[2].parent_hash = RKV_HASH_ROOT;
    two_ns[2].ns = 5;
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, two_ns, 3, 21),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(info(r, 1).blocks, 3);
    cr_assert_eq(rkv_router_apply_snapshot(r, 2, two_ns, 2, 21), RKV_OK);
    cr_assert(rkv_router_holds(r, 2, 0, 700) && rkv_router_holds(r, 2, 5, 700));
    cr_assert(!rkv_router_holds(r, 2, 6, 700));
    cr_assert_eq(rkv_router_apply_snapshot(r, 2, NULL, 0, 22), RKV_OK);
    rkv_block_entry bad_m[2];
    chain(bad_m, 2, 800, RKV_MEDIUM_DEVICE);
    bad_m[1].medium = 9;
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, bad_m, 2, 21),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(info(r, 1).blocks, 3);
    rt_ok(r);
    /* a resyncing instance stays resyncing (and empty) after a refusal */
    rkv_event gap;
    memset(&gap, 0, sizeof gap);
    gap.seq = 50;
    gap.kind = RKV_EVENT_ALL_CLEARED;
    cr_assert_eq(rkv_router_apply(r, 1, &gap, 1), RKV_OK);
    cr_assert(info(r, 1).needs_resync);
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, dup, 5, 60),
                 RKV_ERR_INVALID_ARG);
    cr_assert(info(r, 1).needs_resync);
    cr_assert_eq(entries(r), 0);
    rt_ok(r);
    /* both media of one hash are two entries of the snapshot, not a dup */
    rkv_block_entry media[3];
    chain(media, 2, 900, RKV_MEDIUM_DEVICE);
    media[2] = media[1];
    media[2].medium = RKV_MEDIUM_HOST;
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, media, 3, 60), RKV_OK);
    cr_assert(rkv_router_holds_medium(r, 1, 0, 901, RKV_MEDIUM_DEVICE));
    cr_assert(rkv_router_holds_medium(r, 1, 0, 901, RKV_MEDIUM_HOST));
    cr_assert(!rkv_router_holds_medium(r, 1, 0, 900, RKV_MEDIUM_HOST));
    cr_assert(!rkv_router_holds_medium(r, 1, 0, 901, 7));
    cr_assert_eq(info(r, 1).blocks, 3);
    rt_done(r);
}

Test(router_snapshot, chunked)
{
    rkv_router *r = rt_mk_instances(2);
    rkv_block_entry old[4], nw[10];
    chain(old, 4, 100, RKV_MEDIUM_DEVICE);
    chain(nw, 10, 200, RKV_MEDIUM_DEVICE);
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, old, 4, 3), RKV_OK);
    cr_assert_eq(rkv_router_apply_snapshot(r, 2, nw, 10, 3), RKV_OK);
    /* misuse */
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, nw, 1), RKV_ERR_STATE);
    cr_assert_eq(rkv_router_snapshot_end(r, 1), RKV_ERR_STATE);
    cr_assert_eq(rkv_router_snapshot_begin(r, 77, 1), RKV_ERR_NOT_FOUND);
    cr_assert_eq(rkv_router_snapshot_begin(r, 1, 40), RKV_OK);
    rt_ok(r);
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, nw, 1, 40), RKV_ERR_STATE);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, nw, 4), RKV_OK);
    rt_ok(r);
    /* old entries still answer; staged ones are invisible */
    uint64_t q[4] = {100, 101, 102, 103}, qn[10];
    for (int i = 0; i < 10; i++)
        qn[i] = 200 + (uint64_t)i;
    rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES];
    uint32_t k;
    cr_assert_eq(rkv_router_overlaps(r, 0, q, 4, o, 8, &k), RKV_OK);
    cr_assert_eq(o[0].pages, 4);
    cr_assert_eq(rkv_router_overlaps(r, 0, qn, 10, o, 8, &k), RKV_OK);
    cr_assert_eq(o[0].pages, 0);
    cr_assert_eq(o[1].pages, 10);
    cr_assert_eq(info(r, 1).blocks, 4);
    /* a chunk with a duplicate across chunks: refused, adds nothing */
    rkv_block_entry bad[3] = {nw[4], nw[5], nw[2]};
    uint64_t e0 = entries(r);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, bad, 3), RKV_ERR_INVALID_ARG);
    cr_assert_eq(entries(r), e0);
    rt_ok(r);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, nw + 4, 6), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_end(r, 1), RKV_OK);
    rt_ok(r);
    rkv_router_instance_info in = info(r, 1);
    cr_assert_eq(in.blocks, 10);
    cr_assert_eq(in.last_seq, 40);
    cr_assert(!rkv_router_holds(r, 1, 0, 100));
    cr_assert_eq(rkv_router_overlaps(r, 0, qn, 10, o, 8, &k), RKV_OK);
    cr_assert_eq(o[0].pages, 10);
    cr_assert_eq(o[1].pages, 10);
    cr_assert_eq(entries(r), 10);
    /* the next event applies on top */
    rkv_event e = rt_event(41, RKV_EVENT_BLOCK_STORED, 0, 209,
                           (const uint64_t[]){210}, 1);
    cr_assert_eq(rkv_router_apply(r, 1, &e, 1), RKV_OK);
    cr_assert(rkv_router_holds(r, 1, 0, 210));
    /* abort, and begin twice (restart) */
    cr_assert_eq(rkv_router_snapshot_begin(r, 1, 50), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, old, 4), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_begin(r, 1, 50), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 1, old, 2), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_abort(r, 1), RKV_OK);
    rt_ok(r);
    cr_assert_eq(entries(r), 11);
    cr_assert_eq(info(r, 1).last_seq, 41);
    /* removal while staging */
    cr_assert_eq(rkv_router_snapshot_begin(r, 2, 60), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 2, old, 4), RKV_OK);
    cr_assert_eq(rkv_router_remove_instance(r, 2), RKV_OK);
    rt_ok(r);
    cr_assert_eq(entries(r), 11);
    /* an empty snapshot in chunks clears the instance */
    cr_assert_eq(rkv_router_snapshot_begin(r, 1, 70), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_end(r, 1), RKV_OK);
    cr_assert_eq(entries(r), 0);
    rt_done(r);
}

/* 64 instances fill group 0: the first snapshot's staging slot is in
 * group 1 and its instance (0) moves there at the end; later ones stage in
 * the slot it left and stay put. Queries see every instance right. */
Test(router_snapshot, staging_in_another_group)
{
    rkv_router *r = rt_mk();
    for (uint64_t i = 0; i < 64; i++)
        cr_assert_eq(rkv_router_add_instance(r, i), RKV_OK);
    rkv_block_entry b[6];
    chain(b, 6, 300, RKV_MEDIUM_DEVICE);
    for (uint64_t i = 0; i < 64; i++)
        cr_assert_eq(rkv_router_apply_snapshot(r, i, b, 1 + i % 6, 1), RKV_OK);
    rt_ok(r);
    cr_assert_eq(rkv_router_snapshot_begin(r, 5, 9), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 5, b, 3), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_chunk(r, 5, b + 3, 3), RKV_OK);
    cr_assert_eq(rkv_router_snapshot_end(r, 5), RKV_OK);
    rt_ok(r);
    uint64_t q[6] = {300, 301, 302, 303, 304, 305};
    rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES];
    uint32_t k;
    cr_assert_eq(rkv_router_overlaps(r, 0, q, 6, o, 64, &k), RKV_OK);
    cr_assert_eq(k, 64);
    for (uint32_t i = 0; i < 64; i++) {
        cr_assert_eq(o[i].instance, i);
        cr_assert_eq(o[i].pages, i == 5 ? 6 : 1 + i % 6, "instance %u", i);
    }
    /* a 65th instance takes the slot instance 0 left in group 0 */
    cr_assert_eq(rkv_router_add_instance(r, 1000), RKV_OK);
    cr_assert_eq(rkv_router_apply_snapshot(r, 1000, b, 2, 1), RKV_OK);
    cr_assert_eq(rkv_router_overlaps(r, 0, q, 6, o, 65, &k), RKV_OK);
    cr_assert_eq(o[64].pages, 2);
    cr_assert_eq(o[5].pages, 6);
    rt_done(r);
}

Test(router_snapshot, tree_chunks_equal_the_snapshot)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("router_snapshot.tree_chunks"));
    evd d;
    evd_open(&d, 60, 2, 4096);
    rkv_block_entry buf[16];
    size_t got;
    int done;
    rkv_snapshot_cursor c;
    rkv_snapshot_cursor_init(&c);
    cr_assert_eq(rkv_tree_snapshot_chunk(NULL, &c, buf, 16, &got, &done),
                 RKV_ERR_INVALID_ARG);
    uint64_t steps = rkv_test_scaled(600), nonempty = 0, changed = 0;
    for (uint64_t step = 0; step < steps; step++) {
        evd_step(&d, &rng, 1);
        rkv_event ev[64];
        uint32_t ne;
        do /* keep the ring from overflowing */
            cr_assert_eq(rkv_tree_events_drain(d.tree, ev, 64, &ne), RKV_OK);
        while (ne > 0);
        size_t n;
        uint64_t seq;
        rkv_block_entry *s = evd_snapshot(&d, &n, &seq);
        rkv_block_entry *cat = malloc((n + 1) * sizeof *cat);
        cr_assert_not_null(cat);
        rkv_snapshot_cursor_init(&c);
        size_t have = 0, calls = 0;
        do {
            size_t cap = 1 + (size_t)rkv_rng_below(&rng, 9);
            cr_assert_eq(rkv_tree_snapshot_chunk(d.tree, &c, buf, cap, &got,
                                                 &done), RKV_OK, "%s",
                         rkv_last_error());
            cr_assert(got <= cap && have + got <= n);
            memcpy(cat + have, buf, got * sizeof *buf);
            have += got;
            calls++;
            cr_assert(done || got == cap, "a short chunk before the end");
        } while (!done);
        cr_assert_eq(c.seq, seq);
        cr_assert_eq(c.total, n);
        cr_assert_eq(c.done, n);
        cr_assert_eq(have, n);
        cr_assert(n == 0 || memcmp(cat, s, n * sizeof *s) == 0,
                  "chunks differ from the snapshot");
        /* after the end: nothing more, done again */
        cr_assert_eq(rkv_tree_snapshot_chunk(d.tree, &c, buf, 16, &got, &done),
                     RKV_OK);
        cr_assert(got == 0 && done);
        nonempty += n > 0;
        /* a change between chunks is refused, cursor unchanged */
        if (n > 2) {
            rkv_snapshot_cursor_init(&c);
            cr_assert_eq(rkv_tree_snapshot_chunk(d.tree, &c, buf, 1, &got,
                                                 &done), RKV_OK);
            uint64_t before = evd_last_seq(&d);
            evd_step(&d, &rng, 0);
            if (evd_last_seq(&d) != before) {
                rkv_snapshot_cursor keep = c;
                cr_assert_eq(rkv_tree_snapshot_chunk(d.tree, &c, buf, 16, &got,
                                                     &done), RKV_ERR_STATE);
                cr_assert(memcmp(&keep, &c, sizeof c) == 0);
                changed++;
            }
        }
        free(s);
        free(cat);
    }
    cr_assert(nonempty > steps / 4 && changed > 0);
    evd_close(&d);
}

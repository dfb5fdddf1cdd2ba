/*
 * tests/test_router.c -- the fleet router index and scorer (router/,
 * include/radixkv_router.h).
 *
 * Unit tests: instances (add, duplicate, unknown, removal twice), stored /
 * removed / cleared events, seq handling (stale, gap, marker) and bad
 * events (counted, resync, never a crash), snapshots, overlaps across
 * media and namespaces, the score formula and its tie-breaks.
 *
 * Differential test: several instances (tests/support/event_driver.c: a
 * pool + tree with events each, random operations incl. OOM failures,
 * resets and ring overflows) feed one router. Their events are drained at
 * random times in random batch sizes; some batches are lost on the way
 * (the router must see the gap), some delivered twice (stale), instances
 * are removed and re-added, unknown ids are sent events. When the router
 * says an instance needs a resync, the test drains that tree and applies
 * rkv_tree_snapshot, or half the time the chunked protocol
 * (rkv_tree_snapshot_chunk in random sizes into rkv_router_snapshot_begin /
 * _chunk / _end, sometimes aborted and begun again, the router's view of
 * the instance unchanged until the end); every 16 steps everything is delivered and every
 * registered instance must then be up to date. After every step, for every
 * instance the router is
 * up to date with (same last seq as the tree, not resyncing): it holds
 * exactly the tree's snapshot (every snapshot hash held on its medium and
 * no other, same count), and
 * for random requests its overlap equals the tree's PEEK match in pages;
 * a resyncing instance holds nothing. rkv_router_check after every step.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/event_driver.h"
#include "tests/support/router_util.h"
#include "tests/support/test_util.h"

static rkv_event stored(uint64_t seq, uint64_t ns, uint64_t parent,
                        const uint64_t *h, uint32_t n, uint8_t medium)
{
    rkv_event e = rt_event(seq, RKV_EVENT_BLOCK_STORED, 16, parent, h, n);
    e.medium = medium;
    e.ns = ns;
    return e;
}

static rkv_event removed(uint64_t seq, uint64_t ns, const uint64_t *h,
                         uint32_t n, uint8_t medium)
{
    rkv_event e = stored(seq, ns, 0, h, n, medium);
    e.kind = RKV_EVENT_BLOCK_REMOVED;
    return e;
}

static rkv_router_stats stats(const rkv_router *r)
{
    rkv_router_stats s;
    cr_assert_eq(rkv_router_get_stats(r, &s), RKV_OK);
    return s;
}

static int needs_resync(const rkv_router *r, uint64_t inst)
{
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, inst, &in), RKV_OK);
    return in.needs_resync;
}

Test(router, instances_and_bad_ids)
{
    rkv_router *r = rt_mk();
    cr_assert_eq(rkv_router_add_instance(r, 5), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 5), RKV_ERR_DUPLICATE);
    cr_assert_eq(rkv_router_add_instance(r, UINT64_MAX), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_remove_instance(r, 6), RKV_ERR_NOT_FOUND);
    cr_assert_eq(rkv_router_remove_instance(r, 5), RKV_OK);
    cr_assert_eq(rkv_router_remove_instance(r, 5), RKV_ERR_NOT_FOUND);
    uint64_t h[1] = {42};
    rkv_event e = stored(1, 0, 0, h, 1, 0);
    cr_assert_eq(rkv_router_apply(r, 9, &e, 1), RKV_ERR_NOT_FOUND);
    cr_assert_eq(rkv_router_set_load(r, 9, 1, 1), RKV_ERR_NOT_FOUND);
    cr_assert_eq(stats(r).unknown_instance, 4);
    rkv_router_overlap o;
    cr_assert_eq(rkv_router_route(r, 0, h, 1, &o), RKV_ERR_STATE);
    for (uint64_t i = 0; i < RKV_ROUTER_MAX_INSTANCES; i++)
        cr_assert_eq(rkv_router_add_instance(r, 5000 - i), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_ERR_NO_SPACE);
    rt_done(r);
    rkv_router_destroy(NULL);
}

Test(router, events_seq_and_bad_input)
{
    rkv_router *r = rt_mk();
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_OK);
    uint64_t a[3] = {11, 12, 13}, b[2] = {21, 22};
    rkv_event ev[3] = {stored(1, 0, RKV_HASH_ROOT, a, 3, 0),
                       stored(2, 0, 11, b, 2, 0),
                       removed(3, 0, (uint64_t[]){13}, 1, 0)};
    cr_assert_eq(rkv_router_apply(r, 1, ev, 3), RKV_OK);
    rt_ok(r);
    cr_assert(rkv_router_holds(r, 1, 0, 11) && rkv_router_holds(r, 1, 0, 12));
    cr_assert(!rkv_router_holds(r, 1, 0, 13));
    cr_assert(rkv_router_holds(r, 1, 0, 22));
    cr_assert(!rkv_router_holds(r, 2, 0, 22));
    cr_assert_eq(stats(r).entries, 4);
    /* stale: counted, ignored */
    cr_assert_eq(rkv_router_apply(r, 1, ev, 2), RKV_OK);
    cr_assert_eq(stats(r).events_stale, 2);
    cr_assert(!needs_resync(r, 1));
    /* a bad event (removing what it does not hold): resync, holds nothing */
    rkv_event bad = removed(4, 0, (uint64_t[]){99}, 1, 0);
    cr_assert_eq(rkv_router_apply(r, 1, &bad, 1), RKV_OK);
    cr_assert_eq(stats(r).events_bad, 1);
    cr_assert(needs_resync(r, 1));
    cr_assert(!rkv_router_holds(r, 1, 0, 11));
    cr_assert_eq(stats(r).entries, 0);
    rt_ok(r);
    /* later events are skipped until a snapshot */
    rkv_event later = stored(5, 0, RKV_HASH_ROOT, (uint64_t[]){77}, 1, 0);
    cr_assert_eq(rkv_router_apply(r, 1, &later, 1), RKV_OK);
    cr_assert_eq(stats(r).events_skipped, 1);
    cr_assert(!rkv_router_holds(r, 1, 0, 77));
    rkv_block_entry snap[2] = {{0, 11, RKV_HASH_ROOT, 0, 0}, {0, 12, 11, 0, 0}};
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, 5), RKV_OK);
    cr_assert(!needs_resync(r, 1));
    cr_assert(rkv_router_holds(r, 1, 0, 12));
    rt_ok(r);
    /* a gap */
    rkv_event gap = stored(7, 0, 12, (uint64_t[]){13}, 1, 0);
    cr_assert_eq(rkv_router_apply(r, 1, &gap, 1), RKV_OK);
    cr_assert_eq(stats(r).gaps, 1);
    cr_assert(needs_resync(r, 1));
    cr_assert_eq(stats(r).entries, 0);
    /* a heartbeat ahead of the stream (events lost at its end) */
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, 7), RKV_OK);
    cr_assert_eq(rkv_router_heartbeat(r, 1, 7), RKV_OK);
    cr_assert(!needs_resync(r, 1));
    cr_assert_eq(rkv_router_heartbeat(r, 1, 6), RKV_OK); /* old: stale */
    cr_assert(!needs_resync(r, 1));
    cr_assert_eq(rkv_router_heartbeat(r, 1, 9), RKV_OK);
    cr_assert(needs_resync(r, 1));
    cr_assert_eq(rkv_router_heartbeat(r, 77, 9), RKV_ERR_NOT_FOUND);
    /* a marker */
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, 7), RKV_OK);
    rkv_event mark;
    memset(&mark, 0, sizeof mark);
    mark.seq = 8;
    mark.kind = RKV_EVENT_RESYNC;
    mark.lost = 3;
    cr_assert_eq(rkv_router_apply(r, 1, &mark, 1), RKV_OK);
    cr_assert_eq(stats(r).resync_markers, 1);
    cr_assert(needs_resync(r, 1));
    /* garbage of every kind: counted, never a crash */
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, 10), RKV_OK);
    rkv_event junk[4];
    junk[0] = stored(11, 0, RKV_HASH_ROOT, (uint64_t[]){5}, 1, 7); /* medium */
    junk[1] = stored(12, 0, RKV_HASH_ROOT, (uint64_t[]){5}, 1, 0);
    junk[1].kind = 200;
    junk[2] = stored(13, 0, RKV_HASH_ROOT, (uint64_t[]){5}, 1, 0);
    junk[2].num_hashes = 999;
    junk[3] = stored(14, 0, RKV_HASH_ROOT, (uint64_t[]){11}, 1, 0); /* dup */
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, junk[i].seq - 1),
                     RKV_OK);
        uint64_t bad0 = stats(r).events_bad;
        cr_assert_eq(rkv_router_apply(r, 1, &junk[i], 1), RKV_OK);
        cr_assert_eq(stats(r).events_bad, bad0 + 1, "junk %d", i);
        cr_assert(needs_resync(r, 1));
        rt_ok(r);
    }
    /* a bad snapshot: refused, and the instance holds nothing */
    rkv_block_entry twice[2] = {{0, 11, 0, 0, 0}, {0, 11, 0, 0, 0}};
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, twice, 2, 20),
                 RKV_ERR_INVALID_ARG);
    cr_assert(needs_resync(r, 1));
    rkv_block_entry badm[1] = {{0, 11, 0, 5, 0}};
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, badm, 1, 20),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(stats(r).entries, 0);
    rt_ok(r);
    /* ALL_CLEARED */
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, 30), RKV_OK);
    rkv_event clr;
    memset(&clr, 0, sizeof clr);
    clr.seq = 31;
    clr.kind = RKV_EVENT_ALL_CLEARED;
    cr_assert_eq(rkv_router_apply(r, 1, &clr, 1), RKV_OK);
    cr_assert(!needs_resync(r, 1));
    cr_assert_eq(stats(r).entries, 0);
    rt_done(r);
}

Test(router, overlaps_media_namespaces_and_scores)
{
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    cfg.page_tokens = 10;
    rkv_router *r = rt_mk_with(&cfg);
    /* instances 30, 10, 20 (added out of id order) */
    uint64_t ids[3] = {30, 10, 20};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(rkv_router_add_instance(r, ids[i]), RKV_OK);
    uint64_t h[6] = {101, 102, 103, 104, 105, 106};
    /* 10: pages 0..3 on device; 20: 0..1 device, 2..5 host; 30 tries
     * pages 1..2 without page 0: refused (its parent is not held), so 30
     * resyncs and holds nothing */
    rkv_event e10 = stored(1, 4, RKV_HASH_ROOT, h, 4, RKV_MEDIUM_DEVICE);
    rkv_event e20[2] = {stored(1, 4, RKV_HASH_ROOT, h, 2, RKV_MEDIUM_DEVICE),
                        stored(2, 4, 102, h + 2, 4, RKV_MEDIUM_HOST)};
    rkv_event e30 = stored(1, 4, 101, h + 1, 2, RKV_MEDIUM_DEVICE);
    cr_assert_eq(rkv_router_apply(r, 10, &e10, 1), RKV_OK);
    cr_assert_eq(rkv_router_apply(r, 20, e20, 2), RKV_OK);
    cr_assert_eq(rkv_router_apply(r, 30, &e30, 1), RKV_OK);
    cr_assert_eq(stats(r).events_bad, 1);
    cr_assert(needs_resync(r, 30));
    rt_ok(r);
    rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES];
    uint32_t n;
    cr_assert_eq(rkv_router_overlaps(r, 4, h, 6, o, 64, &n), RKV_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(o[0].instance, 10);
    cr_assert_eq(o[1].instance, 20);
    cr_assert_eq(o[2].instance, 30);
    cr_assert_eq(o[0].pages, 4);
    cr_assert_eq(o[0].pages_by_medium[RKV_MEDIUM_DEVICE], 4);
    cr_assert_eq(o[1].pages, 6);
    cr_assert_eq(o[1].pages_by_medium[RKV_MEDIUM_DEVICE], 2);
    cr_assert_eq(o[1].pages_by_medium[RKV_MEDIUM_HOST], 4);
    cr_assert_eq(o[2].pages, 0);
    /* score = 10 * (1*dev + 0.5*host + 0.25*disk) - queued - 16*running */
    cr_assert_float_eq(o[0].score, 40.0, 1e-9);
    cr_assert_float_eq(o[1].score, 40.0, 1e-9);
    /* equal scores: the smaller id wins */
    rkv_router_overlap best;
    cr_assert_eq(rkv_router_route(r, 4, h, 6, &best), RKV_OK);
    cr_assert_eq(best.instance, 10);
    /* load moves it: 10 gets 5 queued tokens */
    cr_assert_eq(rkv_router_set_load(r, 10, 0, 5), RKV_OK);
    cr_assert_eq(rkv_router_route(r, 4, h, 6, &best), RKV_OK);
    cr_assert_eq(best.instance, 20);
    cr_assert_float_eq(best.score, 40.0, 1e-9);
    /* equal score, fewer queued tokens wins over the smaller id */
    cr_assert_eq(rkv_router_set_load(r, 10, 0, 0), RKV_OK);
    cr_assert_eq(rkv_router_set_load(r, 20, 1, 0), RKV_OK); /* 40 - 16 */
    cr_assert_eq(rkv_router_set_load(r, 30, 0, 0), RKV_OK);
    cfg.running_weight = 0;
    rkv_router *r2 = NULL;
    cr_assert_eq(rkv_router_create(&cfg, &r2), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r2, 2), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r2, 1), RKV_OK);
    cr_assert_eq(rkv_router_set_load(r2, 1, 3, 0), RKV_OK);
    cr_assert_eq(rkv_router_set_load(r2, 2, 1, 0), RKV_OK);
    cr_assert_eq(rkv_router_route(r2, 0, h, 1, &best), RKV_OK);
    cr_assert_eq(best.instance, 2, "same score and queue: fewer running");
    rkv_router_destroy(r2);
    /* another namespace sees nothing */
    cr_assert_eq(rkv_router_overlaps(r, 5, h, 6, o, 64, &n), RKV_OK);
    cr_assert_eq(o[0].pages + o[1].pages + o[2].pages, 0);
    /* a request diverging after page 1 */
    uint64_t q[3] = {101, 102, 999};
    cr_assert_eq(rkv_router_overlaps(r, 4, q, 3, o, 64, &n), RKV_OK);
    cr_assert_eq(o[0].pages, 2);
    cr_assert_eq(o[1].pages, 2);
    cr_assert_eq(rkv_router_overlaps(r, 4, q, 3, o, 2, &n), RKV_ERR_INVALID_ARG);
    /* removing an instance drops its entries */
    cr_assert_eq(rkv_router_remove_instance(r, 20), RKV_OK);
    cr_assert(!rkv_router_holds(r, 20, 4, 105));
    cr_assert_eq(stats(r).entries, 4);
    rt_ok(r);
    rkv_router_config bad = cfg;
    bad.queue_weight = -1;
    cr_assert_eq(rkv_router_create(&bad, &r2), RKV_ERR_INVALID_ARG);
    rkv_router_destroy(r);
}

/* The table keys each (block, group of 64 slots, medium): a block held on
 * the device and on the host by one instance is two entries, each medium's
 * store and removal touches its own, and a group with host or disk
 * entries answers "held on any medium" from all three while a group
 * without keeps answering from the device entries alone. */
Test(router, a_block_on_two_media_is_two_entries)
{
    rkv_router *r = rt_mk();
    /* ids 1..65: 1..64 fill slot group 0, 65 is alone in group 1 */
    for (uint64_t id = 1; id <= 65; id++)
        cr_assert_eq(rkv_router_add_instance(r, id), RKV_OK);
    uint64_t h[4] = {201, 202, 203, 204};
    rkv_event dev = stored(1, 0, RKV_HASH_ROOT, h, 4, RKV_MEDIUM_DEVICE);
    rkv_event host = stored(2, 0, 202, h + 2, 2, RKV_MEDIUM_HOST);
    cr_assert_eq(rkv_router_apply(r, 65, &dev, 1), RKV_OK);
    cr_assert_eq(rkv_router_apply(r, 65, &host, 1), RKV_OK);
    dev.seq = 1; /* instance 1 (group 0): device only */
    cr_assert_eq(rkv_router_apply(r, 1, &dev, 1), RKV_OK);
    rt_ok(r);
    cr_assert_eq(stats(r).entries, 4 + 2 + 4, "group 1: 4 device + 2 host");
    cr_assert(rkv_router_holds_medium(r, 65, 0, 203, RKV_MEDIUM_DEVICE));
    cr_assert(rkv_router_holds_medium(r, 65, 0, 203, RKV_MEDIUM_HOST));
    cr_assert(!rkv_router_holds_medium(r, 65, 0, 203, RKV_MEDIUM_DISK));
    cr_assert(!rkv_router_holds_medium(r, 1, 0, 203, RKV_MEDIUM_HOST));
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, 65, &in), RKV_OK);
    cr_assert_eq(in.blocks, 6);
    /* the device copy of page 3 goes: the host one stays */
    rkv_event gone = removed(3, 0, h + 3, 1, RKV_MEDIUM_DEVICE);
    cr_assert_eq(rkv_router_apply(r, 65, &gone, 1), RKV_OK);
    cr_assert(!needs_resync(r, 65));
    cr_assert(!rkv_router_holds_medium(r, 65, 0, 204, RKV_MEDIUM_DEVICE));
    cr_assert(rkv_router_holds(r, 65, 0, 204));
    cr_assert_eq(stats(r).entries, 9);
    rt_ok(r);
    rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES];
    uint32_t n = 0;
    cr_assert_eq(rkv_router_overlaps(r, 0, h, 4, o, RKV_ROUTER_MAX_INSTANCES, &n),
                 RKV_OK);
    cr_assert_eq(n, 65);
    cr_assert_eq(o[64].instance, 65);
    cr_assert_eq(o[64].pages, 4);
    cr_assert_eq(o[64].pages_by_medium[RKV_MEDIUM_DEVICE], 3);
    cr_assert_eq(o[64].pages_by_medium[RKV_MEDIUM_HOST], 1);
    cr_assert_eq(o[0].pages, 4);
    cr_assert_eq(o[0].pages_by_medium[RKV_MEDIUM_DEVICE], 4);
    cr_assert_eq(o[1].pages, 0);
    /* page 3 moves on to disk; removing the host copy twice is a
     * contradiction: the instance resyncs and every entry of it goes */
    rkv_event mv[2] = {stored(4, 0, 203, h + 3, 1, RKV_MEDIUM_DISK),
                       removed(5, 0, h + 3, 1, RKV_MEDIUM_HOST)};
    cr_assert_eq(rkv_router_apply(r, 65, mv, 2), RKV_OK);
    cr_assert(rkv_router_holds_medium(r, 65, 0, 204, RKV_MEDIUM_DISK));
    cr_assert_eq(stats(r).entries, 9);
    rt_ok(r);
    cr_assert_eq(rkv_router_overlaps(r, 0, h, 4, o, RKV_ROUTER_MAX_INSTANCES, &n),
                 RKV_OK);
    cr_assert_eq(o[64].pages_by_medium[RKV_MEDIUM_DISK], 1);
    cr_assert_eq(o[64].pages_by_medium[RKV_MEDIUM_HOST], 0);
    rkv_event again = removed(6, 0, h + 3, 1, RKV_MEDIUM_HOST);
    cr_assert_eq(rkv_router_apply(r, 65, &again, 1), RKV_OK);
    cr_assert(needs_resync(r, 65));
    cr_assert_eq(stats(r).entries, 4, "instance 1's device entries only");
    rt_ok(r);
    rkv_router_destroy(r);
}

/* The load terms of the score, one at a time: each running request costs
 * running_weight, each queued token queue_weight (so a busier instance
 * loses to an idle one with the same pages), and among equal scores the
 * fewer queued tokens win, then the fewer running requests, then the
 * smaller id. Expected scores come from the formula of
 * include/radixkv_router.h. */
Test(router, load_terms_and_tie_breaks)
{
    uint64_t h[4] = {201, 202, 203, 204};
    rkv_event ev = stored(1, 0, RKV_HASH_ROOT, h, 4, RKV_MEDIUM_DEVICE);
    for (int variant = 0; variant < 2; variant++) {
        rkv_router_config cfg;
        rkv_router_config_init(&cfg);
        cfg.page_tokens = 16;
        cfg.running_weight = 8;
        cfg.queue_weight = variant == 0 ? 0.5 : 0; /* 1: ties on the queue */
        rkv_router *r = NULL;
        cr_assert_eq(rkv_router_create(&cfg, &r), RKV_OK);
        for (uint64_t id = 1; id <= 3; id++) {
            cr_assert_eq(rkv_router_add_instance(r, id), RKV_OK);
            cr_assert_eq(rkv_router_apply(r, id, &ev, 1), RKV_OK);
        }
        rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES], best;
        uint32_t n = 0;
        /* 1: 3 running; 2: 1 running, 40 queued; 3: idle */
        cr_assert_eq(rkv_router_set_load(r, 1, 3, 0), RKV_OK);
        cr_assert_eq(rkv_router_set_load(r, 2, 1, 40), RKV_OK);
        cr_assert_eq(rkv_router_overlaps(r, 0, h, 4, o, 64, &n), RKV_OK);
        cr_assert_eq(n, 3);
        double base = 16.0 * 4; /* four device pages */
        cr_assert_float_eq(o[0].score, base - 8.0 * 3, 1e-9, "running costs");
        cr_assert_float_eq(o[1].score, base - 8.0 - cfg.queue_weight * 40, 1e-9);
        cr_assert_float_eq(o[2].score, base, 1e-9);
        cr_assert_eq(rkv_router_route(r, 0, h, 4, &best), RKV_OK);
        cr_assert_eq(best.instance, 3, "the idle instance wins");
        /* 3 gets as busy as 1: then 2 (one running) is the best when the
         * queue costs nothing, else the queue decides against it */
        cr_assert_eq(rkv_router_set_load(r, 3, 3, 0), RKV_OK);
        cr_assert_eq(rkv_router_route(r, 0, h, 4, &best), RKV_OK);
        if (variant == 1) {
            cr_assert_eq(best.instance, 2, "fewer running requests score higher");
        } else {
            /* 64 - 8 - 20 = 36 against 64 - 24 = 40 for 1 and 3 */
            cr_assert(best.instance == 1 || best.instance == 3,
                      "equal scores and loads: one of them, got %llu",
                      (unsigned long long)best.instance);
        }
        /* equal scores with the queue free: fewer queued tokens first,
         * before fewer running and before the random pick */
        if (variant == 1) {
            cr_assert_eq(rkv_router_set_load(r, 1, 2, 9), RKV_OK);
            cr_assert_eq(rkv_router_set_load(r, 2, 2, 5), RKV_OK);
            cr_assert_eq(rkv_router_set_load(r, 3, 2, 7), RKV_OK);
            cr_assert_eq(rkv_router_route(r, 0, h, 4, &best), RKV_OK);
            cr_assert_eq(best.instance, 2, "fewest queued tokens");
            cr_assert_eq(rkv_router_set_load(r, 2, 2, 9), RKV_OK);
            cr_assert_eq(rkv_router_route(r, 0, h, 4, &best), RKV_OK);
            cr_assert_eq(best.instance, 3, "fewest queued tokens (7 of 9, 9, 7)");
            cr_assert_eq(rkv_router_set_load(r, 3, 2, 9), RKV_OK);
            cr_assert_eq(rkv_router_set_load(r, 1, 2, 9), RKV_OK);
            cr_assert_eq(rkv_router_set_load(r, 2, 3, 9), RKV_OK);
            cr_assert_eq(rkv_router_route(r, 0, h, 4, &best), RKV_OK);
            cr_assert(best.instance == 1 || best.instance == 3,
                      "equal scores and queues: fewer running (1 or 3)");
        }
        rt_done(r);
    }
}

/* Sequence numbers at their edges: an event delivered again with the last
 * applied seq is stale (counted, no resync); the next seq applies; one
 * skipped seq is a gap. A heartbeat equal to the last seq says nothing,
 * one behind is stale, exactly one ahead is a gap (the stream lost its
 * last event). */
Test(router, seq_edges_of_events_and_heartbeats)
{
    rkv_router *r = rt_mk();
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_OK);
    uint64_t a[2] = {31, 32};
    rkv_event ev[2] = {stored(1, 0, RKV_HASH_ROOT, a, 1, 0), stored(2, 0, 31, a + 1, 1, 0)};
    cr_assert_eq(rkv_router_apply(r, 1, ev, 2), RKV_OK);
    cr_assert_eq(stats(r).events_applied, 2);
    /* the last event again: stale */
    cr_assert_eq(rkv_router_apply(r, 1, &ev[1], 1), RKV_OK);
    cr_assert_eq(stats(r).events_stale, 1);
    cr_assert_eq(stats(r).gaps, 0);
    cr_assert(!needs_resync(r, 1));
    cr_assert(rkv_router_holds(r, 1, 0, 32));
    /* heartbeats: equal (nothing), behind (stale), one ahead (gap) */
    cr_assert_eq(rkv_router_heartbeat(r, 1, 2), RKV_OK);
    cr_assert(!needs_resync(r, 1));
    cr_assert_eq(stats(r).events_stale, 1);
    cr_assert_eq(rkv_router_heartbeat(r, 1, 1), RKV_OK);
    cr_assert_eq(stats(r).events_stale, 2);
    cr_assert(!needs_resync(r, 1));
    cr_assert_eq(rkv_router_heartbeat(r, 1, 3), RKV_OK);
    cr_assert_eq(stats(r).gaps, 1);
    cr_assert(needs_resync(r, 1), "a heartbeat one ahead: the last event was lost");
    /* after a snapshot at 2: seq 4 (3 skipped) is a gap, 3 applies */
    rkv_block_entry snap[2] = {{0, 31, RKV_HASH_ROOT, 0, 0}, {0, 32, 31, 0, 0}};
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, 2), RKV_OK);
    cr_assert(!needs_resync(r, 1));
    rkv_event skip = stored(4, 0, 32, (uint64_t[]){33}, 1, 0);
    cr_assert_eq(rkv_router_apply(r, 1, &skip, 1), RKV_OK);
    cr_assert_eq(stats(r).gaps, 2);
    cr_assert(needs_resync(r, 1), "one lost event");
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, snap, 2, 2), RKV_OK);
    rkv_event next = stored(3, 0, 32, (uint64_t[]){33}, 1, 0);
    cr_assert_eq(rkv_router_apply(r, 1, &next, 1), RKV_OK);
    cr_assert(!needs_resync(r, 1));
    cr_assert(rkv_router_holds(r, 1, 0, 33));
    rt_done(r);
}

Test(router, grows_and_shrinks)
{
    rkv_router *r = rt_mk_instances(2);
    /* 5000 chained blocks on instance 1, half of them also on 2 */
    uint64_t seq1 = 0, seq2 = 0, parent = RKV_HASH_ROOT;
    for (uint64_t k = 0; k < 5000; k += 10) {
        uint64_t h[10];
        for (int i = 0; i < 10; i++)
            h[i] = (k + (uint64_t)i + 1) * 0x9E3779B97F4A7C15ull;
        rkv_event e = stored(++seq1, 0, parent, h, 10, 0);
        cr_assert_eq(rkv_router_apply(r, 1, &e, 1), RKV_OK);
        if (k < 2500) {
            e.seq = ++seq2;
            cr_assert_eq(rkv_router_apply(r, 2, &e, 1), RKV_OK);
        }
        parent = h[9];
    }
    rt_ok(r);
    cr_assert_eq(stats(r).entries, 5000);
    cr_assert_eq(rkv_router_remove_instance(r, 1), RKV_OK);
    cr_assert_eq(stats(r).entries, 2500);
    rt_done(r);
}

/* ---- differential: trees -> events -> router ------------------------------------ */

#define NI 4

typedef struct inst {
    evd d;
    uint64_t id;
    int registered;
} inst;

/* Resync x: drain its ring (delivered), then either one snapshot or the
 * chunked protocol (rkv_tree_snapshot_chunk in random sizes into
 * rkv_router_snapshot_begin / _chunk / _end), sometimes aborted and begun
 * again. While chunks are staged the router's view of x must not move. */
static void resync(rkv_router *r, inst *x, rkv_rng *rng, uint64_t *chunked)
{
    rkv_event buf[16];
    uint32_t got;
    do {
        cr_assert_eq(rkv_tree_events_drain(x->d.tree, buf, 16, &got), RKV_OK);
        cr_assert_eq(rkv_router_apply(r, x->id, buf, got), RKV_OK);
    } while (got > 0);
    if (rkv_rng_below(rng, 2) == 0) {
        size_t n;
        uint64_t seq;
        rkv_block_entry *s = evd_snapshot(&x->d, &n, &seq);
        cr_assert_eq(rkv_router_apply_snapshot(r, x->id, s, n, seq), RKV_OK,
                     "%s", rkv_last_error());
        free(s);
        return;
    }
    (*chunked)++;
    rkv_router_instance_info before;
    cr_assert_eq(rkv_router_instance_info_get(r, x->id, &before), RKV_OK);
    for (int attempt = 0;; attempt++) {
        int abort_it = attempt == 0 && rkv_rng_below(rng, 4) == 0;
        rkv_snapshot_cursor c;
        rkv_snapshot_cursor_init(&c);
        rkv_block_entry part[8];
        size_t n;
        int done;
        cr_assert_eq(rkv_tree_snapshot_chunk(x->d.tree, &c, part, 0, &n, &done),
                     RKV_OK);
        cr_assert_eq(rkv_router_snapshot_begin(r, x->id, c.seq), RKV_OK);
        while (!done) {
            size_t cap = 1 + (size_t)rkv_rng_below(rng, 8);
            cr_assert_eq(rkv_tree_snapshot_chunk(x->d.tree, &c, part, cap, &n,
                                                 &done), RKV_OK, "%s",
                         rkv_last_error());
            cr_assert_eq(rkv_router_snapshot_chunk(r, x->id, part, n), RKV_OK,
                         "%s", rkv_last_error());
            rkv_router_instance_info mid;
            cr_assert_eq(rkv_router_instance_info_get(r, x->id, &mid), RKV_OK);
            cr_assert(mid.blocks == before.blocks &&
                      mid.last_seq == before.last_seq &&
                      mid.needs_resync == before.needs_resync,
                      "staged chunks showed before the end");
            rt_ok(r);
            if (abort_it && rkv_rng_below(rng, 2) == 0)
                break;
        }
        if (abort_it) {
            cr_assert_eq(rkv_router_snapshot_abort(r, x->id), RKV_OK);
            continue;
        }
        cr_assert_eq(c.done, c.total);
        cr_assert_eq(rkv_router_snapshot_end(r, x->id), RKV_OK);
        return;
    }
}

static void compare(rkv_router *r, inst *x, rkv_rng *rng, uint64_t *exact)
{
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, x->id, &in), RKV_OK);
    if (in.needs_resync) {
        cr_assert_eq(in.blocks, 0, "a resyncing instance holds blocks");
        return;
    }
    size_t n;
    uint64_t seq;
    rkv_block_entry *s = evd_snapshot(&x->d, &n, &seq);
    if (in.last_seq == seq) {
        (*exact)++;
        cr_assert_eq(in.blocks, n, "router %llu blocks, tree %zu",
                     (unsigned long long)in.blocks, n);
        for (size_t i = 0; i < n; i++) {
            cr_assert(rkv_router_holds(r, x->id, s[i].ns, s[i].hash),
                      "router misses a cached hash");
            for (uint32_t m = 0; m < RKV_MEDIUM_COUNT; m++)
                cr_assert_eq(rkv_router_holds_medium(r, x->id, s[i].ns, s[i].hash, m),
                             m == s[i].medium, "hash on the wrong medium");
        }
        /* the overlap of random requests is the tree's peek match */
        for (int q = 0; q < 4; q++) {
            int32_t tok[EVD_MAX_TOK];
            uint64_t ns;
            uint32_t nt = evd_tokens(rng, tok, &ns);
            uint64_t h[EVD_MAX_TOK], prev = RKV_HASH_ROOT;
            uint32_t pages = nt / x->d.P;
            for (uint32_t p = 0; p < pages; p++)
                h[p] = prev = rkv_block_hash(prev, ns, tok + p * x->d.P, x->d.P);
            rkv_match m;
            cr_assert_eq(rkv_tree_match(x->d.tree, ns, tok, nt, NULL,
                                        RKV_MATCH_PEEK, &m), RKV_OK);
            rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES];
            uint32_t k;
            cr_assert_eq(rkv_router_overlaps(r, ns, h, pages, o, 64, &k), RKV_OK);
            uint32_t got = UINT32_MAX;
            for (uint32_t i = 0; i < k; i++)
                if (o[i].instance == x->id)
                    got = o[i].pages;
            cr_assert_eq(got, m.num_blocks, "overlap %u, tree matched %u pages",
                         got, m.num_blocks);
        }
    }
    free(s);
}

Test(router, differential_with_trees)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("router.differential_with_trees"));
    rkv_router *r = rt_mk();
    inst xs[NI];
    for (int i = 0; i < NI; i++) {
        /* one instance with a tiny ring, so it overflows */
        evd_open(&xs[i].d, 40, i == 3 ? 1 : 2, i == 0 ? 5 : 512);
        xs[i].id = 100 + (uint64_t)i * 7;
        xs[i].registered = 1;
        cr_assert_eq(rkv_router_add_instance(r, xs[i].id), RKV_OK);
    }
    uint64_t steps = rkv_test_scaled(3000), exact = 0, lost_batches = 0,
             dup_batches = 0, readds = 0, resyncs = 0, unknown_sent = 0,
             chunked = 0;
    for (uint64_t step = 0; step < steps; step++) {
        inst *x = &xs[rkv_rng_below(&rng, NI)];
        evd_step(&x->d, &rng, 1);
        /* deliver some of some instance's events */
        inst *y = &xs[rkv_rng_below(&rng, NI)];
        if (rkv_rng_below(&rng, 3) != 0) {
            rkv_event buf[16];
            uint32_t want = 1 + (uint32_t)rkv_rng_below(&rng, 16), got;
            cr_assert_eq(rkv_tree_events_drain(y->d.tree, buf, want, &got),
                         RKV_OK);
            uint64_t c = rkv_rng_below(&rng, 100);
            if (c < 3 && got > 0) {
                lost_batches++; /* lost in transport */
            } else {
                rkv_status st = rkv_router_apply(r, y->id, buf, got);
                cr_assert_eq(st, y->registered ? RKV_OK : RKV_ERR_NOT_FOUND);
                unknown_sent += !y->registered;
                if (c < 8 && y->registered && got > 0) {
                    dup_batches++; /* delivered twice: stale */
                    cr_assert_eq(rkv_router_apply(r, y->id, buf, got), RKV_OK);
                }
            }
        }
        /* churn: remove / re-add an instance (it then resyncs) */
        if (rkv_rng_below(&rng, 100) == 0) {
            inst *z = &xs[rkv_rng_below(&rng, NI)];
            for (int i = 0; i < NI; i++)
                if (!xs[i].registered)
                    z = &xs[i]; /* one out at a time: it comes back next */
            if (z->registered) {
                cr_assert_eq(rkv_router_remove_instance(r, z->id), RKV_OK);
                cr_assert_eq(rkv_router_remove_instance(r, z->id),
                             RKV_ERR_NOT_FOUND);
                unknown_sent++;
                z->registered = 0;
            } else {
                cr_assert_eq(rkv_router_add_instance(r, z->id), RKV_OK);
                z->registered = 1;
                readds++;
            }
        }
        if (step % 16 == 0) {
            /* deliver everything: every registered instance is exact */
            for (int i = 0; i < NI; i++) {
                if (!xs[i].registered)
                    continue;
                rkv_event buf[16];
                uint32_t got;
                do {
                    cr_assert_eq(rkv_tree_events_drain(xs[i].d.tree, buf, 16,
                                                       &got), RKV_OK);
                    cr_assert_eq(rkv_router_apply(r, xs[i].id, buf, got), RKV_OK);
                } while (got > 0);
                /* a batch lost at the stream's end shows only here */
                cr_assert_eq(rkv_router_heartbeat(r, xs[i].id,
                                                  evd_last_seq(&xs[i].d)),
                             RKV_OK);
                if (needs_resync(r, xs[i].id)) {
                    resync(r, &xs[i], &rng, &chunked);
                    resyncs++;
                }
                rkv_router_instance_info in;
                cr_assert_eq(rkv_router_instance_info_get(r, xs[i].id, &in),
                             RKV_OK);
                cr_assert_eq(in.last_seq, evd_last_seq(&xs[i].d));
                cr_assert(!in.needs_resync);
            }
        }
        for (int i = 0; i < NI; i++) {
            if (!xs[i].registered)
                continue;
            if (needs_resync(r, xs[i].id) && rkv_rng_below(&rng, 2)) {
                resync(r, &xs[i], &rng, &chunked);
                resyncs++;
            }
            compare(r, &xs[i], &rng, &exact);
        }
        rt_ok(r);
    }
    rkv_router_stats s = stats(r);
    cr_assert(exact > steps / 2, "too few exact comparisons (%llu)",
              (unsigned long long)exact);
    cr_assert(resyncs > 0 && lost_batches > 0 && dup_batches > 0);
    cr_assert(chunked > 0, "no chunked resync");
    cr_assert(s.gaps > 0 && s.resync_markers > 0 && s.events_stale > 0);
    cr_assert_eq(s.unknown_instance, unknown_sent);
    cr_assert(readds > 0, "no instance was removed and added again");
    cr_assert(s.entries > 0);
    for (int i = 0; i < NI; i++)
        evd_close(&xs[i].d);
    rkv_router_destroy(r);
}

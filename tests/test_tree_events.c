/*
 * tests/test_tree_events.c -- KV events of the radix tree (radix/
 * tree_events.c): what each call records, the overflow marker, snapshots,
 * and a randomized differential test.
 *
 * The differential test replays every drained event into a model, a plain
 * set of (namespace, hash, parent hash), and after every operation (of
 * tests/support/event_driver.c: requests with eviction, matches, evict,
 * alloc_blocks, lock/unlock, reset, invalid inserts, OOM-injected matches
 * and inserts) compares it with rkv_tree_snapshot(). Replay itself asserts
 * the stream: seqs strictly increase by one (or resume at marker.seq +
 * marker.lost after a RESYNC), a stored hash is new and its parent is
 * cached (prefix closure), a removed hash is cached in that namespace.
 * With a small ring and drains that come late or take a few events at a
 * time, the ring overflows: after a RESYNC marker the model is rebuilt
 * from the snapshot, and from then on must again follow the events alone.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/event_driver.h"
#include "tests/support/handles.h"
#include "tests/support/event_model.h"
#include "tests/support/test_util.h"

/* ---- the differential test (model: tests/support/event_model.c) ------------ */

static void run_differential(const char *name, uint32_t P, uint32_t ring,
                             int lazy, uint64_t steps)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed(name));
    evd d;
    evd_open(&d, 48, P, ring);
    evm m;
    memset(&m, 0, sizeof m);
    m.next_seq = 1;
    uint64_t compared = 0;
    steps = rkv_test_scaled(steps);
    for (uint64_t i = 0; i < steps; i++) {
        evd_step(&d, &rng, 1);
        if (!lazy || rkv_rng_below(&rng, 4) == 0) {
            /* sometimes a few events only, then the rest */
            if (lazy && rkv_rng_below(&rng, 2))
                evm_drain(&d, &m, (uint32_t)rkv_rng_below(&rng, 4), 3);
            evm_drain(&d, &m, UINT32_MAX, 1 + (uint32_t)rkv_rng_below(&rng, 8));
            evm_compare(&d, &m);
            compared++;
        }
    }
    evm_drain(&d, &m, UINT32_MAX, 8);
    evm_compare(&d, &m);
    /* the generator reached what the test is about */
    cr_assert(compared > steps / 8);
    cr_assert(d.oom_hits > 0, "no injected failure hit");
    cr_assert(d.failed_ops > 0 && d.resets > 0);
    cr_assert(m.events > 0);
    if (lazy)
        cr_assert(m.resyncs > 0, "the ring never overflowed");
    else
        cr_assert_eq(m.resyncs, 0, "a ring of %u overflowed", ring);
    free(m.e);
    evd_close(&d);
}

Test(tree_events, differential_exact_p4)
{
    run_differential("tree_events.differential_exact_p4", 4, 4096, 0, 3000);
}

Test(tree_events, differential_exact_p1)
{
    run_differential("tree_events.differential_exact_p1", 1, 4096, 0, 2000);
}

Test(tree_events, differential_overflow_resync)
{
    run_differential("tree_events.differential_overflow_resync", 2, 6, 1, 4000);
}

/* ---- unit tests -------------------------------------------------------------- */

typedef struct fixture {
    rkv_pool *pool;
    rkv_tree *tree;
} fixture;

static void open_fx(fixture *f, uint32_t blocks, uint32_t P, uint32_t ring)
{
    f->pool = tu_pool(blocks, P);
    f->tree = tu_event_tree(f->pool, ring, 0);
}

/* Drains up to cap events into ev: exactly want come out. */
static void drain_n(fixture *f, rkv_event *ev, uint32_t cap, uint32_t want)
{
    uint32_t n = 0;
    cr_assert_eq(rkv_tree_events_drain(f->tree, ev, cap, &n), RKV_OK);
    cr_assert_eq(n, want, "%u events drained, not %u", n, want);
}

static void close_fx(fixture *f)
{
    rkv_tree_destroy(f->tree);
    rkv_pool_destroy(f->pool);
}

/* Inserts tokens[0..n) with fresh blocks; the tree keeps them. */
static void put(fixture *f, uint64_t ns, const int32_t *tok, uint32_t n)
{
    rkv_block_id b[256];
    uint32_t pages = n / rkv_pool_page_size(f->pool);
    cr_assert_eq(rkv_tree_alloc_blocks(f->tree, pages, b), RKV_OK);
    cr_assert_eq(rkv_tree_insert(f->tree, ns, tok, n, b, NULL, NULL), RKV_OK);
    cr_assert_eq(rkv_pool_unref_n(f->pool, pages, b), RKV_OK);
}

Test(tree_events, config_and_off)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    cr_assert_eq(tc.event_ring, 0);
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = 8;
    rkv_pool *pool;
    cr_assert_eq(rkv_pool_create(&pc, &pool), RKV_OK);
    rkv_tree *t = NULL;
    tc.event_ring = 1; /* no room for a marker */
    cr_assert_eq(rkv_tree_create(pool, &tc, &t), RKV_ERR_INVALID_ARG);
    tc.event_ring = (1u << 24) + 1;
    cr_assert_eq(rkv_tree_create(pool, &tc, &t), RKV_ERR_INVALID_ARG);
    tc.event_ring = 0;
    cr_assert_eq(rkv_tree_create(pool, &tc, &t), RKV_OK);
    rkv_event ev[2];
    uint32_t n = 7;
    cr_assert_eq(rkv_tree_events_drain(t, ev, 2, &n), RKV_ERR_STATE);
    cr_assert_eq(n, 0);
    /* snapshots work with events off; seq stays 0 */
    int32_t tok[32];
    for (int i = 0; i < 32; i++)
        tok[i] = i;
    fixture f = {pool, t};
    put(&f, 3, tok, 32);
    size_t k;
    uint64_t seq = 99;
    rkv_block_entry e[2];
    cr_assert_eq(rkv_tree_snapshot(t, NULL, 0, &k, &seq), RKV_OK);
    cr_assert_eq(k, 2);
    cr_assert_eq(seq, 0);
    cr_assert_eq(rkv_tree_snapshot(t, e, 1, &k, NULL), RKV_ERR_NO_SPACE);
    cr_assert_eq(k, 2);
    cr_assert_eq(rkv_tree_snapshot(t, e, 2, &k, NULL), RKV_OK);
    cr_assert_eq(e[0].parent_hash, RKV_HASH_ROOT);
    cr_assert_eq(e[0].hash, rkv_block_hash(RKV_HASH_ROOT, 3, tok, 16));
    cr_assert_eq(e[1].parent_hash, e[0].hash);
    cr_assert_eq(e[1].hash, rkv_block_hash(e[0].hash, 3, tok + 16, 16));
    cr_assert_eq(rkv_tree_snapshot(NULL, e, 2, &k, NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_tree_check(t), RKV_OK);
    rkv_tree_destroy(t);
    rkv_pool_destroy(pool);
}

Test(tree_events, stored_removed_cleared)
{
    fixture f;
    open_fx(&f, 64, 2, 64);
    /* 40 pages: three events of 16, 16 and 8 hashes, chained */
    int32_t tok[80];
    for (int i = 0; i < 80; i++)
        tok[i] = 100 + i;
    put(&f, 5, tok, 80);
    rkv_event ev[8];
    drain_n(&f, ev, 8, 3);
    uint64_t h = RKV_HASH_ROOT;
    uint32_t page = 0;
    for (uint32_t k = 0; k < 3; k++) {
        cr_assert_eq(ev[k].seq, k + 1);
        cr_assert_eq(ev[k].kind, RKV_EVENT_BLOCK_STORED);
        cr_assert_eq(ev[k].ns, 5);
        cr_assert_eq(ev[k].page_size, 2);
        cr_assert_eq(ev[k].medium, RKV_MEDIUM_DEVICE);
        cr_assert_eq(ev[k].num_hashes, k < 2 ? 16 : 8);
        cr_assert_eq(ev[k].parent_hash, h);
        for (uint32_t i = 0; i < ev[k].num_hashes; i++, page++) {
            h = rkv_block_hash(h, 5, tok + 2 * page, 2);
            cr_assert_eq(ev[k].hashes[i], h);
        }
    }
    uint64_t last = h;
    /* a second key sharing 10 pages: only the new pages, parent = page 9 */
    int32_t tok2[24];
    memcpy(tok2, tok, 20 * sizeof *tok);
    tok2[20] = 1;
    tok2[21] = 2;
    tok2[22] = 3;
    tok2[23] = 4;
    put(&f, 5, tok2, 24);
    drain_n(&f, ev, 8, 1);
    uint64_t h9 = RKV_HASH_ROOT;
    for (int i = 0; i < 10; i++)
        h9 = rkv_block_hash(h9, 5, tok + 2 * i, 2);
    cr_assert_eq(ev[0].seq, 4);
    cr_assert_eq(ev[0].parent_hash, h9);
    cr_assert_eq(ev[0].num_hashes, 2);
    /* a match, a lock, an unlock, a duplicate insert: nothing */
    rkv_match m;
    cr_assert_eq(rkv_tree_match(f.tree, 5, tok, 80, NULL, 0, &m), RKV_OK);
    rkv_lease l;
    cr_assert_eq(rkv_tree_lock(f.tree, m.node, &l), RKV_OK);
    cr_assert_eq(rkv_tree_unlock(f.tree, &l), RKV_OK);
    drain_n(&f, ev, 8, 0);
    /* evict 3 pages: the least recent leaf is tok2's (2 pages), then the
     * tail of tok's leaf */
    cr_assert_eq(rkv_tree_evict(f.tree, 3, NULL), RKV_OK);
    drain_n(&f, ev, 8, 2);
    cr_assert_eq(ev[0].kind, RKV_EVENT_BLOCK_REMOVED);
    cr_assert_eq(ev[0].ns, 5);
    cr_assert_eq(ev[0].num_hashes, 2);
    cr_assert_eq(ev[1].num_hashes, 1);
    cr_assert_eq(ev[1].hashes[0], last, "a node's tail goes first");
    /* failures record nothing (with everything cached locked) */
    cr_assert_eq(rkv_tree_match(f.tree, 5, tok, 80, NULL, 0, &m), RKV_OK);
    cr_assert_eq(rkv_tree_lock(f.tree, m.node, &l), RKV_OK);
    cr_assert_eq(rkv_tree_evict(f.tree, 1, NULL), RKV_ERR_NO_SPACE);
    rkv_block_id big[64];
    cr_assert_eq(rkv_tree_alloc_blocks(f.tree, 64, big), RKV_ERR_NO_SPACE);
    int32_t neg[4] = {1, -2, 3, 4};
    cr_assert_eq(rkv_tree_insert(f.tree, 5, neg, 4, big, NULL, NULL),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_tree_reset(f.tree), RKV_ERR_BUSY);
    drain_n(&f, ev, 8, 0);
    cr_assert_eq(rkv_tree_unlock(f.tree, &l), RKV_OK);
    cr_assert_eq(rkv_tree_reset(f.tree), RKV_OK);
    drain_n(&f, ev, 8, 1);
    cr_assert_eq(ev[0].kind, RKV_EVENT_ALL_CLEARED);
    cr_assert_eq(ev[0].seq, 7);
    cr_assert_eq(rkv_tree_check(f.tree), RKV_OK, "%s", rkv_last_error());
    close_fx(&f);
}

Test(tree_events, overflow_marker_counts_lost)
{
    fixture f;
    open_fx(&f, 64, 1, 4);
    int32_t tok[8];
    /* 5 single-page keys: 3 recorded, the 4th becomes the marker, the 5th
     * only counts */
    for (int k = 0; k < 5; k++) {
        tok[0] = 10 + k;
        put(&f, 0, tok, 1);
        cr_assert_eq(rkv_tree_check(f.tree), RKV_OK, "%s", rkv_last_error());
    }
    rkv_event ev[8];
    /* a partial drain keeps the marker (and keeps dropping) */
    drain_n(&f, ev, 2, 2);
    tok[0] = 99;
    put(&f, 0, tok, 1);
    drain_n(&f, ev, 8, 2);
    cr_assert_eq(ev[0].seq, 3);
    cr_assert_eq(ev[0].kind, RKV_EVENT_BLOCK_STORED);
    cr_assert_eq(ev[1].kind, RKV_EVENT_RESYNC);
    cr_assert_eq(ev[1].seq, 4);
    cr_assert_eq(ev[1].lost, 3);
    size_t k;
    uint64_t seq;
    cr_assert_eq(rkv_tree_snapshot(f.tree, NULL, 0, &k, &seq), RKV_OK);
    cr_assert_eq(seq, 6, "the snapshot is after the last dropped event");
    cr_assert_eq(k, 6);
    /* recording resumes after the marker went out */
    tok[0] = 100;
    put(&f, 0, tok, 1);
    drain_n(&f, ev, 8, 1);
    cr_assert_eq(ev[0].seq, 7);
    cr_assert_eq(ev[0].kind, RKV_EVENT_BLOCK_STORED);
    cr_assert_eq(rkv_tree_check(f.tree), RKV_OK, "%s", rkv_last_error());
    close_fx(&f);
}

/* max 0 with no buffer is allowed (only max > 0 needs one): nothing moves,
 * and no null pointer reaches memcpy (UBSan flagged it). */
Test(tree_events, drain_nothing_into_null)
{
    fixture f;
    open_fx(&f, 8, 1, 8);
    int32_t tok[1] = {5};
    put(&f, 0, tok, 1);
    uint32_t n = 7;
    cr_assert_eq(rkv_tree_events_drain(f.tree, NULL, 0, &n), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(n, 0);
    rkv_event ev[2];
    cr_assert_eq(rkv_tree_events_drain(f.tree, ev, 2, &n), RKV_OK);
    cr_assert_eq(n, 1, "the pending event stayed");
    cr_assert_eq(rkv_tree_events_drain(f.tree, NULL, 0, &n), RKV_OK);
    cr_assert_eq(n, 0);
    cr_assert_eq(rkv_tree_check(f.tree), RKV_OK, "%s", rkv_last_error());
    close_fx(&f);
}

/*
 * tests/fleet/test_fleet_nats.c -- the fleet end to end against a real
 * nats-server with JetStream: each test starts `nats-server -js` on a free
 * loopback port with a temporary store dir and stops it at the end, runs
 * the radixkv-router daemon as a child process, and in-process instances
 * (a pool + tree with events on, driven by random operations through
 * tests/support/event_driver.h, each with an rkv_fleet_pub).
 *
 * "Agree" is the property checked throughout: for a set of queries (token
 * streams of the driver's shared bases, so instances overlap), the
 * router's reply gives, for each live instance, exactly the leading pages
 * rkv_tree_match (PEEK) finds in that instance's tree, lists no other
 * instance, and routes to one of them. Every wait is bounded (a few
 * seconds) and polls; nothing asserts on wall time.
 *
 * Skipped (ctest: SKIP_REGULAR_EXPRESSION) when nats-server is missing.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/codec.h"
#include "fleet/publisher.h"
#include "tests/fleet/nats_harness.h"
#include "tests/support/event_driver.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#define MODEL "testmodel"
#define MAXI 3
#define NQ 48

static void nap(void)
{
    harness_nap_ms(20);
}

typedef struct fleet {
    nats_harness h;
    pid_t router;
    evd in[MAXI];
    rkv_fleet_pub *pub[MAXI];
    int n, paused[MAXI];
    int32_t q_tok[NQ][EVD_MAX_TOK];
    uint32_t q_n[NQ];
    uint64_t q_ns[NQ];
} fleet;

/* The stats text, or 0 when the router did not answer within wait_ms. */
static int stats(fleet *f, char *buf, size_t cap, int64_t wait_ms)
{
    return harness_stats(&f->h, MODEL, buf, cap, wait_ms);
}

static void start_router(fleet *f, const char *hb_timeout_ms)
{
    char *argv[] = {RKV_ROUTER_BIN, "--server", f->h.url, "--model", MODEL,
                    "--heartbeat-timeout-ms", (char *)hb_timeout_ms,
                    "--snapshot-timeout-ms", "300", NULL};
    f->router = harness_spawn(argv, 0);
    uint64_t deadline = harness_ms_now() + 5000;
    char buf[4096];
    while (!stats(f, buf, sizeof buf, 200))
        cr_assert_lt(harness_ms_now(), deadline, "radixkv-router did not answer");
}

static void kill9_router(fleet *f)
{
    harness_end(&f->router, SIGKILL);
}

static void add_instances(fleet *f, int n)
{
    for (int i = 0; i < n; i++) {
        evd_open(&f->in[i], 96, 4, 1024);
        rkv_fleet_pub_config pc = harness_pub_config(MODEL, (uint64_t)i + 1, 7, 32);
        cr_assert_eq(rkv_fleet_pub_create(&pc, f->h.nc, f->in[i].tree, &f->pub[i]),
                     RKV_OK, "%s", rkv_last_error());
    }
    f->n = n;
    rkv_rng rng;
    rkv_rng_init(&rng, 99);
    for (int q = 0; q < NQ; q++)
        f->q_n[q] = evd_tokens(&rng, f->q_tok[q], &f->q_ns[q]);
}

/* A JetStream context for the test's own publishes (freed at teardown). */
static jsCtx *g_js;
static jsCtx *js2(fleet *f)
{
    if (!g_js)
        cr_assert_eq(natsConnection_JetStream(&g_js, f->h.nc, NULL), NATS_OK);
    return g_js;
}

/* A server, a router with heartbeat timeout hb_timeout_ms, n instances. */
static void bring_up(fleet *f, const char *hb_timeout_ms, int n)
{
    memset(f, 0, sizeof *f);
    harness_start(&f->h);
    start_router(f, hb_timeout_ms);
    add_instances(f, n);
}

static void teardown(fleet *f)
{
    jsCtx_Destroy(g_js);
    g_js = NULL;
    if (f->router)
        kill9_router(f);
    for (int i = 0; i < f->n; i++) {
        rkv_fleet_pub_destroy(f->pub[i]);
        evd_close(&f->in[i]);
    }
    harness_stop(&f->h);
    nats_CloseAndWait(2000);
}

static void poll_all(fleet *f)
{
    for (int i = 0; i < f->n; i++)
        if (!f->paused[i]) {
            rkv_status s = rkv_fleet_pub_poll(f->pub[i], harness_ms_now(), 0, 0);
            cr_assert(s == RKV_OK || s == RKV_ERR_IO, "%s", rkv_last_error());
            cr_assert_eq(rkv_fleet_pub_check(f->pub[i]), RKV_OK, "%s",
                         rkv_last_error());
        }
}

static void churn(fleet *f, int steps, uint64_t seed)
{
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < f->n; i++)
            if (!f->paused[i])
                evd_step(&f->in[i], &rng, 0);
        if (s % 10 == 0)
            poll_all(f);
    }
    poll_all(f);
}

static uint32_t tree_pages(fleet *f, int i, int q)
{
    rkv_match m;
    cr_assert_eq(rkv_tree_match(f->in[i].tree, f->q_ns[q], f->q_tok[q], f->q_n[q],
                                NULL, RKV_MATCH_PEEK, &m), RKV_OK);
    return m.num_blocks;
}

/* One route query for query q; 0 when the router did not answer. */
static int route(fleet *f, int q, rkv_wire_reply *rep)
{
    return harness_route_tokens(&f->h, MODEL, f->q_ns[q], f->q_tok[q], f->q_n[q],
                                f->in[0].P, 500, rep);
}

/* Does the router agree with every live instance's tree on every query?
 * live[i]: instance i+1 must be listed; others must not be. */
static int agree(fleet *f, const int *live, char *why, size_t cap)
{
    for (int q = 0; q < NQ; q++) {
        rkv_wire_reply rep;
        if (!route(f, q, &rep)) {
            snprintf(why, cap, "no answer");
            return 0;
        }
        int nlive = 0;
        for (int i = 0; i < f->n; i++)
            nlive += live[i];
        if (rep.status != RKV_OK || rep.count != (uint32_t)nlive) {
            snprintf(why, cap, "query %d: status %u, %u instances listed, %d live", q,
                     rep.status, rep.count, nlive);
            return 0;
        }
        int chosen_listed = 0;
        for (uint32_t k = 0; k < rep.count; k++) {
            uint64_t id = rep.ids[k];
            if (id < 1 || id > (uint64_t)f->n || !live[id - 1]) {
                snprintf(why, cap, "query %d lists instance %llu", q,
                         (unsigned long long)id);
                return 0;
            }
            uint32_t want = tree_pages(f, (int)id - 1, q);
            if (rep.id_pages[k] != want) {
                snprintf(why, cap, "query %d: instance %llu has %u pages, router says %u",
                         q, (unsigned long long)id, want, rep.id_pages[k]);
                return 0;
            }
            if (id == rep.instance) {
                chosen_listed = 1;
                cr_assert_eq(rep.pages, rep.id_pages[k]);
            }
        }
        cr_assert(chosen_listed, "routed to instance %llu, not a live one",
                  (unsigned long long)rep.instance);
    }
    return 1;
}

/* Polls the publishers until the router agrees (at most wait_ms). */
static void wait_agree(fleet *f, const int *live, uint64_t wait_ms, const char *when)
{
    uint64_t deadline = harness_ms_now() + wait_ms;
    char why[256] = "";
    for (;;) {
        poll_all(f);
        if (agree(f, live, why, sizeof why))
            return;
        cr_assert_lt(harness_ms_now(), deadline, "%s: router disagrees: %s", when, why);
        nap();
    }
}

static uint64_t total_pages(fleet *f, int i)
{
    uint64_t s = 0;
    for (int q = 0; q < NQ; q++)
        s += tree_pages(f, i, q);
    return s;
}

static uint64_t stat_value(const char *text, const char *name)
{
    return (uint64_t)harness_stat_value(text, name);
}

/* Two instances up with this heartbeat timeout, churned from seed until
 * instance busy caches something, and the router agreeing with live. */
static void two_up_agreed(fleet *f, const char *hb_timeout_ms, const int *live,
                          uint64_t seed, int busy, const char *when)
{
    bring_up(f, hb_timeout_ms, 2);
    churn(f, 200, seed);
    cr_assert_gt(total_pages(f, busy), 0);
    wait_agree(f, live, 8000, when);
}

/* The last step of a scenario: more churn the router must agree with
 * (live), then everything down. */
static void churn_agree_down(fleet *f, const int *live, int steps, uint64_t seed,
                             const char *when)
{
    churn(f, steps, seed);
    wait_agree(f, live, 8000, when);
    teardown(f);
}

Test(fleet_nats, routes_match_trees_and_survive_kill9)
{
    HARNESS_REQUIRE_SERVER();
    fleet f;
    bring_up(&f, "3000", 3);
    int live[MAXI] = {1, 1, 1};
    churn(&f, 300, 1);
    for (int i = 0; i < f.n; i++)
        cr_assert_gt(total_pages(&f, i), 0, "instance %d caches nothing queried", i);
    wait_agree(&f, live, 8000, "after the first churn");

    /* kill -9: the new router rebuilds from the stream */
    kill9_router(&f);
    churn(&f, 100, 2); /* events published while no router runs */
    start_router(&f, "3000");
    wait_agree(&f, live, 8000, "after kill -9 and restart");
    char text[4096];
    cr_assert(stats(&f, text, sizeof text, 1000));
    cr_assert_gt(stat_value(text, "radixkv_router_events_applied_total"), 0,
                 "the restarted router applied no event from the stream");
    churn_agree_down(&f, live, 200, 3, "after more churn");
}

Test(fleet_nats, silent_instance_leaves_routing_and_comes_back)
{
    HARNESS_REQUIRE_SERVER();
    fleet f;
    int live[MAXI] = {1, 1, 0};
    two_up_agreed(&f, "800", live, 4, 1, "before the silence");
    f.paused[1] = 1; /* instance 2 stops heartbeating (and publishing) */
    live[1] = 0;
    wait_agree(&f, live, 5000, "after instance 2 went silent");
    f.paused[1] = 0;
    live[1] = 1;
    churn_agree_down(&f, live, 50, 5, "after instance 2 came back");
}

Test(fleet_nats, reset_instance_gets_no_old_prefixes)
{
    HARNESS_REQUIRE_SERVER();
    fleet f;
    evd *a = &f.in[0];
    int live[MAXI] = {1, 1, 0};
    two_up_agreed(&f, "3000", live, 6, 0, "before the reset");
    while (a->nleases > 0)
        cr_assert_eq(rkv_tree_unlock(a->tree, &a->leases[--a->nleases]), RKV_OK);
    cr_assert_eq(rkv_tree_reset(a->tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(total_pages(&f, 0), 0);
    wait_agree(&f, live, 8000, "after the reset");
    /* and so no query is routed to instance 1 for a prefix it held */
    for (int q = 0; q < NQ; q++) {
        rkv_wire_reply rep;
        cr_assert(route(&f, q, &rep));
        for (uint32_t k = 0; k < rep.count; k++)
            if (rep.ids[k] == 1)
                cr_assert_eq(rep.id_pages[k], 0);
    }
    teardown(&f);
}

Test(fleet_nats, bad_messages_are_counted_not_fatal)
{
    HARNESS_REQUIRE_SERVER();
    fleet f;
    bring_up(&f, "3000", 1);
    int live[MAXI] = {1, 0, 0};
    /* junk on every subject the router reads, a truncated real batch, a
     * batch of an unknown version */
    jsCtx *js = NULL;
    cr_assert_eq(natsConnection_JetStream(&js, f.h.nc, NULL), NATS_OK);
    const char junk[] = "RKVE\x01\x00\x00\x00garbage";
    cr_assert_eq(js_Publish(NULL, js, "radixkv." MODEL ".kv.1", junk, sizeof junk,
                            NULL, NULL), NATS_OK);
    rkv_event ev = {.seq = 1, .kind = RKV_EVENT_ALL_CLEARED};
    uint8_t buf[256];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_events(1, 7, &ev, 1, buf, sizeof buf, &len), RKV_OK);
    buf[4] = 9;
    cr_assert_eq(js_Publish(NULL, js, "radixkv." MODEL ".kv.1", buf, (int)len, NULL,
                            NULL), NATS_OK);
    natsConnection_Publish(f.h.nc, "radixkv." MODEL ".hb.1", junk, 5);
    natsMsg *m = NULL;
    cr_assert_eq(natsConnection_Request(&m, f.h.nc, "radixkv." MODEL ".route", junk,
                                        sizeof junk, 1000), NATS_OK);
    rkv_wire_reply rep;
    cr_assert_eq(rkv_wire_decode_reply(natsMsg_GetData(m),
                                       (size_t)natsMsg_GetDataLength(m), &rep), RKV_OK);
    cr_assert_eq(rep.status, RKV_ERR_FORMAT);
    natsMsg_Destroy(m);
    jsCtx_Destroy(js);
    churn(&f, 100, 7);
    cr_assert_eq(rkv_tree_check(f.in[0].tree), RKV_OK);
    wait_agree(&f, live, 8000, "after bad messages");
    char text[8192];
    cr_assert(stats(&f, text, sizeof text, 1000));
    cr_assert_geq(stat_value(text, "radixkv_router_bad_messages_total"), 4);

    /* well-formed batches with a repeated seq (an old batch sent again) and
     * an out-of-order one: counted as stale, the index unchanged */
    uint64_t stale0 = stat_value(text, "radixkv_router_events_stale_total");
    cr_assert_eq(js_Publish(NULL, js2(&f), "radixkv." MODEL ".kv.1", buf, 0, NULL, NULL),
                 NATS_OK); /* an empty message: bad, too */
    rkv_fleet_pub_stats ps;
    cr_assert_eq(rkv_fleet_pub_get_stats(f.pub[0], &ps), RKV_OK);
    cr_assert_gt(ps.last_published_seq, 3);
    rkv_event old[2] = {{.seq = 1, .kind = RKV_EVENT_ALL_CLEARED},
                        {.seq = 2, .kind = RKV_EVENT_ALL_CLEARED}};
    cr_assert_eq(rkv_wire_encode_events(1, 7, old, 2, buf, sizeof buf, &len), RKV_OK);
    cr_assert_eq(js_Publish(NULL, js2(&f), "radixkv." MODEL ".kv.1", buf, (int)len,
                            NULL, NULL), NATS_OK);
    old[0].seq = ps.last_published_seq - 1;
    cr_assert_eq(rkv_wire_encode_events(1, 7, old, 1, buf, sizeof buf, &len), RKV_OK);
    cr_assert_eq(js_Publish(NULL, js2(&f), "radixkv." MODEL ".kv.1", buf, (int)len,
                            NULL, NULL), NATS_OK);
    uint64_t deadline = harness_ms_now() + 8000;
    for (;;) {
        cr_assert(stats(&f, text, sizeof text, 1000));
        if (stat_value(text, "radixkv_router_events_stale_total") >= stale0 + 3)
            break;
        cr_assert_lt(harness_ms_now(), deadline, "stale events not counted:\n%s", text);
        nap();
    }
    wait_agree(&f, live, 8000, "after repeated and out-of-order seqs");

    /* a seq far ahead: a gap, so the router resyncs the instance from a
     * snapshot and agrees again */
    uint64_t gaps0 = stat_value(text, "radixkv_router_gaps_total");
    old[0].seq = ps.last_published_seq + 1000;
    cr_assert_eq(rkv_wire_encode_events(1, 7, old, 1, buf, sizeof buf, &len), RKV_OK);
    cr_assert_eq(js_Publish(NULL, js2(&f), "radixkv." MODEL ".kv.1", buf, (int)len,
                            NULL, NULL), NATS_OK);
    deadline = harness_ms_now() + 8000;
    for (;;) {
        poll_all(&f);
        cr_assert(stats(&f, text, sizeof text, 1000));
        if (stat_value(text, "radixkv_router_gaps_total") > gaps0)
            break;
        cr_assert_lt(harness_ms_now(), deadline, "the gap was not seen:\n%s", text);
        nap();
    }
    churn(&f, 50, 17);
    wait_agree(&f, live, 8000, "after a gap");
    cr_assert(stats(&f, text, sizeof text, 1000));
    cr_assert_gt(stat_value(text, "radixkv_router_snapshots_applied_total"), 0);
    teardown(&f);
}

Test(fleet_nats, server_outage_is_bounded_and_recovered)
{
    HARNESS_REQUIRE_SERVER();
    fleet f;
    memset(&f, 0, sizeof f);
    harness_start(&f.h);
    start_router(&f, "3000");
    /* one instance with a tiny ring and queue, so an outage overflows both */
    evd_open(&f.in[0], 96, 4, 64);
    rkv_fleet_pub_config pc = harness_pub_config(MODEL, 1, 7, 4);
    pc.max_pending = 2;
    pc.publish_wait_ms = 100;
    cr_assert_eq(rkv_fleet_pub_create(&pc, f.h.nc, f.in[0].tree, &f.pub[0]), RKV_OK);
    f.n = 1;
    rkv_rng rng;
    rkv_rng_init(&rng, 99);
    for (int q = 0; q < NQ; q++)
        f.q_n[q] = evd_tokens(&rng, f.q_tok[q], &f.q_ns[q]);
    int live[MAXI] = {1, 0, 0};
    churn(&f, 100, 8);
    wait_agree(&f, live, 8000, "before the outage");

    /* the server goes away: publishes fail, the queue stays bounded */
    harness_kill_server(&f.h, SIGKILL);
    churn(&f, 400, 9);
    rkv_fleet_pub_stats st;
    cr_assert_eq(rkv_fleet_pub_get_stats(f.pub[0], &st), RKV_OK);
    cr_assert_gt(st.publish_failures, 0);
    cr_assert_leq(st.pending_batches, 2);
    cr_assert_gt(st.queue_full, 0);

    /* back on the same port and store: everyone reconnects; the tree's
     * RESYNC marker goes out (or, when the outage outlasted the heartbeat
     * timeout, the instance comes back with a gap) and the router resyncs
     * from a snapshot */
    harness_restart_server(&f.h);
    wait_agree(&f, live, 10000, "after the outage");
    char text[4096];
    cr_assert(stats(&f, text, sizeof text, 1000));
    /* the events lost in the ring (or the instance expired by the outage)
     * showed as a marker or a gap, and a snapshot repaired it */
    cr_assert_gt(stat_value(text, "radixkv_router_resync_markers_total") +
                     stat_value(text, "radixkv_router_gaps_total"), 0,
                 "nothing was lost: the test did not test recovery");
    cr_assert_gt(stat_value(text, "radixkv_router_snapshots_applied_total"), 0);
    teardown(&f);
}

/* What the publisher's tap sees with tap_tokens: every stored page's token
 * ids, in event order, equal to what was inserted (the vLLM-format
 * publisher sends them as BlockStored.token_ids). */
typedef struct tap_log {
    uint32_t stored_pages;
    int32_t tok[4096];
    size_t ntok;
    int bad;
} tap_log;

static void record_tap(void *ctx, uint64_t now_ms, const rkv_event *ev, uint32_t n,
                       const int32_t *tokens, size_t ntokens)
{
    (void)now_ms;
    tap_log *t = ctx;
    size_t want = 0;
    for (uint32_t i = 0; i < n; i++)
        if (ev[i].kind == RKV_EVENT_BLOCK_STORED) {
            t->stored_pages += ev[i].num_hashes;
            want += (size_t)ev[i].num_hashes * ev[i].page_size;
        }
    if (!tokens || want != ntokens || t->ntok + ntokens > 4096) {
        t->bad = 1;
        return;
    }
    memcpy(t->tok + t->ntok, tokens, ntokens * sizeof *tokens);
    t->ntok += ntokens;
}

Test(fleet_nats, tap_gets_the_stored_pages_token_ids)
{
    HARNESS_REQUIRE_SERVER();
    nats_harness h;
    memset(&h, 0, sizeof h);
    harness_start(&h);
    rkv_pool *pool = tu_pool(64, 4); /* page of 4 tokens */
    rkv_tree *tree = tu_event_tree(pool, 256, 1024);
    tap_log log;
    memset(&log, 0, sizeof log);
    rkv_fleet_pub_config cfg;
    rkv_fleet_pub_config_init(&cfg);
    cfg.model = MODEL;
    cfg.instance = 5;
    cfg.epoch = 1;
    cfg.batch_events = 4; /* several drains: ids must stay with their events */
    cfg.tap = record_tap;
    cfg.tap_ctx = &log;
    cfg.tap_tokens = (size_t)cfg.batch_events * RKV_EVENT_MAX_HASHES * 4;
    rkv_fleet_pub *pub = NULL;
    /* a tap without room for the ids of one event is refused */
    rkv_fleet_pub_config small = cfg;
    small.tap = NULL;
    cr_assert_eq(rkv_fleet_pub_create(&small, h.nc, tree, &pub), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_fleet_pub_create(&cfg, h.nc, tree, &pub), RKV_OK, "%s",
                 rkv_last_error());
    /* three prompts sharing a prefix, each cached page by page */
    int32_t want[4096];
    size_t nwant = 0;
    int32_t tok[3][24];
    for (int p = 0; p < 3; p++) {
        for (int i = 0; i < 24; i++)
            tok[p][i] = i < 8 ? 1000 + i : 100 * (p + 1) + i;
        rkv_match m;
        cr_assert_eq(rkv_tree_match(tree, 0, tok[p], 24, NULL, RKV_MATCH_PEEK, &m),
                     RKV_OK);
        uint32_t have = (uint32_t)m.matched_tokens;
        /* a block for every page; the cached ones come back as duplicates */
        rkv_block_id blocks[6], dups[6];
        rkv_insert_result res;
        cr_assert_eq(rkv_pool_alloc_n(pool, 6, blocks), RKV_OK, "%s", rkv_last_error());
        cr_assert_eq(rkv_tree_insert(tree, 0, tok[p], 24, blocks, dups, &res), RKV_OK,
                     "%s", rkv_last_error());
        cr_assert_eq(rkv_pool_unref_n(pool, 6, blocks), RKV_OK, "%s", rkv_last_error());
        memcpy(want + nwant, tok[p] + have, (24 - have) * sizeof *want);
        nwant += 24 - have;
    }
    /* no stream here: publishing fails (RKV_ERR_IO, counted), but the tap
     * sees each batch as it is drained, before it is published */
    for (int k = 0; k < 8; k++) {
        rkv_status s = rkv_fleet_pub_poll(pub, 1000 + (uint64_t)k, 0, 0);
        cr_assert(s == RKV_OK || s == RKV_ERR_IO, "%s", rkv_last_error());
    }
    cr_assert_eq(log.bad, 0, "the tap got ids that do not add up to its stored pages");
    cr_assert_eq(log.stored_pages, nwant / 4);
    cr_assert_eq(log.ntok, nwant);
    cr_assert_arr_eq(log.tok, want, nwant * sizeof *want);
    rkv_fleet_pub_destroy(pub);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
    harness_stop(&h);
}

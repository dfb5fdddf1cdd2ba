/*
 * tests/fleet/test_fleet_router.c -- the router daemon's limits, through
 * the daemon against a real nats-server: more instances than a reply
 * lists, several routers on one model, an instance whose snapshot is over
 * the server's 1 MiB payload. The test mostly plays the instances itself:
 * it publishes heartbeats and event batches (fleet/codec.h) directly, so
 * it can register a thousand instances cheaply and knows exactly what
 * each one holds; the large instance is a real tree with rkv_fleet_pub.
 *
 * Every wait is bounded and polls; nothing asserts on wall time.
 * Skipped (ctest: SKIP_REGULAR_EXPRESSION) when nats-server is missing.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fleet/codec.h"
#include "fleet/publisher.h"
#include "fleet/stand_in.h"
#include "tests/fleet/nats_harness.h"
#include "tests/support/handles.h"
#include "radixkv_router.h"

#define MODEL "routertest"
#define CHAIN 40u /* pages in the test's one shared prefix */

typedef struct rt {
    nats_harness h;
    pid_t router[2];
    jsCtx *js;
    uint64_t chain[CHAIN];
} rt;

/* memory: a --memory stream (lost when nats-server restarts) */
static void start_router_with(rt *t, int k, const char *hb_timeout_ms, int memory)
{
    char *argv[] = {RKV_ROUTER_BIN, "--server", t->h.url, "--model", MODEL,
                    "--heartbeat-timeout-ms", (char *)hb_timeout_ms,
                    "--snapshot-timeout-ms", "500", memory ? "--memory" : NULL, NULL};
    t->router[k] = harness_spawn(argv, 0);
    uint64_t deadline = harness_ms_now() + 60000;
    char buf[8192];
    while (!harness_stats(&t->h, MODEL, buf, sizeof buf, 200)) {
        int st;
        cr_assert_eq(waitpid(t->router[k], &st, WNOHANG), 0, "the router exited (%d)",
                     st);
        cr_assert_lt(harness_ms_now(), deadline, "the router did not answer");
    }
}

static void start_router(rt *t, int k, const char *hb_timeout_ms)
{
    start_router_with(t, k, hb_timeout_ms, 0);
}

/* Skipped without a nats-server; else a server, JetStream and the chain. */
static void bring_up(rt *t)
{
    HARNESS_REQUIRE_SERVER();
    memset(t, 0, sizeof *t);
    harness_start(&t->h);
    cr_assert_eq(natsConnection_JetStream(&t->js, t->h.nc, NULL), NATS_OK);
    uint64_t parent = RKV_HASH_ROOT;
    for (uint32_t j = 0; j < CHAIN; j++) {
        int32_t tok[16];
        for (int i = 0; i < 16; i++)
            tok[i] = (int32_t)(j * 16 + (uint32_t)i);
        t->chain[j] = parent = rkv_block_hash(parent, 0, tok, 16);
    }
}

/* The publisher of the tests' real instance: instance 9, epoch 1, a
 * heartbeat every 100 ms. */
static void instance_9(rkv_fleet_pub_config *cfg)
{
    *cfg = harness_pub_config(MODEL, 9, 1, 0);
}

static void teardown(rt *t)
{
    for (int k = 0; k < 2; k++)
        harness_end(&t->router[k], SIGTERM);
    jsCtx_Destroy(t->js);
    harness_stop(&t->h);
    nats_CloseAndWait(2000);
}

static void heartbeat(rt *t, uint64_t id, uint64_t last_seq)
{
    rkv_wire_heartbeat hb = {id, 1, last_seq, 0, 0};
    uint8_t buf[RKV_WIRE_HEARTBEAT_SIZE];
    size_t len = 0;
    char subj[128];
    snprintf(subj, sizeof subj, "radixkv." MODEL ".hb.%llu", (unsigned long long)id);
    cr_assert_eq(rkv_wire_encode_heartbeat(&hb, buf, sizeof buf, &len), RKV_OK);
    cr_assert_eq(natsConnection_Publish(t->h.nc, subj, buf, (int)len), NATS_OK);
}

/* Instance id stores the first `pages` pages of the chain as its events
 * 1..k (16 pages an event); returns k, its last seq. */
static uint64_t store_chain(rt *t, uint64_t id, uint32_t pages)
{
    rkv_event ev[(CHAIN + 15) / 16];
    uint32_t n = 0;
    for (uint32_t j = 0; j < pages; j += 16, n++) {
        memset(&ev[n], 0, sizeof ev[n]);
        ev[n].seq = n + 1;
        ev[n].kind = RKV_EVENT_BLOCK_STORED;
        ev[n].medium = RKV_MEDIUM_DEVICE;
        ev[n].page_size = 16;
        ev[n].parent_hash = j ? t->chain[j - 1] : RKV_HASH_ROOT;
        ev[n].num_hashes = (uint16_t)(pages - j < 16 ? pages - j : 16);
        memcpy(ev[n].hashes, &t->chain[j], ev[n].num_hashes * sizeof(uint64_t));
    }
    if (n == 0)
        return 0;
    uint8_t buf[4096];
    size_t len = 0;
    char subj[128];
    snprintf(subj, sizeof subj, "radixkv." MODEL ".kv.%llu", (unsigned long long)id);
    cr_assert_eq(rkv_wire_encode_events(id, 1, ev, n, buf, sizeof buf, &len), RKV_OK,
                 "%s", rkv_last_error());
    cr_assert_eq(js_Publish(NULL, t->js, subj, buf, (int)len, NULL, NULL), NATS_OK);
    return n;
}

static int query_chain(rt *t, rkv_wire_reply *rep)
{
    uint8_t buf[RKV_WIRE_HEADER + 16 + 8 * CHAIN];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_query(0, t->chain, CHAIN, buf, sizeof buf, &len),
                 RKV_OK);
    return harness_route(&t->h, MODEL, buf, len, 3000, rep);
}

/* Waits until the router's stats show `live` live instances and `events`
 * applied events. */
static void wait_indexed(rt *t, uint32_t live, uint64_t events)
{
    char text[16384];
    uint64_t deadline = harness_ms_now() + 30000;
    for (;;) {
        cr_assert(harness_stats(&t->h, MODEL, text, sizeof text, 3000), "no stats");
        if (harness_stat_value(text, "radixkv_router_instances_live") == live &&
            harness_stat_value(text, "radixkv_router_events_applied_total") == events)
            return;
        cr_assert_lt(harness_ms_now(), deadline, "the router did not index them:\n%s", text);
        harness_nap_ms(50);
    }
}

/* Instance i's overlap with the chain in the test below: a spread of
 * overlaps, many instances tied, more than 64 holding something. */
static uint32_t pages_of(uint64_t id, uint32_t n)
{
    if (n <= 70)
        return (uint32_t)(id % 5) * 8; /* 0, 8, .. 32; 52 of 65 hold some */
    return id % 7 == 0 ? (uint32_t)(id % CHAIN) : 0;
}

/* n instances registered: the reply lists the min(n, 64) best by overlap
 * (ties: smaller id), in id order, and routes to one of the best. */
static void many_instances(uint32_t n)
{
    rt t;
    bring_up(&t);
    start_router(&t, 0, "600000");
    uint64_t events = 0;
    /* heartbeats first: every instance is heard from before it is indexed */
    for (uint64_t id = 1; id <= n; id++)
        heartbeat(&t, id, (pages_of(id, n) + 15) / 16);
    for (uint64_t id = 1; id <= n; id++)
        events += store_chain(&t, id, pages_of(id, n));
    wait_indexed(&t, n, events);

    /* the expected list: ids by (pages desc, id asc), the first 64 */
    uint64_t *ids = calloc(n, sizeof *ids);
    cr_assert_not_null(ids);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = i + 1;
    for (uint32_t i = 1; i < n; i++) /* insertion sort: n <= 1024 */
        for (uint32_t j = i; j > 0; j--) {
            uint32_t a = pages_of(ids[j - 1], n), b = pages_of(ids[j], n);
            if (a > b || (a == b && ids[j - 1] < ids[j]))
                break;
            uint64_t x = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = x;
        }
    uint32_t want = n < RKV_WIRE_MAX_ROUTE ? n : RKV_WIRE_MAX_ROUTE;
    int in_top[1025] = {0};
    for (uint32_t i = 0; i < want; i++)
        in_top[ids[i]] = 1;

    /* several instances hold the longest overlap (13 of 65, 4 of 1024)
     * and none reports load: each query goes to one of them, and the
     * router counts it there, so three queries go to three of them (they
     * all went to the smallest id before) */
    uint64_t routed[3] = {0};
    for (int round = 0; round < 3; round++) {
        rkv_wire_reply rep;
        cr_assert(query_chain(&t, &rep), "no reply with %u instances", n);
        cr_assert_eq(rep.status, RKV_OK);
        cr_assert_eq(rep.count, want);
        cr_assert_eq(pages_of(rep.instance, n), pages_of(ids[0], n),
                     "routed to %llu, not one of the longest overlaps",
                     (unsigned long long)rep.instance);
        for (int k = 0; k < round; k++)
            cr_assert_neq(rep.instance, routed[k], "query %d went to %llu again",
                          round, (unsigned long long)rep.instance);
        routed[round] = rep.instance;
        cr_assert_eq(rep.pages, pages_of(ids[0], n));
        for (uint32_t k = 0; k < rep.count; k++) {
            cr_assert(rep.ids[k] >= 1 && rep.ids[k] <= n && in_top[rep.ids[k]],
                      "lists instance %llu, not among the best %u",
                      (unsigned long long)rep.ids[k], want);
            cr_assert_eq(rep.id_pages[k], pages_of(rep.ids[k], n));
            if (k)
                cr_assert_gt(rep.ids[k], rep.ids[k - 1], "not in id order");
        }
    }
    /* the router is still there and still answers stats */
    char text[16384];
    cr_assert(harness_stats(&t.h, MODEL, text, sizeof text, 3000));
    cr_assert_eq(harness_stat_value(text, "radixkv_router_bad_messages_total"), 0);
    free(ids);
    teardown(&t);
}

Test(fleet_router, reply_lists_best_64_of_65_instances)
{
    many_instances(65);
}

Test(fleet_router, reply_lists_best_64_of_1024_instances)
{
    many_instances(RKV_ROUTER_MAX_INSTANCES);
}

/* Replies to one route query sent with the test's own inbox, counted for
 * wait_ms after it went out. */
static int replies_to_one_query(rt *t, int64_t wait_ms)
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    cr_assert_eq(natsInbox_Create(&inbox), NATS_OK);
    cr_assert_eq(natsConnection_SubscribeSync(&sub, t->h.nc, (const char *)inbox),
                 NATS_OK);
    uint8_t buf[RKV_WIRE_HEADER + 16 + 8 * CHAIN];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_query(0, t->chain, CHAIN, buf, sizeof buf, &len),
                 RKV_OK);
    cr_assert_eq(natsConnection_PublishRequest(t->h.nc, "radixkv." MODEL ".route",
                                               (const char *)inbox, buf, (int)len),
                 NATS_OK);
    int n = 0;
    uint64_t end = harness_ms_now() + (uint64_t)wait_ms;
    for (;;) {
        uint64_t now = harness_ms_now();
        if (now >= end)
            break;
        natsMsg *m = NULL;
        if (natsSubscription_NextMsg(&m, sub, (int64_t)(end - now)) == NATS_OK) {
            rkv_wire_reply rep;
            cr_assert_eq(rkv_wire_decode_reply(natsMsg_GetData(m),
                                               (size_t)natsMsg_GetDataLength(m), &rep),
                         RKV_OK);
            cr_assert_eq(rep.status, RKV_OK, "status %u", rep.status);
            n++;
            natsMsg_Destroy(m);
        }
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    return n;
}

/* Every router's stats for one request on a private inbox (1 s for
 * answers): how many answered, and each one's queries_total in q[0..4). */
static int all_stats(rt *t, double q[4])
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    cr_assert_eq(natsInbox_Create(&inbox), NATS_OK);
    cr_assert_eq(natsConnection_SubscribeSync(&sub, t->h.nc, (const char *)inbox),
                 NATS_OK);
    cr_assert_eq(natsConnection_PublishRequest(t->h.nc, "radixkv." MODEL ".stats",
                                               (const char *)inbox, "", 0),
                 NATS_OK);
    static char text[16384];
    natsMsg *m = NULL;
    int n = 0;
    while (natsSubscription_NextMsg(&m, sub, 1000) == NATS_OK) {
        snprintf(text, sizeof text, "%.*s", natsMsg_GetDataLength(m),
                 natsMsg_GetData(m));
        if (n < 4)
            q[n] = harness_stat_value(text, "radixkv_router_queries_total");
        n++;
        natsMsg_Destroy(m);
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    return n;
}

/* Two routers on one model share the queries (a NATS queue group): each
 * query is answered once, and both answer some. */
Test(fleet_router, two_routers_share_the_queries)
{
    rt t;
    bring_up(&t);
    start_router(&t, 0, "600000");
    start_router(&t, 1, "600000");
    double qn0[4];
    uint64_t up = harness_ms_now() + 60000;
    while (all_stats(&t, qn0) < 2) /* the second may not be subscribed yet */
        cr_assert_lt(harness_ms_now(), up, "the second router does not answer");
    uint64_t last = store_chain(&t, 1, CHAIN);
    /* both indexed it: every answer (whichever router) lists it; the
     * instance heartbeats all along, as a real one does (the second router
     * may not have been up for the first heartbeat) */
    uint64_t deadline = harness_ms_now() + 60000;
    int agreed = 0, asked = 0;
    while (agreed < 20) {
        rkv_wire_reply rep;
        heartbeat(&t, 1, last);
        cr_assert(query_chain(&t, &rep));
        asked++;
        agreed = rep.status == RKV_OK && rep.count == 1 && rep.pages == CHAIN
                     ? agreed + 1 : 0;
        cr_assert_lt(harness_ms_now(), deadline, "the routers did not index instance 1");
    }
    for (int q = 0; q < 10; q++) {
        heartbeat(&t, 1, last);
        cr_assert_eq(replies_to_one_query(&t, 300), 1, "query %d", q);
    }
    /* each router's own count: the two add up to what was asked (each
     * query counted once), and each took a share */
    double qn[4];
    cr_assert_eq(all_stats(&t, qn), 2, "stats go to every router");
    cr_assert_gt(qn[0], 0, "a router answered no query");
    cr_assert_gt(qn[1], 0, "a router answered no query");
    cr_assert_eq(qn[0] + qn[1], asked + 10);
    teardown(&t);
}

/* An instance of 200,000 cached blocks (a snapshot of about 5 MB) whose
 * events overflowed its ring: the router resyncs it from a snapshot that
 * NATS's default 1 MiB max payload cannot carry in one message, so it
 * comes in chunks; afterwards the router holds every block. */
#define BIG_PROMPTS 200u
#define BIG_PAGES 1000u
Test(fleet_router, snapshot_over_max_payload_arrives_in_chunks)
{
    rt t;
    bring_up(&t);
    start_router(&t, 0, "600000");
    cr_assert_eq(natsConnection_GetMaxPayload(t.h.nc), 1024 * 1024,
                 "not the server's default max payload");
    rkv_pool *pool = tu_pool(BIG_PROMPTS * BIG_PAGES, 16);
    /* a ring of 64 overflows: a RESYNC marker, then a snapshot */
    rkv_tree *tree = tu_event_tree(pool, 64, 0);
    int32_t *tok = malloc(BIG_PAGES * 16 * sizeof *tok);
    cr_assert_not_null(tok);
    for (uint32_t k = 0; k < BIG_PROMPTS; k++) {
        for (uint32_t i = 0; i < BIG_PAGES * 16; i++)
            tok[i] = (int32_t)(k * 7919u + i);
        tok[0] = (int32_t)k; /* no two prompts share a page */
        cr_assert_eq(rkv_stand_in_serve(pool, tree, 0, tok, BIG_PAGES * 16), RKV_OK,
                     "%s", rkv_last_error());
    }
    rkv_tree_stats ts;
    cr_assert_eq(rkv_tree_get_stats(tree, &ts), RKV_OK);
    cr_assert_eq(ts.cached_blocks, BIG_PROMPTS * BIG_PAGES);

    rkv_fleet_pub_config cfg;
    instance_9(&cfg);
    rkv_fleet_pub *pub = NULL;
    cr_assert_eq(rkv_fleet_pub_create(&cfg, t.h.nc, tree, &pub), RKV_OK, "%s",
                 rkv_last_error());
    char text[16384];
    uint64_t deadline = harness_ms_now() + 120000;
    for (;;) {
        rkv_status s = rkv_fleet_pub_poll(pub, harness_ms_now(), 0, 0);
        cr_assert(s == RKV_OK || s == RKV_ERR_IO, "%s", rkv_last_error());
        cr_assert(harness_stats(&t.h, MODEL, text, sizeof text, 3000));
        if (harness_stat_value(text, "radixkv_router_snapshots_applied_total") >= 1)
            break;
        rkv_fleet_pub_stats ps;
        cr_assert_eq(rkv_fleet_pub_get_stats(pub, &ps), RKV_OK);
        cr_assert_lt(harness_ms_now(), deadline,
                     "no snapshot applied: %llu served, %llu failed\n%s",
                     (unsigned long long)ps.snapshots_served,
                     (unsigned long long)ps.snapshot_failures, text);
        harness_nap_ms(50);
    }
    rkv_fleet_pub_stats ps;
    cr_assert_eq(rkv_fleet_pub_get_stats(pub, &ps), RKV_OK);
    cr_assert_geq(ps.snapshots_chunked, 1, "the snapshot fit one message");
    cr_assert_geq(harness_stat_value(text, "radixkv_router_index_entries"),
                  BIG_PROMPTS * BIG_PAGES);
    /* every prompt is found whole on the instance */
    static uint8_t qbuf[RKV_WIRE_HEADER + 16 + 8 * BIG_PAGES];
    uint64_t h[BIG_PAGES];
    for (uint32_t k = 0; k < BIG_PROMPTS; k += 37) {
        for (uint32_t i = 0; i < BIG_PAGES * 16; i++)
            tok[i] = (int32_t)(k * 7919u + i);
        tok[0] = (int32_t)k;
        uint64_t parent = RKV_HASH_ROOT;
        for (uint32_t j = 0; j < BIG_PAGES; j++)
            h[j] = parent = rkv_block_hash(parent, 0, tok + j * 16, 16);
        size_t len = 0;
        cr_assert_eq(rkv_wire_encode_query(0, h, BIG_PAGES, qbuf, sizeof qbuf, &len),
                     RKV_OK);
        rkv_wire_reply rep;
        cr_assert(harness_route(&t.h, MODEL, qbuf, len, 3000, &rep));
        cr_assert_eq(rep.status, RKV_OK);
        cr_assert_eq(rep.instance, 9);
        cr_assert_eq(rep.pages, BIG_PAGES, "prompt %u: %u pages", k, rep.pages);
    }
    free(tok);
    rkv_fleet_pub_destroy(pub);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
    teardown(&t);
}

/* Instance 2 caches the whole chain, instance 1 a little of it; instance 2
 * dies (its heartbeats stop), then the router is killed and restarted. The
 * stream still holds instance 2's events, but nothing says it is alive: the
 * restarted router must not route to it (nor list it), while instance 1,
 * which goes on heartbeating, is routed to as soon as it is heard. */
Test(fleet_router, restart_does_not_resurrect_a_dead_instance)
{
    rt t;
    bring_up(&t);
    start_router(&t, 0, "30000");
    heartbeat(&t, 1, 1);
    heartbeat(&t, 2, 3);
    uint64_t events = store_chain(&t, 1, 8) + store_chain(&t, 2, CHAIN);
    wait_indexed(&t, 2, events);
    rkv_wire_reply rep;
    cr_assert(query_chain(&t, &rep));
    cr_assert_eq(rep.instance, 2, "before: routed to %llu",
                 (unsigned long long)rep.instance);

    harness_end(&t.router[0], SIGKILL); /* instance 2 is dead by now, too */
    start_router(&t, 0, "30000");
    int routed_to_1 = 0;
    uint64_t deadline = harness_ms_now() + 20000;
    while (routed_to_1 < 20) {
        heartbeat(&t, 1, 1);
        cr_assert(query_chain(&t, &rep));
        for (uint32_t k = 0; k < rep.count; k++)
            cr_assert_neq(rep.ids[k], 2, "the dead instance is listed again");
        if (rep.status == RKV_OK) {
            cr_assert_eq(rep.instance, 1, "routed to %llu",
                         (unsigned long long)rep.instance);
            cr_assert_eq(rep.pages, 8);
            routed_to_1++;
        } else {
            cr_assert_eq(rep.status, RKV_ERR_STATE, "status %u", rep.status);
        }
        cr_assert_lt(harness_ms_now(), deadline, "instance 1 is never routed to");
        harness_nap_ms(20);
    }
    teardown(&t);
}

/* One prompt of `pages` pages, distinct per k, and its page hashes. */
static void prompt_of(uint32_t k, uint32_t pages, int32_t *tok, uint64_t *h)
{
    for (uint32_t i = 0; i < pages * 16; i++)
        tok[i] = (int32_t)(k * 1000003u + i);
    uint64_t parent = RKV_HASH_ROOT;
    for (uint32_t j = 0; j < pages; j++)
        h[j] = parent = rkv_block_hash(parent, 0, tok + j * 16, 16);
}

/* The router's overlap for instance 9 on hashes h[0..n); 0 if unlisted. */
static uint32_t pages_on_9(rt *t, const uint64_t *h, uint32_t n)
{
    uint8_t buf[RKV_WIRE_HEADER + 16 + 8 * 64];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_query(0, h, n, buf, sizeof buf, &len), RKV_OK);
    rkv_wire_reply rep;
    if (!harness_route(&t->h, MODEL, buf, len, 1000, &rep))
        return 0;
    for (uint32_t k = 0; k < rep.count; k++)
        if (rep.ids[k] == 9)
            return rep.id_pages[k];
    return 0;
}

/* A --memory stream dies with nats-server. The router notices, creates it
 * again, reads it from its start and resyncs its instances: what the
 * instance caches after the restart reaches the index. */
Test(fleet_router, memory_stream_lost_in_server_restart_is_rebuilt)
{
    rt t;
    bring_up(&t);
    start_router_with(&t, 0, "60000", 1);
    rkv_pool *pool = tu_pool(1024, 16);
    rkv_tree *tree = tu_event_tree(pool, 1024, 0);
    rkv_fleet_pub_config cfg;
    instance_9(&cfg);
    cfg.publish_wait_ms = 200;
    rkv_fleet_pub *pub = NULL;
    cr_assert_eq(rkv_fleet_pub_create(&cfg, t.h.nc, tree, &pub), RKV_OK);
    int32_t tok[20 * 16];
    uint64_t a[20], b[20];
    prompt_of(1, 20, tok, a);
    cr_assert_eq(rkv_stand_in_serve(pool, tree, 0, tok, 20 * 16), RKV_OK);
    uint64_t deadline = harness_ms_now() + 20000;
    while (pages_on_9(&t, a, 20) != 20) {
        rkv_fleet_pub_poll(pub, harness_ms_now(), 0, 0);
        cr_assert_lt(harness_ms_now(), deadline, "prompt a never indexed");
        harness_nap_ms(20);
    }

    harness_kill_server(&t.h, SIGKILL);
    harness_restart_server(&t.h); /* same port and store: the memory stream is gone */
    prompt_of(2, 20, tok, b);
    cr_assert_eq(rkv_stand_in_serve(pool, tree, 0, tok, 20 * 16), RKV_OK);
    deadline = harness_ms_now() + 30000;
    while (pages_on_9(&t, b, 20) != 20 || pages_on_9(&t, a, 20) != 20) {
        rkv_fleet_pub_poll(pub, harness_ms_now(), 0, 0);
        cr_assert_lt(harness_ms_now(), deadline,
                     "the index is frozen: prompt b has %u pages, a %u",
                     pages_on_9(&t, b, 20), pages_on_9(&t, a, 20));
        harness_nap_ms(20);
    }
    /* the stream exists again */
    jsStreamInfo *si = NULL;
    cr_assert_eq(js_GetStreamInfo(&si, t.js, "RADIXKV_" MODEL, NULL, NULL), NATS_OK);
    jsStreamInfo_Destroy(si);
    rkv_fleet_pub_destroy(pub);
    rkv_tree_destroy(tree);
    rkv_pool_destroy(pool);
    teardown(&t);
}

/*
 * tests/fleet/test_fleet_procs.c -- the fleet as processes, end to end: a
 * real `nats-server -js` (free loopback port, temporary store dir, stopped
 * at the end), the router daemon (`radixkv router`, and after a kill -9
 * the radixkv-router program: one implementation, two commands), and THREE
 * radixkv-fleet-instance processes, each replaying one slice of the
 * embedded conversation trace (fleet/stand_in.h).
 *
 * The test keeps a mirror of each instance's tree: the same slice served
 * by the same code (rkv_stand_in_serve) into a pool of the same size, so
 * the mirror holds what the instance's tree holds. "Agree", checked by
 * polling (every wait is bounded and generous; nothing asserts on wall
 * time): for every prompt of the trace slice (half queried by page
 * hashes, half by token ids), the router's reply lists exactly the live
 * instances, each with the leading pages its mirror caches, and routes to
 * one holding the most (loads are all 0).
 *
 * Scenarios, in order: the three instances replay, the router agrees; the
 * metrics come over HTTP, and a scrape left half-sent holds up neither
 * routing nor the next scrape; kill -9 the router and restart it: the
 * index is rebuilt from the stream and every reply is the same; reset
 * instance 1 (SIGUSR1): no query is routed to its old prefixes; kill -9
 * instance 3: it leaves routing once its heartbeat times out.
 *
 * Skipped (ctest: SKIP_REGULAR_EXPRESSION) when nats-server is missing.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet/codec.h"
#include "fleet/stand_in.h"
#include "tests/fleet/nats_harness.h"

#define MODEL "proctest"
#define NI 3
#define LIMIT "36"
#define MAX_TOKENS "4096"
#define BLOCKS 65536u
#define PAGE 16u        /* radixkv-fleet-instance's page size */
#define HB_TIMEOUT "2500"
#define WAIT_MS 45000u  /* a loaded 2-core machine under ASan */

typedef struct procs {
    nats_harness h;
    pid_t router, inst[NI];
    int live[NI];
    char mport[16];
    rkv_pool *pool[NI];
    rkv_tree *tree[NI];
    rkv_prompt_set q; /* every prompt of the trace's first LIMIT requests */
} procs;

static int stats_nats(procs *f, char *buf, size_t cap, int64_t wait_ms)
{
    return harness_stats(&f->h, MODEL, buf, cap, wait_ms);
}

/* `radixkv router` (subcommand) or the radixkv-router program. Load
 * costs nothing in its score: the queries check that the index routes to
 * the longest overlap, and the load the router counts for what it routed
 * would otherwise send a run of queries elsewhere. */
static void start_router(procs *f, int subcommand)
{
    char *sub[] = {RKV_CMD_BIN, "router", "--server", f->h.url, "--model", MODEL,
                   "--heartbeat-timeout-ms", HB_TIMEOUT, "--snapshot-timeout-ms", "500",
                   "--metrics-port", f->mport, "--queue-weight", "0",
                   "--running-weight", "0", NULL};
    char *prog[] = {RKV_ROUTER_BIN, "--server", f->h.url, "--model", MODEL,
                    "--heartbeat-timeout-ms", HB_TIMEOUT, "--snapshot-timeout-ms", "500",
                    "--metrics-port", f->mport, "--queue-weight", "0",
                    "--running-weight", "0", NULL};
    f->router = harness_spawn(subcommand ? sub : prog, 0);
    uint64_t deadline = harness_ms_now() + 15000;
    char buf[8192];
    while (!stats_nats(f, buf, sizeof buf, 200)) {
        int st;
        cr_assert_eq(waitpid(f->router, &st, WNOHANG), 0, "the router exited (%d)", st);
        cr_assert_lt(harness_ms_now(), deadline, "the router did not answer");
    }
}

static void start_instance(procs *f, int i)
{
    char id[16], slice[32];
    snprintf(id, sizeof id, "%d", i + 1);
    snprintf(slice, sizeof slice, "%d/%d", i, NI);
    char blocks[16];
    snprintf(blocks, sizeof blocks, "%u", BLOCKS);
    char *argv[] = {RKV_INSTANCE_BIN, "--server", f->h.url, "--model", MODEL,
                    "--instance", id, "--trace", "@embedded", "--slice", slice,
                    "--limit", LIMIT, "--max-tokens", MAX_TOKENS, "--rate", "0",
                    "--blocks", blocks, "--heartbeat-ms", "200", NULL};
    f->inst[i] = harness_spawn(argv, 0);
    f->live[i] = 1;
}

/* The mirror of instance i: the same slice, served the same way. */
static void build_mirror(procs *f, int i)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = BLOCKS;
    pc.page_size = PAGE;
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    cr_assert_eq(rkv_pool_create(&pc, &f->pool[i]), RKV_OK);
    cr_assert_eq(rkv_tree_create(f->pool[i], &tc, &f->tree[i]), RKV_OK);
    rkv_prompt_set s;
    cr_assert_eq(rkv_stand_in_load("@embedded", (uint32_t)i, NI, atoi(LIMIT),
                                   atoi(MAX_TOKENS), &s), RKV_OK, "%s", rkv_last_error());
    cr_assert_gt(s.n, 0);
    for (uint32_t k = 0; k < s.n; k++)
        cr_assert_eq(rkv_stand_in_serve(f->pool[i], f->tree[i], 0, s.tok[k], s.len[k]),
                     RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_tree_check(f->tree[i]), RKV_OK, "%s", rkv_last_error());
    rkv_prompt_set_free(&s);
}

static uint32_t mirror_pages(procs *f, int i, uint32_t q)
{
    rkv_match m;
    cr_assert_eq(rkv_tree_match(f->tree[i], 0, f->q.tok[q], f->q.len[q], NULL,
                                RKV_MATCH_PEEK, &m), RKV_OK);
    return m.num_blocks;
}

static void teardown(procs *f)
{
    for (int i = 0; i < NI; i++) {
        harness_end(&f->inst[i], SIGTERM);
        rkv_tree_destroy(f->tree[i]);
        rkv_pool_destroy(f->pool[i]);
    }
    harness_end(&f->router, SIGTERM);
    harness_stop(&f->h);
    rkv_prompt_set_free(&f->q);
    nats_CloseAndWait(2000);
}

/* Query q (odd: by token ids, even: by page hashes); 0: no answer. */
static int route(procs *f, uint32_t q, rkv_wire_reply *rep)
{
    static uint8_t buf[RKV_WIRE_HEADER + 16 + 8 * 4096];
    uint64_t h[4096], parent = RKV_HASH_ROOT;
    uint32_t n = f->q.len[q], np = n / PAGE;
    size_t len = 0;
    cr_assert_leq(n, 4096);
    if (q % 2) {
        cr_assert_eq(rkv_wire_encode_query_tokens(0, f->q.tok[q], n, PAGE, buf,
                                                  sizeof buf, &len), RKV_OK);
    } else {
        for (uint32_t j = 0; j < np; j++)
            h[j] = parent = rkv_block_hash(parent, 0, f->q.tok[q] + j * PAGE, PAGE);
        cr_assert_eq(rkv_wire_encode_query(0, h, np, buf, sizeof buf, &len), RKV_OK);
    }
    return harness_route(&f->h, MODEL, buf, len, 2000, rep);
}

/* Does every reply agree with the mirrors of the live instances? */
static int agree(procs *f, rkv_wire_reply *replies, char *why, size_t cap)
{
    int nlive = 0;
    for (int i = 0; i < NI; i++)
        nlive += f->live[i];
    for (uint32_t q = 0; q < f->q.n; q++) {
        rkv_wire_reply *rep = &replies[q];
        if (!route(f, q, rep)) {
            snprintf(why, cap, "query %u: no answer", q);
            return 0;
        }
        if (rep->status != RKV_OK || rep->count != (uint32_t)nlive) {
            snprintf(why, cap, "query %u: status %u, %u instances listed, %d live", q,
                     rep->status, rep->count, nlive);
            return 0;
        }
        uint32_t best = 0, chosen = UINT32_MAX;
        for (uint32_t k = 0; k < rep->count; k++) {
            uint64_t id = rep->ids[k];
            if (id < 1 || id > NI || !f->live[id - 1]) {
                snprintf(why, cap, "query %u lists instance %llu", q,
                         (unsigned long long)id);
                return 0;
            }
            uint32_t want = mirror_pages(f, (int)id - 1, q);
            if (rep->id_pages[k] != want) {
                snprintf(why, cap, "query %u: instance %llu holds %u pages, router says %u",
                         q, (unsigned long long)id, want, rep->id_pages[k]);
                return 0;
            }
            if (want > best)
                best = want;
            if (id == rep->instance)
                chosen = rep->id_pages[k];
        }
        cr_assert_eq(chosen, rep->pages, "query %u: routed to %llu, %u pages, listed %u",
                     q, (unsigned long long)rep->instance, rep->pages, chosen);
        cr_assert_eq(rep->pages, best, "query %u: routed to %u pages, %u available", q,
                     rep->pages, best);
    }
    return 1;
}

static void wait_agree(procs *f, rkv_wire_reply *replies, const char *when)
{
    uint64_t deadline = harness_ms_now() + WAIT_MS;
    char why[256] = "";
    while (!agree(f, replies, why, sizeof why)) {
        cr_assert_lt(harness_ms_now(), deadline, "%s: the router disagrees: %s", when, why);
        harness_nap_ms(100);
    }
}

/* GET /metrics from the router's HTTP port; the body into buf. */
static int http_metrics(procs *f, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)atoi(f->mport));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return 0;
    }
    static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    cr_assert_eq(send(fd, req, sizeof req - 1, MSG_NOSIGNAL), (ssize_t)sizeof req - 1);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = recv(fd, buf + n, cap - 1 - n, 0)) > 0)
        n += (size_t)k;
    close(fd);
    buf[n] = 0;
    if (strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) != 0)
        return 0;
    char *body = strstr(buf, "\r\n\r\n");
    cr_assert_not_null(body);
    memmove(buf, body + 4, strlen(body + 4) + 1);
    return 1;
}

static double stat_value(const char *text, const char *name)
{
    return harness_stat_value(text, name);
}

Test(fleet_procs, three_instances_kill9_reset_and_death)
{
    HARNESS_REQUIRE_SERVER();
    procs f;
    memset(&f, 0, sizeof f);
    harness_start(&f.h);
    snprintf(f.mport, sizeof f.mport, "%d", harness_free_port());
    start_router(&f, 1);
    for (int i = 0; i < NI; i++)
        start_instance(&f, i);
    for (int i = 0; i < NI; i++)
        build_mirror(&f, i);
    cr_assert_eq(rkv_stand_in_load("@embedded", NI, NI, atoi(LIMIT), atoi(MAX_TOKENS),
                                   &f.q), RKV_OK);
    cr_assert_eq(f.q.n, (uint32_t)atoi(LIMIT));
    rkv_wire_reply *ref = calloc(f.q.n, sizeof *ref), *now = calloc(f.q.n, sizeof *now);
    cr_assert(ref && now);

    /* 1. the slices are replayed and the router agrees with every tree */
    wait_agree(&f, ref, "after the replay");
    int shared = 0, several = 0;
    for (uint32_t q = 0; q < f.q.n; q++) {
        uint32_t holders = 0;
        for (uint32_t k = 0; k < ref[q].count; k++)
            holders += ref[q].id_pages[k] > 0;
        shared += holders == NI;
        several += ref[q].pages > 0;
    }
    cr_assert_gt(shared, 0, "no prefix is shared by all instances: a weak test");
    cr_assert_eq(several, (int)f.q.n, "a prompt of the trace is cached nowhere");

    /* 2. the metrics over HTTP */
    char text[32768];
    cr_assert(http_metrics(&f, text, sizeof text), "no metrics on port %s", f.mport);
    cr_assert_eq(stat_value(text, "radixkv_router_instances_live"), NI);
    cr_assert_gt(stat_value(text, "radixkv_router_events_applied_total"), 0);
    cr_assert_geq(stat_value(text, "radixkv_router_queries_total"), f.q.n);
    cr_assert_gt(stat_value(text, "radixkv_router_index_entries"), 0);
    cr_assert_eq(stat_value(text, "radixkv_router_bad_messages_total"), 0);
    /* a clean run has no stale events (heartbeats lag the stream by design
     * and must not count as such) */
    cr_assert_eq(stat_value(text, "radixkv_router_events_stale_total"), 0);
    cr_assert_not_null(strstr(text, "radixkv_router_query_latency_seconds{quantile=\"0.99\"} "));

    /* a scrape that never completes does not hold up routing */
    int stuck = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in ma;
    memset(&ma, 0, sizeof ma);
    ma.sin_family = AF_INET;
    ma.sin_port = htons((uint16_t)atoi(f.mport));
    ma.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(stuck, (struct sockaddr *)&ma, sizeof ma), 0);
    cr_assert_eq(send(stuck, "GET /metr", 9, MSG_NOSIGNAL), 9);
    wait_agree(&f, now, "with a stuck scrape open");
    cr_assert(http_metrics(&f, text, sizeof text), "a stuck scrape blocks the next");
    close(stuck);

    /* 3. kill -9 the router; the program restarts it from the stream and
     * answers exactly the same */
    harness_end(&f.router, SIGKILL);
    start_router(&f, 0);
    wait_agree(&f, now, "after kill -9 and restart");
    for (uint32_t q = 0; q < f.q.n; q++) {
        cr_assert_eq(now[q].instance, ref[q].instance, "query %u routed elsewhere", q);
        cr_assert_eq(now[q].pages, ref[q].pages);
        cr_assert_eq(now[q].count, ref[q].count);
        for (uint32_t k = 0; k < now[q].count; k++) {
            cr_assert_eq(now[q].ids[k], ref[q].ids[k]);
            cr_assert_eq(now[q].id_pages[k], ref[q].id_pages[k]);
        }
    }
    char nats_text[32768];
    cr_assert(stats_nats(&f, nats_text, sizeof nats_text, 2000));
    cr_assert_gt(stat_value(nats_text, "radixkv_router_events_applied_total"), 0,
                 "the restarted router applied nothing from the stream");

    /* 4. reset instance 1: none of its old prefixes is routed to it */
    cr_assert_eq(kill(f.inst[0], SIGUSR1), 0);
    cr_assert_eq(rkv_tree_reset(f.tree[0]), RKV_OK);
    wait_agree(&f, now, "after instance 1's reset");
    int moved = 0;
    for (uint32_t q = 0; q < f.q.n; q++) {
        for (uint32_t k = 0; k < now[q].count; k++)
            if (now[q].ids[k] == 1)
                cr_assert_eq(now[q].id_pages[k], 0);
        if (now[q].instance == 1)
            cr_assert_eq(now[q].pages, 0, "query %u routed to a reset prefix", q);
        moved += ref[q].instance == 1 && ref[q].pages > 0;
    }
    cr_assert_gt(moved, 0, "instance 1 was never chosen: the reset tested nothing");

    /* 5. instance 3 dies: it leaves routing once its heartbeat times out */
    harness_end(&f.inst[2], SIGKILL);
    f.live[2] = 0;
    wait_agree(&f, now, "after instance 3 died");
    for (uint32_t q = 0; q < f.q.n; q++)
        cr_assert_neq(now[q].instance, 3);
    cr_assert(http_metrics(&f, text, sizeof text));
    cr_assert_geq(stat_value(text, "radixkv_router_instances_expired_total"), 1);
    cr_assert_eq(stat_value(text, "radixkv_router_instances_live"), NI - 1);
    free(ref);
    free(now);
    teardown(&f);
}

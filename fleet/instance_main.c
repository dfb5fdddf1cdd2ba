/*
 * fleet/instance_main.c -- radixkv-fleet-instance: a stand-in serving
 * instance for trying the fleet on one machine. It owns a metadata-only
 * pool and a tree with KV events on, caches synthetic prompts (a system
 * prompt shared by every instance with the same --seed-shared, then a
 * per-request tail) at --rate prompts per second, and publishes its events
 * and heartbeats through rkv_fleet_pub. There is no model: "serving" a
 * prompt is caching its pages (match, lock, allocate with eviction, insert,
 * unlock), which is what a server embedding radixkv does around prefill.
 *
 * With --trace it serves the prompts of one slice of a Mooncake trace
 * instead (fleet/stand_in.h: --slice K/N of the first --limit requests),
 * as fast as it can with --rate 0; SIGUSR1 resets its tree (every cached
 * page dropped: the router must stop routing to them). It prints "served N
 * prompts" once the slice is cached, "reset" after a reset.
 *
 * With --instances N it stands in for instances ID..ID+N-1 at once (one
 * pool, tree and publisher each, one NATS connection), so that one process
 * can feed a router the events and heartbeats of a 1,024-instance fleet.
 *
 * With --echo it answers route queries with a fixed reply instead, on the
 * delivery thread as the router does: the transport's floor.
 *
 * With --query it instead asks the router where each of its prompts
 * should go and prints the replies (instance and overlap pages); the
 * query carries token ids (route query version 2) with --by-tokens.
 *
 * With --zmq-pub it also publishes its events in the vLLM KV-event format
 * (fleet/kvev_zpub.h, as the publisher's tap), with a replay socket with
 * --zmq-replay, with each stored page's token ids (the tree keeps them
 * for its events: rkv_tree_config.event_tokens).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet/codec.h"
#include "fleet/daemon_util.h"
#include "fleet/nats_auth.h"
#include "fleet/nats_loop.h"
#include "fleet/publisher.h"
#include "fleet/stand_in.h"
#ifdef RKV_HAVE_ZMQ
#include "fleet/kvev_zpub.h"
#endif

#define PAGE 16u
#define MAX_TOK 1024u

static volatile sig_atomic_t g_reset;
static void on_usr1(int sig)
{
    (void)sig;
    g_reset = 1;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Prompt k: system prompt (shared seed) of sys tokens, then one of
 * `topics` topic prefixes, then a unique tail. */
static uint32_t prompt(uint64_t shared, uint64_t seed, uint64_t k, uint32_t topics,
                       int32_t *tok)
{
    uint32_t n = 0, sys = 256, topic_len = 128, tail = 64;
    uint64_t topic = mix(seed ^ k) % topics;
    for (uint32_t i = 0; i < sys; i++)
        tok[n++] = (int32_t)(mix(shared * 131 + i) % 32000);
    for (uint32_t i = 0; i < topic_len; i++)
        tok[n++] = (int32_t)(mix(shared * 7919 + topic * 1000 + i) % 32000);
    for (uint32_t i = 0; i < tail; i++)
        tok[n++] = (int32_t)(mix(seed * 104729 + k * 4096 + i) % 32000);
    return n;
}

/* One route query; returns its round trip in microseconds (UINT64_MAX:
 * no answer). Prints the reply unless quiet. */
static uint64_t query(natsConnection *nc, const char *model, const int32_t *tok,
                      uint32_t n, uint64_t k, int by_tokens, int quiet)
{
    uint64_t h[MAX_TOK / PAGE], parent = RKV_HASH_ROOT;
    uint32_t pages = n / PAGE;
    for (uint32_t j = 0; j < pages; j++)
        h[j] = parent = rkv_block_hash(parent, 0, tok + j * PAGE, PAGE);
    uint8_t buf[RKV_WIRE_HEADER + 16 + 8 * MAX_TOK];
    size_t len = 0;
    char subj[160];
    natsMsg *m = NULL;
    rkv_wire_reply rep;
    rkv_status st = by_tokens
                        ? rkv_wire_encode_query_tokens(0, tok, n, PAGE, buf, sizeof buf, &len)
                        : rkv_wire_encode_query(0, h, pages, buf, sizeof buf, &len);
    if (st != RKV_OK ||
        rkv_fleet_subject(subj, sizeof subj, model, "route", 0, 0) != RKV_OK)
        return UINT64_MAX;
    uint64_t t0 = rkv_fleet_now_us();
    if (natsConnection_Request(&m, nc, subj, buf, (int)len, 1000) != NATS_OK) {
        printf("prompt %" PRIu64 ": no answer from the router\n", k);
        return UINT64_MAX;
    }
    uint64_t dt = rkv_fleet_now_us() - t0;
    if (!quiet && rkv_wire_decode_reply(natsMsg_GetData(m),
                                        (size_t)natsMsg_GetDataLength(m), &rep) == RKV_OK) {
        printf("prompt %" PRIu64 " (%u pages): instance %" PRIu64 ", %u pages cached;",
               k, pages, rep.instance, rep.pages);
        for (uint32_t i = 0; i < rep.count; i++)
            printf(" %" PRIu64 ":%u", rep.ids[i], rep.id_pages[i]);
        printf("\n");
    }
    natsMsg_Destroy(m);
    return dt;
}

/* One served instance: its pool, tree and publisher (and vLLM-format tap). */
typedef struct served {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_fleet_pub *pub;
#ifdef RKV_HAVE_ZMQ
    rkv_kvev_zpub *zpub;
#endif
} served;

static void served_free(served *x)
{
    rkv_fleet_pub_destroy(x->pub);
#ifdef RKV_HAVE_ZMQ
    rkv_kvev_zpub_destroy(x->zpub);
#endif
    rkv_tree_destroy(x->tree);
    rkv_pool_destroy(x->pool);
}

static int served_create(served *x, natsConnection *nc, const char *model, uint64_t id,
                         uint32_t blocks, uint64_t hb_ms, const char *zmq_pub,
                         const char *zmq_replay)
{
    memset(x, 0, sizeof *x);
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = blocks;
    pc.page_size = PAGE;
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.event_ring = 1u << 16;
    rkv_fleet_pub_config cfg;
    rkv_fleet_pub_config_for(&cfg, model, id, hb_ms);
#ifdef RKV_HAVE_ZMQ
    if (zmq_pub) {
        rkv_kvev_zpub_config zc;
        rkv_kvev_zpub_config_init(&zc);
        zc.endpoint = zmq_pub;
        zc.replay_endpoint = zmq_replay;
        if (rkv_kvev_zpub_create(&zc, &x->zpub) != RKV_OK) {
            fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
            return 1;
        }
        cfg.tap = rkv_kvev_zpub_tap;
        cfg.tap_ctx = x->zpub;
        /* a whole drained batch of stored events, each of the most
         * pages an event carries */
        cfg.tap_tokens = (size_t)cfg.batch_events * RKV_EVENT_MAX_HASHES * PAGE;
        /* the tree's ring holds the ids between polls, as its event
         * ring (2^16 events) holds the events */
        tc.event_tokens = 1u << 22;
    }
#else
    (void)zmq_replay;
    if (zmq_pub) {
        fprintf(stderr, "radixkv-fleet-instance: built without libzmq: no --zmq-pub\n");
        return 1;
    }
#endif
    if (rkv_pool_create(&pc, &x->pool) != RKV_OK ||
        rkv_tree_create(x->pool, &tc, &x->tree) != RKV_OK ||
        rkv_fleet_pub_create(&cfg, nc, x->tree, &x->pub) != RKV_OK) {
        fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
        return 1;
    }
    return 0;
}

/* Serves instances id .. id + n_inst - 1 on one connection (instance i's
 * prompts from seed + i; a trace slice only with one instance) until
 * SIGINT, each step one prompt per instance. One process standing in for
 * many instances lets a bench feed the router 1,024 of them (their events
 * and heartbeats as separate instances would send them). */
static int serve(natsConnection *nc, const char *model, uint64_t id, uint64_t n_inst,
                 uint64_t seed, uint64_t shared, uint32_t topics, uint64_t rate,
                 uint64_t count, uint32_t blocks, uint64_t hb_ms, const rkv_prompt_set *set,
                 const char *zmq_pub, const char *zmq_replay)
{
    served *in = calloc(n_inst, sizeof *in);
    int rc = in ? 0 : 1;
    uint64_t made = 0;
    for (; !rc && made < n_inst; made++)
        rc = served_create(&in[made], nc, model, id + made, blocks, hb_ms, zmq_pub,
                           zmq_replay);
    int32_t tok[MAX_TOK];
    uint64_t total = set ? set->n : count;
    uint64_t k = 0, next = rkv_fleet_now_ms();
    int announced = 0;
    while (!rc && !rkv_fleet_stop) {
        uint64_t now = rkv_fleet_now_ms();
        if ((total == 0 || k < total) && (rate == 0 || now >= next)) {
            for (uint64_t i = 0; i < n_inst; i++) {
                const int32_t *t = tok;
                uint32_t n;
                if (set) {
                    t = set->tok[k];
                    n = set->len[k];
                } else {
                    n = prompt(shared, seed + i, k, topics, tok);
                }
                if (rkv_stand_in_serve(in[i].pool, in[i].tree, 0, t, n) != RKV_OK)
                    fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
            }
            k++;
            if (rate)
                next += 1000 / rate ? 1000 / rate : 1;
        }
        if (g_reset) {
            g_reset = 0;
            int failed = 0;
            for (uint64_t i = 0; i < n_inst; i++)
                if (rkv_tree_reset(in[i].tree) != RKV_OK) {
                    fprintf(stderr, "radixkv-fleet-instance: reset: %s\n",
                            rkv_last_error());
                    failed = 1;
                }
            if (!failed) /* "reset" tells a driver that every tree is empty */
                printf("reset\n");
            fflush(stdout);
        }
        for (uint64_t i = 0; i < n_inst && !rc; i++) {
            if (rkv_fleet_pub_poll(in[i].pub, now, 0, 0) == RKV_ERR_STATE)
                rc = 1;
#ifdef RKV_HAVE_ZMQ
            if (in[i].zpub)
                rkv_kvev_zpub_poll(in[i].zpub); /* replay requests between batches */
#endif
        }
        /* what is still to publish: only while the announcement waits */
        uint64_t pending = 0;
        for (uint64_t i = 0; !announced && total && k == total && i < n_inst; i++) {
            rkv_fleet_pub_stats st;
            rkv_fleet_pub_get_stats(in[i].pub, &st);
            pending += st.pending_batches;
        }
        if (!announced && total && k == total && pending == 0) {
            /* published what is left: say so */
            printf("served %" PRIu64 " prompts\n", k);
            fflush(stdout);
            announced = 1;
        }
        if (rate == 0 && total && k < total)
            continue; /* serve the next one at once */
        struct timespec ts = {0, (k < total || total == 0 ? 10 : 20) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (uint64_t i = 0; in && i < made; i++)
        served_free(&in[i]);
    free(in);
    return rc;
}

/* --echo: answers every route query at once with the same fixed reply
 * (8 instances listed), on its subscription's delivery thread with
 * SendAsap, as the router daemon answers -- everything the daemon does
 * per query but the routing: its CPU time per query is what libnats
 * request/reply costs on this machine (bench/fleet_daemon_cpu.sh). */
typedef struct echo_ctx {
    uint8_t reply[RKV_WIRE_HEADER + 20 + 12 * RKV_WIRE_MAX_ROUTE];
    size_t len;
} echo_ctx;

static void echo_reply(const echo_ctx *e, natsConnection *nc, natsMsg *m)
{
    if (natsMsg_GetReply(m))
        natsConnection_Publish(nc, natsMsg_GetReply(m), e->reply, (int)e->len);
}

static void on_echo(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
    (void)sub;
    echo_reply(closure, nc, m);
    natsMsg_Destroy(m);
}

/* --echo-loop: the same on fleet/nats_loop.h (the loop destroys m) */
static void on_echo_loop(void *ctx, natsConnection *nc, natsMsg *m)
{
    echo_reply(ctx, nc, m);
}

static int echo(natsOptions *no, const char *model, int loop)
{
    static echo_ctx e;
    rkv_wire_reply rep;
    memset(&rep, 0, sizeof rep);
    rep.instance = 1;
    rep.pages = 28;
    rep.count = 8;
    for (uint32_t i = 0; i < rep.count; i++) {
        rep.ids[i] = i + 1;
        rep.id_pages[i] = 24;
    }
    char subj[160];
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    if (rkv_wire_encode_reply(&rep, e.reply, sizeof e.reply, &e.len) != RKV_OK ||
        rkv_fleet_subject(subj, sizeof subj, model, "route", 0, 0) != RKV_OK) {
        fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
        return 1;
    }
    rkv_nats_loop *nl = NULL;
    natsStatus s = NATS_OK;
    if (loop) {
        s = rkv_nats_loop_start(no, subj, "radixkv-router", on_echo_loop, &e, &nl);
    } else {
        s = natsOptions_SetSendAsap(no, true);
        if (s == NATS_OK)
            s = natsConnection_Connect(&nc, no);
        if (s == NATS_OK)
            s = natsConnection_QueueSubscribe(&sub, nc, subj, "radixkv-router", on_echo, &e);
        if (s == NATS_OK)
            s = natsConnection_Flush(nc);
    }
    if (s != NATS_OK)
        fprintf(stderr, "radixkv-fleet-instance: echo: %s\n", natsStatus_GetText(s));
    else
        printf("echo ready\n");
    fflush(stdout);
    while (s == NATS_OK && !rkv_fleet_stop) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    rkv_nats_loop_stop(nl);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(nc);
    return s == NATS_OK ? 0 : 1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int parse_slice(const char *arg, uint64_t *k, uint64_t *n)
{
    char *end;
    errno = 0;
    *k = strtoull(arg, &end, 10);
    if (errno || end == arg || *end != '/' || arg[0] == '-')
        return -1;
    const char *b = end + 1;
    *n = strtoull(b, &end, 10);
    if (errno || end == b || *end || b[0] == '-' || *n == 0 || *k >= *n ||
        *n > UINT32_MAX)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *server = NULL, *model = NULL, *trace = NULL;
    rkv_nats_auth auth;
    rkv_nats_auth_init(&auth);
    uint64_t id = 0, seed = 1, shared = 1, rate = 5, count = 0, blocks = 4096,
             topics = 8, slice_k = 0, slice_n = 1, limit = 0, max_tokens = 0,
             hb_ms = 500, n_inst = 1;
    int do_query = 0, by_tokens = 0, quiet = 0, do_echo = 0;
    const char *zmq_pub = NULL, *zmq_replay = NULL;
    static const struct option opts[] = {
        {"server", required_argument, 0, 's'}, {"model", required_argument, 0, 'm'},
        {"instance", required_argument, 0, 'i'}, {"seed", required_argument, 0, 1},
        {"seed-shared", required_argument, 0, 2}, {"rate", required_argument, 0, 3},
        {"count", required_argument, 0, 4}, {"blocks", required_argument, 0, 5},
        {"topics", required_argument, 0, 6}, {"trace", required_argument, 0, 7},
        {"slice", required_argument, 0, 8}, {"limit", required_argument, 0, 9},
        {"max-tokens", required_argument, 0, 10},
        {"heartbeat-ms", required_argument, 0, 11},
        {"by-tokens", no_argument, 0, 12}, {"quiet", no_argument, 0, 13},
        {"zmq-pub", required_argument, 0, 14}, {"zmq-replay", required_argument, 0, 15},
        {"instances", required_argument, 0, 16}, {"echo", no_argument, 0, 17},
        {"echo-loop", no_argument, 0, 18},
        {"query", no_argument, 0, 'q'}, RKV_NATS_AUTH_LONGOPTS,
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "s:m:i:qh", opts, NULL)) != -1) {
        uint64_t *dst = NULL;
        if (c >= RKV_NATS_OPT_USER && c < RKV_NATS_OPT_END) {
            if (rkv_nats_auth_option(&auth, c, optarg) != RKV_OK) {
                fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
                rkv_nats_auth_free(&auth);
                return 2;
            }
            continue;
        }
        switch (c) {
        case 's': server = optarg; break;
        case 'm': model = optarg; break;
        case 'i': dst = &id; break;
        case 1: dst = &seed; break;
        case 2: dst = &shared; break;
        case 3: dst = &rate; break;
        case 4: dst = &count; break;
        case 5: dst = &blocks; break;
        case 6: dst = &topics; break;
        case 7: trace = optarg; break;
        case 8:
            if (parse_slice(optarg, &slice_k, &slice_n) != 0) {
                fprintf(stderr, "radixkv-fleet-instance: --slice K/N with K < N\n");
                rkv_nats_auth_free(&auth);
                return 2;
            }
            break;
        case 9: dst = &limit; break;
        case 10: dst = &max_tokens; break;
        case 11: dst = &hb_ms; break;
        case 12: by_tokens = 1; break;
        case 13: quiet = 1; break;
        case 14: zmq_pub = optarg; break;
        case 15: zmq_replay = optarg; break;
        case 16: dst = &n_inst; break;
        case 17: do_echo = 1; break;
        case 18: do_echo = 2; break;
        case 'q': do_query = 1; break;
        case 'h':
        default:
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: radixkv-fleet-instance --model NAME --instance ID\n"
                    "  [--server URL] [--seed N] [--seed-shared N] [--rate PROMPTS/S (0: no pacing)]\n"
                    "  [--count N (0: until SIGINT)] [--blocks N] [--topics N]\n"
                    "  [--trace PATH|@embedded --slice K/N [--limit N] [--max-tokens N]:\n"
                    "   serve slice K of N of the trace's first N requests instead]\n"
                    "  [--heartbeat-ms N (500)]\n"
                    "  [--instances N: serve instances ID..ID+N-1 (seeds SEED..SEED+N-1)\n"
                    "   from this one process, each step one prompt each (no --trace)]\n"
                    "  [--zmq-pub ENDPOINT [--zmq-replay ENDPOINT]: also publish the events\n"
                    "   in the vLLM KV-event format (ZMQ PUB, replay ROUTER)]\n"
                    "  [--query [--by-tokens] [--quiet]: ask the router for --count prompts\n"
                    "   instead; the round trip p50/p99 goes to stderr]\n"
                    "  [--echo: answer route queries with a fixed reply instead (a\n"
                    "   stand-in router without an index: libnats' own cost;\n"
                    "   --echo-loop: served as the router serves them, fleet/nats_loop.h)]\n"
                    "SIGUSR1 resets the tree; SIGINT/SIGTERM stop.\n%s",
                    rkv_nats_auth_usage());
            rkv_nats_auth_free(&auth);
            return c == 'h' ? 0 : 2;
        }
        if (dst) {
            char *end;
            errno = 0;
            *dst = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr, "radixkv-fleet-instance: bad number '%s'\n", optarg);
                rkv_nats_auth_free(&auth);
                return 2;
            }
        }
    }
    if (!model || optind != argc || topics == 0 || blocks < 64 ||
        blocks > UINT32_MAX - 1 || hb_ms == 0 || max_tokens > UINT32_MAX ||
        (trace && do_query) || (zmq_replay && !zmq_pub) || n_inst == 0 ||
        n_inst > RKV_ROUTER_MAX_INSTANCES || (n_inst > 1 && (trace || zmq_pub))) {
        fprintf(stderr, "radixkv-fleet-instance: --model is required; topics, "
                        "heartbeat-ms > 0; blocks 64..2^32-2; --trace or --query; "
                        "--instances 1..%u, more than 1 without --trace or --zmq-pub "
                        "(--help)\n", (unsigned)RKV_ROUTER_MAX_INSTANCES);
        rkv_nats_auth_free(&auth);
        return 2;
    }
    if (rkv_nats_auth_finish(&auth, server) != RKV_OK) {
        fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
        rkv_nats_auth_free(&auth);
        return 2;
    }
    if (server && rkv_nats_url_has_secret(server))
        fprintf(stderr, "radixkv-fleet-instance: warning: credentials in --server are "
                "visible in the process list; prefer --user with --password-file, "
                "--token-file or RKV_NATS_*\n");
    char server_log[256];
    rkv_nats_redact_url(auth.url ? auth.url : "nats://127.0.0.1:4222", server_log,
                        sizeof server_log);
    rkv_fleet_catch_signals();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    rkv_prompt_set set;
    memset(&set, 0, sizeof set);
    if (trace && rkv_stand_in_load(trace, (uint32_t)slice_k, (uint32_t)slice_n, limit,
                                   (uint32_t)max_tokens, &set) != RKV_OK) {
        fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
        rkv_nats_auth_free(&auth);
        return 1;
    }
    natsOptions *no = NULL;
    natsConnection *nc = NULL;
    natsStatus s = rkv_fleet_nats_connect("radixkv-fleet-instance", &auth, server_log,
                                          &no, &nc);
    rkv_nats_auth_free(&auth); /* nats.c keeps its own copies */
    if (s != NATS_OK) {
        natsOptions_Destroy(no);
        rkv_prompt_set_free(&set);
        return 1;
    }
    int32_t tok[MAX_TOK];
    int rc = 0;
    if (do_echo) {
        rc = echo(no, model, do_echo == 2);
    } else if (do_query) {
        uint64_t nq = count ? count : 10, done = 0, lost = 0;
        uint64_t *rt = malloc(nq * sizeof *rt);
        for (uint64_t k = 0; rt && k < nq && !rkv_fleet_stop; k++) {
            uint64_t dt = query(nc, model, tok,
                                prompt(shared, seed, k, (uint32_t)topics, tok), k,
                                by_tokens, quiet);
            if (dt == UINT64_MAX)
                lost++;
            else
                rt[done++] = dt;
        }
        if (rt && done) {
            qsort(rt, done, sizeof *rt, cmp_u64);
            fprintf(stderr, "%" PRIu64 " queries by %s: round trip p50 %" PRIu64
                    " us, p99 %" PRIu64 " us; %" PRIu64 " unanswered\n", done,
                    by_tokens ? "token ids" : "page hashes", rt[(done - 1) / 2],
                    rt[(done * 99 - 1) / 100], lost);
        }
        free(rt);
    } else {
        rc = serve(nc, model, id, n_inst, seed, shared, (uint32_t)topics, rate, count,
                   (uint32_t)blocks, hb_ms, trace ? &set : NULL, zmq_pub, zmq_replay);
    }
    natsConnection_Destroy(nc);
    natsOptions_Destroy(no);
    rkv_prompt_set_free(&set);
    nats_CloseAndWait(2000);
    return rc;
}

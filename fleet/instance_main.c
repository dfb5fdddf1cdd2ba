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
 * With --query it instead asks the router where each of its prompts
 * should go and prints the replies (instance and overlap pages).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet/codec.h"
#include "fleet/publisher.h"

#define PAGE 16u
#define MAX_TOK 1024u

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
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

static int serve(rkv_pool *pool, rkv_tree *tree, const int32_t *tok, uint32_t n)
{
    rkv_block_id blocks[MAX_TOK / PAGE], dups[MAX_TOK / PAGE];
    uint32_t pages = n / PAGE;
    rkv_match m;
    if (rkv_tree_match(tree, 0, tok, pages * PAGE, blocks, 0, &m) != RKV_OK)
        return -1;
    rkv_lease lease;
    if (rkv_tree_lock(tree, m.node, &lease) != RKV_OK)
        return -1;
    uint32_t own = pages - m.num_blocks;
    int rc = 0;
    if (own && rkv_tree_alloc_blocks(tree, own, blocks + m.num_blocks) == RKV_OK) {
        rkv_insert_result ins;
        if (rkv_tree_insert(tree, 0, tok, pages * PAGE, blocks, dups, &ins) != RKV_OK)
            rc = -1;
        rkv_pool_unref_n(pool, own, blocks + m.num_blocks);
    }
    rkv_tree_unlock(tree, &lease);
    return rc;
}

static void query(natsConnection *nc, const char *model, const int32_t *tok,
                  uint32_t n, uint64_t k)
{
    uint64_t h[MAX_TOK / PAGE], parent = RKV_HASH_ROOT;
    uint32_t pages = n / PAGE;
    for (uint32_t j = 0; j < pages; j++)
        h[j] = parent = rkv_block_hash(parent, 0, tok + j * PAGE, PAGE);
    uint8_t buf[RKV_WIRE_HEADER + 12 + 8 * (MAX_TOK / PAGE)];
    size_t len = 0;
    char subj[160];
    natsMsg *m = NULL;
    rkv_wire_reply rep;
    if (rkv_wire_encode_query(0, h, pages, buf, sizeof buf, &len) != RKV_OK ||
        rkv_fleet_subject(subj, sizeof subj, model, "route", 0, 0) != RKV_OK)
        return;
    if (natsConnection_Request(&m, nc, subj, buf, (int)len, 1000) != NATS_OK) {
        printf("prompt %" PRIu64 ": no answer from the router\n", k);
        return;
    }
    if (rkv_wire_decode_reply(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                              &rep) == RKV_OK) {
        printf("prompt %" PRIu64 " (%u pages): instance %" PRIu64 ", %u pages cached;",
               k, pages, rep.instance, rep.pages);
        for (uint32_t i = 0; i < rep.count; i++)
            printf(" %" PRIu64 ":%u", rep.ids[i], rep.id_pages[i]);
        printf("\n");
    }
    natsMsg_Destroy(m);
}

int main(int argc, char **argv)
{
    const char *server = "nats://127.0.0.1:4222", *model = NULL;
    uint64_t id = 0, seed = 1, shared = 1, rate = 5, count = 0, blocks = 4096,
             topics = 8;
    int do_query = 0;
    static const struct option opts[] = {
        {"server", required_argument, 0, 's'}, {"model", required_argument, 0, 'm'},
        {"instance", required_argument, 0, 'i'}, {"seed", required_argument, 0, 1},
        {"seed-shared", required_argument, 0, 2}, {"rate", required_argument, 0, 3},
        {"count", required_argument, 0, 4}, {"blocks", required_argument, 0, 5},
        {"topics", required_argument, 0, 6}, {"query", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "s:m:i:qh", opts, NULL)) != -1) {
        uint64_t *dst = NULL;
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
        case 'q': do_query = 1; break;
        case 'h':
        default:
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: radixkv-fleet-instance --model NAME --instance ID\n"
                    "  [--server URL] [--seed N] [--seed-shared N] [--rate PROMPTS/S]\n"
                    "  [--count N (0: until SIGINT)] [--blocks N] [--topics N]\n"
                    "  [--query: ask the router for --count prompts instead]\n");
            return c == 'h' ? 0 : 2;
        }
        if (dst) {
            char *end;
            errno = 0;
            *dst = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                fprintf(stderr, "radixkv-fleet-instance: bad number '%s'\n", optarg);
                return 2;
            }
        }
    }
    if (!model || optind != argc || rate == 0 || topics == 0 || blocks < 64 ||
        blocks > UINT32_MAX - 1) {
        fprintf(stderr, "radixkv-fleet-instance: --model is required; rate, topics > 0;"
                        " blocks 64..2^32-2 (--help)\n");
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    natsOptions *no = NULL;
    natsConnection *nc = NULL;
    natsStatus s = natsOptions_Create(&no);
    if (s == NATS_OK) s = natsOptions_SetURL(no, server);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(no, -1);
    if (s == NATS_OK) s = natsConnection_Connect(&nc, no);
    if (s != NATS_OK) {
        fprintf(stderr, "radixkv-fleet-instance: connect %s: %s\n", server,
                natsStatus_GetText(s));
        return 1;
    }
    int32_t tok[MAX_TOK];
    int rc = 0;
    if (do_query) {
        for (uint64_t k = 0; k < (count ? count : 10) && !g_stop; k++)
            query(nc, model, tok, prompt(shared, seed, k, (uint32_t)topics, tok), k);
    } else {
        rkv_pool_config pc;
        rkv_pool_config_init(&pc);
        pc.num_blocks = (uint32_t)blocks;
        pc.page_size = PAGE;
        rkv_tree_config tc;
        rkv_tree_config_init(&tc);
        tc.event_ring = 1u << 16;
        rkv_pool *pool = NULL;
        rkv_tree *tree = NULL;
        rkv_fleet_pub *pub = NULL;
        rkv_fleet_pub_config cfg;
        rkv_fleet_pub_config_init(&cfg);
        cfg.model = model;
        cfg.instance = id;
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        cfg.epoch = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
        if (rkv_pool_create(&pc, &pool) != RKV_OK ||
            rkv_tree_create(pool, &tc, &tree) != RKV_OK ||
            rkv_fleet_pub_create(&cfg, nc, tree, &pub) != RKV_OK) {
            fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
            rc = 1;
        }
        uint64_t k = 0, next = now_ms();
        while (!rc && !g_stop && (count == 0 || k < count)) {
            uint64_t now = now_ms();
            if (now >= next) {
                uint32_t n = prompt(shared, seed, k++, (uint32_t)topics, tok);
                if (serve(pool, tree, tok, n) != 0)
                    fprintf(stderr, "radixkv-fleet-instance: %s\n", rkv_last_error());
                next += 1000 / rate;
            }
            if (rkv_fleet_pub_poll(pub, now, 0, 0) == RKV_ERR_STATE)
                rc = 1;
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        /* publish what is left, keep heartbeating until stopped */
        while (!rc && !g_stop) {
            rkv_fleet_pub_poll(pub, now_ms(), 0, 0);
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
        rkv_fleet_pub_destroy(pub);
        rkv_tree_destroy(tree);
        rkv_pool_destroy(pool);
    }
    natsConnection_Destroy(nc);
    natsOptions_Destroy(no);
    nats_CloseAndWait(2000);
    return rc;
}

/*
 * fleet/bridge_main.c -- rkv_bridge_daemon_main (fleet/bridge_daemon.h):
 * the ZMQ side (a SUB socket on the worker's publisher, a DEALER on its
 * replay ROUTER), the sequence-number bookkeeping, and the NATS side
 * through rkv_fleet_pub with the bridge as its source.
 *
 * Sequence rules (the worker numbers its batches from 0, one by one):
 *   - the first batch seen after seq 0: what came before is asked from
 *     the replay socket (best effort: the worker keeps only its last
 *     batches; blocks under parents never seen are skipped by the bridge);
 *   - a jump past last + 1: the gap is asked from the replay socket; a gap
 *     it does not fill (no replay socket, no answer within
 *     --replay-timeout-ms, batches it no longer has) clears the bridge;
 *   - a seq at or below the last: the worker restarted: clear.
 * A batch that does not decode is lost events too: clear.
 * The replay socket answers a request [empty, start seq (8 bytes, big
 * endian)] with [empty, seq, payload] per batch kept from start on, then
 * [empty, -1, empty]. A DEALER that timed out is replaced, so a late
 * answer to an old request is never taken for a new one.
 */
#include "fleet/bridge_daemon.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "fleet/bridge.h"
#include "fleet/daemon_util.h"
#include "fleet/nats_auth.h"
#include "fleet/publisher.h"

typedef struct bridge_daemon {
    const char *prog;
    void *zctx, *sub, *replay;
    const char *replay_ep;
    int64_t max_msg;
    uint64_t replay_timeout_ms;
    rkv_bridge *br;
    rkv_kvev_batch batch;
    int have_last;
    uint64_t last;
    uint64_t batches, bad, gaps, gaps_filled, restarts, replayed;
    uint64_t next_complaint_ms;
} bridge_daemon;

static void complain(bridge_daemon *d, const char *what)
{
    uint64_t now = rkv_fleet_now_ms();
    if (now < d->next_complaint_ms)
        return; /* a hostile or broken worker must not flood the log */
    d->next_complaint_ms = now + 1000;
    fprintf(stderr, "%s: %s\n", d->prog, what);
}

static rkv_status drain_fn(void *ctx, rkv_event *out, uint32_t max, uint32_t *n)
{
    return rkv_bridge_drain(ctx, out, max, n);
}

static rkv_status snap_fn(const void *ctx, rkv_block_entry *out, size_t cap,
                          size_t *n, uint64_t *seq)
{
    return rkv_bridge_snapshot(ctx, out, cap, n, seq);
}

static void clear(bridge_daemon *d, const char *why)
{
    char msg[160];
    snprintf(msg, sizeof msg, "%s: withdrawing the worker's blocks (ALL_CLEARED)", why);
    complain(d, msg);
    rkv_bridge_clear(d->br);
}

/* Decodes and applies one payload; 0, or -1 when it did not decode. */
static int apply(bridge_daemon *d, const void *buf, size_t len)
{
    if (rkv_kvev_decode(buf, len, &d->batch) != RKV_OK) {
        d->bad++;
        complain(d, rkv_last_error());
        return -1;
    }
    if (rkv_bridge_apply(d->br, &d->batch) != RKV_OK) {
        clear(d, rkv_last_error());
        return 0;
    }
    d->batches++;
    return 0;
}

static void *make_socket(bridge_daemon *d, int type, const char *ep)
{
    void *s = zmq_socket(d->zctx, type);
    int linger = 0;
    if (!s)
        return NULL;
    if (zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &d->max_msg, sizeof d->max_msg) ||
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) ||
        (type == ZMQ_SUB && zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0)) ||
        zmq_connect(s, ep)) {
        fprintf(stderr, "%s: %s: %s\n", d->prog, ep, zmq_strerror(errno));
        zmq_close(s);
        return NULL;
    }
    return s;
}

/* Receives one multipart message into parts (at most max; more parts are
 * read and dropped, *n counts all); frame i's bytes in msg[i]. 0 or -1. */
static int recv_parts(void *s, zmq_msg_t *msg, int max, int *n)
{
    int more = 1, k = 0;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, 0) < 0) {
            zmq_msg_close(&m);
            for (int i = 0; i < k && i < max; i++)
                zmq_msg_close(&msg[i]);
            return -1;
        }
        more = zmq_msg_more(&m);
        if (k < max)
            msg[k] = m;
        else
            zmq_msg_close(&m);
        k++;
    }
    *n = k;
    return 0;
}

static void close_parts(zmq_msg_t *msg, int n, int max)
{
    for (int i = 0; i < n && i < max; i++)
        zmq_msg_close(&msg[i]);
}

static int seq_of(zmq_msg_t *m, uint64_t *seq)
{
    if (zmq_msg_size(m) != 8)
        return -1;
    const uint8_t *p = zmq_msg_data(m);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    *seq = v;
    return 0;
}

/* Applies the worker's batches [from, to) from its replay socket; returns
 * the seq it reached (== to when the gap is filled). */
static uint64_t fill(bridge_daemon *d, uint64_t from, uint64_t to)
{
    if (!d->replay)
        return from;
    uint8_t req[8];
    for (int i = 0; i < 8; i++)
        req[i] = (uint8_t)(from >> (56 - 8 * i));
    if (zmq_send(d->replay, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(d->replay, req, 8, ZMQ_DONTWAIT) < 0)
        return from;
    uint64_t next = from, deadline = rkv_fleet_now_ms() + d->replay_timeout_ms;
    int ended = 0, broken = 0;
    while (!ended && !rkv_fleet_stop) {
        uint64_t now = rkv_fleet_now_ms();
        if (now >= deadline)
            break;
        zmq_pollitem_t it = {d->replay, 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(&it, 1, (long)(deadline - now));
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        zmq_msg_t m[3];
        int n = 0;
        uint64_t seq;
        if (recv_parts(d->replay, m, 3, &n))
            break;
        if (n != 3 || seq_of(&m[1], &seq)) {
            d->bad++;
        } else if (seq == UINT64_MAX) {
            ended = 1;
        } else if (seq == next && seq < to && !broken) {
            /* a batch that does not decode leaves the gap open; the rest
             * of the answer is read to its end all the same */
            if (apply(d, zmq_msg_data(&m[2]), zmq_msg_size(&m[2])) == 0)
                next++;
            else
                broken = 1;
            d->replayed++;
        }
        close_parts(m, n, 3);
    }
    if (!ended) {
        /* a late answer must not meet the next request */
        zmq_close(d->replay);
        d->replay = make_socket(d, ZMQ_DEALER, d->replay_ep);
    }
    return next;
}

static void on_batch(bridge_daemon *d, uint64_t seq, const void *buf, size_t len)
{
    if (d->have_last && seq <= d->last) {
        d->restarts++;
        clear(d, "the worker's sequence went back (restarted)");
    } else if (d->have_last && seq > d->last + 1) {
        d->gaps++;
        if (fill(d, d->last + 1, seq) == seq)
            d->gaps_filled++;
        else
            clear(d, "a gap in the worker's sequence the replay did not fill");
    } else if (!d->have_last && seq > 0) {
        fill(d, 0, seq); /* what the worker still keeps from before */
    }
    d->have_last = 1;
    d->last = seq;
    if (apply(d, buf, len))
        clear(d, "a batch that does not decode");
}

static int parse_u64(const char *arg, uint64_t *out)
{
    char *end;
    errno = 0;
    *out = strtoull(arg, &end, 10);
    return errno || end == arg || *end || arg[0] == '-' ? -1 : 0;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s --zmq ENDPOINT --instance ID --model NAME [options]\n"
            "  relays a vLLM- or SGLang-format worker's KV events (ZMQ PUB at\n"
            "  ENDPOINT, e.g. tcp://127.0.0.1:5557) into the fleet as instance ID\n"
            "  --replay ENDPOINT        the worker's replay socket (fills gaps)\n"
            "  --server URL             NATS (default nats://127.0.0.1:4222)\n"
            "  --heartbeat-ms N         (500)\n"
            "  --replay-timeout-ms N    (1000)\n"
            "  --max-blocks N           engine blocks tracked, ~200 bytes each (2097152)\n"
            "  --max-message BYTES      largest ZMQ message taken (67108864)\n"
            "  LoRA adapters are namespaces (rkv_kvev_lora_name_ns, fleet/kvev.h).\n%s",
            prog, rkv_nats_auth_usage());
}

int rkv_bridge_daemon_main(const char *prog, int argc, char **argv)
{
    const char *zmq_ep = NULL, *server = NULL, *model = NULL;
    uint64_t id = 0, hb_ms = 500, replay_ms = 1000, max_blocks = 1u << 21,
             max_msg = 64u << 20;
    int have_id = 0;
    bridge_daemon d;
    memset(&d, 0, sizeof d);
    d.prog = prog;
    rkv_nats_auth auth;
    rkv_nats_auth_init(&auth);
    static const struct option opts[] = {
        {"zmq", required_argument, 0, 'z'}, {"replay", required_argument, 0, 'r'},
        {"instance", required_argument, 0, 'i'}, {"server", required_argument, 0, 's'},
        {"model", required_argument, 0, 'm'}, {"heartbeat-ms", required_argument, 0, 1},
        {"replay-timeout-ms", required_argument, 0, 2},
        {"max-blocks", required_argument, 0, 3}, {"max-message", required_argument, 0, 4},
        RKV_NATS_AUTH_LONGOPTS, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "z:r:i:s:m:h", opts, NULL)) != -1) {
        uint64_t *dst = NULL;
        if (c >= RKV_NATS_OPT_USER && c < RKV_NATS_OPT_END) {
            if (rkv_nats_auth_option(&auth, c, optarg) != RKV_OK) {
                fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
                rkv_nats_auth_free(&auth);
                return 2;
            }
            continue;
        }
        switch (c) {
        case 'z': zmq_ep = optarg; break;
        case 'r': d.replay_ep = optarg; break;
        case 's': server = optarg; break;
        case 'm': model = optarg; break;
        case 'i': dst = &id; have_id = 1; break;
        case 1: dst = &hb_ms; break;
        case 2: dst = &replay_ms; break;
        case 3: dst = &max_blocks; break;
        case 4: dst = &max_msg; break;
        case 'h':
        default:
            usage(c == 'h' ? stdout : stderr, prog);
            rkv_nats_auth_free(&auth);
            return c == 'h' ? 0 : 2;
        }
        if (dst && parse_u64(optarg, dst)) {
            fprintf(stderr, "%s: bad number '%s'\n", prog, optarg);
            rkv_nats_auth_free(&auth);
            return 2;
        }
    }
    if (!zmq_ep || !model || !have_id || optind != argc || hb_ms == 0 ||
        replay_ms == 0 || replay_ms > 600000 || max_blocks == 0 ||
        max_blocks > (1u << 30) || max_msg < 1024 || max_msg > (1ull << 31)) {
        fprintf(stderr, "%s: --zmq, --instance and --model are required; "
                "heartbeat and replay timeout > 0, max-blocks 1..2^30, "
                "max-message 1 KiB..2 GiB (--help)\n", prog);
        rkv_nats_auth_free(&auth);
        return 2;
    }
    if (rkv_nats_auth_finish(&auth, server) != RKV_OK) {
        fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
        rkv_nats_auth_free(&auth);
        return 2;
    }
    if (server && rkv_nats_url_has_secret(server))
        fprintf(stderr, "%s: warning: credentials in --server are visible in the "
                "process list; prefer --user with --password-file, --token-file or "
                "RKV_NATS_*\n", prog);
    char server_log[256];
    rkv_nats_redact_url(auth.url ? auth.url : "nats://127.0.0.1:4222", server_log,
                        sizeof server_log);
    d.max_msg = (int64_t)max_msg;
    d.replay_timeout_ms = replay_ms;
    rkv_fleet_catch_signals();

    int rc = 1;
    natsOptions *no = NULL;
    natsConnection *nc = NULL;
    rkv_fleet_pub *pub = NULL;
    natsStatus s = rkv_fleet_nats_connect(prog, &auth, server_log, &no, &nc);
    rkv_nats_auth_free(&auth); /* nats.c keeps its own copies */
    rkv_bridge_config bc;
    rkv_bridge_config_init(&bc);
    bc.max_blocks = (uint32_t)max_blocks;
    rkv_fleet_pub_config pc;
    rkv_fleet_pub_config_for(&pc, model, id, hb_ms);
    if (s != NATS_OK)
        goto out;
    if (rkv_kvev_batch_init(&d.batch, NULL) != RKV_OK ||
        rkv_bridge_create(&bc, &d.br) != RKV_OK) {
        fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
        goto out;
    }
    rkv_fleet_source src = {d.br, drain_fn, snap_fn, NULL};
    if (rkv_fleet_pub_create_source(&pc, nc, &src, &pub) != RKV_OK) {
        fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
        goto out;
    }
    if (!(d.zctx = zmq_ctx_new()) || !(d.sub = make_socket(&d, ZMQ_SUB, zmq_ep)) ||
        (d.replay_ep && !(d.replay = make_socket(&d, ZMQ_DEALER, d.replay_ep))))
        goto out;
    fprintf(stderr, "%s: relaying %s as instance %" PRIu64 " of model %s on %s\n",
            prog, zmq_ep, id, model, server_log);
    rc = 0;
    while (!rkv_fleet_stop) {
        zmq_pollitem_t it = {d.sub, 0, ZMQ_POLLIN, 0};
        int r = zmq_poll(&it, 1, 20);
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "%s: %s\n", prog, zmq_strerror(errno));
            rc = 1;
            break;
        }
        /* a burst is taken whole before publishing, at most 256 at once */
        for (int k = 0; r > 0 && k < 256 && !rkv_fleet_stop; k++) {
            zmq_msg_t m[3];
            int n = 0;
            uint64_t seq;
            if (recv_parts(d.sub, m, 3, &n))
                break;
            if (n != 3 || seq_of(&m[1], &seq)) {
                d.bad++;
                complain(&d, "a message that is not [topic, seq, payload]");
            } else {
                on_batch(&d, seq, zmq_msg_data(&m[2]), zmq_msg_size(&m[2]));
            }
            close_parts(m, n, 3);
            zmq_pollitem_t again = {d.sub, 0, ZMQ_POLLIN, 0};
            r = zmq_poll(&again, 1, 0);
        }
        if (d.replay == NULL && d.replay_ep)
            d.replay = make_socket(&d, ZMQ_DEALER, d.replay_ep);
        rkv_status ps = rkv_fleet_pub_poll(pub, rkv_fleet_now_ms(), 0, 0);
        if (ps != RKV_OK && ps != RKV_ERR_IO) {
            fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
            rc = 1;
            break;
        }
    }
    rkv_bridge_stats st;
    if (rkv_bridge_get_stats(d.br, &st) == RKV_OK)
        fprintf(stderr, "%s: %" PRIu64 " batches (%" PRIu64 " replayed, %" PRIu64
                " bad), %" PRIu64 " gaps (%" PRIu64 " filled), %" PRIu64
                " restarts; blocks %" PRIu64 " stored, %" PRIu64 " removed, %" PRIu64
                " orphans, %" PRIu64 " without tokens, %" PRIu64 " clears\n",
                prog, d.batches, d.replayed, d.bad, d.gaps, d.gaps_filled, d.restarts,
                st.stored, st.removed, st.orphans, st.no_tokens, st.clears);
out:
    if (d.sub)
        zmq_close(d.sub);
    if (d.replay)
        zmq_close(d.replay);
    if (d.zctx)
        zmq_ctx_term(d.zctx);
    rkv_fleet_pub_destroy(pub);
    rkv_bridge_destroy(d.br);
    rkv_kvev_batch_free(&d.batch);
    if (nc)
        natsConnection_Destroy(nc);
    natsOptions_Destroy(no);
    nats_CloseAndWait(2000);
    return rc;
}

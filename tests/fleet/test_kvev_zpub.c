/*
 * tests/fleet/test_kvev_zpub.c -- a radixkv instance's events in the vLLM
 * format over ZMQ (fleet/kvev_zpub.h), read back the way a consumer of
 * vLLM workers reads them: a SUB socket gets [topic, seq, batch] with
 * consecutive seqs; the batch, fed to the bridge (fleet/bridge.h), gives
 * back exactly the radixkv events that were sent (the page hashes are
 * rebuilt from the token ids sent with them); a DEALER on the replay
 * socket gets the kept batches from its start seq, in order, then -1,
 * and a malformed request is counted and ignored. Loopback only, every
 * wait bounded.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <zmq.h>

#include "fleet/bridge.h"
#include "fleet/kvev_zpub.h"

#define PAGE 16u

static uint64_t seq_of(zmq_msg_t *m)
{
    cr_assert_eq(zmq_msg_size(m), 8);
    const uint8_t *p = zmq_msg_data(m);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* Receives one 3-frame message within ms; 0 when none came. */
static int recv3(void *s, zmq_msg_t *part, int ms)
{
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0)
        return 0;
    for (int i = 0; i < 3; i++) {
        zmq_msg_init(&part[i]);
        cr_assert_geq(zmq_msg_recv(&part[i], s, 0), 0);
        cr_assert_eq(zmq_msg_more(&part[i]), i < 2, "frame %d", i);
    }
    return 1;
}

static void close3(zmq_msg_t *part)
{
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&part[i]);
}

Test(kvev_zpub, subscriber_bridge_and_replay)
{
    rkv_kvev_zpub_config cfg;
    rkv_kvev_zpub_config_init(&cfg);
    cfg.endpoint = "tcp://127.0.0.1:*";
    cfg.replay_endpoint = "tcp://127.0.0.1:*";
    cfg.topic = "kv";
    cfg.keep = 4;
    rkv_kvev_zpub *z = NULL;
    cr_assert_eq(rkv_kvev_zpub_create(&cfg, &z), RKV_OK, "%s", rkv_last_error());
    char pub_ep[128], rep_ep[128];
    cr_assert_eq(rkv_kvev_zpub_endpoint(z, 0, pub_ep, sizeof pub_ep), RKV_OK);
    cr_assert_eq(rkv_kvev_zpub_endpoint(z, 1, rep_ep, sizeof rep_ep), RKV_OK);

    void *ctx = zmq_ctx_new();
    void *sub = zmq_socket(ctx, ZMQ_SUB);
    int linger = 0;
    zmq_setsockopt(sub, ZMQ_LINGER, &linger, sizeof linger);
    cr_assert_eq(zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0), 0);
    cr_assert_eq(zmq_connect(sub, pub_ep), 0);
    /* a subscriber misses what was sent before it joined: empty batches
     * until one arrives */
    zmq_msg_t part[3];
    uint64_t last = 0;
    int joined = 0;
    for (int i = 0; i < 1500 && !joined; i++) { /* up to ~30 s: a loaded CI machine */
        cr_assert_eq(rkv_kvev_zpub_send(z, 1.0, NULL, 0, NULL), RKV_OK);
        if (recv3(sub, part, 20)) {
            joined = 1;
            cr_assert_eq(zmq_msg_size(&part[0]), 2);
            cr_assert_eq(memcmp(zmq_msg_data(&part[0]), "kv", 2), 0);
            last = seq_of(&part[1]);
            close3(part);
        }
    }
    cr_assert(joined, "the subscriber never joined");

    /* three pages and their tokens, then the last page removed */
    int32_t t[3 * PAGE];
    for (uint32_t i = 0; i < 3 * PAGE; i++)
        t[i] = (int32_t)(i * 31 + 5);
    rkv_event ev[2];
    memset(ev, 0, sizeof ev);
    uint64_t parent = RKV_HASH_ROOT;
    ev[0].kind = RKV_EVENT_BLOCK_STORED;
    ev[0].num_hashes = 3;
    ev[0].page_size = PAGE;
    for (uint32_t j = 0; j < 3; j++)
        ev[0].hashes[j] = parent = rkv_block_hash(parent, 0, t + j * PAGE, PAGE);
    ev[1].kind = RKV_EVENT_BLOCK_REMOVED;
    ev[1].num_hashes = 1;
    ev[1].hashes[0] = ev[0].hashes[2];
    rkv_kvev_tokens tok[2] = {{t, 3 * PAGE}, {NULL, 0}};
    cr_assert_eq(rkv_kvev_zpub_send(z, 2.0, ev, 1, tok), RKV_OK);
    cr_assert_eq(rkv_kvev_zpub_send(z, 3.0, ev + 1, 1, NULL), RKV_OK);

    rkv_kvev_batch b;
    cr_assert_eq(rkv_kvev_batch_init(&b, NULL), RKV_OK);
    rkv_bridge_config bc;
    rkv_bridge_config_init(&bc);
    rkv_bridge *br = NULL;
    cr_assert_eq(rkv_bridge_create(&bc, &br), RKV_OK);
    uint8_t last_payload[4096];
    size_t last_len = 0;
    /* skip the empty batches still in flight */
    for (int got = 0; got < 2;) {
        cr_assert(recv3(sub, part, 5000), "batch %d did not arrive", got);
        uint64_t s = seq_of(&part[1]);
        cr_assert_eq(s, last + 1, "seqs are consecutive");
        last = s;
        cr_assert_eq(rkv_kvev_decode(zmq_msg_data(&part[2]), zmq_msg_size(&part[2]),
                                     &b), RKV_OK, "%s", rkv_last_error());
        if (b.count) {
            cr_assert_eq(rkv_bridge_apply(br, &b), RKV_OK);
            got++;
            last_len = zmq_msg_size(&part[2]);
            cr_assert_leq(last_len, sizeof last_payload);
            memcpy(last_payload, zmq_msg_data(&part[2]), last_len);
        }
        close3(part);
    }
    rkv_event back[4];
    uint32_t n = 0;
    cr_assert_eq(rkv_bridge_drain(br, back, 4, &n), RKV_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(back[0].kind, RKV_EVENT_BLOCK_STORED);
    cr_assert_eq(back[0].num_hashes, 3);
    cr_assert_eq(back[0].parent_hash, RKV_HASH_ROOT);
    cr_assert_eq(memcmp(back[0].hashes, ev[0].hashes, 3 * sizeof(uint64_t)), 0,
                 "the bridge rebuilds the instance's own page hashes");
    cr_assert_eq(back[1].kind, RKV_EVENT_BLOCK_REMOVED);
    cr_assert_eq(back[1].hashes[0], ev[0].hashes[2]);

    /* replay from 0: only the last 4 batches are kept */
    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
    cr_assert_eq(zmq_connect(dealer, rep_ep), 0);
    /* a malformed request first: counted, not answered */
    cr_assert_eq(zmq_send(dealer, "junk", 4, 0), 4);
    uint8_t start[8] = {0};
    cr_assert_eq(zmq_send(dealer, "", 0, ZMQ_SNDMORE), 0);
    cr_assert_eq(zmq_send(dealer, start, 8, 0), 8);
    uint64_t want = last - 3;
    int ended = 0;
    for (int i = 0; i < 3000 && !ended; i++) { /* up to ~30 s */
        cr_assert_eq(rkv_kvev_zpub_poll(z), RKV_OK);
        if (!recv3(dealer, part, 10))
            continue;
        cr_assert_eq(zmq_msg_size(&part[0]), 0, "the empty delimiter");
        uint64_t s = seq_of(&part[1]);
        if (s == UINT64_MAX) {
            cr_assert_eq(zmq_msg_size(&part[2]), 0);
            ended = 1;
        } else {
            cr_assert_eq(s, want, "replayed in order from the oldest kept");
            if (s == last)
                cr_assert(zmq_msg_size(&part[2]) == last_len &&
                          memcmp(zmq_msg_data(&part[2]), last_payload, last_len) == 0);
            want++;
        }
        close3(part);
    }
    cr_assert(ended, "the replay did not end with -1");
    cr_assert_eq(want, last + 1);
    rkv_kvev_zpub_stats st;
    cr_assert_eq(rkv_kvev_zpub_get_stats(z, &st), RKV_OK);
    cr_assert_eq(st.bad_requests, 1);
    cr_assert_eq(st.replays, 1);
    cr_assert_eq(st.replayed_batches, 4);

    zmq_close(dealer);
    zmq_close(sub);
    zmq_ctx_term(ctx);
    rkv_bridge_destroy(br);
    rkv_kvev_batch_free(&b);
    rkv_kvev_zpub_destroy(z);
}

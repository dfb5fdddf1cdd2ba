/*
 * tests/fuzz/fuzz_kvev.c -- libFuzzer harness for the vLLM/SGLang KV-event
 * decoder (fleet/kvev.h) and the bridge's state (fleet/bridge.h): what
 * `radixkv bridge` does with every ZMQ payload a worker -- or anyone who
 * can reach its socket -- sends.
 *
 * The input is one or more payloads: a first byte k says the input is cut
 * into (k % 4) + 1 equal pieces, each decoded (with small caps, so the cap
 * paths are reached) and, when accepted, applied to one bridge. What must
 * hold:
 *   - the decoder never reads outside its input or crashes (ASan), and
 *     fails only with RKV_ERR_FORMAT, a message, and an empty batch;
 *   - an accepted batch obeys the caps and its events' ranges lie inside
 *     the batch's hash and token arrays; kinds, media, block sizes valid;
 *   - the bridge never fails on an accepted batch (memory aside), and
 *     rkv_bridge_check holds after each;
 *   - the events it drains have increasing seqs, valid kinds and at most
 *     RKV_EVENT_MAX_HASHES hashes, encode in the vLLM format, and that
 *     encoding decodes back to as many events;
 *   - its snapshot lists exactly as many entries as it counts pages;
 *   - the router index (include/radixkv_router.h) accepts its events
 *     whole: the instance never needs a resync (no store under a parent
 *     it does not hold, no page stored twice, no removal of what it does
 *     not hold), and holds as many blocks as the snapshot lists.
 * Any violation aborts (a crash for libFuzzer, a failed replay for ctest).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/bridge.h"
#include "fleet/kvev.h"
#include "radixkv_router.h"
#include "tests/fuzz/fuzz_die.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define die(...) fuzz_die("fuzz_kvev", NULL, __VA_ARGS__)

#define EV_ROOM 4096u

static rkv_event ev[EV_ROOM];
static uint8_t enc[1 << 20];

static void check_batch(const rkv_kvev_batch *b)
{
    if (b->count > b->lim.max_events || b->n_hashes > b->lim.max_hashes ||
        b->n_tokens > b->lim.max_tokens)
        die("batch over its caps: %u events, %u hashes, %u tokens", b->count,
            b->n_hashes, b->n_tokens);
    for (uint32_t i = 0; i < b->count; i++) {
        const rkv_kvev_event *e = &b->events[i];
        if (e->kind < RKV_KVEV_STORED || e->kind > RKV_KVEV_CLEARED)
            die("event %u kind %u", i, e->kind);
        if (e->medium >= RKV_MEDIUM_COUNT && e->medium != RKV_KVEV_MEDIUM_UNKNOWN)
            die("event %u medium %u", i, e->medium);
        if ((uint64_t)e->first_hash + e->num_hashes > b->n_hashes ||
            (uint64_t)e->first_token + e->num_tokens > b->n_tokens)
            die("event %u ranges outside the batch", i);
        if (e->kind == RKV_KVEV_STORED &&
            (e->block_size == 0 || e->block_size > b->lim.max_block))
            die("event %u block size %u", i, e->block_size);
    }
}

static void drain_and_encode(rkv_bridge *br, rkv_kvev_batch *b, uint64_t *last_seq,
                             rkv_router *rt)
{
    uint32_t n = 0;
    if (rkv_bridge_drain(br, ev, EV_ROOM, &n) != RKV_OK)
        die("drain failed");
    for (uint32_t i = 0; i < n; i++) {
        if (ev[i].seq <= *last_seq)
            die("seq %llu after %llu", (unsigned long long)ev[i].seq,
                (unsigned long long)*last_seq);
        *last_seq = ev[i].seq;
        if (ev[i].kind < RKV_EVENT_BLOCK_STORED || ev[i].kind > RKV_EVENT_RESYNC ||
            ev[i].num_hashes > RKV_EVENT_MAX_HASHES || ev[i].medium >= RKV_MEDIUM_COUNT)
            die("drained event %u malformed", i);
    }
    if (n && rkv_router_apply(rt, 1, ev, n) != RKV_OK)
        die("router apply");
    rkv_router_instance_info info;
    size_t pages = 0;
    if (rkv_router_instance_info_get(rt, 1, &info) != RKV_OK ||
        rkv_bridge_snapshot(br, NULL, 0, &pages, NULL) != RKV_OK)
        die("router info / snapshot");
    if (info.needs_resync || info.blocks != pages)
        die("the router %s the bridge's stream (%llu blocks, snapshot %zu)",
            info.needs_resync ? "refused" : "accepted but differs from",
            (unsigned long long)info.blocks, pages);
    if (n == 0)
        return;
    size_t len = 0;
    if (rkv_kvev_encode(0.0, ev, n, NULL, enc, sizeof enc, &len) != RKV_OK)
        die("drained events do not encode");
    if (rkv_kvev_decode(enc, len, b) != RKV_OK || b->count != n)
        die("encoded events do not decode back (%u of %u)", b->count, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rkv_kvev_batch b;
    static int ready;
    if (!ready) {
        rkv_kvev_limits lim = {64, 256, 4096, 64};
        if (rkv_kvev_batch_init(&b, &lim) != RKV_OK)
            die("batch init");
        ready = 1;
    }
    if (size == 0)
        return 0;
    /* one bridge and one router for the whole run (creating them per
     * input costs most of the time); each input starts from a clear,
     * which the router applies too, so no state carries over */
    static rkv_bridge *br;
    static rkv_router *rt;
    static uint64_t last_seq;
    if (!br) {
        rkv_bridge_config cfg;
        rkv_bridge_config_init(&cfg);
        cfg.max_blocks = 512;
        /* never full here (at most 4 radixkv events per engine hash, 256
         * hashes a batch, two batches between drains): a RESYNC would
         * make the router's view a snapshot's, not the events' */
        cfg.event_ring = EV_ROOM;
        rkv_router_config rc;
        rkv_router_config_init(&rc);
        if (rkv_bridge_create(&cfg, &br) != RKV_OK || rkv_router_create(&rc, &rt) != RKV_OK ||
            rkv_router_add_instance(rt, 1) != RKV_OK)
            die("bridge / router create");
    }
    if (rkv_bridge_clear(br) != RKV_OK)
        die("clear");
    drain_and_encode(br, &b, &last_seq, rt);
    uint32_t pieces = (uint32_t)(data[0] % 4) + 1;
    data++;
    size--;
    size_t step = size / pieces;
    for (uint32_t k = 0; k < pieces; k++) {
        const uint8_t *p = data + k * step;
        size_t len = k + 1 == pieces ? size - k * step : step;
        rkv_status s = rkv_kvev_decode(p, len, &b);
        if (s != RKV_OK) {
            if (s != RKV_ERR_FORMAT || rkv_last_error()[0] == 0)
                die("status %d for bad input", (int)s);
            if (b.count || b.n_hashes || b.n_tokens)
                die("a failed decode left %u events", b.count);
            continue;
        }
        check_batch(&b);
        s = rkv_bridge_apply(br, &b);
        if (s != RKV_OK && s != RKV_ERR_NOMEM)
            die("apply: status %d", (int)s);
        if (rkv_bridge_check(br) != RKV_OK)
            die("bridge check");
        if (k % 2) /* sometimes let events pile up in the ring */
            drain_and_encode(br, &b, &last_seq, rt);
    }
    drain_and_encode(br, &b, &last_seq, rt);
    rkv_bridge_stats st;
    size_t n = 0;
    if (rkv_bridge_get_stats(br, &st) != RKV_OK ||
        rkv_bridge_snapshot(br, NULL, 0, &n, NULL) != RKV_OK || n != st.pages)
        die("snapshot %zu entries, %llu pages", n, (unsigned long long)st.pages);
    return 0;
}

/*
 * tests/fuzz/fuzz_router.c -- libFuzzer harness for the router daemon's
 * message handling (fleet/router_daemon.h: what its main loop runs on each
 * message, without a NATS connection): event batches, heartbeats,
 * snapshot answers, route and stats requests, and the periodic tick, in
 * any order, at any times.
 *
 * The input is a program. Each step is one of: raw bytes on a subject
 * (junk, or a mutated message); a well-formed message built from the input
 * through the codec (fleet/codec.h) -- a heartbeat, an event batch of
 * stores / removes / clears / resync markers over a small hash space, a
 * snapshot whole or in chunks (some lost, repeated or cut short), a route
 * query over the same hashes; a burst of heartbeats
 * registering up to 200 instances (more than a reply lists); the clock
 * moving on, with a tick. What must hold:
 *   - no handler reads or writes out of bounds or crashes (ASan, UBSan);
 *   - the router's index passes rkv_router_check after every step;
 *   - every route request with a reply subject gets exactly one reply, it
 *     decodes, lists at most 64 instances in strictly increasing id order,
 *     never more than are registered, and on success names a listed
 *     instance with the pages listed for it (or lists none);
 *   - every stats request gets exactly one reply, Prometheus text;
 *   - an HTTP route body (POST /v1/route: junk, or JSON token ids with a
 *     namespace, sometimes cut short) gets a status of the documented set
 *     and a JSON object that fits its buffer; a 200 names a registered
 *     instance.
 * Any violation aborts (a crash for libFuzzer, a failed replay for ctest).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/codec.h"
#include "fleet/publisher.h"
#include "fleet/router_daemon.h"
#include "tests/fuzz/fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_router: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (last error: %s)\n", rkv_last_error());
    va_end(ap);
    abort();
}

typedef struct sink {
    int replies;
    const char *want; /* the subject the reply must go to */
    int route;        /* a route reply (else stats) */
    uint64_t registered;
} sink;

static void on_reply(void *ctx, const char *subject, const void *data, size_t len)
{
    sink *k = ctx;
    k->replies++;
    if (!k->want || strcmp(subject, k->want) != 0)
        die("a reply to %s, expected %s", subject, k->want ? k->want : "none");
    if (!k->route) {
        if (len < 7 || memcmp(data, "# HELP ", 7) != 0)
            die("stats are not Prometheus text");
        return;
    }
    rkv_wire_reply rep;
    if (rkv_wire_decode_reply(data, len, &rep) != RKV_OK)
        die("a route reply that does not decode");
    if (rep.count > RKV_WIRE_MAX_ROUTE || rep.count > k->registered)
        die("%u instances listed, %llu registered", rep.count,
            (unsigned long long)k->registered);
    int chosen = -1;
    for (uint32_t i = 0; i < rep.count; i++) {
        if (i && rep.ids[i] <= rep.ids[i - 1])
            die("listed ids not increasing");
        if (rep.ids[i] == rep.instance)
            chosen = (int)i;
    }
    if (rep.status == RKV_OK && rep.count &&
        (chosen < 0 || rep.id_pages[chosen] != rep.pages))
        die("routed to %llu (%u pages), not as listed", (unsigned long long)rep.instance,
            rep.pages);
}

/* The blocks: one chain of CHAIN pages, hash 0x1000 + i with page i - 1
 * as parent, so that stores and removes meet and queries overlap. The
 * harness follows each small instance's seq and cached length so that most
 * generated messages apply (a few are off on purpose). */
#define CHAIN 24u
#define IDS 6u
static uint64_t next_seq[IDS + 1], held[IDS + 1];

static uint64_t chain(uint32_t i)
{
    return 0x1000 + i;
}

static uint64_t parent_of(uint32_t i)
{
    return i ? chain(i - 1) : RKV_HASH_ROOT;
}

static uint64_t id_of(in *s)
{
    return 1 + below(s, IDS);
}

static uint64_t epoch_of(in *s)
{
    return below(s, 16) ? 1 : 2;
}

/* The subject a message of this kind from instance id comes on; now and
 * then another instance's (a forged message, which must be refused). */
static const char *subject_of(in *s, rkv_daemon_kind kind, uint64_t id)
{
    static char subj[96];
    if (below(s, 16) == 0)
        id = id_of(s);
    if (kind == RKV_DAEMON_SNAP) {
        snprintf(subj, sizeof subj, "_INBOX.fuzz.%llu", (unsigned long long)id);
        return subj;
    }
    const char *what = kind == RKV_DAEMON_KV ? "kv" : kind == RKV_DAEMON_HB ? "hb" : "route";
    if (rkv_fleet_subject(subj, sizeof subj, "fuzz", what, kind == RKV_DAEMON_KV ||
                          kind == RKV_DAEMON_HB, id) != RKV_OK)
        die("subject");
    return subj;
}

static void heartbeat(rkv_daemon *d, in *s, uint64_t id, uint64_t now)
{
    uint64_t last = id <= IDS && below(s, 8) ? next_seq[id] - 1 : below(s, 64);
    rkv_wire_heartbeat hb = {id, 0, last, 0, 0};
    hb.epoch = epoch_of(s); /* one by one: the order the input is read in */
    hb.running = below(s, 4);
    hb.queued_tokens = below(s, 1000);
    uint8_t buf[RKV_WIRE_HEARTBEAT_SIZE];
    size_t len = 0;
    if (rkv_wire_encode_heartbeat(&hb, buf, sizeof buf, &len) == RKV_OK)
        rkv_daemon_handle(d, RKV_DAEMON_HB, subject_of(s, RKV_DAEMON_HB, id), buf, len, NULL, now);
}

static void events(rkv_daemon *d, in *s, uint64_t now)
{
    static rkv_event ev[16];
    static uint8_t buf[16 * (28 + 8 * (RKV_EVENT_MAX_HASHES + 1)) + 64];
    uint64_t id = id_of(s), epoch = epoch_of(s);
    uint64_t seq = below(s, 16) ? next_seq[id] : 1 + below(s, 40);
    uint32_t n = 1 + below(s, 16);
    for (uint32_t i = 0; i < n; i++) {
        rkv_event *e = &ev[i];
        memset(e, 0, sizeof *e);
        e->seq = seq;
        seq += 1 + (below(s, 32) == 0); /* now and then a gap */
        uint32_t k = below(s, 16);
        e->kind = k < 10 ? RKV_EVENT_BLOCK_STORED
                  : k < 14 ? RKV_EVENT_BLOCK_REMOVED
                  : k < 15 ? RKV_EVENT_ALL_CLEARED : RKV_EVENT_RESYNC;
        e->medium = (uint8_t)(below(s, 4) ? 0 : below(s, RKV_MEDIUM_COUNT));
        e->page_size = 16;
        if (e->kind == RKV_EVENT_RESYNC)
            e->lost = 1 + below(s, 4);
        if (e->kind == RKV_EVENT_ALL_CLEARED)
            held[id] = 0;
        if (e->kind == RKV_EVENT_BLOCK_STORED || e->kind == RKV_EVENT_BLOCK_REMOVED) {
            uint32_t nh = 1 + below(s, 3), at;
            if (e->kind == RKV_EVENT_BLOCK_STORED)
                at = below(s, 8) ? (uint32_t)held[id] : below(s, CHAIN);
            else
                at = below(s, 8) && held[id] ? (uint32_t)held[id] - 1 : below(s, CHAIN);
            if (at + nh > CHAIN)
                at = CHAIN - nh;
            e->num_hashes = (uint16_t)nh;
            e->parent_hash = parent_of(at);
            for (uint32_t j = 0; j < nh; j++)
                e->hashes[j] = chain(at + j);
            held[id] = e->kind == RKV_EVENT_BLOCK_STORED ? at + nh : at;
        }
    }
    next_seq[id] = seq;
    size_t len = 0;
    if (rkv_wire_encode_events(id, epoch, ev, n, buf, sizeof buf, &len) == RKV_OK)
        rkv_daemon_handle(d, RKV_DAEMON_KV, subject_of(s, RKV_DAEMON_KV, id), buf, len, NULL, now);
}

static void snapshot(rkv_daemon *d, in *s, uint64_t now)
{
    rkv_block_entry e[CHAIN];
    uint64_t id = id_of(s);
    uint32_t n = below(s, CHAIN + 1);
    for (uint32_t i = 0; i < n; i++) {
        memset(&e[i], 0, sizeof e[i]);
        e[i].hash = chain(i);
        e[i].parent_hash = parent_of(i);
        e[i].medium = below(s, 8) ? 0 : below(s, RKV_MEDIUM_COUNT);
    }
    if (n && below(s, 16) == 0) /* a duplicate: refused, nothing changes */
        e[n - 1] = e[0];
    uint8_t buf[RKV_WIRE_HEADER + 28 + 25 * CHAIN];
    size_t len = 0;
    uint64_t seq = below(s, 8) ? (next_seq[id] ? next_seq[id] - 1 : 0) : below(s, 64);
    held[id] = n;
    if (rkv_wire_encode_snapshot(id, epoch_of(s), seq, e, n, buf, sizeof buf,
                                 &len) == RKV_OK)
        rkv_daemon_handle(d, RKV_DAEMON_SNAP, subject_of(s, RKV_DAEMON_SNAP, id), buf, len, NULL, now);
}

/* The same as chunks of 1..4 blocks; now and then a part is dropped,
 * repeated, or the series is cut short. */
static void chunks(rkv_daemon *d, in *s, uint64_t now)
{
    rkv_block_entry e[CHAIN];
    uint64_t id = id_of(s), epoch = epoch_of(s);
    uint32_t n = below(s, CHAIN + 1), room = 1 + below(s, 4);
    for (uint32_t i = 0; i < n; i++) {
        memset(&e[i], 0, sizeof e[i]);
        e[i].hash = chain(i);
        e[i].parent_hash = parent_of(i);
        e[i].medium = below(s, 8) ? 0 : below(s, RKV_MEDIUM_COUNT);
    }
    uint32_t parts = n ? (n + room - 1) / room : 1;
    uint64_t seq = below(s, 8) ? (next_seq[id] ? next_seq[id] - 1 : 0) : below(s, 64);
    held[id] = n;
    for (uint32_t k = 0; k < parts; k++) {
        uint32_t at = k * room, cnt = n - at < room ? n - at : room;
        if (n == 0)
            at = cnt = 0;
        rkv_wire_chunk_info c = {id, epoch, seq, k, parts, n, cnt};
        uint32_t fault = below(s, 32);
        if (fault == 0)
            continue; /* lost */
        if (fault == 1)
            return; /* cut short */
        if (fault == 2 && k)
            c.part = k - 1; /* repeated */
        uint8_t buf[RKV_WIRE_HEADER + 64 + 25 * 4];
        size_t len = 0;
        if (rkv_wire_encode_snapshot_chunk(&c, e + at, buf, sizeof buf, &len) == RKV_OK)
            rkv_daemon_handle(d, RKV_DAEMON_SNAP, subject_of(s, RKV_DAEMON_SNAP, id), buf, len, NULL, now);
        if (rkv_router_check(rkv_daemon_router(d)) != RKV_OK)
            die("router check");
    }
}

static void request(rkv_daemon *d, sink *k, rkv_daemon_kind kind, const void *msg, size_t len,
                    uint64_t now)
{
    rkv_router_stats st;
    if (rkv_router_get_stats(rkv_daemon_router(d), &st) != RKV_OK)
        die("stats");
    k->replies = 0;
    k->want = "_INBOX.fuzz";
    k->route = kind == RKV_DAEMON_ROUTE;
    k->registered = st.instances;
    rkv_daemon_handle(d, kind, "radixkv.fuzz.route", msg, len, k->want, now);
    if (k->replies != 1)
        die("%d replies to one request", k->replies);
    k->want = NULL;
}

static void query(rkv_daemon *d, sink *k, in *s, uint64_t now)
{
    uint64_t h[CHAIN + 1];
    uint32_t n = below(s, CHAIN + 1);
    for (uint32_t i = 0; i < n; i++)
        h[i] = below(s, 16) ? chain(i) : 0x1000 + below(s, 64);
    uint8_t buf[RKV_WIRE_HEADER + 12 + 8 * 32];
    size_t len = 0;
    if (rkv_wire_encode_query(below(s, 2), h, n, buf, sizeof buf, &len) == RKV_OK)
        request(d, k, RKV_DAEMON_ROUTE, buf, len, now);
}

static void http_route(rkv_daemon *d, in *s)
{
    char body[2048], out[RKV_WIRE_MAX_ROUTE * 160 + 512];
    size_t len = 0;
    if (below(s, 2)) { /* junk */
        len = below(s, 256);
        for (size_t i = 0; i < len; i++)
            body[i] = (char)below(s, 256);
    } else {
        uint32_t n = below(s, 200);
        len = (size_t)snprintf(body, sizeof body, "{\"namespace\": %u, \"token_ids\": [",
                               below(s, 3));
        for (uint32_t i = 0; i < n && len < sizeof body - 32; i++)
            len += (size_t)snprintf(body + len, sizeof body - len, "%s%d", i ? "," : "",
                                    (int)below(s, 8) - 2);
        len += (size_t)snprintf(body + len, sizeof body - len, "]}");
        if (below(s, 8) == 0)
            len = below(s, (uint32_t)len + 1); /* cut short */
    }
    if (below(s, 4) == 0)
        rkv_daemon_set_page_size(d, below(s, 5));
    int code = 0;
    size_t k = rkv_daemon_http_route(d, body, len, out, sizeof out, &code);
    if (k >= sizeof out || out[0] != '{' || out[k - 1] != '\n')
        die("HTTP route answer of %zu bytes", k);
    if (code != 200 && code != 400 && code != 413 && code != 503)
        die("HTTP route status %d", code);
    if (code == 200) {
        const char *p = strstr(out, "\"instance\": ");
        rkv_router_instance_info info;
        if (!p || rkv_router_instance_info_get(rkv_daemon_router(d),
                                               strtoull(p + 12, NULL, 10), &info) != RKV_OK)
            die("HTTP route to an unregistered instance: %s", out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in s = {data, size};
    uint64_t now = 1000;
    for (uint32_t i = 0; i <= IDS; i++) {
        next_seq[i] = 1;
        held[i] = 0;
    }
    sink k = {0, NULL, 0, 0};
    rkv_daemon *d = rkv_daemon_create("fuzz_router", "fuzz", 1 + below(&s, 4000),
                              1 + below(&s, 1000), now, NULL, NULL);
    if (!d || rkv_daemon_set_inbox(d, "_INBOX.fuzz") != RKV_OK)
        die("rkv_daemon_create");
    rkv_daemon_set_reply(d, on_reply, &k);
    for (int steps = 0; s.n > 0 && steps < 256; steps++) {
        switch (below(&s, 10)) {
        case 0: { /* raw bytes on any subject */
            rkv_daemon_kind kind = (rkv_daemon_kind)below(&s, 5);
            size_t len = below(&s, 512);
            if (len > s.n)
                len = s.n;
            const uint8_t *p = s.p;
            s.p += len;
            s.n -= len;
            if (kind == RKV_DAEMON_ROUTE || kind == RKV_DAEMON_STATS)
                request(d, &k, kind, p, len, now);
            else
                rkv_daemon_handle(d, kind, subject_of(&s, kind, id_of(&s)), p, len, NULL, now);
            break;
        }
        case 1: heartbeat(d, &s, id_of(&s), now); break;
        case 2:
        case 3: events(d, &s, now); break;
        case 4: snapshot(d, &s, now); break;
        case 5: query(d, &k, &s, now); break;
        case 6: request(d, &k, RKV_DAEMON_STATS, "", 0, now); break;
        case 8: chunks(d, &s, now); break;
        case 7: { /* many instances at once */
            uint64_t base = 1 + below(&s, 1000);
            uint32_t n = below(&s, 200);
            for (uint32_t i = 0; i < n; i++)
                heartbeat(d, &s, base + i, now);
            break;
        }
        default:
            if (below(&s, 4) == 0) {
                http_route(d, &s);
                break;
            }
            now += below(&s, 4096);
            rkv_daemon_tick(d, now);
            break;
        }
        if (rkv_router_check(rkv_daemon_router(d)) != RKV_OK)
            die("router check");
    }
    rkv_daemon_destroy(d);
    return 0;
}

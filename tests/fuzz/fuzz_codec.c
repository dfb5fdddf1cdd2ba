/*
 * tests/fuzz/fuzz_codec.c -- libFuzzer harness for the fleet wire format
 * (fleet/codec.h): every message the router and the publishers read from
 * NATS, whatever the bytes.
 *
 * One input goes through every decoder (events, snapshot, snapshot chunk,
 * heartbeat, route query in both versions, route reply), and through the
 * HTTP route API's body parser (fleet/route_json.h: whoever reaches the
 * router's HTTP port sends it). What must hold:
 *   - no decoder reads outside the input (ASan) or crashes;
 *   - a failure is RKV_ERR_FORMAT, RKV_ERR_UNSUPPORTED (unknown version)
 *     or RKV_ERR_NO_SPACE (more than the harness's room) with a message,
 *     and the output is untouched (checked against a canary);
 *   - at most one decoder accepts an input, rkv_wire_peek names its type,
 *     and it re-encodes to exactly the input (the encoding is canonical, so
 *     a decoder that accepted junk or misread a field would show);
 *   - accepted values obey the format: event kinds and media in range,
 *     seqs strictly increasing from first_seq; a version 2 query gives
 *     count / page_size page hashes, equal to the rkv_block_hash chain of
 *     its tokens;
 *   - the route body parser fails with RKV_ERR_FORMAT or RKV_ERR_NO_SPACE
 *     and a message, the request zeroed; accepted, it fills at most its
 *     room (a canary past it), and the request written back as canonical
 *     JSON parses to the same ids and namespace.
 * Any violation aborts (a crash for libFuzzer, a failed replay for ctest).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/codec.h"
#include "fleet/route_json.h"
#include "tests/fuzz/fuzz_die.h"

#define ROOM 64u      /* events, snapshot entries per decode */
#define QROOM 4096u   /* query hashes / tokens               */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define die(...) fuzz_die("fuzz_codec", NULL, __VA_ARGS__)

static void failed(rkv_status s, const char *what)
{
    if (s != RKV_ERR_FORMAT && s != RKV_ERR_UNSUPPORTED && s != RKV_ERR_NO_SPACE)
        die("%s: status %d for bad input", what, (int)s);
    if (rkv_last_error()[0] == 0)
        die("%s: failure without a message", what);
}

static void untouched(const void *p, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)p)[i] != 0xA5)
            die("%s: output written on failure (byte %zu)", what, i);
}

static void same(const uint8_t *a, size_t al, const uint8_t *b, size_t bl,
                 const char *what)
{
    if (al != bl || memcmp(a, b, al) != 0)
        die("%s: accepted input does not re-encode to itself (%zu vs %zu bytes)",
            what, al, bl);
}

static uint8_t re_buf[RKV_WIRE_HEADER + 64 + 8 * 4 * QROOM];
static rkv_event ev[ROOM];
static rkv_block_entry be[ROOM];
static uint64_t qh[QROOM];
static int32_t qt[QROOM];
/* the decoders' other outputs */
static rkv_wire_batch_info bi;
static rkv_wire_snapshot_info si;
static rkv_wire_heartbeat hb;
static rkv_namespace qns;
static uint32_t nq;
static rkv_wire_reply rep;
static rkv_wire_chunk_info ci;

/* The accepted value encoded again (enc its status, *rl bytes in re_buf)
 * equals the input. rl is read here, after the encoder ran: an argument
 * by value could be read before the call that sets it. */
static void reencodes(rkv_status enc, const size_t *rl, const uint8_t *data, size_t size,
                      const char *what)
{
    if (enc != RKV_OK)
        die("%s: accepted input does not encode", what);
    same(re_buf, *rl, data, size, what);
}

static rkv_status dec_events(const uint8_t *d, size_t n)
{
    return rkv_wire_decode_events(d, n, &bi, ev, ROOM);
}

static void ok_events(const uint8_t *data, size_t size)
{
    if (bi.count == 0 || bi.count > ROOM || ev[0].seq != bi.first_seq)
        die("events: count %u, first seq %llu", bi.count, (unsigned long long)ev[0].seq);
    for (uint32_t i = 0; i < bi.count; i++) {
        if (ev[i].kind < RKV_EVENT_BLOCK_STORED || ev[i].kind > RKV_EVENT_RESYNC ||
            ev[i].medium >= RKV_MEDIUM_COUNT)
            die("events: event %u kind %d medium %d", i, (int)ev[i].kind,
                (int)ev[i].medium);
        if (i && ev[i].seq <= ev[i - 1].seq)
            die("events: seq %llu after %llu", (unsigned long long)ev[i].seq,
                (unsigned long long)ev[i - 1].seq);
    }
    size_t rl = 0;
    reencodes(rkv_wire_encode_events(bi.instance, bi.epoch, ev, bi.count, re_buf,
                                     sizeof re_buf, &rl),
              &rl, data, size, "events");
}

static rkv_status dec_snapshot(const uint8_t *d, size_t n)
{
    return rkv_wire_decode_snapshot(d, n, &si, be, ROOM);
}

static void ok_snapshot(const uint8_t *data, size_t size)
{
    for (uint32_t i = 0; i < si.count; i++)
        if (be[i].medium >= RKV_MEDIUM_COUNT)
            die("snapshot: entry %u medium %d", i, (int)be[i].medium);
    size_t rl = 0;
    reencodes(rkv_wire_encode_snapshot(si.instance, si.epoch, si.seq, be, si.count, re_buf,
                                       sizeof re_buf, &rl),
              &rl, data, size, "snapshot");
}

static rkv_status dec_heartbeat(const uint8_t *d, size_t n)
{
    return rkv_wire_decode_heartbeat(d, n, &hb);
}

static void ok_heartbeat(const uint8_t *data, size_t size)
{
    size_t rl = 0;
    reencodes(rkv_wire_encode_heartbeat(&hb, re_buf, sizeof re_buf, &rl), &rl, data, size,
              "heartbeat");
}

/* route query, either version */
static rkv_status dec_query(const uint8_t *d, size_t n)
{
    qns = 0;
    nq = 0;
    return rkv_wire_decode_query(d, n, &qns, qh, QROOM, &nq);
}

/* A version 2 query decodes as tokens too (or has more than the room),
 * whose page hash chain is the hashes, and re-encodes from them; a
 * version 1 query does not decode as tokens. */
static void ok_query(const uint8_t *data, size_t size)
{
    uint32_t ps = 0, nt = 0;
    rkv_namespace ns2 = 0;
    rkv_status t = rkv_wire_decode_query_tokens(data, size, &ns2, &ps, qt, QROOM, &nt);
    size_t rl = 0;
    if (!(size >= 6 && data[4] == RKV_WIRE_QUERY_TOKENS_VERSION && data[5] == 0)) {
        if (t != RKV_ERR_FORMAT)
            die("query: a version 1 query decoded as tokens (%d)", (int)t);
        reencodes(rkv_wire_encode_query(qns, qh, nq, re_buf, sizeof re_buf, &rl), &rl, data,
                  size, "query v1");
        return;
    }
    if (t != RKV_OK && t != RKV_ERR_NO_SPACE)
        die("query: version 2 decodes as hashes but not as tokens");
    if (t != RKV_OK)
        return;
    if (ns2 != qns || ps == 0 || nq != nt / ps)
        die("query: %u tokens of page %u gave %u hashes", nt, ps, nq);
    uint64_t parent = RKV_HASH_ROOT;
    for (uint32_t j = 0; j < nq; j++) {
        parent = rkv_block_hash(parent, qns, qt + j * ps, ps);
        if (qh[j] != parent)
            die("query: page %u hash differs from the chain", j);
    }
    reencodes(rkv_wire_encode_query_tokens(qns, qt, nt, ps, re_buf, sizeof re_buf, &rl), &rl,
              data, size, "query v2");
}

/* the token decoder must agree that a refused query is no good */
static void refused_query(const uint8_t *data, size_t size)
{
    uint32_t ps, nt;
    rkv_namespace ns2;
    memset(qt, 0xA5, sizeof qt);
    if (rkv_wire_decode_query_tokens(data, size, &ns2, &ps, qt, QROOM, &nt) == RKV_OK)
        die("query: tokens decode where hashes did not");
    untouched(qt, sizeof qt, "query tokens");
}

/* route reply */
static rkv_status dec_reply(const uint8_t *d, size_t n)
{
    return rkv_wire_decode_reply(d, n, &rep);
}

static void ok_reply(const uint8_t *data, size_t size)
{
    if (rep.count > RKV_WIRE_MAX_ROUTE)
        die("reply: count %u", rep.count);
    size_t rl = 0;
    reencodes(rkv_wire_encode_reply(&rep, re_buf, sizeof re_buf, &rl), &rl, data, size,
              "reply");
}

static rkv_status dec_chunk(const uint8_t *d, size_t n)
{
    return rkv_wire_decode_snapshot_chunk(d, n, &ci, be, ROOM);
}

static void ok_chunk(const uint8_t *data, size_t size)
{
    if (ci.parts == 0 || ci.part >= ci.parts || ci.count > ci.total || ci.count > ROOM)
        die("chunk: part %u of %u, %u of %llu blocks", ci.part, ci.parts, ci.count,
            (unsigned long long)ci.total);
    size_t rl = 0;
    reencodes(rkv_wire_encode_snapshot_chunk(&ci, be, re_buf, sizeof re_buf, &rl), &rl, data,
              size, "chunk");
}

/* An output a decoder fills: poisoned (0xA5) before the call, untouched
 * when it fails. */
typedef struct out {
    void *p;
    size_t n;
    const char *what;
} out;

/* One decoder: its outputs (up to 2), the call, the checks of an accepted
 * input and (optional) of a refused one. */
typedef struct decoder {
    const char *what;
    rkv_wire_type type;
    out o[2];
    rkv_status (*decode)(const uint8_t *, size_t);
    void (*accepted)(const uint8_t *, size_t);
    void (*refused)(const uint8_t *, size_t);
} decoder;

static const decoder DECODERS[] = {
    {"events", RKV_WIRE_EVENTS, {{ev, sizeof ev, "events"}, {&bi, sizeof bi, "events info"}},
     dec_events, ok_events, NULL},
    {"snapshot", RKV_WIRE_SNAPSHOT,
     {{be, sizeof be, "snapshot"}, {&si, sizeof si, "snapshot info"}}, dec_snapshot,
     ok_snapshot, NULL},
    {"heartbeat", RKV_WIRE_HEARTBEAT, {{&hb, sizeof hb, "heartbeat"}, {NULL, 0, NULL}},
     dec_heartbeat, ok_heartbeat, NULL},
    {"query", RKV_WIRE_QUERY, {{qh, sizeof qh, "query"}, {NULL, 0, NULL}}, dec_query,
     ok_query, refused_query},
    {"reply", RKV_WIRE_REPLY, {{&rep, sizeof rep, "reply"}, {NULL, 0, NULL}}, dec_reply,
     ok_reply, NULL},
    {"chunk", RKV_WIRE_SNAPSHOT_CHUNK,
     {{be, sizeof be, "chunk"}, {&ci, sizeof ci, "chunk info"}}, dec_chunk, ok_chunk, NULL},
};

static int32_t jt[QROOM + 1], jt2[QROOM];
static char jbuf[64 + 13 * QROOM];

static void route_json(const uint8_t *data, size_t size)
{
    const int32_t canary = (int32_t)0xA5A5A5A5;
    jt[QROOM] = canary;
    rkv_route_request req;
    rkv_status s = rkv_route_json_parse((const char *)data, size, jt, QROOM, &req);
    if (jt[QROOM] != canary)
        die("route json: wrote past its room");
    if (s != RKV_OK) {
        if (s != RKV_ERR_FORMAT && s != RKV_ERR_NO_SPACE)
            die("route json: status %d for bad input", (int)s);
        if (rkv_last_error()[0] == 0)
            die("route json: failure without a message");
        if (req.ns != 0 || req.n_tokens != 0)
            die("route json: request not zeroed on failure");
        return;
    }
    if (req.n_tokens > QROOM)
        die("route json: %u ids in a room of %u", req.n_tokens, QROOM);
    size_t k = (size_t)snprintf(jbuf, sizeof jbuf, "{\"token_ids\": [");
    for (uint32_t i = 0; i < req.n_tokens; i++)
        k += (size_t)snprintf(jbuf + k, sizeof jbuf - k, i ? ", %d" : "%d", (int)jt[i]);
    k += (size_t)snprintf(jbuf + k, sizeof jbuf - k, "], \"namespace\": %llu}",
                          (unsigned long long)req.ns);
    if (k >= sizeof jbuf)
        die("route json: canonical form past its buffer");
    rkv_route_request again;
    if (rkv_route_json_parse(jbuf, k, jt2, QROOM, &again) != RKV_OK)
        die("route json: canonical form refused: %s", rkv_last_error());
    if (again.ns != req.ns || again.n_tokens != req.n_tokens ||
        memcmp(jt2, jt, (size_t)req.n_tokens * sizeof jt[0]) != 0)
        die("route json: canonical form parses to another request");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int accepted = 0;
    rkv_wire_type want = RKV_WIRE_EVENTS;
    for (size_t d = 0; d < sizeof DECODERS / sizeof DECODERS[0]; d++) {
        const decoder *dc = &DECODERS[d];
        for (int i = 0; i < 2; i++)
            if (dc->o[i].p != NULL)
                memset(dc->o[i].p, 0xA5, dc->o[i].n);
        rkv_status s = dc->decode(data, size);
        if (s == RKV_OK) {
            accepted++;
            want = dc->type;
            dc->accepted(data, size);
            continue;
        }
        failed(s, dc->what);
        for (int i = 0; i < 2; i++)
            if (dc->o[i].p != NULL)
                untouched(dc->o[i].p, dc->o[i].n, dc->o[i].what);
        if (dc->refused != NULL)
            dc->refused(data, size);
    }
    route_json(data, size);
    if (accepted > 1)
        die("%d decoders accepted one input", accepted);
    rkv_wire_type t = RKV_WIRE_EVENTS;
    rkv_status s = rkv_wire_peek(data, size, &t);
    if (accepted && (s != RKV_OK || t != want))
        die("peek says %d (status %d) for an accepted type %d", (int)t, (int)s, (int)want);
    return 0;
}

/*
 * tests/fuzz/fuzz_codec.c -- libFuzzer harness for the fleet wire format
 * (fleet/codec.h): every message the router and the publishers read from
 * NATS, whatever the bytes.
 *
 * One input goes through every decoder (events, snapshot, snapshot chunk,
 * heartbeat, route query in both versions, route reply). What must hold:
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
 *     its tokens.
 * Any violation aborts (a crash for libFuzzer, a failed replay for ctest).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/codec.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int accepted = 0;
    rkv_wire_type want = RKV_WIRE_EVENTS;
    size_t rl = 0;
    rkv_status s;

    /* events */
    rkv_wire_batch_info bi;
    memset(ev, 0xA5, sizeof ev);
    memset(&bi, 0xA5, sizeof bi);
    s = rkv_wire_decode_events(data, size, &bi, ev, ROOM);
    if (s == RKV_OK) {
        accepted++;
        want = RKV_WIRE_EVENTS;
        if (bi.count == 0 || bi.count > ROOM || ev[0].seq != bi.first_seq)
            die("events: count %u, first seq %llu", bi.count,
                (unsigned long long)ev[0].seq);
        for (uint32_t i = 0; i < bi.count; i++) {
            if (ev[i].kind < RKV_EVENT_BLOCK_STORED || ev[i].kind > RKV_EVENT_RESYNC ||
                ev[i].medium >= RKV_MEDIUM_COUNT)
                die("events: event %u kind %d medium %d", i, (int)ev[i].kind,
                    (int)ev[i].medium);
            if (i && ev[i].seq <= ev[i - 1].seq)
                die("events: seq %llu after %llu", (unsigned long long)ev[i].seq,
                    (unsigned long long)ev[i - 1].seq);
        }
        if (rkv_wire_encode_events(bi.instance, bi.epoch, ev, bi.count, re_buf,
                                   sizeof re_buf, &rl) != RKV_OK)
            die("events: accepted batch does not encode");
        same(re_buf, rl, data, size, "events");
    } else {
        failed(s, "events");
        untouched(ev, sizeof ev, "events");
        untouched(&bi, sizeof bi, "events info");
    }

    /* snapshot */
    rkv_wire_snapshot_info si;
    memset(be, 0xA5, sizeof be);
    memset(&si, 0xA5, sizeof si);
    s = rkv_wire_decode_snapshot(data, size, &si, be, ROOM);
    if (s == RKV_OK) {
        accepted++;
        want = RKV_WIRE_SNAPSHOT;
        for (uint32_t i = 0; i < si.count; i++)
            if (be[i].medium >= RKV_MEDIUM_COUNT)
                die("snapshot: entry %u medium %d", i, (int)be[i].medium);
        if (rkv_wire_encode_snapshot(si.instance, si.epoch, si.seq, be, si.count,
                                     re_buf, sizeof re_buf, &rl) != RKV_OK)
            die("snapshot: accepted snapshot does not encode");
        same(re_buf, rl, data, size, "snapshot");
    } else {
        failed(s, "snapshot");
        untouched(be, sizeof be, "snapshot");
        untouched(&si, sizeof si, "snapshot info");
    }

    /* heartbeat */
    rkv_wire_heartbeat hb;
    memset(&hb, 0xA5, sizeof hb);
    s = rkv_wire_decode_heartbeat(data, size, &hb);
    if (s == RKV_OK) {
        accepted++;
        want = RKV_WIRE_HEARTBEAT;
        if (rkv_wire_encode_heartbeat(&hb, re_buf, sizeof re_buf, &rl) != RKV_OK)
            die("heartbeat: does not encode");
        same(re_buf, rl, data, size, "heartbeat");
    } else {
        failed(s, "heartbeat");
        untouched(&hb, sizeof hb, "heartbeat");
    }

    /* route query, either version */
    rkv_namespace ns = 0;
    uint32_t nq = 0;
    memset(qh, 0xA5, sizeof qh);
    s = rkv_wire_decode_query(data, size, &ns, qh, QROOM, &nq);
    if (s == RKV_OK) {
        accepted++;
        want = RKV_WIRE_QUERY;
        uint32_t ps = 0, nt = 0;
        rkv_namespace ns2 = 0;
        rkv_status t = rkv_wire_decode_query_tokens(data, size, &ns2, &ps, qt, QROOM, &nt);
        if (size >= 6 && data[4] == RKV_WIRE_QUERY_TOKENS_VERSION && data[5] == 0) {
            if (t != RKV_OK && t != RKV_ERR_NO_SPACE)
                die("query: version 2 decodes as hashes but not as tokens");
            if (t == RKV_OK) {
                if (ns2 != ns || ps == 0 || nq != nt / ps)
                    die("query: %u tokens of page %u gave %u hashes", nt, ps, nq);
                uint64_t parent = RKV_HASH_ROOT;
                for (uint32_t j = 0; j < nq; j++) {
                    parent = rkv_block_hash(parent, ns, qt + j * ps, ps);
                    if (qh[j] != parent)
                        die("query: page %u hash differs from the chain", j);
                }
                if (rkv_wire_encode_query_tokens(ns, qt, nt, ps, re_buf, sizeof re_buf,
                                                 &rl) != RKV_OK)
                    die("query: tokens do not encode");
                same(re_buf, rl, data, size, "query v2");
            }
        } else {
            if (t != RKV_ERR_FORMAT)
                die("query: a version 1 query decoded as tokens (%d)", (int)t);
            if (rkv_wire_encode_query(ns, qh, nq, re_buf, sizeof re_buf, &rl) != RKV_OK)
                die("query: hashes do not encode");
            same(re_buf, rl, data, size, "query v1");
        }
    } else {
        failed(s, "query");
        untouched(qh, sizeof qh, "query");
        /* the token decoder must agree that it is no good */
        uint32_t ps, nt;
        rkv_namespace ns2;
        memset(qt, 0xA5, sizeof qt);
        rkv_status t = rkv_wire_decode_query_tokens(data, size, &ns2, &ps, qt, QROOM, &nt);
        if (t == RKV_OK)
            die("query: tokens decode where hashes did not");
        untouched(qt, sizeof qt, "query tokens");
    }

    /* route reply */
    static rkv_wire_reply rep;
    memset(&rep, 0xA5, sizeof rep);
    s = rkv_wire_decode_reply(data, size, &rep);
    if (s == RKV_OK) {
        accepted++;
        want = RKV_WIRE_REPLY;
        if (rep.count > RKV_WIRE_MAX_ROUTE)
            die("reply: count %u", rep.count);
        if (rkv_wire_encode_reply(&rep, re_buf, sizeof re_buf, &rl) != RKV_OK)
            die("reply: does not encode");
        same(re_buf, rl, data, size, "reply");
    } else {
        failed(s, "reply");
        untouched(&rep, sizeof rep, "reply");
    }

    /* snapshot chunk */
    rkv_wire_chunk_info ci;
    memset(be, 0xA5, sizeof be);
    memset(&ci, 0xA5, sizeof ci);
    s = rkv_wire_decode_snapshot_chunk(data, size, &ci, be, ROOM);
    if (s == RKV_OK) {
        accepted++;
        want = RKV_WIRE_SNAPSHOT_CHUNK;
        if (ci.parts == 0 || ci.part >= ci.parts || ci.count > ci.total ||
            ci.count > ROOM)
            die("chunk: part %u of %u, %u of %llu blocks", ci.part, ci.parts, ci.count,
                (unsigned long long)ci.total);
        if (rkv_wire_encode_snapshot_chunk(&ci, be, re_buf, sizeof re_buf, &rl) !=
            RKV_OK)
            die("chunk: does not encode");
        same(re_buf, rl, data, size, "chunk");
    } else {
        failed(s, "chunk");
        untouched(be, sizeof be, "chunk");
        untouched(&ci, sizeof ci, "chunk info");
    }

    if (accepted > 1)
        die("%d decoders accepted one input", accepted);
    rkv_wire_type t = RKV_WIRE_EVENTS;
    s = rkv_wire_peek(data, size, &t);
    if (accepted && (s != RKV_OK || t != want))
        die("peek says %d (status %d) for an accepted type %d", (int)t, (int)s,
            (int)want);
    return 0;
}

/*
 * tests/fleet/test_fleet_codec.c -- the fleet wire format (fleet/codec.h):
 * round trips of real event batches (a tree with events on), and the strict
 * decoders against every truncation, every one-byte change, unknown
 * versions, trailing bytes and random bytes: an error status, never a
 * crash, the output untouched on failure.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/codec.h"
#include "tests/support/event_driver.h"
#include "tests/support/test_util.h"

static rkv_event *real_events(uint32_t *n)
{
    evd d;
    rkv_rng rng;
    evd_open_steps(&d, 64, 4, 4096, &rng, 7, 300);
    rkv_event *ev = calloc(4096, sizeof *ev);
    cr_assert_not_null(ev);
    cr_assert_eq(rkv_tree_events_drain(d.tree, ev, 4096, n), RKV_OK);
    cr_assert_gt(*n, 10);
    evd_close(&d);
    return ev;
}

static int events_equal(const rkv_event *a, const rkv_event *b)
{
    if (a->seq != b->seq || a->kind != b->kind || a->medium != b->medium ||
        a->num_hashes != b->num_hashes || a->ns != b->ns)
        return 0;
    if (a->kind == RKV_EVENT_BLOCK_STORED &&
        (a->page_size != b->page_size || a->parent_hash != b->parent_hash))
        return 0;
    if (a->kind == RKV_EVENT_RESYNC && a->lost != b->lost)
        return 0;
    return memcmp(a->hashes, b->hashes, a->num_hashes * sizeof a->hashes[0]) == 0;
}

Test(fleet_codec, events_round_trip)
{
    uint32_t n = 0;
    rkv_event *ev = real_events(&n);
    uint32_t take = n < RKV_WIRE_MAX_EVENTS ? n : RKV_WIRE_MAX_EVENTS;
    size_t need = rkv_wire_events_size(ev, take), len = 0;
    cr_assert_gt(need, 0);
    uint8_t *buf = malloc(need);
    cr_assert_eq(rkv_wire_encode_events(9, 3, ev, take, buf, need - 1, &len),
                 RKV_ERR_NO_SPACE);
    cr_assert_eq(rkv_wire_encode_events(9, 3, ev, take, buf, need, &len), RKV_OK);
    cr_assert_eq(len, need);
    rkv_wire_type t;
    cr_assert_eq(rkv_wire_peek(buf, len, &t), RKV_OK);
    cr_assert_eq(t, RKV_WIRE_EVENTS);
    rkv_event *out = calloc(take, sizeof *out);
    rkv_wire_batch_info info;
    cr_assert_eq(rkv_wire_decode_events(buf, len, &info, out, take - 1),
                 RKV_ERR_NO_SPACE);
    cr_assert_eq(rkv_wire_decode_events(buf, len, &info, out, take), RKV_OK);
    cr_assert_eq(info.instance, 9);
    cr_assert_eq(info.epoch, 3);
    cr_assert_eq(info.count, take);
    cr_assert_eq(info.first_seq, ev[0].seq);
    for (uint32_t i = 0; i < take; i++)
        cr_assert(events_equal(&ev[i], &out[i]), "event %u differs", i);
    free(out);
    free(buf);
    free(ev);
}

Test(fleet_codec, encoder_refuses_bad_events)
{
    rkv_event e[2];
    memset(e, 0, sizeof e);
    e[0].seq = 5;
    e[0].kind = RKV_EVENT_BLOCK_STORED;
    e[0].num_hashes = 1;
    e[1] = e[0];
    e[1].seq = 5; /* not increasing */
    uint8_t buf[512];
    size_t len;
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf, sizeof buf, &len),
                 RKV_ERR_INVALID_ARG);
    e[1].seq = 6;
    e[1].medium = RKV_MEDIUM_COUNT;
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf, sizeof buf, &len),
                 RKV_ERR_INVALID_ARG);
    e[1].medium = 0;
    e[1].kind = 9;
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf, sizeof buf, &len),
                 RKV_ERR_INVALID_ARG);
    e[1].kind = RKV_EVENT_RESYNC; /* with hashes, no lost */
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf, sizeof buf, &len),
                 RKV_ERR_INVALID_ARG);
    e[1].num_hashes = 0;
    e[1].lost = 4;
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf, sizeof buf, &len), RKV_OK);
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 0, buf, sizeof buf, &len),
                 RKV_ERR_INVALID_ARG);
}

/* A re-encoding (enc its status, re[0..*rl)) succeeded and is the message
 * it was decoded from. *rl is read here, after the encoder ran. */
static rkv_status reencodes(rkv_status enc, const uint8_t *re, const size_t *rl,
                            const uint8_t *buf, size_t len, const char *what)
{
    cr_assert_eq(enc, RKV_OK, "%s does not encode", what);
    cr_assert(*rl == len && memcmp(re, buf, len) == 0, "%s not canonical", what);
    return RKV_OK;
}

/* Every decoder on buf[0..len): must not crash; a message one of them
 * accepts re-encodes to exactly the same bytes (the encoding is canonical,
 * so a decoder that accepted junk would show). Returns RKV_OK when one
 * decoder accepted it. */
static rkv_status decode_any(const uint8_t *buf, size_t len)
{
    rkv_status any = RKV_ERR_FORMAT;
    uint8_t re[2048];
    size_t rl = 0;
    rkv_wire_batch_info bi;
    rkv_event ev[64];
    if (rkv_wire_decode_events(buf, len, &bi, ev, 64) == RKV_OK) {
        any = reencodes(rkv_wire_encode_events(bi.instance, bi.epoch, ev, bi.count, re,
                                               sizeof re, &rl),
                        re, &rl, buf, len, "events");
    }
    rkv_wire_snapshot_info si;
    rkv_block_entry be[64];
    if (rkv_wire_decode_snapshot(buf, len, &si, be, 64) == RKV_OK) {
        any = reencodes(rkv_wire_encode_snapshot(si.instance, si.epoch, si.seq, be, si.count,
                                                 re, sizeof re, &rl),
                        re, &rl, buf, len, "snapshot");
    }
    rkv_wire_heartbeat hb;
    if (rkv_wire_decode_heartbeat(buf, len, &hb) == RKV_OK) {
        any = reencodes(rkv_wire_encode_heartbeat(&hb, re, sizeof re, &rl), re, &rl, buf, len,
                        "heartbeat");
    }
    rkv_namespace ns;
    uint64_t h[64];
    uint32_t nh;
    if (rkv_wire_decode_query(buf, len, &ns, h, 64, &nh) == RKV_OK) {
        int32_t tok[256];
        uint32_t ps, nt;
        rkv_status enc;
        if (buf[4] == RKV_WIRE_QUERY_TOKENS_VERSION) {
            cr_assert_eq(rkv_wire_decode_query_tokens(buf, len, &ns, &ps, tok, 256, &nt),
                         RKV_OK, "%s", rkv_last_error());
            cr_assert_eq(nt / ps, nh);
            enc = rkv_wire_encode_query_tokens(ns, tok, nt, ps, re, sizeof re, &rl);
        } else {
            cr_assert_eq(rkv_wire_decode_query_tokens(buf, len, &ns, &ps, tok, 256, &nt),
                         RKV_ERR_FORMAT);
            enc = rkv_wire_encode_query(ns, h, nh, re, sizeof re, &rl);
        }
        any = reencodes(enc, re, &rl, buf, len, "query");
    }
    rkv_wire_reply rep;
    if (rkv_wire_decode_reply(buf, len, &rep) == RKV_OK) {
        any = reencodes(rkv_wire_encode_reply(&rep, re, sizeof re, &rl), re, &rl, buf, len,
                        "reply");
    }
    return any;
}

/* One message of each type (and both route query versions), encoded. */
#define NTYPES 6
static size_t sample(int type, uint8_t *buf, size_t cap)
{
    size_t len = 0;
    switch (type) {
    case 0: {
        rkv_event e[3];
        memset(e, 0, sizeof e);
        e[0] = (rkv_event){.seq = 10, .kind = RKV_EVENT_BLOCK_STORED,
                           .num_hashes = 3, .page_size = 16, .ns = 2,
                           .parent_hash = 77, .hashes = {1, 2, 3}};
        e[1] = (rkv_event){.seq = 11, .kind = RKV_EVENT_RESYNC, .lost = 5};
        e[2] = (rkv_event){.seq = 16, .kind = RKV_EVENT_BLOCK_REMOVED,
                           .num_hashes = 1, .ns = 2, .hashes = {3}};
        cr_assert_eq(rkv_wire_encode_events(4, 1, e, 3, buf, cap, &len), RKV_OK);
        break;
    }
    case 1: {
        rkv_block_entry b[2] = {{1, 5, 0, 0, 0}, {1, 6, 5, 1, 0}};
        cr_assert_eq(rkv_wire_encode_snapshot(4, 1, 99, b, 2, buf, cap, &len), RKV_OK);
        break;
    }
    case 2: {
        rkv_wire_heartbeat hb = {4, 1, 99, 3, 1234};
        cr_assert_eq(rkv_wire_encode_heartbeat(&hb, buf, cap, &len), RKV_OK);
        break;
    }
    case 3: {
        uint64_t h[4] = {9, 8, 7, 6};
        cr_assert_eq(rkv_wire_encode_query(3, h, 4, buf, cap, &len), RKV_OK);
        break;
    }
    case 5: {
        int32_t tok[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        cr_assert_eq(rkv_wire_encode_query_tokens(3, tok, 11, 4, buf, cap, &len), RKV_OK);
        break;
    }
    default: {
        rkv_wire_reply r;
        memset(&r, 0, sizeof r);
        r.instance = 4;
        r.pages = 2;
        r.count = 2;
        r.ids[0] = 4;
        r.id_pages[0] = 2;
        r.ids[1] = 5;
        cr_assert_eq(rkv_wire_encode_reply(&r, buf, cap, &len), RKV_OK);
        break;
    }
    }
    return len;
}

Test(fleet_codec, every_truncation_is_an_error)
{
    uint8_t buf[1024];
    for (int type = 0; type < NTYPES; type++) {
        size_t len = sample(type, buf, sizeof buf);
        cr_assert_eq(decode_any(buf, len), RKV_OK, "type %d does not decode", type);
        for (size_t cut = 0; cut < len; cut++) {
            /* a copy of exactly `cut` bytes, so ASan sees any overread */
            uint8_t *c = malloc(cut ? cut : 1);
            memcpy(c, buf, cut);
            cr_assert_neq(decode_any(c, cut), RKV_OK, "type %d cut at %zu decodes",
                          type, cut);
            free(c);
        }
        /* one trailing byte too many */
        buf[len] = 0;
        cr_assert_neq(decode_any(buf, len + 1), RKV_OK, "type %d + 1 byte", type);
    }
}

Test(fleet_codec, unknown_version_and_flags)
{
    uint8_t buf[1024];
    for (int type = 0; type < NTYPES; type++) {
        size_t len = sample(type, buf, sizeof buf);
        uint8_t v = buf[4];
        static const uint8_t bad[][2] = {{0, 0}, {3, 0}, {0xff, 0xff}, {1, 1}};
        rkv_wire_type t;
        for (int b = 0; b < 4; b++) {
            buf[4] = bad[b][0];
            buf[5] = bad[b][1];
            cr_assert_eq(rkv_wire_peek(buf, len, &t), RKV_ERR_UNSUPPORTED);
            cr_assert_neq(decode_any(buf, len), RKV_OK);
            cr_assert_not_null(strstr(rkv_last_error(), "version"));
        }
        /* version 2 exists for route queries only */
        buf[4] = 2;
        buf[5] = 0;
        cr_assert_eq(rkv_wire_peek(buf, len, &t),
                     type >= 3 && type != 4 ? RKV_OK : RKV_ERR_UNSUPPORTED);
        buf[4] = v;
        buf[6] = 1;
        cr_assert_eq(rkv_wire_peek(buf, len, &t), RKV_ERR_FORMAT);
        buf[6] = 0;
        cr_assert_eq(rkv_wire_peek(buf, len, &t), RKV_OK);
        cr_assert_eq((int)t, type == 5 ? RKV_WIRE_QUERY : type + 1);
    }
}

Test(fleet_codec, failure_leaves_output_untouched)
{
    uint8_t buf[1024];
    size_t len = sample(0, buf, sizeof buf);
    /* the last event is valid up to its hash; make the middle one bad */
    rkv_event out[4];
    memset(out, 0xAB, sizeof out);
    rkv_wire_batch_info info;
    memset(&info, 0xCD, sizeof info);
    cr_assert_neq(rkv_wire_decode_events(buf, len - 1, &info, out, 4), RKV_OK);
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(((uint8_t *)out)[i], 0xAB, "out written at byte %zu", i);
    for (size_t i = 0; i < sizeof info; i++)
        cr_assert_eq(((uint8_t *)&info)[i], 0xCD);
}

Test(fleet_codec, every_byte_changed_never_crashes)
{
    uint8_t buf[1024];
    for (int type = 0; type < NTYPES; type++) {
        size_t len = sample(type, buf, sizeof buf);
        for (size_t i = 0; i < len; i++)
            for (int v = 0; v < 256; v += 17) {
                uint8_t *c = malloc(len);
                memcpy(c, buf, len);
                c[i] = (uint8_t)v;
                (void)decode_any(c, len);
                free(c);
            }
    }
}

Test(fleet_codec, random_bytes_are_rejected)
{
    rkv_rng rng;
    rkv_rng_init(&rng, 11);
    uint64_t ok = 0;
    for (int it = 0; it < 20000; it++) {
        size_t len = rkv_rng_below(&rng, 200);
        uint8_t *c = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++)
            c[i] = (uint8_t)rkv_rng_next(&rng);
        if (it % 2 && len >= 8) { /* a valid header half the time */
            uint8_t hdr[1024];
            sample((int)rkv_rng_below(&rng, NTYPES), hdr, sizeof hdr);
            memcpy(c, hdr, 8);
        }
        if (decode_any(c, len) == RKV_OK)
            ok++;
        free(c);
    }
    cr_log_info("%llu of 20000 random messages decoded (and re-encoded equal)",
                (unsigned long long)ok);
}

Test(fleet_codec, token_query_hashes_like_the_tree)
{
    /* a tree caches a prompt; the token query's pages are its page hashes */
    evd d;
    rkv_rng rng;
    evd_open_steps(&d, 64, 4, 4096, &rng, 3, 50);
    uint32_t P = d.P;
    for (int q = 0; q < 40; q++) {
        int32_t tok[EVD_MAX_TOK];
        uint64_t ns;
        uint32_t n = evd_tokens(&rng, tok, &ns);
        uint8_t buf[RKV_WIRE_HEADER + 16 + 4 * EVD_MAX_TOK];
        size_t len = 0;
        cr_assert_eq(rkv_wire_encode_query_tokens(ns, tok, n, P, buf, sizeof buf, &len),
                     RKV_OK);
        cr_assert_eq(len, rkv_wire_query_tokens_size(n));
        uint64_t h[EVD_MAX_TOK], parent = RKV_HASH_ROOT;
        rkv_namespace got_ns = 0;
        uint32_t nh = 0;
        cr_assert_eq(rkv_wire_decode_query(buf, len, &got_ns, h, EVD_MAX_TOK, &nh), RKV_OK,
                     "%s", rkv_last_error());
        cr_assert_eq(got_ns, ns);
        cr_assert_eq(nh, n / P, "a partial page must not count");
        for (uint32_t j = 0; j < nh; j++) {
            parent = rkv_block_hash(parent, ns, tok + j * P, P);
            cr_assert_eq(h[j], parent, "page %u", j);
        }
        /* the tree's own hashes of what it caches agree */
        rkv_block_id blocks[EVD_MAX_TOK];
        rkv_match m;
        cr_assert_eq(rkv_tree_match(d.tree, ns, tok, n, blocks, RKV_MATCH_PEEK, &m),
                     RKV_OK);
        for (uint32_t j = 0; j < m.num_blocks; j++)
            cr_assert_eq(rkv_pool_block_hash(d.pool, blocks[j]), h[j]);
        /* room for one page fewer: NO_SPACE, nothing written */
        if (nh) {
            uint64_t keep = h[0];
            h[0] = ~keep;
            cr_assert_eq(rkv_wire_decode_query(buf, len, &got_ns, h, nh - 1, &nh),
                         RKV_ERR_NO_SPACE);
            cr_assert_eq(h[0], ~keep);
        }
    }
    evd_close(&d);
}

Test(fleet_codec, token_query_bounds)
{
    int32_t tok[8] = {0};
    uint8_t buf[256];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_query_tokens(1, tok, 8, 0, buf, sizeof buf, &len),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_wire_encode_query_tokens(1, tok, 8, RKV_WIRE_MAX_PAGE + 1, buf,
                                              sizeof buf, &len), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_wire_encode_query_tokens(1, tok, RKV_WIRE_MAX_QUERY + 1, 4, buf,
                                              sizeof buf, &len), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_wire_encode_query_tokens(1, tok, 8, 4, buf, 20, &len),
                 RKV_ERR_NO_SPACE);
    cr_assert_eq(rkv_wire_encode_query_tokens(1, tok, 8, 4, buf, sizeof buf, &len), RKV_OK);
    /* a page size of 0 or above the bound on the wire */
    rkv_namespace ns;
    uint64_t h[8];
    uint32_t nh;
    for (uint32_t ps = 0; ps < 2; ps++) {
        uint32_t v = ps ? RKV_WIRE_MAX_PAGE + 1 : 0;
        memcpy(buf + 16, &v, 4); /* little-endian host */
        cr_assert_eq(rkv_wire_decode_query(buf, len, &ns, h, 8, &nh), RKV_ERR_FORMAT);
        cr_assert_not_null(strstr(rkv_last_error(), "page size"));
    }
    /* fewer tokens than pages of a page: zero hashes */
    cr_assert_eq(rkv_wire_encode_query_tokens(1, tok, 3, 4, buf, sizeof buf, &len), RKV_OK);
    cr_assert_eq(rkv_wire_decode_query(buf, len, &ns, h, 0, &nh), RKV_OK);
    cr_assert_eq(nh, 0);
}

Test(fleet_codec, repeated_or_backward_seq_in_a_batch_is_format)
{
    rkv_event e[2];
    memset(e, 0, sizeof e);
    e[0] = (rkv_event){.seq = 5, .kind = RKV_EVENT_ALL_CLEARED};
    e[1] = (rkv_event){.seq = 6, .kind = RKV_EVENT_ALL_CLEARED};
    uint8_t buf[256];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf, sizeof buf, &len), RKV_OK);
    /* the encoder refuses a repeated or backward seq */
    e[1].seq = 5;
    size_t l2;
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf + 128, 128, &l2),
                 RKV_ERR_INVALID_ARG);
    e[1].seq = 4;
    cr_assert_eq(rkv_wire_encode_events(1, 1, e, 2, buf + 128, 128, &l2),
                 RKV_ERR_INVALID_ARG);
    /* on the wire: event 1's seq delta (header 8, batch 28, event 0 20
     * bytes, then kind, medium, num_hashes, page_size) set to 0 */
    size_t at = RKV_WIRE_HEADER + 28 + 20 + 8;
    cr_assert_eq(buf[at], 1);
    buf[at] = 0;
    rkv_wire_batch_info bi;
    rkv_event out[2];
    cr_assert_eq(rkv_wire_decode_events(buf, len, &bi, out, 2), RKV_ERR_FORMAT);
    cr_assert_not_null(strstr(rkv_last_error(), "seq delta"));
}

Test(fleet_codec, snapshot_chunk_round_trip_and_bounds)
{
    rkv_block_entry b[3] = {{0, 11, RKV_HASH_ROOT, 0, 0}, {0, 12, 11, 1, 0},
                            {5, 13, 12, 2, 0}};
    rkv_wire_chunk_info c = {4, 2, 99, 1, 3, 7, 3}, got;
    uint8_t buf[256];
    size_t len = 0;
    cr_assert_eq(rkv_wire_snapshot_chunk_size(3), RKV_WIRE_HEADER + 44 + 3 * 25);
    cr_assert_eq(rkv_wire_encode_snapshot_chunk(&c, b, buf, sizeof buf, &len), RKV_OK);
    cr_assert_eq(len, rkv_wire_snapshot_chunk_size(3));
    rkv_wire_type t;
    cr_assert_eq(rkv_wire_peek(buf, len, &t), RKV_OK);
    cr_assert_eq(t, RKV_WIRE_SNAPSHOT_CHUNK);
    rkv_block_entry out[3];
    cr_assert_eq(rkv_wire_decode_snapshot_chunk(buf, len, &got, out, 3), RKV_OK);
    cr_assert(got.instance == 4 && got.epoch == 2 && got.seq == 99 && got.part == 1 &&
              got.parts == 3 && got.total == 7 && got.count == 3);
    for (int i = 0; i < 3; i++)
        cr_assert(out[i].ns == b[i].ns && out[i].hash == b[i].hash &&
                  out[i].parent_hash == b[i].parent_hash && out[i].medium == b[i].medium);
    /* not a snapshot, and too little room is NO_SPACE */
    rkv_wire_snapshot_info si;
    cr_assert_eq(rkv_wire_decode_snapshot(buf, len, &si, NULL, 0), RKV_ERR_FORMAT);
    cr_assert_eq(rkv_wire_decode_snapshot_chunk(buf, len, &got, out, 2),
                 RKV_ERR_NO_SPACE);
    /* part >= parts, parts 0, count > total: refused both ways */
    rkv_wire_chunk_info bad[3] = {{4, 2, 99, 3, 3, 7, 3}, {4, 2, 99, 0, 0, 7, 3},
                                  {4, 2, 99, 0, 1, 2, 3}};
    for (int i = 0; i < 3; i++) {
        size_t l2 = 0;
        cr_assert_eq(rkv_wire_encode_snapshot_chunk(&bad[i], b, buf, sizeof buf, &l2),
                     RKV_ERR_INVALID_ARG);
    }
    cr_assert_eq(rkv_wire_encode_snapshot_chunk(&c, b, buf, sizeof buf, &len), RKV_OK);
    buf[RKV_WIRE_HEADER + 24] = 3; /* part 3 of 3 */
    cr_assert_eq(rkv_wire_decode_snapshot_chunk(buf, len, &got, out, 3), RKV_ERR_FORMAT);
    /* how many blocks fit a payload */
    cr_assert_eq(rkv_wire_snapshot_chunk_room(1048576),
                 (1048576 - RKV_WIRE_HEADER - 44) / 25);
    cr_assert_eq(rkv_wire_snapshot_chunk_room(RKV_WIRE_HEADER + 44), 0);
}

/* A second look at truncation, with the specific decoder and real data: a
 * batch of real events cut right after any whole event (or inside its
 * fixed head), and a heartbeat cut after any whole field, are refused with
 * RKV_ERR_FORMAT and leave the output untouched. A reader that treats "no
 * bytes left" as a zero field would accept exactly these cuts. */
Test(fleet_codec, cut_at_a_field_or_event_boundary_is_refused)
{
    uint32_t n = 0;
    rkv_event *ev = real_events(&n);
    uint32_t take = n < 40 ? n : 40;
    size_t len = 0, need = rkv_wire_events_size(ev, take);
    uint8_t *buf = malloc(need);
    cr_assert_eq(rkv_wire_encode_events(9, 3, ev, take, buf, need, &len), RKV_OK);
    rkv_event *out = malloc(take * sizeof *out);
    rkv_wire_batch_info info;
    /* the fixed part: header, instance, epoch, first seq, count */
    const size_t fixed[] = {RKV_WIRE_HEADER, RKV_WIRE_HEADER + 8, RKV_WIRE_HEADER + 16,
                            RKV_WIRE_HEADER + 24, RKV_WIRE_HEADER + 28};
    for (uint32_t k = 0; k < take + 5; k++) {
        /* k < take: right after event k (k + 1 events); then the fixed part */
        size_t cut = k < take ? rkv_wire_events_size(ev, k + 1) : fixed[k - take];
        if (cut >= len)
            continue; /* the whole batch */
        uint8_t *c = malloc(cut);
        memcpy(c, buf, cut);
        memset(out, 0xAB, take * sizeof *out);
        memset(&info, 0xCD, sizeof info);
        cr_assert_eq(rkv_wire_decode_events(c, cut, &info, out, take), RKV_ERR_FORMAT,
                     "batch of %u events cut at %zu of %zu bytes decodes", take, cut, len);
        cr_assert_eq(((uint8_t *)out)[0], 0xAB);
        cr_assert_eq(((uint8_t *)&info)[sizeof info - 1], 0xCD);
        free(c);
    }
    /* heartbeat: header, instance 8, epoch 8, last_seq 8, running 4, queued 8 */
    uint8_t hb[64];
    rkv_wire_heartbeat h = {7, 2, 1000, 5, 99}, got;
    cr_assert_eq(rkv_wire_encode_heartbeat(&h, hb, sizeof hb, &len), RKV_OK);
    cr_assert_eq(len, RKV_WIRE_HEADER + 36);
    const size_t hcut[] = {RKV_WIRE_HEADER, RKV_WIRE_HEADER + 8, RKV_WIRE_HEADER + 16,
                           RKV_WIRE_HEADER + 24, RKV_WIRE_HEADER + 28};
    for (size_t i = 0; i < sizeof hcut / sizeof hcut[0]; i++) {
        memset(&got, 0xEE, sizeof got);
        cr_assert_eq(rkv_wire_decode_heartbeat(hb, hcut[i], &got), RKV_ERR_FORMAT,
                     "heartbeat cut at %zu decodes", hcut[i]);
        cr_assert_eq(((uint8_t *)&got)[0], 0xEE);
    }
    cr_assert_eq(rkv_wire_decode_heartbeat(hb, len, &got), RKV_OK);
    cr_assert(got.instance == 7 && got.last_seq == 1000 && got.queued_tokens == 99);
    free(out);
    free(buf);
    free(ev);
}

/* A batch of zero events is not a message the encoder can make: its
 * decoder refuses one (count 0, nothing after it). */
Test(fleet_codec, empty_event_batch_is_refused)
{
    rkv_event e;
    memset(&e, 0, sizeof e);
    e.seq = 4;
    e.kind = RKV_EVENT_ALL_CLEARED;
    uint8_t buf[256];
    size_t len = 0;
    cr_assert_eq(rkv_wire_encode_events(1, 1, &e, 1, buf, sizeof buf, &len), RKV_OK);
    size_t head = RKV_WIRE_HEADER + 28; /* instance, epoch, first seq, count */
    cr_assert_gt(len, head);
    memset(buf + head - 4, 0, 4); /* count 0 */
    rkv_wire_batch_info info;
    rkv_event out[1];
    cr_assert_eq(rkv_wire_decode_events(buf, head, &info, out, 1), RKV_ERR_FORMAT);
    cr_assert_eq(rkv_wire_decode_events(buf, head, &info, NULL, 0), RKV_ERR_FORMAT);
    cr_assert_neq(decode_any(buf, head), RKV_OK);
}

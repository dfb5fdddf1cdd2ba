/*
 * fleet/kvev_encode.c -- rkv_kvev_encode (fleet/kvev.h): radixkv's events
 * as one vLLM-format KV-event batch in msgpack. A writer that counts what
 * it would write past cap, so a short buffer reports the size needed and
 * a second call with that size succeeds. Integers use the smallest
 * msgpack encoding, as the engines' encoders do.
 */
#include "fleet/kvev.h"

#include <string.h>

#include "common/status.h"

typedef struct writer {
    uint8_t *p;
    size_t at, cap;
} writer;

static void put(writer *w, const void *src, size_t n)
{
    if (w->at <= w->cap && n <= w->cap - w->at)
        memcpy(w->p + w->at, src, n);
    w->at += n;
}

static void byte(writer *w, uint8_t b) { put(w, &b, 1); }

static void be_n(writer *w, uint64_t v, unsigned n)
{
    uint8_t b[8];
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    put(w, b, n);
}

static void uint_(writer *w, uint64_t v)
{
    if (v <= 0x7f) {
        byte(w, (uint8_t)v);
    } else if (v <= 0xff) {
        byte(w, 0xcc);
        be_n(w, v, 1);
    } else if (v <= 0xffff) {
        byte(w, 0xcd);
        be_n(w, v, 2);
    } else if (v <= 0xffffffffu) {
        byte(w, 0xce);
        be_n(w, v, 4);
    } else {
        byte(w, 0xcf);
        be_n(w, v, 8);
    }
}

static void int_(writer *w, int64_t v)
{
    if (v >= 0) {
        uint_(w, (uint64_t)v);
    } else if (v >= -32) {
        byte(w, (uint8_t)(int8_t)v);
    } else if (v >= INT8_MIN) {
        byte(w, 0xd0);
        be_n(w, (uint64_t)v, 1);
    } else if (v >= INT16_MIN) {
        byte(w, 0xd1);
        be_n(w, (uint64_t)v, 2);
    } else if (v >= INT32_MIN) {
        byte(w, 0xd2);
        be_n(w, (uint64_t)v, 4);
    } else {
        byte(w, 0xd3);
        be_n(w, (uint64_t)v, 8);
    }
}

static void array(writer *w, uint32_t n)
{
    if (n <= 15) {
        byte(w, (uint8_t)(0x90 | n));
    } else if (n <= 0xffff) {
        byte(w, 0xdc);
        be_n(w, n, 2);
    } else {
        byte(w, 0xdd);
        be_n(w, n, 4);
    }
}

static void str(writer *w, const char *s)
{
    size_t n = strlen(s); /* our own short constants */
    byte(w, (uint8_t)(0xa0 | n));
    put(w, s, n);
}

static void nil(writer *w) { byte(w, 0xc0); }

/* An event's block hashes: an array of unsigned integers. */
static void hashes(writer *w, const rkv_event *e)
{
    array(w, e->num_hashes);
    for (uint32_t j = 0; j < e->num_hashes; j++)
        uint_(w, e->hashes[j]);
}

static const char *medium_name(uint8_t m)
{
    return m == RKV_MEDIUM_HOST ? "CPU_PINNED" : m == RKV_MEDIUM_DISK ? "DISK" : "GPU";
}

rkv_status rkv_kvev_encode(double ts, const rkv_event *ev, uint32_t n,
                           const rkv_kvev_tokens *tok, void *buf, size_t cap,
                           size_t *len_out)
{
    const char *what = "rkv_kvev_encode";
    if ((!ev && n) || !len_out || (!buf && cap))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", what);
    for (uint32_t i = 0; i < n; i++) {
        const rkv_event *e = &ev[i];
        if (e->kind < RKV_EVENT_BLOCK_STORED || e->kind > RKV_EVENT_RESYNC ||
            e->medium >= RKV_MEDIUM_COUNT || e->num_hashes > RKV_EVENT_MAX_HASHES)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: event %u out of range",
                                 what, i);
        if (e->kind == RKV_EVENT_BLOCK_STORED && tok && tok[i].ids &&
            (uint64_t)tok[i].n != (uint64_t)e->num_hashes * e->page_size)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: event %u has %u token "
                                 "ids for %u pages of %u", what, i, tok[i].n,
                                 e->num_hashes, e->page_size);
    }
    writer w = {buf, 0, cap};
    array(&w, 3);
    uint64_t bits;
    memcpy(&bits, &ts, sizeof bits);
    byte(&w, 0xcb);
    be_n(&w, bits, 8);
    array(&w, n);
    for (uint32_t i = 0; i < n; i++) {
        const rkv_event *e = &ev[i];
        switch (e->kind) {
        case RKV_EVENT_BLOCK_STORED:
            array(&w, 8);
            str(&w, "BlockStored");
            hashes(&w, e);
            if (e->parent_hash == RKV_HASH_ROOT)
                nil(&w);
            else
                uint_(&w, e->parent_hash);
            if (tok && tok[i].ids) {
                array(&w, tok[i].n);
                for (uint32_t j = 0; j < tok[i].n; j++)
                    int_(&w, tok[i].ids[j]);
            } else {
                array(&w, 0);
            }
            uint_(&w, e->page_size);
            if (e->ns == 0)
                nil(&w);
            else
                uint_(&w, e->ns);
            str(&w, medium_name(e->medium));
            nil(&w);
            break;
        case RKV_EVENT_BLOCK_REMOVED:
            array(&w, 3);
            str(&w, "BlockRemoved");
            hashes(&w, e);
            str(&w, medium_name(e->medium));
            break;
        default: /* ALL_CLEARED, and RESYNC: see fleet/kvev.h */
            array(&w, 1);
            str(&w, "AllBlocksCleared");
            break;
        }
    }
    nil(&w);
    *len_out = w.at;
    if (w.at > cap)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %zu bytes needed, %zu given",
                             what, w.at, cap);
    return RKV_OK;
}

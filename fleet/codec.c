/*
 * fleet/codec.c -- encoders and strict decoders of the fleet wire format
 * (layout in fleet/codec.h). A reader never reads past len: every fetch
 * checks the bytes left, and a failed fetch sticks, so a decoder validates
 * a whole message with one pass that writes nothing (write == 0) and then
 * fills the output with a second pass over the same, now known good, bytes.
 */
#include "fleet/codec.h"

#include <stdbool.h>
#include <string.h>

#include "common/status.h"

static const char MAGIC[7][4] = {
    {0, 0, 0, 0}, {'R', 'K', 'V', 'E'}, {'R', 'K', 'V', 'S'},
    {'R', 'K', 'V', 'H'}, {'R', 'K', 'V', 'Q'}, {'R', 'K', 'V', 'R'},
    {'R', 'K', 'V', 'C'}};

/* ---- writer ------------------------------------------------------------------ */
typedef struct writer {
    uint8_t *p;
    size_t n;
} writer;

static void put(writer *w, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        w->p[w->n++] = (uint8_t)(v >> (8 * i));
}

static void put_header_v(writer *w, rkv_wire_type t, unsigned version)
{
    memcpy(w->p, MAGIC[t], 4);
    w->n = 4;
    put(w, version, 2);
    put(w, 0, 2);
}

/* Every encoder, once its arguments are checked: the message of `need`
 * bytes must fit w's buffer of cap bytes, and then opens with its header. */
static rkv_status begin_encode(writer *w, size_t cap, size_t need, rkv_wire_type t,
                               unsigned version, const char *what)
{
    if (!w->p || cap < need)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %zu bytes needed, %zu given", what,
                             need, cap);
    put_header_v(w, t, version);
    return RKV_OK;
}

/* ---- reader ------------------------------------------------------------------ */
typedef struct reader {
    const uint8_t *p;
    size_t n, at;
    int bad;
    unsigned version; /* of the message, once header() accepted it */
} reader;

static uint64_t get(reader *r, unsigned bytes)
{
    if (r->bad || r->n - r->at < bytes) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)r->p[r->at + i] << (8 * i);
    r->at += bytes;
    return v;
}

static size_t left(const reader *r)
{
    return r->bad ? 0 : r->n - r->at;
}

static rkv_status header(reader *r, const void *buf, size_t len, rkv_wire_type *t,
                         const char *what)
{
    if (!buf && len)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL buffer", what);
    r->p = buf;
    r->n = len;
    r->at = 0;
    r->bad = 0;
    if (len < RKV_WIRE_HEADER)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: %zu bytes, shorter than the header",
                             what, len);
    int found = 0;
    for (int i = RKV_WIRE_EVENTS; i <= RKV_WIRE_SNAPSHOT_CHUNK; i++)
        if (memcmp(buf, MAGIC[i], 4) == 0) {
            *t = (rkv_wire_type)i;
            found = 1;
        }
    if (!found)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: bad magic", what);
    r->at = 4;
    uint64_t version = get(r, 2), flags = get(r, 2);
    if (version != RKV_WIRE_VERSION &&
        !(*t == RKV_WIRE_QUERY && version == RKV_WIRE_QUERY_TOKENS_VERSION))
        return rkv_set_error(RKV_ERR_UNSUPPORTED,
                             "%s: wire version %llu of message type %d, this build "
                             "reads %u (and %u for route queries)", what,
                             (unsigned long long)version, (int)*t, RKV_WIRE_VERSION,
                             RKV_WIRE_QUERY_TOKENS_VERSION);
    r->version = (unsigned)version;
    if (flags != 0)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: flags %llu, expected 0", what,
                             (unsigned long long)flags);
    return RKV_OK;
}

/* Every decoder's opening: the caller's pointers were usable (args_ok),
 * and buf holds a header of message type `want`; r is then at its body. */
static rkv_status begin_decode(reader *r, const void *buf, size_t len, rkv_wire_type want,
                               const char *what, int args_ok)
{
    if (!args_ok)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", what);
    rkv_wire_type t = RKV_WIRE_EVENTS;
    rkv_status s = header(r, buf, len, &t, what);
    if (s != RKV_OK)
        return s;
    if (t != want)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: message type %d, expected %d",
                             what, (int)t, (int)want);
    return RKV_OK;
}

/* A count read from the message must be at most max and its items of
 * `unit` bytes must fill exactly the rest of the message. */
static rkv_status fills_rest(const reader *r, uint64_t count, uint64_t max, size_t unit,
                             const char *items, const char *what)
{
    if (count > max || left(r) != count * unit)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: %llu %s do not fill the %zu bytes left",
                             what, (unsigned long long)count, items, left(r));
    return RKV_OK;
}

static rkv_status finish(const reader *r, const char *what)
{
    if (r->bad)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: truncated message (%zu bytes)",
                             what, r->n);
    if (r->at != r->n)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: %zu trailing bytes", what,
                             r->n - r->at);
    return RKV_OK;
}

rkv_status rkv_wire_peek(const void *buf, size_t len, rkv_wire_type *out)
{
    if (!out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_wire_peek: NULL out");
    reader r;
    rkv_wire_type t = RKV_WIRE_EVENTS;
    rkv_status s = header(&r, buf, len, &t, "rkv_wire_peek");
    if (s == RKV_OK)
        *out = t;
    return s;
}

/* ---- events ---------------------------------------------------------------- */
#define EV_FIXED 20u /* kind, medium, num_hashes, page_size, seq_delta, ns */
#define BATCH_FIXED (RKV_WIRE_HEADER + 28u)

static int event_ok(const rkv_event *e)
{
    if (e->medium >= RKV_MEDIUM_COUNT || e->num_hashes > RKV_EVENT_MAX_HASHES)
        return 0;
    switch (e->kind) {
    case RKV_EVENT_BLOCK_STORED:
    case RKV_EVENT_BLOCK_REMOVED:
        return e->num_hashes >= 1;
    case RKV_EVENT_ALL_CLEARED:
        return e->num_hashes == 0;
    case RKV_EVENT_RESYNC:
        return e->num_hashes == 0 && e->lost >= 1;
    default:
        return 0;
    }
}

static size_t event_size(const rkv_event *e)
{
    size_t s = EV_FIXED + 8u * e->num_hashes;
    if (e->kind == RKV_EVENT_BLOCK_STORED || e->kind == RKV_EVENT_RESYNC)
        s += 8;
    return s;
}

size_t rkv_wire_events_size(const rkv_event *ev, uint32_t n)
{
    if (!ev || n == 0 || n > RKV_WIRE_MAX_EVENTS)
        return 0;
    size_t s = BATCH_FIXED;
    for (uint32_t i = 0; i < n; i++) {
        if (!event_ok(&ev[i]))
            return 0;
        if (i > 0 && (ev[i].seq <= ev[i - 1].seq ||
                      ev[i].seq - ev[i - 1].seq > UINT32_MAX))
            return 0;
        s += event_size(&ev[i]);
    }
    return s;
}

rkv_status rkv_wire_encode_events(uint64_t instance, uint64_t epoch,
                                  const rkv_event *ev, uint32_t n, void *buf,
                                  size_t cap, size_t *len_out)
{
    size_t need = rkv_wire_events_size(ev, n);
    if (need == 0 || !len_out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_wire_encode_events: %u events cannot be encoded "
                             "(count 1..%u, kinds, media, hash counts, seqs "
                             "increasing)", n, RKV_WIRE_MAX_EVENTS);
    writer w = {buf, 0};
    rkv_status s = begin_encode(&w, cap, need, RKV_WIRE_EVENTS, RKV_WIRE_VERSION,
                                "rkv_wire_encode_events");
    if (s != RKV_OK)
        return s;
    put(&w, instance, 8);
    put(&w, epoch, 8);
    put(&w, ev[0].seq, 8);
    put(&w, n, 4);
    for (uint32_t i = 0; i < n; i++) {
        const rkv_event *e = &ev[i];
        put(&w, e->kind, 1);
        put(&w, e->medium, 1);
        put(&w, e->num_hashes, 2);
        put(&w, e->page_size, 4);
        put(&w, i ? e->seq - ev[i - 1].seq : 0, 4);
        put(&w, e->ns, 8);
        if (e->kind == RKV_EVENT_BLOCK_STORED)
            put(&w, e->parent_hash, 8);
        if (e->kind == RKV_EVENT_RESYNC)
            put(&w, e->lost, 8);
        for (uint32_t h = 0; h < e->num_hashes; h++)
            put(&w, e->hashes[h], 8);
    }
    *len_out = w.n;
    return RKV_OK;
}

static rkv_status events_pass(reader *r, rkv_wire_batch_info *info, rkv_event *out,
                              int write)
{
    const char *what = "rkv_wire_decode_events";
    info->instance = get(r, 8);
    info->epoch = get(r, 8);
    info->first_seq = get(r, 8);
    uint64_t count = get(r, 4);
    if (r->bad)
        return finish(r, what);
    if (count == 0 || count > RKV_WIRE_MAX_EVENTS)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: %llu events (1..%u)", what,
                             (unsigned long long)count, RKV_WIRE_MAX_EVENTS);
    if (info->first_seq == 0)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: first seq 0", what);
    /* a cheap bound before the walk: every event takes EV_FIXED bytes */
    if (left(r) / EV_FIXED < count)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: truncated message (%zu bytes)",
                             what, r->n);
    info->count = (uint32_t)count;
    uint64_t seq = info->first_seq;
    for (uint32_t i = 0; i < count; i++) {
        rkv_event e;
        memset(&e, 0, sizeof e);
        e.kind = (uint8_t)get(r, 1);
        e.medium = (uint8_t)get(r, 1);
        e.num_hashes = (uint16_t)get(r, 2);
        e.page_size = (uint32_t)get(r, 4);
        uint64_t delta = get(r, 4);
        e.ns = get(r, 8);
        if (r->bad)
            return finish(r, what);
        if (e.num_hashes > RKV_EVENT_MAX_HASHES)
            return rkv_set_error(RKV_ERR_FORMAT, "%s: event %u has %u hashes (max %u)",
                                 what, i, e.num_hashes, RKV_EVENT_MAX_HASHES);
        if (e.kind == RKV_EVENT_BLOCK_STORED)
            e.parent_hash = get(r, 8);
        if (e.kind == RKV_EVENT_RESYNC)
            e.lost = get(r, 8);
        for (uint32_t h = 0; h < e.num_hashes; h++)
            e.hashes[h] = get(r, 8);
        if (r->bad)
            return finish(r, what);
        if ((i == 0) != (delta == 0))
            return rkv_set_error(RKV_ERR_FORMAT, "%s: event %u has seq delta %llu",
                                 what, i, (unsigned long long)delta);
        if (UINT64_MAX - seq < delta)
            return rkv_set_error(RKV_ERR_FORMAT, "%s: seq overflows at event %u",
                                 what, i);
        seq += delta;
        e.seq = seq;
        if (!event_ok(&e))
            return rkv_set_error(RKV_ERR_FORMAT,
                                 "%s: event %u (kind %u, medium %u, %u hashes, "
                                 "lost %llu) is not valid", what, i, e.kind,
                                 e.medium, e.num_hashes, (unsigned long long)e.lost);
        if (write)
            out[i] = e;
    }
    return finish(r, what);
}

rkv_status rkv_wire_decode_events(const void *buf, size_t len,
                                  rkv_wire_batch_info *info, rkv_event *out,
                                  uint32_t cap)
{
    const char *what = "rkv_wire_decode_events";
    reader r;
    rkv_status s = begin_decode(&r, buf, len, RKV_WIRE_EVENTS, what, info && (out || !cap));
    if (s != RKV_OK)
        return s;
    rkv_wire_batch_info tmp;
    size_t body = r.at;
    s = events_pass(&r, &tmp, NULL, 0);
    if (s != RKV_OK)
        return s;
    if (out && tmp.count > cap)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u events, room for %u", what,
                             tmp.count, cap);
    if (out) {
        r.at = body;
        s = events_pass(&r, &tmp, out, 1);
        if (s != RKV_OK)
            return s;
    }
    *info = tmp;
    return RKV_OK;
}

/* ---- snapshot -------------------------------------------------------------- */
#define SNAP_FIXED (RKV_WIRE_HEADER + 28u)
#define SNAP_ENTRY 25u

/* The block list a snapshot and a snapshot chunk both carry: n entries of
 * ns, hash, parent_hash (8 bytes each) and medium (1 byte). */
static rkv_status check_media(const rkv_block_entry *e, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].medium >= RKV_MEDIUM_COUNT)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %zu medium %u", what,
                                 i, e[i].medium);
    return RKV_OK;
}

static void put_entries(writer *w, const rkv_block_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        put(w, e[i].ns, 8);
        put(w, e[i].hash, 8);
        put(w, e[i].parent_hash, 8);
        put(w, e[i].medium, 1);
    }
}

/* Both messages open, after the header, with the instance, epoch and seq
 * of the snapshot they carry (a chunk: of the snapshot it is part of). */
static void put_snap_ids(writer *w, uint64_t instance, uint64_t epoch, uint64_t seq)
{
    put(w, instance, 8);
    put(w, epoch, 8);
    put(w, seq, 8);
}

/* args_ok: the caller's pointers were usable. */
static rkv_status get_snap_head(reader *r, const void *buf, size_t len, rkv_wire_type type,
                                const char *what, int args_ok, uint64_t *instance,
                                uint64_t *epoch, uint64_t *seq)
{
    rkv_status s = begin_decode(r, buf, len, type, what, args_ok);
    if (s != RKV_OK)
        return s;
    *instance = get(r, 8);
    *epoch = get(r, 8);
    *seq = get(r, 8);
    return RKV_OK;
}

/* Reads the `count` entries that must fill the rest of r: checks them all
 * before writing any to out, so a bad message leaves out untouched. */
static rkv_status get_entries(reader *r, uint64_t count, rkv_block_entry *out, size_t cap,
                              const char *what, uint32_t *count_out)
{
    rkv_status s = fills_rest(r, count, RKV_WIRE_MAX_SNAPSHOT, SNAP_ENTRY, "blocks", what);
    if (s != RKV_OK)
        return s;
    uint32_t n = (uint32_t)count;
    size_t body = r->at;
    for (uint32_t i = 0; i < n; i++) {
        r->at += 24;
        uint64_t m = get(r, 1);
        if (m >= RKV_MEDIUM_COUNT)
            return rkv_set_error(RKV_ERR_FORMAT, "%s: block %u medium %llu", what, i,
                                 (unsigned long long)m);
    }
    if (out && n > cap)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u blocks, room for %zu", what, n,
                             cap);
    if (out) {
        r->at = body;
        for (uint32_t i = 0; i < n; i++) {
            out[i].ns = get(r, 8);
            out[i].hash = get(r, 8);
            out[i].parent_hash = get(r, 8);
            out[i].medium = (uint32_t)get(r, 1);
            out[i].reserved = 0;
        }
    }
    *count_out = n;
    return RKV_OK;
}

size_t rkv_wire_snapshot_size(size_t n)
{
    if (n > RKV_WIRE_MAX_SNAPSHOT)
        return 0;
    return SNAP_FIXED + SNAP_ENTRY * n;
}

rkv_status rkv_wire_encode_snapshot(uint64_t instance, uint64_t epoch,
                                    uint64_t seq, const rkv_block_entry *e,
                                    size_t n, void *buf, size_t cap,
                                    size_t *len_out)
{
    size_t need = rkv_wire_snapshot_size(n);
    if (need == 0 || (!e && n) || !len_out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_wire_encode_snapshot: %zu blocks (max %u)", n,
                             RKV_WIRE_MAX_SNAPSHOT);
    rkv_status s = check_media(e, n, "rkv_wire_encode_snapshot");
    if (s != RKV_OK)
        return s;
    writer w = {buf, 0};
    s = begin_encode(&w, cap, need, RKV_WIRE_SNAPSHOT, RKV_WIRE_VERSION,
                     "rkv_wire_encode_snapshot");
    if (s != RKV_OK)
        return s;
    put_snap_ids(&w, instance, epoch, seq);
    put(&w, n, 4);
    put_entries(&w, e, n);
    *len_out = w.n;
    return RKV_OK;
}

/* One decoder for both snapshot forms: a chunk only adds its part fields
 * (and their consistency check) between the ids and the entry count. */
static rkv_status decode_snap(const void *buf, size_t len, rkv_wire_type type,
                              const char *what, bool args_ok, rkv_wire_chunk_info *t,
                              rkv_block_entry *out, size_t cap)
{
    reader r;
    rkv_status s = get_snap_head(&r, buf, len, type, what, args_ok, &t->instance,
                                 &t->epoch, &t->seq);
    if (s != RKV_OK)
        return s;
    bool chunk = type == RKV_WIRE_SNAPSHOT_CHUNK;
    if (chunk) {
        t->part = (uint32_t)get(&r, 4);
        t->parts = (uint32_t)get(&r, 4);
        t->total = get(&r, 8);
    }
    uint64_t count = get(&r, 4);
    if (r.bad)
        return finish(&r, what);
    if (chunk && (t->parts == 0 || t->part >= t->parts || count > t->total))
        return rkv_set_error(RKV_ERR_FORMAT,
                             "%s: part %u of %u, %llu of %llu blocks", what, t->part,
                             t->parts, (unsigned long long)count,
                             (unsigned long long)t->total);
    return get_entries(&r, count, out, cap, what, &t->count);
}

rkv_status rkv_wire_decode_snapshot(const void *buf, size_t len,
                                    rkv_wire_snapshot_info *info,
                                    rkv_block_entry *out, size_t cap)
{
    rkv_wire_chunk_info t;
    rkv_status s = decode_snap(buf, len, RKV_WIRE_SNAPSHOT, "rkv_wire_decode_snapshot",
                               info && (out || !cap), &t, out, cap);
    if (s != RKV_OK)
        return s;
    *info = (rkv_wire_snapshot_info){t.instance, t.epoch, t.seq, t.count};
    return RKV_OK;
}

/* ---- snapshot chunk ---------------------------------------------------------- */
#define CHUNK_FIXED (RKV_WIRE_HEADER + 44u)

size_t rkv_wire_snapshot_chunk_size(size_t n)
{
    if (n > RKV_WIRE_MAX_SNAPSHOT)
        return 0;
    return CHUNK_FIXED + SNAP_ENTRY * n;
}

size_t rkv_wire_snapshot_chunk_room(size_t max_bytes)
{
    if (max_bytes < CHUNK_FIXED + SNAP_ENTRY)
        return 0;
    size_t n = (max_bytes - CHUNK_FIXED) / SNAP_ENTRY;
    return n > RKV_WIRE_MAX_SNAPSHOT ? RKV_WIRE_MAX_SNAPSHOT : n;
}

rkv_status rkv_wire_encode_snapshot_chunk(const rkv_wire_chunk_info *c,
                                          const rkv_block_entry *e, void *buf,
                                          size_t cap, size_t *len_out)
{
    const char *what = "rkv_wire_encode_snapshot_chunk";
    size_t need = c ? rkv_wire_snapshot_chunk_size(c->count) : 0;
    if (need == 0 || (!e && c->count) || !len_out || c->parts == 0 ||
        c->part >= c->parts || c->count > c->total)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: part < parts, count <= total and <= %u", what,
                             RKV_WIRE_MAX_SNAPSHOT);
    rkv_status s = check_media(e, c->count, what);
    if (s != RKV_OK)
        return s;
    writer w = {buf, 0};
    s = begin_encode(&w, cap, need, RKV_WIRE_SNAPSHOT_CHUNK, RKV_WIRE_VERSION, what);
    if (s != RKV_OK)
        return s;
    put_snap_ids(&w, c->instance, c->epoch, c->seq);
    put(&w, c->part, 4);
    put(&w, c->parts, 4);
    put(&w, c->total, 8);
    put(&w, c->count, 4);
    put_entries(&w, e, c->count);
    *len_out = w.n;
    return RKV_OK;
}

rkv_status rkv_wire_decode_snapshot_chunk(const void *buf, size_t len,
                                          rkv_wire_chunk_info *info,
                                          rkv_block_entry *out, size_t cap)
{
    rkv_wire_chunk_info t;
    rkv_status s = decode_snap(buf, len, RKV_WIRE_SNAPSHOT_CHUNK,
                               "rkv_wire_decode_snapshot_chunk", info && (out || !cap),
                               &t, out, cap);
    if (s != RKV_OK)
        return s;
    *info = t;
    return RKV_OK;
}

/* ---- heartbeat ------------------------------------------------------------- */
rkv_status rkv_wire_encode_heartbeat(const rkv_wire_heartbeat *hb, void *buf,
                                     size_t cap, size_t *len_out)
{
    if (!hb || !len_out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_wire_encode_heartbeat: NULL argument");
    writer w = {buf, 0};
    rkv_status s = begin_encode(&w, cap, RKV_WIRE_HEARTBEAT_SIZE, RKV_WIRE_HEARTBEAT,
                                RKV_WIRE_VERSION, "rkv_wire_encode_heartbeat");
    if (s != RKV_OK)
        return s;
    put(&w, hb->instance, 8);
    put(&w, hb->epoch, 8);
    put(&w, hb->last_seq, 8);
    put(&w, hb->running, 4);
    put(&w, hb->queued_tokens, 8);
    *len_out = w.n;
    return RKV_OK;
}

rkv_status rkv_wire_decode_heartbeat(const void *buf, size_t len,
                                     rkv_wire_heartbeat *out)
{
    const char *what = "rkv_wire_decode_heartbeat";
    reader r;
    rkv_status s = begin_decode(&r, buf, len, RKV_WIRE_HEARTBEAT, what, out != NULL);
    if (s != RKV_OK)
        return s;
    rkv_wire_heartbeat t;
    t.instance = get(&r, 8);
    t.epoch = get(&r, 8);
    t.last_seq = get(&r, 8);
    t.running = (uint32_t)get(&r, 4);
    t.queued_tokens = get(&r, 8);
    s = finish(&r, what);
    if (s == RKV_OK)
        *out = t;
    return s;
}

/* ---- route query / reply ----------------------------------------------------- */
size_t rkv_wire_query_size(uint32_t n)
{
    if (n > RKV_WIRE_MAX_QUERY)
        return 0;
    return RKV_WIRE_HEADER + 12u + 8u * (size_t)n;
}

rkv_status rkv_wire_encode_query(rkv_namespace ns, const uint64_t *hashes,
                                 uint32_t n, void *buf, size_t cap,
                                 size_t *len_out)
{
    size_t need = rkv_wire_query_size(n);
    if (need == 0 || (!hashes && n) || !len_out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_wire_encode_query: %u hashes (max %u)", n,
                             RKV_WIRE_MAX_QUERY);
    writer w = {buf, 0};
    rkv_status s = begin_encode(&w, cap, need, RKV_WIRE_QUERY, RKV_WIRE_VERSION,
                                "rkv_wire_encode_query");
    if (s != RKV_OK)
        return s;
    put(&w, ns, 8);
    put(&w, n, 4);
    for (uint32_t i = 0; i < n; i++)
        put(&w, hashes[i], 8);
    *len_out = w.n;
    return RKV_OK;
}

/* Version 2 body: ns, page_size, count, then count i32 tokens. Checks it
 * whole (without writing) and leaves r at the first token. */
static rkv_status tokens_head(reader *r, const char *what, uint64_t *ns,
                              uint32_t *page_size, uint32_t *count)
{
    uint64_t n_ns = get(r, 8), ps = get(r, 4), c = get(r, 4);
    if (r->bad)
        return finish(r, what);
    if (ps == 0 || ps > RKV_WIRE_MAX_PAGE)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: page size %llu (1..%u)", what,
                             (unsigned long long)ps, RKV_WIRE_MAX_PAGE);
    rkv_status s = fills_rest(r, c, RKV_WIRE_MAX_QUERY, 4, "tokens", what);
    if (s != RKV_OK)
        return s;
    *ns = n_ns;
    *page_size = (uint32_t)ps;
    *count = (uint32_t)c;
    return RKV_OK;
}

rkv_status rkv_wire_decode_query(const void *buf, size_t len,
                                 rkv_namespace *ns, uint64_t *out,
                                 uint32_t cap, uint32_t *n_out)
{
    const char *what = "rkv_wire_decode_query";
    reader r;
    rkv_status s = begin_decode(&r, buf, len, RKV_WIRE_QUERY, what,
                                ns && n_out && (out || !cap));
    if (s != RKV_OK)
        return s;
    if (r.version == RKV_WIRE_QUERY_TOKENS_VERSION) {
        uint64_t tns = 0;
        uint32_t ps = 0, count = 0;
        s = tokens_head(&r, what, &tns, &ps, &count);
        if (s != RKV_OK)
            return s;
        uint32_t pages = count / ps;
        if (pages > cap)
            return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u pages, room for %u", what,
                                 pages, cap);
        /* the chain of rkv_block_hash over the full pages (the tree's own
         * page hashes), a page at a time through a bounded copy */
        int32_t page[RKV_WIRE_MAX_PAGE];
        uint64_t parent = RKV_HASH_ROOT;
        for (uint32_t p = 0; p < pages; p++) {
            for (uint32_t i = 0; i < ps; i++)
                page[i] = (int32_t)(uint32_t)get(&r, 4);
            out[p] = parent = rkv_block_hash(parent, tns, page, ps);
        }
        *ns = tns;
        *n_out = pages;
        return RKV_OK;
    }
    uint64_t n_ns = get(&r, 8);
    uint64_t count = get(&r, 4);
    if (r.bad)
        return finish(&r, what);
    s = fills_rest(&r, count, RKV_WIRE_MAX_QUERY, 8, "hashes", what);
    if (s != RKV_OK)
        return s;
    if (count > cap)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %llu hashes, room for %u", what,
                             (unsigned long long)count, cap);
    for (uint64_t i = 0; i < count; i++)
        out[i] = get(&r, 8);
    *ns = n_ns;
    *n_out = (uint32_t)count;
    return RKV_OK;
}

size_t rkv_wire_query_tokens_size(uint32_t n)
{
    if (n > RKV_WIRE_MAX_QUERY)
        return 0;
    return RKV_WIRE_HEADER + 16u + 4u * (size_t)n;
}

rkv_status rkv_wire_encode_query_tokens(rkv_namespace ns, const int32_t *tokens,
                                        uint32_t n, uint32_t page_size, void *buf,
                                        size_t cap, size_t *len_out)
{
    size_t need = rkv_wire_query_tokens_size(n);
    if (need == 0 || (!tokens && n) || !len_out || page_size == 0 ||
        page_size > RKV_WIRE_MAX_PAGE)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_wire_encode_query_tokens: %u tokens (max %u), "
                             "page size %u (1..%u)", n, RKV_WIRE_MAX_QUERY,
                             page_size, RKV_WIRE_MAX_PAGE);
    writer w = {buf, 0};
    rkv_status s = begin_encode(&w, cap, need, RKV_WIRE_QUERY,
                                RKV_WIRE_QUERY_TOKENS_VERSION,
                                "rkv_wire_encode_query_tokens");
    if (s != RKV_OK)
        return s;
    put(&w, ns, 8);
    put(&w, page_size, 4);
    put(&w, n, 4);
    for (uint32_t i = 0; i < n; i++)
        put(&w, (uint32_t)tokens[i], 4);
    *len_out = w.n;
    return RKV_OK;
}

rkv_status rkv_wire_decode_query_tokens(const void *buf, size_t len,
                                        rkv_namespace *ns, uint32_t *page_size,
                                        int32_t *out, uint32_t cap, uint32_t *n_out)
{
    const char *what = "rkv_wire_decode_query_tokens";
    reader r;
    rkv_status s = begin_decode(&r, buf, len, RKV_WIRE_QUERY, what,
                                ns && page_size && n_out && (out || !cap));
    if (s != RKV_OK)
        return s;
    if (r.version != RKV_WIRE_QUERY_TOKENS_VERSION)
        return rkv_set_error(RKV_ERR_FORMAT, "%s: a version %u query carries hashes",
                             what, r.version);
    uint64_t tns = 0;
    uint32_t ps = 0, count = 0;
    s = tokens_head(&r, what, &tns, &ps, &count);
    if (s != RKV_OK)
        return s;
    if (count > cap)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u tokens, room for %u", what,
                             count, cap);
    for (uint32_t i = 0; i < count; i++)
        out[i] = (int32_t)(uint32_t)get(&r, 4);
    *ns = tns;
    *page_size = ps;
    *n_out = count;
    return RKV_OK;
}

size_t rkv_wire_reply_size(uint32_t count)
{
    if (count > RKV_WIRE_MAX_ROUTE)
        return 0;
    return RKV_WIRE_HEADER + 20u + 12u * (size_t)count;
}

rkv_status rkv_wire_encode_reply(const rkv_wire_reply *rep, void *buf,
                                 size_t cap, size_t *len_out)
{
    size_t need = rep ? rkv_wire_reply_size(rep->count) : 0;
    if (need == 0 || !len_out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_wire_encode_reply: NULL or more than %u instances",
                             RKV_WIRE_MAX_ROUTE);
    writer w = {buf, 0};
    rkv_status s = begin_encode(&w, cap, need, RKV_WIRE_REPLY, RKV_WIRE_VERSION,
                                "rkv_wire_encode_reply");
    if (s != RKV_OK)
        return s;
    put(&w, rep->status, 4);
    put(&w, rep->instance, 8);
    put(&w, rep->pages, 4);
    put(&w, rep->count, 4);
    for (uint32_t i = 0; i < rep->count; i++) {
        put(&w, rep->ids[i], 8);
        put(&w, rep->id_pages[i], 4);
    }
    *len_out = w.n;
    return RKV_OK;
}

rkv_status rkv_wire_decode_reply(const void *buf, size_t len,
                                 rkv_wire_reply *out)
{
    const char *what = "rkv_wire_decode_reply";
    reader r;
    rkv_status s = begin_decode(&r, buf, len, RKV_WIRE_REPLY, what, out != NULL);
    if (s != RKV_OK)
        return s;
    rkv_wire_reply t;
    memset(&t, 0, sizeof t);
    t.status = (uint32_t)get(&r, 4);
    t.instance = get(&r, 8);
    t.pages = (uint32_t)get(&r, 4);
    uint64_t count = get(&r, 4);
    if (r.bad)
        return finish(&r, what);
    s = fills_rest(&r, count, RKV_WIRE_MAX_ROUTE, 12, "instances", what);
    if (s != RKV_OK)
        return s;
    t.count = (uint32_t)count;
    for (uint32_t i = 0; i < t.count; i++) {
        t.ids[i] = get(&r, 8);
        t.id_pages[i] = (uint32_t)get(&r, 4);
    }
    *out = t;
    return RKV_OK;
}

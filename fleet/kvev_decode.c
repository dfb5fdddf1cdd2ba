/*
 * fleet/kvev_decode.c -- rkv_kvev_decode (fleet/kvev.h): a vLLM/SGLang
 * KV-event batch from its msgpack bytes. A cursor over the input that
 * never allocates and never reads past the end; every declared count is
 * checked against the bytes left (each element takes at least one byte)
 * and against the batch's caps before anything is read, and skipping an
 * unknown value recurses at most RKV_KVEV_MAX_DEPTH deep, so the work is
 * linear in the input and the memory is the batch's fixed arrays.
 */
#include "fleet/kvev.h"

#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/status.h"

typedef struct reader {
    const uint8_t *p, *end;
    const char *err; /* first problem: what the format sentence says */
} reader;

static int fail(reader *r, const char *why)
{
    if (!r->err)
        r->err = why;
    return -1;
}

static size_t left(const reader *r) { return (size_t)(r->end - r->p); }

static uint64_t be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Takes n bytes; NULL (and the error) when fewer are left. */
static const uint8_t *take(reader *r, size_t n)
{
    if (left(r) < n) {
        fail(r, "truncated");
        return NULL;
    }
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}

static int peek(reader *r, uint8_t *b)
{
    if (!left(r))
        return fail(r, "truncated");
    *b = *r->p;
    return 0;
}

static int is_nil(reader *r)
{
    return left(r) && *r->p == 0xc0;
}

/* Consumes a nil if one is next: 1 if it did (the optional field is absent). */
static int take_nil(reader *r)
{
    if (!is_nil(r))
        return 0;
    r->p++;
    return 1;
}

/* Array or map header; n is checked against the bytes left (per = the
 * least bytes one entry takes). kind: 0 array, 1 map. -1 if not one. */
static int container(reader *r, int kind, uint32_t *n)
{
    uint8_t b;
    if (peek(r, &b))
        return -1;
    const uint8_t *q;
    if (kind == 0 && (b & 0xf0) == 0x90) {
        r->p++;
        *n = b & 0x0f;
    } else if (kind == 1 && (b & 0xf0) == 0x80) {
        r->p++;
        *n = b & 0x0f;
    } else if (b == (kind ? 0xde : 0xdc)) {
        r->p++;
        if (!(q = take(r, 2)))
            return -1;
        *n = (uint32_t)be(q, 2);
    } else if (b == (kind ? 0xdf : 0xdd)) {
        r->p++;
        if (!(q = take(r, 4)))
            return -1;
        *n = (uint32_t)be(q, 4);
    } else {
        return fail(r, kind ? "expected a map" : "expected an array");
    }
    if ((uint64_t)*n * (kind ? 2u : 1u) > left(r))
        return fail(r, "a count larger than the bytes left");
    return 0;
}

/* An event or a batch comes either as an array (fields by position) or as a
 * map (fields by name): *map says which. */
static int array_or_map(reader *r, int *map, uint32_t *n)
{
    uint8_t c;
    if (peek(r, &c))
        return -1;
    *map = (c & 0xf0) == 0x80 || c == 0xde || c == 0xdf;
    return container(r, *map, n);
}

/* Integer: *bits its 64-bit pattern, *neg whether it was negative. */
static int integer(reader *r, uint64_t *bits, int *neg)
{
    uint8_t b;
    if (peek(r, &b))
        return -1;
    const uint8_t *q;
    *neg = 0;
    if (b <= 0x7f) {
        r->p++;
        *bits = b;
        return 0;
    }
    if (b >= 0xe0) {
        r->p++;
        *bits = (uint64_t)(int64_t)(int8_t)b;
        *neg = 1;
        return 0;
    }
    static const unsigned width[8] = {1, 2, 4, 8, 1, 2, 4, 8};
    if (b < 0xcc || b > 0xd3)
        return fail(r, "expected an integer");
    r->p++;
    unsigned w = width[b - 0xcc];
    if (!(q = take(r, w)))
        return -1;
    uint64_t v = be(q, w);
    if (b >= 0xd0) { /* signed: sign-extend */
        if (w < 8 && (v >> (8 * w - 1)))
            v |= ~0ull << (8 * w);
        *neg = (int64_t)v < 0;
    }
    *bits = v;
    return 0;
}

/* An integer or nil (an optional field): 1 read into *bits and *neg, 0 nil,
 * -1 neither. */
static int opt_integer(reader *r, uint64_t *bits, int *neg)
{
    if (take_nil(r))
        return 0;
    return integer(r, bits, neg) ? -1 : 1;
}

/* str or bin payload. */
static int bytes(reader *r, int allow_str, int allow_bin, const uint8_t **s, uint32_t *n)
{
    uint8_t b;
    if (peek(r, &b))
        return -1;
    const uint8_t *q;
    unsigned w;
    if (allow_str && (b & 0xe0) == 0xa0) {
        r->p++;
        *n = b & 0x1f;
        w = 0;
    } else if ((allow_str && b >= 0xd9 && b <= 0xdb) ||
               (allow_bin && b >= 0xc4 && b <= 0xc6)) {
        w = b >= 0xd9 ? 1u << (b - 0xd9) : 1u << (b - 0xc4);
        r->p++;
        if (!(q = take(r, w)))
            return -1;
        *n = (uint32_t)be(q, w);
    } else {
        return fail(r, allow_bin ? "expected a byte string" : "expected a string");
    }
    if (!(*s = take(r, *n)))
        return -1;
    return 0;
}

static int number(reader *r, double *out)
{
    uint8_t b;
    if (peek(r, &b))
        return -1;
    const uint8_t *q;
    if (b == 0xca || b == 0xcb) {
        r->p++;
        unsigned w = b == 0xca ? 4 : 8;
        if (!(q = take(r, w)))
            return -1;
        uint64_t v = be(q, w);
        if (w == 4) {
            uint32_t u = (uint32_t)v;
            float f;
            memcpy(&f, &u, sizeof f);
            *out = f;
        } else {
            memcpy(out, &v, sizeof *out);
        }
        return 0;
    }
    uint64_t bits;
    int neg;
    if (integer(r, &bits, &neg))
        return fail(r, "expected a number");
    *out = neg ? (double)(int64_t)bits : (double)bits;
    return 0;
}

/* Skips one value of any type. */
static int skip(reader *r, unsigned depth)
{
    uint8_t b;
    if (depth > RKV_KVEV_MAX_DEPTH)
        return fail(r, "nested too deep");
    if (peek(r, &b))
        return -1;
    const uint8_t *q;
    uint32_t n;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
        r->p++;
        return 0;
    }
    if ((b & 0xe0) == 0xa0 || (b >= 0xc4 && b <= 0xc6) || (b >= 0xd9 && b <= 0xdb)) {
        const uint8_t *s;
        return bytes(r, 1, 1, &s, &n);
    }
    if ((b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd || (b & 0xf0) == 0x80 ||
        b == 0xde || b == 0xdf) {
        int map = (b & 0xf0) == 0x80 || b == 0xde || b == 0xdf;
        if (container(r, map, &n))
            return -1;
        uint64_t items = (uint64_t)n * (map ? 2u : 1u);
        for (uint64_t i = 0; i < items; i++)
            if (skip(r, depth + 1))
                return -1;
        return 0;
    }
    static const unsigned fixed[] = {/* 0xc7.. */ 0, 0, 0, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8,
                                     /* 0xd4..0xd8 fixext: type + data */ 2, 3, 5, 9,
                                     17};
    if (b >= 0xca && b <= 0xd8) {
        r->p++;
        return take(r, fixed[b - 0xc7]) ? 0 : -1;
    }
    if (b >= 0xc7 && b <= 0xc9) { /* ext 8/16/32: length, type, data */
        unsigned w = 1u << (b - 0xc7);
        r->p++;
        if (!(q = take(r, w)))
            return -1;
        return take(r, (size_t)be(q, w) + 1) ? 0 : -1;
    }
    return fail(r, "a byte no msgpack value starts with"); /* 0xc1 */
}

static int key_is(const uint8_t *s, uint32_t n, const char *name)
{
    size_t m = strlen(name);
    return n == m && memcmp(s, name, m) == 0;
}

uint64_t rkv_kvev_key_bytes(const void *p, size_t n)
{
    return XXH3_64bits(p, n);
}

static rkv_namespace nonzero(uint64_t h) { return h ? h : 1; }

rkv_namespace rkv_kvev_lora_name_ns(const char *name, size_t n)
{
    return nonzero(XXH3_64bits_withSeed(name, n, 0x6c6f72616e616d65ull));
}

rkv_namespace rkv_kvev_lora_id_ns(int64_t id)
{
    return nonzero(XXH3_64bits_withSeed(&id, sizeof id, 0x6c6f726169647878ull));
}

/* A block hash as an engine key. */
static int hash_key(reader *r, uint64_t *key)
{
    uint8_t b;
    if (peek(r, &b))
        return -1;
    if ((b & 0xe0) == 0xa0 || (b >= 0xc4 && b <= 0xc6) || (b >= 0xd9 && b <= 0xdb)) {
        const uint8_t *s;
        uint32_t n;
        if (bytes(r, 1, 1, &s, &n))
            return -1;
        if (n == 0 || n > RKV_KVEV_MAX_HASH_BYTES)
            return fail(r, "a byte-string block hash of 0 or over 64 bytes");
        *key = rkv_kvev_key_bytes(s, n);
        return 0;
    }
    int neg;
    if (integer(r, key, &neg))
        return fail(r, "a block hash that is neither an integer nor bytes");
    return 0;
}

typedef struct event_fields {
    int have_hashes, have_tokens, have_block, have_lora_id, have_lora_name;
    uint32_t first_hash, num_hashes, first_token, num_tokens;
    uint8_t has_parent, medium;
    uint64_t parent, block;
    int64_t lora_id;
    const uint8_t *lora_name;
    uint32_t lora_name_len;
} event_fields;

/* Opens an array whose items must fit in what the batch has left (cap - used):
 * they will sit at [used, used + n) of the batch's own array. */
static int open_array(reader *r, uint32_t used, uint32_t cap, const char *too_many,
                      uint32_t *first, uint32_t *num)
{
    uint32_t n;
    if (container(r, 0, &n))
        return -1;
    if (n > cap - used)
        return fail(r, too_many);
    *first = used;
    *num = n;
    return 0;
}

static int field_hashes(reader *r, rkv_kvev_batch *b, event_fields *f)
{
    if (open_array(r, b->n_hashes, b->lim.max_hashes,
                   "more block hashes than the batch cap", &f->first_hash, &f->num_hashes))
        return -1;
    for (uint32_t i = 0; i < f->num_hashes; i++)
        if (hash_key(r, &b->hashes[b->n_hashes++]))
            return -1;
    f->have_hashes = 1;
    return 0;
}

static int field_parent(reader *r, event_fields *f)
{
    if (take_nil(r)) {
        f->has_parent = 0;
        return 0;
    }
    f->has_parent = 1;
    return hash_key(r, &f->parent);
}

static int field_tokens(reader *r, rkv_kvev_batch *b, event_fields *f)
{
    if (open_array(r, b->n_tokens, b->lim.max_tokens, "more token ids than the batch cap",
                   &f->first_token, &f->num_tokens))
        return -1;
    for (uint32_t i = 0; i < f->num_tokens; i++) {
        uint64_t v;
        int neg;
        if (integer(r, &v, &neg))
            return -1;
        if (neg ? (int64_t)v < INT32_MIN : v > INT32_MAX)
            return fail(r, "a token id outside 32 bits");
        b->tokens[b->n_tokens++] = (int32_t)(int64_t)v;
    }
    f->have_tokens = 1;
    return 0;
}

static int field_block(reader *r, rkv_kvev_batch *b, event_fields *f)
{
    int neg;
    if (integer(r, &f->block, &neg))
        return -1;
    if (neg || f->block == 0 || f->block > b->lim.max_block)
        return fail(r, "block_size out of range");
    f->have_block = 1;
    return 0;
}

static int field_lora_id(reader *r, event_fields *f)
{
    uint64_t v;
    int neg, got = opt_integer(r, &v, &neg);
    if (got > 0) {
        f->lora_id = (int64_t)v;
        f->have_lora_id = 1;
    }
    return got < 0 ? -1 : 0;
}

static int field_lora_name(reader *r, event_fields *f)
{
    if (take_nil(r))
        return 0;
    if (bytes(r, 1, 0, &f->lora_name, &f->lora_name_len))
        return -1;
    f->have_lora_name = 1;
    return 0;
}

static int field_medium(reader *r, event_fields *f)
{
    if (take_nil(r)) {
        f->medium = RKV_MEDIUM_DEVICE;
        return 0;
    }
    const uint8_t *s;
    uint32_t n;
    if (bytes(r, 1, 0, &s, &n))
        return -1;
    if (key_is(s, n, "GPU"))
        f->medium = RKV_MEDIUM_DEVICE;
    else if (key_is(s, n, "CPU_PINNED") || key_is(s, n, "CPU"))
        f->medium = RKV_MEDIUM_HOST;
    else if (key_is(s, n, "DISK"))
        f->medium = RKV_MEDIUM_DISK;
    else
        f->medium = RKV_KVEV_MEDIUM_UNKNOWN;
    return 0;
}

enum { T_UNKNOWN, T_STORED, T_REMOVED, T_CLEARED };

static int tag_of(const uint8_t *s, uint32_t n)
{
    if (key_is(s, n, "BlockStored"))
        return T_STORED;
    if (key_is(s, n, "BlockRemoved"))
        return T_REMOVED;
    if (key_is(s, n, "AllBlocksCleared"))
        return T_CLEARED;
    return T_UNKNOWN;
}

/* Array form: the fields by position after the tag. */
static int event_array(reader *r, rkv_kvev_batch *b, uint32_t n, int *type, event_fields *f)
{
    const uint8_t *s;
    uint32_t len;
    if (n == 0)
        return fail(r, "an empty event");
    if (bytes(r, 1, 0, &s, &len))
        return -1;
    *type = tag_of(s, len);
    for (uint32_t i = 1; i < n; i++) {
        int rc;
        if (*type == T_STORED && i <= 7) {
            switch (i) {
            case 1: rc = field_hashes(r, b, f); break;
            case 2: rc = field_parent(r, f); break;
            case 3: rc = field_tokens(r, b, f); break;
            case 4: rc = field_block(r, b, f); break;
            case 5: rc = field_lora_id(r, f); break;
            case 6: rc = field_medium(r, f); break;
            default: rc = field_lora_name(r, f); break;
            }
        } else if (*type == T_REMOVED && i <= 2) {
            rc = i == 1 ? field_hashes(r, b, f) : field_medium(r, f);
        } else {
            rc = skip(r, 2);
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* Map form: "type" and the fields by name, in any order. */
static int event_map(reader *r, rkv_kvev_batch *b, uint32_t n, int *type, event_fields *f)
{
    int have_type = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *k;
        uint32_t kl;
        int rc;
        if (bytes(r, 1, 0, &k, &kl))
            return -1;
        if (key_is(k, kl, "type")) {
            const uint8_t *s;
            uint32_t len;
            if (bytes(r, 1, 0, &s, &len))
                return -1;
            *type = tag_of(s, len);
            have_type = 1;
            continue;
        }
        if (key_is(k, kl, "block_hashes") && !f->have_hashes)
            rc = field_hashes(r, b, f);
        else if (key_is(k, kl, "parent_block_hash"))
            rc = field_parent(r, f);
        else if (key_is(k, kl, "token_ids") && !f->have_tokens)
            rc = field_tokens(r, b, f);
        else if (key_is(k, kl, "block_size"))
            rc = field_block(r, b, f);
        else if (key_is(k, kl, "lora_id"))
            rc = field_lora_id(r, f);
        else if (key_is(k, kl, "medium"))
            rc = field_medium(r, f);
        else if (key_is(k, kl, "lora_name"))
            rc = field_lora_name(r, f);
        else
            rc = skip(r, 2);
        if (rc)
            return -1;
    }
    if (!have_type)
        return fail(r, "an event map without \"type\"");
    return 0;
}

static int event(reader *r, rkv_kvev_batch *b)
{
    int map;
    uint32_t n;
    if (array_or_map(r, &map, &n))
        return -1;
    uint32_t h0 = b->n_hashes, t0 = b->n_tokens;
    event_fields f;
    memset(&f, 0, sizeof f);
    int type = T_UNKNOWN;
    if ((map ? event_map : event_array)(r, b, n, &type, &f))
        return -1;
    if (type == T_UNKNOWN) {
        /* a newer engine's event: ignored, and whatever it parsed freed */
        b->n_hashes = h0;
        b->n_tokens = t0;
        b->ignored++;
        return 0;
    }
    if (type == T_STORED && (!f.have_hashes || !f.have_block))
        return fail(r, "BlockStored without block_hashes or block_size");
    if (type == T_REMOVED && !f.have_hashes)
        return fail(r, "BlockRemoved without block_hashes");
    if (b->count >= b->lim.max_events)
        return fail(r, "more events than the batch cap");
    rkv_kvev_event *e = &b->events[b->count++];
    memset(e, 0, sizeof *e);
    e->kind = type == T_STORED ? RKV_KVEV_STORED
              : type == T_REMOVED ? RKV_KVEV_REMOVED : RKV_KVEV_CLEARED;
    e->medium = type == T_CLEARED ? RKV_MEDIUM_DEVICE : f.medium;
    if (type != T_CLEARED) {
        e->first_hash = f.first_hash;
        e->num_hashes = f.num_hashes;
    }
    if (type == T_STORED) {
        e->has_parent = f.has_parent;
        e->parent = f.parent;
        e->block_size = (uint32_t)f.block;
        if (f.have_tokens) {
            e->first_token = f.first_token;
            e->num_tokens = f.num_tokens;
        }
        if (f.have_lora_name)
            e->ns = rkv_kvev_lora_name_ns((const char *)f.lora_name, f.lora_name_len);
        else if (f.have_lora_id)
            e->ns = rkv_kvev_lora_id_ns(f.lora_id);
    } else {
        /* removals carry no tokens (nor a namespace: the bridge finds each
         * block's from its engine hash), a clear nothing */
        b->n_tokens = t0;
        if (type == T_CLEARED)
            b->n_hashes = h0;
    }
    return 0;
}

static int events(reader *r, rkv_kvev_batch *b)
{
    uint32_t n;
    if (container(r, 0, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++)
        if (event(r, b))
            return -1;
    return 0;
}

static int dp_rank(reader *r, rkv_kvev_batch *b)
{
    uint64_t v;
    int neg, got = opt_integer(r, &v, &neg);
    if (got > 0)
        b->dp_rank = neg ? -1 : (int64_t)(v & INT64_MAX);
    return got < 0 ? -1 : 0;
}

static int batch(reader *r, rkv_kvev_batch *b)
{
    int map;
    uint32_t n;
    if (array_or_map(r, &map, &n))
        return -1;
    int have_events = 0;
    for (uint32_t i = 0; i < n; i++) {
        int rc, which = map ? -1 : (int)(i < 3 ? i : 3);
        if (map) {
            const uint8_t *k;
            uint32_t kl;
            if (bytes(r, 1, 0, &k, &kl))
                return -1;
            which = key_is(k, kl, "ts") ? 0
                    : key_is(k, kl, "events") && !have_events ? 1
                    : key_is(k, kl, "data_parallel_rank") ? 2 : 3;
        }
        switch (which) {
        case 0: rc = number(r, &b->ts); break;
        case 1:
            rc = events(r, b);
            have_events = 1;
            break;
        case 2: rc = dp_rank(r, b); break;
        default: rc = skip(r, 1);
        }
        if (rc)
            return -1;
    }
    return have_events ? 0 : fail(r, "a batch without events");
}

void rkv_kvev_limits_init(rkv_kvev_limits *lim)
{
    if (!lim)
        return;
    lim->max_events = 4096;
    lim->max_hashes = 65536;
    lim->max_tokens = 1u << 22;
    lim->max_block = 1024;
}

rkv_status rkv_kvev_batch_init(rkv_kvev_batch *b, const rkv_kvev_limits *lim)
{
    if (!b)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_batch_init: NULL");
    memset(b, 0, sizeof *b);
    if (lim)
        b->lim = *lim;
    else
        rkv_kvev_limits_init(&b->lim);
    if (b->lim.max_events == 0 || b->lim.max_events > (1u << 20) ||
        b->lim.max_hashes > (1u << 24) || b->lim.max_tokens > (1u << 26) ||
        b->lim.max_block == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_kvev_batch_init: limits out of range");
    b->events = calloc(b->lim.max_events, sizeof *b->events);
    b->hashes = calloc(b->lim.max_hashes ? b->lim.max_hashes : 1, sizeof *b->hashes);
    b->tokens = calloc(b->lim.max_tokens ? b->lim.max_tokens : 1, sizeof *b->tokens);
    if (!b->events || !b->hashes || !b->tokens) {
        rkv_kvev_batch_free(b);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_kvev_batch_init: out of memory");
    }
    return RKV_OK;
}

void rkv_kvev_batch_free(rkv_kvev_batch *b)
{
    if (!b)
        return;
    free(b->events);
    free(b->hashes);
    free(b->tokens);
    memset(b, 0, sizeof *b);
}

rkv_status rkv_kvev_decode(const void *buf, size_t len, rkv_kvev_batch *b)
{
    if (!b || !b->events || (!buf && len))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_decode: NULL argument");
    b->ts = 0;
    b->dp_rank = -1;
    b->count = b->n_hashes = b->n_tokens = b->ignored = 0;
    reader r = {buf, (const uint8_t *)buf + len, NULL};
    if (batch(&r, b) == 0 && r.p != r.end)
        fail(&r, "bytes after the batch");
    if (r.err) {
        b->count = b->n_hashes = b->n_tokens = b->ignored = 0;
        return rkv_set_error(RKV_ERR_FORMAT, "rkv_kvev_decode: %s at byte %zu of %zu",
                             r.err, (size_t)(r.p - (const uint8_t *)buf), len);
    }
    return RKV_OK;
}

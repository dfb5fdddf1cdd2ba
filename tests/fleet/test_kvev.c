/*
 * tests/fleet/test_kvev.c -- the vLLM/SGLang KV-event format (fleet/kvev.h)
 * and the bridge's state (fleet/bridge.h) without sockets.
 *
 * Decoding: the encoder's batches round trip; batches written here byte by
 * byte in the other encodings the engines use (maps with "type", signed
 * and byte-string hashes, absent trailing fields, unknown fields and
 * event types) decode to the same meaning; hostile input (every
 * truncation, huge declared counts, deep nesting, counts over the caps)
 * is RKV_ERR_FORMAT and an empty batch, never a crash.
 * Bridge: the pages it announces are rkv_block_hash chains of the token
 * ids; removals and clears withdraw them; two engine blocks with the same
 * tokens are one page; what cannot be placed is counted; a full ring
 * leaves a RESYNC whose snapshot is the state; rkv_bridge_check after
 * every step. And a random walk of engine events, hostile ones included,
 * always gives a stream the router index accepts whole.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/bridge.h"
#include "fleet/kvev.h"
#include "radixkv_router.h"
#include "tests/support/test_util.h"

/* ---- a msgpack writer for the test's own batches ------------------------- */
typedef struct mp {
    uint8_t b[1 << 16];
    size_t n;
} mp;

static void mp_raw(mp *m, const void *p, size_t n)
{
    cr_assert_leq(m->n + n, sizeof m->b);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}
static void mp_byte(mp *m, uint8_t x) { mp_raw(m, &x, 1); }
static void mp_be(mp *m, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--)
        mp_byte(m, (uint8_t)(v >> (8 * i)));
}
static void mp_arr(mp *m, uint32_t n)
{
    mp_byte(m, 0xdc); /* array 16 even when small: a legal longer form */
    mp_be(m, n, 2);
}
static void mp_map(mp *m, uint32_t n) { mp_byte(m, (uint8_t)(0x80 | n)); }
static void mp_str(mp *m, const char *s)
{
    size_t n = strlen(s);
    mp_byte(m, 0xd9);
    mp_byte(m, (uint8_t)n);
    mp_raw(m, s, n);
}
static void mp_u64(mp *m, uint64_t v)
{
    mp_byte(m, 0xcf);
    mp_be(m, v, 8);
}
static void mp_i64(mp *m, int64_t v)
{
    mp_byte(m, 0xd3);
    mp_be(m, (uint64_t)v, 8);
}
static void mp_int(mp *m, int64_t v)
{
    if (v >= 0 && v < 128)
        mp_byte(m, (uint8_t)v);
    else
        mp_i64(m, v);
}
static void mp_bin(mp *m, const uint8_t *p, uint8_t n)
{
    mp_byte(m, 0xc4);
    mp_byte(m, n);
    mp_raw(m, p, n);
}
static void mp_nil(mp *m) { mp_byte(m, 0xc0); }
static void mp_f64(mp *m, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    mp_byte(m, 0xcb);
    mp_be(m, u, 8);
}

#define BS 4u

/* An array of n hashes, each as uint64. */
static void mp_keys(mp *m, const uint64_t *keys, uint32_t n)
{
    mp_arr(m, n);
    for (uint32_t i = 0; i < n; i++)
        mp_u64(m, keys[i]);
}
/* A batch's opening: an array of len fields (ts, events, and with 3 the
 * data-parallel rank after them), ts 0, and an events array of one. */
static void mp_batch1(mp *m, uint32_t len)
{
    mp_arr(m, len);
    mp_int(m, 0);
    mp_arr(m, 1);
}
/* An event in array form: its length (the type tag included), then the tag. */
static void mp_event(mp *m, uint32_t n, const char *type)
{
    mp_arr(m, n);
    mp_str(m, type);
}
/* A map entry whose value is a string. */
static void mp_kv_str(mp *m, const char *key, const char *val)
{
    mp_str(m, key);
    mp_str(m, val);
}
/* A map entry whose value is an integer. */
static void mp_kv_int(mp *m, const char *key, int64_t v)
{
    mp_str(m, key);
    mp_int(m, v);
}

static void tokens_for(int32_t *t, uint32_t n, int32_t base)
{
    for (uint32_t i = 0; i < n; i++)
        t[i] = base + (int32_t)i;
}

static rkv_kvev_batch *new_batch(void)
{
    rkv_kvev_batch *b = calloc(1, sizeof *b);
    cr_assert_not_null(b);
    cr_assert_eq(rkv_kvev_batch_init(b, NULL), RKV_OK);
    return b;
}

static void free_batch(rkv_kvev_batch *b)
{
    rkv_kvev_batch_free(b);
    free(b);
}

/* ---- decoding ------------------------------------------------------------- */
Test(kvev, encoder_round_trip)
{
    rkv_event ev[4];
    memset(ev, 0, sizeof ev);
    ev[0].kind = RKV_EVENT_BLOCK_STORED;
    ev[0].num_hashes = 3;
    ev[0].page_size = BS;
    ev[0].ns = 77;
    ev[0].parent_hash = 0xfedcba9876543210ull;
    ev[0].medium = RKV_MEDIUM_HOST;
    ev[0].hashes[0] = 1;
    ev[0].hashes[1] = 300;
    ev[0].hashes[2] = UINT64_MAX;
    ev[1].kind = RKV_EVENT_BLOCK_REMOVED;
    ev[1].num_hashes = 1;
    ev[1].medium = RKV_MEDIUM_DISK;
    ev[1].hashes[0] = 300;
    ev[2].kind = RKV_EVENT_ALL_CLEARED;
    ev[3].kind = RKV_EVENT_RESYNC;
    ev[3].lost = 5;
    int32_t t[3 * BS];
    tokens_for(t, 3 * BS, 1000);
    t[0] = -7; /* negative ids encode too */
    rkv_kvev_tokens tok[4] = {{t, 3 * BS}, {NULL, 0}, {NULL, 0}, {NULL, 0}};
    size_t need = 0;
    cr_assert_eq(rkv_kvev_encode(1.5, ev, 4, tok, NULL, 0, &need), RKV_ERR_NO_SPACE);
    uint8_t *buf = malloc(need);
    size_t len = 0;
    cr_assert_eq(rkv_kvev_encode(1.5, ev, 4, tok, buf, need, &len), RKV_OK);
    cr_assert_eq(len, need);
    rkv_kvev_batch *b = new_batch();
    cr_assert_eq(rkv_kvev_decode(buf, len, b), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(b->count, 4);
    cr_assert_float_eq(b->ts, 1.5, 1e-12);
    const rkv_kvev_event *e = &b->events[0];
    cr_assert_eq(e->kind, RKV_KVEV_STORED);
    cr_assert_eq(e->medium, RKV_MEDIUM_HOST);
    cr_assert_eq(e->num_hashes, 3);
    cr_assert_eq(b->hashes[e->first_hash + 2], UINT64_MAX);
    cr_assert_eq(b->hashes[e->first_hash + 1], 300);
    cr_assert(e->has_parent);
    cr_assert_eq(e->parent, 0xfedcba9876543210ull);
    cr_assert_eq(e->block_size, BS);
    cr_assert_eq(e->num_tokens, 3 * BS);
    cr_assert_eq(memcmp(b->tokens + e->first_token, t, sizeof t), 0);
    cr_assert_eq(e->ns, rkv_kvev_lora_id_ns(77));
    cr_assert_eq(b->events[1].kind, RKV_KVEV_REMOVED);
    cr_assert_eq(b->events[1].medium, RKV_MEDIUM_DISK);
    cr_assert_eq(b->hashes[b->events[1].first_hash], 300);
    cr_assert_eq(b->events[2].kind, RKV_KVEV_CLEARED);
    cr_assert_eq(b->events[3].kind, RKV_KVEV_CLEARED, "a RESYNC is a clear");
    /* a token count that does not match the pages is refused */
    tok[0].n = 3;
    cr_assert_eq(rkv_kvev_encode(1.5, ev, 1, tok, buf, need, &len), RKV_ERR_INVALID_ARG);
    free(buf);
    free_batch(b);
}

/* The same store and removal in map form, out of order, with signed and
 * byte-string hashes, unknown fields and an unknown event type. */
Test(kvev, maps_signed_bytes_unknown)
{
    uint8_t digest[32];
    for (int i = 0; i < 32; i++)
        digest[i] = (uint8_t)(i * 7 + 1);
    int32_t t[2 * BS];
    tokens_for(t, 2 * BS, 5);
    mp m = {.n = 0};
    mp_map(&m, 4);
    mp_str(&m, "events");
    mp_arr(&m, 4);
    /* 1: BlockStored as a map, type last, an unknown nested field */
    mp_map(&m, 8);
    mp_str(&m, "block_hashes");
    mp_arr(&m, 2);
    mp_i64(&m, -5);
    mp_bin(&m, digest, 32);
    mp_str(&m, "future_field");
    mp_map(&m, 1);
    mp_str(&m, "x");
    mp_arr(&m, 2);
    mp_nil(&m);
    mp_f64(&m, 2.0);
    mp_str(&m, "token_ids");
    mp_arr(&m, 2 * BS);
    for (uint32_t i = 0; i < 2 * BS; i++)
        mp_int(&m, t[i]);
    mp_str(&m, "parent_block_hash");
    mp_nil(&m);
    mp_kv_int(&m, "block_size", BS);
    mp_kv_str(&m, "lora_name", "adapter-a");
    mp_kv_str(&m, "medium", "GPU");
    mp_kv_str(&m, "type", "BlockStored");
    /* 2: an event type from the future, with fields: ignored */
    mp_event(&m, 3, "BlockPinned");
    mp_arr(&m, 1);
    mp_int(&m, 1);
    mp_str(&m, "GPU");
    /* 3: BlockRemoved as an array, the signed hash as its unsigned bits,
     * medium absent, an extra trailing field */
    mp_event(&m, 2, "BlockRemoved");
    mp_arr(&m, 1);
    mp_u64(&m, (uint64_t)-5);
    /* 4: AllBlocksCleared with a trailing field */
    mp_event(&m, 2, "AllBlocksCleared");
    mp_int(&m, 3);
    mp_kv_int(&m, "ts", 12);
    mp_kv_int(&m, "data_parallel_rank", 2);
    mp_str(&m, "another");
    mp_arr(&m, 0);
    rkv_kvev_batch *b = new_batch();
    cr_assert_eq(rkv_kvev_decode(m.b, m.n, b), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(b->count, 3);
    cr_assert_eq(b->ignored, 1);
    cr_assert_eq(b->dp_rank, 2);
    cr_assert_float_eq(b->ts, 12.0, 1e-12);
    const rkv_kvev_event *s = &b->events[0];
    cr_assert_eq(s->kind, RKV_KVEV_STORED);
    cr_assert_eq(s->num_hashes, 2);
    cr_assert_eq(b->hashes[s->first_hash], (uint64_t)-5);
    cr_assert_eq(b->hashes[s->first_hash + 1], rkv_kvev_key_bytes(digest, 32));
    cr_assert_not(s->has_parent);
    cr_assert_eq(s->ns, rkv_kvev_lora_name_ns("adapter-a", 9));
    cr_assert_neq(s->ns, 0);
    cr_assert_eq(s->num_tokens, 2 * BS);
    const rkv_kvev_event *r = &b->events[1];
    cr_assert_eq(r->kind, RKV_KVEV_REMOVED);
    cr_assert_eq(r->medium, RKV_MEDIUM_DEVICE);
    cr_assert_eq(b->hashes[r->first_hash], (uint64_t)-5);
    cr_assert_eq(b->events[2].kind, RKV_KVEV_CLEARED);
    cr_assert_eq(b->n_hashes, 3, "the ignored event's hash is not kept");

    /* every truncation fails cleanly, as an empty batch */
    for (size_t cut = 0; cut < m.n; cut++) {
        cr_assert_eq(rkv_kvev_decode(m.b, cut, b), RKV_ERR_FORMAT, "cut %zu", cut);
        cr_assert_eq(b->count, 0);
    }
    /* a trailing byte too */
    m.b[m.n] = 0xc0;
    cr_assert_eq(rkv_kvev_decode(m.b, m.n + 1, b), RKV_ERR_FORMAT);
    free_batch(b);
}

Test(kvev, hostile_counts_depth_caps)
{
    rkv_kvev_batch *b = new_batch();
    /* an array claiming 2^32-1 events in 10 bytes */
    uint8_t huge[] = {0x93, 0x00, 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0, 0xc0, 0xc0};
    cr_assert_eq(rkv_kvev_decode(huge, sizeof huge, b), RKV_ERR_FORMAT);
    /* deep nesting inside an unknown field */
    mp *m = calloc(1, sizeof *m);
    mp_batch1(m, 3);
    mp_event(m, 2, "AllBlocksCleared");
    for (int i = 0; i < 1000; i++)
        mp_byte(m, 0x91);
    mp_nil(m);
    mp_nil(m);
    cr_assert_eq(rkv_kvev_decode(m->b, m->n, b), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "deep"), "%s", rkv_last_error());
    /* one hash over the cap */
    rkv_kvev_limits lim;
    rkv_kvev_limits_init(&lim);
    lim.max_hashes = 2;
    rkv_kvev_batch small;
    cr_assert_eq(rkv_kvev_batch_init(&small, &lim), RKV_OK);
    m->n = 0;
    mp_batch1(m, 3);
    mp_event(m, 2, "BlockRemoved");
    mp_arr(m, 3);
    for (int i = 0; i < 3; i++)
        mp_int(m, i);
    mp_nil(m);
    cr_assert_eq(rkv_kvev_decode(m->b, m->n, &small), RKV_ERR_FORMAT);
    cr_assert(strstr(rkv_last_error(), "cap"), "%s", rkv_last_error());
    /* a token id over 32 bits, a zero block size, a 65-byte hash */
    const char *why[] = {"token", "block_size", "64 bytes"};
    for (int k = 0; k < 3; k++) {
        m->n = 0;
        mp_batch1(m, 3);
        mp_event(m, 5, "BlockStored");
        mp_arr(m, 1);
        if (k == 2) {
            uint8_t big[65] = {0};
            mp_bin(m, big, 65);
        } else {
            mp_int(m, 9);
        }
        mp_nil(m);
        mp_arr(m, 1);
        mp_int(m, k == 0 ? (int64_t)1 << 40 : 3);
        mp_int(m, k == 1 ? 0 : 1);
        mp_nil(m);
        cr_assert_eq(rkv_kvev_decode(m->b, m->n, b), RKV_ERR_FORMAT, "case %d", k);
        cr_assert(strstr(rkv_last_error(), why[k]), "%s", rkv_last_error());
    }
    free(m);
    rkv_kvev_batch_free(&small);
    free_batch(b);
}

/* ---- the bridge ------------------------------------------------------------ */
/* A bridge of cfg; creating it must succeed. */
static rkv_bridge *new_bridge(const rkv_bridge_config *cfg)
{
    rkv_bridge *br = NULL;
    cr_assert_eq(rkv_bridge_create(cfg, &br), RKV_OK, "%s", rkv_last_error());
    return br;
}

static void feed(rkv_bridge *br, rkv_kvev_batch *b, const mp *m)
{
    cr_assert_eq(rkv_kvev_decode(m->b, m->n, b), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_bridge_apply(br, b), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_bridge_check(br), RKV_OK, "%s", rkv_last_error());
}

/* A batch of one array-form BlockStored: engine hashes keys[0..n), parent
 * key (0: nil), tokens, medium. */
static size_t stored_batch(mp *m, const uint64_t *keys, uint32_t n, uint64_t parent,
                           const int32_t *t, const char *medium)
{
    m->n = 0;
    mp_batch1(m, 3);
    mp_event(m, 7, "BlockStored");
    mp_keys(m, keys, n);
    if (parent)
        mp_u64(m, parent);
    else
        mp_nil(m);
    mp_arr(m, n * BS);
    for (uint32_t i = 0; i < n * BS; i++)
        mp_int(m, t[i]);
    mp_int(m, BS);
    mp_nil(m);
    mp_str(m, medium);
    mp_nil(m);
    return m->n;
}

static size_t removed_batch(mp *m, const uint64_t *keys, uint32_t n, const char *medium)
{
    m->n = 0;
    mp_batch1(m, 3);
    mp_event(m, 3, "BlockRemoved");
    mp_keys(m, keys, n);
    mp_str(m, medium);
    mp_nil(m);
    return m->n;
}

/* stored_batch's batch (in m), fed to br. */
static void feed_stored(rkv_bridge *br, rkv_kvev_batch *b, mp *m, const uint64_t *keys,
                        uint32_t n, uint64_t parent, const int32_t *t, const char *medium)
{
    stored_batch(m, keys, n, parent, t, medium);
    feed(br, b, m);
}

/* removed_batch's batch (in m), fed to br. */
static void feed_removed(rkv_bridge *br, rkv_kvev_batch *b, mp *m, const uint64_t *keys,
                         uint32_t n, const char *medium)
{
    removed_batch(m, keys, n, medium);
    feed(br, b, m);
}

/* br's counters; reading them must succeed. */
static rkv_bridge_stats bridge_stats(rkv_bridge *br)
{
    rkv_bridge_stats st;
    cr_assert_eq(rkv_bridge_get_stats(br, &st), RKV_OK, "%s", rkv_last_error());
    return st;
}

static uint32_t drain(rkv_bridge *br, rkv_event *ev, uint32_t cap)
{
    uint32_t n = 0;
    cr_assert_eq(rkv_bridge_drain(br, ev, cap, &n), RKV_OK);
    return n;
}

Test(bridge, rehashes_removes_dedups)
{
    rkv_bridge_config cfg;
    rkv_bridge_config_init(&cfg);
    rkv_bridge *br = new_bridge(&cfg);
    rkv_kvev_batch *b = new_batch();
    mp *m = calloc(1, sizeof *m);
    int32_t t[20 * BS];
    tokens_for(t, 20 * BS, 100);
    uint64_t keys[20], h[20], parent = RKV_HASH_ROOT;
    for (uint32_t i = 0; i < 20; i++) {
        keys[i] = 1000 + i;
        h[i] = parent = rkv_block_hash(parent, 0, t + i * BS, BS);
    }
    /* 20 pages in two engine events: radixkv events of at most 16 hashes,
     * chained from the root, the second event's first page under the
     * first's last */
    feed_stored(br, b, m, keys, 12, 0, t, "GPU");
    feed_stored(br, b, m, keys + 12, 8, keys[11], t + 12 * BS, "GPU");
    rkv_event ev[64];
    uint32_t n = drain(br, ev, 64);
    cr_assert_eq(n, 2);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(ev[i].kind, RKV_EVENT_BLOCK_STORED);
        cr_assert_eq(ev[i].seq, i + 1);
        cr_assert_eq(ev[i].page_size, BS);
        cr_assert_eq(ev[i].parent_hash, k ? h[k - 1] : RKV_HASH_ROOT);
        for (uint32_t j = 0; j < ev[i].num_hashes; j++)
            cr_assert_eq(ev[i].hashes[j], h[k++], "page %u", k);
    }
    cr_assert_eq(k, 20);
    /* the same tokens under other engine hashes (an engine hashing extra
     * keys): no second announcement; removing one copy keeps the page */
    uint64_t other[3] = {5000, 5001, 5002};
    feed_stored(br, b, m, other, 3, 0, t, "GPU");
    cr_assert_eq(drain(br, ev, 64), 0);
    feed_removed(br, b, m, other, 3, "GPU");
    cr_assert_eq(drain(br, ev, 64), 0);
    /* the CPU copy of page 19 is its own (page, medium) */
    feed_stored(br, b, m, keys + 19, 1, keys[18], t + 19 * BS, "CPU_PINNED");
    cr_assert_eq(drain(br, ev, 64), 1);
    cr_assert_eq(ev[0].medium, RKV_MEDIUM_HOST);
    cr_assert_eq(ev[0].hashes[0], h[19]);
    /* removing pages 18, 19 (GPU) withdraws them there */
    feed_removed(br, b, m, keys + 18, 2, "GPU");
    cr_assert_eq(drain(br, ev, 64), 1);
    cr_assert_eq(ev[0].kind, RKV_EVENT_BLOCK_REMOVED);
    cr_assert_eq(ev[0].num_hashes, 2);
    cr_assert_eq(ev[0].hashes[1], h[19]);
    /* a child of the removed page 18 cannot be placed: counted, not sent */
    uint64_t orphan = 7000;
    feed_stored(br, b, m, &orphan, 1, keys[18], t, "GPU");
    cr_assert_eq(drain(br, ev, 64), 0);
    rkv_bridge_stats st = bridge_stats(br);
    cr_assert_eq(st.orphans, 1);
    cr_assert_eq(st.pages, 19, "18 on the GPU, 1 on the CPU");
    /* the snapshot is that state */
    rkv_block_entry snap[64];
    size_t ns = 0;
    uint64_t seq = 0;
    cr_assert_eq(rkv_bridge_snapshot(br, snap, 64, &ns, &seq), RKV_OK);
    cr_assert_eq(ns, 19);
    cr_assert_eq(seq, 4);
    for (size_t i = 0; i < ns; i++) {
        uint32_t j = 0;
        while (j < 20 && h[j] != snap[i].hash)
            j++;
        cr_assert_lt(j, 20);
        cr_assert_eq(snap[i].parent_hash, j ? h[j - 1] : RKV_HASH_ROOT);
        cr_assert_eq(snap[i].medium, j == 19 ? RKV_MEDIUM_HOST : RKV_MEDIUM_DEVICE);
    }
    /* a clear withdraws everything */
    cr_assert_eq(rkv_bridge_clear(br), RKV_OK);
    cr_assert_eq(drain(br, ev, 64), 1);
    cr_assert_eq(ev[0].kind, RKV_EVENT_ALL_CLEARED);
    cr_assert_eq(rkv_bridge_snapshot(br, NULL, 0, &ns, NULL), RKV_OK);
    cr_assert_eq(ns, 0);
    cr_assert_eq(rkv_bridge_check(br), RKV_OK, "%s", rkv_last_error());
    free(m);
    free_batch(b);
    rkv_bridge_destroy(br);
}

Test(bridge, short_tokens_unknown_medium_full_ring)
{
    rkv_bridge_config cfg;
    rkv_bridge_config_init(&cfg);
    cfg.event_ring = 4;
    cfg.max_blocks = 6;
    rkv_bridge *br = new_bridge(&cfg);
    rkv_kvev_batch *b = new_batch();
    mp *m = calloc(1, sizeof *m);
    int32_t t[8 * BS];
    tokens_for(t, 8 * BS, 1);
    uint64_t keys[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    /* tokens for 2 of 3 blocks (and no trailing fields): the third is
     * skipped */
    m->n = 0;
    mp_batch1(m, 2);
    mp_event(m, 5, "BlockStored");
    mp_arr(m, 3);
    for (int i = 0; i < 3; i++)
        mp_u64(m, keys[i]);
    mp_nil(m);
    mp_arr(m, 2 * BS);
    for (uint32_t i = 0; i < 2 * BS; i++)
        mp_int(m, t[i]);
    mp_int(m, BS);
    feed(br, b, m);
    rkv_bridge_stats st = bridge_stats(br);
    cr_assert_eq(st.no_tokens, 1);
    cr_assert_eq(st.blocks, 2);
    feed_stored(br, b, m, keys + 2, 1, keys[1], t + 2 * BS, "NVME_SOMEDAY");
    cr_assert_eq(bridge_stats(br).unknown_medium, 1);
    /* one engine event per radixkv event: 1 so far; three more single
     * stores fill the 4-slot ring (the last slot takes a RESYNC) */
    for (uint32_t i = 2; i < 6; i++)
        feed_stored(br, b, m, keys + i, 1, keys[i - 1], t + i * BS, "GPU");
    st = bridge_stats(br);
    cr_assert_eq(st.blocks, 6);
    cr_assert_eq(st.lost_events, 2);
    /* max_blocks: the seventh is skipped */
    feed_stored(br, b, m, keys + 6, 1, keys[5], t + 6 * BS, "GPU");
    cr_assert_eq(bridge_stats(br).full, 1);
    rkv_event ev[8];
    uint32_t n = drain(br, ev, 8);
    cr_assert_eq(n, 4);
    cr_assert_eq(ev[3].kind, RKV_EVENT_RESYNC);
    cr_assert_eq(ev[3].seq, 4);
    cr_assert_eq(ev[3].lost, 2);
    /* the snapshot is the state after the last seq: all six pages */
    size_t ns = 0;
    uint64_t seq = 0;
    cr_assert_eq(rkv_bridge_snapshot(br, NULL, 0, &ns, &seq), RKV_OK);
    cr_assert_eq(ns, 6);
    cr_assert_eq(seq, ev[3].seq + ev[3].lost - 1);
    /* recording resumes after the marker is drained */
    feed_removed(br, b, m, keys + 5, 1, "GPU");
    cr_assert_eq(drain(br, ev, 8), 1);
    cr_assert_eq(ev[0].kind, RKV_EVENT_BLOCK_REMOVED);
    cr_assert_eq(ev[0].seq, seq + 1);
    free(m);
    free_batch(b);
    rkv_bridge_destroy(br);
}

/* Every msgpack integer width of one negative hash is the same key. */
Test(kvev, signed_widths_one_key)
{
    const uint8_t forms[][9] = {
        {0xfb},                                           /* negative fixint */
        {0xd0, 0xfb},                                     /* int8            */
        {0xd1, 0xff, 0xfb},                               /* int16           */
        {0xd2, 0xff, 0xff, 0xff, 0xfb},                   /* int32           */
        {0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfb}, /* int64     */
        {0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfb}, /* uint64    */
    };
    const size_t width[] = {1, 2, 3, 5, 9, 9};
    rkv_kvev_batch *b = new_batch();
    for (int f = 0; f < 6; f++) {
        mp m = {.n = 0};
        mp_batch1(&m, 2);
        mp_event(&m, 2, "BlockRemoved");
        mp_arr(&m, 1);
        mp_raw(&m, forms[f], width[f]);
        cr_assert_eq(rkv_kvev_decode(m.b, m.n, b), RKV_OK, "form %d: %s", f,
                     rkv_last_error());
        cr_assert_eq(b->hashes[0], (uint64_t)-5, "form %d", f);
    }
    free_batch(b);
}

/* ---- the bridge's stream as the router sees it --------------------------- */

#define FAM 6u     /* prompt families; family f shares pages with f / 2 */
#define FPAGES 8u

static int32_t fam_token(uint32_t f, uint32_t page, uint32_t i)
{
    /* family f's first f pages are its parent family's */
    while (f && page < f)
        f /= 2;
    return (int32_t)(f * 100000 + page * 100 + i);
}

/* Whatever a worker (or an attacker) sends, the bridge's events are a
 * stream the router accepts: no store under a parent it does not hold, no
 * page stored twice, no removal of what it does not hold -- so the
 * instance never needs a resync -- and after every batch the router holds
 * exactly the bridge's snapshot. Engine keys are drawn from a small set,
 * so they repeat inside events, across media and for other content. */
Test(bridge, router_accepts_every_stream)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("bridge::router_accepts_every_stream"));
    rkv_bridge_config cfg;
    rkv_bridge_config_init(&cfg);
    rkv_bridge *br = new_bridge(&cfg);
    rkv_router_config rc;
    rkv_router_config_init(&rc);
    rkv_router *rt = NULL;
    cr_assert_eq(rkv_router_create(&rc, &rt), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(rt, 1), RKV_OK);
    rkv_kvev_batch *b = new_batch();
    mp *m = calloc(1, sizeof *m);
    rkv_event *ev = calloc(4096, sizeof *ev);
    rkv_block_entry *snap = calloc(4096, sizeof *snap);
    static const char *media[] = {"GPU", "CPU_PINNED", "DISK"};
    uint64_t steps = rkv_test_scaled(3000);
    for (uint64_t step = 0; step < steps; step++) {
        uint32_t kind = (uint32_t)rkv_rng_below(&rng, 20);
        m->n = 0;
        mp_arr(m, 3);
        mp_int(m, (int64_t)step);
        mp_arr(m, 1);
        const char *medium = media[rkv_rng_below(&rng, 3)];
        if (kind == 0) {
            mp_event(m, 1, "AllBlocksCleared");
        } else if (kind < 8) {
            uint32_t n = 1 + (uint32_t)rkv_rng_below(&rng, 4);
            mp_event(m, 3, "BlockRemoved");
            mp_arr(m, n);
            for (uint32_t i = 0; i < n; i++)
                mp_u64(m, 1 + rkv_rng_below(&rng, 40));
            mp_str(m, medium);
        } else {
            uint32_t f = (uint32_t)rkv_rng_below(&rng, FAM);
            uint32_t s = (uint32_t)rkv_rng_below(&rng, FPAGES);
            uint32_t n = 1 + (uint32_t)rkv_rng_below(&rng, FPAGES - s);
            mp_event(m, 7, "BlockStored");
            mp_arr(m, n);
            for (uint32_t i = 0; i < n; i++)
                mp_u64(m, 1 + rkv_rng_below(&rng, 40));
            if (s == 0 || rkv_rng_below(&rng, 8) == 0)
                mp_nil(m);
            else
                mp_u64(m, 1 + rkv_rng_below(&rng, 40));
            mp_arr(m, n * BS);
            for (uint32_t p = 0; p < n; p++)
                for (uint32_t i = 0; i < BS; i++)
                    mp_int(m, fam_token(f, s + p, i));
            mp_int(m, BS);
            mp_nil(m);
            mp_str(m, medium);
        }
        mp_nil(m);
        feed(br, b, m);
        uint32_t n = drain(br, ev, 4096);
        if (n)
            cr_assert_eq(rkv_router_apply(rt, 1, ev, n), RKV_OK);
        rkv_router_instance_info info;
        cr_assert_eq(rkv_router_instance_info_get(rt, 1, &info), RKV_OK);
        cr_assert_not(info.needs_resync, "step %llu: the router refused the "
                      "bridge's stream", (unsigned long long)step);
        size_t ns = 0;
        cr_assert_eq(rkv_bridge_snapshot(br, snap, 4096, &ns, NULL), RKV_OK);
        cr_assert_eq(info.blocks, ns, "step %llu", (unsigned long long)step);
        for (size_t i = 0; i < ns; i++)
            cr_assert(rkv_router_holds_medium(rt, 1, snap[i].ns, snap[i].hash,
                                              snap[i].medium));
    }
    rkv_bridge_stats st = bridge_stats(br);
    cr_assert_gt(st.stored, 100, "the walk stored something");
    cr_assert_gt(st.removed, 10);
    cr_assert_gt(st.orphans, 0);
    free(snap);
    free(ev);
    free(m);
    free_batch(b);
    rkv_router_destroy(rt);
    rkv_bridge_destroy(br);
}

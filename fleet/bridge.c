/*
 * fleet/bridge.c -- rkv_bridge (fleet/bridge.h): the two maps and the
 * event ring. Both maps are one open-addressing table type (linear
 * probing, backward-shift deletion, doubling at half full up to what
 * max_blocks needs), so a lookup or a removal is O(1) expected and no
 * tombstones pile up under churn.
 *   engine map: k1 = engine key;        a = namespace, b = radixkv hash,
 *               cnt[m] = 1 when stored on medium m
 *   page map:   k1 = namespace, k2 = radixkv hash; a = parent hash,
 *               cnt[m] = engine blocks on medium m naming this page
 */
#include "fleet/bridge.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

typedef struct slot {
    uint64_t k1, k2, a, b;
    uint32_t cnt[RKV_MEDIUM_COUNT];
    uint32_t used;
} slot;

typedef struct table {
    slot *s;
    size_t cap, n; /* cap a power of two, n used */
} table;

struct rkv_bridge {
    rkv_bridge_config cfg;
    table eng, pages;
    rkv_event *ring;
    uint32_t head, count;
    int resync_open;   /* the newest ring entry is an undrained RESYNC */
    uint64_t next_seq;
    /* the event being grown (stores chain, removals share ns + medium) */
    rkv_event cur;
    int have_cur;
    rkv_bridge_stats st;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static size_t home(const table *t, uint64_t k1, uint64_t k2)
{
    return (size_t)(mix(k1 ^ mix(k2 + 0x9e3779b97f4a7c15ull)) & (t->cap - 1));
}

static slot *find(const table *t, uint64_t k1, uint64_t k2)
{
    if (!t->cap)
        return NULL;
    for (size_t i = home(t, k1, k2);; i = (i + 1) & (t->cap - 1)) {
        slot *s = &t->s[i];
        if (!s->used)
            return NULL;
        if (s->k1 == k1 && s->k2 == k2)
            return s;
    }
}

static void place(table *t, const slot *src)
{
    size_t i = home(t, src->k1, src->k2);
    while (t->s[i].used)
        i = (i + 1) & (t->cap - 1);
    t->s[i] = *src;
}

static int grow(table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 1024;
    slot *old = t->s;
    size_t old_cap = t->cap;
    slot *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    t->s = s;
    t->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].used)
            place(t, &old[i]);
    free(old);
    return 0;
}

/* A new zeroed entry (the key absent); NULL without memory. */
static slot *insert(table *t, uint64_t k1, uint64_t k2)
{
    if ((t->n + 1) * 2 > t->cap && grow(t))
        return NULL;
    slot s;
    memset(&s, 0, sizeof s);
    s.k1 = k1;
    s.k2 = k2;
    s.used = 1;
    place(t, &s);
    t->n++;
    return find(t, k1, k2);
}

static void erase(table *t, slot *s)
{
    size_t i = (size_t)(s - t->s), mask = t->cap - 1;
    t->s[i].used = 0;
    t->n--;
    /* backward shift: move up every later entry of the run whose home does
     * not lie cyclically in (i, j] */
    for (size_t j = (i + 1) & mask; t->s[j].used; j = (j + 1) & mask) {
        size_t h = home(t, t->s[j].k1, t->s[j].k2);
        int stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (stays)
            continue;
        t->s[i] = t->s[j];
        t->s[j].used = 0;
        i = j;
    }
}

static void table_clear(table *t)
{
    if (t->s)
        memset(t->s, 0, t->cap * sizeof *t->s);
    t->n = 0;
}

void rkv_bridge_config_init(rkv_bridge_config *cfg)
{
    if (!cfg)
        return;
    cfg->max_blocks = 1u << 21;
    cfg->event_ring = 1u << 16;
}

rkv_status rkv_bridge_create(const rkv_bridge_config *cfg, rkv_bridge **out)
{
    if (!cfg || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_create: NULL");
    if (cfg->max_blocks == 0 || cfg->max_blocks > (1u << 30) || cfg->event_ring < 2 ||
        cfg->event_ring > (1u << 24))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_create: max_blocks "
                             "1..2^30, event_ring 2..2^24");
    rkv_bridge *b = calloc(1, sizeof *b);
    if (!b || !(b->ring = calloc(cfg->event_ring, sizeof *b->ring))) {
        free(b);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_bridge_create: out of memory");
    }
    b->cfg = *cfg;
    b->next_seq = 1;
    *out = b;
    return RKV_OK;
}

void rkv_bridge_destroy(rkv_bridge *b)
{
    if (!b)
        return;
    free(b->eng.s);
    free(b->pages.s);
    free(b->ring);
    free(b);
}

/* ---- the event ring (the tree's overflow rule) ----------------------------- */
static void record(rkv_bridge *b, const rkv_event *e)
{
    uint64_t seq = b->next_seq++;
    uint32_t R = b->cfg.event_ring;
    if (b->resync_open) {
        b->ring[(b->head + b->count - 1) % R].lost++;
        b->st.lost_events++;
        return;
    }
    rkv_event *dst = &b->ring[(b->head + b->count) % R];
    if (b->count + 1 < R) {
        *dst = *e;
        dst->seq = seq;
    } else {
        memset(dst, 0, sizeof *dst);
        dst->seq = seq;
        dst->kind = RKV_EVENT_RESYNC;
        dst->lost = 1;
        b->resync_open = 1;
        b->st.lost_events++;
    }
    b->count++;
}

static void flush(rkv_bridge *b)
{
    if (b->have_cur && b->cur.num_hashes)
        record(b, &b->cur);
    b->have_cur = 0;
}

/* The pending event is finished; a new one of this kind, namespace and
 * medium starts empty. */
static void start_event(rkv_bridge *b, uint8_t kind, rkv_namespace ns, uint8_t m)
{
    flush(b);
    rkv_event *c = &b->cur;
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->ns = ns;
    c->medium = m;
    b->have_cur = 1;
}

static void emit_stored(rkv_bridge *b, rkv_namespace ns, uint8_t m, uint32_t page,
                        uint64_t parent, uint64_t h)
{
    rkv_event *c = &b->cur;
    int chains = b->have_cur && c->kind == RKV_EVENT_BLOCK_STORED && c->ns == ns &&
                 c->medium == m && c->page_size == page &&
                 c->num_hashes < RKV_EVENT_MAX_HASHES &&
                 c->hashes[c->num_hashes - 1] == parent;
    if (!chains) {
        start_event(b, RKV_EVENT_BLOCK_STORED, ns, m);
        c->page_size = page;
        c->parent_hash = parent;
    }
    c->hashes[c->num_hashes++] = h;
}

static void emit_removed(rkv_bridge *b, rkv_namespace ns, uint8_t m, uint64_t h)
{
    rkv_event *c = &b->cur;
    int joins = b->have_cur && c->kind == RKV_EVENT_BLOCK_REMOVED && c->ns == ns &&
                c->medium == m && c->num_hashes < RKV_EVENT_MAX_HASHES;
    if (!joins)
        start_event(b, RKV_EVENT_BLOCK_REMOVED, ns, m);
    c->hashes[c->num_hashes++] = h;
}

/* ---- applying the worker's events -------------------------------------------- */
/* Drops engine entry e's hold on medium m (and the page's, announcing its
 * removal when that was the last). */
static void release(rkv_bridge *b, slot *e, uint8_t m)
{
    rkv_namespace ns = e->a;
    uint64_t h = e->b;
    e->cnt[m] = 0;
    if (!e->cnt[0] && !e->cnt[1] && !e->cnt[2])
        erase(&b->eng, e);
    b->st.blocks--;
    slot *p = find(&b->pages, ns, h);
    if (!p)
        return; /* rkv_bridge_check reports it */
    if (--p->cnt[m] == 0) {
        emit_removed(b, ns, m, h);
        b->st.pages--;
        if (!p->cnt[0] && !p->cnt[1] && !p->cnt[2])
            erase(&b->pages, p);
    }
}

static rkv_status stored(rkv_bridge *b, const rkv_kvev_batch *bt, const rkv_kvev_event *e)
{
    uint8_t m = e->medium;
    if (m >= RKV_MEDIUM_COUNT) {
        b->st.unknown_medium += e->num_hashes;
        return RKV_OK;
    }
    uint64_t parent = RKV_HASH_ROOT;
    if (e->has_parent) {
        slot *p = find(&b->eng, e->parent, 0);
        if (!p || p->a != e->ns) {
            b->st.orphans += e->num_hashes;
            return RKV_OK;
        }
        parent = p->b;
    }
    uint32_t bs = e->block_size;
    uint32_t usable = bs ? e->num_tokens / bs : 0;
    if (usable > e->num_hashes)
        usable = e->num_hashes;
    b->st.no_tokens += e->num_hashes - usable;
    for (uint32_t j = 0; j < usable; j++) {
        uint64_t key = bt->hashes[e->first_hash + j];
        uint64_t h = rkv_block_hash(parent, e->ns, bt->tokens + e->first_token +
                                    (size_t)j * bs, bs);
        slot *x = find(&b->eng, key, 0);
        if (x && (x->a != e->ns || x->b != h)) {
            /* the engine reused a hash for other content: the old
             * mapping is wrong on every medium */
            for (uint8_t k = 0; k < RKV_MEDIUM_COUNT; k++)
                if ((x = find(&b->eng, key, 0)) && x->cnt[k])
                    release(b, x, k);
            x = NULL;
        }
        /* prefix closure, which the router checks: the page before must
         * still be held -- a hash the engine reused (for this very page,
         * or earlier in this event) can have withdrawn it just now */
        if (parent != RKV_HASH_ROOT && !find(&b->pages, e->ns, parent)) {
            b->st.orphans += usable - j;
            return RKV_OK;
        }
        if (x && x->cnt[m]) {
            b->st.duplicates++;
            parent = h;
            continue;
        }
        if (!x) {
            if (b->eng.n >= b->cfg.max_blocks) {
                b->st.full += usable - j;
                return RKV_OK;
            }
            if (!(x = insert(&b->eng, key, 0)))
                return rkv_set_error(RKV_ERR_NOMEM, "rkv_bridge_apply: out of memory");
            x->a = e->ns;
            x->b = h;
        }
        slot *p = find(&b->pages, e->ns, h);
        if (!p) {
            if (!(p = insert(&b->pages, e->ns, h))) {
                if (!x->cnt[0] && !x->cnt[1] && !x->cnt[2])
                    erase(&b->eng, x);
                return rkv_set_error(RKV_ERR_NOMEM, "rkv_bridge_apply: out of memory");
            }
            p->a = parent; /* where the page hangs, for snapshots */
        }
        x->cnt[m] = 1;
        b->st.blocks++;
        b->st.stored++;
        if (p->cnt[m]++ == 0) {
            emit_stored(b, e->ns, m, bs, parent, h);
            b->st.pages++;
        }
        parent = h;
    }
    return RKV_OK;
}

static void removed(rkv_bridge *b, const rkv_kvev_batch *bt, const rkv_kvev_event *e)
{
    uint8_t m = e->medium;
    if (m >= RKV_MEDIUM_COUNT) {
        b->st.unknown_medium += e->num_hashes;
        return;
    }
    for (uint32_t j = 0; j < e->num_hashes; j++) {
        slot *x = find(&b->eng, bt->hashes[e->first_hash + j], 0);
        if (!x || !x->cnt[m]) {
            b->st.unknown_removed++;
            continue;
        }
        release(b, x, m);
        b->st.removed++;
    }
}

static void clear_all(rkv_bridge *b)
{
    flush(b);
    table_clear(&b->eng);
    table_clear(&b->pages);
    b->st.blocks = b->st.pages = 0;
    rkv_event e;
    memset(&e, 0, sizeof e);
    e.kind = RKV_EVENT_ALL_CLEARED;
    record(b, &e);
    b->st.clears++;
}

rkv_status rkv_bridge_apply(rkv_bridge *b, const rkv_kvev_batch *bt)
{
    if (!b || !bt)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_apply: NULL");
    rkv_status s = RKV_OK;
    for (uint32_t i = 0; i < bt->count && s == RKV_OK; i++) {
        const rkv_kvev_event *e = &bt->events[i];
        if (e->kind == RKV_KVEV_STORED)
            s = stored(b, bt, e);
        else if (e->kind == RKV_KVEV_REMOVED)
            removed(b, bt, e);
        else
            clear_all(b);
        flush(b); /* one engine event, its own radixkv events */
    }
    flush(b);
    return s;
}

rkv_status rkv_bridge_clear(rkv_bridge *b)
{
    if (!b)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_clear: NULL");
    clear_all(b);
    return RKV_OK;
}

rkv_status rkv_bridge_drain(rkv_bridge *b, rkv_event *out, uint32_t max,
                            uint32_t *n_out)
{
    if (!b || !n_out || (!out && max))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_drain: NULL");
    uint32_t n = 0;
    while (n < max && b->count) {
        out[n] = b->ring[b->head];
        b->head = (b->head + 1) % b->cfg.event_ring;
        b->count--;
        if (b->count == 0)
            b->resync_open = 0; /* the marker, if any, was the newest */
        n++;
    }
    *n_out = n;
    return RKV_OK;
}

rkv_status rkv_bridge_snapshot(const rkv_bridge *b, rkv_block_entry *out, size_t cap,
                               size_t *n_out, uint64_t *seq_out)
{
    if (!b || !n_out || (!out && cap))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_snapshot: NULL");
    size_t n = 0;
    for (size_t i = 0; i < b->pages.cap; i++)
        for (uint32_t m = 0; m < RKV_MEDIUM_COUNT; m++)
            n += b->pages.s[i].used && b->pages.s[i].cnt[m];
    *n_out = n;
    if (seq_out)
        *seq_out = b->next_seq - 1;
    if (!out)
        return RKV_OK;
    if (cap < n)
        return rkv_set_error(RKV_ERR_NO_SPACE, "rkv_bridge_snapshot: %zu entries, "
                             "room for %zu", n, cap);
    size_t k = 0;
    for (size_t i = 0; i < b->pages.cap; i++) {
        const slot *p = &b->pages.s[i];
        for (uint32_t m = 0; p->used && m < RKV_MEDIUM_COUNT; m++)
            if (p->cnt[m]) {
                rkv_block_entry *e = &out[k++];
                memset(e, 0, sizeof *e);
                e->ns = p->k1;
                e->hash = p->k2;
                e->parent_hash = p->a;
                e->medium = m;
            }
    }
    return RKV_OK;
}

rkv_status rkv_bridge_get_stats(const rkv_bridge *b, rkv_bridge_stats *out)
{
    if (!b || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_get_stats: NULL");
    *out = b->st;
    return RKV_OK;
}

rkv_status rkv_bridge_check(const rkv_bridge *b)
{
    if (!b)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_bridge_check: NULL");
    const char *fn = "rkv_bridge_check";
    uint64_t blocks = 0, pages = 0, used = 0;
    for (size_t i = 0; i < b->eng.cap; i++) {
        const slot *x = &b->eng.s[i];
        if (!x->used)
            continue;
        used++;
        if (find(&b->eng, x->k1, 0) != x)
            return rkv_set_error(RKV_ERR_CORRUPT, "%s: engine entry %zu unreachable",
                                 fn, i);
        const slot *p = find(&b->pages, x->a, x->b);
        for (uint32_t m = 0; m < RKV_MEDIUM_COUNT; m++) {
            blocks += x->cnt[m];
            if (x->cnt[m] > 1 || (x->cnt[m] && (!p || !p->cnt[m])))
                return rkv_set_error(RKV_ERR_CORRUPT, "%s: engine entry %zu medium "
                                     "%u without its page", fn, i, m);
        }
        if (!x->cnt[0] && !x->cnt[1] && !x->cnt[2])
            return rkv_set_error(RKV_ERR_CORRUPT, "%s: empty engine entry kept", fn);
    }
    if (used != b->eng.n || blocks != b->st.blocks || used > b->cfg.max_blocks)
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: %" PRIu64 " engine entries, %zu "
                             "counted, %" PRIu64 " blocks vs %" PRIu64, fn, used,
                             b->eng.n, blocks, b->st.blocks);
    used = 0;
    for (size_t i = 0; i < b->pages.cap; i++) {
        const slot *p = &b->pages.s[i];
        if (!p->used)
            continue;
        used++;
        if (find(&b->pages, p->k1, p->k2) != p)
            return rkv_set_error(RKV_ERR_CORRUPT, "%s: page %zu unreachable", fn, i);
        uint32_t want[RKV_MEDIUM_COUNT] = {0, 0, 0};
        for (size_t j = 0; j < b->eng.cap; j++) {
            const slot *x = &b->eng.s[j];
            if (x->used && x->a == p->k1 && x->b == p->k2)
                for (uint32_t m = 0; m < RKV_MEDIUM_COUNT; m++)
                    want[m] += x->cnt[m];
        }
        for (uint32_t m = 0; m < RKV_MEDIUM_COUNT; m++) {
            pages += p->cnt[m] != 0;
            if (want[m] != p->cnt[m])
                return rkv_set_error(RKV_ERR_CORRUPT, "%s: page %zu medium %u counts "
                                     "%u engine blocks, %u name it", fn, i, m,
                                     p->cnt[m], want[m]);
        }
    }
    if (used != b->pages.n || pages != b->st.pages)
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: %" PRIu64 " page entries vs %zu, "
                             "%" PRIu64 " pages vs %" PRIu64, fn, used, b->pages.n,
                             pages, b->st.pages);
    if (b->count > b->cfg.event_ring || b->head >= b->cfg.event_ring)
        return rkv_set_error(RKV_ERR_CORRUPT, "%s: ring %u/%u", fn, b->count,
                             b->cfg.event_ring);
    for (uint32_t i = 1; i < b->count; i++) {
        const rkv_event *a = &b->ring[(b->head + i - 1) % b->cfg.event_ring];
        const rkv_event *c = &b->ring[(b->head + i) % b->cfg.event_ring];
        if (c->seq <= a->seq)
            return rkv_set_error(RKV_ERR_CORRUPT, "%s: ring seqs out of order", fn);
    }
    return RKV_OK;
}

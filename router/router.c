/*
 * router/router.c -- the fleet router's instances and state changes: create
 * and destroy, instances, event batches with sequence checks, load
 * reports, stats and rkv_router_check (snapshots: router/snapshot.c). Data structures and invariants:
 * router/router_internal.h; the query: router/route.c.
 *
 * Whatever an instance's stream does wrong (a gap, a marker, a store of a
 * block it holds, a removal of one it does not) ends the same way: the
 * instance is cleared and waits for a snapshot. Clearing never allocates,
 * so the index stays exact (an instance holds what its tree caches, or
 * nothing) even when the stream or memory fails.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "router/router_internal.h"

void rkv_router_config_init(rkv_router_config *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->page_tokens = 16;
    cfg->medium_weight[RKV_MEDIUM_DEVICE] = 1.0;
    cfg->medium_weight[RKV_MEDIUM_HOST] = 0.5;
    cfg->medium_weight[RKV_MEDIUM_DISK] = 0.25;
    cfg->queue_weight = 1.0;
    cfg->running_weight = 16.0;
}

static int rkv_index_finite_nonneg(double x)
{
    return x >= 0 && x <= 1e300;
}

rkv_status rkv_router_create(const rkv_router_config *cfg, rkv_router **out)
{
    static const char fn[] = "rkv_router_create";
    if (out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL out", fn);
    *out = NULL;
    rkv_router_config def;
    rkv_router_config_init(&def);
    if (cfg == NULL)
        cfg = &def;
    int ok = rkv_index_finite_nonneg(cfg->page_tokens) &&
             rkv_index_finite_nonneg(cfg->queue_weight) &&
             rkv_index_finite_nonneg(cfg->running_weight) &&
             rkv_index_finite_nonneg(cfg->temperature);
    for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
        ok = ok && rkv_index_finite_nonneg(cfg->medium_weight[m]);
    if (!ok)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: weights must be finite "
                             "and >= 0", fn);
    if (cfg->initial_blocks > (1u << 29))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: initial_blocks %u too "
                             "large", fn, cfg->initial_blocks);
    if (cfg->max_table_bytes != 0 && cfg->max_table_bytes < 64 * sizeof(rkv_index_entry))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: max_table_bytes %llu is "
                             "below the smallest table (%zu bytes)", fn,
                             (unsigned long long)cfg->max_table_bytes,
                             64 * sizeof(rkv_index_entry));
    rkv_router *r = calloc(1, sizeof *r);
    if (r == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: router struct", fn);
    r->cfg = *cfg;
    r->rng = cfg->seed;
    r->spans = malloc(2 * RKV_INDEX_SPANS * sizeof *r->spans);
    if (r->spans == NULL) {
        free(r);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: search buffer", fn);
    }
    rkv_status st = rkv_index_index_init(r, cfg->initial_blocks);
    if (st != RKV_OK) {
        free(r->spans);
        free(r);
        return st;
    }
    *out = r;
    return RKV_OK;
}

void rkv_router_destroy(rkv_router *router)
{
    if (router == NULL)
        return;
    rkv_index_index_fini(router);
    free(router->spans);
    free(router->qhash);
    free(router);
}

/* ---- instances ------------------------------------------------------------- */

uint32_t rkv_index_slot_of(const rkv_router *r, uint64_t id)
{
    uint32_t lo = 0, hi = r->num_instances;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        uint64_t x = r->inst[r->order[mid]].id;
        if (x == id)
            return r->order[mid];
        if (x < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return RKV_INDEX_EMPTY;
}

rkv_status rkv_index_lookup(rkv_router *r, uint64_t id, const void *items, size_t n,
                         const char *items_name, const char *fn, uint32_t *slot)
{
    if (r == NULL || (items == NULL && n > 0))
        return rkv_null_arg(fn, r, "router", items_name);
    *slot = rkv_index_slot_of(r, id);
    if (*slot == RKV_INDEX_EMPTY) {
        r->st.unknown_instance++;
        return rkv_set_error(RKV_ERR_NOT_FOUND, "%s: instance %llu is not "
                             "registered", fn, (unsigned long long)id);
    }
    return RKV_OK;
}

uint32_t rkv_index_free_slot_any(const rkv_router *r)
{
    for (uint32_t s = 0; s < RKV_INDEX_SLOTS; s++)
        if (r->inst[s].role == RKV_INDEX_FREE)
            return s;
    return RKV_INDEX_EMPTY;
}

void rkv_index_clear_slot(rkv_router *r, uint32_t s)
{
    uint64_t bit = 1ull << (s % 64);
    uint32_t g = s / 64;
    rkv_index_slot *in = &r->inst[s];
    if (in->blocks[0] + in->blocks[1] + in->blocks[2] != 0) {
        /* A deletion at i may pull a later entry of the cluster into i
         * (look at i again) or a wrapped one from the table's start (seen
         * already: its bit is clear, looking again is harmless). */
        for (uint32_t i = 0; i < r->table_cap;) {
            rkv_index_entry *e = &r->entries[i];
            if ((e->mask & bit) && rkv_index_group(e) == g) {
                e->mask &= ~bit;
                if (e->mask == 0) {
                    rkv_index_remove(r, i);
                    continue;
                }
            }
            i++;
        }
    }
    memset(in->blocks, 0, sizeof in->blocks);
}

static void rkv_index_need_resync(rkv_router *r, uint32_t s)
{
    rkv_index_clear_slot(r, s);
    r->inst[s].needs_resync = 1;
    r->live[s / 64] &= ~(1ull << (s % 64));
}

rkv_status rkv_router_add_instance(rkv_router *router, uint64_t instance)
{
    static const char fn[] = "rkv_router_add_instance";
    if (router == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL router", fn);
    rkv_router *r = router;
    if (instance == UINT64_MAX)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: id UINT64_MAX is "
                             "reserved", fn);
    if (rkv_index_slot_of(r, instance) != RKV_INDEX_EMPTY)
        return rkv_set_error(RKV_ERR_DUPLICATE, "%s: instance %llu is already "
                             "registered", fn, (unsigned long long)instance);
    if (r->num_instances == RKV_ROUTER_MAX_INSTANCES)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u instances already",
                             fn, RKV_ROUTER_MAX_INSTANCES);
    uint32_t s = rkv_index_free_slot_any(r);
    if (s == RKV_INDEX_EMPTY) /* staging snapshots hold the spare slots */
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: no free slot (snapshots "
                             "being staged hold them)", fn);
    rkv_index_slot *in = &r->inst[s];
    memset(in, 0, sizeof *in);
    in->id = instance;
    in->role = RKV_INDEX_INSTANCE;
    in->staging = RKV_INDEX_EMPTY;
    rkv_index_load_terms(r, s);
    /* keep order[] sorted by id */
    uint32_t k = r->num_instances;
    while (k > 0 && r->inst[r->order[k - 1]].id > instance) {
        r->order[k] = r->order[k - 1];
        k--;
    }
    r->order[k] = s;
    r->num_instances++;
    r->live[s / 64] |= 1ull << (s % 64);
    r->inst_mask[s / 64] |= 1ull << (s % 64);
    return RKV_OK;
}

rkv_status rkv_router_remove_instance(rkv_router *router, uint64_t instance)
{
    static const char fn[] = "rkv_router_remove_instance";
    uint32_t s;
    rkv_status st = rkv_index_lookup(router, instance, NULL, 0, NULL, fn, &s);
    if (st != RKV_OK)
        return st;
    rkv_index_stage_drop(router, s);
    rkv_index_clear_slot(router, s);
    router->inst[s].role = RKV_INDEX_FREE;
    router->live[s / 64] &= ~(1ull << (s % 64));
    router->inst_mask[s / 64] &= ~(1ull << (s % 64));
    uint32_t k = 0;
    while (router->order[k] != s)
        k++;
    for (; k + 1 < router->num_instances; k++)
        router->order[k] = router->order[k + 1];
    router->num_instances--;
    return RKV_OK;
}

rkv_status rkv_router_set_load(rkv_router *router, uint64_t instance,
                               uint32_t running, uint64_t queued_tokens)
{
    static const char fn[] = "rkv_router_set_load";
    uint32_t s;
    rkv_status st = rkv_index_lookup(router, instance, NULL, 0, NULL, fn, &s);
    if (st != RKV_OK)
        return st;
    router->inst[s].running = running;
    router->inst[s].queued_tokens = queued_tokens;
    router->inst[s].routed_running = 0;
    router->inst[s].routed_tokens = 0;
    rkv_index_load_terms(router, s);
    return RKV_OK;
}

/* ---- events ------------------------------------------------------------------ */

/* Does a slot of group g (bit) hold `hash` (its namespace's nsmix) on any
 * medium? */
static int rkv_index_slot_holds(const rkv_router *r, uint32_t g, uint64_t bit,
                             uint64_t nsmix, uint64_t hash)
{
    uint64_t key = rkv_index_key(hash, nsmix, g, RKV_MEDIUM_DEVICE);
    return (rkv_index_mask_any(r, g, key) & bit) != 0;
}

/* A batch's hashes are random table lookups, so the apply loop keeps
 * misses in flight: a producer runs RKV_INDEX_AHEAD hashes ahead of the
 * hash being applied, across events, computing each key once into a ring
 * and prefetching its home line. (Prefetching an event's own hashes at
 * its start left the memory idle at its end; a one-event lookahead
 * started them in bursts.) Hash ordinals count every event's hashes in
 * batch order (an event of more than RKV_EVENT_MAX_HASHES counts none:
 * it is refused unread); the producer only prefetches, so an event that
 * is skipped or fails costs a few wasted lines and a jump. The
 * producer's state is the next hash's address and its event's end, key
 * bits and namespace mix, so a step is the key, the ring and the
 * prefetch; moving to the next event happens once per event, out of
 * line. */
#define RKV_INDEX_AHEAD 16u
#define RKV_INDEX_RING 32u /* a power of two > RKV_INDEX_AHEAD */
_Static_assert(RKV_INDEX_RING > RKV_INDEX_AHEAD &&
               (RKV_INDEX_RING & (RKV_INDEX_RING - 1)) == 0, "the key ring");

typedef struct rkv_index_stream {
    const rkv_event *ev;
    uint32_t n, g;
    uint32_t k;         /* the event whose hashes are being keyed        */
    uint64_t low;       /* ev[k]'s key bits below the mix: group and
                           medium (its low 2 bits: a bad one is refused
                           unapplied, the prefetch does not matter)      */
    const uint64_t *h, *end; /* next hash to key and ev[k]'s end        */
    uint64_t o;         /* the next hash's ordinal                       */
    uint64_t nsmix;     /* ev[k]'s                                       */
    uint64_t key[RKV_INDEX_RING]; /* key of ordinal o at [o % RING]     */
} rkv_index_stream;

static inline uint32_t rkv_index_len(const rkv_event *e)
{
    return e->num_hashes <= RKV_EVENT_MAX_HASHES ? e->num_hashes : 0;
}

/* Puts the producer at event k's first hash, ordinal o. */
static inline __attribute__((always_inline)) void rkv_index_stream_at(rkv_index_stream *p, uint32_t k, uint64_t o)
{
    p->k = k;
    p->o = o;
    p->h = p->end = NULL;
    if (k < p->n) {
        const rkv_event *e = &p->ev[k];
        p->h = e->hashes;
        p->end = e->hashes + rkv_index_len(e);
        p->low = rkv_index_key(0, 0, p->g, e->medium & 3u) & 127;
        p->nsmix = rkv_index_nsmix(e->ns);
    }
}

/* Moves the producer past its event to the next one with a hash to key;
 * 0 at the batch's end. */
static inline __attribute__((always_inline)) int rkv_index_stream_next(rkv_index_stream *p)
{
    while (p->k < p->n) {
        rkv_index_stream_at(p, p->k + 1, p->o);
        if (p->h != p->end)
            return 1;
    }
    return 0;
}

/* Keys and prefetches the producer's next hash, if any. */
static inline void rkv_index_stream_step(const rkv_router *r,
                                         rkv_index_stream *p)
{
    if (p->h == p->end && !rkv_index_stream_next(p))
        return;
    /* rkv_index_key(hash, nsmix, g, medium): its low 7 bits are the
     * group's and medium's alone */
    uint64_t key = rkv_index_key(*p->h++, p->nsmix, 0, 0) | p->low;
    p->key[(uint32_t)p->o++ & (RKV_INDEX_RING - 1)] = key;
    uint32_t home = rkv_index_home(r, key);
    __builtin_prefetch(&r->entries[home]);
    /* and the next line: keys of one block in several groups share a
     * home, so probes and removals' shifts often run past the line (a
     * miss there was not prefetched; the next line cost less than it
     * saved, two more lines than they saved) */
    if (home + 4 < r->table_cap)
        __builtin_prefetch(&r->entries[home + 4]);
}

/* Stores the event's hashes for slot bit `bit` of group g, from ring
 * ordinal o on; returns as rkv_index_apply_one, *done = hashes applied.
 * The entry count is kept in a register and the host/disk count added
 * once (what rkv_index_add_at does one by one). */
static inline __attribute__((always_inline)) int rkv_index_store(rkv_router *r, uint32_t g, uint64_t bit,
                                  uint32_t nh, uint32_t medium,
                                  rkv_index_stream *p, uint64_t o,
                                  uint32_t *done)
{
    rkv_index_entry *t = r->entries;
    uint32_t count = r->count, limit = r->limit, j = 0;
    int rc = 0;
    for (; j < nh; j++) {
        rkv_index_stream_step(r, p);
        uint32_t q = (uint32_t)(o + j) & (RKV_INDEX_RING - 1);
        uint64_t key = p->key[q];
        rkv_index_entry *x = &t[rkv_index_seek(r, key, rkv_index_home(r, key))];
        if (x->mask == 0) { /* a free slot: the new entry goes here */
            if (count >= limit) {
                rc = -2;
                break;
            }
            x->key = key;
            x->mask = bit;
            count++;
        } else if (x->mask & bit) { /* held already: nothing to undo */
            rc = 1;
            break;
        } else {
            x->mask |= bit;
        }
    }
    if (medium != RKV_MEDIUM_DEVICE)
        r->offdev[g] += count - r->count;
    r->count = count;
    *done = j;
    return rc;
}

/* Applies one in-sequence event for slot s; its hashes' keys are in the
 * stream's ring from ordinal o on. 0: done; 1: the event contradicts the
 * index (the caller resyncs); -1: out of memory; -2: over the memory
 * budget (the caller resyncs). A contradiction found halfway leaves the
 * first hashes applied (and counted: the caller's clear relies on the
 * counts): the caller clears the instance anyway. parent_held: the
 * event's parent is known held (the previous event stored it). */
static inline __attribute__((always_inline)) int rkv_index_apply_one(rkv_router *r, uint32_t s,
                                      const rkv_event *e,
                                      rkv_index_stream *p, uint64_t o,
                                      int parent_held)
{
    uint32_t g = s / 64;
    uint64_t bit = 1ull << (s % 64);
    rkv_index_slot *in = &r->inst[s];
    if (e->medium >= RKV_MEDIUM_COUNT || e->num_hashes > RKV_EVENT_MAX_HASHES)
        return 1;
    uint32_t j = 0, nh = e->num_hashes;
    int rc = 0;
    switch (e->kind) {
    case RKV_EVENT_BLOCK_STORED: {
        /* reserve's own first test, without the call (a table it
         * grows leaves the prefetched lines the old table's: the keys
         * stay right, the homes are taken when applied) */
        if ((uint64_t)r->count + nh > rkv_index_load_max(r->table_cap) &&
            rkv_index_reserve(r, nh) != RKV_OK)
            return -1;
        /* prefix closure (route.c relies on it): a page is stored only
         * under a parent the instance holds, or at the namespace root */
        if (nh > 0 && e->parent_hash != RKV_HASH_ROOT && !parent_held &&
            !rkv_index_slot_holds(r, g, bit, rkv_index_nsmix(e->ns),
                                  e->parent_hash))
            return 1;
        rc = rkv_index_store(r, g, bit, nh, e->medium, p, o, &j);
        in->blocks[e->medium] += j;
        return rc;
    }
    case RKV_EVENT_BLOCK_REMOVED:
        for (; j < nh; j++) {
            rkv_index_stream_step(r, p);
            uint32_t q = (uint32_t)(o + j) & (RKV_INDEX_RING - 1);
            uint64_t key = p->key[q];
            uint32_t i = rkv_index_seek(r, key, rkv_index_home(r, key));
            /* a free slot (mask 0): not found */
            uint64_t m = r->entries[i].mask;
            if (!(m & bit)) {
                rc = 1;
                break;
            }
            m &= ~bit;
            if (m != 0)
                r->entries[i].mask = m;
            else
                rkv_index_remove(r, i);
        }
        in->blocks[e->medium] -= j;
        return rc;
    case RKV_EVENT_ALL_CLEARED:
        rkv_index_clear_slot(r, s);
        return 0;
    default:
        return 1;
    }
}

rkv_status rkv_router_apply(rkv_router *router, uint64_t instance,
                            const rkv_event *events, uint32_t n)
{
    static const char fn[] = "rkv_router_apply";
    uint32_t s;
    rkv_status st = rkv_index_lookup(router, instance, events, n, "events", fn, &s);
    if (st != RKV_OK)
        return st;
    rkv_router *r = router;
    rkv_index_slot *in = &r->inst[s];
    uint64_t refused = 0; /* seq of the event the budget refused */
    rkv_index_stream p;
    p.ev = events;
    p.n = n;
    p.g = s / 64;
    rkv_index_stream_at(&p, 0, 0);
    uint64_t o = 0;     /* ordinal of events[k]'s first hash */
    int stored = 0;     /* events[k - 1] was a store applied in full */
    for (uint32_t k = 0; k < n; o += rkv_index_len(&events[k]), k++) {
        const rkv_event *e = &events[k];
        /* the producer fell behind where an event failed partway */
        if (p.o < o)
            rkv_index_stream_at(&p, k, o);
        while (p.o < o + RKV_INDEX_AHEAD && p.k < n)
            rkv_index_stream_step(r, &p);
        /* the previous event stored this one's parent (the usual chain
         * of a long prompt's stores): no lookup needed */
        int parent_held = stored && e->parent_hash == events[k - 1].hashes[
                              events[k - 1].num_hashes - 1] &&
                          e->ns == events[k - 1].ns;
        stored = 0;
        if (e->seq <= in->last_seq) {
            r->st.events_stale++;
            continue;
        }
        if (in->needs_resync) {
            r->st.events_skipped++;
            continue;
        }
        if (e->seq != in->last_seq + 1) {
            r->st.gaps++;
            r->st.events_skipped++;
            rkv_index_need_resync(r, s);
            continue;
        }
        if (e->kind == RKV_EVENT_RESYNC) {
            r->st.resync_markers++;
            in->last_seq = e->seq;
            rkv_index_need_resync(r, s);
            continue;
        }
        int rc = rkv_index_apply_one(r, s, e, &p, o, parent_held);
        if (rc == -2) {
            /* a bound, not an error of the stream: the instance holds
             * nothing until a snapshot fits, the rest is skipped */
            r->st.events_over_budget++;
            rkv_index_need_resync(r, s);
            refused = e->seq;
            continue;
        }
        if (rc < 0) {
            rkv_index_need_resync(r, s);
            return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory applying "
                                 "event %llu of instance %llu (it needs a "
                                 "resync)", fn, (unsigned long long)e->seq,
                                 (unsigned long long)instance);
        }
        if (rc > 0) {
            r->st.events_bad++;
            rkv_index_need_resync(r, s);
            continue;
        }
        in->last_seq = e->seq;
        r->st.events_applied++;
        stored = e->kind == RKV_EVENT_BLOCK_STORED && e->num_hashes > 0;
    }
    if (refused)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: event %llu of instance %llu "
                             "refused: the index holds its budget of %u entries "
                             "(the instance needs a resync)", fn,
                             (unsigned long long)refused,
                             (unsigned long long)instance, r->limit);
    return RKV_OK;
}

rkv_status rkv_router_heartbeat(rkv_router *router, uint64_t instance,
                                uint64_t last_seq)
{
    static const char fn[] = "rkv_router_heartbeat";
    uint32_t s;
    rkv_status st = rkv_index_lookup(router, instance, NULL, 0, NULL, fn, &s);
    if (st != RKV_OK)
        return st;
    rkv_index_slot *in = &router->inst[s];
    if (last_seq < in->last_seq) {
        router->st.events_stale++;
    } else if (last_seq > in->last_seq && !in->needs_resync) {
        router->st.gaps++;
        rkv_index_need_resync(router, s);
    }
    return RKV_OK;
}

/* ---- queries of state ---------------------------------------------------------- */

/* medium RKV_MEDIUM_COUNT: any medium */
static int rkv_index_holds(const rkv_router *router, uint64_t instance,
                        rkv_namespace ns, uint64_t hash, uint32_t medium)
{
    if (router == NULL || medium > RKV_MEDIUM_COUNT)
        return 0;
    uint32_t s = rkv_index_slot_of(router, instance);
    if (s == RKV_INDEX_EMPTY)
        return 0;
    uint32_t g = s / 64;
    uint64_t key = rkv_index_key(hash, rkv_index_nsmix(ns), g, RKV_MEDIUM_DEVICE);
    uint64_t m = medium == RKV_MEDIUM_COUNT
                     ? rkv_index_mask_any(router, g, key)
                     : rkv_index_mask(router, rkv_index_on(key, medium));
    return (int)((m >> (s % 64)) & 1);
}

int rkv_router_holds(const rkv_router *router, uint64_t instance,
                     rkv_namespace ns, uint64_t hash)
{
    return rkv_index_holds(router, instance, ns, hash, RKV_MEDIUM_COUNT);
}

int rkv_router_holds_medium(const rkv_router *router, uint64_t instance,
                            rkv_namespace ns, uint64_t hash, uint32_t medium)
{
    return medium < RKV_MEDIUM_COUNT
               ? rkv_index_holds(router, instance, ns, hash, medium) : 0;
}

rkv_status rkv_router_instance_info_get(const rkv_router *router,
                                        uint64_t instance,
                                        rkv_router_instance_info *out)
{
    static const char fn[] = "rkv_router_instance_info_get";
    if (router == NULL || out == NULL)
        return rkv_null_arg(fn, router, "router", "out");
    uint32_t s = rkv_index_slot_of(router, instance);
    if (s == RKV_INDEX_EMPTY)
        return rkv_set_error(RKV_ERR_NOT_FOUND, "%s: instance %llu is not "
                             "registered", fn, (unsigned long long)instance);
    const rkv_index_slot *in = &router->inst[s];
    out->last_seq = in->last_seq;
    out->blocks = in->blocks[0] + in->blocks[1] + in->blocks[2];
    out->needs_resync = in->needs_resync;
    out->running = in->running;
    out->queued_tokens = in->queued_tokens;
    out->routed_running = in->routed_running;
    out->routed_tokens = in->routed_tokens;
    return RKV_OK;
}

rkv_status rkv_router_get_stats(const rkv_router *router, rkv_router_stats *out)
{
    if (router == NULL || out == NULL)
        return rkv_null_arg("rkv_router_get_stats", router, "router", "out");
    *out = router->st;
    out->instances = router->num_instances;
    out->entries = router->count;
    out->entries_limit = router->limit;
    out->host_bytes = sizeof *router +
                      (uint64_t)router->table_cap * sizeof *router->entries +
                      (uint64_t)router->qhash_cap * sizeof *router->qhash +
                      2ull * RKV_INDEX_SPANS * sizeof *router->spans;
    return RKV_OK;
}

/* ---- check ----------------------------------------------------------------------- */

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_router_check: " __VA_ARGS__)

rkv_status rkv_router_check(const rkv_router *router)
{
    if (router == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_router_check: NULL router");
    const rkv_router *r = router;
    int pow2 = (r->table_cap & (r->table_cap - 1)) == 0;
    if (r->table_cap < 64 || r->table_cap % 4 != 0 ||
        r->shift != (pow2 ? 64 - (uint32_t)__builtin_ctz(r->table_cap) : 0) ||
        r->count > rkv_index_load_max(r->table_cap))
        return CORRUPT("table cap %u shift %u count %u", r->table_cap,
                       r->shift, r->count);
    if (r->count > r->limit)
        return CORRUPT("%u entries over the budget of %u", r->count, r->limit);
    uint64_t used[RKV_INDEX_GROUPS] = {0}, live[RKV_INDEX_GROUPS] = {0};
    uint64_t inst[RKV_INDEX_GROUPS] = {0};
    uint32_t n_inst = 0;
    for (uint32_t s = 0; s < RKV_INDEX_SLOTS; s++) {
        const rkv_index_slot *in = &r->inst[s];
        uint64_t bit = 1ull << (s % 64);
        if (in->role == RKV_INDEX_FREE)
            continue;
        used[s / 64] |= bit;
        if (in->role == RKV_INDEX_INSTANCE) {
            n_inst++;
            double base = rkv_index_base(&r->cfg, in);
            if (memcmp(&base, &r->base[s], sizeof base) != 0)
                return CORRUPT("slot %u: load term stale", s);
            inst[s / 64] |= bit;
            if (!in->needs_resync)
                live[s / 64] |= bit;
            if (in->staging != RKV_INDEX_EMPTY &&
                (in->staging >= RKV_INDEX_SLOTS ||
                 r->inst[in->staging].role != RKV_INDEX_STAGING ||
                 r->inst[in->staging].staging != s))
                return CORRUPT("slot %u: staging slot %u not its own", s,
                               in->staging);
        } else if (in->role == RKV_INDEX_STAGING) {
            if (in->staging >= RKV_INDEX_SLOTS ||
                r->inst[in->staging].role != RKV_INDEX_INSTANCE ||
                r->inst[in->staging].staging != s)
                return CORRUPT("staging slot %u: owner %u does not own it", s,
                               in->staging);
        } else {
            return CORRUPT("slot %u: role %u", s, in->role);
        }
    }
    if (n_inst != r->num_instances)
        return CORRUPT("%u instances, %u slots hold one", r->num_instances,
                       n_inst);
    for (uint32_t k = 0; k < r->num_instances; k++) {
        if (r->inst[r->order[k]].role != RKV_INDEX_INSTANCE ||
            (k > 0 && r->inst[r->order[k - 1]].id >= r->inst[r->order[k]].id))
            return CORRUPT("instance order broken at %u", k);
    }
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        if (inst[g] != r->inst_mask[g])
            return CORRUPT("group %u instance mask %llx, expected %llx", g,
                           (unsigned long long)r->inst_mask[g],
                           (unsigned long long)inst[g]);
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        if (live[g] != r->live[g])
            return CORRUPT("group %u live mask %llx, expected %llx", g,
                           (unsigned long long)r->live[g],
                           (unsigned long long)live[g]);
    uint64_t held[RKV_INDEX_SLOTS][RKV_MEDIUM_COUNT];
    memset(held, 0, sizeof held);
    uint32_t in_table = 0, offdev[RKV_INDEX_GROUPS] = {0};
    for (uint32_t i = 0; i < r->table_cap; i++) {
        const rkv_index_entry *e = &r->entries[i];
        if (e->mask == 0)
            continue;
        in_table++;
        uint32_t g = rkv_index_group(e), m = rkv_index_medium(e);
        if (g >= RKV_INDEX_GROUPS || m >= RKV_MEDIUM_COUNT)
            return CORRUPT("slot %u: group %u medium %u", i, g, m);
        offdev[g] += m != RKV_MEDIUM_DEVICE;
        /* every slot from its home to i is in use (a probe reaches it) */
        for (uint32_t j = rkv_index_home(r, e->key); j != i;
             j = rkv_index_succ(r, j))
            if (r->entries[j].mask == 0)
                return CORRUPT("slot %u unreachable from its home", i);
        if (rkv_index_find(r, e->key) != i)
            return CORRUPT("slot %u: its key is found elsewhere (twice)", i);
        /* staging slots hold bits too; resyncing and free ones none */
        uint64_t may = live[g];
        for (uint64_t b = used[g] & ~live[g]; b; b &= b - 1) {
            uint32_t s = g * 64 + (uint32_t)__builtin_ctzll(b);
            if (r->inst[s].role == RKV_INDEX_STAGING)
                may |= b & -b;
        }
        if (e->mask & ~may)
            return CORRUPT("slot %u held by a free or resyncing instance", i);
        for (uint64_t b = e->mask; b; b &= b - 1)
            held[g * 64 + (uint32_t)__builtin_ctzll(b)][m]++;
    }
    if (in_table != r->count)
        return CORRUPT("%u entries in the table, count %u", in_table, r->count);
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        if (offdev[g] != r->offdev[g])
            return CORRUPT("group %u: %u host/disk entries, counted %u", g,
                           offdev[g], r->offdev[g]);
    for (uint32_t s = 0; s < RKV_INDEX_SLOTS; s++)
        for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
            if ((r->inst[s].role != RKV_INDEX_FREE ? r->inst[s].blocks[m] : 0) !=
                held[s][m])
                return CORRUPT("slot %u medium %d counts %llu blocks, holds %llu",
                               s, m, (unsigned long long)r->inst[s].blocks[m],
                               (unsigned long long)held[s][m]);
    return RKV_OK;
}

/*
 * router/router.c -- the fleet router's instances and state changes: create
 * and destroy, instances, event batches with sequence checks, snapshots,
 * load reports, stats and rkv_router_check. Data structures and invariants:
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

static int rkv_rt_finite_nonneg(double x)
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
    int ok = rkv_rt_finite_nonneg(cfg->page_tokens) &&
             rkv_rt_finite_nonneg(cfg->queue_weight) &&
             rkv_rt_finite_nonneg(cfg->running_weight);
    for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
        ok = ok && rkv_rt_finite_nonneg(cfg->medium_weight[m]);
    if (!ok)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: weights must be finite "
                             "and >= 0", fn);
    if (cfg->initial_blocks > (1u << 29))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: initial_blocks %u too "
                             "large", fn, cfg->initial_blocks);
    rkv_router *r = calloc(1, sizeof *r);
    if (r == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: router struct", fn);
    r->cfg = *cfg;
    rkv_status st = rkv_rt_index_init(r, cfg->initial_blocks);
    if (st != RKV_OK) {
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
    rkv_rt_index_fini(router);
    free(router);
}

/* ---- instances ------------------------------------------------------------- */

uint32_t rkv_rt_slot_of(const rkv_router *r, uint64_t id)
{
    for (uint32_t k = 0; k < r->num_instances; k++)
        if (r->inst[r->order[k]].id == id)
            return r->order[k];
    return RKV_RT_EMPTY;
}

static uint32_t rkv_rt_lookup(rkv_router *r, uint64_t id, const char *fn,
                              rkv_status *st)
{
    uint32_t s = rkv_rt_slot_of(r, id);
    if (s == RKV_RT_EMPTY) {
        r->st.unknown_instance++;
        *st = rkv_set_error(RKV_ERR_NOT_FOUND, "%s: instance %llu is not "
                            "registered", fn, (unsigned long long)id);
    }
    return s;
}

/* Removes slot s's bit from every entry (entries left empty go). Cannot
 * fail. O(entries). */
static void rkv_rt_clear_slot(rkv_router *r, uint32_t s)
{
    uint64_t bit = 1ull << s;
    rkv_rt_instance *in = &r->inst[s];
    if (in->blocks[0] + in->blocks[1] + in->blocks[2] != 0) {
        /* A deletion at i may pull a later entry of the cluster into i
         * (look at i again) or a wrapped one from the table's start (seen
         * already: its bit is clear, looking again is harmless). */
        for (uint32_t i = 0; i < r->table_cap;) {
            rkv_rt_entry *e = &r->entries[i];
            if (rkv_rt_any(e) & bit) {
                for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
                    e->mask[m] &= ~bit;
                if (rkv_rt_any(e) == 0) {
                    rkv_rt_remove(r, i);
                    continue;
                }
            }
            i++;
        }
    }
    memset(in->blocks, 0, sizeof in->blocks);
}

static void rkv_rt_need_resync(rkv_router *r, uint32_t s)
{
    rkv_rt_clear_slot(r, s);
    r->inst[s].needs_resync = 1;
    r->live_mask &= ~(1ull << s);
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
    if (rkv_rt_slot_of(r, instance) != RKV_RT_EMPTY)
        return rkv_set_error(RKV_ERR_DUPLICATE, "%s: instance %llu is already "
                             "registered", fn, (unsigned long long)instance);
    if (r->num_instances == RKV_ROUTER_MAX_INSTANCES)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u instances already",
                             fn, RKV_ROUTER_MAX_INSTANCES);
    uint32_t s = 0;
    while (r->inst[s].used)
        s++;
    rkv_rt_instance *in = &r->inst[s];
    memset(in, 0, sizeof *in);
    in->id = instance;
    in->used = 1;
    /* keep order[] sorted by id */
    uint32_t k = r->num_instances;
    while (k > 0 && r->inst[r->order[k - 1]].id > instance) {
        r->order[k] = r->order[k - 1];
        k--;
    }
    r->order[k] = s;
    r->num_instances++;
    r->live_mask |= 1ull << s;
    return RKV_OK;
}

rkv_status rkv_router_remove_instance(rkv_router *router, uint64_t instance)
{
    static const char fn[] = "rkv_router_remove_instance";
    if (router == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL router", fn);
    rkv_status st = RKV_OK;
    uint32_t s = rkv_rt_lookup(router, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    rkv_rt_clear_slot(router, s);
    router->inst[s].used = 0;
    router->live_mask &= ~(1ull << s);
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
    if (router == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL router", fn);
    rkv_status st = RKV_OK;
    uint32_t s = rkv_rt_lookup(router, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    router->inst[s].running = running;
    router->inst[s].queued_tokens = queued_tokens;
    return RKV_OK;
}

/* ---- events ------------------------------------------------------------------ */

/* Applies one in-sequence event for slot s. 0: done; 1: the event
 * contradicts the index (the caller resyncs); -1: out of memory. */
static int rkv_rt_apply_one(rkv_router *r, uint32_t s, const rkv_event *e)
{
    uint64_t bit = 1ull << s;
    rkv_rt_instance *in = &r->inst[s];
    if (e->medium >= RKV_MEDIUM_COUNT || e->num_hashes > RKV_EVENT_MAX_HASHES)
        return 1;
    /* the event's hashes are random lookups: start their misses at once */
    for (uint32_t j = 0; j < e->num_hashes; j++)
        __builtin_prefetch(&r->entries[rkv_rt_home(r, e->hashes[j])]);
    switch (e->kind) {
    case RKV_EVENT_BLOCK_STORED: {
        if (rkv_rt_reserve(r, e->num_hashes) != RKV_OK)
            return -1;
        uint64_t parent = e->parent_hash;
        for (uint32_t j = 0; j < e->num_hashes; j++) {
            uint64_t h = e->hashes[j];
            uint32_t i = rkv_rt_find(r, h);
            if (i == RKV_RT_EMPTY)
                i = rkv_rt_add(r, h, e->ns, parent);
            rkv_rt_entry *x = &r->entries[i];
            if ((x->mask[e->medium] & bit) || x->ns != e->ns ||
                x->parent != parent) {
                if (rkv_rt_any(x) == 0)
                    rkv_rt_remove(r, i);
                return 1;
            }
            x->mask[e->medium] |= bit;
            in->blocks[e->medium]++;
            parent = h;
        }
        return 0;
    }
    case RKV_EVENT_BLOCK_REMOVED:
        for (uint32_t j = 0; j < e->num_hashes; j++) {
            uint32_t i = rkv_rt_find(r, e->hashes[j]);
            if (i == RKV_RT_EMPTY || !(r->entries[i].mask[e->medium] & bit) ||
                r->entries[i].ns != e->ns)
                return 1;
            r->entries[i].mask[e->medium] &= ~bit;
            in->blocks[e->medium]--;
            if (rkv_rt_any(&r->entries[i]) == 0)
                rkv_rt_remove(r, i);
        }
        return 0;
    case RKV_EVENT_ALL_CLEARED:
        rkv_rt_clear_slot(r, s);
        return 0;
    default:
        return 1;
    }
}

rkv_status rkv_router_apply(rkv_router *router, uint64_t instance,
                            const rkv_event *events, uint32_t n)
{
    static const char fn[] = "rkv_router_apply";
    if (router == NULL || (events == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             router == NULL ? "router" : "events");
    rkv_router *r = router;
    rkv_status st = RKV_OK;
    uint32_t s = rkv_rt_lookup(r, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    rkv_rt_instance *in = &r->inst[s];
    for (uint32_t k = 0; k < n; k++) {
        const rkv_event *e = &events[k];
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
            rkv_rt_need_resync(r, s);
            continue;
        }
        if (e->kind == RKV_EVENT_RESYNC) {
            r->st.resync_markers++;
            in->last_seq = e->seq;
            rkv_rt_need_resync(r, s);
            continue;
        }
        int rc = rkv_rt_apply_one(r, s, e);
        if (rc < 0) {
            rkv_rt_need_resync(r, s);
            return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory applying "
                                 "event %llu of instance %llu (it needs a "
                                 "resync)", fn, (unsigned long long)e->seq,
                                 (unsigned long long)instance);
        }
        if (rc > 0) {
            r->st.events_bad++;
            rkv_rt_need_resync(r, s);
            continue;
        }
        in->last_seq = e->seq;
        r->st.events_applied++;
    }
    return RKV_OK;
}

rkv_status rkv_router_heartbeat(rkv_router *router, uint64_t instance,
                                uint64_t last_seq)
{
    static const char fn[] = "rkv_router_heartbeat";
    if (router == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL router", fn);
    rkv_status st = RKV_OK;
    uint32_t s = rkv_rt_lookup(router, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    rkv_rt_instance *in = &router->inst[s];
    if (last_seq < in->last_seq) {
        router->st.events_stale++;
    } else if (last_seq > in->last_seq && !in->needs_resync) {
        router->st.gaps++;
        rkv_rt_need_resync(router, s);
    }
    return RKV_OK;
}

rkv_status rkv_router_apply_snapshot(rkv_router *router, uint64_t instance,
                                     const rkv_block_entry *blocks, size_t n,
                                     uint64_t seq)
{
    static const char fn[] = "rkv_router_apply_snapshot";
    if (router == NULL || (blocks == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             router == NULL ? "router" : "blocks");
    rkv_router *r = router;
    rkv_status st = RKV_OK;
    uint32_t s = rkv_rt_lookup(r, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    if (n > (1u << 30))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: %zu blocks", fn, n);
    for (size_t i = 0; i < n; i++)
        if (blocks[i].medium >= RKV_MEDIUM_COUNT)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %zu has "
                                 "medium %u", fn, i, blocks[i].medium);
    /* reserve before clearing: a failed reserve leaves everything as it was */
    if ((st = rkv_rt_reserve(r, (uint32_t)n)) != RKV_OK)
        return st;
    rkv_rt_clear_slot(r, s);
    uint64_t bit = 1ull << s;
    rkv_rt_instance *in = &r->inst[s];
    for (size_t k = 0; k < n; k++) {
        const rkv_block_entry *b = &blocks[k];
        uint32_t i = rkv_rt_find(r, b->hash);
        if (i == RKV_RT_EMPTY)
            i = rkv_rt_add(r, b->hash, b->ns, b->parent_hash);
        rkv_rt_entry *x = &r->entries[i];
        if ((x->mask[b->medium] & bit) || x->ns != b->ns) {
            if (rkv_rt_any(x) == 0)
                rkv_rt_remove(r, i);
            rkv_rt_need_resync(r, s);
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %zu (hash "
                                 "%016llx) listed twice or in two namespaces",
                                 fn, k, (unsigned long long)b->hash);
        }
        x->mask[b->medium] |= bit;
        in->blocks[b->medium]++;
    }
    in->needs_resync = 0;
    in->last_seq = seq;
    r->live_mask |= bit;
    r->st.snapshots++;
    return RKV_OK;
}

/* ---- queries of state ---------------------------------------------------------- */

int rkv_router_holds(const rkv_router *router, uint64_t instance,
                     uint64_t hash)
{
    if (router == NULL)
        return 0;
    uint32_t s = rkv_rt_slot_of(router, instance);
    if (s == RKV_RT_EMPTY)
        return 0;
    uint32_t i = rkv_rt_find(router, hash);
    return i != RKV_RT_EMPTY && ((rkv_rt_any(&router->entries[i]) >> s) & 1);
}

rkv_status rkv_router_instance_info_get(const rkv_router *router,
                                        uint64_t instance,
                                        rkv_router_instance_info *out)
{
    static const char fn[] = "rkv_router_instance_info_get";
    if (router == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             router == NULL ? "router" : "out");
    uint32_t s = rkv_rt_slot_of(router, instance);
    if (s == RKV_RT_EMPTY)
        return rkv_set_error(RKV_ERR_NOT_FOUND, "%s: instance %llu is not "
                             "registered", fn, (unsigned long long)instance);
    const rkv_rt_instance *in = &router->inst[s];
    out->last_seq = in->last_seq;
    out->blocks = in->blocks[0] + in->blocks[1] + in->blocks[2];
    out->needs_resync = in->needs_resync;
    out->running = in->running;
    out->queued_tokens = in->queued_tokens;
    return RKV_OK;
}

rkv_status rkv_router_get_stats(const rkv_router *router, rkv_router_stats *out)
{
    if (router == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_router_get_stats: NULL %s",
                             router == NULL ? "router" : "out");
    *out = router->st;
    out->instances = router->num_instances;
    out->entries = router->count;
    out->host_bytes = sizeof *router +
                      (uint64_t)router->table_cap * sizeof *router->entries;
    return RKV_OK;
}

/* ---- check ----------------------------------------------------------------------- */

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_router_check: " __VA_ARGS__)

rkv_status rkv_router_check(const rkv_router *router)
{
    if (router == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_router_check: NULL router");
    const rkv_router *r = router;
    if (r->table_cap == 0 || (r->table_cap & (r->table_cap - 1)) != 0 ||
        r->shift != 64 - (uint32_t)__builtin_ctz(r->table_cap) ||
        (uint64_t)r->count * 2 > r->table_cap)
        return CORRUPT("table cap %u shift %u count %u", r->table_cap,
                       r->shift, r->count);
    uint64_t used = 0, live = 0;
    for (uint32_t s = 0; s < RKV_ROUTER_MAX_INSTANCES; s++) {
        if (!r->inst[s].used)
            continue;
        used |= 1ull << s;
        if (!r->inst[s].needs_resync)
            live |= 1ull << s;
    }
    if ((uint32_t)__builtin_popcountll(used) != r->num_instances)
        return CORRUPT("%u instances, %d slots used", r->num_instances,
                       __builtin_popcountll(used));
    for (uint32_t k = 0; k < r->num_instances; k++) {
        if (!r->inst[r->order[k]].used ||
            (k > 0 && r->inst[r->order[k - 1]].id >= r->inst[r->order[k]].id))
            return CORRUPT("instance order broken at %u", k);
    }
    if (live != r->live_mask)
        return CORRUPT("live mask %llx, expected %llx",
                       (unsigned long long)r->live_mask, (unsigned long long)live);
    uint64_t held[RKV_ROUTER_MAX_INSTANCES][RKV_MEDIUM_COUNT];
    memset(held, 0, sizeof held);
    uint32_t in_table = 0;
    for (uint32_t i = 0; i < r->table_cap; i++) {
        const rkv_rt_entry *e = &r->entries[i];
        if (rkv_rt_any(e) == 0)
            continue;
        in_table++;
        /* every slot from its home to i is in use (a probe reaches it) */
        for (uint32_t j = rkv_rt_home(r, e->hash); j != i;
             j = (j + 1) & (r->table_cap - 1))
            if (rkv_rt_any(&r->entries[j]) == 0)
                return CORRUPT("slot %u unreachable from its home", i);
        if (rkv_rt_find(r, e->hash) != i)
            return CORRUPT("slot %u: its hash is found elsewhere (twice)", i);
        if (rkv_rt_any(e) & ~live)
            return CORRUPT("slot %u held by a free or resyncing instance", i);
        for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
            for (uint64_t b = e->mask[m]; b; b &= b - 1)
                held[__builtin_ctzll(b)][m]++;
    }
    if (in_table != r->count)
        return CORRUPT("%u entries in the table, count %u", in_table, r->count);
    for (uint32_t s = 0; s < RKV_ROUTER_MAX_INSTANCES; s++)
        for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
            if ((r->inst[s].used ? r->inst[s].blocks[m] : 0) != held[s][m])
                return CORRUPT("slot %u medium %d counts %llu blocks, holds %llu",
                               s, m, (unsigned long long)r->inst[s].blocks[m],
                               (unsigned long long)held[s][m]);
    return RKV_OK;
}

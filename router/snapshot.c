/*
 * router/snapshot.c -- an instance's full state replacing its entries:
 * rkv_router_apply_snapshot (one array) and the chunked
 * rkv_router_snapshot_begin / _chunk / _end (an instance with millions of
 * blocks resyncs in bounded messages).
 *
 * Both stage the snapshot in a spare slot (router_internal.h) that no query
 * sees: begin takes a free slot, chunks set its bits, end makes it the
 * instance's slot and clears the old one, so the old entries stay routable
 * until the new ones replace them all at once. A failure (a bad entry, no
 * memory) changes nothing: a chunk that fails undoes the entries it set
 * before returning, and apply_snapshot drops its staging slot, so the
 * instance keeps what it held before the call. The memory budget
 * (rkv_rt_full) refuses a chunk the same way.
 */
#include <string.h>

#include "common/status.h"
#include "router/router_internal.h"

void rkv_rt_stage_drop(rkv_router *r, uint32_t s)
{
    rkv_rt_instance *in = &r->inst[s];
    if (in->staging == RKV_RT_EMPTY)
        return;
    uint32_t t = in->staging;
    rkv_rt_clear_slot(r, t);
    memset(&r->inst[t], 0, sizeof r->inst[t]);
    r->inst[t].role = RKV_RT_FREE;
    in->staging = RKV_RT_EMPTY;
}

/* Undoes blocks[0..k) of a chunk on staging slot t. */
static void rkv_rt_stage_undo(rkv_router *r, uint32_t t,
                              const rkv_block_entry *blocks, size_t k)
{
    uint32_t g = t / 64;
    uint64_t bit = 1ull << (t % 64);
    while (k-- > 0) {
        uint32_t i = rkv_rt_find(r, rkv_rt_key(blocks[k].hash,
                                               rkv_rt_nsmix(blocks[k].ns), g));
        /* set by this chunk, so present */
        r->entries[i].mask[blocks[k].medium] &= ~bit;
        r->inst[t].blocks[blocks[k].medium]--;
        if (rkv_rt_any(&r->entries[i]) == 0)
            rkv_rt_remove(r, i);
    }
}

/* Adds blocks[0..n) to staging slot t; all or nothing. */
static rkv_status rkv_rt_stage_add(rkv_router *r, uint32_t t,
                                   const rkv_block_entry *blocks, size_t n,
                                   const char *fn)
{
    if (n > (1u << 29))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: %zu blocks in one call",
                             fn, n);
    for (size_t k = 0; k < n; k++)
        if (blocks[k].medium >= RKV_MEDIUM_COUNT)
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %zu has "
                                 "medium %u", fn, k, blocks[k].medium);
    rkv_status st = rkv_rt_reserve(r, (uint32_t)n);
    if (st != RKV_OK)
        return st;
    uint32_t g = t / 64;
    uint64_t bit = 1ull << (t % 64);
    /* a snapshot lists a namespace's blocks together: mix it once a run */
    uint64_t ns = 0, nsmix = rkv_rt_nsmix(0);
    for (size_t k = 0; k < n; k++) {
        const rkv_block_entry *b = &blocks[k];
        if (k + 8 < n)
            __builtin_prefetch(&r->entries[rkv_rt_home(
                r, rkv_rt_key(blocks[k + 8].hash, rkv_rt_nsmix(blocks[k + 8].ns),
                              g))]);
        if (b->ns != ns) {
            ns = b->ns;
            nsmix = rkv_rt_nsmix(ns);
        }
        uint64_t key = rkv_rt_key(b->hash, nsmix, g);
        uint32_t i = rkv_rt_find(r, key);
        if (i == RKV_RT_EMPTY) {
            if (rkv_rt_full(r)) {
                rkv_rt_stage_undo(r, t, blocks, k);
                r->st.snapshots_over_budget++;
                return rkv_set_error(RKV_ERR_NO_SPACE, "%s: block %zu of %zu "
                                     "does not fit the index budget of %u "
                                     "entries", fn, k, n, r->limit);
            }
            i = rkv_rt_add(r, key);
        }
        rkv_rt_entry *x = &r->entries[i];
        if (x->mask[b->medium] & bit) {
            if (rkv_rt_any(x) == 0)
                rkv_rt_remove(r, i);
            rkv_rt_stage_undo(r, t, blocks, k);
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %zu (ns %llu "
                                 "hash %016llx) listed twice on medium %u", fn,
                                 k, (unsigned long long)b->ns,
                                 (unsigned long long)b->hash, b->medium);
        }
        x->mask[b->medium] |= bit;
        r->inst[t].blocks[b->medium]++;
    }
    return RKV_OK;
}

/* Staging slot t becomes instance slot s's state. Cannot fail. O(table).
 * In the same group (the usual case: staging prefers the owner's group)
 * the bits move from t to s in one pass and the instance keeps its slot;
 * otherwise the instance moves to slot t. */
static void rkv_rt_stage_commit(rkv_router *r, uint32_t s)
{
    uint32_t t = r->inst[s].staging;
    uint64_t seq = r->inst[s].stage_seq;
    rkv_rt_instance *old = &r->inst[s], *nw = &r->inst[t];
    if (s / 64 == t / 64) {
        uint32_t g = s / 64;
        uint64_t sb = 1ull << (s % 64), tb = 1ull << (t % 64);
        for (uint32_t i = 0; i < r->table_cap;) {
            rkv_rt_entry *e = &r->entries[i];
            if ((rkv_rt_any(e) & (sb | tb)) && rkv_rt_group(e) == g) {
                for (int m = 0; m < RKV_MEDIUM_COUNT; m++) {
                    uint64_t had = e->mask[m] & tb;
                    e->mask[m] &= ~(sb | tb);
                    if (had)
                        e->mask[m] |= sb;
                }
                if (rkv_rt_any(e) == 0) {
                    rkv_rt_remove(r, i);
                    continue; /* as in rkv_rt_clear_slot */
                }
            }
            i++;
        }
        memcpy(old->blocks, nw->blocks, sizeof old->blocks);
        memset(nw, 0, sizeof *nw);
        nw->role = RKV_RT_FREE;
        old->staging = RKV_RT_EMPTY;
        old->needs_resync = 0;
        old->last_seq = seq;
        old->stage_seq = 0;
        r->live[s / 64] |= sb;
        r->st.snapshots++;
        return;
    }
    rkv_rt_clear_slot(r, s);
    uint64_t blocks[RKV_MEDIUM_COUNT];
    memcpy(blocks, nw->blocks, sizeof blocks);
    *nw = *old;
    memcpy(nw->blocks, blocks, sizeof blocks);
    nw->staging = RKV_RT_EMPTY;
    nw->needs_resync = 0;
    nw->last_seq = seq;
    nw->stage_seq = 0;
    memset(old, 0, sizeof *old);
    old->role = RKV_RT_FREE;
    r->live[s / 64] &= ~(1ull << (s % 64));
    r->live[t / 64] |= 1ull << (t % 64);
    uint32_t k = 0;
    while (r->order[k] != s)
        k++;
    r->order[k] = t;
    r->st.snapshots++;
}

/* Slot of a registered instance with a chunked snapshot begun;
 * RKV_RT_EMPTY with an error set otherwise (chunk and end share it). */
static uint32_t lookup_staged(rkv_router *r, uint64_t instance,
                              const char *fn, rkv_status *st)
{
    uint32_t s = rkv_rt_lookup(r, instance, fn, st);
    if (s != RKV_RT_EMPTY && r->inst[s].staging == RKV_RT_EMPTY) {
        *st = rkv_set_error(RKV_ERR_STATE, "%s: instance %llu has no "
                            "snapshot begun", fn, (unsigned long long)instance);
        return RKV_RT_EMPTY;
    }
    return s;
}

rkv_status rkv_router_snapshot_begin(rkv_router *router, uint64_t instance,
                                     uint64_t seq)
{
    static const char fn[] = "rkv_router_snapshot_begin";
    rkv_status st = RKV_OK;
    uint32_t s = rkv_rt_lookup(router, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    if (router->inst[s].staging != RKV_RT_EMPTY) {
        /* a restart: the staged part goes, its slot is reused */
        rkv_rt_stage_drop(router, s);
    }
    /* the owner's group first: the commit then keeps the instance's slot */
    uint32_t t = RKV_RT_EMPTY;
    for (uint32_t k = s / 64 * 64; k < s / 64 * 64 + 64; k++)
        if (router->inst[k].role == RKV_RT_FREE) {
            t = k;
            break;
        }
    if (t == RKV_RT_EMPTY)
        t = rkv_rt_free_slot_any(router);
    if (t == RKV_RT_EMPTY)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: no free slot to stage "
                             "in (%u snapshots staged at once at most when "
                             "every instance slot is used)", fn, 64u);
    rkv_rt_instance *x = &router->inst[t];
    memset(x, 0, sizeof *x);
    x->role = RKV_RT_STAGING;
    x->staging = s;
    router->inst[s].staging = t;
    router->inst[s].stage_seq = seq;
    return RKV_OK;
}

rkv_status rkv_router_snapshot_chunk(rkv_router *router, uint64_t instance,
                                     const rkv_block_entry *blocks, size_t n)
{
    static const char fn[] = "rkv_router_snapshot_chunk";
    if (router == NULL || (blocks == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             router == NULL ? "router" : "blocks");
    rkv_status st = RKV_OK;
    uint32_t s = lookup_staged(router, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    return rkv_rt_stage_add(router, router->inst[s].staging, blocks, n, fn);
}

rkv_status rkv_router_snapshot_end(rkv_router *router, uint64_t instance)
{
    static const char fn[] = "rkv_router_snapshot_end";
    rkv_status st = RKV_OK;
    uint32_t s = lookup_staged(router, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    rkv_rt_stage_commit(router, s);
    return RKV_OK;
}

rkv_status rkv_router_snapshot_abort(rkv_router *router, uint64_t instance)
{
    static const char fn[] = "rkv_router_snapshot_abort";
    rkv_status st = RKV_OK;
    uint32_t s = rkv_rt_lookup(router, instance, fn, &st);
    if (s == RKV_RT_EMPTY)
        return st;
    rkv_rt_stage_drop(router, s);
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
    if (r->inst[s].staging != RKV_RT_EMPTY)
        return rkv_set_error(RKV_ERR_STATE, "%s: instance %llu has a chunked "
                             "snapshot begun (end or abort it first)", fn,
                             (unsigned long long)instance);
    if ((st = rkv_router_snapshot_begin(r, instance, seq)) != RKV_OK)
        return st;
    if ((st = rkv_rt_stage_add(r, r->inst[s].staging, blocks, n, fn)) != RKV_OK) {
        rkv_rt_stage_drop(r, s);
        return st;
    }
    rkv_rt_stage_commit(r, s);
    return RKV_OK;
}

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
 * (rkv_index_full) refuses a chunk the same way.
 */
#include <string.h>

#include "common/status.h"
#include "router/router_internal.h"

void rkv_index_stage_drop(rkv_router *r, uint32_t s)
{
    rkv_index_slot *in = &r->inst[s];
    if (in->staging == RKV_INDEX_EMPTY)
        return;
    uint32_t t = in->staging;
    rkv_index_clear_slot(r, t);
    memset(&r->inst[t], 0, sizeof r->inst[t]);
    r->inst[t].role = RKV_INDEX_FREE;
    in->staging = RKV_INDEX_EMPTY;
}

/* Undoes blocks[0..k) of a chunk on staging slot t. */
static void rkv_index_stage_undo(rkv_router *r, uint32_t t,
                              const rkv_block_entry *blocks, size_t k)
{
    uint32_t g = t / 64;
    uint64_t bit = 1ull << (t % 64);
    while (k-- > 0) {
        uint32_t i = rkv_index_find(r, rkv_index_key(blocks[k].hash,
                                               rkv_index_nsmix(blocks[k].ns), g,
                                               blocks[k].medium));
        /* set by this chunk, so present */
        r->entries[i].mask &= ~bit;
        r->inst[t].blocks[blocks[k].medium]--;
        if (r->entries[i].mask == 0)
            rkv_index_remove(r, i);
    }
}

/* Adds blocks[0..n) to staging slot t; all or nothing. */
static rkv_status rkv_index_stage_add(rkv_router *r, uint32_t t,
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
    rkv_status st = rkv_index_reserve(r, (uint32_t)n);
    if (st != RKV_OK)
        return st;
    uint32_t g = t / 64;
    uint64_t bit = 1ull << (t % 64);
    /* a snapshot lists a namespace's blocks together: mix it once a run */
    uint64_t ns = 0, nsmix = rkv_index_nsmix(0);
    for (size_t k = 0; k < n; k++) {
        const rkv_block_entry *b = &blocks[k];
        if (k + 8 < n)
            __builtin_prefetch(&r->entries[rkv_index_home(
                r, rkv_index_key(blocks[k + 8].hash, rkv_index_nsmix(blocks[k + 8].ns),
                              g, blocks[k + 8].medium))]);
        if (b->ns != ns) {
            ns = b->ns;
            nsmix = rkv_index_nsmix(ns);
        }
        uint64_t key = rkv_index_key(b->hash, nsmix, g, b->medium);
        uint32_t i = rkv_index_find(r, key);
        if (i == RKV_INDEX_EMPTY) {
            if (rkv_index_full(r)) {
                rkv_index_stage_undo(r, t, blocks, k);
                r->st.snapshots_over_budget++;
                return rkv_set_error(RKV_ERR_NO_SPACE, "%s: block %zu of %zu "
                                     "does not fit the index budget of %u "
                                     "entries", fn, k, n, r->limit);
            }
            i = rkv_index_add(r, key);
        }
        rkv_index_entry *x = &r->entries[i];
        if (x->mask & bit) {
            if (x->mask == 0)
                rkv_index_remove(r, i);
            rkv_index_stage_undo(r, t, blocks, k);
            return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: block %zu (ns %llu "
                                 "hash %016llx) listed twice on medium %u", fn,
                                 k, (unsigned long long)b->ns,
                                 (unsigned long long)b->hash, b->medium);
        }
        x->mask |= bit;
        r->inst[t].blocks[b->medium]++;
    }
    return RKV_OK;
}

/* Staging slot t becomes instance slot s's state. Cannot fail. O(table).
 * In the same group (the usual case: staging prefers the owner's group)
 * the bits move from t to s in one pass and the instance keeps its slot;
 * otherwise the instance moves to slot t. */
static void rkv_index_stage_commit(rkv_router *r, uint32_t s)
{
    uint32_t t = r->inst[s].staging;
    uint64_t seq = r->inst[s].stage_seq;
    rkv_index_slot *old = &r->inst[s], *nw = &r->inst[t];
    if (s / 64 == t / 64) {
        uint32_t g = s / 64;
        uint64_t sb = 1ull << (s % 64), tb = 1ull << (t % 64);
        for (uint32_t i = 0; i < r->table_cap;) {
            rkv_index_entry *e = &r->entries[i];
            if ((e->mask & (sb | tb)) && rkv_index_group(e) == g) {
                uint64_t had = e->mask & tb;
                e->mask &= ~(sb | tb);
                if (had)
                    e->mask |= sb;
                if (e->mask == 0) {
                    rkv_index_remove(r, i);
                    continue; /* as in rkv_index_clear_slot */
                }
            }
            i++;
        }
        memcpy(old->blocks, nw->blocks, sizeof old->blocks);
        memset(nw, 0, sizeof *nw);
        nw->role = RKV_INDEX_FREE;
        old->staging = RKV_INDEX_EMPTY;
        old->needs_resync = 0;
        old->last_seq = seq;
        old->stage_seq = 0;
        r->live[s / 64] |= sb;
        r->st.snapshots++;
        return;
    }
    rkv_index_clear_slot(r, s);
    uint64_t blocks[RKV_MEDIUM_COUNT];
    memcpy(blocks, nw->blocks, sizeof blocks);
    *nw = *old;
    memcpy(nw->blocks, blocks, sizeof blocks);
    nw->staging = RKV_INDEX_EMPTY;
    nw->needs_resync = 0;
    nw->last_seq = seq;
    nw->stage_seq = 0;
    memset(old, 0, sizeof *old);
    old->role = RKV_INDEX_FREE;
    r->live[s / 64] &= ~(1ull << (s % 64));
    r->live[t / 64] |= 1ull << (t % 64);
    r->inst_mask[s / 64] &= ~(1ull << (s % 64));
    r->inst_mask[t / 64] |= 1ull << (t % 64);
    r->base[t] = r->base[s];
    uint32_t k = 0;
    while (r->order[k] != s)
        k++;
    r->order[k] = t;
    r->st.snapshots++;
}

/* rkv_index_lookup of an instance with a chunked snapshot begun (chunk and
 * end share it): STATE for one without. */
static rkv_status lookup_staged(rkv_router *r, uint64_t instance, const void *items,
                                size_t n, const char *fn, uint32_t *slot)
{
    rkv_status st = rkv_index_lookup(r, instance, items, n, "blocks", fn, slot);
    if (st == RKV_OK && r->inst[*slot].staging == RKV_INDEX_EMPTY)
        return rkv_set_error(RKV_ERR_STATE, "%s: instance %llu has no "
                             "snapshot begun", fn, (unsigned long long)instance);
    return st;
}

rkv_status rkv_router_snapshot_begin(rkv_router *router, uint64_t instance,
                                     uint64_t seq)
{
    static const char fn[] = "rkv_router_snapshot_begin";
    uint32_t s;
    rkv_status st = rkv_index_lookup(router, instance, NULL, 0, NULL, fn, &s);
    if (st != RKV_OK)
        return st;
    if (router->inst[s].staging != RKV_INDEX_EMPTY) {
        /* a restart: the staged part goes, its slot is reused */
        rkv_index_stage_drop(router, s);
    }
    /* the owner's group first: the commit then keeps the instance's slot */
    uint32_t t = RKV_INDEX_EMPTY;
    for (uint32_t k = s / 64 * 64; k < s / 64 * 64 + 64; k++)
        if (router->inst[k].role == RKV_INDEX_FREE) {
            t = k;
            break;
        }
    if (t == RKV_INDEX_EMPTY)
        t = rkv_index_free_slot_any(router);
    if (t == RKV_INDEX_EMPTY)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: no free slot to stage "
                             "in (%u snapshots staged at once at most when "
                             "every instance slot is used)", fn, 64u);
    rkv_index_slot *x = &router->inst[t];
    memset(x, 0, sizeof *x);
    x->role = RKV_INDEX_STAGING;
    x->staging = s;
    router->inst[s].staging = t;
    router->inst[s].stage_seq = seq;
    return RKV_OK;
}

rkv_status rkv_router_snapshot_chunk(rkv_router *router, uint64_t instance,
                                     const rkv_block_entry *blocks, size_t n)
{
    static const char fn[] = "rkv_router_snapshot_chunk";
    uint32_t s;
    rkv_status st = lookup_staged(router, instance, blocks, n, fn, &s);
    if (st != RKV_OK)
        return st;
    return rkv_index_stage_add(router, router->inst[s].staging, blocks, n, fn);
}

rkv_status rkv_router_snapshot_end(rkv_router *router, uint64_t instance)
{
    static const char fn[] = "rkv_router_snapshot_end";
    uint32_t s;
    rkv_status st = lookup_staged(router, instance, NULL, 0, fn, &s);
    if (st != RKV_OK)
        return st;
    rkv_index_stage_commit(router, s);
    return RKV_OK;
}

rkv_status rkv_router_snapshot_abort(rkv_router *router, uint64_t instance)
{
    static const char fn[] = "rkv_router_snapshot_abort";
    uint32_t s;
    rkv_status st = rkv_index_lookup(router, instance, NULL, 0, NULL, fn, &s);
    if (st != RKV_OK)
        return st;
    rkv_index_stage_drop(router, s);
    return RKV_OK;
}

rkv_status rkv_router_apply_snapshot(rkv_router *router, uint64_t instance,
                                     const rkv_block_entry *blocks, size_t n,
                                     uint64_t seq)
{
    static const char fn[] = "rkv_router_apply_snapshot";
    uint32_t s;
    rkv_status st = rkv_index_lookup(router, instance, blocks, n, "blocks", fn, &s);
    if (st != RKV_OK)
        return st;
    rkv_router *r = router;
    if (r->inst[s].staging != RKV_INDEX_EMPTY)
        return rkv_set_error(RKV_ERR_STATE, "%s: instance %llu has a chunked "
                             "snapshot begun (end or abort it first)", fn,
                             (unsigned long long)instance);
    if ((st = rkv_router_snapshot_begin(r, instance, seq)) != RKV_OK)
        return st;
    if ((st = rkv_index_stage_add(r, r->inst[s].staging, blocks, n, fn)) != RKV_OK) {
        rkv_index_stage_drop(r, s);
        return st;
    }
    rkv_index_stage_commit(r, s);
    return RKV_OK;
}

/*
 * router/route.c -- the router's query: one walk over a request's chained
 * page hashes gives every instance's leading cached pages, then the score
 * of include/radixkv_router.h picks the instance.
 *
 * The walk keeps `alive`, the instances whose run of cached pages has not
 * ended: at page j, alive &= holders(hash j); an instance that drops out
 * has exactly j leading pages. The walk ends when alive is empty, so its
 * cost is the longest cached run plus one lookup. Pages held only off the
 * device are counted per medium as they pass (rare), device pages are what
 * is left.
 */
#include <string.h>

#include "common/status.h"
#include "router/router_internal.h"

rkv_status rkv_router_overlaps(rkv_router *router, rkv_namespace ns,
                               const uint64_t *hashes, uint32_t n,
                               rkv_router_overlap *out, uint32_t cap,
                               uint32_t *n_out)
{
    static const char fn[] = "rkv_router_overlaps";
    if (n_out != NULL)
        *n_out = 0;
    if (router == NULL || out == NULL || n_out == NULL ||
        (hashes == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    rkv_router *r = router;
    if (cap < r->num_instances)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: room for %u, %u "
                             "instances", fn, cap, r->num_instances);
    uint32_t lead[RKV_ROUTER_MAX_INSTANCES];
    uint32_t off[RKV_ROUTER_MAX_INSTANCES][RKV_MEDIUM_COUNT];
    uint64_t alive = r->live_mask, touched_off = 0;
    uint32_t j = 0;
    /* The table is far larger than the caches and each lookup is a random
     * miss; the request's hashes are all known, so the next pages' home
     * slots are fetched ahead (the walk's misses overlap instead of
     * queueing; a prefetch past the walk's end costs little). */
    const uint32_t ahead = 8;
    for (uint32_t p = 0; p < ahead && p < n; p++)
        __builtin_prefetch(&r->entries[rkv_rt_home(r, hashes[p])]);
    for (; j < n && alive != 0; j++) {
        if (j + ahead < n)
            __builtin_prefetch(&r->entries[rkv_rt_home(r, hashes[j + ahead])]);
        uint32_t i = rkv_rt_find(r, hashes[j]);
        uint64_t any = 0;
        const rkv_rt_entry *e = NULL;
        if (i != RKV_RT_EMPTY) {
            e = &r->entries[i];
            if (e->ns == ns)
                any = rkv_rt_any(e) & alive;
        }
        for (uint64_t d = alive & ~any; d; d &= d - 1)
            lead[__builtin_ctzll(d)] = j;
        alive = any;
        uint64_t nd = any & ~(e ? e->mask[RKV_MEDIUM_DEVICE] : 0);
        for (; nd; nd &= nd - 1) {
            uint32_t s = (uint32_t)__builtin_ctzll(nd);
            if (!((touched_off >> s) & 1)) {
                memset(off[s], 0, sizeof off[s]);
                touched_off |= 1ull << s;
            }
            off[s][(e->mask[RKV_MEDIUM_HOST] >> s) & 1 ? RKV_MEDIUM_HOST
                                                       : RKV_MEDIUM_DISK]++;
        }
    }
    for (uint64_t d = alive; d; d &= d - 1)
        lead[__builtin_ctzll(d)] = j;
    const rkv_router_config *c = &r->cfg;
    for (uint32_t k = 0; k < r->num_instances; k++) {
        uint32_t s = r->order[k];
        const rkv_rt_instance *in = &r->inst[s];
        rkv_router_overlap *o = &out[k];
        memset(o, 0, sizeof *o);
        o->instance = in->id;
        o->needs_resync = in->needs_resync;
        o->pages = ((r->live_mask >> s) & 1) ? lead[s] : 0;
        if ((touched_off >> s) & 1) {
            o->pages_by_medium[RKV_MEDIUM_HOST] = off[s][RKV_MEDIUM_HOST];
            o->pages_by_medium[RKV_MEDIUM_DISK] = off[s][RKV_MEDIUM_DISK];
        }
        o->pages_by_medium[RKV_MEDIUM_DEVICE] =
            o->pages - o->pages_by_medium[RKV_MEDIUM_HOST] -
            o->pages_by_medium[RKV_MEDIUM_DISK];
        double w = 0;
        for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
            w += c->medium_weight[m] * (double)o->pages_by_medium[m];
        o->score = c->page_tokens * w -
                   c->queue_weight * (double)in->queued_tokens -
                   c->running_weight * (double)in->running;
    }
    r->st.queries++;
    *n_out = r->num_instances;
    return RKV_OK;
}

rkv_status rkv_router_route(rkv_router *router, rkv_namespace ns,
                            const uint64_t *hashes, uint32_t n,
                            rkv_router_overlap *out)
{
    static const char fn[] = "rkv_router_route";
    if (router == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             router == NULL ? "router" : "out");
    if (router->num_instances == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: no instance registered", fn);
    rkv_router_overlap all[RKV_ROUTER_MAX_INSTANCES];
    uint32_t k = 0;
    rkv_status st = rkv_router_overlaps(router, ns, hashes, n, all,
                                        RKV_ROUTER_MAX_INSTANCES, &k);
    if (st != RKV_OK)
        return st;
    uint32_t best = 0;
    for (uint32_t i = 1; i < k; i++) {
        const rkv_rt_instance *a = &router->inst[router->order[i]];
        const rkv_rt_instance *b = &router->inst[router->order[best]];
        /* all[] is in id order, so the first of equals has the smaller id */
        if (all[i].score > all[best].score ||
            (all[i].score == all[best].score &&
             (a->queued_tokens < b->queued_tokens ||
              (a->queued_tokens == b->queued_tokens && a->running < b->running))))
            best = i;
    }
    *out = all[best];
    return RKV_OK;
}

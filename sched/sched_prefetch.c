/*
 * sched/sched_prefetch.c -- prefetch of a queued request's disk pages to
 * the host tier (rkv_sched_config.prefetch; the contract is
 * rkv_prefetch_mode in radixkv/sched.h).
 *
 * When: at the first step after its submission (ids in s->pf_ids), once
 * per submission: a peek match says whether its lower continuation has
 * disk pages, and rkv_tree_prefetch moves them to the host. The bytes
 * move in that call; their time is modelled on the caller's clock: one
 * disk queue (pf_disk_free_ms) serves the prefetches in order at
 * disk_load_ms_per_page each, so r's pages arrive at pf_done_ms. The
 * admission then holds r (WAIT: until pf_done_ms; TIMEOUT: until the
 * earlier of pf_done_ms and pf_start_ms + prefetch_timeout_ms), and its
 * load counts the pages not yet arrived as disk pages (the tail of the
 * prefetch: nodes move top-down, so the last pages are the late ones).
 *
 * State: r->pf_pages > 0 while a prefetch of r's is pending (WAITING
 * only); cleared when its load consumes it or at admission. A request
 * held by its prefetch holds nothing (no lease, no slot).
 *
 * Differs from HiCache: there a prefetch that has not completed is cut
 * off and the rest is computed; here the tree already has the pages on
 * the host, so the rest is charged as a disk read instead (what a load
 * without prefetch pays), never as compute.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "sched/sched_internal.h"

rkv_status rkv_sched_prefetch_reserve(rkv_sched *s)
{
    if (s->cfg.prefetch == RKV_PREFETCH_OFF)
        return RKV_OK;
    return rkv_ensure_cap((void **)&s->pf_ids, &s->pf_cap, s->npf + 1,
                          sizeof *s->pf_ids);
}

void rkv_sched_prefetch_note(rkv_sched *s, const rkv_sched_req *r)
{
    if (s->cfg.prefetch != RKV_PREFETCH_OFF && s->npf < s->pf_cap)
        s->pf_ids[s->npf++] = r->id;
}

static rkv_status rkv_sched_prefetch_one(rkv_sched *s, rkv_sched_req *r,
                                         double now_ms)
{
    rkv_match m;
    rkv_tier_match tm;
    size_t n = r->len - 1;
    rkv_status st = rkv_tree_match_tiers(s->tree, r->ns, r->tokens, n, NULL,
                                         RKV_MATCH_PEEK, &m, &tm);
    if (st != RKV_OK || tm.disk_tokens == 0)
        return st;
    uint32_t pages = 0;
    st = rkv_tree_prefetch(s->tree, r->ns, r->tokens, n, UINT32_MAX, &pages);
    if (st != RKV_OK || pages == 0)
        return st;
    double start = now_ms > s->pf_disk_free_ms ? now_ms : s->pf_disk_free_ms;
    r->pf_pages = pages;
    r->pf_start_ms = now_ms;
    r->pf_done_ms = start + (double)pages * s->cfg.disk_load_ms_per_page;
    s->pf_disk_free_ms = r->pf_done_ms;
    s->st.prefetches++;
    s->st.prefetch_pages += pages;
    return RKV_OK;
}

rkv_status rkv_sched_prefetch_step(rkv_sched *s, double now_ms)
{
    s->pf_now_ms = now_ms;
    uint32_t n = s->npf;
    s->npf = 0;
    if (s->cfg.prefetch == RKV_PREFETCH_OFF || !s->cfg.use_tiers)
        return RKV_OK;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t *v = rkv_u64map_get(&s->by_id, s->pf_ids[i]);
        if (v == NULL)
            continue; /* aborted since */
        rkv_sched_req *r = (rkv_sched_req *)(uintptr_t)*v;
        if (r->state != RKV_REQ_WAITING || r->pf_pages != 0 ||
            r->load_ticket != 0 || r->load_ready)
            continue;
        rkv_status st = rkv_sched_prefetch_one(s, r, now_ms);
        if (st != RKV_OK) {
            /* the rest wait for no prefetch: their loads read the disk */
            return st;
        }
    }
    return RKV_OK;
}

/* When r's prefetch stops holding it. */
static double rkv_sched_prefetch_until(const rkv_sched *s, const rkv_sched_req *r)
{
    if (r->pf_pages == 0)
        return 0;
    switch (s->cfg.prefetch) {
    case RKV_PREFETCH_WAIT:
        return r->pf_done_ms;
    case RKV_PREFETCH_TIMEOUT: {
        double t = r->pf_start_ms + s->cfg.prefetch_timeout_ms;
        return t < r->pf_done_ms ? t : r->pf_done_ms;
    }
    default:
        return 0;
    }
}

int rkv_sched_prefetch_holds(rkv_sched *s, const rkv_sched_req *r)
{
    if (r->pf_pages == 0 || rkv_sched_prefetch_until(s, r) <= s->pf_now_ms)
        return 0;
    s->st.prefetch_waits++;
    return 1;
}

uint32_t rkv_sched_prefetch_late(const rkv_sched *s, const rkv_sched_req *r,
                                 uint32_t host_pages)
{
    if (r->pf_pages == 0)
        return 0;
    double left = r->pf_done_ms - s->pf_now_ms;
    double per = s->cfg.disk_load_ms_per_page;
    uint32_t late = 0;
    if (left > 0 && per > 0) {
        double k = ceil(left / per);
        late = k < (double)r->pf_pages ? (uint32_t)k : r->pf_pages;
    }
    return late < host_pages ? late : host_pages;
}

double rkv_sched_prefetch_ready_ms(const rkv_sched *s)
{
    if (s == NULL)
        return 0;
    double best = 0;
    for (uint32_t i = 0; i < s->nwaiting; i++) {
        double t = rkv_sched_prefetch_until(s, s->waiting[i]);
        if (t > s->pf_now_ms && (best == 0 || t < best))
            best = t;
    }
    return best;
}

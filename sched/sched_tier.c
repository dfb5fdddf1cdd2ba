/*
 * sched/sched_tier.c -- the scheduler's side of the host/disk tiers (the
 * contract is "Tiers in the scheduler" in radixkv.h): a waiting request's
 * own load (rkv_tree_load at admission, completion
 * through rkv_tree_tier_poll at the start of every step), the credit a
 * lower continuation earns in the lpm order, swap-out at preemption
 * (rkv_tree_store_prefix), and the plan's list of copies (a load's device
 * destination blocks and a swap-out's source blocks go straight from
 * rkv_tree_load / rkv_tree_store_prefix into plan.copy_blocks; the write
 * policy's and demotions' stores, with their source device blocks, come
 * from the tree's store log, which the scheduler enables at create and
 * drains at the end of every step).
 *
 * Load state of a WAITING request (checked by rkv_sched_tier_check):
 *   none      load_ticket 0, load_ready 0, no load_lease;
 *   queued    load_ticket != 0, in s->tickets (ticket -> request), lease
 *             held on the loading path; admission skips it;
 *   ready     load_ticket 0, load_ready 1, lease held: the pages are on
 *             the device and cannot be evicted before it is admitted.
 *   waits     none, but its continuation is another request's LOADING path
 *             (rkv_tier_match.loading_ticket): admission skips it this
 *             step (rkv_sched_tier_try_load reports 2); no state is kept, the
 *             next step's match decides again.
 *   Queued and ready requests are counted in s->nloading and hold a running
 *   slot (nrunning + nloading <= max_running). A RUNNING request is always
 *   in state none. A failed load (status or zero pages) releases the lease
 *   and sets load_failed: its next admission computes those tokens instead
 *   of loading again (cleared once admitted). An aborted request drops its
 *   lease and its ticket; the tree's later completion of that ticket is
 *   ignored (not in s->tickets), as are swap-out tickets.
 *
 * What differs from the peers: SGLang's HiCache loads at admission too
 * but blocks the batch on the load's completion event; here only the
 * requests that need the pages wait (the step goes on without them) and a
 * failed load degrades to compute. Swap vs recompute is one cost
 * comparison the caller configures (pages x load time vs tokens x compute
 * time), as vLLM's preemption mode choice but per request.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "residency/tier_copy.h"
#include "radix/tree_lease.h"
#include "events/store_log.h"
#include "sched/sched_internal.h"

/* Credit of one lower token: the compute it saves minus its load time,
 * both in tokens (0..1). */
static double rkv_sched_tier_factor(const rkv_sched *s, double load_ms_per_page)
{
    double c = s->cfg.compute_ms_per_token;
    if (c <= 0)
        return load_ms_per_page <= 0 ? 1.0 : 0.0;
    double f = 1.0 - load_ms_per_page / (c * s->P);
    return f > 0 ? f : 0.0;
}

double rkv_sched_tier_credit(const rkv_sched *s, size_t host, size_t disk)
{
    if (host == 0 && disk == 0)
        return 0.0;
    return (double)host * rkv_sched_tier_factor(s, s->cfg.host_load_ms_per_page) +
           (double)disk * rkv_sched_tier_factor(s, s->cfg.disk_load_ms_per_page);
}

/* Block ids listed so far this step (copy_indptr[ncopies]). */
static uint32_t rkv_sched_tier_nblocks(const rkv_sched *s)
{
    return s->ncopies == 0 ? 0 : s->copy_indptr[s->ncopies];
}

rkv_status rkv_sched_tier_copies_reserve(rkv_sched *s, uint32_t n, uint32_t blocks)
{
    uint32_t nb = rkv_sched_tier_nblocks(s);
    if (blocks > UINT32_MAX - nb || n > UINT32_MAX - 1 - s->ncopies)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: too many copies");
    rkv_status st = rkv_ensure_cap((void **)&s->copies, &s->copies_cap,
                                   s->ncopies + n, sizeof *s->copies);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&s->copy_indptr, &s->copy_indptr_cap,
                            s->ncopies + n + 1, sizeof *s->copy_indptr);
    if (st == RKV_OK && blocks > 0)
        st = rkv_ensure_cap((void **)&s->copy_blocks, &s->copy_blocks_cap,
                            nb + blocks, sizeof *s->copy_blocks);
    return st;
}

/* Lists a transfer of `pages` pages; nb of its block ids (0 where the tree
 * does not report them, else pages) are already at copy_blocks[the
 * current end]. */
static void rkv_sched_tier_copy(rkv_sched *s, uint64_t req, uint64_t ticket,
                                int kind, int medium, uint32_t pages, uint32_t nb)
{
    if (pages == 0 || s->ncopies >= s->copies_cap)
        return; /* callers reserve first */
    uint32_t start = rkv_sched_tier_nblocks(s);
    if (s->ncopies == 0)
        s->copy_indptr[0] = 0;
    rkv_plan_copy *c = &s->copies[s->ncopies++];
    c->req_id = req;
    c->ticket = ticket;
    c->kind = kind;
    c->medium = medium;
    c->pages = pages;
    c->done = 0;
    s->copy_indptr[s->ncopies] = start + nb;
}

static void rkv_sched_tier_fail(rkv_sched *s, rkv_sched_req *r)
{
    (void)rkv_tree_unlock(s->tree, &r->load_lease);
    memset(&r->load_lease, 0, sizeof r->load_lease);
    r->load_ready = 0;
    r->load_failed = 1;
    r->load_pages = r->load_disk_pages = 0;
    s->nloading--;
    s->st.failed_loads++;
}

rkv_status rkv_sched_tier_poll(rkv_sched *s)
{
    if (!s->cfg.use_tiers)
        return RKV_OK;
    rkv_transfer_done d[16];
    uint32_t n;
    do {
        n = 0;
        rkv_status st = rkv_tree_tier_poll(s->tree, d, 16, &n);
        if (st != RKV_OK)
            return st;
        for (uint32_t i = 0; i < n; i++) {
            uint64_t *o = rkv_u64map_get(&s->orphans, d[i].ticket);
            if (o != NULL) { /* an aborted request's load: let go now */
                rkv_lease l = {*o};
                (void)rkv_tree_unlock(s->tree, &l);
                rkv_u64map_del(&s->orphans, d[i].ticket);
                continue;
            }
            uint64_t *v = rkv_u64map_get(&s->tickets, d[i].ticket);
            if (v == NULL)
                continue; /* a swap-out */
            rkv_sched_req *r = (rkv_sched_req *)(uintptr_t)*v;
            rkv_u64map_del(&s->tickets, d[i].ticket);
            r->load_ticket = 0;
            if (d[i].status != RKV_OK || d[i].num_pages == 0) {
                rkv_sched_tier_fail(s, r);
                continue;
            }
            r->load_ready = 1;
            if (d[i].num_pages < r->load_pages)
                r->load_pages = d[i].num_pages;
            if (r->load_disk_pages > r->load_pages)
                r->load_disk_pages = r->load_pages;
        }
    } while (n == 16);
    return RKV_OK;
}

rkv_status rkv_sched_tier_try_load(rkv_sched *s, rkv_sched_req *r, uint64_t avail,
                                   int *loading)
{
    *loading = r->load_ticket != 0;
    if (*loading || r->load_ready || r->load_failed || !s->cfg.use_tiers ||
        !s->tiers_live)
        return RKV_OK;
    size_t n = r->len - 1;
    rkv_match m;
    rkv_tier_match tm;
    rkv_status st = rkv_tree_match_tiers(s->tree, r->ns, r->tokens, n, NULL,
                                         RKV_MATCH_PEEK, &m, &tm);
    if (st != RKV_OK)
        return st;
    if (tm.loading_ticket != 0 &&
        rkv_sched_tier_credit(s, tm.loading_tokens, 0) > 0) {
        /* another request is loading this continuation: wait for that
         * ticket (it completes at a later step's poll; then the pages
         * match on the device, or, failed, are lower again) rather than
         * compute them. It holds nothing meanwhile. */
        s->st.load_waits++;
        *loading = 2;
        return RKV_OK;
    }
    uint64_t pages = tm.lower_tokens / s->P;
    /* a prefetch of its pages not arrived yet (sched_prefetch.c): they are
     * the tail of its host part and cost a disk read; not worth one, they
     * are computed and the load stops before them */
    uint32_t hostp = (uint32_t)(tm.host_tokens / s->P);
    uint32_t late = rkv_sched_prefetch_late(s, r, hostp);
    size_t late_t = (size_t)late * s->P;
    if (late > 0 && rkv_sched_tier_factor(s, s->cfg.disk_load_ms_per_page) <= 0)
        pages = hostp - late;
    if (pages == 0 || rkv_sched_tier_credit(s, tm.host_tokens - late_t,
                                            tm.disk_tokens + late_t) <= 0)
        return RKV_OK;
    if (pages > avail)
        pages = avail;
    if (pages == 0)
        return RKV_OK; /* no room for a load now: compute what fits */
    /* everything that could fail after the load is queued, first */
    st = rkv_u64map_reserve(&s->tickets, 1);
    if (st == RKV_OK) /* room for every queued load to become an orphan */
        st = rkv_u64map_reserve(&s->orphans, s->tickets.count + 1);
    if (st == RKV_OK)
        st = rkv_sched_tier_copies_reserve(s, 2, (uint32_t)pages);
    if (st != RKV_OK)
        return st;
    rkv_load ld;
    memset(&ld, 0, sizeof ld);
    /* the destinations land where the plan lists them */
    rkv_block_id *dst = s->copy_blocks + rkv_sched_tier_nblocks(s);
    st = rkv_tree_load(s->tree, r->ns, r->tokens, n, (uint32_t)pages, dst, &ld);
    if (st == RKV_ERR_NO_SPACE)
        return RKV_OK; /* the pool cannot take them: compute */
    if (st != RKV_OK)
        return st;
    if (ld.ticket == 0) {
        if (ld.lease.id != 0)
            (void)rkv_tree_unlock(s->tree, &ld.lease);
        return RKV_OK;
    }
    r->load_ticket = ld.ticket;
    r->load_lease = ld.lease;
    r->load_pages = ld.num_pages;
    r->load_disk_pages = ld.disk_pages < ld.num_pages ? ld.disk_pages
                                                      : ld.num_pages;
    /* prefetched pages not arrived by now: still read from the disk */
    uint32_t arrived = hostp - late, hp_loaded = r->load_pages - r->load_disk_pages;
    if (hp_loaded > arrived) {
        r->load_disk_pages += hp_loaded - arrived;
        s->st.prefetch_late_pages += hp_loaded - arrived;
    }
    r->pf_pages = 0;
    *rkv_u64map_put(&s->tickets, ld.ticket) = (uint64_t)(uintptr_t)r;
    s->nloading++;
    s->st.loads++;
    s->st.load_pages += r->load_pages;
    s->st.load_disk_pages += r->load_disk_pages;
    int kind = RKV_TRANSFER_LOAD;
    if (r->swapped_pages > 0) {
        kind = RKV_TRANSFER_SWAP_IN;
        s->st.swap_ins++;
        s->st.swap_in_pages += r->load_pages;
    }
    /* host pages come before disk pages on a path (tree_tier.c) */
    uint32_t hp = r->load_pages - r->load_disk_pages;
    rkv_sched_tier_copy(s, r->id, ld.ticket, kind, RKV_MEDIUM_HOST, hp, hp);
    rkv_sched_tier_copy(s, r->id, ld.ticket, kind, RKV_MEDIUM_DISK,
                        r->load_disk_pages, r->load_disk_pages);
    *loading = 1;
    return RKV_OK;
}

void rkv_sched_tier_admitted(rkv_sched *s, rkv_sched_req *r, size_t matched)
{
    size_t lt = 0, dt = 0;
    if (r->load_ready) {
        lt = (size_t)r->load_pages * s->P;
        if (lt > matched)
            lt = matched;
        dt = (size_t)r->load_disk_pages * s->P;
        if (dt > lt)
            dt = lt;
        (void)rkv_tree_unlock(s->tree, &r->load_lease);
        memset(&r->load_lease, 0, sizeof r->load_lease);
        r->load_ready = 0;
        s->nloading--;
    }
    s->st.cached_tokens_by_medium[RKV_MEDIUM_DEVICE] += matched - lt;
    s->st.cached_tokens_by_medium[RKV_MEDIUM_HOST] += lt - dt;
    s->st.cached_tokens_by_medium[RKV_MEDIUM_DISK] += dt;
    r->admitted_host = (uint32_t)(lt - dt);
    r->admitted_disk = (uint32_t)dt;
    r->load_failed = 0;
    r->swapped_pages = 0;
    r->pf_pages = 0;
    r->load_pages = r->load_disk_pages = 0;
}

void rkv_sched_tier_release_ready(rkv_sched *s, const rkv_sched_req *keep)
{
    for (uint32_t i = 0; i < s->nwaiting && s->nloading > 0; i++) {
        rkv_sched_req *w = s->waiting[i];
        if (w == keep || !w->load_ready)
            continue;
        (void)rkv_tree_unlock(s->tree, &w->load_lease);
        memset(&w->load_lease, 0, sizeof w->load_lease);
        w->load_ready = 0;
        w->load_pages = w->load_disk_pages = 0;
        s->nloading--;
        s->st.loads_released++;
    }
}

void rkv_sched_tier_drop(rkv_sched *s, rkv_sched_req *r)
{
    if (r->load_ticket != 0) {
        rkv_u64map_del(&s->tickets, r->load_ticket);
        /* the tree refuses to unlock a node still loading: the lease waits
         * for the ticket (capacity reserved when the load was queued) */
        if (rkv_tree_unlock(s->tree, &r->load_lease) != RKV_OK)
            *rkv_u64map_put(&s->orphans, r->load_ticket) = r->load_lease.id;
        r->load_ticket = 0;
    } else if (!r->load_ready) {
        return;
    } else {
        (void)rkv_tree_unlock(s->tree, &r->load_lease);
    }
    memset(&r->load_lease, 0, sizeof r->load_lease);
    r->load_ready = 0;
    s->nloading--;
}

void rkv_sched_tier_swap_out(rkv_sched *s, rkv_sched_req *r)
{
    if (!s->cfg.swap || !s->cfg.use_tiers)
        return;
    rkv_sched_req_insert_computed(s, r); /* its computed full pages, first */
    uint32_t pages = r->locked_pages;
    if (pages == 0)
        return;
    double swap_ms = (double)pages * s->cfg.host_load_ms_per_page;
    double recompute_ms = (double)pages * s->P * s->cfg.compute_ms_per_token;
    if (swap_ms > recompute_ms ||
        rkv_sched_tier_copies_reserve(s, 1, pages) != RKV_OK)
        return;
    uint64_t ticket = 0;
    uint32_t np = 0;
    rkv_block_id *src = s->copy_blocks + rkv_sched_tier_nblocks(s);
    if (rkv_tree_store_prefix(s->tree, r->ns, r->tokens,
                              (size_t)pages * s->P, src, &ticket, &np) != RKV_OK)
        return; /* best effort (no host tier, queue full): recompute */
    r->swapped_pages = pages;
    s->st.swap_outs++;
    s->st.swap_out_pages += np;
    rkv_sched_tier_copy(s, r->id, ticket, RKV_TRANSFER_SWAP_OUT, RKV_MEDIUM_HOST,
                        np, np);
}

/* Lists the tree's store log as STORE entries: a run of records with the
 * same source, medium and state is one entry (device sources list their
 * blocks); records the log dropped are count-only entries. What cannot be
 * reserved (out of memory) stays in the log for the next step. */
static void rkv_sched_tier_list_stores(rkv_sched *s)
{
    rkv_store_log lg;
    if (rkv_tree_store_log_read(s->tree, &lg) != RKV_OK)
        return;
    uint32_t i = 0;
    while (i < lg.num_records) {
        const rkv_store_record *a = &lg.records[i];
        /* the tree clears "queued" once the store is taken (run, failed or
         * issued at a poll, or run early by a demotion) */
        int done = !a->queued;
        uint32_t j = i + 1;
        while (j < lg.num_records && lg.records[j].from == a->from &&
               lg.records[j].medium == a->medium && (!lg.records[j].queued) == done)
            j++;
        uint32_t pages = j - i;
        uint32_t nb = a->from == RKV_MEDIUM_DEVICE ? pages : 0;
        if (rkv_sched_tier_copies_reserve(s, 1, nb) != RKV_OK) {
            rkv_tree_store_log_clear(s->tree, i); /* the rest: next step */
            return;
        }
        rkv_block_id *dst = s->copy_blocks + rkv_sched_tier_nblocks(s);
        for (uint32_t k = 0; k < nb; k++)
            dst[k] = lg.records[i + k].block;
        rkv_sched_tier_copy(s, 0, 0, RKV_TRANSFER_STORE, a->medium, pages, nb);
        s->copies[s->ncopies - 1].done = done;
        i = j;
    }
    for (int m = RKV_MEDIUM_HOST; m < RKV_MEDIUM_COUNT; m++) {
        uint64_t d = lg.lost[m];
        if (d == 0)
            continue;
        if (rkv_sched_tier_copies_reserve(s, 1, 0) != RKV_OK) {
            rkv_tree_store_log_clear(s->tree, lg.num_records);
            return; /* the lost counts go: nothing more is known of them */
        }
        rkv_sched_tier_copy(s, 0, 0, RKV_TRANSFER_STORE, m,
                            d > UINT32_MAX ? UINT32_MAX : (uint32_t)d, 0);
    }
    rkv_tree_store_log_clear(s->tree, lg.num_records);
}

uint32_t rkv_sched_tier_log_cap(const rkv_pool *pool)
{
    uint64_t cap = 2 * (uint64_t)rkv_pool_num_blocks(pool) + 1024;
    return cap < (1u << 20) ? (uint32_t)cap : 1u << 20;
}

void rkv_sched_tier_plan(rkv_sched *s)
{
    if (s->cfg.use_tiers && !s->store_log_on && rkv_store_log_tiers_attached(s->tree) &&
        rkv_tree_store_log_enable(s->tree, rkv_sched_tier_log_cap(s->pool)) ==
            RKV_OK)
        s->store_log_on = 1; /* tiers attached after create; retried if refused */
    if (s->store_log_on)
        rkv_sched_tier_list_stores(s);
    s->plan.num_copies = s->ncopies;
    s->plan.copies = s->copies;
    if (s->ncopies == 0 && s->copy_indptr != NULL)
        s->copy_indptr[0] = 0;
    s->plan.copy_indptr = s->copy_indptr;
    s->plan.copy_blocks = s->copy_blocks;
}

rkv_status rkv_sched_tier_check(const rkv_sched *s)
{
    uint32_t loading = 0, queued = 0;
    for (uint32_t i = 0; i < s->nwaiting; i++) {
        const rkv_sched_req *r = s->waiting[i];
        unsigned long long id = (unsigned long long)r->id;
        if (r->load_ticket == 0 && !r->load_ready) {
            if (r->load_lease.id != 0)
                return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: "
                                     "request %llu holds a load lease "
                                     "without a load", id);
            continue;
        }
        if (r->load_ticket != 0 && r->load_ready)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: request "
                                 "%llu is loading and ready", id);
        loading++;
        if (r->load_ticket != 0) {
            queued++;
            const uint64_t *v = rkv_u64map_get(&s->tickets, r->load_ticket);
            if (v == NULL || *v != (uint64_t)(uintptr_t)r)
                return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: "
                                     "request %llu ticket %llu not indexed",
                                     id, (unsigned long long)r->load_ticket);
        }
        rkv_node leased;
        if (r->load_lease.id == 0 ||
            rkv_tree_lease_node(s->tree, &r->load_lease, &leased) != RKV_OK)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: request "
                                 "%llu loads without a live lease", id);
        if (r->load_disk_pages > r->load_pages || r->load_pages == 0)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: request "
                                 "%llu loads %u pages (%u from disk)", id,
                                 r->load_pages, r->load_disk_pages);
    }
    for (uint32_t i = 0; i < s->orphans.cap; i++) {
        rkv_lease l = {s->orphans.vals[i]};
        rkv_node leased;
        if (s->orphans.used[i] &&
            rkv_tree_lease_node(s->tree, &l, &leased) != RKV_OK)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: an "
                                 "aborted load's lease (ticket %llu) is not "
                                 "held", (unsigned long long)s->orphans.keys[i]);
    }
    for (uint32_t i = 0; i < s->nrunning; i++) {
        const rkv_sched_req *r = s->running[i];
        if (r->load_ticket != 0 || r->load_ready || r->load_lease.id != 0)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: running "
                                 "request %llu still holds a load",
                                 (unsigned long long)r->id);
    }
    if (loading != s->nloading || queued != s->tickets.count)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: %u loading "
                             "(%u queued) but counted %u (%u tickets)",
                             loading, queued, s->nloading, s->tickets.count);
    if ((uint64_t)s->nrunning + s->nloading > s->cfg.max_running)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: %u running + "
                             "%u loading > max_running %u", s->nrunning,
                             s->nloading, s->cfg.max_running);
    for (uint32_t i = 0; i < s->ncopies; i++) {
        const rkv_plan_copy *c = &s->copies[i];
        uint32_t nb = s->copy_indptr[i + 1] - s->copy_indptr[i];
        if ((i == 0 && s->copy_indptr[0] != 0) ||
            s->copy_indptr[i + 1] < s->copy_indptr[i] ||
            (nb != 0 && nb != c->pages))
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: plan "
                                 "copy %u lists %u blocks for %u pages", i,
                                 nb, c->pages);
        for (uint32_t k = s->copy_indptr[i]; k < s->copy_indptr[i + 1]; k++)
            if (s->copy_blocks[k] >= rkv_pool_num_blocks(s->pool))
                return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: plan "
                                     "copy %u lists block %u", i,
                                     s->copy_blocks[k]);
        if (c->pages == 0 || c->kind < RKV_TRANSFER_LOAD ||
            (c->done && c->kind != RKV_TRANSFER_STORE) ||
            c->kind > RKV_TRANSFER_SWAP_IN || c->medium <= RKV_MEDIUM_DEVICE ||
            c->medium >= RKV_MEDIUM_COUNT)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: plan "
                                 "copy %u: kind %d medium %d pages %u", i,
                                 c->kind, c->medium, c->pages);
    }
    return RKV_OK;
}

void rkv_sched_tier_destroy(rkv_sched *s)
{
    for (uint32_t i = 0; i < s->nwaiting; i++)
        rkv_sched_tier_drop(s, s->waiting[i]);
    /* loads still queued or in flight: poll them to completion so their
     * leases can go. On a CUDA pool a poll that completes nothing still
     * progresses (it issues the batch, or finds its event not ready yet),
     * so "no orphan released" is no reason to stop -- stopping there left
     * the leases in the tree for good; what ends the wait is the tree
     * having no load pending. Between polls it waits for the batches
     * already issued (a stream sync), so a real GPU is not spun on; a
     * load queued behind them is issued by the next poll. Bounded: a copy
     * engine that never completes leaves them to the tree's destroy. */
    for (int round = 0; round < 4096 && s->orphans.count > 0; round++) {
        rkv_tier_stats ts;
        if (rkv_sched_tier_poll(s) != RKV_OK || rkv_tree_tier_stats(s->tree, &ts) != RKV_OK ||
            ts.pending_loads == 0)
            break;
        rkv_tier_copy_wait_issued(s->tree);
    }
    rkv_u64map_fini(&s->tickets);
    rkv_u64map_fini(&s->orphans);
    free(s->copies);
    free(s->copy_indptr);
    free(s->copy_blocks);
    free(s->pf_ids);
}

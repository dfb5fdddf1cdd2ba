/*
 * sched/sched_check.c -- rkv_sched_check: every scheduler invariant (see
 * sched_internal.h and sched_step.c), then rkv_tree_check and
 * rkv_pool_check. O(requests + blocks + tree).
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "radix/tree_lease.h"
#include "sched/sched_internal.h"

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, __VA_ARGS__)

static rkv_status rkv_check_running(const rkv_sched *s, const rkv_sched_req *r,
                                    uint32_t i, uint8_t *own)
{
    const uint32_t P = s->P;
    unsigned long long id = (unsigned long long)r->id;
    if (r->state != RKV_REQ_RUNNING || r->ridx != i)
        return CORRUPT("rkv_sched_check: running[%u] (request %llu) has state "
                       "%d, index %u", i, id, (int)r->state, r->ridx);
    uint32_t top = r->kv_len + r->sched_q;
    if (top > r->len || (!s->plan_pending && r->kv_len >= r->len))
        return CORRUPT("rkv_sched_check: request %llu kv_len %u + planned %u "
                       "vs len %u", id, r->kv_len, r->sched_q, r->len);
    if (r->len > r->tok_cap || r->tok_cap > r->cap ||
        r->generated > r->max_new || r->len != r->prompt_len + r->generated)
        return CORRUPT("rkv_sched_check: request %llu len %u cap %u "
                       "generated %u", id, r->len, r->cap, r->generated);
    if (r->nblocks != (top + P - 1) / P)
        return CORRUPT("rkv_sched_check: request %llu has %u blocks for %u "
                       "KV tokens", id, r->nblocks, top);
    if (r->locked_pages > r->kv_len / P)
        return CORRUPT("rkv_sched_check: request %llu locks %u pages of %u "
                       "computed tokens", id, r->locked_pages, r->kv_len);
    rkv_node_info info;
    rkv_node leased;
    if (rkv_tree_node_info(s->tree, r->lock_node, &info) != RKV_OK)
        return CORRUPT("rkv_sched_check: request %llu lock node is stale", id);
    if (rkv_tree_lease_node(s->tree, &r->lease, &leased) != RKV_OK ||
        leased.id != r->lock_node.id || leased.gen != r->lock_node.gen)
        return CORRUPT("rkv_sched_check: request %llu does not hold a lease "
                       "on its lock node", id);
    if (info.lock_count == 0 || info.depth_tokens != (size_t)r->locked_pages * P ||
        info.ns != r->ns)
        return CORRUPT("rkv_sched_check: request %llu lock node depth %zu "
                       "locks %u (expected depth %u)", id, info.depth_tokens,
                       info.lock_count, r->locked_pages * P);
    for (uint32_t b = 0; b < r->nblocks; b++) {
        rkv_block_id x = r->blocks[b];
        if (x >= s->num_blocks || rkv_pool_refcount(s->pool, x) == 0)
            return CORRUPT("rkv_sched_check: request %llu block %u = %u is "
                           "not allocated", id, b, x);
        if (b >= r->locked_pages) {
            if (own[x])
                return CORRUPT("rkv_sched_check: block %u owned twice "
                               "(request %llu)", x, id);
            own[x] = 1;
        }
    }
    if (r->inflight_from > r->inflight_to ||
        (r->inflight_to > r->inflight_from && r->inflight_to > r->nhash))
        return CORRUPT("rkv_sched_check: request %llu in-flight pages "
                       "[%u, %u) of %u hashes", id, r->inflight_from, r->inflight_to,
                       r->nhash);
    return RKV_OK;
}

rkv_status rkv_sched_check(const rkv_sched *s)
{
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_sched_check: NULL");
    if (s->nrunning > s->cfg.max_running)
        return CORRUPT("rkv_sched_check: %u running > max_running %u",
                       s->nrunning, s->cfg.max_running);
    if (s->by_id.count != (uint64_t)s->nwaiting + s->nrunning)
        return CORRUPT("rkv_sched_check: %u ids for %u waiting + %u running",
                       s->by_id.count, s->nwaiting, s->nrunning);
    /* the scheduler's time never runs ahead of the tree's (it moves the
     * tree there first) */
    rkv_retention_stats rs;
    rkv_status rst = rkv_tree_retention_stats(s->tree, &rs);
    if (rst != RKV_OK)
        return rst;
    if (s->now_ms > rs.now_ms)
        return CORRUPT("rkv_sched_check: time %llu ms ahead of the tree's %llu",
                       (unsigned long long)s->now_ms,
                       (unsigned long long)rs.now_ms);
    for (uint32_t i = 0; i < s->nwaiting; i++) {
        const rkv_sched_req *r = s->waiting[i];
        const uint64_t *v = rkv_u64map_get(&s->by_id, r->id);
        if (r->state != RKV_REQ_WAITING || r->ridx != i || v == NULL ||
            *v != (uint64_t)(uintptr_t)r)
            return CORRUPT("rkv_sched_check: waiting[%u] (request %llu) "
                           "state %d index %u", i,
                           (unsigned long long)r->id, (int)r->state, r->ridx);
        if (r->nblocks != 0 || r->locked_pages != 0 || r->kv_len != 0 ||
            r->inflight_to != r->inflight_from || r->lease.id != 0)
            return CORRUPT("rkv_sched_check: waiting request %llu holds KV",
                           (unsigned long long)r->id);
        if (r->len != r->prompt_len + r->generated || r->len > r->tok_cap ||
            r->tok_cap > r->cap)
            return CORRUPT("rkv_sched_check: waiting request %llu len %u",
                           (unsigned long long)r->id, r->len);
    }
    for (uint32_t i = 0; i < s->ngrave; i++) {
        const rkv_sched_req *r = s->grave[i];
        if (r->state != RKV_REQ_FINISHED || r->finish == RKV_FINISH_NONE ||
            (unsigned)r->finish > RKV_FINISH_ABORT || r->nblocks != 0 ||
            r->locked_pages != 0 || r->kv_len != 0 ||
            r->generated > r->max_new)
            return CORRUPT("rkv_sched_check: ended request %llu (grave[%u]) "
                           "state %d finish %d holds %u blocks",
                           (unsigned long long)r->id, i, (int)r->state,
                           (int)r->finish, r->nblocks);
    }
    if (s->cfg.policy != RKV_POLICY_DFS &&
        rkv_order_live(s, &s->order) + s->order.nadd < s->nwaiting)
        return CORRUPT("rkv_sched_check: order queue lost requests");
    uint8_t *own = calloc(s->num_blocks ? s->num_blocks : 1, 1);
    if (own == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_check: out of memory");
    rkv_status st = RKV_OK;
    uint64_t tokens = 0, infl = 0;
    for (uint32_t i = 0; i < s->nrunning && st == RKV_OK; i++) {
        const rkv_sched_req *r = s->running[i];
        const uint64_t *v = rkv_u64map_get(&s->by_id, r->id);
        if (v == NULL || *v != (uint64_t)(uintptr_t)r)
            st = CORRUPT("rkv_sched_check: running request %llu not indexed",
                         (unsigned long long)r->id);
        else
            st = rkv_check_running(s, r, i, own);
        tokens += r->sched_q;
        infl += r->inflight_to - r->inflight_from;
    }
    free(own);
    if (st != RKV_OK)
        return st;
    if (tokens > s->cfg.max_batch_tokens)
        return CORRUPT("rkv_sched_check: %llu tokens planned > %u",
                       (unsigned long long)tokens, s->cfg.max_batch_tokens);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < s->inflight.cap; i++)
        sum += s->inflight.used[i] ? (s->inflight.vals[i] & 0xffffffffu) : 0;
    if (sum != infl)
        return CORRUPT("rkv_sched_check: in-flight set counts %llu pages, "
                       "requests %llu", (unsigned long long)sum,
                       (unsigned long long)infl);
    if (s->plan_pending) {
        if (s->plan_n == 0 || s->plan_n > s->cfg.max_running)
            return CORRUPT("rkv_sched_check: pending plan of %u requests",
                           s->plan_n);
        for (uint32_t i = 0; i < s->plan_n; i++) {
            const rkv_sched_req *r = s->plan_reqs[i];
            if (r != NULL && (r->state != RKV_REQ_RUNNING || r->sched_q == 0))
                return CORRUPT("rkv_sched_check: plan entry %u not planned",
                               i);
        }
    }
    if ((st = rkv_sched_tier_check(s)) != RKV_OK)
        return st;
    if ((st = rkv_watch_check(s)) != RKV_OK)
        return st;
    if ((st = rkv_pool_check(s->pool)) != RKV_OK)
        return st;
    return rkv_tree_check(s->tree);
}

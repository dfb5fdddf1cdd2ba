/*
 * sched/sched_kv.c -- one request's KV: admission (match + lock), block
 * table growth (allocation through the tree, which evicts), insertion of its
 * computed pages into the tree (per prefill chunk, at finish, at
 * preemption), release, and its entries in the in-flight page-hash set used
 * by in-batch de-duplication.
 *
 * Ownership (see sched_internal.h): blocks[0..locked_pages) belong to the
 * tree and are covered by the lock on lock_node, owned by the request's
 * lease; blocks[locked_pages..nblocks) carry one pool reference of the
 * request each. Inserting computed pages moves the boundary down: the tree
 * takes its own reference on the new pages (or already had the page under
 * another block: a duplicate, and the request switches to the tree's
 * block, whose KV is identical), the request locks the new deepest node
 * (a new lease), releases its old lease and drops its own references on
 * those pages. Other requests can then hit a prefix while the
 * request that computed it is still running.
 *
 * Retention (rkv_request_desc.retention): after each insert, and when the
 * request lets go of its pages (finish, preemption, abort), its priority
 * and pin go to the tree through rkv_tree_retain on the pages it has
 * locked, at the scheduler's time (the last step's or commit's now_ms,
 * never behind the tree's). It is best effort like the insert: a pin
 * refused for the cap is retried without the pin (the priority still
 * applies) and counted; any other failure is counted and skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "sched/sched_internal.h"

rkv_status rkv_ensure_scratch(rkv_sched *s, uint32_t pages)
{
    return rkv_ensure_cap((void **)&s->scratch, &s->scratch_cap, pages + 1,
                          sizeof *s->scratch);
}

rkv_status rkv_sched_req_grow(rkv_sched *s, rkv_sched_req *r, uint32_t tokens)
{
    uint32_t need = (tokens + s->P - 1) / s->P;
    if (need <= r->nblocks)
        return RKV_OK;
    rkv_status st = rkv_ensure_cap((void **)&r->blocks, &r->blocks_cap, need,
                                   sizeof *r->blocks);
    if (st != RKV_OK)
        return st;
    st = rkv_tree_alloc_blocks(s->tree, need - r->nblocks,
                               r->blocks + r->nblocks);
    if (st != RKV_OK)
        return st;
    r->nblocks = need;
    return RKV_OK;
}

void rkv_sched_req_shrink(rkv_sched *s, rkv_sched_req *r, uint32_t tokens)
{
    uint32_t need = (tokens + s->P - 1) / s->P;
    if (need < r->locked_pages)
        need = r->locked_pages;
    while (r->nblocks > need)
        (void)rkv_pool_unref(s->pool, r->blocks[--r->nblocks]);
}

rkv_status rkv_sched_req_hashes(rkv_sched *s, rkv_sched_req *r, uint32_t pages)
{
    if (pages <= r->nhash)
        return RKV_OK;
    rkv_status st = rkv_ensure_cap((void **)&r->hashes, &r->hash_cap, pages,
                                   sizeof *r->hashes);
    if (st != RKV_OK)
        return st;
    uint64_t h = r->nhash ? r->hashes[r->nhash - 1] : RKV_HASH_ROOT;
    for (uint32_t i = r->nhash; i < pages; i++) {
        h = rkv_block_hash(h, r->ns, r->tokens + (size_t)i * s->P, s->P);
        r->hashes[i] = h;
    }
    r->nhash = pages;
    return RKV_OK;
}

void rkv_inflight_add(rkv_sched *s, rkv_sched_req *r, uint32_t from, uint32_t to)
{
    r->inflight_from = r->inflight_to = from;
    if (s->cfg.dedup_min_tokens == 0 || to <= from)
        return;
    /* best effort: without memory the request is simply not deduplicated */
    if (rkv_sched_req_hashes(s, r, to) != RKV_OK ||
        rkv_u64map_reserve(&s->inflight, to - from) != RKV_OK)
        return;
    /* value: count in the low 32 bits, and the page where the first
     * registrant's computation started in the high 32 bits (dedup measures
     * a candidate's overlap with that computation, including the part
     * already inserted) */
    for (uint32_t i = from; i < to; i++) {
        uint64_t *v = rkv_u64map_put(&s->inflight, r->hashes[i]);
        if ((*v & 0xffffffffu) == 0)
            *v = (uint64_t)from << 32;
        (*v)++;
    }
    r->inflight_to = to;
}

void rkv_inflight_drop(rkv_sched *s, rkv_sched_req *r, uint32_t upto)
{
    uint32_t end = upto < r->inflight_to ? upto : r->inflight_to;
    for (uint32_t i = r->inflight_from; i < end; i++) {
        uint64_t *c = rkv_u64map_get(&s->inflight, r->hashes[i]);
        if (c == NULL)
            continue;
        if ((--*c & 0xffffffffu) == 0)
            rkv_u64map_del(&s->inflight, r->hashes[i]);
    }
    if (end > r->inflight_from)
        r->inflight_from = end;
}

rkv_status rkv_sched_set_time(rkv_sched *s, double now_ms)
{
    uint64_t t = 0;
    if (now_ms >= 18446744073709549568.0) /* the largest double < 2^64 */
        t = UINT64_MAX;
    else if (now_ms > 0)
        t = (uint64_t)now_ms;
    rkv_retention_stats rs;
    rkv_status st = rkv_tree_retention_stats(s->tree, &rs);
    if (st != RKV_OK)
        return st;
    /* the tree's time may have moved ahead through direct calls */
    if (t < rs.now_ms)
        t = rs.now_ms;
    if (t < s->now_ms)
        t = s->now_ms;
    st = rkv_tree_set_time(s->tree, t);
    if (st == RKV_OK)
        s->now_ms = t;
    return st;
}

/* Applies r's retention to its locked pages tokens[0..locked_pages * P).
 * final: r lets go of them now, so a pin covers what was computed even when
 * that is less than pin_tokens; otherwise the pin waits for all of them. */
static void rkv_sched_req_retain(rkv_sched *s, rkv_sched_req *r, int final)
{
    if (!r->has_retention || r->locked_pages == 0)
        return;
    size_t n = (size_t)r->locked_pages * s->P;
    rkv_retention ret = r->retention;
    if (ret.pin_tokens > n)
        ret.pin_tokens = final ? n : 0;
    if (ret.pin_tokens < s->P)
        ret.pin_tokens = 0; /* no full page: no pin */
    if (ret.priority < 0 && ret.pin_tokens == 0)
        return;
    /* a time that does not go back (no pin expires on the way: time only
     * moves at step and commit, and here stays where they left it) */
    rkv_status st = rkv_sched_set_time(s, 0.0);
    /* at the tree's last instant a pin could only be born expired (the
     * tree refuses it): the priority still applies */
    if (st == RKV_OK && s->now_ms == UINT64_MAX) {
        ret.pin_tokens = 0;
        if (ret.priority_duration_ms > 0)
            ret.priority = -1; /* it would revert at once */
        if (ret.priority < 0)
            return;
    }
    if (st == RKV_OK)
        st = rkv_tree_retain(s->tree, r->ns, r->tokens, n, &ret, s->now_ms,
                             NULL);
    if (st == RKV_ERR_PIN_CAP) {
        s->st.pins_refused++;
        if (ret.priority < 0)
            return;
        ret.pin_tokens = 0;
        st = rkv_tree_retain(s->tree, r->ns, r->tokens, n, &ret, s->now_ms,
                             NULL);
    }
    if (st == RKV_OK)
        s->st.retains++;
    else
        s->st.retain_failed++;
}

/* Inserts r's computed full pages; 1 if the tree now holds more of them
 * under r's lock. */
static int rkv_sched_req_insert(rkv_sched *s, rkv_sched_req *r)
{
    uint32_t np = r->kv_len / s->P;
    if (np <= r->locked_pages)
        return 0;
    if (rkv_ensure_scratch(s, np) != RKV_OK)
        return 0;
    rkv_insert_result res;
    rkv_status st = rkv_tree_insert(s->tree, r->ns, r->tokens,
                                    (size_t)np * s->P, r->blocks, s->scratch,
                                    &res);
    if (st != RKV_OK)
        return 0; /* keeps its own references; retried at the next insert */
    /* hold the new path before anything else can happen to it */
    rkv_lease lease;
    if (rkv_tree_lock(s->tree, res.node, &lease) != RKV_OK)
        return 0;
    /* the node must end the inserted path: with tiers, a page of it may be
     * LOADING for another request (not on the device, not insertable);
     * then keep the request's own references and retry at the next
     * insert */
    rkv_node_info ni;
    if (rkv_tree_node_info(s->tree, res.node, &ni) != RKV_OK ||
        ni.depth_tokens != (size_t)np * s->P) {
        (void)rkv_tree_unlock(s->tree, &lease);
        return 0;
    }
    const rkv_block_id *tree_blocks = r->blocks;
    if (res.num_dups > 0) {
        rkv_match m;
        st = rkv_tree_match(s->tree, r->ns, r->tokens, (size_t)np * s->P,
                            s->scratch, RKV_MATCH_PEEK, &m);
        if (st != RKV_OK || m.num_blocks < np) {
            /* cannot happen (the path is locked); stay consistent */
            (void)rkv_tree_unlock(s->tree, &lease);
            return 0;
        }
        tree_blocks = s->scratch;
    }
    (void)rkv_tree_unlock(s->tree, &r->lease);
    for (uint32_t i = r->locked_pages; i < np; i++) {
        (void)rkv_pool_unref(s->pool, r->blocks[i]);
        r->blocks[i] = tree_blocks[i];
    }
    r->locked_pages = np;
    r->lock_node = res.node;
    r->lease = lease;
    rkv_inflight_drop(s, r, np);
    return 1;
}

void rkv_sched_req_insert_computed(rkv_sched *s, rkv_sched_req *r)
{
    if (rkv_sched_req_insert(s, r))
        rkv_sched_req_retain(s, r, 0);
}

void rkv_sched_req_release(rkv_sched *s, rkv_sched_req *r)
{
    (void)rkv_sched_req_insert(s, r);
    if (r->kv_len > r->cached_len) /* it ran: not an admission undone */
        rkv_sched_req_retain(s, r, 1);
    rkv_inflight_drop(s, r, UINT32_MAX);
    r->inflight_from = r->inflight_to = 0;
    (void)rkv_tree_unlock(s->tree, &r->lease); /* zeroes r->lease */
    rkv_sched_req_shrink(s, r, 0); /* keeps the locked (tree-held) pages */
    r->nblocks = 0;
    r->locked_pages = 0;
    memset(&r->lock_node, 0, sizeof r->lock_node);
    r->kv_len = 0;
    r->sched_q = 0;
}

rkv_status rkv_sched_req_admit(rkv_sched *s, rkv_sched_req *r)
{
    /* match at most len - 1 tokens: the last one must run to sample */
    size_t n = r->len - 1;
    uint32_t total = (r->len + s->P - 1) / s->P;
    rkv_status st = rkv_ensure_scratch(s, total);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&r->blocks, &r->blocks_cap, total,
                            sizeof *r->blocks);
    if (st != RKV_OK)
        return st;
    rkv_match m;
    /* match_tiers, not plain match: its non-peek call is what counts a
     * hit for the selective write policy (and the tier hit stats); with
     * no tier attached it is the plain match */
    st = rkv_tree_match_tiers(s->tree, r->ns, r->tokens, n, s->scratch, 0, &m,
                              NULL);
    if (st != RKV_OK)
        return st;
    st = rkv_tree_lock(s->tree, m.node, &r->lease);
    if (st != RKV_OK)
        return st;
    memcpy(r->blocks, s->scratch, (size_t)m.num_blocks * sizeof *r->blocks);
    r->nblocks = r->locked_pages = m.num_blocks;
    r->lock_node = m.node;
    r->kv_len = r->cached_len = (uint32_t)m.matched_tokens;
    r->prefilling = 1;
    r->sched_q = 0;
    s->st.prompt_tokens += r->len;
    s->st.cached_tokens += m.matched_tokens;
    /* its pages go in flight once the admission sticks (rkv_step_admit):
     * an admission undone for lack of room, which a full pool repeats at
     * every step, then costs no per-page work */
    r->inflight_from = r->inflight_to = 0;
    return RKV_OK;
}

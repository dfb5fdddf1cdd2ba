/*
 * sched/sched_step.c -- one scheduling step (rkv_sched_step) and its
 * results (rkv_sched_commit).
 *
 * A step, at most max_batch_tokens new tokens and max_running requests:
 *   1. Running requests: decodes first, 1 token each, then requests still
 *      in prefill get their next chunk (what is left of the budget); most
 *      important first within each (priority desc, then arrival, then
 *      submission). Its block table
 *      grows through rkv_tree_alloc_blocks (which evicts unlocked LRU
 *      leaves). When even that fails, the least important running request
 *      (priority asc, then latest arrival) is preempted: its computed full
 *      pages are inserted into the tree (so its prefix stays cached), it is
 *      unlocked, releases every block, and goes back to the waiting queue
 *      with its original arrival time and its generated tokens (it re-matches
 *      on readmission). The victim can be the request itself. A request that
 *      is alone always fits (submit refuses any that could not), so this
 *      never deadlocks.
 *   2. Admission in the policy's order (sched_order.c) while slots and budget
 *      remain: in-batch de-duplication first -- a candidate whose first
 *      uncached pages (>= dedup_min_tokens) are being prefilled by a running
 *      request is held (stats.dedup_holds) and looked at again next step;
 *      once those pages are inserted it simply hits the cache. A held
 *      request stays held while its next uncached page is in flight (even
 *      when fewer than dedup_min_tokens remain), so a shared prefix is
 *      computed exactly once under chunked prefill too. Otherwise a
 *      non-peek match + lock, then blocks for its first chunk.
 *      Headroom (as SGLang's new_token_ratio): a candidate is admitted only
 *      if, after its first chunk, free + evictable blocks still cover what
 *      the running requests and itself will need: the rest of each prefill
 *      plus ratio * remaining output tokens. ratio starts at 0.7, decays
 *      by 0.001 per step to 0.1 and jumps by 0.2 (at most 1) after a step
 *      that preempted, so admissions do not grab the blocks that decodes
 *      need a few steps later (without it, an undersized pool thrashes:
 *      admit, preempt, recompute). The guard is skipped when nothing runs,
 *      so a lone request always starts. Admission
 *      stops at the first candidate that does not fit the pool (so an older
 *      or overdue request is not overtaken by smaller ones forever), and it
 *      never preempts.
 *      Tiers (sched_tier.c): the step starts with rkv_tree_tier_poll;
 *      a candidate whose host/disk continuation is worth loading gets a
 *      load instead (it keeps a slot, takes no tokens, is skipped until
 *      its own ticket completes); loading requests' remaining needs are
 *      part of the headroom reserve.
 *   3. The plan: prefills first, then decodes; CSR block table after the
 *      step's tokens are appended; the copies the step queued.
 * Time: step and commit move the tree's time to their now_ms (never back:
 * an earlier now_ms leaves it), so pins expire and the retention of the
 * pages inserted at commit (rkv_request_desc.retention) counts from then.
 * Headroom and growth count pinned pages that only pins hold as available
 * (rkv_tree_alloc_blocks revokes them when nothing else serves).
 * Nothing advances until commit: kv_len, sampled tokens and tree insertion
 * happen there. Between step and commit a request may be aborted (commit
 * skips it). A step with an empty plan needs no commit.
 * Failure: a step that fails for host memory after admitting leaves the
 * admitted requests running (a consistent state, verified by
 * rkv_sched_check) and cancels the step's token growth.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "radix/tree_tokens.h"
#include "sched/sched_internal.h"

/* More important first: priority desc, arrival asc, submission asc. */
static int rkv_cmp_importance(const void *a, const void *b)
{
    const rkv_sched_req *x = *(rkv_sched_req *const *)a, *y = *(rkv_sched_req *const *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->arrival_ms != y->arrival_ms)
        return x->arrival_ms < y->arrival_ms ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

/* Capacity reserved at step start, so preemption cannot fail. running[]
 * and plan_reqs[] hold at most every live request, and at most
 * max_running: sized by the smaller, so a huge limit costs nothing. */
static rkv_status rkv_step_reserve(rkv_sched *s)
{
    uint32_t R = s->nrunning;
    uint64_t live = (uint64_t)s->nrunning + s->nwaiting;
    uint32_t slots = live < s->cfg.max_running ? (uint32_t)live
                                               : s->cfg.max_running;
    rkv_status st = rkv_ensure_cap((void **)&s->waiting, &s->waiting_cap,
                                   s->nwaiting + R + 1, sizeof *s->waiting);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&s->order.add, &s->order.addcap,
                            s->order.nadd + R + 1, sizeof *s->order.add);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&s->arrivals.add, &s->arrivals.addcap,
                            s->arrivals.nadd + R + 1,
                            sizeof *s->arrivals.add);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&s->running, &s->running_cap, slots,
                            sizeof *s->running);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&s->plan_reqs, &s->plan_cap, slots,
                            sizeof *s->plan_reqs);
    return st;
}

static void rkv_preempt(rkv_sched *s, rkv_sched_req *r)
{
    rkv_sched_tier_swap_out(s, r); /* swap instead of recompute, when cheaper */
    rkv_sched_req_release(s, r);
    rkv_sched_running_remove(s, r);
    (void)rkv_sched_waiting_add(s, r); /* capacity reserved: cannot fail */
    r->preemptions++;
    s->st.preemptions++;
}

/* Does r's first uncached part hit pages being prefilled by a running
 * request, for at least dedup_min_tokens? */
static int rkv_dedup_hold(rkv_sched *s, rkv_sched_req *r)
{
    uint32_t P = s->P, min = s->cfg.dedup_min_tokens;
    if (min == 0 || s->inflight.count == 0)
        return 0;
    size_t matched;
    if (s->cfg.policy == RKV_POLICY_LPM || s->cfg.policy == RKV_POLICY_BOUNDED ||
        s->cfg.policy == RKV_POLICY_DFS) {
        matched = r->peek_tokens;
    } else {
        rkv_match m;
        if (rkv_tree_match(s->tree, r->ns, r->tokens, r->len - 1, NULL,
                           RKV_MATCH_PEEK, &m) != RKV_OK)
            return 0;
        matched = m.matched_tokens;
    }
    uint32_t from = (uint32_t)(matched / P), full = r->len / P;
    /* The overlap with the computation in flight counts from where that
     * computation started (stored with the page hash), so pages it already
     * inserted count too: under chunked prefill a follower stays held until
     * the whole shared part is cached. A request already held stays held
     * while its next uncached page is in flight. */
    if (from >= full || rkv_sched_req_hashes(s, r, full) != RKV_OK)
        return 0;
    const uint64_t *v = rkv_u64map_get(&s->inflight, r->hashes[from]);
    if (v == NULL)
        return 0;
    uint32_t start = (uint32_t)(*v >> 32);
    uint32_t run = 1;
    while (from + run < full &&
           rkv_u64map_get(&s->inflight, r->hashes[from + run]) != NULL &&
           ((uint64_t)(from - (start < from ? start : from)) + run) * P < min)
        run++;
    uint64_t overlap = (uint64_t)(from - (start < from ? start : from)) + run;
    if (!r->dedup_held && overlap * P < min)
        return 0;
    r->dedup_held = 1;
    return 1;
}

/* Room in r->tokens for the token the commit will append (grows
 * geometrically up to r->cap, so a request's memory follows what it
 * generated, not its max_new_tokens). */
static rkv_status rkv_sched_req_reserve_token(rkv_sched_req *r)
{
    if (r->len < r->tok_cap)
        return RKV_OK;
    if (r->len >= r->cap) /* it finished at its last commit */
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_step: request %llu "
                             "is planned with all %u tokens",
                             (unsigned long long)r->id, r->cap);
    uint64_t c = (uint64_t)r->tok_cap * 2;
    if (c > r->cap)
        c = r->cap;
    int32_t *t = rkv_sched_mem_realloc(r->tokens, (size_t)c * sizeof *t);
    if (t == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
    r->tokens = t;
    r->tok_cap = (uint32_t)c;
    return RKV_OK;
}

static rkv_status rkv_plan_build(rkv_sched *s)
{
    uint32_t n = s->plan_n, P = s->P;
    uint64_t ntok = 0, nkv = 0;
    for (uint32_t i = 0; i < n; i++) {
        rkv_sched_req *r = s->plan_reqs[i];
        ntok += r->sched_q;
        nkv += (r->kv_len + r->sched_q + P - 1) / P;
        if (r->kv_len + r->sched_q == r->len) { /* samples at commit */
            rkv_status st = rkv_sched_req_reserve_token(r);
            if (st != RKV_OK)
                return st;
        }
    }
    if (ntok > UINT32_MAX / 2 || nkv > UINT32_MAX / 2)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: plan too large");
    uint32_t rc = s->plan_arrays_cap;
    rkv_status st = RKV_OK;
    if (n + 1 > rc) {
        uint32_t c = n + 1 > 2 * rc ? n + 1 : 2 * rc;
        void **arrs[] = {(void **)&s->plan_ids,    (void **)&s->plan_qo,
                         (void **)&s->plan_prefix, (void **)&s->plan_cached,
                         (void **)&s->plan_kvptr,  (void **)&s->plan_last,
                         (void **)&s->plan_emits};
        size_t sz[] = {sizeof(uint64_t), 4, 4, 4, 4, 4, 1};
        for (int k = 0; k < 7 && st == RKV_OK; k++) {
            uint32_t cap = rc;
            st = rkv_ensure_cap(arrs[k], &cap, c, sz[k]);
        }
        if (st != RKV_OK)
            return st;
        s->plan_arrays_cap = c;
    }
    st = rkv_ensure_cap((void **)&s->plan_kvidx, &s->plan_kvidx_cap,
                        (uint32_t)nkv + 1, sizeof *s->plan_kvidx);
    if (st != RKV_OK)
        return st;
    if (ntok + 1 > s->plan_tok_cap) {
        uint32_t c = s->plan_tok_cap;
        st = rkv_ensure_cap((void **)&s->plan_slots, &c, (uint32_t)ntok + 1,
                            sizeof *s->plan_slots);
        if (st == RKV_OK) {
            c = s->plan_tok_cap;
            st = rkv_ensure_cap((void **)&s->plan_inputs, &c, (uint32_t)ntok + 1,
                                sizeof *s->plan_inputs);
        }
        if (st != RKV_OK)
            return st;
        s->plan_tok_cap = c;
    }
    /* prefills first (stable), then decodes */
    uint32_t np = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (s->plan_reqs[i]->prefilling) {
            rkv_sched_req *t = s->plan_reqs[i];
            memmove(&s->plan_reqs[np + 1], &s->plan_reqs[np],
                    (size_t)(i - np) * sizeof *s->plan_reqs);
            s->plan_reqs[np++] = t;
        }
    }
    uint32_t tok = 0, kv = 0;
    s->plan_qo[0] = 0;
    s->plan_kvptr[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        rkv_sched_req *r = s->plan_reqs[i];
        uint32_t total = r->kv_len + r->sched_q;
        uint32_t nb = (total + P - 1) / P;
        s->plan_ids[i] = r->id;
        s->plan_prefix[i] = r->kv_len;
        s->plan_cached[i] = r->cached_len < r->kv_len ? r->cached_len : r->kv_len;
        memcpy(s->plan_kvidx + kv, r->blocks, (size_t)nb * sizeof *r->blocks);
        kv += nb;
        s->plan_kvptr[i + 1] = kv;
        s->plan_last[i] = total - (nb - 1) * P;
        for (uint32_t p = r->kv_len; p < total; p++) {
            s->plan_slots[tok] = r->blocks[p / P] * P + p % P;
            s->plan_inputs[tok] = r->tokens[p];
            tok++;
        }
        s->plan_qo[i + 1] = tok;
        s->plan_emits[i] = total == r->len;
    }
    rkv_batch_plan *pl = &s->plan;
    pl->num_reqs = n;
    pl->num_prefill = np;
    pl->num_tokens = tok;
    pl->req_ids = s->plan_ids;
    pl->qo_indptr = s->plan_qo;
    pl->prefix_len = s->plan_prefix;
    pl->cached_len = s->plan_cached;
    pl->kv_indptr = s->plan_kvptr;
    pl->kv_indices = s->plan_kvidx;
    pl->kv_last_page_len = s->plan_last;
    pl->slots = s->plan_slots;
    pl->input_tokens = s->plan_inputs;
    pl->emits_token = s->plan_emits;
    return RKV_OK;
}

static void rkv_plan_cancel(rkv_sched *s)
{
    for (uint32_t i = 0; i < s->plan_n; i++) {
        rkv_sched_req *r = s->plan_reqs[i];
        rkv_sched_req_shrink(s, r, r->kv_len);
        r->sched_q = 0;
    }
    s->plan_n = 0;
}

/* Takes a planned request back out of this step's plan. */
static void rkv_plan_remove(rkv_sched *s, rkv_sched_req *r, uint32_t *budget)
{
    for (uint32_t i = 0; i < s->plan_n; i++) {
        if (s->plan_reqs[i] == r) {
            memmove(&s->plan_reqs[i], &s->plan_reqs[i + 1],
                    (size_t)(s->plan_n - i - 1) * sizeof *s->plan_reqs);
            s->plan_n--;
            break;
        }
    }
    *budget += r->sched_q;
    r->sched_q = 0;
}

/* Step 1: running requests. Decodes first (one token each, so a long
 * chunked prefill cannot stall every decode), then prefill chunks with what
 * is left of the budget; within each pass the most important first. */
static rkv_status rkv_step_running(rkv_sched *s, uint32_t *budget)
{
    uint32_t R = s->nrunning;
    if (R == 0)
        return RKV_OK;
    rkv_sched_req **ord = rkv_sched_mem_malloc((size_t)R * sizeof *ord);
    if (ord == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
    memcpy(ord, s->running, (size_t)R * sizeof *ord);
    qsort(ord, R, sizeof *ord, rkv_cmp_importance);
    uint32_t last = R; /* ord[0..last) are still running */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < last; i++) {
            rkv_sched_req *r = ord[i];
            if (r->prefilling != pass || r->sched_q > 0)
                continue;
            uint32_t left = r->len - r->kv_len;
            uint32_t q = r->prefilling ? (left < *budget ? left : *budget)
                                       : (*budget > 0 ? 1 : 0);
            if (q == 0)
                continue;
            for (;;) {
                rkv_status st = rkv_sched_req_grow(s, r, r->kv_len + q);
                if (st == RKV_OK) {
                    r->sched_q = q;
                    *budget -= q;
                    s->plan_reqs[s->plan_n++] = r;
                    break;
                }
                if (st != RKV_ERR_NO_SPACE) {
                    free(ord);
                    return st;
                }
                /* the least important running request goes back */
                rkv_sched_req *victim = ord[--last];
                if (victim->sched_q > 0)
                    rkv_plan_remove(s, victim, budget);
                rkv_preempt(s, victim);
                if (victim == r)
                    break;
                /* the budget may have grown back: a chunk may grow too */
                if (r->prefilling && q < left && q < *budget)
                    q = left < *budget ? left : *budget;
            }
        }
    }
    free(ord);
    return RKV_OK;
}

/* Blocks r will still need beyond what it holds (estimate). */
static uint64_t rkv_future_blocks(const rkv_sched *s, const rkv_sched_req *r)
{
    double tokens = (double)r->len + s->new_token_ratio *
                                         (double)(r->max_new - r->generated);
    uint64_t need = (uint64_t)((tokens + s->P - 1) / s->P);
    return need > r->nblocks ? need - r->nblocks : 0;
}

/* Blocks a waiting request with a load will still need beyond its
 * loaded pages (0 without a load). */
static uint64_t rkv_loading_blocks(const rkv_sched *s, const rkv_sched_req *r)
{
    if (r->load_ticket == 0 && !r->load_ready)
        return 0;
    uint64_t f = rkv_future_blocks(s, r);
    return f > r->load_pages ? f - r->load_pages : 0;
}

/* What allocations through the tree can still get: free blocks, unlocked
 * unpinned pages, and pinned pages that only pins hold, which
 * rkv_tree_alloc_blocks revokes when the rest falls short; so a pin never
 * holds back an admission that its revocation would let through. */
static uint64_t rkv_avail_blocks(const rkv_sched *s)
{
    rkv_tree_stats ts;
    uint64_t pinned = 0;
    if (rkv_tree_get_stats(s->tree, &ts) != RKV_OK ||
        rkv_tree_pins_yieldable(s->tree, &pinned) != RKV_OK)
        return 0;
    return (uint64_t)rkv_pool_num_free(s->pool) + ts.evictable_blocks +
           pinned;
}

/* Step 2: admissions. */
static rkv_status rkv_step_admit(rkv_sched *s, double now_ms, uint32_t *budget)
{
    uint64_t reserve = 0;
    for (uint32_t i = 0; i < s->nrunning; i++)
        reserve += rkv_future_blocks(s, s->running[i]);
    /* a request with a load will need the rest of its blocks too */
    for (uint32_t i = 0; s->nloading > 0 && i < s->nwaiting; i++)
        reserve += rkv_loading_blocks(s, s->waiting[i]);
    rkv_order_iter it;
    rkv_order_iter_init(s, &it, now_ms);
    rkv_sched_req *r;
    /* requests with a load hold a slot: once slots run out, only a ready
     * one (its slot is its own) can still be admitted */
    while (*budget > 0 &&
           (s->nrunning + s->nloading < s->cfg.max_running ||
            s->nloading > s->tickets.count) &&
           (r = rkv_order_next(s, &it)) != NULL) {
        if (r->load_ticket != 0)
            continue; /* waits for its own load, nobody waits for it */
        if (!r->load_ready &&
            s->nrunning + s->nloading >= s->cfg.max_running)
            continue;
        if (rkv_dedup_hold(s, r)) {
            s->st.dedup_holds++;
            continue;
        }
        r->dedup_held = 0;
        if (rkv_sched_prefetch_holds(s, r))
            continue; /* its prefetch has not arrived: holds nothing */
        if (s->tiers_live && !r->load_ready) {
            /* a load only when the whole request fits beside what the
             * others will need (else its loaded pages could hold the pool
             * while nothing can run) */
            uint64_t avail = rkv_avail_blocks(s);
            uint64_t room = avail > reserve ? avail - reserve : 0;
            if (rkv_future_blocks(s, r) > room)
                room = 0;
            int loading = 0;
            rkv_status lst = rkv_sched_tier_try_load(s, r, room, &loading);
            if (lst != RKV_OK)
                return lst;
            if (loading) { /* its own load (1), or another's (2) */
                reserve += rkv_loading_blocks(s, r);
                continue;
            }
        }
        uint64_t own = rkv_loading_blocks(s, r); /* counted in reserve */
        uint64_t pt = s->st.prompt_tokens, ct = s->st.cached_tokens;
        rkv_status st = rkv_sched_req_admit(s, r);
        if (st != RKV_OK)
            return st;
        uint32_t left = r->len - r->kv_len;
        uint32_t q = left < *budget ? left : *budget;
        st = rkv_sched_req_grow(s, r, r->kv_len + q);
        r->sched_q = q;
        uint64_t mine = st == RKV_OK ? rkv_future_blocks(s, r) : 0;
        r->sched_q = 0;
        if (st == RKV_OK && s->nrunning > 0 &&
            rkv_avail_blocks(s) + own < reserve + mine)
            st = RKV_ERR_NO_SPACE; /* no headroom: undo below */
        if (st != RKV_OK) {
            rkv_sched_req_release(s, r); /* nothing computed: a clean undo */
            s->st.prompt_tokens = pt;
            s->st.cached_tokens = ct;
            if (st != RKV_ERR_NO_SPACE)
                return st;
            /* the pool is full: wait for running ones; when none runs,
             * completed loads must not hold it (they would wait for each
             * other forever): their pages become ordinary cached pages */
            if (s->nrunning == 0)
                rkv_sched_tier_release_ready(s, r);
            break;
        }
        rkv_inflight_add(s, r, r->locked_pages, r->len / s->P);
        rkv_sched_tier_admitted(s, r, r->cached_len);
        rkv_sched_waiting_remove(s, r);
        r->state = RKV_REQ_RUNNING;
        r->ridx = s->nrunning;
        s->running[s->nrunning++] = r;
        r->sched_q = q;
        *budget -= q;
        s->plan_reqs[s->plan_n++] = r;
        reserve += mine;
        reserve = reserve > own ? reserve - own : 0;
    }
    return RKV_OK;
}

rkv_status rkv_sched_step(rkv_sched *s, double now_ms,
                          const rkv_batch_plan **plan_out)
{
    if (s == NULL || plan_out == NULL)
        return rkv_null_arg("rkv_sched_step", s, "sched", "plan_out");
    if (s->plan_pending)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_sched_step: the previous plan (%u requests) "
                             "was not committed", s->plan_n);
    /* the tree's time first: pins that expired by now_ms free their pages
     * for this step */
    rkv_status st = rkv_sched_set_time(s, now_ms);
    s->ncopies = 0;
    /* completed loads make their requests admissible in this step */
    if (st == RKV_OK)
        st = rkv_sched_tier_poll(s);
    if (st == RKV_OK) /* before the order: the pages it moves count as host */
        st = rkv_sched_prefetch_step(s, now_ms);
    if (st == RKV_OK)
        st = rkv_step_reserve(s);
    if (st == RKV_OK)
        st = rkv_order_update(s);
    if (st != RKV_OK)
        return st;
    uint32_t budget = s->cfg.max_batch_tokens;
    s->plan_n = 0;
    uint64_t preempted = s->st.preemptions;
    st = rkv_step_running(s, &budget);
    if (s->st.preemptions != preempted)
        s->new_token_ratio = s->new_token_ratio + 0.2 < 1.0
                                 ? s->new_token_ratio + 0.2 : 1.0;
    else
        s->new_token_ratio = s->new_token_ratio - 0.001 > 0.1
                                 ? s->new_token_ratio - 0.001 : 0.1;
    uint64_t released = s->st.loads_released;
    if (st == RKV_OK)
        st = rkv_step_admit(s, now_ms, &budget);
    /* With nothing running, an admission that found the pool held by
     * completed loads released them (their pages became ordinary cached
     * pages) and stopped. Admit again at once: an empty plan with nothing
     * running and nothing loading tells the engine there is no work, and
     * it may then wait for an arrival while these requests could run. */
    if (st == RKV_OK && s->plan_n == 0 && s->nrunning == 0 &&
        s->st.loads_released != released)
        st = rkv_step_admit(s, now_ms, &budget);
    if (st == RKV_OK)
        st = rkv_plan_build(s);
    if (st != RKV_OK) {
        rkv_plan_cancel(s);
        return st;
    }
    rkv_sched_tier_plan(s);
    s->plan_pending = s->plan_n > 0;
    s->st.steps++;
    uint64_t used = (uint64_t)s->num_blocks - rkv_pool_num_free(s->pool);
    if (used > s->st.peak_blocks_used)
        s->st.peak_blocks_used = used;
    *plan_out = &s->plan;
    return RKV_OK;
}

rkv_status rkv_sched_commit(rkv_sched *s, const int32_t *next_tokens,
                            const uint8_t *finished, double now_ms)
{
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_sched_commit: NULL sched");
    if (!s->plan_pending)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_sched_commit: no step is waiting for "
                             "results");
    for (uint32_t i = 0; i < s->plan_n; i++) {
        if (s->plan_reqs[i] == NULL || !s->plan_emits[i])
            continue;
        if (next_tokens == NULL)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "rkv_sched_commit: NULL next_tokens");
        /* one test: the bits no stored id may have; the message says which */
        if (!((uint32_t)next_tokens[i] & rkv_tok_bad_bits(s->tree)))
            continue;
        if (next_tokens[i] < 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "rkv_sched_commit: next_tokens[%u] = %d is "
                                 "negative", i, next_tokens[i]);
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_sched_commit: next_tokens[%u] = %d is >= "
                             "2^24 (the tree stores 3-byte ids: "
                             "token_bytes 3)", i, next_tokens[i]);
    }
    /* retention deadlines of the pages inserted below count from now */
    rkv_status st = rkv_sched_set_time(s, now_ms);
    if (st != RKV_OK)
        return st;
    for (uint32_t i = 0; i < s->plan_n; i++) {
        rkv_sched_req *r = s->plan_reqs[i];
        if (r == NULL)
            continue;
        int was_prefill = r->prefilling;
        r->kv_len += r->sched_q;
        if (was_prefill)
            s->st.computed_tokens += r->sched_q;
        r->sched_q = 0;
        int done = 0;
        if (s->plan_emits[i]) {
            r->tokens[r->len++] = next_tokens[i];
            r->generated++;
            r->prefilling = 0;
            done = (finished != NULL && finished[i]) ||
                   r->generated >= r->max_new || r->len >= r->cap;
        }
        if (done) {
            r->finish = finished != NULL && finished[i] ? RKV_FINISH_STOP
                                                        : RKV_FINISH_LENGTH;
            rkv_sched_req_release(s, r);
            /* unlocked now: the session's own pages can be marked */
            if (r->has_retention && r->retention.session_end &&
                rkv_tree_session_end(s->tree, r->ns, r->tokens, r->len,
                                     r->retention.owner, NULL) == RKV_OK)
                s->st.sessions_ended++;
            rkv_sched_running_remove(s, r);
            rkv_sched_bury(s, r);
            s->st.finished++;
        } else if (was_prefill) {
            rkv_sched_req_insert_computed(s, r);
        }
    }
    s->plan_n = 0;
    s->plan_pending = 0;
    return RKV_OK;
}

/*
 * sched/sched.c -- the scheduler object: configuration, policy names,
 * create/destroy, submit, abort, stats, and the waiting/running sets.
 *
 * Submission rules (each refusal changes nothing):
 *   - RKV_ERR_DUPLICATE: the id is live (waiting or running). Finished and
 *     aborted ids may be reused.
 *   - RKV_ERR_INVALID_ARG: NULL, prompt_len 0, a negative token,
 *     max_new_tokens 0, or prompt_len + max_new_tokens overflowing.
 *   - RKV_ERR_NO_SPACE: the request could never fit the pool alone. Its KV
 *     peaks at prompt_len + max_new_tokens - 1 tokens (the last sampled
 *     token is never run through the model), so it is refused when
 *     ceil((prompt_len + max_new_tokens - 1) / P) > num_blocks. Any request
 *     accepted can therefore always run when it is the only one running.
 * Invariants: every live request is in by_id and in exactly one of waiting[]
 * (state WAITING, r == waiting[i] at some i) and running[] (state RUNNING,
 * running[r->ridx] == r).
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "events/store_log.h"
#include "radix/tree_tokens.h"
#include "sched/sched_internal.h"

static const char *const rkv_policy_names[] = {"fcfs", "lpm", "dfs",
                                               "priority", "bounded"};

rkv_status rkv_policy_from_name(const char *name, rkv_policy *out)
{
    if (name == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_policy_from_name: NULL");
    for (int i = 0; i < 5; i++) {
        if (strcmp(name, rkv_policy_names[i]) == 0) {
            *out = (rkv_policy)i;
            return RKV_OK;
        }
    }
    return rkv_set_error(RKV_ERR_INVALID_ARG,
                         "rkv_policy_from_name: unknown policy '%s' (fcfs, "
                         "lpm, dfs, priority, bounded)", name);
}

const char *rkv_policy_name(rkv_policy policy)
{
    if ((unsigned)policy < 5)
        return rkv_policy_names[policy];
    return "unknown";
}

void rkv_sched_config_init(rkv_sched_config *cfg)
{
    if (cfg == NULL)
        return;
    /* The fields not named here are 0. */
    *cfg = (rkv_sched_config){.policy = RKV_POLICY_LPM, .max_batch_tokens = 8192,
                              .max_running = 256, .dedup_min_tokens = 256,
                              .max_wait_ms = 10000.0, .aging_per_s = 1.0, .use_tiers = 1};
}

rkv_status rkv_ensure_cap(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return RKV_OK;
    uint64_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    if (c > UINT32_MAX)
        c = UINT32_MAX;
    void *q = rkv_sched_mem_realloc(*p, (size_t)c * elem);
    if (q == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched: out of memory (%u)",
                             need);
    *p = q;
    *cap = (uint32_t)c;
    return RKV_OK;
}

/* The ranges documented in radixkv.h next to each field. */
static rkv_status rkv_sched_config_validate(const rkv_sched_config *c)
{
    static const char fn[] = "rkv_sched_create";
    if ((unsigned)c->policy > RKV_POLICY_BOUNDED)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: policy %d is out of range [%d, %d] (fcfs, "
                             "lpm, dfs, priority, bounded)", fn, (int)c->policy,
                             (int)RKV_POLICY_FCFS, (int)RKV_POLICY_BOUNDED);
    if (c->max_batch_tokens < 1 ||
        c->max_batch_tokens > RKV_SCHED_MAX_BATCH_TOKENS)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: max_batch_tokens %u is out of range [1, %u]",
                             fn, c->max_batch_tokens,
                             RKV_SCHED_MAX_BATCH_TOKENS);
    if (c->max_running < 1)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: max_running %u is out of range [1, %u]", fn,
                             c->max_running, UINT32_MAX);
    /* dedup_min_tokens: every value is meaningful (0 disables) */
    if (!(c->max_wait_ms >= 0)) /* NaN too; +inf: never overdue */
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: max_wait_ms %g is out of range [0, +inf]",
                             fn, c->max_wait_ms);
    if (!(c->aging_per_s >= 0) || !isfinite(c->aging_per_s))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: aging_per_s %g is out of range [0, %g] "
                             "(finite)", fn, c->aging_per_s, DBL_MAX);
    const double costs[3] = {c->compute_ms_per_token, c->host_load_ms_per_page,
                             c->disk_load_ms_per_page};
    static const char *const names[3] = {"compute_ms_per_token",
                                         "host_load_ms_per_page",
                                         "disk_load_ms_per_page"};
    for (int i = 0; i < 3; i++)
        if (!(costs[i] >= 0) || !isfinite(costs[i]))
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: %s %g is out of range [0, %g] (finite)",
                                 fn, names[i], costs[i], DBL_MAX);
    if ((unsigned)c->prefetch > RKV_PREFETCH_TIMEOUT)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: prefetch %d is out of range [%d, %d] (off, "
                             "best effort, wait, timeout)", fn, c->prefetch,
                             (int)RKV_PREFETCH_OFF, (int)RKV_PREFETCH_TIMEOUT);
    if (!(c->prefetch_timeout_ms >= 0) || !isfinite(c->prefetch_timeout_ms))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: prefetch_timeout_ms %g is out of range [0, %g] "
                             "(finite)", fn, c->prefetch_timeout_ms, DBL_MAX);
    return RKV_OK;
}

rkv_status rkv_sched_create(rkv_tree *tree, const rkv_sched_config *cfg,
                            rkv_sched **out)
{
    if (tree == NULL || out == NULL)
        return rkv_null_arg("rkv_sched_create", tree, "tree", "out");
    rkv_sched_config c;
    if (cfg != NULL)
        c = *cfg;
    else
        rkv_sched_config_init(&c);
    rkv_status st = rkv_sched_config_validate(&c);
    if (st != RKV_OK)
        return st;
    /* the tree's store log when tiers are attached (sched_tier.c; later
     * attached tiers get it at the first step) */
    int log_on = c.use_tiers && rkv_store_log_tiers_attached(tree);
    if (log_on && (st = rkv_tree_store_log_enable(
                       tree, rkv_sched_tier_log_cap(rkv_tree_pool(tree)))) != RKV_OK)
        return st;
    rkv_sched *s = rkv_sched_mem_calloc(1, sizeof *s);
    if (s == NULL) {
        if (log_on)
            (void)rkv_tree_store_log_enable(tree, 0);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_create: out of memory");
    }
    s->store_log_on = log_on;
    s->tree = tree;
    s->pool = rkv_tree_pool(tree);
    s->P = rkv_pool_page_size(s->pool);
    s->num_blocks = rkv_pool_num_blocks(s->pool);
    s->cfg = c;
    s->arrivals.by_arrival = 1;
    s->order.by_arrival = c.policy == RKV_POLICY_FCFS;
    s->dfs_dirty = 1;
    s->new_token_ratio = 0.7;
    *out = s;
    return RKV_OK;
}

void rkv_sched_req_free(rkv_sched_req *r)
{
    if (r == NULL)
        return;
    free(r->tokens);
    free(r->blocks);
    free(r->hashes);
    free(r);
}

void rkv_sched_destroy(rkv_sched *s)
{
    if (s == NULL)
        return;
    while (s->nrunning > 0) {
        rkv_sched_req *r = s->running[s->nrunning - 1];
        rkv_sched_req_release(s, r);
        rkv_sched_running_remove(s, r);
        rkv_sched_req_free(r);
    }
    rkv_sched_tier_destroy(s);
    if (s->store_log_on)
        (void)rkv_tree_store_log_enable(s->tree, 0); /* the scheduler's */
    for (uint32_t i = 0; i < s->nwaiting; i++)
        rkv_sched_req_free(s->waiting[i]);
    rkv_sched_free_grave(s);
    free(s->grave);
    rkv_u64map_fini(&s->by_id);
    rkv_u64map_fini(&s->memo_epoch);
    rkv_u64map_fini(&s->memo_depth);
    rkv_u64map_fini(&s->inflight);
    rkv_watch_fini(s);

    rkv_sched_queue_fini(&s->order);
    rkv_sched_queue_fini(&s->arrivals);
    free(s->waiting);
    free(s->running);
    free(s->plan_reqs);
    free(s->plan_ids);
    free(s->plan_qo);
    free(s->plan_prefix);
    free(s->plan_cached);
    free(s->plan_kvptr);
    free(s->plan_last);
    free(s->plan_kvidx);
    free(s->plan_slots);
    free(s->plan_inputs);
    free(s->plan_emits);
    free(s->scratch);
    free(s);
}

/* ---- waiting / running sets ------------------------------------------------ */

rkv_status rkv_sched_waiting_add(rkv_sched *s, rkv_sched_req *r)
{
    rkv_status st = rkv_ensure_cap((void **)&s->waiting, &s->waiting_cap,
                                   s->nwaiting + 1, sizeof *s->waiting);
    if (st != RKV_OK)
        return st;
    st = rkv_order_push(s, r);
    if (st != RKV_OK)
        return st;
    r->ridx = s->nwaiting; /* a waiting request's index in waiting[] */
    s->waiting[s->nwaiting++] = r;
    r->state = RKV_REQ_WAITING;
    return RKV_OK;
}

void rkv_sched_waiting_remove(rkv_sched *s, rkv_sched_req *r)
{
    uint32_t i = r->ridx;
    rkv_watch_remove(s, r);
    s->waiting[i] = s->waiting[--s->nwaiting];
    s->waiting[i]->ridx = i;
    r->state = RKV_REQ_RUNNING; /* callers set the final state */
    r->order_stamp++; /* its queue entries die */
    r->arrival_stamp++;
    s->order.dead++;
    s->arrivals.dead++;
    s->dfs_dirty = 1;
}

void rkv_sched_running_remove(rkv_sched *s, rkv_sched_req *r)
{
    uint32_t i = r->ridx;
    s->running[i] = s->running[--s->nrunning];
    s->running[i]->ridx = i;
}

void rkv_sched_bury(rkv_sched *s, rkv_sched_req *r)
{
    rkv_u64map_del(&s->by_id, r->id);
    r->state = RKV_REQ_FINISHED;
    s->grave[s->ngrave++] = r;
}

void rkv_sched_free_grave(rkv_sched *s)
{
    for (uint32_t i = 0; i < s->ngrave; i++)
        rkv_sched_req_free(s->grave[i]);
    s->ngrave = 0;
    s->nlimbo = 0;
}

void rkv_sched_forget_grave(rkv_sched *s, int freeable)
{
    if (freeable)
        rkv_sched_free_grave(s);
    else
        s->nlimbo = s->ngrave;
}

/* ---- submit / abort ---------------------------------------------------------- */

rkv_status rkv_sched_submit(rkv_sched *s, const rkv_request_desc *d)
{
    static const char fn[] = "rkv_sched_submit";
    if (s == NULL || d == NULL)
        return rkv_null_arg(fn, s, "sched", "request");
    if (d->prompt == NULL || d->prompt_len == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: request %llu has an empty prompt", fn,
                             (unsigned long long)d->id);
    if (d->max_new_tokens == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: request %llu has max_new_tokens 0", fn,
                             (unsigned long long)d->id);
    if ((uint64_t)d->prompt_len + d->max_new_tokens > UINT32_MAX / 2)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: request %llu is too long (%u + %u)", fn,
                             (unsigned long long)d->id, d->prompt_len,
                             d->max_new_tokens);
    if (!isfinite(d->arrival_ms))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: request %llu arrival_ms is not finite", fn,
                             (unsigned long long)d->id);
    /* one test per token: the bits no stored id may have (the sign bit,
     * and bits 24..31 in a 3-byte tree); the message says which */
    const uint32_t bad = rkv_tok_bad_bits(s->tree);
    for (uint32_t i = 0; i < d->prompt_len; i++) {
        if (!((uint32_t)d->prompt[i] & bad))
            continue;
        if (d->prompt[i] < 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: request %llu token %u is negative (%d)",
                                 fn, (unsigned long long)d->id, i,
                                 d->prompt[i]);
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: request %llu token %u is %d, >= 2^24 "
                             "(the tree stores 3-byte ids: token_bytes 3)",
                             fn, (unsigned long long)d->id, i, d->prompt[i]);
    }
    const rkv_retention *rt = d->retention;
    uint64_t ns_ttl = 0;
    if (rt != NULL && rt->pin_tokens > 0 && rt->ttl_ms == 0)
        (void)rkv_tree_namespace_ttl(s->tree, d->ns, &ns_ttl);
    if (rt != NULL &&
        (rt->priority < -1 || rt->priority > RKV_PRIORITY_MAX ||
         (rt->priority >= 0 && rt->prio_begin > rt->prio_end) ||
         (rt->priority < 0 && rt->priority_duration_ms > 0) ||
         (rt->pin_tokens > 0 && rt->ttl_ms == 0 && ns_ttl == 0)))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: request %llu retention: priority %d (-1..%d) "
                             "for %llu ms (needs a priority), range [%zu, %zu), "
                             "pin %zu tokens for %llu ms (0: namespace %llu's "
                             "TTL, %llu)",
                             fn, (unsigned long long)d->id, rt->priority,
                             RKV_PRIORITY_MAX,
                             (unsigned long long)rt->priority_duration_ms,
                             rt->prio_begin, rt->prio_end, rt->pin_tokens,
                             (unsigned long long)rt->ttl_ms,
                             (unsigned long long)d->ns,
                             (unsigned long long)ns_ttl);
    uint64_t peak = (uint64_t)d->prompt_len + d->max_new_tokens - 1;
    uint64_t pages = (peak + s->P - 1) / s->P;
    if (pages > s->num_blocks)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "%s: request %llu needs %llu blocks of %u tokens "
                             "but the pool has %u", fn,
                             (unsigned long long)d->id,
                             (unsigned long long)pages, s->P, s->num_blocks);
    if (rkv_u64map_get(&s->by_id, d->id) != NULL)
        return rkv_set_error(RKV_ERR_DUPLICATE, "%s: request %llu is live", fn,
                             (unsigned long long)d->id);
    rkv_status st = rkv_u64map_reserve(&s->by_id, 1);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&s->grave, &s->grave_cap,
                            s->ngrave + s->nwaiting + s->nrunning + 1,
                            sizeof *s->grave);
    if (st == RKV_OK)
        st = rkv_sched_prefetch_reserve(s);
    if (st != RKV_OK)
        return st;
    rkv_sched_req *r = rkv_sched_mem_calloc(1, sizeof *r);
    if (r == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    r->wgrp = RKV_WNONE;
    r->cap = d->prompt_len + d->max_new_tokens;
    /* room for the prompt and the first sampled token; the rest grows at
     * the steps that sample (sched_step.c) */
    r->tok_cap = d->prompt_len + 1;
    r->tokens = rkv_sched_mem_malloc((size_t)r->tok_cap * sizeof *r->tokens);
    if (r->tokens == NULL) {
        free(r);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    }
    memcpy(r->tokens, d->prompt, (size_t)d->prompt_len * sizeof *r->tokens);
    r->id = d->id;
    r->ns = d->ns;
    r->len = r->prompt_len = d->prompt_len;
    r->max_new = d->max_new_tokens;
    r->priority = d->priority;
    r->arrival_ms = d->arrival_ms;
    if (rt != NULL) {
        r->has_retention = 1;
        r->retention = *rt;
    }
    r->seq = s->next_seq;
    st = rkv_sched_waiting_add(s, r);
    if (st != RKV_OK) {
        rkv_sched_req_free(r);
        return st;
    }
    s->next_seq++;
    *rkv_u64map_put(&s->by_id, r->id) = (uint64_t)(uintptr_t)r;
    rkv_sched_prefetch_note(s, r);
    return RKV_OK;
}

rkv_status rkv_sched_abort(rkv_sched *s, uint64_t id)
{
    if (s == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_sched_abort: NULL sched");
    uint64_t *v = rkv_u64map_get(&s->by_id, id);
    if (v == NULL)
        return rkv_set_error(RKV_ERR_NOT_FOUND,
                             "rkv_sched_abort: no live request %llu",
                             (unsigned long long)id);
    rkv_sched_req *r = (rkv_sched_req *)(uintptr_t)*v;
    if (r->state == RKV_REQ_WAITING) {
        rkv_sched_tier_drop(s, r);
        rkv_sched_waiting_remove(s, r);
    } else {
        if (s->plan_pending) {
            for (uint32_t i = 0; i < s->plan_n; i++) {
                if (s->plan_reqs[i] == r)
                    s->plan_reqs[i] = NULL; /* commit skips it */
            }
        }
        rkv_sched_req_release(s, r);
        rkv_sched_running_remove(s, r);
    }
    r->finish = RKV_FINISH_ABORT;
    rkv_sched_bury(s, r);
    s->st.aborted++;
    return RKV_OK;
}

rkv_status rkv_sched_get_stats(const rkv_sched *s, rkv_sched_stats *out)
{
    if (s == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_sched_get_stats: NULL");
    *out = s->st;
    out->waiting = s->nwaiting;
    out->running = s->nrunning;
    out->loading = s->nloading;
    return RKV_OK;
}

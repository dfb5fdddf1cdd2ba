/*
 * sim/replay_sched.c -- `--order sched`: requests through rkv_sched with a
 * fake engine and a simulated clock (see replay.h and costmodel.h).
 *
 * Loop: submit every request released by `now`; step; if the plan is empty,
 * jump to the next release (or fail: nothing can ever run); otherwise
 * advance `now` by the step's modelled time, emit one deterministic token
 * per request that samples, commit, record first-token and finish times,
 * and release closed-loop children think_ms after their parent finished.
 *
 * Invariants: every request is submitted exactly once and finishes exactly
 * once (or is rejected at submission, RKV_ERR_NO_SPACE, because prompt +
 * output cannot fit in the whole pool); the simulated clock never goes
 * backwards.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay_inst.h"
#include "sim/replay_tiers.h"
#include "common/status.h"

/* ---- release queue: a binary min-heap on (time, id) ---------------------- */

int rkv_release_less(const release_item *x, const release_item *y)
{
    return x->t < y->t || (x->t == y->t && x->id < y->id);
}

static void release_swap(release_heap *h, size_t i, size_t j)
{
    release_item tmp = h->a[i];
    h->a[i] = h->a[j];
    h->a[j] = tmp;
}

rkv_status rkv_release_push(release_heap *h, double t, uint64_t id)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 1024;
        release_item *a = realloc(h->a, nc * sizeof *a);
        if (!a)
            return rkv_set_error(RKV_ERR_NOMEM, "replay: out of memory");
        h->a = a;
        h->cap = nc;
    }
    size_t i = h->n++;
    h->a[i] = (release_item){t, id};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!rkv_release_less(&h->a[i], &h->a[p]))
            break;
        release_swap(h, i, p);
        i = p;
    }
    return RKV_OK;
}

release_item rkv_release_pop(release_heap *h)
{
    release_item top = h->a[0];
    h->a[0] = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && rkv_release_less(&h->a[l], &h->a[m]))
            m = l;
        if (r < h->n && rkv_release_less(&h->a[r], &h->a[m]))
            m = r;
        if (m == i)
            break;
        release_swap(h, i, m);
        i = m;
    }
    return top;
}

/* ---- per-request bookkeeping ---------------------------------------------- */

/* Request id ended (finished or refused) at time t: its next turns arrive
 * after their think time. */
static rkv_status release_children(sched_run *r, uint64_t id, double t)
{
    for (uint64_t c = r->rs[id].first_child; c != RKV_WL_NO_PARENT;
         c = r->rs[c].next_sibling) {
        rkv_status st =
            rkv_release_push(&r->heap, t + r->wl->reqs[c].think_ms, c);
        if (st != RKV_OK)
            return st;
    }
    return RKV_OK;
}

/* The scheduler's own admission bound (rkv_sched_submit refuses with
 * RKV_ERR_NO_SPACE what is larger than the whole pool): prompt + output
 * - 1 tokens in pages of P. */
static int fits_pool(const sched_run *r, const rkv_wl_request *q)
{
    uint64_t P = r->cfg->page_size;
    uint64_t target = q->output_length ? q->output_length : 1;
    uint64_t pages = ((uint64_t)q->input_length + target - 1 + P - 1) / P;
    return pages <= rkv_pool_num_blocks(r->pool);
}

/* Expands request id's prompt and submits it. What can never fit is
 * refused (RKV_ERR_NO_SPACE) before its prompt is expanded: a 2^24-token
 * prompt would cost hundreds of MB and seconds to build only to be refused. */
static rkv_status submit_one(sched_run *r, uint64_t id, double t)
{
    const rkv_wl_request *q = &r->wl->reqs[id];
    if (!fits_pool(r, q))
        return RKV_ERR_NO_SPACE;
    rkv_status st = rkv_workload_prompt(r->wl, id, r->prompt);
    if (st != RKV_OK)
        return st;
    rkv_request_desc d;
    memset(&d, 0, sizeof d);
    d.id = id;
    d.ns = 0;
    d.prompt = r->prompt;
    d.prompt_len = q->input_length;
    d.max_new_tokens = r->rs[id].target;
    d.priority = 0;
    d.arrival_ms = t;
    rkv_retention ret;
    if (rkv_retention_plan_for(&r->retention, r->wl, r->cfg, id, &ret))
        d.retention = &ret; /* copied by the scheduler */
    return rkv_sched_submit(r->sched, &d);
}

rkv_status rkv_inst_release(sched_run *r, uint64_t id, double t,
                            rkv_replay_result *res)
{
    const rkv_wl_request *q = &r->wl->reqs[id];
    req_state *s = &r->rs[id];
    s->release_ms = t;
    s->target = q->output_length ? q->output_length : 1;
    if (r->released++ == 0 || t < res->first_release_ms)
        res->first_release_ms = t;
    if (t > res->last_release_ms)
        res->last_release_ms = t;
    rkv_status st = submit_one(r, id, t);
    if (st == RKV_ERR_NO_SPACE) {
        /* prompt + output can never fit the whole pool: the scheduler
         * refuses it; count it and move on. */
        s->rejected = 1;
        res->rejected_requests++;
        r->done++;
        if ((st = rkv_retention_plan_ended(&r->retention, r->wl, r->cfg,
                                           r->tree, id, 1,
                                           &res->ended_pages)) != RKV_OK)
            return st;
        /* its next turns still arrive (and are refused in turn if
         * they cannot fit either); else they would wait forever */
        return release_children(r, id, t);
    }
    if (st != RKV_OK)
        return st;
    s->submitted = 1;
    r->pending++;
    r->queued_tokens += q->input_length;
    return RKV_OK;
}

static rkv_status submit_released(sched_run *r, rkv_replay_result *res)
{
    while (r->heap.n && r->heap.a[0].t <= r->now) {
        release_item it = rkv_release_pop(&r->heap);
        rkv_status st = rkv_inst_release(r, it.id, it.t, res);
        if (st != RKV_OK)
            return st;
    }
    return RKV_OK;
}

static rkv_status grow_step_bufs(sched_run *r, size_t n)
{
    if (n <= r->tok_cap)
        return RKV_OK;
    size_t nc = r->tok_cap ? r->tok_cap : 256;
    while (nc < n)
        nc *= 2;
    int32_t *t = realloc(r->next_tokens, nc * sizeof *t);
    if (!t)
        return rkv_set_error(RKV_ERR_NOMEM, "replay: out of memory");
    r->next_tokens = t;
    uint8_t *f = realloc(r->finished, nc);
    if (!f)
        return rkv_set_error(RKV_ERR_NOMEM, "replay: out of memory");
    r->finished = f;
    r->tok_cap = nc;
    return RKV_OK;
}

/* Runs one plan on the fake engine: its modelled time, then tokens. */
rkv_status rkv_inst_run_plan(sched_run *r, const rkv_batch_plan *p,
                             rkv_replay_result *res)
{
    if (p->num_tokens == 0)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "replay: the scheduler planned %u requests but "
                             "no token",
                             p->num_reqs);
    rkv_status st = grow_step_bufs(r, p->num_reqs);
    if (st != RKV_OK)
        return st;
    rkv_cost_step cs;
    memset(&cs, 0, sizeof cs);
    for (uint32_t i = 0; i < p->num_reqs; i++) {
        uint64_t id = p->req_ids[i];
        if (id >= r->wl->num_reqs || !r->rs[id].submitted ||
            r->rs[id].finished)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "replay: plan names request %llu, which is "
                                 "not running",
                                 (unsigned long long)id);
        uint32_t q = p->qo_indptr[i + 1] - p->qo_indptr[i];
        req_state *s = &r->rs[id];
        if (i < p->num_prefill) {
            if (!s->admitted) {
                s->admitted = 1;
                s->cached_first = p->cached_len[i];
                rkv_request_info info;
                if (rkv_sched_request_info(r->sched, id, &info) == RKV_OK &&
                    (uint64_t)info.cached_host_tokens +
                            info.cached_disk_tokens <= s->cached_first) {
                    s->cached_host = info.cached_host_tokens;
                    s->cached_disk = info.cached_disk_tokens;
                }
            }
            res->prefill_tokens += q;
            rkv_cost_add_prefill_model(&cs, &r->cfg->cost, p->prefix_len[i], q);
        } else {
            rkv_cost_add_decode_model(&cs, &r->cfg->cost,
                                      (double)p->prefix_len[i] + q);
        }
    }
    double step_ms = rkv_cost_step_ms(&r->cfg->cost, &cs);
    double load_ms = rkv_replay_plan_load_ms(r->cfg, p);
    res->load_ms_total += load_ms;
    if (load_ms > step_ms)
        step_ms = load_ms;
    r->now += step_ms;
    res->busy_ms += step_ms;

    for (uint32_t i = 0; i < p->num_reqs; i++) {
        uint64_t id = p->req_ids[i];
        req_state *s = &r->rs[id];
        r->next_tokens[i] = 0;
        r->finished[i] = 0;
        if (!p->emits_token[i])
            continue;
        r->next_tokens[i] =
            rkv_workload_output_token(&r->wl->reqs[id], s->generated);
        if (s->generated == 0) {
            s->first_token_ms = r->now;
            r->queued_tokens -= r->wl->reqs[id].input_length;
        }
        s->generated++;
        res->output_tokens++;
        if (s->generated >= s->target)
            r->finished[i] = 1;
    }
    st = rkv_sched_commit(r->sched, r->next_tokens, r->finished, r->now);
    if (st != RKV_OK)
        return st;
    for (uint32_t i = 0; i < p->num_reqs; i++) {
        if (!r->finished[i])
            continue;
        uint64_t id = p->req_ids[i];
        req_state *s = &r->rs[id];
        s->finished = 1;
        s->finish_ms = r->now;
        r->pending--;
        r->done++;
        if ((st = release_children(r, id, r->now)) != RKV_OK ||
            (st = rkv_retention_plan_ended(&r->retention, r->wl, r->cfg,
                                           r->tree, id, 1,
                                           &res->ended_pages)) != RKV_OK)
            return st;
    }
    if (r->now > RKV_REPLAY_MAX_SIM_MS)
        return rkv_set_error(RKV_ERR_STATE,
                             "replay: the simulated clock passed 2^40 ms "
                             "(34.8 years), where it loses millisecond "
                             "precision");
    uint64_t used = rkv_pool_num_blocks(r->pool) - rkv_pool_num_free(r->pool);
    if (used > res->peak_pool_blocks)
        res->peak_pool_blocks = used;
    return RKV_OK;
}

void rkv_inst_free(sched_run *r)
{
    rkv_sched_destroy(r->sched);
    rkv_tree_destroy(r->tree);
    rkv_store_destroy(r->host); /* after the tree, which borrowed them */
    rkv_store_destroy(r->disk);
    rkv_pool_destroy(r->pool);
    free(r->rs);
    free(r->heap.a);
    free(r->prompt);
    free(r->next_tokens);
    free(r->finished);
    rkv_retention_plan_free(&r->retention);
}

rkv_status rkv_inst_init(sched_run *r, const rkv_workload *wl,
                         const rkv_replay_config *cfg, int with_roots)
{
    memset(r, 0, sizeof *r);
    r->wl = wl;
    r->cfg = cfg;
    rkv_status st = rkv_cost_model_validate(&cfg->cost);
    if (st != RKV_OK)
        return st;
    if (!(cfg->time_scale >= 0) || !isfinite(cfg->time_scale))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "replay: time scale %g (must be >= 0)",
                             cfg->time_scale);
    st = rkv_replay_open_cache(wl, cfg, 1, &r->pool, &r->tree);
    if (st != RKV_OK)
        return st;
    st = rkv_replay_tiers_attach(cfg, r->tree, &r->host, &r->disk);
    if (st != RKV_OK)
        return st;
    rkv_sched_config sc;
    rkv_replay_sched_config(cfg, &sc);
    st = rkv_sched_create(r->tree, &sc, &r->sched);
    if (st != RKV_OK)
        return st;
    if (cfg->retention < 0 || cfg->retention >= RKV_RETENTION_COUNT)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "replay: unknown retention mode %d",
                             cfg->retention);
    uint64_t pool_tokens =
        (uint64_t)rkv_pool_num_blocks(r->pool) * cfg->page_size;
    if ((st = rkv_retention_plan_init(&r->retention, wl, pool_tokens)) !=
        RKV_OK)
        return st;
    size_t n = wl->num_reqs;
    r->rs = calloc(n ? n : 1, sizeof *r->rs);
    uint32_t max_in = 0; /* of the requests that can be admitted */
    for (size_t i = 0; i < n; i++)
        if (fits_pool(r, &wl->reqs[i]) && wl->reqs[i].input_length > max_in)
            max_in = wl->reqs[i].input_length;
    r->prompt = malloc(((size_t)max_in + 1) * sizeof *r->prompt);
    if (!r->rs || !r->prompt)
        return rkv_set_error(RKV_ERR_NOMEM, "replay: out of memory");
    for (size_t i = 0; i < n; i++)
        r->rs[i].first_child = r->rs[i].next_sibling = RKV_WL_NO_PARENT;
    /* The clock starts at the first arrival (a trace may carry absolute
     * Unix times); the scaled span must keep the clock precise. */
    double t0 = INFINITY, t1 = 0;
    for (size_t i = 0; i < n; i++) {
        if (wl->reqs[i].parent != RKV_WL_NO_PARENT)
            continue;
        t0 = fmin(t0, wl->reqs[i].arrival_ms);
        t1 = fmax(t1, wl->reqs[i].arrival_ms);
    }
    if (n && (t1 - t0) * cfg->time_scale > RKV_REPLAY_MAX_SIM_MS)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "replay: arrivals span %.6g ms x time scale %g = "
                             "%.6g simulated ms, beyond 2^40 ms (34.8 years), "
                             "where the simulated clock loses millisecond "
                             "precision; lower --time-scale",
                             t1 - t0, cfg->time_scale,
                             (t1 - t0) * cfg->time_scale);
    /* Children in id order: push front while walking backwards. */
    for (size_t i = n; i-- > 0;) {
        uint64_t p = wl->reqs[i].parent;
        if (p == RKV_WL_NO_PARENT) {
            if (!with_roots)
                continue;
            st = rkv_release_push(
                &r->heap, (wl->reqs[i].arrival_ms - t0) * cfg->time_scale, i);
            if (st != RKV_OK)
                return st;
        } else {
            if (p >= i)
                return rkv_set_error(RKV_ERR_INVALID_ARG,
                                     "replay: request %zu has parent %llu",
                                     i, (unsigned long long)p);
            r->rs[i].next_sibling = r->rs[p].first_child;
            r->rs[p].first_child = i;
        }
    }
    return RKV_OK;
}

rkv_status rkv_tally_init(rkv_tally *t, const rkv_replay_config *cfg,
                          size_t n, const char *who)
{
    memset(t, 0, sizeof *t);
    t->ttft = malloc((n ? n : 1) * sizeof *t->ttft);
    t->lat = malloc((n ? n : 1) * sizeof *t->lat);
    t->wait = malloc((n ? n : 1) * sizeof *t->wait);
    if (!t->ttft || !t->lat || !t->wait) {
        rkv_tally_free(t);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", who);
    }
    if (cfg->per_request)
        memset(cfg->per_request, 0, n * sizeof *cfg->per_request);
    return RKV_OK;
}

void rkv_tally_add(rkv_tally *t, const sched_run *r, size_t i,
                   rkv_replay_result *res)
{
    const req_state *s = &r->rs[i];
    size_t k = t->k++;
    t->ttft[k] = s->first_token_ms - s->release_ms;
    t->lat[k] = s->finish_ms - s->release_ms;
    uint32_t in = r->wl->reqs[i].input_length;
    t->wait[k] = t->ttft[k] - rkv_replay_prefill_alone_ms(
                                  r->cfg, s->cached_first,
                                  in > s->cached_first ? in - s->cached_first
                                                       : 0);
    if (t->wait[k] < 0)
        t->wait[k] = 0;
    if (r->cfg->per_request) {
        rkv_replay_request_stats *ps = &r->cfg->per_request[i];
        ps->hit_tokens = s->cached_first;
        ps->finished = 1;
        ps->ttft_ms = t->ttft[k];
        ps->latency_ms = t->lat[k];
    }
    res->requests++;
    res->prompt_tokens += in;
    res->hit_tokens += s->cached_first;
    res->hit_tokens_by_medium[RKV_MEDIUM_DEVICE] +=
        s->cached_first - s->cached_host - s->cached_disk;
    res->hit_tokens_by_medium[RKV_MEDIUM_HOST] += s->cached_host;
    res->hit_tokens_by_medium[RKV_MEDIUM_DISK] += s->cached_disk;
    if (s->finish_ms > res->sim_ms)
        res->sim_ms = s->finish_ms;
}

void rkv_tally_finish(rkv_tally *t, rkv_replay_result *res)
{
    rkv_latency_summarize(t->ttft, t->k, &res->ttft_ms);
    rkv_latency_summarize(t->lat, t->k, &res->latency_ms);
    rkv_latency_summarize(t->wait, t->k, &res->wait_ms);
    rkv_tally_free(t);
    res->hit_rate = res->prompt_tokens
                        ? (double)res->hit_tokens / (double)res->prompt_tokens
                        : 0.0;
    res->prefill_saved_tokens = res->hit_tokens;
    if (res->sim_ms > 0) {
        res->output_tokens_per_s = (double)res->output_tokens / res->sim_ms * 1e3;
        res->prompt_tokens_per_s = (double)res->prompt_tokens / res->sim_ms * 1e3;
        res->requests_per_s = (double)res->requests / res->sim_ms * 1e3;
    }
}

void rkv_tally_free(rkv_tally *t)
{
    free(t->ttft);
    free(t->lat);
    free(t->wait);
    t->ttft = t->lat = t->wait = NULL;
}

/* Tool vs other traffic (sim/replay.h) and the tree's pin counters. */
static rkv_status collect_retention(sched_run *r, rkv_replay_result *res)
{
    size_t n = r->wl->num_reqs;
    double *tt = malloc((n ? n : 1) * sizeof *tt);
    double *ot = malloc((n ? n : 1) * sizeof *ot);
    if (!tt || !ot) {
        free(tt);
        free(ot);
        return rkv_set_error(RKV_ERR_NOMEM, "replay: out of memory");
    }
    size_t nt = 0, no = 0;
    for (size_t i = 0; i < n; i++) {
        const req_state *s = &r->rs[i];
        if (!s->finished)
            continue;
        uint32_t in = r->wl->reqs[i].input_length;
        double ttft = s->first_token_ms - s->release_ms;
        if (r->retention.tool_class[i]) {
            res->tool_requests++;
            res->tool_prompt_tokens += in;
            res->tool_hit_tokens += s->cached_first;
            tt[nt++] = ttft;
        } else {
            res->other_requests++;
            res->other_prompt_tokens += in;
            res->other_hit_tokens += s->cached_first;
            ot[no++] = ttft;
        }
    }
    rkv_latency_summarize(tt, nt, &res->tool_ttft_ms);
    rkv_latency_summarize(ot, no, &res->other_ttft_ms);
    free(tt);
    free(ot);
    return RKV_OK;
}

rkv_status rkv_inst_add_counters(const sched_run *r, rkv_replay_result *res)
{
    rkv_sched_stats ss;
    rkv_status st = rkv_sched_get_stats(r->sched, &ss);
    if (st != RKV_OK)
        return st;
    res->steps += ss.steps;
    res->preemptions += ss.preemptions;
    res->dedup_holds += ss.dedup_holds;
    if (ss.peak_blocks_used > res->peak_blocks)
        res->peak_blocks = ss.peak_blocks_used;
    res->load_blocks += ss.load_pages;
    res->failed_loads += ss.failed_loads;
    res->swap_out_blocks += ss.swap_out_pages;
    res->swap_in_blocks += ss.swap_in_pages;
    res->prefetch_blocks += ss.prefetch_pages;
    res->prefetch_late_blocks += ss.prefetch_late_pages;
    res->prefetch_waits += ss.prefetch_waits;
    rkv_tree_stats ts;
    return rkv_replay_add_tree_counters(r->tree, res, &ts);
}

static rkv_status collect(sched_run *r, rkv_replay_result *res)
{
    rkv_tally tally;
    rkv_status st = rkv_tally_init(&tally, r->cfg, r->wl->num_reqs, "replay");
    if (st != RKV_OK)
        return st;
    for (size_t i = 0; i < r->wl->num_reqs; i++)
        if (r->rs[i].finished)
            rkv_tally_add(&tally, r, i, res);
    rkv_tally_finish(&tally, res);
    if ((st = rkv_inst_add_counters(r, res)) != RKV_OK)
        return st;
    res->sched_us_per_step = res->steps ? r->step_us_total / (double)res->steps
                                        : 0.0;
    return collect_retention(r, res);
}

rkv_status rkv_inst_step_stats(const sched_run *r, rkv_sched_stats *ss,
                               rkv_replay_result *res)
{
    rkv_status st = rkv_sched_get_stats(r->sched, ss);
    if (st == RKV_OK && ss->waiting > res->max_waiting)
        res->max_waiting = ss->waiting;
    return st;
}

int rkv_inst_idle_step(sched_run *r, const rkv_batch_plan *p,
                       const rkv_sched_stats *ss, uint8_t *idle_loads,
                       rkv_replay_result *res)
{
    double load_ms = rkv_replay_plan_load_ms(r->cfg, p);
    double pf = rkv_sched_prefetch_ready_ms(r->sched);
    if (load_ms <= 0 && pf > r->now) {
        /* requests wait for their prefetch: on to its arrival, or to the
         * next request's if that comes first */
        r->now = r->heap.n && r->heap.a[0].t < pf ? r->heap.a[0].t : pf;
        return 1;
    }
    if (load_ms <= 0) {
        if (ss->loading == 0 || *idle_loads >= 2)
            return 0;
        (*idle_loads)++; /* saturates: a long stall never wraps it */
    }
    r->now += load_ms;
    res->load_ms_total += load_ms;
    res->busy_ms += load_ms;
    return 1;
}

static rkv_status run_loop(sched_run *r, rkv_replay_result *res)
{
    size_t n = r->wl->num_reqs;
    uint64_t steps = 0;
    uint8_t idle_loads = 0; /* empty plans in a row while loads pend */
    while (r->done < n) {
        rkv_status st = submit_released(r, res);
        if (st != RKV_OK)
            return st;
        const rkv_batch_plan *p = NULL;
        uint64_t t0 = rkv_replay_now_ns();
        st = rkv_sched_step(r->sched, r->now, &p);
        double us = (double)(rkv_replay_now_ns() - t0) / 1e3;
        if (st != RKV_OK)
            return st;
        r->step_us_total += us;
        if (us > res->sched_us_per_step_max)
            res->sched_us_per_step_max = us;
        rkv_sched_stats ss;
        if ((st = rkv_inst_step_stats(r, &ss, res)) != RKV_OK)
            return st;
        if (p->num_reqs == 0) {
            if (rkv_inst_idle_step(r, p, &ss, &idle_loads, res))
                continue;
            if (r->heap.n) {
                if (r->heap.a[0].t > r->now)
                    r->now = r->heap.a[0].t;
                continue;
            }
            if (r->done < n)
                return rkv_set_error(RKV_ERR_STATE,
                                     "replay: the scheduler planned nothing "
                                     "with %llu waiting and %llu running "
                                     "requests and no arrival left (a pool "
                                     "of %u blocks of %u tokens may be too "
                                     "small)",
                                     (unsigned long long)ss.waiting,
                                     (unsigned long long)ss.running,
                                     rkv_pool_num_blocks(r->pool),
                                     r->cfg->page_size);
            break;
        }
        idle_loads = 0;
        if ((st = rkv_inst_run_plan(r, p, res)) != RKV_OK)
            return st;
        steps++;
        if (r->cfg->check_every && steps % r->cfg->check_every == 0 &&
            (st = rkv_sched_check(r->sched)) != RKV_OK)
            return st;
        if (r->cfg->progress && (steps & 1023) == 0)
            r->cfg->progress(r->cfg->progress_ctx, r->done, n);
    }
    if (r->cfg->progress)
        r->cfg->progress(r->cfg->progress_ctx, r->done, n);
    if (r->cfg->check_every) {
        rkv_status st = rkv_sched_check(r->sched);
        if (st != RKV_OK)
            return st;
    }
    return RKV_OK;
}

rkv_status rkv_replay_sched(const rkv_workload *wl,
                            const rkv_replay_config *cfg,
                            rkv_replay_result *out)
{
    if (!wl || !cfg || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_replay_sched: NULL argument");
    uint64_t w0 = rkv_replay_now_ns();
    rkv_replay_result res;
    memset(&res, 0, sizeof res);
    res.sched_mode = 1;
    res.page_size = cfg->page_size;
    sched_run r;
    rkv_status st = rkv_inst_init(&r, wl, cfg, 1);
    if (st == RKV_OK) {
        res.capacity_blocks = rkv_pool_num_blocks(r.pool);
        st = run_loop(&r, &res);
    }
    if (st == RKV_OK) {
        st = collect(&r, &res);
    }
    if (st == RKV_OK)
        st = rkv_replay_disk_finish(cfg, r.tree, r.disk, &res);
    rkv_inst_free(&r);
    if (st != RKV_OK)
        return st;
    res.wall_s = (double)(rkv_replay_now_ns() - w0) * 1e-9;
    *out = res;
    return RKV_OK;
}

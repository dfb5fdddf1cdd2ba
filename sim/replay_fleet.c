/*
 * sim/replay_fleet.c -- the scheduler replay on a fleet of simulated
 * instances (replay.h, rkv_replay_fleet), each a sim/replay_inst.h
 * instance, with arrivals routed by a policy; the kv policy asks an
 * rkv_router fed in-process with every instance's KV events.
 *
 * One simulated clock: each instance has its own `now` (when its current
 * step ends). The loop takes whichever comes first: the next arrival
 * (routed, then submitted at its time; an idle instance's clock jumps to
 * it) or the step of the busy instance with the earliest clock (ties: the
 * arrival first, then the lower index). So every arrival is routed when no
 * busy instance's clock is behind it, and with one instance the order of
 * operations is that of the single-instance replay.
 *
 * After each step the instance's events are drained into the router and
 * its load (running requests, queued prompt tokens) reported; a RESYNC
 * (ring overflow) is answered with a snapshot. With an event lag the
 * drained events wait in the instance's queue, stamped with when they are
 * due (the step's end + the lag), and every arrival first applies what is
 * due by its time; with a load period an instance reports its load at the
 * end of the first step past each report time, and every arrival first
 * reports, for each instance whose report time passed, its load as of its
 * last step (an idle instance's load does not change until it steps).
 *
 * Tiers (README "Tiers"): every instance gets its own host / disk stores of the
 * configured capacities (rkv_inst_init attaches them as the
 * single-instance replay does), so its events carry the medium of each
 * page and the kv route scores lower-tier hits by the router's medium
 * weights. A step whose plan only queues loads advances that instance's
 * clock by their copy time. The totals add the instances' hits by
 * medium, loads, stores, swaps and load time.
 *
 * Invariants: a request is released to exactly one instance (the one its
 * arrival was routed to) and finishes there or is refused there; the
 * router's view of instance i equals i's tree after i's last drained step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay_inst.h"
#include "common/status.h"
#include "radixkv_router.h"

/* drained events waiting for their delivery (event lag) */
typedef struct lag_queue {
    rkv_event *ev;
    double *due;
    size_t head, n, cap;
} lag_queue;

static const char *const route_names[RKV_ROUTE_COUNT] = {
    "kv", "round-robin", "random", "least-loaded"};

const char *rkv_route_name(enum rkv_route r)
{
    return (unsigned)r < RKV_ROUTE_COUNT ? route_names[r] : "?";
}

int rkv_route_parse(const char *s, enum rkv_route *out)
{
    for (int i = 0; i < RKV_ROUTE_COUNT; i++)
        if (s && strcmp(s, route_names[i]) == 0) {
            *out = (enum rkv_route)i;
            return 1;
        }
    return 0;
}

#define EVENT_RING 4096u
#define DRAIN_BATCH 256u

typedef struct fleet {
    const rkv_workload *wl;
    const rkv_replay_config *cfg;
    const rkv_fleet_config *fc;
    uint32_t n;
    sched_run *in;
    rkv_replay_result *ires;    /* per-instance accumulators               */
    uint32_t *running;          /* per instance, after its last step       */
    uint8_t *idle_loads;        /* empty steps in a row while loading      */
    double *queued_sum;         /* queued tokens summed over arrivals      */
    uint64_t arrivals;
    rkv_router *router;
    rkv_event *events;
    int32_t *prompt;            /* kv route: the arriving prompt           */
    uint64_t *hashes;
    uint64_t rr;                /* round-robin counter                     */
    uint64_t rng;               /* random route state (splitmix64)         */
    uint64_t resyncs;
    uint64_t events_by_medium[RKV_MEDIUM_COUNT];
    lag_queue *lag;             /* per instance, event_lag_ms > 0           */
    double *next_report;        /* per instance, load_period_ms > 0         */
} fleet;

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Instance i's load to the router: always when exact; with a load period
 * only once its report time passed (then the next one is set). */
static rkv_status report_load(fleet *f, uint32_t i)
{
    if (!f->router)
        return RKV_OK;
    if (f->next_report) {
        double now = f->in[i].now, p = f->fc->load_period_ms;
        if (f->next_report[i] > now)
            return RKV_OK;
        f->next_report[i] += p * (1.0 + (double)(uint64_t)((now - f->next_report[i]) / p));
    }
    return rkv_router_set_load(f->router, i, f->running[i],
                               f->in[i].queued_tokens);
}

static void count_media(fleet *f, const rkv_event *ev, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (ev[k].medium < RKV_MEDIUM_COUNT)
            f->events_by_medium[ev[k].medium]++;
}

/* Answers a lost stretch of instance i's events with a snapshot of its
 * tree (as the daemon asks for one). */
static rkv_status resync_if_needed(fleet *f, uint32_t i)
{
    rkv_router_instance_info info;
    rkv_status st;
    if ((st = rkv_router_instance_info_get(f->router, i, &info)) != RKV_OK)
        return st;
    if (!info.needs_resync)
        return RKV_OK;
    size_t cnt = 0;
    uint64_t seq = 0;
    if ((st = rkv_tree_snapshot(f->in[i].tree, NULL, 0, &cnt, NULL)) != RKV_OK)
        return st;
    rkv_block_entry *b = malloc((cnt ? cnt : 1) * sizeof *b);
    if (!b)
        return rkv_set_error(RKV_ERR_NOMEM, "fleet replay: out of memory");
    st = rkv_tree_snapshot(f->in[i].tree, b, cnt, &cnt, &seq);
    if (st == RKV_OK)
        st = rkv_router_apply_snapshot(f->router, i, b, cnt, seq);
    free(b);
    f->resyncs++;
    return st;
}

/* Queues events for delivery at `due`. */
static rkv_status lag_push(lag_queue *q, const rkv_event *ev, uint32_t n, double due)
{
    if (q->head > 0 && q->head + q->n + n > q->cap) {
        memmove(q->ev, q->ev + q->head, q->n * sizeof *q->ev);
        memmove(q->due, q->due + q->head, q->n * sizeof *q->due);
        q->head = 0;
    }
    if (q->n + n > q->cap) {
        size_t cap = q->cap ? q->cap : 256;
        while (cap < q->n + n)
            cap *= 2;
        rkv_event *e = realloc(q->ev, cap * sizeof *e);
        if (e)
            q->ev = e;
        double *d = e ? realloc(q->due, cap * sizeof *d) : NULL;
        if (!e || !d)
            return rkv_set_error(RKV_ERR_NOMEM, "fleet replay: out of memory");
        q->due = d;
        q->cap = cap;
    }
    for (uint32_t k = 0; k < n; k++) {
        q->ev[q->head + q->n + k] = ev[k];
        q->due[q->head + q->n + k] = due;
    }
    q->n += n;
    return RKV_OK;
}

/* Delivers instance i's queued events due by t. */
static rkv_status lag_deliver(fleet *f, uint32_t i, double t)
{
    lag_queue *q = &f->lag[i];
    size_t k = 0;
    while (k < q->n && q->due[q->head + k] <= t)
        k++;
    if (k == 0)
        return RKV_OK;
    for (size_t done = 0; done < k;) {
        uint32_t m = (uint32_t)(k - done < DRAIN_BATCH ? k - done : DRAIN_BATCH);
        rkv_status st = rkv_router_apply(f->router, i, q->ev + q->head + done, m);
        if (st != RKV_OK)
            return st;
        count_media(f, q->ev + q->head + done, m);
        done += m;
    }
    q->head += k;
    q->n -= k;
    if (q->n == 0)
        q->head = 0;
    return resync_if_needed(f, i);
}

/* Moves instance i's events into the router (or, with a lag, into its
 * queue, due at its clock + the lag); a lost stretch is answered with a
 * snapshot of its tree. */
static rkv_status feed_events(fleet *f, uint32_t i)
{
    rkv_status st;
    for (;;) {
        uint32_t got = 0;
        st = rkv_tree_events_drain(f->in[i].tree, f->events, DRAIN_BATCH, &got);
        if (st != RKV_OK)
            return st;
        if (got == 0)
            break;
        if (f->lag) {
            st = lag_push(&f->lag[i], f->events, got,
                          f->in[i].now + f->fc->event_lag_ms);
            if (st != RKV_OK)
                return st;
            continue;
        }
        if ((st = rkv_router_apply(f->router, i, f->events, got)) != RKV_OK)
            return st;
        count_media(f, f->events, got);
    }
    return f->lag ? RKV_OK : resync_if_needed(f, i);
}

/* Before an arrival at t: the events due and the load reports due. */
static rkv_status catch_up(fleet *f, double t)
{
    for (uint32_t i = 0; i < f->n; i++) {
        rkv_status st;
        if (f->lag && (st = lag_deliver(f, i, t)) != RKV_OK)
            return st;
        if (f->next_report && f->next_report[i] <= t) {
            if ((st = rkv_router_set_load(f->router, i, f->running[i],
                                          f->in[i].queued_tokens)) != RKV_OK)
                return st;
            double p = f->fc->load_period_ms;
            f->next_report[i] += p * (1.0 + (double)(uint64_t)((t - f->next_report[i]) / p));
        }
    }
    return RKV_OK;
}

static rkv_status route_kv(fleet *f, uint64_t id, uint32_t *out)
{
    const rkv_wl_request *q = &f->wl->reqs[id];
    uint32_t P = f->cfg->page_size;
    /* only the pages a pool can hold matter (and are worth expanding) */
    uint64_t pages = q->input_length / P;
    uint64_t cap = rkv_pool_num_blocks(f->in[0].pool);
    if (pages > cap)
        pages = cap;
    rkv_status st = rkv_workload_prompt_n(f->wl, id, (uint32_t)(pages * P),
                                          f->prompt);
    if (st != RKV_OK)
        return st;
    uint64_t h = RKV_HASH_ROOT;
    for (uint64_t j = 0; j < pages; j++) {
        h = rkv_block_hash(h, 0, f->prompt + j * P, P);
        f->hashes[j] = h;
    }
    rkv_router_overlap best;
    st = rkv_router_route(f->router, 0, f->hashes, (uint32_t)pages, &best);
    if (st != RKV_OK)
        return st;
    *out = (uint32_t)best.instance;
    return RKV_OK;
}

static rkv_status route(fleet *f, uint64_t id, uint32_t *out)
{
    switch (f->fc->route) {
    case RKV_ROUTE_KV:
        return route_kv(f, id, out);
    case RKV_ROUTE_ROUND_ROBIN:
        *out = (uint32_t)(f->rr++ % f->n);
        return RKV_OK;
    case RKV_ROUTE_RANDOM:
        *out = (uint32_t)(splitmix64(&f->rng) % f->n);
        return RKV_OK;
    case RKV_ROUTE_LEAST_LOADED: {
        uint32_t b = 0;
        for (uint32_t i = 1; i < f->n; i++) {
            uint64_t qi = f->in[i].queued_tokens, qb = f->in[b].queued_tokens;
            if (qi < qb || (qi == qb && f->running[i] < f->running[b]))
                b = i;
        }
        *out = b;
        return RKV_OK;
    }
    default:
        break;
    }
    return rkv_set_error(RKV_ERR_INVALID_ARG, "fleet replay: unknown route %d",
                         (int)f->fc->route);
}

static rkv_status arrive(fleet *f, uint32_t from)
{
    release_item it = rkv_release_pop(&f->in[from].heap);
    for (uint32_t i = 0; i < f->n; i++)
        f->queued_sum[i] += (double)f->in[i].queued_tokens;
    f->arrivals++;
    uint32_t k = 0;
    rkv_status st = f->router ? catch_up(f, it.t) : RKV_OK;
    if (st == RKV_OK)
        st = route(f, it.id, &k);
    if (st != RKV_OK)
        return st;
    if (k >= f->n)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "fleet replay: routed to instance %u of %u", k,
                             f->n);
    sched_run *r = &f->in[k];
    if (r->now < it.t)
        r->now = it.t; /* idle until now: busy ones are never behind it */
    if ((st = rkv_inst_release(r, it.id, it.t, &f->ires[k])) != RKV_OK)
        return st;
    /* with a load period the router counted the routed request itself */
    return f->next_report ? RKV_OK : report_load(f, k);
}

/* One step of instance b; *stalled when it planned nothing. */
static rkv_status step(fleet *f, uint32_t b, int *stalled)
{
    sched_run *r = &f->in[b];
    rkv_replay_result *res = &f->ires[b];
    const rkv_batch_plan *p = NULL;
    rkv_status st = rkv_sched_step(r->sched, r->now, &p);
    if (st != RKV_OK)
        return st;
    rkv_sched_stats ss;
    if ((st = rkv_inst_step_stats(r, &ss, res)) != RKV_OK)
        return st;
    *stalled = 0;
    if (p->num_reqs == 0) {
        if (rkv_inst_idle_step(r, p, &ss, &f->idle_loads[b], res))
            return f->router ? feed_events(f, b) : RKV_OK;
        *stalled = 1;
        return RKV_OK;
    }
    f->idle_loads[b] = 0;
    if ((st = rkv_inst_run_plan(r, p, res)) != RKV_OK)
        return st;
    if ((st = rkv_sched_get_stats(r->sched, &ss)) != RKV_OK)
        return st;
    f->running[b] = (uint32_t)ss.running;
    if (f->router) {
        if ((st = feed_events(f, b)) != RKV_OK)
            return st;
        if ((st = report_load(f, b)) != RKV_OK)
            return st;
    }
    return RKV_OK;
}

static uint64_t fleet_done(const fleet *f)
{
    uint64_t d = 0;
    for (uint32_t i = 0; i < f->n; i++)
        d += f->in[i].done;
    return d;
}

static rkv_status run(fleet *f)
{
    size_t total = f->wl->num_reqs;
    uint64_t steps = 0;
    for (;;) {
        uint64_t done = fleet_done(f);
        if (done >= total)
            break;
        int a = -1, b = -1;
        for (uint32_t i = 0; i < f->n; i++) {
            if (f->in[i].heap.n &&
                (a < 0 || rkv_release_less(&f->in[i].heap.a[0],
                                           &f->in[a].heap.a[0])))
                a = (int)i;
            if (f->in[i].pending && (b < 0 || f->in[i].now < f->in[b].now))
                b = (int)i;
        }
        if (a >= 0 && (b < 0 || f->in[a].heap.a[0].t <= f->in[b].now)) {
            rkv_status st = arrive(f, (uint32_t)a);
            if (st != RKV_OK)
                return st;
            continue;
        }
        if (b < 0)
            return rkv_set_error(RKV_ERR_STATE,
                                 "fleet replay: %llu of %zu requests never "
                                 "arrived",
                                 (unsigned long long)(total - done), total);
        int stalled = 0;
        rkv_status st = step(f, (uint32_t)b, &stalled);
        if (st != RKV_OK)
            return st;
        if (stalled) {
            if (a < 0)
                return rkv_set_error(RKV_ERR_STATE,
                                     "fleet replay: instance %d planned "
                                     "nothing with %llu requests pending and "
                                     "no arrival left (a pool of %u blocks "
                                     "of %u tokens may be too small)",
                                     b,
                                     (unsigned long long)f->in[b].pending,
                                     rkv_pool_num_blocks(f->in[b].pool),
                                     f->cfg->page_size);
            f->in[b].now = f->in[a].heap.a[0].t; /* later than now here */
            continue;
        }
        steps++;
        if (f->cfg->check_every && steps % f->cfg->check_every == 0) {
            if ((st = rkv_sched_check(f->in[b].sched)) != RKV_OK ||
                (st = rkv_tree_check(f->in[b].tree)) != RKV_OK)
                return st;
            if (f->router && (st = rkv_router_check(f->router)) != RKV_OK)
                return st;
        }
        if (f->cfg->progress && (steps & 1023) == 0)
            f->cfg->progress(f->cfg->progress_ctx, fleet_done(f), total);
    }
    if (f->cfg->progress)
        f->cfg->progress(f->cfg->progress_ctx, fleet_done(f), total);
    return RKV_OK;
}

/* Merges the instances into out->total and the per-instance figures: the
 * instances' sums first, so the rates see every output token, then each
 * finished request, which must have finished on one instance only. */
static rkv_status collect(fleet *f, rkv_fleet_result *out)
{
    size_t n = f->wl->num_reqs;
    rkv_replay_result *t = &out->total;
    rkv_status st;
    double qsum = 0;
    int any_released = 0;
    for (uint32_t j = 0; j < f->n; j++) {
        const rkv_replay_result *ir = &f->ires[j];
        t->rejected_requests += ir->rejected_requests;
        t->output_tokens += ir->output_tokens;
        t->prefill_tokens += ir->prefill_tokens;
        t->busy_ms += ir->busy_ms;
        t->load_ms_total += ir->load_ms_total;
        if (f->in[j].released &&
            (!any_released || ir->first_release_ms < t->first_release_ms))
            t->first_release_ms = ir->first_release_ms;
        any_released |= f->in[j].released > 0;
        if (ir->last_release_ms > t->last_release_ms)
            t->last_release_ms = ir->last_release_ms;
        if (ir->peak_pool_blocks > t->peak_pool_blocks)
            t->peak_pool_blocks = ir->peak_pool_blocks;
        if (ir->max_waiting > t->max_waiting)
            t->max_waiting = ir->max_waiting;
        /* the instance's scheduler, tier, tree and pin counters */
        if ((st = rkv_inst_add_counters(&f->in[j], t)) != RKV_OK)
            return st;
        /* checking runs: every instance's tree (and its tiers) at the end */
        if (f->cfg->check_every &&
            (st = rkv_tree_check(f->in[j].tree)) != RKV_OK)
            return st;
        double m = f->arrivals ? f->queued_sum[j] / (double)f->arrivals : 0;
        out->inst_queued_mean[j] = m;
        qsum += m;
        if (m > out->queued_max)
            out->queued_max = m;
    }

    rkv_tally tally;
    if ((st = rkv_tally_init(&tally, f->cfg, n, "fleet replay")) != RKV_OK)
        return st;
    uint32_t *on = f->fc->finished_on;
    if (on)
        for (size_t i = 0; i < n; i++)
            on[i] = UINT32_MAX;
    for (uint32_t j = 0; j < f->n; j++) {
        const sched_run *r = &f->in[j];
        for (size_t i = 0; i < n; i++) {
            if (!r->rs[i].finished)
                continue;
            if (on && on[i] != UINT32_MAX) {
                rkv_tally_free(&tally);
                return rkv_set_error(RKV_ERR_CORRUPT,
                                     "fleet replay: request %zu finished on "
                                     "instances %u and %u",
                                     i, on[i], j);
            }
            if (on)
                on[i] = j;
            rkv_tally_add(&tally, r, i, t);
            out->inst_requests[j]++;
        }
    }
    rkv_tally_finish(&tally, t);
    out->queued_mean = qsum / f->n;
    out->balance = out->queued_mean > 0 ? out->queued_max / out->queued_mean
                                        : 0.0;
    if (f->router) {
        rkv_router_stats rs;
        if ((st = rkv_router_get_stats(f->router, &rs)) != RKV_OK)
            return st;
        out->events_applied = rs.events_applied;
        if ((st = rkv_router_check(f->router)) != RKV_OK)
            return st;
    }
    out->resyncs = f->resyncs;
    memcpy(out->events_by_medium, f->events_by_medium,
           sizeof out->events_by_medium);
    return RKV_OK;
}

static void fleet_free(fleet *f)
{
    if (f->in)
        for (uint32_t i = 0; i < f->n; i++)
            rkv_inst_free(&f->in[i]);
    free(f->in);
    free(f->ires);
    free(f->running);
    free(f->queued_sum);
    free(f->idle_loads);
    rkv_router_destroy(f->router);
    free(f->events);
    free(f->prompt);
    free(f->hashes);
    if (f->lag)
        for (uint32_t i = 0; i < f->n; i++) {
            free(f->lag[i].ev);
            free(f->lag[i].due);
        }
    free(f->lag);
    free(f->next_report);
}

static rkv_status fleet_init(fleet *f, rkv_replay_config *icfg)
{
    uint32_t n = f->n;
    f->in = calloc(n, sizeof *f->in);
    f->ires = calloc(n, sizeof *f->ires);
    f->running = calloc(n, sizeof *f->running);
    f->queued_sum = calloc(n, sizeof *f->queued_sum);
    f->idle_loads = calloc(n, sizeof *f->idle_loads);
    if (!f->in || !f->ires || !f->running || !f->queued_sum ||
        !f->idle_loads)
        return rkv_set_error(RKV_ERR_NOMEM, "fleet replay: out of memory");
    rkv_status st;
    for (uint32_t i = 0; i < n; i++) {
        /* every arrival is queued on instance 0; arrive() routes it */
        if ((st = rkv_inst_init(&f->in[i], f->wl, icfg, i == 0)) != RKV_OK)
            return st;
        f->ires[i].sched_mode = 1;
        f->ires[i].page_size = icfg->page_size;
    }
    if (f->fc->route != RKV_ROUTE_KV)
        return RKV_OK;
    rkv_router_config rc;
    rkv_router_config_init(&rc);
    if (f->fc->router)
        rc = *f->fc->router;
    rc.page_tokens = icfg->page_size;
    rc.seed = f->fc->seed;
    if (f->fc->event_lag_ms > 0 && !(f->lag = calloc(n, sizeof *f->lag)))
        return rkv_set_error(RKV_ERR_NOMEM, "fleet replay: out of memory");
    if (f->fc->load_period_ms > 0) {
        if (!(f->next_report = malloc(n * sizeof *f->next_report)))
            return rkv_set_error(RKV_ERR_NOMEM, "fleet replay: out of memory");
        /* staggered phases, as independent heartbeats are */
        for (uint32_t i = 0; i < n; i++)
            f->next_report[i] = f->fc->load_period_ms * (double)i / (double)n;
    }
    if ((st = rkv_router_create(&rc, &f->router)) != RKV_OK)
        return st;
    for (uint32_t i = 0; i < n; i++)
        if ((st = rkv_router_add_instance(f->router, i)) != RKV_OK)
            return st;
    uint64_t cap = rkv_pool_num_blocks(f->in[0].pool);
    uint64_t maxp = 0;
    for (size_t i = 0; i < f->wl->num_reqs; i++) {
        uint64_t p = f->wl->reqs[i].input_length / icfg->page_size;
        if (p > maxp)
            maxp = p;
    }
    if (maxp > cap)
        maxp = cap;
    f->events = malloc(DRAIN_BATCH * sizeof *f->events);
    f->prompt = malloc((maxp * icfg->page_size + 1) * sizeof *f->prompt);
    f->hashes = malloc((maxp + 1) * sizeof *f->hashes);
    if (!f->events || !f->prompt || !f->hashes)
        return rkv_set_error(RKV_ERR_NOMEM, "fleet replay: out of memory");
    return RKV_OK;
}

rkv_status rkv_replay_fleet(const rkv_workload *wl,
                            const rkv_replay_config *cfg,
                            const rkv_fleet_config *fc,
                            rkv_fleet_result *out)
{
    if (!wl || !cfg || !fc || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_replay_fleet: NULL argument");
    if (fc->instances < 1 || fc->instances > RKV_FLEET_MAX_INSTANCES)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "fleet replay: %u instances (1..%u)",
                             fc->instances, RKV_FLEET_MAX_INSTANCES);
    if ((unsigned)fc->route >= RKV_ROUTE_COUNT)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "fleet replay: unknown route %d", (int)fc->route);
    if (!(fc->event_lag_ms >= 0 && fc->event_lag_ms <= 1e9) ||
        !(fc->load_period_ms >= 0 && fc->load_period_ms <= 1e9))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "fleet replay: event lag %g ms, "
                             "load period %g ms (0..1e9)", fc->event_lag_ms,
                             fc->load_period_ms);
    uint64_t w0 = rkv_replay_now_ns();
    rkv_replay_config icfg = *cfg;
    icfg.event_ring = fc->route == RKV_ROUTE_KV ? EVENT_RING : 0;
    fleet f;
    memset(&f, 0, sizeof f);
    f.wl = wl;
    f.cfg = cfg;
    f.fc = fc;
    f.n = fc->instances;
    f.rng = fc->seed;
    rkv_fleet_result res;
    memset(&res, 0, sizeof res);
    res.instances = fc->instances;
    res.route = fc->route;
    res.total.sched_mode = 1;
    res.total.page_size = cfg->page_size;
    rkv_status st = fleet_init(&f, &icfg);
    if (st == RKV_OK) {
        res.total.capacity_blocks = rkv_pool_num_blocks(f.in[0].pool);
        st = run(&f);
    }
    if (st == RKV_OK)
        st = collect(&f, &res);
    fleet_free(&f);
    if (st != RKV_OK)
        return st;
    res.total.wall_s = (double)(rkv_replay_now_ns() - w0) * 1e-9;
    *out = res;
    return RKV_OK;
}

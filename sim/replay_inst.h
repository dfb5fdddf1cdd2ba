/*
 * sim/replay_inst.h -- one simulated serving instance of the scheduler
 * replay (sim/replay_sched.c): its pool, tree and scheduler, its simulated
 * clock, the fake engine that runs its plans, and the per-request state of
 * the requests it was given. The single-instance replay drives one; the
 * fleet replay (sim/replay_fleet.c) drives several on one clock. Not part
 * of rkv_cli's API.
 *
 * Every instance keeps a req_state per workload request (indexed by id);
 * only the requests released to it are touched. The closed-loop links
 * (first_child / next_sibling) are built in every instance, so a parent's
 * next turns are queued on the instance where it finished (its heap) and
 * whoever drives the instances decides where they run.
 *
 * Invariants: pending = requests submitted here and not finished;
 * queued_tokens = prompt tokens of those that have no first token yet (the
 * prefill work ahead, the load a router sees); now never goes backwards.
 */
#ifndef RKV_SIM_REPLAY_INST_H
#define RKV_SIM_REPLAY_INST_H

#include "sim/replay_internal.h"
#include "sim/replay_retain.h"

typedef struct release_item {
    double t;
    uint64_t id;
} release_item;

typedef struct release_heap {
    release_item *a;
    size_t n, cap;
} release_heap;

/* Order of the release queue: time, then request id. */
int rkv_release_less(const release_item *x, const release_item *y);
rkv_status rkv_release_push(release_heap *h, double t, uint64_t id);
release_item rkv_release_pop(release_heap *h); /* h->n > 0 */

typedef struct req_state {
    double release_ms;
    double first_token_ms;
    double finish_ms;
    uint32_t generated;
    uint32_t target;        /* tokens to generate: max(1, output_length)   */
    uint32_t cached_first;  /* cached_len at first admission               */
    uint32_t cached_host, cached_disk; /* of it, loaded from host / disk   */
    uint8_t submitted, admitted, finished, rejected;
    uint64_t first_child;   /* closed-loop children, linked                 */
    uint64_t next_sibling;
} req_state;

typedef struct sched_run {
    const rkv_workload *wl;
    const rkv_replay_config *cfg;
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_sched *sched;
    rkv_store *host, *disk; /* tiers (replay_tiers.h); NULL when none     */
    req_state *rs;
    release_heap heap;
    int32_t *prompt;
    int32_t *next_tokens;
    uint8_t *finished;
    size_t tok_cap;        /* capacity of next_tokens / finished           */
    uint64_t pending;      /* submitted, not finished                      */
    uint64_t done;         /* finished or rejected                         */
    uint64_t released;     /* requests released so far                     */
    uint64_t queued_tokens; /* prompt tokens submitted, no first token yet */
    double now;
    double step_us_total;  /* time inside rkv_sched_step, measured here    */
    rkv_retention_plan retention; /* sim/replay_retain.h                  */
} sched_run;

/* Sets up an instance for wl (pool and tree as cfg says, events included
 * when cfg->event_ring > 0). with_roots: queue every open-loop request's
 * arrival on this instance's heap (a fleet queues them on one instance
 * only). On failure, rkv_inst_free still must be called. */
rkv_status rkv_inst_init(sched_run *r, const rkv_workload *wl,
                         const rkv_replay_config *cfg, int with_roots);
void rkv_inst_free(sched_run *r);

/* Request id arrives at t: submitted to this instance's scheduler, or
 * refused (counted in res->rejected_requests, done, its next turns
 * queued) when prompt + output can never fit the pool. */
rkv_status rkv_inst_release(sched_run *r, uint64_t id, double t,
                            rkv_replay_result *res);

/* Runs one non-empty plan of this instance's scheduler on the fake engine:
 * advances now by its modelled time (the compute, or the plan's loads when
 * they take longer: the engine overlaps them), emits tokens, commits, then
 * refuses a clock past RKV_REPLAY_MAX_SIM_MS and records the pool's peak
 * use. */
/* A step that planned no request (ss: the scheduler's stats after it).
 * With tiers such a plan may still have queued loads: the copy link works
 * while nothing computes, so the clock advances by their copy time (into
 * res->load_ms_total and busy_ms). A load queued earlier completes at a
 * later poll, so an instance with loading requests gets two more empty
 * steps (*idle_loads counts them; the caller zeroes it after a step that
 * ran requests) before it counts as stalled. 1: the step advanced the
 * instance; 0: it is stalled. */
int rkv_inst_idle_step(sched_run *r, const rkv_batch_plan *p,
                       const rkv_sched_stats *ss, uint8_t *idle_loads,
                       rkv_replay_result *res);

rkv_status rkv_inst_run_plan(sched_run *r, const rkv_batch_plan *p,
                             rkv_replay_result *res);

/* The scheduler's counters after a step, into *ss; the deepest queue
 * seen so far into res->max_waiting. */
rkv_status rkv_inst_step_stats(const sched_run *r, rkv_sched_stats *ss,
                               rkv_replay_result *res);

/* Adds an instance's counters to res -- its scheduler's (steps,
 * preemptions, loads, swaps; peak blocks as a maximum), its tiers' stores,
 * its tree's evictions and bytes, and its pins: the single replay's one
 * instance (res zeroed), or each instance of a fleet in turn. */
rkv_status rkv_inst_add_counters(const sched_run *r, rkv_replay_result *res);

/* The finished requests' latency samples, gathered from one instance or
 * several into one result. */
typedef struct rkv_tally {
    double *ttft, *lat, *wait; /* one sample per finished request          */
    size_t k;                  /* samples so far                           */
} rkv_tally;

/* Room for the samples of wl's n requests; clears cfg->per_request. who
 * names the replay in the out-of-memory message. */
rkv_status rkv_tally_init(rkv_tally *t, const rkv_replay_config *cfg,
                          size_t n, const char *who);
/* Finished request i of instance r: its samples, its per-request stats,
 * and its counts (requests, prompt and hit tokens, sim_ms) in res. */
void rkv_tally_add(rkv_tally *t, const sched_run *r, size_t i,
                   rkv_replay_result *res);
/* Latency summaries, hit rate and throughputs of res (whose output_tokens
 * must already be complete), then frees the samples. */
void rkv_tally_finish(rkv_tally *t, rkv_replay_result *res);
void rkv_tally_free(rkv_tally *t);

#endif

/*
 * sim/replay.h -- replays a workload (sim/workload.h) through the prefix
 * cache, in one of two modes:
 *
 *   file order (rkv_replay_file_order): the cache alone. Requests one after
 *     another in file order; each: non-peek match, lock the matched node,
 *     rkv_tree_alloc_blocks() for the rest of its full pages (evicting
 *     least-recently-used unlocked leaves, page by page; the request's own
 *     matched path is locked and its new pages are not in the tree yet, so
 *     none of its blocks can be evicted), insert the whole prompt's full
 *     pages, drop the replay's own block references (the tree keeps its
 *     own), unlock. No scheduler, no output tokens. If a prompt has more
 *     full pages than free + evictable blocks, only the prefix that fits is
 *     cached (counted in truncated_requests). This is the convention of the
 *     reference figures in shared/traces/README.md ("leaf-LRU, full pages
 *     only" at page size 512).
 *
 *   scheduler (rkv_replay_sched): requests are released at their arrival
 *     time, counted from the first arrival and multiplied by time_scale
 *     (closed-loop requests -- agentic turns -- think_ms after their
 *     parent finished), submitted to rkv_sched, and run step by step by a
 *     fake engine: output token k of a request is rkv_workload_output_token
 *     (deterministic from the request), the request finishes after
 *     output_length tokens (at least 1). Each step advances a simulated
 *     clock by the cost model (sim/costmodel.h). TTFT is first token time -
 *     release time; latency is finish time - release time.
 *
 * Both modes use a metadata-only pool (num_layers = 0) of
 * capacity_tokens / page_size blocks: no KV memory and no kernels.
 */
#ifndef RKV_SIM_REPLAY_H
#define RKV_SIM_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "sim/costmodel.h"
#include "radixkv_router.h"
#include "sim/workload.h"
#include "radixkv.h"

/* capacity_tokens value meaning "never evict": the pool gets one block per
 * page the replay could ever cache (see rkv_replay_unbounded_blocks). */
#define RKV_REPLAY_UNBOUNDED UINT64_MAX

/* Latest simulated time (ms from the first arrival): 2^40 ms, 34.8 years.
 * A double's step there is 2^-12 ms, so a million step-time additions stay
 * well inside a millisecond; beyond it TTFTs of a few ms would round away
 * (at 1e21 ms the step is ~131 s). Arrivals whose scaled span exceeds it
 * are refused (RKV_ERR_INVALID_ARG), and a clock that passes it ends the
 * run (RKV_ERR_STATE). */
#define RKV_REPLAY_MAX_SIM_MS 1099511627776.0

typedef void (*rkv_replay_progress_fn)(void *ctx, size_t done, size_t total);

/* What one request saw (optional output, one entry per workload request). */
typedef struct rkv_replay_request_stats {
    uint32_t hit_tokens;   /* matched (file) / cached at first admission  */
    uint8_t finished;      /* sched: 1 when it finished, 0 if rejected    */
    double ttft_ms;        /* sched only                                  */
    double latency_ms;     /* sched only                                  */
} rkv_replay_request_stats;

typedef struct rkv_replay_config {
    uint64_t capacity_tokens;  /* KV capacity; RKV_REPLAY_UNBOUNDED          */
    uint32_t page_size;        /* tokens per block                           */
    rkv_sched_config sched;    /* scheduler mode only                        */
    rkv_cost_model cost;       /* scheduler mode only                        */
    double time_scale;         /* scheduler mode: open-loop arrival times are
                                  multiplied by this (default 1; 2 = half
                                  the request rate)                         */
    uint32_t check_every;      /* run *_check() every N requests / steps
                                  (tests); 0 = never                         */
    rkv_replay_progress_fn progress; /* may be NULL; called now and then     */
    void *progress_ctx;
    rkv_replay_request_stats *per_request; /* may be NULL; wl->num_reqs  */
    uint32_t event_ring;       /* trees record KV events in a ring of this
                                  many (the fleet replay); 0 = off          */
    /* tiers (README "Tiers"): capacities below the device pool; 0: none */
    uint64_t host_capacity_tokens;
    uint64_t disk_capacity_tokens;
    int write_policy;          /* rkv_write_policy (default write-back)    */
    uint32_t selective_hits;   /* k for write-policy selective (default 2) */
    int swap;                  /* scheduler: swap a preempted request's
                                  blocks to host when the cost model says it
                                  is cheaper than recomputing (default 0)  */
    /* retention (README "Retention in the simulator") */
    int evict_policy;          /* rkv_evict_policy (default LRU)           */
    int retention;             /* rkv_replay_retention (sim/replay.h);
                                  default none                             */
    uint64_t retention_ttl_ms; /* --retention ttl: the pin's TTL (default
                                  12000, the p90 of the agentic workload's
                                  tool latency), on the workload's clock:
                                  times time_scale before an open-loop
                                  next turn, as the pause it covers      */
    uint32_t max_pinned_pct;   /* the trees' pin cap (rkv_tree_config;
                                  default 50)                              */
    uint32_t session_signals;  /* RKV_SIGNAL_* the retention uses (default
                                  both): END, a request's session_end marks
                                  the pages only its session used to go
                                  first (rkv_tree_session_end); WAIT, under
                                  hints, a request with a session and no
                                  session_end pins its context (it waits
                                  for its next turn)                       */
    int drop_pinned;           /* rkv_tier_config.drop_pinned: 1 = device
                                  pressure revokes pins; 0 (default) =
                                  pins are lowered into the tiers          */
    /* a real disk file below the metadata-only pool (sim/replay_tiers.c):
       with disk_capacity_tokens, the disk tier writes one record per page
       to this path (or radixkv-tier.blocks in this directory), its payload
       a pattern of the page's hash verified on every load, and keeps it
       for the next run (warm restart); NULL = metadata only              */
    const char *disk_path;
    uint32_t disk_record_bytes; /* payload bytes per record (0 = 2048)   */
} rkv_replay_config;

/*
 * Retention in the scheduler replay (sim/replay_retain.c): what each
 * request's rkv_request_desc.retention says. Every request belongs to a
 * session (rkv_wl_request.session: an agentic session, a trace line's
 * "session", a Bailian root chat id) or to none. Its next turn is the
 * next request of its session (closed-loop child or later line). It
 * "waits for a tool" when its next turn follows a tool call: agentic tool
 * sessions mark that (tool_call; rkv_workload.marks_tool_calls); a trace
 * cannot tell a tool from a person, so there every request with a next
 * turn counts. The context of
 * a request is its prompt + output (what its next turn starts with).
 *
 *   none         no retention; trace hints ignored (the default).
 *   hints        only the trace's per-line hints: "priority" sets the
 *                context's priority (for "priority_duration_ms", on the
 *                trace's clock, in every mode), "ttl_ms" pins the context that long
 *                on the trace's clock (times time_scale, as ttl); a
 *                request with a "session" and no "session_end" waits for
 *                its next turn: its context is pinned for ttl_ms or
 *                retention_ttl_ms (signal WAIT)
 *                (owner: the line's session).
 *   priority     a request that waits for a tool gives its context
 *                priority 80 (kept longer under --evict-policy priority),
 *                a session's last request priority 1 (done: evict first).
 *   ttl          a request that waits for a tool pins its context for
 *                retention_ttl_ms of the workload's clock (times
 *                time_scale when its next turn is a later trace line,
 *                whose gap is scaled too; as given before a closed-loop
 *                turn, whose think time is not) (a cache breakpoint; the pin is made or
 *                renewed when the request's pages are inserted, so the
 *                deadline counts from its end).
 *   ttl-oracle   the same pin with the TTL its next turn actually needs:
 *                the tool latency (a trace: the gap to the next line's
 *                arrival, scaled) + 1 s: what a perfect predictor of tool
 *                time (Continuum) would ask for.
 *   ttl-session  the pin lasts until the session ends.
 * With every mode but none, a line's hints win over the mode's rule for
 * the field they give, and a request marked session_end (a trace line's
 * "session_end": true, an agentic session's last turn) ends its session
 * when it finishes: rkv_tree_session_end releases the session's pins and
 * marks the pages only it used to go first (signal END). Retention runs
 * in both orders: in file order after each request's insert, on the
 * clock arrival_ms * time_scale, with the prompt as the context (file
 * order caches no output). Pins are owned by the session and released
 * (rkv_tree_pins_release) when its last request finishes or is refused; a
 * pin the tree's cap refuses leaves the request unpinned (counted). The
 * fleet replay applies the same retention on each instance, releasing a
 * session's pins on the instance where it ends (others expire).
 */
/* rkv_replay_config.session_signals */
#define RKV_SIGNAL_END 1u
#define RKV_SIGNAL_WAIT 2u

enum rkv_replay_retention {
    RKV_RETENTION_NONE,
    RKV_RETENTION_HINTS,
    RKV_RETENTION_PRIORITY,
    RKV_RETENTION_TTL,
    RKV_RETENTION_TTL_ORACLE,
    RKV_RETENTION_TTL_SESSION,
    RKV_RETENTION_COUNT
};
/* "none", "hints", "priority", "ttl", "ttl-oracle", "ttl-session"; NULL
 * for another value. */
const char *rkv_replay_retention_name(int retention);
/* 1 and *out set when s names a mode, else 0. */
int rkv_replay_retention_parse(const char *s, int *out);

/* Defaults: page size 16, capacity = what an H100 holds beside the 8B
 * model (rkv_cost_default_capacity_tokens), scheduler and cost model
 * defaults. */
void rkv_replay_config_init(rkv_replay_config *cfg);

typedef struct rkv_latency_summary {
    double p50, p90, p99, mean, max; /* ms; percentiles interpolate
                                        linearly between order statistics */
} rkv_latency_summary;

typedef struct rkv_replay_result {
    int sched_mode;
    uint32_t page_size;
    uint64_t capacity_blocks;
    uint64_t requests;         /* requests replayed                          */
    uint64_t prompt_tokens;
    uint64_t hit_tokens;       /* prompt tokens served from the cache (sched
                                  mode: at each request's first admission)   */
    double hit_rate;           /* hit_tokens / prompt_tokens                 */
    uint64_t peak_blocks;      /* file order: most pool blocks in use (all
                                  cached); sched: the scheduler's
                                  peak_blocks_used (blocks held by requests) */
    uint64_t peak_pool_blocks; /* most pool blocks in use, cache included    */
    uint64_t evicted_blocks;
    uint64_t tree_host_bytes;  /* tree metadata at the end                   */
    /* --evict-policy learned's guard (rkv_tree_stats): tokens a shadow LRU
     * hit on the same matches, and the times it fell back to LRU */
    uint64_t guard_lru_hit_tokens;
    uint64_t guard_fallbacks;
    double wall_s;             /* host time of the whole replay              */

    /* file order */
    uint64_t truncated_requests;
    double match_ns, insert_ns, alloc_ns; /* per request, mean              */

    /* scheduler */
    uint64_t rejected_requests; /* prompt + output larger than the pool     */
    uint64_t output_tokens;
    uint64_t prefill_tokens;    /* prefill rows computed (re-computation
                                   after preemption included)              */
    uint64_t prefill_saved_tokens; /* = hit_tokens                          */
    rkv_latency_summary ttft_ms;
    rkv_latency_summary latency_ms;
    double sim_ms;              /* simulated time at the last finish        */
    double output_tokens_per_s; /* simulated                                */
    double prompt_tokens_per_s;
    double requests_per_s;
    uint64_t steps;
    uint64_t preemptions;
    uint64_t dedup_holds;
    double sched_us_per_step;   /* time around rkv_sched_step / steps   */
    double sched_us_per_step_max; /* slowest step, measured around the call */
    uint64_t max_waiting;       /* most requests waiting at once            */
    double busy_ms;             /* simulated time spent in steps            */
    double first_release_ms;    /* earliest / latest release on the         */
    double last_release_ms;     /*   simulated clock                        */
    /* tiers: of hit_tokens, by the medium they came from (device hits
       include pages loaded from a lower tier only when no tier is set)   */
    uint64_t hit_tokens_by_medium[RKV_MEDIUM_COUNT];
    uint64_t load_blocks, store_blocks, failed_loads;
    uint64_t swap_out_blocks, swap_in_blocks;
    uint64_t prefetch_blocks;   /* disk -> host while queued (--prefetch)  */
    uint64_t prefetch_late_blocks; /* of them, read from disk at admission:
                                   not arrived by the simulated clock      */
    uint64_t prefetch_waits;    /* admissions deferred for a prefetch      */
    double load_ms_total;       /* simulated time spent waiting for loads  */
    rkv_latency_summary wait_ms; /* TTFT minus the request's own prefill
                                    time on an idle GPU (from its cached
                                    prefix at admission): queueing          */
    /* retention (scheduler replay, single instance): finished requests of
     * sessions with a request that waits for a tool ("tool" traffic, the
     * ones the ttl modes pin, whatever the mode) and of the rest ("other"
     * traffic: chat sessions, session-less requests), and the tree's pin
     * counters at the end (rkv_retention_stats; a fleet replay's total:
     * the pin counters only, summed over its instances' trees) */
    uint64_t tool_requests, tool_prompt_tokens, tool_hit_tokens;
    uint64_t other_requests, other_prompt_tokens, other_hit_tokens;
    rkv_latency_summary tool_ttft_ms, other_ttft_ms;
    uint64_t pins_made, pins_renewed, pins_refused, pins_expired,
             pins_released, pins_revoked;
    uint64_t pins_demoted; /* lowered into the tiers instead of revoked */
    uint64_t ended_pages;  /* pages marked by session ends (END signal)  */
    /* the disk file (disk_path; zero without one): records read and
     * written (the end-of-run flush included), loads whose payload matched
     * / did not match its pattern, and the warm restart's records found at
     * start: re-indexed, skipped (failed verification), dropped (orphans,
     * duplicates) */
    int disk_file, disk_direct_io, disk_io_uring, disk_warm_file;
    uint64_t disk_reads, disk_writes, disk_verified, disk_verify_failed;
    uint64_t disk_warm_records, disk_warm_skipped, disk_warm_dropped;
} rkv_replay_result;

/* Blocks that hold every full page the workload could cache (prompts, plus
 * outputs when with_outputs), plus one. */
uint64_t rkv_replay_unbounded_blocks(const rkv_workload *wl,
                                     uint32_t page_size, int with_outputs);

rkv_status rkv_replay_file_order(const rkv_workload *wl,
                                 const rkv_replay_config *cfg,
                                 rkv_replay_result *out);
rkv_status rkv_replay_sched(const rkv_workload *wl,
                            const rkv_replay_config *cfg,
                            rkv_replay_result *out);

/* Simulated time of a prefill of q tokens after `prefix` cached tokens on
 * an idle GPU: chunks of at most max_batch_tokens, one step each. */
double rkv_replay_prefill_alone_ms(const rkv_replay_config *cfg,
                                   uint64_t prefix, uint64_t q);

/* Percentiles of v[0..n) (sorted in place). Zeros when n == 0. */
void rkv_latency_summarize(double *v, size_t n, rkv_latency_summary *out);


/*
 * Fleet replay (sim/replay_fleet.c): the scheduler replay on `instances`
 * simulated instances, each with its own pool (cfg->capacity_tokens each),
 * tree (KV events on) and scheduler, on one simulated clock. Each request
 * is routed when it arrives:
 *   kv            rkv_router_route over the instances' drained events
 *                 and their load (running requests, queued prompt
 *                 tokens). By default the router sees both exactly:
 *                 events after every step, load after every step and
 *                 arrival. event_lag_ms delays an instance's events by
 *                 that long after the step that made them (a bus's
 *                 delivery); load_period_ms reports each instance's load
 *                 only every period (a heartbeat; phases staggered over
 *                 the instances), in between the router counts only what
 *                 it routed itself (rkv_router_choose), as the daemon
 *                 does;
 *   round-robin   instance (k mod N) for the k-th arrival;
 *   random        uniform, from `seed` (deterministic);
 *   least-loaded  fewest queued prompt tokens, then fewest running, then
 *                 the smaller index.
 * A closed-loop turn is routed like any arrival (it may land elsewhere).
 */
enum rkv_route {
    RKV_ROUTE_KV,
    RKV_ROUTE_ROUND_ROBIN,
    RKV_ROUTE_RANDOM,
    RKV_ROUTE_LEAST_LOADED,
    RKV_ROUTE_COUNT
};
#define RKV_FLEET_MAX_INSTANCES 1024u /* = RKV_ROUTER_MAX_INSTANCES */

const char *rkv_route_name(enum rkv_route r);
/* "kv", "round-robin", "random", "least-loaded"; 0 if none matches. */
int rkv_route_parse(const char *s, enum rkv_route *out);

typedef struct rkv_fleet_config {
    uint32_t instances;        /* 1..RKV_FLEET_MAX_INSTANCES                */
    enum rkv_route route;
    uint64_t seed;             /* random routing                           */
    uint32_t *finished_on;     /* may be NULL; wl->num_reqs entries: the
                                  instance each request finished on,
                                  UINT32_MAX when refused                   */
    /* kv route: the router's score weights and temperature (NULL: the
     * defaults); its page_tokens is always the replay's page size and its
     * seed `seed` */
    const rkv_router_config *router;
    double event_lag_ms;       /* kv: events reach the router this late    */
    double load_period_ms;     /* kv: load reports this often (0: exact)   */
} rkv_fleet_config;

typedef struct rkv_fleet_result {
    uint32_t instances;
    enum rkv_route route;
    rkv_replay_result total;   /* over the fleet: requests, tokens, hit
                                  rate, TTFT / latency percentiles, steps,
                                  preemptions, evictions, sim_ms           */
    uint64_t inst_requests[RKV_FLEET_MAX_INSTANCES]; /* finished on each    */
    double inst_queued_mean[RKV_FLEET_MAX_INSTANCES]; /* queued prompt
                                  tokens, averaged over arrivals            */
    double queued_mean;        /* mean over instances of inst_queued_mean  */
    double queued_max;         /* max over instances of inst_queued_mean   */
    double balance;            /* queued_max / queued_mean (1 = even; 0
                                  when nothing was ever queued)             */
    uint64_t events_applied;   /* router (kv route; 0 otherwise)           */
    uint64_t resyncs;          /* snapshots the router needed              */
    uint64_t events_by_medium[RKV_MEDIUM_COUNT]; /* of the events applied,
                                  by medium (tiers: host / disk pages)     */
} rkv_fleet_result;

rkv_status rkv_replay_fleet(const rkv_workload *wl,
                            const rkv_replay_config *cfg,
                            const rkv_fleet_config *fc,
                            rkv_fleet_result *out);

#endif

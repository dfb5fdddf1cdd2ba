/*
 * tests/test_replay_fleet.c -- the fleet replay (sim/replay_fleet.c):
 *   - one instance is the single-instance scheduler replay, request by
 *     request, whatever the route;
 *   - kv routing finds at least round-robin's hit rate where prompts share
 *     prefixes (both computed here, on the same workload);
 *   - every request finishes on exactly one instance (or is refused);
 *   - a seed gives the same run; bad --instances / --route are refused with
 *     a message that names the problem;
 *   - tiers (issue 12): every instance gets its own host tier; the hits by
 *     medium add up to the hit tokens, every tree checks, host-medium
 *     events reach the router, and kv routing sends a request to the
 *     instance holding its prefix only in host when the host hit outweighs
 *     that instance's load (and elsewhere when there is no tier).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "tests/support/cli_run.h"
#include "sim/replay.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "tests/support/test_util.h"
#include "tests/support/test_workload.h"

#define TRACE_PATH RKV_SOURCE_DIR "/bench/traces/mooncake_conversation_trace.jsonl"

typedef struct fleet_out {
    rkv_fleet_result res;
    rkv_replay_request_stats *per;
    uint32_t *on;
} fleet_out;

static void fleet_run(const rkv_workload *wl, const rkv_replay_config *base,
                      uint32_t n, enum rkv_route route, uint64_t seed,
                      fleet_out *o)
{
    o->per = calloc(wl->num_reqs, sizeof *o->per);
    o->on = calloc(wl->num_reqs, sizeof *o->on);
    cr_assert(o->per && o->on);
    rkv_replay_config cfg = *base;
    cfg.per_request = o->per;
    rkv_fleet_config fc = rkv_test_fleet_config(n, route, seed);
    fc.finished_on = o->on;
    cr_assert_eq(rkv_replay_fleet(wl, &cfg, &fc, &o->res), RKV_OK,
                 "%u x %s: %s", n, rkv_route_name(route), rkv_last_error());
}

/* Agentic sessions of 8 turns named name, and a replay config for them of
 * capacity tokens that checks the scheduler and tree every check_every
 * steps. */
static rkv_replay_config agentic_setup(rkv_workload *wl, uint32_t sessions,
                                       const char *name, uint64_t capacity,
                                       uint32_t check_every)
{
    rkv_test_agentic(wl, sessions, 8, name);
    return rkv_test_replay_config(0, capacity, check_every);
}

static void fleet_out_free(fleet_out *o)
{
    free(o->per);
    free(o->on);
}

static void same_summary(const rkv_latency_summary *a,
                         const rkv_latency_summary *b, const char *what)
{
    cr_assert(a->p50 == b->p50 && a->p90 == b->p90 && a->p99 == b->p99 &&
                  a->mean == b->mean && a->max == b->max,
              "%s: p50 %g vs %g, p99 %g vs %g", what, a->p50, b->p50, a->p99,
              b->p99);
}

/* The fleet of one against rkv_replay_sched, request by request. */
static void n1_matches(const rkv_workload *wl, const rkv_replay_config *cfg)
{
    rkv_replay_request_stats *single = calloc(wl->num_reqs, sizeof *single);
    cr_assert_not_null(single);
    rkv_replay_config c = *cfg;
    c.per_request = single;
    rkv_replay_result s;
    cr_assert_eq(rkv_replay_sched(wl, &c, &s), RKV_OK, "%s", rkv_last_error());
    if (cfg->host_capacity_tokens)
        cr_assert_gt(s.load_blocks, 0, "the tiers were used");
    for (int route = 0; route < RKV_ROUTE_COUNT; route++) {
        fleet_out f;
        fleet_run(wl, cfg, 1, (enum rkv_route)route, 7, &f);
        const rkv_replay_result *t = &f.res.total;
        const char *rn = rkv_route_name((enum rkv_route)route);
        for (size_t i = 0; i < wl->num_reqs; i++) {
            cr_assert_eq(f.per[i].finished, single[i].finished, "%s: req %zu",
                         rn, i);
            cr_assert_eq(f.per[i].hit_tokens, single[i].hit_tokens,
                         "%s: req %zu hit %u vs %u", rn, i, f.per[i].hit_tokens,
                         single[i].hit_tokens);
            cr_assert(f.per[i].ttft_ms == single[i].ttft_ms &&
                          f.per[i].latency_ms == single[i].latency_ms,
                      "%s: req %zu ttft %g vs %g", rn, i, f.per[i].ttft_ms,
                      single[i].ttft_ms);
        }
        cr_assert_eq(t->requests, s.requests);
        cr_assert_eq(t->rejected_requests, s.rejected_requests);
        cr_assert_eq(t->hit_tokens, s.hit_tokens);
        cr_assert_eq(t->prompt_tokens, s.prompt_tokens);
        cr_assert_eq(t->output_tokens, s.output_tokens);
        cr_assert_eq(t->prefill_tokens, s.prefill_tokens);
        cr_assert_eq(t->preemptions, s.preemptions);
        cr_assert_eq(t->evicted_blocks, s.evicted_blocks);
        for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
            cr_assert_eq(t->hit_tokens_by_medium[m], s.hit_tokens_by_medium[m],
                         "%s: medium %d", rn, m);
        cr_assert_eq(t->load_blocks, s.load_blocks, "%s", rn);
        cr_assert_eq(t->store_blocks, s.store_blocks, "%s", rn);
        cr_assert_eq(t->failed_loads, s.failed_loads, "%s", rn);
        cr_assert(t->load_ms_total == s.load_ms_total, "%s: load %g vs %g", rn,
                  t->load_ms_total, s.load_ms_total);
        cr_assert(t->busy_ms == s.busy_ms && t->sim_ms == s.sim_ms, "%s", rn);
        same_summary(&t->ttft_ms, &s.ttft_ms, "ttft");
        same_summary(&t->latency_ms, &s.latency_ms, "latency");
        cr_assert_eq(f.res.inst_requests[0], s.requests);
        fleet_out_free(&f);
    }
    free(single);
}

Test(fleet, one_instance_is_the_single_replay, .timeout = 600)
{
    /* capacity: evicts, the trees are under pressure */
    rkv_replay_config cfg = rkv_test_replay_config(0, 300000, 97);
    cfg.time_scale = 0.25; /* queues form: the step order matters */
    rkv_workload wl;
    rkv_test_trace_slice(&wl, TRACE_PATH, 600);
    n1_matches(&wl, &cfg);
    rkv_workload_free(&wl);

    /* closed-loop turns, some refused for their size */
    rkv_test_agentic(&wl, 12, 8, "fleet.n1_agentic");
    cfg.capacity_tokens = 9000;
    cfg.time_scale = 1;
    n1_matches(&wl, &cfg);
    /* with a host tier (and a disk below it): loads, load-only steps */
    cfg.host_capacity_tokens = 12000;
    cfg.disk_capacity_tokens = 40000;
    n1_matches(&wl, &cfg);
    rkv_workload_free(&wl);
}

Test(fleet, kv_hits_at_least_round_robin, .timeout = 600)
{
    /* agentic sessions: each turn repeats its session's whole history, and
     * all share the tool list -- prefixes that routing can keep together */
    rkv_workload wl;
    /* capacity: a few sessions' history per instance */
    rkv_replay_config cfg = agentic_setup(&wl, 32, "fleet.kv_vs_rr", 60000, 50);
    for (uint32_t n = 2; n <= 4; n += 2) {
        fleet_out kv, rr;
        fleet_run(&wl, &cfg, n, RKV_ROUTE_KV, 1, &kv);
        fleet_run(&wl, &cfg, n, RKV_ROUTE_ROUND_ROBIN, 1, &rr);
        cr_assert_eq(kv.res.total.prompt_tokens, rr.res.total.prompt_tokens);
        cr_assert_geq(kv.res.total.hit_rate, rr.res.total.hit_rate,
                      "%u instances: kv %.4f < round-robin %.4f", n,
                      kv.res.total.hit_rate, rr.res.total.hit_rate);
        cr_assert_gt(kv.res.events_applied, 0, "the router saw the events");
        fleet_out_free(&kv);
        fleet_out_free(&rr);
    }
    rkv_workload_free(&wl);
}

Test(fleet, every_request_finishes_on_exactly_one_instance, .timeout = 600)
{
    rkv_workload wl;
    /* capacity: some requests can never fit, refused */
    rkv_replay_config cfg =
        agentic_setup(&wl, 16, "fleet.one_instance", 9000, 31);
    for (int route = 0; route < RKV_ROUTE_COUNT; route++) {
        fleet_out f;
        fleet_run(&wl, &cfg, 3, (enum rkv_route)route, 5, &f);
        const rkv_replay_result *t = &f.res.total;
        const char *rn = rkv_route_name((enum rkv_route)route);
        cr_assert_gt(t->rejected_requests, 0, "%s: the seed refuses some", rn);
        cr_assert_eq(t->requests + t->rejected_requests, wl.num_reqs, "%s", rn);
        uint64_t per_inst[3] = {0, 0, 0}, finished = 0;
        for (size_t i = 0; i < wl.num_reqs; i++) {
            if (f.per[i].finished) {
                cr_assert_lt(f.on[i], 3u, "%s: req %zu on %u", rn, i, f.on[i]);
                per_inst[f.on[i]]++;
                finished++;
            } else {
                cr_assert_eq(f.on[i], UINT32_MAX, "%s: req %zu", rn, i);
            }
        }
        cr_assert_eq(finished, t->requests);
        for (int k = 0; k < 3; k++)
            cr_assert_eq(per_inst[k], f.res.inst_requests[k], "%s", rn);
        if (route == RKV_ROUTE_ROUND_ROBIN)
            for (int k = 0; k < 3; k++)
                cr_assert_gt(per_inst[k], 0, "round-robin used instance %d", k);
        fleet_out_free(&f);
    }
    rkv_workload_free(&wl);
}

Test(fleet, a_seed_gives_the_same_run, .timeout = 600)
{
    rkv_workload wl;
    rkv_test_trace_slice(&wl, TRACE_PATH, 400);
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.capacity_tokens = 200000;
    for (int route = 0; route < RKV_ROUTE_COUNT; route++) {
        fleet_out a, b;
        fleet_run(&wl, &cfg, 4, (enum rkv_route)route, 11, &a);
        fleet_run(&wl, &cfg, 4, (enum rkv_route)route, 11, &b);
        cr_assert(!memcmp(a.on, b.on, wl.num_reqs * sizeof *a.on));
        cr_assert(!memcmp(a.per, b.per, wl.num_reqs * sizeof *a.per));
        cr_assert_eq(a.res.total.hit_tokens, b.res.total.hit_tokens);
        cr_assert(a.res.balance == b.res.balance);
        fleet_out_free(&a);
        fleet_out_free(&b);
    }
    /* another seed: random routing places requests elsewhere */
    fleet_out a, b;
    fleet_run(&wl, &cfg, 4, RKV_ROUTE_RANDOM, 11, &a);
    fleet_run(&wl, &cfg, 4, RKV_ROUTE_RANDOM, 12, &b);
    cr_assert(memcmp(a.on, b.on, wl.num_reqs * sizeof *a.on) != 0);
    fleet_out_free(&a);
    fleet_out_free(&b);
    rkv_workload_free(&wl);
}

Test(fleet, tiers_split_hits_by_medium_and_reach_the_router, .timeout = 600)
{
    rkv_workload wl;
    /* capacity: evicts into the host tier; sched and tree checks every 7
     * steps, every tree at the end */
    rkv_replay_config cfg = agentic_setup(&wl, 32, "fleet.tiers", 30000, 7);
    cfg.host_capacity_tokens = 300000;
    for (int route = 0; route < RKV_ROUTE_COUNT; route++) {
        const char *rn = rkv_route_name((enum rkv_route)route);
        fleet_out f;
        fleet_run(&wl, &cfg, 3, (enum rkv_route)route, 3, &f);
        const rkv_replay_result *t = &f.res.total;
        uint64_t sum = 0;
        for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
            sum += t->hit_tokens_by_medium[m];
        cr_assert_eq(sum, t->hit_tokens, "%s: by medium %llu, hits %llu", rn,
                     (unsigned long long)sum,
                     (unsigned long long)t->hit_tokens);
        uint64_t per_sum = 0;
        for (size_t i = 0; i < wl.num_reqs; i++)
            per_sum += f.per[i].hit_tokens;
        cr_assert_eq(per_sum, t->hit_tokens, "%s", rn);
        cr_assert_gt(t->hit_tokens_by_medium[RKV_MEDIUM_HOST], 0,
                     "%s: the host tier was hit", rn);
        cr_assert_eq(t->hit_tokens_by_medium[RKV_MEDIUM_DISK], 0, "%s: no disk",
                     rn);
        cr_assert_gt(t->store_blocks, 0, "%s: evictions stored pages", rn);
        cr_assert_geq(t->load_blocks * cfg.page_size,
                      t->hit_tokens_by_medium[RKV_MEDIUM_HOST],
                      "%s: host hits were loaded", rn);
        cr_assert_gt(t->load_ms_total, 0, "%s", rn);
        if (route == RKV_ROUTE_KV) {
            cr_assert_gt(f.res.events_by_medium[RKV_MEDIUM_HOST], 0,
                         "the router got host-medium events");
            uint64_t ev = 0;
            for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
                ev += f.res.events_by_medium[m];
            cr_assert_eq(ev, f.res.events_applied);
        } else {
            cr_assert_eq(f.res.events_applied, 0, "%s: no router", rn);
        }
        fleet_out_free(&f);
    }
    rkv_workload_free(&wl);
}

/* Two instances, page 16, trace blocks of 512 tokens. X keeps instance 0
 * busy while A (prefix P = blocks 1, 2) and four fillers go to instance
 * 1, whose small pool pushes P into its host tier; L then keeps instance 1
 * running while X has finished, and C (prefix P) arrives. With the host
 * tier the router scores instance 1 at half of P's 1024 tokens less one
 * running request (16) and routes C there; without it, to idle instance
 * 0. */
static const char host_route_trace[] =
    "{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 300, "
    "\"hash_ids\": [100]}\n"
    "{\"timestamp\": 1, \"input_length\": 1024, \"output_length\": 1, "
    "\"hash_ids\": [1, 2]}\n"
    "{\"timestamp\": 400, \"input_length\": 1024, \"output_length\": 1, "
    "\"hash_ids\": [10, 11]}\n"
    "{\"timestamp\": 800, \"input_length\": 1024, \"output_length\": 1, "
    "\"hash_ids\": [12, 13]}\n"
    "{\"timestamp\": 1200, \"input_length\": 1024, \"output_length\": 1, "
    "\"hash_ids\": [14, 15]}\n"
    "{\"timestamp\": 1600, \"input_length\": 1024, \"output_length\": 1, "
    "\"hash_ids\": [16, 17]}\n"
    "{\"timestamp\": 1700, \"input_length\": 512, \"output_length\": 900, "
    "\"hash_ids\": [50]}\n"
    "{\"timestamp\": 3000, \"input_length\": 1536, \"output_length\": 1, "
    "\"hash_ids\": [1, 2, 60]}\n";

Test(fleet, kv_routes_to_a_host_copy, .timeout = 600)
{
    rkv_trace_reader *rd = NULL;
    cr_assert_eq(rkv_trace_reader_open_memory(host_route_trace,
                                              sizeof host_route_trace - 1,
                                              "host_route", &rd),
                 RKV_OK, "%s", rkv_last_error());
    rkv_workload wl;
    rkv_workload_init(&wl);
    cr_assert_eq(rkv_workload_load_trace(&wl, rd, 0), RKV_OK, "%s",
                 rkv_last_error());
    rkv_trace_reader_close(rd);
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.page_size = 16;
    cfg.time_scale = 1;
    cfg.capacity_tokens = 3072; /* A and two fillers; the third evicts P */
    cfg.check_every = 1;
    for (int tier = 1; tier >= 0; tier--) {
        cfg.host_capacity_tokens = tier ? 16384 : 0;
        fleet_out f;
        fleet_run(&wl, &cfg, 2, RKV_ROUTE_KV, 1, &f);
        cr_assert_eq(f.res.total.requests, wl.num_reqs, "tier %d", tier);
        /* the setting: X on 0; A, the fillers and L on 1; X done before C
         * arrives, L still running */
        cr_assert_eq(f.on[0], 0u, "tier %d: X on %u", tier, f.on[0]);
        for (size_t i = 1; i <= 6; i++)
            cr_assert_eq(f.on[i], 1u, "tier %d: req %zu on %u", tier, i,
                         f.on[i]);
        double c_at = wl.reqs[7].arrival_ms;
        cr_assert_lt(wl.reqs[0].arrival_ms + f.per[0].latency_ms, c_at);
        cr_assert_gt(wl.reqs[6].arrival_ms + f.per[6].latency_ms, c_at);
        if (tier) {
            cr_assert_eq(f.on[7], 1u, "C went to %u, not to its host copy",
                         f.on[7]);
            cr_assert_eq(f.per[7].hit_tokens, 1024u, "C hit P: %u",
                         f.per[7].hit_tokens);
            cr_assert_eq(f.res.total.hit_tokens_by_medium[RKV_MEDIUM_HOST],
                         1024u, "P came from the host tier");
            cr_assert_gt(f.res.events_by_medium[RKV_MEDIUM_HOST], 0);
        } else {
            cr_assert_eq(f.on[7], 0u, "no tier: C to the idle instance");
            cr_assert_eq(f.per[7].hit_tokens, 0u);
            cr_assert_eq(f.res.events_by_medium[RKV_MEDIUM_HOST], 0);
        }
        fleet_out_free(&f);
    }
    rkv_workload_free(&wl);
}

Test(fleet, bad_configs_are_refused)
{
    rkv_workload wl;
    rkv_test_trace_slice(&wl, TRACE_PATH, 10);
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    rkv_fleet_config fc;
    memset(&fc, 0, sizeof fc);
    rkv_fleet_result r;
    fc.instances = 0;
    cr_assert_eq(rkv_replay_fleet(&wl, &cfg, &fc, &r), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "0 instances"), "%s", rkv_last_error());
    fc.instances = RKV_FLEET_MAX_INSTANCES + 1;
    cr_assert_eq(rkv_replay_fleet(&wl, &cfg, &fc, &r), RKV_ERR_INVALID_ARG);
    fc.instances = 2;
    fc.route = RKV_ROUTE_COUNT;
    cr_assert_eq(rkv_replay_fleet(&wl, &cfg, &fc, &r), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "unknown route"), "%s", rkv_last_error());
    rkv_workload_free(&wl);
}

static void refused(const char *args, const char *want)
{
    rkv_cli_options o;
    char err[512];
    cr_assert_eq(rkv_cli_parse_line(args, &o, err, sizeof err), RKV_ACT_USAGE_ERROR,
                 "'%s' was accepted", args);
    cr_assert(strstr(err, want), "'%s': message '%s' lacks '%s'", args, err,
              want);
}

Test(fleet, bad_options_are_refused_with_a_reason)
{
    refused("replay --instances 0", "--instances: expected a whole number in 1..1024");
    refused("replay --instances 1025", "1..1024");
    refused("replay --instances two", "got 'two'");
    refused("replay --instances 2,4", "replay takes one count");
    refused("replay --instances 2 --route kv,nearest", "got 'nearest'");
    refused("replay --route kv,kv", "listed twice");
    refused("replay --route kv,", "empty item");
    refused("replay --instances 2 --order file", "need --order sched");
    refused("sweep --instances 2 --order both", "need --order sched");
    refused("sweep --instances 2,4 --capacities 1e6", "--capacities does not combine");
    refused("replay --instances", "--instances needs a value");

    /* and what is accepted */
    char *argv[] = {"radixkv", "sweep", "--instances", "1,4", "--route",
                    "least-loaded,random", NULL};
    rkv_cli_options o;
    char err[512];
    cr_assert_eq(rkv_cli_parse(6, argv, &o, err, sizeof err), RKV_ACT_RUN, "%s",
                 err);
    cr_assert(o.fleet);
    cr_assert_eq(o.num_instances, 2);
    cr_assert_eq(o.instances[1], 4);
    cr_assert_eq(o.num_routes, 2);
    cr_assert_eq(o.routes[0], RKV_ROUTE_LEAST_LOADED);
    cr_assert_eq(o.order, RKV_ORDER_SCHED);
    char *argv2[] = {"radixkv", "replay", "--instances", "4", NULL};
    cr_assert_eq(rkv_cli_parse(4, argv2, &o, err, sizeof err), RKV_ACT_RUN);
    cr_assert_eq(o.num_routes, 2, "more than one instance: kv and round-robin");
    cr_assert_eq(o.routes[0], RKV_ROUTE_KV);
    cr_assert_eq(o.routes[1], RKV_ROUTE_ROUND_ROBIN);
    cr_assert(!o.router_set);
    cr_assert_eq(o.router.running_weight, 16, "the router's defaults");

    /* the kv route's weights and what its router sees */
    refused("replay --queue-weight 2", "need a fleet");
    refused("replay --load-period-ms 500", "need a fleet");
    refused("replay --instances 2 --medium-weights 1,2", "three numbers");
    refused("replay --instances 2 --temperature -1", "--temperature");
    refused("replay --instances 2 --event-lag-ms x", "--event-lag-ms");
    char *argv3[] = {"radixkv", "sweep", "--instances", "2,4", "--queue-weight", "0.5",
                     "--running-weight", "4", "--medium-weights", "1,0.25,0",
                     "--temperature", "0.1", "--event-lag-ms", "20",
                     "--load-period-ms", "500", NULL};
    cr_assert_eq(rkv_cli_parse(16, argv3, &o, err, sizeof err), RKV_ACT_RUN, "%s", err);
    cr_assert(o.router_set);
    cr_assert_eq(o.router.queue_weight, 0.5);
    cr_assert_eq(o.router.running_weight, 4);
    cr_assert_eq(o.router.medium_weight[RKV_MEDIUM_HOST], 0.25);
    cr_assert_eq(o.router.medium_weight[RKV_MEDIUM_DISK], 0);
    cr_assert_eq(o.router.temperature, 0.1);
    cr_assert_eq(o.event_lag_ms, 20);
    cr_assert_eq(o.load_period_ms, 500);
}

/*
 * tests/test_replay_fleet_lag.c -- the fleet replay's view of what a real
 * router sees (rkv_fleet_config.event_lag_ms, load_period_ms, router):
 *   - events delayed past the end of the run never reach the router (it
 *     routes on load alone), a short lag delivers them;
 *   - with load reported only by period, requests still spread over the
 *     instances (the router counts what it routed);
 *   - every request still finishes on exactly one instance, a seed gives
 *     the same run, and bad values are refused.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay.h"
#include "sim/workload.h"
#include "tests/support/test_util.h"
#include "tests/support/test_workload.h"

static rkv_status run(const rkv_workload *wl, uint32_t n, double lag, double period,
                      const rkv_router_config *rc, uint64_t seed, rkv_fleet_result *out)
{
    rkv_replay_config cfg = rkv_test_replay_config(0, 60000, 50);
    rkv_fleet_config fc = rkv_test_fleet_config(n, RKV_ROUTE_KV, seed);
    fc.event_lag_ms = lag;
    fc.load_period_ms = period;
    fc.router = rc;
    return rkv_replay_fleet(wl, &cfg, &fc, out);
}

Test(fleet_lag, events_reach_the_router_only_after_the_lag, .timeout = 600)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 24, 6, "fleet_lag.events");
    static rkv_fleet_result exact, never, lag;
    cr_assert_eq(run(&wl, 3, 0, 0, NULL, 1, &exact), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(run(&wl, 3, 1e9, 0, NULL, 1, &never), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(run(&wl, 3, 200, 500, NULL, 1, &lag), RKV_OK, "%s", rkv_last_error());
    cr_assert_gt(exact.events_applied, 0);
    cr_assert_eq(never.events_applied, 0, "a lag past the run delivers nothing");
    cr_assert_gt(lag.events_applied, 0, "a short lag delivers");
    const rkv_fleet_result *all[3] = {&exact, &never, &lag};
    for (int k = 0; k < 3; k++) {
        const rkv_replay_result *t = &all[k]->total;
        cr_assert_eq(t->requests + t->rejected_requests, wl.num_reqs);
        uint64_t sum = 0;
        for (uint32_t i = 0; i < 3; i++)
            sum += all[k]->inst_requests[i];
        cr_assert_eq(sum, t->requests);
    }
    /* blind to the caches, kv routing finds fewer hits than when it sees
     * them (the same workload and seed) */
    cr_assert_lt(never.total.hit_rate, exact.total.hit_rate, "blind %.4f, exact %.4f",
                 never.total.hit_rate, exact.total.hit_rate);
    rkv_workload_free(&wl);
}

Test(fleet_lag, periodic_load_still_spreads_and_is_deterministic, .timeout = 600)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 24, 6, "fleet_lag.load");
    static rkv_fleet_result a, b;
    /* load reports far apart and events never: the router knows only what
     * it routed itself */
    cr_assert_eq(run(&wl, 4, 1e9, 1e9, NULL, 3, &a), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(run(&wl, 4, 1e9, 1e9, NULL, 3, &b), RKV_OK, "%s", rkv_last_error());
    for (uint32_t i = 0; i < 4; i++) {
        cr_assert_gt(a.inst_requests[i], wl.num_reqs / 16, "instance %u got %llu of %zu",
                     i, (unsigned long long)a.inst_requests[i], wl.num_reqs);
        cr_assert_eq(a.inst_requests[i], b.inst_requests[i], "not deterministic");
    }
    cr_assert(a.total.hit_rate == b.total.hit_rate);
    /* weights reach the router: with the cache worth nothing and the
     * queue everything, kv routing is load balancing and hits less */
    rkv_router_config rc;
    rkv_router_config_init(&rc);
    for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
        rc.medium_weight[m] = 0;
    static rkv_fleet_result exact, blind;
    cr_assert_eq(run(&wl, 4, 0, 0, NULL, 3, &exact), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(run(&wl, 4, 0, 0, &rc, 3, &blind), RKV_OK, "%s", rkv_last_error());
    cr_assert_lt(blind.total.hit_rate, exact.total.hit_rate, "weights 0: %.4f vs %.4f",
                 blind.total.hit_rate, exact.total.hit_rate);
    rkv_workload_free(&wl);
}

Test(fleet_lag, bad_values_are_refused)
{
    rkv_workload wl;
    rkv_test_agentic(&wl, 8, 4, "fleet_lag.bad");
    rkv_fleet_result r;
    cr_assert_eq(run(&wl, 2, -1, 0, NULL, 1, &r), RKV_ERR_INVALID_ARG);
    cr_assert_eq(run(&wl, 2, 0, 0.0 / 0.0, NULL, 1, &r), RKV_ERR_INVALID_ARG);
    rkv_router_config rc;
    rkv_router_config_init(&rc);
    rc.temperature = -2;
    cr_assert_eq(run(&wl, 2, 0, 0, &rc, 1, &r), RKV_ERR_INVALID_ARG);
    rkv_workload_free(&wl);
}

/*
 * cli/report_fleet.h -- formats fleet replays (rkv_replay_fleet, one per
 * instance count x route) as one table for people or one JSON object.
 *
 * Columns: instances, route, requests finished, hit rate, TTFT p50 / p99
 * (human units, rkv_fmt_duration, as the single replay's report),
 * load balance (max / mean over instances of the queued prompt tokens,
 * averaged over arrivals; 1.00 = even), mean queued tokens, preemptions,
 * simulated and host time. JSON: {"command", "version", "options",
 * "workload", "capacity_tokens" (per instance), "time_scales" (per
 * instance count), "runs": [{instances, route, requests, rejected,
 * prompt_tokens, hit_tokens, hit_rate, ttft_ms {p50,p90,p99,mean,max},
 * latency_ms, balance, queued_tokens_mean, queued_tokens_max,
 * inst_requests [...], preemptions, evicted_blocks, sim_s, wall_s,
 * router_events, router_resyncs}]}; no data = null.
 */
#ifndef RKV_CLI_REPORT_FLEET_H
#define RKV_CLI_REPORT_FLEET_H

#include <stdio.h>

#include "cli/args.h"
#include "sim/replay.h"
#include "sim/workload.h"

typedef struct rkv_fleet_run {
    double time_scale;          /* the scale this run used                  */
    rkv_fleet_result r;
} rkv_fleet_run;

void rkv_fleet_report_text(FILE *f, const rkv_cli_options *o,
                           const rkv_workload *wl, const rkv_fleet_run *runs,
                           size_t n);
void rkv_fleet_report_json(FILE *f, const rkv_cli_options *o,
                           const rkv_workload *wl, const rkv_fleet_run *runs,
                           size_t n);

#endif

/*
 * cli/report.h -- formats a replay result (sim/replay.h) for people and for
 * programs.
 *
 * Text: durations in human units (ms below 1 s, s below 2 min, min below
 * 2 h, then h); in scheduler mode the time scale used (and why), the load
 * regime in words (sustained, near capacity, overloaded; closed loop for
 * agentic sessions) and whether TTFT is mostly queueing, and the
 * cache-alone hit rate (--order file) beside the scheduler's.
 *
 * JSON (rkv_report_json): exactly one object on one line: "command",
 * "version", "options" (every option in effect, cli/args.h), then the
 * results -- requests, prompt_tokens, hit_tokens, hit_rate (a fraction),
 * capacity and page size; in scheduler mode also ttft_ms, latency_ms and
 * wait_ms ({p50, p90, p99, mean, max}), time_scale {value, auto,
 * estimated_work_s, arrival_span_s, estimated_load}, regime,
 * ttft_mostly_queueing, cache_alone {hit_tokens, hit_rate}, preemptions,
 * peak_blocks, sched_us_per_step, throughput and the cost model. A value
 * with no data (no request finished, nothing simulated) is null.
 */
#ifndef RKV_CLI_REPORT_H
#define RKV_CLI_REPORT_H

#include <stdio.h>

#include "cli/args.h"
#include "sim/load.h"
#include "sim/replay.h"
#include "sim/workload.h"

typedef struct rkv_report_ctx {
    const rkv_cli_options *opts;          /* options in effect (JSON)     */
    const rkv_replay_result *cache_alone; /* --order file beside sched, or
                                             NULL                         */
    const rkv_load_estimate *load;        /* sched mode, or NULL          */
} rkv_report_ctx;

/* "812.4 ms", "3.42 s", "38.6 min", "2.07 h" into buf. */
const char *rkv_fmt_duration(char *buf, size_t cap, double ms);

/* The load regime at the run's time scale: "sustained", "near capacity",
 * "overloaded", or "closed loop" (sched mode). */
const char *rkv_report_regime(const rkv_replay_config *cfg,
                              const rkv_load_estimate *load);

/* The pin counters as JSON members (",\"pins_made\":N,...,\"pins_demoted\":N"),
 * for the single replay's "retention" object and each fleet run. */
void rkv_report_json_pins(FILE *f, const rkv_replay_result *r);

/* The pin counters in the reports' order, and their names: made, renewed,
 * refused, expired, released, revoked, demoted. */
enum { RKV_REPORT_PINS = 7 };
extern const char *const rkv_report_pin_names[RKV_REPORT_PINS];
void rkv_report_pin_counts(const rkv_replay_result *r,
                           unsigned long long out[RKV_REPORT_PINS]);

/* JSON members shared by the single replay's and the fleet's reports:
 * ",\"name\":V" (null without data or when V is not finite), and a
 * latency summary ",\"name\":{\"p50\":..,\"p90\":..,\"p99\":..,
 * \"mean\":..,\"max\":..}" in ms to the microsecond (null without data). */
void rkv_report_json_num(FILE *f, const char *name, int have, double v);
void rkv_report_json_lat(FILE *f, const char *name, int have,
                         const rkv_latency_summary *l);
void rkv_report_json(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r,
                     const rkv_report_ctx *ctx);
void rkv_report_text(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r,
                     const rkv_report_ctx *ctx);

#endif

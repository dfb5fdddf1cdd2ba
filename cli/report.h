/*
 * cli/report.h -- formats a replay result (cli/replay.h) for people and for
 * programs.
 *
 * JSON (rkv_report_json): exactly one object on one line, with at least
 * requests, prompt_tokens, hit_tokens, hit_rate (a fraction), capacity and
 * page size; in scheduler mode also ttft_ms and latency_ms ({p50, p90, p99,
 * mean, max}), preemptions, peak_blocks, sched_us_per_step, throughput and
 * the cost model used.
 */
#ifndef RKV_CLI_REPORT_H
#define RKV_CLI_REPORT_H

#include <stdio.h>

#include "cli/replay.h"
#include "cli/workload.h"

void rkv_report_json(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r);
void rkv_report_text(FILE *f, const rkv_replay_config *cfg,
                     const rkv_workload *wl, const rkv_replay_result *r);

#endif

/*
 * sim/load.h -- how much work a workload asks of the simulated GPU
 * (sim/costmodel.h), and the arrival time scale at which it keeps up:
 * what `--time-scale auto` (the default) chooses.
 *
 * Estimated work = for every request, its prefill on an idle GPU with
 * nothing cached (chunks of max_batch_tokens, one step each, overhead
 * included) + the KV bytes its decode steps read (context tokens x KV
 * bytes per token, at bandwidth x mbu). The weight reads of a decode step
 * are left out: a batch shares them, so they cost time but not capacity.
 * Cache hits are left out too, so the estimate errs towards more work.
 *
 * Load at scale s = work / (s x span), span = the open-loop arrivals'
 * spread (latest - earliest). The auto scale is the smallest s >= 1, in
 * steps of 0.1, with load <= target (0.7: a sustained operating point
 * with headroom for bursts). Workloads with closed-loop requests (agentic
 * turns) or no spread (one wave) get scale 1.
 */
#ifndef RKV_SIM_LOAD_H
#define RKV_SIM_LOAD_H

#include "sim/replay.h"
#include "sim/workload.h"

#define RKV_LOAD_TARGET 0.7

typedef struct rkv_load_estimate {
    double work_ms;     /* estimated GPU work (simulated ms)               */
    double span_ms;     /* open-loop arrival spread, unscaled              */
    int closed_loop;    /* some requests follow their parent               */
    double auto_scale;  /* the scale --time-scale auto picks               */
} rkv_load_estimate;

rkv_status rkv_load_estimate_of(const rkv_workload *wl,
                                const rkv_replay_config *cfg,
                                rkv_load_estimate *out);

/* work / (scale x span); 0 when the span is 0. */
double rkv_load_at(const rkv_load_estimate *e, double scale);

#endif

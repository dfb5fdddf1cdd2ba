/*
 * cli/sweep.h -- `radixkv sweep`: the replay over a grid of capacities
 * (and, in scheduler mode, policies), printed as a table and plotted as
 * SVG (hit rate vs capacity; TTFT p50 and p99 vs capacity). Capacities
 * beyond what the simulated GPU's memory holds are marked in the table
 * ('*'), in the JSON and in the plot (a dashed line at the GPU's
 * capacity): a real GPU of that kind could not hold them. A host-tier
 * sweep (--host-capacities) may run a fleet per point (--instances,
 * --route): its columns are then instance count x route.
 */
#ifndef RKV_CLI_SWEEP_H
#define RKV_CLI_SWEEP_H

#include <stddef.h>
#include <stdio.h>

#include "cli/args.h"
#include "sim/replay.h"

/* Told before each replay of the grid: its index, the count, a label. */
typedef void (*rkv_sweep_run_fn)(void *ctx, size_t run, size_t runs,
                                 const char *label);

/* One fleet column of a sweep. */
typedef struct rkv_sweep_fleet {
    uint32_t instances;
    enum rkv_route route;
    double time_scale;            /* the replay's, for this instance count */
} rkv_sweep_fleet;

typedef struct rkv_sweep_config {
    rkv_replay_config base;       /* capacity_tokens / policy overridden  */
    const uint64_t *capacities;   /* tokens; RKV_REPLAY_UNBOUNDED allowed */
    size_t num_capacities;
    const rkv_policy *policies;
    size_t num_policies;
    int file_order;               /* run --order file at each capacity    */
    int sched;                    /* run --order sched per policy         */
    /* tiers: when num_host_capacities > 0 the rows are these host-tier
     * capacities (tokens) at the device capacity capacities[0] (and
     * num_capacities must be 1); the plot's x axis is the host capacity */
    const uint64_t *host_capacities;
    size_t num_host_capacities;
    /* fleet: when num_fleet > 0 the columns are fleet replays
     * (rkv_replay_fleet; each cell's result is the fleet's total) instead
     * of policies: fleet[k]'s instances, route and time scale, every one
     * under base.sched.policy; scheduler mode only (no file order) */
    const rkv_sweep_fleet *fleet;
    size_t num_fleet;
    uint64_t fleet_seed;          /* the fleet's random routing            */
    const rkv_router_config *fleet_router; /* kv route (NULL: defaults)   */
    double fleet_event_lag_ms, fleet_load_period_ms; /* rkv_fleet_config's */
    rkv_sweep_run_fn on_run;      /* may be NULL                          */
    void *on_run_ctx;
} rkv_sweep_config;

typedef struct rkv_sweep_result {
    size_t num_capacities, num_policies;
    double *capacity_tokens;      /* effective capacity (tokens) per row
                                     (the host tier's in a host sweep)    */
    rkv_replay_result *file;      /* [num_capacities] or NULL             */
    rkv_replay_result *sched;     /* [cap * num_policies + pol] or NULL   */
} rkv_sweep_result;

rkv_status rkv_sweep_run(const rkv_workload *wl, const rkv_sweep_config *cfg,
                         rkv_sweep_result *out);
void rkv_sweep_result_free(rkv_sweep_result *r);

/* Column p's name: the policy ("lpm"), or for a fleet column the route
 * and instance count ("kv x4", "round-robin x4"). */
void rkv_sweep_col_name(const rkv_sweep_config *cfg, size_t p, char *buf,
                        size_t cap);

void rkv_sweep_print_table(FILE *f, const rkv_sweep_config *cfg,
                           const rkv_sweep_result *r);
/* One JSON object: command, version, options (may be NULL), svg (the
 * plot's path, or null), rows; a row's capacity beyond the simulated
 * GPU's memory has "beyond_gpu_memory": true; values with no data are
 * null. A row's "sched" object is keyed by column name; a fleet column
 * also carries "instances", "route" and "time_scale". */
void rkv_sweep_print_json(FILE *f, const rkv_workload *wl,
                          const rkv_sweep_config *cfg,
                          const rkv_sweep_result *r,
                          const rkv_cli_options *opts, const char *svg_path);

/* Whether a capacity (tokens) exceeds what the simulated GPU holds beside
 * the model's weights (rkv_cost_default_capacity_tokens); unbounded does. */
int rkv_sweep_beyond_gpu(const rkv_sweep_config *cfg, uint64_t capacity);
rkv_status rkv_sweep_write_svg(FILE *f, const char *title,
                               const rkv_sweep_config *cfg,
                               const rkv_sweep_result *r);

#endif

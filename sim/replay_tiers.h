/*
 * sim/replay_tiers.h -- the scheduler replay's tiers (README "Tiers"): host and
 * disk stores below the metadata-only pool, the scheduler's tier costs
 * from the cost model, and the time of a plan's loads. Not part of
 * rkv_cli's API.
 */
#ifndef RKV_SIM_REPLAY_TIERS_H
#define RKV_SIM_REPLAY_TIERS_H

#include "sim/replay.h"

/* Creates the metadata-only stores (block_bytes 0; the disk a real file
 * of synthetic records with cfg->disk_path) of cfg's host and
 * disk capacities (in tokens, whole pages: a host, a disk, or a host over
 * a disk; see replay_tiers.c) and attaches them to the empty tree with
 * cfg's write policy; *host and *disk get them (NULL when not asked). No
 * capacity: nothing. A swap without a host capacity is refused. On failure
 * nothing is left attached or allocated. */
rkv_status rkv_replay_tiers_attach(const rkv_replay_config *cfg,
                                   rkv_tree *tree, rkv_store **host,
                                   rkv_store **disk);

/* cfg->sched with the tier fields filled from the cost model: per-token
 * prefill time, per-page host / disk load time, cfg->swap. */
void rkv_replay_sched_config(const rkv_replay_config *cfg,
                             rkv_sched_config *out);

/* Modelled time of the plan's loads (LOAD and SWAP_IN copies), all
 * sharing the link: the sum of their copy times. */
double rkv_replay_plan_load_ms(const rkv_replay_config *cfg,
                               const rkv_batch_plan *p);

#endif

/*
 * sim/replay_internal.h -- helpers shared by the replay modes
 * (replay.c, replay_file.c, replay_sched.c). Not part of rkv_cli's API.
 */
#ifndef RKV_SIM_REPLAY_INTERNAL_H
#define RKV_SIM_REPLAY_INTERNAL_H

#include <stdint.h>

#include "sim/replay.h"

/* Monotonic clock in nanoseconds. */
uint64_t rkv_replay_now_ns(void);

/* Creates the metadata-only pool (capacity in blocks as cfg and the
 * workload ask) and a tree over it. On failure nothing is left allocated. */
rkv_status rkv_replay_open_cache(const rkv_workload *wl,
                                 const rkv_replay_config *cfg,
                                 int with_outputs, rkv_pool **pool,
                                 rkv_tree **tree);

/* Attaches the lower tiers cfg asks for (host_capacity_tokens,
 * disk_capacity_tokens: host, disk, or the chain device -> host -> disk)
 * to tree; the caller destroys *host and *disk (each NULL when not asked)
 * after the tree. */
rkv_status rkv_replay_open_tier_chain(const rkv_replay_config *cfg,
                                      rkv_tree *tree, rkv_store **host,
                                      rkv_store **disk);

/* With cfg->disk_path: writes the tree's device and host pages down to the
 * disk file (rkv_tree_tier_flush, for the next run's warm restart) and
 * adds the file's counters to res. Nothing otherwise. */
rkv_status rkv_replay_disk_finish(const rkv_replay_config *cfg,
                                  rkv_tree *tree, rkv_store *disk,
                                  rkv_replay_result *res);

/* Adds the tree's counters to res: blocks stored to the lower tiers,
 * evictions, the tree's host bytes, the guard's counters and the pins
 * (made, renewed, refused, expired, released, revoked, demoted). *ts gets
 * the tree's stats (the caller may check more of them). */
rkv_status rkv_replay_add_tree_counters(const rkv_tree *tree,
                                        rkv_replay_result *res,
                                        rkv_tree_stats *ts);

#endif

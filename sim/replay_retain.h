/*
 * sim/replay_retain.h -- the retention plan of a scheduler replay
 * (rkv_replay_config.retention, rules in sim/replay.h): per request, its
 * session's next turn and whether it waits for a tool; per session, its
 * class (tool or other traffic). Built once per instance from the
 * workload; read-only afterwards. Not part of rkv_cli's API.
 *
 * Invariants: next[i] > i or RKV_WL_NO_PARENT; next[i] is in i's session;
 * tool_class[i] is the same for every request of a session.
 */
#ifndef RKV_SIM_REPLAY_RETAIN_H
#define RKV_SIM_REPLAY_RETAIN_H

#include <stdint.h>

#include "sim/replay.h"

typedef struct rkv_retention_plan {
    uint64_t *next;       /* next request of the session; RKV_WL_NO_PARENT  */
    uint8_t *waits;       /* 1: its next turn follows a tool call           */
    uint8_t *tool_class;  /* 1: its session has a request that waits        */
    size_t n;
    int32_t *ctx;         /* a context's tokens (the buffer of
                             rkv_retention_plan_ended)                 */
    size_t ctx_cap;       /* its length: no more than the cache can hold  */
    int file_order;       /* 1: pins are made at arrival * time_scale (the
                             file replay), not after the request ran     */
} rkv_retention_plan;

/* Builds the plan for wl (any retention mode: the classes are reported
 * whatever the mode); contexts are expanded up to max_ctx tokens (the
 * cache's capacity: nothing past it can be cached). On failure nothing is
 * left allocated. */
rkv_status rkv_retention_plan_init(rkv_retention_plan *p,
                                   const rkv_workload *wl, uint64_t max_ctx);
void rkv_retention_plan_free(rkv_retention_plan *p);

/* The retention request id carries under cfg->retention, into *out.
 * Returns 1 when it carries any (priority or pin), 0 for none. */
int rkv_retention_plan_for(const rkv_retention_plan *p,
                           const rkv_workload *wl, const rkv_replay_config *cfg,
                           uint64_t id, rkv_retention *out);

/* Request id ended (finished or refused): marked session_end (with the
 * END signal), its session ends in tree (rkv_tree_session_end over its
 * context: prompt, plus output when with_output; *ended_pages grows by
 * the pages marked); else when it was its session's last, the session's
 * pins are released. */
rkv_status rkv_retention_plan_ended(const rkv_retention_plan *p,
                                    const rkv_workload *wl,
                                    const rkv_replay_config *cfg,
                                    rkv_tree *tree, uint64_t id,
                                    int with_output, uint64_t *ended_pages);

#endif

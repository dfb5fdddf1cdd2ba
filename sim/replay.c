/*
 * sim/replay.c -- what the two replay modes share: configuration defaults,
 * the capacity -> pool conversion, the metadata-only cache, percentiles.
 *
 * Capacity convention: capacity_tokens / page_size blocks (rounded down),
 * every cached block counting page_size tokens -- the convention of the
 * reference table in shared/traces/README.md.
 */
#include "sim/replay_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/status.h"

uint64_t rkv_replay_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void rkv_replay_config_init(rkv_replay_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->page_size = 16;
    cfg->time_scale = 1.0;
    cfg->write_policy = RKV_WRITE_BACK;
    cfg->selective_hits = 2;
    cfg->evict_policy = RKV_EVICT_LRU;
    cfg->retention = RKV_RETENTION_NONE;
    cfg->retention_ttl_ms = 12000;
    cfg->max_pinned_pct = 50;
    cfg->session_signals = RKV_SIGNAL_END | RKV_SIGNAL_WAIT;
    rkv_sched_config_init(&cfg->sched);
    rkv_cost_model_init(&cfg->cost);
    cfg->capacity_tokens = rkv_cost_default_capacity_tokens(&cfg->cost);
}

uint64_t rkv_replay_unbounded_blocks(const rkv_workload *wl,
                                     uint32_t page_size, int with_outputs)
{
    uint64_t n = 1;
    if (!wl || page_size == 0)
        return n;
    for (size_t i = 0; i < wl->num_reqs; i++) {
        uint64_t t = wl->reqs[i].input_length;
        if (with_outputs)
            t += wl->reqs[i].output_length + 1;
        n += (t + page_size - 1) / page_size;
    }
    return n;
}

rkv_status rkv_replay_open_cache(const rkv_workload *wl,
                                 const rkv_replay_config *cfg,
                                 int with_outputs, rkv_pool **pool_out,
                                 rkv_tree **tree_out)
{
    if (cfg->page_size == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "page size must be >= 1");
    uint64_t blocks;
    if (cfg->capacity_tokens == RKV_REPLAY_UNBOUNDED)
        blocks = rkv_replay_unbounded_blocks(wl, cfg->page_size, with_outputs);
    else
        blocks = cfg->capacity_tokens / cfg->page_size;
    if (blocks == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "capacity of %llu tokens holds no page of %u "
                             "tokens",
                             (unsigned long long)cfg->capacity_tokens,
                             cfg->page_size);
    if (blocks >= UINT32_MAX)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "capacity of %llu blocks exceeds the pool limit "
                             "(%u)",
                             (unsigned long long)blocks, UINT32_MAX - 1);
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = (uint32_t)blocks;
    pc.page_size = cfg->page_size;
    pc.num_layers = 0; /* metadata only: the replay runs no kernels */
    rkv_pool *pool = NULL;
    rkv_status st = rkv_pool_create(&pc, &pool);
    if (st != RKV_OK)
        return st;
    rkv_tree *tree = NULL;
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.event_ring = cfg->event_ring;
    tc.evict_policy = cfg->evict_policy;
    tc.max_pinned_pct = cfg->max_pinned_pct;
    st = rkv_tree_create(pool, &tc, &tree);
    if (st != RKV_OK) {
        rkv_pool_destroy(pool);
        return st;
    }
    *pool_out = pool;
    *tree_out = tree;
    return RKV_OK;
}

double rkv_replay_prefill_alone_ms(const rkv_replay_config *cfg,
                                   uint64_t prefix, uint64_t q)
{
    uint64_t chunk = cfg->sched.max_batch_tokens ? cfg->sched.max_batch_tokens : 1;
    double ms = 0;
    while (q) {
        uint64_t c = q < chunk ? q : chunk;
        rkv_cost_step cs;
        memset(&cs, 0, sizeof cs);
        rkv_cost_add_prefill_model(&cs, &cfg->cost, (double)prefix, (double)c);
        ms += rkv_cost_step_ms(&cfg->cost, &cs);
        prefix += c;
        q -= c;
    }
    return ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *v, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n)
        return v[n - 1];
    double f = pos - (double)i;
    return v[i] + (v[i + 1] - v[i]) * f;
}

void rkv_latency_summarize(double *v, size_t n, rkv_latency_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!v || n == 0)
        return;
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    out->mean = sum / (double)n;
    out->max = v[n - 1];
    out->p50 = quantile(v, n, 0.50);
    out->p90 = quantile(v, n, 0.90);
    out->p99 = quantile(v, n, 0.99);
}

rkv_status rkv_replay_add_tree_counters(const rkv_tree *tree,
                                        rkv_replay_result *res,
                                        rkv_tree_stats *ts)
{
    rkv_tier_stats tt;
    rkv_status st = rkv_tree_tier_stats(tree, &tt);
    if (st != RKV_OK)
        return st;
    res->store_blocks += tt.stores_blocks[RKV_MEDIUM_HOST] +
                         tt.stores_blocks[RKV_MEDIUM_DISK];
    if ((st = rkv_tree_get_stats(tree, ts)) != RKV_OK)
        return st;
    res->evicted_blocks += ts->evicted_blocks;
    res->tree_host_bytes += ts->host_bytes;
    res->guard_lru_hit_tokens += ts->guard_lru_hit_tokens;
    res->guard_fallbacks += ts->guard_fallbacks;
    rkv_retention_stats rs;
    if ((st = rkv_tree_retention_stats(tree, &rs)) != RKV_OK)
        return st;
    res->pins_made += rs.pins_made;
    res->pins_renewed += rs.pins_renewed;
    res->pins_refused += rs.pins_refused;
    res->pins_expired += rs.pins_expired;
    res->pins_released += rs.pins_released;
    res->pins_revoked += rs.pins_revoked;
    res->pins_demoted += rs.pins_demoted;
    return RKV_OK;
}

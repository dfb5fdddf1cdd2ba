/*
 * sim/replay_tiers.c -- see replay_tiers.h. The stores are metadata-only
 * (block_bytes 0, the pool has num_layers 0): no byte moves, but
 * residency, loads, stores, evictions and failures are the tree's real
 * ones; only their duration comes from the cost model (pcie_gbps,
 * disk_gbps, KV bytes per token), charged by the replay from the plan's
 * copy list.
 */
#include <string.h>

#include "sim/replay_tiers.h"
#include "common/status.h"

static rkv_status open_store(int medium, uint64_t tokens, uint32_t page,
                             rkv_store **out)
{
    *out = NULL;
    if (tokens == 0)
        return RKV_OK;
    if (tokens / page == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s capacity of %llu tokens holds no page of %u "
                             "tokens", medium == RKV_MEDIUM_HOST ? "host"
                                                                 : "disk",
                             (unsigned long long)tokens, page);
    rkv_store_config sc;
    rkv_store_config_init(&sc, medium);
    sc.capacity_blocks = tokens / page;
    sc.block_bytes = 0;
    return rkv_store_create(&sc, out);
}

rkv_status rkv_replay_tiers_attach(const rkv_replay_config *cfg,
                                   rkv_tree *tree, rkv_store **host,
                                   rkv_store **disk)
{
    *host = *disk = NULL;
    if (cfg->host_capacity_tokens == 0 && cfg->disk_capacity_tokens == 0) {
        if (cfg->swap)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "swap needs a host tier (host capacity)");
        return RKV_OK;
    }
    if (cfg->swap && cfg->host_capacity_tokens == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "swap needs a host tier (host capacity)");
    rkv_store *h = NULL, *d = NULL;
    rkv_status st = open_store(RKV_MEDIUM_HOST, cfg->host_capacity_tokens,
                               cfg->page_size, &h);
    if (st == RKV_OK)
        st = open_store(RKV_MEDIUM_DISK, cfg->disk_capacity_tokens,
                        cfg->page_size, &d);
    if (st == RKV_OK) {
        rkv_tier_config tc;
        rkv_tier_config_init(&tc);
        tc.host = h;
        tc.disk = d;
        tc.write_policy = cfg->write_policy;
        tc.selective_hits = cfg->selective_hits;
        st = rkv_tree_attach_tiers(tree, &tc);
    }
    if (st != RKV_OK) {
        rkv_store_destroy(h);
        rkv_store_destroy(d);
        return st;
    }
    *host = h;
    *disk = d;
    return RKV_OK;
}

void rkv_replay_sched_config(const rkv_replay_config *cfg,
                             rkv_sched_config *out)
{
    *out = cfg->sched;
    out->swap = cfg->swap;
    out->compute_ms_per_token = rkv_cost_prefill_ms_per_token(&cfg->cost);
    out->host_load_ms_per_page =
        rkv_cost_copy_ms(&cfg->cost, RKV_MEDIUM_HOST, cfg->page_size);
    out->disk_load_ms_per_page =
        rkv_cost_copy_ms(&cfg->cost, RKV_MEDIUM_DISK, cfg->page_size);
}

double rkv_replay_plan_load_ms(const rkv_replay_config *cfg,
                               const rkv_batch_plan *p)
{
    double ms = 0;
    for (uint32_t i = 0; i < p->num_copies; i++) {
        const rkv_plan_copy *c = &p->copies[i];
        if (c->kind != RKV_TRANSFER_LOAD && c->kind != RKV_TRANSFER_SWAP_IN)
            continue;
        ms += rkv_cost_copy_ms(&cfg->cost, c->medium,
                               (double)c->pages * cfg->page_size);
    }
    return ms;
}

/*
 * sim/replay_tiers.c -- the lower tiers of a replay's cache (issue 12).
 *
 * rkv_replay_open_tier_chain: metadata-only stores (block_bytes 0: no
 * bytes move; slots, residency, LRUs and (hash, ns) checks are real)
 * attached to the replay's tree with cfg's write policy: a host store of
 * cfg->host_capacity_tokens, a disk store of cfg->disk_capacity_tokens, or
 * both (the chain device -> host -> disk, radix/tree_tier.c); the file
 * order and the scheduler replays take all three.
 *
 * The scheduler replay (replay_tiers.h) adds: the scheduler's tier costs
 * from the cost model, and the time of a plan's loads, charged by the
 * replay from the plan's copy list (pcie_gbps for host pages, the slower
 * of disk_gbps and pcie_gbps for disk pages, KV bytes per token).
 */
#include <string.h>

#include "sim/replay_internal.h"
#include "sim/replay_tiers.h"
#include "common/status.h"

static rkv_status open_store(const rkv_replay_config *cfg, int medium,
                             uint64_t tokens, rkv_store **out)
{
    *out = NULL;
    int disk = medium == RKV_MEDIUM_DISK;
    uint64_t blocks = tokens / cfg->page_size;
    if (blocks == 0 || blocks >= UINT32_MAX)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s capacity of %llu tokens "
                             "is not 1..%u pages of %u tokens",
                             disk ? "disk" : "host", (unsigned long long)tokens,
                             UINT32_MAX - 1, cfg->page_size);
    rkv_store_config sc;
    rkv_store_config_init(&sc, medium);
    sc.capacity_blocks = blocks;
    sc.block_bytes = 0;
    return rkv_store_create(&sc, out);
}

rkv_status rkv_replay_open_tier_chain(const rkv_replay_config *cfg,
                                      rkv_tree *tree, rkv_store **host_out,
                                      rkv_store **disk_out)
{
    *host_out = NULL;
    *disk_out = NULL;
    rkv_store *host = NULL, *disk = NULL;
    rkv_status st = RKV_OK;
    if (cfg->host_capacity_tokens > 0)
        st = open_store(cfg, RKV_MEDIUM_HOST, cfg->host_capacity_tokens, &host);
    if (st == RKV_OK && cfg->disk_capacity_tokens > 0)
        st = open_store(cfg, RKV_MEDIUM_DISK, cfg->disk_capacity_tokens, &disk);
    if (st != RKV_OK || (host == NULL && disk == NULL)) {
        rkv_store_destroy(host);
        return st;
    }
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.host = host;
    tc.disk = disk;
    tc.write_policy = cfg->write_policy;
    tc.selective_hits = cfg->selective_hits ? cfg->selective_hits : 2;
    tc.drop_pinned = cfg->drop_pinned;
    st = rkv_tree_attach_tiers(tree, &tc);
    if (st != RKV_OK) {
        rkv_store_destroy(host);
        rkv_store_destroy(disk);
        return st;
    }
    *host_out = host;
    *disk_out = disk;
    return RKV_OK;
}

rkv_status rkv_replay_tiers_attach(const rkv_replay_config *cfg,
                                   rkv_tree *tree, rkv_store **host,
                                   rkv_store **disk)
{
    *host = *disk = NULL;
    if (cfg->swap && cfg->host_capacity_tokens == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "swap needs a host tier (host capacity)");
    /* host, disk, or the chain host -> disk; the replay frees both */
    return rkv_replay_open_tier_chain(cfg, tree, host, disk);
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

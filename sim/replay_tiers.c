/*
 * sim/replay_tiers.c -- the lower tiers of a replay's cache: a metadata-only
 * host store (block_bytes 0: no bytes move, slots, residency, LRU and
 * (hash, ns) checks are real) of cfg->host_capacity_tokens, attached to the
 * replay's tree with cfg's write policy -- or, without a host capacity, a
 * metadata-only disk store of cfg->disk_capacity_tokens. The tree takes one
 * lower tier for now (radix/tree_tier.c): both capacities are refused.
 */
#include "sim/replay_internal.h"
#include "common/status.h"

rkv_status rkv_replay_open_tiers(const rkv_replay_config *cfg, rkv_tree *tree,
                                 rkv_store **host_out)
{
    *host_out = NULL;
    if (cfg->disk_capacity_tokens > 0 && cfg->host_capacity_tokens > 0)
        return rkv_set_error(RKV_ERR_UNSUPPORTED, "a host and a disk tier "
                             "together are not supported yet (one lower tier)");
    int disk = cfg->disk_capacity_tokens > 0;
    uint64_t tokens = disk ? cfg->disk_capacity_tokens : cfg->host_capacity_tokens;
    if (tokens == 0)
        return RKV_OK;
    uint64_t blocks = tokens / cfg->page_size;
    if (blocks == 0 || blocks >= UINT32_MAX)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s capacity of %llu tokens "
                             "is not 1..%u pages of %u tokens",
                             disk ? "disk" : "host", (unsigned long long)tokens,
                             UINT32_MAX - 1, cfg->page_size);
    rkv_store_config sc;
    rkv_store_config_init(&sc, disk ? RKV_MEDIUM_DISK : RKV_MEDIUM_HOST);
    sc.capacity_blocks = blocks;
    sc.block_bytes = 0;
    rkv_store *host = NULL;
    rkv_status st = rkv_store_create(&sc, &host);
    if (st != RKV_OK)
        return st;
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    if (disk)
        tc.disk = host;
    else
        tc.host = host;
    tc.write_policy = cfg->write_policy;
    tc.selective_hits = cfg->selective_hits ? cfg->selective_hits : 2;
    st = rkv_tree_attach_tiers(tree, &tc);
    if (st != RKV_OK) {
        rkv_store_destroy(host);
        return st;
    }
    *host_out = host;
    return RKV_OK;
}

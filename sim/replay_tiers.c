/*
 * sim/replay_tiers.c -- the lower tiers of a replay's cache (README "Tiers").
 *
 * rkv_replay_open_tier_chain: metadata-only stores (block_bytes 0: no
 * bytes move; slots, residency, LRUs and (hash, ns) checks are real)
 * attached to the replay's tree with cfg's write policy: a host store of
 * cfg->host_capacity_tokens, a disk store of cfg->disk_capacity_tokens, or
 * both (the chain device -> host -> disk, residency/tier.c); the file
 * order and the scheduler replays take all three.
 *
 * With cfg->disk_path the disk store is real: a file of records whose
 * payloads are synthetic (tier/store_synth.c: a pattern of the page's
 * hash, verified on every load, since the pool has no bytes), opened with
 * warm restart so that the next run on the file re-indexes it, and
 * flushed down to at the end of a run (rkv_replay_disk_finish).
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
#include "tier/store.h"

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
    if (!disk || cfg->disk_path == NULL)
        return rkv_store_create(&sc, out);
    /* a real file: synthetic payloads (the pool has no bytes), kept for
     * the next run; the layout id names what the records' pattern and
     * geometry depend on, so another page or record size is refused */
    sc.block_bytes = cfg->disk_record_bytes ? cfg->disk_record_bytes : 2048;
    sc.path = cfg->disk_path;
    sc.warm_restart = 1;
    sc.page_tokens = cfg->page_size;
    sc.layout_id = 0x52535953494d0000ull ^ ((uint64_t)cfg->page_size << 32) ^
                   (uint64_t)sc.block_bytes;
    rkv_status st = rkv_store_create(&sc, out);
    if (st == RKV_OK && (st = rkv_store_set_synthetic(*out)) != RKV_OK) {
        rkv_store_destroy(*out);
        *out = NULL;
    }
    return st;
}

rkv_status rkv_replay_disk_finish(const rkv_replay_config *cfg,
                                  rkv_tree *tree, rkv_store *disk,
                                  rkv_replay_result *res)
{
    if (cfg->disk_path == NULL || disk == NULL)
        return RKV_OK;
    rkv_status st = rkv_tree_tier_flush(tree);
    if (st != RKV_OK)
        return st;
    rkv_store_info si;
    if ((st = rkv_store_get_info(disk, &si)) != RKV_OK)
        return st;
    uint64_t ok = 0, bad = 0;
    rkv_store_synth_counts(disk, &ok, &bad);
    res->disk_file = 1;
    res->disk_direct_io = si.direct_io;
    res->disk_io_uring = si.io_uring;
    res->disk_warm_file = si.file_origin == RKV_STORE_FILE_WARM;
    res->disk_reads += si.reads;
    res->disk_writes += si.writes;
    res->disk_verified += ok;
    res->disk_verify_failed += bad;
    res->disk_warm_records += si.warm_records;
    res->disk_warm_skipped += si.warm_skipped;
    res->disk_warm_dropped += si.warm_dropped;
    return RKV_OK;
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

/*
 * tests/test_tier_capacity.c -- the replay's lower tiers at the largest
 * capacity the command documents: `radixkv replay --host-capacity-tokens
 * 68719476704` (2^32 - 2 pages of 16 tokens) and the same for the disk,
 * alone and as the chain host -> disk, through the scheduler replay and
 * the file-order replay, rkv_tree_check every 5 steps.
 *
 * The tiers' stores are metadata-only (sim/replay_tiers.c); each must cost
 * memory for the pages it holds, not for its capacity (tier/store.c grows
 * the slot table on demand). Checked: the replay runs to the end, every
 * request is served, hits by medium add up, and with tiers this large
 * nothing is ever evicted from them (a page that leaves the device is
 * kept below). Memory is not measured here: before the fix the first
 * store allocated and touched 90 GB and the process was killed.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "sim/replay.h"
#include "sim/workload.h"
#include "tests/support/test_workload.h"
#include "tests/support/test_util.h"

#define MAX_TOKENS 68719476704ull /* (2^32 - 2) x 16 */

static uint64_t small_capacity(const rkv_workload *wl)
{
    uint64_t most = 0;
    for (size_t i = 0; i < wl->num_reqs; i++) {
        uint64_t t = (uint64_t)wl->reqs[i].input_length + wl->reqs[i].output_length + 16;
        if (t > most)
            most = t;
    }
    return most + most / 4;
}

static void run(int host, int disk, int file_order)
{
    /* 16 agents, so that they overlap and evict each other's contexts: with
     * 8, about one seed in 200 ran them nearly one after another, evicted
     * only finished agents' pages and left nothing for a tier to serve
     * (0 failures in 150 seeds x 4 tests with 16). */
    rkv_workload wl;
    rkv_test_agentic(&wl, 16, 5, "tier_capacity");
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.sched.policy = RKV_POLICY_LPM;
    cfg.capacity_tokens = small_capacity(&wl);
    cfg.page_size = 16;
    cfg.check_every = 5;
    cfg.host_capacity_tokens = host ? MAX_TOKENS : 0;
    cfg.disk_capacity_tokens = disk ? MAX_TOKENS : 0;
    rkv_replay_result res;
    rkv_status st = file_order ? rkv_replay_file_order(&wl, &cfg, &res)
                                : rkv_replay_sched(&wl, &cfg, &res);
    cr_assert_eq(st, RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(res.requests + res.rejected_requests, wl.num_reqs);
    const uint64_t *h = res.hit_tokens_by_medium;
    cr_assert_eq(h[RKV_MEDIUM_DEVICE] + h[RKV_MEDIUM_HOST] + h[RKV_MEDIUM_DISK],
                 res.hit_tokens);
    cr_assert_gt(h[host ? RKV_MEDIUM_HOST : RKV_MEDIUM_DISK], 0,
                 "nothing was served from the tier (device %llu host %llu disk %llu, requests %zu)",
                 (unsigned long long)h[RKV_MEDIUM_DEVICE], (unsigned long long)h[RKV_MEDIUM_HOST],
                 (unsigned long long)h[RKV_MEDIUM_DISK], (size_t)res.requests);
    cr_assert_eq(res.failed_loads, 0);
    rkv_workload_free(&wl);
}

Test(tier_capacity, host_max, .timeout = 600) { run(1, 0, 0); }
Test(tier_capacity, disk_max, .timeout = 600) { run(0, 1, 0); }
Test(tier_capacity, host_over_disk_max, .timeout = 600) { run(1, 1, 0); }
Test(tier_capacity, file_order_host_max, .timeout = 600) { run(1, 0, 1); }

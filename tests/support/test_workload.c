/*
 * tests/support/test_workload.c -- see test_workload.h.
 */
#include "tests/support/test_workload.h"

#include <criterion/criterion.h>
#include <string.h>

#include "sim/trace.h"
#include "tests/support/test_util.h"

void rkv_test_agentic(rkv_workload *wl, uint32_t sessions, uint32_t turns_max,
                      const char *name)
{
    rkv_test_agentic_seeded(wl, sessions, turns_max, rkv_test_seed(name));
}

void rkv_test_fewshot(rkv_workload *wl, uint32_t requests, const char *name)
{
    rkv_fewshot_config fc;
    rkv_fewshot_config_init(&fc);
    fc.requests = requests;
    rkv_workload_init(wl);
    cr_assert_eq(rkv_workload_fewshot(wl, &fc, rkv_test_seed(name)), RKV_OK, "%s",
                 rkv_last_error());
}

rkv_fleet_config rkv_test_fleet_config(uint32_t n, enum rkv_route route, uint64_t seed)
{
    rkv_fleet_config fc;
    memset(&fc, 0, sizeof fc);
    fc.instances = n;
    fc.route = route;
    fc.seed = seed;
    return fc;
}

void rkv_test_trace_slice(rkv_workload *wl, const char *path, size_t n)
{
    rkv_trace_reader *r = NULL;
    cr_assert_eq(rkv_trace_reader_open_path(path, &r), RKV_OK, "%s", rkv_last_error());
    rkv_workload_init(wl);
    cr_assert_eq(rkv_workload_load_trace(wl, r, n), RKV_OK, "%s", rkv_last_error());
    rkv_trace_reader_close(r);
}

void rkv_test_agentic_seeded(rkv_workload *wl, uint32_t sessions,
                             uint32_t turns_max, uint64_t seed)
{
    rkv_agentic_config ac;
    rkv_agentic_config_init(&ac);
    ac.sessions = sessions;
    if (turns_max != 0)
        ac.turns_max = turns_max;
    rkv_workload_init(wl);
    cr_assert_eq(rkv_workload_agentic(wl, &ac, seed), RKV_OK);
}

rkv_replay_config rkv_test_replay_config(uint32_t page_size,
                                         uint64_t capacity_tokens,
                                         uint32_t check_every)
{
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    if (page_size != 0)
        cfg.page_size = page_size;
    cfg.capacity_tokens = capacity_tokens;
    cfg.check_every = check_every;
    return cfg;
}

/*
 * tests/support/test_workload.h -- the small agentic workloads the replay
 * tests (tests/test_replay_retention.c, tests/test_replay_tiers.c,
 * tests/test_replay_fleet.c) build: defaults but for the session count and
 * the longest session, seeded through rkv_test_seed(name) so a failing run
 * can be replayed with RKV_TEST_SEED.
 */
#ifndef RKV_TESTS_TEST_WORKLOAD_H
#define RKV_TESTS_TEST_WORKLOAD_H

#include <stdint.h>

#include "sim/workload.h"

/* Initialises *wl and fills it; the test fails if generation fails. */
void rkv_test_agentic(rkv_workload *wl, uint32_t sessions, uint32_t turns_max,
                      const char *name);

#endif

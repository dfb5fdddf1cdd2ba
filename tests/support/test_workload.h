/*
 * tests/support/test_workload.h -- the small agentic workloads the replay
 * tests (tests/test_replay_retention.c, tests/test_replay_tiers.c,
 * tests/test_replay_fleet.c) build, and the slices of a trace file they read: defaults but for the session count and
 * the longest session, seeded through rkv_test_seed(name) so a failing run
 * can be replayed with RKV_TEST_SEED; and the replay config they start
 * from.
 */
#ifndef RKV_TESTS_TEST_WORKLOAD_H
#define RKV_TESTS_TEST_WORKLOAD_H

#include <stdint.h>

#include "sim/replay.h"
#include "sim/workload.h"

/* Initialises *wl and fills it; the test fails if generation fails.
 * turns_max 0 keeps the default. */
void rkv_test_agentic(rkv_workload *wl, uint32_t sessions, uint32_t turns_max,
                      const char *name);

/* Initialises *wl with `requests` few-shot requests (one shared header),
 * seeded through rkv_test_seed(name); the test fails if generation fails. */
void rkv_test_fewshot(rkv_workload *wl, uint32_t requests, const char *name);

/* A fleet replay over n instances routed by `route`, all else zero. */
rkv_fleet_config rkv_test_fleet_config(uint32_t n, enum rkv_route route, uint64_t seed);

/* The same from a fixed seed (a reproduction). */
void rkv_test_agentic_seeded(rkv_workload *wl, uint32_t sessions,
                             uint32_t turns_max, uint64_t seed);

/* Initialises *wl with the first n requests of the trace at path (all with
 * n 0); the test fails if the trace does not open or load. */
void rkv_test_trace_slice(rkv_workload *wl, const char *path, size_t n);

/* rkv_replay_config_init's config with this device capacity, checking
 * invariants every check_every steps (0: as rkv_replay_config_init);
 * page_size 0 keeps the default page. */
rkv_replay_config rkv_test_replay_config(uint32_t page_size,
                                         uint64_t capacity_tokens,
                                         uint32_t check_every);

#endif

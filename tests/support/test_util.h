/*
 * tests/support/test_util.h -- helpers shared by the Criterion tests.
 *
 * Randomized tests draw a fresh seed per run and print it; setting
 * RKV_TEST_SEED=<n> replays that exact run. rkv_rng is a small
 * deterministic generator (splitmix64) so a seed means the same sequence
 * on every machine.
 */
#ifndef RKV_TEST_UTIL_H
#define RKV_TEST_UTIL_H

#include <stdint.h>

typedef struct rkv_rng {
    uint64_t state;
} rkv_rng;

/* Seed from RKV_TEST_SEED, else from the clock and pid; printed to stderr
 * with the test's name so a failure can be replayed. */
uint64_t rkv_test_seed(const char *test_name);

void rkv_rng_init(rkv_rng *rng, uint64_t seed);
uint64_t rkv_rng_next(rkv_rng *rng);
/* Uniform in [0, bound); bound > 0. */
uint64_t rkv_rng_below(rkv_rng *rng, uint64_t bound);
/* Uniform in [0, 1). */
double rkv_rng_unit(rkv_rng *rng);

/* Iteration count scaled by RKV_TEST_SCALE (a float, default 1). */
uint64_t rkv_test_scaled(uint64_t n);

#endif

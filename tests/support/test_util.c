/*
 * tests/support/test_util.c -- seeds and a deterministic RNG for tests.
 * See test_util.h.
 */
#include "tests/support/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

uint64_t rkv_test_seed(const char *test_name)
{
    const char *env = getenv("RKV_TEST_SEED");
    uint64_t seed;
    if (env && *env) {
        seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 32);
    }
    fprintf(stderr, "[seed] %s: RKV_TEST_SEED=%llu\n", test_name,
            (unsigned long long)seed);
    return seed;
}

void rkv_rng_init(rkv_rng *rng, uint64_t seed)
{
    rng->state = seed;
}

uint64_t rkv_rng_next(rkv_rng *rng)
{
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t rkv_rng_below(rkv_rng *rng, uint64_t bound)
{
    return rkv_rng_next(rng) % bound;
}

double rkv_rng_unit(rkv_rng *rng)
{
    return (double)(rkv_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t rkv_test_scaled(uint64_t n)
{
    const char *env = getenv("RKV_TEST_SCALE");
    if (!env || !*env)
        return n;
    double s = strtod(env, NULL);
    if (s <= 0)
        return n;
    uint64_t v = (uint64_t)((double)n * s);
    return v ? v : 1;
}

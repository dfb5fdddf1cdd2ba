/*
 * tests/fleet/test_fleet_cpu_sample.c -- fleet/cpu_sample.h: every call
 * counted, about 1 in `every` picked, and the estimated total within a
 * bound of the true total on deterministic cost sequences (random costs,
 * and costs repeating with the sampling period, which picking every
 * N-th call would get wrong by a factor); exact with every == 1.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "fleet/cpu_sample.h"

/* a deterministic cost sequence, ns: an LCG's draw in [500, 20500) */
static uint64_t lcg_cost(uint64_t *st)
{
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return 500 + (*st >> 33) % 20000;
}

/* Runs n calls of cost(i) through s; returns the true total. */
static uint64_t run(rkv_cpu_sample *s, uint64_t n, int periodic, uint64_t *picked)
{
    uint64_t st = 42, total = 0;
    *picked = 0;
    for (uint64_t i = 0; i < n; i++) {
        /* periodic: one call in 16 costs 50x the others */
        uint64_t c = periodic ? (i % 16 == 0 ? 50000 : 1000) : lcg_cost(&st);
        total += c;
        if (rkv_cpu_sample_pick(s)) {
            rkv_cpu_sample_add(s, c);
            (*picked)++;
        }
    }
    return total;
}

Test(fleet_cpu_sample, every_call_exact)
{
    rkv_cpu_sample s;
    rkv_cpu_sample_init(&s, 1, 7);
    cr_assert_eq(rkv_cpu_sample_total_ns(&s), 0.0);
    uint64_t picked, total = run(&s, 10000, 0, &picked);
    cr_assert_eq(picked, 10000);
    cr_assert_eq(s.calls, 10000);
    cr_assert_eq(rkv_cpu_sample_total_ns(&s), (double)total);
    rkv_cpu_sample_init(&s, 0, 0); /* 0 is 1; seed 0 is usable */
    cr_assert_eq(s.every, 1);
    cr_assert(rkv_cpu_sample_pick(&s));
}

Test(fleet_cpu_sample, estimate_within_bound)
{
    for (int periodic = 0; periodic <= 1; periodic++)
        for (uint64_t seed = 1; seed <= 5; seed++) {
            rkv_cpu_sample s;
            rkv_cpu_sample_init(&s, 16, seed);
            uint64_t picked, n = 200000, total = run(&s, n, periodic, &picked);
            cr_assert_eq(s.calls, n, "every call counted");
            cr_assert_eq(s.timed, picked);
            /* about 1 in 16 timed: 12,500 expected, binomial sd ~108 */
            cr_assert(picked > 11500 && picked < 13500, "picked %llu",
                      (unsigned long long)picked);
            double est = rkv_cpu_sample_total_ns(&s);
            double err = fabs(est - (double)total) / (double)total;
            /* relative sd of the estimate: ~0.5 % (random costs), ~2.6 %
             * (periodic: cost CV 2.9 over ~12,500 samples); 10 % is ~4 sd */
            cr_assert(err < 0.10, "periodic %d seed %llu: estimate %.0f, true %llu",
                      periodic, (unsigned long long)seed, est,
                      (unsigned long long)total);
        }
}

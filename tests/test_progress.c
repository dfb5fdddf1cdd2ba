/*
 * tests/test_progress.c -- the progress line (cli/progress.c, issue 15
 * item 9): overall fraction over a sweep's replays weighted by what each
 * kind took and each replay's cost (its capacity), the time-left estimate
 * (checked against a measured sweep in both capacity orders), quiet first half second, ten lines a
 * second at most. The clock is driven by the test.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/progress.h"

#define MS 1000000ULL

Test(progress, single_replay_fraction_and_eta)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    rkv_progress p;
    rkv_progress_init(&p, f, 1000 * MS);
    cr_assert_float_eq(rkv_progress_fraction(&p, 25, 100), 0.25, 1e-12);
    cr_assert_eq(rkv_progress_update(&p, 25, 100, 1400 * MS), 0,
                 "nothing in the first half second");
    cr_assert_eq(rkv_progress_update(&p, 25, 100, 2000 * MS), 1);
    cr_assert_eq(rkv_progress_update(&p, 26, 100, 2050 * MS), 0,
                 "at most ten lines a second");
    cr_assert_eq(rkv_progress_update(&p, 50, 100, 3000 * MS), 1);
    fflush(f);
    /* 2 s elapsed at 50 %: about 2 s left */
    cr_assert(strstr(buf, " 50.0%  2 s, ~2 s left") != NULL, "%s", buf);
    rkv_progress_clear(&p);
    fclose(f);
    cr_assert(strstr(buf, "\r\033[K") != NULL);
    free(buf);
}

Test(progress, sweep_weights_kinds_by_measured_time)
{
    FILE *f = fopen("/dev/null", "w");
    cr_assert_not_null(f);
    rkv_progress p;
    rkv_progress_init(&p, f, 0);
    /* 2 rows of a file-order and 2 scheduler replays, at capacities the
     * GPU holds (cost 1 each) */
    const uint64_t caps[2] = {1000000, 1000000};
    rkv_progress_plan(&p, 2, 1, 2, caps, 1000000);
    rkv_progress_run(&p, 0, "file, capacity 1e6", 0);
    /* first guess: sched = 5 x file; total 2 + 20 */
    cr_assert_float_eq(rkv_progress_fraction(&p, 50, 100), 0.5 / 22, 1e-12);
    /* the file replay took 100 ms; a sched replay starts */
    rkv_progress_run(&p, 1, "sched lpm, capacity 1e6", 100 * MS);
    cr_assert_str_eq(p.label, "replay 2/6: sched lpm, capacity 1e6");
    cr_assert_float_eq(rkv_progress_fraction(&p, 0, 100), 100.0 / (200 + 2000), 1e-12);
    /* it took 1000 ms: sched weight is now measured */
    rkv_progress_run(&p, 2, "sched fcfs, capacity 1e6", 1100 * MS);
    cr_assert_float_eq(rkv_progress_fraction(&p, 50, 100),
                       (100.0 + 1000.0 + 500.0) / (200.0 + 4000.0), 1e-12);
    cr_assert_leq(rkv_progress_fraction(&p, 500, 100), 1.0);
    /* the next row starts with its file-order replay */
    rkv_progress_run(&p, 3, "file, capacity 1e6", 2100 * MS);
    cr_assert_eq(p.run_sched, 0);
    fclose(f);
}

/* A scheduler replay's cost: 1 at or above what the GPU holds (and for an
 * unbounded capacity), more the further below. */
Test(progress, sched_cost_grows_below_the_gpu)
{
    cr_assert_float_eq(rkv_progress_sched_cost(426788, 426788), 1.0, 1e-12);
    cr_assert_float_eq(rkv_progress_sched_cost(UINT64_MAX, 426788), 1.0, 1e-12);
    double c3 = rkv_progress_sched_cost(300000, 426788);
    double c1 = rkv_progress_sched_cost(100000, 426788);
    cr_assert(c3 > 1.0 && c1 > c3, "%g %g", c3, c1);
}

/* The default sweep's replay times on the embedded trace, measured (CPU
 * ms, Release): a file-order replay and, per capacity, a scheduler one. */
static const uint64_t sweep_caps[5] = {100000, 300000, 1000000, 3000000,
                                       10000000};
static const double sweep_sched_ms[5] = {12800, 3600, 1900, 2000, 2000};
#define SWEEP_FILE_MS 150.0
#define SWEEP_GPU_TOKENS 426788

/* Replays the sweep through the estimator with the clock at a quarter,
 * half and three quarters of every replay; the worst ratios of the time
 * left it shows to the time really left. */
static void sweep_eta(int descending, double *lo, double *hi)
{
    uint64_t caps[5];
    double ms[15];
    size_t n = 0;
    for (size_t r = 0; r < 5; r++) {
        size_t i = descending ? 4 - r : r;
        caps[r] = sweep_caps[i];
        ms[n++] = SWEEP_FILE_MS;
        ms[n++] = sweep_sched_ms[i];
        ms[n++] = sweep_sched_ms[i];
    }
    double total = 0;
    for (size_t k = 0; k < n; k++)
        total += ms[k];
    FILE *f = fopen("/dev/null", "w");
    cr_assert_not_null(f);
    rkv_progress p;
    rkv_progress_init(&p, f, 0);
    rkv_progress_plan(&p, 5, 1, 2, caps, SWEEP_GPU_TOKENS);
    *lo = 1e300;
    *hi = 0;
    double t = 0;
    for (size_t k = 0; k < n; k++) {
        rkv_progress_run(&p, k, "", (uint64_t)(t * 1e6));
        for (int q = 1; q <= 3; q++) {
            double now = t + ms[k] * q / 4;
            double fr = rkv_progress_fraction(&p, (size_t)q, 4);
            if (now < 500 || fr <= 0.01)
                continue; /* the line shows no estimate then */
            double ratio = (now / fr * (1 - fr)) / (total - now);
            if (ratio < *lo)
                *lo = ratio;
            if (ratio > *hi)
                *hi = ratio;
        }
        t += ms[k];
    }
    fclose(f);
}

/* Small capacities make slow scheduler replays: weighing every replay
 * alike made the default sweep's estimate up to 5x too long, and 5x too
 * short with the capacities given largest first. */
Test(progress, sweep_estimate_follows_capacity)
{
    double lo, hi;
    sweep_eta(0, &lo, &hi);
    cr_assert(lo >= 0.67 && hi <= 1.5,
              "ascending capacities: time left shown / real %.2f .. %.2f", lo, hi);
    sweep_eta(1, &lo, &hi);
    cr_assert(lo >= 0.67 && hi <= 1.5,
              "descending capacities: time left shown / real %.2f .. %.2f", lo, hi);
}

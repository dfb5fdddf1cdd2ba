/*
 * tests/test_progress.c -- the progress line (cli/progress.c, issue 15
 * item 9): overall fraction over a sweep's replays weighted by what each
 * kind took, the time-left estimate, quiet first half second, ten lines a
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
    rkv_progress_plan(&p, 2, 4); /* 2 file-order, 4 scheduler replays */
    rkv_progress_run(&p, 0, 0, "file, capacity 1e5", 0);
    /* first guess: sched = 5 x file; total 2 + 20 */
    cr_assert_float_eq(rkv_progress_fraction(&p, 50, 100), 0.5 / 22, 1e-12);
    /* the file replay took 100 ms; a sched replay starts */
    rkv_progress_run(&p, 1, 1, "sched lpm, capacity 1e5", 100 * MS);
    cr_assert_str_eq(p.label, "replay 2/6: sched lpm, capacity 1e5");
    cr_assert_float_eq(rkv_progress_fraction(&p, 0, 100), 100.0 / (200 + 2000), 1e-12);
    /* it took 1000 ms: sched weight is now measured */
    rkv_progress_run(&p, 2, 1, "sched fcfs, capacity 1e5", 1100 * MS);
    cr_assert_float_eq(rkv_progress_fraction(&p, 50, 100),
                       (100.0 + 1000.0 + 500.0) / (200.0 + 4000.0), 1e-12);
    cr_assert_leq(rkv_progress_fraction(&p, 500, 100), 1.0);
    fclose(f);
}

/*
 * tests/test_router_choose.c -- how the router picks among instances
 * (rkv_router_choose, rkv_router_route): work it routed counts as load
 * until the instance's next report, so a burst of equal requests spreads;
 * equal scores and loads go to a random one, the same for the same seed;
 * a temperature draws by softmax over the normalised scores; bad arguments
 * change nothing (not even the generator).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/router_util.h"

static rkv_router *mk(double temperature, uint64_t seed, uint32_t n_inst)
{
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    cfg.temperature = temperature;
    cfg.seed = seed;
    return rt_mk_with_instances(&cfg, n_inst);
}

/* Eight requests of 10 uncached pages at once onto 4 idle instances, no
 * load report between: each instance gets two (today's herd put all eight
 * on the smallest id), and the counted load is what was routed. */
Test(router_choose, a_burst_spreads_until_the_next_report)
{
    rkv_router *r = mk(0, 7, 4);
    uint64_t h[10];
    for (int i = 0; i < 10; i++)
        h[i] = 1000 + (uint64_t)i;
    uint32_t per[5] = {0};
    for (int k = 0; k < 8; k++) {
        rkv_router_overlap best;
        cr_assert_eq(rkv_router_route(r, 0, h, 10, &best), RKV_OK);
        cr_assert(best.instance >= 1 && best.instance <= 4);
        per[best.instance]++;
    }
    for (int id = 1; id <= 4; id++) {
        cr_assert_eq(per[id], 2, "instance %d got %u of 8", id, per[id]);
        rkv_router_instance_info info;
        cr_assert_eq(rkv_router_instance_info_get(r, (uint64_t)id, &info), RKV_OK);
        cr_assert_eq(info.routed_running, 2);
        cr_assert_eq(info.routed_tokens, 2 * 10 * 16, "uncached pages x 16");
        cr_assert_eq(info.running, 0);
    }
    /* the scores see it: 2 running-equivalents and 320 queued tokens */
    rkv_router_overlap o[RKV_ROUTER_MAX_INSTANCES];
    uint32_t n = 0;
    cr_assert_eq(rkv_router_overlaps(r, 0, h, 10, o, 4, &n), RKV_OK);
    cr_assert_float_eq(o[0].score, -(320.0 + 16.0 * 2), 1e-9);
    /* a report replaces what was counted */
    cr_assert_eq(rkv_router_set_load(r, 3, 1, 5), RKV_OK);
    rkv_router_instance_info info;
    cr_assert_eq(rkv_router_instance_info_get(r, 3, &info), RKV_OK);
    cr_assert_eq(info.routed_running, 0);
    cr_assert_eq(info.routed_tokens, 0);
    rkv_router_overlap best;
    cr_assert_eq(rkv_router_route(r, 0, h, 10, &best), RKV_OK);
    cr_assert_eq(best.instance, 3, "the reported load (21) is below 352");
    /* rkv_router_overlaps alone counts nothing */
    cr_assert_eq(rkv_router_overlaps(r, 0, h, 10, o, 4, &n), RKV_OK);
    cr_assert_eq(rkv_router_instance_info_get(r, 1, &info), RKV_OK);
    cr_assert_eq(info.routed_running, 2);
    rkv_router_destroy(r);
}

/* Equal scores and loads: the pick is random, the same sequence for the
 * same seed, and over seeds every instance is picked. */
static uint64_t pick_once(uint64_t seed)
{
    rkv_router *r = mk(0, seed, 4);
    rkv_router_overlap c[4];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 4; i++)
        c[i].instance = (uint64_t)i + 1;
    uint32_t pick = 99;
    cr_assert_eq(rkv_router_choose(r, c, 4, 0, &pick), RKV_OK);
    cr_assert_lt(pick, 4);
    rkv_router_destroy(r);
    return c[pick].instance;
}

Test(router_choose, ties_random_and_deterministic_per_seed)
{
    uint32_t seen[5] = {0};
    for (uint64_t seed = 0; seed < 64; seed++) {
        uint64_t a = pick_once(seed);
        cr_assert_eq(pick_once(seed), a, "seed %llu: not deterministic",
                     (unsigned long long)seed);
        seen[a]++;
    }
    for (int id = 1; id <= 4; id++)
        cr_assert_gt(seen[id], 4, "instance %d picked %u of 64 times", id, seen[id]);
    /* a strictly better score is never left for a tie */
    rkv_router *r = mk(0, 1, 4);
    rkv_router_overlap c[4];
    memset(c, 0, sizeof c);
    for (int i = 0; i < 4; i++)
        c[i].instance = (uint64_t)i + 1;
    c[2].score = 0.5;
    for (int k = 0; k < 20; k++) {
        uint32_t pick = 0;
        cr_assert_eq(rkv_router_set_load(r, 3, 0, 0), RKV_OK);
        cr_assert_eq(rkv_router_choose(r, c, 4, 0, &pick), RKV_OK);
        cr_assert_eq(pick, 2);
    }
    rkv_router_destroy(r);
}

/* Temperature: scores 0 and 1 normalise to 0 and 1; with T the better one
 * is drawn with chance 1 / (1 + e^(-1/T)). Counted over 4,000 draws
 * (fixed seed; the bounds are 6 standard deviations wide). */
Test(router_choose, temperature_draws_by_softmax)
{
    const double T[3] = {0.05, 1.0, 1e6};
    /* 1 / (1 + e^(-1/T)) */
    const double P[3] = {0.999999997938846, 0.731058578630005, 0.500000250000000};
    for (int t = 0; t < 3; t++) {
        rkv_router *r = mk(T[t], 42, 2);
        rkv_router_overlap c[2];
        memset(c, 0, sizeof c);
        c[0].instance = 1;
        c[1].instance = 2;
        c[1].score = 1.0;
        uint32_t hits = 0, draws = 4000;
        for (uint32_t k = 0; k < draws; k++) {
            uint32_t pick = 9;
            cr_assert_eq(rkv_router_choose(r, c, 2, 0, &pick), RKV_OK);
            hits += pick == 1;
        }
        double p = P[t];
        double sd = 0.5 * __builtin_sqrt(draws) + 1; /* >= sqrt(n p (1-p)) */
        cr_assert(hits >= draws * p - 6 * sd && hits <= draws * p + 6 * sd,
                  "T %g: %u of %u, expected %.0f", T[t], hits, draws, draws * p);
        rkv_router_destroy(r);
    }
}

Test(router_choose, bad_arguments_change_nothing)
{
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    rkv_router *r = NULL;
    cfg.temperature = -1;
    cr_assert_eq(rkv_router_create(&cfg, &r), RKV_ERR_INVALID_ARG);
    cfg.temperature = 1.0 / 0.0;
    cr_assert_eq(rkv_router_create(&cfg, &r), RKV_ERR_INVALID_ARG);
    cr_assert_null(r);

    r = mk(0, 5, 2);
    rkv_router_overlap c[3];
    memset(c, 0, sizeof c);
    c[0].instance = 1;
    c[1].instance = 2;
    c[2].instance = 77; /* not registered, and the best */
    c[2].score = 10;
    uint32_t pick = 5;
    cr_assert_eq(rkv_router_choose(r, c, 0, 0, &pick), RKV_ERR_STATE);
    cr_assert_eq(rkv_router_choose(r, NULL, 2, 0, &pick), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_choose(r, c, 2, 0, NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_choose(NULL, c, 2, 0, &pick), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_choose(r, c, 3, 4, &pick), RKV_ERR_NOT_FOUND);
    cr_assert_eq(pick, 5, "untouched on failure");
    /* the failed calls drew nothing: the next pick is the fresh router's */
    cr_assert_eq(rkv_router_choose(r, c, 2, 4, &pick), RKV_OK);
    rkv_router *fresh = mk(0, 5, 2);
    uint32_t pick2 = 9;
    cr_assert_eq(rkv_router_choose(fresh, c, 2, 4, &pick2), RKV_OK);
    cr_assert_eq(pick, pick2);
    rkv_router_instance_info info;
    cr_assert_eq(rkv_router_instance_info_get(r, c[pick].instance, &info), RKV_OK);
    cr_assert_eq(info.routed_running, 1);
    cr_assert_eq(info.routed_tokens, 4 * 16);
    rkv_router_destroy(fresh);
    rkv_router_destroy(r);
}

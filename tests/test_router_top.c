/*
 * tests/test_router_top.c -- rkv_router_route_top against what it
 * replaces: a twin router fed the same calls answers each request with
 * rkv_router_overlaps + rkv_router_choose, and the daemon's old list (the
 * chosen instance and the others with the most leading pages, ties by
 * smaller id, in id order) is built from that answer by sorting. Both must
 * pick the same instance (same generator draws: the twins stay in step
 * over hundreds of picks with many equal scores), list the same records
 * bit for bit (scores as the choice saw them) and count the same routed
 * load. Up to 300 instances in 5 slot groups, ids not in slot order (some
 * removed and added again), a few on the host tier, some resyncing, loads
 * from a small set so scores tie often; greedy and with a temperature.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/router_util.h"
#include "tests/support/test_util.h"

#define NB 4
#define LEN 40

static uint64_t chain(uint32_t b, uint32_t j, uint32_t share)
{
    uint32_t cb = j < share ? 0 : b;
    return ((uint64_t)cb * 1000 + j + 1) * 0x9E3779B97F4A7C15ull;
}

static const rkv_router_overlap *g_all; /* the reference's sort key */

static int by_pages(const void *a, const void *b)
{
    const rkv_router_overlap *x = &g_all[*(const uint32_t *)a];
    const rkv_router_overlap *y = &g_all[*(const uint32_t *)b];
    if (x->pages != y->pages)
        return x->pages > y->pages ? -1 : 1;
    return x->instance < y->instance ? -1 : x->instance > y->instance;
}

static int by_index(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y; /* all[] is in id order */
}

static void run(uint64_t seed, double temperature, uint32_t ninst, uint32_t cap)
{
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    cfg.temperature = temperature;
    cfg.seed = seed;
    rkv_router *a = rt_mk_with(&cfg), *b = rt_mk_with(&cfg);
    rkv_router *tw[2] = {a, b};
    uint32_t share[NB] = {LEN, 0, 0, 0};
    for (uint32_t k = 1; k < NB; k++)
        share[k] = (uint32_t)rkv_rng_below(&rng, LEN / 2);
    uint64_t *ids = malloc(ninst * sizeof *ids);
    cr_assert_not_null(ids);
    for (uint32_t i = 0; i < ninst; i++) {
        /* ids fall in no order with the slots */
        ids[i] = (rkv_rng_next(&rng) % 1000000) * 1024 + i;
        uint32_t bb = (uint32_t)rkv_rng_below(&rng, NB);
        uint32_t len = (uint32_t)rkv_rng_below(&rng, LEN + 1);
        uint32_t dev = rkv_rng_below(&rng, 8) == 0 ? (uint32_t)rkv_rng_below(&rng, len + 1)
                                                  : len;
        for (int t = 0; t < 2; t++) {
            cr_assert_eq(rkv_router_add_instance(tw[t], ids[i]), RKV_OK);
            for (uint32_t j = 0; j < len; j++) {
                uint64_t h = chain(bb, j, share[bb]);
                rkv_event e = rt_event(j + 1, RKV_EVENT_BLOCK_STORED, 16,
                                       j ? chain(bb, j - 1, share[bb]) : RKV_HASH_ROOT,
                                       &h, 1);
                e.medium = j < dev ? RKV_MEDIUM_DEVICE : RKV_MEDIUM_HOST;
                cr_assert_eq(rkv_router_apply(tw[t], ids[i], &e, 1), RKV_OK);
            }
        }
    }
    /* some leave and come back (a new slot: ids and slots out of step
     * further), some resync; loads from a small set */
    for (uint32_t i = 0; i < ninst; i++) {
        uint64_t c = rkv_rng_below(&rng, 16);
        uint32_t run_ = (uint32_t)rkv_rng_below(&rng, 3);
        uint64_t q = 16 * rkv_rng_below(&rng, 3);
        for (int t = 0; t < 2; t++) {
            if (c == 0) {
                cr_assert_eq(rkv_router_remove_instance(tw[t], ids[i]), RKV_OK);
                cr_assert_eq(rkv_router_add_instance(tw[t], ids[i]), RKV_OK);
            } else if (c == 1) {
                cr_assert_eq(rkv_router_heartbeat(tw[t], ids[i], 1000), RKV_OK);
            }
            cr_assert_eq(rkv_router_set_load(tw[t], ids[i], run_, q), RKV_OK);
        }
    }
    rt_ok(a);
    rt_ok(b);
    rkv_router_overlap *all = malloc(RKV_ROUTER_MAX_INSTANCES * sizeof *all);
    rkv_router_overlap *top = malloc(RKV_ROUTER_MAX_INSTANCES * sizeof *top);
    uint32_t *idx = malloc(RKV_ROUTER_MAX_INSTANCES * sizeof *idx);
    cr_assert(all && top && idx);
    for (int q = 0; q < 300; q++) {
        uint32_t bb = (uint32_t)rkv_rng_below(&rng, NB);
        uint32_t n = (uint32_t)rkv_rng_below(&rng, LEN + 5);
        uint64_t h[LEN + 5];
        for (uint32_t j = 0; j < n; j++)
            h[j] = j < LEN ? chain(bb, j, share[bb]) : rkv_rng_next(&rng);
        uint32_t k = 0, best = 0, m = 0, pick = 0;
        cr_assert_eq(rkv_router_overlaps(b, 0, h, n, all, RKV_ROUTER_MAX_INSTANCES, &k),
                     RKV_OK);
        cr_assert_eq(rkv_router_choose(b, all, k, n, &best), RKV_OK);
        cr_assert_eq(rkv_router_route_top(a, 0, h, n, top, cap, &m, &pick), RKV_OK);
        /* the reference list */
        for (uint32_t i = 0; i < k; i++)
            idx[i] = i;
        uint32_t want = k;
        if (k > cap) {
            g_all = all;
            qsort(idx, k, sizeof *idx, by_pages);
            uint32_t at = 0;
            while (idx[at] != best)
                at++;
            if (at >= cap)
                idx[cap - 1] = best;
            want = cap;
            qsort(idx, want, sizeof *idx, by_index);
        }
        cr_assert_eq(m, want, "query %d: %u listed, want %u", q, m, want);
        cr_assert_eq(top[pick].instance, all[best].instance,
                     "query %d: picked %llu, choose picked %llu", q,
                     (unsigned long long)top[pick].instance,
                     (unsigned long long)all[best].instance);
        for (uint32_t i = 0; i < m; i++)
            rt_same_record(&top[i], &all[idx[i]], q);
        rkv_router_instance_info x, y;
        cr_assert_eq(rkv_router_instance_info_get(a, all[best].instance, &x), RKV_OK);
        cr_assert_eq(rkv_router_instance_info_get(b, all[best].instance, &y), RKV_OK);
        cr_assert_eq(x.routed_running, y.routed_running);
        cr_assert_eq(x.routed_tokens, y.routed_tokens);
        if (q % 50 == 49) { /* a load report now and then */
            uint64_t id = ids[rkv_rng_below(&rng, ninst)];
            for (int t = 0; t < 2; t++)
                cr_assert_eq(rkv_router_set_load(tw[t], id, 1, 0), RKV_OK);
        }
    }
    /* rkv_router_route is route_top with room for one */
    rkv_router_overlap one;
    uint64_t h0 = chain(0, 0, LEN);
    uint32_t k = 0, best = 0;
    cr_assert_eq(rkv_router_overlaps(b, 0, &h0, 1, all, RKV_ROUTER_MAX_INSTANCES, &k),
                 RKV_OK);
    cr_assert_eq(rkv_router_choose(b, all, k, 1, &best), RKV_OK);
    cr_assert_eq(rkv_router_route(a, 0, &h0, 1, &one), RKV_OK);
    rt_same_record(&one, &all[best], -1);
    rt_done(a);
    rt_done(b);
    free(all);
    free(top);
    free(idx);
    free(ids);
}

Test(router_top, agrees_with_overlaps_and_choose)
{
    run(1, 0, 300, 64);
    run(2, 0, 300, 5);
    run(3, 0, 70, 1);
    run(4, 0, 40, 64); /* every instance fits: the whole answer */
}

Test(router_top, agrees_with_a_softmax_draw)
{
    run(5, 0.5, 200, 16);
}

Test(router_top, bad_arguments)
{
    rkv_router *r = rt_mk();
    rkv_router_overlap o[2];
    uint32_t m = 7, pick = 0;
    uint64_t h = 1;
    cr_assert_eq(rkv_router_route_top(r, 0, &h, 1, o, 2, &m, &pick), RKV_ERR_STATE);
    cr_assert_eq(m, 0);
    cr_assert_eq(rkv_router_add_instance(r, 9), RKV_OK);
    cr_assert_eq(rkv_router_route_top(r, 0, &h, 1, o, 0, &m, &pick),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_route_top(r, 0, NULL, 1, o, 2, &m, &pick),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_route_top(r, 0, &h, 1, o, 2, &m, NULL),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_route_top(NULL, 0, &h, 1, o, 2, &m, &pick),
                 RKV_ERR_INVALID_ARG);
    rkv_router_instance_info info;
    cr_assert_eq(rkv_router_instance_info_get(r, 9, &info), RKV_OK);
    cr_assert_eq(info.routed_running, 0, "a refused call routes nothing");
    cr_assert_eq(rkv_router_route_top(r, 0, &h, 1, o, 2, &m, &pick), RKV_OK);
    cr_assert_eq(m, 1);
    cr_assert_eq(pick, 0);
    cr_assert_eq(o[0].instance, 9);
    int32_t tok[32] = {0};
    cr_assert_eq(rkv_router_route_top_tokens(r, 0, tok, 32, 16, o, 2, &m, &pick), RKV_OK);
    cr_assert_eq(rkv_router_route_top_tokens(r, 0, tok, 32, 0, o, 2, &m, &pick),
                 RKV_ERR_INVALID_ARG);
    rt_done(r);
}

/*
 * tests/test_router_search.c -- the router's search on long chains, where
 * it cuts spans into several parts per level, walks a page once for all
 * the groups that probe it, and (rkv_router_route) skips spans that cannot
 * hold the best score: randomized, against a closed-form model and against
 * overlaps + choose on a twin router.
 *
 * NB bases of LEN pages share prefixes of random lengths with base 0 (a
 * common "system prompt" of SYS pages ends most of them, so most of the
 * fleet's bits leave at the same page in every group). Each instance holds
 * the prefixes of one or two bases, of lengths drawn to give many distinct
 * drops (short, near SYS, anywhere, near LEN); an instance's leading run on
 * a request (base b, n pages) is min(n, max over its prefixes (b', L) of
 * min(L, common(b, b'))). Up to 600 instances (10 slot groups), some
 * resyncing, with loads spread widely (so that the load decides most
 * picks and the bound prunes) or equal (ties); with and without pages on
 * the host tier (the bound does not apply there); in power-of-two tables
 * and in one held to a bytes budget. Every instance's
 * overlap must equal the model; rkv_router_route and route_top (room for
 * 5) must pick what choose picks over the overlaps and list the same
 * records bit for bit.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/router_util.h"
#include "tests/support/test_util.h"

#define NB 6
#define LEN 1500
#define SYS 24

typedef struct model {
    uint32_t share[NB];
} model;

static uint64_t page_hash(const model *m, uint32_t b, uint32_t j)
{
    return rt_chain_hash(m->share, b, j);
}

static uint32_t common(const model *m, uint32_t b, uint32_t c)
{
    return rt_chain_common(m->share, LEN, b, c);
}

typedef struct held {
    uint64_t id, seq;
    int resync;
    uint32_t nb, base[2], len[2];
} held;

static uint32_t draw_len(rkv_rng *rng)
{
    switch (rkv_rng_below(rng, 5)) {
    case 0:
        return (uint32_t)rkv_rng_below(rng, 8);
    case 1:
        return SYS - 2 + (uint32_t)rkv_rng_below(rng, 5);
    case 2:
        return (uint32_t)rkv_rng_below(rng, LEN + 1);
    case 3:
        return LEN - (uint32_t)rkv_rng_below(rng, 40);
    default:
        return SYS;
    }
}

/* Stores pages [from, len) of base b for instance x on the four routers,
 * pages from `dev` on on the host (page from - 1 is held already). */
static void store(rkv_router **tw, const model *m, held *x, uint32_t b,
                  uint32_t from, uint32_t len, uint32_t dev)
{
    for (uint32_t j = from; j < len;) {
        uint64_t h[RKV_EVENT_MAX_HASHES];
        uint32_t k = 0;
        while (k < RKV_EVENT_MAX_HASHES && j + k < len && (j + k < dev) == (j < dev)) {
            h[k] = page_hash(m, b, j + k);
            k++;
        }
        rkv_event e = rt_event(++x->seq, RKV_EVENT_BLOCK_STORED, 16,
                               j ? page_hash(m, b, j - 1) : RKV_HASH_ROOT, h, k);
        e.medium = j < dev ? RKV_MEDIUM_DEVICE : RKV_MEDIUM_HOST;
        for (int t = 0; t < 4; t++)
            cr_assert_eq(rkv_router_apply(tw[t], x->id, &e, 1), RKV_OK, "%s",
                         rkv_last_error());
        j += k;
    }
}

static uint32_t model_lead(const model *m, const held *x, uint32_t b, uint32_t n)
{
    if (x->resync)
        return 0;
    uint32_t best = 0;
    for (uint32_t k = 0; k < x->nb; k++) {
        uint32_t c = common(m, b, x->base[k]);
        uint32_t l = x->len[k] < c ? x->len[k] : c;
        best = l > best ? l : best;
    }
    return best < n ? best : n;
}

/* Routers: [0] answers by rkv_router_route, [1] by overlaps + choose, [2]
 * by route_top with room for 5 (its own generator and loads: compared
 * with its own overlaps + choose twin [3]). */
static void run(uint64_t seed, uint32_t ninst, int tiers, int spread,
                uint64_t table_bytes)
{
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    model m;
    m.share[0] = LEN;
    for (uint32_t b = 1; b < NB; b++)
        m.share[b] = rkv_rng_below(&rng, 3) ? SYS : (uint32_t)rkv_rng_below(&rng, LEN);
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    cfg.seed = seed;
    cfg.max_table_bytes = table_bytes;
    rkv_router *tw[4];
    for (int t = 0; t < 4; t++)
        tw[t] = rt_mk_with(&cfg);
    held *x = calloc(ninst, sizeof *x);
    cr_assert_not_null(x);
    for (uint32_t i = 0; i < ninst; i++) {
        x[i].id = (rkv_rng_next(&rng) % 1000000) * 1024 + i; /* not in slot order */
        for (int t = 0; t < 4; t++)
            cr_assert_eq(rkv_router_add_instance(tw[t], x[i].id), RKV_OK);
        x[i].nb = 1 + (uint32_t)rkv_rng_below(&rng, 2);
        for (uint32_t k = 0; k < x[i].nb; k++) {
            x[i].base[k] = (uint32_t)rkv_rng_below(&rng, NB);
            x[i].len[k] = draw_len(&rng);
        }
        /* one prefix may end on the host (two: the second stores only past
         * what the first holds, on the device) */
        uint32_t dev = tiers && x[i].nb == 1 && rkv_rng_below(&rng, 3) == 0
                           ? (uint32_t)rkv_rng_below(&rng, x[i].len[0] + 1)
                           : LEN;
        store(tw, &m, &x[i], x[i].base[0], 0, x[i].len[0], dev);
        if (x[i].nb == 2) {
            uint32_t c = common(&m, x[i].base[0], x[i].base[1]);
            store(tw, &m, &x[i], x[i].base[1], x[i].len[0] < c ? x[i].len[0] : c,
                  x[i].len[1], LEN);
        }
    }
    for (uint32_t i = 0; i < ninst; i++) {
        if (rkv_rng_below(&rng, 20) == 0) { /* resyncing: holds nothing */
            x[i].resync = 1;
            for (int t = 0; t < 4; t++)
                cr_assert_eq(rkv_router_heartbeat(tw[t], x[i].id, x[i].seq + 5), RKV_OK);
        }
        uint64_t q = spread ? rkv_rng_below(&rng, 40000) : 16 * rkv_rng_below(&rng, 2);
        uint32_t run_ = (uint32_t)rkv_rng_below(&rng, spread ? 8 : 2);
        for (int t = 0; t < 4; t++)
            cr_assert_eq(rkv_router_set_load(tw[t], x[i].id, run_, q), RKV_OK);
    }
    for (int t = 0; t < 4; t++)
        rt_ok(tw[t]);
    rkv_router_overlap *all = malloc(RKV_ROUTER_MAX_INSTANCES * sizeof *all);
    uint64_t *h = malloc((LEN + 64) * sizeof *h);
    cr_assert(all && h);
    for (int q = 0; q < 150; q++) {
        uint32_t b = (uint32_t)rkv_rng_below(&rng, NB);
        uint32_t n = rkv_rng_below(&rng, 4) == 0 ? (uint32_t)rkv_rng_below(&rng, 40)
                                                 : (uint32_t)rkv_rng_below(&rng, LEN + 60);
        for (uint32_t j = 0; j < n; j++)
            h[j] = j < LEN ? page_hash(&m, b, j) : rkv_rng_next(&rng);
        /* every overlap against the model */
        uint32_t k = 0;
        cr_assert_eq(rkv_router_overlaps(tw[1], 0, h, n, all, RKV_ROUTER_MAX_INSTANCES,
                                         &k), RKV_OK);
        cr_assert_eq(k, ninst);
        for (uint32_t i = 0; i < k; i++) {
            uint32_t s = 0;
            while (x[s].id != all[i].instance)
                s++;
            cr_assert_eq(all[i].pages, model_lead(&m, &x[s], b, n),
                         "query %d (base %u, %u pages), instance %u", q, b, n, s);
        }
        /* rkv_router_route and route_top pick what choose picks */
        rt_same_choice(tw, h, n, all, k, q);
        if (q % 40 == 39) { /* a load report now and then */
            uint64_t id = x[rkv_rng_below(&rng, ninst)].id;
            uint64_t ql = spread ? rkv_rng_below(&rng, 40000) : 0;
            for (int t = 0; t < 4; t++)
                cr_assert_eq(rkv_router_set_load(tw[t], id, 1, ql), RKV_OK);
        }
    }
    for (uint32_t i = 0; i < ninst; i++) {
        rkv_router_instance_info a, c;
        cr_assert_eq(rkv_router_instance_info_get(tw[0], x[i].id, &a), RKV_OK);
        cr_assert_eq(rkv_router_instance_info_get(tw[1], x[i].id, &c), RKV_OK);
        cr_assert_eq(a.routed_tokens, c.routed_tokens);
        cr_assert_eq(a.routed_running, c.routed_running);
    }
    for (int t = 0; t < 4; t++)
        rt_done(tw[t]);
    free(all);
    free(h);
    free(x);
}

Test(router_search, long_chains_match_the_model_and_choose)
{
    run(11, 150, 0, 1, 0);
    run(12, 600, 0, 1, 0);
    run(13, 200, 0, 0, 0); /* equal loads: ties */
}

/* A table held to a bytes budget is not a power of two (its clusters wrap
 * at its end by a compare, not a mask): ~27k entries at most here, and
 * 1e6 bytes is below the 65,536-entry power of two. */
Test(router_search, long_chains_in_a_table_that_is_not_a_power_of_two)
{
    run(15, 150, 0, 1, 1000000);
    run(16, 150, 1, 0, 1000000);
}

Test(router_search, long_chains_with_a_host_tier)
{
    run(14, 200, 1, 1, 0);
}

/* The bound at equality: B's span (31, 63] scores at most exactly what A
 * is known to reach once the galloping sees A at page 127, and B's lead
 * (63) does tie with A's (128): B must still be searched, and the tie rule
 * (fewer queued tokens) picks B. Skipping spans whose bound only equals
 * the best would pick A. */
Test(router_search, a_bound_equal_to_the_best_is_still_searched)
{
    rkv_router_config cfg;
    rkv_router_config_init(&cfg); /* 16 tokens a page, device weight 1 */
    rkv_router *r[2] = {rt_mk_with(&cfg), rt_mk_with(&cfg)};
    model m = {{LEN, 0, 0, 0, 0, 0}};
    uint64_t h[300];
    for (uint32_t j = 0; j < 300; j++)
        h[j] = page_hash(&m, 0, j);
    for (int t = 0; t < 2; t++) {
        for (uint64_t id = 1; id <= 65; id++) { /* A = 1 in group 0, B = 65 in group 1 */
            cr_assert_eq(rkv_router_add_instance(r[t], id), RKV_OK);
            uint64_t q = id == 1 ? 1040 : id == 65 ? 0 : 1000000;
            cr_assert_eq(rkv_router_set_load(r[t], id, 0, q), RKV_OK);
        }
        for (int k = 0; k < 2; k++) {
            uint64_t id = k ? 65 : 1;
            uint32_t len = k ? 63 : 128, seq = 0;
            for (uint32_t j = 0; j < len; j += RKV_EVENT_MAX_HASHES) {
                uint32_t n = len - j < RKV_EVENT_MAX_HASHES ? len - j : RKV_EVENT_MAX_HASHES;
                rkv_event e = rt_event(++seq, RKV_EVENT_BLOCK_STORED, 16,
                                       j ? h[j - 1] : RKV_HASH_ROOT, h + j, n);
                cr_assert_eq(rkv_router_apply(r[t], id, &e, 1), RKV_OK);
            }
        }
    }
    rkv_router_overlap *all = malloc(RKV_ROUTER_MAX_INSTANCES * sizeof *all), one;
    cr_assert_not_null(all);
    uint32_t k = 0, best = 0;
    cr_assert_eq(rkv_router_overlaps(r[1], 0, h, 300, all, RKV_ROUTER_MAX_INSTANCES, &k),
                 RKV_OK);
    cr_assert_eq(all[0].pages, 128);
    cr_assert_eq(all[64].pages, 63);
    cr_assert_eq(all[0].score, all[64].score); /* 16 * 128 - 1040 = 16 * 63 */
    cr_assert_eq(rkv_router_choose(r[1], all, k, 300, &best), RKV_OK);
    cr_assert_eq(all[best].instance, 65);
    cr_assert_eq(rkv_router_route(r[0], 0, h, 300, &one), RKV_OK);
    rt_same_record(&one, &all[best], 0);
    free(all);
    rt_done(r[0]);
    rt_done(r[1]);
}

/*
 * tests/test_router_scale.c -- the router's query against a brute-force
 * model, beyond 64 instances and across media; stores must find their
 * parent; the medium weights of the score; routing by token ids.
 *
 * Reference test: NB bases (chains of pages) share prefixes of random
 * lengths with base 0; each of up to 700 instances (11 slot groups) holds
 * prefixes of up to three bases, device for its first d pages and host,
 * disk or both after (prefix-closed, as a tree with tiers is), stored by
 * events in chain order (pages shared by two bases stored once). Some
 * instances are made to resync (hold nothing) and some are removed. For
 * random requests (a base's prefix, maybe with a foreign tail, maybe
 * another namespace) every instance's overlap and pages per medium must
 * equal a page-by-page walk of the model. rkv_router_check at the end of
 * each round.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv_router.h"
#include "tests/support/router_util.h"
#include "tests/support/test_util.h"

#define NB 5
#define LEN 90
#define NS 7

static uint64_t base_hash(const uint32_t *share, uint32_t b, uint32_t j)
{
    uint32_t cb = j < share[b] ? 0 : b;
    return ((uint64_t)cb * 1000 + j + 1) * 0x9E3779B97F4A7C15ull;
}

static rkv_event ev(uint64_t seq, uint8_t kind, uint8_t medium, uint64_t parent,
                    uint64_t h)
{
    rkv_event e = rt_event(seq, kind, 16, parent, &h, 1);
    e.medium = medium;
    e.ns = NS;
    return e;
}

typedef struct minst {
    uint64_t id, seq;
    int registered, resync;
    uint8_t med[NB][LEN]; /* medium bits per canonical (base, page) */
} minst;

static void run_round(rkv_rng *rng, uint32_t ninst)
{
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    rkv_router *r = NULL;
    cr_assert_eq(rkv_router_create(&cfg, &r), RKV_OK);
    uint32_t share[NB];
    share[0] = LEN;
    for (uint32_t b = 1; b < NB; b++)
        share[b] = (uint32_t)rkv_rng_below(rng, LEN / 2);
    minst *m = calloc(ninst, sizeof *m);
    cr_assert_not_null(m);
    rkv_event *batch = malloc(NB * LEN * 3 * sizeof *batch);
    cr_assert_not_null(batch);
    for (uint32_t i = 0; i < ninst; i++) {
        minst *x = &m[i];
        x->id = 10 + (uint64_t)i * 3;
        x->registered = 1;
        cr_assert_eq(rkv_router_add_instance(r, x->id), RKV_OK);
        uint32_t d = (uint32_t)rkv_rng_below(rng, LEN + 1);
        uint32_t nbases = (uint32_t)rkv_rng_below(rng, 4), nev = 0;
        for (uint32_t t = 0; t < nbases; t++) {
            uint32_t b = (uint32_t)rkv_rng_below(rng, NB);
            uint32_t len = (uint32_t)rkv_rng_below(rng, LEN + 1);
            for (uint32_t j = 0; j < len; j++) {
                uint32_t cb = j < share[b] ? 0 : b;
                if (x->med[cb][j])
                    continue; /* shared with a base stored before */
                uint8_t bits = j < d ? 1 : (uint8_t)(2 + rkv_rng_below(rng, 3) * 2) & 6;
                if (bits == 0)
                    bits = 6; /* host and disk */
                x->med[cb][j] = bits;
                uint64_t parent = j == 0 ? RKV_HASH_ROOT : base_hash(share, b, j - 1);
                for (uint8_t med = 0; med < RKV_MEDIUM_COUNT; med++)
                    if ((bits >> med) & 1)
                        batch[nev++] = ev(++x->seq, RKV_EVENT_BLOCK_STORED, med,
                                          parent, base_hash(share, b, j));
            }
        }
        /* half the time: delivered in random batch sizes */
        for (uint32_t k = 0; k < nev;) {
            uint32_t take = 1 + (uint32_t)rkv_rng_below(rng, 40);
            take = take > nev - k ? nev - k : take;
            cr_assert_eq(rkv_router_apply(r, x->id, batch + k, take), RKV_OK);
            k += take;
        }
        cr_assert_eq(rkv_router_instance_info_get(r, x->id,
                     &(rkv_router_instance_info){0}), RKV_OK);
    }
    /* some resync (a gap), some leave */
    for (uint32_t i = 0; i < ninst; i++) {
        uint64_t c = rkv_rng_below(rng, 20);
        if (c == 0) {
            cr_assert_eq(rkv_router_heartbeat(r, m[i].id, m[i].seq + 5), RKV_OK);
            m[i].resync = 1;
        } else if (c == 1) {
            cr_assert_eq(rkv_router_remove_instance(r, m[i].id), RKV_OK);
            m[i].registered = 0;
        }
    }
    rt_ok(r);
    rkv_router_overlap *o = malloc(RKV_ROUTER_MAX_INSTANCES * sizeof *o);
    cr_assert_not_null(o);
    for (int q = 0; q < 60; q++) {
        uint32_t b = (uint32_t)rkv_rng_below(rng, NB);
        uint32_t n = (uint32_t)rkv_rng_below(rng, LEN + 1);
        uint32_t foreign = rkv_rng_below(rng, 3) == 0
                               ? (uint32_t)rkv_rng_below(rng, n + 1) : n;
        uint64_t ns = rkv_rng_below(rng, 8) == 0 ? NS + 1 : NS;
        uint64_t h[LEN];
        for (uint32_t j = 0; j < n; j++)
            h[j] = j < foreign ? base_hash(share, b, j) : rkv_rng_next(rng) | 1;
        uint32_t k;
        cr_assert_eq(rkv_router_overlaps(r, ns, h, n, o,
                                         RKV_ROUTER_MAX_INSTANCES, &k), RKV_OK);
        uint32_t at = 0;
        for (uint32_t i = 0; i < ninst; i++) {
            if (!m[i].registered)
                continue;
            cr_assert(at < k);
            const rkv_router_overlap *got = &o[at++];
            cr_assert_eq(got->instance, m[i].id);
            uint32_t want = 0, pm[RKV_MEDIUM_COUNT] = {0, 0, 0};
            if (!m[i].resync && ns == NS) {
                for (uint32_t j = 0; j < foreign; j++) {
                    uint32_t cb = j < share[b] ? 0 : b;
                    uint8_t bits = m[i].med[cb][j];
                    if (bits == 0)
                        break;
                    want++;
                    pm[(bits & 1) ? 0 : (bits & 2) ? 1 : 2]++;
                }
            }
            cr_assert_eq(got->pages, want, "instance %u: %u pages, model %u "
                         "(request %u pages, foreign from %u)", i, got->pages,
                         want, n, foreign);
            for (int med = 0; med < RKV_MEDIUM_COUNT; med++)
                cr_assert_eq(got->pages_by_medium[med], pm[med],
                             "instance %u medium %d", i, med);
            double sc = cfg.page_tokens * (pm[0] * cfg.medium_weight[0] +
                                           pm[1] * cfg.medium_weight[1] +
                                           pm[2] * cfg.medium_weight[2]);
            cr_assert_float_eq(got->score, sc, 1e-9);
        }
        cr_assert_eq(at, k);
    }
    free(o);
    free(batch);
    free(m);
    rkv_router_destroy(r);
}

Test(router_scale, overlaps_match_a_page_walk_beyond_64_instances)
{
    rkv_rng rng;
    rkv_rng_init(&rng, rkv_test_seed("router_scale.overlaps"));
    uint32_t sizes[] = {1, 7, 64, 65, 200, 700};
    for (uint64_t rep = 0; rep < rkv_test_scaled(2); rep++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            run_round(&rng, sizes[s]);
}

Test(router_scale, instance_limit)
{
    rkv_router *r = rt_mk();
    for (uint64_t i = 0; i < RKV_ROUTER_MAX_INSTANCES; i++)
        cr_assert_eq(rkv_router_add_instance(r, i * 2), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_ERR_NO_SPACE);
    /* a snapshot still stages (spare slots) with every instance registered */
    rkv_block_entry b = {0, 5, RKV_HASH_ROOT, 0, 0};
    cr_assert_eq(rkv_router_apply_snapshot(r, 2046, &b, 1, 1), RKV_OK);
    cr_assert(rkv_router_holds(r, 2046, 0, 5));
    rt_ok(r);
    rkv_router_overlap o;
    cr_assert_eq(rkv_router_route(r, 0, &b.hash, 1, &o), RKV_OK);
    cr_assert_eq(o.instance, 2046);
    cr_assert_eq(o.pages, 1);
    rkv_router_destroy(r);
}

Test(router_scale, stores_need_their_parent)
{
    rkv_router *r = rt_mk_instances(2);
    rkv_event a[2] = {ev(1, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_DEVICE,
                         RKV_HASH_ROOT, 11),
                      ev(2, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_HOST, 11, 12)};
    cr_assert_eq(rkv_router_apply(r, 1, a, 2), RKV_OK);
    /* parent on another medium is fine (12 on host under 11 on device) */
    rkv_event c = ev(3, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_DISK, 12, 13);
    cr_assert_eq(rkv_router_apply(r, 1, &c, 1), RKV_OK);
    rkv_router_instance_info in;
    cr_assert_eq(rkv_router_instance_info_get(r, 1, &in), RKV_OK);
    cr_assert(!in.needs_resync && in.blocks == 3);
    /* instance 2 stores under 11, which only instance 1 holds: refused */
    rkv_event d = ev(1, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_DEVICE, 11, 12);
    cr_assert_eq(rkv_router_apply(r, 2, &d, 1), RKV_OK);
    cr_assert_eq(rkv_router_instance_info_get(r, 2, &in), RKV_OK);
    cr_assert(in.needs_resync && in.blocks == 0);
    /* in another namespace the parent is not the same block */
    rkv_event e = ev(4, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_DEVICE, 13, 14);
    e.ns = NS + 1;
    cr_assert_eq(rkv_router_apply(r, 1, &e, 1), RKV_OK);
    cr_assert_eq(rkv_router_instance_info_get(r, 1, &in), RKV_OK);
    cr_assert(in.needs_resync);
    rkv_router_stats s;
    cr_assert_eq(rkv_router_get_stats(r, &s), RKV_OK);
    cr_assert_eq(s.events_bad, 2);
    rt_done(r);
}

/* device over host over disk, with configured weights; a page on several
 * media counts its best; demotion (store on host, then remove from the
 * device) moves the page's weight */
Test(router_scale, medium_weights)
{
    rkv_router_config cfg;
    rkv_router_config_init(&cfg);
    cfg.page_tokens = 10;
    cfg.medium_weight[RKV_MEDIUM_DEVICE] = 1.0;
    cfg.medium_weight[RKV_MEDIUM_HOST] = 0.25;
    cfg.medium_weight[RKV_MEDIUM_DISK] = 0.1;
    rkv_router *r = NULL;
    cr_assert_eq(rkv_router_create(&cfg, &r), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 2), RKV_OK);
    uint64_t h[4] = {51, 52, 53, 54};
    uint64_t s1 = 0, s2 = 0;
    for (int j = 0; j < 4; j++) {
        rkv_event e = ev(++s1, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_DEVICE,
                         j ? h[j - 1] : RKV_HASH_ROOT, h[j]);
        cr_assert_eq(rkv_router_apply(r, 1, &e, 1), RKV_OK);
        e = ev(++s2, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_HOST,
               j ? h[j - 1] : RKV_HASH_ROOT, h[j]);
        cr_assert_eq(rkv_router_apply(r, 2, &e, 1), RKV_OK);
    }
    rkv_router_overlap best, o[4];
    uint32_t k;
    cr_assert_eq(rkv_router_route(r, NS, h, 4, &best), RKV_OK);
    cr_assert_eq(best.instance, 1);
    cr_assert_float_eq(best.score, 40.0, 1e-9);
    /* the route counted a request on 1 until its next report */
    cr_assert_eq(rkv_router_set_load(r, 1, 0, 0), RKV_OK);
    /* demote pages 2, 3 of instance 1: 3 to host and disk, 2 to host */
    rkv_event dm[5] = {
        ev(++s1, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_HOST, 52, 53),
        ev(++s1, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_HOST, 53, 54),
        ev(++s1, RKV_EVENT_BLOCK_STORED, RKV_MEDIUM_DISK, 53, 54),
        ev(++s1, RKV_EVENT_BLOCK_REMOVED, RKV_MEDIUM_DEVICE, 0, 54),
        ev(++s1, RKV_EVENT_BLOCK_REMOVED, RKV_MEDIUM_DEVICE, 0, 53)};
    cr_assert_eq(rkv_router_apply(r, 1, dm, 5), RKV_OK);
    cr_assert(rkv_router_holds_medium(r, 1, NS, 54, RKV_MEDIUM_DISK));
    cr_assert(!rkv_router_holds_medium(r, 1, NS, 54, RKV_MEDIUM_DEVICE));
    cr_assert_eq(rkv_router_overlaps(r, NS, h, 4, o, 4, &k), RKV_OK);
    cr_assert_eq(o[0].pages, 4);
    cr_assert_eq(o[0].pages_by_medium[RKV_MEDIUM_DEVICE], 2);
    cr_assert_eq(o[0].pages_by_medium[RKV_MEDIUM_HOST], 2);
    cr_assert_float_eq(o[0].score, 10 * (2 + 2 * 0.25), 1e-9);
    cr_assert_eq(o[1].pages_by_medium[RKV_MEDIUM_HOST], 4);
    cr_assert_float_eq(o[1].score, 10 * 4 * 0.25, 1e-9);
    /* page 3 leaves the host: disk only now */
    rkv_event rm = ev(++s1, RKV_EVENT_BLOCK_REMOVED, RKV_MEDIUM_HOST, 0, 54);
    cr_assert_eq(rkv_router_apply(r, 1, &rm, 1), RKV_OK);
    cr_assert_eq(rkv_router_overlaps(r, NS, h, 4, o, 4, &k), RKV_OK);
    cr_assert_eq(o[0].pages_by_medium[RKV_MEDIUM_DISK], 1);
    cr_assert_eq(o[0].pages_by_medium[RKV_MEDIUM_HOST], 1);
    cr_assert_float_eq(o[0].score, 10 * (2 + 0.25 + 0.1), 1e-9);
    /* host worth as much as the device: a tie, either wins; a little
     * load on 1 and 2 wins */
    rkv_router_destroy(r);
    cfg.medium_weight[RKV_MEDIUM_HOST] = 1.0;
    cfg.medium_weight[RKV_MEDIUM_DISK] = 1.0;
    cr_assert_eq(rkv_router_create(&cfg, &r), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 1), RKV_OK);
    cr_assert_eq(rkv_router_add_instance(r, 2), RKV_OK);
    rkv_block_entry dev = {NS, 51, RKV_HASH_ROOT, RKV_MEDIUM_DEVICE, 0};
    rkv_block_entry host = {NS, 51, RKV_HASH_ROOT, RKV_MEDIUM_HOST, 0};
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, &dev, 1, 1), RKV_OK);
    cr_assert_eq(rkv_router_apply_snapshot(r, 2, &host, 1, 1), RKV_OK);
    cr_assert_eq(rkv_router_route(r, NS, h, 1, &best), RKV_OK);
    cr_assert(best.instance == 1 || best.instance == 2);
    cr_assert_eq(rkv_router_set_load(r, 1, 0, 1), RKV_OK);
    cr_assert_eq(rkv_router_set_load(r, 2, 0, 0), RKV_OK);
    cr_assert_eq(rkv_router_route(r, NS, h, 1, &best), RKV_OK);
    cr_assert_eq(best.instance, 2);
    cfg.medium_weight[RKV_MEDIUM_DISK] = -1;
    rkv_router *bad = NULL;
    cr_assert_eq(rkv_router_create(&cfg, &bad), RKV_ERR_INVALID_ARG);
    rkv_router_destroy(r);
}

Test(router_scale, route_by_tokens)
{
    rkv_router *r = rt_mk_instances(2);
    enum { P = 4, T = 1000 };
    int32_t tok[T];
    for (int i = 0; i < T; i++)
        tok[i] = (i * 7) % 13;
    uint64_t h[T / P], prev = RKV_HASH_ROOT;
    for (int p = 0; p < T / P; p++)
        h[p] = prev = rkv_block_hash(prev, NS, tok + p * P, P);
    /* 1 holds 30 pages, 2 holds 200 */
    rkv_block_entry *b = malloc(200 * sizeof *b);
    cr_assert_not_null(b);
    for (int p = 0; p < 200; p++)
        b[p] = (rkv_block_entry){NS, h[p], p ? h[p - 1] : RKV_HASH_ROOT,
                                 RKV_MEDIUM_DEVICE, 0};
    cr_assert_eq(rkv_router_apply_snapshot(r, 1, b, 30, 1), RKV_OK);
    cr_assert_eq(rkv_router_apply_snapshot(r, 2, b, 200, 1), RKV_OK);
    rkv_router_overlap a, t, o[2];
    uint32_t k;
    for (uint32_t n = 0; n <= T; n += 37) {
        /* each route counts its request until a report: both routes see
         * the same (empty) load */
        cr_assert_eq(rkv_router_set_load(r, 1, 0, 0), RKV_OK);
        cr_assert_eq(rkv_router_set_load(r, 2, 0, 0), RKV_OK);
        cr_assert_eq(rkv_router_route(r, NS, h, n / P, &a), RKV_OK);
        cr_assert_eq(rkv_router_set_load(r, 1, 0, 0), RKV_OK);
        cr_assert_eq(rkv_router_set_load(r, 2, 0, 0), RKV_OK);
        cr_assert_eq(rkv_router_route_tokens(r, NS, tok, n, P, &t), RKV_OK);
        if (n / P > 30) /* below, both hold every page: a random tie */
            cr_assert_eq(a.instance, t.instance);
        cr_assert_eq(a.pages, t.pages);
        cr_assert_float_eq(a.score, t.score, 1e-9);
        cr_assert_eq(rkv_router_overlaps_tokens(r, NS, tok, n, P, o, 2, &k),
                     RKV_OK);
        uint32_t full = n / P;
        cr_assert_eq(o[0].pages, full < 30 ? full : 30);
        cr_assert_eq(o[1].pages, full < 200 ? full : 200);
    }
    /* another namespace hashes differently: nothing */
    cr_assert_eq(rkv_router_overlaps_tokens(r, NS + 1, tok, T, P, o, 2, &k),
                 RKV_OK);
    cr_assert_eq(o[0].pages + o[1].pages, 0);
    cr_assert_eq(rkv_router_route_tokens(r, NS, tok, T, 0, &t),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_route_tokens(r, NS, NULL, 8, P, &t),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_router_route_tokens(r, NS, NULL, 0, P, &t), RKV_OK);
    cr_assert_eq(rkv_router_overlaps_tokens(r, NS, tok, T, P, o, 1, &k),
                 RKV_ERR_INVALID_ARG);
    free(b);
    rkv_router_destroy(r);
}

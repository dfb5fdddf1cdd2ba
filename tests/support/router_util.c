/*
 * tests/support/router_util.c -- see router_util.h.
 */
#include "tests/support/router_util.h"

#include <criterion/criterion.h>
#include <string.h>

rkv_router *rt_mk(void)
{
    return rt_mk_with(NULL);
}

rkv_router *rt_mk_instances(uint64_t n)
{
    return rt_mk_with_instances(NULL, n);
}

rkv_router *rt_mk_with_instances(const rkv_router_config *c, uint64_t n)
{
    rkv_router *r = rt_mk_with(c);
    for (uint64_t id = 1; id <= n; id++)
        cr_assert_eq(rkv_router_add_instance(r, id), RKV_OK, "%s",
                     rkv_last_error());
    return r;
}

rkv_router *rt_mk_with(const rkv_router_config *c)
{
    rkv_router *r = NULL;
    cr_assert_eq(rkv_router_create(c, &r), RKV_OK, "%s", rkv_last_error());
    return r;
}

rkv_event rt_event(uint64_t seq, uint8_t kind, uint32_t page_size,
                   uint64_t parent, const uint64_t *h, uint32_t n)
{
    cr_assert_leq(n, RKV_EVENT_MAX_HASHES);
    rkv_event e = {.seq = seq, .kind = kind, .num_hashes = (uint16_t)n,
                   .page_size = page_size, .parent_hash = parent};
    memcpy(e.hashes, h, n * sizeof *h);
    return e;
}

void rt_same_record(const rkv_router_overlap *a, const rkv_router_overlap *b, int q)
{
    cr_assert_eq(a->instance, b->instance, "query %d", q);
    cr_assert_eq(a->pages, b->pages, "query %d, instance %llu", q,
                 (unsigned long long)a->instance);
    for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
        cr_assert_eq(a->pages_by_medium[m], b->pages_by_medium[m], "query %d", q);
    cr_assert_eq(memcmp(&a->score, &b->score, sizeof a->score), 0,
                 "query %d, instance %llu: score %.17g vs %.17g", q,
                 (unsigned long long)a->instance, a->score, b->score);
    cr_assert_eq(a->needs_resync, b->needs_resync, "query %d", q);
}

uint64_t rt_chain_hash(const uint32_t *share, uint32_t b, uint32_t j)
{
    uint32_t cb = j < share[b] ? 0 : b;
    return ((uint64_t)cb * 100000 + j + 1) * 0x9E3779B97F4A7C15ull;
}

uint32_t rt_chain_common(const uint32_t *share, uint32_t len, uint32_t b, uint32_t c)
{
    if (b == c)
        return len;
    return share[b] < share[c] ? share[b] : share[c];
}

void rt_same_choice(rkv_router *const *tw, const uint64_t *h, uint32_t n,
                    rkv_router_overlap *all, uint32_t k, int q)
{
    rkv_router_overlap one, top[5];
    uint32_t best = 0, mt = 0, pick = 0;
    cr_assert_eq(rkv_router_choose(tw[1], all, k, n, &best), RKV_OK);
    cr_assert_eq(rkv_router_route(tw[0], 0, h, n, &one), RKV_OK);
    rt_same_record(&one, &all[best], q);
    cr_assert_eq(rkv_router_overlaps(tw[3], 0, h, n, all, RKV_ROUTER_MAX_INSTANCES,
                                     &k), RKV_OK);
    cr_assert_eq(rkv_router_choose(tw[3], all, k, n, &best), RKV_OK);
    cr_assert_eq(rkv_router_route_top(tw[2], 0, h, n, top, 5, &mt, &pick), RKV_OK);
    rt_same_record(&top[pick], &all[best], q);
}

void rt_ok(const rkv_router *r)
{
    cr_assert_eq(rkv_router_check(r), RKV_OK, "%s", rkv_last_error());
}

void rt_done(rkv_router *r)
{
    rt_ok(r);
    rkv_router_destroy(r);
}

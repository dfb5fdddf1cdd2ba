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

void rt_ok(const rkv_router *r)
{
    cr_assert_eq(rkv_router_check(r), RKV_OK, "%s", rkv_last_error());
}

void rt_done(rkv_router *r)
{
    rt_ok(r);
    rkv_router_destroy(r);
}

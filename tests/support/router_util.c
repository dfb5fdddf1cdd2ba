/*
 * tests/support/router_util.c -- see router_util.h.
 */
#include "tests/support/router_util.h"

#include <criterion/criterion.h>

rkv_router *rt_mk(void)
{
    rkv_router *r = NULL;
    cr_assert_eq(rkv_router_create(NULL, &r), RKV_OK, "%s", rkv_last_error());
    return r;
}

void rt_ok(const rkv_router *r)
{
    cr_assert_eq(rkv_router_check(r), RKV_OK, "%s", rkv_last_error());
}

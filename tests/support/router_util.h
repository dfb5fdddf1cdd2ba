/*
 * tests/support/router_util.h -- the router tests' (tests/test_router.c,
 * tests/test_router_snapshot.c, tests/test_router_scale.c) shorthands: a default router, and its
 * rkv_router_check as an assertion (called after every operation).
 */
#ifndef RKV_TESTS_ROUTER_UTIL_H
#define RKV_TESTS_ROUTER_UTIL_H

#include "radixkv_router.h"

/* A router with the default config; the test fails if it cannot be made. */
rkv_router *rt_mk(void);

/* Asserts rkv_router_check(r) (its message on failure). */
void rt_ok(const rkv_router *r);

#endif

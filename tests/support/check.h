/*
 * tests/support/check.h -- the status assertions every Criterion test
 * writes: OK(expr) asserts RKV_OK, ERR(code, expr) asserts that exact
 * code; both print the expression and rkv_last_error() when they fail.
 */
#ifndef RKV_TESTS_CHECK_H
#define RKV_TESTS_CHECK_H

#include <criterion/criterion.h>

#include "radixkv.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define ERR(code, expr) \
    cr_assert_eq((expr), (code), "%s: expected %d (%s)", #expr, (int)(code), \
                 rkv_last_error())

#endif

/*
 * common/status.h -- internal error reporting shared by every module.
 *
 * Usage: `return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_insert: n=%zu
 * ...", n);` -- sets the thread-local message read by rkv_last_error() and
 * returns the status, so a failure is reported and returned in one line.
 * A NULL required pointer reads `return rkv_null_arg(fn, a, "a", "b");`.
 */
#ifndef RKV_COMMON_STATUS_H
#define RKV_COMMON_STATUS_H

#include "radixkv.h"

#if defined(__GNUC__)
#define RKV_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RKV_PRINTF(a, b)
#endif

#ifdef __cplusplus
extern "C" {
#endif

rkv_status rkv_set_error(rkv_status status, const char *fmt, ...) RKV_PRINTF(2, 3);
void rkv_clear_error(void);
/* The one sentence for a NULL among a call's two required pointers:
 * "FN: NULL A" when a is NULL, else "FN: NULL B" (the caller has checked
 * that one of them is). Returns RKV_ERR_INVALID_ARG. */
rkv_status rkv_null_arg(const char *fn, const void *a, const char *a_name,
                        const char *b_name);

#ifdef __cplusplus
}
#endif

#define RKV_LIKELY(x) __builtin_expect(!!(x), 1)
#define RKV_UNLIKELY(x) __builtin_expect(!!(x), 0)

#endif

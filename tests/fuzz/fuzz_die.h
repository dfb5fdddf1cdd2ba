/*
 * tests/fuzz/fuzz_die.h -- how a harness reports a violated property: one
 * line on stderr naming the harness (and the operation, for the harnesses
 * that run programs of calls), the message, and rkv_last_error(); then
 * abort(), which libFuzzer records as a crash with its input.
 */
#ifndef RKV_TESTS_FUZZ_DIE_H
#define RKV_TESTS_FUZZ_DIE_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "radixkv.h"

/* op: the index of the failing operation, or NULL where there is none. */
__attribute__((noreturn, format(printf, 3, 4))) static inline void
fuzz_die(const char *harness, const uint32_t *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", harness);
    if (op != NULL)
        fprintf(stderr, "op %u: ", *op);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (last error: %s)\n", rkv_last_error());
    va_end(ap);
    abort();
}

#endif

/*
 * examples/check.h -- how the example programs report a failed call: the
 * call, the status's name and the library's sentence about it
 * (rkv_last_error), on stderr after the program's name. Each example
 * defines EXAMPLE_NAME before including this.
 *
 * CHECK(call) returns 1 from the enclosing function (an example's exit
 * status for "something did not hold") when the call fails.
 */
#ifndef RKV_EXAMPLES_CHECK_H
#define RKV_EXAMPLES_CHECK_H

#include <stdio.h>

#include <radixkv.h>

#ifndef EXAMPLE_NAME
#error "define EXAMPLE_NAME (the program's name) before including check.h"
#endif

/* Prints the failing call and the library's sentence about it; returns 1. */
static int failed(const char *call, rkv_status st)
{
    fprintf(stderr, "%s: %s: %s (%s)\n", EXAMPLE_NAME, call, rkv_strerror(st),
            rkv_last_error());
    return 1;
}

#define CHECK(call)                                                        \
    do {                                                                   \
        rkv_status st_ = (call);                                           \
        if (st_ != RKV_OK)                                                 \
            return failed(#call, st_);                                     \
    } while (0)

#endif

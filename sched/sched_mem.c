/*
 * sched/sched_mem.c -- the scheduler's allocator: libc's, plus the
 * out-of-memory injection and the largest-request record of
 * sched/sched_debug.h.
 *
 * Invariant: fail_after is -1 except while a test has armed it; it is
 * written only by the debug setter and by the countdown of an armed run.
 * It is thread-local, so an injection armed on one thread never fails (or
 * races with) allocations of schedulers other threads run: the library
 * keeps no process-wide mutable state.
 */
#include <stdlib.h>

#include "sched/sched_debug.h"
#include "sched/sched_internal.h"

static _Thread_local int64_t fail_after = -1;
static _Thread_local size_t largest; /* test-only: see sched_debug.h */

void rkv_sched_debug_fail_alloc_after(int64_t k)
{
    fail_after = k < 0 ? -1 : k;
}

int64_t rkv_sched_debug_alloc_countdown(void)
{
    return fail_after;
}

size_t rkv_sched_debug_largest_alloc(void)
{
    return largest;
}

void rkv_sched_debug_reset_largest_alloc(void)
{
    largest = 0;
}

/* 1 when this allocation (of n bytes) must fail. */
static int injected(size_t n)
{
    if (n > largest)
        largest = n;
    if (fail_after < 0)
        return 0;
    return fail_after-- == 0;
}

void *rkv_sched_mem_malloc(size_t n)
{
    return injected(n) ? NULL : malloc(n);
}

void *rkv_sched_mem_calloc(size_t n, size_t size)
{
    return injected(n * size) ? NULL : calloc(n, size);
}

void *rkv_sched_mem_realloc(void *p, size_t n)
{
    return injected(n) ? NULL : realloc(p, n);
}

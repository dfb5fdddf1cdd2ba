/*
 * sched/sched_debug.h -- test-only out-of-memory injection for the
 * scheduler's own allocations (requests, queues, maps, scratch).
 *
 * Every malloc / calloc / realloc in sched/ (except rkv_sched_check's
 * scratch) goes through rkv_sched_mem_* (sched/sched_mem.c), which fail on
 * request. Every public scheduler call that allocates must then return
 * RKV_ERR_NOMEM with the scheduler consistent (rkv_sched_check passes) and
 * able to go on: a retried call succeeds.
 *
 * The setting is per thread: it counts and fails only the allocations
 * made on the thread that armed it, so schedulers on other threads are
 * never affected.
 */
#ifndef RKV_SCHED_DEBUG_H
#define RKV_SCHED_DEBUG_H

#include <stddef.h>
#include <stdint.h>

/* The (k+1)-th scheduler allocation from now fails (k = 0: the next one);
 * the injection then disarms. k < 0 disarms. */
void rkv_sched_debug_fail_alloc_after(int64_t k);

/* Allocations left before the armed failure (-1 when unarmed). Arming with
 * a large k and reading this later counts a scenario's allocations. */
int64_t rkv_sched_debug_alloc_countdown(void);

/* The largest single allocation (bytes) the scheduler asked for on this
 * thread since the last reset (a test's check that no array is sized by a
 * configured limit). */
size_t rkv_sched_debug_largest_alloc(void);
void rkv_sched_debug_reset_largest_alloc(void);

#endif

/*
 * fleet/cpu_sample.h -- an estimate of the CPU time a kind of call costs
 * in all, from a sample of the calls timed. The router daemon times its
 * route calls with the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID), and
 * that clock is a system call, not the vDSO: two reads around every query
 * were two of the daemon's ~5-9 system calls per query. Timing 1 call in
 * `every` (chosen at random, so a workload whose costs repeat with some
 * period cannot line up with the choice) and scaling by calls / timed
 * calls keeps the total's estimate within a few percent at a fraction of
 * the reads.
 *
 * Invariants: calls counts every call picked or not; timed <= calls; the
 * estimate is 0 until a call was timed, exact with every == 1.
 * Pure C, no clock (the caller times), no prints, no static state.
 */
#ifndef RKV_FLEET_CPU_SAMPLE_H
#define RKV_FLEET_CPU_SAMPLE_H

#include <stdint.h>

typedef struct rkv_cpu_sample {
    uint32_t every;    /* on average 1 call timed in `every` (>= 1)  */
    uint64_t rng;      /* xorshift64 state, never 0                   */
    uint64_t calls;    /* calls counted                               */
    uint64_t timed;    /* of them timed                               */
    uint64_t timed_ns; /* the timed calls' CPU time                   */
} rkv_cpu_sample;

/* every 0 is taken as 1 (every call timed); seed picks the sequence. */
void rkv_cpu_sample_init(rkv_cpu_sample *s, uint32_t every, uint64_t seed);
/* Counts a call; 1 when the caller is to time it and pass the time to
 * rkv_cpu_sample_add. */
int rkv_cpu_sample_pick(rkv_cpu_sample *s);
/* A picked call took ns. */
void rkv_cpu_sample_add(rkv_cpu_sample *s, uint64_t ns);
/* The calls' total time estimated: timed_ns * calls / timed. */
double rkv_cpu_sample_total_ns(const rkv_cpu_sample *s);

#endif

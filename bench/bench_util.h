/*
 * bench/bench_util.h -- what the trace benchmarks (tree_bench, router_bench)
 * share: a monotonic clock, strict number parsing for their flags, and
 * finding the repository's trace file. Benchmarks may read clocks; the
 * library never does.
 */
#ifndef RKV_BENCH_UTIL_H
#define RKV_BENCH_UTIL_H

#include <stdint.h>

#define RKV_BENCH_TRACE_REL "bench/traces/mooncake_conversation_trace.jsonl"

/* CLOCK_MONOTONIC in nanoseconds. */
double rkv_bench_now_ns(void);

/* A plain decimal that fits in 64 bits (no sign, space or trailing text):
 * 1 and *out set, else 0. */
int rkv_bench_parse_u64(const char *s, uint64_t *out);

/* arg if given, else $RKV_TRACE, else RKV_BENCH_TRACE_REL found by walking
 * up from the working directory; NULL if none (the caller then uses the
 * embedded trace). The result is malloc'd. */
char *rkv_bench_find_trace(const char *arg);

#endif

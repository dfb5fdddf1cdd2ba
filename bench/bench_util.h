/*
 * bench/bench_util.h -- what the benchmarks share: a monotonic clock, strict
 * number parsing for their flags, finding the repository's trace file (the
 * trace benchmarks), and the KV pool config the attention benchmarks start
 * from. Benchmarks may read clocks; the library never does.
 */
#ifndef RKV_BENCH_UTIL_H
#define RKV_BENCH_UTIL_H

#include <stdint.h>

#include "radixkv.h"

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

/* rkv_pool_config_init's config with nblocks pages of page tokens, layers x
 * kv_heads x head_dim of dtype dt (host; the caller sets anything else). */
rkv_pool_config rkv_bench_pool_config(uint32_t nblocks, uint32_t page, uint32_t layers,
                                      uint32_t kv_heads, uint32_t head_dim, rkv_dtype dt);

#endif

/*
 * fleet/stand_in.h -- what radixkv-fleet-instance "serves" and how, shared
 * with the tests that check the router against a copy of an instance's
 * tree: the prompts of one slice of a trace, and caching one prompt's full
 * pages the way a server embedding radixkv does around prefill (match,
 * lock, allocate with eviction, insert, unlock). No NATS here.
 */
#ifndef RKV_FLEET_STAND_IN_H
#define RKV_FLEET_STAND_IN_H

#include <stdint.h>

#include "radixkv.h"

typedef struct rkv_prompt_set {
    uint32_t n;
    uint32_t *len;  /* tokens of prompt i                   */
    int32_t **tok;  /* owned                                 */
    uint64_t *line; /* trace line of prompt i (1-based)      */
} rkv_prompt_set;

/* The prompts of slice k of n_slices of the trace at path ("@embedded":
 * the trace linked into the simulator): of the first `limit` requests
 * (0: all), those whose index i has i % n_slices == k, in trace order,
 * each expanded to tokens (sim/trace.h) and cut to max_tokens (0: whole).
 * k == n_slices selects every request. */
rkv_status rkv_stand_in_load(const char *path, uint32_t k, uint32_t n_slices,
                             uint64_t limit, uint32_t max_tokens,
                             rkv_prompt_set *out);
void rkv_prompt_set_free(rkv_prompt_set *s); /* zeroes it */

/* Caches the full pages of tok[0..n) in namespace ns. */
rkv_status rkv_stand_in_serve(rkv_pool *pool, rkv_tree *tree, rkv_namespace ns,
                              const int32_t *tok, uint32_t n);

#endif

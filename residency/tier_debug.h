/*
 * residency/tier_debug.h -- test-only hooks into the tiers' asynchronous
 * copies on a CUDA pool (residency/tier_copy.c): failure injection, a
 * stalled copy engine, the in-flight count. Not part of the public API.
 */
#ifndef RKV_RESIDENCY_TIER_DEBUG_H
#define RKV_RESIDENCY_TIER_DEBUG_H

#include <stdint.h>

#include "radixkv.h"

/* The tier's asynchronous copies on a CUDA pool (residency/tier_copy.c). The
 * k-th next point (k = 1: the next; 0 disarms) of a kind fails with
 * RKV_ERR_CUDA, once: RKV_DEBUG_COPY_ISSUE, a block copy queued (each
 * block of a batched copy call is one point: the blocks before it are
 * queued, then the whole call fails) or an event recorded;
 * RKV_DEBUG_COPY_QUERY, an event query or sync. No tier attached: no-op
 * (attaching tiers disarms). */
enum { RKV_DEBUG_COPY_ISSUE = 1, RKV_DEBUG_COPY_QUERY = 2 };
void rkv_tree_debug_copy_fail(rkv_tree *t, int which, uint32_t k);
/* on: event queries are not made and batches stay in flight (a slow
 * copy engine), so a test fills the in-flight table. */
void rkv_tree_debug_copy_stall(rkv_tree *t, int on);
/* Batches in flight now; whether the tier's copies are asynchronous. */
uint32_t rkv_tree_debug_copy_inflight(const rkv_tree *t);
int rkv_tree_debug_copy_async(const rkv_tree *t);
/* Asynchronous copy calls the tier made (one per direction per batch) and
 * the blocks they carried, since attach. */
void rkv_tree_debug_copy_calls(const rkv_tree *t, uint64_t *calls, uint64_t *pages);

#endif

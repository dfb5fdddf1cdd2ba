/*
 * radix/tree_debug.h -- test-only hooks into the tree's node-memory allocator.
 *
 * Every allocation the tree makes (the slot table and its growth, each node's
 * token/block array, the child index and its growth, the tree-owned block
 * bitmap, the lease table, the retention tables: per-node meta, pins and
 * their deadline heap) goes through one function (radix/node_mem.c) that honours these
 * hooks, so an out-of-memory test can fail each of them in turn. Every public
 * tree call that allocates returns RKV_ERR_NOMEM with the tree exactly as
 * before when one fails (memory is prepared before anything is committed).
 * The rkv_tree struct itself is calloc'ed before the allocator exists and is
 * not counted.
 */
#ifndef RKV_RADIX_TREE_DEBUG_H
#define RKV_RADIX_TREE_DEBUG_H

#include <stdint.h>

#include "radixkv.h"

/* The (k+1)-th node-memory allocation from now fails (k = 0: the next one);
 * the injection then disarms (later allocations succeed). k < 0 disables. */
void rkv_tree_debug_fail_alloc_after(rkv_tree *t, int64_t k);

/* Arms the allocator of the next tree created on pool: its (k+1)-th
 * allocation fails (inside rkv_tree_create too); k < 0 disarms. */
void rkv_tree_debug_fail_create_after(rkv_pool *pool, int64_t k);

/* Node-memory allocations attempted so far by this tree (failed ones
 * included). */
uint64_t rkv_tree_debug_alloc_calls(const rkv_tree *t);

/* Allocations of this tree not yet freed. */
int64_t rkv_tree_debug_live_allocs(const rkv_tree *t);

/* Process-wide count of live tree allocations, across all trees (0 after
 * every tree is destroyed: the leak check). */
int64_t rkv_debug_live_tree_allocs_global(void);

/* The tier's asynchronous copies on a CUDA pool (residency/tier_copy.c). The
 * k-th next call (k = 1: the next; 0 disarms) of a kind fails with
 * RKV_ERR_CUDA, once: RKV_DEBUG_COPY_ISSUE, a block copy queued or an
 * event recorded; RKV_DEBUG_COPY_QUERY, an event query or sync. No tier
 * attached: no-op (attaching tiers disarms). */
enum { RKV_DEBUG_COPY_ISSUE = 1, RKV_DEBUG_COPY_QUERY = 2 };
void rkv_tree_debug_copy_fail(rkv_tree *t, int which, uint32_t k);
/* on: event queries are not made and batches stay in flight (a slow
 * copy engine), so a test fills the in-flight table. */
void rkv_tree_debug_copy_stall(rkv_tree *t, int on);
/* Batches in flight now; whether the tier's copies are asynchronous. */
uint32_t rkv_tree_debug_copy_inflight(const rkv_tree *t);
int rkv_tree_debug_copy_async(const rkv_tree *t);

/* RKV_EVICT_LEARNED: the guard keeps counting but never falls back to
 * LRU (tests that check the learned order itself). */
void rkv_tree_debug_guard_off(rkv_tree *t);

#endif

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

#include "radix/node_mem.h"
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

/* The tree's wide token paths (radix/tree_tokens.c: the 3-byte layout's
 * compare and pack, insert's scan for bad ids) on or off, so a test runs
 * both; on is honoured only where the CPU has them. Returns whether they
 * are on now. */
int rkv_tree_debug_tok_simd(rkv_tree *t, int on);

/* The tree's node memory as its allocator sees it (radix/node_mem.h; for
 * benches): 1 and *r filled with a jemalloc arena, else 0. */
int rkv_tree_debug_mem_report(const rkv_tree *t, rkv_node_mem_report *r);

/* The layers' own test hooks: residency/tier_debug.h (the tiers'
 * asynchronous copies), retain/evict_guard.h (the learned order's guard). */

#endif

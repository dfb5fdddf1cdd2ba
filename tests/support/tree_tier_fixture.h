/*
 * tests/support/tree_tier_fixture.h -- a radix tree over a KV pool with
 * lower tiers attached (a host store, a disk store alone, or a host over a
 * disk), as the tree tier tests build it (tests/test_tree_tiers.c,
 * tests/test_tree_lower_pins.c, tests/test_tree_store_log.c).
 *
 * Owns: the pool (one layer, one KV head, real KV bytes), the tree, the
 * stores and the disk store's fresh temporary directory. tt_open fills a
 * tt_fixture the caller owns (on its stack or inside its own state); every
 * handle in it belongs to the fixture until tt_close, which destroys them
 * in a valid order (tree, stores, pool) and removes the directory. Tests
 * use the handles freely in between (re-attach, fail_after, ...) but never
 * destroy them. tt_spec's config pointers are only read during tt_open.
 * Every failure is a Criterion assertion (with rkv_last_error()).
 */
#ifndef RKV_TESTS_TREE_TIER_FIXTURE_H
#define RKV_TESTS_TREE_TIER_FIXTURE_H

#include <stdint.h>

#include "radixkv.h"

typedef struct tt_spec {
    uint32_t pool_blocks;         /* the pool's blocks, >= 1                 */
    uint32_t page_size;           /* tokens per page, >= 1                   */
    uint32_t head_dim;            /* 0: 2                                    */
    rkv_dtype dtype;              /* 0: F16 (the pool's default)             */
    const rkv_tree_config *tree;  /* NULL: rkv_tree_config_init's            */
    uint32_t host_blocks;         /* 0: no host store (unpinned memory)      */
    uint32_t disk_blocks;         /* 0: no disk store                        */
    int disk_buffered;            /* 1: the disk without O_DIRECT, io_uring  */
    const rkv_tier_config *tier;  /* NULL: rkv_tier_config_init's; its host
                                     and disk are replaced by the fixture's */
} tt_spec;

typedef struct tt_fixture {
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_store *host;   /* NULL without host_blocks                          */
    rkv_store *disk;   /* NULL without disk_blocks                          */
    uint32_t page_size;
    char dir[64];      /* the disk store's directory, or ""                 */
} tt_fixture;

/* Pool, tree, stores, then rkv_tree_attach_tiers; each step must succeed. */
void tt_open(tt_fixture *f, const tt_spec *spec);

/* The check after every operation: rkv_tree_check, rkv_pool_check and
 * rkv_store_check of each store. */
void tt_check(const tt_fixture *f);

/* rkv_tree_check, destroys the tree, asserts every store is then empty,
 * destroys the stores, removes the directory, destroys the pool; *f is
 * zeroed. */
void tt_close(tt_fixture *f);

/* One completed transfer polled from the tree (the poll succeeds and
 * returns exactly one). */
rkv_transfer_done tt_poll_one(tt_fixture *f);

/* Caches n pages of toks in namespace ns on the device: allocates n blocks
 * (into b when not NULL; at most 64 pages), inserts them and drops the
 * caller's references. The first failure (of alloc or insert) is
 * returned; the blocks' references are dropped either way. */
rkv_status tt_try_cache(tt_fixture *f, uint64_t ns, const int32_t *toks,
                        uint32_t n, rkv_block_id *b);

/* Corrupts the host's copy of the page (hash, ns) behind the tree's back:
 * finds its slot (a verified read into a scratch block) and rewrites the
 * record under hash ^ 1, so the next load of it fails verification. */
void tt_corrupt_host_copy(tt_fixture *f, uint64_t hash, uint64_t ns);

#endif

/*
 * tests/support/host_tier.h -- a radix tree over a pool the test already
 * made (an external pool above all: tests/test_pool_external.c,
 * test_pool_external_cuda.c) with a host store attached as its lower tier.
 * tests/support/tree_tier_fixture.h is the fixture that makes its own pool.
 *
 * The caller owns what it gets: rkv_tree_destroy(*tree) before
 * rkv_store_destroy(*host). Every failure is a Criterion assertion.
 */
#ifndef RKV_TESTS_HOST_TIER_H
#define RKV_TESTS_HOST_TIER_H

#include <stdint.h>

#include "radixkv.h"

/* A tree over pool, and a host store of host_blocks blocks of the pool's
 * block size (rkv_store_config_init's other defaults) attached below it. */
void rkv_test_host_tier(rkv_pool *pool, uint32_t host_blocks, rkv_tree **tree,
                        rkv_store **host);

#endif

/*
 * tests/support/host_tier.c -- a tree with a host tier over the caller's
 * pool (tests/support/host_tier.h).
 */
#include "tests/support/host_tier.h"

#include <criterion/criterion.h>

#include "tests/support/check.h"
#include "tests/support/handles.h"

void rkv_test_host_tier(rkv_pool *pool, uint32_t host_blocks, rkv_tree **tree,
                        rkv_store **host)
{
    OK(rkv_tree_create(pool, NULL, tree));
    rkv_store_config sc = tu_store_config(RKV_MEDIUM_HOST, host_blocks,
                                          rkv_pool_bytes_per_block(pool), NULL);
    OK(rkv_store_create(&sc, host));
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.host = *host;
    OK(rkv_tree_attach_tiers(*tree, &tc));
}

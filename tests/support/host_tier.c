/*
 * tests/support/host_tier.c -- a tree with a host tier over the caller's
 * pool (tests/support/host_tier.h).
 */
#include "tests/support/host_tier.h"

#include <criterion/criterion.h>

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

void rkv_test_host_tier(rkv_pool *pool, uint32_t host_blocks, rkv_tree **tree,
                        rkv_store **host)
{
    OK(rkv_tree_create(pool, NULL, tree));
    rkv_store_config sc;
    rkv_store_config_init(&sc, RKV_MEDIUM_HOST);
    sc.capacity_blocks = host_blocks;
    sc.block_bytes = rkv_pool_bytes_per_block(pool);
    OK(rkv_store_create(&sc, host));
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.host = *host;
    OK(rkv_tree_attach_tiers(*tree, &tc));
}

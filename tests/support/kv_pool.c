/*
 * tests/support/kv_pool.c -- the disk-store tests' small KV pool shape
 * (tests/support/kv_pool.h).
 */
#include "tests/support/kv_pool.h"

void rkv_test_kv_pool_config(rkv_pool_config *pc, uint32_t num_blocks,
                             uint32_t num_layers)
{
    rkv_pool_config_init(pc);
    pc->num_blocks = num_blocks;
    pc->page_size = 4;
    pc->num_layers = num_layers;
    pc->num_kv_heads = 2;
    pc->head_dim = 8;
    pc->dtype = RKV_DTYPE_F32;
}

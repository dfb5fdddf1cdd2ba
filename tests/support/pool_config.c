/*
 * tests/support/pool_config.c -- see pool_config.h.
 */
#include "tests/support/pool_config.h"

rkv_pool_config tu_kv_config(uint32_t nblocks, uint32_t page, uint32_t layers,
                             uint32_t kv_heads, uint32_t head_dim,
                             rkv_device device)
{
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = nblocks;
    if (page != 0)
        cfg.page_size = page;
    cfg.num_layers = layers;
    cfg.num_kv_heads = kv_heads;
    cfg.head_dim = head_dim;
    cfg.device = device;
    return cfg;
}

rkv_pool_config tu_mla_config(uint32_t nblocks, uint32_t page, uint32_t layers,
                              uint32_t kv_lora_rank, uint32_t qk_rope_dim, rkv_dtype dt,
                              rkv_device device)
{
    rkv_pool_config cfg = tu_kv_config(nblocks, page, layers, 0, 0, device);
    cfg.layout = RKV_LAYOUT_MLA;
    cfg.kv_lora_rank = kv_lora_rank;
    cfg.qk_rope_dim = qk_rope_dim;
    cfg.dtype = dt;
    return cfg;
}

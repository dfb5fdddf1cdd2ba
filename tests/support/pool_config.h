/*
 * tests/support/pool_config.h -- rkv_pool_config builders for KV pools
 * (plain, MLA), shared by the tests and the attention
 * benchmarks; no Criterion here, so a benchmark links it alone. Builders
 * only fill in: everything not named is rkv_pool_config_init's default.
 */
#ifndef RKV_TESTS_POOL_CONFIG_H
#define RKV_TESTS_POOL_CONFIG_H

#include <stdint.h>

#include "radixkv.h"

/* rkv_pool_config_init's config for KV bytes: nblocks pages of page
 * tokens (0: the default page), layers x kv_heads x head_dim on device. */
rkv_pool_config tu_kv_config(uint32_t nblocks, uint32_t page, uint32_t layers,
                             uint32_t kv_heads, uint32_t head_dim,
                             rkv_device device);

/* rkv_pool_config_init's config for the MLA latent layout: nblocks pages of
 * page tokens (0: the default page), layers of rows kv_lora_rank +
 * qk_rope_dim wide, in dt, on device. */
rkv_pool_config tu_mla_config(uint32_t nblocks, uint32_t page, uint32_t layers,
                              uint32_t kv_lora_rank, uint32_t qk_rope_dim, rkv_dtype dt,
                              rkv_device device);

#endif

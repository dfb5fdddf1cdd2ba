/*
 * tests/support/kv_pool.h -- the small host KV pool the disk-store tests
 * (tests/test_store.c, test_store_file.c, test_store_mac.c) write records
 * from: page 4, 2 KV heads of dimension 8, f32, so a block holds real,
 * checkable bytes while staying a few KiB.
 */
#ifndef RKV_TEST_KV_POOL_H
#define RKV_TEST_KV_POOL_H

#include <stdint.h>

#include "radixkv.h"

/* pc: rkv_pool_config_init, then that shape with num_blocks blocks of
 * num_layers layers (host memory; a caller may set the device after). */
void rkv_test_kv_pool_config(rkv_pool_config *pc, uint32_t num_blocks,
                             uint32_t num_layers);

#endif

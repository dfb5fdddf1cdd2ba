/*
 * tests/support/handles.h -- the configs and handles most tests build the
 * same way: pools (metadata only, with KV bytes, one-layer CUDA), trees,
 * retentions (a pin, a priority range), store configs and MAC keys, a
 * request description; the pool config builders are pool_config.h's
 * (included). Constructors that cannot fail in a correct library
 * assert success (with rkv_last_error()); the CUDA pool returns its
 * status, since "no device" is an answer tests check. Config builders
 * only fill in: everything not named is rkv_*_init's default.
 */
#ifndef RKV_TESTS_HANDLES_H
#define RKV_TESTS_HANDLES_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"
#include "tests/support/pool_config.h"

/* A pool of nblocks pages of page tokens without KV bytes. */
rkv_pool *tu_pool(uint32_t nblocks, uint32_t page);

/* tu_kv_config's host config with quantized dtype dt: scales per group
 * elements, activations (what is written and read) in act. */
rkv_pool_config tu_quant_config(uint32_t nblocks, uint32_t page, uint32_t layers,
                                uint32_t kv_heads, uint32_t head_dim, rkv_dtype dt,
                                uint32_t group, rkv_dtype act);

/* A pool of cfg in *pool and its attention context (both must create). */
rkv_attn *tu_attn_pool(const rkv_pool_config *cfg, rkv_pool **pool);

/* rkv_tree_config_init's config with this evict policy and pin cap. */
rkv_tree_config tu_tree_config(int policy, uint32_t max_pinned_pct);

/* A tree on pool with tc (NULL: the defaults). */
rkv_tree *tu_tree(rkv_pool *pool, const rkv_tree_config *tc);
/* A tree over pool that records KV events in a ring of `ring` entries,
 * with room for event_tokens token ids (0: events carry no token ids). */
rkv_tree *tu_event_tree(rkv_pool *pool, uint32_t ring, uint32_t event_tokens);

/* A tree on pool with rkv_tree_config_init's config but this policy. */
rkv_tree *tu_policy_tree(rkv_pool *pool, int policy);

/* A CUDA pool of nblocks pages: one layer, one KV head of head_dim. */
rkv_status tu_cuda_pool(uint32_t nblocks, uint32_t head_dim, rkv_pool **out);

/* Skips the calling test with skip_msg where a pool of cfg (a CUDA one)
 * reports RKV_ERR_NO_DEVICE; any other failure to create it fails the test. */
void tu_need_device_pool(const rkv_pool_config *cfg, const char *skip_msg);

/* A retention that pins the first pin_tokens tokens for ttl_ms for this
 * owner (rkv_retention_init's otherwise: no priority range). */
rkv_retention tu_pin(size_t pin_tokens, uint64_t ttl_ms, uint64_t owner);

/* A retention that gives tokens [begin, end) this priority (no pin). */
rkv_retention tu_prio(int priority, size_t begin, size_t end);

/* rkv_store_config_init's config of medium with this capacity, block size
 * and path (NULL: none). */
rkv_store_config tu_store_config(int medium, uint64_t capacity_blocks,
                                 size_t block_bytes, const char *path);

/* A store MAC key: key[i] = first + i. */
void tu_mac_key(unsigned char key[RKV_STORE_MAC_KEY_BYTES],
                unsigned char first);

/* Request id with this prompt and max_new_tokens; the rest zero. */
rkv_request_desc tu_request(uint64_t id, const int32_t *prompt, uint32_t len,
                            uint32_t max_new);

#endif

/*
 * tests/support/handles.h -- the configs and handles most tests build the
 * same way: a metadata-only pool, a tree config with a policy and pin cap,
 * a one-layer CUDA pool, a request description. Constructors that cannot
 * fail in a correct library assert success (with rkv_last_error()); the
 * CUDA pool returns its status, since "no device" is an answer tests
 * check. Everything not named is rkv_*_config_init's default.
 */
#ifndef RKV_TESTS_HANDLES_H
#define RKV_TESTS_HANDLES_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

/* A pool of nblocks pages of page tokens without KV bytes. */
rkv_pool *tu_pool(uint32_t nblocks, uint32_t page);

/* rkv_tree_config_init's config with this evict policy and pin cap. */
rkv_tree_config tu_tree_config(int policy, uint32_t max_pinned_pct);

/* A tree on pool with tc (NULL: the defaults). */
rkv_tree *tu_tree(rkv_pool *pool, const rkv_tree_config *tc);

/* A tree on pool with rkv_tree_config_init's config but this policy. */
rkv_tree *tu_policy_tree(rkv_pool *pool, int policy);

/* A CUDA pool of nblocks pages: one layer, one KV head of head_dim. */
rkv_status tu_cuda_pool(uint32_t nblocks, uint32_t head_dim, rkv_pool **out);

/* A retention that pins the first pin_tokens tokens for ttl_ms for this
 * owner (rkv_retention_init's otherwise: no priority range). */
rkv_retention tu_pin(size_t pin_tokens, uint64_t ttl_ms, uint64_t owner);

/* Request id with this prompt and max_new_tokens; the rest zero. */
rkv_request_desc tu_request(uint64_t id, const int32_t *prompt, uint32_t len,
                            uint32_t max_new);

#endif

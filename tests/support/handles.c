/*
 * tests/support/handles.c -- see handles.h.
 */
#include "tests/support/handles.h"

#include "tests/support/check.h"

rkv_pool *tu_pool(uint32_t nblocks, uint32_t page)
{
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = nblocks;
    cfg.page_size = page;
    rkv_pool *p = NULL;
    OK(rkv_pool_create(&cfg, &p));
    return p;
}

rkv_pool_config tu_quant_config(uint32_t nblocks, uint32_t page, uint32_t layers,
                                uint32_t kv_heads, uint32_t head_dim, rkv_dtype dt,
                                uint32_t group, rkv_dtype act)
{
    rkv_pool_config cfg =
        tu_kv_config(nblocks, page, layers, kv_heads, head_dim, RKV_DEVICE_HOST);
    cfg.dtype = dt;
    cfg.quant_group = group;
    cfg.act_dtype = act;
    return cfg;
}

rkv_attn *tu_attn_pool(const rkv_pool_config *cfg, rkv_pool **pool)
{
    OK(rkv_pool_create(cfg, pool));
    rkv_attn *attn = NULL;
    OK(rkv_attn_create(*pool, &attn));
    return attn;
}

rkv_tree_config tu_tree_config(int policy, uint32_t max_pinned_pct)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.evict_policy = policy;
    tc.max_pinned_pct = max_pinned_pct;
    return tc;
}

rkv_tree *tu_tree(rkv_pool *pool, const rkv_tree_config *tc)
{
    rkv_tree *t = NULL;
    OK(rkv_tree_create(pool, tc, &t));
    return t;
}

rkv_tree *tu_event_tree(rkv_pool *pool, uint32_t ring, uint32_t event_tokens)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.event_ring = ring;
    tc.event_tokens = event_tokens;
    return tu_tree(pool, &tc);
}

rkv_tree *tu_policy_tree(rkv_pool *pool, int policy)
{
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.evict_policy = policy;
    return tu_tree(pool, &tc);
}

rkv_status tu_cuda_pool(uint32_t nblocks, uint32_t head_dim, rkv_pool **out)
{
    rkv_pool_config cfg = tu_kv_config(nblocks, 0, 1, 1, head_dim,
                                       RKV_DEVICE_CUDA);
    return rkv_pool_create(&cfg, out);
}

void tu_need_device_pool(const rkv_pool_config *cfg, const char *skip_msg)
{
    rkv_pool *p = NULL;
    rkv_status s = rkv_pool_create(cfg, &p);
    if (s == RKV_ERR_NO_DEVICE)
        cr_skip_test("%s", skip_msg);
    cr_assert_eq(s, RKV_OK, "CUDA pool: %s", rkv_last_error());
    rkv_pool_destroy(p);
}

rkv_retention tu_pin(size_t pin_tokens, uint64_t ttl_ms, uint64_t owner)
{
    rkv_retention r;
    rkv_retention_init(&r);
    r.pin_tokens = pin_tokens;
    r.ttl_ms = ttl_ms;
    r.owner = owner;
    return r;
}

rkv_retention tu_prio(int priority, size_t begin, size_t end)
{
    rkv_retention r = tu_pin(0, 0, 0); /* no pin */
    r.priority = priority;
    r.prio_begin = begin;
    r.prio_end = end;
    return r;
}

rkv_store_config tu_store_config(int medium, uint64_t capacity_blocks,
                                 size_t block_bytes, const char *path)
{
    rkv_store_config c;
    rkv_store_config_init(&c, medium);
    c.capacity_blocks = capacity_blocks;
    c.block_bytes = block_bytes;
    c.path = path;
    return c;
}

void tu_mac_key(unsigned char key[RKV_STORE_MAC_KEY_BYTES],
                unsigned char first)
{
    for (unsigned i = 0; i < RKV_STORE_MAC_KEY_BYTES; i++)
        key[i] = (unsigned char)(first + i);
}

rkv_request_desc tu_request(uint64_t id, const int32_t *prompt, uint32_t len,
                            uint32_t max_new)
{
    return (rkv_request_desc){.id = id, .prompt = prompt, .prompt_len = len,
                              .max_new_tokens = max_new};
}

/*
 * radix/tree_tier_stub.c -- TEMPORARY placeholders for the tree's tier API
 * while it is being written (issue 12): attaching refuses with
 * RKV_ERR_UNSUPPORTED; the rest behaves as a tree without tiers. Deleted by
 * the commit that implements radix/tree_tier*.c.
 */
#include <string.h>

#include "common/status.h"
#include "radixkv.h"

void rkv_tier_config_init(rkv_tier_config *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->write_policy = RKV_WRITE_BACK;
    cfg->selective_hits = 2;
    cfg->store_queue = 1024;
}

rkv_status rkv_tree_attach_tiers(rkv_tree *tree, const rkv_tier_config *cfg)
{
    (void)tree;
    (void)cfg;
    return rkv_set_error(RKV_ERR_UNSUPPORTED, "tiers: not built yet");
}

rkv_status rkv_tree_match_tiers(rkv_tree *tree, rkv_namespace ns,
                                const int32_t *tokens, size_t n,
                                rkv_block_id *blocks_out, unsigned flags,
                                rkv_match *out, rkv_tier_match *tiers_out)
{
    if (tiers_out != NULL)
        memset(tiers_out, 0, sizeof *tiers_out);
    return rkv_tree_match(tree, ns, tokens, n, blocks_out, flags, out);
}

rkv_status rkv_tree_load(rkv_tree *tree, rkv_namespace ns,
                         const int32_t *tokens, size_t n, uint32_t max_pages,
                         rkv_load *out)
{
    (void)tree; (void)ns; (void)tokens; (void)n; (void)max_pages;
    if (out != NULL)
        memset(out, 0, sizeof *out);
    return RKV_OK;
}

rkv_status rkv_tree_tier_poll(rkv_tree *tree, rkv_transfer_done *out,
                              uint32_t max, uint32_t *n_out)
{
    (void)tree; (void)out; (void)max;
    if (n_out != NULL)
        *n_out = 0;
    return RKV_OK;
}

rkv_status rkv_tree_tier_stats(const rkv_tree *tree, rkv_tier_stats *out)
{
    (void)tree;
    if (out != NULL)
        memset(out, 0, sizeof *out);
    return RKV_OK;
}

rkv_status rkv_tree_store_prefix(rkv_tree *tree, rkv_namespace ns,
                                 const int32_t *tokens, size_t n,
                                 uint64_t *ticket, uint32_t *pages)
{
    (void)tree; (void)ns; (void)tokens; (void)n;
    if (ticket != NULL)
        *ticket = 0;
    if (pages != NULL)
        *pages = 0;
    return rkv_set_error(RKV_ERR_STATE, "rkv_tree_store_prefix: no host tier");
}

/*
 * tier/store_stub.c -- TEMPORARY placeholders for the rkv_store API while
 * tier/ is being written (issue 12): every call refuses with
 * RKV_ERR_UNSUPPORTED. Deleted by the commit that implements the stores.
 */
#include <string.h>

#include "common/status.h"
#include "tier/store.h"

void rkv_store_config_init(rkv_store_config *cfg, int medium)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->medium = medium;
    cfg->pinned = 1;
    cfg->direct_io = 1;
    cfg->io_uring = 1;
}

rkv_status rkv_store_create(const rkv_store_config *cfg, rkv_store **out)
{
    (void)cfg;
    if (out != NULL)
        *out = NULL;
    return rkv_set_error(RKV_ERR_UNSUPPORTED, "rkv_store_create: not built yet");
}

void rkv_store_destroy(rkv_store *store) { (void)store; }
uint64_t rkv_store_capacity_blocks(const rkv_store *store) { (void)store; return 0; }
uint64_t rkv_store_used_blocks(const rkv_store *store) { (void)store; return 0; }
rkv_status rkv_store_check(const rkv_store *store)
{
    (void)store;
    return rkv_set_error(RKV_ERR_UNSUPPORTED, "rkv_store_check: not built yet");
}

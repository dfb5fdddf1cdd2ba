/*
 * tests/support/tree_tier_fixture.c -- see tree_tier_fixture.h.
 */
#include "tests/support/tree_tier_fixture.h"
#include "tests/support/handles.h"
#include "tier/store.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TT_OK(expr) \
    cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

#define TT_MAX_PAGES 64u

static rkv_store *tt_store(tt_fixture *f, int medium, uint32_t cap,
                           int buffered)
{
    rkv_store_config sc =
        tu_store_config(medium, cap, rkv_pool_bytes_per_block(f->pool), NULL);
    if (medium == RKV_MEDIUM_HOST) {
        sc.pinned = 0;
    } else {
        snprintf(f->dir, sizeof f->dir, "/tmp/rkv-tt-XXXXXX");
        cr_assert_not_null(mkdtemp(f->dir));
        sc.path = f->dir;
        if (buffered) {
            sc.direct_io = 0;
            sc.io_uring = 0;
        }
    }
    rkv_store *out = NULL;
    TT_OK(rkv_store_create(&sc, &out));
    return out;
}

void tt_open(tt_fixture *f, const tt_spec *spec)
{
    memset(f, 0, sizeof *f);
    f->page_size = spec->page_size;
    cr_assert_geq(spec->page_size, 1);
    uint32_t head_dim = spec->head_dim != 0 ? spec->head_dim : 2;
    rkv_pool_config pc = tu_kv_config(spec->pool_blocks, spec->page_size, 1, 1,
                                      head_dim, RKV_DEVICE_HOST);
    pc.dtype = spec->dtype;
    TT_OK(rkv_pool_create(&pc, &f->pool));
    TT_OK(rkv_tree_create(f->pool, spec->tree, &f->tree));
    if (spec->host_blocks > 0)
        f->host = tt_store(f, RKV_MEDIUM_HOST, spec->host_blocks, 0);
    if (spec->disk_blocks > 0)
        f->disk = tt_store(f, RKV_MEDIUM_DISK, spec->disk_blocks,
                           spec->disk_buffered);
    rkv_tier_config cfg;
    if (spec->tier != NULL)
        cfg = *spec->tier;
    else
        rkv_tier_config_init(&cfg);
    cfg.host = f->host;
    cfg.disk = f->disk;
    TT_OK(rkv_tree_attach_tiers(f->tree, &cfg));
}

void tt_check(const tt_fixture *f)
{
    TT_OK(rkv_tree_check(f->tree));
    TT_OK(rkv_pool_check(f->pool));
    if (f->host != NULL)
        TT_OK(rkv_store_check(f->host));
    if (f->disk != NULL)
        TT_OK(rkv_store_check(f->disk));
}

void tt_close(tt_fixture *f)
{
    TT_OK(rkv_tree_check(f->tree));
    rkv_tree_destroy(f->tree);
    if (f->host != NULL)
        cr_assert_eq(rkv_store_used_blocks(f->host), 0);
    if (f->disk != NULL)
        cr_assert_eq(rkv_store_used_blocks(f->disk), 0);
    rkv_store_destroy(f->host);
    rkv_store_destroy(f->disk);
    if (f->dir[0] != '\0') {
        char path[96];
        snprintf(path, sizeof path, "%s/radixkv-tier.blocks", f->dir);
        (void)unlink(path);
        (void)rmdir(f->dir);
    }
    rkv_pool_destroy(f->pool);
    memset(f, 0, sizeof *f);
}

void tt_corrupt_host_copy(tt_fixture *f, uint64_t hash, uint64_t ns)
{
    rkv_block_id scratch;
    TT_OK(rkv_pool_alloc(f->pool, &scratch));
    uint64_t cap = rkv_store_capacity_blocks(f->host);
    uint32_t slot = UINT32_MAX;
    for (uint32_t k = 0; k < cap && slot == UINT32_MAX; k++)
        if (rkv_store_read_to_pool(f->host, k, f->pool, scratch, hash, ns) ==
            RKV_OK)
            slot = k;
    cr_assert_neq(slot, UINT32_MAX);
    TT_OK(rkv_store_write_from_pool(f->host, slot, f->pool, scratch, hash ^ 1,
                                    ns));
    TT_OK(rkv_pool_unref(f->pool, scratch));
}

rkv_status tt_try_cache(tt_fixture *f, uint64_t ns, const int32_t *toks,
                        uint32_t n, rkv_block_id *b)
{
    rkv_block_id local[TT_MAX_PAGES];
    if (b == NULL) {
        cr_assert_leq(n, TT_MAX_PAGES);
        b = local;
    }
    rkv_status st = rkv_tree_alloc_blocks(f->tree, n, b);
    if (st != RKV_OK)
        return st;
    st = rkv_tree_insert(f->tree, ns, toks, (size_t)n * f->page_size, b, NULL,
                         NULL);
    TT_OK(rkv_pool_unref_n(f->pool, n, b));
    return st;
}

rkv_transfer_done tt_poll_one(tt_fixture *f)
{
    rkv_transfer_done done;
    uint32_t nd = 0;
    cr_assert_eq(rkv_tree_tier_poll(f->tree, &done, 1, &nd), RKV_OK);
    cr_assert_eq(nd, 1);
    return done;
}

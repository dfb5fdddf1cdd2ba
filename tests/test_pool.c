/*
 * tests/test_pool.c -- unit tests of alloc/: the KV block pool.
 *
 * Every test calls rkv_pool_check() after each operation; a corruption test
 * shows the check can fail. Expected values come from the configuration
 * (block counts, sizes) or from independent recomputation, never from the
 * code under test.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "alloc/pool_internal.h"
#include "radixkv.h"
#include "tests/support/check.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#define CHECK(pool) OK(rkv_pool_check(pool))

static rkv_pool *make_pool(uint32_t nblocks, uint32_t page)
{
    rkv_pool *p = tu_pool(nblocks, page);
    CHECK(p);
    return p;
}

Test(pool, config_defaults)
{
    rkv_pool_config cfg;
    memset(&cfg, 0xab, sizeof cfg);
    rkv_pool_config_init(&cfg);
    cr_assert_eq(cfg.page_size, 16);
    cr_assert_eq(cfg.num_layers, 0);
    cr_assert_eq(cfg.num_blocks, 0);
    cr_assert_eq(cfg.dtype, RKV_DTYPE_F16);
    cr_assert_eq(cfg.device, RKV_DEVICE_HOST);
}

Test(pool, invalid_configs)
{
    rkv_pool_config cfg;
    rkv_pool *p = NULL;
    rkv_pool_config_init(&cfg);
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_ERR_INVALID_ARG); /* 0 blocks */
    cfg.num_blocks = UINT32_MAX;
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_ERR_INVALID_ARG);
    cfg.num_blocks = 8;
    cfg.page_size = 0;
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_ERR_INVALID_ARG);
    cfg.page_size = RKV_MAX_PAGE_SIZE + 1;
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_ERR_INVALID_ARG);
    cr_assert_neq(rkv_last_error()[0], '\0');
    cfg.page_size = RKV_MAX_PAGE_SIZE; /* the largest is accepted */
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_check(p), RKV_OK);
    rkv_pool_destroy(p);
    p = NULL;
    cfg.dtype = (rkv_dtype)7;
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_ERR_INVALID_ARG);
    cfg.dtype = RKV_DTYPE_BF16;
    cfg.num_layers = 2; /* heads and head_dim 0 */
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_ERR_INVALID_ARG);
    cfg.num_kv_heads = 1u << 20;
    cfg.head_dim = 1u << 20; /* overflows size_t products */
    cfg.num_layers = 1u << 20;
    cr_assert_eq(rkv_pool_create(&cfg, &p), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_pool_create(NULL, &p), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_pool_create(&cfg, NULL), RKV_ERR_INVALID_ARG);
    cr_assert_null(p);
    rkv_pool_destroy(NULL);
}

Test(pool, alloc_ref_unref)
{
    const uint32_t n = 5;
    rkv_pool *p = make_pool(n, 16);
    cr_assert_eq(rkv_pool_num_blocks(p), n);
    cr_assert_eq(rkv_pool_num_free(p), n);
    rkv_block_id ids[5];
    for (uint32_t i = 0; i < n; i++) {
        OK(rkv_pool_alloc(p, &ids[i]));
        CHECK(p);
        cr_assert_lt(ids[i], n);
        cr_assert_eq(rkv_pool_refcount(p, ids[i]), 1);
        for (uint32_t j = 0; j < i; j++)
            cr_assert_neq(ids[i], ids[j]);
        cr_assert_eq(rkv_pool_num_free(p), n - i - 1);
    }
    rkv_block_id extra;
    cr_assert_eq(rkv_pool_alloc(p, &extra), RKV_ERR_NO_SPACE);
    CHECK(p);
    OK(rkv_pool_ref(p, ids[2]));
    cr_assert_eq(rkv_pool_refcount(p, ids[2]), 2);
    OK(rkv_pool_unref(p, ids[2]));
    cr_assert_eq(rkv_pool_refcount(p, ids[2]), 1);
    cr_assert_eq(rkv_pool_num_free(p), 0);
    OK(rkv_pool_unref(p, ids[2]));
    CHECK(p);
    cr_assert_eq(rkv_pool_refcount(p, ids[2]), 0);
    cr_assert_eq(rkv_pool_num_free(p), 1);
    /* double unref and ref of a free block: refused, unchanged */
    cr_assert_eq(rkv_pool_unref(p, ids[2]), RKV_ERR_STATE);
    cr_assert_eq(rkv_pool_ref(p, ids[2]), RKV_ERR_STATE);
    cr_assert_eq(rkv_pool_num_free(p), 1);
    CHECK(p);
    cr_assert_eq(rkv_pool_unref(p, n), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_pool_ref(p, RKV_NO_BLOCK), RKV_ERR_INVALID_ARG);
    /* the freed block is the one handed out next */
    OK(rkv_pool_alloc(p, &extra));
    cr_assert_eq(extra, ids[2]);
    CHECK(p);
    rkv_pool_destroy(p);
}

Test(pool, alloc_n_all_or_none)
{
    rkv_pool *p = make_pool(10, 4);
    rkv_block_id a[10], b[10];
    OK(rkv_pool_alloc_n(p, 7, a));
    CHECK(p);
    memset(b, 0xee, sizeof b);
    cr_assert_eq(rkv_pool_alloc_n(p, 4, b), RKV_ERR_NO_SPACE);
    CHECK(p);
    cr_assert_eq(rkv_pool_num_free(p), 3);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(b[i], 0xeeeeeeeeu, "alloc_n wrote on failure");
    OK(rkv_pool_alloc_n(p, 0, NULL));
    OK(rkv_pool_alloc_n(p, 3, b));
    CHECK(p);
    cr_assert_eq(rkv_pool_num_free(p), 0);
    uint8_t seen[10] = {0};
    for (int i = 0; i < 7; i++)
        seen[a[i]]++;
    for (int i = 0; i < 3; i++)
        seen[b[i]]++;
    for (int i = 0; i < 10; i++)
        cr_assert_eq(seen[i], 1, "block %d handed out %d times", i, seen[i]);
    OK(rkv_pool_unref_n(p, 7, a));
    CHECK(p);
    cr_assert_eq(rkv_pool_num_free(p), 7);
    rkv_pool_destroy(p);
}

Test(pool, unref_n_validates_first)
{
    rkv_pool *p = make_pool(8, 16);
    rkv_block_id a[4];
    OK(rkv_pool_alloc_n(p, 4, a));
    OK(rkv_pool_ref(p, a[1])); /* a[1] has 2 refs */
    OK(rkv_pool_unref(p, a[3])); /* a[3] is free again */
    CHECK(p);
    uint32_t before[8];
    for (uint32_t i = 0; i < 8; i++)
        before[i] = rkv_pool_refcount(p, i);
    uint32_t free_before = rkv_pool_num_free(p);

    rkv_block_id with_free[3] = {a[0], a[1], a[3]};
    cr_assert_eq(rkv_pool_unref_n(p, 3, with_free), RKV_ERR_STATE);
    CHECK(p);
    rkv_block_id too_many[4] = {a[1], a[0], a[1], a[1]}; /* a[1] x3 > 2 refs */
    cr_assert_eq(rkv_pool_unref_n(p, 4, too_many), RKV_ERR_STATE);
    CHECK(p);
    rkv_block_id out_of_range[2] = {a[0], 8};
    cr_assert_eq(rkv_pool_unref_n(p, 2, out_of_range), RKV_ERR_INVALID_ARG);
    CHECK(p);
    for (uint32_t i = 0; i < 8; i++)
        cr_assert_eq(rkv_pool_refcount(p, i), before[i], "block %u changed", i);
    cr_assert_eq(rkv_pool_num_free(p), free_before);

    rkv_block_id twice[3] = {a[1], a[1], a[2]}; /* exactly its 2 refs */
    OK(rkv_pool_unref_n(p, 3, twice));
    CHECK(p);
    cr_assert_eq(rkv_pool_refcount(p, a[1]), 0);
    cr_assert_eq(rkv_pool_refcount(p, a[2]), 0);
    cr_assert_eq(rkv_pool_num_free(p), free_before + 2);
    rkv_pool_destroy(p);
}

/* Random alloc / ref / unref / unref_n (lists with repeats, free ids and
 * out-of-range ids) against a model of the ref counts: a call succeeds
 * exactly when the model says it can, and every ref count and the free
 * count equal the model's after each call -- a failed unref_n included,
 * whatever position its bad id has. */
Test(pool, random_ops_match_a_model)
{
    enum { N = 12 };
    rkv_rng g;
    rkv_rng_init(&g, rkv_test_seed("pool.random_ops_match_a_model"));
    rkv_pool *p = make_pool(N, 4);
    uint32_t model[N] = {0};
    uint64_t fails = 0, oks = 0;
    for (int it = 0; it < 20000; it++) {
        uint32_t nfree = 0;
        for (uint32_t i = 0; i < N; i++)
            nfree += model[i] == 0;
        rkv_block_id ids[8];
        switch (rkv_rng_below(&g, 4)) {
        case 0: { /* alloc_n */
            uint32_t n = (uint32_t)rkv_rng_below(&g, 5);
            rkv_status st = rkv_pool_alloc_n(p, n, ids);
            cr_assert_eq(st, n <= nfree ? RKV_OK : RKV_ERR_NO_SPACE);
            for (uint32_t i = 0; st == RKV_OK && i < n; i++) {
                cr_assert_lt(ids[i], N);
                cr_assert_eq(model[ids[i]], 0, "block %u handed out twice", ids[i]);
                model[ids[i]] = 1;
            }
            break;
        }
        case 1: { /* ref / unref of one id (maybe free) */
            uint32_t id = (uint32_t)rkv_rng_below(&g, N);
            if (rkv_rng_below(&g, 2)) {
                cr_assert_eq(rkv_pool_ref(p, id), model[id] ? RKV_OK : RKV_ERR_STATE);
                model[id] += model[id] != 0;
            } else {
                cr_assert_eq(rkv_pool_unref(p, id), model[id] ? RKV_OK : RKV_ERR_STATE);
                model[id] -= model[id] != 0;
            }
            break;
        }
        default: { /* unref_n of a list, mostly of live ids, with repeats */
            uint32_t n = 1 + (uint32_t)rkv_rng_below(&g, 8), want[N] = {0};
            int range_bad = 0;
            for (uint32_t i = 0; i < n; i++) {
                uint32_t id = (uint32_t)rkv_rng_below(&g, N);
                for (int t = 0; t < 4 && model[id] == 0; t++) /* prefer live ids */
                    id = (uint32_t)rkv_rng_below(&g, N);
                if (rkv_rng_below(&g, 200) == 0) {
                    ids[i] = N + 3; /* out of range */
                    range_bad = 1;
                    continue;
                }
                ids[i] = id;
                want[id]++;
            }
            int ok = !range_bad;
            for (uint32_t i = 0; i < N; i++)
                ok &= want[i] <= model[i];
            rkv_status st = rkv_pool_unref_n(p, n, ids);
            cr_assert_eq(st, ok ? RKV_OK : range_bad ? RKV_ERR_INVALID_ARG : RKV_ERR_STATE,
                         "unref_n of %u ids: %s", n, rkv_last_error());
            if (ok)
                for (uint32_t i = 0; i < N; i++)
                    model[i] -= want[i];
            fails += !ok;
            oks += ok;
            break;
        }
        }
        nfree = 0;
        for (uint32_t i = 0; i < N; i++) {
            cr_assert_eq(rkv_pool_refcount(p, i), model[i], "iteration %d: block %u "
                         "has %u refs, the model %u", it, i, rkv_pool_refcount(p, i),
                         model[i]);
            nfree += model[i] == 0;
        }
        cr_assert_eq(rkv_pool_num_free(p), nfree);
        CHECK(p);
    }
    cr_assert(fails > 100 && oks > 100, "unref_n: %llu failed, %llu succeeded",
              (unsigned long long)fails, (unsigned long long)oks);
    rkv_pool_destroy(p);
}

Test(pool, hash_chaining)
{
    int32_t page[16], other[16];
    for (int i = 0; i < 16; i++) {
        page[i] = i * 7 + 1;
        other[i] = i * 7 + 1;
    }
    other[15]++;
    uint64_t h0 = rkv_block_hash(RKV_HASH_ROOT, 0, page, 16);
    cr_assert_eq(h0, rkv_block_hash(RKV_HASH_ROOT, 0, page, 16), "deterministic");
    cr_assert_neq(h0, rkv_block_hash(RKV_HASH_ROOT, 0, other, 16));
    cr_assert_neq(h0, rkv_block_hash(RKV_HASH_ROOT, 1, page, 16), "namespace");
    cr_assert_neq(h0, rkv_block_hash(1, 0, page, 16), "parent");
    cr_assert_neq(h0, rkv_block_hash(RKV_HASH_ROOT, 0, page, 15), "length");
    /* (parent, ns) is an exact pair: swapping them changes the hash */
    cr_assert_neq(rkv_block_hash(5, 9, page, 16), rkv_block_hash(9, 5, page, 16));
    /* the documented construction, recomputed independently */
    uint64_t rec[2] = {h0, 42};
    uint64_t want = XXH3_64bits_withSeed(other, sizeof other,
                                         XXH3_64bits(rec, sizeof rec));
    cr_assert_eq(rkv_block_hash(h0, 42, other, 16), want);
    /* chains: equal prefixes give equal hashes, a different first page
     * changes every later hash */
    uint64_t a1 = rkv_block_hash(rkv_block_hash(0, 3, page, 16), 3, page, 16);
    uint64_t b1 = rkv_block_hash(rkv_block_hash(0, 3, other, 16), 3, page, 16);
    cr_assert_neq(a1, b1);

    rkv_pool *p = make_pool(4, 16);
    rkv_block_id b;
    OK(rkv_pool_alloc(p, &b));
    cr_assert_eq(rkv_pool_block_hash(p, b), RKV_HASH_ROOT);
    OK(rkv_pool_set_block_hash(p, b, h0));
    cr_assert_eq(rkv_pool_block_hash(p, b), h0);
    CHECK(p);
    OK(rkv_pool_unref(p, b));
    cr_assert_eq(rkv_pool_block_hash(p, b), RKV_HASH_ROOT, "a freed block forgets");
    cr_assert_eq(rkv_pool_set_block_hash(p, b, h0), RKV_ERR_STATE);
    cr_assert_eq(rkv_pool_set_block_hash(p, 4, h0), RKV_ERR_INVALID_ARG);
    CHECK(p);
    rkv_pool_destroy(p);
}

Test(pool, metadata_only)
{
    rkv_pool *p = make_pool(100, 16);
    void *k = NULL, *v = NULL;
    cr_assert_eq(rkv_pool_layer_kv(p, 0, &k, &v), RKV_ERR_STATE);
    cr_assert_eq(rkv_pool_bytes_per_block(p), 0);
    cr_assert_eq(rkv_pool_page_size(p), 16);
    /* metadata: 12 bytes per block (hash or free link, ref count) plus a
     * small header */
    size_t meta = rkv_pool_host_metadata_bytes(p);
    cr_assert_geq(meta, 100 * 12);
    cr_assert_lt(meta, 100 * 12 + 1024);
    rkv_pool_config cfg;
    OK(rkv_pool_get_config(p, &cfg));
    cr_assert_eq(cfg.num_blocks, 100);
    rkv_pool_destroy(p);
}

Test(pool, host_kv_layout)
{
    rkv_pool_config cfg = tu_kv_config(6, 4, 3, 2, 8, RKV_DEVICE_HOST);
    cfg.dtype = RKV_DTYPE_F32;
    rkv_pool *p = NULL;
    OK(rkv_pool_create(&cfg, &p));
    CHECK(p);
    size_t bpb = (size_t)3 * 2 * 4 * 2 * 8 * 4;
    cr_assert_eq(rkv_pool_bytes_per_block(p), bpb);
    size_t plane = (size_t)6 * 4 * 2 * 8 * 4; /* one K or V of one layer */
    char *k0 = NULL, *v0 = NULL;
    OK(rkv_pool_layer_kv(p, 0, (void **)&k0, (void **)&v0));
    cr_assert_eq((uintptr_t)k0 % 256, 0, "256-byte aligned");
    for (uint32_t l = 0; l < 3; l++) {
        char *k = NULL, *v = NULL;
        OK(rkv_pool_layer_kv(p, l, (void **)&k, (void **)&v));
        cr_assert_eq(k, k0 + (size_t)l * 2 * plane);
        cr_assert_eq(v, k0 + ((size_t)l * 2 + 1) * plane);
        /* the whole pool is writable (ASan would catch an overrun) */
        memset(k, (int)l, plane);
        memset(v, (int)l, plane);
    }
    cr_assert_eq(rkv_pool_layer_kv(p, 3, (void **)&k0, (void **)&v0),
                 RKV_ERR_INVALID_ARG);
    rkv_pool_destroy(p);
}

Test(pool, cuda_pool)
{
    rkv_pool *p = NULL;
    rkv_status st = tu_cuda_pool(4, 8, &p);
    /* a pool when the CUDA backend loads and a GPU is present, else
     * NO_DEVICE with a reason (tests/test_cuda_backend.c covers which) */
    cr_assert(st == RKV_OK || st == RKV_ERR_NO_DEVICE, "status %d", st);
    if (st == RKV_OK) {
        CHECK(p);
        void *k = NULL, *v = NULL;
        OK(rkv_pool_layer_kv(p, 0, &k, &v));
        cr_assert_not_null(k);
        rkv_pool_destroy(p);
    } else {
        cr_assert_null(p);
        cr_assert_neq(rkv_last_error()[0], '\0');
    }
}

Test(pool, check_detects_corruption)
{
    rkv_pool *p = make_pool(4, 16);
    rkv_block_id b;
    OK(rkv_pool_alloc(p, &b));
    CHECK(p);
    /* a block both free and referenced */
    p->refcount[p->free_head] = 1;
    cr_assert_eq(rkv_pool_check(p), RKV_ERR_CORRUPT);
    p->refcount[p->free_head] = 0;
    CHECK(p);
    /* a cycle (so a duplicate) in the free list */
    uint32_t second = (uint32_t)p->hash[p->free_head];
    uint64_t saved = p->hash[second];
    p->hash[second] = p->free_head;
    cr_assert_eq(rkv_pool_check(p), RKV_ERR_CORRUPT);
    p->hash[second] = saved;
    CHECK(p);
    /* a free list that ends early */
    p->num_free++;
    cr_assert_eq(rkv_pool_check(p), RKV_ERR_CORRUPT);
    p->num_free--;
    /* a referenced block missing from the counts */
    p->refcount[b] = 0;
    cr_assert_eq(rkv_pool_check(p), RKV_ERR_CORRUPT);
    p->refcount[b] = 1;
    CHECK(p);
    rkv_pool_destroy(p);
}

Test(pool, many_blocks_lifo)
{
    const uint32_t n = 100000;
    rkv_pool *p = make_pool(n, 16);
    rkv_block_id *ids = malloc(n * sizeof *ids);
    cr_assert_not_null(ids);
    OK(rkv_pool_alloc_n(p, n, ids));
    CHECK(p);
    OK(rkv_pool_unref_n(p, n / 2, ids));
    CHECK(p);
    cr_assert_eq(rkv_pool_num_free(p), n / 2);
    OK(rkv_pool_unref_n(p, n - n / 2, ids + n / 2));
    CHECK(p);
    cr_assert_eq(rkv_pool_num_free(p), n);
    free(ids);
    rkv_pool_destroy(p);
}

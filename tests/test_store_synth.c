/*
 * tests/test_store_synth.c -- synthetic payloads (tier/store_synth.c): a
 * disk store with real records below a metadata-only pool writes each
 * page's pattern and verifies it on every load; a record whose checksums
 * pass but whose payload is not the pattern is a counted RKV_ERR_CORRUPT.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "radixkv.h"
#include "tests/support/handles.h"
#include "tier/store.h"
#include "tier/store_internal.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define IS(expr, st) cr_assert_eq((expr), (st), "%s gave %d (%s), expected %s", #expr, \
                                  (int)(expr), rkv_last_error(), #st)

/* layers 0: metadata only; 2: 1024-byte blocks */
static rkv_pool *make_pool(uint32_t layers)
{
    rkv_pool_config cfg = tu_kv_config(4, 4, layers, 2, 8, RKV_DEVICE_HOST);
    cfg.dtype = RKV_DTYPE_F32;
    rkv_pool *p = NULL;
    OK(rkv_pool_create(&cfg, &p));
    return p;
}

static rkv_store *make_store(int medium, size_t bb, const char *path)
{
    rkv_store_config c = tu_store_config(medium, 4, bb, path);
    rkv_store *s = NULL;
    OK(rkv_store_create(&c, &s));
    return s;
}

static void counts(const rkv_store *s, uint64_t ok, uint64_t bad)
{
    uint64_t v, m;
    rkv_store_synth_counts(s, &v, &m);
    cr_assert_eq(v, ok, "verified %llu, expected %llu", (unsigned long long)v,
                 (unsigned long long)ok);
    cr_assert_eq(m, bad, "mismatches %llu, expected %llu", (unsigned long long)m,
                 (unsigned long long)bad);
}

Test(store_synth, pattern_written_verified_and_forgery_refused)
{
    char dir[] = "/tmp/rkv-synth-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    rkv_pool *meta = make_pool(0), *kv = make_pool(2);
    rkv_store *host = make_store(RKV_MEDIUM_HOST, 0, NULL);
    rkv_store *s = make_store(RKV_MEDIUM_DISK, 1024, dir);
    IS(rkv_store_set_synthetic(host), RKV_ERR_INVALID_ARG); /* no bytes */
    cr_assert_eq(rkv_store_block_bytes(s), 1024);
    OK(rkv_store_set_synthetic(s));
    cr_assert_eq(rkv_store_block_bytes(s), 0); /* the tree sees no bytes */
    rkv_block_id b;
    uint32_t slot, hs, slot2;
    OK(rkv_pool_alloc(meta, &b));
    OK(rkv_store_slot_alloc(s, &slot));
    IS(rkv_store_write_from_pool(s, slot, kv, 0, 1, 1), RKV_ERR_INVALID_ARG);
    OK(rkv_store_write_from_pool(s, slot, meta, b, 0x1234, 7));
    OK(rkv_store_read_to_pool(s, slot, meta, b, 0x1234, 7));
    counts(s, 1, 0);
    /* disk -> metadata-only host verifies; host -> disk writes the pattern */
    OK(rkv_store_slot_alloc(host, &hs));
    OK(rkv_store_copy_slot(host, hs, s, slot, 0x1234, 7));
    counts(s, 2, 0);
    OK(rkv_store_slot_alloc(s, &slot2));
    OK(rkv_store_copy_slot(s, slot2, host, hs, 0x1234, 7));
    OK(rkv_store_read_to_pool(s, slot2, meta, b, 0x1234, 7));
    counts(s, 3, 0);
    OK(rkv_store_check(s));

    /* a record with valid checksums but other bytes (written as a plain
     * store from a pool with bytes): every load of it is refused, counted */
    rkv_block_id kb;
    OK(rkv_pool_alloc(kv, &kb));
    unsigned char junk[1024];
    memset(junk, 0xa5, sizeof junk);
    OK(rkv_pool_copy_from_host(kv, 1, &kb, junk));
    s->synth = 0;
    OK(rkv_store_write_from_pool(s, slot, kv, kb, 0x9999, 7));
    s->synth = 1;
    IS(rkv_store_read_to_pool(s, slot, meta, b, 0x9999, 7), RKV_ERR_CORRUPT);
    cr_assert_not_null(strstr(rkv_last_error(), "differs at byte 0"), "%s",
                       rkv_last_error());
    counts(s, 3, 1);
    IS(rkv_store_copy_slot(host, hs, s, slot, 0x9999, 7), RKV_ERR_CORRUPT);
    counts(s, 3, 2);
    OK(rkv_store_check(s));

    rkv_store_destroy(s);
    rkv_store_destroy(host);
    rkv_pool_destroy(meta);
    rkv_pool_destroy(kv);
    cr_assert_eq(rmdir(dir), 0, "the store left its file behind");
}

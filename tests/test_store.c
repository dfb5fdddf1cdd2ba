/*
 * tests/test_store.c -- unit tests of tier/: the host and disk block
 * stores below the device pool (tier/store.h, the rkv_store_* API).
 *
 * rkv_store_check() runs after every operation. Expected bytes come from
 * the test's own buffers (random KV written into pool blocks), never from
 * the store; expected capacities from the configuration. Disk tests work
 * in a fresh directory under /tmp (and /dev/shm for the tmpfs case) that
 * they remove.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/handles.h"
#include "support/kv_pool.h"
#include "support/test_util.h"
#include "tier/disk_record.h"
#include "tier/store.h"
#include "radixkv.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define CHECK(s) OK(rkv_store_check(s))
#define IS(expr, st) cr_assert_eq((expr), (st), "%s gave %d (%s), expected %s", #expr, \
                                  (int)(expr), rkv_last_error(), #st)

/* A host pool of 1024-byte blocks: 2 layers x K,V x 4 tokens x 2 heads x 8
 * dims x f32. */
static rkv_pool *make_pool(uint32_t nblocks, uint32_t layers)
{
    rkv_pool_config cfg;
    rkv_test_kv_pool_config(&cfg, nblocks, layers);
    rkv_pool *p = NULL;
    OK(rkv_pool_create(&cfg, &p));
    return p;
}

/* Fills block b with bytes derived from seed; returns them in want. */
/* Tests name_host and name_disk: the scenario name(medium) on each. */
#define ON_BOTH_MEDIA(name)                                  \
    Test(store, name##_host) { name(RKV_MEDIUM_HOST); }      \
    Test(store, name##_disk) { name(RKV_MEDIUM_DISK); }

/* s destroyed and a store of c created in its place. */
static rkv_store *remake(rkv_store *s, const rkv_store_config *c)
{
    rkv_store_destroy(s);
    rkv_store *n = NULL;
    OK(rkv_store_create(c, &n));
    return n;
}

static void fill_block(rkv_pool *p, rkv_block_id b, uint64_t seed, unsigned char *want)
{
    size_t n = rkv_pool_bytes_per_block(p);
    rkv_rng r;
    rkv_rng_init(&r, seed);
    for (size_t i = 0; i < n; i++)
        want[i] = (unsigned char)rkv_rng_next(&r);
    OK(rkv_pool_copy_from_host(p, 1, &b, want));
}

static void expect_block(rkv_pool *p, rkv_block_id b, const unsigned char *want)
{
    size_t n = rkv_pool_bytes_per_block(p);
    unsigned char *got = malloc(n);
    OK(rkv_pool_copy_to_host(p, 1, &b, got));
    cr_assert(memcmp(got, want, n) == 0, "block %u differs", b);
    free(got);
}

static rkv_store *make_store(int medium, uint64_t cap, size_t bb, const char *path)
{
    rkv_store_config c = tu_store_config(medium, cap, bb, path);
    c.pinned = 0;
    rkv_store *s = NULL;
    OK(rkv_store_create(&c, &s));
    CHECK(s);
    cr_assert_eq(rkv_store_capacity_blocks(s), cap);
    cr_assert_eq(rkv_store_used_blocks(s), 0);
    return s;
}

static char *make_dir(const char *base)
{
    char *d = malloc(strlen(base) + 32);
    sprintf(d, "%s/rkv-store-XXXXXX", base);
    cr_assert_not_null(mkdtemp(d), "mkdtemp in %s", base);
    return d;
}

static void remove_dir(char *d)
{
    char f[4096];
    snprintf(f, sizeof f, "%s/radixkv-tier.blocks", d);
    (void)unlink(f);
    snprintf(f, sizeof f, "%s/file.blocks", d);
    (void)unlink(f);
    cr_assert_eq(rmdir(d), 0, "rmdir %s: the store left files behind", d);
    free(d);
}

Test(store, config_defaults)
{
    rkv_store_config c;
    memset(&c, 0xab, sizeof c);
    rkv_store_config_init(&c, RKV_MEDIUM_DISK);
    cr_assert_eq(c.medium, RKV_MEDIUM_DISK);
    cr_assert_eq(c.capacity_blocks, 0);
    cr_assert_eq(c.capacity_bytes, 0);
    cr_assert_eq(c.block_bytes, 0);
    cr_assert_null(c.path);
    cr_assert_eq(c.pinned, 1);
    cr_assert_eq(c.direct_io, 1);
    cr_assert_eq(c.io_uring, 1);
    rkv_store_config_init(NULL, RKV_MEDIUM_HOST); /* no crash */
}

Test(store, invalid_configs)
{
    rkv_store_config c;
    rkv_store *s = (rkv_store *)&c;
    rkv_store_config_init(&c, RKV_MEDIUM_HOST);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG); /* capacity 0 */
    cr_assert_null(s);
    cr_assert_neq(rkv_last_error()[0], '\0');
    IS(rkv_store_create(NULL, &s), RKV_ERR_INVALID_ARG);
    IS(rkv_store_create(&c, NULL), RKV_ERR_INVALID_ARG);
    c.capacity_blocks = 4;
    c.medium = RKV_MEDIUM_DEVICE;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    c.medium = 7;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    c.medium = RKV_MEDIUM_HOST;
    c.capacity_blocks = 0;
    c.capacity_bytes = 4096; /* bytes without block_bytes: no capacity */
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    c.block_bytes = 8192; /* less than one block */
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    c.capacity_bytes = 0;
    c.capacity_blocks = (uint64_t)UINT32_MAX;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    c.block_bytes = SIZE_MAX / 4;
    c.capacity_blocks = 16;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    c = tu_store_config(RKV_MEDIUM_DISK, 4, 1024, NULL);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG); /* no path */
    c.path = "";
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    c.path = "/nonexistent-dir-rkv/x/y.blocks";
    IS(rkv_store_create(&c, &s), RKV_ERR_IO);
    cr_assert_null(s);
    /* NULL everywhere else is harmless */
    rkv_store_destroy(NULL);
    cr_assert_eq(rkv_store_capacity_blocks(NULL), 0);
    cr_assert_eq(rkv_store_used_blocks(NULL), 0);
    IS(rkv_store_check(NULL), RKV_ERR_INVALID_ARG);
}

Test(store, capacity_in_blocks_and_bytes)
{
    rkv_store_config c;
    rkv_store *s = NULL;
    rkv_store_config_init(&c, RKV_MEDIUM_HOST);
    c.pinned = 0;
    c.block_bytes = 1024;
    c.capacity_bytes = 10 * 1024 + 1023; /* 10 whole blocks */
    OK(rkv_store_create(&c, &s));
    CHECK(s);
    cr_assert_eq(rkv_store_capacity_blocks(s), 10);
    cr_assert_eq(rkv_store_block_bytes(s), 1024);
    cr_assert_eq(rkv_store_medium(s), RKV_MEDIUM_HOST);
    rkv_store_info info;
    OK(rkv_store_get_info(s, &info));
    cr_assert_eq(info.capacity_blocks, 10);
    cr_assert_eq(info.used_blocks, 0);
    cr_assert_eq(info.pinned, 0);
    cr_assert_null(info.path);
    IS(rkv_store_get_info(s, NULL), RKV_ERR_INVALID_ARG);
    IS(rkv_store_get_info(NULL, &info), RKV_ERR_INVALID_ARG);
    c.capacity_blocks = 7; /* both: the smaller wins */
    s = remake(s, &c);
    cr_assert_eq(rkv_store_capacity_blocks(s), 7);
    c.capacity_blocks = 70;
    s = remake(s, &c);
    cr_assert_eq(rkv_store_capacity_blocks(s), 10);
    rkv_store_destroy(s);
    /* metadata only: bytes cannot size it, blocks do */
    c.block_bytes = 0;
    c.capacity_blocks = 5;
    OK(rkv_store_create(&c, &s));
    cr_assert_eq(rkv_store_capacity_blocks(s), 5);
    cr_assert_eq(rkv_store_block_bytes(s), 0);
    rkv_store_destroy(s);
}

/* Random alloc / free against a reference bitmap. */
Test(store, slot_alloc_free)
{
    const uint32_t cap = 37;
    rkv_store *s = make_store(RKV_MEDIUM_HOST, cap, 0, NULL);
    unsigned char used[37] = {0};
    uint32_t nused = 0, slot = 0;
    rkv_rng r;
    rkv_rng_init(&r, rkv_test_seed("store.slot_alloc_free"));
    uint64_t iters = rkv_test_scaled(20000);
    for (uint64_t it = 0; it < iters; it++) {
        uint32_t pick = (uint32_t)rkv_rng_below(&r, cap + 2);
        if (rkv_rng_below(&r, 2) == 0) {
            rkv_status st = rkv_store_slot_alloc(s, &slot);
            if (nused == cap) {
                IS(st, RKV_ERR_NO_SPACE);
            } else {
                OK(st);
                cr_assert_lt(slot, cap);
                cr_assert_eq(used[slot], 0, "slot %u handed out twice", slot);
                used[slot] = 1;
                nused++;
            }
        } else if (pick < cap && used[pick]) {
            OK(rkv_store_slot_free(s, pick));
            used[pick] = 0;
            nused--;
        } else {
            IS(rkv_store_slot_free(s, pick), RKV_ERR_STATE); /* double free / range */
        }
        CHECK(s);
        cr_assert_eq(rkv_store_used_blocks(s), nused);
        cr_assert_eq(rkv_store_free_slots(s), cap - nused);
    }
    IS(rkv_store_slot_alloc(NULL, &slot), RKV_ERR_INVALID_ARG);
    IS(rkv_store_slot_alloc(s, NULL), RKV_ERR_INVALID_ARG);
    rkv_store_destroy(s);
}

Test(store, attach_one_tree)
{
    rkv_store *s = make_store(RKV_MEDIUM_HOST, 4, 0, NULL);
    int a, b;
    uint32_t slot;
    OK(rkv_store_attach(s, &a));
    OK(rkv_store_attach(s, &a)); /* same owner again */
    IS(rkv_store_attach(s, &b), RKV_ERR_BUSY);
    IS(rkv_store_attach(s, NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_store_owner(s), &a);
    OK(rkv_store_slot_alloc(s, &slot));
    OK(rkv_store_slot_alloc(s, &slot));
    rkv_store_detach(s, &b); /* not the owner: nothing */
    cr_assert_eq(rkv_store_owner(s), &a);
    cr_assert_eq(rkv_store_used_blocks(s), 2);
    rkv_store_detach(s, &a); /* the owner: its slots end with it */
    CHECK(s);
    cr_assert_null(rkv_store_owner(s));
    cr_assert_eq(rkv_store_used_blocks(s), 0);
    OK(rkv_store_attach(s, &b));
    CHECK(s);
    rkv_store_destroy(s);
}

/* Metadata only: no bytes, but slots, records and verification are real. */
static void metadata_only(int medium)
{
    rkv_pool *pool = make_pool(8, 0);
    rkv_pool *kvpool = make_pool(2, 2);
    rkv_store *s = make_store(medium, 3, 0, NULL);
    rkv_store *o = make_store(medium == RKV_MEDIUM_HOST ? RKV_MEDIUM_DISK : RKV_MEDIUM_HOST,
                              3, 0, NULL);
    rkv_block_id b, b2;
    uint32_t slot, other;
    OK(rkv_pool_alloc(pool, &b));
    OK(rkv_pool_alloc(pool, &b2));
    OK(rkv_store_slot_alloc(s, &slot));
    IS(rkv_store_read_to_pool(s, slot, pool, b, 1, 1), RKV_ERR_CORRUPT); /* unwritten */
    OK(rkv_store_write_from_pool(s, slot, pool, b, 0x1234, 7));
    CHECK(s);
    cr_assert(rkv_store_slot_holds(s, slot, 0x1234, 7));
    OK(rkv_store_read_to_pool(s, slot, pool, b2, 0x1234, 7));
    IS(rkv_store_read_to_pool(s, slot, pool, b2, 0x1234, 8), RKV_ERR_CORRUPT);
    IS(rkv_store_read_to_pool(s, slot, pool, b2, 0x1235, 7), RKV_ERR_CORRUPT);
    IS(rkv_store_read_to_pool(s, slot, pool, 7, 0x1234, 7), RKV_ERR_INVALID_ARG);
    IS(rkv_store_read_to_pool(s, slot, kvpool, 0, 0x1234, 7), RKV_ERR_INVALID_ARG);
    IS(rkv_store_read_to_pool(s, slot + 1, pool, b2, 0x1234, 7), RKV_ERR_STATE);
    IS(rkv_store_write_from_pool(s, 99, pool, b, 1, 1), RKV_ERR_STATE);
    CHECK(s);
    OK(rkv_store_slot_alloc(o, &other));
    OK(rkv_store_copy_slot(o, other, s, slot, 0x1234, 7));
    CHECK(o);
    cr_assert(rkv_store_slot_holds(o, other, 0x1234, 7));
    IS(rkv_store_copy_slot(o, other, s, slot, 0x1234, 6), RKV_ERR_CORRUPT);
    OK(rkv_store_slot_free(s, slot));
    cr_assert(!rkv_store_slot_holds(s, slot, 0x1234, 7));
    OK(rkv_store_slot_alloc(s, &slot)); /* reused: holds nothing */
    IS(rkv_store_read_to_pool(s, slot, pool, b2, 0x1234, 7), RKV_ERR_CORRUPT);
    CHECK(s);
    rkv_store_destroy(s);
    rkv_store_destroy(o);
    rkv_pool_destroy(pool);
    rkv_pool_destroy(kvpool);
}

ON_BOTH_MEDIA(metadata_only)

Test(store, host_roundtrip)
{
    rkv_pool *pool = make_pool(8, 2);
    size_t bb = rkv_pool_bytes_per_block(pool);
    cr_assert_eq(bb, 1024);
    rkv_store *s = make_store(RKV_MEDIUM_HOST, 4, bb, NULL);
    cr_assert_eq(rkv_store_pinned(s), 0);
    unsigned char want[4][1024], zero[1024] = {0};
    rkv_block_id b[8];
    OK(rkv_pool_alloc_n(pool, 8, b));
    uint32_t slot[4];
    for (int i = 0; i < 4; i++) {
        fill_block(pool, b[i], 100 + (uint64_t)i, want[i]);
        OK(rkv_store_slot_alloc(s, &slot[i]));
        OK(rkv_store_write_from_pool(s, slot[i], pool, b[i], 1000 + (uint64_t)i, 3));
        CHECK(s);
    }
    for (int i = 0; i < 4; i++) {
        OK(rkv_pool_copy_from_host(pool, 1, &b[4 + i], zero));
        OK(rkv_store_read_to_pool(s, slot[i], pool, b[4 + i], 1000 + (uint64_t)i, 3));
        CHECK(s);
        expect_block(pool, b[4 + i], want[i]);
    }
    /* a mismatched read moves no byte */
    OK(rkv_pool_copy_from_host(pool, 1, &b[4], zero));
    IS(rkv_store_read_to_pool(s, slot[1], pool, b[4], 1000, 3), RKV_ERR_CORRUPT);
    IS(rkv_store_read_to_pool(s, slot[1], pool, b[4], 1001, 4), RKV_ERR_CORRUPT);
    expect_block(pool, b[4], zero);
    /* overwrite a slot with another block */
    OK(rkv_store_write_from_pool(s, slot[0], pool, b[3], 77, 3));
    OK(rkv_store_read_to_pool(s, slot[0], pool, b[4], 77, 3));
    expect_block(pool, b[4], want[3]);
    CHECK(s);
    rkv_store_destroy(s);
    rkv_pool_destroy(pool);
}

#ifdef FAKE_CUDA_NODEVICE
/* The pinned path through a backend's host_alloc (the fake one hands out
 * aligned memory), and the fallback when no backend loads. */
Test(store, pinned_through_backend)
{
    rkv_pool *pool = make_pool(2, 2);
    size_t bb = rkv_pool_bytes_per_block(pool);
    rkv_store_config c = tu_store_config(RKV_MEDIUM_HOST, 3, bb, NULL);
    rkv_store *s = NULL;
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", FAKE_CUDA_NODEVICE, 1), 0);
    OK(rkv_store_create(&c, &s));
    CHECK(s);
    cr_assert_eq(rkv_store_pinned(s), 1);
    unsigned char want[1024];
    rkv_block_id b[2];
    uint32_t slot;
    OK(rkv_pool_alloc_n(pool, 2, b));
    fill_block(pool, b[0], 5, want);
    OK(rkv_store_slot_alloc(s, &slot));
    OK(rkv_store_write_from_pool(s, slot, pool, b[0], 9, 9));
    OK(rkv_store_read_to_pool(s, slot, pool, b[1], 9, 9));
    expect_block(pool, b[1], want);
    CHECK(s);
    c.pinned = 0;
    s = remake(s, &c);
    cr_assert_eq(rkv_store_pinned(s), 0);
    rkv_store_destroy(s);
    c.pinned = 1;
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", "/nonexistent/libradixkv_cuda.so.0", 1), 0);
    OK(rkv_store_create(&c, &s)); /* no backend: aligned memory */
    cr_assert_eq(rkv_store_pinned(s), 0);
    CHECK(s);
    rkv_store_destroy(s);
    cr_assert_eq(unsetenv("RKV_CUDA_BACKEND"), 0);
    rkv_pool_destroy(pool);
}
#endif

#ifdef RKV_STORE_CUDA_BACKEND
/* The real backend (the CUDA simulator under RKV_CUDA=SIM, a GPU under
 * RKV_CUDA=ON): pinned host memory from cudaHostAlloc, and blocks of a
 * CUDA pool through host and disk stores. Skips without a device. */
Test(store, cuda_pool_pinned_store)
{
    cr_assert_eq(setenv("RKV_CUDA_BACKEND", RKV_STORE_CUDA_BACKEND, 1), 0);
    rkv_pool_config pc;
    rkv_test_kv_pool_config(&pc, 4, 2);
    pc.device = RKV_DEVICE_CUDA;
    rkv_pool *pool = NULL;
    rkv_status st = rkv_pool_create(&pc, &pool);
    if (st == RKV_ERR_NO_DEVICE || st == RKV_ERR_CUDA) {
        cr_assert_eq(unsetenv("RKV_CUDA_BACKEND"), 0);
        cr_skip_test("no CUDA device: %s", rkv_last_error());
    }
    OK(st);
    size_t bb = rkv_pool_bytes_per_block(pool);
    rkv_store_config c = tu_store_config(RKV_MEDIUM_HOST, 2, bb, NULL);
    rkv_store *h = NULL;
    OK(rkv_store_create(&c, &h));
    CHECK(h);
    cr_assert_eq(rkv_store_pinned(h), 1, "cudaHostAlloc was not used");
    char *dir = make_dir("/tmp");
    c = tu_store_config(RKV_MEDIUM_DISK, 2, bb, dir);
    rkv_store *d = NULL;
    OK(rkv_store_create(&c, &d));
    unsigned char want[1024], zero[1024] = {0};
    rkv_block_id b[3];
    uint32_t hs, ds;
    OK(rkv_pool_alloc_n(pool, 3, b));
    fill_block(pool, b[0], 1234, want);
    OK(rkv_store_slot_alloc(h, &hs));
    OK(rkv_store_slot_alloc(d, &ds));
    OK(rkv_store_write_from_pool(h, hs, pool, b[0], 5, 6));
    OK(rkv_store_write_from_pool(d, ds, pool, b[0], 5, 6));
    OK(rkv_pool_copy_from_host(pool, 1, &b[1], zero));
    OK(rkv_store_read_to_pool(h, hs, pool, b[1], 5, 6));
    expect_block(pool, b[1], want);
    OK(rkv_store_read_to_pool(d, ds, pool, b[2], 5, 6));
    expect_block(pool, b[2], want);
    CHECK(h);
    CHECK(d);
    rkv_store_destroy(h);
    rkv_store_destroy(d);
    rkv_pool_destroy(pool);
    remove_dir(dir);
    cr_assert_eq(unsetenv("RKV_CUDA_BACKEND"), 0);
}
#endif

/* ---- disk ------------------------------------------------------------------ */

static rkv_store *make_disk_io(const char *path, uint64_t cap, size_t bb, int direct,
                               int uring)
{
    rkv_store_config c = tu_store_config(RKV_MEDIUM_DISK, cap, bb, path);
    c.direct_io = direct;
    c.io_uring = uring;
    rkv_store *s = NULL;
    OK(rkv_store_create(&c, &s));
    CHECK(s);
    if (!uring)
        cr_assert_eq(rkv_store_io_uring(s), 0);
#ifndef RKV_HAVE_IO_URING
    cr_assert_eq(rkv_store_io_uring(s), 0);
#endif
    return s;
}

static rkv_store *make_disk(const char *path, uint64_t cap, size_t bb, int direct)
{
    return make_disk_io(path, cap, bb, direct, 1);
}

static void disk_roundtrip(const char *base, int direct, int uring)
{
    char *dir = make_dir(base);
    rkv_pool *pool = make_pool(8, 2);
    size_t bb = rkv_pool_bytes_per_block(pool);
    rkv_store *s = make_disk_io(dir, 4, bb, direct, uring);
    char want_path[4096];
    snprintf(want_path, sizeof want_path, "%s/radixkv-tier.blocks", dir);
    cr_assert_str_eq(rkv_store_path(s), want_path);
    struct stat st;
    cr_assert_eq(stat(want_path, &st), 0);
    cr_assert_eq((size_t)st.st_size, 4096 + 4 * rkv_record_bytes(bb));
    if (!direct)
        cr_assert_eq(rkv_store_direct_io(s), 0);
    rkv_store_info info;
    OK(rkv_store_get_info(s, &info));
    cr_assert_eq(info.medium, RKV_MEDIUM_DISK);
    cr_assert_eq(info.capacity_blocks, 4);
    cr_assert_eq(info.block_bytes, bb);
    cr_assert_eq(info.direct_io, rkv_store_direct_io(s));
    cr_assert_eq(info.io_uring, rkv_store_io_uring(s));
    cr_assert_str_eq(info.path, want_path);
    cr_assert_eq(info.file_bytes, (uint64_t)st.st_size);
    cr_assert_eq(info.writes, 0);
    cr_log_info("disk store on %s: %s, %s", base,
                rkv_store_direct_io(s) ? "O_DIRECT" : "buffered",
                rkv_store_io_uring(s) ? "io_uring" : "pread/pwrite");
    unsigned char want[4][1024], zero[1024] = {0};
    rkv_block_id b[8];
    uint32_t slot[4];
    OK(rkv_pool_alloc_n(pool, 8, b));
    for (int i = 0; i < 4; i++) {
        fill_block(pool, b[i], 200 + (uint64_t)i, want[i]);
        OK(rkv_store_slot_alloc(s, &slot[i]));
        OK(rkv_store_write_from_pool(s, slot[i], pool, b[i], 50 + (uint64_t)i, 2));
        CHECK(s);
    }
    for (int i = 3; i >= 0; i--) {
        OK(rkv_pool_copy_from_host(pool, 1, &b[4 + i], zero));
        OK(rkv_store_read_to_pool(s, slot[i], pool, b[4 + i], 50 + (uint64_t)i, 2));
        CHECK(s);
        expect_block(pool, b[4 + i], want[i]);
    }
    OK(rkv_store_get_info(s, &info));
    cr_assert_eq(info.writes, 4);
    cr_assert_eq(info.reads, 4);
    cr_assert_eq(info.used_blocks, 4);
    IS(rkv_store_read_to_pool(s, slot[2], pool, b[4], 52, 3), RKV_ERR_CORRUPT);
    /* the file is the store's: a second store on it is refused */
    rkv_store_config c = tu_store_config(RKV_MEDIUM_DISK, 2, bb, dir);
    rkv_store *s2 = NULL;
    IS(rkv_store_create(&c, &s2), RKV_ERR_BUSY);
    cr_assert_null(s2);
    CHECK(s);
    rkv_store_destroy(s);
    cr_assert_neq(stat(want_path, &st), 0, "the tier file outlived its store");
    rkv_pool_destroy(pool);
    remove_dir(dir);
}

Test(store, disk_roundtrip_direct) { disk_roundtrip("/tmp", 1, 1); }
Test(store, disk_roundtrip_buffered) { disk_roundtrip("/tmp", 0, 1); }
Test(store, disk_roundtrip_direct_pread) { disk_roundtrip("/tmp", 1, 0); }
Test(store, disk_roundtrip_buffered_pread) { disk_roundtrip("/tmp", 0, 0); }

/* tmpfs: O_DIRECT is refused there on kernels before 6.6, taken after;
 * either way the store works and says which it uses. */
Test(store, disk_on_tmpfs)
{
    struct stat st;
    if (stat("/dev/shm", &st) != 0 || !S_ISDIR(st.st_mode))
        cr_skip_test("no /dev/shm");
    disk_roundtrip("/dev/shm", 1, 1);
}

/* A disk store of cap slots (direct I/O or buffered) in a fresh folder: the
 * folder itself, or with in_file its file "file.blocks"; over a pool of 4
 * blocks of 2 pages with b[0] and b[1] allocated, b[0] filled from seed
 * (its bytes in want). */
typedef struct disk_fx {
    char *dir;
    char file[4096];
    rkv_pool *pool;
    size_t bb;
    rkv_store *s;
    unsigned char want[1024];
    rkv_block_id b[2];
} disk_fx;

static void disk_open(disk_fx *f, int in_file, uint64_t cap, int direct, uint64_t seed)
{
    f->dir = make_dir("/tmp");
    snprintf(f->file, sizeof f->file, "%s/file.blocks", f->dir);
    f->pool = make_pool(4, 2);
    f->bb = rkv_pool_bytes_per_block(f->pool);
    f->s = make_disk(in_file ? f->file : f->dir, cap, f->bb, direct);
    OK(rkv_pool_alloc_n(f->pool, 2, f->b));
    fill_block(f->pool, f->b[0], seed, f->want);
}

static void disk_close(disk_fx *f)
{
    rkv_store_destroy(f->s);
    rkv_pool_destroy(f->pool);
    remove_dir(f->dir);
}

/* A filesystem that takes the O_DIRECT open but refuses the I/O: the store
 * falls back to buffered I/O and the block arrives intact. */
Test(store, direct_io_fallback_on_einval)
{
    disk_fx f;
    disk_open(&f, 0, 2, 1, 9);
    rkv_store_simulate_einval(f.s);
    uint32_t slot;
    OK(rkv_store_slot_alloc(f.s, &slot));
    OK(rkv_store_write_from_pool(f.s, slot, f.pool, f.b[0], 1, 1));
    cr_assert_eq(rkv_store_direct_io(f.s), 0, "still O_DIRECT after EINVAL");
    CHECK(f.s);
    OK(rkv_store_read_to_pool(f.s, slot, f.pool, f.b[1], 1, 1));
    expect_block(f.pool, f.b[1], f.want);
    disk_close(&f);
}

static void poke_byte(const char *path, off_t off, unsigned char x)
{
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    unsigned char c;
    cr_assert_eq(pread(fd, &c, 1, off), 1);
    c ^= x;
    cr_assert_eq(pwrite(fd, &c, 1, off), 1);
    cr_assert_eq(fsync(fd), 0);
    close(fd);
}

/* Flip a byte of a record (payload, then header): a miss with a message,
 * never other bytes; flipped back, the record reads again. */
Test(store, disk_corrupted_record)
{
    disk_fx f;
    disk_open(&f, 1, 3, 1, 31);
    cr_assert_str_eq(rkv_store_path(f.s), f.file);
    unsigned char zero[1024] = {0};
    uint32_t slot[2];
    OK(rkv_store_slot_alloc(f.s, &slot[0]));
    OK(rkv_store_slot_alloc(f.s, &slot[1]));
    OK(rkv_store_write_from_pool(f.s, slot[1], f.pool, f.b[0], 0xabc, 5));
    off_t rec = 4096 + (off_t)slot[1] * (off_t)rkv_record_bytes(f.bb);
    const off_t where[] = {RKV_REC_HEADER + 100, RKV_REC_HEADER + (off_t)f.bb - 1, 0, 8, 16,
                           24, 40, 48, 60};
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        poke_byte(f.file, rec + where[i], 0x20);
        OK(rkv_pool_copy_from_host(f.pool, 1, &f.b[1], zero));
        IS(rkv_store_read_to_pool(f.s, slot[1], f.pool, f.b[1], 0xabc, 5), RKV_ERR_CORRUPT);
        cr_log_info("offset %lld: %s", (long long)where[i], rkv_last_error());
        cr_assert(strstr(rkv_last_error(), f.file) != NULL, "message names the file");
        CHECK(f.s);
        cr_assert_eq(rkv_store_used_blocks(f.s), 2);
        poke_byte(f.file, rec + where[i], 0x20);
        OK(rkv_store_read_to_pool(f.s, slot[1], f.pool, f.b[1], 0xabc, 5));
        expect_block(f.pool, f.b[1], f.want);
    }
    /* a record moved to another slot'f.s place is refused too */
    OK(rkv_store_write_from_pool(f.s, slot[0], f.pool, f.b[0], 0xabc, 5));
    int fd = open(f.file, O_RDWR);
    size_t rb = rkv_record_bytes(f.bb);
    unsigned char *tmp = malloc(rb);
    cr_assert_eq(pread(fd, tmp, rb, 4096 + (off_t)slot[0] * (off_t)rb), (ssize_t)rb);
    cr_assert_eq(pwrite(fd, tmp, rb, rec), (ssize_t)rb);
    fsync(fd);
    close(fd);
    free(tmp);
    IS(rkv_store_read_to_pool(f.s, slot[1], f.pool, f.b[1], 0xabc, 5), RKV_ERR_CORRUPT);
    disk_close(&f);
}

/* A record verifies only against all of its identity: each field of
 * (slot, hash, namespace, block size) that differs alone is refused, with
 * a message naming what the record holds. The namespace matters on its
 * own: two namespaces may hold the same page hash (a caller-given hash, or
 * an attacker's record). */
Test(store, record_verify_refuses_each_field_alone)
{
    enum { BB = 256 };
    size_t rb = rkv_record_bytes(BB);
    cr_assert_geq(rb, RKV_REC_HEADER + BB);
    unsigned char *rec = calloc(1, rb);
    cr_assert_not_null(rec);
    for (size_t i = 0; i < BB; i++)
        rec[RKV_REC_HEADER + i] = (unsigned char)(i * 7 + 1);
    rkv_record_seal(rec, 3, 0xfeedull, 5, BB, NULL);
    OK(rkv_record_verify(rec, rb, 3, 0xfeedull, 5, BB, NULL, "rec"));
    IS(rkv_record_verify(rec, rb, 3, 0xfeedull, 6, BB, NULL, "rec"), RKV_ERR_CORRUPT);
    cr_assert(strstr(rkv_last_error(), "namespace 5") != NULL, "%s", rkv_last_error());
    IS(rkv_record_verify(rec, rb, 3, 0xfeedull, 0, BB, NULL, "rec"), RKV_ERR_CORRUPT);
    IS(rkv_record_verify(rec, rb, 3, 0xfeefull, 5, BB, NULL, "rec"), RKV_ERR_CORRUPT);
    IS(rkv_record_verify(rec, rb, 4, 0xfeedull, 5, BB, NULL, "rec"), RKV_ERR_CORRUPT);
    IS(rkv_record_verify(rec, rb, 3, 0xfeedull, 5, BB - 1, NULL, "rec"), RKV_ERR_CORRUPT);
    IS(rkv_record_verify(rec, RKV_REC_HEADER + BB - 1, 3, 0xfeedull, 5, BB, NULL, "rec"),
       RKV_ERR_CORRUPT); /* one byte short */
    /* a record sealed for namespace 6 (same slot, hash and payload) is not
     * namespace 5's */
    rkv_record_seal(rec, 3, 0xfeedull, 6, BB, NULL);
    IS(rkv_record_verify(rec, rb, 3, 0xfeedull, 5, BB, NULL, "rec"), RKV_ERR_CORRUPT);
    OK(rkv_record_verify(rec, rb, 3, 0xfeedull, 6, BB, NULL, "rec"));
    free(rec);
}

/* The same through a disk store: a well-formed record (valid checksums)
 * rewritten in place for another namespace is refused at the read, and
 * the store is unchanged. */
Test(store, disk_record_of_another_namespace_refused)
{
    disk_fx f;
    disk_open(&f, 1, 2, 0, 77);
    uint32_t slot;
    OK(rkv_store_slot_alloc(f.s, &slot));
    OK(rkv_store_write_from_pool(f.s, slot, f.pool, f.b[0], 0xabc, 5));
    size_t rb = rkv_record_bytes(f.bb);
    off_t at = 4096 + (off_t)slot * (off_t)rb;
    unsigned char *rec = malloc(rb);
    cr_assert_not_null(rec);
    int fd = open(f.file, O_RDWR);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, rec, rb, at), (ssize_t)rb);
    OK(rkv_record_verify(rec, rb, slot, 0xabc, 5, f.bb, NULL, "as written"));
    rkv_record_seal(rec, slot, 0xabc, 6, f.bb, NULL); /* namespace 6, same page */
    cr_assert_eq(pwrite(fd, rec, rb, at), (ssize_t)rb);
    cr_assert_eq(fsync(fd), 0);
    IS(rkv_store_read_to_pool(f.s, slot, f.pool, f.b[1], 0xabc, 5), RKV_ERR_CORRUPT);
    cr_assert(strstr(rkv_last_error(), f.file) != NULL, "message names the file");
    CHECK(f.s);
    cr_assert_eq(rkv_store_used_blocks(f.s), 1);
    /* restored: it reads again */
    rkv_record_seal(rec, slot, 0xabc, 5, f.bb, NULL);
    cr_assert_eq(pwrite(fd, rec, rb, at), (ssize_t)rb);
    cr_assert_eq(fsync(fd), 0);
    close(fd);
    OK(rkv_store_read_to_pool(f.s, slot, f.pool, f.b[1], 0xabc, 5));
    expect_block(f.pool, f.b[1], f.want);
    free(rec);
    disk_close(&f);
}

Test(store, disk_truncated_file)
{
    disk_fx f;
    disk_open(&f, 0, 3, 1, 77);
    uint32_t slot[3];
    for (int i = 0; i < 3; i++) {
        OK(rkv_store_slot_alloc(f.s, &slot[i]));
        OK(rkv_store_write_from_pool(f.s, slot[i], f.pool, f.b[0], 10 + (uint64_t)i, 1));
    }
    size_t rb = rkv_record_bytes(f.bb);
    /* cut inside the last record'f.s payload */
    cr_assert_eq(truncate(rkv_store_path(f.s), 4096 + 2 * (off_t)rb + RKV_REC_HEADER + 10), 0);
    IS(rkv_store_read_to_pool(f.s, slot[2], f.pool, f.b[1], 12, 1), RKV_ERR_CORRUPT);
    cr_assert(strstr(rkv_last_error(), "short read") != NULL, "%s", rkv_last_error());
    /* the records before the cut are intact */
    OK(rkv_store_read_to_pool(f.s, slot[1], f.pool, f.b[1], 11, 1));
    expect_block(f.pool, f.b[1], f.want);
    /* cut before it: nothing there at all */
    cr_assert_eq(truncate(rkv_store_path(f.s), 4096 + 2 * (off_t)rb), 0);
    IS(rkv_store_read_to_pool(f.s, slot[2], f.pool, f.b[1], 12, 1), RKV_ERR_CORRUPT);
    CHECK(f.s);
    disk_close(&f);
}

Test(store, disk_refuses_foreign_file)
{
    char *dir = make_dir("/tmp");
    char file[4096];
    snprintf(file, sizeof file, "%s/file.blocks", dir);
    FILE *f = fopen(file, "w");
    fputs("precious user data\n", f);
    fclose(f);
    rkv_store_config c = tu_store_config(RKV_MEDIUM_DISK, 2, 4096, file);
    rkv_store *s = NULL;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    struct stat st;
    cr_assert_eq(stat(file, &st), 0);
    cr_assert_eq(st.st_size, 19, "the file was touched");
    /* an empty file is taken when no one else may read it (and left in
     * place: tier did not make it); tests/test_store_file.c has the rest */
    f = fopen(file, "w");
    fclose(f);
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert_eq(chmod(file, 0600), 0);
    OK(rkv_store_create(&c, &s));
    CHECK(s);
    rkv_store_destroy(s);
    cr_assert_eq(stat(file, &st), 0);
    /* ... and now holds tier's header: a new store takes it again */
    OK(rkv_store_create(&c, &s));
    rkv_store_destroy(s);
    remove_dir(dir);
}

/* The largest capacity (2^32 - 2 slots, what `radixkv replay
 * --host-capacity-tokens 68719476704` asks for at 16 tokens a page) costs
 * no memory until pages arrive: the slot table grows with the slots handed
 * out, and a detach starts it over. */
static void huge_capacity(int medium)
{
    const uint64_t cap = UINT32_MAX - 1u;
    rkv_store *s = make_store(medium, cap, 0, NULL);
    cr_assert_leq(rkv_store_table_bytes(s), 1u << 20, "%zu bytes of slot table at create",
                  rkv_store_table_bytes(s));
    rkv_pool *pool = make_pool(2, 0);
    rkv_block_id b;
    OK(rkv_pool_alloc(pool, &b));
    int owner;
    OK(rkv_store_attach(s, &owner));
    const uint32_t n = 100000;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t slot;
        OK(rkv_store_slot_alloc(s, &slot));
        cr_assert_eq(slot, i, "slots are handed out in order");
        OK(rkv_store_write_from_pool(s, slot, pool, b, 1000 + i, 1));
    }
    CHECK(s);
    cr_assert_eq(rkv_store_used_blocks(s), n);
    cr_assert_eq(rkv_store_free_slots(s), cap - n);
    cr_assert_eq(rkv_store_slot_span(s), n);
    /* 24 bytes a slot handed out, at most twice that after doubling */
    cr_assert_leq(rkv_store_table_bytes(s), 2u * 24u * n + (1u << 20), "%zu bytes",
                  rkv_store_table_bytes(s));
    for (uint32_t i = 0; i < n; i += 997)
        OK(rkv_store_read_to_pool(s, i, pool, b, 1000 + i, 1));
    /* freed slots are handed out again first, last freed first */
    OK(rkv_store_slot_free(s, 5));
    OK(rkv_store_slot_free(s, 77));
    uint32_t slot;
    OK(rkv_store_slot_alloc(s, &slot));
    cr_assert_eq(slot, 77);
    OK(rkv_store_slot_alloc(s, &slot));
    cr_assert_eq(slot, 5);
    OK(rkv_store_slot_alloc(s, &slot));
    cr_assert_eq(slot, n);
    IS(rkv_store_slot_free(s, n + 1), RKV_ERR_STATE); /* never handed out */
    IS(rkv_store_slot_free(s, (uint32_t)cap), RKV_ERR_STATE); /* out of range */
    cr_assert(!rkv_store_slot_holds(s, n + 1, 0, 0));
    IS(rkv_store_read_to_pool(s, n + 1, pool, b, 0, 0), RKV_ERR_STATE);
    CHECK(s);
    rkv_store_detach(s, &owner);
    CHECK(s);
    cr_assert_eq(rkv_store_used_blocks(s), 0);
    cr_assert_eq(rkv_store_slot_span(s), 0);
    OK(rkv_store_slot_alloc(s, &slot));
    cr_assert_eq(slot, 0);
    cr_assert(!rkv_store_slot_holds(s, 0, 1000, 1), "a detached slot kept its record");
    CHECK(s);
    rkv_store_destroy(s);
    rkv_pool_destroy(pool);
}

ON_BOTH_MEDIA(huge_capacity)

/* host <-> disk copies keep bytes, hash and namespace; mismatches refuse */
Test(store, copy_slot_host_disk)
{
    disk_fx f;
    disk_open(&f, 0, 3, 1, 4242);
    rkv_store *d = f.s;
    rkv_store *h = make_store(RKV_MEDIUM_HOST, 3, f.bb, NULL);
    rkv_store *meta = make_store(RKV_MEDIUM_HOST, 3, 0, NULL);
    unsigned char zero[1024] = {0};
    uint32_t hs, ds, ds2, hs2, ms;
    OK(rkv_store_slot_alloc(h, &hs));
    OK(rkv_store_slot_alloc(h, &hs2));
    OK(rkv_store_slot_alloc(d, &ds));
    OK(rkv_store_slot_alloc(d, &ds2));
    OK(rkv_store_slot_alloc(meta, &ms));
    OK(rkv_store_write_from_pool(h, hs, f.pool, f.b[0], 0xfeed, 11));
    OK(rkv_store_copy_slot(d, ds, h, hs, 0xfeed, 11)); /* host -> disk */
    CHECK(d);
    OK(rkv_store_copy_slot(d, ds2, d, ds, 0xfeed, 11)); /* disk -> disk, same file */
    CHECK(d);
    OK(rkv_store_copy_slot(h, hs2, d, ds2, 0xfeed, 11)); /* disk -> host */
    CHECK(h);
    OK(rkv_pool_copy_from_host(f.pool, 1, &f.b[1], zero));
    OK(rkv_store_read_to_pool(h, hs2, f.pool, f.b[1], 0xfeed, 11));
    expect_block(f.pool, f.b[1], f.want);
    OK(rkv_pool_copy_from_host(f.pool, 1, &f.b[1], zero));
    OK(rkv_store_read_to_pool(d, ds, f.pool, f.b[1], 0xfeed, 11));
    expect_block(f.pool, f.b[1], f.want);
    IS(rkv_store_copy_slot(d, ds, h, hs, 0xfeed, 12), RKV_ERR_CORRUPT);
    IS(rkv_store_copy_slot(d, ds, d, ds, 0xfeed, 11), RKV_ERR_INVALID_ARG);
    IS(rkv_store_copy_slot(meta, ms, h, hs, 0xfeed, 11), RKV_ERR_INVALID_ARG);
    IS(rkv_store_copy_slot(NULL, ms, h, hs, 0xfeed, 11), RKV_ERR_INVALID_ARG);
    IS(rkv_store_copy_slot(d, 3, h, hs, 0xfeed, 11), RKV_ERR_STATE);
    /* refused copies left the destination as it was */
    cr_assert(rkv_store_slot_holds(d, ds, 0xfeed, 11));
    CHECK(h);
    CHECK(d);
    CHECK(meta);
    rkv_store_destroy(h);
    rkv_store_destroy(meta);
    disk_close(&f);
}

/* ---- failure injection -------------------------------------------------------- */

enum { OP_WRITE, OP_READ, OP_COPY_HD, OP_COPY_DH, OP_COUNT };

typedef struct fx {
    rkv_pool *pool;
    rkv_store *host, *disk;
    rkv_block_id b[2];
    uint32_t hs[2], ds[2];
    unsigned char want[1024];
} fx;

/* Host slot 0 and disk slot 0 hold block 0xb10c of ns 3 (pool block b[0]'s
 * bytes); slot 1 of each is allocated and empty. */
static void fx_make(fx *f, const char *dir, size_t bb_kind)
{
    f->pool = make_pool(4, bb_kind ? 2 : 0);
    size_t bb = rkv_pool_bytes_per_block(f->pool);
    f->host = make_store(RKV_MEDIUM_HOST, 2, bb, NULL);
    f->disk = make_disk(dir, 2, bb, 1);
    OK(rkv_pool_alloc_n(f->pool, 2, f->b));
    if (bb)
        fill_block(f->pool, f->b[0], 99, f->want);
    for (int i = 0; i < 2; i++) {
        OK(rkv_store_slot_alloc(f->host, &f->hs[i]));
        OK(rkv_store_slot_alloc(f->disk, &f->ds[i]));
    }
    OK(rkv_store_write_from_pool(f->host, f->hs[0], f->pool, f->b[0], 0xb10c, 3));
    OK(rkv_store_write_from_pool(f->disk, f->ds[0], f->pool, f->b[0], 0xb10c, 3));
}

static void fx_free(fx *f)
{
    rkv_store_destroy(f->host);
    rkv_store_destroy(f->disk);
    rkv_pool_destroy(f->pool);
}

static rkv_status fx_op(fx *f, int op, rkv_store *s)
{
    int host = s == f->host;
    switch (op) {
    case OP_WRITE:
        return rkv_store_write_from_pool(s, host ? f->hs[1] : f->ds[1], f->pool, f->b[0],
                                         0xb10c, 3);
    case OP_READ:
        return rkv_store_read_to_pool(s, host ? f->hs[0] : f->ds[0], f->pool, f->b[1],
                                      0xb10c, 3);
    case OP_COPY_HD:
        return rkv_store_copy_slot(f->disk, f->ds[1], f->host, f->hs[0], 0xb10c, 3);
    default:
        return rkv_store_copy_slot(f->host, f->hs[1], f->disk, f->ds[0], 0xb10c, 3);
    }
}

/* The destination slot of op (NULL store for a read). */
static int fx_dst_holds(fx *f, int op, rkv_store *s)
{
    if (op == OP_WRITE)
        return rkv_store_slot_holds(s, s == f->host ? f->hs[1] : f->ds[1], 0xb10c, 3);
    if (op == OP_COPY_HD)
        return rkv_store_slot_holds(f->disk, f->ds[1], 0xb10c, 3);
    if (op == OP_COPY_DH)
        return rkv_store_slot_holds(f->host, f->hs[1], 0xb10c, 3);
    return 1;
}

/* For every operation, every store it touches and every k: the k-th I/O or
 * copy call fails with RKV_ERR_IO, the stores pass their checks, sources
 * still hold their blocks, used counts are unchanged, the destination is
 * not claimed to hold the block; disarmed, the same call succeeds and
 * moves the right bytes. Each (op, store) has at least one point. */
static void inject_all(size_t with_bytes)
{
    char *dir = make_dir("/tmp");
    for (int op = 0; op < OP_COUNT; op++) {
        for (int which = 0; which < 2; which++) {
            uint32_t fired = 0;
            for (uint32_t k = 1;; k++) {
                fx f;
                fx_make(&f, dir, with_bytes);
                rkv_store *s = which == 0 ? f.host : f.disk;
                rkv_store_fail_after(s, k);
                rkv_status st = fx_op(&f, op, s);
                if (st == RKV_OK) {
                    /* k is past this call's last point on s */
                    rkv_store_fail_after(s, 0);
                    fx_free(&f);
                    break;
                }
                IS(st, RKV_ERR_IO);
                cr_assert(strstr(rkv_last_error(), "injected") != NULL, "%s",
                          rkv_last_error());
                fired++;
                CHECK(f.host);
                CHECK(f.disk);
                cr_assert_eq(rkv_store_used_blocks(f.host), 2);
                cr_assert_eq(rkv_store_used_blocks(f.disk), 2);
                cr_assert(rkv_store_slot_holds(f.host, f.hs[0], 0xb10c, 3));
                cr_assert(rkv_store_slot_holds(f.disk, f.ds[0], 0xb10c, 3));
                if (op != OP_READ)
                    cr_assert(!fx_dst_holds(&f, op, s), "failed op claims its slot");
                /* fired once: the retry succeeds */
                OK(fx_op(&f, op, s));
                CHECK(f.host);
                CHECK(f.disk);
                cr_assert(fx_dst_holds(&f, op, s));
                if (with_bytes) {
                    rkv_store *from = f.host;
                    uint32_t slot = f.hs[0];
                    if (op == OP_WRITE || op == OP_COPY_DH) {
                        from = op == OP_WRITE ? s : f.host;
                        slot = from == f.host ? f.hs[1] : f.ds[1];
                    } else if (op == OP_COPY_HD) {
                        from = f.disk;
                        slot = f.ds[1];
                    } else {
                        from = s;
                        slot = s == f.host ? f.hs[0] : f.ds[0];
                    }
                    OK(rkv_store_read_to_pool(from, slot, f.pool, f.b[1], 0xb10c, 3));
                    expect_block(f.pool, f.b[1], f.want);
                }
                fx_free(&f);
                cr_assert_lt(k, 16, "no end to injection points");
            }
            /* tier/store.c's documented points: pool copy + commit, load +
             * pool copy, and one on each side of a copy */
            uint32_t points = op == OP_WRITE || op == OP_READ ? 2 : 1;
            cr_assert_eq(fired, points, "op %d store %d: %u injection points", op, which,
                         fired);
        }
    }
    remove_dir(dir);
}

Test(store, fail_after_every_call) { inject_all(1); }
Test(store, fail_after_every_call_metadata_only) { inject_all(0); }

/* ---- randomized differential test --------------------------------------------- */

/* Reference model of one store: per slot allocated / full and the block
 * (hash, ns) with the seed of its bytes. */
typedef struct ref_slot {
    int alloc, full;
    uint64_t hash, ns, seed;
} ref_slot;

#define RS 6 /* slots per store */
#define RB 8 /* source blocks; blocks RB..2RB-1 are read targets */

/* Random alloc / free / write / read / copy on a host and a disk store,
 * with random injected failures, against the model: every status, every
 * slot's record (slot_holds) and, with bytes, every block read back. The
 * injection schedule is the documented one (tier/store.c): write = two
 * points on the store, read = two, copy = one on src then one on dst. */
static void differential(int with_bytes, int uring)
{
    char *dir = make_dir("/tmp");
    rkv_pool *pool = make_pool(2 * RB, with_bytes ? 2 : 0);
    size_t bb = rkv_pool_bytes_per_block(pool);
    rkv_store *S[2] = {make_store(RKV_MEDIUM_HOST, RS, bb, NULL),
                       make_disk_io(dir, RS, bb, 1, uring)};
    ref_slot M[2][RS];
    memset(M, 0, sizeof M);
    rkv_block_id b[2 * RB];
    OK(rkv_pool_alloc_n(pool, 2 * RB, b));
    uint64_t bseed[RB];
    static unsigned char want[1024], got[1024];
    rkv_rng r;
    rkv_rng_init(&r, rkv_test_seed(with_bytes ? "store.differential"
                                              : "store.differential_metadata"));
    for (int i = 0; i < RB; i++) {
        bseed[i] = rkv_rng_next(&r);
        if (with_bytes)
            fill_block(pool, b[i], bseed[i], want);
    }
    uint64_t iters = rkv_test_scaled(with_bytes ? 10000 : 100000);
    for (uint64_t it = 0; it < iters; it++) {
        int op = (int)rkv_rng_below(&r, 6);
        int si = (int)rkv_rng_below(&r, 2), sj = (int)rkv_rng_below(&r, 2);
        uint32_t slot = (uint32_t)rkv_rng_below(&r, RS);
        uint32_t slot2 = (uint32_t)rkv_rng_below(&r, RS);
        /* a small set of (hash, ns) so that reads sometimes match */
        uint64_t hash = rkv_rng_below(&r, 4), ns = rkv_rng_below(&r, 2);
        /* injection: store `armed` fails at its k-th point of this op */
        int armed = rkv_rng_below(&r, 5) == 0 ? (int)rkv_rng_below(&r, 2) : -1;
        uint32_t k = (uint32_t)rkv_rng_below(&r, 3) + 1;
        if (armed >= 0)
            rkv_store_fail_after(S[armed], k);
        rkv_status st;
        ref_slot *m = &M[si][slot];
        if (op == 0) {
            st = rkv_store_slot_alloc(S[si], &slot);
            int any = 0;
            for (int i = 0; i < RS; i++)
                any |= !M[si][i].alloc;
            if (!any) {
                IS(st, RKV_ERR_NO_SPACE);
            } else {
                OK(st);
                cr_assert(!M[si][slot].alloc, "slot %u given twice", slot);
                memset(&M[si][slot], 0, sizeof(ref_slot));
                M[si][slot].alloc = 1;
            }
        } else if (op == 1) {
            st = rkv_store_slot_free(S[si], slot);
            if (!m->alloc) {
                IS(st, RKV_ERR_STATE);
            } else {
                OK(st);
                memset(m, 0, sizeof *m);
            }
        } else if (op == 2 || op == 3) { /* write */
            int src = (int)rkv_rng_below(&r, RB);
            st = rkv_store_write_from_pool(S[si], slot, pool, b[src], hash, ns);
            if (!m->alloc) {
                IS(st, RKV_ERR_STATE);
            } else if (armed == si && k <= 2) { /* both points are on S[si] */
                IS(st, RKV_ERR_IO);
                m->full = 0;
            } else {
                OK(st);
                m->full = 1;
                m->hash = hash;
                m->ns = ns;
                m->seed = bseed[src];
            }
        } else if (op == 4) { /* read, expecting a random (hash, ns) */
            int dst = RB + (int)rkv_rng_below(&r, RB);
            st = rkv_store_read_to_pool(S[si], slot, pool, b[dst], hash, ns);
            if (!m->alloc) {
                IS(st, RKV_ERR_STATE);
            } else if (!m->full || m->hash != hash || m->ns != ns) {
                IS(st, RKV_ERR_CORRUPT); /* refused before any injection point */
            } else if (armed == si && k <= 2) {
                IS(st, RKV_ERR_IO);
            } else {
                OK(st);
                if (with_bytes) {
                    rkv_rng g;
                    rkv_rng_init(&g, m->seed);
                    for (size_t i = 0; i < bb; i++)
                        want[i] = (unsigned char)rkv_rng_next(&g);
                    OK(rkv_pool_copy_to_host(pool, 1, &b[dst], got));
                    cr_assert(memcmp(got, want, bb) == 0, "it %llu: wrong bytes",
                              (unsigned long long)it);
                }
            }
        } else { /* copy S[si][slot] -> S[sj][slot2] with the slot's own id */
            ref_slot *d = &M[sj][slot2];
            uint64_t h = m->full && rkv_rng_below(&r, 4) ? m->hash : hash;
            uint64_t n = m->full && rkv_rng_below(&r, 4) ? m->ns : ns;
            st = rkv_store_copy_slot(S[sj], slot2, S[si], slot, h, n);
            /* points: 1 = src load, 2 = dst commit (counted per store) */
            int fail_load = armed == si && k == 1;
            int fail_commit = armed == sj && (si == sj ? k == 2 : k == 1);
            if (si == sj && slot == slot2) {
                IS(st, RKV_ERR_INVALID_ARG);
            } else if (!m->alloc) {
                IS(st, RKV_ERR_STATE);
            } else if (!m->full || m->hash != h || m->ns != n) {
                IS(st, RKV_ERR_CORRUPT);
            } else if (!d->alloc) {
                IS(st, RKV_ERR_STATE);
            } else if (fail_load) {
                IS(st, RKV_ERR_IO);
            } else if (fail_commit) {
                IS(st, RKV_ERR_IO);
                d->full = 0;
            } else {
                OK(st);
                uint64_t seed = m->seed;
                d->full = 1;
                d->hash = h;
                d->ns = n;
                d->seed = seed;
            }
        }
        rkv_store_fail_after(S[0], 0);
        rkv_store_fail_after(S[1], 0);
        for (int s = 0; s < 2; s++) {
            CHECK(S[s]);
            uint32_t used = 0;
            for (uint32_t i = 0; i < RS; i++) {
                used += (uint32_t)M[s][i].alloc;
                int holds = M[s][i].full;
                cr_assert_eq(rkv_store_slot_holds(S[s], i, M[s][i].hash, M[s][i].ns),
                             holds, "it %llu store %d slot %u", (unsigned long long)it, s,
                             i);
            }
            cr_assert_eq(rkv_store_used_blocks(S[s]), used);
        }
    }
    rkv_store_destroy(S[0]);
    rkv_store_destroy(S[1]);
    rkv_pool_destroy(pool);
    remove_dir(dir);
}

Test(store, differential) { differential(1, 1); }
Test(store, differential_pread) { differential(1, 0); }
Test(store, differential_metadata_only) { differential(0, 1); }

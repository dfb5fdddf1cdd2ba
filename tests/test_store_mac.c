/*
 * tests/test_store_mac.c -- the disk store's keyed mode (rkv_store_config
 * .mac_key): a record rewritten by someone who can write the file but has
 * not the key is a miss, however its fields and checksums were made.
 *
 * The attacker in these tests rewrites one record of a live store's file
 * with the codec itself (tier/disk_record.h): new KV bytes, the same slot,
 * hash and namespace, and then checksums recomputed (what defeats an
 * unkeyed store), the old MAC kept, a MAC under another key, or a record
 * made for another file under the same key. The unkeyed store is shown
 * to take the first forgery -- the limit tier/README.md states.
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
#include "tier/disk_record.h"
#include "tier/store.h"
#include "radixkv.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())
#define IS(expr, st) cr_assert_eq((expr), (st), "%s gave %d (%s), expected %s", #expr, \
                                  (int)(expr), rkv_last_error(), #st)

#define HASH 0x5eedull
#define NS 3u

typedef struct fx {
    char dir[64];
    rkv_pool *pool;
    size_t bb, rb;
    rkv_block_id b[2];
    unsigned char *want, *rec;
} fx;

static void fx_init(fx *f)
{
    strcpy(f->dir, "/tmp/rkv-mac-XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    rkv_pool_config pc;
    rkv_test_kv_pool_config(&pc, 2, 2);
    OK(rkv_pool_create(&pc, &f->pool));
    f->bb = rkv_pool_bytes_per_block(f->pool);
    f->rb = rkv_record_bytes(f->bb);
    OK(rkv_pool_alloc_n(f->pool, 2, f->b));
    f->want = malloc(f->bb);
    f->rec = malloc(f->rb);
    for (size_t i = 0; i < f->bb; i++)
        f->want[i] = (unsigned char)(i * 7u + 1u);
    OK(rkv_pool_copy_from_host(f->pool, 1, &f->b[0], f->want));
}

static void fx_free(fx *f)
{
    rkv_pool_destroy(f->pool);
    free(f->want);
    free(f->rec);
    cr_assert_eq(rmdir(f->dir), 0, "the stores left files in %s", f->dir);
}

static rkv_store *disk(fx *f, const unsigned char *key, const char *sub)
{
    char path[128];
    snprintf(path, sizeof path, "%s%s", f->dir, sub);
    if (sub[0] != '\0')
        cr_assert_eq(mkdir(path, 0700), 0);
    rkv_store_config c = tu_store_config(RKV_MEDIUM_DISK, 2, f->bb, path);
    c.mac_key = key;
    rkv_store *s = NULL;
    OK(rkv_store_create(&c, &s));
    return s;
}

static void rec_io(rkv_store *s, uint32_t slot, unsigned char *rec, size_t rb, int write)
{
    int fd = open(rkv_store_path(s), O_RDWR);
    cr_assert_geq(fd, 0);
    off_t off = RKV_REC_ALIGN + (off_t)slot * (off_t)rb;
    ssize_t r = write ? pwrite(fd, rec, rb, off) : pread(fd, rec, rb, off);
    cr_assert_eq(r, (ssize_t)rb);
    cr_assert_eq(fsync(fd), 0);
    close(fd);
}

/* The block read back from slot 0 into b[1]: RKV_OK with the original
 * bytes, or an error (the device block's content is then undefined). */
static rkv_status read_back(fx *f, rkv_store *s)
{
    static const unsigned char zero[4096];
    OK(rkv_pool_copy_from_host(f->pool, 1, &f->b[1], zero));
    return rkv_store_read_to_pool(s, 0, f->pool, f->b[1], HASH, NS);
}

static int reads_original(fx *f)
{
    unsigned char *got = malloc(f->bb);
    OK(rkv_pool_copy_to_host(f->pool, 1, &f->b[1], got));
    int same = memcmp(got, f->want, f->bb) == 0;
    free(got);
    return same;
}

/* Slot 0 holds the block (HASH, NS); f->rec gets its record as written. */
static void store_block(fx *f, rkv_store *s)
{
    uint32_t slot;
    OK(rkv_store_slot_alloc(s, &slot));
    cr_assert_eq(slot, 0);
    OK(rkv_store_write_from_pool(s, 0, f->pool, f->b[0], HASH, NS));
    rec_io(s, 0, f->rec, f->rb, 0);
}

/* The forgery: other KV under the same identity, checksums recomputed. */
static void forge_xxh3(fx *f, unsigned char *rec)
{
    memcpy(rec, f->rec, f->rb);
    for (size_t i = 0; i < f->bb; i++)
        rec[RKV_REC_HEADER + i] ^= 0x5a;
    rkv_record_seal(rec, 0, HASH, NS, f->bb, NULL);
}

/* Without a key the forgery is a hit that returns the forged bytes: the
 * checksums detect accidents, not tampering. */
Test(store_mac, unkeyed_store_takes_a_forgery)
{
    fx f;
    fx_init(&f);
    rkv_store *s = disk(&f, NULL, "");
    store_block(&f, s);
    unsigned char *forged = malloc(f.rb);
    forge_xxh3(&f, forged);
    rec_io(s, 0, forged, f.rb, 1);
    OK(read_back(&f, s));
    cr_assert(!reads_original(&f), "the forged bytes were expected to load");
    free(forged);
    rkv_store_destroy(s);
    fx_free(&f);
}

Test(store_mac, keyed_forgeries_are_misses)
{
    unsigned char key[RKV_STORE_MAC_KEY_BYTES], other_key[RKV_STORE_MAC_KEY_BYTES];
    tu_mac_key(key, 0xa0);
    tu_mac_key(other_key, 0x10);
#ifndef RKV_HAVE_SODIUM
    /* built without libsodium: a key is refused, never ignored */
    rkv_store_config c = tu_store_config(RKV_MEDIUM_DISK, 2, 4096, "/tmp");
    c.mac_key = key;
    rkv_store *none = NULL;
    IS(rkv_store_create(&c, &none), RKV_ERR_UNSUPPORTED);
    cr_assert_null(none);
    (void)other_key;
    cr_skip_test("built without libsodium (RKV_SODIUM=OFF)");
#endif
    fx f;
    fx_init(&f);
    rkv_store *s = disk(&f, key, "");
    memset(key, 0, sizeof key); /* the store keeps its own copy */
    rkv_store_info info;
    OK(rkv_store_get_info(s, &info));
    cr_assert_eq(info.keyed, 1);
    store_block(&f, s);
    OK(read_back(&f, s));
    cr_assert(reads_original(&f));
    unsigned char *forged = malloc(f.rb);

    /* 1. checksums recomputed (an unkeyed record) */
    forge_xxh3(&f, forged);
    rec_io(s, 0, forged, f.rb, 1);
    IS(read_back(&f, s), RKV_ERR_CORRUPT);
    cr_log_info("recomputed checksums: %s", rkv_last_error());

    /* 2. new KV under the old MAC */
    memcpy(forged, f.rec, f.rb);
    forged[RKV_REC_HEADER + 5] ^= 1;
    rec_io(s, 0, forged, f.rb, 1);
    IS(read_back(&f, s), RKV_ERR_CORRUPT);

    /* 3. a MAC under another key */
    rkv_record_auth other;
    memcpy(other.key, other_key, sizeof other.key);
    memset(other.file_id, 0, sizeof other.file_id);
    memcpy(forged, f.rec, f.rb);
    forged[RKV_REC_HEADER + 5] ^= 1;
    rkv_record_seal(forged, 0, HASH, NS, f.bb, &other);
    rec_io(s, 0, forged, f.rb, 1);
    IS(read_back(&f, s), RKV_ERR_CORRUPT);

    /* 4. a record another store made under the same key, same slot and
     * identity, other KV: made for another file */
    tu_mac_key(key, 0xa0);
    rkv_store *s2 = disk(&f, key, "/second");
    unsigned char *keep = malloc(f.bb);
    memcpy(keep, f.want, f.bb);
    for (size_t i = 0; i < f.bb; i++)
        f.want[i] ^= 0x33;
    OK(rkv_pool_copy_from_host(f.pool, 1, &f.b[0], f.want));
    unsigned char *rec1 = malloc(f.rb);
    memcpy(rec1, f.rec, f.rb);
    store_block(&f, s2); /* f.rec: s2's record */
    rec_io(s, 0, f.rec, f.rb, 1);
    IS(read_back(&f, s), RKV_ERR_CORRUPT);
    memcpy(f.want, keep, f.bb);
    memcpy(f.rec, rec1, f.rb);

    /* the genuine record, put back, loads again */
    rec_io(s, 0, f.rec, f.rb, 1);
    OK(read_back(&f, s));
    cr_assert(reads_original(&f));
    OK(rkv_store_check(s));
    free(forged);
    free(keep);
    free(rec1);
    rkv_store_destroy(s);
    rkv_store_destroy(s2);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/second", f.dir);
    cr_assert_eq(rmdir(sub), 0);
    fx_free(&f);
}

/* The key belongs to disk stores; a host store given one is refused. */
Test(store_mac, key_only_for_disk)
{
    static const unsigned char key[RKV_STORE_MAC_KEY_BYTES] = {1};
    rkv_store_config c;
    rkv_store_config_init(&c, RKV_MEDIUM_HOST);
    cr_assert_null(c.mac_key);
    c.capacity_blocks = 2;
    c.block_bytes = 4096;
    c.pinned = 0;
    c.mac_key = key;
    rkv_store *s = NULL;
    IS(rkv_store_create(&c, &s), RKV_ERR_INVALID_ARG);
    cr_assert_null(s);
}

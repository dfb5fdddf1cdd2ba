/*
 * tests/test_tier_warm.c -- warm restart of a disk tier
 * (rkv_store_config.warm_restart; tier/README.md "Warm restart";
 * residency/tier_warm.c): a tree caches prefixes, demotes them to a disk
 * store alone, stops (tree, store and pool destroyed: the file stays);
 * a new pool, tree and store on the same file re-index the records at
 * attach and the prefixes hit on the disk again, with the bytes verified
 * on load. Then what a crash or a wrong start leaves: a torn record and a
 * corrupt one are skipped and counted, their descendants dropped as
 * orphans, the rest hit; a file of another model or layout is refused
 * and left as it was; warm_restart 0 starts empty; an I/O failure
 * injected at every read of the scan costs that record only.
 * Records keep int32 ids whatever the tree's layout: a file written by a
 * 4-byte tree warm-restarts a 3-byte one (token_bytes = 3) and back, ids
 * near 2^24 that differ in one byte included, and a record holding an id a
 * 3-byte tree cannot keep (>= 2^24) is dropped there, never truncated.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "radixkv.h"
#include "tests/support/handles.h"
#include "tier/disk_record.h"
#include "tier/store.h"

#define OK(expr) cr_assert_eq((expr), RKV_OK, "%s: %s", #expr, rkv_last_error())

#ifndef P /* CMake builds this file at page 16 too (test_tier_warm_p16) */
#define P 4u
#endif
#define NSEQ 6u
#define NPG 5u
#define SHARED 2u /* pages every sequence shares */
#define NS 3u
#define PAGES (SHARED + NSEQ * (NPG - SHARED)) /* distinct pages: 20 */
#define MODEL 77u

typedef struct wenv {
    char dir[64];
    char path[96];
    uint32_t head_dim;
    rkv_pool *pool;
    rkv_tree *tree;
    rkv_store *disk;
    size_t bb;
    const unsigned char *key; /* the disk store's mac_key, or NULL */
    int host;                 /* 1: a host store above the disk         */
    int policy;               /* the tier's write policy               */
    rkv_store *hs;
} wenv;

/* The trees' token_bytes (start), and the ids of tokens_of: 0 small
 * ones; 1 near 2^24 (2^24 - 1 - the small one: neighbours differ in the
 * low byte, sequences in the middle one); 2 the same, but sequence
 * NSEQ - 1's page BIG_PAGE holds an id >= 2^24. */
static uint32_t g_tb = 4;
static int g_ids;
#define BIG_PAGE 3u

static void tokens_of(uint32_t s, int32_t *tok)
{
    for (uint32_t j = 0; j < NPG * P; j++) {
        tok[j] = j < SHARED * P ? (int32_t)(j + 1) : (int32_t)(1000 * (s + 1) + j);
        if (g_ids != 0)
            tok[j] = 0xffffff - tok[j];
        if (g_ids == 2 && s == NSEQ - 1 && j == BIG_PAGE * P + 1)
            tok[j] += 1 << 24;
    }
}

/* The chained hash of page j of sequence s. */
static uint64_t hash_of(uint32_t s, uint32_t j)
{
    int32_t tok[NPG * P];
    tokens_of(s, tok);
    uint64_t h = RKV_HASH_ROOT;
    for (uint32_t i = 0; i <= j; i++)
        h = rkv_block_hash(h, NS, tok + i * P, P);
    return h;
}

/* A page's KV bytes: a function of its chained hash. */
static void bytes_of(uint64_t h, size_t bb, unsigned char *out)
{
    for (size_t i = 0; i < bb; i++)
        out[i] = (unsigned char)(h >> (8 * (i % 8))) ^ (unsigned char)(i * 31u);
}

static rkv_status open_store(wenv *e, int warm, uint64_t model, rkv_store **out)
{
    rkv_store_config sc = tu_store_config(RKV_MEDIUM_DISK, 64, e->bb, e->dir);
    sc.warm_restart = warm;
    sc.page_tokens = P;
    sc.layout_id = rkv_pool_layout_id(e->pool);
    sc.model_id = model;
    sc.mac_key = e->key;
    return rkv_store_create(&sc, out);
}

/* Pool and tree (head_dim sets the layout); no store yet. */
static void start(wenv *e, uint32_t head_dim)
{
    rkv_pool_config pc = tu_kv_config(64, P, 1, 1, head_dim, RKV_DEVICE_HOST);
    e->head_dim = head_dim;
    OK(rkv_pool_create(&pc, &e->pool));
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.token_bytes = g_tb;
    OK(rkv_tree_create(e->pool, &tc, &e->tree));
    e->bb = rkv_pool_bytes_per_block(e->pool);
}

static void attach(wenv *e)
{
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.disk = e->disk;
    tc.write_policy = e->policy;
    if (e->host) {
        rkv_store_config hc = tu_store_config(RKV_MEDIUM_HOST, 4, e->bb, NULL);
        hc.pinned = 0;
        OK(rkv_store_create(&hc, &e->hs));
        tc.host = e->hs;
    }
    OK(rkv_tree_attach_tiers(e->tree, &tc));
    OK(rkv_tree_check(e->tree));
    OK(rkv_store_check(e->disk));
}

static void stop(wenv *e)
{
    OK(rkv_tree_check(e->tree));
    rkv_tree_destroy(e->tree);
    rkv_store_destroy(e->disk);
    rkv_store_destroy(e->hs);
    rkv_pool_destroy(e->pool);
    e->hs = NULL;
    e->tree = NULL;
    e->disk = NULL;
    e->pool = NULL;
}

static void setup(wenv *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/rkv-warm-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir));
    snprintf(e->path, sizeof e->path, "%s/radixkv-tier.blocks", e->dir);
}

static void teardown(wenv *e)
{
    (void)unlink(e->path);
    (void)rmdir(e->dir);
}

/* First life: every sequence cached with its bytes, then everything
 * demoted to the disk; stop. */
static void first_life(wenv *e)
{
    start(e, 8);
    OK(open_store(e, 1, MODEL, &e->disk));
    attach(e);
    unsigned char *buf = malloc(e->bb);
    for (uint32_t s = 0; s < NSEQ; s++) {
        int32_t tok[NPG * P];
        tokens_of(s, tok);
        rkv_block_id b[NPG];
        OK(rkv_tree_alloc_blocks(e->tree, NPG, b));
        for (uint32_t j = 0; j < NPG; j++) {
            bytes_of(hash_of(s, j), e->bb, buf);
            OK(rkv_pool_copy_from_host(e->pool, 1, &b[j], buf));
        }
        rkv_block_id dups[NPG];
        rkv_insert_result ir;
        OK(rkv_tree_insert(e->tree, NS, tok, NPG * P, b, dups, &ir));
        for (uint32_t j = 0; j < NPG; j++)
            (void)rkv_pool_unref(e->pool, b[j]);
        for (uint32_t k = 0; k < ir.num_dups; k++)
            (void)rkv_pool_unref(e->pool, dups[k]);
    }
    /* write-through: the stores queued at insert (across the splits the
     * later sequences made) run now */
    rkv_transfer_done done[8];
    uint32_t nd = 0;
    OK(rkv_tree_tier_poll(e->tree, done, 8, &nd));
    if (e->host) {
        OK(rkv_tree_tier_flush(e->tree)); /* device and host down to disk */
        cr_assert_eq(rkv_store_used_blocks(e->hs), 0);
    } else {
        uint32_t freed = 0;
        OK(rkv_tree_evict(e->tree, PAGES, &freed));
        cr_assert_eq(freed, PAGES);
    }
    cr_assert_eq(rkv_store_used_blocks(e->disk), PAGES);
    free(buf);
    stop(e);
    struct stat st;
    cr_assert_eq(stat(e->path, &st), 0, "a warm store keeps its file");
}

/* Pages of sequence s that match on the device (*dev) and, after them,
 * on the disk (returned). */
static size_t match_pages(wenv *e, uint32_t s, size_t *dev)
{
    int32_t tok[NPG * P];
    tokens_of(s, tok);
    rkv_match m;
    rkv_tier_match tm;
    OK(rkv_tree_match_tiers(e->tree, NS, tok, NPG * P, NULL, RKV_MATCH_PEEK, &m, &tm));
    if (dev != NULL)
        *dev = m.matched_tokens / P;
    return tm.lower_tokens / P;
}

/* The same before any load: nothing is on the device. */
static size_t lower_pages(wenv *e, uint32_t s)
{
    size_t dev = 0, n = match_pages(e, s, &dev);
    cr_assert_eq(dev, 0);
    return n;
}

/* Loads sequence s's lower pages and compares every byte. */
static void load_and_verify(wenv *e, uint32_t s, size_t pages)
{
    size_t dev = 0;
    cr_assert_eq(match_pages(e, s, &dev), pages, "seq %u", s);
    int32_t tok[NPG * P];
    tokens_of(s, tok);
    rkv_block_id b[NPG];
    rkv_load ld;
    OK(rkv_tree_load(e->tree, NS, tok, NPG * P, NPG, b, &ld));
    cr_assert_eq(ld.num_pages, pages);
    rkv_transfer_done done[8];
    uint32_t n = 0;
    OK(rkv_tree_tier_poll(e->tree, done, 8, &n));
    cr_assert_eq(n, 1);
    OK(done[0].status);
    unsigned char *got = malloc(e->bb), *want = malloc(e->bb);
    for (uint32_t j = 0; j < pages; j++) {
        OK(rkv_pool_copy_to_host(e->pool, 1, &b[j], got));
        bytes_of(hash_of(s, (uint32_t)dev + j), e->bb, want);
        cr_assert(memcmp(got, want, e->bb) == 0, "seq %u page %u: bytes differ", s, j);
    }
    free(got);
    free(want);
    OK(rkv_tree_unlock(e->tree, &ld.lease));
    OK(rkv_tree_check(e->tree));
}

static rkv_store_info info_of(const rkv_store *s)
{
    rkv_store_info i;
    OK(rkv_store_get_info(s, &i));
    return i;
}

/* The next life: a fresh pool and tree, the file reopened warm and
 * attached (its records rebuilt into the tree). */
/* The next life: pool, tree, the store reopened (warm restart on or off),
 * then attached; origin >= 0: the file origin the store must report before
 * it is attached. */
static void restart_as(wenv *e, int warm, int origin)
{
    start(e, 8);
    OK(open_store(e, warm, MODEL, &e->disk));
    if (origin >= 0)
        cr_assert_eq(info_of(e->disk).file_origin, origin);
    attach(e);
}

static void restart(wenv *e) { restart_as(e, 1, -1); }

/* Loads and checks every page a sequence still matches. */
static void load_all_matches(wenv *e)
{
    for (uint32_t s = 0; s < NSEQ; s++) {
        size_t n = match_pages(e, s, NULL);
        if (n > 0)
            load_and_verify(e, s, n);
    }
}

Test(tier_warm, prefixes_hit_again_after_a_restart)
{
    wenv e;
    setup(&e);
    first_life(&e);
    restart_as(&e, 1, RKV_STORE_FILE_WARM);
    rkv_store_info i = info_of(e.disk);
    cr_assert_eq(i.warm_records, PAGES);
    cr_assert_eq(i.warm_skipped, 0);
    cr_assert_eq(i.warm_dropped, 0);
    cr_assert_eq(rkv_store_used_blocks(e.disk), PAGES);
    for (uint32_t s = 0; s < NSEQ; s++)
        cr_assert_eq(lower_pages(&e, s), NPG, "seq %u", s);
    for (uint32_t s = 0; s < NSEQ; s++)
        load_and_verify(&e, s, s == 0 ? NPG : NPG - SHARED);
    stop(&e);
    teardown(&e);
}

/* Offset of the record holding hash, or -1. */
static off_t record_of(wenv *e, uint64_t hash)
{
    size_t rb = rkv_record_bytes_tok(e->bb, P);
    FILE *f = fopen(e->path, "rb");
    cr_assert_not_null(f);
    unsigned char h[24];
    off_t found = -1;
    for (uint32_t slot = 0; slot < 64 && found < 0; slot++) {
        off_t off = RKV_REC_ALIGN + (off_t)slot * (off_t)rb;
        if (fseeko(f, off, SEEK_SET) != 0 || fread(h, 1, sizeof h, f) != sizeof h)
            break;
        uint64_t v = 0;
        for (int k = 7; k >= 0; k--)
            v = (v << 8) | h[16 + k];
        if (v == hash && memcmp(h, "RKVTIER1", 8) == 0)
            found = off;
    }
    fclose(f);
    return found;
}

static void poke(wenv *e, off_t off, const void *bytes, size_t n)
{
    FILE *f = fopen(e->path, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseeko(f, off, SEEK_SET), 0);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

Test(tier_warm, torn_and_corrupt_records_are_skipped_and_counted)
{
    wenv e;
    setup(&e);
    first_life(&e);
    size_t bb = 2 * P * 8 * 2; /* the first life's block bytes */
    /* a flipped payload bit in seq 0's page 3 (its page 4 is orphaned) */
    off_t r3 = record_of(&e, hash_of(0, 3));
    cr_assert_geq(r3, 0);
    unsigned char x = 0x5a;
    poke(&e, r3 + RKV_REC_HEADER + 7, &x, 1);
    /* seq 1's last page torn: its second half never reached the disk */
    off_t r4 = record_of(&e, hash_of(1, 4));
    cr_assert_geq(r4, 0);
    unsigned char *z = calloc(1, bb);
    poke(&e, r4 + RKV_REC_HEADER + (off_t)bb / 2, z, bb / 2);
    free(z);

    restart(&e);
    rkv_store_info i = info_of(e.disk);
    cr_assert_eq(i.warm_skipped, 2);
    cr_assert_eq(i.warm_dropped, 1, "seq 0's page 4: its parent is gone");
    cr_assert_eq(i.warm_records, PAGES - 2);
    cr_assert_eq(rkv_store_used_blocks(e.disk), PAGES - 3);
    cr_assert_eq(lower_pages(&e, 0), 3);
    cr_assert_eq(lower_pages(&e, 1), 4);
    for (uint32_t s = 2; s < NSEQ; s++)
        cr_assert_eq(lower_pages(&e, s), NPG);
    load_and_verify(&e, 0, 3);
    load_and_verify(&e, 1, 4 - SHARED); /* the shared pages came with seq 0 */
    load_and_verify(&e, 2, NPG - SHARED);
    stop(&e);
    teardown(&e);
}

Test(tier_warm, a_file_of_another_model_or_layout_is_refused)
{
    wenv e;
    setup(&e);
    first_life(&e);
    struct stat before, after;
    cr_assert_eq(stat(e.path, &before), 0);
    start(&e, 8);
    rkv_store *s = NULL;
    cr_assert_eq(open_store(&e, 1, MODEL + 1, &s), RKV_ERR_INVALID_ARG);
    cr_assert_null(s);
    cr_assert(strstr(rkv_last_error(), "model_id") != NULL, "%s", rkv_last_error());
    rkv_tree_destroy(e.tree);
    rkv_pool_destroy(e.pool);
    /* another head_dim: another layout (and block size) */
    start(&e, 16);
    cr_assert_eq(open_store(&e, 1, MODEL, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "block_bytes") != NULL ||
                  strstr(rkv_last_error(), "layout_id") != NULL,
              "%s", rkv_last_error());
    rkv_tree_destroy(e.tree);
    rkv_pool_destroy(e.pool);
    cr_assert_eq(stat(e.path, &after), 0, "a refused file stays");
    cr_assert_eq(after.st_size, before.st_size);
    cr_assert_eq(after.st_mtime, before.st_mtime);
    /* the same file is still good for the right store */
    restart(&e);
    cr_assert_eq(info_of(e.disk).warm_records, PAGES);
    stop(&e);
    teardown(&e);
}

Test(tier_warm, warm_restart_off_starts_empty)
{
    wenv e;
    setup(&e);
    first_life(&e);
    restart_as(&e, 0, RKV_STORE_FILE_REUSED);
    cr_assert_eq(info_of(e.disk).warm_records, 0);
    cr_assert_eq(rkv_store_used_blocks(e.disk), 0);
    for (uint32_t s = 0; s < NSEQ; s++)
        cr_assert_eq(lower_pages(&e, s), 0);
    stop(&e);
    struct stat st;
    cr_assert_neq(stat(e.path, &st), 0, "a cold store removes the file it took over");
    teardown(&e);
}

Test(tier_warm, warm_restart_needs_page_tokens)
{
    wenv e;
    setup(&e);
    start(&e, 8);
    rkv_store_config sc = tu_store_config(RKV_MEDIUM_DISK, 4, e.bb, e.dir);
    sc.warm_restart = 1;
    rkv_store *s = NULL;
    cr_assert_eq(rkv_store_create(&sc, &s), RKV_ERR_INVALID_ARG);
    /* records of another page size than the tree's: refused at attach */
    sc.page_tokens = P * 2;
    OK(rkv_store_create(&sc, &s));
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.disk = s;
    cr_assert_eq(rkv_tree_attach_tiers(e.tree, &tc), RKV_ERR_INVALID_ARG);
    rkv_store_destroy(s);
    rkv_tree_destroy(e.tree);
    rkv_pool_destroy(e.pool);
    teardown(&e);
}

Test(tier_warm, a_failed_read_of_the_scan_costs_that_record_only)
{
    wenv e;
    setup(&e);
    first_life(&e);
    for (uint32_t k = 1; k <= PAGES + 1; k++) {
        start(&e, 8);
        OK(open_store(&e, 1, MODEL, &e.disk));
        rkv_store_fail_after(e.disk, k);
        attach(&e);
        rkv_store_fail_after(e.disk, 0); /* k past the scan: disarmed */
        rkv_store_info i = info_of(e.disk);
        uint64_t failed = k <= PAGES ? 1 : 0;
        cr_assert_eq(i.warm_skipped, failed, "k %u", k);
        cr_assert_eq(i.warm_records, PAGES - failed, "k %u", k);
        /* what is kept is what the tree holds, and it all loads */
        cr_assert_eq(rkv_store_used_blocks(e.disk), i.warm_records - i.warm_dropped);
        /* a lost record costs its page and the pages under it only: a
         * shared page at most every sequence's, else one sequence's */
        size_t hit = 0;
        for (uint32_t s = 0; s < NSEQ; s++)
            hit += lower_pages(&e, s);
        if (!failed)
            cr_assert_eq(hit, (size_t)NSEQ * NPG);
        load_all_matches(&e);
        stop(&e);
    }
    teardown(&e);
}

Test(tier_warm, keyed_file_reopens_under_its_key_only)
{
    unsigned char key[RKV_STORE_MAC_KEY_BYTES], other[RKV_STORE_MAC_KEY_BYTES];
    tu_mac_key(key, 0x40);
    tu_mac_key(other, 0x90);
#ifndef RKV_HAVE_SODIUM
    (void)other;
    cr_skip_test("built without libsodium (RKV_SODIUM=OFF)");
#endif
    wenv e;
    setup(&e);
    e.key = key;
    first_life(&e);
    start(&e, 8);
    rkv_store *s = NULL;
    e.key = other;
    cr_assert_eq(open_store(&e, 1, MODEL, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "MAC") != NULL, "%s", rkv_last_error());
    e.key = NULL;
    cr_assert_eq(open_store(&e, 1, MODEL, &s), RKV_ERR_INVALID_ARG);
    cr_assert(strstr(rkv_last_error(), "keyed") != NULL, "%s", rkv_last_error());
    e.key = key;
    OK(open_store(&e, 1, MODEL, &e.disk));
    attach(&e);
    cr_assert_eq(info_of(e.disk).warm_records, PAGES);
    for (uint32_t s2 = 0; s2 < NSEQ; s2++)
        cr_assert_eq(lower_pages(&e, s2), NPG);
    load_and_verify(&e, 0, NPG);
    load_and_verify(&e, 3, NPG - SHARED);
    stop(&e);
    teardown(&e);
}

Test(tier_warm, below_a_host_the_rebuilt_pages_are_disk_pages)
{
    wenv e;
    setup(&e);
    e.host = 1;
    first_life(&e);
    restart(&e);
    rkv_store_info i = info_of(e.disk);
    cr_assert_eq(i.warm_records, PAGES);
    cr_assert_eq(i.warm_skipped, 0);
    cr_assert_eq(i.warm_dropped, 0);
    cr_assert_eq(rkv_store_used_blocks(e.hs), 0);
    cr_assert_eq(rkv_store_used_blocks(e.disk), PAGES);
    size_t disk_pages = 0;
    for (uint32_t s = 0; s < NSEQ; s++) {
        int32_t tok[NPG * P];
        tokens_of(s, tok);
        rkv_match m;
        rkv_tier_match tm;
        OK(rkv_tree_match_tiers(e.tree, NS, tok, NPG * P, NULL, RKV_MATCH_PEEK, &m, &tm));
        cr_assert_eq(tm.host_tokens, 0);
        disk_pages += tm.disk_tokens / P;
    }
    cr_assert_eq(disk_pages, NSEQ * NPG);
    load_all_matches(&e);
    stop(&e);
    teardown(&e);
}

/* A record that verifies (checksums recomputed, as anyone who can write
 * an unkeyed file can) but whose tokens are not the page its hash names:
 * the tree must not index it under those tokens. */
Test(tier_warm, a_record_whose_tokens_do_not_hash_to_it_is_dropped)
{
    wenv e;
    setup(&e);
    first_life(&e);
    size_t bb = 2 * P * 8 * 2;
    size_t rb = rkv_record_bytes_tok(bb, P);
    off_t off = record_of(&e, hash_of(2, 4));
    cr_assert_geq(off, 0);
    unsigned char *rec = malloc(rb);
    FILE *f = fopen(e.path, "r+b");
    cr_assert_not_null(f);
    cr_assert_eq(fseeko(f, off, SEEK_SET), 0);
    cr_assert_eq(fread(rec, 1, rb, f), rb);
    int32_t tok[NPG * P];
    tokens_of(2, tok);
    tok[4 * P] += 1; /* another page under the same hash */
    rkv_record_chain ch = {hash_of(2, 3), P, tok + 4 * P};
    uint32_t slot = (uint32_t)((off - RKV_REC_ALIGN) / (off_t)rb);
    rkv_record_seal_chain(rec, slot, hash_of(2, 4), NS, bb, &ch, NULL);
    cr_assert_eq(fseeko(f, off, SEEK_SET), 0);
    cr_assert_eq(fwrite(rec, 1, rb, f), rb);
    fclose(f);
    free(rec);

    restart(&e);
    rkv_store_info i = info_of(e.disk);
    cr_assert_eq(i.warm_records, PAGES, "it verifies as a record");
    cr_assert_eq(i.warm_dropped, 1, "but not as the page its hash names");
    cr_assert_eq(lower_pages(&e, 2), NPG - 1);
    int32_t bad[NPG * P];
    tokens_of(2, bad);
    bad[4 * P] += 1;
    rkv_match m;
    rkv_tier_match tm;
    OK(rkv_tree_match_tiers(e.tree, NS, bad, NPG * P, NULL, RKV_MATCH_PEEK, &m, &tm));
    cr_assert_eq(tm.lower_tokens, (NPG - 1) * P, "the altered page does not match");
    stop(&e);
    teardown(&e);
}

/* Write-through into a disk-only tier: the records are written by queued
 * stores (at the poll after the inserts, after later inserts split the
 * nodes they were queued from) and still carry their pages' chains. */
Test(tier_warm, records_of_queued_stores_carry_their_chain)
{
    wenv e;
    setup(&e);
    e.policy = RKV_WRITE_THROUGH;
    first_life(&e);
    restart(&e);
    rkv_store_info i = info_of(e.disk);
    cr_assert_eq(i.warm_records, PAGES);
    cr_assert_eq(i.warm_dropped, 0);
    for (uint32_t s = 0; s < NSEQ; s++)
        cr_assert_eq(lower_pages(&e, s), NPG);
    load_and_verify(&e, 4, NPG);
    stop(&e);
    teardown(&e);
}

/* A file written by a tree of token_bytes `from` warm-restarts one of
 * token_bytes `to` (ids near 2^24): every record rebuilt, every prefix
 * hits and loads its bytes. */
static void across(uint32_t from, uint32_t to, int host)
{
    wenv e;
    setup(&e);
    e.host = host;
    g_ids = 1;
    g_tb = from;
    first_life(&e);
    g_tb = to;
    restart(&e);
    rkv_store_info i = info_of(e.disk);
    cr_assert_eq(i.warm_records, PAGES);
    cr_assert_eq(i.warm_skipped, 0);
    cr_assert_eq(i.warm_dropped, 0);
    for (uint32_t s = 0; s < NSEQ; s++)
        cr_assert_eq(lower_pages(&e, s), NPG, "seq %u", s);
    /* a page one id off (one byte of three) is not the cached one */
    int32_t tok[NPG * P];
    tokens_of(1, tok);
    tok[3 * P + 2] ^= 0x010000;
    rkv_match m;
    rkv_tier_match tm;
    OK(rkv_tree_match_tiers(e.tree, NS, tok, NPG * P, NULL, RKV_MATCH_PEEK, &m, &tm));
    cr_assert_eq(tm.lower_tokens, 3 * P);
    for (uint32_t s = 0; s < NSEQ; s++)
        load_and_verify(&e, s, s == 0 ? NPG : NPG - SHARED);
    /* and the pages demoted again by this tree restart the first kind */
    if (!host) {
        uint32_t freed = 0;
        OK(rkv_tree_evict(e.tree, PAGES, &freed));
        cr_assert_eq(freed, PAGES);
    } else {
        OK(rkv_tree_tier_flush(e.tree));
    }
    stop(&e);
    g_tb = from;
    restart(&e);
    i = info_of(e.disk);
    cr_assert_eq(i.warm_records, PAGES);
    cr_assert_eq(i.warm_dropped, 0);
    load_all_matches(&e);
    stop(&e);
    teardown(&e);
}

Test(tier_warm, tok3_restarts_tok3) { across(3, 3, 0); }
Test(tier_warm, tok4_file_restarts_tok3) { across(4, 3, 0); }
Test(tier_warm, tok3_file_restarts_tok4) { across(3, 4, 0); }
Test(tier_warm, tok3_below_a_host) { across(3, 3, 1); }

/* A 4-byte tree's record holding an id >= 2^24: a 3-byte tree cannot keep
 * it, so the warm restart drops it (warm_dropped, with the page under it as
 * an orphan) instead of truncating the id; a 4-byte tree takes it all. */
Test(tier_warm, an_id_over_24_bits_is_dropped_by_a_tok3_tree)
{
    wenv e;
    setup(&e);
    g_ids = 2;
    first_life(&e);
    g_tb = 3;
    restart(&e);
    rkv_store_info i = info_of(e.disk);
    cr_assert_eq(i.warm_records, PAGES, "the records verify");
    cr_assert_eq(i.warm_dropped, NPG - BIG_PAGE, "the page and its child");
    cr_assert_eq(rkv_store_used_blocks(e.disk), PAGES - (NPG - BIG_PAGE));
    cr_assert_eq(lower_pages(&e, NSEQ - 1), BIG_PAGE);
    /* the id with its top byte cut is not the page either */
    int32_t tok[NPG * P];
    tokens_of(NSEQ - 1, tok);
    tok[BIG_PAGE * P + 1] &= 0xffffff;
    rkv_match m;
    rkv_tier_match tm;
    OK(rkv_tree_match_tiers(e.tree, NS, tok, NPG * P, NULL, RKV_MATCH_PEEK, &m, &tm));
    cr_assert_eq(tm.lower_tokens, BIG_PAGE * P);
    for (uint32_t s = 0; s + 1 < NSEQ; s++)
        cr_assert_eq(lower_pages(&e, s), NPG, "seq %u", s);
    load_all_matches(&e);
    stop(&e);
    teardown(&e);
}

/* Control: the same file and a 4-byte tree keep every record. */
Test(tier_warm, an_id_over_24_bits_is_kept_by_a_tok4_tree)
{
    wenv e;
    setup(&e);
    g_ids = 2;
    first_life(&e);
    restart(&e);
    cr_assert_eq(info_of(e.disk).warm_dropped, 0);
    cr_assert_eq(lower_pages(&e, NSEQ - 1), NPG);
    stop(&e);
    teardown(&e);
}

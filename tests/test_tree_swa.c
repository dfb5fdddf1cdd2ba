/*
 * tests/test_tree_swa.c -- a hybrid tree's sliding-window KV (swa/,
 * include/radixkv/swa.h): the rules one by one, a differential randomized
 * run against a plain reference model, and out-of-memory injection at
 * every allocation of every call.
 *
 * The reference model (ref_*) keeps, per block of the tree pool, the SWA
 * block it holds, a recency stamp and a pin count, and per SWA block a
 * reference count; it learns which pages the tree caches from peek matches
 * of every sequence the run uses (the core's own behaviour is tested
 * elsewhere) and predicts from that alone what the SWA layer must do:
 * which match end is usable, which SWA pages a release takes (the smallest
 * stamp among the unpinned), and every reference count of the SWA pool.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radix/tree_debug.h"
#include "radixkv.h"
#include "swa/swa.h"

#define NO RKV_NO_BLOCK

static rkv_pool *mkpool(uint32_t nb, uint32_t p)
{
    rkv_pool_config cfg;
    rkv_pool_config_init(&cfg);
    cfg.num_blocks = nb;
    cfg.page_size = p;
    rkv_pool *pool;
    cr_assert_eq(rkv_pool_create(&cfg, &pool), RKV_OK, "%s", rkv_last_error());
    return pool;
}

typedef struct hyb {
    rkv_pool *full, *swa;
    rkv_tree *tree;
    uint32_t P;
} hyb;

static void hyb_open(hyb *h, uint32_t nfull, uint32_t nswa, uint32_t P,
                     uint32_t window)
{
    h->P = P;
    h->full = mkpool(nfull, P);
    h->swa = mkpool(nswa, P);
    cr_assert_eq(rkv_tree_create(h->full, NULL, &h->tree), RKV_OK);
    cr_assert_eq(rkv_tree_swa_attach(h->tree, h->swa, window), RKV_OK, "%s",
                 rkv_last_error());
}

static void hyb_close(hyb *h)
{
    cr_assert_eq(rkv_tree_check(h->tree), RKV_OK, "%s", rkv_last_error());
    rkv_tree_destroy(h->tree);
    /* every SWA page the tree held went with it */
    cr_assert_eq(rkv_pool_num_free(h->swa), rkv_pool_num_blocks(h->swa));
    cr_assert_eq(rkv_pool_num_free(h->full), rkv_pool_num_blocks(h->full));
    rkv_pool_destroy(h->swa);
    rkv_pool_destroy(h->full);
}

/* Caches tokens[0..n) with fresh blocks; the last swa_pages pages get a
 * fresh SWA page, the others none. The caller's references are dropped. */
static rkv_insert_result put(hyb *h, const int32_t *tok, size_t n,
                             uint32_t swa_pages)
{
    uint32_t np = (uint32_t)(n / h->P);
    rkv_block_id b[64], s[64], sa[64];
    cr_assert_leq(np, 64u);
    cr_assert_eq(rkv_tree_alloc_blocks(h->tree, np, b), RKV_OK, "%s",
                 rkv_last_error());
    uint32_t ns = swa_pages < np ? swa_pages : np;
    cr_assert_eq(rkv_tree_swa_alloc(h->tree, ns, sa), RKV_OK, "%s",
                 rkv_last_error());
    for (uint32_t i = 0; i < np; i++)
        s[i] = i >= np - ns ? sa[i - (np - ns)] : NO;
    rkv_insert_result r;
    cr_assert_eq(rkv_tree_swa_insert(h->tree, 0, tok, n, b, s, NULL, &r),
                 RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_unref_n(h->full, np, b), RKV_OK);
    cr_assert_eq(rkv_pool_unref_n(h->swa, ns, sa), RKV_OK);
    cr_assert_eq(rkv_tree_check(h->tree), RKV_OK, "%s", rkv_last_error());
    return r;
}

static size_t swa_match(hyb *h, const int32_t *tok, size_t n, unsigned flags,
                        rkv_block_id *swa_out)
{
    rkv_match m;
    cr_assert_eq(rkv_tree_swa_match(h->tree, 0, tok, n, NULL, swa_out, flags, &m),
                 RKV_OK, "%s", rkv_last_error());
    return m.matched_tokens;
}

static void seq(int32_t *tok, size_t n, int32_t base)
{
    for (size_t i = 0; i < n; i++)
        tok[i] = base + (int32_t)i;
}

Test(tree_swa, attach_rules)
{
    rkv_pool *full = mkpool(32, 4), *swa = mkpool(32, 4), *odd = mkpool(32, 8);
    rkv_tree *t;
    cr_assert_eq(rkv_tree_create(full, NULL, &t), RKV_OK);
    rkv_swa_stats st;
    cr_assert_eq(rkv_tree_swa_get_stats(t, &st), RKV_ERR_STATE);
    cr_assert_eq(rkv_tree_swa_attach(t, swa, 0), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_tree_swa_attach(t, full, 8), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_tree_swa_attach(t, odd, 8), RKV_ERR_INVALID_ARG);
    /* not empty: BUSY */
    int32_t tok[8];
    seq(tok, 8, 1);
    rkv_block_id b[2];
    cr_assert_eq(rkv_tree_alloc_blocks(t, 2, b), RKV_OK);
    cr_assert_eq(rkv_tree_insert(t, 0, tok, 8, b, NULL, NULL), RKV_OK);
    cr_assert_eq(rkv_pool_unref_n(full, 2, b), RKV_OK);
    cr_assert_eq(rkv_tree_swa_attach(t, swa, 8), RKV_ERR_BUSY);
    cr_assert_eq(rkv_tree_reset(t), RKV_OK);
    cr_assert_eq(rkv_tree_swa_attach(t, swa, 6), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_tree_swa_attach(t, swa, 6), RKV_ERR_STATE);
    cr_assert_eq(rkv_tree_swa_get_stats(t, &st), RKV_OK);
    cr_assert_eq(st.window_tokens, 6);
    cr_assert_eq(st.window_pages, 2); /* ceil(6 / 4) */
    /* the SWA pool takes no tree of its own while it serves this one */
    rkv_tree *t2;
    cr_assert_eq(rkv_tree_create(swa, NULL, &t2), RKV_ERR_BUSY);
    cr_assert_eq(rkv_tree_check(t), RKV_OK, "%s", rkv_last_error());
    rkv_tree_destroy(t);
    cr_assert_eq(rkv_tree_create(swa, NULL, &t2), RKV_OK);
    rkv_tree_destroy(t2);
    rkv_pool_destroy(odd);
    rkv_pool_destroy(swa);
    rkv_pool_destroy(full);
}

/* A match is usable only where the last window's SWA pages are there. */
Test(tree_swa, match_needs_last_window)
{
    hyb h;
    hyb_open(&h, 64, 64, 4, 8); /* window 2 pages */
    int32_t tok[40];
    seq(tok, 40, 100);
    put(&h, tok, 40, 10); /* 10 pages, all with SWA */
    rkv_block_id so[10];
    cr_assert_eq(swa_match(&h, tok, 40, RKV_MATCH_PEEK, so), 40);
    for (int i = 0; i < 10; i++)
        cr_assert_neq(so[i], NO);
    /* release the 8 oldest SWA pages (pages 0..7, in page order) */
    uint32_t freed;
    cr_assert_eq(rkv_tree_swa_evict(h.tree, 8, &freed), RKV_OK);
    cr_assert_eq(freed, 8);
    cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    /* the end still has its window: full hit, the tombstones above read
     * as NO */
    cr_assert_eq(swa_match(&h, tok, 40, RKV_MATCH_PEEK, so), 40);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(so[i], NO);
    cr_assert_neq(so[9], NO);
    /* a shorter query ends among tombstones: nothing usable but the root */
    cr_assert_eq(swa_match(&h, tok, 24, RKV_MATCH_PEEK, so), 0);
    /* 9 pages: the window is pages 7, 8: page 7 is a tombstone; the
     * deepest usable end is 0 (no two-page run with SWA ends before 9) */
    cr_assert_eq(swa_match(&h, tok, 36, 0, so), 0);
    rkv_swa_stats st;
    cr_assert_eq(rkv_tree_swa_get_stats(h.tree, &st), RKV_OK);
    cr_assert_eq(st.truncated_tokens, 36);
    cr_assert_eq(st.tombstone_pages, 8);
    cr_assert_eq(st.attached_pages, 2);
    rkv_tree_stats ts;
    cr_assert_eq(rkv_tree_get_stats(h.tree, &ts), RKV_OK);
    cr_assert_eq(ts.queried_tokens, 36);
    cr_assert_eq(ts.hit_tokens, 0);
    /* pages 1, 2 with SWA, page 0 without: only the end is usable */
    cr_assert_eq(rkv_tree_reset(h.tree), RKV_OK);
    put(&h, tok, 12, 2);
    cr_assert_eq(swa_match(&h, tok, 12, RKV_MATCH_PEEK, so), 12);
    cr_assert_eq(swa_match(&h, tok, 8, RKV_MATCH_PEEK, so), 0);
    cr_assert_eq(swa_match(&h, tok, 4, RKV_MATCH_PEEK, so), 0);
    /* a one-page run at the root counts (fewer pages than a window) */
    int32_t one[4];
    seq(one, 4, 9000);
    put(&h, one, 4, 1);
    cr_assert_eq(swa_match(&h, one, 4, RKV_MATCH_PEEK, so), 4);
    hyb_close(&h);
}

/* Recompute after a truncated match: the insert's duplicates revive the
 * tombstones (the tree keeps its block, takes the new SWA page). */
Test(tree_swa, insert_revives_tombstones)
{
    hyb h;
    hyb_open(&h, 64, 64, 4, 4); /* window 1 page */
    int32_t tok[16];
    seq(tok, 16, 7);
    put(&h, tok, 16, 4);
    uint32_t freed;
    cr_assert_eq(rkv_tree_swa_evict(h.tree, 4, &freed), RKV_OK);
    cr_assert_eq(swa_match(&h, tok, 16, 0, NULL), 0);
    rkv_insert_result r = put(&h, tok, 16, 2);
    cr_assert_eq(r.prefix_tokens, 16);
    cr_assert_eq(r.num_dups, 4);
    rkv_swa_stats st;
    cr_assert_eq(rkv_tree_swa_get_stats(h.tree, &st), RKV_OK);
    cr_assert_eq(st.revived_pages, 2);
    cr_assert_eq(st.attached_pages, 2);
    cr_assert_eq(swa_match(&h, tok, 16, RKV_MATCH_PEEK, NULL), 16);
    cr_assert_eq(swa_match(&h, tok, 8, RKV_MATCH_PEEK, NULL), 0);
    hyb_close(&h);
}

/* Release order is least recently used; a match's window is a use; an
 * SWA lease keeps its window and only it. */
Test(tree_swa, release_order_and_leases)
{
    hyb h;
    hyb_open(&h, 64, 64, 4, 8);
    int32_t a[24], b[24];
    seq(a, 24, 1000);
    seq(b, 24, 2000);
    put(&h, a, 24, 6);
    put(&h, b, 24, 6);
    /* use a's window: a's pages 4, 5 are now the newest */
    cr_assert_eq(swa_match(&h, a, 24, 0, NULL), 24);
    rkv_match m;
    cr_assert_eq(rkv_tree_swa_match(h.tree, 0, b, 24, NULL, NULL, 0, &m), RKV_OK);
    rkv_swa_lease l;
    cr_assert_eq(rkv_tree_swa_lock(h.tree, m.node, &l), RKV_OK);
    rkv_swa_stats st;
    cr_assert_eq(rkv_tree_swa_get_stats(h.tree, &st), RKV_OK);
    cr_assert_eq(st.kept_pages, 2);
    cr_assert_eq(st.leases, 1);
    /* releasable: a 0..5, b 0..3 (b 4, 5 kept): 10 */
    cr_assert_eq(rkv_tree_swa_evict(h.tree, 11, NULL), RKV_ERR_NO_SPACE);
    cr_assert_eq(rkv_tree_swa_evict(h.tree, 8, NULL), RKV_OK);
    /* left: a 4, 5 (newest) */
    cr_assert_eq(swa_match(&h, a, 24, RKV_MATCH_PEEK, NULL), 24);
    cr_assert_eq(swa_match(&h, b, 24, RKV_MATCH_PEEK, NULL), 24);
    cr_assert_eq(rkv_tree_swa_evict(h.tree, 2, NULL), RKV_OK);
    cr_assert_eq(swa_match(&h, a, 24, RKV_MATCH_PEEK, NULL), 0);
    cr_assert_eq(rkv_tree_swa_evict(h.tree, 1, NULL), RKV_ERR_NO_SPACE);
    /* alloc: 64 - 2 held, nothing releasable */
    rkv_block_id sb[63];
    cr_assert_eq(rkv_tree_swa_alloc(h.tree, 63, sb), RKV_ERR_NO_SPACE);
    cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    /* a plain lease id is no SWA lease, and the other way round */
    rkv_lease pl;
    cr_assert_eq(rkv_tree_lock(h.tree, m.node, &pl), RKV_OK);
    rkv_swa_lease fake = {pl.id};
    cr_assert_eq(rkv_tree_swa_unlock(h.tree, &fake), RKV_ERR_STATE);
    cr_assert_eq(rkv_tree_unlock(h.tree, &pl), RKV_OK);
    cr_assert_eq(rkv_tree_swa_unlock(h.tree, &l), RKV_OK);
    cr_assert_eq(l.id, 0);
    cr_assert_eq(rkv_tree_swa_unlock(h.tree, &l), RKV_ERR_STATE);
    cr_assert_eq(rkv_tree_swa_alloc(h.tree, 63, sb), RKV_OK);
    cr_assert_eq(swa_match(&h, b, 24, RKV_MATCH_PEEK, NULL), 0);
    cr_assert_eq(rkv_pool_unref_n(h.swa, 63, sb), RKV_OK);
    hyb_close(&h);
}

/* The tree's eviction, demotion and reset take the SWA page along. */
Test(tree_swa, full_eviction_drops_swa)
{
    hyb h;
    hyb_open(&h, 16, 64, 4, 8);
    int32_t a[32];
    seq(a, 32, 1);
    put(&h, a, 32, 8);
    cr_assert_eq(rkv_pool_num_free(h.swa), 56);
    uint32_t freed;
    cr_assert_eq(rkv_tree_evict(h.tree, 3, &freed), RKV_OK);
    cr_assert_eq(rkv_pool_num_free(h.swa), 59);
    cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(swa_match(&h, a, 32, RKV_MATCH_PEEK, NULL), 20);
    /* the caller's own reference keeps an SWA block allocated */
    rkv_block_id so[5];
    cr_assert_eq(swa_match(&h, a, 20, RKV_MATCH_PEEK, so), 20);
    cr_assert_eq(rkv_pool_ref(h.swa, so[4]), RKV_OK);
    cr_assert_eq(rkv_tree_swa_evict(h.tree, 5, &freed), RKV_ERR_NO_SPACE);
    cr_assert_eq(freed, 4);
    cr_assert_eq(rkv_pool_refcount(h.swa, so[4]), 1);
    cr_assert_eq(rkv_pool_unref(h.swa, so[4]), RKV_OK);
    put(&h, a, 20, 5);
    cr_assert_eq(rkv_tree_reset(h.tree), RKV_OK);
    cr_assert_eq(rkv_pool_num_free(h.swa), 64);
    hyb_close(&h);
}

Test(tree_swa, insert_refuses_bad_swa_blocks)
{
    hyb h;
    hyb_open(&h, 32, 32, 4, 4);
    int32_t a[8], c[8];
    seq(a, 8, 1);
    seq(c, 8, 500);
    put(&h, a, 8, 2);
    rkv_block_id so[2];
    cr_assert_eq(swa_match(&h, a, 8, RKV_MATCH_PEEK, so), 8);
    rkv_block_id b[2], s[2];
    cr_assert_eq(rkv_tree_alloc_blocks(h.tree, 2, b), RKV_OK);
    cr_assert_eq(rkv_tree_swa_alloc(h.tree, 1, s), RKV_OK);
    rkv_block_id twice[2] = {s[0], s[0]}, other[2] = {so[0], NO},
                 freeb[2] = {31, NO}, range[2] = {32, NO};
    cr_assert_eq(rkv_pool_refcount(h.swa, 31), 0);
    const rkv_block_id *bad[] = {twice, other, freeb, range};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(rkv_tree_swa_insert(h.tree, 0, c, 8, b, bad[i], NULL, NULL),
                     RKV_ERR_INVALID_ARG, "case %d", i);
        cr_assert_eq(swa_match(&h, c, 8, RKV_MATCH_PEEK, NULL), 0);
    }
    /* the same SWA page for the page that holds it is fine */
    rkv_block_id same[2] = {so[0], so[1]};
    cr_assert_eq(rkv_tree_swa_insert(h.tree, 0, a, 8, NULL, NULL, NULL, NULL),
                 RKV_ERR_INVALID_ARG);
    rkv_match m;
    rkv_block_id cached[2];
    cr_assert_eq(rkv_tree_match(h.tree, 0, a, 8, cached, RKV_MATCH_PEEK, &m), RKV_OK);
    cr_assert_eq(rkv_tree_swa_insert(h.tree, 0, a, 8, cached, same, NULL, NULL),
                 RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(rkv_pool_unref_n(h.full, 2, b), RKV_OK);
    cr_assert_eq(rkv_pool_unref_n(h.swa, 1, s), RKV_OK);
    /* not hybrid */
    rkv_pool *p2 = mkpool(8, 4);
    rkv_tree *t2;
    cr_assert_eq(rkv_tree_create(p2, NULL, &t2), RKV_OK);
    cr_assert_eq(rkv_tree_swa_match(t2, 0, a, 8, NULL, NULL, 0, &m), RKV_ERR_STATE);
    cr_assert_eq(rkv_tree_swa_evict(t2, 1, NULL), RKV_ERR_STATE);
    rkv_tree_destroy(t2);
    rkv_pool_destroy(p2);
    hyb_close(&h);
}

/* Destroying a tree with SWA leases held releases every SWA page too. */
Test(tree_swa, destroy_with_leases_held)
{
    int64_t live0 = rkv_debug_live_tree_allocs_global();
    hyb h;
    hyb_open(&h, 32, 32, 4, 8);
    int32_t a[16];
    seq(a, 16, 1);
    put(&h, a, 16, 4);
    rkv_match m;
    rkv_swa_lease l[3];
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(rkv_tree_swa_match(h.tree, 0, a, 16 - 4 * (size_t)i, NULL, NULL,
                                        0, &m), RKV_OK);
        cr_assert_eq(rkv_tree_swa_lock(h.tree, m.node, &l[i]), RKV_OK);
    }
    rkv_swa_stats st;
    cr_assert_eq(rkv_tree_swa_get_stats(h.tree, &st), RKV_OK);
    cr_assert_eq(st.leases, 3);
    cr_assert_eq(st.kept_pages, 4); /* windows 2..3, 1..2, 0..1 */
    cr_assert_eq(rkv_tree_reset(h.tree), RKV_ERR_BUSY);
    cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    rkv_tree_destroy(h.tree);
    cr_assert_eq(rkv_pool_num_free(h.swa), 32);
    cr_assert_eq(rkv_pool_num_free(h.full), 32);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0);
    rkv_pool_destroy(h.swa);
    rkv_pool_destroy(h.full);
}

/* An SWA lease released through rkv_tree_unlock is a misuse the check
 * names (the pins would outlive the lock). */
Test(tree_swa, check_reports_misused_lease)
{
    hyb h;
    hyb_open(&h, 32, 32, 4, 4);
    int32_t a[8];
    seq(a, 8, 1);
    put(&h, a, 8, 2);
    rkv_match m;
    cr_assert_eq(rkv_tree_swa_match(h.tree, 0, a, 8, NULL, NULL, 0, &m), RKV_OK);
    rkv_swa_lease l;
    cr_assert_eq(rkv_tree_swa_lock(h.tree, m.node, &l), RKV_OK);
    rkv_lease plain = {l.id};
    cr_assert_eq(rkv_tree_unlock(h.tree, &plain), RKV_OK);
    cr_assert_eq(rkv_tree_check(h.tree), RKV_ERR_CORRUPT);
    cr_assert(strstr(rkv_last_error(), "rkv_tree_unlock") != NULL, "%s",
              rkv_last_error());
    rkv_tree_destroy(h.tree);
    cr_assert_eq(rkv_pool_num_free(h.swa), 32);
    rkv_pool_destroy(h.swa);
    rkv_pool_destroy(h.full);
}

/* Demotion to a host tier takes the SWA page along (the tiers carry the
 * full layers only); the page loaded back is a tombstone until an insert
 * gives its sliding KV again. */
Test(tree_swa, demotion_drops_swa_and_load_returns_tombstones)
{
    hyb h;
    h.P = 4;
    h.full = mkpool(8, 4); /* metadata-only pools and store */
    h.swa = mkpool(16, 4);
    cr_assert_eq(rkv_tree_create(h.full, NULL, &h.tree), RKV_OK);
    rkv_store_config sc;
    rkv_store_config_init(&sc, RKV_MEDIUM_HOST);
    sc.capacity_blocks = 16;
    rkv_store *host;
    cr_assert_eq(rkv_store_create(&sc, &host), RKV_OK, "%s", rkv_last_error());
    rkv_tier_config tc;
    rkv_tier_config_init(&tc);
    tc.host = host;
    cr_assert_eq(rkv_tree_attach_tiers(h.tree, &tc), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(rkv_tree_swa_attach(h.tree, h.swa, 4), RKV_OK);
    int32_t a[16];
    seq(a, 16, 1);
    put(&h, a, 16, 4);
    cr_assert_eq(rkv_pool_num_free(h.swa), 12);
    uint32_t freed;
    cr_assert_eq(rkv_tree_evict(h.tree, 2, &freed), RKV_OK); /* demotes 2 */
    cr_assert_eq(rkv_pool_num_free(h.swa), 14);
    cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(swa_match(&h, a, 16, RKV_MATCH_PEEK, NULL), 8);
    rkv_load ld;
    cr_assert_eq(rkv_tree_load(h.tree, 0, a, 16, 8, NULL, &ld), RKV_OK, "%s",
                 rkv_last_error());
    cr_assert_eq(ld.num_pages, 2);
    rkv_transfer_done done;
    uint32_t nd = 0;
    cr_assert_eq(rkv_tree_tier_poll(h.tree, &done, 1, &nd), RKV_OK);
    cr_assert_eq(nd, 1);
    cr_assert_eq(rkv_tree_unlock(h.tree, &ld.lease), RKV_OK);
    cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    /* back on the device, without sliding KV: the match stops before */
    rkv_match m;
    cr_assert_eq(rkv_tree_match(h.tree, 0, a, 16, NULL, RKV_MATCH_PEEK, &m),
                 RKV_OK);
    cr_assert_eq(m.matched_tokens, 16);
    cr_assert_eq(swa_match(&h, a, 16, RKV_MATCH_PEEK, NULL), 8);
    put(&h, a, 16, 1); /* the last page's sliding KV again */
    cr_assert_eq(swa_match(&h, a, 16, RKV_MATCH_PEEK, NULL), 16);
    rkv_tree_destroy(h.tree);
    cr_assert_eq(rkv_pool_num_free(h.swa), 16);
    rkv_store_destroy(host);
    rkv_pool_destroy(h.swa);
    rkv_pool_destroy(h.full);
}

/* ------------------------------------------------------------------------
 * Differential run against the reference model.
 */
#define RP 4u
#define RNFULL 96u
#define RNSWA 40u
#define RSEQS 24
#define RMAXP 24u
#define RMAXL 4

typedef struct refm {
    hyb h;
    uint32_t wp;
    int32_t tok[RSEQS][RMAXP * RP];
    uint32_t len[RSEQS];
    /* the model */
    uint32_t of[RNFULL], pin[RNFULL];
    uint64_t stamp[RNFULL], clock, low; /* stamps above / below 2^40 */
    uint32_t rc[RNSWA];
    /* SWA leases held, with their windows */
    rkv_swa_lease lease[RMAXL];
    rkv_block_id win[RMAXL][RMAXP];
    uint32_t nwin[RMAXL];
    int nl;
    uint64_t rng;
} refm;

static uint32_t rnd(refm *r, uint32_t n)
{
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    return (uint32_t)(r->rng % n);
}

/* Cached pages, from peek matches of every sequence. */
static void ref_cached(refm *r, uint8_t *cached)
{
    memset(cached, 0, RNFULL);
    for (int i = 0; i < RSEQS; i++) {
        rkv_block_id b[RMAXP];
        rkv_match m;
        cr_assert_eq(rkv_tree_match(r->h.tree, 0, r->tok[i], r->len[i] * RP, b,
                                    RKV_MATCH_PEEK, &m), RKV_OK);
        for (uint32_t k = 0; k < m.num_blocks; k++)
            cached[b[k]] = 1;
    }
}

/* Pages the tree dropped since: their SWA pages go (call after every step
 * that can evict, before anything is cached again). */
static void ref_sync_drops(refm *r)
{
    uint8_t cached[RNFULL];
    ref_cached(r, cached);
    for (uint32_t b = 0; b < RNFULL; b++)
        if (!cached[b] && r->of[b] != NO) {
            r->rc[r->of[b]]--;
            r->of[b] = NO;
        }
}

static uint32_t ref_listed(const refm *r)
{
    uint32_t n = 0;
    for (uint32_t b = 0; b < RNFULL; b++)
        n += r->of[b] != NO && r->pin[b] == 0;
    return n;
}

/* Releases until n SWA blocks freed; the model's rkv_tree_swa_evict. */
static uint32_t ref_release(refm *r, uint32_t n)
{
    uint32_t freed = 0;
    while (freed < n) {
        uint32_t best = NO;
        for (uint32_t b = 0; b < RNFULL; b++)
            if (r->of[b] != NO && r->pin[b] == 0 &&
                (best == NO || r->stamp[b] < r->stamp[best]))
                best = b;
        if (best == NO)
            break;
        freed += --r->rc[r->of[best]] == 0;
        r->of[best] = NO;
    }
    return freed;
}

static uint32_t ref_free(const refm *r)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < RNSWA; s++)
        n += r->rc[s] == 0;
    return n;
}

static void ref_compare(refm *r, int step)
{
    const rkv_swa *s = r->h.tree->swa;
    cr_assert_eq(rkv_tree_check(r->h.tree), RKV_OK, "step %d: %s", step,
                 rkv_last_error());
    for (uint32_t b = 0; b < RNFULL; b++) {
        cr_assert_eq(s->of[b], r->of[b], "step %d: page %u SWA %u, model %u",
                     step, b, s->of[b], r->of[b]);
        cr_assert_eq(s->pin[b], r->pin[b], "step %d: pin of %u", step, b);
    }
    for (uint32_t sb = 0; sb < RNSWA; sb++)
        cr_assert_eq(rkv_pool_refcount(r->h.swa, sb), r->rc[sb],
                     "step %d: SWA block %u", step, sb);
    /* the release list is the model's stamp order */
    uint64_t last = 0;
    uint32_t n = 0;
    for (uint32_t b = s->head; b != NO; b = s->next[b], n++) {
        cr_assert_gt(r->stamp[b], last, "step %d: release order at %u", step, b);
        last = r->stamp[b];
    }
    cr_assert_eq(n, ref_listed(r), "step %d", step);
}

/* The model's usable end of a match over path[0..m). */
static uint32_t ref_usable(const refm *r, const rkv_block_id *path, uint32_t m)
{
    for (uint32_t k = m; k > 0; k--) {
        uint32_t need = k < r->wp ? k : r->wp, ok = 1;
        for (uint32_t i = k - need; i < k; i++)
            ok &= r->of[path[i]] != NO;
        if (ok)
            return k;
    }
    return 0;
}

static void ref_unlock(refm *r, int i)
{
    cr_assert_eq(rkv_tree_swa_unlock(r->h.tree, &r->lease[i]), RKV_OK, "%s",
                 rkv_last_error());
    for (uint32_t k = 0; k < r->nwin[i]; k++) { /* path order */
        rkv_block_id b = r->win[i][k];
        if (--r->pin[b] == 0)
            r->stamp[b] = ++r->clock;
    }
    r->nl--;
    r->lease[i] = r->lease[r->nl];
    r->nwin[i] = r->nwin[r->nl];
    memcpy(r->win[i], r->win[r->nl], sizeof r->win[i]);
}

/* One request: match, lock, compute the rest, cache it with SWA pages for
 * its last few pages, keep or release the lease. */
static void ref_request(refm *r, int step)
{
    int q = (int)rnd(r, RSEQS);
    uint32_t np = r->len[q];
    const int32_t *tok = r->tok[q];
    rkv_block_id path[RMAXP], got[RMAXP], so[RMAXP];
    rkv_match pk, m;
    cr_assert_eq(rkv_tree_match(r->h.tree, 0, tok, np * RP, path,
                                RKV_MATCH_PEEK, &pk), RKV_OK);
    uint32_t k = ref_usable(r, path, pk.num_blocks);
    cr_assert_eq(rkv_tree_swa_match(r->h.tree, 0, tok, np * RP, got, so, 0, &m),
                 RKV_OK, "%s", rkv_last_error());
    cr_assert_eq(m.num_blocks, k, "step %d: matched %u, model %u", step,
                 m.num_blocks, k);
    for (uint32_t i = 0; i < k; i++) {
        cr_assert_eq(got[i], path[i]);
        cr_assert_eq(so[i], r->of[path[i]], "step %d page %u", step, i);
    }
    for (uint32_t i = k > r->wp ? k - r->wp : 0; i < k; i++)
        r->stamp[path[i]] = ++r->clock;
    if (r->nl == RMAXL)
        ref_unlock(r, (int)rnd(r, RMAXL));
    rkv_swa_lease l;
    cr_assert_eq(rkv_tree_swa_lock(r->h.tree, m.node, &l), RKV_OK);
    int li = r->nl++;
    r->lease[li] = l;
    r->nwin[li] = 0;
    for (uint32_t i = k > r->wp ? k - r->wp : 0; i < k; i++) {
        r->win[li][r->nwin[li]++] = path[i];
        r->pin[path[i]]++;
    }
    ref_compare(r, step);
    uint32_t nnew = np - k;
    rkv_block_id nb[RMAXP], sa[RMAXP], give[RMAXP], blocks[RMAXP];
    if (rkv_tree_alloc_blocks(r->h.tree, nnew, nb) != RKV_OK) {
        ref_sync_drops(r);
        ref_unlock(r, li);
        return;
    }
    ref_sync_drops(r);
    uint32_t want = rnd(r, 3) == 0 ? rnd(r, nnew + 1)
                                   : (nnew < r->wp + 1 ? nnew : r->wp + 1);
    uint32_t freeb = ref_free(r), listed = ref_listed(r);
    rkv_status st = rkv_tree_swa_alloc(r->h.tree, want, sa);
    if (freeb + listed < want) {
        cr_assert_eq(st, RKV_ERR_NO_SPACE, "step %d", step);
        want = 0;
    } else {
        if (freeb < want)
            cr_assert_geq(freeb + ref_release(r, want - freeb), want);
        cr_assert_eq(st, RKV_OK, "step %d: %s", step, rkv_last_error());
        for (uint32_t i = 0; i < want; i++) {
            cr_assert_eq(r->rc[sa[i]], 0, "step %d: SWA block %u in use", step,
                         sa[i]);
            r->rc[sa[i]] = 1;
        }
    }
    for (uint32_t i = 0; i < np; i++) {
        blocks[i] = i < k ? path[i] : nb[i - k];
        /* matched pages: their own SWA page if the allocation above did
         * not release it (a use), or nothing */
        give[i] = i < k ? (rnd(r, 2) && r->of[path[i]] == so[i] ? so[i] : NO)
                        : (i >= np - want ? sa[i - (np - want)] : NO);
    }
    rkv_insert_result ir;
    cr_assert_eq(rkv_tree_swa_insert(r->h.tree, 0, tok, np * RP, blocks, give,
                                     NULL, &ir), RKV_OK, "step %d: %s", step,
                 rkv_last_error());
    rkv_match after;
    cr_assert_eq(rkv_tree_match(r->h.tree, 0, tok, ir.cached_tokens, path,
                                RKV_MATCH_PEEK, &after), RKV_OK);
    uint32_t end = after.num_blocks > r->wp ? after.num_blocks - r->wp : 0;
    for (uint32_t i = 0; i < after.num_blocks; i++) {
        if (give[i] == NO)
            continue;
        rkv_block_id b = path[i];
        if (r->of[b] == NO) {
            r->of[b] = give[i];
            r->rc[give[i]]++;
        }
    }
    /* the insert's last window is the newest; pages above it go first,
     * the shallowest first */
    for (uint32_t i = end; i-- > 0;)
        if (give[i] != NO)
            r->stamp[path[i]] = --r->low;
    for (uint32_t i = end; i < after.num_blocks; i++)
        if (give[i] != NO)
            r->stamp[path[i]] = ++r->clock;
    cr_assert_eq(rkv_pool_unref_n(r->h.full, nnew, nb), RKV_OK);
    cr_assert_eq(rkv_pool_unref_n(r->h.swa, want, sa), RKV_OK);
    for (uint32_t i = 0; i < want; i++)
        r->rc[sa[i]]--;
    if (rnd(r, 2))
        ref_unlock(r, li);
}

static void ref_step(refm *r, int step)
{
    uint32_t op = rnd(r, 10);
    if (op < 5) {
        ref_request(r, step);
    } else if (op < 7) {
        uint32_t n = rnd(r, 8) + 1, listed = ref_listed(r), freed = 0;
        rkv_status st = rkv_tree_swa_evict(r->h.tree, n, &freed);
        if (listed < n) {
            cr_assert_eq(st, RKV_ERR_NO_SPACE);
            cr_assert_eq(freed, 0);
        } else {
            uint32_t want = ref_release(r, n);
            cr_assert_eq(freed, want, "step %d", step);
            cr_assert_eq(st, want < n ? RKV_ERR_NO_SPACE : RKV_OK);
        }
    } else if (op < 8) {
        uint32_t freed;
        (void)rkv_tree_evict(r->h.tree, rnd(r, 12) + 1, &freed);
        ref_sync_drops(r);
    } else if (op < 9) {
        if (r->nl > 0)
            ref_unlock(r, (int)rnd(r, (uint32_t)r->nl));
    } else {
        int q = (int)rnd(r, RSEQS);
        rkv_block_id path[RMAXP], so[RMAXP];
        rkv_match pk, m;
        cr_assert_eq(rkv_tree_match(r->h.tree, 0, r->tok[q], r->len[q] * RP, path,
                                    RKV_MATCH_PEEK, &pk), RKV_OK);
        cr_assert_eq(rkv_tree_swa_match(r->h.tree, 0, r->tok[q], r->len[q] * RP,
                                        NULL, so, RKV_MATCH_PEEK, &m), RKV_OK);
        cr_assert_eq(m.num_blocks, ref_usable(r, path, pk.num_blocks));
        if (r->nl == 0 && rnd(r, 4) == 0) {
            cr_assert_eq(rkv_tree_reset(r->h.tree), RKV_OK);
            ref_sync_drops(r);
        }
    }
    ref_compare(r, step);
}

static void ref_run(uint64_t seed, uint32_t window, int steps)
{
    refm *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->rng = seed;
    r->clock = r->low = 1ull << 40;
    hyb_open(&r->h, RNFULL, RNSWA, RP, window);
    r->wp = (window + RP - 1) / RP;
    for (uint32_t b = 0; b < RNFULL; b++)
        r->of[b] = NO;
    /* sequences sharing prefixes: a few trunks, branches at random pages */
    for (int i = 0; i < RSEQS; i++) {
        r->len[i] = 4 + rnd(r, RMAXP - 3);
        int from = i > 0 && rnd(r, 4) != 0 ? (int)rnd(r, (uint32_t)i) : -1;
        uint32_t keep = from >= 0 ? rnd(r, r->len[from] + 1) : 0;
        if (keep > r->len[i])
            keep = r->len[i];
        for (uint32_t t = 0; t < r->len[i] * RP; t++)
            r->tok[i][t] = t < keep * RP ? r->tok[from][t]
                                         : (int32_t)(rnd(r, 1000) + 1);
    }
    for (int s = 0; s < steps; s++)
        ref_step(r, s);
    while (r->nl > 0)
        ref_unlock(r, 0);
    ref_compare(r, steps);
    hyb_close(&r->h);
    free(r);
}

Test(tree_swa, differential_random)
{
    static const uint32_t windows[] = {1, 4, 6, 8, 13, 32};
    for (unsigned w = 0; w < sizeof windows / sizeof windows[0]; w++)
        for (uint64_t seed = 1; seed <= 6; seed++)
            ref_run(seed * 0x9E3779B97F4A7C15ull + w, windows[w], 300);
}

/* ------------------------------------------------------------------------
 * Out-of-memory injection: every call of a scenario is run with its first,
 * second, ... allocation failing until it succeeds; each failure must be
 * RKV_ERR_NOMEM with both pools and the tree's SWA state exactly as before.
 */
typedef struct osnap {
    rkv_swa_stats ss;
    rkv_tree_stats ts;
    uint32_t full_rc[64], swa_rc[32];
    size_t matched[8];
    rkv_block_id so[8][16];
} osnap;

static void osnap_take(hyb *h, int32_t (*tok)[64], osnap *o)
{
    memset(o, 0, sizeof *o);
    cr_assert_eq(rkv_tree_swa_get_stats(h->tree, &o->ss), RKV_OK);
    cr_assert_eq(rkv_tree_get_stats(h->tree, &o->ts), RKV_OK);
    for (uint32_t b = 0; b < 64; b++)
        o->full_rc[b] = rkv_pool_refcount(h->full, b);
    for (uint32_t b = 0; b < 32; b++)
        o->swa_rc[b] = rkv_pool_refcount(h->swa, b);
    for (int i = 0; i < 8; i++) {
        rkv_match m;
        cr_assert_eq(rkv_tree_swa_match(h->tree, 0, tok[i], 64, NULL, o->so[i],
                                        RKV_MATCH_PEEK, &m), RKV_OK);
        o->matched[i] = m.matched_tokens;
    }
}

#define OOM(h, tok, call)                                                     \
    do {                                                                      \
        for (int64_t k_ = 0;; k_++) {                                         \
            osnap a_, b_;                                                     \
            osnap_take((h), (tok), &a_);                                      \
            rkv_tree_debug_fail_alloc_after((h)->tree, k_);                   \
            rkv_status st_ = (call);                                          \
            rkv_tree_debug_fail_alloc_after((h)->tree, -1);                   \
            if (st_ != RKV_ERR_NOMEM) {                                       \
                cr_assert_eq(st_, RKV_OK, "%s: %s", #call, rkv_last_error()); \
                break;                                                        \
            }                                                                 \
            nomem++;                                                          \
            cr_assert_eq(rkv_tree_check((h)->tree), RKV_OK, "%s",             \
                         rkv_last_error());                                   \
            osnap_take((h), (tok), &b_);                                      \
            cr_assert(memcmp(&a_, &b_, sizeof a_) == 0,                       \
                      "%s changed state on NOMEM (k %lld)", #call,            \
                      (long long)k_);                                         \
        }                                                                     \
    } while (0)

Test(tree_swa, out_of_memory_everywhere)
{
    int64_t live0 = rkv_debug_live_tree_allocs_global();
    hyb h;
    h.P = 4;
    h.full = mkpool(64, 4);
    h.swa = mkpool(32, 4);
    cr_assert_eq(rkv_tree_create(h.full, NULL, &h.tree), RKV_OK);
    for (int64_t k = 0;; k++) { /* attach */
        rkv_tree_debug_fail_alloc_after(h.tree, k);
        rkv_status st = rkv_tree_swa_attach(h.tree, h.swa, 8);
        rkv_tree_debug_fail_alloc_after(h.tree, -1);
        if (st == RKV_OK)
            break;
        cr_assert_eq(st, RKV_ERR_NOMEM);
        cr_assert_null(h.tree->swa);
        cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    }
    static int32_t tok[8][64];
    for (int i = 0; i < 8; i++)
        for (int t = 0; t < 64; t++)
            tok[i][t] = t < 16 ? t + 1 : (i + 1) * 1000 + t; /* shared 4 pages */
    int nomem = 0;
    rkv_swa_lease held[32];
    int nheld = 0;
    for (int i = 0; i < 8; i++) {
        uint32_t np = 4 + (uint32_t)i; /* tokens 16 + 4i: a split each time */
        rkv_block_id b[16], s[16], give[16];
        rkv_match m;
        OOM(&h, tok, rkv_tree_swa_match(h.tree, 0, tok[i], np * 4, b, s, 0, &m));
        OOM(&h, tok, rkv_tree_swa_lock(h.tree, m.node, &held[nheld]));
        nheld++;
        uint32_t k = m.num_blocks, nnew = np - k;
        rkv_block_id nb[16], sa[16];
        cr_assert_eq(rkv_tree_alloc_blocks(h.tree, nnew, nb), RKV_OK, "%s",
                     rkv_last_error());
        uint32_t want = nnew < 3 ? nnew : 3;
        cr_assert_eq(rkv_tree_swa_alloc(h.tree, want, sa), RKV_OK, "%s",
                     rkv_last_error());
        for (uint32_t j = 0; j < np; j++) {
            b[j] = j < k ? b[j] : nb[j - k];
            give[j] = j < k ? s[j] : (j >= np - want ? sa[j - (np - want)] : NO);
        }
        rkv_insert_result ir;
        OOM(&h, tok, rkv_tree_swa_insert(h.tree, 0, tok[i], np * 4, b, give,
                                         NULL, &ir));
        cr_assert_eq(rkv_pool_unref_n(h.full, nnew, nb), RKV_OK);
        cr_assert_eq(rkv_pool_unref_n(h.swa, want, sa), RKV_OK);
        /* more leases on the same node: the lease tables grow */
        for (int j = 0; j < 2; j++) {
            rkv_match m2;
            OOM(&h, tok, rkv_tree_swa_match(h.tree, 0, tok[i], 64, NULL, NULL, 0,
                                            &m2));
            OOM(&h, tok, rkv_tree_swa_lock(h.tree, m2.node, &held[nheld]));
            nheld++;
        }
    }
    cr_assert_eq(nheld, 24);
    OOM(&h, tok, rkv_tree_swa_evict(h.tree, 2, NULL));
    for (int i = 0; i < nheld; i++)
        OOM(&h, tok, rkv_tree_swa_unlock(h.tree, &held[i]));
    cr_assert_gt(nomem, 10); /* 15 injection points reached */
    cr_assert_eq(rkv_tree_check(h.tree), RKV_OK, "%s", rkv_last_error());
    hyb_close(&h);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), live0);
}

/*
 * tests/test_tree_lazy_hash.c -- a tree that hashes pages when first read
 * (no KV events, tiers or learned eviction: radix/tree_hash.c) reports the
 * same chained hashes as one that hashes them at insert (KV events on),
 * after the same inserts, splits and evictions; an overridden hash does
 * not leak into the pages below it.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/check.h"

enum { P = 4, NB = 96, MAXT = 48 };

typedef struct twin {
    rkv_pool *pool;
    rkv_tree *tree;
} twin;

static void twin_open(twin *w, int events)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.page_size = P;
    pc.num_blocks = NB;
    OK(rkv_pool_create(&pc, &w->pool));
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.event_ring = events ? 1024 : 0;
    OK(rkv_tree_create(w->pool, &tc, &w->tree));
}

static void twin_close(twin *w)
{
    rkv_tree_destroy(w->tree);
    rkv_pool_destroy(w->pool);
}

/* A server's request: match, alloc the rest (evicting), insert, release. */
static void serve(twin *w, const int32_t *tok, size_t n)
{
    rkv_block_id b[MAXT / P];
    rkv_match m;
    OK(rkv_tree_match(w->tree, 1, tok, n, b, 0, &m));
    uint32_t np = (uint32_t)(n / P), need = np - m.num_blocks;
    rkv_lease l;
    OK(rkv_tree_lock(w->tree, m.node, &l));
    OK(rkv_tree_alloc_blocks(w->tree, need, b + m.num_blocks));
    rkv_insert_result r;
    OK(rkv_tree_insert(w->tree, 1, tok, n, b, NULL, &r));
    OK(rkv_tree_unlock(w->tree, &l));
    if (need > 0)
        OK(rkv_pool_unref_n(w->pool, need, b + m.num_blocks));
}

/* Every block's hash, through the public call (computed when lazy). */
static void hashes(const twin *w, uint64_t *out)
{
    for (rkv_block_id b = 0; b < NB; b++)
        out[b] = rkv_pool_block_hash(w->pool, b);
}

Test(tree_lazy_hash, same_hashes_as_an_eager_tree)
{
    twin lazy, eager;
    twin_open(&lazy, 0);
    twin_open(&eager, 1);
    uint64_t seed = 12345;
    for (int round = 0; round < 400; round++) {
        /* prompts from 4 prefixes of a small alphabet: shared prefixes,
         * splits inside nodes, and eviction once the pool is full */
        int32_t tok[MAXT];
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 4 + (size_t)((seed >> 33) % (MAXT - 3));
        uint32_t family = (uint32_t)((seed >> 20) % 4);
        uint32_t keep = (uint32_t)((seed >> 40) % MAXT);
        for (size_t i = 0; i < n; i++)
            tok[i] = (int32_t)(i < keep ? family * 1000 + i
                                        : ((seed >> (i % 32)) & 7) + 100);
        serve(&lazy, tok, n);
        serve(&eager, tok, n);
        if (round % 37 == 0) {
            /* asking in the middle computes some hashes early */
            uint64_t a[NB], b[NB];
            hashes(&lazy, a);
            hashes(&eager, b);
            for (int i = 0; i < NB; i++)
                cr_assert_eq(a[i], b[i], "round %d block %d", round, i);
        }
        OK(rkv_tree_check(lazy.tree));
    }
    /* a snapshot computes what is left */
    rkv_block_entry se[NB], sl[NB];
    size_t ne = 0, nl = 0;
    OK(rkv_tree_snapshot(lazy.tree, sl, NB, &nl, NULL));
    OK(rkv_tree_snapshot(eager.tree, se, NB, &ne, NULL));
    cr_assert_eq(nl, ne);
    cr_assert(nl > 0);
    for (size_t i = 0; i < nl; i++) {
        cr_assert_eq(sl[i].hash, se[i].hash, "entry %zu", i);
        cr_assert_eq(sl[i].parent_hash, se[i].parent_hash, "entry %zu", i);
    }
    OK(rkv_tree_check(lazy.tree));
    /* the run did split nodes and evict pages (what moves lazy pages) */
    rkv_tree_stats st;
    OK(rkv_tree_get_stats(lazy.tree, &st));
    cr_assert_gt(st.splits, 0);
    cr_assert_gt(st.evicted_blocks, 0);
    twin_close(&lazy);
    twin_close(&eager);
}

Test(tree_lazy_hash, an_overridden_hash_stays_out_of_the_pages_below)
{
    twin w;
    twin_open(&w, 0);
    int32_t tok[16];
    for (int i = 0; i < 16; i++)
        tok[i] = 50 + i;
    serve(&w, tok, 8);  /* node of pages 0-1 */
    serve(&w, tok, 16); /* pages 2-3 below it, not hashed yet */
    rkv_block_id b[4];
    rkv_match m;
    OK(rkv_tree_match(w.tree, 1, tok, 16, b, RKV_MATCH_PEEK, &m));
    cr_assert_eq(m.num_blocks, 4);
    /* an eager tree chained page 3 from the hash page 1 had at insert */
    uint64_t h = RKV_HASH_ROOT;
    for (int i = 0; i < 4; i++)
        h = rkv_block_hash(h, 1, tok + i * P, P);
    OK(rkv_pool_set_block_hash(w.pool, b[1], 777));
    cr_assert_eq(rkv_pool_block_hash(w.pool, b[1]), 777);
    cr_assert_eq(rkv_pool_block_hash(w.pool, b[3]), h);
    twin_close(&w);
}

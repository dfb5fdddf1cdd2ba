/*
 * tests/support/tree_fixture.c -- the tree unit tests' pool and tree (see
 * tree_fixture.h).
 */
#include "tests/support/tree_fixture.h"

#include "radix/tree_debug.h"
#include "tests/support/handles.h"

rkv_pool *g_pool;
rkv_tree *g_tree;
uint32_t g_page;

void tf_open(uint32_t nblocks, uint32_t page, const rkv_tree_config *tc)
{
    g_pool = tu_pool(nblocks, page);
    g_tree = tu_tree(g_pool, tc);
    g_page = page;
    CHECK();
}

void tf_close(void)
{
    if (g_tree != NULL)
        OK(rkv_tree_check(g_tree));
    rkv_tree_destroy(g_tree);
    g_tree = NULL;
    if (g_pool != NULL) {
        OK(rkv_pool_check(g_pool));
        rkv_pool_destroy(g_pool);
    }
    g_pool = NULL;
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), 0, "tree memory leaked");
}

void tf_seq(int32_t *tok, size_t n, int32_t base)
{
    for (size_t i = 0; i < n; i++)
        tok[i] = base + (int32_t)i;
}

void tf_insert_free(rkv_namespace ns, const int32_t *tok, size_t n)
{
    uint32_t np = (uint32_t)(n / g_page);
    rkv_block_id b[64];
    cr_assert(np <= 64);
    OK(rkv_pool_alloc_n(g_pool, np, b));
    OK(rkv_tree_insert(g_tree, ns, tok, n, b, NULL, NULL));
    OK(rkv_pool_unref_n(g_pool, np, b));
    CHECK();
}

void tf_cache_seq(rkv_namespace ns, int32_t *tok, size_t n, int32_t base)
{
    tf_seq(tok, n, base);
    tf_insert_free(ns, tok, n);
}

uint32_t tf_cached_pages(rkv_namespace ns, const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(g_tree, ns, tok, n, NULL, RKV_MATCH_PEEK, &m));
    return m.num_blocks;
}

rkv_retention_stats tf_rstats(void)
{
    rkv_retention_stats s;
    OK(rkv_tree_retention_stats(g_tree, &s));
    return s;
}

/*
 * tests/support/tree_fixture.h -- the fixture of the tree unit tests
 * (tests/test_tree.c, test_tree_retain.c, test_retain_ttl.c,
 * test_tree_lease.c): one metadata-only pool and one tree over it.
 *
 * The handles are process globals: Criterion runs each test in its own
 * process, so a test's fixture is its own. tf_open leaves a checked pool
 * and tree; tf_close (a suite's .fini) checks both again, destroys them
 * and asserts that no tree memory is left (the leak check), also when the
 * test never opened the fixture. Every failure is a Criterion assertion.
 */
#ifndef RKV_TESTS_TREE_FIXTURE_H
#define RKV_TESTS_TREE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"
#include "tests/support/check.h"
#include "tests/support/handles.h"

extern rkv_pool *g_pool;
extern rkv_tree *g_tree;
extern uint32_t g_page; /* tokens per page of g_pool */

/* The check after every operation. */
#define CHECK()                                 \
    do {                                        \
        OK(rkv_pool_check(g_pool));             \
        OK(rkv_tree_check(g_tree));             \
    } while (0)

/* A pool of nblocks pages of page tokens, a tree with tc (NULL: the
 * defaults of rkv_tree_config_init), then CHECK. */
void tf_open(uint32_t nblocks, uint32_t page, const rkv_tree_config *tc);

void tf_close(void);

/* tok[i] = base + i: distinct pages for distinct bases. */
void tf_seq(int32_t *tok, size_t n, int32_t base);

/* Inserts n tokens (at most 64 pages) with blocks from the free list only
 * (no eviction, so no pin is revoked behind the test's back), drops the
 * caller's references, then CHECK. */
void tf_insert_free(rkv_namespace ns, const int32_t *tok, size_t n);

/* tf_seq then tf_insert_free. */
void tf_cache_seq(rkv_namespace ns, int32_t *tok, size_t n, int32_t base);

/* Pages of tok cached in ns now (a peek: recency is not touched). */
uint32_t tf_cached_pages(rkv_namespace ns, const int32_t *tok, size_t n);

rkv_retention_stats tf_rstats(void);

#endif

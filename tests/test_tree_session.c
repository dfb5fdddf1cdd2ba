/*
 * tests/test_tree_session.c -- rkv_tree_session_end (retain/session.c)
 * under every eviction policy: the pages only the ended session used go
 * first, shared ones (a branch, a locked path, a context another one
 * extends) are left alone, a later use makes pages ordinary again, the
 * session's pins are released, bad arguments change nothing.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/check.h"
#include "tests/support/handles.h"

#define PG 4u

typedef struct env {
    rkv_pool *pool;
    rkv_tree *tree;
} env;

static void open_env(env *e, int policy, uint32_t blocks)
{
    e->pool = tu_pool(blocks, PG);
    e->tree = tu_policy_tree(e->pool, policy);
}

static void close_env(env *e)
{
    OK(rkv_tree_check(e->tree));
    OK(rkv_pool_check(e->pool));
    rkv_tree_destroy(e->tree);
    rkv_pool_destroy(e->pool);
}

/* Pages: a shared prefix of 2 pages, then `own` pages of its own. */
static size_t ctx(int32_t *tok, int32_t who, uint32_t own)
{
    size_t n = 0;
    for (uint32_t i = 0; i < 2 * PG; i++)
        tok[n++] = (int32_t)(1000 + i);
    for (uint32_t i = 0; i < own * PG; i++)
        tok[n++] = who * 100 + (int32_t)i;
    return n;
}

static void use(env *e, const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(e->tree, 0, tok, n, NULL, 0, &m));
    uint32_t np = (uint32_t)(n / PG), nb = (uint32_t)m.num_blocks;
    rkv_block_id b[32];
    rkv_lease lease;
    OK(rkv_tree_lock(e->tree, m.node, &lease));
    OK(rkv_tree_alloc_blocks(e->tree, np - nb, b + nb));
    rkv_match m2;
    OK(rkv_tree_match(e->tree, 0, tok, n, b, RKV_MATCH_PEEK, &m2));
    OK(rkv_tree_insert(e->tree, 0, tok, n, b, NULL, NULL));
    OK(rkv_pool_unref_n(e->pool, np - nb, b + nb));
    OK(rkv_tree_unlock(e->tree, &lease));
    OK(rkv_tree_check(e->tree));
}

static uint32_t cached(env *e, const int32_t *tok, size_t n)
{
    rkv_match m;
    OK(rkv_tree_match(e->tree, 0, tok, n, NULL, RKV_MATCH_PEEK, &m));
    return (uint32_t)m.num_blocks;
}

Test(tree_session, ended_pages_go_first_under_every_policy)
{
    for (int p = 0; rkv_evict_policy_name(p) != NULL; p++) {
        env e;
        open_env(&e, p, 6);
        int32_t a[32], b[32], c[32];
        size_t na = ctx(a, 1, 2), nb = ctx(b, 2, 2), nc = ctx(c, 3, 2);
        use(&e, b, nb); /* b is the least recently used */
        use(&e, a, na);
        uint32_t marked = 99;
        OK(rkv_tree_session_end(e.tree, 0, a, na, 7, &marked));
        cr_assert_eq(marked, 2, "%s: only a's own pages (the prefix is "
                     "shared with b)", rkv_evict_policy_name(p));
        OK(rkv_tree_check(e.tree));
        use(&e, c, nc); /* needs 2 pages: a's go, not b's (older) */
        cr_assert_eq(cached(&e, a, na), 2, "%s", rkv_evict_policy_name(p));
        cr_assert_eq(cached(&e, b, nb), 4, "%s", rkv_evict_policy_name(p));
        cr_assert_eq(cached(&e, c, nc), 4);
        close_env(&e);
    }
}

Test(tree_session, a_later_use_clears_the_mark)
{
    env e;
    open_env(&e, RKV_EVICT_LRU, 6);
    int32_t a[32], b[32], c[32];
    size_t na = ctx(a, 1, 2), nb = ctx(b, 2, 2), nc = ctx(c, 3, 2);
    use(&e, b, nb);
    use(&e, a, na);
    OK(rkv_tree_session_end(e.tree, 0, a, na, 7, NULL));
    use(&e, a, na); /* a new session shares a's context */
    use(&e, c, nc); /* plain LRU again: b's own pages go */
    cr_assert_eq(cached(&e, a, na), 4);
    cr_assert_eq(cached(&e, b, nb), 2);
    close_env(&e);
}

Test(tree_session, shared_locked_or_extended_contexts_are_not_marked)
{
    env e;
    open_env(&e, RKV_EVICT_LRU, 16);
    int32_t a[32], b[32];
    size_t na = ctx(a, 1, 2), nb = ctx(b, 2, 2);
    use(&e, a, na);
    use(&e, b, nb);
    uint32_t marked = 99;
    /* a's prefix alone: b and a extend it */
    OK(rkv_tree_session_end(e.tree, 0, a, 2 * PG, 7, &marked));
    cr_assert_eq(marked, 0);
    /* the middle of a's own node: the node goes on */
    OK(rkv_tree_session_end(e.tree, 0, a, 3 * PG, 7, &marked));
    cr_assert_eq(marked, 0);
    /* a locked context (a request still runs on it) */
    rkv_match m;
    OK(rkv_tree_match(e.tree, 0, a, na, NULL, RKV_MATCH_PEEK, &m));
    rkv_lease lease;
    OK(rkv_tree_lock(e.tree, m.node, &lease));
    OK(rkv_tree_session_end(e.tree, 0, a, na, 7, &marked));
    cr_assert_eq(marked, 0);
    OK(rkv_tree_unlock(e.tree, &lease));
    /* an unknown namespace, an uncached context */
    OK(rkv_tree_session_end(e.tree, 5, a, na, 7, &marked));
    cr_assert_eq(marked, 0);
    int32_t z[8] = {9, 9, 9, 9, 9, 9, 9, 9};
    OK(rkv_tree_session_end(e.tree, 0, z, 8, 7, &marked));
    cr_assert_eq(marked, 0);
    OK(rkv_tree_check(e.tree));
    close_env(&e);
}

Test(tree_session, releases_the_session_pins_and_refuses_bad_args)
{
    env e;
    open_env(&e, RKV_EVICT_LRU, 16);
    int32_t a[32];
    size_t na = ctx(a, 1, 2);
    use(&e, a, na);
    rkv_retention r = tu_pin(na, 1000, 7);
    OK(rkv_tree_retain(e.tree, 0, a, na, &r, 10, NULL));
    rkv_retention_stats rs;
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.pins, 1);
    uint32_t marked = 99;
    cr_assert_eq(rkv_tree_session_end(NULL, 0, a, na, 7, &marked),
                 RKV_ERR_INVALID_ARG);
    cr_assert_eq(marked, 0);
    cr_assert_eq(rkv_tree_session_end(e.tree, 0, NULL, na, 7, NULL),
                 RKV_ERR_INVALID_ARG);
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.pins, 1, "a refused call changes nothing");
    OK(rkv_tree_session_end(e.tree, 0, a, na, 7, &marked));
    OK(rkv_tree_retention_stats(e.tree, &rs));
    cr_assert_eq(rs.pins, 0);
    cr_assert_eq(rs.pins_released, 1);
    cr_assert_eq(marked, 4, "no branch: the whole context is a's");
    close_env(&e);
}

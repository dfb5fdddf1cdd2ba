/*
 * tests/test_evict_names.c -- eviction policy names (retain/evict_names.c):
 * every name maps to a policy a tree accepts and back, unknown names and
 * values are refused with a message, and the mapping is one to one.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "radixkv.h"
#include "tests/support/handles.h"

/* Values around the known ones: every one the table names must be a policy
 * rkv_tree_create accepts, every other one it refuses. */
Test(evict_names, round_trip_and_tree_agree)
{
    rkv_pool *pool = tu_pool(8, 4);
    int named = 0;
    for (int v = -2; v < 16; v++) {
        const char *name = rkv_evict_policy_name(v);
        rkv_tree_config tc;
        rkv_tree_config_init(&tc);
        tc.evict_policy = v;
        rkv_tree *tree = NULL;
        rkv_status st = rkv_tree_create(pool, &tc, &tree);
        if (!name) {
            cr_assert_neq(st, RKV_OK, "policy %d has no name but a tree "
                                      "accepts it", v);
            continue;
        }
        cr_assert_eq(st, RKV_OK, "policy %s (%d) refused by the tree", name, v);
        rkv_tree_destroy(tree);
        named++;
        int back = -1;
        cr_assert_eq(rkv_evict_policy_from_name(name, &back), RKV_OK);
        cr_assert_eq(back, v, "%s -> %d, expected %d", name, back, v);
    }
    cr_assert_geq(named, 2);
    rkv_pool_destroy(pool);
}

Test(evict_names, known_names)
{
    int p = -1;
    cr_assert_eq(rkv_evict_policy_from_name("lru", &p), RKV_OK);
    cr_assert_eq(p, RKV_EVICT_LRU);
    cr_assert_eq(rkv_evict_policy_from_name("priority", &p), RKV_OK);
    cr_assert_eq(p, RKV_EVICT_PRIORITY);
    cr_assert_str_eq(rkv_evict_policy_name(RKV_EVICT_LRU), "lru");
    cr_assert_str_eq(rkv_evict_policy_name(RKV_EVICT_PRIORITY), "priority");
}

Test(evict_names, unknown_name_changes_nothing)
{
    int p = 77;
    cr_assert_eq(rkv_evict_policy_from_name("LRU", &p), RKV_ERR_INVALID_ARG);
    cr_assert_eq(p, 77);
    cr_assert_not_null(strstr(rkv_last_error(), "'LRU'"));
    cr_assert_not_null(strstr(rkv_last_error(), "lru"));
    cr_assert_not_null(strstr(rkv_last_error(), "priority"));
    cr_assert_eq(rkv_evict_policy_from_name("", &p), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_evict_policy_from_name(NULL, &p), RKV_ERR_INVALID_ARG);
    cr_assert_eq(rkv_evict_policy_from_name("lru", NULL), RKV_ERR_INVALID_ARG);
    cr_assert_eq(p, 77);
    cr_assert_null(rkv_evict_policy_name(-1));
    cr_assert_null(rkv_evict_policy_name(1000));
}

/*
 * retain/ns_ttl.c -- default pin TTL per namespace: a bounded table
 * (RKV_NS_TTL_MAX entries, inline in the tree: setting a TTL never
 * allocates) that rkv_tree_retain consults when a retention pins without
 * its own ttl_ms.
 *
 * Invariants (rkv_ns_ttl_check): ns_ttl_n <= RKV_NS_TTL_MAX; the first
 * ns_ttl_n entries name distinct namespaces, each with ttl_ms > 0 (a TTL
 * of 0 removes its entry, so "no entry" and "no default" are one state).
 */
#include "common/status.h"
#include "radix/tree_core.h"
#include "retain/retain.h"

static uint32_t rkv_ns_ttl_find(const rkv_tree *t, rkv_namespace ns)
{
    for (uint32_t i = 0; i < t->retain.ns_ttl_n; i++)
        if (t->retain.ns_ttl[i].ns == ns)
            return i;
    return RKV_NIL;
}

uint64_t rkv_ns_ttl_lookup(const rkv_tree *t, rkv_namespace ns)
{
    uint32_t i = rkv_ns_ttl_find(t, ns);
    return i == RKV_NIL ? 0 : t->retain.ns_ttl[i].ttl_ms;
}

rkv_status rkv_tree_set_namespace_ttl(rkv_tree *tree, rkv_namespace ns,
                                      uint64_t ttl_ms)
{
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_set_namespace_ttl: NULL tree");
    uint32_t i = rkv_ns_ttl_find(tree, ns);
    if (ttl_ms == 0) {
        if (i != RKV_NIL)
            tree->retain.ns_ttl[i] = tree->retain.ns_ttl[--tree->retain.ns_ttl_n];
        return RKV_OK;
    }
    if (i == RKV_NIL) {
        if (tree->retain.ns_ttl_n == RKV_NS_TTL_MAX)
            return rkv_set_error(RKV_ERR_NO_SPACE,
                                 "rkv_tree_set_namespace_ttl: %d namespaces "
                                 "already have a TTL (the limit); remove one "
                                 "(ttl_ms 0) first", RKV_NS_TTL_MAX);
        i = tree->retain.ns_ttl_n++;
        tree->retain.ns_ttl[i].ns = ns;
    }
    tree->retain.ns_ttl[i].ttl_ms = ttl_ms;
    return RKV_OK;
}

rkv_status rkv_tree_namespace_ttl(const rkv_tree *tree, rkv_namespace ns,
                                  uint64_t *ttl_ms)
{
    if (tree == NULL || ttl_ms == NULL)
        return rkv_null_arg("rkv_tree_namespace_ttl", tree, "tree", "ttl_ms");
    *ttl_ms = rkv_ns_ttl_lookup(tree, ns);
    return RKV_OK;
}

rkv_status rkv_ns_ttl_check(const rkv_tree *t)
{
    if (t->retain.ns_ttl_n > RKV_NS_TTL_MAX)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: %u namespace "
                             "TTLs, limit %d", t->retain.ns_ttl_n, RKV_NS_TTL_MAX);
    for (uint32_t i = 0; i < t->retain.ns_ttl_n; i++) {
        if (t->retain.ns_ttl[i].ttl_ms == 0)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: namespace "
                                 "TTL entry %u is 0", i);
        for (uint32_t j = 0; j < i; j++)
            if (t->retain.ns_ttl[j].ns == t->retain.ns_ttl[i].ns)
                return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: "
                                     "namespace %llu has two TTL entries",
                                     (unsigned long long)t->retain.ns_ttl[i].ns);
    }
    return RKV_OK;
}

/*
 * retain/session.c -- rkv_tree_session_end: a session told the cache
 * it ended (an agent's answer without a tool call), so the pages only it
 * used will not be asked for again and go first.
 *
 * Which pages: the cached path of the session's context, from its end up
 * to the first node that someone else also uses -- a node with another
 * child (a branch: other contexts continue there), a lower-tier child,
 * or a lock (a running request or another owner's pin; a lock on a node
 * locks its ancestors too, so the walk stops at the first). A radix tree
 * branches only at node ends, so no split is needed. A context that
 * continues past its end (a node that goes on, or children under the
 * end) is someone else's prefix: nothing is marked.
 *
 * Marked nodes carry meta[].flags[RKV_META_ENDED]; rkv_lru_bucket puts a
 * marked leaf in RKV_ENDED_BUCKET, which rkv_lru_first takes before any
 * other list under every policy (LRU order inside it). Any later use of a
 * marked node (a match or an insert through it: rkv_tree_touch) clears
 * the mark on its whole path, so a page that a new session shares is
 * ordinary again. The session's pins are released first (they are the
 * session's, and it ended). O(path) per call; the only allocation is the
 * meta[] table when no retention call made it yet.
 */
#include <string.h>

#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree_core.h"
#include "radix/tree_lru.h"
#include "radix/tree_match.h"

/* meta[] (one entry per slot), as rkv_tree_retain makes it. */
static rkv_status rkv_session_meta(rkv_tree *t)
{
    if (t->retain.meta != NULL)
        return RKV_OK;
    rkv_node_retention *m = rkv_node_mem_alloc(&t->mem, (size_t)t->nodes_cap * sizeof *m);
    if (m == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_session_end: "
                                            "retention table");
    for (uint32_t i = 0; i < t->nodes_cap; i++)
        m[i] = RKV_NODE_RETENTION_FRESH;
    t->retain.meta = m;
    return RKV_OK;
}

/* Marks node y as used only by ended sessions, relisting it when listed. */
static void rkv_session_mark(rkv_tree *t, uint32_t y)
{
    if (t->retain.meta[y].flags[RKV_META_ENDED])
        return;
    int listed = rkv_tree_in_lru(&t->nodes[y]);
    if (listed)
        rkv_lru_unlink(t, y);
    t->retain.meta[y].flags[RKV_META_ENDED] = 1;
    if (listed)
        rkv_lru_place(t, y);
}

rkv_status rkv_tree_session_end(rkv_tree *tree, rkv_namespace ns,
                                const int32_t *tokens, size_t n,
                                uint64_t owner, uint32_t *pages_out)
{
    static const char fn[] = "rkv_tree_session_end";
    if (pages_out != NULL)
        *pages_out = 0;
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tree", fn);
    rkv_tree *t = tree;
    if (n > 0 && tokens == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tokens", fn);
    if (n / t->P >= RKV_NIL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: n=%zu too large", fn, n);
    rkv_status st = rkv_session_meta(t);
    if (st != RKV_OK)
        return st;
    if ((st = rkv_tree_pins_release(t, owner, NULL)) != RKV_OK)
        return st;
    uint32_t root = rkv_child_index_find_ns(t, ns);
    if (root == RKV_NIL)
        return RKV_OK;
    rkv_walk w = {root, 0, RKV_NIL, 0, 0};
    rkv_tree_walk(t, root, 0, tokens, (uint32_t)(n / t->P), NULL, NULL, NULL,
                  &w);
    uint32_t y = w.node;
    if (w.partial != RKV_NIL || y == root || t->nodes[y].first_child != RKV_NIL ||
        rkv_tree_has_lower_child(t, y))
        return RKV_OK; /* the context goes on: someone else's prefix */
    uint32_t prev = RKV_NIL, pages = 0;
    while (y != root) {
        const rkv_tnode *x = &t->nodes[y];
        int only = x->first_child == RKV_NIL ||
                   (x->first_child == prev && t->nodes[prev].next_sib == RKV_NIL);
        if (x->lock_count != 0 || !only || (prev != RKV_NIL &&
                                            rkv_tree_has_lower_child(t, y)))
            break;
        rkv_session_mark(t, y);
        pages += x->num_pages;
        prev = y;
        y = x->parent;
    }
    if (pages_out != NULL)
        *pages_out = pages;
    return RKV_OK;
}

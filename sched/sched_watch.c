/*
 * sched/sched_watch.c -- which waiting requests a change of the tree can
 * move, so that a refresh of the cached PEEK matches costs O(groups + new
 * children + requests that moved) instead of O(waiting).
 *
 * Every matched waiting request (only without tiers: sched_order.c) is
 * in the group of its peek node X (the deepest fully matched node; node id
 * 0: nothing matched, the namespace has no root) and in one of two lists:
 *   - a bucket, keyed by X and the child-index key of its next page
 *     (rkv_child_index_key_page), when its match ends exactly at X's end
 *     and a next page exists. Its match can only move when X goes stale
 *     (trimmed or freed: X's generation changes) or a child whose first
 *     page is that page is added under X;
 *   - the group's `other` list: the match goes part way into a child (a
 *     trim or split of that child moves it), the prompt has no further
 *     page, or X is no node. Re-matched whenever X's children change.
 * A new child of X is always put at the head of X's sibling list (radix/:
 * rkv_tree_add_leaf; a split puts the new head in the old node's place,
 * and its first page is the old node's, which no bucket of X waits for).
 * So the children added since the group's last look are the ones before
 * the remembered head; if the remembered head is gone or was split (it no
 * longer hangs under X), every child of X is looked at.
 * Invariants: a request is grouped iff wgrp != RKV_WNONE; then it is in
 * group wgrp's `all` list and in exactly one of (the bucket wkey, when
 * wother == 0; the group's `other` list, when wother == 1); a group has at
 * least one member; wgroup_map maps each group's node key to its index + 1;
 * wbucket maps each bucket key to its head request.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree_core.h"
#include "sched/sched_internal.h"

static uint64_t rkv_watch_node_key(rkv_node h)
{
    return ((uint64_t)h.gen << 32) | h.id;
}

/* A bucket key: the child-index key (seeded by X's id) mixed with X's
 * generation, so a reused slot does not share its old buckets. Two
 * buckets may collide: a hit then only re-matches a few requests more. */
static uint64_t rkv_watch_bucket_key(uint64_t child_key, uint32_t gen)
{
    return child_key ^ ((uint64_t)gen * 0x9E3779B97F4A7C15ull);
}

rkv_status rkv_watch_reserve(rkv_sched *s, uint32_t n)
{
    rkv_status st = rkv_ensure_cap((void **)&s->wgroups, &s->wgroups_cap,
                                   s->nwgroups + n, sizeof *s->wgroups);
    if (st == RKV_OK)
        st = rkv_u64map_reserve(&s->wgroup_map, n);
    if (st == RKV_OK)
        st = rkv_u64map_reserve(&s->wbucket, n);
    return st;
}

void rkv_watch_remove(rkv_sched *s, rkv_sched_req *r)
{
    if (r->wgrp == RKV_WNONE)
        return;
    rkv_watch_group *g = &s->wgroups[r->wgrp];
    /* the group's list of all members */
    if (r->gprev != NULL)
        r->gprev->gnext = r->gnext;
    else
        g->all = r->gnext;
    if (r->gnext != NULL)
        r->gnext->gprev = r->gprev;
    /* its bucket or the group's other list */
    if (r->wother) {
        if (r->sprev != NULL)
            r->sprev->snext = r->snext;
        else
            g->other = r->snext;
    } else if (r->sprev != NULL) {
        r->sprev->snext = r->snext;
    } else if (r->snext != NULL) {
        *rkv_u64map_get(&s->wbucket, r->wkey) = (uint64_t)(uintptr_t)r->snext;
    } else {
        rkv_u64map_del(&s->wbucket, r->wkey);
    }
    if (r->snext != NULL)
        r->snext->sprev = r->sprev;
    r->gnext = r->gprev = r->snext = r->sprev = NULL;
    r->wgrp = RKV_WNONE;
    if (--g->n > 0)
        return;
    /* the group is empty: the last one takes its index */
    uint32_t gi = (uint32_t)(g - s->wgroups);
    rkv_u64map_del(&s->wgroup_map, rkv_watch_node_key(g->node));
    uint32_t last = --s->nwgroups;
    if (gi != last) {
        *g = s->wgroups[last];
        *rkv_u64map_get(&s->wgroup_map, rkv_watch_node_key(g->node)) = gi + 1;
        for (rkv_sched_req *m = g->all; m != NULL; m = m->gnext)
            m->wgrp = gi;
    }
}

void rkv_watch_add(rkv_sched *s, rkv_sched_req *r)
{
    const rkv_tree *t = s->tree;
    rkv_node x = r->peek_node;
    uint64_t nk = rkv_watch_node_key(x);
    uint64_t *gv = rkv_u64map_get(&s->wgroup_map, nk);
    uint32_t gi;
    if (gv != NULL) {
        gi = (uint32_t)(*gv - 1);
    } else {
        gi = s->nwgroups++;
        rkv_watch_group *g = &s->wgroups[gi];
        memset(g, 0, sizeof *g);
        g->node = x;
        if (x.id != 0) {
            const rkv_tnode *xn = &t->nodes[x.id];
            g->epoch = xn->children_epoch;
            if (xn->first_child != RKV_NIL) {
                g->head.id = xn->first_child;
                g->head.gen = t->nodes[xn->first_child].gen;
            }
        }
        *rkv_u64map_put(&s->wgroup_map, nk) = gi + 1;
    }
    rkv_watch_group *g = &s->wgroups[gi];
    r->wgrp = gi;
    g->n++;
    r->gprev = NULL;
    r->gnext = g->all;
    if (g->all != NULL)
        g->all->gprev = r;
    g->all = r;
    size_t n = r->len - 1; /* what the peek match looks at */
    r->sprev = NULL;
    if (x.id != 0 && r->peek_tokens == r->peek_depth &&
        r->peek_depth + s->P <= n) {
        r->wother = 0;
        r->wkey = rkv_watch_bucket_key(
            rkv_child_index_key_page(t, x.id, r->tokens + r->peek_depth), x.gen);
        uint64_t *b = rkv_u64map_get(&s->wbucket, r->wkey);
        if (b == NULL)
            b = rkv_u64map_put(&s->wbucket, r->wkey);
        r->snext = (rkv_sched_req *)(uintptr_t)*b;
        if (r->snext != NULL)
            r->snext->sprev = r;
        *b = (uint64_t)(uintptr_t)r;
    } else {
        r->wother = 1;
        r->wkey = 0;
        r->snext = g->other;
        if (g->other != NULL)
            g->other->sprev = r;
        g->other = r;
    }
}

void rkv_watch_clear(rkv_sched *s)
{
    for (uint32_t i = 0; i < s->nwgroups; i++) {
        for (rkv_sched_req *m = s->wgroups[i].all, *nx; m != NULL; m = nx) {
            nx = m->gnext;
            m->gnext = m->gprev = m->snext = m->sprev = NULL;
            m->wgrp = RKV_WNONE;
        }
    }
    s->nwgroups = 0;
    /* emptied, not freed: the capacity reserved for this refresh stays */
    rkv_u64map *maps[2] = {&s->wgroup_map, &s->wbucket};
    for (int i = 0; i < 2; i++) {
        if (maps[i]->cap != 0)
            memset(maps[i]->used, 0, maps[i]->cap);
        maps[i]->count = 0;
    }
}

void rkv_watch_fini(rkv_sched *s)
{
    /* the requests may be freed already: no list is walked */
    s->nwgroups = 0;
    rkv_u64map_fini(&s->wgroup_map);
    rkv_u64map_fini(&s->wbucket);
    free(s->wgroups);
    free(s->wtodo);
    s->wgroups = NULL;
    s->wtodo = NULL;
    s->wgroups_cap = s->wtodo_cap = 0;
}

static void rkv_watch_todo(rkv_sched *s, uint32_t *n, rkv_sched_req *r)
{
    if (r->wmark)
        return; /* two colliding buckets named it */
    r->wmark = 1;
    s->wtodo[(*n)++] = r;
}

uint32_t rkv_watch_collect(rkv_sched *s)
{
    const rkv_tree *t = s->tree;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nwgroups; i++) {
        rkv_watch_group *g = &s->wgroups[i];
        rkv_node x = g->node;
        if (x.id == 0 || !rkv_tree_handle_ok(t, x)) {
            /* no node, or it was trimmed or freed: all from the root */
            for (rkv_sched_req *m = g->all; m != NULL; m = m->gnext)
                rkv_watch_todo(s, &n, m);
            continue;
        }
        const rkv_tnode *xn = &t->nodes[x.id];
        if (xn->children_epoch == g->epoch)
            continue;
        for (rkv_sched_req *m = g->other; m != NULL; m = m->snext)
            rkv_watch_todo(s, &n, m);
        uint32_t stop = RKV_NIL;
        if (g->head.id != 0 && rkv_tree_handle_ok(t, g->head) &&
            t->nodes[g->head.id].parent == x.id)
            stop = g->head.id;
        for (uint32_t c = xn->first_child; c != RKV_NIL && c != stop;
             c = t->nodes[c].next_sib) {
            uint64_t *b = rkv_u64map_get(
                &s->wbucket,
                rkv_watch_bucket_key(rkv_child_index_key_node(t, c), x.gen));
            if (b == NULL)
                continue;
            for (rkv_sched_req *m = (rkv_sched_req *)(uintptr_t)*b; m != NULL;
                 m = m->snext)
                rkv_watch_todo(s, &n, m);
        }
        g->epoch = xn->children_epoch;
        g->head.id = xn->first_child == RKV_NIL ? 0 : xn->first_child;
        g->head.gen = xn->first_child == RKV_NIL ? 0 : t->nodes[xn->first_child].gen;
    }
    return n;
}

rkv_status rkv_watch_check(const rkv_sched *s)
{
    uint64_t members = 0;
    for (uint32_t i = 0; i < s->nwgroups; i++) {
        const rkv_watch_group *g = &s->wgroups[i];
        uint64_t *v = rkv_u64map_get(&s->wgroup_map, rkv_watch_node_key(g->node));
        if (v == NULL || *v != i + 1)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: watch group "
                                 "%u not in the group map", i);
        uint32_t k = 0;
        for (const rkv_sched_req *m = g->all; m != NULL; m = m->gnext, k++) {
            if (m->wgrp != i || m->state != RKV_REQ_WAITING ||
                m->peek_node.id != g->node.id || m->peek_node.gen != g->node.gen)
                return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: request "
                                     "%llu in watch group %u of another node",
                                     (unsigned long long)m->id, i);
            if (!m->wother) {
                const rkv_sched_req *h = NULL;
                uint64_t *b = rkv_u64map_get(&s->wbucket, m->wkey);
                if (b != NULL)
                    h = (const rkv_sched_req *)(uintptr_t)*b;
                while (h != NULL && h != m)
                    h = h->snext;
                if (h == NULL)
                    return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: "
                                         "request %llu missing from its bucket",
                                         (unsigned long long)m->id);
            }
        }
        if (k != g->n || k == 0)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: watch group "
                                 "%u counts %u members, lists %u", i, g->n, k);
        members += k;
    }
    if (s->wgroup_map.count != s->nwgroups)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: %u watch groups, "
                             "%u in the map", s->nwgroups, s->wgroup_map.count);
    /* What the lists are for: when the tree has not changed since the last
     * refresh, every matched request's cached match is the PEEK match a
     * fresh look from the root finds. */
    rkv_tree_sig g;
    rkv_tree_sig_get(s, &g);
    if (!s->watch_valid || !s->sig_valid || memcmp(&g, &s->sig, sizeof g) != 0)
        return RKV_OK;
    uint64_t grouped = 0;
    for (uint32_t i = 0; i < s->nwaiting; i++) {
        const rkv_sched_req *r = s->waiting[i];
        if (!r->peek_valid)
            continue;
        if (r->wgrp == RKV_WNONE)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: matched "
                                 "request %llu in no watch group",
                                 (unsigned long long)r->id);
        grouped++;
        rkv_match m;
        rkv_status st = rkv_tree_match(s->tree, r->ns, r->tokens, r->len - 1, NULL,
                                       RKV_MATCH_PEEK, &m);
        if (st != RKV_OK)
            return st;
        if (m.matched_tokens != r->peek_tokens)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: request "
                                 "%llu cached match %zu, the tree's %zu",
                                 (unsigned long long)r->id, r->peek_tokens,
                                 m.matched_tokens);
    }
    if (grouped != members)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_check: %llu grouped "
                             "requests, %llu in the groups",
                             (unsigned long long)grouped,
                             (unsigned long long)members);
    return RKV_OK;
}

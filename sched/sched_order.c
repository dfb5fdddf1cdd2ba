/*
 * sched/sched_order.c -- the order in which waiting requests are admitted.
 *
 * Policies:
 *   fcfs      arrival order (arrival_ms, then submission order).
 *   lpm       longest cached prefix first (ties: arrival order).
 *   dfs       SGLang's DFS-weight order: the weight of a tree node is the
 *             number of waiting requests whose match (deepest fully matched
 *             node of the PEEK match) ends in its subtree; a DFS over the
 *             touched nodes (built from rkv_tree_node_info parent links,
 *             nothing else of the tree is visited) visits children heaviest
 *             first and emits a node's own requests (arrival order) after
 *             its subtree, as SGLang does. Requests that share a prefix run
 *             together.
 *   priority  larger priority + aging_per_s * seconds waited first. All
 *             requests age at the same rate, so the order equals the order
 *             of the static key priority - aging_per_s * arrival_s: no
 *             re-sort as time passes.
 *   bounded   (ours) lpm order, plus a fast lane: requests that have
 *             waited more than max_wait_ms, oldest first. Admissions
 *             alternate between the lane and the lpm order (the turn
 *             persists across steps). Under light load nothing is overdue
 *             and this is lpm, with lpm's hit rate. Under overload, when
 *             most requests are overdue, plain "overdue first" would
 *             degenerate into FCFS and lose locality; alternating keeps half
 *             the admissions cache-aware while the oldest request is
 *             admitted at the lane's next turn, so no request waits more
 *             than max_wait_ms plus the time the overdue requests older
 *             than it take at half the admission rate. Overdue requests are
 *             a prefix of the arrival order, found by walking a second,
 *             arrival-ordered queue from its head (O(overdue + 1)). The
 *             step stops admitting at the first candidate that does not
 *             fit, so an overdue request is never overtaken for lack of
 *             space.
 * Scale (lpm, bounded, dfs need every waiting request's cached prefix):
 *   each waiting request keeps its PEEK match (tokens, deepest fully matched
 *   node, that node's depth and children_epoch). A refresh first compares a
 *   signature of the tree (pages inserted / evicted, splits, node and
 *   namespace counts, cached pages: the counters that move whenever any
 *   children_epoch can move); if it is unchanged only new arrivals are
 *   matched. Otherwise the watch lists (sched_watch.c) name the requests a
 *   change can have moved -- those whose node went stale, whose match ends
 *   part way into a child of a changed node, or whose next page is the
 *   first page of a child added since -- and only those are re-matched: a
 *   stale handle from the root, else rkv_tree_match_from below the node
 *   (O(new part)). A refresh costs O(groups + new children + moved
 *   requests), not O(waiting).
 *   Tiers (lpm, bounded, once pages went below the device): residency
 *   below the device moves without touching any children_epoch, so a
 *   refresh re-matches each waiting request from the root with
 *   rkv_tree_match_tiers (PEEK) -- O(waiting x path) in a step where the
 *   tree changed; the signature includes the tier counters.
 *   The sorted order lives in an array with lazy deletion (entry stamps)
 *   plus, for the key order, a short sorted side run: requests whose key
 *   changed and new arrivals are sorted alone (O(k log k)) and merged into
 *   the side run; the side run is merged into the main array only when it
 *   outgrows sqrt(8 n) (or half the entries are dead), so a step costs
 *   O(sqrt(n)) amortized; iteration reads both runs merged. The ended
 *   requests a step forgets are freed once no dead entry can name them
 *   (after a full merge).
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "sched/sched_internal.h"

void rkv_sched_queue_fini(rkv_sched_queue *q)
{
    free(q->a);
    free(q->b);
    free(q->add);
    q->a = q->b = q->add = NULL;
    q->n = q->cap = q->nb = q->bcap = q->nadd = q->addcap = q->dead = 0;
}

static int rkv_cmp_arrival_req(const rkv_sched_req *x, const rkv_sched_req *y)
{
    if (x->arrival_ms != y->arrival_ms)
        return x->arrival_ms < y->arrival_ms ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

static int rkv_cmp_key_req(const rkv_sched_req *x, const rkv_sched_req *y)
{
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return rkv_cmp_arrival_req(x, y);
}

static int rkv_queue_cmp_arrival(const void *a, const void *b)
{
    return rkv_cmp_arrival_req(((const rkv_queue_entry *)a)->req,
                               ((const rkv_queue_entry *)b)->req);
}

static int rkv_queue_cmp_key(const void *a, const void *b)
{
    return rkv_cmp_key_req(((const rkv_queue_entry *)a)->req,
                           ((const rkv_queue_entry *)b)->req);
}

/* The arrivals queue uses arrival_stamp, the order queue order_stamp; which one a
 * queue uses is fixed at creation. */
static int rkv_uses_astamp(const rkv_sched *s, const rkv_sched_queue *q)
{
    return q == &s->arrivals;
}

static int rkv_entry_live(const rkv_sched *s, const rkv_sched_queue *q,
                          const rkv_queue_entry *e)
{
    const rkv_sched_req *r = e->req;
    if (r->state != RKV_REQ_WAITING)
        return 0;
    return e->stamp == (rkv_uses_astamp(s, q) ? r->arrival_stamp : r->order_stamp);
}

static rkv_status rkv_sched_queue_add(rkv_sched_queue *q, rkv_sched_req *r, uint32_t stamp)
{
    rkv_status st = rkv_ensure_cap((void **)&q->add, &q->addcap, q->nadd + 1,
                                   sizeof *q->add);
    if (st != RKV_OK)
        return st;
    q->add[q->nadd].req = r;
    q->add[q->nadd].stamp = stamp;
    q->nadd++;
    return RKV_OK;
}

static double rkv_key_of(const rkv_sched *s, const rkv_sched_req *r)
{
    switch (s->cfg.policy) {
    case RKV_POLICY_PRIORITY:
        return -((double)r->priority -
                 s->cfg.aging_per_s * r->arrival_ms / 1000.0);
    case RKV_POLICY_LPM:
    case RKV_POLICY_BOUNDED:
        /* tiers: a lower continuation counts, less its load time */
        return -((double)r->peek_tokens +
                 rkv_sched_tier_credit(s, r->peek_host, r->peek_disk));
    default:
        return 0.0;
    }
}

rkv_status rkv_order_push(rkv_sched *s, rkv_sched_req *r)
{
    /* reserve both queues first so a failure changes nothing */
    rkv_status st = rkv_ensure_cap((void **)&s->order.add, &s->order.addcap,
                                   s->order.nadd + 1, sizeof *s->order.add);
    if (st == RKV_OK)
        st = rkv_ensure_cap((void **)&s->arrivals.add, &s->arrivals.addcap,
                            s->arrivals.nadd + 1, sizeof *s->arrivals.add);
    if (st != RKV_OK)
        return st;
    memset(&r->peek_node, 0, sizeof r->peek_node);
    r->peek_tokens = r->peek_depth = 0;
    r->peek_host = r->peek_disk = 0;
    r->peek_epoch = 0;
    r->peek_valid = 0;
    r->key = rkv_key_of(s, r);
    (void)rkv_sched_queue_add(&s->order, r, ++r->order_stamp);
    if (s->cfg.policy == RKV_POLICY_BOUNDED || s->cfg.policy == RKV_POLICY_DFS)
        (void)rkv_sched_queue_add(&s->arrivals, r, ++r->arrival_stamp);
    s->dfs_dirty = 1;
    return RKV_OK;
}

/* Merges the sorted runs x[0..nx) and y[0..ny) into out; with
 * drop_dead, dead entries are left out. Returns the entries written. */
static uint32_t rkv_queue_merge(const rkv_sched *s, const rkv_sched_queue *q,
                                const rkv_queue_entry *x, uint32_t nx,
                                const rkv_queue_entry *y, uint32_t ny,
                                rkv_queue_entry *out, int drop_dead)
{
    int (*cmp)(const void *, const void *) =
        q->by_arrival ? rkv_queue_cmp_arrival : rkv_queue_cmp_key;
    uint32_t i = 0, j = 0, o = 0;
    while (i < nx || j < ny) {
        if (drop_dead && i < nx && !rkv_entry_live(s, q, &x[i])) {
            i++;
            continue;
        }
        if (drop_dead && j < ny && !rkv_entry_live(s, q, &y[j])) {
            j++;
            continue;
        }
        if (j >= ny || (i < nx && cmp(&x[i], &y[j]) <= 0))
            out[o++] = x[i++];
        else
            out[o++] = y[j++];
    }
    return o;
}

/* Side run bound of the key order: sqrt(8 n), at least 256. Merging the
 * additions into the side run costs O(side) a step, and the full merge
 * (O(n)) comes once the side run outgrows the bound, so a step costs
 * O(sqrt(n)) amortized instead of O(n). */
static uint32_t rkv_side_bound(uint32_t n)
{
    uint32_t r = 16;
    while ((uint64_t)r * r < (uint64_t)n * 8)
        r++;
    return r < 256 ? 256 : r;
}

/* Sorts the additions and merges them in. The arrival queue and a key
 * order whose side run would outgrow its bound (or that is half dead) are
 * merged whole, dropping the dead entries (dead == 0 afterwards); else the
 * additions go into the side run b, and the dead entries of a and b stay
 * (iteration skips them). */
static rkv_status rkv_sched_queue_sort(rkv_sched *s, rkv_sched_queue *q)
{
    if (q->nadd == 0 && q->dead == 0)
        return RKV_OK;
    int (*cmp)(const void *, const void *) =
        q->by_arrival ? rkv_queue_cmp_arrival : rkv_queue_cmp_key;
    uint32_t k = 0;
    for (uint32_t i = 0; i < q->nadd; i++) {
        if (rkv_entry_live(s, q, &q->add[i]))
            q->add[k++] = q->add[i];
    }
    q->nadd = k;
    qsort(q->add, k, sizeof *q->add, cmp);
    uint64_t live = (uint64_t)q->n + q->nb;
    if (!q->by_arrival && (uint64_t)q->nb + k <= rkv_side_bound(q->n) &&
        (uint64_t)q->dead * 2 <= live) {
        if (k == 0)
            return RKV_OK;
        rkv_queue_entry *nb = rkv_sched_mem_malloc(((size_t)q->nb + k) * sizeof *nb);
        if (nb == NULL)
            return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
        q->nb = rkv_queue_merge(s, q, q->b, q->nb, q->add, k, nb, 0);
        free(q->b);
        q->b = nb;
        q->bcap = q->nb;
        q->nadd = 0;
        return RKV_OK;
    }
    rkv_queue_entry *ab = NULL;
    uint32_t nab = q->n;
    if (q->nb > 0) {
        ab = rkv_sched_mem_malloc(((size_t)q->n + q->nb) * sizeof *ab);
        if (ab == NULL)
            return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
        nab = rkv_queue_merge(s, q, q->a, q->n, q->b, q->nb, ab, 1);
    }
    uint64_t total = (uint64_t)nab + k;
    rkv_queue_entry *fresh = rkv_sched_mem_malloc((total ? total : 1) * sizeof *fresh);
    if (fresh == NULL) {
        free(ab);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
    }
    uint32_t o = rkv_queue_merge(s, q, ab != NULL ? ab : q->a, nab, q->add, k,
                                 fresh, 1);
    free(ab);
    free(q->a);
    free(q->b);
    q->a = fresh;
    q->n = o;
    q->cap = (uint32_t)(total ? total : 1);
    q->b = NULL;
    q->nb = q->bcap = 0;
    q->nadd = 0;
    q->dead = 0;
    return RKV_OK;
}

uint32_t rkv_order_live(const rkv_sched *s, const rkv_sched_queue *q)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < q->n; i++)
        n += rkv_entry_live(s, q, &q->a[i]) != 0;
    for (uint32_t i = 0; i < q->nb; i++)
        n += rkv_entry_live(s, q, &q->b[i]) != 0;
    return n;
}

/* ---- match refresh ------------------------------------------------------------ */

static uint64_t rkv_node_key(rkv_node h)
{
    return ((uint64_t)h.gen << 32) | h.id;
}

/* children_epoch + 1 of a handle (0: stale), memoized for this refresh. */
static rkv_status rkv_memo_node(rkv_sched *s, rkv_node h, uint64_t *epoch1,
                                size_t *depth)
{
    uint64_t key = rkv_node_key(h);
    uint64_t *e = rkv_u64map_get(&s->memo_epoch, key);
    if (e != NULL) {
        *epoch1 = *e;
        *depth = *e ? (size_t)*rkv_u64map_get(&s->memo_depth, key) : 0;
        return RKV_OK;
    }
    rkv_status st = rkv_u64map_reserve(&s->memo_epoch, 1);
    if (st == RKV_OK)
        st = rkv_u64map_reserve(&s->memo_depth, 1);
    if (st != RKV_OK)
        return st;
    rkv_node_info info;
    if (h.id == 0 || rkv_tree_node_info(s->tree, h, &info) != RKV_OK) {
        *epoch1 = 0;
        *depth = 0;
    } else {
        *epoch1 = info.children_epoch + 1;
        *depth = info.depth_tokens;
    }
    *rkv_u64map_put(&s->memo_epoch, key) = *epoch1;
    *rkv_u64map_put(&s->memo_depth, key) = *depth;
    return RKV_OK;
}

/* Brings r's peek match up to date; *changed when its length moved. */
static rkv_status rkv_refresh_one(rkv_sched *s, rkv_sched_req *r, int *changed)
{
    size_t n = r->len - 1;
    uint64_t e1 = 0;
    size_t depth = 0;
    rkv_status st;
    /* only lpm and bounded order by the lower continuation: the other
     * policies keep the incremental device match */
    int lower = s->tiers_live && (s->cfg.policy == RKV_POLICY_LPM ||
                                  s->cfg.policy == RKV_POLICY_BOUNDED);
    if (r->peek_node.id != 0 && !lower) {
        st = rkv_memo_node(s, r->peek_node, &e1, &depth);
        if (st != RKV_OK)
            return st;
        if (e1 != 0 && e1 - 1 == r->peek_epoch)
            return RKV_OK; /* nothing below the node changed */
    }
    rkv_match m;
    if (lower) {
        /* residency below the device moves without touching any
         * children_epoch: the whole path, from the root */
        rkv_tier_match tm;
        st = rkv_tree_match_tiers(s->tree, r->ns, r->tokens, n, NULL,
                                  RKV_MATCH_PEEK, &m, &tm);
        if (st != RKV_OK)
            return st;
        if (tm.host_tokens != r->peek_host || tm.disk_tokens != r->peek_disk) {
            r->peek_host = tm.host_tokens;
            r->peek_disk = tm.disk_tokens;
            *changed = 1;
        }
    } else if (e1 != 0)
        st = rkv_tree_match_from(s->tree, r->peek_node, r->peek_depth, r->tokens,
                                 n, NULL, &m);
    else
        st = rkv_tree_match(s->tree, r->ns, r->tokens, n, NULL,
                            RKV_MATCH_PEEK, &m);
    if (st != RKV_OK)
        return st;
    uint64_t ne1 = 0;
    size_t ndepth = 0;
    if (m.node.id != 0) {
        st = rkv_memo_node(s, m.node, &ne1, &ndepth);
        if (st != RKV_OK)
            return st;
    }
    if (ne1 == 0) {
        memset(&r->peek_node, 0, sizeof r->peek_node);
        r->peek_depth = 0;
        r->peek_epoch = 0;
    } else {
        r->peek_node = m.node;
        r->peek_depth = ndepth;
        r->peek_epoch = ne1 - 1;
    }
    if (m.matched_tokens != r->peek_tokens) {
        r->peek_tokens = m.matched_tokens;
        *changed = 1;
    }
    return RKV_OK;
}

void rkv_tree_sig_get(const rkv_sched *s, rkv_tree_sig *g)
{
    rkv_tree_stats ts;
    memset(g, 0, sizeof *g);
    if (rkv_tree_get_stats(s->tree, &ts) != RKV_OK)
        return;
    g->inserted = ts.inserted_pages;
    g->evicted = ts.evicted_blocks;
    g->splits = ts.splits;
    g->nodes = ts.nodes;
    g->namespaces = ts.namespaces;
    g->cached = ts.cached_blocks;
    rkv_tier_stats tt;
    if (s->cfg.use_tiers && rkv_tree_tier_stats(s->tree, &tt) == RKV_OK) {
        g->lower = tt.resident_pages[RKV_MEDIUM_HOST] +
                   tt.resident_pages[RKV_MEDIUM_DISK];
        g->lower_evicted = tt.evictions[RKV_MEDIUM_HOST] +
                           tt.evictions[RKV_MEDIUM_DISK];
        g->loaded = tt.loads_blocks[RKV_MEDIUM_HOST] +
                    tt.loads_blocks[RKV_MEDIUM_DISK];
    }
}

static rkv_status rkv_refresh_all(rkv_sched *s)
{
    rkv_tree_sig g;
    rkv_tree_sig_get(s, &g);
    if (!s->tiers_live && g.lower > 0) {
        /* pages went below the device for the first time: from now on
         * every refresh looks below too (sched_tier.c) */
        s->tiers_live = 1;
        s->sig_valid = 0;
    }
    int same = s->sig_valid && memcmp(&g, &s->sig, sizeof g) == 0;
    rkv_u64map *me = &s->memo_epoch, *md = &s->memo_depth;
    if (me->count) {
        memset(me->used, 0, me->cap);
        me->count = 0;
        memset(md->used, 0, md->cap);
        md->count = 0;
    }
    /* Without tiers the watch lists name the requests a change can move
     * (sched_watch.c). With tiers every policy re-matches everyone from the
     * root (see rkv_refresh_one): a load from a lower tier moves a device
     * match without adding a child under the matched node, which no watch
     * list sees. */
    int watch = !s->tiers_live;
    if (!watch) {
        rkv_watch_clear(s);
        s->watch_valid = 0;
    }
    /* Room for every re-keyed entry up front: once a request's match has
     * moved, its old queue entry is dead, so failing to add the new one
     * would drop it from the order for good. */
    uint32_t room = same ? s->order.nadd : s->nwaiting;
    if (s->cfg.policy != RKV_POLICY_DFS) {
        rkv_status st = rkv_ensure_cap((void **)&s->order.add,
                                       &s->order.addcap, s->order.nadd + room,
                                       sizeof *s->order.add);
        if (st != RKV_OK)
            return st;
    }
    uint32_t n = 0;
    rkv_sched_req **todo = s->waiting;
    if (watch) {
        /* the todo list may name everyone (a rebuild) */
        rkv_status st = rkv_ensure_cap((void **)&s->wtodo, &s->wtodo_cap,
                                       s->nwaiting, sizeof *s->wtodo);
        if (st != RKV_OK)
            return st;
        todo = s->wtodo;
        if (!s->watch_valid) {
            rkv_watch_clear(s);
            for (uint32_t i = 0; i < s->nwaiting; i++)
                todo[n++] = s->waiting[i];
        } else {
            /* the groups first (a changed tree), then the requests queued
             * since the last refresh (their first match; they sit in
             * order.add and are not grouped yet) */
            if (!same)
                n = rkv_watch_collect(s);
            for (uint32_t i = 0; i < s->order.nadd; i++) {
                rkv_sched_req *r = s->order.add[i].req;
                if (r->state == RKV_REQ_WAITING && !r->peek_valid && !r->wmark) {
                    r->wmark = 1;
                    todo[n++] = r;
                }
            }
        }
        /* from here on a failure must regroup everyone next time (the
         * groups above are already marked up to date) */
        s->watch_valid = 0;
        st = rkv_watch_reserve(s, n); /* room to regroup them */
        if (st != RKV_OK) {
            for (uint32_t i = 0; i < n; i++)
                todo[i]->wmark = 0;
            return st;
        }
    } else {
        n = same ? s->order.nadd : s->nwaiting;
    }
    for (uint32_t i = 0; i < n; i++) {
        rkv_sched_req *r = watch ? todo[i] : same ? s->order.add[i].req : todo[i];
        if (!watch && same && (r->state != RKV_REQ_WAITING || r->peek_valid))
            continue;
        r->wmark = 0;
        int changed = 0;
        rkv_status st = rkv_refresh_one(s, r, &changed);
        if (st != RKV_OK) {
            for (uint32_t j = i + 1; watch && j < n; j++)
                todo[j]->wmark = 0;
            return st;
        }
        r->peek_valid = 1;
        if (watch) {
            rkv_watch_remove(s, r);
            rkv_watch_add(s, r); /* room reserved */
        }
        if (changed) {
            r->key = rkv_key_of(s, r);
            s->dfs_dirty = 1;
            if (s->cfg.policy != RKV_POLICY_DFS) {
                (void)rkv_sched_queue_add(&s->order, r, ++r->order_stamp); /* reserved */
                s->order.dead++;
            }
        }
    }
    if (watch)
        s->watch_valid = 1;
    s->sig = g;
    s->sig_valid = 1;
    return RKV_OK;
}

/* ---- dfs ------------------------------------------------------------------------- */

typedef struct rkv_dnode {
    rkv_node h;
    uint32_t parent;      /* local index; 0 = the virtual super-root      */
    uint32_t weight;
    uint32_t first_child; /* after sorting: children contiguous in kids[] */
    uint32_t nkids;
    uint32_t req_first, req_n; /* range in the sorted request array        */
} rkv_dnode;

typedef struct rkv_dfs_ctx {
    rkv_dnode *nodes;
    uint32_t n, cap;
    rkv_u64map map; /* handle key -> local index */
} rkv_dfs_ctx;

/* Local index of handle h (creating it and its ancestors). */
static rkv_status rkv_dfs_node(rkv_sched *s, rkv_dfs_ctx *c, rkv_node h,
                               uint32_t *out)
{
    if (h.id == 0) {
        *out = 0;
        return RKV_OK;
    }
    uint64_t *v = rkv_u64map_get(&c->map, rkv_node_key(h));
    if (v != NULL) {
        *out = (uint32_t)*v;
        return RKV_OK;
    }
    /* walk up until a known node, then create downwards */
    uint32_t first_new = c->n;
    rkv_node cur = h;
    uint32_t attach = 0;
    for (;;) {
        rkv_status st = rkv_ensure_cap((void **)&c->nodes, &c->cap, c->n + 1,
                                       sizeof *c->nodes);
        if (st == RKV_OK)
            st = rkv_u64map_reserve(&c->map, 1);
        if (st != RKV_OK)
            return st;
        rkv_node_info info;
        if (rkv_tree_node_info(s->tree, cur, &info) != RKV_OK)
            memset(&info, 0, sizeof info); /* stale: hang it at the top */
        rkv_dnode *d = &c->nodes[c->n];
        memset(d, 0, sizeof *d);
        d->h = cur;
        *rkv_u64map_put(&c->map, rkv_node_key(cur)) = c->n;
        c->n++;
        if (info.parent.id == 0) {
            attach = 0;
            break;
        }
        uint64_t *pv = rkv_u64map_get(&c->map, rkv_node_key(info.parent));
        if (pv != NULL) {
            attach = (uint32_t)*pv;
            break;
        }
        cur = info.parent;
    }
    /* nodes first_new .. n-1 form a chain child -> parent */
    for (uint32_t i = first_new; i + 1 < c->n; i++)
        c->nodes[i].parent = i + 1;
    c->nodes[c->n - 1].parent = attach;
    *out = first_new;
    return RKV_OK;
}

/* A child's sort key, copied out of the node so that qsort's comparison
 * needs nothing but its two arguments (no context, no shared state: two
 * schedulers may sort on two threads at once). */
typedef struct rkv_dkid {
    uint32_t parent;
    uint32_t weight;
    uint32_t id;  /* tree node id: the deterministic tie-break */
    uint32_t idx; /* local index */
} rkv_dkid;

static int rkv_dfs_cmp_kid(const void *a, const void *b)
{
    const rkv_dkid *x = a, *y = b;
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

typedef struct rkv_dreq {
    uint32_t node;
    rkv_sched_req *r;
} rkv_dreq;

static rkv_status rkv_dfs_build(rkv_sched *s)
{
    rkv_dfs_ctx c;
    memset(&c, 0, sizeof c);
    rkv_status st = RKV_OK;
    uint32_t n = s->nwaiting;
    rkv_dreq *reqs = rkv_sched_mem_malloc((n ? n : 1) * sizeof *reqs);
    uint32_t *kids = NULL, *stack = NULL;
    rkv_dkid *keys = NULL;
    rkv_queue_entry *fresh = rkv_sched_mem_malloc((n ? n : 1) * sizeof *fresh);
    if (reqs == NULL || fresh == NULL) {
        st = rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
        goto out;
    }
    /* local node 0: the virtual super-root */
    if ((st = rkv_ensure_cap((void **)&c.nodes, &c.cap, 1, sizeof *c.nodes)) !=
        RKV_OK)
        goto out;
    memset(&c.nodes[0], 0, sizeof c.nodes[0]);
    c.n = 1;
    /* requests in arrival order (the arrivals queue is sorted), so a
     * stable counting sort by node below keeps arrival order per node */
    uint32_t k = 0;
    for (uint32_t i = 0; i < s->arrivals.n; i++) {
        const rkv_queue_entry *e = &s->arrivals.a[i];
        if (!rkv_entry_live(s, &s->arrivals, e))
            continue;
        rkv_sched_req *r = e->req;
        uint32_t li;
        if (k >= n) {
            st = rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_step: arrivals "
                               "queue holds more than %u waiting", n);
            goto out;
        }
        if ((st = rkv_dfs_node(s, &c, r->peek_node, &li)) != RKV_OK)
            goto out;
        reqs[k].node = li;
        reqs[k].r = r;
        k++;
        for (uint32_t x = li; x != 0; x = c.nodes[x].parent)
            c.nodes[x].weight++;
        c.nodes[0].weight++;
    }
    if (k != n) {
        st = rkv_set_error(RKV_ERR_CORRUPT, "rkv_sched_step: arrivals queue "
                           "holds %u of %u waiting", k, n);
        goto out;
    }
    /* children of each node, contiguous, heaviest first */
    kids = rkv_sched_mem_malloc((size_t)c.n * sizeof *kids);
    stack = rkv_sched_mem_malloc((size_t)c.n * 2 * sizeof *stack);
    keys = rkv_sched_mem_malloc((size_t)c.n * sizeof *keys);
    if (kids == NULL || stack == NULL || keys == NULL) {
        st = rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
        goto out;
    }
    uint32_t nk = 0;
    for (uint32_t i = 1; i < c.n; i++) {
        keys[nk].parent = c.nodes[i].parent;
        keys[nk].weight = c.nodes[i].weight;
        keys[nk].id = c.nodes[i].h.id;
        keys[nk].idx = i;
        nk++;
    }
    qsort(keys, nk, sizeof *keys, rkv_dfs_cmp_kid);
    for (uint32_t i = 0; i < nk; i++)
        kids[i] = keys[i].idx;
    for (uint32_t i = 0; i < nk; i++) {
        rkv_dnode *p = &c.nodes[c.nodes[kids[i]].parent];
        if (p->nkids == 0)
            p->first_child = i;
        p->nkids++;
    }
    /* stable counting sort of the requests by node: req_first = start */
    for (uint32_t i = 0; i < n; i++)
        c.nodes[reqs[i].node].req_n++;
    uint32_t acc = 0;
    for (uint32_t i = 0; i < c.n; i++) {
        c.nodes[i].req_first = acc;
        acc += c.nodes[i].req_n;
        c.nodes[i].req_n = 0;
    }
    rkv_dreq *sorted = rkv_sched_mem_malloc((n ? n : 1) * sizeof *sorted);
    if (sorted == NULL) {
        st = rkv_set_error(RKV_ERR_NOMEM, "rkv_sched_step: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        rkv_dnode *d = &c.nodes[reqs[i].node];
        sorted[d->req_first + d->req_n++] = reqs[i];
    }
    free(reqs);
    reqs = sorted;
    /* iterative post-order, as SGLang: children heaviest first, then the
     * node's own requests (deeper matches run before shallower ones).
     * Stack entries: node index * 2 + expanded. */
    uint32_t sp = 0, o = 0;
    stack[sp++] = 0;
    while (sp > 0) {
        uint32_t top = stack[--sp];
        rkv_dnode *d = &c.nodes[top >> 1];
        if (top & 1) {
            for (uint32_t i = 0; i < d->req_n; i++) {
                rkv_sched_req *r = reqs[d->req_first + i].r;
                fresh[o].req = r;
                fresh[o].stamp = ++r->order_stamp;
                o++;
            }
            continue;
        }
        stack[sp++] = top | 1;
        for (uint32_t i = d->nkids; i-- > 0;)
            stack[sp++] = kids[d->first_child + i] << 1;
    }
    free(s->order.a);
    s->order.a = fresh;
    fresh = NULL;
    s->order.n = o;
    s->order.cap = n ? n : 1;
    s->order.nadd = 0;
    s->order.nb = 0;
    s->order.dead = 0;
    s->dfs_dirty = 0;
out:
    free(reqs);
    free(kids);
    free(stack);
    free(keys);
    free(fresh);
    free(c.nodes);
    rkv_u64map_fini(&c.map);
    return st;
}

rkv_status rkv_order_update(rkv_sched *s)
{
    rkv_policy p = s->cfg.policy;
    rkv_status st;
    if (p == RKV_POLICY_LPM || p == RKV_POLICY_BOUNDED || p == RKV_POLICY_DFS) {
        st = rkv_refresh_all(s);
        if (st != RKV_OK)
            return st;
    }
    if (p == RKV_POLICY_DFS) {
        st = rkv_sched_queue_sort(s, &s->arrivals);
        if (st == RKV_OK && (s->dfs_dirty || s->order.nadd > 0))
            st = rkv_dfs_build(s);
    } else {
        st = rkv_sched_queue_sort(s, &s->order);
        if (st == RKV_OK && p == RKV_POLICY_BOUNDED)
            st = rkv_sched_queue_sort(s, &s->arrivals);
    }
    /* the ended requests are forgotten; freed once no queue entry can
     * name them: after full merges (a side run keeps its dead entries) */
    if (p != RKV_POLICY_BOUNDED && p != RKV_POLICY_DFS)
        s->arrivals.dead = 0; /* that queue stays empty */
    if (st == RKV_OK)
        rkv_sched_forget_grave(s, s->order.dead == 0 && s->arrivals.dead == 0);
    return st;
}

/* ---- iteration --------------------------------------------------------------------- */

void rkv_order_iter_init(rkv_sched *s, rkv_order_iter *it, double now_ms)
{
    it->i = 0;
    it->j = 0;
    it->ia = 0;
    it->overdue_done = s->cfg.policy != RKV_POLICY_BOUNDED;
    it->now_ms = now_ms;
}

static int rkv_overdue(const rkv_sched *s, const rkv_sched_req *r, double now_ms)
{
    return s->cfg.policy == RKV_POLICY_BOUNDED &&
           now_ms - r->arrival_ms > s->cfg.max_wait_ms;
}

/* bounded: the oldest overdue request not yet offered, or NULL. */
static rkv_sched_req *rkv_next_overdue(rkv_sched *s, rkv_order_iter *it)
{
    while (!it->overdue_done && it->ia < s->arrivals.n) {
        const rkv_queue_entry *e = &s->arrivals.a[it->ia];
        if (!rkv_entry_live(s, &s->arrivals, e)) {
            it->ia++;
            continue;
        }
        if (!rkv_overdue(s, e->req, it->now_ms))
            break; /* arrival order: no later one is overdue either */
        it->ia++;
        return e->req;
    }
    it->overdue_done = 1;
    return NULL;
}

rkv_sched_req *rkv_order_next(rkv_sched *s, rkv_order_iter *it)
{
    /* bounded: overdue requests (oldest first) and the lpm order take
     * turns; the turn survives across steps, so with one slot per step the
     * two alternate too */
    if (!it->overdue_done && s->bounded_turn) {
        rkv_sched_req *r = rkv_next_overdue(s, it);
        if (r != NULL) {
            s->bounded_turn = 0;
            return r;
        }
    }
    const rkv_sched_queue *q = &s->order;
    while (it->i < q->n || it->j < q->nb) {
        /* the main run and the side run, merged as they are read */
        if (it->i < q->n && !rkv_entry_live(s, q, &q->a[it->i])) {
            it->i++;
            continue;
        }
        if (it->j < q->nb && !rkv_entry_live(s, q, &q->b[it->j])) {
            it->j++;
            continue;
        }
        const rkv_queue_entry *e;
        if (it->j >= q->nb ||
            (it->i < q->n && rkv_queue_cmp_key(&q->a[it->i], &q->b[it->j]) <= 0))
            e = &q->a[it->i++];
        else
            e = &q->b[it->j++];
        if (s->cfg.policy == RKV_POLICY_BOUNDED)
            s->bounded_turn = 1;
        return e->req;
    }
    return rkv_next_overdue(s, it); /* lpm order exhausted */
}

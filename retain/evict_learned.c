/*
 * retain/evict_learned.c -- RKV_EVICT_LEARNED: an eviction order that
 * predicts, online, how much a leaf's pages are still worth. A layer
 * above the tree core: rkv_learned_attach (at create, this policy only)
 * registers the core's eviction-order hook and its use hooks (match, new
 * leaf, insert), which also drive the guard (retain/evict_guard.c).
 *
 * Why this shape (measured on the Mooncake conversation trace, file order,
 * page 512; bench/evict_bench.c): a leaf is the end of some request's
 * prompt, and it is hit again when that conversation's next turn arrives.
 * The chance of that depends on structure -- how many turns the
 * conversation already had (a request whose prefix runs through an earlier
 * request's end is a continuation; depth 0 returns ~30 % of the time,
 * depth 3+ 55-73 %) and how many new pages the turn added (1 page: ~50 %,
 * 9+: ~20 %). And it depends on age in a way LRU gets backwards: the
 * hazard of return RISES from ~0.015 per 100 requests at age 0 to ~0.064
 * at age 200-300 requests and then decays, so the leaf LRU evicts (the
 * oldest) is often the one about to come back, and the newest is the
 * least likely to be needed soon. Recency and frequency variants miss
 * both effects.
 *
 * Model. 20 classes = continuation depth (0, 1, 2, 3+) x new pages (1, 2,
 * 3-4, 5-8, 9+). Every leaf made by an insert is a "birth" of its class
 * and its end (last page's chained hash) is recorded in a direct-mapped
 * ghost table with the birth clock, class and depth (a later end that maps
 * to the same slot overwrites it). A later request whose path contains
 * that hash -- found when a non-peek match ends exactly there (the end is
 * still cached) or when an insert re-creates the page (it had been
 * evicted) -- is a "return" at that age: counted once, and it gives the
 * new leaf depth+1. Ghosts see returns of evicted leaves too, so the model
 * learns the true return-time distribution, not only what the current
 * policy lets survive (the failure of LHD-style in-cache histograms here,
 * which measured as plain LRU). Every RKV_LEARN_REFRESH births the table
 * is scanned into a Kaplan-Meier survival S(a) per class (an end is at
 * risk in each age bucket up to the one it came back in, or its age now,
 * so ends too young to have come back are not counted as never coming
 * back); the table's content is the history, so the model follows a
 * drifting workload over the last ghost_cap leaf ends. From S, the index
 *     I(a) = max over b >= a of (S(a) - S(b+1)) / integral_a^{b+1} S
 * = the best expected hits per page per clock tick that keeping the leaf
 * (from age a for some horizon) can earn. Eviction takes the leaf with the
 * lowest index. Ages are in tree clock ticks (each match / insert /
 * unlock stamps one), bucketed 4 per octave (64 buckets), so the model has
 * no time scale built in. A refresh costs O(ghost_cap + classes * ages^2)
 * (4096 + 82k steps at 1M tokens of 512-token pages, ~350 per birth
 * amortized). Measured and rejected on the trace (bench/evict_bench.c):
 * birth/return histograms without the censoring correction (-0.3 points at
 * 3M), 6 depth levels, path length instead of new pages, 4-16x larger
 * ghost tables (all within +-0.2 points); continuation classes split by
 * the previous turn's return age against the median (10.04-10.21 % /
 * 17.73-18.11 %), and a parent that becomes a leaf taking its evicted
 * child's class (10.09 % / 17.54 %). Why the ceiling is near: the
 * classes rank "comes back within 600 requests" with an AUC of 0.67
 * (evict_bench --explain); in an offline page model, adding the previous
 * gap or the path length lifts it to 0.69 only, and even the output
 * length, which the tree never sees, to 0.70; the true per-class return
 * rates (future knowledge) as an admission order with LRU inside get
 * 10.1 % / 17.9 % at 1M / 3M, what this policy gets. evict_bench's
 * ever-lru oracle (knows whether each page comes back, not when) gets
 * 14.1 % / 33.6 %: the rest of Belady's lead needs a prediction of
 * returns that this trace's structure does not give.
 *
 * Structure and cost. Each class is one of the tree's intrusive LRU lists
 * (buckets RKV_LEARN_BUCKET0 + class; the tree already keeps up to 128
 * lists with a non-empty mask), ordered by last use. The index is a
 * function of age that rises and then falls, so its minimum over a list
 * sorted by age is at one of the ends: eviction compares the head and tail
 * of the <= 20 non-empty classes, O(classes) = O(1) per eviction, with no
 * heap to maintain on every touch (a heap would cost O(log n) on every
 * match of a listed leaf). Match and insert add O(1) and O(new pages)
 * ghost probes. Everything is integer clocks and doubles computed in a
 * fixed order: the same input gives the same evictions.
 *
 * Retention priorities combine as an outer order: a leaf whose priority is
 * not the default (35) stays in its priority's bucket (0..100); eviction
 * takes buckets 0..34 (lower priority) first, LRU within each, then the
 * learned classes (every default-priority leaf), then buckets 36..100. So
 * rkv_tree_retain's priorities mean exactly what they mean under
 * RKV_EVICT_PRIORITY, and the learned order ranks the leaves nobody gave a
 * priority. Pins and locks keep leaves out of every list as before.
 *
 * Memory: the ghost table (4 entries per pool block, 4096 .. 2^18, 24 B
 * each) and the meta[] table (allocated at creation instead of at the
 * first retain; a node's class lives in its meta entry and is inherited
 * by a split's head). Both are made in rkv_tree_create, the only place
 * that can fail for this policy.
 */
#include <math.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/tree_core.h"
#include "radix/tree_lru.h"
#include "retain/evict_guard.h"
#include "retain/evict_learned.h"

uint32_t rkv_learn_age_bucket(uint64_t age)
{
    uint64_t x = age + 1;
    uint32_t m = 63u - (uint32_t)__builtin_clzll(x);
    uint32_t f = m >= 2 ? (uint32_t)(x >> (m - 2)) & 3u
                        : (uint32_t)(x << (2 - m)) & 3u;
    uint32_t b = 4 * m + f;
    return b < RKV_LEARN_AGES ? b : RKV_LEARN_AGES - 1;
}

/* Ticks in age bucket b: the bucket starts at 2^m (1 + f/4) - 1. */
static double rkv_learn_width(uint32_t b)
{
    double lo = ldexp(4.0 + (double)(b & 3), (int)(b >> 2) - 2);
    uint32_t n = b + 1;
    double hi = ldexp(4.0 + (double)(n & 3), (int)(n >> 2) - 2);
    return hi - lo;
}

uint32_t rkv_learn_class(uint32_t gen, uint32_t npages)
{
    uint32_t g = gen < RKV_LEARN_GENS ? gen : RKV_LEARN_GENS - 1;
    uint32_t s = npages <= 1 ? 0 : npages <= 2 ? 1 : npages <= 4 ? 2
               : npages <= 8 ? 3 : 4;
    return g * RKV_LEARN_SIZES + s;
}

rkv_status rkv_learn_init(rkv_tree *t)
{
    uint64_t want = 4 * (uint64_t)t->pool->cfg.num_blocks;
    uint32_t cap = 4096;
    while (cap < want && cap < (1u << 18))
        cap <<= 1;
    rkv_learn *l = rkv_node_mem_alloc(&t->mem, sizeof *l);
    rkv_ghost *g = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *g);
    rkv_node_retention *meta = rkv_node_mem_alloc(&t->mem,
                                         (size_t)t->nodes_cap * sizeof *meta);
    if (l == NULL || g == NULL || meta == NULL) {
        rkv_node_mem_free(&t->mem, l, sizeof *l);
        rkv_node_mem_free(&t->mem, g, (size_t)cap * sizeof *g);
        rkv_node_mem_free(&t->mem, meta, (size_t)t->nodes_cap * sizeof *meta);
        return rkv_set_error(RKV_ERR_NOMEM,
                             "rkv_tree_create: learned eviction tables");
    }
    memset(l, 0, sizeof *l);
    memset(g, 0, (size_t)cap * sizeof *g);
    for (uint32_t i = 0; i < t->nodes_cap; i++)
        meta[i] = RKV_NODE_RETENTION_FRESH;
    l->ghost = g;
    l->ghost_cap = cap;
    t->order.learn = l;
    t->retain.meta = meta;
    return RKV_OK;
}

void rkv_learn_fini(rkv_tree *t)
{
    rkv_learn *l = t->order.learn;
    if (l == NULL)
        return;
    rkv_node_mem_free(&t->mem, l->ghost, (size_t)l->ghost_cap * sizeof *l->ghost);
    rkv_node_mem_free(&t->mem, l, sizeof *l);
    t->order.learn = NULL;
}

static rkv_ghost *rkv_ghost_find(const rkv_learn *l, uint64_t h)
{
    if (h == 0)
        return NULL;
    rkv_ghost *g = &l->ghost[(h ^ (h >> 29)) & (l->ghost_cap - 1)];
    return g->hash == h ? g : NULL;
}

/* Kaplan-Meier over the ghost table: each recorded end is at risk in every
 * age bucket up to the one it came back in (or its age now), so ends too
 * young to have come back yet do not count as never coming back. */
static void rkv_learn_refresh(rkv_learn *l, uint64_t now)
{
    double ends[RKV_LEARN_CLASSES][RKV_LEARN_AGES];
    double back[RKV_LEARN_CLASSES][RKV_LEARN_AGES];
    memset(ends, 0, sizeof ends);
    memset(back, 0, sizeof back);
    for (uint32_t i = 0; i < l->ghost_cap; i++) {
        const rkv_ghost *g = &l->ghost[i];
        if (g->hash == 0)
            continue;
        uint32_t e = g->returned ? g->ret_age
                                 : rkv_learn_age_bucket(now - g->stamp);
        ends[g->cls][e] += 1.0;
        if (g->returned)
            back[g->cls][e] += 1.0;
    }
    for (uint32_t c = 0; c < RKV_LEARN_CLASSES; c++) {
        double S[RKV_LEARN_AGES + 1], risk = 0;
        for (uint32_t a = 0; a < RKV_LEARN_AGES; a++)
            risk += ends[c][a];
        S[0] = 1.0;
        for (uint32_t a = 0; a < RKV_LEARN_AGES; a++) {
            double hz = risk > 0 ? back[c][a] / risk : 0;
            double s = S[a] * (1.0 - hz);
            S[a + 1] = s > 1e-9 ? s : 1e-9;
            risk -= ends[c][a];
        }
        double *ix = l->index[c];
        for (uint32_t a = 0; a < RKV_LEARN_AGES; a++) {
            double best = 0, life = 0;
            for (uint32_t b = a; b < RKV_LEARN_AGES; b++) {
                life += (S[b] + S[b + 1]) * 0.5 * rkv_learn_width(b);
                double v = (S[a] - S[b + 1]) / life;
                if (v > best)
                    best = v;
            }
            ix[a] = best;
        }
    }
}

static void rkv_learn_return(rkv_tree *t, rkv_ghost *g)
{
    if (g->returned)
        return;
    g->returned = 1;
    g->ret_age = (uint8_t)rkv_learn_age_bucket(t->clock - g->stamp);
    t->order.learn->returns_total++;
}

void rkv_learn_on_match(rkv_tree *t, uint32_t node)
{
    const rkv_tnode *x = &t->nodes[node];
    if (t->order.learn == NULL || x->parent == 0 || x->num_pages == 0)
        return;
    uint64_t h = t->pool->hash[rkv_tnode_blocks(t, x)[x->num_pages - 1]];
    rkv_ghost *g = rkv_ghost_find(t->order.learn, h);
    if (g != NULL)
        rkv_learn_return(t, g);
}

void rkv_learn_on_leaf(rkv_tree *t, uint32_t id, uint32_t parent)
{
    rkv_learn *l = t->order.learn;
    const rkv_tnode *x = &t->nodes[id];
    const rkv_block_id *xb = rkv_tnode_blocks(t, x);
    const uint64_t *hash = t->pool->hash;
    rkv_ghost *g = NULL;
    /* the deepest recorded end on the new path: an evicted end comes back
     * as a new page, a cached one as the parent's last page */
    for (uint32_t i = x->num_pages; i-- > 0 && g == NULL;)
        g = rkv_ghost_find(l, hash[xb[i]]);
    const rkv_tnode *p = &t->nodes[parent];
    if (g == NULL && p->parent != 0 && p->num_pages > 0)
        g = rkv_ghost_find(l, hash[rkv_tnode_blocks(t, p)[p->num_pages - 1]]);
    uint32_t gen = 0;
    if (g != NULL) {
        rkv_learn_return(t, g);
        gen = (uint32_t)g->gen + 1;
        if (gen >= RKV_LEARN_GENS)
            gen = RKV_LEARN_GENS - 1;
    }
    uint32_t cls = rkv_learn_class(gen, x->num_pages);
    t->retain.meta[id].cls = (uint8_t)cls;
    l->births_total++;
    uint64_t h = hash[xb[x->num_pages - 1]];
    if (h != 0) {
        rkv_ghost *e = &l->ghost[(h ^ (h >> 29)) & (l->ghost_cap - 1)];
        *e = (rkv_ghost){h, t->clock, (uint8_t)gen, (uint8_t)cls, 0, 0, {0}};
    }
    if (++l->since >= RKV_LEARN_REFRESH) {
        l->since = 0;
        rkv_learn_refresh(l, t->clock);
    }
}

uint32_t rkv_learn_first(const rkv_tree *t)
{
    const rkv_learn *l = t->order.learn;
    uint32_t best = RKV_NIL;
    double bi = 0;
    uint64_t bstamp = 0;
    for (uint32_t c = 0; c < RKV_LEARN_CLASSES; c++) {
        uint32_t b = RKV_LEARN_BUCKET0 + c;
        if (t->lru_head[b] == RKV_NIL)
            continue;
        uint32_t ends[2] = {t->lru_head[b], t->lru_tail[b]};
        for (int e = 0; e < 2; e++) {
            uint32_t id = ends[e];
            uint64_t s = t->nodes[id].last_access;
            double v = l->index[c][rkv_learn_age_bucket(t->clock - s)];
            /* lowest index; ties: least recently used, then lower id */
            if (best == RKV_NIL || v < bi ||
                (v == bi && (s < bstamp || (s == bstamp && id < best)))) {
                best = id;
                bi = v;
                bstamp = s;
            }
        }
    }
    return best;
}

rkv_status rkv_learn_check(const rkv_tree *t)
{
    const rkv_learn *l = t->order.learn;
    if (t->policy != RKV_EVICT_LEARNED)
        return l == NULL ? RKV_OK
                         : rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: "
                                         "learned tables without the policy");
    if (l == NULL || t->retain.meta == NULL)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: learned "
                             "policy without its tables");
    if (l->ghost_cap == 0 || (l->ghost_cap & (l->ghost_cap - 1)) != 0)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: ghost table "
                             "capacity %u", l->ghost_cap);
    for (uint32_t id = 1; id < t->nodes_used; id++)
        if (t->nodes[id].parent != RKV_NIL &&
            t->retain.meta[id].cls >= RKV_LEARN_CLASSES)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: node %u "
                                 "has learned class %u", id, t->retain.meta[id].cls);
    return RKV_OK;
}

/* ---- hooks: the learned order and its guard ------------------------------------ */

/* Priorities below the default first, then the learned order, unless the
 * guard takes plain LRU's victim instead (over every list); RKV_NIL: the
 * core's default (the rest, lowest bucket first). */
static uint32_t rkv_learned_evict_first(const rkv_tree *t, uint32_t need)
{
    uint64_t below = t->lru_nonempty[0] &
                     ((UINT64_C(1) << RKV_PRIORITY_DEFAULT) - 1);
    uint32_t v = below != 0 ? t->lru_head[__builtin_ctzll(below)]
                            : rkv_learn_first(t);
    if (t->order.guard == NULL || v == RKV_NIL)
        return v;
    return rkv_guard_victim(t, v, rkv_lru_first_any(t), need);
}

static void rkv_learned_on_match(rkv_tree *t, uint32_t node, uint64_t ns,
                                 const int32_t *tokens, uint32_t npages,
                                 uint32_t matched)
{
    if (t->order.learn != NULL)
        rkv_learn_on_match(t, node);
    if (t->order.guard != NULL)
        rkv_guard_on_match(t, ns, tokens, npages, matched);
}

static void rkv_learned_on_evicted(rkv_tree *t, const uint64_t *hashes,
                                   uint32_t n)
{
    if (t->order.guard != NULL)
        rkv_guard_on_evicted(t, hashes, n);
}

static void rkv_learned_on_leaf(rkv_tree *t, uint32_t id, uint32_t parent)
{
    if (t->order.learn != NULL)
        rkv_learn_on_leaf(t, id, parent);
}

static void rkv_learned_on_insert(rkv_tree *t, uint32_t node)
{
    if (t->order.guard != NULL)
        rkv_guard_on_insert(t, node);
}

rkv_status rkv_learned_attach(rkv_tree *t)
{
    rkv_status st = rkv_learn_init(t);
    if (st == RKV_OK)
        st = rkv_guard_init(t);
    if (st != RKV_OK)
        return st; /* the caller's rkv_learn_fini / rkv_guard_fini free it */
    t->hooks.evict_first = rkv_learned_evict_first;
    t->hooks.on_match = rkv_learned_on_match;
    t->hooks.on_leaf = rkv_learned_on_leaf;
    t->hooks.on_insert = rkv_learned_on_insert;
    t->hooks.pages_evicted = rkv_learned_on_evicted;
    return RKV_OK;
}

/*
 * tests/test_evict_policies.c -- every eviction policy (rkv_evict_policy:
 * lru, priority, learned) against a slow reference implementation of the
 * same policy, on random operation sequences; determinism; OOM injection
 * over the allocations the learned policy adds; the policy names.
 *
 * The reference knows nothing of nodes, lists or buckets: it is an array of
 * cached PAGES (parent link, tokens, chained hash, last-use stamp, priority,
 * learned class, lock cover), and every choice is an O(pages) scan:
 *   - lru: the evictable leaf page (no cached child, no lock) with the
 *     oldest stamp;
 *   - priority: the lowest priority, then the oldest;
 *   - learned (retain/evict_learned.c, re-implemented here from its
 *     description): pages below the default priority first (lowest, then
 *     oldest); then among default-priority pages, per class the oldest and
 *     the newest leaf are candidates, and the one with the lowest learned
 *     index at its age goes (ties: the older); then the priorities above
 *     the default. The model -- classes (continuation depth x new pages),
 *     births, returns seen through a direct-mapped table of leaf ends,
 *     a Kaplan-Meier survival per class over the table every 256 births,
 *     the index from it -- is recomputed here from the operations alone
 *     (a plain O(table x ages) scan instead of the library's suffix sums).
 * Stamps follow the tree's clock: one tick per non-peek match, insert and
 * unlock, with new pages stamped at the clock before the insert's tick.
 * After EVERY operation the set of cached pages must be the reference's
 * (same count, and each reference page found by a PEEK match), and
 * rkv_tree_check / rkv_pool_check must pass.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "retain/evict_guard.h"
#include "retain/evict_learned.h"
#include "radix/tree_debug.h"
#include "radix/tree_core.h"
#include "radixkv.h"
#include "tests/support/check.h"
#include "tests/support/handles.h"
#include "tests/support/test_util.h"

#define PG 2          /* tokens per page                                  */
#define NB 24         /* pool blocks                                      */
#define MAXPAGES 12   /* pages of one request                             */
#define MAXSLOTS 256  /* reference page slots (evicted ones are reused)    */
#define NCLS 20
#define NAGE 64
#define MAXLEASES 3
#define MAXHELD 6

typedef struct mpage {
    int used;
    uint32_t parent; /* slot, or UINT32_MAX for a first page             */
    uint32_t depth;  /* 1-based                                          */
    int32_t tok[PG];
    uint64_t hash;
    uint64_t stamp;
    int prio;
    int cls;
    uint32_t children, cover;
} mpage;

typedef struct mghost {
    uint64_t hash, stamp;
    int gen, cls, returned;
    uint32_t ret_age;
} mghost;

typedef struct model {
    int policy;
    mpage *p;
    uint32_t nslots, count;
    uint64_t clock;
    mghost *ghost;
    uint32_t gcap;
    double index[NCLS][NAGE];
    uint32_t since;
} model;

/* ---- the reference's learned model (from retain/evict_learned.c's header) -- */

static uint32_t m_age_bucket(uint64_t age)
{
    uint64_t x = age + 1;
    uint32_t m = 0;
    while ((x >> (m + 1)) != 0)
        m++;
    uint32_t f = m >= 2 ? (uint32_t)(x >> (m - 2)) & 3u
                        : (uint32_t)(x << (2 - m)) & 3u;
    uint32_t b = 4 * m + f;
    return b < NAGE ? b : NAGE - 1;
}

static double m_width(uint32_t b)
{
    return ldexp(4.0 + (double)((b + 1) & 3), (int)((b + 1) >> 2) - 2) -
           ldexp(4.0 + (double)(b & 3), (int)(b >> 2) - 2);
}

static int m_class(int gen, uint32_t npages)
{
    int g = gen < 3 ? gen : 3;
    int s = npages <= 1 ? 0 : npages <= 2 ? 1 : npages <= 4 ? 2 : npages <= 8 ? 3 : 4;
    return g * 5 + s;
}

/* Kaplan-Meier per class over the ends the ghost table holds now. */
static void m_refresh(model *m)
{
    for (int c = 0; c < NCLS; c++) {
        double risk[NAGE], back[NAGE];
        for (int a = 0; a < NAGE; a++) {
            risk[a] = back[a] = 0;
            for (uint32_t i = 0; i < m->gcap; i++) {
                const mghost *g = &m->ghost[i];
                if (g->hash == 0 || g->cls != c)
                    continue;
                uint32_t e = g->returned ? g->ret_age
                                         : m_age_bucket(m->clock - g->stamp);
                risk[a] += e >= (uint32_t)a;
                back[a] += g->returned && e == (uint32_t)a;
            }
        }
        double S[NAGE + 1];
        S[0] = 1.0;
        for (int a = 0; a < NAGE; a++) {
            double s = S[a] * (1.0 - (risk[a] > 0 ? back[a] / risk[a] : 0));
            S[a + 1] = s > 1e-9 ? s : 1e-9;
        }
        for (int a = 0; a < NAGE; a++) {
            double best = 0, life = 0;
            for (int b = a; b < NAGE; b++) {
                life += (S[b] + S[b + 1]) * 0.5 * m_width((uint32_t)b);
                double v = (S[a] - S[b + 1]) / life;
                if (v > best)
                    best = v;
            }
            m->index[c][a] = best;
        }
    }
}

static mghost *m_ghost_find(model *m, uint64_t h)
{
    if (h == 0)
        return NULL;
    mghost *g = &m->ghost[(h ^ (h >> 29)) & (m->gcap - 1)];
    return g->hash == h ? g : NULL;
}

static void m_return(model *m, mghost *g)
{
    if (g->returned)
        return;
    g->returned = 1;
    g->ret_age = m_age_bucket(m->clock - g->stamp);
}

/* ---- the reference's pages ------------------------------------------------ */

static void m_init(model *m, int policy)
{
    memset(m, 0, sizeof *m);
    m->policy = policy;
    m->p = calloc(MAXSLOTS, sizeof *m->p);
    m->gcap = 4096; /* 4 * NB is below the table's minimum */
    m->ghost = calloc(m->gcap, sizeof *m->ghost);
    cr_assert(m->p != NULL && m->ghost != NULL);
}

static void m_fini(model *m)
{
    free(m->p);
    free(m->ghost);
}

static uint32_t m_child(const model *m, uint32_t parent, const int32_t *tok)
{
    for (uint32_t i = 0; i < m->nslots; i++)
        if (m->p[i].used && m->p[i].parent == parent &&
            memcmp(m->p[i].tok, tok, sizeof m->p[i].tok) == 0)
            return i;
    return UINT32_MAX;
}

/* Cached pages of tokens' prefix: their slots into path; returns k. */
static uint32_t m_walk(const model *m, const int32_t *tok, uint32_t np,
                       uint32_t *path)
{
    uint32_t k = 0, cur = UINT32_MAX;
    while (k < np) {
        uint32_t c = m_child(m, cur, tok + (size_t)k * PG);
        if (c == UINT32_MAX)
            break;
        path[k++] = cur = c;
    }
    return k;
}

static uint64_t m_evictable(const model *m)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < m->nslots; i++)
        n += m->p[i].used && m->p[i].cover == 0;
    return n;
}

static int m_leaf(const mpage *x)
{
    return x->used && x->children == 0 && x->cover == 0;
}

static uint32_t m_victim(const model *m)
{
    uint32_t best = UINT32_MAX;
    /* lru / priority, and the learned policy's non-default priorities: the
     * lowest (priority, stamp); under lru every priority counts as 0 */
    int learned = m->policy == RKV_EVICT_LEARNED;
    for (int pass = 0; pass < (learned ? 2 : 1); pass++) {
        for (uint32_t i = 0; i < m->nslots; i++) {
            const mpage *x = &m->p[i];
            if (!m_leaf(x))
                continue;
            int pr = m->policy == RKV_EVICT_LRU ? 0 : x->prio;
            if (learned && (pass == 0 ? pr >= RKV_PRIORITY_DEFAULT
                                      : pr <= RKV_PRIORITY_DEFAULT))
                continue;
            int bp = best == UINT32_MAX ? 0
                     : m->policy == RKV_EVICT_LRU ? 0 : m->p[best].prio;
            if (best == UINT32_MAX || pr < bp ||
                (pr == bp && (x->stamp < m->p[best].stamp ||
                              (x->stamp == m->p[best].stamp &&
                               x->depth > m->p[best].depth))))
                best = i;
        }
        if (!learned || pass == 1 || best != UINT32_MAX)
            break;
        /* default priority: per class the oldest and newest leaf */
        double bi = 0;
        for (int c = 0; c < NCLS; c++) {
            uint32_t lo = UINT32_MAX, hi = UINT32_MAX;
            for (uint32_t i = 0; i < m->nslots; i++) {
                const mpage *x = &m->p[i];
                if (!m_leaf(x) || x->prio != RKV_PRIORITY_DEFAULT || x->cls != c)
                    continue;
                if (lo == UINT32_MAX || x->stamp < m->p[lo].stamp)
                    lo = i;
                if (hi == UINT32_MAX || x->stamp > m->p[hi].stamp)
                    hi = i;
            }
            uint32_t cand[2] = {lo, hi};
            for (int e = 0; e < 2; e++) {
                uint32_t i = cand[e];
                if (i == UINT32_MAX)
                    continue;
                double v = m->index[c][m_age_bucket(m->clock - m->p[i].stamp)];
                if (best == UINT32_MAX || v < bi ||
                    (v == bi && m->p[i].stamp < m->p[best].stamp)) {
                    best = i;
                    bi = v;
                }
            }
        }
        if (best != UINT32_MAX)
            break;
    }
    return best;
}

static void m_evict(model *m, uint64_t n)
{
    while (n-- > 0) {
        uint32_t v = m_victim(m);
        cr_assert(v != UINT32_MAX, "reference: nothing to evict");
        mpage *x = &m->p[v];
        x->used = 0;
        if (x->parent != UINT32_MAX)
            m->p[x->parent].children--;
        m->count--;
    }
}

static void m_stamp(model *m, const uint32_t *path, uint32_t k)
{
    m->clock++;
    for (uint32_t j = 0; j < k; j++)
        m->p[path[j]].stamp = m->clock;
}

/* Non-peek match: returns k, the path in path. */
static uint32_t m_match(model *m, const int32_t *tok, uint32_t np, uint32_t *path)
{
    uint32_t k = m_walk(m, tok, np, path);
    if (m->policy == RKV_EVICT_LEARNED && k > 0) {
        mghost *g = m_ghost_find(m, m->p[path[k - 1]].hash);
        if (g != NULL)
            m_return(m, g);
    }
    m_stamp(m, path, k);
    return k;
}

/* Insert of np pages (the caller made room). */
static void m_insert(model *m, const int32_t *tok, uint32_t np, uint32_t *path)
{
    uint32_t k = m_walk(m, tok, np, path);
    uint64_t h = k ? m->p[path[k - 1]].hash : RKV_HASH_ROOT;
    for (uint32_t j = k; j < np; j++) {
        uint32_t s = 0; /* a free slot (an evicted page's), else a new one */
        while (s < m->nslots && m->p[s].used)
            s++;
        cr_assert(s < MAXSLOTS);
        if (s == m->nslots)
            m->nslots++;
        mpage *x = &m->p[s];
        memset(x, 0, sizeof *x);
        x->used = 1;
        x->parent = j ? path[j - 1] : UINT32_MAX;
        x->depth = j + 1;
        memcpy(x->tok, tok + (size_t)j * PG, sizeof x->tok);
        h = rkv_block_hash(h, 0, x->tok, PG);
        x->hash = h;
        x->stamp = m->clock;
        x->prio = RKV_PRIORITY_DEFAULT;
        if (j)
            m->p[path[j - 1]].children++;
        path[j] = s;
        m->count++;
    }
    if (m->policy == RKV_EVICT_LEARNED && np > k) {
        mghost *g = NULL;
        for (uint32_t j = np; j-- > k && g == NULL;)
            g = m_ghost_find(m, m->p[path[j]].hash);
        if (g == NULL && k > 0)
            g = m_ghost_find(m, m->p[path[k - 1]].hash);
        int gen = 0;
        if (g != NULL) {
            m_return(m, g);
            gen = g->gen + 1 < 3 ? g->gen + 1 : 3;
        }
        int cls = m_class(gen, np - k);
        for (uint32_t j = k; j < np; j++)
            m->p[path[j]].cls = cls;
        uint64_t eh = m->p[path[np - 1]].hash;
        if (eh != 0)
            m->ghost[(eh ^ (eh >> 29)) & (m->gcap - 1)] =
                (mghost){eh, m->clock, gen, cls, 0, 0};
        if (++m->since >= 256) {
            m->since = 0;
            m_refresh(m);
        }
    }
    m_stamp(m, path, np);
}

/* ---- the harness -------------------------------------------------------------- */

typedef struct harness {
    rkv_pool *pool;
    rkv_tree *tree;
    model m;
    rkv_lease lease[MAXLEASES];
    uint32_t lease_path[MAXLEASES][MAXPAGES], lease_k[MAXLEASES];
    int nleases;
    rkv_block_id held[MAXHELD];
    uint32_t nheld;
    uint64_t now;
} harness;

static void h_open(harness *h, int policy)
{
    memset(h, 0, sizeof *h);
    h->pool = tu_pool(NB, PG);
    h->tree = tu_policy_tree(h->pool, policy);
    /* the learned order itself (its guard: tests/test_evict_guard.c) */
    rkv_tree_debug_guard_off(h->tree);
    m_init(&h->m, policy);
}

static void h_close(harness *h)
{
    for (int i = 0; i < h->nleases; i++)
        OK(rkv_tree_unlock(h->tree, &h->lease[i]));
    if (h->nheld)
        OK(rkv_pool_unref_n(h->pool, h->nheld, h->held));
    OK(rkv_tree_check(h->tree));
    rkv_tree_destroy(h->tree);
    OK(rkv_pool_check(h->pool));
    rkv_pool_destroy(h->pool);
    m_fini(&h->m);
}

static uint64_t h_free(const harness *h)
{
    return NB - h->m.count - h->nheld;
}

/* The tree caches exactly the reference's pages. */
static void h_compare(harness *h, uint64_t step)
{
    OK(rkv_tree_check(h->tree));
    OK(rkv_pool_check(h->pool));
    rkv_tree_stats ts;
    OK(rkv_tree_get_stats(h->tree, &ts));
    cr_assert_eq(ts.cached_blocks, h->m.count,
                 "step %llu: tree caches %llu pages, reference %u",
                 (unsigned long long)step, (unsigned long long)ts.cached_blocks,
                 h->m.count);
    cr_assert_eq(rkv_pool_num_free(h->pool), h_free(h), "step %llu: free blocks",
                 (unsigned long long)step);
    for (uint32_t i = 0; i < h->m.nslots; i++) {
        if (!h->m.p[i].used)
            continue;
        int32_t tok[MAXPAGES * PG];
        uint32_t d = h->m.p[i].depth;
        for (uint32_t s = i; s != UINT32_MAX; s = h->m.p[s].parent)
            memcpy(tok + (size_t)(h->m.p[s].depth - 1) * PG, h->m.p[s].tok,
                   sizeof h->m.p[s].tok);
        rkv_match mm;
        OK(rkv_tree_match(h->tree, 0, tok, (size_t)d * PG, NULL, RKV_MATCH_PEEK,
                          &mm));
        cr_assert_eq(mm.num_blocks, d,
                     "step %llu: reference page at depth %u (slot %u) is not "
                     "cached in the tree (%u matched)",
                     (unsigned long long)step, d, i, mm.num_blocks);
    }
}

/* A server's request: match, lock, alloc, insert, release. */
static void op_request(harness *h, const int32_t *tok, uint32_t np)
{
    uint32_t path[MAXPAGES];
    rkv_block_id blocks[MAXPAGES];
    rkv_match mm;
    OK(rkv_tree_match(h->tree, 0, tok, (size_t)np * PG, blocks, 0, &mm));
    uint32_t k = m_match(&h->m, tok, np, path);
    cr_assert_eq(mm.num_blocks, k, "match: tree %u pages, reference %u",
                 mm.num_blocks, k);
    rkv_lease l;
    OK(rkv_tree_lock(h->tree, mm.node, &l));
    for (uint32_t j = 0; j < k; j++)
        h->m.p[path[j]].cover++;
    uint32_t need = np - k;
    if (need > 0) {
        uint64_t fr = h_free(h);
        uint64_t avail = fr + m_evictable(&h->m);
        rkv_status st = rkv_tree_alloc_blocks(h->tree, need, blocks + k);
        if (avail < need) {
            cr_assert_eq(st, RKV_ERR_NO_SPACE, "alloc of %u with %llu available",
                         need, (unsigned long long)avail);
            need = 0;
        } else {
            OK(st);
            if (fr < need)
                m_evict(&h->m, need - fr);
            rkv_insert_result ir;
            OK(rkv_tree_insert(h->tree, 0, tok, (size_t)np * PG, blocks, NULL, &ir));
            cr_assert_eq(ir.new_pages, need);
            m_insert(&h->m, tok, np, path);
            OK(rkv_pool_unref_n(h->pool, need, blocks + k));
        }
    }
    OK(rkv_tree_unlock(h->tree, &l));
    for (uint32_t j = 0; j < k; j++)
        h->m.p[path[j]].cover--;
    m_stamp(&h->m, path, k);
}

static uint64_t tree_digest(const harness *h)
{
    /* the cached set by chained hash: independent of block ids */
    uint64_t d = 0;
    const rkv_tree *t = h->tree;
    for (uint32_t b = 0; b < NB; b++)
        if (rkv_tree_owned(t, b))
            d += rkv_pool_block_hash(h->pool, b) * 0x9E3779B97F4A7C15ull + 1;
    return d;
}

/* Random operations; digests (may be NULL) receives one digest per step. */
static void random_run(int policy, uint64_t seed, uint64_t steps,
                       uint64_t *digests)
{
    harness h;
    h_open(&h, policy);
    rkv_rng rng;
    rkv_rng_init(&rng, seed);
    /* a few long "conversations" that come back extended, and noise */
    int32_t conv[8][MAXPAGES * PG];
    uint32_t conv_len[8];
    for (int c = 0; c < 8; c++) {
        for (int i = 0; i < MAXPAGES * PG; i++)
            conv[c][i] = (int32_t)rkv_rng_below(&rng, 3);
        conv[c][0] = c; /* distinct first pages */
        conv_len[c] = 1;
    }
    for (uint64_t step = 0; step < steps; step++) {
        uint32_t op = (uint32_t)rkv_rng_below(&rng, 100);
        int32_t tok[MAXPAGES * PG];
        uint32_t np = 1 + (uint32_t)rkv_rng_below(&rng, 6);
        if (op < 30) { /* a conversation's next turn (or a restart) */
            int c = (int)rkv_rng_below(&rng, 8);
            if (conv_len[c] < MAXPAGES && rkv_rng_below(&rng, 4) != 0)
                conv_len[c] += 1 + (uint32_t)rkv_rng_below(&rng, 2);
            else
                conv_len[c] = 1 + (uint32_t)rkv_rng_below(&rng, 2);
            if (conv_len[c] > MAXPAGES)
                conv_len[c] = MAXPAGES;
            op_request(&h, conv[c], conv_len[c]);
        } else if (op < 50) { /* noise over a tiny alphabet */
            for (uint32_t i = 0; i < np * PG; i++)
                tok[i] = 8 + (int32_t)rkv_rng_below(&rng, 2);
            op_request(&h, tok, np);
        } else if (op < 58) { /* match only */
            int c = (int)rkv_rng_below(&rng, 8);
            uint32_t path[MAXPAGES];
            rkv_match mm;
            OK(rkv_tree_match(h.tree, 0, conv[c], (size_t)conv_len[c] * PG, NULL,
                              0, &mm));
            cr_assert_eq(mm.num_blocks, m_match(&h.m, conv[c], conv_len[c], path));
        } else if (op < 66 && h.nleases < MAXLEASES) { /* hold a lock */
            int c = (int)rkv_rng_below(&rng, 8);
            rkv_match mm;
            OK(rkv_tree_match(h.tree, 0, conv[c], (size_t)conv_len[c] * PG, NULL,
                              0, &mm));
            uint32_t *path = h.lease_path[h.nleases];
            uint32_t k = m_match(&h.m, conv[c], conv_len[c], path);
            cr_assert_eq(mm.num_blocks, k);
            OK(rkv_tree_lock(h.tree, mm.node, &h.lease[h.nleases]));
            for (uint32_t j = 0; j < k; j++)
                h.m.p[path[j]].cover++;
            h.lease_k[h.nleases++] = k;
        } else if (op < 74 && h.nleases > 0) { /* release one */
            int i = (int)rkv_rng_below(&rng, (uint64_t)h.nleases);
            OK(rkv_tree_unlock(h.tree, &h.lease[i]));
            for (uint32_t j = 0; j < h.lease_k[i]; j++)
                h.m.p[h.lease_path[i][j]].cover--;
            m_stamp(&h.m, h.lease_path[i], h.lease_k[i]);
            h.nleases--;
            h.lease[i] = h.lease[h.nleases];
            h.lease_k[i] = h.lease_k[h.nleases];
            memcpy(h.lease_path[i], h.lease_path[h.nleases],
                   sizeof h.lease_path[i]);
        } else if (op < 82) { /* a retention priority on a range */
            int c = (int)rkv_rng_below(&rng, 8);
            size_t n = (size_t)conv_len[c] * PG;
            rkv_retention r;
            rkv_retention_init(&r);
            r.priority = (int)rkv_rng_below(&rng, 4) == 0
                             ? RKV_PRIORITY_DEFAULT
                             : (int)rkv_rng_below(&rng, 101);
            r.prio_begin = rkv_rng_below(&rng, n + 1);
            r.prio_end = r.prio_begin + rkv_rng_below(&rng, n - r.prio_begin + 1);
            OK(rkv_tree_retain(h.tree, 0, conv[c], n, &r, ++h.now, NULL));
            uint32_t path[MAXPAGES];
            uint32_t k = m_walk(&h.m, conv[c], conv_len[c], path);
            for (uint32_t j = 0; j < k; j++)
                if ((size_t)j * PG >= r.prio_begin &&
                    (size_t)(j + 1) * PG <= r.prio_end)
                    h.m.p[path[j]].prio = r.priority;
        } else if (op < 90) { /* explicit eviction */
            uint32_t n = 1 + (uint32_t)rkv_rng_below(&rng, 3);
            uint32_t freed = 0;
            rkv_status st = rkv_tree_evict(h.tree, n, &freed);
            if (m_evictable(&h.m) < n) {
                cr_assert_eq(st, RKV_ERR_NO_SPACE);
            } else {
                OK(st);
                cr_assert_eq(freed, n);
                m_evict(&h.m, n);
            }
        } else if (op < 95 && h.nheld < MAXHELD) { /* blocks held outside */
            uint32_t n = 1 + (uint32_t)rkv_rng_below(&rng, MAXHELD - h.nheld);
            uint64_t fr = h_free(&h), avail = fr + m_evictable(&h.m);
            rkv_status st = rkv_tree_alloc_blocks(h.tree, n, h.held + h.nheld);
            if (avail < n) {
                cr_assert_eq(st, RKV_ERR_NO_SPACE);
            } else {
                OK(st);
                if (fr < n)
                    m_evict(&h.m, n - fr);
                h.nheld += n;
            }
        } else if (h.nheld > 0) {
            OK(rkv_pool_unref_n(h.pool, h.nheld, h.held));
            h.nheld = 0;
        }
        h_compare(&h, step);
        if (digests != NULL)
            digests[step] = tree_digest(&h) ^ ((uint64_t)h.m.count << 48);
    }
    h_close(&h);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), 0, "tree memory leaked");
}

Test(evict_policies, lru_against_reference)
{
    random_run(RKV_EVICT_LRU, rkv_test_seed("evict_policies::lru"),
               rkv_test_scaled(3000), NULL);
}

Test(evict_policies, priority_against_reference)
{
    random_run(RKV_EVICT_PRIORITY, rkv_test_seed("evict_policies::priority"),
               rkv_test_scaled(3000), NULL);
}

Test(evict_policies, learned_against_reference)
{
    /* enough births for several index refreshes (one per 256) */
    random_run(RKV_EVICT_LEARNED, rkv_test_seed("evict_policies::learned"),
               rkv_test_scaled(4000), NULL);
}

Test(evict_policies, same_input_same_evictions)
{
    uint64_t steps = rkv_test_scaled(2500);
    uint64_t seed = rkv_test_seed("evict_policies::determinism");
    uint64_t *a = calloc(steps, sizeof *a), *b = calloc(steps, sizeof *b);
    cr_assert(a != NULL && b != NULL);
    for (int pol = RKV_EVICT_LRU; pol <= RKV_EVICT_LEARNED; pol++) {
        random_run(pol, seed, steps, a);
        random_run(pol, seed, steps, b);
        for (uint64_t i = 0; i < steps; i++)
            cr_assert_eq(a[i], b[i], "policy %d: runs differ at step %llu", pol,
                         (unsigned long long)i);
    }
    free(a);
    free(b);
}

/* The learned policy's tables are made at creation: failing each of
 * create's allocations in turn fails the call cleanly (no tree, no leak,
 * the pool free for the next tree). */
Test(evict_policies, learned_create_oom)
{
    rkv_pool_config pc;
    rkv_pool_config_init(&pc);
    pc.num_blocks = NB;
    pc.page_size = PG;
    rkv_pool *pool;
    OK(rkv_pool_create(&pc, &pool));
    rkv_tree_config tc;
    rkv_tree_config_init(&tc);
    tc.evict_policy = RKV_EVICT_LEARNED;
    int64_t k = 0;
    for (;; k++) {
        rkv_tree *t = NULL;
        rkv_tree_debug_fail_create_after(pool, k);
        rkv_status st = rkv_tree_create(pool, &tc, &t);
        if (st == RKV_OK) {
            rkv_tree_debug_fail_create_after(pool, -1);
            OK(rkv_tree_check(t));
            rkv_tree_destroy(t);
            break;
        }
        cr_assert_eq(st, RKV_ERR_NOMEM, "k=%lld: %s", (long long)k,
                     rkv_last_error());
        cr_assert(t == NULL);
        cr_assert_eq(rkv_debug_live_tree_allocs_global(), 0, "k=%lld: leak",
                     (long long)k);
    }
    cr_assert(k >= 6, "create made only %lld allocations", (long long)k);
    OK(rkv_pool_check(pool));
    rkv_pool_destroy(pool);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), 0);
}

/* Under the learned policy every node slot has a meta entry from the
 * start, so growing the slot table grows meta too: fail each allocation
 * of a run of inserts in turn; each failure changes nothing. */
Test(evict_policies, learned_insert_oom)
{
    harness h;
    h_open(&h, RKV_EVICT_LEARNED);
    rkv_rng rng;
    rkv_rng_init(&rng, 7);
    for (int i = 0; i < 40; i++) {
        int32_t tok[4 * PG];
        for (int j = 0; j < 4 * PG; j++)
            tok[j] = (int32_t)rkv_rng_below(&rng, 50);
        rkv_block_id b[4];
        if (rkv_tree_alloc_blocks(h.tree, 4, b) != RKV_OK)
            continue;
        for (int64_t k = 0;; k++) {
            rkv_tree_stats before, after;
            OK(rkv_tree_get_stats(h.tree, &before));
            rkv_tree_debug_fail_alloc_after(h.tree, k);
            rkv_status st = rkv_tree_insert(h.tree, 0, tok, 4 * PG, b, NULL, NULL);
            rkv_tree_debug_fail_alloc_after(h.tree, -1);
            OK(rkv_tree_check(h.tree));
            if (st == RKV_OK)
                break;
            cr_assert_eq(st, RKV_ERR_NOMEM, "k=%lld: %s", (long long)k,
                         rkv_last_error());
            OK(rkv_tree_get_stats(h.tree, &after));
            cr_assert_eq(after.nodes, before.nodes, "k=%lld", (long long)k);
            cr_assert_eq(after.cached_blocks, before.cached_blocks);
        }
        OK(rkv_pool_unref_n(h.pool, 4, b));
    }
    rkv_tree_destroy(h.tree);
    rkv_pool_destroy(h.pool);
    m_fini(&h.m);
    cr_assert_eq(rkv_debug_live_tree_allocs_global(), 0);
}

Test(evict_policies, names_round_trip)
{
    const char *names[] = {"lru", "priority", "learned"};
    for (int i = 0; i < 3; i++) {
        int p = -1;
        OK(rkv_evict_policy_from_name(names[i], &p));
        cr_assert_eq(p, i);
        cr_assert_str_eq(rkv_evict_policy_name(p), names[i]);
    }
    int p = 99;
    cr_assert_eq(rkv_evict_policy_from_name("belady", &p), RKV_ERR_INVALID_ARG);
    cr_assert_eq(p, 99);
    cr_assert(strstr(rkv_last_error(), "learned") != NULL);
    cr_assert_null(rkv_evict_policy_name(3));
}

/* The learned policy's classes are the table of retain/evict_learned.c:
 * continuation depth 0, 1, 2, 3+ times new pages 1, 2, 3-4, 5-8, 9+, each
 * boundary on its own side (a class off by one moves a leaf to its
 * neighbour's survival curve). */
Test(evict_policies, learned_class_boundaries)
{
    static const struct { uint32_t pages, size; } sz[] = {
        {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4}, {64, 4}, {100000, 4}};
    static const struct { uint32_t gen, g; } gn[] = {{0, 0}, {1, 1}, {2, 2}, {3, 3},
                                                     {4, 3}, {1000, 3}};
    cr_assert_eq(RKV_LEARN_SIZES, 5);
    cr_assert_eq(RKV_LEARN_GENS, 4);
    for (size_t i = 0; i < sizeof gn / sizeof gn[0]; i++)
        for (size_t j = 0; j < sizeof sz / sizeof sz[0]; j++) {
            uint32_t want = gn[i].g * RKV_LEARN_SIZES + sz[j].size;
            uint32_t got = rkv_learn_class(gn[i].gen, sz[j].pages);
            cr_assert_eq(got, want, "depth %u, %u new pages: class %u, expected %u",
                         gn[i].gen, sz[j].pages, got, want);
            cr_assert_lt(got, RKV_LEARN_CLASSES);
        }
}

/*
 * bench/evict_pages.c -- evict_bench's page layer: the page sequence of a
 * workload, the page-level models that replay it, and the library replay
 * they are set beside (declared in bench/evict_bench.h).
 *
 * Owns:
 *   pages_build  page ids by a chained hash of each full page's tokens
 *                (equal prefix <=> equal id, up to 64-bit collisions; never
 *                0), each access's next use, and each page's kind (first /
 *                shared: ever two or more distinct next pages / chain);
 *   model_run    a leaf-only cache of pages under an eviction order: LRU,
 *                Belady, ever-LRU, or a caller's key (model_run_keyed, what
 *                --bound's oracles use); an indexed heap, O(log n) a step;
 *   library_run  the real tree through sim/replay.h, same conventions.
 * Invariants (bench/traces/README.md, "Reference hit rates"): requests in
 * file order; a request matches its prompt, then inserts its full pages (no
 * more than fit); every cached page takes one page of capacity; eviction
 * takes the evictable leaf of lowest key, never a page of the request being
 * served; heap ties go to the lower node index, so every run is
 * deterministic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/evict_bench.h"
#include "sim/replay.h"

/* ---- helpers -------------------------------------------------------------------- */

void evict_die(const char *what, rkv_status st)
{
    fprintf(stderr, "evict_bench: %s: %s (%s)\n", what, rkv_strerror(st),
            rkv_last_error());
    exit(1);
}

void *evict_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "evict_bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* ---- the page sequence ------------------------------------------------------ */

const char *const kind_name[KINDS] = {"first", "shared", "chain"};

uint64_t slot_of(const uint64_t *key, uint64_t cap, uint64_t h)
{
    uint64_t s = (h * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (key[s] != 0 && key[s] != h)
        s = (s + 1) & (cap - 1);
    return s;
}

/* Page ids by chained FNV-1a over the tokens (equal prefix <=> equal id up
 * to 64-bit collisions); next use by a backward pass over a hash map. */
void pages_build(pages *pg, const rkv_workload *wl)
{
    pg->nreq = wl->num_reqs;
    pg->off = evict_xmalloc((pg->nreq + 1) * sizeof *pg->off);
    uint64_t total = 0;
    pg->prompt_tokens = 0;
    pg->distinct = 0;
    for (size_t i = 0; i < pg->nreq; i++) {
        pg->off[i] = total;
        total += wl->reqs[i].input_length / PAGE;
        pg->prompt_tokens += wl->reqs[i].input_length;
    }
    pg->off[pg->nreq] = total;
    pg->ids = evict_xmalloc(total * sizeof *pg->ids);
    pg->next = evict_xmalloc(total * sizeof *pg->next);
    pg->kind = evict_xmalloc(total ? total : 1);
    int32_t *tok = evict_xmalloc(((size_t)rkv_workload_max_input(wl) + 1) * sizeof *tok);
    for (size_t i = 0; i < pg->nreq; i++) {
        rkv_status st = rkv_workload_prompt(wl, i, tok);
        if (st != RKV_OK)
            evict_die("prompt", st);
        uint64_t h = 1469598103934665603ull;
        for (uint64_t j = 0; j < pg->off[i + 1] - pg->off[i]; j++) {
            for (uint32_t k = 0; k < PAGE; k++) {
                h ^= (uint32_t)tok[j * PAGE + k];
                h *= 1099511628211ull;
                h ^= h >> 29;
            }
            pg->ids[pg->off[i] + j] = h ? h : 1;
        }
    }
    free(tok);
    /* next use: map id -> last request seen (walking backwards) */
    uint64_t cap = 1;
    while (cap < total * 2 + 2)
        cap <<= 1;
    uint64_t *key = calloc(cap, sizeof *key);
    uint32_t *val = evict_xmalloc(cap * sizeof *val);
    uint32_t *nch = calloc(cap, sizeof *nch); /* distinct next pages */
    if (key == NULL || nch == NULL) {
        fprintf(stderr, "evict_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = pg->nreq; i-- > 0;) {
        for (uint64_t j = pg->off[i]; j < pg->off[i + 1]; j++) {
            uint64_t h = pg->ids[j], s = slot_of(key, cap, h);
            pg->next[j] = key[s] == h ? val[s] : UINT32_MAX;
            /* a chained id has one parent: its first sighting is a new
             * child of the page before it (already in the table) */
            if (key[s] != h && j > pg->off[i])
                nch[slot_of(key, cap, pg->ids[j - 1])]++;
            pg->distinct += key[s] != h;
            key[s] = h;
            val[s] = (uint32_t)i;
        }
    }
    for (size_t i = 0; i < pg->nreq; i++)
        for (uint64_t j = pg->off[i]; j < pg->off[i + 1]; j++)
            pg->kind[j] = j == pg->off[i] ? KIND_FIRST
                        : nch[slot_of(key, cap, pg->ids[j])] >= 2 ? KIND_SHARED
                        : KIND_CHAIN;
    free(nch);
    free(key);
    free(val);
}

void pages_free(pages *pg)
{
    free(pg->off);
    free(pg->ids);
    free(pg->next);
    free(pg->kind);
}

/* ---- page-level models: leaf LRU, Belady, ever-LRU, a caller's key -------------- */

typedef struct mnode {
    uint64_t id;
    uint32_t parent;   /* UINT32_MAX: a first page                        */
    uint32_t nchild;   /* cached children                                 */
    uint64_t key;      /* eviction order, lowest first (model_key)        */
    int32_t heap;      /* position in the heap, -1: not a candidate       */
    uint8_t cached, locked;
} mnode;

typedef struct model {
    mnode *n;
    uint32_t nn, cap;
    uint32_t *map;     /* open addressing: page id -> node               */
    uint64_t map_cap;
    uint32_t *heap;
    uint32_t hn;
} model;

static uint32_t model_find(model *m, uint64_t id, int create)
{
    uint64_t s = (id * 0x9E3779B97F4A7C15ull) & (m->map_cap - 1);
    while (m->map[s] != UINT32_MAX) {
        if (m->n[m->map[s]].id == id)
            return m->map[s];
        s = (s + 1) & (m->map_cap - 1);
    }
    if (!create)
        return UINT32_MAX;
    mnode *x = &m->n[m->nn];
    memset(x, 0, sizeof *x);
    x->id = id;
    x->heap = -1;
    x->parent = UINT32_MAX;
    m->map[s] = m->nn;
    return m->nn++;
}

/* min-heap by key, ties by node index (deterministic) */
static int model_less(const model *m, uint32_t a, uint32_t b)
{
    return m->n[a].key < m->n[b].key || (m->n[a].key == m->n[b].key && a < b);
}
static void model_swap(model *m, uint32_t i, uint32_t j)
{
    uint32_t t = m->heap[i];
    m->heap[i] = m->heap[j];
    m->heap[j] = t;
    m->n[m->heap[i]].heap = (int32_t)i;
    m->n[m->heap[j]].heap = (int32_t)j;
}
static void model_sift(model *m, uint32_t i)
{
    while (i > 0 && model_less(m, m->heap[i], m->heap[(i - 1) / 2])) {
        model_swap(m, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < m->hn && model_less(m, m->heap[l], m->heap[s]))
            s = l;
        if (r < m->hn && model_less(m, m->heap[r], m->heap[s]))
            s = r;
        if (s == i)
            return;
        model_swap(m, i, s);
        i = s;
    }
}
/* Candidate iff cached, childless and not on the request being served. */
static void model_refresh(model *m, uint32_t x)
{
    mnode *q = &m->n[x];
    int want = q->cached && q->nchild == 0 && !q->locked;
    if (q->heap >= 0) {
        uint32_t i = (uint32_t)q->heap;
        q->heap = -1;
        m->hn--;
        if (i != m->hn) {
            m->heap[i] = m->heap[m->hn];
            m->n[m->heap[i]].heap = (int32_t)i;
            model_sift(m, i);
        }
    }
    if (want) {
        m->heap[m->hn] = x;
        q->heap = (int32_t)m->hn++;
        model_sift(m, m->hn - 1);
    }
}

/* g: the page access (index into pg->ids), req: its request; a caller's
 * key (--bound's oracles, evict_bound.c) replaces the built-in orders */
static uint64_t model_key(int mode, model_key_fn fn, const void *ctx,
                          const pages *pg, uint64_t g, size_t req,
                          uint64_t clock)
{
    uint32_t next = pg->next[g];
    if (fn != NULL)
        return fn(pg, g, req, clock, ctx);
    if (mode == M_BELADY)
        return UINT64_MAX - next;
    if (mode == M_EVER)
        return (uint64_t)(next != UINT32_MAX) << 62 | clock;
    return clock;
}

/* model_run and model_run_keyed: mode's order, or fn's when fn is set */
static uint64_t model_replay(const pages *pg, uint64_t cap_pages, int mode,
                             model_key_fn fn, const void *ctx,
                             uint64_t *by_kind)
{
    model m;
    uint64_t total = pg->off[pg->nreq];
    m.cap = (uint32_t)total + 1;
    m.n = evict_xmalloc(m.cap * sizeof *m.n);
    m.map_cap = 1;
    while (m.map_cap < total * 2 + 2)
        m.map_cap <<= 1;
    m.map = evict_xmalloc(m.map_cap * sizeof *m.map);
    memset(m.map, 0xff, m.map_cap * sizeof *m.map);
    m.heap = evict_xmalloc(m.cap * sizeof *m.heap);
    m.nn = m.hn = 0;
    uint64_t used = 0, hit = 0, clock = 0;
    uint32_t *path = evict_xmalloc(m.cap * sizeof *path);
    for (size_t i = 0; i < pg->nreq; i++) {
        const uint64_t *ids = pg->ids + pg->off[i];
        uint32_t n = (uint32_t)(pg->off[i + 1] - pg->off[i]), k = 0;
        if (n > cap_pages)
            n = (uint32_t)cap_pages; /* as the replay: no more than fits */
        clock++;
        while (k < n) {
            uint32_t x = model_find(&m, ids[k], 0);
            if (x == UINT32_MAX || !m.n[x].cached)
                break;
            path[k++] = x;
        }
        hit += (uint64_t)k * PAGE;
        for (uint32_t j = 0; by_kind != NULL && j < k; j++)
            by_kind[pg->kind[pg->off[i] + j]] += PAGE;
        for (uint32_t j = 0; j < k; j++) {
            mnode *q = &m.n[path[j]];
            q->locked = 1;
            q->key = model_key(mode, fn, ctx, pg, pg->off[i] + j, i, clock);
            model_refresh(&m, path[j]);
        }
        uint32_t got = 0;
        while (got < n - k) {
            if (used < cap_pages) {
                used++;
                got++;
                continue;
            }
            if (m.hn == 0)
                break;
            uint32_t v = m.heap[0];
            mnode *q = &m.n[v];
            q->cached = 0;
            model_refresh(&m, v);
            used--;
            if (q->parent != UINT32_MAX) {
                m.n[q->parent].nchild--;
                model_refresh(&m, q->parent);
            }
        }
        uint32_t par = k ? path[k - 1] : UINT32_MAX;
        for (uint32_t j = k; j < k + got; j++) {
            uint32_t x = model_find(&m, ids[j], 1);
            mnode *q = &m.n[x];
            q->cached = 1;
            q->locked = 1;
            q->nchild = 0;
            q->parent = par;
            q->key = model_key(mode, fn, ctx, pg, pg->off[i] + j, i, clock);
            if (par != UINT32_MAX) {
                m.n[par].nchild++;
                model_refresh(&m, par);
            }
            path[j] = par = x;
        }
        for (uint32_t j = 0; j < k + got; j++) {
            m.n[path[j]].locked = 0;
            model_refresh(&m, path[j]);
        }
    }
    free(path);
    free(m.n);
    free(m.map);
    free(m.heap);
    return hit;
}

uint64_t model_run(const pages *pg, uint64_t cap_pages, int mode,
                   uint64_t *by_kind)
{
    return model_replay(pg, cap_pages, mode, NULL, NULL, by_kind);
}

uint64_t model_run_keyed(const pages *pg, uint64_t cap_pages,
                         model_key_fn key, const void *ctx)
{
    return model_replay(pg, cap_pages, M_LRU, key, ctx, NULL);
}

/* ---- the library replay --------------------------------------------------------- */

double library_run(const rkv_workload *wl, uint64_t cap_tokens, int policy,
                   double *us_per_req, int *fell_back)
{
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.capacity_tokens = cap_tokens;
    cfg.page_size = PAGE;
    cfg.evict_policy = policy;
    rkv_replay_result res;
    rkv_status st = rkv_replay_file_order(wl, &cfg, &res);
    if (st != RKV_OK)
        evict_die("replay", st);
    /* the tree's work per request (means, measured around each call) */
    *us_per_req = (res.match_ns + res.alloc_ns + res.insert_ns) * 1e-3;
    if (fell_back != NULL)
        *fell_back = res.guard_fallbacks != 0;
    return res.hit_rate;
}

/*
 * bench/evict_bench.c -- hit rate of the eviction policies (rkv_evict_policy)
 * against LRU and Belady, on the Mooncake conversation trace and on the
 * synthetic agentic workload, in one run.
 *
 * Conventions (bench/traces/README.md, "Reference hit rates"): requests in
 * file order; each one matches its prompt, then its full pages are inserted
 * (no output tokens are cached; a partial last page is never cached); every
 * cached page takes one page of capacity; eviction removes leaves only, page
 * by page from a leaf's tail, and never a page of the request being served.
 * Hit rate = prompt tokens served from cache / all prompt tokens.
 *
 * The library policies run through the real tree (sim/replay.h
 * rkv_replay_file_order with cfg.evict_policy, selected by name through
 * rkv_evict_policy_from_name). Two page-level models run beside them on the
 * same page sequence (pages identified by a chained hash of their tokens):
 *   ref-lru  leaf LRU, to show the tree's LRU and the reference conventions
 *            agree (it must equal the library's lru column);
 *   belady   farthest next use among evictable leaves (future knowledge,
 *            offline; an indexed heap, O(log n) per step) -- the bound the
 *            reference table calls "farthest-next-use (Belady, leaves only)";
 *   ever-lru leaves whose pages are never used again go first, then LRU:
 *            future knowledge of WHETHER a page comes back but not WHEN --
 *            what a perfect return classifier could give an LRU-ordered
 *            cache (it bounds what better prediction of returns can add;
 *            the rest of Belady's lead is timing).
 * "gap closed" = (policy - lru) / (belady - lru), measured in this run;
 * us/req = the tree's match + alloc/evict + insert time per request (mean,
 * clock around each call), to compare the policies' costs in one run.
 *
 * --explain adds, per capacity, where each page model's hits come from:
 * the first page (a shared root of the whole trace), shared pages (a page
 * that ever has two or more distinct next pages: a common prefix), and
 * chain pages (the rest: one conversation's own turns); and, per workload,
 * how well the learned policy's classes rank leaf ends by whether they
 * come back within 600 requests (AUC).
 *
 * --bound (conversation trace only, first two capacities) measures what
 * prediction quality the target (half the LRU -> Belady gap)
 * needs, with imperfect oracles on the page model: (a) Belady on next-use
 * times with lognormal noise, (b) a "used again within H requests"
 * classifier of a given ROC AUC, LRU inside its two classes, and (c) the
 * AUC that the learned policy's classes and simple online tree features
 * reach for that label, and those features replayed as the classifier of
 * (b) (see bound_key and feature_aucs). The synthetic scores of (b) err
 * independently per access; the replays show what correlated errors of
 * real features give at the same AUC.
 *
 * Usage: evict_bench [--trace FILE] [--policies a,b,...] [--quick] [--explain]
 *                    [--bound] [--capacity-tokens N]...
 *                    [--agentic-capacity-tokens N]...
 * Defaults: policies lru,priority,learned; trace capacities 1,000,000 and
 * 3,000,000 tokens; agentic capacities 1/4 and 1/2 of its distinct pages
 * (what an unbounded cache would hold); page 512 everywhere. --quick: the first 3,000
 * requests of the trace and 16 agentic sessions. The trace is found from
 * --trace, $RKV_TRACE, bench/traces/ walking up, else the embedded copy.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "sim/replay.h"
#include "sim/trace.h"
#include "sim/workload.h"
#include "radixkv.h"

#define PAGE 512
#define MAX_CAPS 8
#define MAX_POLICIES 8

static void die(const char *what, rkv_status st)
{
    fprintf(stderr, "evict_bench: %s: %s (%s)\n", what, rkv_strerror(st),
            rkv_last_error());
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "evict_bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* ---- the page sequence ------------------------------------------------------ */

typedef struct pages {
    size_t nreq;
    uint64_t *off;       /* request i's pages: ids[off[i] .. off[i+1])    */
    uint64_t *ids;       /* chained hash of the page's tokens (never 0)   */
    uint32_t *next;      /* next request that has this page, or UINT32_MAX */
    uint8_t *kind;       /* KIND_FIRST / KIND_SHARED / KIND_CHAIN          */
    uint64_t prompt_tokens;
    uint64_t distinct;   /* distinct pages: what an unbounded cache holds */
} pages;

enum { KIND_FIRST, KIND_SHARED, KIND_CHAIN, KINDS };
static const char *const kind_name[KINDS] = {"first", "shared", "chain"};

static uint64_t slot_of(const uint64_t *key, uint64_t cap, uint64_t h)
{
    uint64_t s = (h * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (key[s] != 0 && key[s] != h)
        s = (s + 1) & (cap - 1);
    return s;
}

/* Page ids by chained FNV-1a over the tokens (equal prefix <=> equal id up
 * to 64-bit collisions); next use by a backward pass over a hash map. */
static void pages_build(pages *pg, const rkv_workload *wl)
{
    pg->nreq = wl->num_reqs;
    pg->off = xmalloc((pg->nreq + 1) * sizeof *pg->off);
    uint64_t total = 0;
    pg->prompt_tokens = 0;
    pg->distinct = 0;
    for (size_t i = 0; i < pg->nreq; i++) {
        pg->off[i] = total;
        total += wl->reqs[i].input_length / PAGE;
        pg->prompt_tokens += wl->reqs[i].input_length;
    }
    pg->off[pg->nreq] = total;
    pg->ids = xmalloc(total * sizeof *pg->ids);
    pg->next = xmalloc(total * sizeof *pg->next);
    pg->kind = xmalloc(total ? total : 1);
    int32_t *tok = xmalloc(((size_t)rkv_workload_max_input(wl) + 1) * sizeof *tok);
    for (size_t i = 0; i < pg->nreq; i++) {
        rkv_status st = rkv_workload_prompt(wl, i, tok);
        if (st != RKV_OK)
            die("prompt", st);
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
    uint32_t *val = xmalloc(cap * sizeof *val);
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

static void pages_free(pages *pg)
{
    free(pg->off);
    free(pg->ids);
    free(pg->next);
    free(pg->kind);
}

/* ---- page-level models: leaf LRU and Belady ------------------------------------ */

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

/* M_NOISY, M_NOISY_INF and M_CLASS are --bound's imperfect oracles (see
 * bound_key, below main's helpers): they take their parameters from bp. */
enum { M_LRU, M_BELADY, M_EVER, M_NOISY, M_NOISY_INF, M_CLASS };

typedef struct bound_params bound_params;
static uint64_t bound_key(int mode, const pages *pg, uint64_t g, size_t req,
                          uint64_t clock, const bound_params *bp);

/* g: the page access (index into pg->ids), req: its request */
static uint64_t model_key(int mode, const pages *pg, uint64_t g, size_t req,
                          uint64_t clock, const bound_params *bp)
{
    uint32_t next = pg->next[g];
    if (mode == M_BELADY)
        return UINT64_MAX - next;
    if (mode == M_EVER)
        return (uint64_t)(next != UINT32_MAX) << 62 | clock;
    if (mode >= M_NOISY)
        return bound_key(mode, pg, g, req, clock, bp);
    return clock;
}

/* Replays the pages with cap_pages of capacity under the order of mode
 * (M_LRU, M_BELADY, M_EVER). Returns hit tokens; by_kind[KINDS] (may be
 * NULL) gets them split by page kind. */
static uint64_t model_run_bp(const pages *pg, uint64_t cap_pages, int mode,
                             uint64_t *by_kind, const bound_params *bp)
{
    model m;
    uint64_t total = pg->off[pg->nreq];
    m.cap = (uint32_t)total + 1;
    m.n = xmalloc(m.cap * sizeof *m.n);
    m.map_cap = 1;
    while (m.map_cap < total * 2 + 2)
        m.map_cap <<= 1;
    m.map = xmalloc(m.map_cap * sizeof *m.map);
    memset(m.map, 0xff, m.map_cap * sizeof *m.map);
    m.heap = xmalloc(m.cap * sizeof *m.heap);
    m.nn = m.hn = 0;
    uint64_t used = 0, hit = 0, clock = 0;
    uint32_t *path = xmalloc(m.cap * sizeof *path);
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
            q->key = model_key(mode, pg, pg->off[i] + j, i, clock, bp);
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
            q->key = model_key(mode, pg, pg->off[i] + j, i, clock, bp);
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

static uint64_t model_run(const pages *pg, uint64_t cap_pages, int mode,
                          uint64_t *by_kind)
{
    return model_run_bp(pg, cap_pages, mode, by_kind, NULL);
}

/* ---- how well the learned policy's classes predict returns ------------------- */

/* Each request with two or more pages leaves an end (its last page); it
 * "returns" when a request within RETURN_WINDOW requests has that page.
 * Classes as radix/evict_learned.c's: continuation depth (a request whose
 * path holds an earlier request's end, not counting the first page, is one
 * deeper) x new pages beyond that end. Prints the AUC of ranking ends by
 * their class's return share (0.5: no information, 1: perfect) -- what a
 * policy ranking leaves by class can know at best. */
#define RETURN_WINDOW 600
#define NCLASS 20

static void explain_classes(const pages *pg)
{
    uint64_t cap = 1;
    while (cap < 2 * (uint64_t)pg->nreq + 2)
        cap <<= 1;
    uint64_t *key = calloc(cap, sizeof *key);
    uint32_t *val = xmalloc(cap * sizeof *val);
    uint8_t *depth = xmalloc(pg->nreq ? pg->nreq : 1);
    if (key == NULL) {
        fprintf(stderr, "evict_bench: out of memory\n");
        exit(1);
    }
    double tot[NCLASS] = {0}, pos[NCLASS] = {0};
    for (size_t i = 0; i < pg->nreq; i++) {
        uint64_t o = pg->off[i], n = pg->off[i + 1] - o, base = 1;
        depth[i] = 0;
        if (n < 2)
            continue;
        for (uint64_t j = n - 1; j >= 1; j--) {
            uint64_t s = slot_of(key, cap, pg->ids[o + j]);
            if (key[s] == pg->ids[o + j]) {
                uint32_t d = depth[val[s]] + 1u;
                depth[i] = (uint8_t)(d < 3 ? d : 3);
                base = j + 1;
                break;
            }
        }
        uint64_t np = n - base;
        int sz = np <= 1 ? 0 : np <= 2 ? 1 : np <= 4 ? 2 : np <= 8 ? 3 : 4;
        int c = depth[i] * 5 + sz;
        uint32_t nx = pg->next[o + n - 1];
        tot[c] += 1;
        pos[c] += nx != UINT32_MAX && nx - i < RETURN_WINDOW;
        uint64_t s = slot_of(key, cap, pg->ids[o + n - 1]);
        key[s] = pg->ids[o + n - 1];
        val[s] = (uint32_t)i;
    }
    /* AUC: classes in rising return share; ties inside a class count half */
    int ord[NCLASS];
    for (int c = 0; c < NCLASS; c++)
        ord[c] = c;
    for (int a = 1; a < NCLASS; a++)
        for (int b = a; b > 0; b--) {
            int x = ord[b - 1], y = ord[b];
            double rx = tot[x] > 0 ? pos[x] / tot[x] : 0;
            double ry = tot[y] > 0 ? pos[y] / tot[y] : 0;
            if (rx <= ry)
                break;
            ord[b - 1] = y;
            ord[b] = x;
        }
    double P = 0, N = 0, auc = 0, negs = 0;
    for (int k = 0; k < NCLASS; k++) {
        int c = ord[k];
        double ng = tot[c] - pos[c];
        auc += pos[c] * (negs + ng / 2);
        negs += ng;
        P += pos[c];
        N += ng;
    }
    printf("  learned classes vs \"end used again within %d requests\": "
           "%.0f ends, %.1f%% return, AUC %.3f\n", RETURN_WINDOW, P + N,
           P + N > 0 ? 100 * P / (P + N) : 0.0,
           P > 0 && N > 0 ? auc / (P * N) : 0.5);
    free(key);
    free(val);
    free(depth);
}

/* ---- one table ------------------------------------------------------------------ */

static double library_run(const rkv_workload *wl, uint64_t cap_tokens,
                          int policy, double *us_per_req)
{
    rkv_replay_config cfg;
    rkv_replay_config_init(&cfg);
    cfg.capacity_tokens = cap_tokens;
    cfg.page_size = PAGE;
    cfg.evict_policy = policy;
    rkv_replay_result res;
    rkv_status st = rkv_replay_file_order(wl, &cfg, &res);
    if (st != RKV_OK)
        die("replay", st);
    /* the tree's work per request (means, measured around each call) */
    *us_per_req = (res.match_ns + res.alloc_ns + res.insert_ns) * 1e-3;
    return res.hit_rate;
}

static void table(const char *title, const rkv_workload *wl,
                  const uint64_t *caps, int ncaps, const int *pol, int npol,
                  int explain)
{
    pages pg;
    pages_build(&pg, wl);
    printf("\n%s: %zu requests, %llu prompt tokens, page %d, file order\n",
           title, pg.nreq, (unsigned long long)pg.prompt_tokens, PAGE);
    if (explain)
        explain_classes(&pg);
    printf("%14s %9s %9s %9s", "capacity", "ref-lru", "belady", "ever-lru");
    for (int p = 0; p < npol; p++)
        printf(" %9s", rkv_evict_policy_name(pol[p]));
    for (int p = 0; p < npol; p++)
        if (pol[p] != RKV_EVICT_LRU)
            printf("  gap(%s)", rkv_evict_policy_name(pol[p]));
    for (int p = 0; p < npol; p++)
        printf(" us/req(%s)", rkv_evict_policy_name(pol[p]));
    printf("\n");
    for (int c = 0; c < ncaps; c++) {
        uint64_t cp = caps[c] / PAGE;
        uint64_t kinds[3][KINDS] = {{0}};
        double lru_ref = (double)model_run(&pg, cp, M_LRU, kinds[0]) /
                         (double)pg.prompt_tokens;
        double bel = (double)model_run(&pg, cp, M_BELADY, kinds[1]) /
                     (double)pg.prompt_tokens;
        double ever = (double)model_run(&pg, cp, M_EVER, kinds[2]) /
                      (double)pg.prompt_tokens;
        double hr[MAX_POLICIES], us[MAX_POLICIES], lru = lru_ref;
        for (int p = 0; p < npol; p++) {
            hr[p] = library_run(wl, caps[c], pol[p], &us[p]);
            if (pol[p] == RKV_EVICT_LRU)
                lru = hr[p];
        }
        printf("%14llu %8.2f%% %8.2f%% %8.2f%%", (unsigned long long)caps[c],
               100 * lru_ref, 100 * bel, 100 * ever);
        for (int p = 0; p < npol; p++)
            printf(" %8.2f%%", 100 * hr[p]);
        for (int p = 0; p < npol; p++)
            if (pol[p] != RKV_EVICT_LRU)
                printf("  %7.1f%%", bel > lru ? 100 * (hr[p] - lru) / (bel - lru) : 0.0);
        for (int p = 0; p < npol; p++)
            printf(" %*.2f", (int)strlen(rkv_evict_policy_name(pol[p])) + 8, us[p]);
        printf("\n");
        static const char *const mname[3] = {"ref-lru", "belady", "ever-lru"};
        for (int m = 0; explain && m < 3; m++) {
            printf("%14s %9s", "", mname[m]);
            for (int k = 0; k < KINDS; k++)
                printf("  %s %6.2f%%", kind_name[k],
                       100.0 * (double)kinds[m][k] / (double)pg.prompt_tokens);
            printf("\n");
        }
    }
    pages_free(&pg);
}

/* ---- --bound: what prediction quality the target needs ------------------------ */

/* Imperfect oracles on the page model, to measure how good a prediction
 * must be before it pays, rather than guess it from an AUC:
 *   M_NOISY      Belady on a noisy next-use time: now + (next - now) *
 *                exp(sigma * Z). A page never used again counts as used one
 *                trace length (nreq requests) later, so sigma 0 is Belady
 *                exactly and noise blurs "never" like any other time;
 *   M_NOISY_INF  the same, but "never" stays exact (whether is known, only
 *                when is noisy), to separate the two kinds of knowledge;
 *   M_CLASS      a return classifier: label = used again within H requests,
 *                score = label + s * Z, predicted "returns" iff score > thr;
 *                pages predicted not to return go first, LRU inside each
 *                class. thr 0.5 is the midpoint (equal error rates on both
 *                classes); a higher thr trades missed returns for fewer
 *                false "returns", which matters because a small cache holds
 *                few pages against many that never come back (the tables
 *                show the midpoint and the best of a false-positive-rate
 *                grid). (Letting a "returns" prediction lapse H requests
 *                after the use measured the same as never lapsing, on the
 *                first 3,000 requests: the cache turns over faster than H.)
 *                With equal-variance gaussians AUC = Phi(1 / (s sqrt 2)),
 *                so s is set from the AUC asked for; the AUC of the scores
 *                actually drawn is measured and printed beside it.
 * Z ~ N(0, 1) is drawn per page access from a counter-based generator
 * (splitmix64 of seed and access index), so a run is deterministic and
 * every sigma / AUC sees the same draws (common random numbers: the rows
 * differ by the noise level only, which the bisections rely on). */
#define BOUND_SEED 13u
#define H_INF UINT32_MAX

struct bound_params {
    double sigma;  /* M_NOISY*: lognormal sigma of the next-use distance */
    double s;      /* M_CLASS: score noise                                */
    double thr;    /* M_CLASS: score threshold for "returns"              */
    uint32_t h;    /* M_CLASS: horizon in requests (H_INF: ever)          */
    const double *score; /* M_CLASS: per-access scores instead of label + s Z */
};

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* N(0, 1) for access g (Box-Muller on two 53-bit uniforms in (0, 1)) */
static double gauss_of(uint64_t g)
{
    uint64_t a = splitmix64(g * 2 + ((uint64_t)BOUND_SEED << 40));
    uint64_t b = splitmix64(g * 2 + 1 + ((uint64_t)BOUND_SEED << 40));
    double u1 = ((double)(a >> 11) + 0.5) / 9007199254740992.0;
    double u2 = ((double)(b >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int bound_label(const pages *pg, uint64_t g, size_t req, uint32_t h)
{
    uint32_t nx = pg->next[g];
    return nx != UINT32_MAX && (h == H_INF || nx - req < h);
}

static uint64_t bound_key(int mode, const pages *pg, uint64_t g, size_t req,
                          uint64_t clock, const bound_params *bp)
{
    double z = gauss_of(g);
    if (mode == M_CLASS) {
        double score = bp->score != NULL ? bp->score[g]
                                         : bound_label(pg, g, req, bp->h) + bp->s * z;
        return (uint64_t)(score > bp->thr) << 62 | clock;
    }
    uint32_t nx = pg->next[g];
    if (nx == UINT32_MAX && mode == M_NOISY_INF)
        return 0; /* known never to come back: first out, as in Belady */
    double d = nx == UINT32_MAX ? (double)pg->nreq : (double)(nx - req);
    double pred = ((double)req + d * exp(bp->sigma * z)) * 256.0;
    /* farther predicted use = smaller key = evicted first (cap: no overflow) */
    return UINT64_MAX - (uint64_t)(pred < 1e18 ? pred : 1e18);
}

static double bound_hit(const pages *pg, uint64_t cap_pages, int mode,
                        const bound_params *bp)
{
    return (double)model_run_bp(pg, cap_pages, mode, NULL, bp) /
           (double)pg->prompt_tokens;
}

/* Phi^-1 by bisection on erfc: 60 halvings of [-10, 10] are exact enough
 * for a noise scale and keep the bench free of a numerical library. */
static double probit(double p)
{
    double lo = -10, hi = 10;
    for (int k = 0; k < 60; k++) {
        double mid = (lo + hi) / 2;
        if (0.5 * erfc(-mid / sqrt(2.0)) < p)
            lo = mid;
        else
            hi = mid;
    }
    return (lo + hi) / 2;
}

static double noise_for_auc(double auc)
{
    return auc >= 1.0 ? 0.0 : 1.0 / (sqrt(2.0) * probit(auc));
}

typedef struct scored {
    double v;
    uint8_t y;
} scored;

static int scored_cmp(const void *a, const void *b)
{
    double x = ((const scored *)a)->v, y = ((const scored *)b)->v;
    return (x > y) - (x < y);
}

/* Rank-sum AUC of n scored samples (ties count half); sorts sc. tpr (may
 * be NULL) gets the true-positive rate at false-positive rates 0.1 % and
 * 1 %: cutting from the top score down, whole tie groups only (a bin is
 * protected or not), the last cut within the rate -- the low-FPR corner
 * is what a small cache's protection lives on (table (b)). */
static const double tpr_fpr[2] = {0.001, 0.01};
static double auc_of(scored *sc, size_t n, double *tpr)
{
    qsort(sc, n, sizeof *sc, scored_cmp);
    double P = 0, N = 0, negs = 0, sum = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double p = 0, q = 0;
        while (j < n && sc[j].v == sc[i].v) {
            p += sc[j].y;
            q += !sc[j].y;
            j++;
        }
        sum += p * (negs + q / 2);
        negs += q;
        P += p;
        N += q;
        i = j;
    }
    for (int f = 0; tpr != NULL && f < 2; f++) {
        double tp = 0, fp = 0;
        tpr[f] = 0;
        for (size_t j = n; j > 0;) {
            size_t i = j;
            double p = 0, q = 0;
            while (i > 0 && sc[i - 1].v == sc[j - 1].v) {
                p += sc[i - 1].y;
                q += !sc[i - 1].y;
                i--;
            }
            if (fp + q > tpr_fpr[f] * N)
                break;
            tp += p;
            fp += q;
            j = i;
        }
        tpr[f] = P > 0 ? tp / P : 0;
    }
    return P > 0 && N > 0 ? sum / (P * N) : 0.5;
}

/* The AUC of the classifier scores M_CLASS draws, over every page access. */
static double class_scores_auc(const pages *pg, uint32_t h, double s)
{
    uint64_t n = pg->off[pg->nreq];
    scored *sc = xmalloc(n * sizeof *sc);
    for (size_t i = 0; i < pg->nreq; i++)
        for (uint64_t g = pg->off[i]; g < pg->off[i + 1]; g++) {
            sc[g].y = (uint8_t)bound_label(pg, g, i, h);
            sc[g].v = sc[g].y + s * gauss_of(g);
        }
    double a = auc_of(sc, n, NULL);
    free(sc);
    return a;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint32_t log2_bin(uint64_t v, uint32_t max)
{
    uint32_t b = 0;
    while (v > 0 && b < max) {
        v >>= 1;
        b++;
    }
    return b;
}

/* Online features of page access g (no future): what a tree policy could
 * see at that moment. All are measured before the access updates them. */
enum { F_CLASS, F_CLASS_AGE, F_DEPTH, F_CONT, F_NEW, F_HITS, F_AGE, F_TREE,
       F_TREE_AGE, NFEAT };
static const char *const feat_name[NFEAT] = {
    "learned classes (continuation depth x new pages, 20)",
    "learned classes x age (what the learned policy ranks by)",
    "page depth (log2 bins)",
    "continuation count: distinct next pages seen (log2)",
    "node pages: pages the request added (log2)",
    "subtree hits: earlier requests through the page (log2)",
    "age: requests since the page's last use (log2; LRU's signal)",
    "tree: depth x continuations x node pages x subtree hits",
    "tree x age",
};
#define FEAT_BINS 65536u

/* Per feature, the AUC of ranking samples by their bin's return share on
 * this same trace (in-sample: an optimistic figure for a lookup table or
 * tree on that feature, the best such a table can rank). all: every page
 * access; ends: last pages of requests with two pages or more (the leaf
 * ends the learned policy classifies; at H = 600 its class AUC is the one
 * --explain prints); rest: every access but those of a request's first
 * page (one shared system prompt here, used by every request, which every
 * policy keeps: its easy positives would otherwise fill the low-FPR
 * corner). The TPRs are over the rest. */
static void feature_aucs(const pages *pg, uint32_t h, double (*auc)[3],
                         double (*tpr)[2], double *const *score_out)
{
    uint64_t total = pg->off[pg->nreq], cap = 1;
    while (cap < 2 * total + 2)
        cap <<= 1;
    uint64_t *key = calloc(cap, sizeof *key);
    uint32_t *hits = calloc(cap, sizeof *hits), *kids = calloc(cap, sizeof *kids);
    uint32_t *last = calloc(cap, sizeof *last);
    /* ends: id -> continuation depth of the request that ended there */
    uint64_t *ekey = calloc(cap, sizeof *ekey);
    uint8_t *edepth = calloc(cap, 1);
    uint32_t *bin = xmalloc(total * NFEAT * sizeof *bin);
    uint8_t *lab = xmalloc(total ? total : 1), *isend = calloc(total + 1, 1);
    if (!key || !hits || !kids || !last || !ekey || !edepth || !isend) {
        fprintf(stderr, "evict_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < pg->nreq; i++) {
        uint64_t o = pg->off[i], n = pg->off[i + 1] - o, base = 1, seen = 0;
        uint32_t depth = 0;
        /* the learned policy's class, as explain_classes computes it */
        for (uint64_t j = n; n >= 2 && j-- > 1;) {
            uint64_t s = slot_of(ekey, cap, pg->ids[o + j]);
            if (ekey[s] == pg->ids[o + j]) {
                depth = edepth[s] + 1u;
                base = j + 1;
                break;
            }
        }
        uint64_t np = n - base;
        uint32_t sz = np <= 1 ? 0 : np <= 2 ? 1 : np <= 4 ? 2 : np <= 8 ? 3 : 4;
        uint32_t cls = (depth < 3 ? depth : 3) * 5 + sz;
        for (uint64_t j = 0; j < n; j++)
            seen += key[slot_of(key, cap, pg->ids[o + j])] == pg->ids[o + j];
        uint64_t added = n - seen;
        for (uint64_t j = 0; j < n; j++) {
            uint64_t g = o + j, s = slot_of(key, cap, pg->ids[g]);
            int known = key[s] == pg->ids[g];
            uint32_t *b = bin + g * NFEAT;
            b[F_CLASS] = cls;
            b[F_DEPTH] = log2_bin(j + 1, 15);
            b[F_CONT] = log2_bin(known ? kids[s] : 0, 15);
            b[F_NEW] = log2_bin(added, 15);
            b[F_HITS] = log2_bin(known ? hits[s] : 0, 15);
            b[F_AGE] = known ? log2_bin(i - last[s], 15) + 1 : 0;
            b[F_CLASS_AGE] = cls << 5 | b[F_AGE];
            /* bins cut to 4 bits each so the product stays a small table */
            b[F_TREE] = (b[F_DEPTH] < 15 ? b[F_DEPTH] : 15) << 12 |
                        (b[F_CONT] < 15 ? b[F_CONT] : 15) << 8 |
                        (b[F_NEW] < 15 ? b[F_NEW] : 15) << 4 |
                        (b[F_HITS] < 15 ? b[F_HITS] : 15);
            b[F_TREE_AGE] = ((b[F_DEPTH] < 7 ? b[F_DEPTH] : 7) << 13 |
                             (b[F_CONT] < 3 ? b[F_CONT] : 3) << 11 |
                             (b[F_NEW] < 7 ? b[F_NEW] : 7) << 8 |
                             (b[F_HITS] < 15 ? b[F_HITS] : 15) << 4 |
                             (b[F_AGE] < 15 ? b[F_AGE] : 15)) % FEAT_BINS;
            lab[g] = (uint8_t)bound_label(pg, g, i, h);
            /* update after recording: a new page is a new continuation of
             * the page before it (chained ids have one parent) */
            if (!known && j > 0)
                kids[slot_of(key, cap, pg->ids[g - 1])]++;
            key[s] = pg->ids[g];
            hits[s]++;
            last[s] = (uint32_t)i;
        }
        if (n >= 2) {
            isend[o + n - 1] = 1;
            uint64_t s = slot_of(ekey, cap, pg->ids[o + n - 1]);
            ekey[s] = pg->ids[o + n - 1];
            edepth[s] = (uint8_t)(depth < 255 ? depth : 255);
        }
    }
    double *tot = xmalloc(FEAT_BINS * sizeof *tot), *pos = xmalloc(FEAT_BINS * sizeof *pos);
    scored *sc = xmalloc((total ? total : 1) * sizeof *sc);
    for (int f = 0; f < NFEAT; f++)
        for (int e = 0; e < 3; e++) {
            memset(tot, 0, FEAT_BINS * sizeof *tot);
            memset(pos, 0, FEAT_BINS * sizeof *pos);
            for (uint64_t g = 0; g < total; g++)
                if (e == 0 || (e == 1 && isend[g]) ||
                    (e == 2 && pg->kind[g] != KIND_FIRST)) {
                    tot[bin[g * NFEAT + f]] += 1;
                    pos[bin[g * NFEAT + f]] += lab[g];
                }
            size_t n = 0;
            for (uint64_t g = 0; g < total; g++)
                if (e == 0 || (e == 1 && isend[g]) ||
                    (e == 2 && pg->kind[g] != KIND_FIRST)) {
                    uint32_t b = bin[g * NFEAT + f];
                    /* share, then bin: equal shares of different bins
                     * stay distinct values only through the share */
                    sc[n].v = pos[b] / tot[b];
                    sc[n++].y = lab[g];
                }
            auc[f][e] = auc_of(sc, n, e == 2 ? tpr[f] : NULL);
            /* every access's bin share: the in-sample classifier that
             * the page model replays for the last rows of table (c) */
            for (uint64_t g = 0; e == 0 && score_out[f] != NULL && g < total; g++) {
                uint32_t b = bin[g * NFEAT + f];
                score_out[f][g] = pos[b] / tot[b];
            }
        }
    free(sc);
    free(tot);
    free(pos);
    free(bin);
    free(lab);
    free(isend);
    free(key);
    free(hits);
    free(kids);
    free(last);
    free(ekey);
    free(edepth);
}

/* Best hit rate of M_CLASS over a grid of thresholds: the midpoint and the
 * thresholds that give false-positive rates 10 % .. 0.01 % on the negatives'
 * N(0, s^2) scores. *fpr gets the best one's rate (0.5 marks the
 * midpoint, whose rate is Phi(-0.5 / s)). */
static const double fprs[] = {0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4};
static double class_best(const pages *pg, uint64_t cap_pages, uint32_t h,
                         double s, double *fpr)
{
    bound_params bp = {0, s, 0.5, h, NULL};
    double best = bound_hit(pg, cap_pages, M_CLASS, &bp);
    *fpr = 0.5;
    for (size_t k = 0; s > 0 && k < sizeof fprs / sizeof fprs[0]; k++) {
        bp.thr = s * probit(1 - fprs[k]);
        double hr = bound_hit(pg, cap_pages, M_CLASS, &bp);
        if (hr > best) {
            best = hr;
            *fpr = fprs[k];
        }
    }
    return best;
}

static void ratio_cols(double hit, double lru, double bel)
{
    printf(" %7.2f%% %6.2fx %6.2fx %6.1f%%", 100 * hit, lru > 0 ? hit / lru : 0.0,
           bel > 0 ? hit / bel : 0.0,
           bel > lru ? 100 * (hit - lru) / (bel - lru) : 0.0);
}

#define BOUND_CAPS 2
static const double sigmas[] = {0, 0.5, 1, 1.5, 2, 4};
static const double aucs[] = {1.0, 0.99, 0.95, 0.90, 0.80, 0.70};
static const uint32_t horizons[] = {100, 200, 400, 600, 800, 1600, 3200, H_INF};
#define NSIG (sizeof sigmas / sizeof sigmas[0])
#define NAUC (sizeof aucs / sizeof aucs[0])
#define NH (sizeof horizons / sizeof horizons[0])

static void hdr_caps(const uint64_t *caps, int ncaps, const char *lead)
{
    printf("%s", lead);
    for (int c = 0; c < ncaps; c++) {
        char t[64];
        snprintf(t, sizeof t, "---- %llu tokens ----", (unsigned long long)caps[c]);
        printf("  %-31s", t);
    }
    printf("\n");
}

/* Runs parts (a), (b), (c) on the trace; prints one table per part. */
static void bound_tables(const rkv_workload *wl, const uint64_t *caps, int ncaps)
{
    pages pg;
    pages_build(&pg, wl);
    if (ncaps > BOUND_CAPS)
        ncaps = BOUND_CAPS;
    double lru[BOUND_CAPS], bel[BOUND_CAPS], ever[BOUND_CAPS], learned[BOUND_CAPS],
        target[BOUND_CAPS];
    uint64_t cp[BOUND_CAPS];
    printf("\n--bound: conversation trace, %zu requests, %llu page accesses, "
           "page %d, file order\n", pg.nreq,
           (unsigned long long)pg.off[pg.nreq], PAGE);
    printf("%14s %9s %9s %9s %9s %9s\n", "capacity", "lru", "belady",
           "ever-lru", "learned", "target");
    for (int c = 0; c < ncaps; c++) {
        double us;
        cp[c] = caps[c] / PAGE;
        lru[c] = (double)model_run(&pg, cp[c], M_LRU, NULL) / (double)pg.prompt_tokens;
        bel[c] = (double)model_run(&pg, cp[c], M_BELADY, NULL) / (double)pg.prompt_tokens;
        ever[c] = (double)model_run(&pg, cp[c], M_EVER, NULL) / (double)pg.prompt_tokens;
        learned[c] = library_run(wl, caps[c], RKV_EVICT_LEARNED, &us);
        /* the target: half the LRU -> Belady gap, this run's figures */
        target[c] = lru[c] + (bel[c] - lru[c]) / 2;
        printf("%14llu %8.2f%% %8.2f%% %8.2f%% %8.2f%% %8.2f%%\n",
               (unsigned long long)caps[c], 100 * lru[c], 100 * bel[c],
               100 * ever[c], 100 * learned[c], 100 * target[c]);
    }
    printf("columns per capacity: hit rate, x LRU, x Belady, LRU->Belady gap closed\n");

    /* (a) */
    printf("\n(a) noisy Belady: predicted next use = now + (next - now) * "
           "exp(sigma Z), Z ~ N(0,1) per access, seed %u\n", BOUND_SEED);
    printf("    all: \"never used again\" = one trace length away, noisy like "
           "any time; whether: \"never\" kept exact, only return times noisy\n");
    hdr_caps(caps, ncaps, "                  ");
    for (int v = 0; v < 2; v++) {
        int mode = v ? M_NOISY_INF : M_NOISY;
        for (size_t k = 0; k < NSIG; k++) {
            bound_params bp = {sigmas[k], 0, 0, 0, NULL};
            printf("%-8s sigma %3.1f", v ? "whether" : "all", sigmas[k]);
            for (int c = 0; c < ncaps; c++)
                ratio_cols(bound_hit(&pg, cp[c], mode, &bp), lru[c], bel[c]);
            printf("\n");
        }
    }
    /* Largest sigma that still reaches the target (bisection; hit rate
     * falls with sigma on the rows above, checked by eye, not assumed). */
    for (int v = 0; v < 2; v++) {
        printf("%-8s largest sigma reaching the target:", v ? "whether" : "all");
        for (int c = 0; c < ncaps; c++) {
            double lo = 0, hi = 4;
            bound_params bp = {hi, 0, 0, 0, NULL};
            if (bound_hit(&pg, cp[c], v ? M_NOISY_INF : M_NOISY, &bp) >= target[c]) {
                printf("  %llu: > 4", (unsigned long long)caps[c]);
                continue;
            }
            for (int it = 0; it < 10; it++) {
                bp.sigma = (lo + hi) / 2;
                if (bound_hit(&pg, cp[c], v ? M_NOISY_INF : M_NOISY, &bp) >= target[c])
                    lo = bp.sigma;
                else
                    hi = bp.sigma;
            }
            printf("  %llu: %.2f", (unsigned long long)caps[c], lo);
        }
        printf("\n");
    }

    /* (b): first the horizon, with a perfect classifier (AUC 1) */
    printf("\n(b) classifier oracle: label \"used again within H requests\", "
           "score = label + s Z (s from the AUC), predicted-not-reused first, "
           "then LRU\n");
    hdr_caps(caps, ncaps, "                ");
    uint32_t best_h[BOUND_CAPS] = {0};
    double best_hit[BOUND_CAPS] = {0};
    for (size_t k = 0; k < NH; k++) {
        bound_params bp = {0, 0, 0.5, horizons[k], NULL};
        if (horizons[k] == H_INF)
            printf("AUC 1   H  ever ");
        else
            printf("AUC 1   H %5u ", horizons[k]);
        for (int c = 0; c < ncaps; c++) {
            double hr = bound_hit(&pg, cp[c], M_CLASS, &bp);
            ratio_cols(hr, lru[c], bel[c]);
            if (hr > best_hit[c]) {
                best_hit[c] = hr;
                best_h[c] = horizons[k];
            }
        }
        printf("\n");
    }
    for (int c = 0; c < ncaps; c++) {
        char t[32];
        if (best_h[c] == H_INF)
            snprintf(t, sizeof t, "ever");
        else
            snprintf(t, sizeof t, "%u", best_h[c]);
        printf("\ncapacity %llu, best H %s: AUC asked [AUC of the scores drawn]; "
               "threshold: midpoint | best false-positive rate of the grid\n",
               (unsigned long long)caps[c], t);
        printf("%18s  %-31s  %-31s\n", "", "---- midpoint ----", "---- best threshold ----");
        for (size_t k = 0; k < NAUC; k++) {
            double s = noise_for_auc(aucs[k]), fpr;
            bound_params bp = {0, s, 0.5, best_h[c], NULL};
            printf("AUC %5.3f [%5.3f] ", aucs[k], class_scores_auc(&pg, best_h[c], s));
            ratio_cols(bound_hit(&pg, cp[c], M_CLASS, &bp), lru[c], bel[c]);
            ratio_cols(class_best(&pg, cp[c], best_h[c], s, &fpr), lru[c], bel[c]);
            if (fpr == 0.5)
                printf("  threshold: midpoint\n");
            else
                printf("  threshold: FPR %g\n", fpr);
        }
        /* Lowest AUC that reaches the target (bisection over [0.5, 1];
         * hit rate rises with AUC on the rows above, checked, not assumed) */
        for (int v = 0; v < 2; v++) {
            double fpr;
            printf("  %-14s lowest AUC reaching the target %.2f%%: ",
                   v ? "best threshold" : "midpoint", 100 * target[c]);
            if (best_hit[c] < target[c]) {
                printf("not reached at AUC 1\n");
                continue;
            }
            double lo = 0.5, hi = 1.0, hi_fpr = 0.5;
            for (int it = 0; it < 12; it++) {
                double s = noise_for_auc((lo + hi) / 2);
                bound_params bp = {0, s, 0.5, best_h[c], NULL};
                fpr = 0.5;
                double hr = v ? class_best(&pg, cp[c], best_h[c], s, &fpr)
                              : bound_hit(&pg, cp[c], M_CLASS, &bp);
                if (hr >= target[c]) {
                    hi = (lo + hi) / 2;
                    hi_fpr = fpr;
                } else {
                    lo = (lo + hi) / 2;
                }
            }
            /* the operating point: with scores label + s Z, a threshold
             * at false-positive rate f keeps a share Phi(1/s - Phi^-1(1-f))
             * of the returning pages */
            double s = noise_for_auc(hi);
            double thr = hi_fpr == 0.5 ? 0.5 : s * probit(1 - hi_fpr);
            double fp = s > 0 ? 0.5 * erfc(thr / s / sqrt(2.0)) : 0;
            double tpr = s > 0 ? 0.5 * erfc((thr - 1) / s / sqrt(2.0)) : 1;
            printf("%.4f (FPR %.4f, TPR %.3f)\n", hi, fp, tpr);
        }
    }

    /* (c) */
    uint32_t hs[BOUND_CAPS + 1];
    int nhs = 0;
    hs[nhs++] = 600;
    for (int c = 0; c < ncaps; c++) {
        int dup = 0;
        for (int k = 0; k < nhs; k++)
            dup |= hs[k] == best_h[c];
        if (!dup)
            hs[nhs++] = best_h[c];
    }
    printf("\n(c) AUC of online features for the same label (in-sample: bins "
           "ranked by their return share on this trace)\n");
    printf("%-64s", "feature");
    for (int k = 0; k < nhs; k++) {
        char t[48];
        if (hs[k] == H_INF)
            snprintf(t, sizeof t, "H ever: AUC all/ends/rest");
        else
            snprintf(t, sizeof t, "H %u: AUC all/ends/rest", hs[k]);
        printf(" %-17s", t);
    }
    printf("    rest: TPR at FPR 0.1%%/1%%, same H order\n");
    double au[BOUND_CAPS + 1][NFEAT][3];
    double tp[BOUND_CAPS + 1][NFEAT][2];
    double *none[NFEAT] = {NULL};
    for (int k = 0; k < nhs; k++)
        feature_aucs(&pg, hs[k], au[k], tp[k], none);
    for (int f = 0; f < NFEAT; f++) {
        printf("%-64s", feat_name[f]);
        for (int k = 0; k < nhs; k++)
            printf(" %5.3f/%5.3f/%5.3f", au[k][f][0], au[k][f][1], au[k][f][2]);
        printf("   ");
        for (int k = 0; k < nhs; k++)
            printf(" %6.3f/%5.3f", tp[k][f][0], tp[k][f][1]);
        printf("\n");
    }

    /* The direct test: replay the in-sample feature classifiers at each
     * capacity's best H (bins' return share as the score, pages above a
     * threshold protected, LRU inside; the best of a protected-share grid).
     * In-sample, so optimistic: the shares are this trace's own labels. */
    static const int rf[] = {F_CLASS, F_CLASS_AGE, F_TREE, F_TREE_AGE};
    static const double qs[] = {0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7};
    uint64_t total = pg.off[pg.nreq];
    double *sc[NFEAT] = {NULL}, *sorted = xmalloc(total * sizeof *sorted);
    for (size_t r = 0; r < sizeof rf / sizeof rf[0]; r++)
        sc[rf[r]] = xmalloc(total * sizeof *sc[rf[r]]);
    printf("\nreplayed as classifiers at each capacity's best H (protected: "
           "bin share above the threshold; best protected share of accesses)\n");
    double hit[BOUND_CAPS][NFEAT], share[BOUND_CAPS][NFEAT];
    for (int c = 0; c < ncaps; c++) {
        double a2[NFEAT][3], t2[NFEAT][2];
        feature_aucs(&pg, best_h[c], a2, t2, sc);
        for (size_t r = 0; r < sizeof rf / sizeof rf[0]; r++) {
            int f = rf[r];
            memcpy(sorted, sc[f], total * sizeof *sorted);
            qsort(sorted, total, sizeof *sorted, dbl_cmp);
            hit[c][f] = -1;
            for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
                bound_params bp = {0, 0, sorted[(size_t)((1 - qs[k]) * (double)(total - 1))],
                                   best_h[c], sc[f]};
                double hr = bound_hit(&pg, cp[c], M_CLASS, &bp);
                if (hr > hit[c][f]) {
                    hit[c][f] = hr;
                    share[c][f] = qs[k];
                }
            }
        }
    }
    hdr_caps(caps, ncaps, "                                                                ");
    for (size_t r = 0; r < sizeof rf / sizeof rf[0]; r++) {
        int f = rf[r];
        printf("%-64s", feat_name[f]);
        for (int c = 0; c < ncaps; c++)
            ratio_cols(hit[c][f], lru[c], bel[c]);
        printf("   protected");
        for (int c = 0; c < ncaps; c++)
            printf(" %.3f", share[c][f]);
        printf("\n");
    }
    for (int f = 0; f < NFEAT; f++)
        free(sc[f]);
    free(sorted);
    pages_free(&pg);
}

int main(int argc, char **argv)
{
    const char *trace_arg = NULL, *pols = "lru,priority,learned";
    uint64_t caps[MAX_CAPS] = {1000000, 3000000}, acaps[MAX_CAPS];
    int ncaps = 0, nacaps = 0, quick = 0, explain = 0, bound = 0;
    for (int i = 1; i < argc; i++) {
        uint64_t v;
        if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
            trace_arg = argv[++i];
        } else if (!strcmp(argv[i], "--policies") && i + 1 < argc) {
            pols = argv[++i];
        } else if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--explain")) {
            explain = 1;
        } else if (!strcmp(argv[i], "--bound")) {
            bound = 1;
        } else if (!strcmp(argv[i], "--capacity-tokens") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v) && v >= PAGE &&
                   ncaps < MAX_CAPS) {
            caps[ncaps++] = v;
            i++;
        } else if (!strcmp(argv[i], "--agentic-capacity-tokens") && i + 1 < argc &&
                   rkv_bench_parse_u64(argv[i + 1], &v) && v >= PAGE &&
                   nacaps < MAX_CAPS) {
            acaps[nacaps++] = v;
            i++;
        } else {
            fprintf(stderr, "usage: evict_bench [--trace FILE] [--policies "
                            "a,b,...] [--quick] [--explain] [--bound] "
                            "[--capacity-tokens N]... "
                            "[--agentic-capacity-tokens N]...\n");
            return 2;
        }
    }
    if (ncaps == 0)
        ncaps = 2;
    int pol[MAX_POLICIES], npol = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", pols);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (npol == MAX_POLICIES) {
            fprintf(stderr, "evict_bench: at most %d policies\n", MAX_POLICIES);
            return 2;
        }
        rkv_status st = rkv_evict_policy_from_name(tok, &pol[npol]);
        if (st != RKV_OK) {
            fprintf(stderr, "evict_bench: %s\n", rkv_last_error());
            return 2;
        }
        npol++;
    }

    rkv_workload wl;
    rkv_workload_init(&wl);
    char *path = rkv_bench_find_trace(trace_arg);
    rkv_trace_reader *rd = NULL;
    rkv_status st = path ? rkv_trace_reader_open_path(path, &rd)
                         : rkv_trace_reader_open_embedded(&rd);
    if (st != RKV_OK)
        die("trace", st);
    if ((st = rkv_workload_load_trace(&wl, rd, quick ? 3000 : 0)) != RKV_OK)
        die("trace", st);
    rkv_trace_reader_close(rd);
    char title[512];
    snprintf(title, sizeof title, "conversation trace %s",
             path ? path : "<embedded>");
    free(path);
    if (bound) {
        /* the conversation trace only: the target is set there */
        bound_tables(&wl, caps, ncaps);
        rkv_workload_free(&wl);
        return 0;
    }
    table(title, &wl, caps, ncaps, pol, npol, explain);
    rkv_workload_free(&wl);

    rkv_agentic_config ac;
    rkv_agentic_config_init(&ac);
    if (quick)
        ac.sessions = 16;
    if ((st = rkv_workload_agentic(&wl, &ac, 1)) != RKV_OK)
        die("agentic", st);
    if (nacaps == 0) {
        pages pg;
        pages_build(&pg, &wl);
        acaps[0] = pg.distinct / 4 * PAGE;
        acaps[1] = pg.distinct / 2 * PAGE;
        nacaps = 2;
        pages_free(&pg);
    }
    snprintf(title, sizeof title, "agentic workload (seed 1, %u sessions)",
             ac.sessions);
    table(title, &wl, acaps, nacaps, pol, npol, explain);
    rkv_workload_free(&wl);
    return 0;
}

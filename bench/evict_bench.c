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
 * Usage: evict_bench [--trace FILE] [--policies a,b,...] [--quick] [--explain]
 *                    [--capacity-tokens N]... [--agentic-capacity-tokens N]...
 * Defaults: policies lru,priority,learned; trace capacities 1,000,000 and
 * 3,000,000 tokens; agentic capacities 1/4 and 1/2 of its distinct pages
 * (what an unbounded cache would hold); page 512 everywhere. --quick: the first 3,000
 * requests of the trace and 16 agentic sessions. The trace is found from
 * --trace, $RKV_TRACE, bench/traces/ walking up, else the embedded copy.
 */
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

enum { M_LRU, M_BELADY, M_EVER };

static uint64_t model_key(int mode, uint32_t next, uint64_t clock)
{
    if (mode == M_BELADY)
        return UINT64_MAX - next;
    if (mode == M_EVER)
        return (uint64_t)(next != UINT32_MAX) << 62 | clock;
    return clock;
}

/* Replays the pages with cap_pages of capacity under the order of mode
 * (M_LRU, M_BELADY, M_EVER). Returns hit tokens; by_kind[KINDS] (may be
 * NULL) gets them split by page kind. */
static uint64_t model_run(const pages *pg, uint64_t cap_pages, int mode,
                          uint64_t *by_kind)
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
        const uint32_t *nx = pg->next + pg->off[i];
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
            q->key = model_key(mode, nx[j], clock);
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
            q->key = model_key(mode, nx[j], clock);
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

int main(int argc, char **argv)
{
    const char *trace_arg = NULL, *pols = "lru,priority,learned";
    uint64_t caps[MAX_CAPS] = {1000000, 3000000}, acaps[MAX_CAPS];
    int ncaps = 0, nacaps = 0, quick = 0, explain = 0;
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
                            "a,b,...] [--quick] [--explain] [--capacity-tokens N]... "
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

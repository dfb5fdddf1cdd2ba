/*
 * router/route_search.c -- the walk over a request's chained page hashes
 * that finds every live instance's leading run (router/route_search.h).
 *
 * Per slot group, A(j) = the live slots holding page j (any medium) and
 * D(j) = those holding it on the device. Every instance's cached set is
 * prefix-closed and so is its device residency (router_internal.h), so
 * A(0) >= A(1) >= ... and D likewise: each bit drops out once, and
 * instance i's overlap is the position where its bit leaves A. The search
 * gallops (pages 0, 1, 3, 7, ... until A is empty or the request ends:
 * the positions are known up front, so their misses are all started
 * together, with the first page's), then cuts each interval whose two
 * ends differ into parts, level by level, down to neighbouring pages: a
 * fully cached 800-page prompt costs a few dozen lookups in ~3 dependent
 * rounds, not 800. What bounds a query is the table's misses, and on a
 * large table each dependent round costs a full memory latency while
 * a few dozen independent ones overlap: hence few, wide levels, and one
 * walk per page for all the groups that probe it.
 *
 * Pages held off the device in an instance's leading run (between where
 * its bit leaves D and where it leaves A) are walked one by one to count
 * host and disk pages exactly; with no tiers there are none.
 */
#include <math.h> /* HUGE_VAL (a constant: no libm) */
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "router/route_search.h"

/* Group g's live holders of the page with hash `hash`: a = on any
 * medium, d = on the device (one rkv_index_find per medium). */
static inline rkv_index_probe rkv_index_probe_at(const rkv_router *r, uint32_t g,
                                                 uint64_t live, uint64_t nsmix,
                                                 uint64_t hash)
{
    rkv_index_probe p;
    uint64_t key = rkv_index_key(hash, nsmix, g, RKV_MEDIUM_DEVICE);
    p.d = rkv_index_mask(r, key) & live;
    p.a = p.d;
    if (r->offdev[g] != 0) /* tiers: the other media's entries too */
        p.a |= (rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_HOST)) |
                rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_DISK))) & live;
    return p;
}

/* One page in every group at once. All of a page's entries (every group,
 * every medium) share its home: their keys differ only in the low 7 bits
 * (router_internal.h), so one walk from the home to the end of its
 * cluster meets each entry that rkv_index_find would stop at, where
 * separate finds for several groups each cross the others' entries. */
typedef struct rkv_index_page {
    uint64_t dev[RKV_INDEX_GROUPS]; /* device holders per group          */
    uint64_t off[RKV_INDEX_GROUPS]; /* host or disk holders per group    */
} rkv_index_page;

static void rkv_index_walk(const rkv_router *r, uint64_t nsmix, uint64_t hash,
                           rkv_index_page *pg)
{
    memset(pg, 0, sizeof *pg);
    uint64_t k0 = rkv_index_key(hash, nsmix, 0, RKV_MEDIUM_DEVICE);
    for (uint32_t i = rkv_index_home(r, k0);; i = rkv_index_succ(r, i)) {
        const rkv_index_entry *e = &r->entries[i];
        if (e->mask == 0)
            return;
        if ((e->key ^ k0) >= 128)
            continue; /* another block */
        uint32_t g = rkv_index_group(e), m = rkv_index_medium(e);
        if (g >= RKV_INDEX_GROUPS)
            continue;
        if (m == RKV_MEDIUM_DEVICE)
            pg->dev[g] |= e->mask;
        else if (m == RKV_MEDIUM_HOST || m == RKV_MEDIUM_DISK)
            pg->off[g] |= e->mask;
    }
}

/* Group g's live holders, from a walk. */
static inline rkv_index_probe rkv_index_in(const rkv_router *r, uint32_t g,
                                           const rkv_index_page *pg)
{
    rkv_index_probe p;
    p.d = pg->dev[g] & r->live[g];
    p.a = p.d;
    if (r->offdev[g] != 0)
        p.a |= pg->off[g] & r->live[g];
    return p;
}

/* Starts the misses of the lines a probe of the page for `groups` groups
 * reads: every group's entries of the page share group 0's home, and
 * follow it, so a page that many groups hold fills a few lines (a walk
 * that met them one by one would wait for each in turn). */
static inline void rkv_index_prefetch(const rkv_router *r, uint64_t nsmix,
                                      uint64_t hash, uint32_t groups)
{
    uint32_t home = rkv_index_home(r, rkv_index_key(hash, nsmix, 0, RKV_MEDIUM_DEVICE));
    __builtin_prefetch(&r->entries[home]);
    if (groups <= 1)
        return;
    /* (a table is a multiple of 4 entries: the lines wrap with it) */
    uint64_t cap = r->table_cap, end = (uint64_t)home + groups + 2;
    for (uint64_t i = (home & ~3u) + 4; i < end; i += 4)
        __builtin_prefetch(&r->entries[i < cap ? i : i - cap]);
}

/* Lines read per level, about (a lone group's probe reads one): a
 * level's misses are started together and the machine overlaps a few
 * dozen, so a level costs about one memory latency up to this many and
 * more beyond. */
#define RKV_INDEX_LEVEL_PROBES 24

/* Whether a bit leaves A or D between probes plo and phi. */
static inline int rkv_index_drops(rkv_index_probe plo, rkv_index_probe phi)
{
    return ((plo.a & ~phi.a) | (plo.d & ~phi.d)) != 0;
}

static inline int rkv_index_same(const rkv_index_span *x, const rkv_index_span *y)
{
    return x->lo == y->lo && x->hi == y->hi;
}

/* The length of the run of equal spans starting at list[i]. */
static inline uint32_t rkv_index_run(const rkv_index_span *list, uint32_t n, uint32_t i)
{
    uint32_t e = i + 1;
    while (e < n && rkv_index_same(&list[e], &list[i]))
        e++;
    return e - i;
}

/* The probes a run of `run` equal spans (one per group) gets of the
 * level's share: a page that many groups hold fills about (run + 2) / 4
 * lines more than a lone group's, and past one latency a level costs what
 * its lines cost. */
static inline uint32_t rkv_index_run_share(uint32_t share, uint32_t run)
{
    uint32_t lines = run > 1 ? 1 + (run + 2) / 4 : 1;
    return share / lines ? share / lines : 1;
}

/* The parts a span of width w is cut into, given `share` probes. */
static inline uint32_t rkv_index_parts(int64_t w, uint32_t share)
{
    return w < (int64_t)share + 1 ? (uint32_t)w : share + 1;
}

/* An instance's score with `lead` pages (all on the device): the formula
 * of rkv_index_score, rounded the same way. */
static inline double rkv_index_bound_score(const rkv_index_bound *bd, int64_t lead,
                                           double base)
{
    return bd->pt * (bd->wd * (double)lead) + base;
}

/* bd->lb raised to the scores of group g's bits `bits`, whose leads are
 * at least `lead`: only for one or two bits (the deep holders, where a
 * bound pays; a query's first pages have hundreds, and any lb is
 * valid). */
static inline void rkv_index_raise(const rkv_router *r, rkv_index_bound *bd,
                                   uint32_t g, uint64_t bits, int64_t lead)
{
    uint64_t rest = bits & (bits - 1); /* (no popcount instruction in the base ISA) */
    if (bits == 0 || (rest & (rest - 1)) != 0 ||
        !(rkv_index_bound_score(bd, lead, bd->gmax[g]) > bd->lb))
        return;
    const double *base = r->base + g * 64;
    for (uint64_t b = bits; b; b &= b - 1) {
        double v = rkv_index_bound_score(bd, lead, base[__builtin_ctzll(b)]);
        bd->lb = v > bd->lb ? v : bd->lb;
    }
}

/* Bits leaving between probes was (at page pos - 1 or before) and now
 * (at pos): their lead / dlead is pos when the two are neighbours, else
 * the span is kept for the next level (a level holds at most
 * RKV_INDEX_SPANS: each bit leaves A once and D once along the chain, and
 * a kept span holds a leaving bit; checked all the same, as the list
 * lives in a buffer of that size). */
static inline void rkv_index_found(const rkv_router *r, rkv_index_bound *bd,
                                   rkv_index_span *list, uint32_t *nlist,
                                   uint32_t g, int64_t from, int64_t pos,
                                   rkv_index_probe was, rkv_index_probe now,
                                   uint32_t *lead, uint32_t *dlead)
{
    if (bd != NULL) /* what still holds page pos leads past it */
        rkv_index_raise(r, bd, g, now.a, pos + 1);
    if (!rkv_index_drops(was, now))
        return;
    if (pos - from > 1) {
        if (*nlist < RKV_INDEX_SPANS)
            list[(*nlist)++] = (rkv_index_span){from, pos, was, now, g};
        return;
    }
    uint32_t *gl = lead + g * 64;
    for (uint64_t b = was.a & ~now.a; b; b &= b - 1)
        gl[__builtin_ctzll(b)] = (uint32_t)pos;
    if (r->offdev[g] != 0) {
        uint32_t *gd = dlead + g * 64;
        for (uint64_t b = was.d & ~now.d; b; b &= b - 1)
            gd[__builtin_ctzll(b)] = (uint32_t)pos;
    }
}

/* lead[s] / dlead[s] for every live bit of the groups g with first[g] !=
 * 0: the first page its bit is absent from A / D (n if never); dlead only
 * in groups with pages off the device (elsewhere D is A). The caller has
 * started the galloping pages' misses (rkv_index_gallop_prefetch).
 *
 * Galloping (pages 0, 1, 3, 7, ... until a group has no bit left, then
 * the chain's last page) leaves spans (lo, hi] of pages where some bit
 * drops; each level cuts every span into parts (RKV_INDEX_LEVEL_PROBES
 * shared among the level's distinct spans, fewer where many groups probe
 * a page: rkv_index_run_share), probing their ends, down to neighbouring
 * pages. A level's
 * probes are all started (prefetched) before any is read, so a level costs
 * about one memory latency, and the chain of dependent misses is the
 * number of levels (~log base the parts of the gaps), not bisection's
 * log2 nor that times the groups and the drops searched one after
 * another. The groups' equal spans are kept as neighbours (the galloping
 * takes each page for every group before the next page; a level emits
 * its parts page by page across each run of equal spans), so a page is
 * walked once for all the groups that probe it (rkv_index_walk). Probed
 * masks are clamped between the span's ends, so a stream that breaks the
 * closure still gets a consistent (if not exact) answer (which may then
 * depend on the pages probed, and so differ between a bounded and an
 * unbounded walk). */
static void rkv_index_search(rkv_router *r, rkv_index_bound *bd,
                             const uint64_t *first, uint64_t nsmix,
                             const uint64_t *h, uint32_t n, uint32_t *lead,
                             uint32_t *dlead)
{
    rkv_index_span *cur = r->spans, *next = r->spans + RKV_INDEX_SPANS;
    uint32_t ncur = 0;
    if (n == 0)
        return;
    uint32_t gs[RKV_INDEX_GROUPS], ng = 0;
    rkv_index_probe prev[RKV_INDEX_GROUPS];
    rkv_index_page pg;
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        if (first[g] != 0) {
            gs[ng++] = g;
            prev[g] = (rkv_index_probe){r->live[g], r->live[g]};
        }
    int64_t prev_pos = -1;
    for (uint64_t p = 0;; p = 2 * p + 1) {
        /* the last page probed if the galloping runs past it */
        int64_t at = p < n ? (int64_t)p : (int64_t)n - 1;
        if (ng == 0 || at <= prev_pos)
            break;
        if (ng > 1)
            rkv_index_walk(r, nsmix, h[at], &pg);
        uint32_t still = 0;
        for (uint32_t k = 0; k < ng; k++) {
            uint32_t g = gs[k];
            rkv_index_probe now = ng > 1 ? rkv_index_in(r, g, &pg)
                                         : rkv_index_probe_at(r, g, r->live[g],
                                                              nsmix, h[at]);
            now.a &= prev[g].a;
            now.d &= prev[g].d & now.a;
            rkv_index_found(r, bd, cur, &ncur, g, prev_pos, at, prev[g], now,
                            lead, dlead);
            if (now.a == 0 && now.d == 0)
                continue;
            prev[g] = now;
            gs[still++] = g;
        }
        ng = still;
        prev_pos = at;
    }

    /* what is left at the last page holds every page */
    for (uint32_t k = 0; k < ng; k++) {
        uint32_t g = gs[k];
        for (uint64_t b = prev[g].a; b; b &= b - 1)
            lead[g * 64 + __builtin_ctzll(b)] = n;
        for (uint64_t b = r->offdev[g] ? prev[g].d : 0; b; b &= b - 1)
            dlead[g * 64 + __builtin_ctzll(b)] = n;
    }
    while (ncur > 0) {
        if (bd != NULL) {
            /* spans whose leaving bits cannot reach the best score */
            uint32_t kept = 0;
            for (uint32_t i = 0; i < ncur; i++) {
                const rkv_index_span *x = &cur[i];
                if (rkv_index_bound_score(bd, x->hi, bd->gmax[x->g]) < bd->lb) {
                    for (uint64_t b = x->plo.a & ~x->phi.a; b; b &= b - 1)
                        lead[x->g * 64 + __builtin_ctzll(b)] = (uint32_t)(x->lo + 1);
                    continue;
                }
                cur[kept++] = *x;
            }
            if ((ncur = kept) == 0)
                break;
        }
        /* the probes each span gets: the level's share */
        uint32_t runs = 0;
        for (uint32_t i = 0; i < ncur; i++)
            runs += i == 0 || !rkv_index_same(&cur[i], &cur[i - 1]);
        uint32_t share = runs >= RKV_INDEX_LEVEL_PROBES ? 1 : RKV_INDEX_LEVEL_PROBES / runs;
        /* start every probe of the level, once per run of equal spans */
        for (uint32_t i = 0, e; i < ncur; i = e) {
            e = i + rkv_index_run(cur, ncur, i);
            int64_t lo = cur[i].lo, w = cur[i].hi - lo;
            uint32_t k = rkv_index_parts(w, rkv_index_run_share(share, e - i));
            for (uint32_t t = 1; t < k; t++)
                rkv_index_prefetch(r, nsmix, h[lo + (int64_t)((uint64_t)w * t / k)],
                                   e - i);
        }
        uint32_t nnext = 0;
        for (uint32_t i = 0, e; i < ncur; i = e) {
            /* a run of equal spans (one per group), page by page */
            e = i + rkv_index_run(cur, ncur, i);
            int64_t lo = cur[i].lo, hi = cur[i].hi, w = hi - lo, from = lo;
            uint32_t k = rkv_index_parts(w, rkv_index_run_share(share, e - i));
            uint32_t open = e - i;
            rkv_index_probe was[RKV_INDEX_GROUPS];
            for (uint32_t u = i; u < e; u++)
                was[u - i] = cur[u].plo;
            for (uint32_t t = 1; t <= k && open > 0; t++) {
                int64_t pos = t < k ? lo + (int64_t)((uint64_t)w * t / k) : hi;
                if (t < k && e - i > 1)
                    rkv_index_walk(r, nsmix, h[pos], &pg);
                open = 0;
                for (uint32_t u = i; u < e; u++) {
                    const rkv_index_span *x = &cur[u];
                    rkv_index_probe *v = &was[u - i], now = x->phi;
                    if (v->a == x->phi.a && v->d == x->phi.d)
                        continue; /* nothing else leaves inside */
                    if (t < k) {
                        now = e - i > 1 ? rkv_index_in(r, x->g, &pg)
                                        : rkv_index_probe_at(r, x->g, r->live[x->g],
                                                             nsmix, h[pos]);
                        now.a = (now.a & v->a) | x->phi.a;
                        now.d = ((now.d & v->d) | x->phi.d) & now.a;
                    }
                    rkv_index_found(r, bd, next, &nnext, x->g, from, pos, *v,
                                    now, lead, dlead);
                    *v = now;
                    open += now.a != x->phi.a || now.d != x->phi.d;
                }
                from = pos;
            }
        }
        rkv_index_span *t = cur;
        cur = next;
        next = t;
        ncur = nnext;
    }
}

/* The galloping's pages (rkv_index_search) after the first, for `groups`
 * groups. Their home lines are started with the first page's walk (their
 * misses overlap it); a page's holders are among the first page's
 * (prefix closure), so once that walk has counted the groups holding it,
 * the lines those groups' entries spill into are started too, before the
 * galloping meets them one after another. */
static void rkv_index_gallop_prefetch(const rkv_router *r, uint64_t nsmix,
                                      const uint64_t *h, uint32_t n, uint32_t groups)
{
    for (uint64_t q = 1; q < n; q = 2 * q + 1)
        rkv_index_prefetch(r, nsmix, h[q], groups);
    if (n > 1)
        rkv_index_prefetch(r, nsmix, h[n - 1], groups);
}

void rkv_index_scan_chain(rkv_router *r, rkv_index_bound *bd, uint64_t nsmix,
                          const uint64_t *hashes, uint32_t n, rkv_index_scan *sc)
{
    /* Most groups of a large fleet hold not even the first page: probe it
     * in every group at once (one walk) and search only the groups where
     * someone holds it. The galloping's home lines (one a page for all
     * groups) are started with it. */
    uint64_t first[RKV_INDEX_GROUPS]; /* group's live holders of page 0 */
    uint32_t groups = 0;
    sc->n = n;
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        groups += r->live[g] != 0;
    if (n > 0)
        rkv_index_prefetch(r, nsmix, hashes[0], groups);
    rkv_index_gallop_prefetch(r, nsmix, hashes, n, 1);
    rkv_index_page pg;
    if (groups > 1 && n > 0)
        rkv_index_walk(r, nsmix, hashes[0], &pg);
    uint32_t holding = 0;
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        first[g] = 0;
        if (r->live[g] != 0 && n > 0) {
            rkv_index_probe p0 = groups > 1 ? rkv_index_in(r, g, &pg)
                                            : rkv_index_probe_at(r, g, r->live[g],
                                                                 nsmix, hashes[0]);
            first[g] = p0.a | p0.d;
            holding += first[g] != 0;
        }
    }
    if (holding > 1)
        rkv_index_gallop_prefetch(r, nsmix, hashes, n, holding);
    /* a full group's slots are scored all at once (rkv_index_argmax):
     * there a slot that holds no page reads lead 0 */
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        if (r->inst_mask[g] == ~0ull)
            memset(sc->lead + g * 64, 0, 64 * sizeof *sc->lead);
    rkv_index_search(r, bd, first, nsmix, hashes, n, sc->lead, sc->dlead);
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        sc->offs[g] = 0;
        /* the bits present at page 0 (A only shrinks along the chain) */
        sc->held[g] = first[g];
        if (first[g] == 0) /* n == 0 too: nobody holds a page */
            continue;
        uint32_t *lead = sc->lead, *dlead = sc->dlead;
        int tiers = r->offdev[g] != 0;
        uint32_t from = UINT32_MAX, to = 0;
        for (uint64_t b = tiers ? first[g] : 0; b; b &= b - 1) {
            uint32_t s = g * 64 + (uint32_t)__builtin_ctzll(b);
            if (dlead[s] < lead[s]) {
                sc->offs[g] |= b & -b;
                sc->off[s][0] = sc->off[s][1] = 0;
                from = dlead[s] < from ? dlead[s] : from;
                to = lead[s] > to ? lead[s] : to;
            }
        }
        /* the off-device stretches, page by page (tiers only) */
        for (uint32_t j = from; sc->offs[g] != 0 && j < to; j++) {
            uint64_t key = rkv_index_key(hashes[j], nsmix, g, RKV_MEDIUM_DEVICE);
            uint64_t dev = rkv_index_mask(r, key);
            uint64_t host = rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_HOST));
            uint64_t disk = rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_DISK));
            if ((dev | host | disk) == 0)
                continue;
            for (uint64_t b = sc->offs[g]; b; b &= b - 1) {
                uint32_t bi = (uint32_t)__builtin_ctzll(b), s = g * 64 + bi;
                if (j < dlead[s] || j >= lead[s] || ((dev >> bi) & 1))
                    continue;
                sc->off[s][((host >> bi) & 1) ? 0 : 1]++;
            }
        }
    }
}

/* The largest of 64 values, none of them NaN. */
static double rkv_index_max64(const double *v)
{
#if defined(__SSE2__)
    __m128d mx = _mm_loadu_pd(v), my = _mm_loadu_pd(v + 2);
    for (uint32_t i = 4; i < 64; i += 4) {
        mx = _mm_max_pd(mx, _mm_loadu_pd(v + i));
        my = _mm_max_pd(my, _mm_loadu_pd(v + i + 2));
    }
    mx = _mm_max_pd(mx, my);
    double a = _mm_cvtsd_f64(mx), b = _mm_cvtsd_f64(_mm_unpackhi_pd(mx, mx));
    return a > b ? a : b;
#else
    double m = v[0];
    for (uint32_t i = 1; i < 64; i++)
        m = v[i] > m ? v[i] : m;
    return m;
#endif
}

/* Sets up the bound (rkv_index_bound) for a request of n pages; 0 where
 * it does not apply: pages off the device in some group (their weights
 * differ), scores that could overflow (then a NaN would need choose's rule
 * for it), or fewer than two groups to search (a short search: the bound
 * costs more than it saves). lb starts at the highest base: an instance
 * scores at least its base. */
int rkv_index_bound_init(const rkv_router *r, uint32_t n, rkv_index_bound *bd)
{
    bd->pt = r->cfg.page_tokens;
    bd->wd = r->cfg.medium_weight[RKV_MEDIUM_DEVICE];
    if (n > INT32_MAX || !(rkv_index_bound_score(bd, n, 0) <= 1e308))
        return 0;
    uint32_t live = 0;
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        live += r->live[g] != 0;
    if (live < 2)
        return 0; /* one group's search is short: the bound would cost more */
    int any = 0;
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        if (r->offdev[g] != 0)
            return 0;
        const double *base = r->base + g * 64;
        double m = -HUGE_VAL;
        if (r->inst_mask[g] == ~0ull) {
            m = rkv_index_max64(base);
        } else {
            for (uint64_t b = r->inst_mask[g]; b; b &= b - 1) {
                double v = base[__builtin_ctzll(b)];
                m = v > m ? v : m;
            }
        }
        bd->gmax[g] = m;
        if (r->inst_mask[g] != 0)
            bd->lb = any++ == 0 || m > bd->lb ? m : bd->lb;
    }
    return any;
}

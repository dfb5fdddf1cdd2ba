/*
 * router/route.c -- the router's query: every instance's leading cached
 * pages of a request's chained page hashes, then the score of
 * include/radixkv_router.h picks the instance (rkv_router_choose: the best
 * score, ties by load and then by the seeded generator, or a softmax draw
 * with a temperature), which counts the request on the instance it picks
 * until that instance's next load report. The generator's state advances
 * only when a choice succeeds, so a failed call changes nothing.
 *
 * Per slot group, A(j) = the live slots holding page j (any medium) and
 * D(j) = those holding it on the device. Every instance's cached set is
 * prefix-closed and so is its device residency (router_internal.h), so
 * A(0) >= A(1) >= ... and D likewise: each bit drops out once, and
 * instance i's overlap is the position where its bit leaves A. The search
 * gallops (pages 0, 1, 3, 7, ... until A is empty or the request ends: the
 * positions are known up front, so their misses are all started at once)
 * and then bisects each interval whose two ends differ, down to spans of
 * 16 pages that are scanned (their lookups issued at once): a fully
 * cached 800-page prompt costs ~2 log2(800) lookups, not 800. All groups'
 * intervals are bisected together, level by level. Probed masks are
 * clamped between the interval's ends, so a stream that breaks the
 * closure still gets a consistent (if not exact) answer, never a crash.
 *
 * rkv_router_overlaps writes a record per instance; rkv_router_route_top
 * (and rkv_router_route) make rkv_router_choose's choice from the walk
 * and the per-slot load terms without one, and write records only for
 * what they return.
 *
 * Pages held off the device in an instance's leading run (between where
 * its bit leaves D and where it leaves A) are walked one by one to count
 * host and disk pages exactly; with no tiers there are none.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "router/router_internal.h"

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

static inline void rkv_index_prefetch(const rkv_router *r, uint32_t g,
                                   uint64_t nsmix, uint64_t hash)
{
    __builtin_prefetch(&r->entries[rkv_index_home(
        r, rkv_index_key(hash, nsmix, g, RKV_MEDIUM_DEVICE))]);
}

/* spans of at most this many pages are scanned, not bisected */
#define RKV_INDEX_SCAN 16

/* Appends the span if a bit leaves A or D inside it. Each bit leaves A
 * once and D once along the chain, so a level holds at most
 * 2 x 64 spans per group (RKV_INDEX_SPANS). */
static inline void rkv_index_keep(rkv_index_span *list, uint32_t *n, uint32_t g,
                                  int64_t lo, int64_t hi, rkv_index_probe plo,
                                  rkv_index_probe phi)
{
    /* (the bound is never reached; checked all the same, as the list
     * lives in a buffer of that size) */
    if (((plo.a & ~phi.a) | (plo.d & ~phi.d)) && *n < RKV_INDEX_SPANS)
        list[(*n)++] = (rkv_index_span){lo, hi, plo, phi, g};
}

/* lead[s] / dlead[s] for every live bit of the groups g with first[g] !=
 * 0: the first page its bit is absent from A / D (n if never); dlead only
 * in groups with pages off the device (elsewhere D is A).
 *
 * Breadth first over all those groups at once: a level's probes are all
 * started (prefetched) before any is read, so a level costs about one
 * memory latency whatever the number of spans and groups, and the chain
 * of dependent misses is the bisection depth (~log2 pages), not that
 * depth times the groups and the drops searched one after another. The
 * groups' entries of a page share its home (the group is in the key's
 * low bits), so one group's probe brings in the line the others read. */
static void rkv_index_search(rkv_router *r, const uint64_t *first, uint64_t nsmix,
                             const uint64_t *h, uint32_t n, uint32_t *lead,
                             uint32_t *dlead)
{
    rkv_index_span *cur = r->spans, *next = r->spans + RKV_INDEX_SPANS;
    uint32_t ncur = 0;
    if (n == 0)
        return;
    for (uint64_t q = 0; q < n; q = 2 * q + 1)
        rkv_index_prefetch(r, 0, nsmix, h[q]);
    rkv_index_prefetch(r, 0, nsmix, h[n - 1]);
    /* galloping, group by group: pages 0, 1, 3, 7, ... until no bit is
     * left or the chain ends (then its last page) */
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        if (first[g] == 0)
            continue;
        uint64_t live = r->live[g];
        uint32_t *gl = lead + g * 64, *gd = r->offdev[g] ? dlead + g * 64 : NULL;
        rkv_index_probe prev = {live, live};
        int64_t prev_pos = -1;
        for (uint64_t p = 0;;) {
            if (p >= n) {
                /* ran off the end: what is left holds every page */
                for (uint64_t b = prev.a; b; b &= b - 1)
                    gl[__builtin_ctzll(b)] = n;
                for (uint64_t b = gd ? prev.d : 0; b; b &= b - 1)
                    gd[__builtin_ctzll(b)] = n;
                if (prev_pos < (int64_t)n - 1 && (prev.a || prev.d)) {
                    /* (prev_pos, n - 1] still needs its drops found */
                    rkv_index_probe last = rkv_index_probe_at(r, g, live, nsmix, h[n - 1]);
                    last.a &= prev.a;
                    last.d &= prev.d & last.a;
                    for (uint64_t b = last.a; b; b &= b - 1)
                        gl[__builtin_ctzll(b)] = n;
                    for (uint64_t b = gd ? last.d : 0; b; b &= b - 1)
                        gd[__builtin_ctzll(b)] = n;
                    rkv_index_keep(cur, &ncur, g, prev_pos, (int64_t)n - 1, prev, last);
                }
                break;
            }
            rkv_index_probe now = rkv_index_probe_at(r, g, live, nsmix, h[p]);
            now.a &= prev.a;
            now.d &= prev.d & now.a;
            rkv_index_keep(cur, &ncur, g, prev_pos, (int64_t)p, prev, now);
            if (now.a == 0 && now.d == 0)
                break;
            prev = now;
            prev_pos = (int64_t)p;
            p = 2 * p + 1;
            if (p >= n && prev_pos < (int64_t)n - 1)
                p = n; /* handled above: probe n - 1 */
        }
    }
    while (ncur > 0) {
        /* start every probe of the level */
        for (uint32_t i = 0; i < ncur; i++) {
            const rkv_index_span *x = &cur[i];
            if (x->hi - x->lo <= RKV_INDEX_SCAN) {
                for (int64_t j = x->lo + 1; j < x->hi; j++)
                    rkv_index_prefetch(r, x->g, nsmix, h[j]);
            } else {
                rkv_index_prefetch(r, x->g, nsmix, h[x->lo + (x->hi - x->lo) / 2]);
            }
        }
        uint32_t nnext = 0;
        for (uint32_t i = 0; i < ncur; i++) {
            rkv_index_span x = cur[i];
            uint64_t live = r->live[x.g];
            uint32_t *gl = lead + x.g * 64;
            uint32_t *gd = r->offdev[x.g] ? dlead + x.g * 64 : NULL;
            if (x.hi - x.lo <= RKV_INDEX_SCAN) {
                /* short: scanned (its probes were started together) */
                rkv_index_probe was = x.plo;
                for (int64_t j = x.lo + 1; j <= x.hi; j++) {
                    rkv_index_probe now = x.phi;
                    if (j < x.hi) {
                        now = rkv_index_probe_at(r, x.g, live, nsmix, h[j]);
                        now.a = (now.a & was.a) | x.phi.a;
                        now.d = ((now.d & was.d) | x.phi.d) & now.a;
                    }
                    for (uint64_t b = was.a & ~now.a; b; b &= b - 1)
                        gl[__builtin_ctzll(b)] = (uint32_t)j;
                    for (uint64_t b = gd ? was.d & ~now.d : 0; b; b &= b - 1)
                        gd[__builtin_ctzll(b)] = (uint32_t)j;
                    was = now;
                    if (was.a == x.phi.a && was.d == x.phi.d)
                        break; /* nothing else leaves inside */
                }
                continue;
            }
            int64_t mid = x.lo + (x.hi - x.lo) / 2;
            rkv_index_probe pm = rkv_index_probe_at(r, x.g, live, nsmix, h[mid]);
            /* clamp between the ends: a broken closure stays consistent */
            pm.a = (pm.a & x.plo.a) | x.phi.a;
            pm.d = ((pm.d & x.plo.d) | x.phi.d) & pm.a;
            rkv_index_keep(next, &nnext, x.g, x.lo, mid, x.plo, pm);
            rkv_index_keep(next, &nnext, x.g, mid, x.hi, pm, x.phi);
        }
        rkv_index_span *t = cur;
        cur = next;
        next = t;
        ncur = nnext;
    }
}

/* What one walk over a request's chain finds, per slot. held[g]: group
 * g's live slots with at least its first page (lead[s] is set for those
 * only; dlead[s] only in groups with pages off the device); offs[g]:
 * those of them with pages off the device in their leading run (off[s]
 * counted). */
typedef struct rkv_index_scan {
    uint64_t held[RKV_INDEX_GROUPS];
    uint64_t offs[RKV_INDEX_GROUPS];
    uint32_t lead[RKV_INDEX_SLOTS], dlead[RKV_INDEX_SLOTS];
    uint32_t off[RKV_INDEX_SLOTS][2]; /* host, disk pages in the leading run */
} rkv_index_scan;

static void rkv_index_scan_chain(rkv_router *r, uint64_t nsmix,
                                 const uint64_t *hashes, uint32_t n,
                                 rkv_index_scan *sc)
{
    /* Most groups of a large fleet hold not even the first page: probe it
     * in every group at once (the misses overlap) and search only the
     * groups where someone holds it, instead of starting each group's
     * galloping prefetches (a dozen lines) for nothing. */
    uint64_t first[RKV_INDEX_GROUPS]; /* group's live holders of page 0 */
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
        if (r->live[g] != 0 && n > 0)
            rkv_index_prefetch(r, g, nsmix, hashes[0]);
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        first[g] = 0;
        if (r->live[g] != 0 && n > 0) {
            rkv_index_probe p0 = rkv_index_probe_at(r, g, r->live[g], nsmix,
                                                    hashes[0]);
            first[g] = p0.a | p0.d;
        }
    }
    rkv_index_search(r, first, nsmix, hashes, n, sc->lead, sc->dlead);
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

/* Instance slot s's leading pages per medium; the total. */
static uint32_t rkv_index_pages(const rkv_index_scan *sc, uint32_t s,
                                uint32_t pbm[RKV_MEDIUM_COUNT])
{
    uint32_t g = s / 64, b = s % 64, pages = 0;
    memset(pbm, 0, RKV_MEDIUM_COUNT * sizeof *pbm);
    if ((sc->held[g] >> b) & 1) {
        pages = sc->lead[s];
        if ((sc->offs[g] >> b) & 1) {
            pbm[RKV_MEDIUM_HOST] = sc->off[s][0];
            pbm[RKV_MEDIUM_DISK] = sc->off[s][1];
        }
        pbm[RKV_MEDIUM_DEVICE] = pages - pbm[RKV_MEDIUM_HOST] - pbm[RKV_MEDIUM_DISK];
    }
    return pages;
}

/* Instance slot s's record. */
static void rkv_index_record(const rkv_router *r, const rkv_index_scan *sc,
                             uint32_t s, rkv_router_overlap *o)
{
    const rkv_index_slot *in = &r->inst[s];
    memset(o, 0, sizeof *o);
    o->instance = in->id;
    o->needs_resync = in->needs_resync;
    o->pages = rkv_index_pages(sc, s, o->pages_by_medium);
    o->score = rkv_index_score(&r->cfg, r->base[s], o->pages_by_medium);
}

/* The common opening of the calls that walk a chain. */
static rkv_status rkv_index_query_args(const rkv_router *r, const void *hashes,
                                       uint32_t n, const void *out,
                                       uint32_t cap, const uint32_t *n_out,
                                       uint32_t need, const char *fn)
{
    if (r == NULL || out == NULL || n_out == NULL || (hashes == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (cap < need)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: room for %u, %u "
                             "instances", fn, cap, need);
    return RKV_OK;
}

rkv_status rkv_router_overlaps(rkv_router *router, rkv_namespace ns,
                               const uint64_t *hashes, uint32_t n,
                               rkv_router_overlap *out, uint32_t cap,
                               uint32_t *n_out)
{
    static const char fn[] = "rkv_router_overlaps";
    if (n_out != NULL)
        *n_out = 0;
    rkv_status st = rkv_index_query_args(router, hashes, n, out, cap, n_out,
                                         router ? router->num_instances : 0, fn);
    if (st != RKV_OK)
        return st;
    rkv_router *r = router;
    rkv_index_scan sc;
    rkv_index_scan_chain(r, rkv_index_nsmix(ns), hashes, n, &sc);
    for (uint32_t k = 0; k < r->num_instances; k++)
        rkv_index_record(r, &sc, r->order[k], &out[k]);
    r->st.queries++;
    *n_out = r->num_instances;
    return RKV_OK;
}

/* ---- choosing ----------------------------------------------------------------- */

static uint64_t rkv_index_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A uniform draw in [0, 1). */
static double rkv_index_unit(uint64_t *state)
{
    return (double)(rkv_index_next(state) >> 11) * 0x1.0p-53;
}

/* exp(y) for y in [-745, 0] to ~1e-15 relative (the library links no
 * libm): y = k ln2 + r with |r| <= ln2 / 2, a Taylor series for e^r, and
 * 2^k put into the exponent by halving steps that stay normal. */
static double rkv_index_exp_neg(double y)
{
    if (!(y > -745.0))
        return 0.0;
    double k = (double)(long)(y / 0.6931471805599453 - 0.5);
    double r = y - k * 0.6931471805599453;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i < 24; i++) {
        term *= r / i;
        sum += term;
    }
    for (long j = (long)k; j < 0; j++)
        sum *= 0.5;
    return sum;
}

/* The tie rule among the candidates of the highest score, fed one by one
 * in id order: the least queued tokens (reported plus routed), then the
 * fewest running requests (an instance not registered, in = NULL, ranks
 * last), then one of the equals at random (reservoir: the k-th equal
 * takes the place with chance 1/k). Returns 1 when the candidate takes
 * the place. */
typedef struct rkv_index_ties {
    uint64_t q, u, count;
} rkv_index_ties;

static int rkv_index_tie(rkv_index_ties *t, const rkv_index_slot *in, uint64_t *rng)
{
    uint64_t q = UINT64_MAX, u = UINT64_MAX;
    if (in != NULL) {
        q = in->queued_tokens + in->routed_tokens;
        q = q < in->queued_tokens ? UINT64_MAX : q;
        u = (uint64_t)in->running + in->routed_running;
    }
    if (t->count == 0 || q < t->q || (q == t->q && u < t->u)) {
        t->q = q;
        t->u = u;
        t->count = 1;
        return 1;
    }
    return q == t->q && u == t->u && rkv_index_next(rng) % ++t->count == 0;
}

/* Counts a request of request_pages pages, `pages` of them cached there,
 * as routed to instance slot s until its next load report. */
static void rkv_index_routed(rkv_router *r, uint32_t s, uint32_t request_pages,
                             uint32_t pages)
{
    rkv_index_slot *in = &r->inst[s];
    uint32_t fresh = request_pages > pages ? request_pages - pages : 0;
    double t = (double)fresh * r->cfg.page_tokens;
    uint64_t add = t >= 1.8e19 ? UINT64_MAX : (uint64_t)t;
    in->routed_tokens = in->routed_tokens > UINT64_MAX - add
                            ? UINT64_MAX : in->routed_tokens + add;
    if (in->routed_running < UINT32_MAX)
        in->routed_running++;
    rkv_index_load_terms(r, s);
}

rkv_status rkv_router_choose(rkv_router *router, const rkv_router_overlap *cand,
                             uint32_t n, uint32_t request_pages, uint32_t *pick)
{
    static const char fn[] = "rkv_router_choose";
    if (router == NULL || (cand == NULL && n > 0) || pick == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (n == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: no candidate", fn);
    rkv_router *r = router;
    uint64_t rng = r->rng; /* committed only on success */
    double hi = cand[0].score, lo = cand[0].score;
    for (uint32_t i = 1; i < n; i++) {
        hi = cand[i].score > hi ? cand[i].score : hi;
        lo = cand[i].score < lo ? cand[i].score : lo;
    }
    uint32_t best = 0;
    if (r->cfg.temperature > 0 && hi > lo) {
        /* softmax over the scores normalised to [0, 1] */
        double scale = (hi - lo) * r->cfg.temperature, sum = 0;
        for (uint32_t i = 0; i < n; i++)
            sum += rkv_index_exp_neg((cand[i].score - hi) / scale);
        double u = rkv_index_unit(&rng) * sum, acc = 0;
        int found = 0;
        for (uint32_t i = 0; i < n && !found; i++) {
            double w = rkv_index_exp_neg((cand[i].score - hi) / scale);
            if (w > 0)
                best = i; /* rounding may leave u past the sum: the last */
            acc += w;
            found = u < acc && w > 0;
        }
    } else {
        /* the highest score, then the tie rule */
        rkv_index_ties t = {0, 0, 0};
        uint32_t at = 0; /* cursor in order[]: candidates usually come in id order */
        for (uint32_t i = 0; i < n; i++) {
            if (!(cand[i].score >= hi))
                continue; /* below the best (or NaN) */
            uint64_t id = cand[i].instance;
            while (at < r->num_instances && r->inst[r->order[at]].id < id)
                at++;
            uint32_t s = at < r->num_instances && r->inst[r->order[at]].id == id
                             ? r->order[at] : rkv_index_slot_of(r, id);
            if (rkv_index_tie(&t, s == RKV_INDEX_EMPTY ? NULL : &r->inst[s], &rng))
                best = i;
        }
    }
    uint32_t s = rkv_index_slot_of(r, cand[best].instance);
    if (s == RKV_INDEX_EMPTY || r->inst[s].role != RKV_INDEX_INSTANCE)
        return rkv_set_error(RKV_ERR_NOT_FOUND, "%s: instance %llu is not "
                             "registered", fn,
                             (unsigned long long)cand[best].instance);
    rkv_index_routed(r, s, request_pages, cand[best].pages);
    r->rng = rng;
    *pick = best;
    return RKV_OK;
}

/* ---- routing without a record per instance ------------------------------------- */

/* rkv_router_choose's argmax over every registered instance, from the
 * scan: a holder scores its pages, any other instance its base[] (the same
 * formula with no page), so only holders cost more than a compare. The
 * ties are then fed to the tie rule in id order, as choose sees them.
 * Returns the chosen slot; *rng advances as choose's would. */
static uint32_t rkv_index_argmax(const rkv_router *r, const rkv_index_scan *sc,
                                 uint64_t *rng)
{
    uint32_t tie[RKV_INDEX_SLOTS], nt = 0, pbm[RKV_MEDIUM_COUNT];
    /* choose starts from the first candidate's score: a NaN there makes
     * it the answer (nothing compares above NaN) */
    uint32_t first = r->order[0];
    rkv_index_pages(sc, first, pbm);
    double hi = rkv_index_score(&r->cfg, r->base[first], pbm);
    if (hi != hi)
        return first;
    const double pt = r->cfg.page_tokens, wd = r->cfg.medium_weight[RKV_MEDIUM_DEVICE];
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        const double *base = r->base + g * 64;
        const uint32_t *lead = sc->lead + g * 64;
        /* holders with every leading page on the device: rkv_index_score
         * is pt * (wd * pages) + base there (the other media add +0) */
        for (uint64_t b = sc->held[g] & ~sc->offs[g]; b; b &= b - 1) {
            uint32_t i = (uint32_t)__builtin_ctzll(b);
            double v = pt * (wd * (double)lead[i]) + base[i];
            if (v > hi) {
                hi = v;
                nt = 0;
            }
            if (v == hi)
                tie[nt++] = g * 64 + i;
        }
        for (uint64_t b = sc->offs[g]; b; b &= b - 1) {
            uint32_t s = g * 64 + (uint32_t)__builtin_ctzll(b);
            rkv_index_pages(sc, s, pbm);
            double v = rkv_index_score(&r->cfg, r->base[s], pbm);
            if (v > hi) {
                hi = v;
                nt = 0;
            }
            if (v == hi)
                tie[nt++] = s;
        }
        for (uint64_t b = r->inst_mask[g] & ~sc->held[g]; b; b &= b - 1) {
            uint32_t i = (uint32_t)__builtin_ctzll(b);
            double v = base[i];
            if (v > hi) {
                hi = v;
                nt = 0;
            }
            if (v == hi)
                tie[nt++] = g * 64 + i;
        }
    }
    if (nt == 1)
        return tie[0];
    /* id order: a few by insertion, many by one pass over order[] */
    if (nt <= 32) {
        for (uint32_t i = 1; i < nt; i++) {
            uint32_t x = tie[i], j = i;
            for (; j > 0 && r->inst[tie[j - 1]].id > r->inst[x].id; j--)
                tie[j] = tie[j - 1];
            tie[j] = x;
        }
    } else {
        uint64_t is[RKV_INDEX_GROUPS] = {0};
        for (uint32_t i = 0; i < nt; i++)
            is[tie[i] / 64] |= 1ull << (tie[i] % 64);
        nt = 0;
        for (uint32_t k = 0; k < r->num_instances; k++) {
            uint32_t s = r->order[k];
            if ((is[s / 64] >> (s % 64)) & 1)
                tie[nt++] = s;
        }
    }
    rkv_index_ties t = {0, 0, 0};
    uint32_t best = tie[0];
    for (uint32_t i = 0; i < nt; i++)
        if (rkv_index_tie(&t, &r->inst[tie[i]], rng))
            best = tie[i];
    return best;
}

/* The chosen slot c and the k others with the most leading pages (ties:
 * the smaller id) into sel[0..*m), in id order. */
static void rkv_index_top(const rkv_router *r, const rkv_index_scan *sc,
                          uint32_t c, uint32_t k, uint32_t *sel, uint32_t *m)
{
    uint32_t nsel = 0;
    if (k > 0) {
        /* the best holders so far, sorted (most pages, then smaller id);
         * most holders fail the first compare with the last place */
        uint32_t pages[RKV_ROUTER_MAX_INSTANCES];
        uint64_t ids[RKV_ROUTER_MAX_INSTANCES];
        for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++)
            for (uint64_t b = sc->held[g]; b; b &= b - 1) {
                uint32_t s = g * 64 + (uint32_t)__builtin_ctzll(b);
                uint32_t p = sc->lead[s];
                if (nsel == k && p < pages[k - 1])
                    continue;
                uint64_t id = r->inst[s].id;
                if (s == c || (nsel == k && p == pages[k - 1] && id > ids[k - 1]))
                    continue;
                uint32_t j = nsel < k ? nsel++ : k - 1;
                for (; j > 0 && (pages[j - 1] < p ||
                                 (pages[j - 1] == p && ids[j - 1] > id));
                     j--) {
                    sel[j] = sel[j - 1];
                    pages[j] = pages[j - 1];
                    ids[j] = ids[j - 1];
                }
                sel[j] = s;
                pages[j] = p;
                ids[j] = id;
            }
        /* then instances with no page, smallest ids first */
        for (uint32_t i = 0; i < r->num_instances && nsel < k; i++) {
            uint32_t s = r->order[i];
            if (s != c && !((sc->held[s / 64] >> (s % 64)) & 1))
                sel[nsel++] = s;
        }
    }
    sel[nsel++] = c;
    for (uint32_t i = 1; i < nsel; i++) {
        uint32_t x = sel[i], j = i;
        for (; j > 0 && r->inst[sel[j - 1]].id > r->inst[x].id; j--)
            sel[j] = sel[j - 1];
        sel[j] = x;
    }
    *m = nsel;
}

rkv_status rkv_router_route_top(rkv_router *router, rkv_namespace ns,
                                const uint64_t *hashes, uint32_t n,
                                rkv_router_overlap *top, uint32_t cap,
                                uint32_t *n_top, uint32_t *pick)
{
    static const char fn[] = "rkv_router_route_top";
    if (n_top != NULL)
        *n_top = 0;
    rkv_status st = rkv_index_query_args(router, hashes, n, top, cap, n_top, 1, fn);
    if (st != RKV_OK)
        return st;
    if (pick == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    rkv_router *r = router;
    if (r->num_instances == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: no instance registered", fn);
    rkv_index_scan sc;
    rkv_index_scan_chain(r, rkv_index_nsmix(ns), hashes, n, &sc);
    r->st.queries++;
    uint32_t c, sel[RKV_ROUTER_MAX_INSTANCES], m = 0;
    uint32_t k = (cap < r->num_instances ? cap : r->num_instances) - 1;
    if (r->cfg.temperature > 0) {
        /* the softmax draw weighs every instance: choose over them all */
        rkv_router_overlap *all = malloc(r->num_instances * sizeof *all);
        if (all == NULL)
            return rkv_set_error(RKV_ERR_NOMEM, "%s: %u candidates", fn,
                                 r->num_instances);
        for (uint32_t i = 0; i < r->num_instances; i++)
            rkv_index_record(r, &sc, r->order[i], &all[i]);
        uint32_t best = 0;
        st = rkv_router_choose(r, all, r->num_instances, n, &best);
        if (st == RKV_OK) {
            /* all[] is in id order, its scores from before the choice */
            c = r->order[best];
            rkv_index_top(r, &sc, c, k, sel, &m);
            for (uint32_t i = 0, j = 0; i < m; i++) {
                while (all[j].instance != r->inst[sel[i]].id)
                    j++;
                top[i] = all[j];
                if (sel[i] == c)
                    *pick = i;
            }
        }
        free(all);
        if (st != RKV_OK)
            return st;
    } else {
        uint64_t rng = r->rng;
        c = rkv_index_argmax(r, &sc, &rng);
        rkv_index_top(r, &sc, c, k, sel, &m);
        uint32_t pages = 0;
        for (uint32_t i = 0; i < m; i++) {
            rkv_index_record(r, &sc, sel[i], &top[i]);
            if (sel[i] == c) {
                *pick = i;
                pages = top[i].pages;
            }
        }
        /* after the records: they show the load the choice saw */
        rkv_index_routed(r, c, n, pages);
        r->rng = rng;
    }
    *n_top = m;
    return RKV_OK;
}

rkv_status rkv_router_route(rkv_router *router, rkv_namespace ns,
                            const uint64_t *hashes, uint32_t n,
                            rkv_router_overlap *out)
{
    uint32_t m = 0, pick = 0;
    return rkv_router_route_top(router, ns, hashes, n, out, 1, &m, &pick);
}

/* ---- by token ids ----------------------------------------------------------- */

/* The request's full pages' chained hashes into r->qhash (grown as needed;
 * nothing else changes on failure). */
static rkv_status rkv_index_hash_tokens(rkv_router *r, rkv_namespace ns,
                                     const int32_t *tokens, uint32_t n_tokens,
                                     uint32_t page_size, uint32_t *pages,
                                     const char *fn)
{
    if (tokens == NULL && n_tokens > 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tokens", fn);
    if (page_size < 1 || page_size > RKV_MAX_PAGE_SIZE)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: page size %u (1..%u)",
                             fn, page_size, RKV_MAX_PAGE_SIZE);
    uint32_t np = n_tokens / page_size;
    if (np > r->qhash_cap) {
        uint32_t cap = r->qhash_cap ? r->qhash_cap : 256;
        while (cap < np)
            cap = cap > UINT32_MAX / 2 ? np : cap * 2;
        uint64_t *q = realloc(r->qhash, (size_t)cap * sizeof *q);
        if (q == NULL)
            return rkv_set_error(RKV_ERR_NOMEM, "%s: %u page hashes", fn, np);
        r->qhash = q;
        r->qhash_cap = cap;
    }
    uint64_t prev = RKV_HASH_ROOT;
    for (uint32_t p = 0; p < np; p++)
        r->qhash[p] = prev = rkv_block_hash(prev, ns,
                                            tokens + (size_t)p * page_size,
                                            page_size);
    *pages = np;
    return RKV_OK;
}

rkv_status rkv_router_overlaps_tokens(rkv_router *router, rkv_namespace ns,
                                      const int32_t *tokens, uint32_t n_tokens,
                                      uint32_t page_size,
                                      rkv_router_overlap *out, uint32_t cap,
                                      uint32_t *n_out)
{
    static const char fn[] = "rkv_router_overlaps_tokens";
    if (n_out != NULL)
        *n_out = 0;
    rkv_status st = rkv_index_query_args(router, tokens, 0, out, cap, n_out,
                                         router ? router->num_instances : 0, fn);
    uint32_t np = 0;
    if (st == RKV_OK)
        st = rkv_index_hash_tokens(router, ns, tokens, n_tokens, page_size, &np, fn);
    if (st != RKV_OK)
        return st;
    return rkv_router_overlaps(router, ns, router->qhash, np, out, cap, n_out);
}

rkv_status rkv_router_route_top_tokens(rkv_router *router, rkv_namespace ns,
                                       const int32_t *tokens, uint32_t n_tokens,
                                       uint32_t page_size, rkv_router_overlap *top,
                                       uint32_t cap, uint32_t *n_top, uint32_t *pick)
{
    static const char fn[] = "rkv_router_route_top_tokens";
    if (n_top != NULL)
        *n_top = 0;
    rkv_status st = rkv_index_query_args(router, tokens, 0, top, cap, n_top, 1, fn);
    if (st == RKV_OK && pick == NULL)
        st = rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (st == RKV_OK && router->num_instances == 0)
        st = rkv_set_error(RKV_ERR_STATE, "%s: no instance registered", fn);
    uint32_t np = 0;
    if (st == RKV_OK)
        st = rkv_index_hash_tokens(router, ns, tokens, n_tokens, page_size, &np, fn);
    if (st != RKV_OK)
        return st;
    return rkv_router_route_top(router, ns, router->qhash, np, top, cap, n_top, pick);
}

rkv_status rkv_router_route_tokens(rkv_router *router, rkv_namespace ns,
                                   const int32_t *tokens, uint32_t n_tokens,
                                   uint32_t page_size, rkv_router_overlap *out)
{
    uint32_t m = 0, pick = 0;
    return rkv_router_route_top_tokens(router, ns, tokens, n_tokens, page_size,
                                       out, 1, &m, &pick);
}

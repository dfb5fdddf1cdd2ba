/*
 * router/route.c -- the router's query: every instance's leading cached
 * pages of a request's chained page hashes, then the score of
 * include/radixkv_router.h picks the instance (rkv_router_choose: the best
 * score, ties by load and then by the seeded generator, or a softmax draw
 * with a temperature), which counts the request on the instance it picks
 * until that instance's next load report. The generator's state advances
 * only when a choice succeeds, so a failed call changes nothing.
 *
 * The walk over the chain (each instance's leading run) is
 * router/route_search.c.
 *
 * rkv_router_overlaps writes a record per instance; rkv_router_route_top
 * (and rkv_router_route) make rkv_router_choose's choice from the walk
 * and the per-slot load terms without one, and write records only for
 * what they return.
 *
 * rkv_router_route (room for one, greedy, no tiers) lets the walk skip
 * the spans whose instances cannot reach the best score
 * (rkv_index_bound): their leads are left low, below the best, which
 * changes no score that the choice or the records it returns read.
 */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/status.h"
#include "router/route_search.h"

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
    rkv_index_scan_chain(r, NULL, rkv_index_nsmix(ns), hashes, n, &sc);
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

/* v[i] = pt * (wd * lead[i]) + base[i] for a group's 64 slots (each
 * operation rounded as rkv_index_score rounds it: no fused multiply-add)
 * and their maximum (no v is NaN: the caller checks). */
static void rkv_index_group_scores(double pt, double wd, const uint32_t *lead,
                                   const double *base, double *v, double *gmax)
{
#if defined(__SSE2__)
    __m128d vpt = _mm_set1_pd(pt), vwd = _mm_set1_pd(wd);
    __m128d mx = _mm_loadu_pd(base), my = mx; /* v[i] >= base[i] */
    for (uint32_t i = 0; i < 64; i += 4) {
        __m128d x = _mm_cvtepi32_pd(_mm_loadl_epi64((const __m128i *)(lead + i)));
        __m128d y = _mm_cvtepi32_pd(_mm_loadl_epi64((const __m128i *)(lead + i + 2)));
        x = _mm_add_pd(_mm_mul_pd(vpt, _mm_mul_pd(vwd, x)), _mm_loadu_pd(base + i));
        y = _mm_add_pd(_mm_mul_pd(vpt, _mm_mul_pd(vwd, y)), _mm_loadu_pd(base + i + 2));
        _mm_storeu_pd(v + i, x);
        _mm_storeu_pd(v + i + 2, y);
        mx = _mm_max_pd(mx, x);
        my = _mm_max_pd(my, y);
    }
    mx = _mm_max_pd(mx, my);
    double a = _mm_cvtsd_f64(mx), b = _mm_cvtsd_f64(_mm_unpackhi_pd(mx, mx));
    *gmax = a > b ? a : b;
#else
    double m = base[0];
    for (uint32_t i = 0; i < 64; i++) {
        v[i] = pt * (wd * (double)(int32_t)lead[i]) + base[i];
        m = v[i] > m ? v[i] : m;
    }
    *gmax = m;
#endif
}

/* The bits of the v[i] equal to x. */
static uint64_t rkv_index_equal64(const double *v, double x)
{
    uint64_t m = 0;
#if defined(__SSE2__)
    __m128d vx = _mm_set1_pd(x);
    for (uint32_t i = 0; i < 64; i += 2)
        m |= (uint64_t)_mm_movemask_pd(_mm_cmpeq_pd(_mm_loadu_pd(v + i), vx)) << i;
#else
    for (uint32_t i = 0; i < 64; i++)
        m |= (uint64_t)(v[i] == x) << i;
#endif
    return m;
}

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
    /* the whole-group path needs leads that fit an int32 and scores that
     * cannot be NaN: pt * (wd * n) finite (the weights are >= 0, so every
     * lead's term is too, and a base is never NaN, at worst -inf) */
    int whole = sc->n <= INT32_MAX && pt * (wd * (double)sc->n) <= 1e308;
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        const double *base = r->base + g * 64;
        const uint32_t *lead = sc->lead + g * 64;
        if (whole && r->inst_mask[g] == ~0ull && sc->offs[g] == 0) {
            /* every slot an instance, every leading page on the device:
             * one score per slot, the same formula (a non-holder's lead
             * is 0, and pt * (wd * 0) + base is base), then the slots
             * equal to the best */
            double v[64], gmax;
            rkv_index_group_scores(pt, wd, lead, base, v, &gmax);
            if (gmax > hi) {
                hi = gmax;
                nt = 0;
            }
            if (gmax == hi)
                for (uint64_t b = rkv_index_equal64(v, hi); b; b &= b - 1)
                    tie[nt++] = g * 64 + (uint32_t)__builtin_ctzll(b);
            continue;
        }
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
    uint32_t c, sel[RKV_ROUTER_MAX_INSTANCES], m = 0;
    uint32_t k = (cap < r->num_instances ? cap : r->num_instances) - 1;
    rkv_index_bound bd;
    int bound = k == 0 && !(r->cfg.temperature > 0) && rkv_index_bound_init(r, n, &bd);
    rkv_index_scan_chain(r, bound ? &bd : NULL, rkv_index_nsmix(ns), hashes, n, &sc);
    r->st.queries++;
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

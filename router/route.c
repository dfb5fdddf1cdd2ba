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
 * cached 800-page prompt costs ~2 log2(800) lookups, not 800. Probed masks are
 * clamped between the interval's ends, so a stream that breaks the
 * closure still gets a consistent (if not exact) answer, never a crash.
 *
 * Pages held off the device in an instance's leading run (between where
 * its bit leaves D and where it leaves A) are walked one by one to count
 * host and disk pages exactly; with no tiers there are none.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "router/router_internal.h"

typedef struct rkv_index_probe {
    uint64_t a, d; /* holders on any medium / on the device, live only */
} rkv_index_probe;

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

typedef struct rkv_index_span {
    int64_t lo, hi;         /* positions; lo = -1: before page 0 */
    rkv_index_probe plo, phi;
} rkv_index_span;

/* lead[b] / dlead[b] for every bit b of `live` in group g: the first page
 * its bit is absent from A / D (n if never). */
static void rkv_index_search(const rkv_router *r, uint32_t g, uint64_t live,
                          uint64_t nsmix, const uint64_t *h, uint32_t n,
                          uint32_t *lead, uint32_t *dlead)
{
    /* 2 spans per galloping step, then bisection depth <= 33 */
    rkv_index_span stack[160];
    uint32_t top = 0;
    uint64_t p = 0;
    for (uint64_t q = 0; q < n; q = 2 * q + 1)
        rkv_index_prefetch(r, g, nsmix, h[q]);
    if (n > 0)
        rkv_index_prefetch(r, g, nsmix, h[n - 1]);
    rkv_index_probe prev = {live, live};
    int64_t prev_pos = -1;
    for (;;) {
        if (p >= n) {
            /* ran off the end: what is left holds every page */
            for (uint64_t b = prev.a; b; b &= b - 1)
                lead[__builtin_ctzll(b)] = n;
            for (uint64_t b = prev.d; b; b &= b - 1)
                dlead[__builtin_ctzll(b)] = n;
            if (prev_pos < (int64_t)n - 1 && (prev.a || prev.d)) {
                /* the span (prev_pos, n - 1] still needs its drops found:
                 * probe the last page and split there */
                rkv_index_probe last = rkv_index_probe_at(r, g, live, nsmix, h[n - 1]);
                last.a &= prev.a;
                last.d &= prev.d & last.a;
                for (uint64_t b = last.a; b; b &= b - 1)
                    lead[__builtin_ctzll(b)] = n;
                for (uint64_t b = last.d; b; b &= b - 1)
                    dlead[__builtin_ctzll(b)] = n;
                stack[top++] = (rkv_index_span){prev_pos, (int64_t)n - 1, prev, last};
            }
            break;
        }
        rkv_index_probe cur = rkv_index_probe_at(r, g, live, nsmix, h[p]);
        cur.a &= prev.a;
        cur.d &= prev.d & cur.a;
        stack[top++] = (rkv_index_span){prev_pos, (int64_t)p, prev, cur};
        if (cur.a == 0 && cur.d == 0)
            break;
        prev = cur;
        prev_pos = (int64_t)p;
        p = 2 * p + 1;
        if (p >= n && prev_pos < (int64_t)n - 1)
            p = n; /* handled above: probe n - 1 */
    }
    while (top > 0) {
        rkv_index_span s = stack[--top];
        uint64_t da = s.plo.a & ~s.phi.a, dd = s.plo.d & ~s.phi.d;
        if (da == 0 && dd == 0)
            continue; /* nothing leaves inside */
        if (s.hi - s.lo <= RKV_INDEX_SCAN) {
            /* short: its probes all at once beat dependent bisection steps
             * (several bits drop inside when many instances differ) */
            for (int64_t j = s.lo + 1; j < s.hi; j++)
                rkv_index_prefetch(r, g, nsmix, h[j]);
            rkv_index_probe was = s.plo;
            for (int64_t j = s.lo + 1; j <= s.hi; j++) {
                rkv_index_probe cur = s.phi;
                if (j < s.hi) {
                    cur = rkv_index_probe_at(r, g, live, nsmix, h[j]);
                    cur.a = (cur.a & was.a) | s.phi.a;
                    cur.d = ((cur.d & was.d) | s.phi.d) & cur.a;
                }
                for (uint64_t b = was.a & ~cur.a; b; b &= b - 1)
                    lead[__builtin_ctzll(b)] = (uint32_t)j;
                for (uint64_t b = was.d & ~cur.d; b; b &= b - 1)
                    dlead[__builtin_ctzll(b)] = (uint32_t)j;
                was = cur;
                if (was.a == s.phi.a && was.d == s.phi.d)
                    break; /* nothing else leaves inside */
            }
            continue;
        }
        int64_t mid = s.lo + (s.hi - s.lo) / 2;
        /* the next level probes one of the two halves' middles */
        int64_t m1 = s.lo + (mid - s.lo) / 2, m2 = mid + (s.hi - mid) / 2;
        if (m1 > s.lo)
            rkv_index_prefetch(r, g, nsmix, h[m1]);
        if (m2 > mid)
            rkv_index_prefetch(r, g, nsmix, h[m2]);
        rkv_index_probe pm = rkv_index_probe_at(r, g, live, nsmix, h[mid]);
        /* clamp between the ends: a broken closure stays consistent */
        pm.a = (pm.a & s.plo.a) | s.phi.a;
        pm.d = ((pm.d & s.plo.d) | s.phi.d) & pm.a;
        stack[top++] = (rkv_index_span){mid, s.hi, pm, s.phi};
        stack[top++] = (rkv_index_span){s.lo, mid, s.plo, pm};
    }
}

rkv_status rkv_router_overlaps(rkv_router *router, rkv_namespace ns,
                               const uint64_t *hashes, uint32_t n,
                               rkv_router_overlap *out, uint32_t cap,
                               uint32_t *n_out)
{
    static const char fn[] = "rkv_router_overlaps";
    if (n_out != NULL)
        *n_out = 0;
    if (router == NULL || out == NULL || n_out == NULL ||
        (hashes == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    rkv_router *r = router;
    if (cap < r->num_instances)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: room for %u, %u "
                             "instances", fn, cap, r->num_instances);
    uint32_t lead[RKV_INDEX_SLOTS], dlead[RKV_INDEX_SLOTS];
    uint32_t off[RKV_INDEX_SLOTS][2]; /* host, disk pages in the leading run */
    uint64_t offs[RKV_INDEX_GROUPS];  /* slots with pages off the device     */
    uint64_t nsmix = rkv_index_nsmix(ns);
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
    for (uint32_t g = 0; g < RKV_INDEX_GROUPS; g++) {
        uint64_t live = r->live[g];
        offs[g] = 0;
        if (live == 0)
            continue;
        if (n > 0 && first[g] == 0) { /* every bit leaves A and D at page 0 */
            for (uint64_t b = live; b; b &= b - 1) {
                uint32_t s = g * 64 + (uint32_t)__builtin_ctzll(b);
                lead[s] = dlead[s] = 0;
            }
            continue;
        }
        rkv_index_search(r, g, live, nsmix, hashes, n, lead + g * 64,
                      dlead + g * 64);
        uint32_t from = UINT32_MAX, to = 0;
        for (uint64_t b = live; b; b &= b - 1) {
            uint32_t s = g * 64 + (uint32_t)__builtin_ctzll(b);
            if (dlead[s] < lead[s]) {
                offs[g] |= b & -b;
                off[s][0] = off[s][1] = 0;
                from = dlead[s] < from ? dlead[s] : from;
                to = lead[s] > to ? lead[s] : to;
            }
        }
        /* the off-device stretches, page by page (tiers only) */
        for (uint32_t j = from; offs[g] != 0 && j < to; j++) {
            uint64_t key = rkv_index_key(hashes[j], nsmix, g, RKV_MEDIUM_DEVICE);
            uint64_t dev = rkv_index_mask(r, key);
            uint64_t host = rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_HOST));
            uint64_t disk = rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_DISK));
            if ((dev | host | disk) == 0)
                continue;
            for (uint64_t b = offs[g]; b; b &= b - 1) {
                uint32_t bi = (uint32_t)__builtin_ctzll(b), s = g * 64 + bi;
                if (j < dlead[s] || j >= lead[s] || ((dev >> bi) & 1))
                    continue;
                off[s][((host >> bi) & 1) ? 0 : 1]++;
            }
        }
    }
    const rkv_router_config *c = &r->cfg;
    for (uint32_t k = 0; k < r->num_instances; k++) {
        uint32_t s = r->order[k];
        const rkv_index_slot *in = &r->inst[s];
        rkv_router_overlap *o = &out[k];
        memset(o, 0, sizeof *o);
        o->instance = in->id;
        o->needs_resync = in->needs_resync;
        if ((r->live[s / 64] >> (s % 64)) & 1) {
            o->pages = lead[s];
            if ((offs[s / 64] >> (s % 64)) & 1) {
                o->pages_by_medium[RKV_MEDIUM_HOST] = off[s][0];
                o->pages_by_medium[RKV_MEDIUM_DISK] = off[s][1];
            }
            o->pages_by_medium[RKV_MEDIUM_DEVICE] =
                o->pages - o->pages_by_medium[RKV_MEDIUM_HOST] -
                o->pages_by_medium[RKV_MEDIUM_DISK];
        }
        double w = 0;
        for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
            w += c->medium_weight[m] * (double)o->pages_by_medium[m];
        o->score = c->page_tokens * w - in->load_q - in->load_r;
    }
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

/* Load of an instance slot for the tie rule: reported plus routed. */
static uint64_t rkv_index_queued(const rkv_index_slot *in)
{
    uint64_t q = in->queued_tokens + in->routed_tokens;
    return q < in->queued_tokens ? UINT64_MAX : q;
}
static uint64_t rkv_index_running(const rkv_index_slot *in)
{
    return (uint64_t)in->running + in->routed_running;
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
        /* the highest score; among equals the least loaded (an instance
         * not registered ranks last), then one of those at random
         * (reservoir: the k-th equal takes the place with chance 1/k) */
        uint64_t bq = 0, br = 0, ties = 0;
        uint32_t at = 0; /* cursor in order[]: candidates usually come in id order */
        for (uint32_t i = 0; i < n; i++) {
            if (!(cand[i].score >= hi))
                continue; /* below the best (or NaN) */
            uint64_t id = cand[i].instance;
            while (at < r->num_instances && r->inst[r->order[at]].id < id)
                at++;
            uint32_t s = at < r->num_instances && r->inst[r->order[at]].id == id
                             ? r->order[at] : rkv_index_slot_of(r, id);
            uint64_t q = s == RKV_INDEX_EMPTY ? UINT64_MAX : rkv_index_queued(&r->inst[s]);
            uint64_t u = s == RKV_INDEX_EMPTY ? UINT64_MAX : rkv_index_running(&r->inst[s]);
            if (ties == 0 || q < bq || (q == bq && u < br)) {
                best = i;
                bq = q;
                br = u;
                ties = 1;
            } else if (q == bq && u == br && rkv_index_next(&rng) % ++ties == 0) {
                best = i;
            }
        }
    }
    uint32_t s = rkv_index_slot_of(r, cand[best].instance);
    if (s == RKV_INDEX_EMPTY || r->inst[s].role != RKV_INDEX_INSTANCE)
        return rkv_set_error(RKV_ERR_NOT_FOUND, "%s: instance %llu is not "
                             "registered", fn,
                             (unsigned long long)cand[best].instance);
    rkv_index_slot *in = &r->inst[s];
    uint32_t fresh = request_pages > cand[best].pages
                         ? request_pages - cand[best].pages : 0;
    double t = (double)fresh * r->cfg.page_tokens;
    uint64_t add = t >= 1.8e19 ? UINT64_MAX : (uint64_t)t;
    in->routed_tokens = in->routed_tokens > UINT64_MAX - add
                            ? UINT64_MAX : in->routed_tokens + add;
    if (in->routed_running < UINT32_MAX)
        in->routed_running++;
    rkv_index_load_terms(r, in);
    r->rng = rng;
    *pick = best;
    return RKV_OK;
}

/* What both route calls need before any work: their pointers, and an
 * instance to pick. */
static rkv_status route_ready(const rkv_router *router, const rkv_router_overlap *out,
                              const char *fn)
{
    if (router == NULL || out == NULL)
        return rkv_null_arg(fn, router, "router", "out");
    if (router->num_instances == 0)
        return rkv_set_error(RKV_ERR_STATE, "%s: no instance registered", fn);
    return RKV_OK;
}

rkv_status rkv_router_route(rkv_router *router, rkv_namespace ns,
                            const uint64_t *hashes, uint32_t n,
                            rkv_router_overlap *out)
{
    static const char fn[] = "rkv_router_route";
    rkv_status st = route_ready(router, out, fn);
    if (st != RKV_OK)
        return st;
    rkv_router_overlap all[RKV_ROUTER_MAX_INSTANCES];
    uint32_t k = 0, best = 0;
    st = rkv_router_overlaps(router, ns, hashes, n, all,
                                        RKV_ROUTER_MAX_INSTANCES, &k);
    if (st == RKV_OK)
        st = rkv_router_choose(router, all, k, n, &best);
    if (st != RKV_OK)
        return st;
    *out = all[best];
    return RKV_OK;
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
    if (router == NULL || out == NULL || n_out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", fn);
    if (cap < router->num_instances)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: room for %u, %u "
                             "instances", fn, cap, router->num_instances);
    uint32_t np = 0;
    rkv_status st = rkv_index_hash_tokens(router, ns, tokens, n_tokens, page_size,
                                       &np, fn);
    if (st != RKV_OK)
        return st;
    return rkv_router_overlaps(router, ns, router->qhash, np, out, cap, n_out);
}

rkv_status rkv_router_route_tokens(rkv_router *router, rkv_namespace ns,
                                   const int32_t *tokens, uint32_t n_tokens,
                                   uint32_t page_size, rkv_router_overlap *out)
{
    static const char fn[] = "rkv_router_route_tokens";
    rkv_status st = route_ready(router, out, fn);
    if (st != RKV_OK)
        return st;
    uint32_t np = 0;
    st = rkv_index_hash_tokens(router, ns, tokens, n_tokens, page_size, &np, fn);
    if (st != RKV_OK)
        return st;
    return rkv_router_route(router, ns, router->qhash, np, out);
}

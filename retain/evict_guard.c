/*
 * retain/evict_guard.c -- keeps RKV_EVICT_LEARNED from losing to LRU.
 *
 * Why: an order that predicts reuse from one workload's structure can be
 * wrong on another (the learned classes, fitted on a conversation trace,
 * lost 0.7-4.7 points to LRU on a synthetic trace), and a user cannot pick
 * a policy that may lose to the default. Whether it loses is only known
 * online, by comparing with what LRU would have done on the same requests.
 *
 * Shadow: a page-level LRU of chained page hashes (the pool's hash of a
 * block; rkv_block_hash), as large as the device pool. It sees exactly
 * what the tree sees: a non-peek match counts the longest prefix of the
 * query's pages it holds (hashed forward from RKV_HASH_ROOT until the
 * first page it lacks) and makes them most recent, deepest first so that
 * a path's first page is evicted last -- the tree's leaf LRU evicts a
 * path from its tail, and a page's ancestors are used whenever it is;
 * an insert makes its whole path most recent (adding pages it lacks),
 * then the shadow is cut, least recent first, to the pages the tree
 * holds (cached), so the shadow is LRU at the tree's own size. So the
 * shadow's hits are what LRU would have hit, measured on the same matches
 * as the tree's (tests/test_evict_guard.c checks it against a real LRU
 * tree in file order). Each shadow page also knows whether the device
 * still holds it: eviction sets `gone` (rkv_guard_on_evicted: the
 * policy's own victim, or LRU's), an insert or a device hit clears it.
 *
 * Rule: a bound on what the policy can still lose, checked at every
 * eviction, instead of a verdict on the past. Let deficit = LRU hits -
 * tree hits so far (pages; negative when the policy leads) and missing =
 * shadow pages the device lacks. Every page the tree can still lose
 * against LRU is a missing one (a query that hits in the shadow and misses
 * in the tree misses on missing pages, which its insert puts back), so
 * were eviction LRU from now on, the tree would end at most deficit +
 * missing pages below LRU (LRU's victims are the tree's oldest pages,
 * which the shadow drops with them). Pages the policy dropped while LRU
 * held them are not all lost: most are dropped by LRU too before any use
 * (on the conversation trace over 99 %). So they count at RKV_GUARD_MARGIN
 * times the rate at which such pages were lost so far (decaying counts;
 * all of them until there is evidence): the policy's victim goes when
 * deficit + missing (so weighted, with the victim's pages that the shadow
 * holds) stays within queried / 2048 + 4 pages (0.05 point of everything
 * queried so far); else LRU's victim goes instead (fallbacks). A victim
 * the shadow no longer holds (a page the policy kept longer than LRU)
 * costs nothing. So the policy diverges from LRU by what its lead and the
 * pages LRU itself dropped since pay for, and a loss can only come from a
 * loss rate that jumps past the margin -- the earlier rule (fall back once
 * behind) lost 0.43 point where a burst of losses arrived faster than it
 * could react. Second, a lead is kept, not spent: when it falls from its
 * peak by a quarter plus the budget, every victim is LRU's for 4 pools'
 * worth of queried pages (doubling with each such hold, up to 32).
 * Third, the policy waits 8 pools' worth of queries before it diverges
 * at all, and never diverges when the shadow did not hit what the tree
 * hit while the tree was still LRU (within 0.4 %), or when the pages LRU
 * holds and the tree lacks for LRU's own victims pass 1/8 of the pool:
 * then the shadow does not model this tree's LRU. That is the scheduler's
 * order, where pages locked by running requests stay (LRU cannot evict
 * them) while the shadow ages them, and where a divergence early in a
 * closed loop changes every later arrival (up to 1 point either way).
 * Fourth, a loss repeated by the same query with no insert between (a
 * scheduler retrying an admission) counts once, as the hit rate counts a
 * request. Measured worst case over 368 cases of generated workloads
 * (both orders): 0.14 point below LRU (tests/test_evict_guard.c,
 * bench/RESULTS.md).
 *
 * Cost: one hash per matched page (and one more), O(path) lookups per
 * insert, O(pages) per evicted leaf and per policy victim, O(1) each;
 * memory 17 B per pool block for pages and 8 B for the table (two slots
 * per block) and 2 KiB of query signatures, allocated at creation.
 * Removal from the linear-probing table shifts entries back (no
 * tombstones).
 */
#include "retain/evict_guard.h"

#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/tree_core.h"

#define RKV_GUARD_NIL UINT32_MAX
#define RKV_GUARD_RATIO 2048u   /* budget: queried / this ...            */
#define RKV_GUARD_SLACK 4u      /* ... + this many pages                 */
#define RKV_GUARD_RECENT 256u   /* query signatures remembered          */
#define RKV_GUARD_PRIOR 8u      /* outcomes assumed lost before any seen */
#define RKV_GUARD_MARGIN 6u     /* pages dropped by the policy count at
                                   this many times their measured loss rate */
#define RKV_GUARD_WARM 8u       /* pools' worth of queries before a try */
#define RKV_GONE_LRU 1u         /* gone: LRU would have dropped it too   */
#define RKV_GONE_POLICY 2u      /* gone: the policy's choice, LRU held it */

static uint64_t rkv_guard_mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
    return x ^ (x >> 31);
}

static uint32_t rkv_guard_home(const rkv_guard *g, uint64_t h)
{
    return (uint32_t)((h * UINT64_C(0x9E3779B97F4A7C15)) >> 32) &
           (g->slots_cap - 1);
}

rkv_status rkv_guard_init(rkv_tree *t)
{
    uint32_t cap = t->pool->cfg.num_blocks;
    uint32_t slots = 16;
    while (slots < 2 * (uint64_t)cap)
        slots <<= 1;
    rkv_guard *g = rkv_node_mem_alloc(&t->mem, sizeof *g);
    rkv_gpage *p = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *p);
    uint32_t *s = rkv_node_mem_alloc(&t->mem, (size_t)slots * sizeof *s);
    uint8_t *gone = rkv_node_mem_alloc(&t->mem, (size_t)cap + 1);
    if (g == NULL || (p == NULL && cap > 0) || s == NULL || gone == NULL) {
        rkv_node_mem_free(&t->mem, g, sizeof *g);
        rkv_node_mem_free(&t->mem, p, (size_t)cap * sizeof *p);
        rkv_node_mem_free(&t->mem, s, (size_t)slots * sizeof *s);
        rkv_node_mem_free(&t->mem, gone, (size_t)cap + 1);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_create: eviction "
                                            "guard tables");
    }
    memset(g, 0, sizeof *g);
    g->pages = p;
    g->slot = s;
    g->gone = gone;
    g->cap = cap;
    g->slots_cap = slots;
    t->order.guard = g;
    rkv_guard_clear(t);

    return RKV_OK;
}

void rkv_tree_debug_guard_off(rkv_tree *t)
{
    if (t != NULL && t->order.guard != NULL) {
        t->order.guard->off = 1;
    }
}

void rkv_guard_fini(rkv_tree *t)
{
    rkv_guard *g = t->order.guard;
    if (g == NULL)
        return;
    rkv_node_mem_free(&t->mem, g->pages, (size_t)g->cap * sizeof *g->pages);
    rkv_node_mem_free(&t->mem, g->slot, (size_t)g->slots_cap * sizeof *g->slot);
    rkv_node_mem_free(&t->mem, g->gone, (size_t)g->cap + 1);
    rkv_node_mem_free(&t->mem, g, sizeof *g);
    t->order.guard = NULL;
}

void rkv_guard_clear(rkv_tree *t)
{
    rkv_guard *g = t->order.guard;
    for (uint32_t i = 0; i < g->slots_cap; i++)
        g->slot[i] = RKV_GUARD_NIL;
    for (uint32_t i = 0; i < g->cap; i++)
        g->pages[i] = (rkv_gpage){0, RKV_GUARD_NIL,
                                  i + 1 < g->cap ? i + 1 : RKV_GUARD_NIL};
    memset(g->gone, 0, (size_t)g->cap + 1);
    g->missing = g->missing_div = 0;
    g->marking = RKV_GONE_LRU;
    g->free_head = g->cap > 0 ? 0 : RKV_GUARD_NIL;
    g->size = 0;
    g->head = g->tail = g->anchor = RKV_GUARD_NIL;
}

static uint32_t rkv_guard_find(const rkv_guard *g, uint64_t h)
{
    for (uint32_t s = rkv_guard_home(g, h);; s = (s + 1) & (g->slots_cap - 1)) {
        uint32_t i = g->slot[s];
        if (i == RKV_GUARD_NIL || g->pages[i].hash == h)
            return i;
    }
}

static void rkv_guard_unlink(rkv_guard *g, uint32_t i)
{
    rkv_gpage *x = &g->pages[i];
    if (x->prev != RKV_GUARD_NIL)
        g->pages[x->prev].next = x->next;
    else
        g->head = x->next;
    if (x->next != RKV_GUARD_NIL)
        g->pages[x->next].prev = x->prev;
    else
        g->tail = x->prev;
    x->prev = x->next = RKV_GUARD_NIL;
}

/* Links i between p and n (either may be NIL: then i becomes head or tail). */
static void rkv_guard_link(rkv_guard *g, uint32_t i, uint32_t p, uint32_t n)
{
    rkv_gpage *x = &g->pages[i];
    x->prev = p;
    x->next = n;
    *(p != RKV_GUARD_NIL ? &g->pages[p].next : &g->head) = i;
    *(n != RKV_GUARD_NIL ? &g->pages[n].prev : &g->tail) = i;
}

static void rkv_guard_push_tail(rkv_guard *g, uint32_t i)
{
    rkv_guard_link(g, i, g->tail, RKV_GUARD_NIL);
}

/* Puts i right before `before` (a listed entry): one step less recent. */
static void rkv_guard_insert_before(rkv_guard *g, uint32_t before, uint32_t i)
{
    rkv_guard_link(g, i, g->pages[before].prev, before);
}

/* The device holds listed page i (again). */
static void rkv_guard_present(rkv_guard *g, uint32_t i)
{
    if (g->gone[i] == RKV_GONE_POLICY)
        g->missing_div--;
    if (g->gone[i] != 0)
        g->missing--;
    g->gone[i] = 0;
}

/* What became of a page the policy dropped and LRU held: lost (the shadow
 * hit it first) or not (the shadow dropped it first). Counts decay so the
 * rate follows the workload. */
static void rkv_guard_outcome(rkv_guard *g, int lost)
{
    g->conv += (uint64_t)lost;
    g->waste += (uint64_t)!lost;
    if (g->conv + g->waste > 8 * (uint64_t)g->cap + 64) {
        g->conv /= 2;
        g->waste /= 2;
    }
}

/* Drops the least recently used page (table: backward-shift deletion). */
static void rkv_guard_drop_head(rkv_guard *g)
{
    uint32_t i = g->head;
    uint32_t m = g->slots_cap - 1;
    uint32_t s = rkv_guard_home(g, g->pages[i].hash);
    while (g->slot[s] != i)
        s = (s + 1) & m;
    for (uint32_t n = (s + 1) & m; g->slot[n] != RKV_GUARD_NIL; n = (n + 1) & m) {
        uint32_t home = rkv_guard_home(g, g->pages[g->slot[n]].hash);
        /* the entry at n may move to s iff s lies on its probe path */
        if (((n - home) & m) >= ((n - s) & m)) {
            g->slot[s] = g->slot[n];
            s = n;
        }
    }
    g->slot[s] = RKV_GUARD_NIL;
    rkv_guard_unlink(g, i);
    if (g->anchor == i)
        g->anchor = RKV_GUARD_NIL;
    if (g->gone[i] == RKV_GONE_POLICY)
        rkv_guard_outcome(g, 0); /* LRU drops it unused: no loss */
    rkv_guard_present(g, i);
    g->pages[i].hash = 0;
    g->pages[i].next = g->free_head;
    g->free_head = i;
    g->size--;
}


/* Most recent page h, added when absent (dropping the least recent one
 * when full). */
static void rkv_guard_use(rkv_guard *g, uint64_t h)
{
    uint32_t i = rkv_guard_find(g, h);
    if (i != RKV_GUARD_NIL) {
        rkv_guard_present(g, i);
        rkv_guard_unlink(g, i);
        rkv_guard_push_tail(g, i);
        return;
    }
    if (g->size == g->cap)
        rkv_guard_drop_head(g);
    i = g->free_head;
    g->free_head = g->pages[i].next;
    g->pages[i].hash = h;
    uint32_t m = g->slots_cap - 1, s = rkv_guard_home(g, h);
    while (g->slot[s] != RKV_GUARD_NIL)
        s = (s + 1) & m;
    g->slot[s] = i;
    g->size++;
    rkv_guard_push_tail(g, i);
}

/* The soft rule: a lead the policy built is kept, not spent. */
static void rkv_guard_keep_lead(rkv_guard *g)
{
    int64_t lead = (int64_t)g->real_hit_pages - (int64_t)g->lru_hit_pages;
    uint64_t w = (uint64_t)g->cap; /* a pool's worth of queried pages */
    /* LRU's victims while held: the lead stays */
    if (!g->hold) {
        if (lead > g->peak_lead)
            g->peak_lead = lead;
        int64_t budget = (int64_t)(g->queried_pages / RKV_GUARD_RATIO +
                                   RKV_GUARD_SLACK);
        if (g->peak_lead - lead > budget + g->peak_lead / 4) {
            g->hold = 1;
            g->trips++;
            g->q_trip = g->queried_pages;
        }
    } else if (g->queried_pages - g->q_trip >=
               (2 * w) << (g->trips < 4 ? g->trips : 4)) {
        g->hold = 0; /* try the policy again, less often each time */
        g->peak_lead = lead;
    }
}

void rkv_guard_on_match(rkv_tree *t, uint64_t ns, const int32_t *tokens,
                        uint32_t npages, uint32_t real_pages)
{
    rkv_guard *g = t->order.guard;
    uint64_t h = RKV_HASH_ROOT;
    uint32_t hits = 0;
    /* a request's evictions follow its match, the ended sessions' leaves
     * first (before any hook): a choice against LRU like the policy's,
     * whose loss rate is measured with it */
    g->marking = RKV_GONE_POLICY;
    g->anchor = RKV_GUARD_NIL;
    for (uint32_t i = 0; i < npages; i++) {
        h = rkv_block_hash(h, ns, tokens + (size_t)i * t->P, t->P);
        uint32_t e = rkv_guard_find(g, h);
        if (e == RKV_GUARD_NIL)
            break;
        if (i < real_pages) /* the device hit it: it holds it */
            rkv_guard_present(g, e);
        else if (g->gone[e] == RKV_GONE_POLICY)
            rkv_guard_outcome(g, 1);
        /* deeper pages go just before the shallower one: least recent */
        rkv_guard_unlink(g, e);
        if (g->anchor == RKV_GUARD_NIL)
            rkv_guard_push_tail(g, e);
        else
            rkv_guard_insert_before(g, g->anchor, e);
        g->anchor = e;
        hits++;
    }
    g->anchor = RKV_GUARD_NIL;
    if (npages == 0)
        return;
    /* A loss repeated by the same query (a scheduler retrying an
     * admission that found no room matches the same prompt every step,
     * with no insert between) counts once: the hit rate counts a request
     * once. After an insert of the prompt a repeat hits in both caches, so
     * in file order nothing is skipped. Its signature: the chain hash
     * where the shadow stopped, the counts, the prompt's last token. */
    if (hits > real_pages) {
        uint64_t sig = rkv_guard_mix(h ^ ((uint64_t)npages << 40) ^
                                     ((uint64_t)real_pages << 20) ^ hits ^
                                     ((uint64_t)(uint32_t)
                                          tokens[(size_t)npages * t->P - 1]
                                      << 8));
        uint64_t *seen = &g->recent[sig & (RKV_GUARD_RECENT - 1)];
        if (*seen == sig)
            return;
        *seen = sig;
    }
    g->queried_pages += npages;
    g->real_hit_pages += real_pages;
    g->lru_hit_pages += hits;
    if (g->queried_pages < RKV_GUARD_WARM * (uint64_t)g->cap) {
        /* warm-up: the tree evicts as LRU does, so the shadow must hit
         * what it hits; when it does not, it does not model this tree's
         * LRU (pages locked by running requests), and the policy never
         * runs */
        uint64_t d = g->lru_hit_pages > g->real_hit_pages
                         ? g->lru_hit_pages - g->real_hit_pages
                         : g->real_hit_pages - g->lru_hit_pages;
        g->unfaithful |= d > g->queried_pages / 256 + 4 * RKV_GUARD_SLACK;
    }
    rkv_guard_keep_lead(g);
}

/* The device no longer holds page h (when listed). */
static void rkv_guard_mark_gone(rkv_guard *g, uint64_t h)
{
    uint32_t i = rkv_guard_find(g, h);
    if (i != RKV_GUARD_NIL && !g->gone[i]) {
        g->gone[i] = g->marking;
        g->missing++;
        g->missing_div += g->marking == RKV_GONE_POLICY;
    }
}

void rkv_guard_on_evicted(rkv_tree *t, const uint64_t *hashes, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        rkv_guard_mark_gone(t->order.guard, hashes[k]);
}

/* Whether the policy may drop risk more pages that LRU holds: the loss
 * expected if eviction were LRU from now on stays within the budget. */
static int rkv_guard_fits(const rkv_guard *g, uint64_t risk)
{
    uint64_t budget = g->queried_pages / RKV_GUARD_RATIO + RKV_GUARD_SLACK;
    /* pages the policy dropped count at RKV_GUARD_MARGIN times the rate
     * at which such pages were lost so far (all until there is evidence) */
    uint64_t div = g->missing_div + risk;
    uint64_t n = g->conv + g->waste + RKV_GUARD_PRIOR;
    uint64_t exp = RKV_GUARD_MARGIN * (g->conv + RKV_GUARD_PRIOR) >= n
                       ? div
                       : (div * RKV_GUARD_MARGIN * (g->conv + RKV_GUARD_PRIOR) +
                          n - 1) / n;
    /* the shadow must first show it models the tree: a few pools' worth
     * of queries, and few pages missing that LRU's own victims explain */
    if (g->queried_pages < RKV_GUARD_WARM * (uint64_t)g->cap ||
        8 * (g->missing - g->missing_div) > g->cap || g->unfaithful)
        return 0;
    return g->lru_hit_pages + (g->missing - g->missing_div) + exp <=
           g->real_hit_pages + budget;
}

uint32_t rkv_guard_victim(const rkv_tree *t, uint32_t policy, uint32_t lru,
                          uint32_t need)
{
    rkv_guard *g = t->order.guard;
    uint32_t v = policy;
    if (policy != lru && lru != RKV_NIL && !g->off && g->hold) {
        v = lru;
    } else if (policy != lru && lru != RKV_NIL && !g->off) {
        /* what taking the policy's victim adds to missing: the pages the
         * shadow still holds among those it would lose (the tail's need
         * pages; all of them with tiers) */
        const rkv_tnode *x = &t->nodes[policy];
        const rkv_block_id *xb = rkv_tnode_blocks(t, x);
        uint32_t from = t->hooks.evict_node == NULL && need < x->num_pages
                            ? x->num_pages - need : 0;
        uint64_t risk = 0;
        for (uint32_t i = from; i < x->num_pages; i++) {
            uint32_t e = rkv_guard_find(g, t->pool->hash[xb[i]]);
            risk += e != RKV_GUARD_NIL && !g->gone[e];
        }
        if (!rkv_guard_fits(g, risk))
            v = lru;
    }
    g->marking = v != lru ? RKV_GONE_POLICY : RKV_GONE_LRU;
    g->fallback = v != policy;
    g->fallbacks += (uint64_t)g->fallback;
    if (t->hooks.evict_node != NULL && v != RKV_NIL) {
        /* tiers: the victim leaves the device whole */
        const rkv_tnode *x = &t->nodes[v];
        const rkv_block_id *xb = rkv_tnode_blocks(t, x);
        for (uint32_t i = 0; i < x->num_pages; i++)
            rkv_guard_mark_gone(g, t->pool->hash[xb[i]]);
    }
    return v;
}

void rkv_guard_on_insert(rkv_tree *t, uint32_t node)
{
    rkv_guard *g = t->order.guard;
    const uint64_t *hash = t->pool->hash;
    if (g->cap == 0)
        return;
    /* deepest first, so the path's first page ends most recent */
    for (uint32_t y = node; y != 0 && t->nodes[y].parent != 0;
         y = t->nodes[y].parent) {
        const rkv_tnode *x = &t->nodes[y];
        const rkv_block_id *xb = rkv_tnode_blocks(t, x);
        for (uint32_t i = x->num_pages; i-- > 0;)
            rkv_guard_use(g, hash[xb[i]]);
    }
    uint64_t room = t->cached_blocks;
    while (g->size > room)
        rkv_guard_drop_head(g);
}

rkv_status rkv_guard_check(const rkv_tree *t)
{
    const rkv_guard *g = t->order.guard;
    if (g == NULL)
        return t->policy == RKV_EVICT_LEARNED
                   ? rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: learned "
                                   "policy without its guard")
                   : RKV_OK;
    uint32_t n = 0, prev = RKV_GUARD_NIL;
    uint64_t gone = 0, div = 0;
    for (uint32_t i = g->head; i != RKV_GUARD_NIL; i = g->pages[i].next) {
        if (i >= g->cap || g->pages[i].prev != prev || ++n > g->size ||
            rkv_guard_find(g, g->pages[i].hash) != i)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: eviction "
                                 "guard list broken at page %u", i);
        gone += g->gone[i] != 0;
        div += g->gone[i] == RKV_GONE_POLICY;
        prev = i;
    }
    if (gone != g->missing || div != g->missing_div)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: eviction guard "
                             "counts %llu missing pages (%llu the policy's), "
                             "lists %llu (%llu)",
                             (unsigned long long)g->missing,
                             (unsigned long long)g->missing_div,
                             (unsigned long long)gone, (unsigned long long)div);
    if (n != g->size || g->tail != prev || g->size > g->cap)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: eviction guard "
                             "holds %u of %u pages, lists %u", g->size, g->cap,
                             n);
    if (g->real_hit_pages > g->queried_pages ||
        g->lru_hit_pages > g->queried_pages)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: eviction guard "
                             "counts more hits than queries");
    return RKV_OK;
}

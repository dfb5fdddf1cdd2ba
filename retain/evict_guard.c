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
 * then the shadow is cut, least recent first, to the blocks the pool has
 * beside those held outside the tree (free + cached), so requests still
 * running take their share from the shadow too. So the shadow's hits are
 * what LRU would have hit, measured on the same matches as the tree's
 * (tests/test_evict_guard.c checks it against a real LRU tree).
 *
 * Rule: after each match, deficit = shadow hits - tree hits (pages,
 * cumulative since creation). The policy is behind when deficit >
 * queried / 1024 + 4 pages (0.1 point of everything queried so far, plus
 * noise of a few pages), or when over the last window (the queries since
 * a snapshot taken every quarter pool's worth of queried pages, four
 * snapshots back: about one pool's worth) it lost more than 1/64 of the
 * window's pages + 4 -- a fast loss, caught before it eats a lead the
 * policy built earlier. Then eviction becomes plain LRU (rkv_lru_first
 * takes the least recently used head of all lists, priorities included,
 * which is what RKV_EVICT_LRU does). While running LRU the tree tracks
 * the shadow (the deficit stays where it was); the policy is tried again
 * once the deficit is at most half the allowed one and 4 windows <<
 * fallbacks queried pages have passed since (less often each time): the
 * tree has no counterfactual for the policy itself, so only the growing
 * budget pays for a new try. The hit rate it ends with is LRU's minus the
 * allowed deficit plus the transitions (the tree lacks the pages the
 * policy dropped and LRU still holds). Measured (tests/test_evict_guard.c,
 * bench/RESULTS.md): within 0.2 point but in one case, 0.43 below, where
 * the policy loses a burst it would have won back later -- a rule that
 * sees only the past cannot tell that burst from a steady loss, which it
 * must stop. Before the pool first fills both caches hit alike, so the
 * warm-up costs nothing.
 *
 * Cost: one hash per matched page (and one more) and O(path) lookups
 * per insert, O(1) each; memory 16 B per pool block for pages and 8 B
 * for the table (two slots per block), allocated at creation. Removal
 * from the linear-probing table shifts entries back (no tombstones).
 */
#include "retain/evict_guard.h"

#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/tree_core.h"

#define RKV_GUARD_NIL UINT32_MAX
#define RKV_GUARD_RATIO 1024u   /* allowed deficit: queried / this ...   */
#define RKV_GUARD_SLACK 4u      /* ... + this many pages                 */
#define RKV_GUARD_WINDOW 64u    /* allowed loss over the last window     */

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
    if (g == NULL || (p == NULL && cap > 0) || s == NULL) {
        rkv_node_mem_free(&t->mem, g, sizeof *g);
        rkv_node_mem_free(&t->mem, p, (size_t)cap * sizeof *p);
        rkv_node_mem_free(&t->mem, s, (size_t)slots * sizeof *s);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_create: eviction "
                                            "guard tables");
    }
    memset(g, 0, sizeof *g);
    g->pages = p;
    g->slot = s;
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
        t->order.guard->fallback = 0;
    }
}

void rkv_guard_fini(rkv_tree *t)
{
    rkv_guard *g = t->order.guard;
    if (g == NULL)
        return;
    rkv_node_mem_free(&t->mem, g->pages, (size_t)g->cap * sizeof *g->pages);
    rkv_node_mem_free(&t->mem, g->slot, (size_t)g->slots_cap * sizeof *g->slot);
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

void rkv_guard_on_match(rkv_tree *t, uint64_t ns, const int32_t *tokens,
                        uint32_t npages, uint32_t real_pages)
{
    rkv_guard *g = t->order.guard;
    uint64_t h = RKV_HASH_ROOT;
    uint32_t hits = 0;
    g->anchor = RKV_GUARD_NIL;
    for (uint32_t i = 0; i < npages; i++) {
        h = rkv_block_hash(h, ns, tokens + (size_t)i * t->P, t->P);
        uint32_t e = rkv_guard_find(g, h);
        if (e == RKV_GUARD_NIL)
            break;
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
    g->queried_pages += npages;
    g->real_hit_pages += real_pages;
    g->lru_hit_pages += hits;
    uint64_t deficit = g->lru_hit_pages > g->real_hit_pages
                           ? g->lru_hit_pages - g->real_hit_pages : 0;
    uint64_t allowed = g->queried_pages / RKV_GUARD_RATIO + RKV_GUARD_SLACK;
    /* the last window (one to 5/4 pool's worth of queried pages) */
    uint64_t w = g->cap / 4 + 1;
    int losing = 0;
    if (g->queried_pages >= g->next_snap) {
        uint32_t k = g->snap_n % 4;
        if (g->snap_n >= 4) {
            uint64_t dq = g->queried_pages - g->snap_q[k];
            uint64_t dl = g->lru_hit_pages - g->snap_lru[k];
            uint64_t dr = g->real_hit_pages - g->snap_real[k];
            losing = dl > dr && dl - dr > dq / RKV_GUARD_WINDOW + RKV_GUARD_SLACK;
        }
        g->snap_q[k] = g->queried_pages;
        g->snap_lru[k] = g->lru_hit_pages;
        g->snap_real[k] = g->real_hit_pages;
        g->snap_n++;
        g->next_snap = g->queried_pages + w;
    }
    if (!g->fallback && !g->off && (deficit > allowed || losing)) {
        g->fallback = 1;
        g->fallbacks++;
        g->q_trip = g->queried_pages;
    } else if (g->fallback && 2 * deficit <= allowed &&
               g->queried_pages - g->q_trip >=
                   (4 * w) << (g->fallbacks < 16 ? g->fallbacks : 16)) {
        g->fallback = 0; /* try the policy again, less often each time */
    }
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
    uint64_t room = (uint64_t)t->pool->num_free + t->cached_blocks;
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
    for (uint32_t i = g->head; i != RKV_GUARD_NIL; i = g->pages[i].next) {
        if (i >= g->cap || g->pages[i].prev != prev || ++n > g->size ||
            rkv_guard_find(g, g->pages[i].hash) != i)
            return rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: eviction "
                                 "guard list broken at page %u", i);
        prev = i;
    }
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

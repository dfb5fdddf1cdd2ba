/*
 * retain/pins.c -- retention: node priorities, TTL pins owned by
 * sessions, the cap on pinned pages, the tree's caller-given time, and the
 * check of their invariants. (Eviction order by priority: the per-priority
 * LRU buckets of radix/tree_lru.c.) Layer: retain/, above the tree core;
 * it registers the core's yield hooks (rkv_retain_attach: allocation
 * pressure revokes pins) and is checked through the facade's check hook.
 *
 * Design:
 *   - Priorities live in meta[] (one entry per node slot, allocated at the
 *     first rkv_tree_retain so that trees that never use retention keep
 *     their memory and behaviour). A range's ends are made node boundaries
 *     by splits (a split copies the entry to the new head), so a priority
 *     always covers whole nodes and eviction, which trims a leaf from its
 *     tail, never has to mix priorities inside a node.
 *   - A pin is an internal lease on the node that ends the pinned prefix
 *     (radix/tree_lease.c): a pinned path is locked, so everything that
 *     already keeps locked pages safe (eviction, trimming, reset) keeps
 *     pinned ones safe too, and running requests' locks compose with pins.
 *     meta[].pin_count (pins ending at or below a node) tells which pages
 *     are pinned, for the cap: pinned_blocks = pages of nodes with
 *     pin_count > 0 (a shared prefix counts once).
 *   - Deadlines sit in a binary min-heap: expiry (every call with now_ms)
 *     is O(log pins) per expired pin plus its path; revocation under space
 *     pressure takes the earliest deadline first, the oldest pin among
 *     equal deadlines, but only pins whose pages nothing else locks (a
 *     running request's pages stay locked whatever the pin does, so such a
 *     revocation would cost the session its pin for no space). Releasing a pin does not
 *     stamp its path: expiry is not a use, so the pages go back to eviction
 *     in their last-use order.
 *   - A priority with a duration keeps its deadline in meta[].prio_until
 *     (a split copies it like the priority). No heap: splits and frees
 *     would have to keep one in step at every node change. Instead
 *     prio_next (<= every live deadline) gates a scan of the nodes at the
 *     time moves that pass it, which reverts all due nodes at once.
 *   - A pin without its own ttl_ms takes its namespace's default
 *     (retain/ns_ttl.c), read once when it is made or renewed.
 *   - Owners are looked up by a scan of the pin table (O(pins held)); pins
 *     are per session, so the table stays small next to the tree.
 *
 * Failure atomicity: rkv_tree_retain validates, moves the time (documented:
 * that part stays), plans its splits read-only, checks the cap, allocates
 * everything (split arrays, meta, pin table, a lease slot) and only then
 * commits, which cannot fail.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree.h"
#include "radix/tree_core.h"
#include "radix/tree_lease.h"
#include "radix/tree_lru.h"
#include "radix/tree_match.h"
#include "retain/retain.h"

#define CORRUPT(...) rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: " __VA_ARGS__)
#define RKV_PINS_FIRST_CAP 8u

void rkv_retention_init(rkv_retention *r)
{
    if (r == NULL)
        return;
    memset(r, 0, sizeof *r);
    r->priority = -1;
}

/* Deadlines: now_ms + ttl_ms, saturated (a ttl past the end of time lasts
 * until UINT64_MAX; rkv_tree_retain refuses a pin at that instant). */
static uint64_t rkv_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- deadline heap --------------------------------------------------------- */

/* Equal deadlines: the older pin first (deterministic, and independent of
 * which table slot a pin reused). */
static int rkv_pin_before(const rkv_tree *t, uint32_t a, uint32_t b)
{
    const rkv_pin *x = &t->retain.pins[a], *y = &t->retain.pins[b];
    return x->deadline < y->deadline ||
           (x->deadline == y->deadline && x->seq < y->seq);
}

static void rkv_heap_set(rkv_tree *t, uint32_t pos, uint32_t pin)
{
    t->retain.pin_heap[pos] = pin;
    t->retain.pins[pin].heap_pos = pos;
}

static void rkv_heap_up(rkv_tree *t, uint32_t pos)
{
    uint32_t p = t->retain.pin_heap[pos];
    while (pos > 0) {
        uint32_t par = (pos - 1) / 2, q = t->retain.pin_heap[par];
        if (!rkv_pin_before(t, p, q))
            break;
        rkv_heap_set(t, pos, q);
        pos = par;
    }
    rkv_heap_set(t, pos, p);
}

static void rkv_heap_down(rkv_tree *t, uint32_t pos)
{
    uint32_t p = t->retain.pin_heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= t->retain.npins)
            break;
        if (c + 1 < t->retain.npins && rkv_pin_before(t, t->retain.pin_heap[c + 1], t->retain.pin_heap[c]))
            c++;
        if (!rkv_pin_before(t, t->retain.pin_heap[c], p))
            break;
        rkv_heap_set(t, pos, t->retain.pin_heap[c]);
        pos = c;
    }
    rkv_heap_set(t, pos, p);
}

static void rkv_heap_remove(rkv_tree *t, uint32_t pos)
{
    uint32_t last = t->retain.pin_heap[--t->retain.npins];
    if (pos < t->retain.npins) {
        rkv_heap_set(t, pos, last);
        rkv_heap_up(t, pos);
        rkv_heap_down(t, t->retain.pins[last].heap_pos);
    }
}

/* ---- pins ------------------------------------------------------------------ */

void rkv_pin_drop(rkv_tree *t, uint32_t pin)
{
    rkv_pin *e = &t->retain.pins[pin];
    int lowered = e->lease.id == 0;
    if (lowered) {
        t->retain.tier_ops->path(t, e->node, -1); /* lowered: tiers attached */
        t->retain.npins_lowered--;
    } else {
        for (uint32_t y = e->node; y != 0; y = t->nodes[y].parent) {
            t->retain.yield_blocks -= rkv_yield_pages(t, y);
            if (--t->retain.meta[y].pin_count == 0)
                t->retain.pinned_blocks -= t->nodes[y].num_pages;
            t->retain.yield_blocks += rkv_yield_pages(t, y);
        }
    }
    rkv_heap_remove(t, e->heap_pos);
    uint32_t slot = lowered ? RKV_NIL : rkv_lease_find(t, e->lease.id);
    memset(e, 0, sizeof *e);
    e->heap_pos = t->retain.pin_free;
    t->retain.pin_free = pin;
    if (!lowered)
        rkv_lease_unlock_slot(t, slot, 0);
}

static void rkv_set_prio(rkv_tree *t, uint32_t id, uint8_t prio);

/* Priorities whose duration ran out go back to the default. A scan of the
 * nodes, but only once the earliest deadline (prio_next, possibly of a
 * node since freed: then the scan just finds the next one) has passed. */
static void rkv_prio_revert(rkv_tree *t, uint64_t now_ms)
{
    uint64_t next = 0;
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        rkv_node_retention *m = &t->retain.meta[y];
        /* meta[] first: a sequential pass over 16-byte entries; a node is
         * read only when it has a deadline */
        if (m->prio_until == 0 || t->nodes[y].parent == RKV_NIL)
            continue;
        if (m->prio_until <= now_ms) {
            m->prio_until = 0;
            rkv_set_prio(t, y, RKV_PRIORITY_DEFAULT);
            t->retain.prio_reverted++;
        } else if (next == 0 || m->prio_until < next) {
            next = m->prio_until;
        }
    }
    t->retain.prio_next = next;
}

static void rkv_expire(rkv_tree *t, uint64_t now_ms)
{
    t->retain.now_ms = now_ms;
    while (t->retain.npins > 0 && t->retain.pins[t->retain.pin_heap[0]].deadline <= now_ms) {
        rkv_pin_drop(t, t->retain.pin_heap[0]);
        t->retain.pins_expired++;
    }
    if (t->retain.prio_next != 0 && t->retain.prio_next <= now_ms && t->retain.meta != NULL)
        rkv_prio_revert(t, now_ms);
}

static rkv_status rkv_time_ok(const rkv_tree *t, uint64_t now_ms, const char *fn)
{
    if (now_ms < t->retain.now_ms)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: now_ms %llu is before the tree's time %llu",
                             fn, (unsigned long long)now_ms,
                             (unsigned long long)t->retain.now_ms);
    return RKV_OK;
}

rkv_status rkv_tree_set_time(rkv_tree *tree, uint64_t now_ms)
{
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_set_time: NULL tree");
    rkv_status st = rkv_time_ok(tree, now_ms, "rkv_tree_set_time");
    if (st != RKV_OK)
        return st;
    rkv_expire(tree, now_ms);
    return RKV_OK;
}

/* Every lock at or below such a node is a pin, so no running request
 * needs its pages: the counter is kept where lock and pin counts change
 * (rkv_yield_pages) and verified by rkv_retain_check. */
uint64_t rkv_pins_yieldable(const rkv_tree *t)
{
    return t->retain.yield_blocks;
}

rkv_status rkv_tree_pins_yieldable(const rkv_tree *tree, uint64_t *blocks)
{
    if (tree == NULL || blocks == NULL)
        return rkv_null_arg("rkv_tree_pins_yieldable", tree, "tree", "blocks");
    *blocks = rkv_pins_yieldable(tree);
    return RKV_OK;
}

/* The pin to revoke next: the earliest deadline among pins whose revocation
 * frees pages at once (their node's only lock is the pin: lock counts only
 * grow towards the root, so then the node itself becomes evictable), else
 * among pins on nodes that only pins hold (several pins on one node free
 * it only together), else RKV_NIL. A pin on pages that a running request
 * also locks is never taken: revoking it frees nothing. O(pins). */
static uint32_t rkv_pin_to_revoke(const rkv_tree *t)
{
    uint32_t now = RKV_NIL, later = RKV_NIL;
    for (uint32_t p = 0; p < t->retain.pins_used; p++) {
        const rkv_pin *e = &t->retain.pins[p];
        if (e->lease.id == 0)
            continue;
        const rkv_tnode *x = &t->nodes[e->node];
        if (x->lock_count == 1) {
            if (now == RKV_NIL || rkv_pin_before(t, p, now))
                now = p;
        } else if (x->lock_count == t->retain.meta[e->node].pin_count) {
            if (later == RKV_NIL || rkv_pin_before(t, p, later))
                later = p;
        }
    }
    return now != RKV_NIL ? now : later;
}

void rkv_pins_revoke_until(rkv_tree *t, uint64_t need)
{
    while (t->evictable_blocks < need) {
        uint32_t p = rkv_pin_to_revoke(t);
        if (p == RKV_NIL)
            break;
        /* with a lower tier the pin lives on below the device: its lease
         * goes (the pages become evictable and are demoted), the pin stays */
        const rkv_pin_tier_ops *ops = t->retain.tier_ops;
        if (ops != NULL && ops->can_lower(t)) {
            ops->lower(t, p);
            continue;
        }
        rkv_pin_drop(t, p);
        t->retain.pins_revoked++;
    }
}

void rkv_pins_drop_all(rkv_tree *t)
{
    while (t->retain.npins > 0) {
        rkv_pin_drop(t, t->retain.pin_heap[0]);
        t->retain.pins_released++;
    }
}

/* A pin table and its heap, both cap entries long, back to node memory. */
static void rkv_pins_free(rkv_tree *t, rkv_pin *pins, uint32_t *heap, uint32_t cap)
{
    rkv_node_mem_free(&t->mem, pins, (size_t)cap * sizeof *pins);
    rkv_node_mem_free(&t->mem, heap, (size_t)cap * sizeof *heap);
}

void rkv_retain_fini(rkv_tree *t)
{
    rkv_node_mem_free(&t->mem, t->retain.meta, (size_t)t->nodes_cap * sizeof *t->retain.meta);
    rkv_pins_free(t, t->retain.pins, t->retain.pin_heap, t->retain.pins_cap);
    t->retain.meta = NULL;
    t->retain.pins = NULL;
    t->retain.pin_heap = NULL;
    t->retain.pins_cap = t->retain.pins_used = t->retain.npins = 0;
    t->retain.pin_free = RKV_NIL;
}

rkv_status rkv_tree_pins_extend(rkv_tree *tree, uint64_t owner, uint64_t ttl_ms,
                                uint64_t now_ms, uint32_t *count)
{
    static const char fn[] = "rkv_tree_pins_extend";
    if (count != NULL)
        *count = 0;
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tree", fn);
    rkv_status st = rkv_time_ok(tree, now_ms, fn);
    if (st != RKV_OK)
        return st;
    rkv_tree *t = tree;
    rkv_expire(t, now_ms);
    uint64_t dl = rkv_sat_add(now_ms, ttl_ms);
    uint32_t n = 0;
    for (uint32_t p = 0; p < t->retain.pins_used; p++) {
        rkv_pin *e = &t->retain.pins[p];
        if (e->node == 0 || e->owner != owner) /* lowered pins too */
            continue;
        n++;
        if (dl > e->deadline) {
            e->deadline = dl;
            rkv_heap_down(t, e->heap_pos);
        }
    }
    t->retain.pins_renewed += n;
    if (count != NULL)
        *count = n;
    return RKV_OK;
}

rkv_status rkv_tree_pins_release(rkv_tree *tree, uint64_t owner, uint32_t *count)
{
    if (count != NULL)
        *count = 0;
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_pins_release: NULL tree");
    uint32_t n = 0;
    for (uint32_t p = 0; p < tree->retain.pins_used; p++) {
        rkv_pin *e = &tree->retain.pins[p];
        if (e->node == 0 || e->owner != owner) /* lowered pins too */
            continue;
        rkv_pin_drop(tree, p);
        n++;
    }
    tree->retain.pins_released += n;
    if (count != NULL)
        *count = n;
    return RKV_OK;
}

/* ---- retain ---------------------------------------------------------------- */

/* The node holding page `page` of a path known to be cached that far; its
 * first page goes to *start. */
static uint32_t rkv_retain_find(const rkv_tree *t, uint32_t root,
                                const int32_t *tokens, uint32_t page,
                                uint32_t *start)
{
    uint32_t d = 0, cur = root;
    for (;;) {
        uint32_t c = rkv_child_index_find(t, cur, tokens + (size_t)d * t->P);
        uint32_t m = t->nodes[c].num_pages;
        if (page < d + m) {
            *start = d;
            return c;
        }
        d += m;
        cur = c;
    }
}

static void rkv_set_prio(rkv_tree *t, uint32_t id, uint8_t prio)
{
    if (t->retain.meta[id].prio == prio)
        return;
    /* a LOWER node's host/disk list is chosen by its priority too
     * (rkv_lower_lru_bucket); retain walks device nodes only, but relisting
     * keeps that list right whoever sets a priority */
    const rkv_pin_tier_ops *ops = t->retain.tier_ops;
    int lower = ops != NULL && ops->node_is_lower(t, id);
    int listed = t->policy != RKV_EVICT_LRU && !lower &&
                 rkv_tree_in_lru(&t->nodes[id]);
    if (listed)
        rkv_lru_unlink(t, id);
    if (lower)
        ops->relist(t, id, 0);
    t->retain.meta[id].prio = prio;
    if (listed)
        rkv_lru_place(t, id);
    if (lower)
        ops->relist(t, id, 1);
}

/* Live pin of owner ending at node, leased (lowered == 0) or lowered,
 * or RKV_NIL. */
static uint32_t rkv_pin_find(const rkv_tree *t, uint64_t owner, uint32_t node,
                             int lowered)
{
    for (uint32_t p = 0; p < t->retain.pins_used; p++)
        if (t->retain.pins[p].node == node && t->retain.pins[p].owner == owner &&
            (t->retain.pins[p].lease.id == 0) == lowered)
            return p;
    return RKV_NIL;
}

typedef struct rkv_retain_plan {
    uint32_t ncuts;
    uint32_t cut[3];     /* ascending page boundaries in (0, matched]   */
    uint32_t nsplits;
    uint32_t split_at[3]; /* cuts that fall inside a node               */
    uint32_t pages[6];   /* head, tail arrays per split                */
} rkv_retain_plan;

static void rkv_plan_cut(rkv_retain_plan *pl, uint32_t c)
{
    uint32_t i = 0;
    while (i < pl->ncuts && pl->cut[i] < c)
        i++;
    if (i < pl->ncuts && pl->cut[i] == c)
        return;
    memmove(pl->cut + i + 1, pl->cut + i, (pl->ncuts - i) * sizeof *pl->cut);
    pl->cut[i] = c;
    pl->ncuts++;
}

static void rkv_plan_splits(const rkv_tree *t, uint32_t root,
                            const int32_t *tokens, rkv_retain_plan *pl)
{
    uint32_t prev_node = RKV_NIL, prev_cut = 0;
    for (uint32_t i = 0; i < pl->ncuts; i++) {
        uint32_t c = pl->cut[i], s;
        uint32_t x = rkv_retain_find(t, root, tokens, c - 1, &s);
        uint32_t e = s + t->nodes[x].num_pages;
        if (e == c)
            continue;
        if (x == prev_node)
            s = prev_cut; /* the tail the previous split leaves */
        pl->split_at[pl->nsplits] = c;
        pl->pages[2 * pl->nsplits] = c - s;
        pl->pages[2 * pl->nsplits + 1] = e - c;
        pl->nsplits++;
        prev_node = x;
        prev_cut = c;
    }
}

rkv_status rkv_tree_retain(rkv_tree *tree, rkv_namespace ns,
                           const int32_t *tokens, size_t n,
                           const rkv_retention *r, uint64_t now_ms,
                           rkv_retain_result *out)
{
    static const char fn[] = "rkv_tree_retain";
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (tree == NULL || r == NULL)
        return rkv_null_arg(fn, tree, "tree", "retention");
    rkv_tree *t = tree;
    const uint32_t P = t->P;
    if (n > 0 && tokens == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tokens", fn);
    if (n / P >= RKV_NIL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: n=%zu too large", fn, n);
    if (r->priority < -1 || r->priority > RKV_PRIORITY_MAX)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: priority %d not in "
                             "0..%d (or -1)", fn, r->priority, RKV_PRIORITY_MAX);
    if (r->priority >= 0 && r->prio_begin > r->prio_end)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: priority range [%zu, %zu)",
                             fn, r->prio_begin, r->prio_end);
    if (r->pin_tokens > n)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: pin_tokens %zu > n %zu",
                             fn, r->pin_tokens, n);
    uint32_t pin_req = (uint32_t)(r->pin_tokens / P);
    /* the request's own TTL wins over its namespace's default */
    uint64_t ttl = r->ttl_ms != 0 ? r->ttl_ms : rkv_ns_ttl_lookup(t, ns);
    if (pin_req > 0 && ttl == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: a pin needs ttl_ms > 0 "
                             "(namespace %llu has no default TTL)", fn,
                             (unsigned long long)ns);
    if (r->priority_duration_ms > 0 && r->priority < 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: priority_duration_ms "
                             "%llu without a priority (-1)", fn,
                             (unsigned long long)r->priority_duration_ms);
    /* deadlines saturate at UINT64_MAX and a pin (or a priority) lives
     * while its deadline is after the time: at the last instant it would
     * be born expired */
    if ((pin_req > 0 || r->priority_duration_ms > 0) && now_ms == UINT64_MAX)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: no %s at now_ms = "
                             "UINT64_MAX (its deadline cannot be later)", fn,
                             pin_req > 0 ? "pin" : "priority_duration_ms");
    rkv_status st = rkv_time_ok(t, now_ms, fn);
    if (st != RKV_OK)
        return st;
    rkv_expire(t, now_ms);

    uint32_t root = rkv_child_index_find_ns(t, ns);
    if (root == RKV_NIL)
        return RKV_OK; /* nothing of it is cached */
    uint32_t npages = (uint32_t)(n / P);
    rkv_walk w;
    rkv_tree_walk(t, root, 0, tokens, npages, NULL, NULL, NULL, &w);
    uint32_t M = w.pages; /* pages of tokens cached under root */
    /* priority: pages wholly inside [begin, end); pin: its cached part */
    uint32_t pb = 0, pe = 0, pp = pin_req < M ? pin_req : M;
    if (r->priority >= 0) {
        /* begin rounded up to a page without wrapping near SIZE_MAX */
        size_t b = r->prio_begin / P + (r->prio_begin % P != 0);
        size_t e = r->prio_end / P;
        pb = (uint32_t)(b < M ? b : M);
        pe = (uint32_t)(e < M ? e : M);
    }
    int do_prio = pb < pe;
    rkv_retain_plan pl;
    memset(&pl, 0, sizeof pl);
    if (do_prio) {
        if (pb > 0)
            rkv_plan_cut(&pl, pb);
        rkv_plan_cut(&pl, pe);
    }
    if (pp > 0)
        rkv_plan_cut(&pl, pp);
    rkv_plan_splits(t, root, tokens, &pl);

    /* the pin: renew one of the same owner on the same prefix, or check
     * what a new one adds against the cap */
    uint32_t renew = RKV_NIL;
    uint64_t add = 0;
    if (pp > 0) {
        uint32_t s, x = rkv_retain_find(t, root, tokens, pp - 1, &s);
        if (s + t->nodes[x].num_pages == pp && t->retain.meta != NULL)
            renew = rkv_pin_find(t, r->owner, x, 0);
        if (renew == RKV_NIL) {
            for (uint32_t d = 0, cur = root; d < pp;) {
                uint32_t c = rkv_child_index_find(t, cur, tokens + (size_t)d * P);
                uint32_t m = t->nodes[c].num_pages;
                if (t->retain.meta == NULL || t->retain.meta[c].pin_count == 0)
                    add += (d + m < pp ? d + m : pp) - d;
                d += m;
                cur = c;
            }
            if (t->retain.pinned_blocks + add > t->retain.pin_cap_blocks) {
                t->retain.pins_refused++;
                return rkv_set_error(RKV_ERR_PIN_CAP,
                                     "%s: pinning %u pages adds %llu pinned pages "
                                     "to %llu; the cap is %llu", fn, pp,
                                     (unsigned long long)add,
                                     (unsigned long long)t->retain.pinned_blocks,
                                     (unsigned long long)t->retain.pin_cap_blocks);
            }
        }
    }
    int new_pin = pp > 0 && renew == RKV_NIL;

    /* allocate everything before changing anything */
    rkv_tree_prep prep;
    memset(&prep, 0, sizeof prep);
    if (pl.nsplits > 0) {
        st = rkv_tree_prepare(t, pl.nsplits, (int)(2 * pl.nsplits), pl.pages,
                              &prep, fn);
        if (st != RKV_OK)
            return st;
    }
    rkv_node_retention *meta = NULL;
    uint32_t meta_cap = prep.nodes != NULL ? prep.nodes_cap : t->nodes_cap;
    rkv_pin *pins = NULL;
    uint32_t *heap = NULL, pins_cap = 0;
    if (t->retain.meta == NULL) {
        meta = rkv_node_mem_alloc(&t->mem, (size_t)meta_cap * sizeof *meta);
        if (meta == NULL)
            goto nomem;
    }
    if (new_pin && t->retain.pin_free == RKV_NIL && t->retain.pins_used == t->retain.pins_cap) {
        if (t->retain.pins_cap >= RKV_NIL / 2) {
            st = rkv_set_error(RKV_ERR_STATE, "%s: %u pins are held (the limit)",
                               fn, t->retain.pins_cap);
            goto fail;
        }
        pins_cap = t->retain.pins_cap ? t->retain.pins_cap * 2 : RKV_PINS_FIRST_CAP;
        pins = rkv_node_mem_alloc(&t->mem, (size_t)pins_cap * sizeof *pins);
        if (pins == NULL)
            goto nomem;
        heap = rkv_node_mem_alloc(&t->mem, (size_t)pins_cap * sizeof *heap);
        if (heap == NULL)
            goto nomem;
    }
    /* last: a grown lease table is no change to undo */
    if (new_pin && (st = rkv_lease_reserve(t, fn)) != RKV_OK)
        goto fail;

    /* commit: cannot fail from here */
    if (pl.nsplits > 0)
        rkv_tree_prep_install(t, &prep);
    if (meta != NULL) {
        for (uint32_t i = 0; i < meta_cap; i++)
            meta[i] = RKV_NODE_RETENTION_FRESH;
        t->retain.meta = meta;
    }
    if (pins != NULL) {
        if (t->retain.pins_used > 0) {
            memcpy(pins, t->retain.pins, (size_t)t->retain.pins_used * sizeof *pins);
            memcpy(heap, t->retain.pin_heap, (size_t)t->retain.npins * sizeof *heap);
        }
        rkv_pins_free(t, t->retain.pins, t->retain.pin_heap, t->retain.pins_cap);
        t->retain.pins = pins;
        t->retain.pin_heap = heap;
        t->retain.pins_cap = pins_cap;
    }
    for (uint32_t i = 0; i < pl.nsplits; i++) {
        uint32_t c = pl.split_at[i], s;
        uint32_t x = rkv_retain_find(t, root, tokens, c - 1, &s);
        rkv_tree_split(t, x, c - s, prep.data[2 * i], prep.data[2 * i + 1]);
    }
    uint32_t target = RKV_NIL, prio_pages = 0;
    uint64_t prio_until = r->priority_duration_ms == 0
                              ? 0 : rkv_sat_add(now_ms, r->priority_duration_ms);
    if (do_prio && prio_until != 0 &&
        (t->retain.prio_next == 0 || prio_until < t->retain.prio_next))
        t->retain.prio_next = prio_until;
    for (uint32_t d = 0, cur = root; d < M;) {
        uint32_t c = rkv_child_index_find(t, cur, tokens + (size_t)d * P);
        uint32_t e = d + t->nodes[c].num_pages;
        if (do_prio && pb <= d && e <= pe) {
            rkv_set_prio(t, c, (uint8_t)r->priority);
            t->retain.meta[c].prio_until = prio_until;
            prio_pages += e - d;
        }
        if (e == pp)
            target = c;
        d = e;
        cur = c;
    }
    uint32_t newly = 0;
    uint64_t dl = rkv_sat_add(now_ms, ttl);
    if (renew != RKV_NIL) {
        if (dl > t->retain.pins[renew].deadline) {
            t->retain.pins[renew].deadline = dl;
            rkv_heap_down(t, t->retain.pins[renew].heap_pos);
        }
        t->retain.pins_renewed++;
    } else if (new_pin) {
        rkv_lease lease;
        rkv_node h = {target, t->nodes[target].gen};
        (void)rkv_tree_lock(t, h, &lease); /* reserved: cannot fail */
        uint32_t p = t->retain.pin_free;
        if (p != RKV_NIL)
            t->retain.pin_free = t->retain.pins[p].heap_pos;
        else
            p = t->retain.pins_used++;
        rkv_pin *e = &t->retain.pins[p];
        e->owner = r->owner;
        e->deadline = dl;
        e->seq = ++t->retain.pin_seq;
        e->lease = lease;
        e->node = target;
        t->retain.pin_heap[t->retain.npins] = p;
        e->heap_pos = t->retain.npins++;
        rkv_heap_up(t, e->heap_pos);
        for (uint32_t y = target; y != 0; y = t->nodes[y].parent) {
            t->retain.yield_blocks -= rkv_yield_pages(t, y);
            if (t->retain.meta[y].pin_count++ == 0) {
                t->retain.pinned_blocks += t->nodes[y].num_pages;
                newly += t->nodes[y].num_pages;
            }
            t->retain.yield_blocks += rkv_yield_pages(t, y);
        }
        /* the same session's pin on this prefix that device pressure
         * lowered is taken over: the prefix is on the device again and
         * leased (one pin, the later deadline; counted as a renewal) */
        uint32_t q = rkv_pin_find(t, r->owner, target, 1);
        if (q != RKV_NIL) {
            if (t->retain.pins[q].deadline > e->deadline) {
                e->deadline = t->retain.pins[q].deadline;
                rkv_heap_down(t, e->heap_pos);
            }
            rkv_pin_drop(t, q);
            t->retain.pins_renewed++;
        } else {
            t->retain.pins_made++;
        }
    }
    if (out != NULL) {
        out->prio_pages = prio_pages;
        out->pinned_pages = pp;
        out->new_pinned_pages = newly;
    }
    return RKV_OK;
nomem:
    st = rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory for retention tables", fn);
fail:
    rkv_node_mem_free(&t->mem, meta, (size_t)meta_cap * sizeof *meta);
    rkv_pins_free(t, pins, heap, pins_cap);
    rkv_tree_prep_abort(t, &prep);
    return st;
}

/* ---- queries --------------------------------------------------------------- */

rkv_status rkv_tree_retention_stats(const rkv_tree *tree, rkv_retention_stats *out)
{
    if (tree == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_retention_stats: NULL");
    memset(out, 0, sizeof *out);
    out->pins = tree->retain.npins;
    out->pinned_blocks = tree->retain.pinned_blocks;
    out->pin_cap_blocks = tree->retain.pin_cap_blocks;
    out->now_ms = tree->retain.now_ms;
    out->pins_made = tree->retain.pins_made;
    out->pins_renewed = tree->retain.pins_renewed;
    out->pins_expired = tree->retain.pins_expired;
    out->pins_released = tree->retain.pins_released;
    out->pins_revoked = tree->retain.pins_revoked;
    out->pins_refused = tree->retain.pins_refused;
    out->pins_demoted = tree->retain.pins_demoted;
    out->pins_lowered = tree->retain.npins_lowered;
    out->prio_reverted = tree->retain.prio_reverted;
    out->pinned_by_medium[RKV_MEDIUM_DEVICE] = tree->retain.pinned_blocks;
    out->pin_cap_by_medium[RKV_MEDIUM_DEVICE] = tree->retain.pin_cap_blocks;
    if (tree->retain.tier_ops != NULL)
        tree->retain.tier_ops->stats(tree, out);
    return RKV_OK;
}

rkv_status rkv_tree_node_priority(const rkv_tree *tree, rkv_node node,
                                  int *priority)
{
    if (tree == NULL || priority == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_node_priority: NULL");
    if (!rkv_tree_handle_ok(tree, node))
        return rkv_tree_stale(node, "rkv_tree_node_priority");
    *priority = tree->retain.meta != NULL ? tree->retain.meta[node.id].prio : RKV_PRIORITY_DEFAULT;
    return RKV_OK;
}

/* ---- check ----------------------------------------------------------------- */

static rkv_status rkv_retain_check_pins(const rkv_tree *t, uint32_t *own,
                                        uint32_t *lown)
{
    if (t->retain.pins_used > t->retain.pins_cap || t->retain.npins > t->retain.pins_used ||
        (t->retain.pins_cap > 0) != (t->retain.pins != NULL))
        return CORRUPT("pin table: %u live, %u used of %u", t->retain.npins,
                       t->retain.pins_used, t->retain.pins_cap);
    uint64_t live = 0, lowered = 0;
    for (uint32_t p = 0; p < t->retain.pins_used; p++) {
        const rkv_pin *e = &t->retain.pins[p];
        if (e->node == 0) {
            if (e->lease.id != 0)
                return CORRUPT("free pin %u holds a lease", p);
            continue;
        }
        live++;
        if (e->node == 0 || e->node >= t->nodes_used ||
            t->nodes[e->node].parent == RKV_NIL || t->nodes[e->node].parent == 0)
            return CORRUPT("pin %u names node %u, which is not a cached node", p,
                           e->node);
        uint32_t slot = e->lease.id != 0 ? rkv_lease_find(t, e->lease.id)
                                         : RKV_NIL;
        if (e->lease.id == 0) {
            if (t->retain.tier_ops == NULL)
                return CORRUPT("pin %u is lowered without lower tiers", p);
            lowered++;
            lown[e->node]++;
        } else if (slot == RKV_NIL || t->leases[slot].node != e->node) {
            return CORRUPT("pin %u does not hold a lease on its node %u", p,
                           e->node);
        }
        if (e->deadline <= t->retain.now_ms)
            return CORRUPT("pin %u expired at %llu but lives at %llu", p,
                           (unsigned long long)e->deadline,
                           (unsigned long long)t->retain.now_ms);
        if (e->heap_pos >= t->retain.npins || t->retain.pin_heap[e->heap_pos] != p)
            return CORRUPT("pin %u is not at its heap position %u", p,
                           e->heap_pos);
        if (e->lease.id != 0)
            own[e->node]++;
    }
    if (lowered != t->retain.npins_lowered)
        return CORRUPT("%llu pins lowered, %u counted",
                       (unsigned long long)lowered, t->retain.npins_lowered);
    if (live != t->retain.npins)
        return CORRUPT("%llu pins live, %u counted", (unsigned long long)live,
                       t->retain.npins);
    uint64_t nfree = 0;
    for (uint32_t p = t->retain.pin_free; p != RKV_NIL; p = t->retain.pins[p].heap_pos) {
        if (p >= t->retain.pins_used || t->retain.pins[p].node != 0)
            return CORRUPT("pin free list holds pin %u, which is not free", p);
        if (++nfree > t->retain.pins_used)
            return CORRUPT("cycle in the pin free list");
    }
    if (nfree + live != t->retain.pins_used)
        return CORRUPT("pin free list has %llu, %llu free",
                       (unsigned long long)nfree,
                       (unsigned long long)(t->retain.pins_used - live));
    for (uint32_t i = 1; i < t->retain.npins; i++)
        if (rkv_pin_before(t, t->retain.pin_heap[i], t->retain.pin_heap[(i - 1) / 2]))
            return CORRUPT("pin heap out of order at %u", i);
    return RKV_OK;
}

/* The lowered pins' share of the check (residency/ verifies their paths;
 * without tiers there must be none). */
static rkv_status rkv_retain_check_lowered(const rkv_tree *t,
                                           const uint32_t *lown)
{
    if (t->retain.tier_ops != NULL)
        return t->retain.tier_ops->check(t, lown);
    return t->retain.npins_lowered == 0
               ? RKV_OK
               : rkv_set_error(RKV_ERR_CORRUPT, "rkv_tree_check: lowered "
                               "pins: %u without lower tiers",
                               t->retain.npins_lowered);
}

rkv_status rkv_retain_check(const rkv_tree *t)
{
    if (t->retain.pinned_blocks > t->retain.pin_cap_blocks)
        return CORRUPT("%llu pinned pages exceed the cap %llu",
                       (unsigned long long)t->retain.pinned_blocks,
                       (unsigned long long)t->retain.pin_cap_blocks);
    if (t->retain.meta == NULL) {
        if (t->retain.npins != 0 || t->retain.pins_used != 0 || t->retain.pinned_blocks != 0 ||
            t->retain.yield_blocks != 0)
            return CORRUPT("pins without retention data");
        return rkv_retain_check_lowered(t, NULL);
    }
    uint32_t *own = calloc(t->nodes_used, sizeof *own);
    uint32_t *lown = calloc(t->nodes_used, sizeof *lown);
    uint64_t *below = calloc(t->nodes_used, sizeof *below);
    rkv_status st = RKV_OK;
    if (own == NULL || lown == NULL || below == NULL) {
        st = rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_check: scratch memory");
        goto out;
    }
    st = rkv_retain_check_pins(t, own, lown);
    if (st != RKV_OK)
        goto out;
    st = rkv_retain_check_lowered(t, lown);
    if (st != RKV_OK)
        goto out;
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        uint32_t p = t->nodes[y].parent;
        if (p != RKV_NIL && p != 0)
            below[p] += t->retain.meta[y].pin_count;
    }
    uint64_t pinned = 0, yieldable = 0;
    for (uint32_t y = 1; y < t->nodes_used; y++) {
        const rkv_tnode *x = &t->nodes[y];
        const rkv_node_retention *m = &t->retain.meta[y];
        if (x->parent == RKV_NIL)
            continue;
        /* the counter rkv_pins_yieldable answers from, recomputed */
        if (x->parent != 0 && x->lock_count > 0 && x->lock_count == m->pin_count)
            yieldable += x->num_pages;
        if (m->prio > RKV_PRIORITY_MAX) {
            st = CORRUPT("node %u has priority %u", y, m->prio);
            goto out;
        }
        /* a priority's deadline is either ahead or already reverted, and
         * the revert scan runs no later than it */
        if (m->prio_until != 0 &&
            (m->prio_until <= t->retain.now_ms || t->retain.prio_next == 0 ||
             t->retain.prio_next > m->prio_until)) {
            st = CORRUPT("node %u priority deadline %llu (time %llu, next "
                         "revert scan %llu)", y,
                         (unsigned long long)m->prio_until,
                         (unsigned long long)t->retain.now_ms,
                         (unsigned long long)t->retain.prio_next);
            goto out;
        }
        if (m->pin_count != own[y] + below[y] || m->pin_count > x->lock_count) {
            st = CORRUPT("node %u pin count %u != its pins %u + children's %llu "
                         "(lock count %u)", y, m->pin_count, own[y],
                         (unsigned long long)below[y], x->lock_count);
            goto out;
        }
        if (m->pin_count > 0)
            pinned += x->num_pages;
    }
    if (pinned != t->retain.pinned_blocks)
        st = CORRUPT("%llu pages are pinned, %llu counted",
                     (unsigned long long)pinned,
                     (unsigned long long)t->retain.pinned_blocks);
    else if (yieldable != t->retain.yield_blocks)
        st = CORRUPT("%llu pinned pages only pins hold, %llu counted",
                     (unsigned long long)yieldable,
                     (unsigned long long)t->retain.yield_blocks);
out:
    free(own);
    free(lown);
    free(below);
    return st;
}

/* ---- hooks ------------------------------------------------------------------- */

void rkv_retain_attach(rkv_tree *t, uint32_t max_pinned_pct)
{
    t->retain.pin_cap_blocks =
        (uint64_t)t->pool->cfg.num_blocks * max_pinned_pct / 100;
    t->retain.pin_pct = max_pinned_pct;
    t->retain.pin_free = RKV_NIL;
    /* pins yield to allocations that nothing else can serve */
    t->hooks.yieldable = rkv_pins_yieldable;
    t->hooks.yield = rkv_pins_revoke_until;
}

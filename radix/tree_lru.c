/*
 * radix/tree_lru.c -- recency and eviction of the tree core.
 *
 * Owns: the intrusive LRU lists of evictable leaves (non-root, no child,
 * lock_count 0), ordered by last_access with the oldest at the head, one
 * per bucket (rkv_lru_bucket: one list under RKV_EVICT_LRU, one per
 * priority under RKV_EVICT_PRIORITY, the learned classes under
 * RKV_EVICT_LEARNED, and the bucket of leaves that only ended sessions
 * used); the victim choice (rkv_lru_first: the ended sessions' bucket
 * under every policy, then the eviction-order hook -- the learned order and
 * its guard, retain/evict_learned.c -- then the head of the lowest
 * non-empty bucket, found in O(1) from a 128-bit mask); the one eviction
 * loop (rkv_tree_evict_some), under rkv_tree_evict, rkv_tree_evict_ids and
 * rkv_tree_alloc_blocks. The victim hook (residency/tier.c: demotion)
 * replaces the default drop of a victim's pages when tiers are attached;
 * allocation asks the yield hook (retain/pins.c) before failing. Locks:
 * radix/tree_lease.c.
 *
 * Recency: a use stamps last_access = ++clock on every node of the path
 * from the used node up to its namespace root, so a node's stamp is the
 * newest of its subtree's uses. Only the path's end can be a listed leaf,
 * and it moves to the tail. A node that becomes an evictable leaf is placed
 * by its stamp: at the head or tail when it is the oldest or newest (the
 * common cases, O(1)), else by a walk from both ends at once, whose steps
 * are counted in stats.lru_reorder_steps.
 *
 * Eviction: take the head leaf, drop its pages from the tail (one pool
 * reference each; a block counts as freed when its ref count reaches 0),
 * bump its generation when trimmed, remove it when empty, and let its
 * parent join the list when it becomes an unlocked leaf (an empty namespace
 * root is freed instead; so is one whose last lease goes, in unlock). O(1) per node plus its pages; no allocation, so
 * eviction cannot fail half way. Only blocks that the caller also holds
 * outside the tree (without a lock) can make an eviction free fewer blocks
 * than it unlinked; then rkv_tree_evict returns RKV_ERR_NO_SPACE after
 * having evicted everything evictable (the one case where a failing call
 * changes the tree -- it cannot be predicted without scanning).
 *
 * evict_ids: eviction frees blocks only by pushing them on the pool's free
 * stack and allocates none, so the blocks one eviction freed are the top
 * `freed` entries of that stack when it returns; no list is kept while
 * evicting.
 */
#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree_core.h"
#include "radix/tree_lru.h"

/* ---- list primitives ------------------------------------------------------ */
/* Every primitive works on the node's own bucket (rkv_lru_bucket): one list
 * under RKV_EVICT_LRU, one per priority under RKV_EVICT_PRIORITY. A node's
 * priority only changes while it is out of its list (retain/pins.c). */

static void rkv_lru_mark(rkv_tree *t, uint32_t b)
{
    uint64_t bit = UINT64_C(1) << (b & 63);
    if (t->lru_head[b] != RKV_NIL)
        t->lru_nonempty[b >> 6] |= bit;
    else
        t->lru_nonempty[b >> 6] &= ~bit;
}

/* Plain LRU over every list: the least recently used head (lists are
 * ordered by last use). Ties: the lower bucket. */
uint32_t rkv_lru_first_any(const rkv_tree *t)
{
    uint32_t best = RKV_NIL;
    for (int w = 0; w < 2; w++)
        for (uint64_t m = t->lru_nonempty[w]; m != 0; m &= m - 1) {
            uint32_t id = t->lru_head[64 * w + __builtin_ctzll(m)];
            if (best == RKV_NIL ||
                t->nodes[id].last_access < t->nodes[best].last_access)
                best = id;
        }
    return best;
}

/* The node eviction takes next: the ended sessions' bucket, then what the
 * eviction-order hook picks, then the head of the lowest non-empty
 * bucket. */
uint32_t rkv_lru_first(const rkv_tree *t, uint32_t need)
{
    if (t->lru_head[RKV_ENDED_BUCKET] != RKV_NIL) /* every policy */
        return t->lru_head[RKV_ENDED_BUCKET];
    if (RKV_UNLIKELY(t->hooks.evict_first != NULL)) {
        uint32_t id = t->hooks.evict_first(t, need);
        if (id != RKV_NIL)
            return id;
    }
    if (t->lru_nonempty[0] != 0)
        return t->lru_head[__builtin_ctzll(t->lru_nonempty[0])];
    if (t->lru_nonempty[1] != 0)
        return t->lru_head[64 + __builtin_ctzll(t->lru_nonempty[1])];
    return RKV_NIL;
}

void rkv_lru_unlink(rkv_tree *t, uint32_t id)
{
    uint32_t b = rkv_lru_bucket(t, id);
    rkv_tnode *x = &t->nodes[id];
    if (x->lru_prev != RKV_NIL)
        t->nodes[x->lru_prev].lru_next = x->lru_next;
    else
        t->lru_head[b] = x->lru_next;
    if (x->lru_next != RKV_NIL)
        t->nodes[x->lru_next].lru_prev = x->lru_prev;
    else
        t->lru_tail[b] = x->lru_prev;
    x->lru_prev = x->lru_next = RKV_NIL;
    rkv_lru_mark(t, b);
}

/* Links id between p and n of bucket b (either may be NIL: then id becomes
 * that end). Inline with a constant NIL end, the dead branch folds away, so the
 * push paths cost what they did when written out by hand. */
static inline void rkv_lru_link_end(rkv_tree *t, uint32_t b, uint32_t id, uint32_t p,
                                    uint32_t n)
{
    rkv_tnode *x = &t->nodes[id];
    x->lru_prev = p;
    x->lru_next = n;
    if (p != RKV_NIL)
        t->nodes[p].lru_next = id;
    else
        t->lru_head[b] = id;
    if (n != RKV_NIL)
        t->nodes[n].lru_prev = id;
    else
        t->lru_tail[b] = id;
    rkv_lru_mark(t, b);
}

void rkv_lru_push_tail(rkv_tree *t, uint32_t id)
{
    uint32_t b = rkv_lru_bucket(t, id);
    rkv_lru_link_end(t, b, id, t->lru_tail[b], RKV_NIL);
}

static void rkv_lru_push_head(rkv_tree *t, uint32_t id)
{
    uint32_t b = rkv_lru_bucket(t, id);
    rkv_lru_link_end(t, b, id, RKV_NIL, t->lru_head[b]);
}

/* Inserts id right after `after` (never the tail here). */
static void rkv_lru_insert_after(rkv_tree *t, uint32_t after, uint32_t id)
{
    rkv_tnode *x = &t->nodes[id], *a = &t->nodes[after];
    x->lru_prev = after;
    x->lru_next = a->lru_next;
    t->nodes[a->lru_next].lru_prev = id;
    a->lru_next = id;
}

void rkv_lru_place(rkv_tree *t, uint32_t id)
{
    uint32_t b = rkv_lru_bucket(t, id);
    uint64_t s = t->nodes[id].last_access;
    if (t->lru_head[b] == RKV_NIL || s <= t->nodes[t->lru_head[b]].last_access) {
        rkv_lru_push_head(t, id);
        return;
    }
    if (s >= t->nodes[t->lru_tail[b]].last_access) {
        rkv_lru_push_tail(t, id);
        return;
    }
    /* head < s < tail: walk from both ends; fwd looks for the last node
     * with stamp <= s, bwd for the first from the tail with stamp <= s. */
    uint32_t fwd = t->lru_head[b], bwd = t->lru_tail[b];
    for (;;) {
        t->lru_reorder_steps++;
        uint32_t fn = t->nodes[fwd].lru_next;
        if (t->nodes[fn].last_access > s) {
            rkv_lru_insert_after(t, fwd, id);
            return;
        }
        fwd = fn;
        uint32_t bp = t->nodes[bwd].lru_prev;
        if (t->nodes[bp].last_access <= s) {
            rkv_lru_insert_after(t, bp, id);
            return;
        }
        bwd = bp;
    }
}

void rkv_tree_touch(rkv_tree *t, uint32_t id)
{
    uint64_t c = ++t->clock;
    int listed = rkv_tree_in_lru(&t->nodes[id]);
    if (listed)
        rkv_lru_unlink(t, id);
    /* a use: the path is no longer only an ended session's */
    for (uint32_t y = id; y != 0; y = t->nodes[y].parent) {
        t->nodes[y].last_access = c;
        if (t->retain.meta != NULL)
            t->retain.meta[y].flags[RKV_META_ENDED] = 0;
    }
    if (listed)
        rkv_lru_push_tail(t, id);
}

/* ---- eviction -------------------------------------------------------------- */

void rkv_tree_free_root(rkv_tree *t, uint32_t root)
{
    rkv_child_index_remove(t, rkv_child_index_key_ns(t->nodes[root].u.ns), root);
    rkv_tree_slot_free(t, root);
    t->num_namespaces--;
}

/* Removes an empty, unlocked, childless node (listed in the LRU). */
static void rkv_tree_remove_leaf(rkv_tree *t, uint32_t id)
{
    rkv_tnode *x = &t->nodes[id];
    rkv_lru_unlink(t, id);
    /* the first page's tokens are still in memory: trimming only lowered
     * num_pages */
    rkv_child_index_remove(t, rkv_child_index_key_stored(t, x->parent, x), id);
    uint32_t p = x->parent;
    if (x->prev_sib != RKV_NIL)
        t->nodes[x->prev_sib].next_sib = x->next_sib;
    else
        t->nodes[p].first_child = x->next_sib;
    if (x->next_sib != RKV_NIL)
        t->nodes[x->next_sib].prev_sib = x->prev_sib;
    t->nodes[p].children_epoch = ++t->epoch;
    rkv_node_mem_free(&t->mem, x->u.tokens, rkv_tree_data_bytes(t, x->cap_pages));
    rkv_tree_slot_free(t, id);
    t->num_nodes--;
    t->evicted_nodes++;
    rkv_tnode *px = &t->nodes[p];
    if (px->first_child != RKV_NIL || px->lock_count != 0)
        return;
    if (px->parent == 0) {
        rkv_tree_free_root(t, p); /* an empty namespace root goes too */
    } else {
        rkv_lru_place(t, p);
    }
}

/* Namespace of node id (walks up to its root). */
static uint64_t rkv_tree_node_ns(const rkv_tree *t, uint32_t id)
{
    while (t->nodes[id].parent != 0)
        id = t->nodes[id].parent;
    return t->nodes[id].u.ns;
}

/* Tells the hooks that want them which pages eviction dropped. */
static void rkv_tree_gone(rkv_tree *t, uint64_t ns, const uint64_t *gone,
                          uint32_t n)
{
    if (t->hooks.pages_removed != NULL)
        t->hooks.pages_removed(t, ns, gone, n);
    if (t->hooks.pages_evicted != NULL)
        t->hooks.pages_evicted(t, gone, n);
}

/* Drops leaf id's pages from its tail until need blocks were freed or it
 * is empty (then it goes); returns the blocks freed. */
static uint32_t rkv_tree_drop_tail(rkv_tree *t, uint32_t id, uint32_t need)
{
    rkv_pool *pool = t->pool;
    uint32_t freed = 0;
    const int events = t->hooks.pages_removed != NULL ||
                       t->hooks.pages_evicted != NULL;
    void (*const dropped)(rkv_tree *, rkv_block_id) = t->hooks.page_dropped;
    const int hooked = events || dropped != NULL; /* one test a page */
    uint64_t gone[RKV_EVENT_MAX_HASHES];
    rkv_tnode *x = &t->nodes[id];
    rkv_block_id *xb = rkv_tnode_blocks(t, x);
    uint64_t ns = RKV_UNLIKELY(t->hooks.pages_removed != NULL)
                      ? rkv_tree_node_ns(t, id) : 0;
    uint32_t ngone = 0;
    while (freed < need && x->num_pages > 0) {
        rkv_block_id b = xb[--x->num_pages];
        if (RKV_UNLIKELY(hooked)) {
            if (events) {
                /* read before the drop: a freed block's hash slot is reused */
                gone[ngone++] = pool->hash[b];
                if (ngone == RKV_EVENT_MAX_HASHES) {
                    rkv_tree_gone(t, ns, gone, ngone);
                    ngone = 0;
                }
            }
            if (dropped != NULL)
                dropped(t, b);
        }
        rkv_tree_clear_owned_bit(t, b);
        freed += (uint32_t)rkv_pool_drop_ref(pool, b);
        t->cached_blocks--;
        t->evictable_blocks--;
        t->evicted_blocks++;
    }
    if (ngone > 0)
        rkv_tree_gone(t, ns, gone, ngone);
    if (x->num_pages == 0) {
        rkv_tree_remove_leaf(t, id);
    } else {
        /* trimmed: its end moved, so old handles must go stale */
        rkv_tnode_bump_gen(x);
        t->nodes[x->parent].children_epoch = ++t->epoch;
    }
    return freed;
}

/* The one eviction loop: frees n blocks (fewer when blocks referenced
 * outside the tree run it dry, or when the victim hook gives up because a
 * victim would pass max: *capped). Victims come from rkv_lru_first; the
 * residency layer's hook demotes them instead of dropping their pages. */
static uint32_t rkv_tree_evict_some(rkv_tree *t, uint32_t n, uint32_t max,
                                    int *capped)
{
    uint32_t freed = 0, id;
    while (freed < n && (id = rkv_lru_first(t, n - freed)) != RKV_NIL) {
        if (RKV_UNLIKELY(t->hooks.evict_node != NULL)) {
            freed += t->hooks.evict_node(t, id, n - freed, max - freed,
                                         capped);
            if (*capped)
                break;
        } else {
            freed += rkv_tree_drop_tail(t, id, n - freed);
        }
    }
    return freed;
}

rkv_status rkv_tree_evict(rkv_tree *tree, uint32_t n, uint32_t *freed_out)
{
    if (freed_out != NULL)
        *freed_out = 0;
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_evict: NULL tree");
    if (tree->evictable_blocks < n)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "rkv_tree_evict: %u blocks asked, %llu evictable", n,
                             (unsigned long long)tree->evictable_blocks);
    int capped = 0;
    uint32_t freed = rkv_tree_evict_some(tree, n, UINT32_MAX, &capped);
    if (freed_out != NULL)
        *freed_out = freed;
    if (freed < n)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "rkv_tree_evict: evicted everything evictable but "
                             "freed only %u of %u blocks (others are referenced "
                             "outside the tree)", freed, n);
    return RKV_OK;
}

rkv_status rkv_tree_evict_ids(rkv_tree *tree, uint32_t n, rkv_block_id *ids_out,
                              uint32_t cap, uint32_t *freed_out)
{
    static const char fn[] = "rkv_tree_evict_ids";
    if (freed_out != NULL)
        *freed_out = 0;
    if (tree == NULL || (ids_out == NULL && cap > 0))
        return rkv_null_arg(fn, tree, "tree", "ids_out");
    if (cap < n)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: room for %u ids, %u blocks asked", fn, cap, n);
    if (tree->evictable_blocks < n)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u blocks asked, %llu "
                             "evictable", fn, n,
                             (unsigned long long)tree->evictable_blocks);
    int capped = 0;
    uint32_t freed = rkv_tree_evict_some(tree, n, cap, &capped);
    /* eviction only pushes on the pool's free stack, so what it freed is
     * the top of it */
    rkv_pool_freed_top(tree->pool, freed, ids_out);
    if (freed_out != NULL)
        *freed_out = freed;
    if (freed < n && capped)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: freed %u of %u blocks: the "
                             "next node had to be split to stay within %u ids "
                             "and the split found no memory", fn, freed, n, cap);
    if (freed < n)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: evicted everything evictable "
                             "but freed only %u of %u blocks (others are "
                             "referenced outside the tree)", fn, freed, n);
    return RKV_OK;
}

rkv_status rkv_tree_alloc_blocks(rkv_tree *tree, uint32_t n, rkv_block_id *out)
{
    if (tree == NULL || (out == NULL && n > 0))
        return rkv_null_arg("rkv_tree_alloc_blocks", tree, "tree", "out");
    rkv_pool *pool = tree->pool;
    if (pool->num_free < n) {
        uint32_t need = n - pool->num_free;
        if (tree->evictable_blocks < need) {
            /* pins yield, but only to what nothing else can serve */
            uint64_t pinned = tree->hooks.yieldable != NULL
                                  ? tree->hooks.yieldable(tree) : 0;
            if (tree->evictable_blocks + pinned < need)
                return rkv_set_error(RKV_ERR_NO_SPACE,
                                     "rkv_tree_alloc_blocks: %u blocks asked, %u "
                                     "free + %llu evictable + %llu pinned", n,
                                     pool->num_free,
                                     (unsigned long long)tree->evictable_blocks,
                                     (unsigned long long)pinned);
            tree->hooks.yield(tree, need);
        }
        int capped = 0;
        rkv_tree_evict_some(tree, need, UINT32_MAX, &capped);
    }
    return rkv_pool_alloc_n(pool, n, out);
}

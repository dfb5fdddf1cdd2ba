/*
 * radix/tree_match.c -- match, match_from and insert on the radix tree, and
 * the split and leaf creation they commit. Data structures and invariants:
 * radix/tree_core.h; the prepare-then-commit rule: radix/tree.c.
 *
 * Splits: when a non-peek match (or an insert) ends inside the edge of node
 * X after k pages, a NEW node N takes X's first k pages and X's place under
 * X's parent (it reuses X's index entry: same parent, same first page), and
 * X keeps its tail pages and its children, so the index entries of X's
 * children stay valid and X's handle keeps naming the same end position.
 * N inherits X's lock count (N's subtree locks are exactly X's; the
 * leases keep naming X) and last_access. Both halves get exactly-sized new
 * arrays (one memcpy of the node): keeping X's old array for its tail would
 * avoid a copy but leave the head's bytes allocated twice, and host bytes
 * per cached token matter more than one copy per split.
 *
 * Match does not scan token values (the tree holds only validated tokens),
 * so its cost follows the matched part; insert validates everything.
 *
 * Hooks (radix/tree_core.h): a match reports its use (on_match), a new leaf
 * is announced before it is listed (on_leaf) and its pages after
 * (pages_stored, leaf_added), an insert reports its end (on_insert); with
 * tiers the residency layer plans and moves what an insert over a lower
 * node keeps (insert_*). Each is one pointer test when unregistered.
 */
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree.h"
#include "radix/tree_core.h"
#include "radix/tree_hash.h"
#include "radix/tree_lru.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"

/* ---- the walk -------------------------------------------------------------- */


void rkv_tree_walk(const rkv_tree *t, uint32_t from, uint32_t from_pages,
                   const int32_t *tokens, uint32_t npages,
                   rkv_block_id *blocks_out, const rkv_block_id *given,
                   rkv_block_id *dups_out, rkv_walk *w)
{
    const uint32_t P = t->P;
    uint32_t cur = from, d = from_pages;
    w->partial = RKV_NIL;
    w->partial_pages = 0;
    w->num_dups = 0;
    while (d < npages) {
        const int32_t *q = tokens + (size_t)d * P;
        uint32_t c = rkv_child_index_find(t, cur, q);
        if (c == RKV_NIL)
            break;
        /* the device part ends at a LOWER or LOADING node */
        if (RKV_UNLIKELY(t->tiers.tn != NULL) && t->tiers.tn[c].flags != 0)
            break;
        const rkv_tnode *x = &t->nodes[c];
        uint32_t m = x->num_pages, avail = npages - d;
        uint32_t lim = m < avail ? m : avail;
        uint32_t k = lim > 1 ? rkv_tok_pages_equal(t, x, q, lim) : 1;
        const rkv_block_id *xb = rkv_tnode_blocks(t, x);
        if (blocks_out != NULL)
            memcpy(blocks_out + d, xb, (size_t)k * sizeof *xb);
        if (given != NULL) {
            for (uint32_t i = 0; i < k; i++) {
                if (xb[i] != given[d + i]) {
                    if (dups_out != NULL)
                        dups_out[w->num_dups] = given[d + i];
                    w->num_dups++;
                }
            }
        }
        d += k;
        if (k < m) {
            w->partial = c;
            w->partial_pages = k;
            break;
        }
        cur = c;
    }
    w->node = cur;
    w->pages = d;
}

/* ---- commit helpers (cannot fail) ----------------------------------------- */

uint32_t rkv_tree_new_root(rkv_tree *t, uint64_t ns)
{
    uint32_t r = rkv_tree_slot_take(t);
    rkv_tnode *x = &t->nodes[r];
    x->parent = 0;
    x->u.ns = ns;
    x->last_access = t->clock;
    x->children_epoch = ++t->epoch;
    rkv_child_index_insert(t, rkv_child_index_key_ns(ns), r);
    t->num_namespaces++;
    return r;
}

uint32_t rkv_tree_split(rkv_tree *t, uint32_t xid, uint32_t k, void *head,
                        void *tail)
{
    uint32_t nid = rkv_tree_slot_take(t);
    rkv_tnode *x = &t->nodes[xid], *n = &t->nodes[nid];
    uint32_t m = x->num_pages;
    uint64_t key = rkv_child_index_key_node(t, xid); /* first page, old parent */
    const rkv_block_id *xb = rkv_tnode_blocks(t, x);
    uint8_t *old = x->u.tok8;
    uint32_t old_cap = x->cap_pages;

    /* stored pages move as bytes: either layout (tree_tokens.h) */
    n->u.tok8 = head;
    n->cap_pages = n->num_pages = k;
    memcpy(n->u.tok8, old, (size_t)k * t->page_bytes);
    memcpy(rkv_tnode_blocks(t, n), xb, (size_t)k * sizeof *xb);

    x->u.tok8 = tail;
    x->cap_pages = x->num_pages = m - k;
    memcpy(x->u.tok8, old + (size_t)k * t->page_bytes,
           (size_t)(m - k) * t->page_bytes);
    memcpy(rkv_tnode_blocks(t, x), xb + k, (size_t)(m - k) * sizeof *xb);
    if (RKV_UNLIKELY(t->hooks.split != NULL))
        t->hooks.split(t, xid, nid, old, old_cap, k);
    rkv_node_mem_free(&t->mem, old, rkv_tree_data_bytes(t, old_cap));

    /* n takes x's place among its siblings */
    n->parent = x->parent;
    n->prev_sib = x->prev_sib;
    n->next_sib = x->next_sib;
    if (n->prev_sib != RKV_NIL)
        t->nodes[n->prev_sib].next_sib = nid;
    else if (RKV_UNLIKELY(t->hooks.sib_head != NULL))
        *t->hooks.sib_head(t, n->parent, xid) = nid;
    else
        t->nodes[n->parent].first_child = nid;
    if (n->next_sib != RKV_NIL)
        t->nodes[n->next_sib].prev_sib = nid;
    n->first_child = xid;
    n->lock_count = x->lock_count; /* locked only through x: no lease */
    n->last_access = x->last_access;
    if (t->retain.meta != NULL) /* same pins pass through, same priority */
        t->retain.meta[nid] = t->retain.meta[xid];
    n->children_epoch = ++t->epoch;
    t->nodes[n->parent].children_epoch = ++t->epoch;
    /* lazy pages name their node and index: both pieces moved */
    rkv_tree_lazy_renumber(t, nid);
    rkv_tree_lazy_renumber(t, xid);

    x->parent = nid;
    x->prev_sib = x->next_sib = RKV_NIL;

    rkv_child_index_replace(t, key, xid, nid);
    rkv_child_index_insert(t, rkv_child_index_key_node(t, xid), xid);
    t->num_nodes++;
    t->splits++;
    return nid;
}

uint64_t rkv_tree_prev_hash(const rkv_tree *t, uint32_t parent)
{
    const rkv_tnode *p = &t->nodes[parent];
    if (p->parent == 0)
        return RKV_HASH_ROOT;
    return t->pool->hash[rkv_tnode_blocks(t, p)[p->num_pages - 1]];
}

/* Adds a leaf under parent with npages pages (tokens, blocks); takes a pool
 * reference on each block and sets its chained hash, or marks it lazy
 * (tree_hash.c). The caller has already
 * marked the blocks as tree-owned (rkv_tree_insert validates with them). */
static uint32_t rkv_tree_add_leaf(rkv_tree *t, uint32_t parent, uint64_t ns,
                                  const int32_t *tokens,
                                  const rkv_block_id *blocks, uint32_t npages,
                                  void *data)
{
    rkv_pool *pool = t->pool;
    const uint32_t P = t->P;
    const int lazy = rkv_tree_hash_lazily(t);
    uint64_t h = RKV_HASH_ROOT;
    if (!lazy) {
        rkv_tree_hash_node(t, parent); /* no-op unless it is lazy */
        h = rkv_tree_prev_hash(t, parent);
    }
    if (rkv_tree_in_lru(&t->nodes[parent]))
        rkv_lru_unlink(t, parent);
    uint32_t id = rkv_tree_slot_take(t);
    rkv_tnode *x = &t->nodes[id];
    rkv_tnode *p = &t->nodes[parent];
    x->u.tok8 = data;
    x->cap_pages = x->num_pages = npages;
    rkv_tok_store(t, x->u.tok8, tokens, (size_t)npages * P);
    rkv_block_id *xb = rkv_tnode_blocks(t, x);
    memcpy(xb, blocks, (size_t)npages * sizeof *xb);
    uint64_t parent_hash = h;
    if (lazy) {
        /* hashed when first read (tree_hash.c) */
        t->lazy_live = 1;
        for (uint32_t i = 0; i < npages; i++) {
            pool->refcount[xb[i]]++;
            pool->hash[xb[i]] = ((uint64_t)id << 32) | i;
            rkv_tree_set_lazy(t, xb[i]);
        }
    } else {
        for (uint32_t i = 0; i < npages; i++) {
            h = rkv_block_hash(h, ns, tokens + (size_t)i * P, P);
            pool->refcount[xb[i]]++;
            pool->hash[xb[i]] = h;
            rkv_tree_clear_lazy(t, xb[i]);
        }
    }
    if (RKV_UNLIKELY(t->hooks.pages_stored != NULL))
        t->hooks.pages_stored(t, ns, parent_hash, xb, tokens, npages);
    x->parent = parent;
    x->next_sib = p->first_child;
    if (p->first_child != RKV_NIL)
        t->nodes[p->first_child].prev_sib = id;
    p->first_child = id;
    p->children_epoch = ++t->epoch;
    x->children_epoch = ++t->epoch;
    x->last_access = t->clock;
    rkv_child_index_insert(t, rkv_child_index_key_page(t, parent, tokens), id);
    if (t->hooks.on_leaf != NULL) /* classifies it: before it is listed */
        t->hooks.on_leaf(t, id, parent);
    rkv_lru_push_tail(t, id);
    t->num_nodes++;
    t->cached_blocks += npages;
    t->evictable_blocks += npages;
    t->inserted_pages += npages;
    if (RKV_UNLIKELY(t->hooks.leaf_added != NULL))
        t->hooks.leaf_added(t, id, ns); /* linked: copies may go down */
    return id;
}

/* ---- argument checks ---------------------------------------------------- */

/* The arguments' shape; token values are checked by insert only
 * (rkv_tree_check_values; match does not read them beyond the walk, see
 * rkv_tree_match). */
static rkv_status rkv_tree_check_tokens(const rkv_tree *t, const int32_t *tokens,
                                        size_t n, const char *fn)
{
    if (n > 0 && tokens == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tokens", fn);
    if (n / t->P >= RKV_NIL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: n=%zu too large", fn, n);
    return RKV_OK;
}

/* tokens[from..n) hold only ids the tree can store (non-negative; below
 * 2^24 in a 3-byte tree). */
static rkv_status rkv_tree_check_values(const rkv_tree *t, const int32_t *tokens,
                                        size_t from, size_t n, const char *fn)
{
    if (n <= from || rkv_tok_valid(t, tokens + from, n - from, rkv_tok_bad_bits(t)))
        return RKV_OK;
    if (t->tok_bytes == 4)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: negative token id", fn);
    return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: token id negative or >= 2^24 "
                         "(the tree stores 3-byte ids: token_bytes 3)", fn);
}

/* ---- match ---------------------------------------------------------------- */

static void rkv_match_fill(const rkv_tree *t, rkv_match *out, uint32_t node,
                           uint32_t pages)
{
    out->matched_tokens = (size_t)pages * t->P;
    out->num_blocks = pages;
    out->node.id = node;
    out->node.gen = node == 0 || node == RKV_NIL ? 0 : t->nodes[node].gen;
    if (node == 0 || node == RKV_NIL)
        out->node.id = 0;
}

rkv_status rkv_tree_match(rkv_tree *tree, rkv_namespace ns,
                          const int32_t *tokens, size_t n,
                          rkv_block_id *blocks_out, unsigned flags,
                          rkv_match *out)
{
    static const char fn[] = "rkv_tree_match";
    if (tree == NULL || out == NULL)
        return rkv_null_arg(fn, tree, "tree", "out");
    if (flags & ~RKV_MATCH_PEEK)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: unknown flags %#x", fn,
                             flags);
    /* Token values are not scanned: the tree only holds validated
     * (non-negative) tokens, so a negative id can only end the match, and
     * the cost stays O(matched part + one page) instead of O(n). */
    rkv_status st = rkv_tree_check_tokens(tree, tokens, n, fn);
    if (st != RKV_OK)
        return st;
    rkv_tree *t = tree;
    uint32_t npages = (uint32_t)(n / t->P);
    uint32_t root = rkv_child_index_find_ns(t, ns);
    int peek = (flags & RKV_MATCH_PEEK) != 0;
    rkv_walk w = {root, 0, RKV_NIL, 0, 0};
    if (root != RKV_NIL)
        rkv_tree_walk(t, root, 0, tokens, npages, blocks_out, NULL, NULL, &w);
    if (peek) {
        /* unknown namespace: nothing matched, zeroed (never valid) handle */
        rkv_match_fill(t, out, root == RKV_NIL ? 0 : w.node,
                       w.pages);
        return RKV_OK;
    }
    rkv_tree_prep prep;
    uint32_t node = w.node;
    if (root == RKV_NIL) {
        st = rkv_tree_prepare(t, 1, 0, NULL, &prep, fn);
        if (st != RKV_OK)
            return st;
        rkv_tree_prep_install(t, &prep);
        node = rkv_tree_new_root(t, ns);
    } else if (w.partial != RKV_NIL) {
        uint32_t pages[2] = {w.partial_pages,
                             t->nodes[w.partial].num_pages - w.partial_pages};
        st = rkv_tree_prepare(t, 1, 2, pages, &prep, fn);
        if (st != RKV_OK)
            return st;
        rkv_tree_prep_install(t, &prep);
        node = rkv_tree_split(t, w.partial, w.partial_pages, prep.data[0],
                              prep.data[1]);
    }
    if (t->hooks.on_match != NULL)
        t->hooks.on_match(t, node, ns, tokens, npages, w.pages);
    rkv_tree_touch(t, node);
    t->queried_tokens += n;
    t->hit_tokens += (uint64_t)w.pages * t->P;
    rkv_match_fill(t, out, node, w.pages);
    return RKV_OK;
}

rkv_status rkv_tree_match_from(rkv_tree *tree, rkv_node from,
                               size_t from_tokens, const int32_t *tokens,
                               size_t n, rkv_block_id *blocks_out,
                               rkv_match *out)
{
    static const char fn[] = "rkv_tree_match_from";
    if (tree == NULL || out == NULL)
        return rkv_null_arg(fn, tree, "tree", "out");
    if (!rkv_tree_handle_ok(tree, from))
        return rkv_tree_stale(from, fn);
    if (from_tokens % tree->P != 0 || from_tokens > n)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: from_tokens %zu (n %zu, page size %u)", fn,
                             from_tokens, n, tree->P);
    rkv_status st = rkv_tree_check_tokens(tree, tokens, n, fn);
    if (st != RKV_OK)
        return st;
    rkv_walk w;
    rkv_tree_walk(tree, from.id, (uint32_t)(from_tokens / tree->P), tokens,
                  (uint32_t)(n / tree->P), blocks_out, NULL, NULL, &w);
    rkv_match_fill(tree, out, w.node, w.pages);
    return RKV_OK;
}

/* ---- insert ----------------------------------------------------------------- */

/* the cut pieces of an insert over a lowered prefix and the split of its
 * lower tail use the node arrays of rkv_tree_prep (there is no partial
 * split then) */
_Static_assert(RKV_INSERT_MAX_CUTS + 1 + 2 <= sizeof ((rkv_tree_prep *)0)->data /
                                           sizeof(void *),
               "rkv_tree_prep holds every piece");

rkv_status rkv_tree_insert(rkv_tree *tree, rkv_namespace ns,
                           const int32_t *tokens, size_t n,
                           const rkv_block_id *blocks, rkv_block_id *dups_out,
                           rkv_insert_result *out)
{
    static const char fn[] = "rkv_tree_insert";
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tree", fn);
    rkv_tree *t = tree;
    rkv_status st = rkv_tree_check_tokens(t, tokens, n, fn);
    if (st != RKV_OK)
        return st;
    uint32_t npages = (uint32_t)(n / t->P);
    /* The walk first (read-only): the pages it matches equal cached ones,
     * whose ids were checked when they were inserted, so only the rest of
     * the request is scanned for bad ids -- the same refusals as scanning
     * all of it, in the same order (token values before blocks). */
    uint32_t root = rkv_child_index_find_ns(t, ns);
    rkv_walk w = {root, 0, RKV_NIL, 0, 0};
    if (root != RKV_NIL)
        rkv_tree_walk(t, root, 0, tokens, npages, NULL, blocks, dups_out, &w);
    st = rkv_tree_check_values(t, tokens, (size_t)w.pages * t->P, n, fn);
    if (st != RKV_OK)
        return st;
    if (npages > 0 && blocks == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL blocks", fn);
    const rkv_pool *pool = t->pool;
    for (uint32_t i = 0; i < npages; i++) {
        rkv_block_id b = blocks[i];
        if (b >= pool->cfg.num_blocks || pool->refcount[b] == 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: blocks[%u] = %u is not an allocated block",
                                 fn, i, b);
        if (pool->refcount[b] == UINT32_MAX)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: blocks[%u] = %u ref count is saturated",
                                 fn, i, b);
    }
    uint32_t d = w.pages, fresh = npages - d;
    /* with tiers the walk stops before a LOWER or LOADING node whose first
     * page is the next one: a LOADING one ends the insert there (its pages
     * arrive by the load); a LOWER one is dropped at commit (the caller's
     * freshly computed device pages replace it). Lowered pins through it
     * that the insert covers whole move to the new device path (still
     * lowered: no lease, so no device counter and no pin cap changes --
     * as after a load), which is cut where each ends: the pin keeps
     * exactly its pages, and its owner's retain of the prefix finds the
     * node to take it over. Lowered pins that go on past the insert's end
     * (a recomputed context inserted chunk by chunk) keep their lower
     * pages past it: that part is re-hung under the new device pages.
     * Lower branches with lowered pins that leave the insert's path at a
     * node boundary (a shared prefix's other continuation) are kept the
     * same way, under the new device node cut to end there. Only pins
     * that diverge inside a node of the insert's path lose pages, and
     * those a further cut would need (RKV_INSERT_MAX_CUTS): revoked. The
     * residency layer plans and moves all this (the insert_* hooks). */
    rkv_insert_plan plan;
    plan.conflict = plan.tail = RKV_NIL;
    plan.ncuts = plan.tail_k = 0;
    if (RKV_UNLIKELY(t->hooks.insert_plan != NULL) && root != RKV_NIL &&
        w.partial == RKV_NIL && fresh > 0) {
        t->hooks.insert_plan(t, w.node, d, tokens, &npages, &plan);
        fresh = npages - d;
    }
    const uint32_t ncuts = plan.ncuts, tail_k = plan.tail_k;
    /* A new page's block must not be cached already (anywhere in the tree,
     * or twice in this call): mark them, undo on conflict. */
    uint32_t marked = 0;
    for (; marked < fresh; marked++) {
        rkv_block_id b = blocks[d + marked];
        if (rkv_tree_owned(t, b))
            break;
        rkv_tree_set_owned(t, b);
    }
    if (marked < fresh) {
        if (plan.conflict != RKV_NIL)
            t->hooks.insert_abort(t, &plan);
        rkv_block_id bad = blocks[d + marked];
        uint32_t bad_page = d + marked;
        while (marked-- > 0)
            rkv_tree_clear_owned(t, blocks[d + marked]);
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: block %u for new page %u is already cached "
                             "or given twice", fn, bad, bad_page);
    }
    /* fresh > 0 whenever there is a conflict; ncuts > 0 only then */
    uint32_t add_nodes = (root == RKV_NIL) + (w.partial != RKV_NIL) +
                         (fresh > 0) + ncuts + (tail_k > 0);
    uint32_t pages[3 + RKV_INSERT_MAX_CUTS + 2];
    int ndata = 0;
    if (w.partial != RKV_NIL) {
        pages[ndata++] = w.partial_pages;
        pages[ndata++] = t->nodes[w.partial].num_pages - w.partial_pages;
    }
    for (uint32_t k = 0, at = d; fresh > 0 && k <= ncuts; k++) {
        uint32_t end = k < ncuts ? plan.cuts[k] : npages;
        pages[ndata++] = end - at;
        at = end;
    }
    int tail_di = ndata;
    if (tail_k > 0) {
        pages[ndata++] = tail_k;
        pages[ndata++] = t->nodes[plan.tail].num_pages - tail_k;
    }
    rkv_tree_prep prep;
    memset(&prep, 0, sizeof prep);
    if (add_nodes > 0) {
        st = rkv_tree_prepare(t, add_nodes, ndata, pages, &prep, fn);
        if (st != RKV_OK) {
            for (uint32_t i = 0; i < fresh; i++)
                rkv_tree_clear_owned(t, blocks[d + i]);
            if (plan.conflict != RKV_NIL)
                t->hooks.insert_abort(t, &plan);
            return st;
        }
        rkv_tree_prep_install(t, &prep);
    }
    /* commit */
    uint32_t node = w.node;
    int di = 0;
    if (root == RKV_NIL)
        node = rkv_tree_new_root(t, ns);
    if (w.partial != RKV_NIL) {
        node = rkv_tree_split(t, w.partial, w.partial_pages, prep.data[0],
                              prep.data[1]);
        di = 2;
    }
    if (plan.conflict != RKV_NIL)
        t->hooks.insert_detach(t, &plan, tokens,
                               tail_k > 0 ? prep.data[tail_di] : NULL,
                               tail_k > 0 ? prep.data[tail_di + 1] : NULL);
    uint32_t piece[RKV_INSERT_MAX_CUTS + 1];
    for (uint32_t k = 0, at = d; fresh > 0 && k <= ncuts; k++) {
        uint32_t end = k < ncuts ? plan.cuts[k] : npages;
        node = rkv_tree_add_leaf(t, node, ns, tokens + (size_t)at * t->P,
                                 blocks + at, end - at, prep.data[di++]);
        piece[k] = node;
        at = end;
    }
    if (plan.conflict != RKV_NIL)
        t->hooks.insert_attach(t, &plan, piece, node);
    rkv_tree_touch(t, node);
    if (t->hooks.on_insert != NULL)
        t->hooks.on_insert(t, node);
    if (out != NULL) {
        out->prefix_tokens = (size_t)d * t->P;
        out->cached_tokens = (size_t)npages * t->P;
        out->new_pages = fresh;
        out->num_dups = w.num_dups;
        out->node.id = node;
        out->node.gen = t->nodes[node].gen;
    }
    return RKV_OK;
}

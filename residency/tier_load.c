/*
 * residency/tier_load.c -- the tree's tier operations that follow a path:
 * rkv_tree_match_tiers (device prefix, then the host continuation, or
 * the ticket of another caller's load in flight on it),
 * rkv_tree_load / its completion at poll (promotion), and
 * rkv_tree_store_prefix (swap-out). Design and invariants: residency/tier.c.
 *
 * A load makes the path's LOWER nodes LOADING first (device class, locked
 * by the caller's lease on the deepest one, not matchable, not evictable),
 * then allocates their device blocks -- eviction during that allocation
 * cannot touch the path -- and the bytes move at poll. The lease cannot be
 * released before the ticket completes (rkv_tree_unlock: RKV_ERR_BUSY). A
 * load that fails (allocation at load time; a copy at poll) turns the path
 * back into LOWER nodes with their host copies, frees the device blocks
 * and, at poll, leaves the caller's lease on the node above the path (the
 * device prefix it had). A host copy that fails verification
 * (RKV_ERR_CORRUPT) is dropped with everything below it.
 */
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree.h"
#include "radix/tree_lease.h"
#include "radix/tree_lru.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"
#include "residency/tier.h"

/* ---- conversions ---------------------------------------------------------- */

/* Whether device node y is on its LRU list (the predicate alone does not
 * say it for LOADING nodes, which are never listed while locked and are
 * unlisted by hand around their conversions). */
static int rkv_dev_listed(const rkv_tree *t, uint32_t y)
{
    return t->nodes[y].lru_prev != RKV_NIL ||
           t->lru_head[rkv_lru_bucket(t, y)] == y;
}

/* LOWER y (parent device class) -> LOADING, no blocks yet. */
static void rkv_tier_to_loading(rkv_tree *t, uint32_t y)
{
    rkv_tnode *x = &t->nodes[y];
    uint32_t p = x->parent;
    rkv_host_lru_unlink(t, y);
    rkv_lowered_pin_acct(t, y, 0); /* a lowered pin stays lowered on the device */
    rkv_tier_unlink_sib(t, y);
    if (p != 0 && rkv_dev_listed(t, p))
        rkv_lru_unlink(t, p); /* it gets a device child */
    t->tiers.tn[y].flags = (uint8_t)(RKV_TN_LOADING | (t->tiers.tn[y].flags & RKV_TN_DISK));
    rkv_lowered_pin_acct(t, y, 1); /* counted on the device from here */
    t->tiers.tn[y].lchild = x->first_child;
    x->first_child = RKV_NIL;
    rkv_tier_link_sib(t, p, y);
    rkv_block_id *xb = rkv_tnode_blocks(t, x);
    for (uint32_t i = 0; i < x->num_pages; i++)
        xb[i] = RKV_NIL;
    t->tiers.tier->lower_nodes--;
    t->num_nodes++;
    t->cached_blocks += x->num_pages;
    t->evictable_blocks += x->num_pages; /* the lock moves them */
    rkv_tnode_bump_gen(x);
}

/* LOADING y (unlocked, no device child) -> LOWER, freeing its blocks. */
static void rkv_tier_to_lower(rkv_tree *t, uint32_t y, int have_blocks)
{
    rkv_tnode *x = &t->nodes[y];
    uint32_t p = x->parent;
    rkv_block_id *xb = rkv_tnode_blocks(t, x);
    if (have_blocks)
        for (uint32_t i = 0; i < x->num_pages; i++) {
            rkv_tree_clear_owned(t, xb[i]);
            (void)rkv_pool_drop_ref(t->pool, xb[i]);
            xb[i] = RKV_NIL;
        }
    if (rkv_dev_listed(t, y))
        rkv_lru_unlink(t, y);
    rkv_tier_unlink_sib(t, y);
    rkv_lowered_pin_acct(t, y, 0);
    t->tiers.tn[y].flags = (uint8_t)(RKV_TN_LOWER | (t->tiers.tn[y].flags & RKV_TN_DISK));
    rkv_lowered_pin_acct(t, y, 1);
    x->first_child = t->tiers.tn[y].lchild;
    t->tiers.tn[y].lchild = RKV_NIL;
    rkv_tier_link_sib(t, p, y);
    t->tiers.tier->lower_nodes++;
    t->num_nodes--;
    t->cached_blocks -= x->num_pages;
    t->evictable_blocks -= x->num_pages;
    rkv_tnode_bump_gen(x);
    rkv_host_lru_place(t, y);
    t->nodes[p].children_epoch = ++t->epoch;
    rkv_lowered_pin_enforce(t, y);
}

/* Reverts the LOADING path node..(child of top's parent) bottom-up. The
 * nodes must be unlocked. */
static void rkv_tier_revert_path(rkv_tree *t, uint32_t node, uint32_t above,
                                 int have_blocks)
{
    for (uint32_t y = node; y != above;) {
        uint32_t p = t->nodes[y].parent;
        rkv_tier_to_lower(t, y, have_blocks);
        y = p;
    }
    rkv_tnode *a = &t->nodes[above];
    if (a->first_child == RKV_NIL && a->lock_count == 0 && a->parent != 0 &&
        !rkv_dev_listed(t, above))
        rkv_lru_place(t, above);
}

/* ---- the lower continuation of a path ------------------------------------- */

typedef struct rkv_lwalk {
    uint32_t pages;      /* lower pages matched                            */
    uint32_t host_pages; /* of them, in the first lower store (the host, or
                            the disk when it is the only one); the rest
                            are on the disk below the host              */
    uint32_t last;       /* deepest lower node reached, or RKV_NIL         */
    uint32_t last_pages; /* its matched pages                              */
} rkv_lwalk;

/* From device node `from` at page d, over at most lim pages. */
static void rkv_tier_lower_walk(const rkv_tree *t, uint32_t from, uint32_t d,
                                const int32_t *tokens, uint32_t lim,
                                rkv_lwalk *lw)
{
    const uint32_t P = t->P;
    memset(lw, 0, sizeof *lw);
    lw->last = RKV_NIL;
    uint32_t cur = from;
    while (lw->pages < lim) {
        const int32_t *q = tokens + (size_t)(d + lw->pages) * P;
        uint32_t c = rkv_child_index_find(t, cur, q);
        if (c == RKV_NIL || !(t->tiers.tn[c].flags & RKV_TN_LOWER))
            break;
        const rkv_tnode *x = &t->nodes[c];
        uint32_t avail = lim - lw->pages;
        uint32_t m = x->num_pages < avail ? x->num_pages : avail;
        uint32_t k = rkv_tok_pages_equal(t, x, q, m);
        lw->pages += k;
        if (!(t->tiers.tn[c].flags & RKV_TN_DISK))
            lw->host_pages += k;
        lw->last = c;
        lw->last_pages = k;
        if (k < x->num_pages)
            break;
        cur = c;
    }
}

/* The LOADING continuation from device node `from` at page d (another
 * load's path): its matched pages and the ticket of the load in flight. */
static void rkv_tier_loading_walk(const rkv_tree *t, uint32_t from, uint32_t d,
                                  const int32_t *tokens, uint32_t lim,
                                  uint64_t *ticket, uint32_t *pages)
{
    const uint32_t P = t->P;
    uint32_t cur = from, first = RKV_NIL;
    *ticket = 0;
    *pages = 0;
    while (*pages < lim) {
        const int32_t *q = tokens + (size_t)(d + *pages) * P;
        uint32_t c = rkv_child_index_find(t, cur, q);
        if (c == RKV_NIL || !(t->tiers.tn[c].flags & RKV_TN_LOADING))
            break;
        if (first == RKV_NIL)
            first = c;
        const rkv_tnode *x = &t->nodes[c];
        uint32_t avail = lim - *pages;
        uint32_t m = x->num_pages < avail ? x->num_pages : avail;
        uint32_t k = rkv_tok_pages_equal(t, x, q, m);
        *pages += k;
        if (k < x->num_pages)
            break;
        cur = c;
    }
    if (first == RKV_NIL)
        return;
    const rkv_tier *tr = t->tiers.tier;
    for (uint32_t j = 0; j < tr->njobs && *ticket == 0; j++)
        for (uint32_t y = tr->jobs[j].node; y != tr->jobs[j].top;
             y = t->nodes[y].parent)
            if (y == first) {
                *ticket = tr->jobs[j].ticket;
                break;
            }
}

/* Room for one more in a node-memory array of n used of *cap: the array
 * itself while it has room, else a copy of twice the size (8 at first),
 * the old one freed and *cap updated; NULL (nothing changed) when out of
 * memory. */
static void *rkv_tier_room(rkv_tree *t, void *arr, uint32_t n, uint32_t *cap, size_t elem)
{
    if (n < *cap)
        return arr;
    uint32_t c = *cap ? *cap * 2 : 8;
    void *grown = rkv_node_mem_alloc(&t->mem, (size_t)c * elem);
    if (grown == NULL)
        return NULL;
    if (n)
        memcpy(grown, arr, (size_t)n * elem);
    rkv_node_mem_free(&t->mem, arr, (size_t)*cap * elem);
    *cap = c;
    return grown;
}

static rkv_status rkv_tier_args(const rkv_tree *t, const int32_t *tokens,
                                size_t n, const char *fn)
{
    if (n > 0 && tokens == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tokens", fn);
    if (n / t->P >= RKV_NIL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: n=%zu too large", fn, n);
    return RKV_OK;
}

/* ---- match_tiers ----------------------------------------------------------- */

rkv_status rkv_tree_match_tiers(rkv_tree *tree, rkv_namespace ns,
                                const int32_t *tokens, size_t n,
                                rkv_block_id *blocks_out, unsigned flags,
                                rkv_match *out, rkv_tier_match *tiers_out)
{
    if (tiers_out != NULL)
        memset(tiers_out, 0, sizeof *tiers_out);
    rkv_status st = rkv_tree_match(tree, ns, tokens, n, blocks_out, flags, out);
    if (st != RKV_OK || tree->tiers.tier == NULL)
        return st;
    rkv_tree *t = tree;
    rkv_tier *tr = t->tiers.tier;
    uint32_t npages = (uint32_t)(n / t->P), d = (uint32_t)out->num_blocks;
    if (!(flags & RKV_MATCH_PEEK) && tr->policy == RKV_WRITE_SELECTIVE &&
        out->node.id != 0) {
        /* every page of the matched device path was hit once more (before
         * the lower walk: a copy-down may make room in the host) */
        for (uint32_t y = out->node.id; t->nodes[y].parent != 0;
             y = t->nodes[y].parent) {
            if (++t->tiers.tn[y].hits != tr->k)
                continue;
            for (uint32_t i = 0; i < t->nodes[y].num_pages; i++)
                (void)rkv_tier_queue_store(t, y, i, ns, 0);
        }
    }
    rkv_lwalk lw = {0, 0, RKV_NIL, 0};
    uint64_t lticket = 0;
    uint32_t lpages = 0;
    uint32_t root = rkv_child_index_find_ns(t, ns);
    if (root != RKV_NIL && d < npages) {
        /* a peek match may end inside a node (no split): the lower part
         * can only continue from a node's end */
        rkv_walk w;
        rkv_tree_walk(t, root, 0, tokens, npages, NULL, NULL, NULL, &w);
        if (w.partial == RKV_NIL && w.pages == d) {
            rkv_tier_lower_walk(t, w.node, d, tokens, npages - d, &lw);
            if (lw.pages == 0)
                rkv_tier_loading_walk(t, w.node, d, tokens, npages - d,
                                      &lticket, &lpages);
        }
    }
    if (tiers_out != NULL) {
        size_t lt = (size_t)lw.host_pages * t->P;
        size_t dt = (size_t)(lw.pages - lw.host_pages) * t->P;
        tiers_out->host_tokens = tr->medium == RKV_MEDIUM_HOST ? lt : 0;
        tiers_out->disk_tokens = tr->medium == RKV_MEDIUM_DISK ? lt + dt : dt;
        tiers_out->lower_tokens = (size_t)lw.pages * t->P;
        tiers_out->loading_ticket = lticket;
        tiers_out->loading_tokens = lticket != 0 ? (size_t)lpages * t->P : 0;
    }
    if (!(flags & RKV_MATCH_PEEK)) {
        tr->st.hit_tokens[RKV_MEDIUM_DEVICE] += out->matched_tokens;
        tr->st.hit_tokens[tr->medium] += (uint64_t)lw.host_pages * t->P;
        tr->st.hit_tokens[RKV_MEDIUM_DISK] +=
            (uint64_t)(lw.pages - lw.host_pages) * t->P;
    }
    return RKV_OK;
}

/* ---- load ----------------------------------------------------------------- */

rkv_status rkv_tree_load(rkv_tree *tree, rkv_namespace ns,
                         const int32_t *tokens, size_t n, uint32_t max_pages,
                         rkv_block_id *blocks_out, rkv_load *out)
{
    static const char fn[] = "rkv_tree_load";
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (tree == NULL || out == NULL)
        return rkv_null_arg(fn, tree, "tree", "out");
    rkv_tree *t = tree;
    rkv_status st = rkv_tier_args(t, tokens, n, fn);
    if (st != RKV_OK || t->tiers.tier == NULL)
        return st;
    rkv_tier *tr = t->tiers.tier;
    uint32_t npages = (uint32_t)(n / t->P);
    uint32_t root = rkv_child_index_find_ns(t, ns);
    if (root == RKV_NIL)
        return RKV_OK;
    rkv_walk w;
    rkv_tree_walk(t, root, 0, tokens, npages, NULL, NULL, NULL, &w);
    if (w.partial != RKV_NIL || w.pages >= npages)
        return RKV_OK;
    uint32_t top_parent = w.node, d = w.pages;
    uint32_t lim = npages - d < max_pages ? npages - d : max_pages;
    rkv_lwalk lw;
    rkv_tier_lower_walk(t, top_parent, d, tokens, lim, &lw);
    if (lw.pages == 0)
        return RKV_OK;
    /* everything that can fail before anything changes */
    rkv_load_job *jobs = rkv_tier_room(t, tr->jobs, tr->njobs, &tr->jobs_cap, sizeof *jobs);
    if (jobs == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    tr->jobs = jobs;
    size_t tmp_bytes = (size_t)lw.pages * sizeof(rkv_block_id);
    rkv_block_id *blocks = rkv_node_mem_alloc(&t->mem, tmp_bytes);
    if (blocks == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    uint32_t last = lw.last;
    int split = lw.last_pages < t->nodes[last].num_pages;
    rkv_tree_prep prep;
    memset(&prep, 0, sizeof prep);
    if (split) {
        uint32_t pages[2] = {lw.last_pages,
                             t->nodes[last].num_pages - lw.last_pages};
        st = rkv_tree_prepare(t, 1, 2, pages, &prep, fn);
        if (st != RKV_OK) {
            rkv_node_mem_free(&t->mem, blocks, tmp_bytes);
            return st;
        }
    }
    st = rkv_lease_reserve(t, fn);
    if (st != RKV_OK) {
        if (split)
            rkv_tree_prep_abort(t, &prep);
        rkv_node_mem_free(&t->mem, blocks, tmp_bytes);
        return st;
    }
    if (split) {
        rkv_tree_prep_install(t, &prep);
        last = rkv_tree_split(t, last, lw.last_pages, prep.data[0], prep.data[1]);
    }
    /* the path top-down: collect it by walking up (into blocks, reused as
     * node ids: lw.pages >= number of nodes) */
    uint32_t *path = blocks, np = 0;
    for (uint32_t y = last; y != top_parent; y = t->nodes[y].parent)
        path[np++] = y;
    for (uint32_t i = np; i-- > 0;)
        rkv_tier_to_loading(t, path[i]);
    if (rkv_tree_in_lru(&t->nodes[last]))
        rkv_lru_push_tail(t, last); /* so that the lock takes it out */
    rkv_node h = {last, t->nodes[last].gen};
    (void)rkv_tree_lock(t, h, &out->lease); /* reserved: cannot fail */
    rkv_tree_touch(t, last);
    st = rkv_tree_alloc_blocks(t, lw.pages, blocks);
    if (st != RKV_OK) {
        uint32_t slot = rkv_lease_find(t, out->lease.id);
        rkv_lease_unlock_slot(t, slot, 0);
        rkv_tier_revert_path(t, last, top_parent, 0);
        rkv_node_mem_free(&t->mem, blocks, tmp_bytes);
        memset(out, 0, sizeof *out);
        return st;
    }
    /* blocks in path order: walk down from the top */
    uint32_t y = last;
    while (t->nodes[y].parent != top_parent)
        y = t->nodes[y].parent;
    uint32_t j = 0;
    for (;;) {
        rkv_tnode *x = &t->nodes[y];
        rkv_block_id *xb = rkv_tnode_blocks(t, x);
        for (uint32_t i = 0; i < x->num_pages; i++) {
            rkv_block_id b = blocks[j++];
            xb[i] = b;
            t->pool->hash[b] = rkv_tier_page_hash(t, x, i);
            rkv_tree_set_owned(t, b);
        }
        if (y == last)
            break;
        y = x->first_child; /* the only device child of a LOADING node */
    }
    if (blocks_out != NULL)
        memcpy(blocks_out, blocks, tmp_bytes); /* path order = token order */
    rkv_node_mem_free(&t->mem, blocks, tmp_bytes);
    rkv_load_job *job = &tr->jobs[tr->njobs++];
    job->ticket = tr->next_ticket++;
    job->lease_id = out->lease.id;
    job->ns = ns;
    job->node = last;
    job->top = top_parent;
    job->npages = lw.pages;
    job->kind = RKV_TRANSFER_LOAD;
    job->state = RKV_TLOAD_QUEUED;
    job->batch = 0;
    job->st = RKV_OK;
    job->bad_node = RKV_NIL;
    job->bad_page = 0;
    out->ticket = job->ticket;
    out->num_pages = lw.pages;
    out->disk_pages = tr->medium == RKV_MEDIUM_DISK ? lw.pages
                                                    : lw.pages - lw.host_pages;
    out->device_tokens = (size_t)(d + lw.pages) * t->P;
    return RKV_OK;
}

rkv_transfer_done rkv_tier_finish_load(rkv_tree *t, const rkv_load_job *job)
{
    uint32_t bad_node = RKV_NIL, bad_page = 0;
    rkv_status st = RKV_OK;
    void *stream = rkv_tier_copy_sync_stream(t);
    uint32_t slots[RKV_STORE_BATCH];
    uint64_t hashes[RKV_STORE_BATCH];
    /* a node's pages in chunks: one batched copy each (a disk store reads
     * record by record) */
    for (uint32_t y = job->node; y != job->top && st == RKV_OK;
         y = t->nodes[y].parent) {
        rkv_tnode *x = &t->nodes[y];
        const rkv_block_id *xb = rkv_tnode_blocks(t, x);
        const rkv_page_residency *tp = rkv_tnode_tpages(t, x);
        for (uint32_t i = 0; i < x->num_pages && st == RKV_OK; i += RKV_STORE_BATCH) {
            uint32_t c = x->num_pages - i < RKV_STORE_BATCH ? x->num_pages - i
                                                            : RKV_STORE_BATCH;
            for (uint32_t k = 0; k < c; k++) {
                slots[k] = tp[i + k].slot;
                hashes[k] = rkv_tier_page_hash(t, x, i + k);
            }
            uint32_t bad = 0;
            st = rkv_store_read_to_pool_n(rkv_tier_node_store(t, y), c, slots, t->pool,
                                          xb + i, hashes, job->ns, stream, &bad);
            if (st != RKV_OK) {
                bad_node = y;
                bad_page = i + (bad < c ? bad : 0);
            }
        }
    }
    return rkv_tier_complete_load(t, job, st, bad_node, bad_page);
}

rkv_transfer_done rkv_tier_complete_load(rkv_tree *t, const rkv_load_job *job,
                                         rkv_status st, uint32_t bad_node,
                                         uint32_t bad_page)
{
    rkv_tier *tr = t->tiers.tier;
    rkv_transfer_done done = {job->ticket, job->kind, RKV_OK, 0};
    if (st == RKV_OK) {
        /* top-down: the pages are device pages now */
        uint32_t y = job->node;
        while (t->nodes[y].parent != job->top)
            y = t->nodes[y].parent;
        uint64_t ph = rkv_tier_prev_hash(t, job->top);
        for (;;) {
            rkv_tnode *x = &t->nodes[y];
            rkv_page_residency *tp = rkv_tnode_tpages(t, x);
            int disk = l_is_disk(t, y), med = rkv_tier_node_medium(t, y);
            tr->st.loads_blocks[med] += x->num_pages;
            tr->st.loads_bytes[med] += (uint64_t)x->num_pages * tr->block_bytes;
            /* exclusive tiers under write-back; a disk copy below a host
             * always goes (device pages' copies are host copies) */
            if (tr->policy == RKV_WRITE_BACK || disk)
                for (uint32_t i = 0; i < x->num_pages; i++) {
                    rkv_tier_ev_host(t, y, i, 0);
                    rkv_tier_free_slot(t, disk, tp[i].slot);
                    tp[i].slot = RKV_NO_TSLOT;
                }
            t->tiers.tn[y].flags = 0;
            if (RKV_UNLIKELY(t->events->cap != 0))
                rkv_ev_stored_node(t, job->ns, ph, x);
            ph = rkv_tier_page_hash(t, x, x->num_pages - 1);
            if (y == job->node)
                break;
            y = x->first_child;
        }
        done.num_pages = job->npages;
        return done;
    }
    /* failed: the caller's lease moves to the node above the path */
    tr->st.failed_loads += job->npages;
    done.status = st;
    uint32_t above = job->top;
    for (uint32_t y = job->node; y != above; y = t->nodes[y].parent) {
        rkv_tnode *x = &t->nodes[y];
        x->lock_count--;
        if (x->lock_count == 0) {
            t->locked_blocks -= x->num_pages;
            t->evictable_blocks += x->num_pages;
        }
    }
    uint32_t slot = rkv_lease_find(t, job->lease_id);
    if (slot != RKV_NIL)
        t->leases[slot].node = above;
    rkv_tier_revert_path(t, job->node, above, 1);
    if (st == RKV_ERR_CORRUPT && bad_node != RKV_NIL) {
        tr->st.corrupt_blocks++;
        rkv_tier_drop_lower_from(t, bad_node, bad_page, 1);
    }
    return done;
}

/* ---- swap-out --------------------------------------------------------------- */

rkv_status rkv_tree_store_prefix(rkv_tree *tree, rkv_namespace ns,
                                 const int32_t *tokens, size_t n,
                                 rkv_block_id *blocks_out, uint64_t *ticket,
                                 uint32_t *pages)
{
    static const char fn[] = "rkv_tree_store_prefix";
    if (ticket != NULL)
        *ticket = 0;
    if (pages != NULL)
        *pages = 0;
    if (tree == NULL || ticket == NULL)
        return rkv_null_arg(fn, tree, "tree", "ticket");
    rkv_tree *t = tree;
    if (t->tiers.tier == NULL)
        return rkv_set_error(RKV_ERR_STATE, "%s: no host tier", fn);
    rkv_status st = rkv_tier_args(t, tokens, n, fn);
    if (st != RKV_OK)
        return st;
    rkv_tier *tr = t->tiers.tier;
    uint32_t root = rkv_child_index_find_ns(t, ns);
    if (root == RKV_NIL)
        return RKV_OK;
    rkv_walk w;
    rkv_tree_walk(t, root, 0, tokens, (uint32_t)(n / t->P), NULL, NULL, NULL, &w);
    if (w.pages == 0)
        return RKV_OK;
    rkv_tswap *swaps = rkv_tier_room(t, tr->swaps, tr->nswaps, &tr->swaps_cap, sizeof *swaps);
    if (swaps == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", fn);
    tr->swaps = swaps;
    uint64_t tk = tr->next_ticket++;
    uint32_t queued = 0, end = w.pages; /* end: the node's last page + 1 */
    if (w.partial != RKV_NIL) {
        end -= w.partial_pages;
        const rkv_block_id *xb = rkv_tnode_blocks(t, &t->nodes[w.partial]);
        for (uint32_t i = 0; i < w.partial_pages; i++) {
            int q = rkv_tier_queue_store(t, w.partial, i, ns, tk);
            queued += (uint32_t)q;
            if (blocks_out != NULL)
                blocks_out[end + i] = q ? xb[i] : RKV_NO_BLOCK;
        }
    }
    for (uint32_t y = w.node; t->nodes[y].parent != 0; y = t->nodes[y].parent) {
        const rkv_block_id *xb = rkv_tnode_blocks(t, &t->nodes[y]);
        end -= t->nodes[y].num_pages;
        for (uint32_t i = 0; i < t->nodes[y].num_pages; i++) {
            int q = rkv_tier_queue_store(t, y, i, ns, tk);
            queued += (uint32_t)q;
            if (blocks_out != NULL)
                blocks_out[end + i] = q ? xb[i] : RKV_NO_BLOCK;
        }
    }
    if (blocks_out != NULL) { /* the queued pages' blocks, in token order */
        uint32_t j = 0;
        for (uint32_t k = 0; k < w.pages; k++)
            if (blocks_out[k] != RKV_NO_BLOCK)
                blocks_out[j++] = blocks_out[k];
    }
    if (queued == 0)
        return RKV_OK;
    rkv_tswap *sw = &tr->swaps[tr->nswaps++];
    sw->ticket = tk;
    sw->left = queued;
    sw->done_pages = 0;
    sw->failed = 0;
    *ticket = tk;
    if (pages != NULL)
        *pages = queued;
    return RKV_OK;
}

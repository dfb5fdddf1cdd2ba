/*
 * swa/swa.c -- a hybrid tree's sliding-window KV (include/radixkv/swa.h):
 * attach, the page_dropped hook, the release list, insert, match, release
 * and allocation, stats. Leases: swa_lease.c; invariants: swa_check.c;
 * the state and its invariants: swa/swa.h.
 *
 * Every call checks its arguments and prepares its memory before it
 * changes anything; the core's insert and match are the only steps that
 * can fail after that, and they are taken before this layer commits.
 */
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "swa/swa.h"

#define NO RKV_NO_BLOCK

void rkv_swa_list_unlink(rkv_swa *s, rkv_block_id b)
{
    uint32_t p = s->prev[b], n = s->next[b];
    if (p != NO)
        s->next[p] = n;
    else
        s->head = n;
    if (n != NO)
        s->prev[n] = p;
    else
        s->tail = p;
    s->prev[b] = s->next[b] = NO;
    s->listed--;
}

void rkv_swa_list_push(rkv_swa *s, rkv_block_id b)
{
    s->prev[b] = s->tail;
    s->next[b] = NO;
    if (s->tail != NO)
        s->next[s->tail] = b;
    else
        s->head = b;
    s->tail = b;
    s->listed++;
}

/* A use of attached page b: it becomes the most recently used (a pinned
 * page is not listed; its unpin is its use). */
static void rkv_swa_touch(rkv_swa *s, rkv_block_id b)
{
    if (s->pin[b] != 0 || s->tail == b)
        return;
    rkv_swa_list_unlink(s, b);
    rkv_swa_list_push(s, b);
}

/* Attached page b goes first in the release order (unless pinned). */
static void rkv_swa_demote(rkv_swa *s, rkv_block_id b)
{
    if (s->pin[b] != 0 || s->head == b)
        return;
    rkv_swa_list_unlink(s, b);
    s->prev[b] = NO;
    s->next[b] = s->head;
    s->prev[s->head] = b; /* b was not the head, so the list is not empty */
    s->head = b;
    s->listed++;
}

/* Releases attached page b's SWA block; returns 1 when it became free. */
static int rkv_swa_detach(rkv_swa *s, rkv_block_id b)
{
    uint32_t sb = s->of[b];
    if (s->pin[b] == 0)
        rkv_swa_list_unlink(s, b);
    s->of[b] = NO;
    s->owner[sb] = NO;
    s->attached--;
    return rkv_pool_drop_ref(s->pool, sb);
}

static void rkv_swa_page_dropped(rkv_tree *t, rkv_block_id b)
{
    rkv_swa *s = t->swa;
    if (b < s->nmain && s->of[b] != NO)
        (void)rkv_swa_detach(s, b);
}

static size_t rkv_swa_table_bytes(uint32_t nmain, uint32_t nswa)
{
    return ((size_t)4 * nmain + (size_t)2 * nswa) * sizeof(uint32_t);
}

rkv_status rkv_tree_swa_attach(rkv_tree *tree, rkv_pool *swa_pool,
                               uint32_t window_tokens)
{
    static const char fn[] = "rkv_tree_swa_attach";
    if (tree == NULL || swa_pool == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : "swa_pool");
    if (tree->swa != NULL)
        return rkv_set_error(RKV_ERR_STATE, "%s: the tree is already hybrid", fn);
    if (window_tokens == 0 || window_tokens > (1u << 24))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: window_tokens %u (1..%u)", fn, window_tokens,
                             1u << 24);
    if (swa_pool == tree->pool || swa_pool->tree != NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: the SWA pool must be a pool of its own with "
                             "no tree on it", fn);
    if (swa_pool->cfg.page_size != tree->P)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: SWA pool page size %u, the tree's is %u", fn,
                             swa_pool->cfg.page_size, tree->P);
    if (tree->cached_blocks != 0 || tree->lock_total != 0)
        return rkv_set_error(RKV_ERR_BUSY,
                             "%s: the tree must be empty (%llu pages cached, "
                             "%llu leases held)", fn,
                             (unsigned long long)tree->cached_blocks,
                             (unsigned long long)tree->lock_total);
    uint32_t nmain = tree->pool->cfg.num_blocks, nswa = swa_pool->cfg.num_blocks;
    rkv_swa *s = rkv_node_mem_alloc(&tree->mem, sizeof *s);
    uint32_t *tab = rkv_node_mem_alloc(&tree->mem,
                                       rkv_swa_table_bytes(nmain, nswa));
    if (s == NULL || tab == NULL) {
        rkv_node_mem_free(&tree->mem, s, sizeof *s);
        rkv_node_mem_free(&tree->mem, tab, rkv_swa_table_bytes(nmain, nswa));
        return rkv_set_error(RKV_ERR_NOMEM, "%s: SWA tables", fn);
    }
    memset(s, 0, sizeof *s);
    memset(tab, 0xff, rkv_swa_table_bytes(nmain, nswa)); /* NO everywhere */
    s->pool = swa_pool;
    s->window = window_tokens;
    s->wp = (window_tokens + tree->P - 1) / tree->P;
    s->nmain = nmain;
    s->nswa = nswa;
    s->of = tab;
    s->pin = tab + nmain;
    s->prev = tab + 2 * (size_t)nmain;
    s->next = tab + 3 * (size_t)nmain;
    s->owner = tab + 4 * (size_t)nmain;
    s->seen = s->owner + nswa;
    memset(s->pin, 0, (size_t)nmain * sizeof *s->pin);
    memset(s->seen, 0, (size_t)nswa * sizeof *s->seen);
    s->head = s->tail = NO;
    tree->swa = s;
    tree->hooks.page_dropped = rkv_swa_page_dropped;
    swa_pool->tree = tree; /* no tree may be created on it (and no other
                              hybrid tree attach it) while this one lives */
    return RKV_OK;
}

void rkv_swa_fini(rkv_tree *t)
{
    rkv_swa *s = t->swa;
    if (s == NULL)
        return;
    /* the core dropped every page first: nothing is attached */
    if (s->pool->tree == t)
        s->pool->tree = NULL;
    rkv_node_mem_free(&t->mem, s->path, (size_t)s->path_cap * sizeof *s->path);
    rkv_node_mem_free(&t->mem, s->leases,
                      (size_t)s->leases_cap * sizeof *s->leases);
    rkv_node_mem_free(&t->mem, s->lease_blocks,
                      (size_t)s->leases_cap * s->wp * sizeof *s->lease_blocks);
    rkv_node_mem_free(&t->mem, s->of, rkv_swa_table_bytes(s->nmain, s->nswa));
    rkv_node_mem_free(&t->mem, s, sizeof *s);
    t->swa = NULL;
    t->hooks.page_dropped = NULL;
}

rkv_status rkv_swa_path_reserve(rkv_tree *t, uint32_t pages, const char *fn)
{
    rkv_swa *s = t->swa;
    if (pages <= s->path_cap)
        return RKV_OK;
    uint32_t cap = s->path_cap < 64 ? 64 : s->path_cap;
    while (cap < pages)
        cap = cap > UINT32_MAX / 2 ? pages : cap * 2;
    rkv_block_id *p = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *p);
    if (p == NULL)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: match scratch of %u pages",
                             fn, cap);
    rkv_node_mem_free(&t->mem, s->path, (size_t)s->path_cap * sizeof *s->path);
    s->path = p;
    s->path_cap = cap;
    return RKV_OK;
}

static rkv_status rkv_swa_need(const rkv_tree *t, const char *fn)
{
    if (t == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL tree", fn);
    if (t->swa == NULL)
        return rkv_set_error(RKV_ERR_STATE, "%s: the tree is not hybrid "
                             "(rkv_tree_swa_attach)", fn);
    return RKV_OK;
}

/* Pages of n tokens, refused when they would not fit the scratch's
 * 32-bit count. */
static rkv_status rkv_swa_pages(const rkv_tree *t, size_t n, uint32_t *out,
                                const char *fn)
{
    size_t pages = n / t->P;
    if (pages > UINT32_MAX / 2)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: %zu tokens", fn, n);
    *out = (uint32_t)pages;
    return RKV_OK;
}

/* Checks swa_blocks[0..np) before the insert: in range, allocated, not
 * given twice, and not the SWA page of another page (one already attached
 * to the page the path caches at i is fine: nothing happens). */
static rkv_status rkv_swa_insert_valid(rkv_tree *t, rkv_namespace ns,
                                       const int32_t *tokens, uint32_t np,
                                       const rkv_block_id *swa_blocks)
{
    static const char fn[] = "rkv_tree_swa_insert";
    rkv_swa *s = t->swa;
    if (++s->seen_stamp == 0) { /* wrapped: old stamps could collide */
        memset(s->seen, 0, (size_t)s->nswa * sizeof *s->seen);
        s->seen_stamp = 1;
    }
    int held = 0;
    for (uint32_t i = 0; i < np; i++) {
        rkv_block_id sb = swa_blocks[i];
        if (sb == NO)
            continue;
        if (sb >= s->nswa || s->pool->refcount[sb] == 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: swa_blocks[%u] = %u is %s", fn, i, sb,
                                 sb >= s->nswa ? "out of range" : "free");
        if (s->seen[sb] == s->seen_stamp)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: SWA block %u given twice", fn, sb);
        s->seen[sb] = s->seen_stamp;
        held |= s->owner[sb] != NO;
    }
    if (!held)
        return RKV_OK;
    rkv_match m;
    rkv_status st = rkv_tree_match(t, ns, tokens, (size_t)np * t->P, s->path,
                                   RKV_MATCH_PEEK, &m);
    if (st != RKV_OK)
        return st;
    for (uint32_t i = 0; i < np; i++) {
        rkv_block_id sb = swa_blocks[i];
        if (sb != NO && s->owner[sb] != NO &&
            (i >= m.num_blocks || s->owner[sb] != s->path[i]))
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: SWA block %u is the SWA page of another "
                                 "cached page", fn, sb);
    }
    return RKV_OK;
}

rkv_status rkv_tree_swa_insert(rkv_tree *tree, rkv_namespace ns,
                               const int32_t *tokens, size_t n,
                               const rkv_block_id *blocks,
                               const rkv_block_id *swa_blocks,
                               rkv_block_id *dups_out, rkv_insert_result *out)
{
    static const char fn[] = "rkv_tree_swa_insert";
    rkv_status st = rkv_swa_need(tree, fn);
    if (st != RKV_OK)
        return st;
    uint32_t np = 0;
    if ((st = rkv_swa_pages(tree, n, &np, fn)) != RKV_OK)
        return st;
    if (np > 0 && swa_blocks == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL swa_blocks", fn);
    if ((st = rkv_swa_path_reserve(tree, np, fn)) != RKV_OK)
        return st;
    if (tokens != NULL &&
        (st = rkv_swa_insert_valid(tree, ns, tokens, np, swa_blocks)) != RKV_OK)
        return st;
    rkv_insert_result r;
    if ((st = rkv_tree_insert(tree, ns, tokens, n, blocks, dups_out, &r)) != RKV_OK)
        return st;
    if (out != NULL)
        *out = r;
    /* the pages the call left cached: read back (duplicates name the
     * cached block, not the caller's) -- a peek cannot fail here */
    rkv_swa *s = tree->swa;
    rkv_match m;
    if (rkv_tree_match(tree, ns, tokens, r.cached_tokens, s->path,
                       RKV_MATCH_PEEK, &m) != RKV_OK)
        m.num_blocks = 0;
    uint32_t had = (uint32_t)(r.prefix_tokens / tree->P);
    for (uint32_t i = 0; i < m.num_blocks; i++) {
        rkv_block_id sb = swa_blocks[i], b = s->path[i];
        if (sb == NO)
            continue;
        if (s->of[b] == NO) {
            s->pool->refcount[sb]++; /* allocated: checked above */
            s->of[b] = sb;
            s->owner[sb] = b;
            s->attached++;
            if (s->pin[b] == 0)
                rkv_swa_list_push(s, b);
            if (i < had || b != blocks[i])
                s->revived++;
        }
    }
    /* Release order: a later match is likely to end where this insert
     * ends, and needs the window there; a page given further up keeps its
     * sliding KV only while nothing else needs the room. So the last
     * window's pages become the most recently used (in page order) and the
     * pages above go first, the shallowest first. */
    uint32_t end = m.num_blocks > s->wp ? m.num_blocks - s->wp : 0;
    for (uint32_t i = end; i-- > 0;)
        if (swa_blocks[i] != NO)
            rkv_swa_demote(s, s->path[i]);
    for (uint32_t i = end; i < m.num_blocks; i++)
        if (swa_blocks[i] != NO)
            rkv_swa_touch(s, s->path[i]);
    return RKV_OK;
}

/* Deepest usable end (in pages) of a match of m pages over path: the last
 * min(wp, end) pages hold their SWA page. */
static uint32_t rkv_swa_usable(const rkv_swa *s, const rkv_block_id *path,
                               uint32_t m)
{
    uint32_t best = 0, run = 0;
    for (uint32_t i = 0; i < m; i++) {
        run = s->of[path[i]] != NO ? run + 1 : 0;
        if (run >= (i + 1 < s->wp ? i + 1 : s->wp))
            best = i + 1;
    }
    return best;
}

rkv_status rkv_tree_swa_match(rkv_tree *tree, rkv_namespace ns,
                              const int32_t *tokens, size_t n,
                              rkv_block_id *blocks_out, rkv_block_id *swa_out,
                              unsigned flags, rkv_match *out)
{
    static const char fn[] = "rkv_tree_swa_match";
    if (out != NULL)
        memset(out, 0, sizeof *out);
    rkv_status st = rkv_swa_need(tree, fn);
    if (st != RKV_OK)
        return st;
    if (out == NULL || (tokens == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             out == NULL ? "out" : "tokens");
    uint32_t np = 0;
    if ((st = rkv_swa_pages(tree, n, &np, fn)) != RKV_OK ||
        (st = rkv_swa_path_reserve(tree, np, fn)) != RKV_OK)
        return st;
    rkv_swa *s = tree->swa;
    rkv_match full;
    if ((st = rkv_tree_match(tree, ns, tokens, n, s->path, RKV_MATCH_PEEK,
                             &full)) != RKV_OK)
        return st;
    uint32_t k = rkv_swa_usable(s, s->path, full.num_blocks);
    if ((st = rkv_tree_match(tree, ns, tokens, (size_t)k * tree->P, blocks_out,
                             flags, out)) != RKV_OK)
        return st;
    if (swa_out != NULL)
        for (uint32_t i = 0; i < k; i++)
            swa_out[i] = s->of[s->path[i]];
    if (!(flags & RKV_MATCH_PEEK)) {
        tree->queried_tokens += n - (size_t)k * tree->P;
        s->truncated += (uint64_t)(full.num_blocks - k) * tree->P;
        for (uint32_t i = k > s->wp ? k - s->wp : 0; i < k; i++)
            rkv_swa_touch(s, s->path[i]);
    }
    return RKV_OK;
}

/* Releases from the list head until freed >= n or the list is empty. */
static uint32_t rkv_swa_release(rkv_swa *s, uint32_t n)
{
    uint32_t freed = 0;
    while (freed < n && s->head != NO) {
        freed += (uint32_t)rkv_swa_detach(s, s->head);
        s->released++;
    }
    return freed;
}

rkv_status rkv_tree_swa_evict(rkv_tree *tree, uint32_t n, uint32_t *freed_out)
{
    static const char fn[] = "rkv_tree_swa_evict";
    if (freed_out != NULL)
        *freed_out = 0;
    rkv_status st = rkv_swa_need(tree, fn);
    if (st != RKV_OK)
        return st;
    rkv_swa *s = tree->swa;
    if (s->listed < n)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "%s: %u SWA blocks asked, %llu releasable", fn, n,
                             (unsigned long long)s->listed);
    uint32_t freed = rkv_swa_release(s, n);
    if (freed_out != NULL)
        *freed_out = freed;
    if (freed < n)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "%s: released every releasable SWA page but freed "
                             "only %u of %u blocks (others are referenced "
                             "outside the tree)", fn, freed, n);
    return RKV_OK;
}

rkv_status rkv_tree_swa_alloc(rkv_tree *tree, uint32_t n, rkv_block_id *out)
{
    static const char fn[] = "rkv_tree_swa_alloc";
    rkv_status st = rkv_swa_need(tree, fn);
    if (st != RKV_OK)
        return st;
    if (out == NULL && n > 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL out", fn);
    rkv_swa *s = tree->swa;
    uint32_t have = s->pool->num_free;
    if ((uint64_t)have + s->listed < n)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "%s: %u SWA blocks asked, %u free + %llu "
                             "releasable", fn, n, have,
                             (unsigned long long)s->listed);
    if (have < n && have + rkv_swa_release(s, n - have) < n)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "%s: released every releasable SWA page but "
                             "blocks referenced outside the tree kept %u of "
                             "%u from freeing", fn, n - s->pool->num_free, n);
    return rkv_pool_alloc_n(s->pool, n, out);
}

rkv_status rkv_tree_swa_get_stats(const rkv_tree *tree, rkv_swa_stats *out)
{
    static const char fn[] = "rkv_tree_swa_get_stats";
    rkv_status st = rkv_swa_need(tree, fn);
    if (st != RKV_OK)
        return st;
    if (out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL out", fn);
    const rkv_swa *s = tree->swa;
    memset(out, 0, sizeof *out);
    out->window_tokens = s->window;
    out->window_pages = s->wp;
    out->attached_pages = s->attached;
    out->tombstone_pages = tree->cached_blocks - s->attached;
    out->kept_pages = s->attached - s->listed;
    out->leases = s->nleases;
    out->released_pages = s->released;
    out->revived_pages = s->revived;
    out->truncated_tokens = s->truncated;
    return RKV_OK;
}

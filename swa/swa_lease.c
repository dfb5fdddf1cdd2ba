/*
 * swa/swa_lease.c -- SWA leases (rkv_tree_swa_lock / _unlock): a core
 * lease on the node plus a pin on the SWA pages of the last window up to
 * the node's end, so a running request's window is never released under
 * it. The lease's id is the core lease's; the entry lists the pinned
 * blocks, which stay the path's while the core lease keeps the node
 * (a locked path is never trimmed, and splits keep block ids).
 */
#include <string.h>

#include "common/status.h"
#include "swa/swa.h"

/* A grown lease table, prepared before anything changes and installed
 * once the core lease is taken (or freed when that fails). */
typedef struct rkv_swa_grow {
    rkv_swa_lease_ent *e;
    rkv_block_id *b;
    uint32_t cap;
} rkv_swa_grow;

static rkv_status rkv_swa_lease_prepare(rkv_tree *t, rkv_swa_grow *g,
                                        const char *fn)
{
    rkv_swa *s = t->swa;
    g->e = NULL;
    g->b = NULL;
    g->cap = 0;
    if (s->nleases < s->leases_cap)
        return RKV_OK;
    uint32_t cap = s->leases_cap == 0 ? 16 : s->leases_cap * 2;
    if (cap > RKV_LEASE_MAX_SLOTS)
        return rkv_set_error(RKV_ERR_STATE, "%s: %u SWA leases held", fn,
                             s->nleases);
    g->e = rkv_node_mem_alloc(&t->mem, (size_t)cap * sizeof *g->e);
    g->b = rkv_node_mem_alloc(&t->mem, (size_t)cap * s->wp * sizeof *g->b);
    g->cap = cap;
    if (g->e == NULL || g->b == NULL) {
        rkv_node_mem_free(&t->mem, g->e, (size_t)cap * sizeof *g->e);
        rkv_node_mem_free(&t->mem, g->b, (size_t)cap * s->wp * sizeof *g->b);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: SWA lease table", fn);
    }
    return RKV_OK;
}

static void rkv_swa_lease_install(rkv_tree *t, rkv_swa_grow *g, int keep)
{
    rkv_swa *s = t->swa;
    if (g->cap == 0)
        return;
    size_t eb = sizeof *s->leases, bb = (size_t)s->wp * sizeof *s->lease_blocks;
    if (!keep) {
        rkv_node_mem_free(&t->mem, g->e, g->cap * eb);
        rkv_node_mem_free(&t->mem, g->b, g->cap * bb);
        return;
    }
    if (s->nleases > 0) {
        memcpy(g->e, s->leases, s->nleases * eb);
        memcpy(g->b, s->lease_blocks, s->nleases * bb);
    }
    rkv_node_mem_free(&t->mem, s->leases, s->leases_cap * eb);
    rkv_node_mem_free(&t->mem, s->lease_blocks, s->leases_cap * bb);
    s->leases = g->e;
    s->lease_blocks = g->b;
    s->leases_cap = g->cap;
}

/* The last min(wp, depth) pages' blocks up to node id's end, into out
 * (deepest first); returns how many. */
static uint32_t rkv_swa_window_blocks(const rkv_tree *t, uint32_t id,
                                      rkv_block_id *out)
{
    uint32_t n = 0, wp = t->swa->wp;
    for (uint32_t y = id; y != 0 && n < wp; y = t->nodes[y].parent) {
        const rkv_tnode *x = &t->nodes[y];
        if (x->parent == 0)
            break; /* a namespace root holds no page */
        const rkv_block_id *xb = rkv_tnode_blocks(t, x);
        for (uint32_t i = x->num_pages; i-- > 0 && n < wp;)
            out[n++] = xb[i];
    }
    return n;
}

rkv_status rkv_tree_swa_lock(rkv_tree *tree, rkv_node node, rkv_swa_lease *out)
{
    static const char fn[] = "rkv_tree_swa_lock";
    if (out != NULL)
        out->id = 0;
    if (tree == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : "out");
    if (tree->swa == NULL)
        return rkv_set_error(RKV_ERR_STATE, "%s: the tree is not hybrid "
                             "(rkv_tree_swa_attach)", fn);
    if (!rkv_tree_handle_ok(tree, node))
        return rkv_tree_stale(node, fn);
    rkv_swa_grow g;
    rkv_status st = rkv_swa_lease_prepare(tree, &g, fn);
    if (st != RKV_OK)
        return st;
    rkv_lease l;
    st = rkv_tree_lock(tree, node, &l);
    rkv_swa_lease_install(tree, &g, st == RKV_OK);
    if (st != RKV_OK)
        return st;
    rkv_swa *s = tree->swa;
    rkv_swa_lease_ent *e = &s->leases[s->nleases];
    rkv_block_id *bl = s->lease_blocks + (size_t)s->nleases * s->wp;
    e->id = l.id;
    e->n = rkv_swa_window_blocks(tree, node.id, bl);
    e->pad = 0;
    for (uint32_t i = 0; i < e->n; i++) {
        rkv_block_id b = bl[i];
        if (s->pin[b]++ == 0 && s->of[b] != RKV_NO_BLOCK)
            rkv_swa_list_unlink(s, b);
    }
    s->nleases++;
    out->id = l.id;
    return RKV_OK;
}

rkv_status rkv_tree_swa_unlock(rkv_tree *tree, rkv_swa_lease *lease)
{
    static const char fn[] = "rkv_tree_swa_unlock";
    if (tree == NULL || lease == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : "lease");
    if (tree->swa == NULL)
        return rkv_set_error(RKV_ERR_STATE, "%s: the tree is not hybrid "
                             "(rkv_tree_swa_attach)", fn);
    rkv_swa *s = tree->swa;
    uint32_t k = 0;
    while (k < s->nleases && (lease->id == 0 || s->leases[k].id != lease->id))
        k++;
    if (k == s->nleases)
        return rkv_set_error(RKV_ERR_STATE,
                             "%s: lease %#llx is not an SWA lease held in this "
                             "tree", fn, (unsigned long long)lease->id);
    rkv_lease l = {lease->id};
    rkv_status st = rkv_tree_unlock(tree, &l);
    if (st != RKV_OK)
        return st;
    /* unpinned in window order, oldest page first: the page nearest the
     * node's end becomes the most recently used */
    const rkv_block_id *bl = s->lease_blocks + (size_t)k * s->wp;
    for (uint32_t i = s->leases[k].n; i-- > 0;) {
        rkv_block_id b = bl[i];
        if (--s->pin[b] == 0 && s->of[b] != RKV_NO_BLOCK)
            rkv_swa_list_push(s, b);
    }
    uint32_t last = --s->nleases;
    if (k != last) {
        s->leases[k] = s->leases[last];
        memcpy(s->lease_blocks + (size_t)k * s->wp,
               s->lease_blocks + (size_t)last * s->wp,
               (size_t)s->wp * sizeof *bl);
    }
    lease->id = 0;
    return RKV_OK;
}

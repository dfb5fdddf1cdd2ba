/*
 * residency/tier_warm.c -- warm restart: at attach, the records of a disk
 * store reopened on its file (rkv_store_config.warm_restart) become LOWER
 * disk-resident nodes of the tree again, so their prefixes hit as before
 * the stop. Writing side: the tree hands each page's chain (parent hash,
 * token ids) to the disk store before a write (rkv_tier_set_chain), and
 * the record carries it (tier/disk_record.h).
 *
 * Rebuild: the store's scan (rkv_store_warm_scan) verifies every record
 * and claims the slots of the valid ones; here each record is checked
 * once more against the tree -- a full page of tokens, no id the tree
 * cannot store (negative, or >= 2^24 in a 3-byte tree: records keep int32
 * ids whatever tree wrote them, so one is dropped, never truncated), and
 * a chained hash that rkv_block_hash(parent, ns, tokens) reproduces
 * (so the tokens are the page the hash names, whatever wrote the file) --
 * then the records form chains by (ns, parent hash), from the namespace's
 * root page (parent RKV_HASH_ROOT) down. Dropped, their slots freed and
 * counted (rkv_store_info.warm_dropped): records without tokens, those
 * failing the check, duplicates of a (ns, hash) already taken, and orphans
 * (no chain from a root reaches them: a parent evicted, torn or corrupt
 * before the stop). Each kept record becomes a one-page LOWER node (DISK
 * as well under a host + disk chain) hanging under its parent's node or
 * the namespace root (tn[root].lchild), indexed, on the lowest tier's LRU
 * when a leaf, in parent-before-child order so every link target exists.
 * One page a node: merging would save nodes but the first eviction would
 * split them again; a chain of one-page nodes is a valid tree shape (a
 * partial demotion leaves the same).
 *
 * Flush (rkv_tree_tier_flush), for a clean stop: only the disk survives
 * a restart, and the tree's hottest pages -- the shared prefixes, parents
 * of everything below -- are on the device or the host, so without it the
 * disk's pages would come back as orphans. Every evictable device page is
 * demoted (write-back, as rkv_tree_evict) and, with a host above the
 * disk, every host page is written down by the host's own LRU write-back
 * (frontier first, so a parent follows its children) until the host is
 * empty; the disk's LRU makes room as usual when it is full.
 *
 * Best effort: memory that runs out drops the remaining records (freed,
 * counted) and attach still succeeds -- a restart with fewer hits, never
 * a failure to start. The tree is empty at attach, so no rebuilt node
 * can meet a device node.
 */
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "radix/child_index.h"
#include "radix/tree.h"
#include "radix/tree_match.h"
#include "radix/tree_tokens.h"
#include "residency/tier.h"

/* One record the scan handed over. */
typedef struct warm_rec {
    uint64_t hash, ns, parent;
    uint32_t slot;
    uint32_t tok;      /* offset of its tokens in the token array, or
                          UINT32_MAX: no usable tokens                     */
    uint32_t kid, sib; /* first child / next sibling in the chain forest  */
    uint32_t pnode;    /* on the stack: its parent's node                 */
    uint32_t node;     /* its node once inserted, else RKV_NIL            */
} warm_rec;

typedef struct warm_set {
    const rkv_tree *t;
    warm_rec *r;
    size_t n, cap;
    int32_t *tok;
    size_t ntok, tokcap;
    int nomem;
} warm_set;

static int warm_collect(void *ctx, const rkv_warm_rec *w)
{
    warm_set *s = ctx;
    const uint32_t P = s->t->P;
    if (s->n == s->cap) {
        size_t c = s->cap == 0 ? 64 : s->cap * 2;
        warm_rec *p = c > SIZE_MAX / sizeof *p ? NULL : realloc(s->r, c * sizeof *p);
        if (p == NULL)
            goto full;
        s->r = p;
        s->cap = c;
    }
    uint32_t tok = UINT32_MAX;
    if (w->ntokens == P && s->ntok + P <= UINT32_MAX) {
        if (s->ntok + P > s->tokcap) {
            size_t c = s->tokcap == 0 ? (size_t)64 * P : s->tokcap * 2;
            int32_t *p = c > SIZE_MAX / sizeof *p ? NULL : realloc(s->tok, c * sizeof *p);
            if (p == NULL)
                goto full;
            s->tok = p;
            s->tokcap = c;
        }
        memcpy(s->tok + s->ntok, w->tokens, (size_t)P * sizeof *w->tokens);
        tok = (uint32_t)s->ntok;
        s->ntok += P;
    }
    s->r[s->n++] = (warm_rec){w->hash, w->ns, w->parent, w->slot, tok, RKV_NIL, RKV_NIL,
                              RKV_NIL, RKV_NIL};
    return 0;
full:
    /* the slot was claimed for this record: it must be freed with the
     * rest, so it is kept without tokens (dropped below) when there is
     * room for it, else the scan stops and the caller frees what it can */
    s->nomem = 1;
    if (s->n < s->cap) {
        s->r[s->n++] = (warm_rec){w->hash, w->ns, w->parent, w->slot, UINT32_MAX,
                                  RKV_NIL, RKV_NIL, RKV_NIL, RKV_NIL};
        return 0;
    }
    return 1;
}

/* Open-addressing table (ns, hash) -> record index, for the parent links. */
typedef struct warm_map {
    uint32_t *e; /* RKV_NIL: empty */
    size_t mask;
} warm_map;

static size_t warm_slot_of(uint64_t hash, uint64_t ns, size_t mask)
{
    uint64_t k = hash ^ (ns * 0x9e3779b97f4a7c15ull);
    k ^= k >> 29;
    return (size_t)(k * 0xbf58476d1ce4e5b9ull) & mask;
}

static int warm_map_init(warm_map *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n && cap < SIZE_MAX / 4)
        cap *= 2;
    m->e = malloc(cap * sizeof *m->e);
    if (m->e == NULL)
        return 0;
    for (size_t i = 0; i < cap; i++)
        m->e[i] = RKV_NIL;
    m->mask = cap - 1;
    return 1;
}

/* The record of (ns, hash), or RKV_NIL; with add, i is entered when
 * absent (the first of equal records wins). */
static uint32_t warm_map_find(warm_map *m, const warm_rec *r, uint64_t hash, uint64_t ns,
                              uint32_t add)
{
    for (size_t h = warm_slot_of(hash, ns, m->mask);; h = (h + 1) & m->mask) {
        uint32_t i = m->e[h];
        if (i == RKV_NIL) {
            if (add != RKV_NIL)
                m->e[h] = add;
            return RKV_NIL;
        }
        if (r[i].hash == hash && r[i].ns == ns)
            return i;
    }
}

/* The namespace root of ns, made when missing. RKV_NIL: no memory. */
static uint32_t warm_root(rkv_tree *t, uint64_t ns)
{
    uint32_t r = rkv_child_index_find_ns(t, ns);
    if (r != RKV_NIL)
        return r;
    rkv_tree_prep prep;
    if (rkv_tree_prepare(t, 1, 0, NULL, &prep, "rkv_tree_attach_tiers") != RKV_OK)
        return RKV_NIL;
    rkv_tree_prep_install(t, &prep);
    return rkv_tree_new_root(t, ns);
}

/* Record i as a one-page LOWER node under parent (a namespace root or a
 * rebuilt node). RKV_NIL: no memory. */
static uint32_t warm_node(rkv_tree *t, uint32_t parent, const warm_rec *w,
                          const int32_t *tokens, int disk)
{
    rkv_tier *tr = t->tiers.tier;
    uint32_t one = 1;
    rkv_tree_prep prep;
    if (rkv_tree_prepare(t, 1, 1, &one, &prep, "rkv_tree_attach_tiers") != RKV_OK)
        return RKV_NIL;
    rkv_tree_prep_install(t, &prep);
    uint32_t id = rkv_tree_slot_take(t);
    rkv_tnode *x = &t->nodes[id];
    x->u.tokens = prep.data[0];
    x->num_pages = x->cap_pages = 1;
    x->last_access = t->clock;
    x->children_epoch = ++t->epoch;
    rkv_tok_store(t, x->u.tok8, tokens, t->P); /* checked by warm_valid */
    rkv_tnode_blocks(t, x)[0] = RKV_NIL;
    rkv_page_residency *tp = rkv_tnode_tpages(t, x);
    tp[0].slot = w->slot;
    tp[0].hlo = (uint32_t)w->hash;
    tp[0].hhi = (uint32_t)(w->hash >> 32);
    t->tiers.tn[id].flags = (uint8_t)(RKV_TN_LOWER | (disk ? RKV_TN_DISK : 0));
    rkv_child_index_insert(t, rkv_child_index_key_page(t, parent, tokens), id);
    rkv_tier_link_sib(t, parent, id);
    t->nodes[parent].children_epoch = ++t->epoch;
    tr->lower_nodes++;
    if (disk)
        tr->disk_used++;
    else
        tr->host_used++;
    return id;
}

/* Whether record w's tokens are the page its hash names. */
static int warm_valid(const rkv_tree *t, const warm_rec *w, const int32_t *tokens)
{
    return w->tok != UINT32_MAX &&
           rkv_tokens_valid_bits(tokens, t->P, rkv_tok_bad_bits(t)) &&
           rkv_block_hash(w->parent, w->ns, tokens, t->P) == w->hash;
}

void rkv_tier_warm_rebuild(rkv_tree *t)
{
    rkv_tier *tr = t->tiers.tier;
    int disk = tr->disk != NULL;
    rkv_store *s = disk ? tr->disk : tr->host;
    if (!rkv_store_warm_pending(s) || rkv_store_page_tokens(s) != t->P)
        return;
    warm_set set = {t, NULL, 0, 0, NULL, 0, 0, 0};
    (void)rkv_store_warm_scan(s, warm_collect, &set);
    uint64_t dropped = 0;
    warm_map map = {NULL, 0};
    int have_map = set.n > 0 && warm_map_init(&map, set.n);
    if (have_map) {
        /* dedupe and validate; then link each record under its parent */
        uint32_t roots = RKV_NIL;
        for (uint32_t i = 0; i < set.n; i++) {
            warm_rec *w = &set.r[i];
            /* (no ids at all: set.tok may be NULL, and w->tok is then
             * UINT32_MAX, which warm_valid refuses before reading) */
            if (!warm_valid(t, w, w->tok == UINT32_MAX ? NULL : set.tok + w->tok) ||
                warm_map_find(&map, set.r, w->hash, w->ns, i) != RKV_NIL)
                w->tok = UINT32_MAX; /* dropped below */
        }
        for (uint32_t i = 0; i < set.n; i++) {
            warm_rec *w = &set.r[i];
            if (w->tok == UINT32_MAX)
                continue;
            uint32_t p = w->parent == RKV_HASH_ROOT
                             ? RKV_NIL
                             : warm_map_find(&map, set.r, w->parent, w->ns, RKV_NIL);
            if (w->parent == RKV_HASH_ROOT) {
                w->sib = roots;
                roots = i;
            } else if (p != RKV_NIL && set.r[p].tok != UINT32_MAX) {
                w->sib = set.r[p].kid;
                set.r[p].kid = i;
            }
        }
        /* parents before children: a stack of records whose parent node
         * exists (the roots first) */
        uint32_t stack = roots;
        while (stack != RKV_NIL) {
            warm_rec *w = &set.r[stack];
            stack = w->sib;
            uint32_t parent = w->parent == RKV_HASH_ROOT ? warm_root(t, w->ns) : w->pnode;
            if (parent == RKV_NIL)
                continue; /* no memory: it and its subtree are dropped */
            w->node = warm_node(t, parent, w, set.tok + w->tok, disk);
            if (w->node == RKV_NIL)
                continue;
            rkv_tier_ev_host(t, w->node, 0, 1); /* parents' events first */
            for (uint32_t c = w->kid; c != RKV_NIL;) {
                uint32_t next = set.r[c].sib;
                set.r[c].pnode = w->node;
                set.r[c].sib = stack;
                stack = c;
                c = next;
            }
        }
    }
    /* what did not become a node leaves: its slot is freed; the lowest
     * tier's LRU lists the leaves */
    for (uint32_t i = 0; i < set.n; i++) {
        warm_rec *w = &set.r[i];
        if (w->node == RKV_NIL) {
            (void)rkv_store_slot_free(s, w->slot);
            dropped++;
        }
    }
    for (uint32_t i = 0; i < set.n; i++) {
        const warm_rec *w = &set.r[i];
        if (w->node != RKV_NIL)
            rkv_host_lru_place(t, w->node);
    }
    rkv_store_warm_dropped(s, dropped);
    free(map.e);
    free(set.r);
    free(set.tok);
}

rkv_status rkv_tree_tier_flush(rkv_tree *tree)
{
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_tier_flush: NULL tree");
    rkv_tree *t = tree;
    if (t->tiers.tier == NULL)
        return rkv_set_error(RKV_ERR_STATE, "rkv_tree_tier_flush: no tier attached");
    uint64_t ev = t->evictable_blocks;
    if (ev > 0)
        (void)rkv_tree_evict(t, ev > UINT32_MAX ? UINT32_MAX : (uint32_t)ev, NULL);
    if (t->tiers.tier->disk != NULL)
        while (t->tiers.tier->host_used > 0 && rkv_tier_host_make_room(t))
            ;
    return RKV_OK;
}

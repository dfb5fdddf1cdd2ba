/*
 * radix/child_index.c -- the one hash index of every node under its parent.
 *
 * Owns: t->idx, an open-addressing table (linear probing, power-of-two
 * capacity, load <= 3/4, backward-shift deletion so there are no
 * tombstones). Why one global table instead of a table per node: a node
 * with a single child (the common case inside long prompts) pays nothing
 * extra, and a node with thousands of children (agentic fan-out under one
 * system prompt) still finds a child in O(1) expected.
 *
 * Invariants: idx_count == non-empty entries == nodes in use (roots
 * included); every node is reachable from its home slot (tag & mask)
 * through a run of non-empty entries; keys are recomputed from the node, so
 * an entry needs only 8 bytes. Growth is prepared by the caller (the new
 * table is allocated before any mutation) and installed by
 * rkv_child_index_rehash.
 */
#include <string.h>

/* Inline: most hashed inputs are one 64-byte page, where the library
 * call costs as much as the hash. Same algorithm, same values. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "radix/child_index.h"
#include "radix/tree_core.h"
#include "radix/tree_tokens.h"

uint64_t rkv_child_index_key_page(const rkv_tree *t, uint32_t parent,
                           const int32_t *page)
{
    return XXH3_64bits_withSeed(page, (size_t)t->P * sizeof *page,
                                (uint64_t)parent);
}

uint64_t rkv_child_index_key_ns(uint64_t ns)
{
    /* Seed 0 is the super-root's id: only namespace roots sit under it. */
    return XXH3_64bits_withSeed(&ns, sizeof ns, 0);
}

/* A packed node's key: the int32 form of its first page (keys never
 * depend on the layout, so a query's key is hashed from the query). Not
 * inlined: its buffer stays off the callers' frames. */
static __attribute__((noinline)) uint64_t
rkv_child_index_key_packed(const rkv_tree *t, uint32_t parent, const uint8_t *s)
{
    int32_t page[RKV_MAX_PAGE_SIZE];
    rkv_tok_load(t, page, s, t->P);
    return rkv_child_index_key_page(t, parent, page);
}

uint64_t rkv_child_index_key_stored(const rkv_tree *t, uint32_t parent,
                                    const rkv_tnode *x)
{
    if (t->tok_bytes == 4)
        return rkv_child_index_key_page(t, parent, x->u.tokens);
    return rkv_child_index_key_packed(t, parent, x->u.tok8);
}

uint64_t rkv_child_index_key_node(const rkv_tree *t, uint32_t id)
{
    const rkv_tnode *x = &t->nodes[id];
    if (x->parent == 0)
        return rkv_child_index_key_ns(x->u.ns);
    return rkv_child_index_key_stored(t, x->parent, x);
}

static inline uint32_t rkv_child_index_tag(uint64_t key)
{
    return (uint32_t)(key >> 32);
}

/* The probe both finds share: page != NULL looks for parent's child whose
 * first page is `page`; page == NULL for the root's child of namespace ns.
 * Inlined into each, where `page` is known, so the hot page lookup pays
 * nothing for the namespace case. */
static inline uint32_t rkv_child_index_probe(const rkv_tree *t, uint64_t key,
                                             uint32_t parent, const int32_t *page,
                                             uint64_t ns)
{
    uint32_t tag = rkv_child_index_tag(key), mask = t->idx_cap - 1;
    for (uint32_t i = tag & mask;; i = (i + 1) & mask) {
        const rkv_child_index_entry *e = &t->idx[i];
        if (e->id == RKV_NIL)
            return RKV_NIL;
        if (e->tag == tag) {
            const rkv_tnode *x = &t->nodes[e->id];
            if (x->parent == parent &&
                (page != NULL ? rkv_tok_eq(t, x->u.tok8, page, t->P)
                              : x->u.ns == ns))
                return e->id;
        }
    }
}

uint32_t rkv_child_index_find(const rkv_tree *t, uint32_t parent, const int32_t *page)
{
    return rkv_child_index_probe(t, rkv_child_index_key_page(t, parent, page), parent,
                                 page, 0);
}

uint32_t rkv_child_index_find_ns(const rkv_tree *t, uint64_t ns)
{
    return rkv_child_index_probe(t, rkv_child_index_key_ns(ns), 0, NULL, ns);
}

static void rkv_child_index_put(rkv_child_index_entry *tab, uint32_t mask, uint32_t tag,
                         uint32_t id)
{
    uint32_t i = tag & mask;
    while (tab[i].id != RKV_NIL)
        i = (i + 1) & mask;
    tab[i].tag = tag;
    tab[i].id = id;
}

void rkv_child_index_insert(rkv_tree *t, uint64_t key, uint32_t id)
{
    rkv_child_index_put(t->idx, t->idx_cap - 1, rkv_child_index_tag(key), id);
    t->idx_count++;
}

static uint32_t rkv_child_index_pos(const rkv_tree *t, uint64_t key, uint32_t id)
{
    uint32_t tag = rkv_child_index_tag(key), mask = t->idx_cap - 1;
    uint32_t i = tag & mask;
    /* The entry exists (caller's invariant); the bound guards a corrupted
     * table from looping forever. */
    for (uint32_t n = 0; n < t->idx_cap; n++, i = (i + 1) & mask)
        if (t->idx[i].id == id)
            return i;
    return RKV_NIL;
}

void rkv_child_index_replace(rkv_tree *t, uint64_t key, uint32_t old_id,
                      uint32_t new_id)
{
    uint32_t i = rkv_child_index_pos(t, key, old_id);
    if (i != RKV_NIL)
        t->idx[i].id = new_id;
}

void rkv_child_index_remove(rkv_tree *t, uint64_t key, uint32_t id)
{
    uint32_t mask = t->idx_cap - 1;
    uint32_t i = rkv_child_index_pos(t, key, id);
    if (i == RKV_NIL)
        return;
    /* Backward shift: pull later entries of the run into the hole when
     * their home is not cyclically inside (hole, entry]. */
    for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        rkv_child_index_entry e = t->idx[j];
        if (e.id == RKV_NIL)
            break;
        uint32_t home = e.tag & mask;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->idx[i] = e;
            i = j;
        }
    }
    t->idx[i].id = RKV_NIL;
    t->idx[i].tag = 0;
    t->idx_count--;
}

void rkv_child_index_clear(rkv_child_index_entry *tab, uint32_t cap)
{
    for (uint32_t i = 0; i < cap; i++) {
        tab[i].tag = 0;
        tab[i].id = RKV_NIL;
    }
}

void rkv_child_index_rehash(rkv_tree *t, rkv_child_index_entry *fresh, uint32_t cap)
{
    rkv_child_index_clear(fresh, cap);
    for (uint32_t i = 0; i < t->idx_cap; i++)
        if (t->idx[i].id != RKV_NIL)
            rkv_child_index_put(fresh, cap - 1, t->idx[i].tag, t->idx[i].id);
    rkv_node_mem_free(&t->mem, t->idx, (size_t)t->idx_cap * sizeof *t->idx);
    t->idx = fresh;
    t->idx_cap = cap;
}

uint32_t rkv_child_index_cap_for(uint64_t count)
{
    uint64_t cap = 64;
    while (count * 4 > cap * 3)
        cap *= 2;
    return cap > (1ull << 31) ? (uint32_t)(1ull << 31) : (uint32_t)cap;
}

/*
 * treeapi/tree_slots.c -- match, insert and eviction that carry a server's
 * KV slots along (a slot table, slot_table.h), and lock / unlock that
 * report the pages they moved: one call per operation of a server's prefix
 * cache (SGLang's match_prefix, insert, evict, inc_lock_ref /
 * dec_lock_ref), so a binding in a slow language does no per-page work.
 *
 * Each is the public tree call it names plus the table's bookkeeping; none
 * reaches into the tree core beyond reading which blocks the tree owns
 * (rkv_tree_owned) and the evictable count. Invariant kept: a block the
 * tree took through rkv_tree_insert_slots is held by the table until an
 * rkv_tree_evict_slots frees it (or the embedder drops it).
 */
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "radix/tree_core.h"
#include "treeapi/slot_table.h"

static rkv_status rkv_slots_args(const rkv_tree *tree, const rkv_slot_table *table,
                                 const char *fn)
{
    if (tree == NULL || table == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             tree == NULL ? "tree" : "table");
    if (table->pool != tree->pool)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: the slot table is not of the tree's pool", fn);
    return RKV_OK;
}

rkv_status rkv_tree_match_slots(rkv_tree *tree, rkv_slot_table *table,
                                rkv_namespace ns, const int32_t *tokens,
                                size_t n, unsigned flags, int64_t *slots_out,
                                rkv_match *out)
{
    static const char fn[] = "rkv_tree_match_slots";
    rkv_status st = rkv_slots_args(tree, table, fn);
    if (st != RKV_OK)
        return st;
    if (slots_out == NULL && n >= tree->P)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL slots_out", fn);
    st = rkv_tree_match(tree, ns, tokens, n, table->scratch, flags, out);
    if (st != RKV_OK)
        return st;
    uint32_t P = table->P;
    for (uint32_t i = 0; i < out->num_blocks; i++)
        rkv_slot_table_read(table, table->scratch[i], slots_out + (size_t)i * P);
    return RKV_OK;
}

/* An identity table's slots as blocks: page i must be b*P .. b*P+P-1 of an
 * allocated block b. */
static rkv_status rkv_slots_to_blocks(const rkv_slot_table *t, const int64_t *slots,
                                      uint32_t npages, rkv_block_id *blocks,
                                      const char *fn)
{
    uint32_t P = t->P;
    const rkv_pool *pool = t->pool;
    for (uint32_t i = 0; i < npages; i++) {
        const int64_t *s = slots + (size_t)i * P;
        int64_t b = s[0] / (int64_t)P;
        int ok = s[0] >= 0 && s[0] % (int64_t)P == 0 && b < (int64_t)t->num_blocks;
        for (uint32_t j = 1; ok && j < P; j++)
            ok = s[j] == s[0] + (int64_t)j;
        if (!ok)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: page %u's slots are not one whole page of "
                                 "the pool (b*P .. b*P+%u, b < %u): slot[%zu] = "
                                 "%lld", fn, i, P - 1, t->num_blocks,
                                 (size_t)i * P, (long long)s[0]);
        if (pool->refcount[b] == 0)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: page %u's block %lld is not allocated", fn,
                                 i, (long long)b);
        blocks[i] = (rkv_block_id)b;
    }
    return RKV_OK;
}

/* Identity table: the blocks come from the slots; the caller's reference
 * on each block past the cached prefix is dropped (the tree's keeps what
 * it took). */
static rkv_status rkv_insert_identity(rkv_tree *tree, rkv_slot_table *t,
                                      rkv_namespace ns, const int32_t *tokens,
                                      size_t n, uint32_t npages,
                                      const int64_t *slots, rkv_insert_result *out,
                                      const char *fn)
{
    rkv_block_id *blocks = t->scratch;
    rkv_status st = rkv_slots_to_blocks(t, slots, npages, blocks, fn);
    if (st != RKV_OK)
        return st;
    st = rkv_tree_insert(tree, ns, tokens, n, blocks, NULL, out);
    if (st != RKV_OK)
        return st;
    uint32_t from = (uint32_t)(out->prefix_tokens / t->P);
    /* a block past the prefix was not the tree's before (insert refuses
     * that), so owned now means taken */
    for (uint32_t i = from; i < npages; i++)
        if (rkv_tree_owned(tree, blocks[i]))
            rkv_slot_table_put(t, blocks[i], NULL);
    /* cannot fail: each is a block the caller referenced, listed once
     * (insert refuses a block given for two new pages) */
    return rkv_pool_unref_n(tree->pool, npages - from, blocks + from);
}

rkv_status rkv_tree_insert_slots(rkv_tree *tree, rkv_slot_table *table,
                                 rkv_namespace ns, const int32_t *tokens,
                                 size_t n, const int64_t *slots,
                                 rkv_insert_result *out)
{
    static const char fn[] = "rkv_tree_insert_slots";
    rkv_status st = rkv_slots_args(tree, table, fn);
    if (st != RKV_OK)
        return st;
    rkv_insert_result local;
    if (out == NULL)
        out = &local;
    uint32_t P = table->P;
    if (n / P > table->num_blocks)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: %zu pages, the pool has %u blocks", fn, n / P,
                             table->num_blocks);
    uint32_t npages = (uint32_t)(n / P);
    if (slots == NULL && npages > 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL slots", fn);
    if (table->flags & RKV_SLOTS_IDENTITY)
        return rkv_insert_identity(tree, table, ns, tokens, n, npages, slots,
                                   out, fn);
    /* the cached prefix keeps its blocks; the pages after it get new ones */
    rkv_block_id *blocks = table->scratch;
    rkv_match m;
    st = rkv_tree_match(tree, ns, tokens, n, blocks, RKV_MATCH_PEEK, &m);
    if (st != RKV_OK)
        return st;
    uint32_t have = m.num_blocks, fresh = npages - have;
    rkv_pool *pool = tree->pool;
    if (fresh > pool->num_free)
        return rkv_set_error(RKV_ERR_NO_SPACE,
                             "%s: %u new pages, %u free blocks (evict first)",
                             fn, fresh, pool->num_free);
    /* every page a run (a paged allocator's): one value each, no rows */
    int runs = rkv_slot_pages_are_runs(slots + (size_t)have * P, fresh, P);
    if (!runs && !rkv_slot_table_reserve(table, fresh, slots + (size_t)have * P))
        return rkv_set_error(RKV_ERR_NOMEM, "%s: the slot rows", fn);
    st = rkv_pool_alloc_n(pool, fresh, blocks + have);
    if (st != RKV_OK)
        return st;
    st = rkv_tree_insert(tree, ns, tokens, n, blocks, NULL, out);
    if (st == RKV_OK) {
        /* new pages past what the insert covered (tiers) are not taken */
        for (uint32_t i = have; i < npages; i++) {
            if (!rkv_tree_owned(tree, blocks[i]))
                continue;
            if (runs)
                rkv_slot_table_put_run(table, blocks[i], slots[(size_t)i * P]);
            else
                rkv_slot_table_put(table, blocks[i], slots + (size_t)i * P);
        }
    }
    /* ours only: the tree's reference keeps what it took */
    rkv_status st2 = rkv_pool_unref_n(pool, fresh, blocks + have);
    return st != RKV_OK ? st : st2;
}

rkv_status rkv_tree_evict_slots(rkv_tree *tree, rkv_slot_table *table,
                                uint32_t n, int64_t *slots_out, size_t cap,
                                uint32_t *freed_out, size_t *nslots_out)
{
    static const char fn[] = "rkv_tree_evict_slots";
    if (freed_out != NULL)
        *freed_out = 0;
    if (nslots_out != NULL)
        *nslots_out = 0;
    rkv_status st = rkv_slots_args(tree, table, fn);
    if (st != RKV_OK)
        return st;
    if (slots_out == NULL && cap > 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL slots_out", fn);
    if (slots_out != NULL && cap / table->P < n)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: room for %zu slots, %u blocks of %u asked", fn,
                             cap, n, table->P);
    if (n > table->num_blocks)
        return rkv_set_error(RKV_ERR_NO_SPACE, "%s: %u blocks asked, the pool "
                             "has %u", fn, n, table->num_blocks);
    uint32_t freed = 0;
    st = rkv_tree_evict_ids(tree, n, table->scratch, n, &freed);
    size_t k = 0;
    for (uint32_t i = 0; i < freed; i++) {
        rkv_block_id b = table->scratch[i];
        if (table->base[b] == RKV_SLOT_NONE)
            continue;
        if (slots_out != NULL) {
            rkv_slot_table_read(table, b, slots_out + k);
            k += table->P;
        }
        rkv_slot_table_forget(table, b);
    }
    if (freed_out != NULL)
        *freed_out = freed;
    if (nslots_out != NULL)
        *nslots_out = k;
    return st;
}

rkv_status rkv_tree_lock_counted(rkv_tree *tree, rkv_node node, rkv_lease *out,
                                 uint64_t *moved)
{
    if (moved != NULL)
        *moved = 0;
    uint64_t before = tree != NULL ? tree->evictable_blocks : 0;
    rkv_status st = rkv_tree_lock(tree, node, out);
    if (st == RKV_OK && moved != NULL)
        *moved = before - tree->evictable_blocks;
    return st;
}

rkv_status rkv_tree_unlock_counted(rkv_tree *tree, rkv_lease *lease,
                                   uint64_t *moved)
{
    if (moved != NULL)
        *moved = 0;
    uint64_t before = tree != NULL ? tree->evictable_blocks : 0;
    rkv_status st = rkv_tree_unlock(tree, lease);
    if (st == RKV_OK && moved != NULL)
        *moved = tree->evictable_blocks - before;
    return st;
}

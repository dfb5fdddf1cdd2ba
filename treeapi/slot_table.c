/*
 * treeapi/slot_table.c -- the server slot table's own calls: create,
 * destroy, set, drop, clear, count, blocks, gather (include/radixkv/tree.h,
 * "Server slot tables"). The calls that move slots along with the tree
 * (match, insert, eviction) are tree_slots.c.
 *
 * Why a page is usually 8 bytes: a paged allocator hands a page out as P
 * consecutive slots, so storing the first one is enough; any other page
 * keeps its P slots in rows, an array allocated (calloc: untouched pages
 * cost no memory) the first time one is needed. Invariants: slot_table.h.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "treeapi/slot_table.h"

rkv_status rkv_slot_table_create(rkv_pool *pool, unsigned flags,
                                 rkv_slot_table **out)
{
    static const char fn[] = "rkv_slot_table_create";
    if (pool == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             pool == NULL ? "pool" : "out");
    if (flags & ~RKV_SLOTS_IDENTITY)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: unknown flags %#x", fn,
                             flags);
    uint32_t nb = pool->cfg.num_blocks;
    rkv_slot_table *t = calloc(1, sizeof *t);
    if (t != NULL) {
        t->base = calloc(nb ? nb : 1, sizeof *t->base);
        t->scratch = calloc(nb ? nb : 1, sizeof *t->scratch);
    }
    if (t == NULL || t->base == NULL || t->scratch == NULL) {
        rkv_slot_table_destroy(t);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: %u blocks", fn, nb);
    }
    t->pool = pool;
    t->num_blocks = nb;
    t->P = pool->cfg.page_size;
    t->flags = flags;
    *out = t;
    return RKV_OK;
}

void rkv_slot_table_destroy(rkv_slot_table *table)
{
    if (table == NULL)
        return;
    free(table->base);
    free(table->rows);
    free(table->scratch);
    free(table);
}

/* Slots s, s+1, .., s+P-1 from s >= 0, with s + P representable: one value
 * (s + 1) stands for the page. No early exit inside a page, so the loop
 * vectorizes. */
static int rkv_slot_page_is_run(const int64_t *s, uint32_t P)
{
    int64_t s0 = s[0];
    if (s0 < 0 || s0 > INT64_MAX - (int64_t)P)
        return 0;
    int64_t diff = 0;
    for (uint32_t j = 1; j < P; j++)
        diff |= s[j] ^ (s0 + (int64_t)j);
    return diff == 0;
}

int rkv_slot_pages_are_runs(const int64_t *slots, uint32_t n, uint32_t P)
{
    for (uint32_t i = 0; i < n; i++)
        if (!rkv_slot_page_is_run(slots + (size_t)i * P, P))
            return 0;
    return 1;
}

int rkv_slot_table_reserve(rkv_slot_table *t, uint32_t n, const int64_t *slots)
{
    if (t->rows != NULL || slots == NULL || rkv_slot_pages_are_runs(slots, n, t->P))
        return 1;
    t->rows = calloc((size_t)t->num_blocks * t->P, sizeof *t->rows);
    return t->rows != NULL;
}

void rkv_slot_table_put(rkv_slot_table *t, rkv_block_id b, const int64_t *s)
{
    uint32_t P = t->P;
    int64_t v;
    if (s == NULL) {
        v = (int64_t)b * P + 1;
    } else if (rkv_slot_page_is_run(s, P)) {
        v = s[0] + 1;
    } else {
        memcpy(t->rows + (size_t)b * P, s, P * sizeof *s);
        v = RKV_SLOT_ROW;
    }
    if (t->base[b] == RKV_SLOT_NONE)
        t->count++;
    t->base[b] = v;
}

static rkv_status rkv_slot_blocks_ok(const rkv_slot_table *t, uint32_t n,
                                     const rkv_block_id *blocks, const char *fn)
{
    if (t == NULL || (blocks == NULL && n > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL %s", fn,
                             t == NULL ? "table" : "blocks");
    for (uint32_t i = 0; i < n; i++)
        if (blocks[i] >= t->num_blocks)
            return rkv_set_error(RKV_ERR_INVALID_ARG,
                                 "%s: blocks[%u] = %u of %u blocks", fn, i,
                                 blocks[i], t->num_blocks);
    return RKV_OK;
}

rkv_status rkv_slot_table_set(rkv_slot_table *table, uint32_t n,
                              const rkv_block_id *blocks, const int64_t *slots)
{
    static const char fn[] = "rkv_slot_table_set";
    rkv_status st = rkv_slot_blocks_ok(table, n, blocks, fn);
    if (st != RKV_OK)
        return st;
    int identity = (table->flags & RKV_SLOTS_IDENTITY) != 0;
    if (n > 0 && !identity && slots == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL slots", fn);
    if (n > 0 && identity && slots != NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: an identity table takes "
                             "no slots (NULL)", fn);
    if (!identity && !rkv_slot_table_reserve(table, n, slots))
        return rkv_set_error(RKV_ERR_NOMEM, "%s: the slot rows", fn);
    for (uint32_t i = 0; i < n; i++)
        rkv_slot_table_put(table, blocks[i],
                           identity ? NULL : slots + (size_t)i * table->P);
    return RKV_OK;
}

rkv_status rkv_slot_table_drop(rkv_slot_table *table, uint32_t n,
                               const rkv_block_id *blocks)
{
    rkv_status st = rkv_slot_blocks_ok(table, n, blocks, "rkv_slot_table_drop");
    if (st != RKV_OK)
        return st;
    for (uint32_t i = 0; i < n; i++)
        rkv_slot_table_forget(table, blocks[i]);
    return RKV_OK;
}

void rkv_slot_table_clear(rkv_slot_table *table)
{
    if (table == NULL)
        return;
    memset(table->base, 0, (size_t)table->num_blocks * sizeof *table->base);
    table->count = 0;
}

uint64_t rkv_slot_table_count(const rkv_slot_table *table)
{
    return table == NULL ? 0 : table->count;
}

rkv_status rkv_slot_table_blocks(const rkv_slot_table *table, rkv_block_id *out,
                                 uint64_t cap, uint64_t *n_out)
{
    if (table == NULL || n_out == NULL || (out == NULL && cap > 0))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_slot_table_blocks: NULL %s",
                             table == NULL ? "table" : n_out == NULL ? "n_out" : "out");
    uint64_t k = 0;
    for (uint32_t b = 0; b < table->num_blocks && k < cap; b++)
        if (table->base[b] != RKV_SLOT_NONE)
            out[k++] = b;
    *n_out = k;
    return RKV_OK;
}

rkv_status rkv_slot_table_gather(const rkv_slot_table *table, uint32_t n,
                                 const rkv_block_id *blocks, int64_t *out)
{
    static const char fn[] = "rkv_slot_table_gather";
    rkv_status st = rkv_slot_blocks_ok(table, n, blocks, fn);
    if (st != RKV_OK)
        return st;
    if (out == NULL && n > 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL out", fn);
    for (uint32_t i = 0; i < n; i++)
        rkv_slot_table_read(table, blocks[i], out + (size_t)i * table->P);
    return RKV_OK;
}

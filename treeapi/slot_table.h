/*
 * treeapi/slot_table.h -- the server slot table (include/radixkv/tree.h,
 * "Server slot tables"): its layout, shared by slot_table.c (the table's
 * own calls) and tree_slots.c (match, insert and eviction through it).
 *
 * Invariants: base[b] == RKV_SLOT_NONE (0, so calloc'd memory is an empty
 * table) iff block b is not held; count is the number of held blocks; a
 * held block's base[b] is s + 1 when its slots are s .. s + P - 1 (s >= 0;
 * an identity table's block b: s = b * P), or RKV_SLOT_ROW when its slots
 * are rows[b*P .. b*P+P) (rows allocated; slot tables only). scratch has
 * room for num_blocks ids: a match writes at most the tree's cached
 * blocks, and an insert's cached and new blocks are distinct blocks of the
 * pool.
 */
#ifndef RKV_TREEAPI_SLOT_TABLE_H
#define RKV_TREEAPI_SLOT_TABLE_H

#include <stdint.h>

#include "radixkv.h"

#define RKV_SLOT_NONE INT64_C(0)
#define RKV_SLOT_ROW INT64_C(-1)

struct rkv_slot_table {
    rkv_pool *pool;
    uint32_t num_blocks;
    uint32_t P;
    unsigned flags;
    uint64_t count;
    int64_t *base;          /* [num_blocks]                                */
    int64_t *rows;          /* [num_blocks * P] or NULL until first needed */
    rkv_block_id *scratch;  /* [num_blocks]                                */
};

/* 1 when each of the n pages of slots (P each) is a run s .. s+P-1 from
 * s >= 0: the pages rkv_slot_table_put_run records. */
int rkv_slot_pages_are_runs(const int64_t *slots, uint32_t n, uint32_t P);

/* Records block b (< num_blocks) whose slots are s0 .. s0+P-1, a run. */
static inline void rkv_slot_table_put_run(rkv_slot_table *t, rkv_block_id b,
                                          int64_t s0)
{
    if (t->base[b] == RKV_SLOT_NONE)
        t->count++;
    t->base[b] = s0 + 1;
}

/* Makes sure rows exists if one of the n pages of slots (P each; NULL:
 * identity) needs it, so that put cannot fail. 0 on NOMEM (nothing
 * changed). */
int rkv_slot_table_reserve(rkv_slot_table *t, uint32_t n, const int64_t *slots);

/* Records block b (< num_blocks) with slots s[0..P) (NULL: identity);
 * reserve first. */
void rkv_slot_table_put(rkv_slot_table *t, rkv_block_id b, const int64_t *s);

/* Forgets block b (not held: nothing). */
static inline void rkv_slot_table_forget(rkv_slot_table *t, rkv_block_id b)
{
    if (t->base[b] != RKV_SLOT_NONE) {
        t->base[b] = RKV_SLOT_NONE;
        t->count--;
    }
}

/* Block b's P slots to out (-1s when not held). b < num_blocks. */
static inline void rkv_slot_table_read(const rkv_slot_table *t, rkv_block_id b,
                                       int64_t *out)
{
    int64_t s = t->base[b];
    uint32_t P = t->P;
    if (s > 0) {
        s--;
        for (uint32_t j = 0; j < P; j++)
            out[j] = s + j;
    } else if (s == RKV_SLOT_ROW) {
        const int64_t *r = t->rows + (size_t)b * P;
        for (uint32_t j = 0; j < P; j++)
            out[j] = r[j];
    } else {
        for (uint32_t j = 0; j < P; j++)
            out[j] = -1;
    }
}

#endif

/*
 * events/store_log.h -- the tree's store log (events/store_log.c):
 * the hook the store paths of residency/tier.c call. One test of a
 * pointer when the log is off, so the store paths pay nothing more.
 */
#ifndef RKV_RADIX_TREE_TIER_STORED_H
#define RKV_RADIX_TREE_TIER_STORED_H

#include "radix/tree_core.h"

/* The log: one array of cap records allocated at enable (recording never
 * allocates: it runs inside evictions that must not fail). */
typedef struct rkv_store_log_buf {
    rkv_store_record *rec;
    uint32_t cap, n;
    uint64_t lost[RKV_MEDIUM_COUNT]; /* by medium written, since the last
                                        full clear                       */
} rkv_store_log_buf;

void rkv_store_log_record(rkv_tree *t, rkv_block_id block, uint64_t hash, int from,
                     int medium, int queued);

/* A store the tree queued (queued 1) or made (0): block is the device
 * block it reads (RKV_NO_BLOCK when from is the host). */
static inline void rkv_store_log_add(rkv_tree *t, rkv_block_id block, uint64_t hash,
                                int from, int medium, int queued)
{
    if (t->slog != NULL)
        rkv_store_log_record(t, block, hash, from, medium, queued);
}

void rkv_store_log_record_taken(rkv_tree *t, rkv_block_id block, uint64_t hash);

/* A queued store was taken: run (or failed) at a poll or early by a
 * demotion, or issued on the copy stream. Its record, if still in the log,
 * stops saying "queued". */
static inline void rkv_store_log_taken(rkv_tree *t, rkv_block_id block, uint64_t hash)
{
    if (t->slog != NULL)
        rkv_store_log_record_taken(t, block, hash);
}

/* Whether lower tiers are attached (the scheduler keeps the log on only
 * then: a pool-sized log for a tree without tiers is memory for nothing). */
int rkv_store_log_tiers_attached(const rkv_tree *t);

/* Frees the store log (events/store_log.c); off afterwards. */
void rkv_store_log_fini(rkv_tree *t);

#endif

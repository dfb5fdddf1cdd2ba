/*
 * events/store_log.c -- the store log: which blocks the
 * tree's own stores read, so that a plan can list a write-policy store's
 * SOURCE device blocks the way it lists a load's destinations and a
 * swap-out's sources (rkv_tree_store_log_* in radixkv.h).
 *
 * Recorded (residency/tier.c calls rkv_store_log_add): a write-through or
 * selective store when it is QUEUED (it runs at the next poll; the block
 * holds the page until then: a demotion that meets a queued store runs it
 * first), a demotion's store when it is MADE (at once, before the device
 * block is freed), and the host's own write to the disk below (no device
 * block). Not recorded: rkv_tree_store_prefix's swap-outs (their ticket and
 * blocks_out list them already) and stores skipped or failed before they
 * were queued or made. A queued record stops being "queued" when its store
 * is taken -- run (or failed) at a poll or early by a demotion, or issued
 * on a CUDA pool's copy stream -- so a reader never takes a block that an
 * eviction may already have freed for one still to be copied. A queued
 * store that fails at poll stays listed (rkv_tier_stats.failed_stores
 * counts it).
 *
 * Invariants: n <= cap; rec has cap entries while the log is on
 * (t->slog != NULL), none when off; a record that finds the log full is
 * counted in lost[medium] and dropped, never blocking or failing a store.
 * Ownership: the tree owns the log; rkv_tree_store_log_read hands out a
 * view valid until the next clear, enable or destroy (records are only
 * appended in between).
 */
#include <string.h>

#include "common/status.h"
#include "events/store_log.h"

/* A log far larger than any step's stores is a caller's mistake. */
#define RKV_SLOG_MAX_CAP (1u << 24)

void rkv_store_log_record(rkv_tree *t, rkv_block_id block, uint64_t hash, int from,
                     int medium, int queued)
{
    rkv_store_log_buf *l = t->slog;
    if (l->n >= l->cap) {
        l->lost[medium]++;
        return;
    }
    rkv_store_record *r = &l->rec[l->n++];
    r->hash = hash;
    r->block = block;
    r->from = (uint8_t)from;
    r->medium = (uint8_t)medium;
    r->queued = (uint8_t)queued;
    r->reserved = 0;
}

/* Newest first: the record is from this step (the scheduler clears the
 * log every step), so the scan is short. */
void rkv_store_log_record_taken(rkv_tree *t, rkv_block_id block, uint64_t hash)
{
    rkv_store_log_buf *l = t->slog;
    for (uint32_t i = l->n; i-- > 0;) {
        rkv_store_record *r = &l->rec[i];
        if (r->queued && r->block == block && r->hash == hash &&
            r->from == RKV_MEDIUM_DEVICE) {
            r->queued = 0;
            return;
        }
    }
}

int rkv_store_log_tiers_attached(const rkv_tree *t)
{
    return t->tiers.tier != NULL;
}

void rkv_store_log_fini(rkv_tree *t)
{
    rkv_store_log_buf *l = t->slog;
    if (l == NULL)
        return;
    rkv_node_mem_free(&t->mem, l->rec, (size_t)l->cap * sizeof *l->rec);
    rkv_node_mem_free(&t->mem, l, sizeof *l);
    t->slog = NULL;
}

rkv_status rkv_tree_store_log_enable(rkv_tree *tree, uint32_t capacity)
{
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_store_log_enable: NULL tree");
    if (capacity > RKV_SLOG_MAX_CAP)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_store_log_enable: "
                             "capacity %u (0..%u)", capacity, RKV_SLOG_MAX_CAP);
    if (capacity == 0) {
        rkv_store_log_fini(tree);
        return RKV_OK;
    }
    /* the new log first: a failure leaves the old one as it was */
    rkv_store_log_buf *l = rkv_node_mem_alloc(&tree->mem, sizeof *l);
    rkv_store_record *rec =
        l ? rkv_node_mem_alloc(&tree->mem, (size_t)capacity * sizeof *rec) : NULL;
    if (rec == NULL) {
        if (l != NULL)
            rkv_node_mem_free(&tree->mem, l, sizeof *l);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_store_log_enable: out "
                             "of memory for %u records", capacity);
    }
    memset(l, 0, sizeof *l);
    l->rec = rec;
    l->cap = capacity;
    rkv_store_log_fini(tree);
    tree->slog = l;
    return RKV_OK;
}

rkv_status rkv_tree_store_log_read(const rkv_tree *tree, rkv_store_log *out)
{
    if (tree == NULL || out == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_store_log_read: NULL argument");
    memset(out, 0, sizeof *out);
    if (tree->slog == NULL)
        return rkv_set_error(RKV_ERR_STATE,
                             "rkv_tree_store_log_read: the log is off");
    out->records = tree->slog->rec;
    out->num_records = tree->slog->n;
    memcpy(out->lost, tree->slog->lost, sizeof out->lost);
    return RKV_OK;
}

void rkv_tree_store_log_clear(rkv_tree *tree, uint32_t n)
{
    rkv_store_log_buf *l = tree ? tree->slog : NULL;
    if (l == NULL)
        return;
    if (n >= l->n) {
        l->n = 0;
        memset(l->lost, 0, sizeof l->lost);
        return;
    }
    memmove(l->rec, l->rec + n, (size_t)(l->n - n) * sizeof *l->rec);
    l->n -= n;
}

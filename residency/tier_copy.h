/*
 * residency/tier_copy.h -- the tier's asynchronous copies on a CUDA pool
 * (residency/tier_copy.c): the in-flight batch table, the copy stream, the
 * pinned staging of disk loads, and the failure injection of tests.
 * Included by residency/tier.h (rkv_tier embeds an rkv_tcopy).
 */
#ifndef RKV_RADIX_TREE_COPY_H
#define RKV_RADIX_TREE_COPY_H

#include <stdint.h>

#include "alloc/pool_copy.h"
#include "common/cuda_backend.h"
#include "radix/tree_core.h"

/* Batches in flight at most: a poll that finds the table full issues
 * nothing (its loads and stores wait for a later poll). */
#define RKV_TCOPY_BATCHES 32u
/* Pinned staging pages for disk loads (a disk record is verified in the
 * store's one staging buffer, then copied here for the DMA). A load whose
 * disk pages do not fit is read synchronously instead. */
#define RKV_TCOPY_STAGE_PAGES 64u

typedef struct rkv_tbatch {
    void *event;          /* created on first use of the entry, reused      */
    uint32_t stage_pages; /* staging pages it holds (released FIFO)          */
} rkv_tbatch;

typedef struct rkv_tcopy {
    int on;                   /* copies are asynchronous (CUDA pool, KV)  */
    const rkv_cuda_backend *be;
    int device;
    void *own_stream;         /* the tier's own stream, made on first use */
    rkv_tbatch b[RKV_TCOPY_BATCHES]; /* ring, batch id % RKV_TCOPY_BATCHES */
    uint32_t blen;            /* batches in flight                         */
    uint64_t next_id;         /* id of the next batch (ids start at 1)     */
    char *stage;              /* RKV_TCOPY_STAGE_PAGES pinned pages, or NULL
                                 (not made yet / could not be had)          */
    int stage_failed;         /* host_alloc failed once: loads go sync     */
    uint32_t stage_head, stage_used;
    /* the (block, host) pairs of the copy call being gathered: one call
     * per direction per batch (stores, loads) */
    rkv_block_id *pair_ids;
    void **pair_host;
    uint32_t npairs, pairs_cap;
    uint64_t copy_calls, copy_pages; /* asynchronous copy calls made, and
                                        the pages they carried          */
    /* tests (residency/tier_debug.h) */
    uint32_t fail_issue, fail_query; /* k-th next call fails; 0 = off     */
    int stall;                /* queries report "not ready"               */
} rkv_tcopy;

struct rkv_queued_store;

/* At attach: copies are asynchronous iff the pool is a CUDA pool with KV
 * memory and the stores hold bytes. */
void rkv_tier_copy_init(rkv_tree *t);
/* Waits for every copy in flight and forgets the batches (their loads and
 * stores are being dropped: reset). */
void rkv_tier_copy_drain(rkv_tree *t);
/* drain, then frees the stream, events and staging (detach, destroy). */
void rkv_tier_copy_fini(rkv_tree *t);
/* Poll: finishes the batches whose event completed (oldest first), then
 * issues one batch of the queued loads and stores. */
void rkv_tier_copy_poll(rkv_tree *t);
/* A demotion met queued store *op in flight: waits for its batch's event
 * and finishes op (the rest of the batch finishes at a later poll). */
void rkv_tier_copy_wait_store(rkv_tree *t, struct rkv_queued_store *op);
/* Blocks until every batch already issued has run on the copy stream
 * (the next poll then finishes them all); a no-op without copies in flight.
 * For teardown (the scheduler's destroy): a poll loop alone would spin on
 * a real GPU until the copies land. */
void rkv_tier_copy_wait_issued(rkv_tree *t);
/* The stream for the tier's synchronous batched copies (demotion, a
 * host pool's loads: rkv_pool_copy_pairs): the copy stream on a CUDA pool
 * with asynchronous copies, else NULL. */
void *rkv_tier_copy_sync_stream(rkv_tree *t);
/* rkv_tree_check: the batch table and what refers to it. */
rkv_status rkv_tier_copy_check(const rkv_tree *t);

#endif

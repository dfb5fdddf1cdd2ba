/*
 * tier/store.h -- the slot-level interface of a block store (host memory
 * or a disk file) that the tree's tier logic (residency/tier*.c) uses.
 * Not public: embedders see rkv_store only through include/radixkv.h.
 *
 * A store has capacity_blocks slots 0..cap-1. The tree owns the slot
 * allocation (which page lives in which slot); the store owns the bytes.
 * Every slot that holds a block records (hash, ns) with it; a read names
 * the (hash, ns) it expects and gets RKV_ERR_CORRUPT -- never other bytes
 * -- when they differ, when the slot was never written, or when a disk
 * record fails its checksum or is short. With block_bytes == 0 (metadata
 * only) reads and writes move no bytes but still check (hash, ns).
 *
 * Copies between the device pool and a store go through the pool's own
 * copy calls (rkv_pool_copy_to_host / rkv_pool_copy_from_host), so they
 * work for host pools and, through the CUDA backend, for GPU pools; a
 * disk store stages through a host buffer it owns.
 *
 * Failure injection: rkv_store_fail_after(store, k) makes the k-th next
 * I/O or copy call (0 = off) fail with RKV_ERR_IO, once; tests use it to
 * reach every failure path.
 */
#ifndef RKV_TIER_STORE_H
#define RKV_TIER_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define RKV_NO_SLOT UINT32_MAX

/* Slot allocation, O(1). alloc: RKV_ERR_NO_SPACE when every slot is used.
 * free of a free or out-of-range slot: RKV_ERR_STATE, nothing changes. */
rkv_status rkv_store_slot_alloc(rkv_store *s, uint32_t *slot);
rkv_status rkv_store_slot_free(rkv_store *s, uint32_t slot);
/* slot_alloc for the tree's make-room loops, which meet a full store at
 * every demotion once the tiers are warm: RKV_ERR_NO_SPACE sets no message
 * (formatting one cost more than the rest of the allocation); s and slot
 * non-NULL. */
rkv_status rkv_store_slot_take(rkv_store *s, uint32_t *slot);
/* An allocated slot handed from one page to another: the state slot_free
 * then slot_take would leave it in (EMPTY, no record), without passing
 * through the free stack. RKV_ERR_STATE for a free or out-of-range slot. */
rkv_status rkv_store_slot_recycle(rkv_store *s, uint32_t slot);

/* Device block(s) -> slot: copies the pool's block `block` into `slot` and
 * records (hash, ns). On failure the slot's previous content is invalid
 * (the tree frees it). */
rkv_status rkv_store_write_from_pool(rkv_store *s, uint32_t slot,
                                     rkv_pool *pool, rkv_block_id block,
                                     uint64_t hash, uint64_t ns);
/* slot -> device block, after verifying (hash, ns). */
rkv_status rkv_store_read_to_pool(rkv_store *s, uint32_t slot,
                                  rkv_pool *pool, rkv_block_id block,
                                  uint64_t hash, uint64_t ns);
/* Two-phase transfers for the tree's asynchronous copies on a CUDA pool
 * (residency/tier_copy.c): the caller moves the bytes between begin and end.
 * write_begin (host store only): the checks of write_from_pool, the slot
 * emptied, and *dst = where the block's bytes go (the slot's memory; NULL
 * for a metadata-only store); write_end records (hash, ns) once they
 * arrived (a failure in between: the slot stays empty, the tree frees it).
 * read_begin: the checks and verification of read_to_pool and *payload =
 * the verified bytes (a host slot's memory; for a disk store, its staging
 * buffer, valid until the store's next I/O: copy it out first). */
rkv_status rkv_store_write_begin(rkv_store *s, uint32_t slot, rkv_pool *pool,
                                 rkv_block_id block, void **dst);
rkv_status rkv_store_write_end(rkv_store *s, uint32_t slot, uint64_t hash,
                               uint64_t ns);
rkv_status rkv_store_read_begin(rkv_store *s, uint32_t slot, rkv_pool *pool,
                                rkv_block_id block, uint64_t hash, uint64_t ns,
                                const void **payload);
/* The same for n <= RKV_STORE_BATCH blocks at once (the tier's demotion
 * of a node, a host pool's load): every slot checked (and, writing,
 * emptied) first, then the bytes in one batched pool copy on `stream`
 * (rkv_pool_copy_pairs: done on return), then the records. A disk store
 * goes record by record (one staging buffer). write: *done = slots
 * recorded, from the first: when a slot fails its checks the ones before
 * it are still written, as single calls would have written them; the
 * others are left EMPTY, as a failed write_from_pool leaves its slot (a
 * failed batched copy: none is recorded). read: *bad = the first block not verified or copied (n when
 * all were; 0 when the batched copy failed). The failure injection counts
 * the same points as n single calls would, in the order checks, copy,
 * records. */
#define RKV_STORE_BATCH 64u
rkv_status rkv_store_write_from_pool_n(rkv_store *s, uint32_t n, const uint32_t *slots,
                                       rkv_pool *pool, const rkv_block_id *blocks,
                                       const uint64_t *hashes, uint64_t ns, void *stream,
                                       uint32_t *done);
rkv_status rkv_store_read_to_pool_n(rkv_store *s, uint32_t n, const uint32_t *slots,
                                    rkv_pool *pool, const rkv_block_id *blocks,
                                    const uint64_t *hashes, uint64_t ns, void *stream,
                                    uint32_t *bad);
/* slot -> slot of another store (host -> disk demotion, disk -> host). */
rkv_status rkv_store_copy_slot(rkv_store *dst, uint32_t dst_slot,
                               rkv_store *src, uint32_t src_slot,
                               uint64_t hash, uint64_t ns);

/* Attachment bookkeeping (one tree per store): attach by another owner
 * while attached is RKV_ERR_BUSY (the same owner again is RKV_OK). detach
 * by the owner frees every slot (the tree's claims end with it). */
rkv_status rkv_store_attach(rkv_store *s, const void *owner);
void rkv_store_detach(rkv_store *s, const void *owner);

int rkv_store_medium(const rkv_store *s);
size_t rkv_store_block_bytes(const rkv_store *s);

/* Tests: fail the k-th next I/O or copy call with RKV_ERR_IO (0 = off). */
void rkv_store_fail_after(rkv_store *s, uint32_t k);

/* ---- added by tier/ (queries for the tree, tests and benches) ---------- */

/* Slots not allocated (capacity - used). */
uint32_t rkv_store_free_slots(const rkv_store *s);
/* Slots 0..span-1 are the only ones handed out since create or the last
 * detach (the slot table grows to it as pages arrive): a caller that
 * scans slots scans these, never the whole capacity. */
uint32_t rkv_store_slot_span(const rkv_store *s);
/* Bytes of slot table the store holds now (tests, reports). */
size_t rkv_store_table_bytes(const rkv_store *s);
/* 1 iff slot is allocated and holds the block (hash, ns) (in-memory record
 * only; a disk record is verified when read). */
int rkv_store_slot_holds(const rkv_store *s, uint32_t slot, uint64_t hash,
                         uint64_t ns);
/* The tree the store is attached to, or NULL. */
const void *rkv_store_owner(const rkv_store *s);
/* Host store: 1 iff its memory is page-locked (CUDA backend). */
int rkv_store_pinned(const rkv_store *s);
/* Disk store: 1 iff its file is open with O_DIRECT now (0: buffered, by
 * request or after the filesystem refused O_DIRECT); its file's path. */
int rkv_store_direct_io(const rkv_store *s);
const char *rkv_store_path(const rkv_store *s);
/* Disk store: 1 iff its I/O goes through io_uring. */
int rkv_store_io_uring(const rkv_store *s);
/* Tests: the next O_DIRECT I/O of a disk store fails with EINVAL, as on a
 * filesystem without O_DIRECT (the store must fall back to buffered). */
void rkv_store_simulate_einval(rkv_store *s);

/* Synthetic payloads (tier/store_synth.c; the simulator's --disk-path):
 * a store with bytes whose payload for (hash, ns) is a fixed pattern of
 * them, written instead of a pool copy and verified in full on every load
 * (a mismatch: RKV_ERR_CORRUPT, counted). The tree then sees it as
 * metadata only (rkv_store_block_bytes 0), so it works under a
 * metadata-only pool. Before attach; a store without bytes is refused. */
rkv_status rkv_store_set_synthetic(rkv_store *s);
void rkv_store_synth_counts(const rkv_store *s, uint64_t *verified,
                            uint64_t *mismatches);

/* ---- warm restart (disk stores; tier/README.md "Warm restart") ------- */

/* The chain of the page the next write into slot will hold (its parent's
 * chained hash and its n token ids, n <= the store's page_tokens): the
 * record carries them so that a warm restart can rebuild the page's path.
 * Consumed by the next write or copy into slot; a write without it seals
 * a record with no tokens (never re-indexed). No-op on other stores. */
void rkv_store_set_chain(rkv_store *s, uint32_t slot, uint64_t parent,
                         const int32_t *tokens, uint32_t n);
/* The page size a store's records carry (0: none). */
uint32_t rkv_store_page_tokens(const rkv_store *s);

/* One record found by the scan. tokens: valid during the call. */
typedef struct rkv_warm_rec {
    uint32_t slot;
    uint64_t hash, ns, parent;
    uint32_t ntokens;
    const int32_t *tokens;
} rkv_warm_rec;
/* Returns 0 to go on, nonzero to stop the scan (RKV_ERR_NOMEM). */
typedef int (*rkv_warm_fn)(void *ctx, const rkv_warm_rec *r);

/* 1 iff the store reopened a file warm whose records were not scanned. */
int rkv_store_warm_pending(const rkv_store *s);
/* Scans the records of a store reopened warm (once; slots ascending),
 * verifies each as a read would (except the expected (hash, ns), which
 * it learns), claims the slot of each valid one as holding (hash, ns)
 * and hands it to fn. Records that fail (torn, corrupt, a read error,
 * injected or not) are counted in warm_skipped and their slots stay
 * free; never-written slots (holes, zeros) are not records. RKV_OK with
 * nothing to do when not pending. The caller frees (rkv_store_slot_free)
 * the slots of records it does not take and counts them with
 * rkv_store_warm_dropped. */
rkv_status rkv_store_warm_scan(rkv_store *s, rkv_warm_fn fn, void *ctx);
void rkv_store_warm_dropped(rkv_store *s, uint64_t n);
/* Takes slot (>= every slot handed out so far: the scan claims in
 * ascending order) as holding (hash, ns); the slots skipped below it
 * become free. RKV_ERR_STATE otherwise, RKV_ERR_NOMEM without table. */
rkv_status rkv_store_slot_claim(rkv_store *s, uint32_t slot, uint64_t hash,
                                uint64_t ns);

#endif

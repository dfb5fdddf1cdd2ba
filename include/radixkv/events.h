/*
 * radixkv/events.h -- the tree's KV events (what it caches and drops) and snapshots, for a fleet router or any other consumer.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_EVENTS_H
#define RADIXKV_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/tree.h"

RKV_BEGIN_DECLS

/*
 * KV events: what the tree caches and drops, for an embedder that tells a
 * fleet router (router/, include/radixkv_router.h) or any other consumer.
 * Off unless rkv_tree_config.event_ring > 0; then the ring of that many
 * events is allocated at create time and recording never allocates, so it
 * cannot make a call fail.
 *
 *   BLOCK_STORED   pages became cached: hashes[] are their chained block
 *                  hashes (rkv_block_hash) in chain order, parent_hash is
 *                  the hash before hashes[0] (RKV_HASH_ROOT at the
 *                  namespace root), ns and page_size say what they cover.
 *   BLOCK_REMOVED  pages were evicted: hashes[] in the order dropped (a
 *                  node's tail first); ns is set, parent_hash is 0.
 *   ALL_CLEARED    rkv_tree_reset dropped everything.
 *   RESYNC         events were lost (the ring was full): `lost` events
 *                  starting at seq were dropped. The consumer must rebuild
 *                  its view from rkv_tree_snapshot().
 *
 * Every event has a sequence number, per tree, from 1, strictly increasing;
 * dropped events use up theirs too, so the next event after a RESYNC has
 * seq == resync.seq + resync.lost. A long store or eviction is split into
 * events of at most RKV_EVENT_MAX_HASHES hashes (each with its own seq and
 * the right parent_hash). medium says where: with lower tiers attached
 * (rkv_tree_attach_tiers) a page entering the host tier is a BLOCK_STORED
 * with medium RKV_MEDIUM_HOST and leaving it a BLOCK_REMOVED with that
 * medium; device events are unchanged (a demoted page is a device
 * BLOCK_REMOVED, a loaded page a device BLOCK_STORED when its load
 * completes).
 *
 * Exactness: replaying the events in order into a set of (ns, hash, parent)
 * gives rkv_tree_snapshot() after every call. A call that fails records
 * nothing, with one documented exception: rkv_tree_evict and
 * rkv_tree_alloc_blocks can evict and then fail (blocks referenced outside
 * the tree; see rkv_tree_evict), and record the evictions that happened.
 *
 * Overflow: an event is recorded only while it leaves one slot free; when
 * it would not, a RESYNC marker takes that slot at the point of loss and
 * every later event is dropped (counted in the marker) until the marker is
 * drained. Nothing is lost silently.
 *
 * Token ids (rkv_tree_config.event_tokens > 0; off by default): every
 * BLOCK_STORED event (any medium) also carries the token ids of its pages,
 * num_hashes * page_size of them (page i's at [i * page_size, (i + 1) *
 * page_size)), what vLLM-style consumers put in their BlockStored. They
 * are kept in a second ring of event_tokens ids, also allocated at create;
 * an event whose ids do not fit there is lost like one that finds the
 * event ring full (a RESYNC marker). Read them with
 * rkv_tree_events_drain_tokens; rkv_tree_events_drain drops them. Cost:
 * one copy of the stored pages' tokens per stored page (bench/RESULTS.md).
 */
#define RKV_EVENT_MAX_HASHES 16u

typedef enum rkv_event_kind {
    RKV_EVENT_BLOCK_STORED = 1,
    RKV_EVENT_BLOCK_REMOVED = 2,
    RKV_EVENT_ALL_CLEARED = 3,
    RKV_EVENT_RESYNC = 4
} rkv_event_kind;

typedef enum rkv_medium {
    RKV_MEDIUM_DEVICE = 0, /* the pool's memory (GPU or host pool)         */
    RKV_MEDIUM_HOST = 1,   /* the host tier (rkv_tree_attach_tiers)         */
    RKV_MEDIUM_DISK = 2,   /* the disk tier                                 */
    RKV_MEDIUM_COUNT = 3
} rkv_medium;

typedef struct rkv_event {
    uint64_t seq;
    uint8_t kind;          /* rkv_event_kind                                */
    uint8_t medium;        /* rkv_medium                                    */
    uint16_t num_hashes;   /* 0..RKV_EVENT_MAX_HASHES                       */
    uint32_t page_size;    /* tokens per block                              */
    rkv_namespace ns;
    uint64_t parent_hash;  /* BLOCK_STORED: hash before hashes[0]           */
    uint64_t lost;         /* RESYNC: events dropped from seq on            */
    uint64_t hashes[RKV_EVENT_MAX_HASHES];
} rkv_event;

/* Moves up to max of the oldest recorded events into out[] (caller-owned
 * memory; nothing in it points into the tree, so it stays valid for as
 * long as the caller keeps it) and frees their ring slots. *n_out gets the
 * count (0: none pending). Draining a RESYNC marker re-arms recording.
 * RKV_ERR_STATE when the tree was created with events off. */
rkv_status rkv_tree_events_drain(rkv_tree *tree, rkv_event *out, uint32_t max,
                                 uint32_t *n_out);
/* The same, with token ids: each drained BLOCK_STORED event's num_hashes *
 * page_size ids are written to tokens[] one event after another, in event
 * order (other kinds carry none), *ntokens_out gets how many. Stops before
 * an event whose ids would not fit in tokens_cap (they stay queued);
 * RKV_ERR_NO_SPACE, nothing drained, when even the first does not
 * (tokens_cap >= RKV_EVENT_MAX_HASHES * page_size always fits one).
 * Caller-owned memory, as drain. RKV_ERR_STATE when the tree was created
 * with event_ring or event_tokens 0. */
rkv_status rkv_tree_events_drain_tokens(rkv_tree *tree, rkv_event *out,
                                        uint32_t max, int32_t *tokens,
                                        size_t tokens_cap, uint32_t *n_out,
                                        size_t *ntokens_out);

/* One cached block, as a snapshot lists it. */
typedef struct rkv_block_entry {
    rkv_namespace ns;
    uint64_t hash;
    uint64_t parent_hash;  /* RKV_HASH_ROOT for a namespace's first page    */
    uint32_t medium;       /* rkv_medium                                    */
    uint32_t reserved;     /* 0                                             */
} rkv_block_entry;

/* Every cached block (parents before children) into out[0..cap), one entry
 * per (block, medium) with lower tiers (a LOADING page by its host copy
 * only): the full
 * state for a consumer that must resync. *n_out gets the number of cached
 * blocks; out == NULL (cap 0) only counts. cap too small: RKV_ERR_NO_SPACE
 * (nothing written; *n_out says how many are needed). *seq_out (may be
 * NULL) gets the seq of the last event recorded or dropped so far (0 if
 * none, or events off): the snapshot is the state after that event, so a
 * consumer applies it and then only events with a larger seq. Read-only;
 * works with events off too. O(cached blocks + nodes). */
rkv_status rkv_tree_snapshot(const rkv_tree *tree, rkv_block_entry *out,
                             size_t cap, size_t *n_out, uint64_t *seq_out);

/* rkv_tree_snapshot in bounded pieces, for a tree too large to list in one
 * message. Zero a cursor (rkv_snapshot_cursor_init), then call until *done:
 * each call writes the next up to cap entries (same order and content as
 * rkv_tree_snapshot) and sets *n_out; the first call fills cur->seq (the
 * snapshot is the state after that event, as seq_out above) and
 * cur->total (blocks in all chunks). The tree must not change between the
 * first and the last call: a change is RKV_ERR_STATE (start a new cursor);
 * with events on every change is detected (the seq moves), with events off
 * only one that changes the block count or the cursor's node. A call
 * after *done writes nothing and says done again. On failure the cursor is
 * unchanged. O(cap + nodes walked) per call, no allocation. */
typedef struct rkv_snapshot_cursor {
    uint64_t seq;       /* out: the snapshot is after this event           */
    uint64_t total;     /* out: blocks in the whole snapshot               */
    uint64_t done;      /* out: entries written so far                     */
    uint32_t root, node, node_gen, page, state, reserved; /* private       */
} rkv_snapshot_cursor;
void rkv_snapshot_cursor_init(rkv_snapshot_cursor *cur);
rkv_status rkv_tree_snapshot_chunk(const rkv_tree *tree,
                                   rkv_snapshot_cursor *cur,
                                   rkv_block_entry *out, size_t cap,
                                   size_t *n_out, int *done);

RKV_END_DECLS

#endif /* RADIXKV_EVENTS_H */

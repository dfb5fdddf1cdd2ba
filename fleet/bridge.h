/*
 * fleet/bridge.h -- the state of `radixkv bridge`: what one vLLM- or
 * SGLang-format worker (fleet/kvev.h) has cached, indexed the way a
 * radixkv instance publishes it, and the radixkv events (include/radixkv.h
 * "KV events") that keep a fleet router in step.
 *
 * Engine hashes are not radixkv's: a BlockStored's pages are rehashed
 * from its token_ids with rkv_block_hash, chained from the radixkv hash
 * of its parent_block_hash (RKV_HASH_ROOT when nil), in the namespace of
 * its LoRA adapter (0 without one). Two maps keep removals exact:
 *   engine key -> (namespace, radixkv hash, media it is stored in)
 *   (namespace, radixkv hash) -> (parent hash, engine blocks per medium)
 * A radixkv page is announced (BLOCK_STORED) when its first engine block
 * on a medium arrives and withdrawn (BLOCK_REMOVED) when the last one
 * goes, so two engine blocks with the same tokens (engines that hash
 * extra keys) never announce a page twice.
 *
 * What cannot be placed is skipped and counted, never guessed: a block
 * whose parent is not known (stored before the bridge started, or
 * removed since), blocks past the token ids sent, a medium we do not
 * know, a removal of a block we never stored. A page is announced only
 * under a parent the bridge holds, so the router's prefix closure holds.
 *
 * Memory is bounded: at most max_blocks engine blocks (more are skipped,
 * counted) and an event ring of event_ring events with the tree's overflow
 * rule (a RESYNC marker and dropped events counted in it; the router then
 * asks for rkv_bridge_snapshot, which is always current). Library code: no
 * clock, no prints, no I/O.
 *
 * Invariants (rkv_bridge_check): every engine entry names a page whose
 * per-medium count includes it; every page's counts equal the engine
 * entries naming it; the ring holds at most event_ring events in seq
 * order.
 */
#ifndef RKV_FLEET_BRIDGE_H
#define RKV_FLEET_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include "fleet/kvev.h"
#include "radixkv.h"

typedef struct rkv_bridge rkv_bridge;

typedef struct rkv_bridge_config {
    uint32_t max_blocks;   /* engine blocks tracked, default 1 << 21 (about
                              200 bytes each at most, both maps together) */
    uint32_t event_ring;   /* radixkv events waiting to be drained, 2..2^24,
                              default 1 << 16                               */
} rkv_bridge_config;
void rkv_bridge_config_init(rkv_bridge_config *cfg);

rkv_status rkv_bridge_create(const rkv_bridge_config *cfg, rkv_bridge **out);
void rkv_bridge_destroy(rkv_bridge *b); /* NULL is fine */

/* Applies one decoded batch, event by event. RKV_ERR_NOMEM when a map
 * could not grow (the events before that one applied, the state
 * consistent; the caller clears). */
rkv_status rkv_bridge_apply(rkv_bridge *b, const rkv_kvev_batch *batch);

/* Forgets everything and records ALL_CLEARED: what the worker's events
 * can no longer be trusted to describe (a gap the replay did not fill,
 * a restarted worker) is withdrawn rather than kept stale. */
rkv_status rkv_bridge_clear(rkv_bridge *b);

/* rkv_tree_events_drain and rkv_tree_snapshot for this state (the
 * publisher's source: fleet/publisher.h). */
rkv_status rkv_bridge_drain(rkv_bridge *b, rkv_event *out, uint32_t max,
                            uint32_t *n_out);
rkv_status rkv_bridge_snapshot(const rkv_bridge *b, rkv_block_entry *out,
                               size_t cap, size_t *n_out, uint64_t *seq_out);

typedef struct rkv_bridge_stats {
    uint64_t blocks;          /* engine blocks held (all media)            */
    uint64_t pages;           /* radixkv pages held (all media)            */
    uint64_t stored;          /* engine blocks stored                      */
    uint64_t removed;         /* engine blocks removed                     */
    uint64_t orphans;         /* skipped: parent unknown                   */
    uint64_t no_tokens;       /* skipped: no token ids for them            */
    uint64_t unknown_medium;  /* skipped: a medium we do not know          */
    uint64_t unknown_removed; /* removals of blocks not held               */
    uint64_t duplicates;      /* stores of blocks already held there       */
    uint64_t full;            /* skipped: max_blocks reached               */
    uint64_t clears;          /* ALL_CLEARED recorded                      */
    uint64_t lost_events;     /* dropped into RESYNC markers               */
} rkv_bridge_stats;
rkv_status rkv_bridge_get_stats(const rkv_bridge *b, rkv_bridge_stats *out);
rkv_status rkv_bridge_check(const rkv_bridge *b);

#endif

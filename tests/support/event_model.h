/*
 * tests/support/event_model.h -- the KV event model of the differential
 * tests (tests/test_tree_events.c, tests/test_tree_mixed.c,
 * tests/test_tree_tiers.c): a plain set of (namespace, hash, parent hash,
 * medium) that drained events are replayed into and that is compared with
 * rkv_tree_snapshot() (one entry per page and medium).
 *
 * Replay asserts the stream: seqs strictly increase by one (or resume at
 * marker.seq + marker.lost after a RESYNC), a stored hash is new in its
 * medium and its parent is cached in some medium (prefix closure), a
 * removed hash is cached in that medium and namespace. After a RESYNC marker the next compare rebuilds the model from
 * the snapshot.
 */
#ifndef RKV_TESTS_EVENT_MODEL_H
#define RKV_TESTS_EVENT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"
#include "tests/support/event_driver.h"

typedef struct evm {
    rkv_block_entry *e;
    size_t n, cap;
    uint64_t next_seq; /* seq the next drained event must have (start: 1) */
    int need_resync;
    uint64_t resyncs, events;
} evm;

/* Drains up to `budget` events (in batches of up to `batch`, at most 8)
 * into m. Returns the number drained. */
uint32_t evm_drain(evd *d, evm *m, uint32_t budget, uint32_t batch);

/* With the ring drained: m equals the snapshot (after resyncing from it if
 * a marker came). */
void evm_compare(evd *d, evm *m);

#endif

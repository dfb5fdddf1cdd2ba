/*
 * tests/support/event_driver.h -- one simulated instance (pool + tree with
 * KV events on) driven by random operations, for the event and router
 * differential tests (tests/test_tree_events.c, tests/test_router.c).
 *
 * An operation is what a server or an embedder issues: a request (match,
 * lock, alloc_blocks with eviction, insert, unlock, release its blocks),
 * peek / non-peek matches, evict, alloc_blocks + release, reset (BUSY while
 * leases are held), lock / unlock of handles kept across operations, and
 * the same insert / match with an out-of-memory injected. Token streams
 * share prefixes heavily (a few base sequences over a tiny alphabet), and
 * every instance draws from the same bases, so instances cache the same
 * hashes. Three namespaces.
 *
 * Every step asserts the event contract it can see without draining: a
 * call that fails recorded nothing (the tree's last seq, from
 * rkv_tree_snapshot, did not move), rkv_tree_check and rkv_pool_check pass.
 */
#ifndef RKV_TESTS_EVENT_DRIVER_H
#define RKV_TESTS_EVENT_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"
#include "tests/support/test_util.h"

#define EVD_MAX_LEASES 6
#define EVD_MAX_TOK 96

typedef struct evd {
    rkv_pool *pool;
    rkv_tree *tree;
    uint32_t P;
    rkv_lease leases[EVD_MAX_LEASES];
    int nleases;
    uint64_t ops, failed_ops, oom_hits, resets;
} evd;

void evd_open(evd *d, uint32_t num_blocks, uint32_t P, uint32_t ring);
void evd_close(evd *d);

/* Random tokens for namespace choice; *ns gets the namespace. Returns n. */
uint32_t evd_tokens(rkv_rng *rng, int32_t *out, uint64_t *ns);

/* One random operation (allow_oom: may inject an allocation failure). */
void evd_step(evd *d, rkv_rng *rng, int allow_oom);

/* evd_open, then rng seeded with seed and `steps` operations run with it
 * (no injected allocation failure). */
void evd_open_steps(evd *d, uint32_t num_blocks, uint32_t P, uint32_t ring, rkv_rng *rng,
                    uint64_t seed, int steps);

/* The tree's last seq (recorded or dropped). */
uint64_t evd_last_seq(const evd *d);

/* Snapshot into a malloc'ed array (*n entries; free it). */
rkv_block_entry *evd_snapshot(const evd *d, size_t *n, uint64_t *seq);

#endif

/*
 * router/router_internal.h -- the fleet router's data structures, shared by
 * router/index.c (the block table), router/router.c (instances, events,
 * snapshots, stats, check) and router/route.c (overlap walk and scoring).
 *
 * Layout:
 *   - One open-addressing table (linear probing, load <= 1/2) of entries,
 *     one per distinct block hash held by any instance; an entry names its
 *     hash, namespace, parent hash and, per medium, a 64-bit mask of the
 *     instance slots holding it. A slot is free iff all its masks are zero
 *     (an entry that loses its last holder is deleted at once). Home =
 *     (hash * golden) >> shift: the hashes are chained XXH3 values, but an
 *     embedder may feed anything. Deletion shifts back (no tombstones), so
 *     a probe ends at the first free slot. Entries live in the table itself
 *     so a lookup is one cache miss (a separate index + entry array was two
 *     or more, and measurably slower: bench/RESULTS.md).
 *   - Instances: RKV_ROUTER_MAX_INSTANCES slots; slot s is bit s of every
 *     mask. order[0..num_instances) lists used slots by instance id.
 *     blocks[m] counts the entries whose mask m has the slot's bit.
 *     An instance with needs_resync holds no bit anywhere.
 *
 * Why a flat table keyed by the chained hash and not a tree of hashes: a
 * chained hash already names its whole prefix, so the table IS the radix
 * over the hash chain flattened: a query looks each page's hash up once,
 * following the chain, and intersects holder masks; the parent hash is
 * kept for snapshots and checks. One 64-bit AND per page answers all
 * instances at once.
 */
#ifndef RKV_ROUTER_INTERNAL_H
#define RKV_ROUTER_INTERNAL_H

#include <stdint.h>

#include "radixkv_router.h"

#define RKV_RT_EMPTY UINT32_MAX

typedef struct rkv_rt_entry {
    uint64_t hash;
    uint64_t ns;
    uint64_t parent;
    uint64_t mask[RKV_MEDIUM_COUNT];
} rkv_rt_entry;

typedef struct rkv_rt_instance {
    uint64_t id;
    int used;
    int needs_resync;
    uint64_t last_seq;
    uint64_t blocks[RKV_MEDIUM_COUNT];
    uint32_t running;
    uint64_t queued_tokens;
} rkv_rt_instance;

struct rkv_router {
    rkv_router_config cfg;
    rkv_rt_entry *entries; /* the table: [table_cap]                    */
    uint32_t count;     /* entries in use                                 */
    uint32_t table_cap; /* power of two                                   */
    uint32_t shift;     /* 64 - log2(table_cap)                           */
    rkv_rt_instance inst[RKV_ROUTER_MAX_INSTANCES];
    uint32_t order[RKV_ROUTER_MAX_INSTANCES];
    uint32_t num_instances;
    uint64_t live_mask; /* used slots without needs_resync                */
    rkv_router_stats st; /* counters (instances/entries/bytes derived)    */
};

/* index.c ------------------------------------------------------------------ */
rkv_status rkv_rt_index_init(rkv_router *r, uint32_t initial);
void rkv_rt_index_fini(rkv_router *r);
/* Table slot of hash's entry, or RKV_RT_EMPTY. */
uint32_t rkv_rt_find(const rkv_router *r, uint64_t hash);
/* Room for `more` new entries without allocating later; RKV_ERR_NOMEM
 * (nothing changes). */
rkv_status rkv_rt_reserve(rkv_router *r, uint32_t more);
/* New entry with empty masks (room reserved); returns its slot. Until a
 * mask bit is set the slot counts as free: set one, or rkv_rt_remove it,
 * before the next add. */
uint32_t rkv_rt_add(rkv_router *r, uint64_t hash, uint64_t ns, uint64_t parent);
/* Deletes the entry in slot idx (later entries of its cluster may move
 * back, into idx included). */
void rkv_rt_remove(rkv_router *r, uint32_t idx);
static inline uint32_t rkv_rt_home(const rkv_router *r, uint64_t hash)
{
    return (uint32_t)((hash * 0x9E3779B97F4A7C15ull) >> r->shift);
}
static inline uint64_t rkv_rt_any(const rkv_rt_entry *e)
{
    return e->mask[0] | e->mask[1] | e->mask[2];
}

/* router.c ----------------------------------------------------------------- */
/* Slot of instance id, or RKV_RT_EMPTY. */
uint32_t rkv_rt_slot_of(const rkv_router *r, uint64_t id);

#endif

/*
 * router/router_internal.h -- the fleet router's data structures, shared by
 * router/index.c (the block table), router/router.c (instances, events,
 * stats, check), router/snapshot.c (staged snapshots) and router/route.c
 * (overlap search and scoring).
 *
 * Layout:
 *   - Instance slots: RKV_INDEX_SLOTS of them, in groups of 64 (slot s is bit
 *     s % 64 of group s / 64). A slot is free, an instance's, or a staging
 *     slot that collects a snapshot for its owner instance (see
 *     router/snapshot.c) and is not live. Slots are handed out lowest
 *     first, so a fleet of <= 64 instances lives in group 0.
 *   - One open-addressing table (linear probing, load <= 1/2) of 16-byte
 *     entries, one per (namespace, block hash, group, medium) held by any
 *     slot of that group on that medium: a 64-bit key and a 64-bit mask of
 *     the group's slots holding it there. key = fmix64(hash ^ fmix64(ns))
 *     with its low 7 bits replaced by the medium (bits 5-6) and the group
 *     (bits 0-4): a block is named by (ns, hash) as in the tree, and two
 *     keys collide with probability 2^-57 (the block hashes themselves are
 *     64-bit). The table has a power of two entries, home = key >> shift;
 *     where that would pass the bytes budget (max_table_bytes) or 1 GiB
 *     it has the multiple of 4 entries it needs at load <= 17/32 instead,
 *     home = (key's top 32 bits x table_cap) >> 32 (a range reduction by
 *     a multiply, monotone in the key as the shift is; a few cycles more
 *     per probe, and a fuller table, so only where memory is bounded or
 *     a power of two would waste most).
 *     A slot is free iff its mask is zero (an
 *     entry that loses its last holder is deleted at once). Deletion
 *     shifts back (no tombstones), so a probe ends at the first free slot.
 *     Four entries per cache line, never one across two: a lookup is one
 *     line. Keying by medium instead of keeping three masks in each entry
 *     halves the table where only the device is used (the common case: a
 *     32-byte entry with a mask per medium was 3/4 zeros there), and a
 *     block that is on the device and on the host costs one entry more.
 *     offdev[g] counts group g's host and disk entries: while it is 0
 *     (no tiers) "held on any medium" is one lookup, not three.
 *     Up to 64 instances every device block has one entry; a block held in
 *     k groups has k entries, so memory grows with what is held, never with
 *     the instance limit, and an event touches only its instance's group.
 *   - order[0..num_instances) lists the instance slots by id (binary
 *     search for an id). blocks[m] counts the entries whose mask m has the
 *     slot's bit. An instance with needs_resync holds no bit anywhere;
 *     live[g] has the bits of group g's in-sync instance slots,
 *     inst_mask[g] those of all its instance slots; base[s] is instance
 *     slot s's score with no page cached (its load alone).
 *
 * Why a flat table keyed by the chained hash and not a tree of hashes: a
 * chained hash already names its whole prefix, so the table IS the radix
 * over the hash chain flattened. Every instance's cached set is prefix-
 * closed (a tree caches a page only under its cached parent; the router
 * refuses a store whose parent the instance does not hold), so along a
 * request's chain the holder mask only loses bits: route.c finds where
 * each bit drops by galloping + bisection, O(log n) lookups per distinct
 * overlap instead of one per page.
 */
#ifndef RKV_ROUTER_INTERNAL_H
#define RKV_ROUTER_INTERNAL_H

#include <stdint.h>

#include "radixkv_router.h"

#define RKV_INDEX_EMPTY UINT32_MAX
/* instance slots + one spare group for staging snapshots */
#define RKV_INDEX_SLOTS (RKV_ROUTER_MAX_INSTANCES + 64u)
#define RKV_INDEX_GROUPS (RKV_INDEX_SLOTS / 64u)

/* A search span (router/route.c): in group g, pages (lo, hi] hold a drop
 * of some bit; plo / phi are the probes at lo and hi (lo = -1: before
 * page 0, every live bit), a = holders on any medium, d = on the device. */
typedef struct rkv_index_probe {
    uint64_t a, d;
} rkv_index_probe;
typedef struct rkv_index_span {
    int64_t lo, hi;
    rkv_index_probe plo, phi;
    uint32_t g;
} rkv_index_span;
/* spans one level of the search holds at most: each bit leaves A once and
 * D once, and a kept span holds a leaving bit */
#define RKV_INDEX_SPANS (2u * 64u * RKV_INDEX_GROUPS)

typedef struct rkv_index_entry {
    uint64_t key;
    uint64_t mask; /* the group's slots holding the block on the key's medium */
} rkv_index_entry;

_Static_assert(sizeof(rkv_index_entry) == 16, "four entries per cache line");
_Static_assert(RKV_INDEX_GROUPS <= 32, "the group fits the key's low 5 bits");
_Static_assert(RKV_MEDIUM_COUNT <= 4, "the medium fits the key's bits 5-6");

static inline uint64_t rkv_index_fmix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}
/* Per namespace, once per call: the part of the key the namespace gives. */
static inline uint64_t rkv_index_nsmix(uint64_t ns)
{
    return rkv_index_fmix(ns ^ 0x9E3779B97F4A7C15ull);
}
/* The key of (hash, namespace) in group `group` on medium `medium`. The
 * media's keys differ only in bits 5-6, so they share a home often enough
 * not to matter and never otherwise. */
static inline uint64_t rkv_index_key(uint64_t hash, uint64_t nsmix,
                                     uint32_t group, uint32_t medium)
{
    return (rkv_index_fmix(hash ^ nsmix) & ~(uint64_t)127) |
           ((uint64_t)medium << 5) | group;
}
/* The same block's key on another medium. */
static inline uint64_t rkv_index_on(uint64_t key, uint32_t medium)
{
    return (key & ~(uint64_t)96) | ((uint64_t)medium << 5);
}
static inline uint32_t rkv_index_group(const rkv_index_entry *e)
{
    return (uint32_t)(e->key & 31);
}
static inline uint32_t rkv_index_medium(const rkv_index_entry *e)
{
    return (uint32_t)((e->key >> 5) & 3);
}

enum { RKV_INDEX_FREE = 0, RKV_INDEX_INSTANCE = 1, RKV_INDEX_STAGING = 2 };

typedef struct rkv_index_slot {
    uint64_t id;            /* RKV_INDEX_INSTANCE                              */
    uint32_t role;          /* RKV_INDEX_FREE / _INSTANCE / _STAGING           */
    uint32_t staging;       /* INSTANCE: its staging slot or RKV_INDEX_EMPTY;
                               STAGING: the owner's slot                     */
    int needs_resync;
    uint64_t last_seq;
    uint64_t stage_seq;     /* INSTANCE with a staging slot: snapshot seq   */
    uint64_t blocks[RKV_MEDIUM_COUNT];
    uint32_t running;       /* the last load report                        */
    uint64_t queued_tokens;
    uint32_t routed_running; /* routed here since it (rkv_router_choose)   */
    uint64_t routed_tokens;
} rkv_index_slot;

/* The score (radixkv/router.h) of an instance whose load term is `base`
 * with pages_by_medium pbm[] of the request cached: the one formula
 * every query path uses, so they agree to the bit. With no page it is
 * base itself (0 * weights is +0, and +0 + base is base). */
static inline double rkv_index_score(const rkv_router_config *c, double base,
                                     const uint32_t *pbm)
{
    double w = 0;
    for (int m = 0; m < RKV_MEDIUM_COUNT; m++)
        w += c->medium_weight[m] * (double)pbm[m];
    return c->page_tokens * w + base;
}
/* The load term: minus the queued tokens (reported + routed) and the
 * running requests, weighted; +0 (not -0) with no load. */
static inline double rkv_index_base(const rkv_router_config *c,
                                    const rkv_index_slot *in)
{
    double q = c->queue_weight *
               ((double)in->queued_tokens + (double)in->routed_tokens);
    double u = c->running_weight *
               ((double)in->running + (double)in->routed_running);
    return (0.0 - q) - u;
}

struct rkv_router {
    rkv_router_config cfg;
    rkv_index_entry *entries; /* the table: [table_cap]                    */
    uint32_t count;     /* entries in use                                 */
    uint32_t table_cap; /* a power of two, or a multiple of 4 (>= 64)    */
    uint32_t shift;     /* power of two: 64 - log2(table_cap); else 0     */
    uint32_t limit;     /* entries allowed (the memory budget): count <=
                           limit, and a table of limit entries fits
                           max_table_bytes                                */
    rkv_index_slot inst[RKV_INDEX_SLOTS];
    uint32_t order[RKV_ROUTER_MAX_INSTANCES];
    uint32_t num_instances;
    uint64_t live[RKV_INDEX_GROUPS]; /* in-sync instance slots per group     */
    uint64_t inst_mask[RKV_INDEX_GROUPS]; /* instance slots (any sync state)  */
    /* base[s]: instance slot s's load term (rkv_index_base), its score for
     * a request it caches none of; recomputed whenever its four load
     * counts change. A query scores every instance: from this compact
     * array a large fleet's instances cost a load and a compare each */
    double base[RKV_INDEX_SLOTS];
    uint32_t offdev[RKV_INDEX_GROUPS]; /* host and disk entries per group    */
    rkv_index_span *spans; /* the search's two levels: 2 x RKV_INDEX_SPANS */
    uint64_t *qhash;    /* rkv_router_*_tokens: the request's page hashes */
    uint32_t qhash_cap;
    uint64_t rng;       /* splitmix64 state, from cfg.seed               */
    rkv_router_stats st; /* counters (instances/entries/bytes derived)    */
};

/* Recomputes instance slot s's load term. */
static inline void rkv_index_load_terms(rkv_router *r, uint32_t s)
{
    r->base[s] = rkv_index_base(&r->cfg, &r->inst[s]);
}

/* index.c ------------------------------------------------------------------ */
rkv_status rkv_index_index_init(rkv_router *r, uint32_t initial);
void rkv_index_index_fini(rkv_router *r);
/* Room for `more` new entries (at most up to the budget, r->limit)
 * without allocating later; RKV_ERR_NOMEM (nothing changes). */
rkv_status rkv_index_reserve(rkv_router *r, uint32_t more);
/* The budget is reached: no entry may be added (reserve never grows the
 * table past it, so callers check this before each rkv_index_add). */
static inline int rkv_index_full(const rkv_router *r)
{
    return r->count >= r->limit;
}
/* New entry with an empty mask (room reserved, not full); returns its slot. Until a
 * mask bit is set the slot counts as free: set one, or rkv_index_remove it,
 * before the next add. */
uint32_t rkv_index_add(rkv_router *r, uint64_t key);
/* Deletes the entry in slot idx (later entries of its cluster may move
 * back, into idx included). */
void rkv_index_remove(rkv_router *r, uint32_t idx);
/* Entries a table of cap entries may hold (its load bound). */
static inline uint32_t rkv_index_load_max(uint64_t cap)
{
    return (uint32_t)((cap & (cap - 1)) == 0 ? cap / 2 : cap * 17 / 32);
}
static inline uint32_t rkv_index_home(const rkv_router *r, uint64_t key)
{
    if (r->shift != 0)
        return (uint32_t)(key >> r->shift);
    return (uint32_t)(((key >> 32) * (uint64_t)r->table_cap) >> 32);
}
static inline uint32_t rkv_index_succ(const rkv_router *r, uint32_t i)
{
    return i + 1 == r->table_cap ? 0 : i + 1;
}
/* Claims free slot i, where a probe for key ended without finding it
 * (room reserved, not full), as rkv_index_add does. */
static inline void rkv_index_add_at(rkv_router *r, uint32_t i, uint64_t key)
{
    rkv_index_entry *e = &r->entries[i];
    e->key = key;
    e->mask = 0;
    r->count++;
    if (rkv_index_medium(e) != RKV_MEDIUM_DEVICE)
        r->offdev[rkv_index_group(e)]++;
}
/* The slot of key's entry (its mask is not 0), or the free slot where a
 * probe for it from its home i ends, where rkv_index_add_at would put it
 * (its mask is 0). The one probe loop, for finds and the event path. */
static inline uint32_t rkv_index_seek(const rkv_router *r, uint64_t key,
                                      uint32_t i)
{
    const rkv_index_entry *t = r->entries;
    for (;;) {
        if (t[i].mask == 0 || t[i].key == key)
            return i;
        if (++i == r->table_cap)
            i = 0;
    }
}
/* Table slot of key's entry, or RKV_INDEX_EMPTY. */
static inline uint32_t rkv_index_find(const rkv_router *r, uint64_t key)
{
    uint32_t i = rkv_index_seek(r, key, rkv_index_home(r, key));
    return r->entries[i].mask != 0 ? i : RKV_INDEX_EMPTY;
}
/* The mask of key's entry (0 if none). */
static inline uint64_t rkv_index_mask(const rkv_router *r, uint64_t key)
{
    uint32_t i = rkv_index_find(r, key);
    return i == RKV_INDEX_EMPTY ? 0 : r->entries[i].mask;
}
/* The slots of group g holding the block of device key `key` on any
 * medium: one lookup while the group has no host or disk entry. */
static inline uint64_t rkv_index_mask_any(const rkv_router *r, uint32_t g,
                                          uint64_t key)
{
    uint64_t m = rkv_index_mask(r, key);
    if (r->offdev[g] != 0)
        m |= rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_HOST)) |
             rkv_index_mask(r, rkv_index_on(key, RKV_MEDIUM_DISK));
    return m;
}

/* router.c ----------------------------------------------------------------- */
/* Slot of instance id, or RKV_INDEX_EMPTY. O(log instances). */
uint32_t rkv_index_slot_of(const rkv_router *r, uint64_t id);
/* The entry points' common opening, for entry point fn: *slot = the slot
 * of registered instance id. INVALID_ARG for a NULL router or a NULL
 * array `items` (named items_name in the message) of n > 0 items (pass
 * NULL, 0, NULL when there is none), so entry points need no check of
 * their own; NOT_FOUND (counted in stats.unknown_instance) for an unknown
 * id. */
rkv_status rkv_index_lookup(rkv_router *r, uint64_t id, const void *items, size_t n,
                         const char *items_name, const char *fn, uint32_t *slot);
/* Removes slot s's bit from every entry of its group (entries left empty
 * go) and zeroes its block counts. Cannot fail. O(table). */
void rkv_index_clear_slot(rkv_router *r, uint32_t s);
/* A free slot (lowest first), or RKV_INDEX_EMPTY. */
uint32_t rkv_index_free_slot_any(const rkv_router *r);

/* snapshot.c --------------------------------------------------------------- */
/* Drops instance slot s's staging slot, if any. Cannot fail. */
void rkv_index_stage_drop(rkv_router *r, uint32_t s);

#endif

/*
 * retain/retain.h -- the retention layer's interface: pins (retain/pins.c),
 * namespace TTLs (retain/ns_ttl.c) and what the residency layer and the
 * facade (treeapi/tree_api.c) call of them. Sessions (retain/session.c)
 * and the learned and guarded eviction orders (retain/evict_learned.h,
 * retain/evict_guard.h) have their own headers or none.
 *
 * The per-node retention entry (rkv_node_retention) lives in radix/tree_core.h:
 * the core's eviction order reads it inline. Everything else of retention
 * (the pin table, its deadline heap, the counters) is this layer's.
 */
#ifndef RKV_RETAIN_RETAIN_H
#define RKV_RETAIN_RETAIN_H

#include "radix/tree_core.h"

/* One pin: live iff node != 0 (slot 0, the super-root, is never pinned).
 * A live pin with lease.id != 0 holds its pages on the device; one with
 * lease.id == 0 is LOWERED (residency/lowered_pins.c): device pressure took
 * its lease, and its path counts it in tn[].lpin instead of pin_count. */
typedef struct rkv_pin {
    uint64_t owner;
    uint64_t deadline;  /* ms; > the tree's now_ms while live           */
    uint64_t seq;       /* creation order: breaks deadline ties         */
    rkv_lease lease;    /* internal lease on node; id 0: lowered        */
    uint32_t node;
    uint32_t heap_pos;  /* live: index in pin_heap; free: next free pin */
} rkv_pin;

/* What retention needs of the tiers below the device: lowering a pin
 * instead of revoking it, and the lower tiers' lists of LOWER nodes, which
 * a priority also orders. The residency layer implements it
 * (residency/lowered_pins.c) and registers it in t->retain.tier_ops while
 * tiers are attached; NULL otherwise (no pin is lowered then). */
typedef struct rkv_pin_tier_ops {
    /* device pressure lowers pins instead of revoking them */
    int (*can_lower)(const rkv_tree *t);
    /* leased pin p gives its lease back and is counted as lowered */
    void (*lower)(rkv_tree *t, uint32_t p);
    /* adds delta to the lowered-pin count of the path node..root */
    void (*path)(rkv_tree *t, uint32_t node, int delta);
    /* node id lives below the device (a LOWER node) */
    int (*node_is_lower)(const rkv_tree *t, uint32_t id);
    /* LOWER node id leaves (0) or rejoins (1) its tier's list around a
     * priority change */
    void (*relist)(rkv_tree *t, uint32_t id, int rejoin);
    /* the lowered pins' share of rkv_tree_check (lown[y]: lowered pins
     * ending at y, or NULL when there is no retention data) and of the
     * retention stats */
    rkv_status (*check)(const rkv_tree *t, const uint32_t *lown);
    void (*stats)(const rkv_tree *t, rkv_retention_stats *out);
} rkv_pin_tier_ops;

/* retain/ns_ttl.c -------------------------------------------------------- */
/* ns's default pin TTL, 0 if none. O(RKV_NS_TTL_MAX). */
uint64_t rkv_ns_ttl_lookup(const rkv_tree *t, rkv_namespace ns);
/* Its invariants (rkv_tree_check). */
rkv_status rkv_ns_ttl_check(const rkv_tree *t);

/* retain/pins.c ---------------------------------------------------------- */
/* Pages that revoking every pin would make evictable (yield_blocks, O(1)). */
uint64_t rkv_pins_yieldable(const rkv_tree *t);
/* Revokes pins, earliest deadline first among those whose pages only pins
 * hold (retain/pins.c says which first), until evictable_blocks >= need or
 * no revocation can free anything. */
void rkv_pins_revoke_until(rkv_tree *t, uint64_t need);
/* Drops every pin (reset). */
void rkv_pins_drop_all(rkv_tree *t);
/* Drops live pin p, leased or lowered (its counts, heap entry, lease);
 * the caller counts why. */
void rkv_pin_drop(rkv_tree *t, uint32_t p);
/* Retention at create: the pin cap (max_pinned_pct of the pool) and the
 * hooks (pins yield to allocations). */
void rkv_retain_attach(rkv_tree *t, uint32_t max_pinned_pct);
/* Frees the retention tables (destroy). */
void rkv_retain_fini(rkv_tree *t);
/* Verifies pins, pin counts, the cap and the heap. */
rkv_status rkv_retain_check(const rkv_tree *t);

#endif

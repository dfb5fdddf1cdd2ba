/*
 * radix/tree_lease.h -- what other modules of the library (the scheduler's
 * check, the tests) may ask about a lease; not public. The lease table itself:
 * radix/tree_lease.c.
 */
#ifndef RKV_RADIX_TREE_LEASE_H
#define RKV_RADIX_TREE_LEASE_H

#include <stdint.h>

#include "radix/tree_core.h"

/* The node a held lease locks. RKV_ERR_STATE if the lease is not held in
 * this tree (zero, released, forged, another tree's). */
rkv_status rkv_tree_lease_node(const rkv_tree *tree, const rkv_lease *lease,
                               rkv_node *out);

/* 1 if the lease id cipher matches its published test vector. */
int rkv_lease_cipher_selftest(void);

/* Draws this tree's lease key (at create; t->pool set, trees_made not yet
 * counted). */
void rkv_lease_init(rkv_tree *t);
/* Frees the lease table (destroy). */
void rkv_lease_fini(rkv_tree *t);
/* Slot of a live lease with this id, or RKV_NIL. */
uint32_t rkv_lease_find(const rkv_tree *t, uint64_t id);
/* Verifies the lease table and adds one to own[node] per live lease
 * (own has nodes_used entries). RKV_ERR_CORRUPT with a message. */
rkv_status rkv_lease_check(const rkv_tree *t, uint32_t *own);
/* Makes sure one lease can be taken without allocating. */
rkv_status rkv_lease_reserve(rkv_tree *t, const char *fn);
/* Releases a live lease slot. stamp: the path becomes most recently used
 * (rkv_tree_unlock); else a node that becomes evictable is placed by its
 * old last_access (a pin that expires is not a use). */
void rkv_lease_unlock_slot(rkv_tree *t, uint32_t slot, int stamp);

/* Frees a lease slot (its node's lock counts are the caller's business). */
void rkv_lease_release(rkv_tree *t, uint32_t slot);

#endif

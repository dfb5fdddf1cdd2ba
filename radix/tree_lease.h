/*
 * radix/tree_lease.h -- what other modules of the library (the scheduler's
 * check, the tests) may ask about a lease; not public. The lease table itself:
 * radix/tree_lease.c.
 */
#ifndef RKV_RADIX_TREE_LEASE_H
#define RKV_RADIX_TREE_LEASE_H

#include "radixkv.h"

/* The node a held lease locks. RKV_ERR_STATE if the lease is not held in
 * this tree (zero, released, forged, another tree's). */
rkv_status rkv_tree_lease_node(const rkv_tree *tree, const rkv_lease *lease,
                               rkv_node *out);

/* 1 if the lease id cipher matches its published test vector. */
int rkv_lease_cipher_selftest(void);

#endif

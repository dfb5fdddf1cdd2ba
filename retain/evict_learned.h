/*
 * retain/evict_learned.h -- RKV_EVICT_LEARNED: eviction that learns, from the
 * request stream itself, when a leaf's conversation comes back (see
 * retain/evict_learned.c for the model and why it has this shape).
 */
#ifndef RKV_RADIX_EVICT_LEARNED_H
#define RKV_RADIX_EVICT_LEARNED_H

#include <stdint.h>

#include "radixkv.h"

#define RKV_LEARN_GENS 4     /* continuation depth 0, 1, 2, 3+            */
#define RKV_LEARN_SIZES 5    /* new pages 1, 2, 3-4, 5-8, 9+              */
#define RKV_LEARN_CLASSES (RKV_LEARN_GENS * RKV_LEARN_SIZES)
#define RKV_LEARN_AGES 64    /* log-scale age buckets, 4 per octave      */
/* LRU bucket of class 0 (buckets 0..100 stay priorities). */
#define RKV_LEARN_BUCKET0 (RKV_PRIORITY_MAX + 1)
#define RKV_LEARN_REFRESH 256 /* births between two index refreshes      */

/* A leaf end recorded at its birth: its last page's chained hash. */
typedef struct rkv_ghost {
    uint64_t hash;   /* 0: empty (a chained hash of 0 is simply not kept) */
    uint64_t stamp;  /* tree clock at birth                                */
    uint8_t gen;     /* continuation depth of the request that made it    */
    uint8_t cls;
    uint8_t returned; /* it came back (counted once)                      */
    uint8_t ret_age;  /* age bucket at which it came back                 */
    uint8_t pad[4];
} rkv_ghost;

typedef struct rkv_learn {
    rkv_ghost *ghost;
    uint32_t ghost_cap;   /* power of two; direct-mapped                  */
    uint32_t since;       /* births since the last refresh                */
    uint64_t births_total, returns_total;
    double index[RKV_LEARN_CLASSES][RKV_LEARN_AGES]; /* hits per page-tick */
} rkv_learn;

struct rkv_tree;
/* Allocates the model (and the tree's meta[], whose entries carry each
 * node's class) at tree creation. RKV_ERR_NOMEM leaves nothing allocated. */
/* RKV_EVICT_LEARNED at create: the model, its guard and their hooks
 * (eviction order, uses). On failure the caller frees with rkv_learn_fini
 * and rkv_guard_fini. */
rkv_status rkv_learned_attach(struct rkv_tree *t);
rkv_status rkv_learn_init(struct rkv_tree *t);
void rkv_learn_fini(struct rkv_tree *t);
/* A non-peek match ended at node: a leaf end recorded there came back. */
void rkv_learn_on_match(struct rkv_tree *t, uint32_t node);
/* A new leaf id (hashes set, not yet listed) under parent: classify it,
 * count its birth and record its end. */
void rkv_learn_on_leaf(struct rkv_tree *t, uint32_t id, uint32_t parent);
/* The listed leaf eviction takes next among the learned classes, or
 * RKV_NIL when they are all empty. */
uint32_t rkv_learn_first(const struct rkv_tree *t);
/* Age bucket of an age in clock ticks (exposed for the tests' reference). */
uint32_t rkv_learn_age_bucket(uint64_t age);
/* Class of a leaf made by a request of continuation depth gen with npages
 * new pages. */
uint32_t rkv_learn_class(uint32_t gen, uint32_t npages);
rkv_status rkv_learn_check(const struct rkv_tree *t);

#endif

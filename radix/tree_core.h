/*
 * radix/tree_core.h -- the tree core's data structures, the inline reads
 * its hot paths share, and the slot free list. Each file's functions are
 * declared in its own header, so a file names exactly the files it uses
 * (tree.h: the core's create/clear/destroy and prepared memory;
 * tree_match.h: walk, new root, split; tree_hash.h: lazy page hashes;
 * tree_lru.h: LRU lists and touch; tree_lease.h: the lease table;
 * child_index.h: the child hash index; node_mem.h: the allocator;
 * tree_debug.h: check and debug hooks). This header declares no function
 * of a .c file, so it sits below all of them.
 *
 * Layers above the core (events/: KV events, store log, snapshot;
 * retain/: pins, TTLs, sessions, learned and guarded eviction;
 * residency/: tier residency; treeapi/: the facade that assembles them)
 * include this header; it includes none of theirs. The core reaches them
 * only through rkv_tree_hooks (below), which they register. Their state
 * still sits in struct rkv_tree, grouped and marked with its owner; the
 * per-node parts the core's hot paths read inline (the retention entry
 * meta[] for the eviction bucket and pin yield, the residency entry tn[]
 * for match and unlock) are declared here so those reads stay inline.
 *
 * Layout:
 *   - Nodes live in one slot table (nodes[]); a node id is its index. Slot 0
 *     is a super-root that is never a handle target; every namespace has a
 *     root node (0 pages, parent 0) that stores the namespace value itself,
 *     found by exact comparison. A free slot has parent == RKV_NIL and is
 *     chained through next_sib.
 *   - A node's edge is num_pages full pages. Its memory `tokens` holds
 *     cap_pages * P token ids of tok_bytes each (radix/tree_tokens.h),
 *     padded to 4 bytes, followed by cap_pages block ids (one allocation);
 *     eviction trims pages from the tail by lowering num_pages only (it must
 *     not allocate), so cap_pages >= num_pages.
 *   - Children of a node form a doubly linked sibling list (first_child,
 *     next_sib, prev_sib). Child lookup goes through ONE global
 *     open-addressing table: key = XXH3_64(first page, seed = parent id) for
 *     a node, XXH3_64(ns, seed 0) for a namespace root; entries hold the top
 *     32 bits of the key (home slot = tag & mask) and the node id; a hit is
 *     confirmed by comparing the node's parent and first page (or ns).
 *   - Evictable leaves (non-root, no child, lock_count 0) form intrusive
 *     doubly linked LRU lists ordered by last_access, oldest at the head:
 *     one list (bucket 0) under RKV_EVICT_LRU, one per priority 0..100 under
 *     RKV_EVICT_PRIORITY (rkv_lru_bucket); lru_nonempty has bit b set iff
 *     bucket b is non-empty. Membership is exactly that predicate
 *     (rkv_tree_in_lru), so it is never stored.
 *   - Retention (retain/pins.c): meta[] (NULL until the first
 *     rkv_tree_retain, then one entry per slot) holds each node's priority
 *     and pin_count = pins ending at it + its children's pin_count. A pin
 *     holds an internal lease on its node, so pinned paths are locked
 *     (pin_count <= lock_count); a LOWERED pin (residency/lowered_pins.c) holds
 *     none and is counted in tn[].lpin instead; pinned_blocks = pages of nodes with
 *     pin_count > 0 <= pin_cap_blocks. Pins live in pins[] and a min-heap
 *     of deadlines; every live pin's deadline is > now_ms. A live node's
 *     priority deadline (meta[].prio_until) is 0 or > now_ms, and then
 *     prio_next != 0 and <= it.
 *   - lock_count of a node = live leases on it + lock_count of its children
 *     (lock walks from the node itself up to the namespace root). A locked
 *     node is never in the LRU list (its lru links are RKV_NIL).
 *   - Leases (tree_lease.c): every lock is one slot of the lease table,
 *     naming the locked node; lock_total == live slots. A lease id is
 *     ((gen << RKV_LEASE_SLOT_BITS) | slot) enciphered with the tree's
 *     secret key (a 64-bit block cipher, tree_lease.c): the slot's
 *     generation changes at every release, so a released lease no longer
 *     names its slot, and ids of other trees, forged values and values
 *     derived from held leases decipher to slots that are free or carry
 *     another generation. A locked node is never evicted, trimmed
 *     or freed (reset refuses while leases live), and a split keeps the
 *     locked end's id, so a live slot's node id stays valid for the lease's
 *     whole life.
 *
 * Generations: a handle {id, gen} is valid iff the slot is in use and has
 * that gen. Freeing a slot or trimming a node's tail bumps gen (never 0), so
 * a zeroed handle is never valid.
 */
#ifndef RKV_RADIX_TREE_CORE_H
#define RKV_RADIX_TREE_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/status.h"
#include "radix/node_mem.h"
#include "radixkv.h"

#define RKV_NIL UINT32_MAX

typedef struct rkv_tnode {
    uint32_t parent;      /* RKV_NIL: free slot; 0: namespace root        */
    uint32_t first_child;
    uint32_t next_sib;    /* free slot: next free slot                    */
    uint32_t prev_sib;
    uint32_t lru_prev;    /* locked node (never listed): its OWN locks   */
    uint32_t lru_next;
    uint32_t num_pages;
    uint32_t cap_pages;   /* pages the memory at `tokens` was sized for   */
    uint32_t lock_count;
    uint32_t gen;
    uint64_t last_access; /* logical clock of the last use                */
    uint64_t children_epoch;
    union {
        int32_t *tokens;  /* cap_pages * P tokens, then cap_pages ids
                             (4-byte layout; radix/tree_tokens.h)        */
        uint8_t *tok8;    /* the same memory as bytes (either layout)     */
        uint64_t ns;      /* namespace root: its namespace value          */
    } u;
} rkv_tnode;

_Static_assert(sizeof(rkv_tnode) == 64, "a node is one cache line");

/* One lease: live iff node != 0 (slot 0, the super-root, is never locked). */
typedef struct rkv_lease_slot {
    uint64_t gen;  /* 1 .. 2^RKV_LEASE_GEN_BITS - 1; bumped at release     */
    uint32_t node; /* the locked node, or 0: free                           */
    uint32_t next; /* free: next free slot in FIFO order, RKV_NIL ends      */
} rkv_lease_slot;

#define RKV_LEASE_SLOT_BITS 24
#define RKV_LEASE_GEN_BITS (64 - RKV_LEASE_SLOT_BITS)
#define RKV_LEASE_MAX_SLOTS (1u << RKV_LEASE_SLOT_BITS) /* leases held at once */
#define RKV_LEASE_ROUNDS 27 /* Speck64/128 */

/* Per-slot retention data (retain/pins.c). */
typedef struct rkv_node_retention {
    uint32_t pin_count; /* pins ending at the node or below it          */
    uint8_t prio;       /* 0..100                                       */
    uint8_t cls;        /* RKV_EVICT_LEARNED: the node's learned class  */
    uint8_t flags[2];   /* [RKV_META_ENDED]: only sessions that ended used
                           the node (retain/session.c); a use clears it */
    uint64_t prio_until; /* ms after which prio reverts to the default (a
                            retention's priority_duration_ms); 0: never.
                            Nonzero only > now_ms (reverted at every time
                            move); a split copies it with prio           */
} rkv_node_retention;
/* A fresh node's retention entry. */
#define RKV_NODE_RETENTION_FRESH ((rkv_node_retention){0, RKV_PRIORITY_DEFAULT, 0, {0, 0}, 0})
#define RKV_META_ENDED 0

/* Buckets 0..100: priorities; 101..120: RKV_EVICT_LEARNED's classes
 * (retain/evict_learned.c); 127: leaves only ended sessions used, first
 * out under every policy (retain/session.c); at most 128
 * (lru_nonempty has 128 bits). */
#define RKV_LRU_BUCKETS 128
#define RKV_ENDED_BUCKET 127u

typedef struct rkv_child_index_entry {
    uint32_t tag; /* top 32 bits of the key; home = tag & mask          */
    uint32_t id;  /* RKV_NIL: empty                                     */
} rkv_child_index_entry;

/* Tiers (residency/tier*.c; NULL/0 in a tree without lower tiers). Per
 * page, after the block ids of a node's memory (cap_pages entries): the
 * page's host slot, whether a store to it is still queued, and its chained
 * hash (kept for pages that left the device, whose block is gone). */
typedef struct rkv_page_residency {
    uint32_t slot;     /* host slot holding a copy, or RKV_NO_TSLOT       */
    uint32_t hlo, hhi; /* chained hash (valid once the page left the
                          device or while it is LOADING)                  */
} rkv_page_residency;
#define RKV_NO_TSLOT UINT32_MAX

/* Per-slot tier data (tn[], nodes_cap entries, only with tiers). */
typedef struct rkv_node_residency {
    uint32_t lchild;   /* device node: first LOWER child (a list through
                          next_sib/prev_sib); RKV_NIL: none             */
    uint32_t hits;     /* non-peek matches ending at or below (selective) */
    uint32_t lpin;     /* lowered pins ending at or below the node
                          (residency/lowered_pins.c)                        */
    uint8_t flags;     /* RKV_TN_LOWER / RKV_TN_LOADING                   */
    uint8_t pad[3];
} rkv_node_residency;
#define RKV_NODE_RESIDENCY_EMPTY ((rkv_node_residency){RKV_NIL, 0, 0, 0, {0, 0, 0}})
#define RKV_TN_LOWER 1u
#define RKV_TN_LOADING 2u
#define RKV_TN_DISK 4u    /* with LOWER/LOADING: the slot is a disk slot (host
                              and disk both attached)                     */

struct rkv_tier;
struct rkv_tree;

/* An insert whose new pages replace an off-device child (residency/: a
 * LOWER node, with lowered pins passing through it). The residency layer
 * plans it (read-only), the core prepares the memory the plan needs -- the
 * new pages cut into cuts[] + 1 nodes, and tail split after tail_k pages
 * when tail_k > 0 -- and then the layer moves what it keeps around the
 * core's commit. */
#define RKV_INSERT_MAX_CUTS 13u
typedef struct rkv_insert_plan {
    uint32_t conflict;     /* the off-device child replaced, or RKV_NIL    */
    uint32_t ncuts;
    uint32_t cuts[RKV_INSERT_MAX_CUTS]; /* ascending, inside (d, npages)  */
    uint32_t tail;         /* off-device node kept past the insert's end
                              (RKV_NIL: none)                             */
    uint32_t tail_k;       /* > 0: split tail after tail_k pages first    */
    /* the residency layer's scratch (meaningless to the core) */
    uint32_t *keep, nkeep, nbr, tails;
    uint32_t br[2 * RKV_INSERT_MAX_CUTS];
} rkv_insert_plan;

/* Hook points of the core, filled in by the layers above it (the facade,
 * treeapi/tree_api.c, registers the ones a tree's config asks for at
 * create; the residency layer sets its own when tiers are attached). Each
 * is NULL when no layer wants it: the core tests the pointer with one
 * predictable branch, so a tree without the layer runs the same code as
 * before the hook existed. The core never calls a layer otherwise. */
typedef struct rkv_tree_hooks {
    /* Eviction order (retain/: learned and guarded eviction): the node
     * device eviction takes next, or RKV_NIL for the core's default (the
     * head of the lowest non-empty LRU bucket), when need more blocks are
     * wanted. Asked after the bucket of ended sessions' leaves, which goes
     * first under every policy. */
    uint32_t (*evict_first)(const struct rkv_tree *t, uint32_t need);
    /* Victim handling (residency/: demotion). Evicts leaf id, freeing up to
     * need blocks with room for at most room block ids; returns the blocks
     * freed, or sets *capped (the loop stops). NULL: the core drops the
     * leaf's tail pages. */
    uint32_t (*evict_node)(struct rkv_tree *t, uint32_t id, uint32_t need,
                           uint32_t room, int *capped);
    /* Allocation pressure (retain/: pins): blocks the layer could make
     * evictable, and making at least need blocks evictable. */
    uint64_t (*yieldable)(const struct rkv_tree *t);
    void (*yield)(struct rkv_tree *t, uint64_t need);
    /* Pages joined or left the device tree (events/: KV events). */
    void (*pages_stored)(struct rkv_tree *t, uint64_t ns, uint64_t parent_hash,
                         const rkv_block_id *blocks, const int32_t *tokens,
                         uint32_t n);
    void (*pages_removed)(struct rkv_tree *t, uint64_t ns,
                          const uint64_t *hashes, uint32_t n);
    /* Pages (their chained hashes) that eviction dropped from the device
     * without tiers (retain/: the guard's shadow tracks what the device
     * holds; with tiers the eviction-order hook sees whole victims). */
    void (*pages_evicted)(struct rkv_tree *t, const uint64_t *hashes,
                          uint32_t n);
    /* Uses (retain/: the learned model and its guard): a non-peek match
     * that ends at node after matched of npages pages; a new leaf (before
     * it is listed, so its bucket can depend on it); the end of an insert
     * that ends at node. */
    void (*on_match)(struct rkv_tree *t, uint32_t node, uint64_t ns,
                     const int32_t *tokens, uint32_t npages, uint32_t matched);
    void (*on_leaf)(struct rkv_tree *t, uint32_t id, uint32_t parent);
    void (*on_insert)(struct rkv_tree *t, uint32_t node);
    /* Residency (residency/): new device pages of leaf id; a split of xid
     * (old memory of old_cap pages, head nid of k pages); the head of the
     * sibling list child (of parent) is on. */
    void (*leaf_added)(struct rkv_tree *t, uint32_t id, uint64_t ns);
    void (*split)(struct rkv_tree *t, uint32_t xid, uint32_t nid,
                  const void *old, uint32_t old_cap, uint32_t k);
    uint32_t *(*sib_head)(struct rkv_tree *t, uint32_t parent, uint32_t child);
    /* Insert over an off-device child (residency/, with tiers only):
     * plan after the walk matched d pages under parent (it may end the
     * insert at d: *npages = d, the pages arrive by a load; else it fills
     * p, conflict RKV_NIL when there is none); abort when the insert fails
     * after planning; detach at commit before the new leaves (head/tail:
     * the prepared arrays of the tail split); attach after them (piece[k]:
     * the node of cut piece k, node: the last). */
    void (*insert_plan)(struct rkv_tree *t, uint32_t parent, uint32_t d,
                        const int32_t *tokens, uint32_t *npages,
                        rkv_insert_plan *p);
    void (*insert_abort)(struct rkv_tree *t, rkv_insert_plan *p);
    void (*insert_detach)(struct rkv_tree *t, rkv_insert_plan *p,
                          const int32_t *tokens, void *head, void *tail);
    void (*insert_attach)(struct rkv_tree *t, rkv_insert_plan *p,
                          const uint32_t *piece, uint32_t node);
    /* rkv_tree_check: nodes in use that are not in the device tree (lower
     * nodes), after verifying them; the layers' own invariants. */
    rkv_status (*check_off_tree)(const struct rkv_tree *t, uint64_t *nodes);
    /* rkv_tree_snapshot of a tree whose pages also live off the device
     * (residency/): one entry per (page, medium). */
    rkv_status (*snapshot)(const struct rkv_tree *t, rkv_block_entry *out,
                           size_t cap, size_t *n_out, uint64_t *seq_out);
    rkv_status (*check)(const struct rkv_tree *t);
    /* The tree's reference on device block b goes (eviction, demotion,
     * clear; swa/: the page's sliding-window KV goes with it). Called
     * from rkv_tree_clear_owned, which every drop passes (the eviction
     * loop, radix/tree_lru.c, calls it beside the bit itself). */
    void (*page_dropped)(struct rkv_tree *t, rkv_block_id b);
} rkv_tree_hooks;

/* Eviction order state of RKV_EVICT_LEARNED (retain/evict_learned.c,
 * retain/evict_guard.c): NULL under the other policies. */
typedef struct rkv_tree_order {
    struct rkv_learn *learn; /* the learned model                          */
    struct rkv_guard *guard; /* its shadow LRU (retain/evict_guard.c)      */
} rkv_tree_order;

/* Retention state (retain/pins.c, retain/ns_ttl.c; the lowered pins'
 * counters: residency/lowered_pins.c). The core reads meta[] (eviction
 * bucket) and keeps yield_blocks (rkv_yield_pages) around every lock
 * change; everything else is the retention layer's. */
typedef struct rkv_tree_retention {
    rkv_node_retention *meta; /* nodes_cap entries, or NULL (no retain yet) */
    struct rkv_pin *pins;  /* pins_cap entries, NULL until the first pin
                              (retain/retain.h)                            */
    uint32_t *pin_heap;    /* pins_cap entries: min-heap by deadline        */
    uint32_t pins_cap, pins_used, pin_free, npins;
    uint64_t now_ms, pin_seq;
    uint64_t pin_cap_blocks, pinned_blocks;
    uint32_t pin_pct;      /* max_pinned_pct: also caps each lower tier  */
    const struct rkv_pin_tier_ops *tier_ops; /* pins below the device
                              (retain/retain.h): residency/ while tiers are
                              attached, else NULL                         */
    uint32_t npins_lowered; /* live pins without a lease (lowered)      */
    uint64_t yield_blocks; /* pages of non-root nodes whose every lock is a
                              pin (lock_count == pin_count > 0): what
                              revoking pins can free. Kept by
                              rkv_yield_pages around every lock_count and
                              pin_count change (a split moves pages between
                              two nodes with equal counts: sum unchanged;
                              eviction trims only unlocked nodes)         */
    uint64_t pins_made, pins_renewed, pins_expired, pins_released,
             pins_revoked, pins_refused, pins_demoted;
    uint64_t prio_next;    /* 0, or <= every live node's nonzero
                              meta[].prio_until: when to look for
                              priorities that revert (retain/pins.c)     */
    uint64_t prio_reverted; /* priorities reverted (cumulative)          */
    /* default pin TTL per namespace (retain/ns_ttl.c): ns_ttl_n entries,
     * distinct namespaces, every ttl_ms > 0 */
    struct { rkv_namespace ns; uint64_t ttl_ms; } ns_ttl[RKV_NS_TTL_MAX];
    uint32_t ns_ttl_n;
} rkv_tree_retention;

/* Tier residency state (residency/): NULL without lower tiers. The core
 * reads tn[] inline (match skips off-device children, unlock waits for
 * loads, an emptied root with lower children stays). */
typedef struct rkv_tree_tiers {
    struct rkv_tier *tier;
    rkv_node_residency *tn; /* nodes_cap entries when tier != NULL        */
    void *tier_stream;     /* rkv_tree_tier_set_stream's CUDA stream (the
                              caller's), or NULL: the tier's own stream    */
} rkv_tree_tiers;

/* The tree. Core state first (pages, slots, child index, LRU, leases,
 * stats: radix/), then each layer's state in its own sub-struct. */
struct rkv_tree {
    rkv_tree_hooks hooks;  /* the layers above (see rkv_tree_hooks)        */

    /* pages and node memory (radix/tree.c, radix/node_mem.c) */
    rkv_pool *pool;
    uint32_t P;            /* page size in tokens                           */
    uint32_t tok_bytes;    /* bytes per stored token id: 4 or 3
                              (rkv_tree_config.token_bytes; tree_tokens.h) */
    int tok_simd;          /* the CPU has the wide token paths
                              (radix/tree_tokens.c)                        */
    size_t page_bytes;     /* P * tok_bytes: one stored page                */
    size_t tpage_bytes;    /* per-page residency entry in a node's memory
                              (sizeof(rkv_page_residency) with tiers, else
                              0): set by the residency layer               */
    rkv_node_mem mem;
    uint8_t *owned;        /* bit per pool block: cached by this tree       */
    uint8_t *lazy;         /* bit per pool block (after owned, same
                              allocation): cached without its chained hash
                              yet; pool->hash holds (node << 32 | page)
                              then (radix/tree_hash.c)                     */
    int lazy_live;         /* lazy pages may exist (0: none; set by a lazy
                              insert, cleared by rkv_tree_hash_all)        */
    size_t owned_bytes;

    /* slots (radix/tree.c) */
    rkv_tnode *nodes;
    uint32_t nodes_cap;    /* slots allocated                               */
    uint32_t nodes_used;   /* slots ever handed out (high-water mark)       */
    uint32_t free_head;    /* free slot list below nodes_used               */
    uint32_t free_count;

    /* child index (radix/child_index.c) */
    rkv_child_index_entry *idx;
    uint32_t idx_cap;      /* power of two                                  */
    uint32_t idx_count;

    /* LRU and recency (radix/tree_lru.c) */
    uint32_t lru_head[RKV_LRU_BUCKETS], lru_tail[RKV_LRU_BUCKETS];
    uint64_t lru_nonempty[2]; /* bit b: bucket b has a node               */
    int policy;            /* rkv_evict_policy                              */
    uint64_t clock;        /* last_access values come from ++clock          */
    uint64_t epoch;        /* children_epoch values come from ++epoch       */

    /* leases (radix/tree_lease.c) */
    uint64_t lock_total;   /* leases held (== sum of roots' counts)         */
    rkv_lease_slot *leases; /* lease table, NULL until used                 */
    uint32_t leases_cap;   /* slots allocated                               */
    uint32_t leases_used;  /* slots ever handed out (high-water mark)       */
    uint32_t lease_free_head, lease_free_tail; /* FIFO of released slots    */
    uint32_t lease_rk[RKV_LEASE_ROUNDS]; /* the id cipher's round keys,
                              from the tree's secret key                   */
    uint64_t lease_zero;   /* the (gen, slot) whose id would be 0          */
    int lease_key_random;  /* 1: the key came from the OS's random source  */

    /* stats (see rkv_tree_stats) */
    uint64_t cached_blocks, evictable_blocks, locked_blocks;
    uint64_t num_nodes, num_namespaces;
    uint64_t queried_tokens, hit_tokens, inserted_pages;
    uint64_t evicted_blocks, evicted_nodes, splits, lru_reorder_steps;

    /* the layers' state */
    struct rkv_ev_ring *events; /* KV events (events/kv_events.c): set at
                              create, its cap 0 = off                     */
    struct rkv_store_log_buf *slog; /* store log (events/store_log.c);
                              NULL = off                                   */
    rkv_tree_order order;  /* learned and guarded eviction (retain/)       */
    rkv_tree_retention retain; /* pins, priorities, TTLs (retain/)         */
    rkv_tree_tiers tiers;  /* tier residency (residency/)                  */
    struct rkv_swa *swa;   /* sliding-window layers' KV (swa/); NULL: off  */
};

/* Node y's share of yield_blocks (retain/pins.c): its pages when every
 * lock on it is a pin. Callers subtract it before and add it after
 * changing y's lock_count or pin_count. */
static inline uint64_t rkv_yield_pages(const rkv_tree *t, uint32_t y);

/* Bytes of a node memory's token part (pages of tok_bytes ids), padded so
 * the block ids after it are aligned. */
static inline size_t rkv_tree_tok_area(const rkv_tree *t, uint32_t pages)
{
    return ((size_t)pages * t->page_bytes + 3) & ~(size_t)3;
}

static inline rkv_block_id *rkv_tnode_blocks(const rkv_tree *t,
                                             const rkv_tnode *x)
{
    return (rkv_block_id *)(x->u.tok8 + rkv_tree_tok_area(t, x->cap_pages));
}

static inline size_t rkv_tree_data_bytes(const rkv_tree *t, uint32_t pages)
{
    return rkv_tree_tok_area(t, pages) +
           (size_t)pages * (sizeof(rkv_block_id) + t->tpage_bytes);
}

static inline rkv_page_residency *rkv_tnode_tpages(const rkv_tree *t,
                                          const rkv_tnode *x)
{
    return (rkv_page_residency *)(rkv_tnode_blocks(t, x) + x->cap_pages);
}

static inline int rkv_tree_in_lru(const rkv_tnode *x)
{
    return x->parent != 0 && x->parent != RKV_NIL &&
           x->first_child == RKV_NIL && x->lock_count == 0;
}

/* The LRU list a node belongs to (when it is an evictable leaf). */
static inline uint32_t rkv_lru_bucket(const rkv_tree *t, uint32_t id)
{
    if (t->retain.meta != NULL && t->retain.meta[id].flags[RKV_META_ENDED])
        return RKV_ENDED_BUCKET;
    if (t->policy == RKV_EVICT_LRU)
        return 0;
    uint32_t prio = t->retain.meta != NULL ? t->retain.meta[id].prio : RKV_PRIORITY_DEFAULT;
    if (t->policy == RKV_EVICT_LEARNED && prio == RKV_PRIORITY_DEFAULT)
        return RKV_PRIORITY_MAX + 1 + t->retain.meta[id].cls; /* RKV_LEARN_BUCKET0 */
    return prio;
}

static inline int rkv_tree_handle_ok(const rkv_tree *t, rkv_node h)
{
    return h.id != 0 && h.id < t->nodes_used &&
           t->nodes[h.id].parent != RKV_NIL && t->nodes[h.id].gen == h.gen;
}

/* The one refusal of a handle rkv_tree_handle_ok rejected. */
static inline rkv_status rkv_tree_stale(rkv_node h, const char *fn)
{
    return rkv_set_error(RKV_ERR_STALE_HANDLE, "%s: stale handle {%u, %u}", fn, h.id, h.gen);
}

static inline void rkv_tnode_bump_gen(rkv_tnode *x)
{
    x->gen++;
    if (x->gen == 0)
        x->gen = 1;
}

static inline int rkv_tree_owned(const rkv_tree *t, rkv_block_id b)
{
    return (t->owned[b >> 3] >> (b & 7)) & 1;
}
static inline void rkv_tree_set_owned(rkv_tree *t, rkv_block_id b)
{
    t->owned[b >> 3] |= (uint8_t)(1u << (b & 7));
}
/* The bit alone: for a loop that calls hooks.page_dropped itself (the
 * eviction loop tests one flag for it and the events hook together). */
static inline void rkv_tree_clear_owned_bit(rkv_tree *t, rkv_block_id b)
{
    t->owned[b >> 3] &= (uint8_t)~(1u << (b & 7));
}
static inline void rkv_tree_clear_owned(rkv_tree *t, rkv_block_id b)
{
    rkv_tree_clear_owned_bit(t, b);
    if (RKV_UNLIKELY(t->hooks.page_dropped != NULL))
        t->hooks.page_dropped(t, b);
}

/* Lazy hashes (radix/tree_hash.c). A block is lazy iff owned and its lazy
 * bit is set (a stale bit of a block the tree dropped means nothing). */
static inline int rkv_tree_lazy(const rkv_tree *t, rkv_block_id b)
{
    return ((t->owned[b >> 3] & t->lazy[b >> 3]) >> (b & 7)) & 1;
}
static inline void rkv_tree_set_lazy(rkv_tree *t, rkv_block_id b)
{
    t->lazy[b >> 3] |= (uint8_t)(1u << (b & 7));
}
static inline void rkv_tree_clear_lazy(rkv_tree *t, rkv_block_id b)
{
    t->lazy[b >> 3] &= (uint8_t)~(1u << (b & 7));
}
/* New pages may skip their hash: no layer reads a page's hash as it
 * arrives or leaves (KV events, tiers, learned eviction). Tiers attach to
 * an empty tree only, and the other two are fixed at create, so a tree
 * never holds lazy pages while one of them reads hashes. */
static inline int rkv_tree_hash_lazily(const rkv_tree *t)
{
    return t->hooks.pages_stored == NULL && t->tiers.tier == NULL &&
           t->policy != RKV_EVICT_LEARNED;
}

/* No token id among tokens[0..n) with any of the bits bad set (the sign
 * bit: no negative id; bits 24..31 as well for a 3-byte tree). */
static inline int rkv_tokens_valid_bits(const int32_t *tokens, size_t n,
                                        uint32_t bad)
{
    /* OR of the sign bits, eight tokens (four 64-bit words) a round: a
     * whole request's tokens are scanned at every insert */
    uint64_t w0 = 0, w1 = 0, w2 = 0, w3 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v0, v1, v2, v3;
        memcpy(&v0, tokens + i, 8);
        memcpy(&v1, tokens + i + 2, 8);
        memcpy(&v2, tokens + i + 4, 8);
        memcpy(&v3, tokens + i + 6, 8);
        w0 |= v0;
        w1 |= v1;
        w2 |= v2;
        w3 |= v3;
    }
    uint32_t acc = 0;
    for (; i < n; i++)
        acc |= (uint32_t)tokens[i];
    return (acc & bad) == 0 &&
           ((w0 | w1 | w2 | w3) & ((uint64_t)bad << 32 | bad)) == 0;
}

/* No negative token id among tokens[0..n). */
static inline int rkv_tokens_valid(const int32_t *tokens, size_t n)
{
    return rkv_tokens_valid_bits(tokens, n, 0x80000000u);
}

/* Slots (the node table's free list) ---------------------------------------- */
static inline void rkv_tnode_clear(rkv_tnode *x)
{
    uint32_t gen = x->gen;
    memset(x, 0, sizeof *x);
    x->gen = gen;
    x->parent = RKV_NIL;
    x->first_child = x->next_sib = x->prev_sib = RKV_NIL;
    x->lru_prev = x->lru_next = RKV_NIL;
}

/* A cleared slot (in use from now on: the caller sets its parent). Capacity
 * must have been prepared. */
static inline uint32_t rkv_tree_slot_take(rkv_tree *t)
{
    uint32_t id;
    if (t->free_head != RKV_NIL) {
        id = t->free_head;
        t->free_head = t->nodes[id].next_sib;
        t->free_count--;
    } else {
        id = t->nodes_used++;
        t->nodes[id].gen = 1;
    }
    rkv_tnode_clear(&t->nodes[id]);
    if (t->retain.meta != NULL)
        t->retain.meta[id] = RKV_NODE_RETENTION_FRESH;
    if (RKV_UNLIKELY(t->tiers.tn != NULL))
        t->tiers.tn[id] = RKV_NODE_RESIDENCY_EMPTY;
    return id;
}

/* Frees a slot whose node was already unlinked (and its memory freed). */
static inline void rkv_tree_slot_free(rkv_tree *t, uint32_t id)
{
    rkv_tnode *x = &t->nodes[id];
    rkv_tnode_clear(x);
    rkv_tnode_bump_gen(x);
    if (RKV_UNLIKELY(t->tiers.tn != NULL))
        t->tiers.tn[id] = RKV_NODE_RESIDENCY_EMPTY;
    x->next_sib = t->free_head;
    t->free_head = id;
    t->free_count++;
}

static inline uint64_t rkv_yield_pages(const rkv_tree *t, uint32_t y)
{
    const rkv_tnode *x = &t->nodes[y];
    if (t->retain.meta == NULL || x->lock_count == 0 || x->parent == 0 ||
        x->parent == RKV_NIL || x->lock_count != t->retain.meta[y].pin_count)
        return 0;
    return x->num_pages;
}

/* Residency state the core reads inline: whether device node id has lower
 * (off-device) children. */
static inline int rkv_tree_has_lower_child(const rkv_tree *t, uint32_t id)
{
    return t->tiers.tn != NULL && t->tiers.tn[id].lchild != RKV_NIL;
}

#endif

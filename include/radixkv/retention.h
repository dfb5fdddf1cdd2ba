/*
 * radixkv/retention.h -- retention on the tree: priorities, TTL pins, namespace TTLs and session signals for agentic serving.
 *
 * Part of the public API; include <radixkv.h> for all of it (the
 * conventions every call follows are stated there).
 */
#ifndef RADIXKV_RETENTION_H
#define RADIXKV_RETENTION_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv/tree.h"

RKV_BEGIN_DECLS

/*
 * Retention (retain/pins.c): priorities and TTL pins for agentic
 * serving. Time is the caller's: every call that needs it takes now_ms
 * (any monotonic millisecond clock; it must never go back) and the library
 * never reads a clock. Calls without now_ms (match, insert, evict,
 * alloc_blocks) use the time of the last call that had one.
 *
 *   - Priority (0..100, default 35; TensorRT-LLM's semantics: higher is
 *     evicted later) belongs to cached pages; with RKV_EVICT_PRIORITY,
 *     eviction takes the lowest-priority leaf first, least recently used
 *     among equals (101 LRU lists, O(1) per eviction). RKV_EVICT_LRU keeps
 *     priorities but ignores them. New pages get 35; a split keeps them.
 *   - A pin keeps tokens[0..pin_tokens) (full pages) cached until its
 *     deadline, now_ms + ttl_ms; a later retain of the same prefix by the
 *     same owner, or rkv_tree_pins_extend, pushes the deadline out (never
 *     in): each use of the prefix should renew it ("t ms after last use").
 *     Pinned pages are out of eviction like locked ones (they count in
 *     stats.locked_blocks). A pin whose deadline is <= now_ms expires at the
 *     next call with now_ms and its pages return to ordinary eviction with
 *     their last-use order (expiry is not a use). Deadlines saturate at
 *     UINT64_MAX (a pin made then lasts until the time reaches UINT64_MAX);
 *     a pin at now_ms == UINT64_MAX, which could only be born expired, is
 *     refused (RKV_ERR_INVALID_ARG, nothing changes).
 *   - Cap: pages under pins (counted once, the whole prefix) never exceed
 *     max_pinned_pct of the pool; a pin that would is refused
 *     (RKV_ERR_PIN_CAP, nothing changes; retry without the pin).
 *   - Progress: rkv_tree_alloc_blocks evicts unpinned pages first; only
 *     when free + unpinned-evictable blocks cannot serve it does it revoke
 *     pins, earliest deadline first, just enough (stats pins_revoked), so a
 *     pin never makes a running request fail for space. With a lower tier
 *     attached (rkv_tree_attach_tiers, drop_pinned 0) such a pin is
 *     LOWERED instead (stats pins_demoted): it gives up its hold on the
 *     device, its pages are demoted like any other, and it keeps them in
 *     the lower tiers until its deadline: the lowest tier never drops a
 *     pinned page. Lowered pins expire, extend and release like others;
 *     each lower tier holds at most max_pinned_pct of its capacity in
 *     pinned pages, and a lowered pin is revoked (pins_revoked) when that
 *     cap would be passed or when its pages leave the tree anyway (a
 *     failed copy, a corrupt read, an insert that diverges from the
 *     prefix inside a node). Loaded back, or inserted again by
 *     rkv_tree_insert (whole or its start: the lower rest stays; a branch
 *     that leaves the insert's path at a node boundary stays too), its pages are ordinary device
 *     pages (evictable, demoted again when evicted) and the pin stays
 *     lowered: they count in pinned_lowered_on_device, not in
 *     pinned_blocks nor pinned_by_medium[]; a retain
 *     of the same prefix by the same owner makes it a device pin again. A pin on pages a
 *     running request also locks is not revoked (that frees nothing). rkv_tree_evict never
 *     revokes a leased pin (a lowered one whose device pages it evicts
 *     and cannot demote, no lower slot to be had, is revoked as above).
 *   - Owners: any 64-bit session id. rkv_tree_pins_release drops all of an
 *     owner's pins (session ended); rkv_tree_pins_extend renews them (a
 *     tool call started; expected back in ttl_ms). Both are O(pins held).
 *   - rkv_tree_reset drops every pin (it still refuses while leases are
 *     held); rkv_tree_destroy drops them with the tree.
 *   - A priority may last a while (priority_duration_ms, TensorRT-LLM's
 *     retention duration): its deadline is kept per node (a split copies
 *     it) and checked at every call with now_ms, like pin deadlines: once
 *     the deadline is <= now_ms the node's priority is
 *     RKV_PRIORITY_DEFAULT again and it is evicted among default pages in
 *     its last-use order (a revert is not a use). The check scans the
 *     nodes only when the earliest such deadline has passed (O(nodes) per
 *     time move that reverts something, nothing otherwise). A later
 *     priority on the node replaces both priority and deadline.
 *   - Namespace TTL (rkv_tree_set_namespace_ttl): a per-namespace (SGLang
 *     salt) default pin lifetime for retentions that give no ttl_ms.
 */
#define RKV_PRIORITY_MAX 100
#define RKV_NS_TTL_MAX 64
#define RKV_PRIORITY_DEFAULT 35

typedef struct rkv_retention {
    int priority;        /* 0..100 for pages wholly inside
                            [prio_begin, prio_end) tokens; -1: unchanged   */
    size_t prio_begin, prio_end;
    size_t pin_tokens;   /* pin tokens[0..pin_tokens) (rounded down to full
                            pages, <= n); 0: no pin                        */
    uint64_t ttl_ms;     /* pin deadline = now_ms + ttl_ms, saturated at
                            UINT64_MAX; 0 with a pin: the namespace's TTL
                            (rkv_tree_set_namespace_ttl), refused if it
                            has none                                       */
    uint64_t owner;      /* session that owns the pin                      */
    int session_end;     /* rkv_request_desc: non-zero on a session's last
                            request (its answer ends without a tool call):
                            when it finishes, rkv_tree_session_end(owner)
                            over its prompt + output. rkv_tree_retain
                            ignores it (call rkv_tree_session_end)       */
    uint64_t priority_duration_ms; /* priority >= 0: after now_ms + this
                            (saturated) the range's pages go back to
                            RKV_PRIORITY_DEFAULT; 0: the priority stays
                            (until set again). Needs priority >= 0     */
} rkv_retention;
/* priority -1, no pin. */
void rkv_retention_init(rkv_retention *r);

typedef struct rkv_retain_result {
    uint32_t prio_pages;   /* cached pages whose priority was set          */
    uint32_t pinned_pages; /* cached pages the pin covers (0: no pin made) */
    uint32_t new_pinned_pages; /* of those, pages not pinned before        */
} rkv_retain_result;

/* Applies r to the cached part of tokens[0..n) in ns (pages not cached are
 * ignored: insert first). Advances the time to now_ms first, expiring pins
 * as rkv_tree_set_time does; that part stays even when the rest fails
 * (RKV_ERR_INVALID_ARG, RKV_ERR_NOMEM, RKV_ERR_PIN_CAP), which changes
 * nothing else. May split nodes at range ends (handles stay valid). out may
 * be NULL. */
rkv_status rkv_tree_retain(rkv_tree *tree, rkv_namespace ns,
                           const int32_t *tokens, size_t n,
                           const rkv_retention *r, uint64_t now_ms,
                           rkv_retain_result *out);
/* Default pin TTL of namespace ns: a pin in ns whose retention has
 * ttl_ms == 0 lasts ttl_ms of this (a retention's own ttl_ms > 0 wins).
 * ttl_ms 0 removes ns's default (such pins are refused again). Pins
 * already made keep their deadlines. Up to RKV_NS_TTL_MAX namespaces
 * have one: another is RKV_ERR_NO_SPACE (nothing changes). The table
 * survives rkv_tree_reset. O(RKV_NS_TTL_MAX). */
rkv_status rkv_tree_set_namespace_ttl(rkv_tree *tree, rkv_namespace ns,
                                      uint64_t ttl_ms);
/* *ttl_ms = ns's default pin TTL, 0 if none. */
rkv_status rkv_tree_namespace_ttl(const rkv_tree *tree, rkv_namespace ns,
                                  uint64_t *ttl_ms);
/* Sets the tree's time; pins with deadline <= now_ms expire.
 * RKV_ERR_INVALID_ARG if now_ms is before the tree's time. */
rkv_status rkv_tree_set_time(rkv_tree *tree, uint64_t now_ms);
/* Every pin of owner gets deadline max(deadline, now_ms + ttl_ms) (after
 * the time moved to now_ms). count (may be NULL): pins extended. */
rkv_status rkv_tree_pins_extend(rkv_tree *tree, uint64_t owner,
                                uint64_t ttl_ms, uint64_t now_ms,
                                uint32_t *count);
/* Drops every pin of owner now; count (may be NULL): pins dropped. */
rkv_status rkv_tree_pins_release(rkv_tree *tree, uint64_t owner,
                                 uint32_t *count);
/* A session ended (its agent answered without a tool call): releases
 * owner's pins, then marks the pages of the cached context tokens[0..n)
 * in ns that only this session used -- from the context's end up to the
 * first node someone else also uses (another branch, a lock, a pin) --
 * so that they are evicted first, under every policy (least recently
 * used first among them). A later match or insert through a marked page
 * makes it ordinary again. Nothing is marked when the cached path goes on
 * past n (another context extends it). pages_out (may be NULL): pages
 * marked. RKV_ERR_NOMEM only when no retention call made the tree's
 * retention table yet (nothing changes then). */
rkv_status rkv_tree_session_end(rkv_tree *tree, rkv_namespace ns,
                                const int32_t *tokens, size_t n,
                                uint64_t owner, uint32_t *pages_out);
/* *blocks = pinned pages that only pins hold (no lock under them): what
 * rkv_tree_alloc_blocks may revoke once free + evictable blocks fall short.
 * A scheduler counts them as available. O(1) (a counter the tree keeps). */
rkv_status rkv_tree_pins_yieldable(const rkv_tree *tree, uint64_t *blocks);

typedef struct rkv_retention_stats {
    uint64_t pins;          /* pins held (lowered ones included)            */
    uint64_t pinned_blocks; /* DEVICE pages under at least one leased pin
                               (as before: lowered pins hold no device page)*/
    uint64_t pin_cap_blocks; /* the cap on pinned_blocks                    */
    uint64_t now_ms;        /* the tree's time                              */
    uint64_t pins_made, pins_renewed, pins_expired, pins_released,
             pins_revoked, pins_refused;
    uint64_t pins_demoted;  /* pins that device pressure lowered instead of
                               revoking (cumulative)                        */
    uint64_t pins_lowered;  /* of `pins`, lowered ones now                  */
    /* by rkv_medium: [DEVICE] = pinned_blocks / pin_cap_blocks; [HOST],
     * [DISK] = pages of that lower tier under a lowered pin, and their cap
     * (max_pinned_pct of the store's capacity); 0 without that tier */
    uint64_t pinned_by_medium[3];
    uint64_t pin_cap_by_medium[3];
    /* DEVICE pages (LOADING ones included) under a lowered pin: loaded
     * back or inserted again. Not leased and evictable (demoted, pinned
     * again, when evicted), so in neither pinned_blocks nor its cap nor
     * pinned_by_medium[]; 0 without a lower tier */
    uint64_t pinned_lowered_on_device;
    uint64_t prio_reverted; /* nodes whose priority went back to the default
                               when its priority_duration_ms ran out
                               (cumulative)                                 */
} rkv_retention_stats;
rkv_status rkv_tree_retention_stats(const rkv_tree *tree,
                                    rkv_retention_stats *out);
/* A cached node's priority. */
rkv_status rkv_tree_node_priority(const rkv_tree *tree, rkv_node node,
                                  int *priority);

RKV_END_DECLS

#endif /* RADIXKV_RETENTION_H */

/*
 * treeapi/tree_api.c -- the facade: the public rkv_tree_create,
 * rkv_tree_destroy and rkv_tree_reset, which assemble the tree core
 * (radix/) and the layers above it -- events (events/), retention and the
 * eviction orders (retain/), tier residency (residency/), a hybrid
 * model's sliding-window KV (swa/) -- and register
 * the layers' hooks (rkv_tree_hooks in radix/tree_core.h). The only file
 * that names every layer; it sits above them all, so every include arrow
 * points down (scripts/check-layers).
 *
 * Invariants: a tree handed out has every hook its config asks for (the
 * residency layer adds its own at rkv_tree_attach_tiers); a create that
 * fails leaves nothing allocated and the pool without a tree; destroy and
 * reset take the layers down before the core (a layer's nodes and pins hold
 * core state: leases, slots, pages).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc/pool_internal.h"
#include "common/status.h"
#include "events/kv_events.h"
#include "events/store_log.h"
#include "radix/tree.h"
#include "radix/tree_core.h"
#include "radix/tree_hash.h"
#include "residency/tier.h"
#include "retain/evict_guard.h"
#include "retain/evict_learned.h"
#include "retain/retain.h"
#include "swa/swa.h"

/* Every layer's invariants, in the order rkv_tree_check always ran them. */
static rkv_status rkv_tree_layers_check(const rkv_tree *t)
{
    rkv_status st = rkv_retain_check(t);
    if (st == RKV_OK)
        st = rkv_ns_ttl_check(t);
    if (st == RKV_OK)
        st = rkv_learn_check(t);
    if (st == RKV_OK)
        st = rkv_guard_check(t);
    if (st == RKV_OK)
        st = rkv_ev_check(t->events);
    if (st == RKV_OK)
        st = rkv_swa_check(t);
    return st;
}

/* Frees what the layers hold, then the core (a create that failed half way
 * or a destroy after the nodes were dropped). */
static void rkv_tree_layers_fini(rkv_tree *t)
{
    rkv_retain_fini(t);
    rkv_learn_fini(t);
    rkv_guard_fini(t);
    rkv_tier_fini(t);
    rkv_events_detach(t);
    rkv_store_log_fini(t);
    rkv_swa_fini(t);
}

rkv_status rkv_tree_create(rkv_pool *pool, const rkv_tree_config *cfg,
                           rkv_tree **out)
{
    if (pool == NULL || out == NULL)
        return rkv_null_arg("rkv_tree_create", pool, "pool", "out");
    rkv_tree_config def;
    rkv_tree_config_init(&def);
    if (cfg == NULL)
        cfg = &def;
    if (cfg->evict_policy != RKV_EVICT_LRU &&
        cfg->evict_policy != RKV_EVICT_PRIORITY &&
        cfg->evict_policy != RKV_EVICT_LEARNED)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_create: unknown evict_policy %d",
                             cfg->evict_policy);
    if (cfg->max_pinned_pct > 100)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_create: max_pinned_pct %u > 100",
                             cfg->max_pinned_pct);
    if (cfg->initial_nodes > (1u << 30))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_create: initial_nodes %u too large",
                             cfg->initial_nodes);
    if (cfg->event_ring == 1 || cfg->event_ring > RKV_EV_MAX_RING)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_create: event_ring %u (0 = off, or "
                             "2..%u events)", cfg->event_ring, RKV_EV_MAX_RING);
    if (cfg->event_tokens != 0 &&
        (cfg->event_ring == 0 || cfg->event_tokens > RKV_EV_MAX_TOKENS ||
         cfg->event_tokens < RKV_EVENT_MAX_HASHES * pool->cfg.page_size))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_create: event_tokens %u (0 = off, or "
                             "%u..%u token ids with event_ring > 0)",
                             cfg->event_tokens,
                             RKV_EVENT_MAX_HASHES * pool->cfg.page_size,
                             RKV_EV_MAX_TOKENS);
    if (cfg->token_bytes != 3 && cfg->token_bytes != 4)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_tree_create: token_bytes %u (3 or 4)",
                             cfg->token_bytes);
    /* the pool keeps one chained hash per block: a second tree would
     * overwrite the first one's */
    if (pool->tree != NULL)
        return rkv_set_error(RKV_ERR_BUSY, "rkv_tree_create: the pool already "
                             "has a tree (one tree per pool; destroy it first)");
    rkv_tree *t;
    rkv_status st = rkv_tree_core_create(pool, cfg, &t);
    if (st != RKV_OK)
        return st;
    int ok = rkv_events_attach(t, cfg->event_ring, cfg->event_tokens);
    if (ok && cfg->evict_policy == RKV_EVICT_LEARNED)
        ok = rkv_learned_attach(t) == RKV_OK;
    if (!ok) {
        rkv_tree_layers_fini(t);
        rkv_tree_core_destroy(t);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_tree_create: tree tables");
    }
    rkv_retain_attach(t, cfg->max_pinned_pct);
    t->hooks.check = rkv_tree_layers_check;
    rkv_tree_core_publish(t, rkv_tree_block_hash_of);
    *out = t;
    return RKV_OK;
}

void rkv_tree_destroy(rkv_tree *tree)
{
    if (tree == NULL)
        return;
    /* outstanding leases die with the table */
    if (RKV_UNLIKELY(tree->tiers.tier != NULL))
        rkv_tier_drop_all(tree); /* lower nodes hold no device block */
    rkv_tree_core_clear(tree);
    rkv_tree_layers_fini(tree);
    rkv_tree_core_destroy(tree);
}

rkv_status rkv_tree_reset(rkv_tree *tree)
{
    if (tree == NULL)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_tree_reset: NULL tree");
    /* pins' own leases do not count (lowered pins hold none) */
    uint64_t pin_leases = tree->retain.npins - tree->retain.npins_lowered;
    if (tree->lock_total > pin_leases)
        return rkv_set_error(RKV_ERR_BUSY,
                             "rkv_tree_reset: %llu leases are held",
                             (unsigned long long)(tree->lock_total - pin_leases));
    rkv_pins_drop_all(tree);
    if (RKV_UNLIKELY(tree->tiers.tier != NULL))
        rkv_tier_drop_all(tree); /* lower nodes hold no device block */
    rkv_tree_core_clear(tree);
    if (tree->order.guard != NULL)
        rkv_guard_clear(tree);
    if (RKV_UNLIKELY(tree->events->cap != 0))
        rkv_ev_cleared(tree);
    return RKV_OK;
}

/* The core's counters and the guard's (a layer's stats, in one struct). */
rkv_status rkv_tree_get_stats(const rkv_tree *tree, rkv_tree_stats *out)
{
    if (tree == NULL || out == NULL)
        return rkv_null_arg("rkv_tree_get_stats", tree, "tree", "out");
    /* the fields not named here (the guard's) are 0 without a guard */
    *out = (rkv_tree_stats){.cached_blocks = tree->cached_blocks,
                            .evictable_blocks = tree->evictable_blocks,
                            .locked_blocks = tree->locked_blocks,
                            .nodes = tree->num_nodes,
                            .namespaces = tree->num_namespaces,
                            .queried_tokens = tree->queried_tokens,
                            .hit_tokens = tree->hit_tokens,
                            .inserted_pages = tree->inserted_pages,
                            .evicted_blocks = tree->evicted_blocks,
                            .evicted_nodes = tree->evicted_nodes,
                            .splits = tree->splits,
                            .lru_reorder_steps = tree->lru_reorder_steps,
                            .host_bytes = tree->mem.bytes};
    if (tree->order.guard != NULL) {
        out->guard_lru_hit_tokens = tree->order.guard->lru_hit_pages * tree->P;
        out->guard_fallbacks = tree->order.guard->fallbacks;
        out->guard_on_lru = (uint32_t)tree->order.guard->fallback;
    }
    return RKV_OK;
}

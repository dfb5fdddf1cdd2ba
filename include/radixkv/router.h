/*
 * radixkv/router.h -- public API of the fleet router index (router/): which
 * instances (serving processes, each with its own radixkv tree) cache which
 * blocks, fed by the trees' KV events (rkv_tree_events_drain), and which
 * instance a request should go to.
 *
 * A separate header because the router runs where no tree does (a router
 * process holds the index of a whole fleet and embeds no pool): it needs
 * only the event and snapshot types of radixkv/events.h, which it includes. The
 * code is in libradixkv; there is no network code here (a transport feeds
 * event batches in and takes routes out).
 *
 * Conventions are those of radixkv.h (rkv_status, rkv_last_error, nothing
 * changes on failure, not thread-safe: one thread at a time per router).
 *
 * Per instance the router keeps the seq of the last event applied. A batch
 * is applied event by event:
 *   - seq <= last applied: stale or out of order, skipped and counted.
 *   - seq  > last + 1: a gap. The instance needs a resync.
 *   - RESYNC marker: the instance needs a resync.
 *   - an event that contradicts the index (storing a block the instance
 *     already holds on that medium, storing under a parent hash the
 *     instance does not hold on any medium (other than RKV_HASH_ROOT),
 *     removing one it does not hold on that medium, an unknown kind or
 *     medium, too many hashes): counted as bad; the instance needs a
 *     resync. A block is (namespace, hash), as in the tree: the same hash
 *     in two namespaces is two blocks, so removing with the wrong
 *     namespace removes one the instance does not hold.
 * An instance that needs a resync is dropped from the index at once (it
 * holds nothing, so no request is routed for a prefix it may have lost) and
 * ignores events until rkv_router_apply_snapshot gives its full state and
 * the seq that state is after (rkv_tree_snapshot). Events with a larger
 * seq then apply on top. A new instance expects seq 1 next (a fresh tree);
 * anything else is a gap, so an instance joining late resyncs on its own.
 * An instance whose tree is recreated (its seqs start again at 1) must be
 * removed and added again: the router would take its new events as stale.
 *
 * Invariant (what the differential test checks): for every instance that
 * does not need a resync, the index holds hash h on medium m for it
 * exactly when its tree caches h on m after the last applied event; an
 * instance that needs a resync holds nothing.
 *
 * Queries rely on what a radixkv tree guarantees: an instance's cached
 * set is prefix-closed (a page is cached only under its cached parent)
 * and so is its device residency. Overlaps are then found by galloping
 * over the request's chain and narrowing each interval where a holder
 * drops out (O(log pages) lookups per distinct overlap,
 * router/route_search.c). Stores under a parent the instance does not
 * hold are refused (above); a stream that removes a parent before its
 * children gets a consistent answer that may count past the hole.
 */
#ifndef RADIXKV_ROUTER_H
#define RADIXKV_ROUTER_H

#include "radixkv/events.h"

RKV_BEGIN_DECLS

typedef struct rkv_router rkv_router;

/* Instances one router indexes at once. Instances live in groups of 64
 * (one bit per instance per block, one 16-byte table entry per block per
 * group holding it per medium): up to 64 instances cost what a single
 * 64-bit mask does; beyond, a query walks each group that has in-sync
 * instances and memory grows with the (block, group, medium) triples
 * held. */
#define RKV_ROUTER_MAX_INSTANCES 1024u

/*
 * Scoring (rkv_router_route). For instance i with load (running_i,
 * queued_tokens_i) and L_i leading pages of the request cached:
 *
 *   score_i = page_tokens * sum_{j < L_i} medium_weight[medium of page j on i]
 *             - queue_weight * queued_tokens_i - running_weight * running_i
 *
 * in tokens: prefill tokens saved by the cache minus tokens of work ahead.
 * The load is the instance's last report (rkv_router_set_load) plus what
 * the router has routed to it since (rkv_router_choose: each routed
 * request counts one running request and its uncached pages' tokens as
 * queued), so a burst between two load reports spreads instead of piling
 * onto one instance; a report replaces both.
 * A page held on several media counts its best (lowest-numbered) medium,
 * so with the default weights a device page saves a full page of prefill,
 * a host page half (the load over PCIe costs the other half), a disk page
 * a quarter; set the weights to what loads cost on your hardware.
 * The highest score wins; ties go to the fewer queued tokens, then fewer
 * running requests, then one of the equals at random (a generator seeded
 * by rkv_router_config.seed: the same calls with the same seed choose the
 * same instances). With temperature T > 0 the choice is instead drawn
 * with probability proportional to exp(-(max - score_i) / ((max - min) * T))
 * over the candidates (scores normalised to their range, as Dynamo's
 * router does): T near 0 is the argmax, large T nearly uniform; all
 * scores equal is the tie rule.
 */
typedef struct rkv_router_config {
    uint32_t initial_blocks;  /* capacity hint; 0 = default                */
    double page_tokens;       /* tokens per page, default 16               */
    double medium_weight[RKV_MEDIUM_COUNT]; /* device 1, host 0.5, disk 0.25 */
    double queue_weight;      /* per queued token, default 1               */
    double running_weight;    /* per running request, default 16           */
    /* Index memory budget (0: none beyond the table's 2^29 entries). An
     * event or snapshot that would make the index exceed it is refused:
     * the instance that stored it needs a resync (it holds nothing, so the
     * index stays exact) and is counted in stats.events_over_budget; a
     * snapshot that does not fit is RKV_ERR_NO_SPACE and counted in
     * stats.snapshots_over_budget. The bound holds for whatever the
     * instances publish: a flood costs the flooding instance its entries,
     * never unbounded memory. */
    uint64_t max_entries;     /* table entries ((block, group, medium))    */
    uint64_t max_table_bytes; /* bytes of the table (16-byte entries; a
                                 power of two at most half full, grown by
                                 doubling, or where that passes this
                                 bound or 1 GiB, sized exactly at most
                                 17/32 full, grown by half): the table
                                 never grows past it; >= 1024              */
    double temperature;       /* 0 (default): the highest score; > 0: a
                                 softmax draw (above); finite             */
    uint64_t seed;            /* the random tie-breaks and draws          */
} rkv_router_config;
void rkv_router_config_init(rkv_router_config *cfg);

/* cfg may be NULL: the defaults of rkv_router_config_init. */
rkv_status rkv_router_create(const rkv_router_config *cfg, rkv_router **out);
void rkv_router_destroy(rkv_router *router); /* NULL is fine */

/* Registers an instance (any id but UINT64_MAX); it holds nothing and
 * expects seq 1. RKV_ERR_DUPLICATE if present, RKV_ERR_NO_SPACE when
 * RKV_ROUTER_MAX_INSTANCES are registered. */
rkv_status rkv_router_add_instance(rkv_router *router, uint64_t instance);
/* Drops an instance and every entry it held. RKV_ERR_NOT_FOUND (counted
 * in stats.unknown_instance) for an id not registered. O(index size). */
rkv_status rkv_router_remove_instance(rkv_router *router, uint64_t instance);

/* Applies a batch of one instance's events in order (see the header
 * comment). RKV_ERR_NOT_FOUND (counted) for an unknown instance, nothing
 * changes. RKV_ERR_NOMEM (the index could not grow): the events before the
 * failing one are applied, and the instance needs a resync (it holds
 * nothing), which is the state a lost event leaves anyway. RKV_ERR_NO_SPACE
 * (the index memory budget, rkv_router_config.max_entries /
 * max_table_bytes): the same, the whole batch is processed (the events
 * after the refused one are skipped as for any resyncing instance) and
 * the refusal is counted in stats.events_over_budget. Anything wrong
 * inside the stream is not an error of the call: it is counted and
 * triggers a resync. */
rkv_status rkv_router_apply(rkv_router *router, uint64_t instance,
                            const rkv_event *events, uint32_t n);

/* The instance's latest seq (the last event it drained, or
 * rkv_tree_snapshot's seq_out), as a heartbeat would carry it: events lost
 * at the END of a stream leave no gap for rkv_router_apply to see, this
 * does. last_seq above the last applied: a gap (resync); below it: counted
 * as stale, nothing changes. */
rkv_status rkv_router_heartbeat(rkv_router *router, uint64_t instance,
                                uint64_t last_seq);

/* Replaces the instance's entries with blocks[0..n) (a rkv_tree_snapshot)
 * taken after event `seq`; the instance is in sync again. Atomic: a bad
 * entry (an unknown medium, a block listed twice on one medium) is
 * RKV_ERR_INVALID_ARG and the instance keeps exactly
 * what it held before (and its resync state). RKV_ERR_STATE while a
 * chunked snapshot of the instance is begun. RKV_ERR_NO_SPACE when its
 * entries do not fit the index budget (counted; nothing changes). The
 * snapshot is staged in a
 * spare slot (RKV_ERR_NO_SPACE when none is free: only when 1024
 * instances are registered and 64 snapshots are being staged). */
rkv_status rkv_router_apply_snapshot(rkv_router *router, uint64_t instance,
                                     const rkv_block_entry *blocks, size_t n,
                                     uint64_t seq);

/* The same in bounded pieces (rkv_tree_snapshot_chunk on the instance's
 * side): begin(seq) stages an empty snapshot taken after event `seq`, each
 * chunk adds entries to it (all or nothing per chunk: a bad entry is
 * RKV_ERR_INVALID_ARG and the chunk adds nothing; duplicates are checked
 * across chunks too), end replaces the instance's entries with the staged
 * ones at once and puts it in sync at `seq`; abort drops the staged ones.
 * Until end, queries and events see the instance's old entries (a
 * resyncing instance skips events meanwhile, so the stream after `seq`
 * must reach the router after end, as it does on one ordered subject).
 * begin while one is begun starts again; removing the instance drops it.
 * chunk / end without begin: RKV_ERR_STATE. */
rkv_status rkv_router_snapshot_begin(rkv_router *router, uint64_t instance,
                                     uint64_t seq);
rkv_status rkv_router_snapshot_chunk(rkv_router *router, uint64_t instance,
                                     const rkv_block_entry *blocks, size_t n);
rkv_status rkv_router_snapshot_end(rkv_router *router, uint64_t instance);
rkv_status rkv_router_snapshot_abort(rkv_router *router, uint64_t instance);

/* The load an instance reports (for scoring). It replaces the load the
 * router counted for what it routed there since the last report. */
rkv_status rkv_router_set_load(rkv_router *router, uint64_t instance,
                               uint32_t running, uint64_t queued_tokens);

typedef struct rkv_router_overlap {
    uint64_t instance;
    uint32_t pages;            /* leading pages of the request cached       */
    uint32_t pages_by_medium[RKV_MEDIUM_COUNT];
    double score;
    int needs_resync;
} rkv_router_overlap;

/* Per registered instance (in id order), the leading pages of the chained
 * page hashes[0..n) of namespace ns that it caches, with scores. out has
 * room for RKV_ROUTER_MAX_INSTANCES (or *n_out from rkv_router_stats
 * instances); *n_out gets the number of instances. One walk over the
 * hashes, stopping when no instance holds the next page. */
rkv_status rkv_router_overlaps(rkv_router *router, rkv_namespace ns,
                               const uint64_t *hashes, uint32_t n,
                               rkv_router_overlap *out, uint32_t cap,
                               uint32_t *n_out);

/* Chooses among cand[0..n) (rkv_router_overlaps' answer for a request of
 * request_pages pages, or any subset of it: a transport may leave out
 * instances it cannot reach) by the rule above and counts the request on
 * the chosen instance (one running request, its request_pages - pages
 * uncached pages' tokens queued) until its next load report. *pick gets
 * the chosen index. RKV_ERR_STATE for n == 0, RKV_ERR_INVALID_ARG for
 * NULL arguments, RKV_ERR_NOT_FOUND when the chosen instance is not
 * registered; nothing changes on failure (not even the generator). */
rkv_status rkv_router_choose(rkv_router *router, const rkv_router_overlap *cand,
                             uint32_t n, uint32_t request_pages, uint32_t *pick);

/* The best instance for the request (rkv_router_overlaps, then
 * rkv_router_choose: the request counts as routed there) into *out.
 * RKV_ERR_STATE with no instance registered. */
rkv_status rkv_router_route(rkv_router *router, rkv_namespace ns,
                            const uint64_t *hashes, uint32_t n,
                            rkv_router_overlap *out);

/* rkv_router_route's choice (the same instance, the same generator draws,
 * counted as routed the same way) and the candidates an answer lists,
 * without a record per instance: top[0..*n_top) gets the chosen
 * instance and the cap - 1 others with the most leading pages (ties: the
 * smaller id), all of them when cap >= the instances, in id order, with
 * the scores the choice saw; *pick is the chosen one's index there.
 * Instances with no page of the request cost a compare each, not a
 * record: at 1,024 instances this is several times cheaper than
 * rkv_router_overlaps + rkv_router_choose (a softmax draw, temperature >
 * 0, weighs them all and is not). INVALID_ARG for NULL pointers or
 * cap == 0, RKV_ERR_STATE with no instance registered. */
rkv_status rkv_router_route_top(rkv_router *router, rkv_namespace ns,
                                const uint64_t *hashes, uint32_t n,
                                rkv_router_overlap *top, uint32_t cap,
                                uint32_t *n_top, uint32_t *pick);

/* The same for a request given as token ids: the router computes the
 * chained page hashes of the n_tokens / page_size full pages itself
 * (rkv_block_hash from RKV_HASH_ROOT in namespace ns, as the instances'
 * trees do). A partial last page is ignored. The hashes go to a buffer
 * the router keeps (grown on demand: RKV_ERR_NOMEM, nothing changes). */
rkv_status rkv_router_overlaps_tokens(rkv_router *router, rkv_namespace ns,
                                      const int32_t *tokens, uint32_t n_tokens,
                                      uint32_t page_size,
                                      rkv_router_overlap *out, uint32_t cap,
                                      uint32_t *n_out);
rkv_status rkv_router_route_tokens(rkv_router *router, rkv_namespace ns,
                                   const int32_t *tokens, uint32_t n_tokens,
                                   uint32_t page_size, rkv_router_overlap *out);
rkv_status rkv_router_route_top_tokens(rkv_router *router, rkv_namespace ns,
                                       const int32_t *tokens, uint32_t n_tokens,
                                       uint32_t page_size, rkv_router_overlap *top,
                                       uint32_t cap, uint32_t *n_top, uint32_t *pick);

/* Does instance hold block (ns, hash) (on any medium / on that medium)?
 * 0/1; 0 for unknown instances or media. */
int rkv_router_holds(const rkv_router *router, uint64_t instance,
                     rkv_namespace ns, uint64_t hash);
int rkv_router_holds_medium(const rkv_router *router, uint64_t instance,
                            rkv_namespace ns, uint64_t hash, uint32_t medium);

typedef struct rkv_router_instance_info {
    uint64_t last_seq;         /* last event applied (or the snapshot's)    */
    uint64_t blocks;           /* entries held (all media)                  */
    int needs_resync;
    uint32_t running;          /* as last reported                          */
    uint64_t queued_tokens;
    uint32_t routed_running;   /* routed there since that report            */
    uint64_t routed_tokens;
} rkv_router_instance_info;
rkv_status rkv_router_instance_info_get(const rkv_router *router,
                                        uint64_t instance,
                                        rkv_router_instance_info *out);

typedef struct rkv_router_stats {
    uint64_t instances;
    uint64_t entries;          /* table entries: (block hash, group of 64
                                  instance slots, medium) triples held;
                                  below 64 instances without tiers, so
                                  distinct block hashes                     */
    uint64_t events_applied;
    uint64_t events_stale;     /* seq <= last applied                      */
    uint64_t events_skipped;   /* arrived while the instance needed resync */
    uint64_t events_bad;       /* contradicted the index                   */
    uint64_t gaps;             /* seq jumps detected                       */
    uint64_t resync_markers;   /* RESYNC events received                   */
    uint64_t snapshots;        /* snapshots applied                        */
    uint64_t unknown_instance; /* calls naming an unregistered instance    */
    uint64_t queries;
    uint64_t host_bytes;       /* index memory                             */
    uint64_t entries_limit;    /* the budget in entries (max_entries and
                                  max_table_bytes together; 2^29 without) */
    uint64_t events_over_budget;    /* stores refused by the budget        */
    uint64_t snapshots_over_budget; /* snapshots (or chunks) refused by it */
} rkv_router_stats;
rkv_status rkv_router_get_stats(const rkv_router *router,
                                rkv_router_stats *out);

/* Every invariant: table probing, holder masks only of live instances or
 * staging slots and never empty, per-slot block counts per medium,
 * resyncing instances hold nothing, staging slots and owners agree, the
 * entries within the memory budget.
 * RKV_ERR_CORRUPT with a message. */
rkv_status rkv_router_check(const rkv_router *router);

RKV_END_DECLS

#endif /* RADIXKV_ROUTER_H */

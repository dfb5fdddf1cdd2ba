/*
 * fleet/publisher.h -- one serving instance's side of the fleet: drains its
 * tree's KV events (rkv_tree_events_drain; or any source with the same
 * calls, rkv_fleet_pub_create_source) and publishes them, encoded as
 * fleet/codec.h batches, to NATS JetStream on `radixkv.<model>.kv.<instance>`
 * (instance in decimal); publishes heartbeats (load and last published seq)
 * on `radixkv.<model>.hb.<instance>` (core NATS, not stored); answers
 * snapshot requests on `radixkv.<model>.snap.<instance>` with the tree's
 * rkv_tree_snapshot: one message, or, over the server's max payload, a
 * series of snapshot chunks (fleet/codec.h) taken in the same poll.
 *
 * Library code: no prints, no clock (the caller passes its time to poll),
 * no threads of its own. The connection is the caller's (nats.c reconnects
 * by itself with the caller's options; fleet/nats_auth.h gives them the
 * fleet's authentication and TLS options, and the server's permissions
 * should let this instance publish only on its own kv and hb subjects:
 * README "Security"); everything with the tree happens
 * inside rkv_fleet_pub_poll, on the caller's thread, so the tree needs no
 * lock beyond what the caller already holds.
 *
 * Buffering is bounded: drained batches wait in a queue of at most
 * max_pending batches while JetStream does not acknowledge them (publishes
 * carry a Nats-Msg-Id, so a retried batch the server already stored is
 * dropped by JetStream's duplicate window, and the router skips stale seqs
 * anyway). With the queue full the publisher stops draining: the events
 * stay in the tree's ring, and when that fills the tree records its RESYNC
 * marker (see radixkv.h), which is published like any event once the
 * connection is back; the router then asks for a snapshot. Nothing is lost
 * silently and memory stays bounded.
 *
 * Invariants (rkv_fleet_pub_check): the queue holds at most max_pending
 * batches, in seq order, all above the last acknowledged seq.
 */
#ifndef RKV_FLEET_PUBLISHER_H
#define RKV_FLEET_PUBLISHER_H

#include <nats/nats.h>
#include <stdint.h>

#include "radixkv.h"

typedef struct rkv_fleet_pub rkv_fleet_pub;

typedef struct rkv_fleet_pub_config {
    const char *model;        /* subject token: [A-Za-z0-9_-], 1..64 chars   */
    uint64_t instance;        /* the instance's id in the fleet              */
    uint64_t epoch;           /* incarnation of this tree: the router starts
                                 the instance over when it changes (a new
                                 tree's seqs restart at 1); e.g. a start time
                                 or a random number, never reused           */
    uint32_t batch_events;    /* events per message, default 256             */
    uint32_t max_pending;     /* batches kept unacknowledged, default 64     */
    uint64_t heartbeat_ms;    /* default 500                                 */
    int64_t publish_wait_ms;  /* JetStream ack wait per batch, default 2000  */
    /* NULL, or called with every drained batch, in order, before it is
     * queued, with the time poll was given: a second consumer of the same
     * events (a vLLM-format ZMQ publisher, fleet/kvev_zpub.h). It must
     * not call the publisher. tokens: with tap_tokens > 0, the token ids
     * of the batch's BLOCK_STORED events, one event after another
     * (num_hashes * page_size each, as rkv_tree_events_drain_tokens
     * writes them); else NULL and 0. */
    void (*tap)(void *tap_ctx, uint64_t now_ms, const rkv_event *ev, uint32_t n,
                const int32_t *tokens, size_t ntokens);
    void *tap_ctx;
    /* 0 (default): the tap gets no token ids. Else the room for token ids
     * per drained batch, at least RKV_EVENT_MAX_HASHES * page_size; the
     * source must have drain_tokens (a tree: rkv_tree_config.event_tokens
     * > 0), else poll returns its RKV_ERR_STATE. */
    size_t tap_tokens;
} rkv_fleet_pub_config;
void rkv_fleet_pub_config_init(rkv_fleet_pub_config *cfg);

/* The tree must have events on (rkv_tree_config.event_ring > 0; else poll
 * returns RKV_ERR_STATE). nc stays
 * the caller's and must outlive the publisher. */
rkv_status rkv_fleet_pub_create(const rkv_fleet_pub_config *cfg,
                                natsConnection *nc, rkv_tree *tree,
                                rkv_fleet_pub **out);
/* What is published need not be a tree: any state with the tree's two
 * calls (rkv_tree_events_drain, rkv_tree_snapshot) and their contracts,
 * e.g. `radixkv bridge`'s (fleet/bridge.h). ctx must outlive the
 * publisher. */
typedef struct rkv_fleet_source {
    void *ctx;
    rkv_status (*drain)(void *ctx, rkv_event *out, uint32_t max, uint32_t *n_out);
    rkv_status (*snapshot)(const void *ctx, rkv_block_entry *out, size_t cap,
                           size_t *n_out, uint64_t *seq_out);
    /* NULL, or rkv_tree_events_drain_tokens' contract: used instead of
     * drain when the config's tap_tokens > 0 */
    rkv_status (*drain_tokens)(void *ctx, rkv_event *out, uint32_t max, int32_t *tokens,
                               size_t tokens_cap, uint32_t *n_out, size_t *ntokens_out);
} rkv_fleet_source;
rkv_status rkv_fleet_pub_create_source(const rkv_fleet_pub_config *cfg,
                                       natsConnection *nc,
                                       const rkv_fleet_source *src,
                                       rkv_fleet_pub **out);
void rkv_fleet_pub_destroy(rkv_fleet_pub *pub); /* NULL is fine */

/* One step, at the caller's time now_ms (any monotonic clock): answers
 * pending snapshot requests, drains the ring into the queue, publishes the
 * queue in order until one publish fails (kept for the next poll; may wait
 * up to publish_wait_ms), and sends a heartbeat when heartbeat_ms passed
 * since the last one, with the given load. RKV_ERR_IO when a publish
 * failed (counted; the state is consistent, call again later), other
 * statuses for a tree error. */
rkv_status rkv_fleet_pub_poll(rkv_fleet_pub *pub, uint64_t now_ms,
                              uint32_t running, uint64_t queued_tokens);

typedef struct rkv_fleet_pub_stats {
    uint64_t batches_published;
    uint64_t events_published;
    uint64_t last_published_seq;
    uint64_t publish_failures;
    uint64_t pending_batches;
    uint64_t queue_full;        /* polls that found the queue full        */
    uint64_t heartbeats;
    uint64_t snapshots_served;
    uint64_t snapshots_chunked; /* of those served, sent in chunks: over
                                   the server's max payload              */
    uint64_t snapshot_failures; /* could not be built or sent            */
} rkv_fleet_pub_stats;
rkv_status rkv_fleet_pub_get_stats(const rkv_fleet_pub *pub,
                                   rkv_fleet_pub_stats *out);
rkv_status rkv_fleet_pub_check(const rkv_fleet_pub *pub);

/* Subject helpers shared with the router: "radixkv.<model>.<kind>[.<id>]"
 * into buf[0..cap); RKV_ERR_INVALID_ARG for a bad model name,
 * RKV_ERR_NO_SPACE when it does not fit. with_id 0: no ".<id>". */
rkv_status rkv_fleet_subject(char *buf, size_t cap, const char *model,
                             const char *kind, int with_id, uint64_t id);

#endif

/*
 * fleet/codec.h -- the wire format of the fleet messages (KV event batches,
 * snapshots, heartbeats, route queries and replies) carried over NATS by
 * fleet/publisher.c and fleet/router_main.c. Pure C, no NATS dependency.
 *
 * Every integer is little-endian, fixed width, unaligned. Every message
 * starts with the same 8-byte header:
 *
 *   u32 magic     "RKVE" events, "RKVS" snapshot, "RKVC" snapshot chunk,
 *                 "RKVH" heartbeat, "RKVQ" route query, "RKVR" route reply
 *                 (the ASCII bytes in that order)
 *   u16 version   RKV_WIRE_VERSION (1) for every message; a route query
 *                 may also be RKV_WIRE_QUERY_TOKENS_VERSION (2: token ids,
 *                 below); any other: RKV_ERR_UNSUPPORTED
 *   u16 flags     0 (anything else: RKV_ERR_FORMAT)
 *
 * Events (a drained batch of one instance's rkv_event, in seq order):
 *   u64 instance, u64 epoch (the publisher's incarnation: a new epoch means
 *   a new tree whose seqs restart at 1), u64 first_seq (seq of event 0),
 *   u32 count (1..RKV_WIRE_MAX_EVENTS), then per event:
 *     u8  kind        rkv_event_kind (1..4)
 *     u8  medium      rkv_medium (< RKV_MEDIUM_COUNT)
 *     u16 num_hashes  STORED/REMOVED: 1..16; ALL_CLEARED/RESYNC: 0
 *     u32 page_size
 *     u32 seq_delta   event 0: 0; later: seq - previous seq, >= 1
 *     u64 namespace
 *     u64 parent_hash  STORED only
 *     u64 lost         RESYNC only (>= 1)
 *     u64 hashes[num_hashes]
 *   A STORED event is 28 + 8 * (num_hashes + 1) bytes.
 * Snapshot (rkv_tree_snapshot of one instance, parents before children):
 *   u64 instance, u64 epoch, u64 seq (the state is after this event),
 *   u32 count (0..RKV_WIRE_MAX_SNAPSHOT), then per block:
 *     u64 namespace, u64 hash, u64 parent_hash, u8 medium      (25 bytes)
 * Snapshot chunk (one part of a snapshot too large for one message, e.g.
 * over NATS's default 1 MiB payload: the parts in order, together the
 * snapshot's blocks in order):
 *   u64 instance, u64 epoch, u64 seq (as the snapshot's), u32 part
 *   (0..parts-1), u32 parts (>= 1), u64 total (blocks in all parts),
 *   u32 count (0..total, at most RKV_WIRE_MAX_SNAPSHOT), then count
 *   blocks as in the snapshot.
 * Heartbeat:
 *   u64 instance, u64 epoch, u64 last_seq (last event published),
 *   u32 running (requests), u64 queued_tokens
 * Route query, version 1 (page hashes):
 *   u64 namespace, u32 count (0..RKV_WIRE_MAX_QUERY), u64 hashes[count]
 *   (the request's chained page hashes, rkv_block_hash, in order)
 * Route query, version 2 (token ids):
 *   u64 namespace, u32 page_size (1..RKV_WIRE_MAX_PAGE, the fleet's page
 *   size), u32 count (0..RKV_WIRE_MAX_QUERY), i32 tokens[count]
 *   The decoder turns it into the version 1 form: page j's hash is
 *   rkv_block_hash(hash of page j-1 (RKV_HASH_ROOT for j = 0), namespace,
 *   tokens[j*page_size ..], page_size) over the count / page_size full
 *   pages (a partial last page is not cached by any tree, so it is
 *   ignored) -- exactly the hashes the instances' trees publish.
 * Route reply:
 *   u32 status (rkv_status of the router; 0 = OK), u64 instance (the
 *   chosen one), u32 pages (its overlap), u32 count (<= 64), then per
 *   listed instance: u64 instance, u32 pages (leading pages cached). The
 *   router lists every registered instance when there are at most 64,
 *   else the chosen one and those with the most pages (in id order).
 *
 * Decoders are strict: a short or long message, a bad magic, a field out
 * of range, an inconsistent seq or a count above the caller's room is
 * RKV_ERR_FORMAT (RKV_ERR_UNSUPPORTED for an unknown version) with a
 * sentence in rkv_last_error(), and the output is untouched: every decoder
 * validates the whole message before it writes anything.
 */
#ifndef RKV_FLEET_CODEC_H
#define RKV_FLEET_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define RKV_WIRE_VERSION 1u
#define RKV_WIRE_HEADER 8u
#define RKV_WIRE_MAX_EVENTS 4096u
#define RKV_WIRE_MAX_SNAPSHOT (1u << 24)
#define RKV_WIRE_MAX_QUERY 65536u
#define RKV_WIRE_MAX_ROUTE 64u
#define RKV_WIRE_QUERY_TOKENS_VERSION 2u
#define RKV_WIRE_MAX_PAGE 1024u

typedef enum rkv_wire_type {
    RKV_WIRE_EVENTS = 1,
    RKV_WIRE_SNAPSHOT = 2,
    RKV_WIRE_HEARTBEAT = 3,
    RKV_WIRE_QUERY = 4,
    RKV_WIRE_REPLY = 5,
    RKV_WIRE_SNAPSHOT_CHUNK = 6
} rkv_wire_type;

/* Which message a buffer holds (header only); RKV_ERR_FORMAT /
 * RKV_ERR_UNSUPPORTED as above. */
rkv_status rkv_wire_peek(const void *buf, size_t len, rkv_wire_type *out);

/* ---- events ---------------------------------------------------------------- */
typedef struct rkv_wire_batch_info {
    uint64_t instance, epoch, first_seq;
    uint32_t count;
} rkv_wire_batch_info;

/* Bytes rkv_wire_encode_events needs (0: the events are not encodable). */
size_t rkv_wire_events_size(const rkv_event *ev, uint32_t n);
/* Encodes ev[0..n) (1..RKV_WIRE_MAX_EVENTS, seqs strictly increasing, fields
 * in range) into buf[0..cap); *len_out gets the length. RKV_ERR_INVALID_ARG
 * for events that cannot be encoded, RKV_ERR_NO_SPACE when cap is short. */
rkv_status rkv_wire_encode_events(uint64_t instance, uint64_t epoch,
                                  const rkv_event *ev, uint32_t n, void *buf,
                                  size_t cap, size_t *len_out);
/* Decodes a batch: *info, and the events into out[0..cap) (out may be NULL
 * with cap 0 to read only info after a full validation). */
rkv_status rkv_wire_decode_events(const void *buf, size_t len,
                                  rkv_wire_batch_info *info, rkv_event *out,
                                  uint32_t cap);

/* ---- snapshot -------------------------------------------------------------- */
typedef struct rkv_wire_snapshot_info {
    uint64_t instance, epoch, seq;
    uint32_t count;
} rkv_wire_snapshot_info;

size_t rkv_wire_snapshot_size(size_t n);
rkv_status rkv_wire_encode_snapshot(uint64_t instance, uint64_t epoch,
                                    uint64_t seq, const rkv_block_entry *e,
                                    size_t n, void *buf, size_t cap,
                                    size_t *len_out);
rkv_status rkv_wire_decode_snapshot(const void *buf, size_t len,
                                    rkv_wire_snapshot_info *info,
                                    rkv_block_entry *out, size_t cap);

/* ---- snapshot chunk ------------------------------------------------------------ */
typedef struct rkv_wire_chunk_info {
    uint64_t instance, epoch, seq;
    uint32_t part, parts;
    uint64_t total;
    uint32_t count;
} rkv_wire_chunk_info;

/* Bytes of a chunk of n blocks (0: n too large). */
size_t rkv_wire_snapshot_chunk_size(size_t n);
/* The most blocks a chunk of at most max_bytes holds (0: none fits). */
size_t rkv_wire_snapshot_chunk_room(size_t max_bytes);
/* c->count blocks of e; RKV_ERR_INVALID_ARG for fields out of range. */
rkv_status rkv_wire_encode_snapshot_chunk(const rkv_wire_chunk_info *c,
                                          const rkv_block_entry *e, void *buf,
                                          size_t cap, size_t *len_out);
rkv_status rkv_wire_decode_snapshot_chunk(const void *buf, size_t len,
                                          rkv_wire_chunk_info *info,
                                          rkv_block_entry *out, size_t cap);

/* ---- heartbeat ------------------------------------------------------------- */
typedef struct rkv_wire_heartbeat {
    uint64_t instance, epoch, last_seq;
    uint32_t running;
    uint64_t queued_tokens;
} rkv_wire_heartbeat;

#define RKV_WIRE_HEARTBEAT_SIZE (RKV_WIRE_HEADER + 36u)
rkv_status rkv_wire_encode_heartbeat(const rkv_wire_heartbeat *hb, void *buf,
                                     size_t cap, size_t *len_out);
rkv_status rkv_wire_decode_heartbeat(const void *buf, size_t len,
                                     rkv_wire_heartbeat *out);

/* ---- route query / reply ----------------------------------------------------- */
size_t rkv_wire_query_size(uint32_t n);
rkv_status rkv_wire_encode_query(rkv_namespace ns, const uint64_t *hashes,
                                 uint32_t n, void *buf, size_t cap,
                                 size_t *len_out);
/* Either version: *n_out gets the number of page hashes, the hashes go to
 * out[0..cap) (a version 2 query's are computed from its tokens). */
rkv_status rkv_wire_decode_query(const void *buf, size_t len,
                                 rkv_namespace *ns, uint64_t *out,
                                 uint32_t cap, uint32_t *n_out);
/* Version 2: the token ids themselves. */
size_t rkv_wire_query_tokens_size(uint32_t n);
rkv_status rkv_wire_encode_query_tokens(rkv_namespace ns, const int32_t *tokens,
                                        uint32_t n, uint32_t page_size, void *buf,
                                        size_t cap, size_t *len_out);
/* Version 2 only (a version 1 query: RKV_ERR_FORMAT): tokens to
 * out[0..cap), *n_out of them. */
rkv_status rkv_wire_decode_query_tokens(const void *buf, size_t len,
                                        rkv_namespace *ns, uint32_t *page_size,
                                        int32_t *out, uint32_t cap,
                                        uint32_t *n_out);

typedef struct rkv_wire_reply {
    uint32_t status;
    uint64_t instance;
    uint32_t pages;
    uint32_t count;
    uint64_t ids[RKV_WIRE_MAX_ROUTE];
    uint32_t id_pages[RKV_WIRE_MAX_ROUTE];
} rkv_wire_reply;

size_t rkv_wire_reply_size(uint32_t count);
rkv_status rkv_wire_encode_reply(const rkv_wire_reply *r, void *buf,
                                 size_t cap, size_t *len_out);
rkv_status rkv_wire_decode_reply(const void *buf, size_t len,
                                 rkv_wire_reply *out);

#endif

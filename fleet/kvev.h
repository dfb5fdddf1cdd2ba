/*
 * fleet/kvev.h -- the KV-event format of vLLM and SGLang workers, both
 * ways: decoding a worker's batches (fleet/kvev_decode.c, read by
 * `radixkv bridge`) and encoding radixkv's events as such batches
 * (fleet/kvev_encode.c, so that routers built for those workers can
 * consume radixkv instances). Pure C, no ZMQ.
 *
 * The format (facts from the engines' documentation and wire, cited, not
 * copied): a ZMQ PUB message of three frames (topic, 8-byte big-endian
 * sequence number, msgpack payload); the payload is a batch
 * [ts, [events], dp_rank] (or a map with "ts", "events",
 * "data_parallel_rank"); an event is a tagged array
 *   ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
 *    lora_id, medium, lora_name, ...]
 *   ["BlockRemoved", block_hashes, medium, ...]
 *   ["AllBlocksCleared", ...]
 * or a map with a "type" field naming the same. Trailing fields with
 * defaults may be absent, unknown fields and unknown event types are
 * ignored. A block hash is a signed or unsigned 64-bit integer or a byte
 * string (1..64 bytes; sha256 hashing sends 32-byte digests).
 *
 * Engine hashes are opaque keys here: an integer is its 64-bit pattern
 * (a signed and an unsigned encoding of the same bits are one key), a byte
 * string is XXH3-64 of its bytes. They never meet radixkv's page hashes,
 * which the bridge recomputes from token_ids (fleet/bridge.h).
 *
 * Decoding assumes a hostile sender: a hand-written cursor reader that
 * allocates nothing (msgpack-c's unpacker allocates per declared count
 * before it sees the elements), nesting at most RKV_KVEV_MAX_DEPTH,
 * every count checked against the bytes left and the caller's caps
 * (events, hashes, tokens per batch). Any violation is RKV_ERR_FORMAT with
 * a sentence and the batch reads as empty (count 0).
 */
#ifndef RKV_FLEET_KVEV_H
#define RKV_FLEET_KVEV_H

#include <stddef.h>
#include <stdint.h>

#include "radixkv.h"

#define RKV_KVEV_MAX_DEPTH 32u
#define RKV_KVEV_MAX_HASH_BYTES 64u
#define RKV_KVEV_MEDIUM_UNKNOWN 255u /* a medium string we do not know */

typedef enum rkv_kvev_kind {
    RKV_KVEV_STORED = 1,
    RKV_KVEV_REMOVED = 2,
    RKV_KVEV_CLEARED = 3
} rkv_kvev_kind;

typedef struct rkv_kvev_event {
    uint8_t kind;          /* rkv_kvev_kind                                 */
    uint8_t medium;        /* rkv_medium, or RKV_KVEV_MEDIUM_UNKNOWN        */
    uint8_t has_parent;    /* STORED: parent_block_hash was not nil         */
    uint32_t block_size;   /* STORED                                        */
    uint32_t first_hash, num_hashes;   /* into the batch's hashes[]         */
    uint32_t first_token, num_tokens;  /* into the batch's tokens[]         */
    uint64_t parent;       /* engine key of parent_block_hash               */
    rkv_namespace ns;      /* 0, or from lora_name / lora_id (below)        */
} rkv_kvev_event;

typedef struct rkv_kvev_limits {
    uint32_t max_events;   /* events per batch, default 4096                */
    uint32_t max_hashes;   /* block hashes per batch, default 65536         */
    uint32_t max_tokens;   /* token ids per batch, default 1 << 22          */
    uint32_t max_block;    /* block_size, default 1024                      */
} rkv_kvev_limits;
void rkv_kvev_limits_init(rkv_kvev_limits *lim);

/* One decoded batch; the arrays are sized by the limits once. */
typedef struct rkv_kvev_batch {
    double ts;
    int64_t dp_rank;       /* -1: absent or nil                             */
    uint32_t count, n_hashes, n_tokens;
    uint32_t ignored;      /* events of a type we do not know               */
    rkv_kvev_event *events;
    uint64_t *hashes;
    int32_t *tokens;
    rkv_kvev_limits lim;
} rkv_kvev_batch;

rkv_status rkv_kvev_batch_init(rkv_kvev_batch *b, const rkv_kvev_limits *lim);
void rkv_kvev_batch_free(rkv_kvev_batch *b);

/* Decodes one msgpack payload into b (whatever it held is replaced). */
rkv_status rkv_kvev_decode(const void *buf, size_t len, rkv_kvev_batch *b);

/* Engine key of a byte-string hash. */
uint64_t rkv_kvev_key_bytes(const void *p, size_t n);
/* The namespace of a LoRA adapter as the bridge indexes it: from its name
 * when the event has one, else from its id; never 0 (the base model).
 * A client routing a request for that adapter queries with this
 * namespace. */
rkv_namespace rkv_kvev_lora_name_ns(const char *name, size_t n);
rkv_namespace rkv_kvev_lora_id_ns(int64_t id);

/* ---- encoding (fleet/kvev_encode.c) ---------------------------------------- */
/* Token ids of one STORED event (num_hashes * page_size of them, the
 * pages' tokens in order); ids NULL when the event has none (token_ids is
 * then sent empty: a consumer that rebuilds hashes from tokens skips it). */
typedef struct rkv_kvev_tokens {
    const int32_t *ids;
    uint32_t n;
} rkv_kvev_tokens;

/* Encodes ev[0..n) as one batch [ts, [events], nil] into buf[0..cap):
 * STORED -> ["BlockStored", hashes, parent (nil at the root), token_ids,
 * page_size, lora_id (nil for namespace 0, else the namespace as an
 * unsigned integer), medium, nil], REMOVED -> ["BlockRemoved", hashes,
 * medium], ALL_CLEARED -> ["AllBlocksCleared"]; a RESYNC (events were
 * lost) becomes ["AllBlocksCleared"] too: the format has no resync, and a
 * consumer that forgets everything is never wrong about what is cached.
 * Hashes are radixkv's page hashes as unsigned integers; media "GPU",
 * "CPU_PINNED", "DISK". tok may be NULL, or has n entries (used for
 * STORED events; a count other than num_hashes * page_size is
 * RKV_ERR_INVALID_ARG). RKV_ERR_NO_SPACE when cap is short (*len_out
 * then says how much is needed). */
rkv_status rkv_kvev_encode(double ts, const rkv_event *ev, uint32_t n,
                           const rkv_kvev_tokens *tok, void *buf, size_t cap,
                           size_t *len_out);

#endif

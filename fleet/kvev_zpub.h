/*
 * fleet/kvev_zpub.h -- a radixkv instance's KV events published the way
 * vLLM and SGLang workers publish theirs (fleet/kvev.h), so that routers
 * built for those workers (Dynamo's, llm-d's) can consume radixkv
 * instances: a ZMQ PUB socket sending [topic, 8-byte big-endian seq,
 * msgpack batch] with seqs from 0, and optionally a ROUTER replay socket
 * that answers [empty, start seq] with every kept batch from start on,
 * then seq -1 with an empty payload.
 *
 * Plugs into the embeddable publisher as its tap (fleet/publisher.h:
 * rkv_fleet_pub_config.tap = rkv_kvev_zpub_tap, tap_ctx = the zpub), or is
 * fed batches directly with rkv_kvev_zpub_send, with the token ids of the
 * stored pages when the caller has them (a consumer that rebuilds hashes
 * from tokens needs them; without them token_ids is sent empty).
 *
 * Library code: no clock (batch times come from the caller), no prints,
 * no threads; never blocks: a subscriber that does not keep up loses
 * messages at ZMQ's high-water mark (it sees a seq gap and asks the
 * replay socket). Memory is bounded: at most `keep` encoded batches are
 * kept for replay; replay requests are at most 64 bytes (larger ones are
 * dropped by ZMQ), malformed ones are ignored, and at most 16 are
 * answered per poll.
 */
#ifndef RKV_FLEET_KVEV_ZPUB_H
#define RKV_FLEET_KVEV_ZPUB_H

#include <stddef.h>
#include <stdint.h>

#include "fleet/kvev.h"
#include "radixkv.h"

typedef struct rkv_kvev_zpub rkv_kvev_zpub;

typedef struct rkv_kvev_zpub_config {
    const char *endpoint;        /* PUB bind, e.g. "tcp://127.0.0.1:5557";
                                    port "*": a free one, see
                                    rkv_kvev_zpub_endpoint                  */
    const char *replay_endpoint; /* ROUTER bind, NULL: no replay            */
    const char *topic;           /* first frame, default ""                 */
    uint32_t keep;               /* batches kept for replay, 1..2^20,
                                    default 1024                            */
} rkv_kvev_zpub_config;
void rkv_kvev_zpub_config_init(rkv_kvev_zpub_config *cfg);

rkv_status rkv_kvev_zpub_create(const rkv_kvev_zpub_config *cfg,
                                rkv_kvev_zpub **out);
void rkv_kvev_zpub_destroy(rkv_kvev_zpub *z); /* NULL is fine */

/* The bound endpoints (replay: "" without one), e.g. after a port of *. */
rkv_status rkv_kvev_zpub_endpoint(const rkv_kvev_zpub *z, int replay, char *buf,
                                  size_t cap);

/* Encodes ev[0..n) (rkv_kvev_encode; tok NULL or n entries) as the next
 * batch, keeps it for replay and publishes it. ts: the caller's time in
 * seconds. RKV_ERR_INVALID_ARG for events rkv_kvev_encode refuses,
 * RKV_ERR_NOMEM; RKV_ERR_IO when ZMQ refused the send (the batch is kept
 * and its seq used: a subscriber sees the gap and replays it). */
rkv_status rkv_kvev_zpub_send(rkv_kvev_zpub *z, double ts, const rkv_event *ev,
                              uint32_t n, const rkv_kvev_tokens *tok);

/* Answers waiting replay requests; call it in the serving loop. */
rkv_status rkv_kvev_zpub_poll(rkv_kvev_zpub *z);

/* rkv_fleet_pub_config.tap: sends the drained batch at now_ms / 1000
 * seconds, with the stored pages' token ids when the publisher passes
 * them (its tap_tokens > 0; else token_ids go out empty), then answers
 * replay requests. */
void rkv_kvev_zpub_tap(void *zpub, uint64_t now_ms, const rkv_event *ev, uint32_t n,
                       const int32_t *tokens, size_t ntokens);

typedef struct rkv_kvev_zpub_stats {
    uint64_t batches, events, send_failures, replays, replayed_batches,
             bad_requests;
} rkv_kvev_zpub_stats;
rkv_status rkv_kvev_zpub_get_stats(const rkv_kvev_zpub *z, rkv_kvev_zpub_stats *out);

#endif

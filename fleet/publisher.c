/*
 * fleet/publisher.c -- rkv_fleet_pub (fleet/publisher.h): the bounded queue
 * of encoded batches, JetStream publishing, heartbeats, snapshot replies.
 * The queue is a ring of max_pending slots; a slot owns its encoded bytes.
 * What is drained and snapshotted is the source's (a tree, or any
 * rkv_fleet_source such as the bridge's state); the tap, when set, sees
 * each drained batch before it is queued.
 */
#include "fleet/publisher.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "fleet/codec.h"

typedef struct pub_slot {
    uint8_t *buf;
    size_t len;
    uint64_t first_seq, last_seq;
} pub_slot;

struct rkv_fleet_pub {
    rkv_fleet_pub_config cfg;
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *snap_sub;
    rkv_fleet_source src;
    char kv_subject[128], hb_subject[128];
    rkv_event *scratch;        /* batch_events                             */
    int32_t *tok_scratch;      /* cfg.tap_tokens token ids, or NULL         */
    pub_slot *q;               /* max_pending                              */
    uint32_t q_head, q_count;
    uint64_t last_drained_seq; /* seq of the last event put in the queue   */
    uint64_t next_hb_ms;
    int hb_sent;
    rkv_fleet_pub_stats st;
};

void rkv_fleet_pub_config_init(rkv_fleet_pub_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->batch_events = 256;
    cfg->max_pending = 64;
    cfg->heartbeat_ms = 500;
    cfg->publish_wait_ms = 2000;
}

static int model_ok(const char *m)
{
    size_t n = m ? strlen(m) : 0;
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = m[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

rkv_status rkv_fleet_subject(char *buf, size_t cap, const char *model,
                             const char *kind, int with_id, uint64_t id)
{
    if (!buf || !kind || !model_ok(model))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_fleet_subject: model must be 1..64 of "
                             "[A-Za-z0-9_-]");
    int n = with_id ? snprintf(buf, cap, "radixkv.%s.%s.%" PRIu64, model, kind, id)
                    : snprintf(buf, cap, "radixkv.%s.%s", model, kind);
    if (n < 0 || (size_t)n >= cap)
        return rkv_set_error(RKV_ERR_NO_SPACE, "rkv_fleet_subject: %zu bytes too few",
                             cap);
    return RKV_OK;
}

static rkv_status nats_error(const char *what, natsStatus s)
{
    return rkv_set_error(RKV_ERR_IO, "%s: %s", what, natsStatus_GetText(s));
}

static rkv_status tree_drain(void *ctx, rkv_event *out, uint32_t max, uint32_t *n)
{
    return rkv_tree_events_drain(ctx, out, max, n);
}

static rkv_status tree_snapshot(const void *ctx, rkv_block_entry *out, size_t cap,
                                size_t *n, uint64_t *seq)
{
    return rkv_tree_snapshot(ctx, out, cap, n, seq);
}

static rkv_status tree_drain_tokens(void *ctx, rkv_event *out, uint32_t max,
                                    int32_t *tokens, size_t cap, uint32_t *n,
                                    size_t *ntok)
{
    return rkv_tree_events_drain_tokens(ctx, out, max, tokens, cap, n, ntok);
}

rkv_status rkv_fleet_pub_create(const rkv_fleet_pub_config *cfg,
                                natsConnection *nc, rkv_tree *tree,
                                rkv_fleet_pub **out)
{
    if (!tree)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_fleet_pub_create: NULL "
                             "argument");
    rkv_fleet_source src = {tree, tree_drain, tree_snapshot, tree_drain_tokens};
    return rkv_fleet_pub_create_source(cfg, nc, &src, out);
}

rkv_status rkv_fleet_pub_create_source(const rkv_fleet_pub_config *cfg,
                                       natsConnection *nc,
                                       const rkv_fleet_source *src,
                                       rkv_fleet_pub **out)
{
    const char *what = "rkv_fleet_pub_create";
    if (!cfg || !nc || !src || !src->drain || !src->snapshot || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "%s: NULL argument", what);
    if (cfg->tap_tokens > 0 && (!cfg->tap || !src->drain_tokens ||
                                cfg->tap_tokens > ((size_t)1 << 28)))
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: tap_tokens (%zu) needs a tap and a source with "
                             "drain_tokens, and at most 2^28", what, cfg->tap_tokens);
    if (cfg->batch_events == 0 || cfg->batch_events > RKV_WIRE_MAX_EVENTS ||
        cfg->max_pending == 0 || cfg->max_pending > (1u << 20) ||
        cfg->heartbeat_ms == 0 || cfg->publish_wait_ms <= 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "%s: batch_events 1..%u, max_pending 1..2^20, "
                             "heartbeat_ms and publish_wait_ms > 0", what,
                             RKV_WIRE_MAX_EVENTS);
    rkv_status s;
    rkv_fleet_pub *p = calloc(1, sizeof *p);
    if (!p)
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", what);
    p->cfg = *cfg;
    p->cfg.model = NULL; /* not kept: the subjects carry it */
    p->nc = nc;
    p->src = *src;
    char snap_subject[128];
    s = rkv_fleet_subject(p->kv_subject, sizeof p->kv_subject, cfg->model, "kv", 1,
                          cfg->instance);
    if (s == RKV_OK)
        s = rkv_fleet_subject(p->hb_subject, sizeof p->hb_subject, cfg->model, "hb",
                              1, cfg->instance);
    if (s == RKV_OK)
        s = rkv_fleet_subject(snap_subject, sizeof snap_subject, cfg->model, "snap",
                              1, cfg->instance);
    if (s != RKV_OK) {
        free(p);
        return s;
    }
    p->scratch = calloc(cfg->batch_events, sizeof *p->scratch);
    if (cfg->tap_tokens > 0) {
        p->tok_scratch = malloc(cfg->tap_tokens * sizeof *p->tok_scratch);
        if (!p->tok_scratch) {
            free(p->scratch);
            p->scratch = NULL; /* reported as out of memory below */
        }
    }
    p->q = calloc(cfg->max_pending, sizeof *p->q);
    if (!p->scratch || !p->q) {
        rkv_fleet_pub_destroy(p);
        return rkv_set_error(RKV_ERR_NOMEM, "%s: out of memory", what);
    }
    natsStatus ns = natsConnection_JetStream(&p->js, nc, NULL);
    if (ns == NATS_OK)
        ns = natsConnection_SubscribeSync(&p->snap_sub, nc, snap_subject);
    if (ns != NATS_OK) {
        rkv_fleet_pub_destroy(p);
        return nats_error(what, ns);
    }
    *out = p;
    return RKV_OK;
}

void rkv_fleet_pub_destroy(rkv_fleet_pub *p)
{
    if (!p)
        return;
    if (p->snap_sub) {
        natsSubscription_Unsubscribe(p->snap_sub);
        natsSubscription_Destroy(p->snap_sub);
    }
    if (p->js)
        jsCtx_Destroy(p->js);
    if (p->q)
        for (uint32_t i = 0; i < p->cfg.max_pending; i++)
            free(p->q[i].buf);
    free(p->q);
    free(p->scratch);
    free(p->tok_scratch);
    free(p);
}

/* A snapshot over the server's max payload goes out as chunks of at most
 * that size, in order, on the same reply subject (one publisher to one
 * subscriber: NATS keeps them in order; the router checks it). 0: sent. */
static int send_chunks(rkv_fleet_pub *p, const char *reply, const rkv_block_entry *e,
                       size_t n, uint64_t seq, size_t max_payload)
{
    size_t room = rkv_wire_snapshot_chunk_room(max_payload);
    if (room == 0)
        return -1;
    size_t parts = (n + room - 1) / room;
    if (parts == 0 || parts > UINT32_MAX)
        return -1;
    size_t cap = rkv_wire_snapshot_chunk_size(room);
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -1;
    int ok = 1;
    for (size_t k = 0; k < parts && ok; k++) {
        size_t at = k * room, cnt = n - at < room ? n - at : room, len = 0;
        rkv_wire_chunk_info c = {p->cfg.instance, p->cfg.epoch, seq, (uint32_t)k,
                                 (uint32_t)parts, n, (uint32_t)cnt};
        ok = rkv_wire_encode_snapshot_chunk(&c, e + at, buf, cap, &len) == RKV_OK &&
             natsConnection_Publish(p->nc, reply, buf, (int)len) == NATS_OK;
    }
    free(buf);
    if (ok)
        p->st.snapshots_chunked++;
    return ok ? 0 : -1;
}

/* Snapshot requests: the reply is the encoded snapshot (in chunks when it
 * is over the server's max payload), or nothing (the router retries) when
 * it cannot be built or sent. */
static void serve_snapshots(rkv_fleet_pub *p)
{
    for (;;) {
        natsMsg *m = NULL;
        if (natsSubscription_NextMsg(&m, p->snap_sub, 0) != NATS_OK || !m)
            return;
        const char *reply = natsMsg_GetReply(m);
        size_t n = 0;
        uint64_t seq = 0;
        rkv_block_entry *e = NULL;
        uint8_t *buf = NULL;
        size_t len = 0, need = 0;
        int64_t max = natsConnection_GetMaxPayload(p->nc);
        int ok = reply && max > 0 &&
                 p->src.snapshot(p->src.ctx, NULL, 0, &n, NULL) == RKV_OK;
        if (ok) {
            e = malloc((n ? n : 1) * sizeof *e);
            need = rkv_wire_snapshot_size(n);
            ok = e && p->src.snapshot(p->src.ctx, e, n, &n, &seq) == RKV_OK;
        }
        if (ok && need && (int64_t)need <= max)
            ok = (buf = malloc(need)) != NULL &&
                 rkv_wire_encode_snapshot(p->cfg.instance, p->cfg.epoch, seq, e, n,
                                          buf, need, &len) == RKV_OK &&
                 natsConnection_Publish(p->nc, reply, buf, (int)len) == NATS_OK;
        else if (ok)
            ok = send_chunks(p, reply, e, n, seq, (size_t)max) == 0;
        if (ok)
            p->st.snapshots_served++;
        else
            p->st.snapshot_failures++;
        free(buf);
        free(e);
        natsMsg_Destroy(m);
    }
}

static rkv_status drain(rkv_fleet_pub *p, uint64_t now_ms)
{
    while (p->q_count < p->cfg.max_pending) {
        uint32_t n = 0;
        size_t ntok = 0;
        rkv_status s =
            p->tok_scratch
                ? p->src.drain_tokens(p->src.ctx, p->scratch, p->cfg.batch_events,
                                      p->tok_scratch, p->cfg.tap_tokens, &n, &ntok)
                : p->src.drain(p->src.ctx, p->scratch, p->cfg.batch_events, &n);
        if (s != RKV_OK)
            return s;
        if (n == 0)
            return RKV_OK;
        if (p->cfg.tap)
            p->cfg.tap(p->cfg.tap_ctx, now_ms, p->scratch, n, p->tok_scratch, ntok);
        size_t need = rkv_wire_events_size(p->scratch, n), len = 0;
        uint8_t *buf = need ? malloc(need) : NULL;
        if (!buf)
            /* the drained events are gone: the router must resync, which
             * the seq gap in the next batch tells it */
            return rkv_set_error(need ? RKV_ERR_NOMEM : RKV_ERR_INVALID_ARG,
                                 "rkv_fleet_pub_poll: could not encode %u events",
                                 n);
        s = rkv_wire_encode_events(p->cfg.instance, p->cfg.epoch, p->scratch, n, buf,
                                   need, &len);
        if (s != RKV_OK) {
            free(buf);
            return s;
        }
        pub_slot *slot = &p->q[(p->q_head + p->q_count) % p->cfg.max_pending];
        slot->buf = buf;
        slot->len = len;
        slot->first_seq = p->scratch[0].seq;
        slot->last_seq = p->scratch[n - 1].seq;
        p->q_count++;
        p->last_drained_seq = slot->last_seq;
    }
    p->st.queue_full++;
    return RKV_OK;
}

static rkv_status publish(rkv_fleet_pub *p)
{
    while (p->q_count) {
        pub_slot *slot = &p->q[p->q_head];
        char msg_id[96];
        snprintf(msg_id, sizeof msg_id, "%" PRIu64 "-%" PRIu64 "-%" PRIu64,
                 p->cfg.instance, p->cfg.epoch, slot->first_seq);
        jsPubOptions o;
        jsPubOptions_Init(&o);
        o.MsgId = msg_id;
        o.MaxWait = p->cfg.publish_wait_ms;
        jsPubAck *ack = NULL;
        jsErrCode jerr = 0;
        natsStatus ns = js_Publish(&ack, p->js, p->kv_subject, slot->buf,
                                   (int)slot->len, &o, &jerr);
        jsPubAck_Destroy(ack);
        if (ns != NATS_OK) {
            p->st.publish_failures++;
            return rkv_set_error(RKV_ERR_IO, "rkv_fleet_pub_poll: publish to %s: %s "
                                 "(JetStream error %d)", p->kv_subject,
                                 natsStatus_GetText(ns), (int)jerr);
        }
        p->st.batches_published++;
        rkv_wire_batch_info info;
        if (rkv_wire_decode_events(slot->buf, slot->len, &info, NULL, 0) == RKV_OK)
            p->st.events_published += info.count;
        p->st.last_published_seq = slot->last_seq;
        free(slot->buf);
        slot->buf = NULL;
        p->q_head = (p->q_head + 1) % p->cfg.max_pending;
        p->q_count--;
    }
    return RKV_OK;
}

static void heartbeat(rkv_fleet_pub *p, uint64_t now_ms, uint32_t running,
                      uint64_t queued)
{
    if (p->hb_sent && now_ms < p->next_hb_ms)
        return;
    rkv_wire_heartbeat hb = {p->cfg.instance, p->cfg.epoch, p->st.last_published_seq,
                             running, queued};
    uint8_t buf[RKV_WIRE_HEARTBEAT_SIZE];
    size_t len = 0;
    if (rkv_wire_encode_heartbeat(&hb, buf, sizeof buf, &len) == RKV_OK &&
        natsConnection_Publish(p->nc, p->hb_subject, buf, (int)len) == NATS_OK) {
        p->st.heartbeats++;
        p->hb_sent = 1;
        p->next_hb_ms = now_ms + p->cfg.heartbeat_ms;
    }
}

rkv_status rkv_fleet_pub_poll(rkv_fleet_pub *p, uint64_t now_ms,
                              uint32_t running, uint64_t queued_tokens)
{
    if (!p)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_fleet_pub_poll: NULL");
    serve_snapshots(p);
    rkv_status s = drain(p, now_ms);
    rkv_status ps = publish(p);
    heartbeat(p, now_ms, running, queued_tokens);
    p->st.pending_batches = p->q_count;
    return s != RKV_OK ? s : ps;
}

rkv_status rkv_fleet_pub_get_stats(const rkv_fleet_pub *p, rkv_fleet_pub_stats *out)
{
    if (!p || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_fleet_pub_get_stats: NULL");
    *out = p->st;
    out->pending_batches = p->q_count;
    return RKV_OK;
}

rkv_status rkv_fleet_pub_check(const rkv_fleet_pub *p)
{
    if (!p)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_fleet_pub_check: NULL");
    if (p->q_count > p->cfg.max_pending || p->q_head >= p->cfg.max_pending)
        return rkv_set_error(RKV_ERR_CORRUPT, "rkv_fleet_pub_check: queue %u/%u",
                             p->q_count, p->cfg.max_pending);
    uint64_t prev = p->st.last_published_seq;
    for (uint32_t i = 0; i < p->cfg.max_pending; i++) {
        const pub_slot *s = &p->q[(p->q_head + i) % p->cfg.max_pending];
        if (i >= p->q_count) {
            if (s->buf)
                return rkv_set_error(RKV_ERR_CORRUPT,
                                     "rkv_fleet_pub_check: free slot owns bytes");
            continue;
        }
        if (!s->buf || s->first_seq <= prev || s->last_seq < s->first_seq)
            return rkv_set_error(RKV_ERR_CORRUPT,
                                 "rkv_fleet_pub_check: slot %u seqs %" PRIu64
                                 "..%" PRIu64 " after %" PRIu64, i, s->first_seq,
                                 s->last_seq, prev);
        prev = s->last_seq;
    }
    if (p->q_count && prev != p->last_drained_seq)
        return rkv_set_error(RKV_ERR_CORRUPT,
                             "rkv_fleet_pub_check: queue ends at %" PRIu64
                             ", drained %" PRIu64, prev, p->last_drained_seq);
    return RKV_OK;
}

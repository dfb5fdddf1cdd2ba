/*
 * fleet/router_daemon.c -- the fleet's cache-aware router as a daemon over
 * NATS (fleet/router_daemon.h): radixkv-router and `radixkv router`.
 *
 *  - creates the JetStream stream (default RADIXKV_<model>, subjects
 *    radixkv.<model>.kv.*, retention by age and bytes) if absent, and reads
 *    it from the start with an ordered consumer: after a restart (kill -9
 *    included) the index is rebuilt from what the stream retains, and an
 *    instance whose retained events do not start at seq 1 resyncs; a stream
 *    that vanishes or is recreated is noticed within a second
 *    (watch_stream) and read again, every instance resyncing;
 *  - applies each batch (fleet/codec.h) to an rkv_router; an instance that
 *    needs a resync (a gap, a RESYNC marker, a bad event) is asked for a
 *    snapshot on radixkv.<model>.snap.<id> (request/reply, retried every
 *    --snapshot-timeout-ms until it answers);
 *  - heartbeats (radixkv.<model>.hb.*) give load and the last published
 *    seq; the seq is checked one heartbeat late (the heartbeat travels on
 *    core NATS, faster than the stream, so the check waits one interval for
 *    the stream to deliver what the heartbeat announced). An instance with
 *    no heartbeat (or batch) for --heartbeat-timeout-ms is dropped from the
 *    index; when it comes back it resyncs. A new epoch in an instance's
 *    messages (its tree was recreated) starts that instance over;
 *  - answers route queries on radixkv.<model>.route (fleet/codec.h query ->
 *    reply: the chosen instance and the overlaps of at most 64 instances,
 *    the best by overlap when more are registered) and stats on
 *    radixkv.<model>.stats (Prometheus text format: every router of the
 *    model answers; queries go to one router of the queue group
 *    "radixkv-router", so several routers share them), and the same text on
 *    http://<--metrics-addr>:<--metrics-port>/metrics when asked
 *    (fleet/http.c, on a thread of its own that sleeps in poll(2): a
 *    scrape or a stuck client never blocks the main loop, and connections
 *    are kept alive between requests);
 *  - a route query carries page hashes or token ids (fleet/codec.h
 *    versions 1 and 2): the codec hashes token ids into the trees' page
 *    hashes, so the router sees one form.
 *  - trust (README "Security", "Fleet"): an instance's id is its
 *    subject's (a payload naming another is rejected, fleet/guard.h), one
 *    instance causes at most --snapshot-burst snapshot requests, then one
 *    per --snapshot-interval-ms, and the index has a memory budget
 *    (--index-max-entries / --index-max-bytes); the connection takes the
 *    fleet's authentication and TLS options (fleet/nats_auth.h), and URLs
 *    are logged without their passwords.
 *
 * One thread at a time uses the router, under the state lock: the main
 * loop handles the stream, heartbeats, snapshots and stats in arrival
 * order (their NATS callbacks only queue them), route queries are
 * answered on a connection and thread of their own (on_route_loop,
 * fleet/nats_loop.h; on their subscription's delivery thread, on_route,
 * when that cannot start), and HTTP requests on the HTTP thread
 * (http_loop). Bad messages are counted and
 * logged (the first few), never fatal. SIGINT/SIGTERM stop it cleanly.
 * An instance is routed to only once this process had a heartbeat from
 * it: one rebuilt from the stream after a restart may have died while the
 * router was down (it then expires after --heartbeat-timeout-ms unheard).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/status.h"
#include "fleet/codec.h"
#include "fleet/cpu_sample.h"
#include "fleet/daemon_util.h"
#include "fleet/guard.h"
#include "fleet/http.h"
#include "fleet/route_json.h"
#include "fleet/nats_auth.h"
#include "fleet/nats_loop.h"
#include "fleet/publisher.h"
#include "fleet/router_daemon.h"
#include "radixkv_router.h"

typedef struct qitem {
    natsMsg *msg;
    int kind;
    struct qitem *next;
} qitem;

typedef struct mqueue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    qitem *head, *tail;
} mqueue;

typedef struct inst {
    uint64_t id, epoch;
    int live;
    uint64_t last_seen_ms;
    uint64_t hb_seq_prev; /* seq of the previous heartbeat, checked now */
    int hb_seen;
    int snap_pending;
    uint64_t snap_sent_ms;
    /* a chunked snapshot being staged (rkv_router_snapshot_begin): the
     * next part expected, of how many, for which seq, blocks so far of
     * how many */
    int chunking;
    uint32_t chunk_next, chunk_parts;
    uint64_t chunk_seq, chunk_blocks, chunk_total;
    int heard; /* a heartbeat since registered: routable */
    rkv_fleet_bucket snap_bucket; /* snapshot requests it may still cause */
    int snap_deferred;            /* a request waits for the bucket       */
} inst;

/* counters sampled once a second: rates are over the last RATE_WINDOW s */
#define RATE_SAMPLES 11
typedef struct rate_sample {
    uint64_t t_ms, events, queries;
} rate_sample;

#define N_SUBS 5
#define LAT_RING 1024

struct rkv_daemon {
    const char *prog;
    FILE *log; /* NULL: quiet (the fuzz harness) */
    rkv_daemon_reply_fn reply_fn; /* set: replies go here instead of to nc */
    void *reply_ctx;
    const char *model;
    natsConnection *nc;
    rkv_router *router;
    inst in[RKV_ROUTER_MAX_INSTANCES];
    uint32_t n_in;
    char inbox[128];
    uint64_t hb_timeout_ms, snap_timeout_ms, start_ms;
    uint64_t bad_messages, expired, snap_requests, snap_bad;
    uint64_t stream_logs; /* stream anomalies logged so far (first 20) */
    rkv_event *ev;
    uint64_t *hashes;
    uint32_t lat_us[LAT_RING]; /* the last LAT_RING query latencies      */
    uint64_t n_lat, lat_sum_us;
    uint64_t queue_dropped;      /* messages lost before the main loop    */
    natsSubscription *subs[N_SUBS];
    rate_sample rs[RATE_SAMPLES];
    uint32_t rs_head, rs_count;
    rkv_http *http;
    /* what the bus is trusted with (README "Security"): an instance id is
     * the subject's, snapshot requests per instance are rate-limited, the
     * index has a memory budget */
    char kv_prefix[160], hb_prefix[160], snap_prefix[192];
    uint32_t snap_burst;
    uint64_t snap_interval_ms;
    uint64_t forged, snap_limited, budget_logs;
    /* the HTTP route API (POST /v1/route): token ids are hashed with the
     * fleet's page size, --page-size or else the first one seen in a
     * STORED event */
    uint32_t page_size;
    int32_t *tokens; /* RKV_DAEMON_HTTP_MAX_TOKENS, allocated on first use */
    uint64_t http_routes, http_route_errors;
    /* thread CPU time inside the router's route calls, 1 call in
     * route_cpu.every timed (fleet/cpu_sample.h: the clock is a system
     * call) and the total estimated */
    rkv_cpu_sample route_cpu;
    /* the route queries' own connection (fleet/nats_loop.h): replies to
     * them go on it while one is handled (NULL: on nc) */
    rkv_nats_loop *route_loop;
    natsConnection *reply_nc;
};

/* a body of RKV_HTTP_MAX_POST bytes holds at most this many ids ("1,") */
#define RKV_DAEMON_HTTP_MAX_TOKENS (RKV_HTTP_MAX_POST / 2u + 1u)

/* ---- the message queue (callbacks -> main thread) ---------------------------- */
typedef struct mqueue_owner {
    mqueue q;
    uint64_t dropped; /* under q.mu */
    /* the daemon's state, for the route queries answered on their own
     * delivery thread (on_route): every use of d from the main loop and
     * from there holds `state`; closing (under it) ends those answers */
    pthread_mutex_t state;
    rkv_daemon *d;
    int closing;
    atomic_int http_stop; /* ends http_loop */
} mqueue_owner;

static void enqueue(mqueue *q, natsMsg *m, int kind)
{
    qitem *it = malloc(sizeof *it);
    if (!it) {
        natsMsg_Destroy(m);
        pthread_mutex_lock(&q->mu);
        ((mqueue_owner *)q)->dropped++;
        pthread_mutex_unlock(&q->mu);
        return;
    }
    it->msg = m;
    it->kind = kind;
    it->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static qitem *dequeue(mqueue *q, uint64_t wait_ms)
{
    pthread_mutex_lock(&q->mu);
    if (!q->head) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        ts.tv_sec += (time_t)(wait_ms / 1000) + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
    }
    qitem *it = q->head;
    if (it) {
        q->head = it->next;
        if (!q->head)
            q->tail = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    return it;
}

#define HANDLER(name, kind)                                                     \
    static void name(natsConnection *nc, natsSubscription *sub, natsMsg *m,     \
                     void *closure)                                             \
    {                                                                           \
        (void)nc;                                                               \
        (void)sub;                                                              \
        enqueue(closure, m, kind);                                              \
    }
HANDLER(on_kv, RKV_DAEMON_KV)
HANDLER(on_hb, RKV_DAEMON_HB)

/* Route queries are answered on their subscription's delivery thread,
 * under the state lock, instead of queued for the main thread: a query
 * crossed three threads (libnats' reader, the delivery thread, the main
 * loop), and each hand-off is a wake-up and a switch, most of the
 * daemon's CPU time per query (bench/RESULTS.md, h-router). Queries and
 * the stream are on different subjects: nothing ordered them before
 * either. on_route_loop runs on the route queries' own connection and
 * thread (fleet/nats_loop.h): no hand-off between threads, and the
 * replies to every query one read brought go out in one write. */
static void on_route_loop(void *ctx, natsConnection *nc, natsMsg *m)
{
    mqueue_owner *o = ctx;
    pthread_mutex_lock(&o->state);
    if (!o->closing) {
        o->d->reply_nc = nc;
        rkv_daemon_handle(o->d, RKV_DAEMON_ROUTE, natsMsg_GetSubject(m),
                          natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                          natsMsg_GetReply(m), rkv_fleet_now_ms());
        o->d->reply_nc = NULL;
    }
    pthread_mutex_unlock(&o->state);
}
/* The same on the main connection's delivery thread (its replies go out
 * on that connection, nc), where the loop cannot start. */
static void on_route(natsConnection *nc, natsSubscription *sub, natsMsg *m,
                     void *closure)
{
    (void)sub;
    on_route_loop(closure, nc, m);
    natsMsg_Destroy(m);
}
HANDLER(on_stats, RKV_DAEMON_STATS)
HANDLER(on_snap, RKV_DAEMON_SNAP)

/* ---- instances ---------------------------------------------------------------- */
static void bad(rkv_daemon *d, const char *what)
{
    d->bad_messages++;
    if (d->bad_messages <= 20 && d->log)
        fprintf(d->log, "%s: bad %s message: %s%s\n", d->prog, what,
                rkv_last_error(),
                d->bad_messages == 20 ? " (no more of these are logged)" : "");
}

static inst *find(rkv_daemon *d, uint64_t id)
{
    for (uint32_t i = 0; i < d->n_in; i++)
        if (d->in[i].id == id)
            return &d->in[i];
    return NULL;
}

/* The instance, registered and live with this epoch (started over when the
 * epoch changed); NULL when the router has no room. */
static inst *touch(rkv_daemon *d, uint64_t id, uint64_t epoch, uint64_t now)
{
    inst *x = find(d, id);
    if (x && x->live && x->epoch != epoch) {
        rkv_router_remove_instance(d->router, id);
        x->live = 0;
    }
    if (!x) {
        if (d->n_in == RKV_ROUTER_MAX_INSTANCES) {
            /* reuse a dead slot */
            for (uint32_t i = 0; i < d->n_in && !x; i++)
                if (!d->in[i].live)
                    x = &d->in[i];
            if (!x)
                return NULL;
        } else {
            x = &d->in[d->n_in++];
        }
        memset(x, 0, sizeof *x);
        x->id = id;
        rkv_fleet_bucket_init(&x->snap_bucket, d->snap_burst, now);
    }
    if (!x->live) {
        if (rkv_router_add_instance(d->router, id) != RKV_OK)
            return NULL;
        x->live = 1;
        x->epoch = epoch;
        x->hb_seen = 0;
        x->hb_seq_prev = 0;
        x->snap_pending = 0;
        x->chunking = 0; /* removing the instance dropped what was staged */
        x->heard = 0;
    }
    x->last_seen_ms = now;
    return x;
}

static void request_snapshot(rkv_daemon *d, inst *x, uint64_t now)
{
    char subj[160], reply[192];
    if (rkv_fleet_subject(subj, sizeof subj, d->model, "snap", 1, x->id) != RKV_OK)
        return;
    /* a stream that keeps breaking (or a peer that breaks it) costs at
     * most the bucket's rate of full snapshots */
    if (!rkv_fleet_bucket_take(&x->snap_bucket, d->snap_burst, d->snap_interval_ms,
                               now)) {
        if (!x->snap_deferred)
            d->snap_limited++;
        x->snap_deferred = 1;
        return;
    }
    x->snap_deferred = 0;
    snprintf(reply, sizeof reply, "%s.%" PRIu64, d->inbox, x->id);
    /* without a connection (the fuzz harness) as if sent */
    if (!d->nc || natsConnection_PublishRequest(d->nc, subj, reply, NULL, 0) == NATS_OK) {
        x->snap_pending = 1;
        x->snap_sent_ms = now;
        d->snap_requests++;
    }
}

static void maybe_resync(rkv_daemon *d, inst *x, uint64_t now)
{
    rkv_router_instance_info info;
    if (rkv_router_instance_info_get(d->router, x->id, &info) != RKV_OK)
        return;
    if (!info.needs_resync) {
        x->snap_pending = 0;
        return;
    }
    if (!x->snap_pending || now - x->snap_sent_ms >= d->snap_timeout_ms)
        request_snapshot(d, x, now);
}

/* ---- message handlers ----------------------------------------------------------- */
/* Does the payload's instance id match the subject's (prefix + id)? The
 * server's permissions let only instance N publish on its subjects, so
 * the subject is what is believed; a payload naming another instance is
 * forged: counted, logged (the first 20), dropped. */
static int from_subject(rkv_daemon *d, const char *subj, const char *prefix, uint64_t id,
                        const char *what)
{
    uint64_t sid;
    if (rkv_fleet_subject_id(subj, prefix, &sid) && sid == id)
        return 1;
    d->forged++;
    if (d->log && d->forged <= 20) {
        char safe[96];
        size_t i = 0;
        for (; subj && subj[i] && i + 1 < sizeof safe; i++)
            safe[i] = subj[i] > ' ' && subj[i] < 127 ? subj[i] : '?';
        safe[i] = 0;
        fprintf(d->log, "%s: %s on %s names instance %" PRIu64
                ": rejected (an instance speaks only on its own subjects)%s\n",
                d->prog, what, safe, id,
                d->forged == 20 ? " (no more of these are logged)" : "");
    }
    return 0;
}

/* The index refused an instance's events or snapshot for its memory
 * budget: logged (the first 20, then every 1000th). */
static void over_budget(rkv_daemon *d, uint64_t id)
{
    rkv_router_stats st;
    d->budget_logs++;
    if (!d->log || rkv_router_get_stats(d->router, &st) != RKV_OK)
        return;
    if (d->budget_logs <= 20 || d->budget_logs % 1000 == 0)
        fprintf(d->log, "%s: instance %" PRIu64 ": the index is at its budget of %"
                PRIu64 " entries, its events are dropped until a snapshot fits (%"
                PRIu64 " events, %" PRIu64 " snapshots refused so far)\n",
                d->prog, id, st.entries_limit, st.events_over_budget,
                st.snapshots_over_budget);
}

/* The instance a stream message (what) is from, once the codec accepted it
 * (else counted bad) and it came on that instance's own subject; NULL: drop
 * it. The ids are read only after a successful decode has filled them. */
static inst *admit(rkv_daemon *d, rkv_status decoded, const char *what, const char *subj,
                   const char *prefix, const uint64_t *instance, const uint64_t *epoch,
                   uint64_t now)
{
    if (decoded != RKV_OK) {
        bad(d, what);
        return NULL;
    }
    if (!from_subject(d, subj, prefix, *instance, what))
        return NULL;
    return touch(d, *instance, *epoch, now);
}

static void handle_kv(rkv_daemon *d, const char *subj, const void *data, size_t len,
                      uint64_t now)
{
    rkv_wire_batch_info bi;
    inst *x = admit(d, rkv_wire_decode_events(data, len, &bi, d->ev, RKV_WIRE_MAX_EVENTS),
                    "event batch", subj, d->kv_prefix, &bi.instance, &bi.epoch, now);
    if (!x)
        return;
    rkv_router_stats a, b;
    int logged = d->log && d->stream_logs < 20 &&
                 rkv_router_get_stats(d->router, &a) == RKV_OK;
    for (uint32_t i = 0; i < bi.count && d->page_size == 0; i++)
        if (d->ev[i].kind == RKV_EVENT_BLOCK_STORED && d->ev[i].page_size >= 1 &&
            d->ev[i].page_size <= RKV_MAX_PAGE_SIZE)
            d->page_size = d->ev[i].page_size;
    if (rkv_router_apply(d->router, bi.instance, d->ev, bi.count) == RKV_ERR_NO_SPACE)
        over_budget(d, bi.instance);
    if (logged && rkv_router_get_stats(d->router, &b) == RKV_OK &&
        (b.events_stale > a.events_stale || b.gaps > a.gaps ||
         b.events_bad > a.events_bad || b.resync_markers > a.resync_markers)) {
        d->stream_logs++;
        fprintf(d->log,
                "%s: instance %" PRIu64 " batch from seq %" PRIu64 ": %" PRIu64
                " stale (repeated or out-of-order seq), %" PRIu64 " gaps, %" PRIu64
                " bad, %" PRIu64 " resync markers%s\n",
                d->prog, bi.instance, bi.first_seq, b.events_stale - a.events_stale,
                b.gaps - a.gaps, b.events_bad - a.events_bad,
                b.resync_markers - a.resync_markers,
                d->stream_logs == 20 ? " (no more of these are logged)" : "");
    }
    maybe_resync(d, x, now);
}

static void handle_hb(rkv_daemon *d, const char *subj, const void *data, size_t len,
                      uint64_t now)
{
    rkv_wire_heartbeat hb;
    inst *x = admit(d, rkv_wire_decode_heartbeat(data, len, &hb), "heartbeat", subj,
                    d->hb_prefix, &hb.instance, &hb.epoch, now);
    if (!x)
        return;
    x->heard = 1;
    rkv_router_set_load(d->router, hb.instance, hb.running, hb.queued_tokens);
    /* Only a heartbeat ahead of the stream says something (a gap at the
     * end of it); one behind is the normal lag, and passing it on would
     * count it as stale events. */
    rkv_router_instance_info info;
    if (x->hb_seen &&
        rkv_router_instance_info_get(d->router, hb.instance, &info) == RKV_OK &&
        x->hb_seq_prev > info.last_seq)
        rkv_router_heartbeat(d->router, hb.instance, x->hb_seq_prev);
    x->hb_seen = 1;
    x->hb_seq_prev = hb.last_seq;
    maybe_resync(d, x, now);
}

static void chunk_abort(rkv_daemon *d, inst *x)
{
    if (x->chunking)
        rkv_router_snapshot_abort(d->router, x->id);
    x->chunking = 0;
}

/* One part of a chunked snapshot: staged in the router until the last
 * part, which replaces the instance's entries at once. A part out of
 * order (a lost message, an answer to an older request) drops what was
 * staged; the request is retried after --snapshot-timeout-ms. */
/* The instance a snapshot answer (or chunk: what) is for, when the answer
 * is to be used: the codec accepted it (else counted bad), it came on that
 * instance's own subject, the instance is live in the same epoch (not gone
 * or restarted since the request), and the router still waits for its resync (else it is a late
 * answer to a retried request, and an older state would roll the
 * instance back). NULL: drop it. */
static inst *awaiting_snapshot(rkv_daemon *d, rkv_status decoded, const char *subj,
                               const uint64_t *instance, const uint64_t *epoch,
                               const char *what)
{
    if (decoded != RKV_OK) {
        bad(d, what);
        return NULL;
    }
    if (!from_subject(d, subj, d->snap_prefix, *instance, what))
        return NULL;
    inst *x = find(d, *instance);
    if (!x || !x->live || x->epoch != *epoch)
        return NULL;
    rkv_router_instance_info info;
    if (rkv_router_instance_info_get(d->router, *instance, &info) != RKV_OK ||
        !info.needs_resync)
        return NULL;
    return x;
}

static void handle_chunk(rkv_daemon *d, const char *subj, const void *data, size_t len,
                         uint64_t now)
{
    rkv_wire_chunk_info ci;
    inst *x = awaiting_snapshot(d, rkv_wire_decode_snapshot_chunk(data, len, &ci, NULL, 0),
                                subj, &ci.instance, &ci.epoch, "snapshot chunk");
    if (!x)
        return;
    if (ci.part == 0) {
        chunk_abort(d, x);
        if (rkv_router_snapshot_begin(d->router, x->id, ci.seq) != RKV_OK) {
            d->snap_bad++;
            return;
        }
        x->chunking = 1;
        x->chunk_next = 0;
        x->chunk_parts = ci.parts;
        x->chunk_seq = ci.seq;
        x->chunk_blocks = 0;
        x->chunk_total = ci.total;
    } else if (!x->chunking || ci.part != x->chunk_next || ci.parts != x->chunk_parts ||
               ci.seq != x->chunk_seq || ci.total != x->chunk_total) {
        if (x->chunking)
            d->snap_bad++;
        chunk_abort(d, x);
        return;
    }
    rkv_block_entry *e = malloc((ci.count ? ci.count : 1) * sizeof *e);
    int ok = e && x->chunk_total - x->chunk_blocks >= ci.count &&
             rkv_wire_decode_snapshot_chunk(data, len, &ci, e, ci.count) == RKV_OK &&
             rkv_router_snapshot_chunk(d->router, x->id, e, ci.count) == RKV_OK;
    free(e);
    x->chunk_blocks += ok ? ci.count : 0;
    x->chunk_next++;
    if (ok && x->chunk_next == x->chunk_parts)
        ok = x->chunk_blocks == x->chunk_total &&
             rkv_router_snapshot_end(d->router, x->id) == RKV_OK;
    if (!ok) {
        d->snap_bad++;
        chunk_abort(d, x);
    } else if (x->chunk_next == x->chunk_parts) {
        x->chunking = 0;
        x->snap_pending = 0;
    }
    /* parts are arriving: the request is answered, not lost */
    x->snap_sent_ms = now;
    x->last_seen_ms = now;
    maybe_resync(d, x, now);
}

static void handle_snap(rkv_daemon *d, const char *subj, const void *data, size_t len,
                        uint64_t now)
{
    rkv_wire_type type;
    if (rkv_wire_peek(data, len, &type) == RKV_OK && type == RKV_WIRE_SNAPSHOT_CHUNK) {
        handle_chunk(d, subj, data, len, now);
        return;
    }
    rkv_wire_snapshot_info si;
    inst *x = awaiting_snapshot(d, rkv_wire_decode_snapshot(data, len, &si, NULL, 0), subj,
                                &si.instance, &si.epoch, "snapshot");
    if (!x)
        return;
    rkv_block_entry *e = malloc((si.count ? si.count : 1) * sizeof *e);
    if (!e)
        return;
    chunk_abort(d, x); /* a whole snapshot replaces one half staged */
    rkv_status as = rkv_wire_decode_snapshot(data, len, &si, e, si.count);
    if (as == RKV_OK)
        as = rkv_router_apply_snapshot(d->router, si.instance, e, si.count, si.seq);
    if (as == RKV_OK)
        x->snap_pending = 0;
    else
        d->snap_bad++;
    if (as == RKV_ERR_NO_SPACE)
        over_budget(d, si.instance);
    free(e);
    x->last_seen_ms = now;
    maybe_resync(d, x, now);
}

static int by_overlap(const void *a, const void *b)
{
    const rkv_router_overlap *x = a, *y = b;
    if (x->pages != y->pages)
        return x->pages > y->pages ? -1 : 1;
    return x->instance < y->instance ? -1 : x->instance > y->instance;
}

static int by_id(const void *a, const void *b)
{
    const rkv_router_overlap *x = a, *y = b;
    return x->instance < y->instance ? -1 : x->instance > y->instance;
}

/* The reply holds RKV_WIRE_MAX_ROUTE instances and the router up to
 * RKV_ROUTER_MAX_INSTANCES: with more registered, the reply lists the
 * chosen one and the others with the most leading pages (ties: smaller
 * id), in id order as always. all[0..n) (id order) is reordered. */
static void list_best(rkv_router_overlap *all, uint32_t n, uint64_t chosen,
                      rkv_wire_reply *rep)
{
    if (n > RKV_WIRE_MAX_ROUTE) {
        qsort(all, n, sizeof *all, by_overlap);
        uint32_t at = 0;
        while (at < n && all[at].instance != chosen)
            at++;
        if (at >= RKV_WIRE_MAX_ROUTE && at < n) { /* it takes the last place */
            rkv_router_overlap x = all[at];
            all[at] = all[RKV_WIRE_MAX_ROUTE - 1];
            all[RKV_WIRE_MAX_ROUTE - 1] = x;
        }
        n = RKV_WIRE_MAX_ROUTE;
        qsort(all, n, sizeof *all, by_id);
    }
    rep->count = n;
    for (uint32_t i = 0; i < n; i++) {
        rep->ids[i] = all[i].instance;
        rep->id_pages[i] = all[i].pages;
    }
}

/* Keeps in all[0..*n) the instances heard from (a heartbeat since they
 * were registered): one known only from the stream, as after a restart,
 * may have died before it, and is not routed to until it heartbeats. */
static void only_heard(rkv_daemon *d, rkv_router_overlap *all, uint32_t *n)
{
    int unheard = 0;
    for (uint32_t i = 0; i < d->n_in && !unheard; i++)
        unheard = d->in[i].live && !d->in[i].heard;
    if (!unheard)
        return; /* the common case: nothing to drop */
    uint32_t k = 0;
    for (uint32_t i = 0; i < *n; i++) {
        inst *x = find(d, all[i].instance);
        if (x && x->heard)
            all[k++] = all[i];
    }
    *n = k;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Routes a request given by page hashes h[0..n) or, with tok, by token ids
 * tok[0..n) (d->page_size pages): the router chooses (counted as routed
 * there) into *chosen, and all[0..rep->count) gets the instances a reply
 * lists, as rep does. With every instance heard from (the common case)
 * that is one rkv_router_route_top call; otherwise the overlaps of the
 * heard ones and a choice among them. RKV_ERR_STATE when no instance is
 * heard. */
static rkv_status route_request(rkv_daemon *d, rkv_namespace ns, const uint64_t *h,
                                const int32_t *tok, uint32_t n, rkv_router_overlap *all,
                                rkv_router_overlap *chosen, rkv_wire_reply *rep)
{
    int timed = rkv_cpu_sample_pick(&d->route_cpu);
    uint64_t c0 = timed ? thread_cpu_ns() : 0;
    uint32_t count = 0, best = 0;
    int heard = 1;
    for (uint32_t i = 0; i < d->n_in && heard; i++)
        heard = !d->in[i].live || d->in[i].heard;
    rkv_status s;
    if (heard) {
        s = tok ? rkv_router_route_top_tokens(d->router, ns, tok, n, d->page_size, all,
                                              RKV_WIRE_MAX_ROUTE, &count, &best)
                : rkv_router_route_top(d->router, ns, h, n, all, RKV_WIRE_MAX_ROUTE,
                                       &count, &best);
        if (s == RKV_ERR_STATE)
            s = rkv_set_error(RKV_ERR_STATE, "no instance to route to (none "
                              "registered and heard from)");
    } else {
        s = tok ? rkv_router_overlaps_tokens(d->router, ns, tok, n, d->page_size, all,
                                             RKV_ROUTER_MAX_INSTANCES, &count)
                : rkv_router_overlaps(d->router, ns, h, n, all, RKV_ROUTER_MAX_INSTANCES,
                                      &count);
        if (s == RKV_OK)
            only_heard(d, all, &count);
        if (s == RKV_OK && count == 0)
            s = rkv_set_error(RKV_ERR_STATE, "no instance to route to (none "
                              "registered and heard from)");
        if (s == RKV_OK)
            s = rkv_router_choose(d->router, all, count, tok ? n / d->page_size : n,
                                  &best);
    }
    if (timed)
        rkv_cpu_sample_add(&d->route_cpu, thread_cpu_ns() - c0);
    if (s != RKV_OK)
        return s;
    *chosen = all[best];
    if (heard) { /* route_top listed them already */
        rep->count = count;
        for (uint32_t i = 0; i < count; i++) {
            rep->ids[i] = all[i].instance;
            rep->id_pages[i] = all[i].pages;
        }
    } else {
        list_best(all, count, chosen->instance, rep);
    }
    return RKV_OK;
}

/* A reply on reply_to: through the connection, or to the harness's sink. */
static void send_reply(rkv_daemon *d, const char *reply_to, const void *data, size_t len)
{
    if (d->reply_fn)
        d->reply_fn(d->reply_ctx, reply_to, data, len);
    else if (d->reply_nc || d->nc)
        natsConnection_Publish(d->reply_nc ? d->reply_nc : d->nc, reply_to, data, (int)len);
}

static void handle_route(rkv_daemon *d, const void *data, size_t data_len,
                         const char *reply_to)
{
    if (!reply_to)
        return;
    uint64_t t0 = rkv_fleet_now_us();
    rkv_namespace ns = 0;
    uint32_t n = 0;
    rkv_wire_reply rep;
    memset(&rep, 0, sizeof rep);
    if (rkv_wire_decode_query(data, data_len, &ns, d->hashes, RKV_WIRE_MAX_QUERY,
                              &n) != RKV_OK) {
        bad(d, "route query");
        rep.status = RKV_ERR_FORMAT;
    } else {
        rkv_router_overlap all[RKV_ROUTER_MAX_INSTANCES], chosen;
        rkv_status s = route_request(d, ns, d->hashes, NULL, n, all, &chosen, &rep);
        rep.status = (uint32_t)s;
        if (s == RKV_OK) {
            rep.instance = chosen.instance;
            rep.pages = chosen.pages;
        }
    }
    uint8_t buf[RKV_WIRE_HEADER + 20 + 12 * RKV_WIRE_MAX_ROUTE];
    size_t len = 0;
    if (rkv_wire_encode_reply(&rep, buf, sizeof buf, &len) == RKV_OK)
        send_reply(d, reply_to, buf, len);
    uint64_t dt = rkv_fleet_now_us() - t0;
    d->lat_us[d->n_lat++ % LAT_RING] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
    d->lat_sum_us += dt;
}

/* ---- the HTTP route API ------------------------------------------------------- */

static size_t http_error(rkv_daemon *d, char *buf, size_t cap, int *code, int status,
                         const char *msg)
{
    d->http_route_errors++;
    *code = status;
    return rkv_route_json_error(buf, cap, status, msg);
}

size_t rkv_daemon_http_route(rkv_daemon *d, const char *body, size_t len, char *buf, size_t cap,
                         int *code)
{
    uint64_t t0 = rkv_fleet_now_us();
    if (!d->tokens)
        d->tokens = malloc(RKV_DAEMON_HTTP_MAX_TOKENS * sizeof *d->tokens);
    if (!d->tokens)
        return http_error(d, buf, cap, code, 503, "out of memory");
    rkv_route_request req;
    rkv_status s = rkv_route_json_parse(body, len, d->tokens, RKV_DAEMON_HTTP_MAX_TOKENS, &req);
    if (s != RKV_OK)
        return http_error(d, buf, cap, code, s == RKV_ERR_NO_SPACE ? 413 : 400,
                          rkv_last_error());
    if (d->page_size == 0)
        return http_error(d, buf, cap, code, 503, "the page size is not known yet: no "
                          "event seen (start the router with --page-size)");
    rkv_router_overlap all[RKV_ROUTER_MAX_INSTANCES], chosen;
    rkv_wire_reply rep; /* the candidates a NATS reply would list */
    uint32_t pages = req.n_tokens / d->page_size;
    s = route_request(d, req.ns, NULL, d->tokens, req.n_tokens, all, &chosen, &rep);
    if (s != RKV_OK)
        return http_error(d, buf, cap, code,
                          s == RKV_ERR_STATE ? 503 : s == RKV_ERR_NOMEM ? 503 : 500,
                          rkv_last_error());
    rkv_json_out o = {buf, cap, 0};
    rkv_json_raw(&o, "{\"instance\": ");
    rkv_json_u64(&o, chosen.instance);
    rkv_json_raw(&o, ", \"overlap_blocks\": ");
    rkv_json_u64(&o, chosen.pages);
    rkv_json_raw(&o, ", \"overlap_by_medium\": {\"device\": ");
    rkv_json_u64(&o, chosen.pages_by_medium[RKV_MEDIUM_DEVICE]);
    rkv_json_raw(&o, ", \"host\": ");
    rkv_json_u64(&o, chosen.pages_by_medium[RKV_MEDIUM_HOST]);
    rkv_json_raw(&o, ", \"disk\": ");
    rkv_json_u64(&o, chosen.pages_by_medium[RKV_MEDIUM_DISK]);
    rkv_json_raw(&o, "}, \"score\": ");
    rkv_json_num(&o, chosen.score);
    rkv_json_raw(&o, ", \"request_blocks\": ");
    rkv_json_u64(&o, pages);
    rkv_json_raw(&o, ", \"page_size\": ");
    rkv_json_u64(&o, d->page_size);
    rkv_json_raw(&o, ", \"namespace\": ");
    rkv_json_u64(&o, req.ns);
    rkv_json_raw(&o, ", \"candidates\": [");
    for (uint32_t i = 0; i < rep.count; i++) {
        const rkv_router_overlap *c = &all[i];
        rkv_json_cand jc = {c->instance, c->pages,
                            c->pages_by_medium[RKV_MEDIUM_DEVICE],
                            c->pages_by_medium[RKV_MEDIUM_HOST],
                            c->pages_by_medium[RKV_MEDIUM_DISK], c->score};
        rkv_json_candidate(&o, i == 0, &jc);
    }
    rkv_json_raw(&o, "]}\n");
    size_t k = o.len;
    d->http_routes++;
    uint64_t dt = rkv_fleet_now_us() - t0;
    d->lat_us[d->n_lat++ % LAT_RING] = dt > UINT32_MAX ? UINT32_MAX : (uint32_t)dt;
    d->lat_sum_us += dt;
    *code = 200;
    return k;
}

void rkv_daemon_set_page_size(rkv_daemon *d, uint32_t page_size)
{
    d->page_size = page_size <= RKV_MAX_PAGE_SIZE ? page_size : 0;
}

/* The HTTP server's callbacks, on its own thread (http_loop): each takes
 * the state lock the NATS paths take. */
static size_t on_http_route(void *ctx, const char *body, size_t len, char *buf,
                            size_t cap, int *code)
{
    mqueue_owner *o = ctx;
    pthread_mutex_lock(&o->state);
    size_t n = rkv_daemon_http_route(o->d, body, len, buf, cap, code);
    pthread_mutex_unlock(&o->state);
    return n;
}

static size_t render_metrics(void *ctx, char *buf, size_t cap);

static size_t on_http_metrics(void *ctx, char *buf, size_t cap)
{
    mqueue_owner *o = ctx;
    pthread_mutex_lock(&o->state);
    size_t n = render_metrics(o->d, buf, cap);
    pthread_mutex_unlock(&o->state);
    return n;
}

/* The HTTP server's thread: it sleeps in poll(2) until a connection has
 * something (no polling from the main loop, so a request is answered as
 * it arrives), waking at least every 50 ms for the deadlines and to
 * notice the stop. */
static void *http_loop(void *arg)
{
    mqueue_owner *o = arg;
    while (!atomic_load(&o->http_stop))
        rkv_http_poll(o->d->http, rkv_fleet_now_ms(), 50, on_http_metrics, o);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void sample_rates(rkv_daemon *d, uint64_t now)
{
    rkv_router_stats st;
    if (d->rs_count &&
        now - d->rs[(d->rs_head + d->rs_count - 1) % RATE_SAMPLES].t_ms < 1000)
        return;
    if (rkv_router_get_stats(d->router, &st) != RKV_OK)
        return;
    rate_sample x = {now, st.events_applied, d->n_lat};
    if (d->rs_count == RATE_SAMPLES) {
        d->rs[d->rs_head] = x;
        d->rs_head = (d->rs_head + 1) % RATE_SAMPLES;
    } else {
        d->rs[(d->rs_head + d->rs_count++) % RATE_SAMPLES] = x;
    }
}

#define METRIC(type, name, help) "# HELP " name " " help "\n# TYPE " name " " type "\n"

/* The trust counters (forged ids, rate-limited snapshot requests, the
 * index budget) and the HTTP route API's after the main stats;
 * snprintf's result. */
static int render_trust_metrics(const rkv_daemon *d, const rkv_router_stats *st,
                                char *buf, size_t cap)
{
    return snprintf(
        buf, cap,
        METRIC("counter", "radixkv_router_forged_messages_total",
               "messages whose payload names another instance than their subject "
               "(rejected)")
        "radixkv_router_forged_messages_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_snapshot_requests_limited_total",
               "snapshot requests deferred by the per-instance rate limit")
        "radixkv_router_snapshot_requests_limited_total %" PRIu64 "\n"
        METRIC("gauge", "radixkv_router_index_entries_limit",
               "the index memory budget in entries")
        "radixkv_router_index_entries_limit %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_events_over_budget_total",
               "stores refused by the index memory budget (the instance resyncs)")
        "radixkv_router_events_over_budget_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_snapshots_over_budget_total",
               "snapshots refused by the index memory budget")
        "radixkv_router_snapshots_over_budget_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_http_routes_total",
               "route queries answered on POST /v1/route (also in queries_total)")
        "radixkv_router_http_routes_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_http_route_errors_total",
               "POST /v1/route bodies answered with an error")
        "radixkv_router_http_route_errors_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_route_cpu_seconds_total",
               "thread CPU time inside the router index's route calls (the "
               "in-process part of the queries), estimated from 1 call in "
               "--route-cpu-sample timed")
        "radixkv_router_route_cpu_seconds_total %.9f\n",
        d->forged, d->snap_limited, st->entries_limit, st->events_over_budget,
        st->snapshots_over_budget, d->http_routes, d->http_route_errors,
        rkv_cpu_sample_total_ns(&d->route_cpu) / 1e9);
}

/* The stats as Prometheus text (exposition format 0.0.4) into buf[0..cap);
 * returns the length as snprintf does. Served on .stats and over HTTP. */
static size_t render_metrics(void *ctx, char *buf, size_t cap)
{
    rkv_daemon *d = ctx;
    uint64_t now = rkv_fleet_now_ms();
    rkv_router_stats st;
    if (rkv_router_get_stats(d->router, &st) != RKV_OK)
        memset(&st, 0, sizeof st);
    uint32_t lat[LAT_RING];
    uint64_t nl = d->n_lat < LAT_RING ? d->n_lat : LAT_RING;
    memcpy(lat, d->lat_us, nl * sizeof lat[0]);
    qsort(lat, nl, sizeof lat[0], cmp_u32);
    /* rates over the window the samples span (since start at first) */
    rate_sample old = {d->start_ms, 0, 0};
    if (d->rs_count)
        old = d->rs[d->rs_head];
    double win_s = (double)(now - old.t_ms) / 1000.0;
    double ev_rate = win_s > 0 ? (double)(st.events_applied - old.events) / win_s : 0;
    double q_rate = win_s > 0 ? (double)(d->n_lat - old.queries) / win_s : 0;
    uint64_t live = 0, dropped = 0;
    for (uint32_t i = 0; i < d->n_in; i++)
        live += d->in[i].live != 0;
    for (int i = 0; i < N_SUBS; i++) {
        int64_t n = 0;
        if (d->subs[i] && natsSubscription_GetDropped(d->subs[i], &n) == NATS_OK && n > 0)
            dropped += (uint64_t)n;
    }
    dropped += d->queue_dropped;
    int64_t rl = rkv_nats_loop_dropped(d->route_loop);
    dropped += rl > 0 ? (uint64_t)rl : 0;
    int k = snprintf(
        buf, cap,
        METRIC("gauge", "radixkv_router_instances_live",
               "instances routed to (heartbeat or batch within the timeout)")
        "radixkv_router_instances_live %" PRIu64 "\n"
        METRIC("gauge", "radixkv_router_instances", "instances registered in the index")
        "radixkv_router_instances %" PRIu64 "\n"
        METRIC("gauge", "radixkv_router_index_entries", "distinct block hashes indexed")
        "radixkv_router_index_entries %" PRIu64 "\n"
        METRIC("gauge", "radixkv_router_index_bytes", "index memory")
        "radixkv_router_index_bytes %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_events_applied_total", "KV events applied")
        "radixkv_router_events_applied_total %" PRIu64 "\n"
        METRIC("gauge", "radixkv_router_events_per_second",
               "events applied per second over the last 10 s")
        "radixkv_router_events_per_second %.1f\n"
        METRIC("counter", "radixkv_router_events_stale_total",
               "events with a repeated or out-of-order seq, skipped")
        "radixkv_router_events_stale_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_events_skipped_total",
               "events that arrived while their instance awaited a snapshot")
        "radixkv_router_events_skipped_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_events_bad_total",
               "events that contradicted the index")
        "radixkv_router_events_bad_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_gaps_total", "seq gaps seen")
        "radixkv_router_gaps_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_resync_markers_total",
               "RESYNC markers (an instance's event ring overflowed)")
        "radixkv_router_resync_markers_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_resyncs_total",
               "resyncs started: gaps + markers + bad events")
        "radixkv_router_resyncs_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_snapshots_applied_total", "resyncs completed")
        "radixkv_router_snapshots_applied_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_snapshot_requests_total",
               "snapshot requests sent")
        "radixkv_router_snapshot_requests_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_snapshots_bad_total",
               "snapshot answers that did not apply")
        "radixkv_router_snapshots_bad_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_bad_messages_total",
               "messages that did not decode (any subject)")
        "radixkv_router_bad_messages_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_dropped_messages_total",
               "messages lost before handling (slow consumer, no memory)")
        "radixkv_router_dropped_messages_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_instances_expired_total",
               "instances dropped for a silent heartbeat")
        "radixkv_router_instances_expired_total %" PRIu64 "\n"
        METRIC("counter", "radixkv_router_queries_total", "route queries answered")
        "radixkv_router_queries_total %" PRIu64 "\n"
        METRIC("gauge", "radixkv_router_queries_per_second",
               "route queries per second over the last 10 s")
        "radixkv_router_queries_per_second %.1f\n"
        METRIC("summary", "radixkv_router_query_latency_seconds",
               "time from a query's dequeue to its reply's publish (last 1024)")
        "radixkv_router_query_latency_seconds{quantile=\"0.5\"} %.9f\n"
        "radixkv_router_query_latency_seconds{quantile=\"0.99\"} %.9f\n"
        "radixkv_router_query_latency_seconds_sum %.6f\n"
        "radixkv_router_query_latency_seconds_count %" PRIu64 "\n"
        METRIC("gauge", "radixkv_router_uptime_seconds", "since the daemon started")
        "radixkv_router_uptime_seconds %.1f\n",
        live, st.instances, st.entries, st.host_bytes, st.events_applied, ev_rate,
        st.events_stale, st.events_skipped, st.events_bad, st.gaps, st.resync_markers,
        st.gaps + st.resync_markers + st.events_bad, st.snapshots, d->snap_requests,
        d->snap_bad, d->bad_messages, dropped, d->expired, d->n_lat, q_rate,
        nl ? lat[(nl - 1) / 2] / 1e6 : 0.0, nl ? lat[(nl * 99 - 1) / 100] / 1e6 : 0.0,
        (double)d->lat_sum_us / 1e6, d->n_lat, (double)(now - d->start_ms) / 1000.0);
    if (k >= 0 && (size_t)k < cap) {
        int t = render_trust_metrics(d, &st, buf + k, cap - (size_t)k);
        k = t < 0 ? -1 : k + t;
    }
    return k < 0 ? cap : (size_t)k;
}

static void handle_stats(rkv_daemon *d, const char *reply_to)
{
    if (!reply_to)
        return;
    char *buf = malloc(RKV_HTTP_MAX_BODY);
    if (!buf)
        return;
    size_t k = render_metrics(d, buf, RKV_HTTP_MAX_BODY);
    if (k < RKV_HTTP_MAX_BODY)
        send_reply(d, reply_to, buf, k);
    free(buf);
}

static void expire(rkv_daemon *d, uint64_t now)
{
    for (uint32_t i = 0; i < d->n_in; i++) {
        inst *x = &d->in[i];
        if (!x->live)
            continue;
        if (now - x->last_seen_ms > d->hb_timeout_ms) {
            rkv_router_remove_instance(d->router, x->id);
            x->live = 0;
            d->expired++;
            if (d->log)
                fprintf(d->log, "%s: instance %" PRIu64
                        " expired (no heartbeat for %" PRIu64 " ms)\n",
                        d->prog, x->id, now - x->last_seen_ms);
        } else {
            maybe_resync(d, x, now);
        }
    }
}

/* ---- the handlers without a connection (fleet/router_daemon.h) ------------------ */
rkv_daemon *rkv_daemon_create(const char *prog, const char *model, uint64_t hb_timeout_ms,
                      uint64_t snap_timeout_ms, uint64_t now_ms, FILE *log,
                      const rkv_router_config *rcfg)
{
    rkv_router_config defaults;
    if (!rcfg) {
        rkv_router_config_init(&defaults);
        rcfg = &defaults;
    }
    rkv_daemon *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->prog = prog;
    d->model = model;
    d->log = log;
    d->hb_timeout_ms = hb_timeout_ms;
    d->snap_timeout_ms = snap_timeout_ms;
    d->start_ms = now_ms;
    d->snap_burst = RKV_DAEMON_SNAP_BURST;
    d->snap_interval_ms = RKV_DAEMON_SNAP_INTERVAL_MS;
    rkv_cpu_sample_init(&d->route_cpu, RKV_DAEMON_ROUTE_CPU_SAMPLE, 1);
    d->ev = calloc(RKV_WIRE_MAX_EVENTS, sizeof *d->ev);
    d->hashes = calloc(RKV_WIRE_MAX_QUERY, sizeof *d->hashes);
    if (!d->ev || !d->hashes ||
        rkv_fleet_subject(d->kv_prefix, sizeof d->kv_prefix, model, "kv.", 0, 0) != RKV_OK ||
        rkv_fleet_subject(d->hb_prefix, sizeof d->hb_prefix, model, "hb.", 0, 0) != RKV_OK ||
        rkv_router_create(rcfg, &d->router) != RKV_OK) {
        rkv_daemon_destroy(d);
        return NULL;
    }
    return d;
}

void rkv_daemon_set_snapshot_limit(rkv_daemon *d, uint32_t burst, uint64_t interval_ms)
{
    d->snap_burst = burst;
    d->snap_interval_ms = interval_ms;
}

void rkv_daemon_set_route_cpu_sample(rkv_daemon *d, uint32_t every)
{
    rkv_cpu_sample_init(&d->route_cpu, every, 1);
}

rkv_status rkv_daemon_set_inbox(rkv_daemon *d, const char *inbox)
{
    int n = snprintf(d->inbox, sizeof d->inbox, "%s", inbox);
    int m = snprintf(d->snap_prefix, sizeof d->snap_prefix, "%s.", inbox);
    if (n < 0 || (size_t)n >= sizeof d->inbox || m < 0 || (size_t)m >= sizeof d->snap_prefix)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "router inbox '%.40s...' is too long", inbox);
    return RKV_OK;
}

void rkv_daemon_set_reply(rkv_daemon *d, rkv_daemon_reply_fn fn, void *ctx)
{
    d->reply_fn = fn;
    d->reply_ctx = ctx;
}

void rkv_daemon_handle(rkv_daemon *d, rkv_daemon_kind kind, const char *subject, const void *data,
                   size_t len, const char *reply_to, uint64_t now_ms)
{
    switch (kind) {
    case RKV_DAEMON_KV: handle_kv(d, subject, data, len, now_ms); break;
    case RKV_DAEMON_HB: handle_hb(d, subject, data, len, now_ms); break;
    case RKV_DAEMON_SNAP: handle_snap(d, subject, data, len, now_ms); break;
    case RKV_DAEMON_ROUTE: handle_route(d, data, len, reply_to); break;
    case RKV_DAEMON_STATS: handle_stats(d, reply_to); break;
    }
}

void rkv_daemon_tick(rkv_daemon *d, uint64_t now_ms)
{
    sample_rates(d, now_ms);
    expire(d, now_ms);
}

const rkv_router *rkv_daemon_router(const rkv_daemon *d)
{
    return d->router;
}

void rkv_daemon_destroy(rkv_daemon *d)
{
    if (!d)
        return;
    rkv_router_destroy(d->router);
    free(d->ev);
    free(d->hashes);
    free(d->tokens);
    free(d);
}

/* ---- setup -------------------------------------------------------------------- */
/* *created: the stream's creation time (ns), which tells a stream
 * recreated since from the one the router read. */
static int ensure_stream(const char *prog, jsCtx *js, const char *stream,
                         const char *kv_subjects, int64_t max_age_s,
                         int64_t max_bytes, int memory, int64_t *created)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
    if (s == NATS_OK) {
        *created = si->Created;
        jsStreamInfo_Destroy(si);
        return 0;
    }
    if (s != NATS_NOT_FOUND) {
        fprintf(stderr, "%s: stream %s: %s (%d)\n", prog, stream,
                natsStatus_GetText(s), (int)jerr);
        return -1;
    }
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    const char *subjects[1] = {kv_subjects};
    sc.Name = stream;
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    sc.MaxAge = max_age_s * (int64_t)1000000000;
    sc.MaxBytes = max_bytes;
    sc.Storage = memory ? js_MemoryStorage : js_FileStorage;
    s = js_AddStream(&si, js, &sc, NULL, &jerr);
    if (s != NATS_OK) {
        fprintf(stderr, "%s: creating stream %s: %s (%d)\n", prog, stream,
                natsStatus_GetText(s), (int)jerr);
        return -1;
    }
    *created = si->Created;
    jsStreamInfo_Destroy(si);
    return 0;
}

/* What the router reads the stream with, to subscribe again. */
typedef struct stream_watch {
    jsCtx *js;
    const char *stream, *kv_subj;
    int64_t max_age_s, max_bytes, created;
    int memory;
    mqueue *q;
} stream_watch;

static natsStatus subscribe_kv(rkv_daemon *d, stream_watch *w, jsErrCode *jerr)
{
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = w->stream;
    so.Ordered = true;
    return js_Subscribe(&d->subs[2], w->js, w->kv_subj, on_kv, w->q, NULL, &so, jerr);
}

/* The stream can vanish under the router (a --memory stream when
 * nats-server restarts; a deletion), and its ordered consumer with it:
 * the index would stay frozen. Checked every second: a stream that is gone
 * is created again, one created anew (by this router or another) is read
 * again from its start, and every instance starts over (dropped; its next
 * heartbeat or batch registers it, and the seq it is at shows as a gap,
 * so it resyncs from a snapshot). Logged. An unreachable server says
 * nothing: the check runs again later. */
static void watch_stream(rkv_daemon *d, stream_watch *w)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    int64_t created = 0;
    const char *why = "created anew";
    if (natsConnection_Status(d->nc) != NATS_CONN_STATUS_CONNECTED)
        return;
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = 500; /* the main loop waits for it: short */
    natsStatus s = js_GetStreamInfo(&si, w->js, w->stream, &o, &jerr);
    if (s == NATS_OK) {
        created = si->Created;
        jsStreamInfo_Destroy(si);
        if (created == w->created)
            return;
    } else {
        why = "gone: created again";
        if (s != NATS_NOT_FOUND ||
            ensure_stream(d->prog, w->js, w->stream, w->kv_subj, w->max_age_s,
                          w->max_bytes, w->memory, &created) != 0)
            return;
    }
    if (d->subs[2]) {
        natsSubscription_Unsubscribe(d->subs[2]);
        natsSubscription_Destroy(d->subs[2]);
        d->subs[2] = NULL;
    }
    s = subscribe_kv(d, w, &jerr);
    if (s != NATS_OK) {
        d->subs[2] = NULL;
        fprintf(stderr, "%s: stream %s lost; subscribing again: %s (%d)\n", d->prog,
                w->stream, natsStatus_GetText(s), (int)jerr);
        return; /* w->created unchanged: tried again next time */
    }
    uint32_t dropped = 0;
    for (uint32_t i = 0; i < d->n_in; i++)
        if (d->in[i].live) {
            rkv_router_remove_instance(d->router, d->in[i].id);
            d->in[i].live = 0;
            dropped++;
        }
    w->created = created;
    fprintf(stderr, "%s: stream %s lost (%s): reading it again from its start, "
            "%u instances resync\n", d->prog, w->stream, why, dropped);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s --model NAME [options]\n"
            "  -s, --server URL             NATS server (default nats://127.0.0.1:4222)\n"
            "  -m, --model NAME             model name in the subjects ([A-Za-z0-9_-])\n"
            "      --stream NAME            JetStream stream (default RADIXKV_<model>)\n"
            "      --heartbeat-timeout-ms N drop an instance silent this long (3000)\n"
            "      --snapshot-timeout-ms N  re-ask a snapshot after this long (1000)\n"
            "      --max-age-s N            stream retention by age (3600)\n"
            "      --max-bytes N            stream retention by bytes (1 GiB)\n"
            "      --memory                 memory storage for a new stream\n"
            "      --metrics-port N         serve the stats as Prometheus text on\n"
            "                               http://ADDR:N/metrics (0: any free port)\n"
            "      --metrics-addr ADDR      IPv4 address for it (default 127.0.0.1)\n"
            "      --snapshot-burst N       snapshot requests one instance may cause\n"
            "                               back to back (4), then one per\n"
            "      --snapshot-interval-ms N (1000; 0: no limit)\n"
            "      --index-max-entries N    index memory budget in entries (0: none)\n"
            "      --index-max-bytes N      ... in bytes of its table (0: none);\n"
            "                               events past it are dropped and counted,\n"
            "                               their instance resyncs\n"
            "      --page-size N            page size token ids are hashed with on\n"
            "                               POST /v1/route (default: the events')\n"
            "      --queue-weight X         score per queued token (1)\n"
            "      --running-weight X       score per running request (16)\n"
            "      --medium-weights D,H,K   score per cached device, host, disk page\n"
            "                               token (1,0.5,0.25)\n"
            "      --temperature T          0: the best score (ties by load, then\n"
            "                               random); > 0: softmax draw (0)\n"
            "      --seed N                 of the tie-breaks and draws (0)\n"
            "      --route-cpu-sample N     time 1 route call in N for the route CPU\n"
            "                               metric, an estimate (16; 1: every call)\n"
            "  -h, --help\n"
            "%s"
            "Subjects: radixkv.<model>.kv.<id> (stream), .hb.<id>, .snap.<id>,\n"
            "radixkv.<model>.route and radixkv.<model>.stats (request/reply).\n"
            "With --metrics-port, POST http://ADDR:N/v1/route takes\n"
            "{\"token_ids\": [...], \"namespace\": N} (README \"Fleet\").\n"
            "An instance's id is its subject's: a payload naming another is\n"
            "rejected (README \"Security\").\n",
            prog, rkv_nats_auth_usage());
}

static int parse_real(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= 1e300))
        return -1;
    *out = v;
    return 0;
}

/* D,H,K: the medium weights */
static int parse_weights(const char *s, double *w)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL, *t = strtok_r(buf, ",", &save);
    for (int m = 0; m < RKV_MEDIUM_COUNT; m++, t = strtok_r(NULL, ",", &save))
        if (!t || parse_real(t, &w[m]) != 0)
            return -1;
    return t ? -1 : 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

#define DEFAULT_SERVER "nats://127.0.0.1:4222"

/* The route queries' connection and thread (fleet/nats_loop.h), with the
 * main connection's server, authentication and TLS. */
static natsStatus start_route_loop(const char *prog, const rkv_nats_auth *auth,
                                   const char *route_subj, mqueue_owner *qo)
{
    natsOptions *ro = NULL;
    natsStatus s = natsOptions_Create(&ro);
    if (s == NATS_OK && rkv_nats_auth_apply(auth, DEFAULT_SERVER, ro) != RKV_OK)
        s = NATS_ERR;
    if (s == NATS_OK) s = natsOptions_SetErrorHandler(ro, rkv_fleet_nats_error, (void *)prog);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(ro, -1);
    if (s == NATS_OK) s = natsOptions_SetReconnectWait(ro, 100);
    if (s == NATS_OK)
        s = rkv_nats_loop_start(ro, route_subj, "radixkv-router", on_route_loop, qo,
                                &qo->d->route_loop);
    if (s != NATS_OK)
        fprintf(stderr, "%s: route queries on their own connection: %s; on the main "
                "one instead\n", prog, natsStatus_GetText(s));
    natsOptions_Destroy(ro); /* the connection keeps its own copy */
    return s;
}

int rkv_router_daemon_main(const char *prog, int argc, char **argv)
{
    const char *server = NULL, *model = NULL, *stream_opt = NULL,
               *metrics_addr = "127.0.0.1";
    uint64_t hb_timeout = 3000, snap_timeout = 1000, max_age = 3600,
             max_bytes = 1ull << 30, metrics_port = 0, snap_burst = RKV_DAEMON_SNAP_BURST,
             snap_interval = RKV_DAEMON_SNAP_INTERVAL_MS, index_entries = 0, index_bytes = 0;
    int memory = 0, metrics = 0, early = -1;
    uint64_t page_size = 0, cpu_sample = RKV_DAEMON_ROUTE_CPU_SAMPLE;
    rkv_router_config rcfg;
    rkv_router_config_init(&rcfg);
    rkv_nats_auth auth;
    rkv_nats_auth_init(&auth);
    static const struct option opts[] = {
        {"server", required_argument, 0, 's'},
        {"model", required_argument, 0, 'm'},
        {"stream", required_argument, 0, 1},
        {"heartbeat-timeout-ms", required_argument, 0, 2},
        {"snapshot-timeout-ms", required_argument, 0, 3},
        {"max-age-s", required_argument, 0, 4},
        {"max-bytes", required_argument, 0, 5},
        {"memory", no_argument, 0, 6},
        {"metrics-port", required_argument, 0, 7},
        {"metrics-addr", required_argument, 0, 8},
        {"snapshot-burst", required_argument, 0, 9},
        {"snapshot-interval-ms", required_argument, 0, 10},
        {"index-max-entries", required_argument, 0, 11},
        {"index-max-bytes", required_argument, 0, 12},
        {"page-size", required_argument, 0, 13},
        {"queue-weight", required_argument, 0, 14},
        {"running-weight", required_argument, 0, 15},
        {"medium-weights", required_argument, 0, 16},
        {"temperature", required_argument, 0, 17},
        {"seed", required_argument, 0, 18},
        {"route-cpu-sample", required_argument, 0, 19},
        RKV_NATS_AUTH_LONGOPTS,
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    optind = 1; /* getopt's state is global: start over on every call */
    while (early < 0 && (c = getopt_long(argc, argv, "s:m:h", opts, NULL)) != -1) {
        int bad_num = 0;
        if (c >= RKV_NATS_OPT_USER && c < RKV_NATS_OPT_END) {
            if (rkv_nats_auth_option(&auth, c, optarg) != RKV_OK) {
                fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
                early = 2;
            }
            continue;
        }
        switch (c) {
        case 's': server = optarg; break;
        case 'm': model = optarg; break;
        case 1: stream_opt = optarg; break;
        case 2: bad_num = parse_u64(optarg, &hb_timeout) || hb_timeout == 0; break;
        case 3: bad_num = parse_u64(optarg, &snap_timeout) || snap_timeout == 0; break;
        case 4: bad_num = parse_u64(optarg, &max_age) || max_age == 0 ||
                          max_age > INT64_MAX / 1000000000; break;
        case 5: bad_num = parse_u64(optarg, &max_bytes) || max_bytes == 0 ||
                          max_bytes > INT64_MAX; break;
        case 6: memory = 1; break;
        case 7: bad_num = parse_u64(optarg, &metrics_port) || metrics_port > 65535;
                metrics = 1; break;
        case 8: metrics_addr = optarg; break;
        case 9: bad_num = parse_u64(optarg, &snap_burst) || snap_burst == 0 ||
                          snap_burst > UINT32_MAX; break;
        case 10: bad_num = parse_u64(optarg, &snap_interval); break;
        case 11: bad_num = parse_u64(optarg, &index_entries); break;
        case 12: bad_num = parse_u64(optarg, &index_bytes) ||
                           (index_bytes && index_bytes < 2048); break;
        case 13: bad_num = parse_u64(optarg, &page_size) || page_size == 0 ||
                           page_size > RKV_MAX_PAGE_SIZE; break;
        case 14: bad_num = parse_real(optarg, &rcfg.queue_weight); break;
        case 15: bad_num = parse_real(optarg, &rcfg.running_weight); break;
        case 16: bad_num = parse_weights(optarg, rcfg.medium_weight); break;
        case 17: bad_num = parse_real(optarg, &rcfg.temperature); break;
        case 18: bad_num = parse_u64(optarg, &rcfg.seed); break;
        case 19: bad_num = parse_u64(optarg, &cpu_sample) || cpu_sample == 0 ||
                           cpu_sample > UINT32_MAX; break;
        case 'h': usage(stdout, prog); early = 0; break;
        default: usage(stderr, prog); early = 2; break;
        }
        if (bad_num) {
            fprintf(stderr, "%s: bad number '%s'\n", prog, optarg);
            early = 2;
        }
    }
    if (early < 0 && (optind != argc || !model)) {
        usage(stderr, prog);
        early = 2;
    }
    /* the command line wins; the environment fills the rest */
    if (early < 0 && rkv_nats_auth_finish(&auth, server) != RKV_OK) {
        fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
        early = 2;
    }
    if (early >= 0) {
        rkv_nats_auth_free(&auth);
        return early;
    }
    char server_log[256];
    rkv_nats_redact_url(auth.url ? auth.url : DEFAULT_SERVER, server_log,
                        sizeof server_log);
    if (server && rkv_nats_url_has_secret(server))
        fprintf(stderr, "%s: warning: credentials in --server are visible in the "
                "process list; prefer --user with --password-file, --token-file "
                "or RKV_NATS_*\n", prog);
    char kv_subj[160], hb_subj[160], route_subj[160], stats_subj[160], stream[128];
    if (rkv_fleet_subject(kv_subj, sizeof kv_subj, model, "kv.*", 0, 0) != RKV_OK ||
        rkv_fleet_subject(hb_subj, sizeof hb_subj, model, "hb.*", 0, 0) != RKV_OK ||
        rkv_fleet_subject(route_subj, sizeof route_subj, model, "route", 0, 0) != RKV_OK ||
        rkv_fleet_subject(stats_subj, sizeof stats_subj, model, "stats", 0, 0) != RKV_OK) {
        fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
        rkv_nats_auth_free(&auth);
        return 2;
    }
    snprintf(stream, sizeof stream, "%s", stream_opt ? stream_opt : "");
    if (!stream_opt)
        snprintf(stream, sizeof stream, "RADIXKV_%s", model);

    rkv_fleet_catch_signals();

    rcfg.max_entries = index_entries;
    if (page_size)
        rcfg.page_tokens = (double)page_size;
    rcfg.max_table_bytes = index_bytes;
    rkv_daemon *d = rkv_daemon_create(prog, model, hb_timeout, snap_timeout, rkv_fleet_now_ms(),
                               stderr, &rcfg);
    mqueue_owner qo = {{PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL},
                       0, PTHREAD_MUTEX_INITIALIZER, d, 0, 0};
    pthread_t http_thread;
    int http_started = 0;
    mqueue *q = &qo.q;
    int rc = 1;
    natsOptions *no = NULL;
    jsCtx *js = NULL;
    natsInbox *inbox = NULL;
    if (!d) {
        rkv_nats_auth_free(&auth);
        return 1;
    }
    rkv_daemon_set_snapshot_limit(d, (uint32_t)snap_burst, snap_interval);
    rkv_daemon_set_page_size(d, (uint32_t)page_size);
    rkv_daemon_set_route_cpu_sample(d, (uint32_t)cpu_sample);
    if (metrics && (rkv_http_open(metrics_addr, (uint16_t)metrics_port, &d->http) != RKV_OK ||
                    rkv_http_set_post(d->http, "/v1/route", on_http_route, &qo) != RKV_OK)) {
        fprintf(stderr, "%s: metrics port: %s\n", prog, rkv_last_error());
        goto out;
    }
    natsStatus s = natsOptions_Create(&no);
    if (s == NATS_OK && rkv_nats_auth_apply(&auth, DEFAULT_SERVER, no) != RKV_OK) {
        fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
        goto out;
    }
    if (s == NATS_OK) s = natsOptions_SetErrorHandler(no, rkv_fleet_nats_error, (void *)prog);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(no, -1);
    if (s == NATS_OK) s = natsOptions_SetReconnectWait(no, 100);
    /* the router publishes replies (and a few snapshot requests): sent at
     * once instead of waiting for nats.c's flusher, which cost a query
     * about a millisecond of round trip (bench/RESULTS.md, fleet daemon) */
    if (s == NATS_OK) s = natsOptions_SetSendAsap(no, true);
    if (s == NATS_OK) s = natsConnection_Connect(&d->nc, no);
    if (s != NATS_OK) {
        fprintf(stderr, "%s: connect %s: %s\n", prog, server_log, natsStatus_GetText(s));
        goto out;
    }
    stream_watch w = {NULL, stream, kv_subj, (int64_t)max_age, (int64_t)max_bytes, 0,
                      memory, q};
    if (natsConnection_JetStream(&js, d->nc, NULL) != NATS_OK ||
        ensure_stream(prog, js, stream, kv_subj, (int64_t)max_age, (int64_t)max_bytes,
                      memory, &w.created) != 0)
        goto out;
    w.js = js;
    s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
        /* natsInbox_Create ignores the custom prefix: its unique part
         * goes under ours, so the server's permissions can keep the
         * snapshots (replies to us) ours */
        const char *uniq = strchr((const char *)inbox, '.');
        char box[128];
        snprintf(box, sizeof box, "%s.%s", rkv_nats_auth_inbox(&auth),
                 uniq ? uniq + 1 : (const char *)inbox);
        if (rkv_daemon_set_inbox(d, box) != RKV_OK) {
            fprintf(stderr, "%s: %s\n", prog, rkv_last_error());
            goto out;
        }
        char snap_subj[160];
        snprintf(snap_subj, sizeof snap_subj, "%s.*", d->inbox);
        jsErrCode jerr = 0;
        s = natsConnection_Subscribe(&d->subs[0], d->nc, snap_subj, on_snap, q);
        if (s == NATS_OK)
            s = natsConnection_Subscribe(&d->subs[1], d->nc, hb_subj, on_hb, q);
        if (s == NATS_OK)
            s = subscribe_kv(d, &w, &jerr);
        /* a queue group: routers of one model share the queries, each
         * answered by one of them; on a connection and thread of their
         * own, else (it cannot start) as the other subscriptions */
        if (s == NATS_OK && start_route_loop(prog, &auth, route_subj, &qo) != NATS_OK)
            s = natsConnection_QueueSubscribe(&d->subs[3], d->nc, route_subj,
                                              "radixkv-router", on_route, &qo);
        if (s == NATS_OK)
            s = natsConnection_Subscribe(&d->subs[4], d->nc, stats_subj, on_stats, q);
        if (s == NATS_OK)
            s = natsConnection_Flush(d->nc);
        if (s != NATS_OK)
            fprintf(stderr, "%s: subscribe: %s (%d)\n", prog, natsStatus_GetText(s),
                    (int)jerr);
    }
    if (s != NATS_OK)
        goto out;
    fprintf(stderr, "%s: model %s, stream %s, server %s: ready\n", prog, model, stream,
            server_log);
    if (d->http)
        fprintf(stderr, "%s: metrics on http://%s:%u/metrics, route API on "
                "POST /v1/route\n", prog, metrics_addr, (unsigned)rkv_http_port(d->http));
    if (d->http && pthread_create(&http_thread, NULL, http_loop, &qo) != 0) {
        fprintf(stderr, "%s: cannot start the HTTP thread\n", prog);
        goto out;
    }
    http_started = d->http != NULL;
    uint64_t next_tick = rkv_fleet_now_ms(), next_watch = next_tick + 1000;
    while (!rkv_fleet_stop) {
        qitem *it = dequeue(q, 50);
        uint64_t now = rkv_fleet_now_ms();
        pthread_mutex_lock(&qo.state);
        if (it) {
            rkv_daemon_handle(d, (rkv_daemon_kind)it->kind, natsMsg_GetSubject(it->msg),
                          natsMsg_GetData(it->msg),
                          (size_t)natsMsg_GetDataLength(it->msg),
                          natsMsg_GetReply(it->msg), now);
            natsMsg_Destroy(it->msg);
            free(it);
        }
        if (now >= next_tick) {
            pthread_mutex_lock(&q->mu);
            d->queue_dropped = qo.dropped;
            pthread_mutex_unlock(&q->mu);
            rkv_daemon_tick(d, now);
            next_tick = now + 50;
        }
        if (now >= next_watch) {
            watch_stream(d, &w);
            next_watch = now + 1000;
        }
        pthread_mutex_unlock(&qo.state);
    }
    rc = 0;
out:
    if (http_started) {
        atomic_store(&qo.http_stop, 1);
        pthread_join(http_thread, NULL);
    }
    pthread_mutex_lock(&qo.state); /* an answer under way ends first */
    qo.closing = 1;
    pthread_mutex_unlock(&qo.state);
    rkv_nats_loop_stop(d->route_loop);
    d->route_loop = NULL;
    for (int i = 0; i < N_SUBS; i++)
        if (d->subs[i]) {
            natsSubscription_Unsubscribe(d->subs[i]);
            natsSubscription_Destroy(d->subs[i]);
        }
    for (qitem *it = q->head; it;) {
        qitem *nx = it->next;
        natsMsg_Destroy(it->msg);
        free(it);
        it = nx;
    }
    natsInbox_Destroy(inbox);
    jsCtx_Destroy(js);
    natsConnection_Destroy(d->nc);
    natsOptions_Destroy(no);
    rkv_http_close(d->http);
    rkv_daemon_destroy(d);
    rkv_nats_auth_free(&auth);
    nats_CloseAndWait(2000);
    return rc;
}

/*
 * fleet/kvev_zpub.c -- rkv_kvev_zpub (fleet/kvev_zpub.h): the PUB and
 * ROUTER sockets and the ring of kept batches. Slot i of the ring holds
 * seq first_kept + i; the ring owns each slot's encoded bytes. Every send
 * is non-blocking (ZMQ_DONTWAIT).
 */
#include "fleet/kvev_zpub.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "common/status.h"

typedef struct kept {
    uint8_t *buf;
    size_t len;
} kept;

struct rkv_kvev_zpub {
    void *ctx, *pub, *rep;
    char *topic;
    kept *ring;
    uint32_t keep, head, count;
    uint64_t next_seq;   /* seq of the next batch; the ring ends just below */
    rkv_kvev_zpub_stats st;
};

void rkv_kvev_zpub_config_init(rkv_kvev_zpub_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->topic = "";
    cfg->keep = 1024;
}

static rkv_status zerr(const char *what, const char *ep)
{
    return rkv_set_error(RKV_ERR_IO, "rkv_kvev_zpub_create: %s %s: %s", what,
                         ep ? ep : "", zmq_strerror(errno));
}

rkv_status rkv_kvev_zpub_create(const rkv_kvev_zpub_config *cfg, rkv_kvev_zpub **out)
{
    if (!cfg || !cfg->endpoint || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_zpub_create: NULL");
    if (cfg->keep == 0 || cfg->keep > (1u << 20) ||
        (cfg->topic && strlen(cfg->topic) > 255))
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_zpub_create: keep "
                             "1..2^20, topic at most 255 bytes");
    rkv_kvev_zpub *z = calloc(1, sizeof *z);
    if (!z)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_kvev_zpub_create: out of memory");
    z->keep = cfg->keep;
    z->topic = strdup(cfg->topic ? cfg->topic : "");
    z->ring = calloc(cfg->keep, sizeof *z->ring);
    if (!z->topic || !z->ring) {
        rkv_kvev_zpub_destroy(z);
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_kvev_zpub_create: out of memory");
    }
    rkv_status s = RKV_OK;
    int linger = 0;
    int64_t max_req = 64;
    if (!(z->ctx = zmq_ctx_new()) || !(z->pub = zmq_socket(z->ctx, ZMQ_PUB)))
        s = zerr("socket", NULL);
    else if (zmq_setsockopt(z->pub, ZMQ_LINGER, &linger, sizeof linger) ||
             zmq_bind(z->pub, cfg->endpoint))
        s = zerr("bind", cfg->endpoint);
    else if (cfg->replay_endpoint &&
             (!(z->rep = zmq_socket(z->ctx, ZMQ_ROUTER)) ||
              zmq_setsockopt(z->rep, ZMQ_LINGER, &linger, sizeof linger) ||
              zmq_setsockopt(z->rep, ZMQ_MAXMSGSIZE, &max_req, sizeof max_req) ||
              zmq_bind(z->rep, cfg->replay_endpoint)))
        s = zerr("bind", cfg->replay_endpoint);
    if (s != RKV_OK) {
        rkv_kvev_zpub_destroy(z);
        return s;
    }
    *out = z;
    return RKV_OK;
}

void rkv_kvev_zpub_destroy(rkv_kvev_zpub *z)
{
    if (!z)
        return;
    if (z->pub)
        zmq_close(z->pub);
    if (z->rep)
        zmq_close(z->rep);
    if (z->ctx)
        zmq_ctx_term(z->ctx);
    if (z->ring)
        for (uint32_t i = 0; i < z->keep; i++)
            free(z->ring[i].buf);
    free(z->ring);
    free(z->topic);
    free(z);
}

rkv_status rkv_kvev_zpub_endpoint(const rkv_kvev_zpub *z, int replay, char *buf,
                                  size_t cap)
{
    if (!z || !buf || cap == 0)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_zpub_endpoint: NULL");
    void *s = replay ? z->rep : z->pub;
    buf[0] = 0;
    if (!s)
        return RKV_OK;
    size_t len = cap;
    if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, buf, &len))
        return rkv_set_error(RKV_ERR_NO_SPACE, "rkv_kvev_zpub_endpoint: %s",
                             zmq_strerror(errno));
    return RKV_OK;
}

static void be8(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (56 - 8 * i));
}

rkv_status rkv_kvev_zpub_send(rkv_kvev_zpub *z, double ts, const rkv_event *ev,
                              uint32_t n, const rkv_kvev_tokens *tok)
{
    if (!z)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_zpub_send: NULL");
    size_t need = 0;
    rkv_status s = rkv_kvev_encode(ts, ev, n, tok, NULL, 0, &need);
    if (s != RKV_ERR_NO_SPACE && s != RKV_OK)
        return s;
    uint8_t *buf = malloc(need ? need : 1);
    if (!buf)
        return rkv_set_error(RKV_ERR_NOMEM, "rkv_kvev_zpub_send: out of memory");
    size_t len = 0;
    if ((s = rkv_kvev_encode(ts, ev, n, tok, buf, need, &len)) != RKV_OK) {
        free(buf);
        return s;
    }
    /* keep it: the oldest goes when the ring is full */
    kept *k;
    if (z->count == z->keep) {
        k = &z->ring[z->head];
        free(k->buf);
        z->head = (z->head + 1) % z->keep;
        z->count--;
    }
    k = &z->ring[(z->head + z->count) % z->keep];
    k->buf = buf;
    k->len = len;
    z->count++;
    uint64_t seq = z->next_seq++;
    uint8_t sb[8];
    be8(sb, seq);
    z->st.batches++;
    z->st.events += n;
    if (zmq_send(z->pub, z->topic, strlen(z->topic), ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(z->pub, sb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(z->pub, buf, len, ZMQ_DONTWAIT) < 0) {
        z->st.send_failures++;
        return rkv_set_error(RKV_ERR_IO, "rkv_kvev_zpub_send: %s", zmq_strerror(errno));
    }
    return RKV_OK;
}

/* One reply frame set [id, empty, seq, payload] to the requester. */
static int reply(rkv_kvev_zpub *z, zmq_msg_t *id, uint64_t seq, const void *p,
                 size_t len)
{
    uint8_t sb[8];
    be8(sb, seq);
    zmq_msg_t idc;
    zmq_msg_init(&idc);
    zmq_msg_copy(&idc, id);
    int ok = zmq_msg_send(&idc, z->rep, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
             zmq_send(z->rep, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
             zmq_send(z->rep, sb, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
             zmq_send(z->rep, p, len, ZMQ_DONTWAIT) >= 0;
    if (!ok)
        zmq_msg_close(&idc);
    return ok ? 0 : -1;
}

rkv_status rkv_kvev_zpub_poll(rkv_kvev_zpub *z)
{
    if (!z)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_zpub_poll: NULL");
    for (int served = 0; z->rep && served < 16; served++) {
        zmq_msg_t part[3];
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, z->rep, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m);
                for (int i = 0; i < n && i < 3; i++)
                    zmq_msg_close(&part[i]);
                return RKV_OK; /* nothing (more) waiting */
            }
            more = zmq_msg_more(&m);
            if (n < 3)
                part[n] = m;
            else
                zmq_msg_close(&m);
            n++;
        }
        if (n != 3 || zmq_msg_size(&part[1]) != 0 || zmq_msg_size(&part[2]) != 8) {
            z->st.bad_requests++;
        } else {
            const uint8_t *p = zmq_msg_data(&part[2]);
            uint64_t start = 0;
            for (int i = 0; i < 8; i++)
                start = start << 8 | p[i];
            uint64_t first = z->next_seq - z->count;
            int ok = 0;
            z->st.replays++;
            for (uint32_t i = 0; i < z->count; i++) {
                uint64_t seq = first + i;
                if (seq < start)
                    continue;
                const kept *k = &z->ring[(z->head + i) % z->keep];
                if ((ok = reply(z, &part[0], seq, k->buf, k->len)) != 0)
                    break;
                z->st.replayed_batches++;
            }
            if (ok == 0)
                reply(z, &part[0], UINT64_MAX, "", 0);
        }
        for (int i = 0; i < n && i < 3; i++)
            zmq_msg_close(&part[i]);
    }
    return RKV_OK;
}

void rkv_kvev_zpub_tap(void *zpub, uint64_t now_ms, const rkv_event *ev, uint32_t n,
                       const int32_t *tokens, size_t ntokens)
{
    rkv_kvev_zpub *z = zpub;
    /* the publisher's token ids are one run for the whole batch; the
     * encoder takes them per event. Ids that do not add up to the stored
     * pages (or no memory to split them) go out as no ids, never as wrong
     * ones. */
    rkv_kvev_tokens *tok = tokens && n ? calloc(n, sizeof *tok) : NULL;
    if (tok) {
        size_t at = 0;
        for (uint32_t i = 0; i < n && tok; i++) {
            if (ev[i].kind != RKV_EVENT_BLOCK_STORED)
                continue;
            uint64_t k = (uint64_t)ev[i].num_hashes * ev[i].page_size;
            if (k > ntokens - at) {
                free(tok);
                tok = NULL;
                break;
            }
            tok[i].ids = tokens + at;
            tok[i].n = (uint32_t)k;
            at += (size_t)k;
        }
    }
    /* a failed send is counted and its batch kept for replay */
    (void)rkv_kvev_zpub_send(z, (double)now_ms / 1000.0, ev, n, tok);
    free(tok);
    (void)rkv_kvev_zpub_poll(z);
}

rkv_status rkv_kvev_zpub_get_stats(const rkv_kvev_zpub *z, rkv_kvev_zpub_stats *out)
{
    if (!z || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG, "rkv_kvev_zpub_get_stats: NULL");
    *out = z->st;
    return RKV_OK;
}

/*
 * fleet/nats_loop.c -- rkv_nats_loop (fleet/nats_loop.h). The event-loop
 * callbacks (attach, detach, read and write interest) come from whichever
 * thread nats.c calls them on -- the connecting one, its reconnect thread,
 * its PING timer, this loop inside ProcessRead/WriteEvent -- so the socket
 * and the interest flags are kept under `mu`, never held across a nats.c
 * call. The loop wakes at least every 50 ms (a PING queued by the timer
 * while it sleeps waits at most that long), and checks the stop flag.
 *
 * Handled messages are destroyed RKV_NATS_LOOP_HOLD at a time (or when the
 * loop is idle for a poll's 50 ms, or stops): nats.c's natsMsg_Destroy
 * hands a message to its garbage-collector thread and signals that thread
 * when its list was empty, so with queries arriving one by one every
 * query cost a futex wake here, a wake-up, a switch and futex calls
 * there (strace: ~2.8 futex calls per query). Held, they cost one
 * signal per batch (released once HOLD / 2 are held, after the replies
 * are written); the memory held is at most HOLD small messages.
 */
#include "fleet/nats_loop.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define RKV_NATS_LOOP_HOLD 64

struct rkv_nats_loop {
    pthread_mutex_t mu;
    int fd;          /* -1: detached (connecting, reconnecting, closed) */
    int want_read, want_write;
    natsConnection *nc;
    natsSubscription *sub;
    rkv_nats_loop_fn fn;
    void *ctx;
    pthread_t thread;
    int started;
    atomic_int stop;
    natsMsg *held[RKV_NATS_LOOP_HOLD]; /* handled, not yet destroyed */
    int n_held;
};

static void release_held(rkv_nats_loop *l)
{
    for (int i = 0; i < l->n_held; i++)
        natsMsg_Destroy(l->held[i]);
    l->n_held = 0;
}

static natsStatus ev_attach(void **user, void *loop, natsConnection *nc, natsSock sock)
{
    (void)nc;
    rkv_nats_loop *l = loop;
    pthread_mutex_lock(&l->mu);
    l->fd = (int)sock;
    l->want_read = 1; /* as nats.c's own adapters: reading starts at once */
    l->want_write = 0;
    pthread_mutex_unlock(&l->mu);
    *user = l;
    return NATS_OK;
}

static natsStatus ev_read(void *user, bool add)
{
    rkv_nats_loop *l = user;
    pthread_mutex_lock(&l->mu);
    l->want_read = add;
    pthread_mutex_unlock(&l->mu);
    return NATS_OK;
}

static natsStatus ev_write(void *user, bool add)
{
    rkv_nats_loop *l = user;
    pthread_mutex_lock(&l->mu);
    l->want_write = add;
    pthread_mutex_unlock(&l->mu);
    return NATS_OK;
}

static natsStatus ev_detach(void *user)
{
    rkv_nats_loop *l = user;
    pthread_mutex_lock(&l->mu);
    l->fd = -1;
    l->want_read = l->want_write = 0;
    pthread_mutex_unlock(&l->mu);
    return NATS_OK;
}

static int wants_write(rkv_nats_loop *l)
{
    pthread_mutex_lock(&l->mu);
    int w = l->fd >= 0 && l->want_write;
    pthread_mutex_unlock(&l->mu);
    return w;
}

static void *run(void *arg)
{
    rkv_nats_loop *l = arg;
    while (!atomic_load(&l->stop)) {
        pthread_mutex_lock(&l->mu);
        struct pollfd p = {l->fd, (short)((l->want_read ? POLLIN : 0) |
                                          (l->want_write ? POLLOUT : 0)), 0};
        pthread_mutex_unlock(&l->mu);
        if (p.fd < 0) { /* between sockets: nats.c reconnects */
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        int pr = poll(&p, 1, 50);
        if (pr == 0)
            release_held(l); /* idle: nothing to batch with */
        if (pr <= 0)
            continue;
        if (p.revents & (POLLIN | POLLERR | POLLHUP))
            natsConnection_ProcessReadEvent(l->nc);
        /* every message that read brought, then their replies at once;
         * as many as are queued (asking past them costs a NATS_TIMEOUT,
         * which nats.c records on the thread's error stack, formatting
         * it: ~1 us a wake-up) */
        natsMsg *m = NULL;
        uint64_t queued = 0;
        if (natsSubscription_QueuedMsgs(l->sub, &queued) != NATS_OK)
            queued = 0;
        for (; queued > 0 && natsSubscription_NextMsg(&m, l->sub, 0) == NATS_OK; queued--) {
            l->fn(l->ctx, l->nc, m);
            if (l->n_held == RKV_NATS_LOOP_HOLD)
                release_held(l);
            l->held[l->n_held++] = m;
            m = NULL;
        }
        if (wants_write(l))
            natsConnection_ProcessWriteEvent(l->nc);
        /* after the replies went out: not in a query's way */
        if (l->n_held >= RKV_NATS_LOOP_HOLD / 2)
            release_held(l);
    }
    return NULL;
}

natsStatus rkv_nats_loop_start(natsOptions *opts, const char *subject, const char *queue,
                               rkv_nats_loop_fn fn, void *ctx, rkv_nats_loop **out)
{
    rkv_nats_loop *l = calloc(1, sizeof *l);
    if (!l)
        return NATS_NO_MEMORY;
    pthread_mutex_init(&l->mu, NULL);
    l->fd = -1;
    l->fn = fn;
    l->ctx = ctx;
    natsStatus s = natsOptions_SetEventLoop(opts, l, ev_attach, ev_read, ev_write, ev_detach);
    if (s == NATS_OK)
        s = natsOptions_SetSendAsap(opts, true);
    if (s == NATS_OK)
        s = natsConnection_Connect(&l->nc, opts);
    if (s == NATS_OK)
        s = queue ? natsConnection_QueueSubscribeSync(&l->sub, l->nc, subject, queue)
                  : natsConnection_SubscribeSync(&l->sub, l->nc, subject);
    if (s == NATS_OK) {
        s = pthread_create(&l->thread, NULL, run, l) == 0 ? NATS_OK : NATS_SYS_ERROR;
        l->started = s == NATS_OK;
    }
    /* the server has the subscription before this returns (the loop
     * writes the SUB and a PING, and reads the PONG): a query sent once
     * the caller says it is ready finds a responder */
    if (s == NATS_OK)
        s = natsConnection_FlushTimeout(l->nc, 5000);
    if (s != NATS_OK) {
        rkv_nats_loop_stop(l);
        return s;
    }
    *out = l;
    return NATS_OK;
}

void rkv_nats_loop_stop(rkv_nats_loop *l)
{
    if (!l)
        return;
    atomic_store(&l->stop, 1);
    if (l->started)
        pthread_join(l->thread, NULL);
    release_held(l);
    natsSubscription_Destroy(l->sub);
    natsConnection_Destroy(l->nc);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int64_t rkv_nats_loop_dropped(rkv_nats_loop *l)
{
    int64_t n = -1;
    if (!l || !l->sub || natsSubscription_GetDropped(l->sub, &n) != NATS_OK)
        return -1;
    return n;
}

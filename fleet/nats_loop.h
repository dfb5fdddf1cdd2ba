/*
 * fleet/nats_loop.h -- a NATS connection whose one subscription is served
 * on one thread of the caller's, with no hand-off between threads: the
 * thread sleeps in poll(2) on the connection's socket (nats.c's external
 * event loop, natsOptions_SetEventLoop), reads and parses what arrived
 * (natsConnection_ProcessReadEvent), hands each message of its synchronous
 * queue subscription to the caller's function, and writes every reply the
 * function published in one write (natsConnection_ProcessWriteEvent).
 *
 * Why: an asynchronous subscription crosses two threads per message (the
 * connection's reader parses it and wakes the subscription's delivery
 * thread, which runs the callback) and a reply sent at once is one write
 * per message: for the router's route queries that hand-off and write are
 * most of the daemon's CPU per query (bench/RESULTS.md). Under load one
 * wake serves every query one read brought, and their replies go together.
 *
 * The connection is the loop's own (a second one beside the daemon's main
 * connection), made from the caller's options (authentication and TLS
 * included); nats.c still reconnects it on its own threads, which only
 * move the socket this loop polls. Program-side code: it starts a thread.
 */
#ifndef RKV_FLEET_NATS_LOOP_H
#define RKV_FLEET_NATS_LOOP_H

#include <nats/nats.h>

/* Handles one message on the loop's thread (replies: natsConnection_Publish
 * on nc, written once the messages at hand are handled); the loop destroys
 * the message afterwards (some time later: fleet/nats_loop.c). */
typedef void (*rkv_nats_loop_fn)(void *ctx, natsConnection *nc, natsMsg *m);

typedef struct rkv_nats_loop rkv_nats_loop;

/* Connects with opts (which get the event loop and SendAsap set: pass a
 * copy the caller does not need as it was), subscribes to subject in
 * queue group queue (NULL: none) and starts the thread; returns once the
 * server confirmed the subscription (a flush, at most 5 s). */
natsStatus rkv_nats_loop_start(natsOptions *opts, const char *subject, const char *queue,
                               rkv_nats_loop_fn fn, void *ctx, rkv_nats_loop **out);
/* Stops the thread (within ~50 ms), then closes the subscription and the
 * connection. NULL is fine. */
void rkv_nats_loop_stop(rkv_nats_loop *l);
/* Messages the subscription dropped (the loop fell behind), -1 unknown. */
int64_t rkv_nats_loop_dropped(rkv_nats_loop *l);

#endif

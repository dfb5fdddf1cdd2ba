/*
 * fleet/router_daemon.h -- the fleet router daemon as a function, so that
 * the radixkv-router program (fleet/router_main.c) and the `radixkv router`
 * subcommand (cli/main.c) run one implementation with the same options.
 * Built only with libnats (RKV_HAVE_NATS in the command).
 */
#ifndef RKV_FLEET_ROUTER_DAEMON_H
#define RKV_FLEET_ROUTER_DAEMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "radixkv_router.h"

/* Runs the daemon with argv[1..argc) as its options (argv[0] is skipped,
 * as getopt does); prog names it in messages and usage ("radixkv-router",
 * "radixkv router"). Returns the exit status: 0 after SIGINT/SIGTERM or
 * --help, 1 for a runtime failure (no NATS server, the stream cannot be
 * created, the metrics port cannot be bound), 2 for a usage error. Installs
 * its SIGINT/SIGTERM/SIGPIPE handlers (fleet/daemon_util.h). */
int rkv_router_daemon_main(const char *prog, int argc, char **argv);

/* The daemon's state and message handling without a connection, so that
 * tests/fuzz/fuzz_router.c drives exactly what the main loop runs: each
 * message is its kind (which subject it came on), the subject itself (an
 * instance is believed only on its own subjects: kv.<id>, hb.<id> and the
 * router's inbox .<id>; README "Security"), its bytes, the reply subject
 * it carried (route and stats requests) and the time. Replies go
 * to the function given to rkv_daemon_set_reply; snapshot requests need a
 * connection and are not sent without one. log (NULL: quiet) gets what
 * the daemon logs. */
typedef struct rkv_daemon rkv_daemon;
typedef enum rkv_daemon_kind {
    RKV_DAEMON_KV,    /* radixkv.<model>.kv.<id>: an event batch      */
    RKV_DAEMON_HB,    /* radixkv.<model>.hb.<id>: a heartbeat         */
    RKV_DAEMON_ROUTE, /* radixkv.<model>.route: a route query         */
    RKV_DAEMON_STATS, /* radixkv.<model>.stats                        */
    RKV_DAEMON_SNAP   /* the router's inbox: a snapshot answer        */
} rkv_daemon_kind;
typedef void (*rkv_daemon_reply_fn)(void *ctx, const char *subject, const void *data,
                                size_t len);
/* Snapshot requests per instance: a burst, then one per interval (0: no
 * limit). The daemon's defaults: */
#define RKV_DAEMON_SNAP_BURST 4u
#define RKV_DAEMON_SNAP_INTERVAL_MS 1000u
/* rcfg: the router index's configuration (its memory budget); NULL for
 * the defaults. */
rkv_daemon *rkv_daemon_create(const char *prog, const char *model, uint64_t hb_timeout_ms,
                      uint64_t snap_timeout_ms, uint64_t now_ms, FILE *log,
                      const rkv_router_config *rcfg);
void rkv_daemon_set_reply(rkv_daemon *d, rkv_daemon_reply_fn fn, void *ctx);
void rkv_daemon_set_snapshot_limit(rkv_daemon *d, uint32_t burst, uint64_t interval_ms);
/* radixkv_router_route_cpu_seconds_total times 1 route call in `every`
 * (chosen at random; 0 or 1: all) and estimates the total from them
 * (fleet/cpu_sample.h): the thread CPU clock is a system call. Default: */
#define RKV_DAEMON_ROUTE_CPU_SAMPLE 16u
void rkv_daemon_set_route_cpu_sample(rkv_daemon *d, uint32_t every);
/* The inbox snapshot answers come to (as <inbox>.<instance id>); until it
 * is set no snapshot answer is believed. RKV_ERR_INVALID_ARG: too long. */
rkv_status rkv_daemon_set_inbox(rkv_daemon *d, const char *inbox);
void rkv_daemon_handle(rkv_daemon *d, rkv_daemon_kind kind, const char *subject, const void *data,
                   size_t len, const char *reply_to, uint64_t now_ms);
/* What the main loop does every 50 ms: rate samples, expiry, resyncs. */
void rkv_daemon_tick(rkv_daemon *d, uint64_t now_ms);
const rkv_router *rkv_daemon_router(const rkv_daemon *d);
/* The HTTP route API (POST /v1/route, README "Fleet"): answers the JSON
 * request body[0..len) ({"token_ids": [...], "namespace": N}) with the
 * JSON answer in buf[0..cap) (length returned as snprintf does) and its
 * HTTP status in *code: 200 with the chosen instance, its overlap (also
 * by medium), score and the candidates (those a NATS reply lists); 400
 * for a malformed request, 413 for too many token ids, 503 while the page
 * size is unknown or no instance can be routed to; errors are
 * {"error": ..., "status": N}. The route counts as one (the router counts
 * the request as routed to the chosen instance). */
size_t rkv_daemon_http_route(rkv_daemon *d, const char *body, size_t len, char *buf, size_t cap,
                         int *code);
/* The page size token ids are hashed with (0, or above RKV_MAX_PAGE_SIZE:
 * the first valid one seen in a STORED event, the default). */
void rkv_daemon_set_page_size(rkv_daemon *d, uint32_t page_size);
void rkv_daemon_destroy(rkv_daemon *d); /* NULL is fine */

#endif
